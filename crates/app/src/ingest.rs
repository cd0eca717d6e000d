//! Ingest from files and records: read everything, validate everything, then the engine's
//! one ingest path ([`embed_chunks`] with the cache, then [`store_embedded`]: replace the documents in one
//! transaction). Bad input fails before anything is written. Used by `ragctx ingest` and the
//! Python package alike; `ragctx serve` and the evaluations use the same path.

use crate::config::{Backend, ReadOptions, Settings};
use crate::reader::Reader;
use ragctx_core::EmbeddingCache;
use ragctx_core::Metadata;
use ragctx_core::{Error, Result};
pub use ragctx_engine::ingest::IngestProgress;
pub use ragctx_engine::ingest::IngestReport;
use ragctx_engine::ingest::{embed_chunks, store_embedded, FormatTally};
use ragctx_engine::ScopedEmbeddingCache;
use ragctx_ingest::{check_unique_ids, parse_jsonl, DocumentFormat, SourcedChunk};
use ragctx_models::Cl100kCounter;
use ragctx_store::{DataDir, DataDirCache};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// What [`read_paths`] found: the chunks, and the files read and left out.
#[derive(Default)]
pub struct Read {
    /// Every chunk read, in file order, ids checked unique.
    pub chunks: Vec<SourcedChunk>,
    /// Files read (0 for records).
    pub files: usize,
    /// Files of other types found in folders and left out.
    pub skipped: Vec<PathBuf>,
    /// Files read and chunks given, by format.
    pub formats: BTreeMap<String, FormatTally>,
    /// Documents found in folders that could not be read, and why: left out, the rest read.
    pub unreadable: Vec<(PathBuf, String)>,
    /// Documents read with a part left out (a PDF's pages without text), and what and why.
    pub partly_read: Vec<(PathBuf, String)>,
    /// Entries of folders not followed or not read as files (symbolic links, pipes,
    /// devices), and why.
    pub not_followed: Vec<(PathBuf, String)>,
}

/// Reads every path (files, or directories walked recursively) into chunks.
pub fn read_paths(paths: &[PathBuf], options: &ReadOptions) -> Result<Read> {
    let mut read = Read::default();
    let mut reader = Reader::new(options.limits.clone());
    for arg in paths {
        let meta =
            std::fs::metadata(arg).map_err(|e| Error::InvalidInput(format!("cannot read {}: {e}", arg.display())))?;
        if meta.is_dir() {
            let mut walk = Walk::new(arg, options.follow_links)?;
            walk.all(arg)?;
            read.not_followed.append(&mut walk.not_followed);
            let mut files = walk.files;
            files.sort();
            for f in files {
                let rel = f.strip_prefix(arg).unwrap_or(&f).to_string_lossy().replace('\\', "/");
                match read_file(&mut reader, &f, &rel, &mut read) {
                    Ok(true) => {}
                    Ok(false) => read.skipped.push(f),
                    // A document of a folder that cannot be read (a broken or encrypted DOCX,
                    // text that is not UTF-8, a file past a limit) is left out by name and the
                    // rest is read; a JSONL file's bad line stops the ingest (its data is meant
                    // whole), as does any file named on its own.
                    Err(e) if DocumentFormat::from_path(&f.to_string_lossy()).is_some() => {
                        let why = match e {
                            Error::InvalidInput(why) => why,
                            e => e.to_string(),
                        };
                        read.unreadable.push((f, why));
                    }
                    Err(e) => return Err(e),
                }
            }
        } else {
            let name = arg.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if !meta.is_file() {
                return Err(Error::InvalidInput(format!("{}: not a regular file", arg.display())));
            }
            if !read_file(&mut reader, arg, &name, &mut read)? {
                return Err(Error::InvalidInput(format!(
                    "{}: unsupported file type (use .jsonl, .md, .txt, .html, .docx or .pdf)",
                    arg.display()
                )));
            }
        }
    }
    check_unique_ids(&read.chunks)?;
    Ok(read)
}

