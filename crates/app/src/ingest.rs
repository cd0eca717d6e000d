//! Ingest: read everything, validate everything, embed (with the cache), then replace the
//! documents in one transaction. Bad input fails before anything is written. Used by
//! `ragctx ingest` and the Python package alike.

use crate::config::{Backend, Settings};
use indicatif::{ProgressBar, ProgressStyle};
use ragctx_core::{EmbeddedChunk, Embedder, Metadata, VectorStore};
use ragctx_core::{Error, Result};
use ragctx_engine::ingest::{self, check_unique_ids, chunk_document, parse_jsonl, DocumentFormat, SourcedChunk};
use ragctx_models::Cl100kCounter;
use ragctx_store::{DataDir, EmbeddingCache};
use std::collections::hash_map::{Entry, HashMap};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Texts embedded per cache commit.
const EMBED_STEP: usize = 128;

/// What [`read_paths`] found: the chunks, and the files read and left out.
pub struct Read {
    /// Every chunk read, in file order, ids checked unique.
    pub chunks: Vec<SourcedChunk>,
    /// Files read (0 for records).
    pub files: usize,
    /// Files of other types found in folders and left out.
    pub skipped: Vec<PathBuf>,
}

/// Reads every path (files, or directories walked recursively) into chunks.
pub fn read_paths(paths: &[PathBuf]) -> Result<Read> {
    let mut read = Read { chunks: Vec::new(), files: 0, skipped: Vec::new() };
    for arg in paths {
        let meta =
            std::fs::metadata(arg).map_err(|e| Error::InvalidInput(format!("cannot read {}: {e}", arg.display())))?;
        if meta.is_dir() {
            let mut files = Vec::new();
            walk(arg, &mut files)?;
            files.sort();
            for f in files {
                let rel = f.strip_prefix(arg).unwrap_or(&f).to_string_lossy().replace('\\', "/");
                if !read_file(&f, &rel, &mut read)? {
                    read.skipped.push(f);
                }
            }
        } else {
            let name = arg.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if !read_file(arg, &name, &mut read)? {
                return Err(Error::InvalidInput(format!(
                    "{}: unsupported file type (use .jsonl, .md, .txt or .html)",
                    arg.display()
                )));
            }
        }
    }
    check_unique_ids(&read.chunks)?;
    Ok(read)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let cannot_list = |e: std::io::Error| Error::InvalidInput(format!("cannot list {}: {e}", dir.display()));
    for entry in std::fs::read_dir(dir).map_err(cannot_list)? {
        let path = entry.map_err(cannot_list)?.path();
        let hidden = path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if hidden {
            continue;
        }
        if path.is_dir() {
            walk(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

/// False when the file type is not one ragctx reads.
fn read_file(path: &Path, document_id: &str, read: &mut Read) -> Result<bool> {
    let shown = path.display().to_string();
    let is_jsonl = shown.ends_with(".jsonl");
    let format = DocumentFormat::from_path(&shown);
    if !is_jsonl && format.is_none() {
        return Ok(false);
    }
    let bytes = std::fs::read(path).map_err(|e| Error::InvalidInput(format!("cannot read {shown}: {e}")))?;
    let chunks = match format {
        Some(f) => chunk_document(document_id, &bytes, f).map_err(|mut e| {
            e.file = shown.clone();
            e
        })?,
        None => parse_jsonl(&shown, &bytes)?,
    };
    read.files += 1;
    read.chunks.extend(chunks);
    Ok(true)
}

/// Where the embedding cache is: in a data dir this process holds open, or in one opened
/// for each access only (a long ingest does not lock out other processes while it embeds).
#[derive(Clone, Copy)]
pub enum Cache<'a> {
    /// The cache in a data dir this process holds open (an opened [`App`](crate::App)).
    Open(&'a DataDir),
    /// The cache in the data dir at this path, opened for each read and write only.
    At(&'a Path),
}

impl Cache<'_> {
    fn get(&self, model: &str, texts: &[&str]) -> Result<Vec<Option<Vec<f32>>>> {
        match self {
            Cache::Open(d) => d.cached_embeddings(model, texts),
            Cache::At(p) => EmbeddingCache::get(p, model, texts),
        }
    }
    fn put(&self, model: &str, items: &[(&str, &[f32])]) -> Result<()> {
        match self {
            Cache::Open(d) => d.cache_embeddings(model, items),
            Cache::At(p) => EmbeddingCache::put(p, model, items),
        }
    }
    fn path(&self) -> &Path {
        match self {
            Cache::Open(d) => d.path(),
            Cache::At(p) => p,
        }
    }
}

/// Embeds what the cache lacks, with progress, caching as it goes.
pub fn embed_all(embedder: &dyn Embedder, cache: Cache<'_>, texts: &[&str]) -> Result<(Vec<Vec<f32>>, usize)> {
    let model = embedder.model_id().to_owned();
    // The cache saves re-embedding; without it (a read-only or busy data dir, as a
    // production host running on Milvus may have) ingest still works, only slower.
    let (cached, mut caching) = match cache.get(&model, texts) {
        Ok(c) => (c, true),
        Err(e) => {
            eprintln!(
                "ragctx: embedding cache in {} unavailable ({}); embedding without it",
                cache.path().display(),
                e.report()
            );
            (vec![None; texts.len()], false)
        }
    };
    // A text that occurs more than once (MTRAG's cloud corpus has 1,743 passages whose text
    // is another id's) is embedded once.
    let mut first: HashMap<&str, usize> = HashMap::new();
    let mut copies: Vec<(usize, usize)> = Vec::new();
    let mut missing: Vec<usize> = Vec::new();
    for i in (0..texts.len()).filter(|&i| cached[i].is_none()) {
        match first.entry(texts[i]) {
            Entry::Occupied(e) => copies.push((i, *e.get())),
            Entry::Vacant(e) => {
                e.insert(i);
                missing.push(i);
            }
        }
    }
    let mut out: Vec<Option<Vec<f32>>> = cached;
    let terminal = std::io::stderr().is_terminal();
    let bar = if terminal && !missing.is_empty() {
        let b = ProgressBar::new(missing.len() as u64);
        b.set_style(
            ProgressStyle::with_template("embedding {bar:30} {pos}/{len} chunks  {per_sec}  eta {eta}")
                .expect("valid template"),
        );
        Some(b)
    } else {
        None
    };
    let started = Instant::now();
    let (mut last_report, mut done) = (0, 0);
    // Longest first: the first progress lines overestimate the time left, never underestimate.
    let mut order = missing.clone();
    order.sort_by_key(|&i| std::cmp::Reverse(texts[i].len()));
    for step in order.chunks(EMBED_STEP) {
        let batch: Vec<&str> = step.iter().map(|&i| texts[i]).collect();
        let vectors = embedder.embed(&batch)?;
        let items: Vec<(&str, &[f32])> = batch.iter().copied().zip(vectors.iter().map(Vec::as_slice)).collect();
        if caching {
            if let Err(e) = cache.put(&model, &items) {
                eprintln!("ragctx: could not write the embedding cache ({}); going on without it", e.report());
                caching = false;
            }
        }
        for (&i, v) in step.iter().zip(vectors) {
            out[i] = Some(v);
        }
        done += step.len();
        match &bar {
            Some(b) => b.set_position(done as u64),
            None if done - last_report >= (missing.len() / 10).max(EMBED_STEP) || done == missing.len() => {
                last_report = done;
                let secs = started.elapsed().as_secs_f64();
                let rate = done as f64 / secs.max(1e-9);
                eprintln!(
                    "embedded {done}/{} chunks ({secs:.0}s, {rate:.1}/s, about {:.0}s left)",
                    missing.len(),
                    (missing.len() - done) as f64 / rate
                );
            }
            None => {}
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    for (copy, of) in copies {
        out[copy] = out[of].clone();
    }
    Ok((out.into_iter().map(|v| v.expect("every text embedded")).collect(), missing.len()))
}

/// What an ingest did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct IngestReport {
    /// Chunks read from the input.
    pub chunks: usize,
    /// Documents those chunks belong to.
    pub documents: usize,
    /// Files read (0 for records).
    pub files: usize,
    /// Chunk ids the store did not hold before.
    pub new: usize,
    /// Chunks written again under an id the store already held.
    pub updated: usize,
    /// Chunks of the replaced documents that are no longer in them (0 with `append`).
    pub removed: usize,
    /// Texts embedded now (each distinct text once; see `cached` for the others).
    pub embedded: usize,
    /// Chunks not embedded now: their vector came from the cache, or from another chunk of the
    /// input with the same text.
    pub cached: usize,
    /// Chunks the store holds afterwards.
    pub stored: usize,
    /// Files of other types found in folders and left out.
    pub skipped: Vec<PathBuf>,
    /// Chunks the lexical (BM25) index covers, built with the ingest; `None` for a backend
    /// without one.
    pub lexical: Option<usize>,
    /// Wall time of the whole ingest, in seconds.
    pub seconds: f64,
}

impl std::fmt::Display for IngestReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ingested {} chunks of {} documents from {} files: {} new, {} updated, {} removed; embedded {}, {} from cache; store holds {} chunks ({:.1}s)",
            self.chunks,
            self.documents,
            self.files,
            self.new,
            self.updated,
            self.removed,
            self.embedded,
            self.cached,
            self.stored,
            self.seconds
        )?;
        if let Some(n) = self.lexical {
            write!(f, "\nlexical index: {n} chunks")?;
        }
        if !self.skipped.is_empty() {
            write!(f, "\nskipped {} files of other types", self.skipped.len())?;
        }
        Ok(())
    }
}

/// Ingests files or folders (`.jsonl`, `.md`, `.txt`, `.html`, folders walked).
///
/// The data dir is opened only to read and write the cache and, at the end, to upsert: a
/// long ingest does not lock out other processes while it embeds.
///
/// Each document is replaced whole (chunks it no longer has are removed); with `append`,
/// chunks are upserted by id and a document's other chunks stay.
pub fn ingest(settings: &Settings, paths: &[PathBuf], append: bool) -> Result<IngestReport> {
    ingest_with_metadata(settings, paths, append, &Metadata::default())
}

/// [`ingest`](fn@ingest), with `metadata` set on every chunk read (`ingest --meta`): a JSONL
/// line's own keys win over it.
pub fn ingest_with_metadata(
    settings: &Settings,
    paths: &[PathBuf],
    append: bool,
    metadata: &Metadata,
) -> Result<IngestReport> {
    let started = Instant::now();
    store_chunks(settings, with_metadata(read_some(paths)?, metadata)?, append, started)
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
fn read_some(paths: &[PathBuf]) -> Result<Read> {
    let read = read_paths(paths)?;
    if read.chunks.is_empty() {
        return Err(Error::InvalidInput(format!(
            "no chunks found in {} (nothing was changed)",
            paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(read)
}

/// Records as JSONL lines, validated as `ingest` validates a file; none at all is refused.
fn read_records(source: &str, jsonl: &[u8]) -> Result<Read> {
    let chunks = parse_jsonl(source, jsonl)?;
    check_unique_ids(&chunks)?;
    if chunks.is_empty() {
        return Err(Error::InvalidInput(format!("no records in {source} (nothing was changed)")));
    }
    Ok(Read { chunks, files: 0, skipped: Vec::new() })
}

/// Ingests records as `ingest` reads JSONL lines (`_id`, `document_id`, `title`, `text`, and
/// optional `weight`), validated the same way; `source` names them in error messages.
pub fn ingest_records(settings: &Settings, source: &str, jsonl: &[u8], append: bool) -> Result<IngestReport> {
    let started = Instant::now();
    store_chunks(settings, read_records(source, jsonl)?, append, started)
}

fn store_chunks(settings: &Settings, read: Read, append: bool, started: Instant) -> Result<IngestReport> {
    let embedder = crate::app::embedder(settings)?;
    if let Backend::Embedded = settings.backend {
        // Before hours of embedding: a store of another model's vectors is refused now.
        DataDir::bind_model_at(&settings.data_dir, embedder.model_id(), settings.embedder.is_unrecorded_default())?;
    }
    let embedded = embed_chunks(embedder.as_ref(), Cache::At(&settings.data_dir), read.chunks)?;
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
    let store = ragctx_core::ScopedVectorStore::new(store, settings.tenant().clone());
    report(&store, embedded, (read.files, read.skipped), append, started)
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
        self.store_read(with_metadata(read_some(paths)?, metadata)?, append, started)
    }

    /// Ingests records as [`ingest_records`] does, with this app's embedder and stores.
    pub fn ingest_records(&self, source: &str, jsonl: &[u8], append: bool) -> Result<IngestReport> {
        let started = Instant::now();
        self.store_read(read_records(source, jsonl)?, append, started)
    }

    fn store_read(&self, read: Read, append: bool, started: Instant) -> Result<IngestReport> {
        let embedder = self.embedder.as_ref();
        if let (Backend::Embedded, Some(data)) = (&self.settings.backend, &self.data) {
            crate::app::bind_model(&self.settings, data, embedder)?;
        }
        let cache = match &self.data {
            Some(d) => Cache::Open(d),
            None => Cache::At(&self.settings.data_dir),
        };
        let embedded = embed_chunks(embedder, cache, read.chunks)?;
        report(self.engine.vectors.as_ref(), embedded, (read.files, read.skipped), append, started)
    }
}

/// The chunks with their vectors and token counts; and how many texts were embedded now.
fn embed_chunks(
    embedder: &dyn Embedder,
    cache: Cache<'_>,
    chunks: Vec<SourcedChunk>,
) -> Result<(Vec<EmbeddedChunk>, usize)> {
    let texts: Vec<&str> = chunks.iter().map(|c| c.chunk.text.as_str()).collect();
    let (vectors, embedded) = embed_all(embedder, cache, &texts)?;
    Ok((ingest::with_vectors(chunks, vectors, &Cl100kCounter::new()), embedded))
}

/// Writes the chunks (one transaction) and says what changed.
fn report(
    store: &dyn VectorStore,
    (chunks, embedded): (Vec<EmbeddedChunk>, usize),
    (files, skipped): (usize, Vec<PathBuf>),
    append: bool,
    started: Instant,
) -> Result<IngestReport> {
    let (r, documents) = ingest::store(store, &chunks, append)?;
    // Built now, beside the vectors, so the first lexical turn does not wait for it. The
    // chunks are committed: a failure here only leaves the build to that first search.
    let lexical = match store.prepare_lexical() {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(error = %e.report(), "the lexical index was not built with the ingest; the first lexical search builds it");
            None
        }
    };
    Ok(IngestReport {
        chunks: chunks.len(),
        documents,
        files,
        new: r.new,
        updated: r.updated,
        removed: r.removed,
        embedded,
        cached: chunks.len() - embedded,
        stored: store.len()?,
        skipped,
        lexical,
        seconds: started.elapsed().as_secs_f64(),
    })
}
