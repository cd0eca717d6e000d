//! `ragctx ingest PATH...`: read everything, validate everything, embed (with the cache),
//! then replace the documents in one transaction. Bad input fails before anything is written.

use crate::config::{Backend, Settings};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use ragctx_core::{EmbeddedChunk, Embedder};
use ragctx_engine::ingest::{
    self, check_unique_ids, chunk_document, parse_jsonl, text_tokens, DocumentFormat, SourcedChunk,
};
use ragctx_models::Cl100kCounter;
use ragctx_store::EmbeddingCache;
use std::collections::hash_map::{Entry, HashMap};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Texts embedded per cache commit.
const EMBED_STEP: usize = 128;

pub struct Read {
    pub chunks: Vec<SourcedChunk>,
    pub files: usize,
    pub skipped: Vec<PathBuf>,
}

/// Reads every path (files, or directories walked recursively) into chunks.
pub fn read_paths(paths: &[PathBuf]) -> Result<Read> {
    let mut read = Read { chunks: Vec::new(), files: 0, skipped: Vec::new() };
    for arg in paths {
        let meta = std::fs::metadata(arg).with_context(|| format!("cannot read {}", arg.display()))?;
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
                bail!("{}: unsupported file type (use .jsonl, .md, .txt or .html)", arg.display());
            }
        }
    }
    check_unique_ids(&read.chunks)?;
    Ok(read)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = entry?.path();
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
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {shown}"))?;
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

/// Embeds what the cache of `data_dir` lacks, with progress, caching as it goes. The data
/// dir is opened for each cache access only.
pub fn embed_all(embedder: &dyn Embedder, data_dir: &Path, texts: &[&str]) -> Result<(Vec<Vec<f32>>, usize)> {
    let model = embedder.model_id().to_owned();
    // The cache saves re-embedding; without it (a read-only or busy data dir, as a
    // production host running on Milvus may have) ingest still works, only slower.
    let (cached, mut caching) = match EmbeddingCache::get(data_dir, &model, texts) {
        Ok(c) => (c, true),
        Err(e) => {
            eprintln!("ragctx: embedding cache in {} unavailable ({e}); embedding without it", data_dir.display());
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
            if let Err(e) = EmbeddingCache::put(data_dir, &model, &items) {
                eprintln!("ragctx: could not write the embedding cache ({e}); going on without it");
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

/// The data dir is opened only to read and write the cache and, at the end, to upsert: a
/// long ingest does not lock out other processes while it embeds.
///
/// Each document is replaced whole (chunks it no longer has are removed); with `append`,
/// chunks are upserted by id and a document's other chunks stay.
pub fn run(settings: &Settings, paths: &[PathBuf], append: bool) -> Result<()> {
    let started = Instant::now();
    let read = read_paths(paths)?;
    if read.chunks.is_empty() {
        bail!(
            "no chunks found in {} (nothing was changed)",
            paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        );
    }
    let embedder = crate::app::embedder(settings)?;
    if let Backend::Embedded = settings.backend {
        // Before hours of embedding: a store of another model's vectors is refused now.
        let local = matches!(settings.embedder, crate::config::EmbedderSettings::Local { .. });
        ragctx_store::DataDir::bind_model_at(&settings.data_dir, embedder.model_id(), local)?;
    }
    let texts: Vec<&str> = read.chunks.iter().map(|c| c.chunk.text.as_str()).collect();
    let (vectors, embedded) = embed_all(embedder.as_ref(), &settings.data_dir, &texts)?;
    let counter = Cl100kCounter::new();
    let chunks: Vec<EmbeddedChunk> = read
        .chunks
        .into_iter()
        .zip(vectors)
        .map(|(s, vector)| {
            let mut chunk = s.chunk;
            chunk.tokens = text_tokens(&counter, &chunk.text);
            EmbeddedChunk { chunk, vector }
        })
        .collect();
    // Only the embedded backend lives in the data dir: with Milvus nothing local is locked.
    let data = match settings.backend {
        Backend::Embedded => {
            let data = crate::app::open_data(settings, Some(embedder.dimension()))?;
            crate::app::bind_model(settings, &data, embedder.as_ref())?;
            Some(data)
        }
        Backend::Milvus(_) => None,
    };
    let store = crate::app::vector_store(settings, data.as_ref(), embedder.dimension())?;
    let (r, docs) = ingest::store(store.as_ref(), &chunks, append)?;
    let total = store.len()?;
    println!(
        "ingested {} chunks of {} documents from {} files: {} new, {} updated, {} removed; embedded {}, {} from cache; store holds {} chunks ({:.1}s)",
        chunks.len(),
        docs,
        read.files,
        r.new,
        r.updated,
        r.removed,
        embedded,
        chunks.len() - embedded,
        total,
        started.elapsed().as_secs_f64()
    );
    if !read.skipped.is_empty() {
        println!("skipped {} files of other types", read.skipped.len());
    }
    Ok(())
}