/// A folder's files, found without leaving it: a symbolic link is not followed unless asked,
/// and then only where it stays inside the folder and leads to a file or folder not yet
/// found (a loop is walked once); pipes, sockets and devices are never read. The folder's
/// own entries are all found before any link is followed, so a file is named by its own path
/// rather than a link's.
struct Walk {
    /// The folder given, as the file system resolves it.
    root: PathBuf,
    follow_links: bool,
    /// Folders and files found, resolved: each walked or read once.
    seen: HashSet<PathBuf>,
    files: Vec<PathBuf>,
    /// Links found, to follow once the folders' own entries are all found.
    links: Vec<PathBuf>,
    not_followed: Vec<(PathBuf, String)>,
}

impl Walk {
    fn new(root: &Path, follow_links: bool) -> Result<Walk> {
        let root =
            root.canonicalize().map_err(|e| Error::InvalidInput(format!("cannot read {}: {e}", root.display())))?;
        Ok(Walk {
            seen: HashSet::from([root.clone()]),
            root,
            follow_links,
            files: Vec::new(),
            links: Vec::new(),
            not_followed: Vec::new(),
        })
    }

    /// Finds everything under `top`: its own entries, then what its links lead to.
    fn all(&mut self, top: &Path) -> Result<()> {
        self.dir(top)?;
        while !self.links.is_empty() {
            for link in std::mem::take(&mut self.links) {
                self.link(link)?;
            }
        }
        Ok(())
    }

    fn dir(&mut self, dir: &Path) -> Result<()> {
        let cannot_list = |e: std::io::Error| Error::InvalidInput(format!("cannot list {}: {e}", dir.display()));
        let mut entries: Vec<_> =
            std::fs::read_dir(dir).map_err(cannot_list)?.collect::<std::io::Result<_>>().map_err(cannot_list)?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            if path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')) {
                continue;
            }
            // The entry itself, not what a link leads to.
            let kind = entry.file_type().map_err(cannot_list)?;
            if kind.is_symlink() {
                self.links.push(path);
            } else if kind.is_dir() {
                if self.first_time(&path) {
                    self.dir(&path)?;
                }
            } else if kind.is_file() {
                if self.first_time(&path) {
                    self.files.push(path);
                }
            } else {
                self.not_followed.push((path, "not a regular file (a pipe, socket or device): not read".into()));
            }
        }
        Ok(())
    }
    /// Whether an entry reached by its own path is met for the first time: only a followed
    /// link can lead to one again, so without them nothing is resolved.
    fn first_time(&mut self, path: &Path) -> bool {
        !self.follow_links || self.seen.insert(path.canonicalize().unwrap_or_else(|_| path.to_path_buf()))
    }

    fn link(&mut self, path: PathBuf) -> Result<()> {
        if !self.follow_links {
            let why = "a symbolic link: not followed (ingest --follow-links follows those that stay inside the folder)";
            self.not_followed.push((path, why.into()));
            return Ok(());
        }
        let Ok(target) = path.canonicalize() else {
            self.not_followed.push((path, "a symbolic link that leads nowhere".into()));
            return Ok(());
        };
        if !target.starts_with(&self.root) {
            self.not_followed.push((path, "a symbolic link out of the folder: not followed".into()));
        } else if !self.seen.insert(target.clone()) {
            self.not_followed.push((path, "a symbolic link to what is read already: not read twice".into()));
        } else if target.is_dir() {
            self.dir(&path)?;
        } else if target.is_file() {
            self.files.push(path);
        } else {
            self.not_followed.push((path, "not a regular file (a pipe, socket or device): not read".into()));
        }
        Ok(())
    }
}

/// False when the file type is not one ragctx reads.
fn read_file(reader: &mut Reader, path: &Path, document_id: &str, read: &mut Read) -> Result<bool> {
    let shown = path.display().to_string();
    let is_jsonl = shown.ends_with(".jsonl");
    let format = DocumentFormat::from_path(&shown);
    if !is_jsonl && format.is_none() {
        return Ok(false);
    }
    let (chunks, pages) = match format {
        Some(f) => {
            let document = reader.read(path, document_id, f, &shown)?;
            for what in document.left_out {
                read.partly_read.push((path.to_path_buf(), format!("{shown}: {what}")));
            }
            (document.chunks, document.pages)
        }
        None => {
            let bytes = std::fs::read(path).map_err(|e| Error::InvalidInput(format!("cannot read {shown}: {e}")))?;
            (parse_jsonl(&shown, &bytes)?, None)
        }
    };
    read.files += 1;
    let tally = read.formats.entry(format.map_or("jsonl", DocumentFormat::name).to_owned()).or_default();
    tally.files += 1;
    tally.chunks += chunks.len();
    tally.pages += pages.unwrap_or(0) as usize;
    read.chunks.extend(chunks);
    Ok(true)
}

/// Ingests files or folders (`.jsonl`, `.md`, `.txt`, `.html`, `.docx`, `.pdf`, folders walked).
///
/// The data dir is opened only to read and write the cache and, at the end, to upsert: a
/// long ingest does not lock out other processes while it embeds.
///
/// Each document is replaced whole (chunks it no longer has are removed); with `append`,
/// chunks are upserted by id and a document's other chunks stay.
pub fn ingest(
    settings: &Settings,
    paths: &[PathBuf],
    append: bool,
    progress: &dyn IngestProgress,
) -> Result<IngestReport> {
    ingest_with_metadata(settings, paths, append, &Metadata::default(), progress)
}

/// [`ingest`](fn@ingest), with `metadata` set on every chunk read (`ingest --meta`): a JSONL
/// line's own keys win over it.
pub fn ingest_with_metadata(
    settings: &Settings,
    paths: &[PathBuf],
    append: bool,
    metadata: &Metadata,
    progress: &dyn IngestProgress,
) -> Result<IngestReport> {
    let started = Instant::now();
    store_chunks(settings, with_metadata(read_some(paths, settings.reading())?, metadata)?, append, started, progress)
}

/// Sets `metadata` under each chunk's own.
fn with_metadata(mut read: Read, metadata: &Metadata) -> Result<Read> {
    if !metadata.is_empty() {
        for c in &mut read.chunks {
            c.chunk.metadata = metadata.merged(&c.chunk.metadata)?;
        }
    }
    Ok(read)
}

/// [`read_paths`], refusing paths that hold no chunks at all.
fn read_some(paths: &[PathBuf], options: &ReadOptions) -> Result<Read> {
    let read = read_paths(paths, options)?;
    if read.chunks.is_empty() {
        let unreadable: String = read.unreadable.iter().map(|(_, why)| format!("; {why}")).collect();
        return Err(Error::InvalidInput(format!(
            "no chunks found in {} (nothing was changed){unreadable}",
            paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(read)
}

/// Records as `POST /v1/documents` reads them ([`ragctx_ingest::read_records`]: a JSON array
/// or JSONL lines, validated as `ingest` validates a file; none at all is refused).
fn read_records(source: &str, records: &[u8]) -> Result<Read> {
    Ok(Read { chunks: ragctx_ingest::read_records(source, records)?, ..Read::default() })
}

/// Ingests records as `ingest` reads JSONL lines (`_id`, `document_id`, `title`, `text`, and
/// optional `weight`), validated the same way; `source` names them in error messages.
pub fn ingest_records(
    settings: &Settings,
    source: &str,
    jsonl: &[u8],
    append: bool,
    progress: &dyn IngestProgress,
) -> Result<IngestReport> {
    let started = Instant::now();
    store_chunks(settings, read_records(source, jsonl)?, append, started, progress)
}

fn store_chunks(
    settings: &Settings,
    mut read: Read,
    append: bool,
    started: Instant,
    progress: &dyn IngestProgress,
) -> Result<IngestReport> {
    let embedder = crate::app::embedder(settings)?;
    if let Backend::Embedded = settings.backend {
        // Before hours of embedding: a store of another model's vectors is refused now.
        DataDir::bind_model_at(&settings.data_dir, embedder.model_id(), settings.embedder.is_unrecorded_default())?;
    }
    // Embedded first, the data dir opened for each cache access only: a long ingest does not
    // lock out other processes while it embeds.
    // The tenant's own entries of the cache (the default tenant's are the bare model's).
    let cache =
        ScopedEmbeddingCache::new(Arc::new(DataDirCache::At(settings.data_dir.clone())), settings.tenant().clone());
    let embedded = embed_chunks(
        embedder.as_ref(),
        &Cl100kCounter::new(),
        Some(&cache),
        progress,
        std::mem::take(&mut read.chunks),
        settings.sentence_index(),
    )?;
    // Only the embedded backend lives in the data dir: with Milvus nothing local is locked.
    let data = match settings.backend {
        Backend::Embedded => {
            let data = crate::app::open_data(settings, Some(embedder.dimension()))?;
            // Checked again now that the data dir is held: another process may have filled
            // it with another model's vectors while this one embedded.
            crate::app::bind_model(settings, &data, embedder.as_ref())?;
            Some(data)
        }
        Backend::Milvus(_) => None,
    };
    let store = crate::app::vector_store(settings, data.as_ref(), embedder.dimension(), Some(embedder.model_id()))?;
    let store = ragctx_engine::ScopedVectorStore::new(store, settings.tenant().clone());
    Ok(finish(store_embedded(&store, embedded, append)?, read, started))
}

/// The report of the whole ingest: the files read, the time since reading began.
fn finish(mut report: IngestReport, read: Read, started: Instant) -> IngestReport {
    report.files = read.files;
    report.skipped = read.skipped;
    report.formats = read.formats;
    report.unreadable = read.unreadable;
    report.partly_read = read.partly_read;
    report.not_followed = read.not_followed;
    report.seconds = started.elapsed().as_secs_f64();
    report
}

impl crate::App {
    /// Ingests files or folders as [`ingest`](fn@ingest) does, with this app's embedder and stores (the
    /// data dir it holds open is used as it is: a process cannot open it twice).
    pub fn ingest(&self, paths: &[PathBuf], append: bool) -> Result<IngestReport> {
        self.ingest_with_metadata(paths, append, &Metadata::default())
    }

    /// [`App::ingest`](crate::App::ingest) with `metadata` on every chunk, as [`ingest_with_metadata`] does.
    pub fn ingest_with_metadata(&self, paths: &[PathBuf], append: bool, metadata: &Metadata) -> Result<IngestReport> {
        let started = Instant::now();
        self.store_read(with_metadata(read_some(paths, self.settings.reading())?, metadata)?, append, started)
    }

    /// Ingests records as [`ingest_records`] does, with this app's embedder and stores.
    pub fn ingest_records(&self, source: &str, jsonl: &[u8], append: bool) -> Result<IngestReport> {
        let started = Instant::now();
        self.store_read(read_records(source, jsonl)?, append, started)
    }

    /// The data dir's embedding cache, unscoped (every tenant's entries; an ingest reads it
    /// through its tenant, [`ScopedEmbeddingCache`]): through the data dir this app holds
    /// open, or opened for each access (a Milvus backend with Redis sessions holds none).
    pub fn embedding_cache(&self) -> Arc<dyn EmbeddingCache> {
        match &self.data {
            Some(d) => Arc::new(d.clone()),
            None => Arc::new(DataDirCache::At(self.settings.data_dir.clone())),
        }
    }

    fn store_read(&self, mut read: Read, append: bool, started: Instant) -> Result<IngestReport> {
        if let (Backend::Embedded, Some(data)) = (&self.settings.backend, &self.data) {
            crate::app::bind_model(&self.settings, data, self.embedder.as_ref())?;
        }
        let cache = ScopedEmbeddingCache::new(self.embedding_cache(), self.settings.tenant().clone());
        let chunks = std::mem::take(&mut read.chunks);
        // A library's ingest (Python's, an embedding app's) draws nothing on the caller's
        // terminal: its progress goes to the log, as the server's does.
        let report = self.engine.ingest(chunks, append, Some(&cache), &ragctx_engine::ingest::Logged)?;
        Ok(finish(report, read, started))
    }
}
