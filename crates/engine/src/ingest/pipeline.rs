//! The one ingest path, for `ragctx ingest`, `POST /v1/documents`, Python and the
//! evaluations alike: embed what the cache lacks (each distinct text once), count tokens,
//! store — each document replaced whole, or upserted with `append` —, build the lexical
//! index, and say what changed.

use super::{store as store_chunks, with_vectors};
use ragctx_core::{
    EmbeddedChunk, Embedder, EmbeddingCache, QuantizedVector, Result, Sentences, TokenCounter, VectorStore,
};
use ragctx_ingest::SourcedChunk;
use std::collections::hash_map::{Entry, HashMap};
use std::path::PathBuf;
use std::time::Instant;

/// Texts embedded per step (and per cache write).
pub const EMBED_STEP: usize = 128;

/// What a long ingest says as it goes: a progress bar on a terminal, lines otherwise, the log
/// on a server.
pub trait IngestProgress {
    /// `done` of the `total` texts to embed now are embedded (`done = 0` at the start).
    fn embedded(&self, _done: usize, _total: usize) {}
    /// Embedding is over.
    fn finished(&self) {}
    /// Something that does not stop the ingest (the cache could not be read or written).
    fn warn(&self, message: &str);
}

/// Progress for a server or a library (nobody's terminal): warnings go to the log, the
/// embedding's progress too, at debug.
pub struct Logged;

impl IngestProgress for Logged {
    fn embedded(&self, done: usize, total: usize) {
        tracing::debug!(done, total, "ingest: embedded");
    }
    fn warn(&self, message: &str) {
        tracing::warn!("{message}");
    }
}

/// Vectors of `texts`, in order: from the cache where it has them, the rest embedded (each
/// distinct text once, longest first, [`EMBED_STEP`] at a time) and cached as they come.
/// Returns them with the number of texts embedded now. Without a working cache (a read-only
/// or busy data dir) it embeds everything, only slower.
pub fn embed_with_cache(
    embedder: &dyn Embedder,
    cache: Option<&dyn EmbeddingCache>,
    texts: &[&str],
    progress: &dyn IngestProgress,
) -> Result<(Vec<Vec<f32>>, usize)> {
    let (out, now) = embed_cached(embedder, cache, texts, None, progress)?;
    Ok((out.into_iter().map(|v| v.0).collect(), now))
}

/// A text's vector and, where asked, its sentences' (DESIGN §11).
type Vectors = (Vec<f32>, Option<Vec<QuantizedVector>>);

/// [`embed_with_cache`], and with `spans` (each text's sentences) their vectors too
/// ([`Embedder::embed_spans`]), cached beside the texts' as [`pack`] writes them.
fn embed_cached(
    embedder: &dyn Embedder,
    cache: Option<&dyn EmbeddingCache>,
    texts: &[&str],
    spans: Option<&[Vec<(usize, usize)>]>,
    progress: &dyn IngestProgress,
) -> Result<(Vec<Vectors>, usize)> {
    let model = embedder.model_id().to_owned();
    // Versioned: a change to the splitter or the pooling changes it, so no vector of the
    // old way is taken for the new (bump with `sentence_spans` or `Embedder::embed_spans`).
    let sentence_model = format!("{model}/sentences/v1");
    let sentences = spans.is_some();
    let spans = spans.unwrap_or_default();
    let dim = embedder.dimension();
    let lookup = |c: &dyn EmbeddingCache| -> Result<Vec<Option<Vectors>>> {
        let whole = c.get(&model, texts)?;
        if !sentences {
            return Ok(whole.into_iter().map(|v| v.map(|v| (v, None))).collect());
        }
        let parts = c.get(&sentence_model, texts)?;
        Ok(whole
            .into_iter()
            .zip(parts)
            .zip(spans)
            .map(|((w, p), s)| Some((w?, Some(unpack(&p?, s.len(), dim)?))))
            .collect())
    };
    let (cached, mut caching) = match cache.map(|c| (c, lookup(c))) {
        Some((_, Ok(found))) => (found, true),
        Some((c, Err(e))) => {
            progress.warn(&format!(
                "embedding cache in {} unavailable ({}); embedding without it",
                c.place(),
                e.report()
            ));
            (vec![None; texts.len()], false)
        }
        None => (vec![None; texts.len()], false),
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
    let mut out: Vec<Option<Vectors>> = cached;
    progress.embedded(0, missing.len());
    let mut done = 0;
    // Longest first: the first progress reports overestimate the time left, never underestimate.
    let mut order = missing.clone();
    order.sort_by_key(|&i| std::cmp::Reverse(texts[i].len()));
    for step in order.chunks(EMBED_STEP) {
        let batch: Vec<&str> = step.iter().map(|&i| texts[i]).collect();
        let vectors: Vec<Vectors> = if sentences {
            let step_spans: Vec<Vec<(usize, usize)>> = step.iter().map(|&i| spans[i].clone()).collect();
            embedder
                .embed_spans(&batch, &step_spans)?
                .into_iter()
                .map(|(w, p)| (w, Some(p.iter().map(|v| QuantizedVector::quantize(v)).collect())))
                .collect()
        } else {
            embedder.embed(&batch)?.into_iter().map(|w| (w, None)).collect()
        };
        if let (true, Some(c)) = (caching, cache) {
            let items: Vec<(&str, &[f32])> =
                batch.iter().copied().zip(vectors.iter().map(|v| v.0.as_slice())).collect();
            let packed: Vec<Vec<f32>> = vectors.iter().filter_map(|v| v.1.as_deref().map(pack)).collect();
            let parts: Vec<(&str, &[f32])> = batch.iter().copied().zip(packed.iter().map(Vec::as_slice)).collect();
            let put =
                c.put(&model, &items).and_then(|()| if sentences { c.put(&sentence_model, &parts) } else { Ok(()) });
            if let Err(e) = put {
                progress.warn(&format!("could not write the embedding cache ({}); going on without it", e.report()));
                caching = false;
            }
        }
        for (&i, v) in step.iter().zip(vectors) {
            out[i] = Some(v);
        }
        done += step.len();
        progress.embedded(done, missing.len());
    }
    progress.finished();
    for (copy, of) in copies {
        out[copy] = out[of].clone();
    }
    Ok((out.into_iter().map(|v| v.expect("every text embedded")).collect(), missing.len()))
}

/// Sentence vectors as the embedding cache holds them (`f32`s, as it holds every vector, that
/// JSON carries exactly): per sentence its scale, then its bytes three to a value (each value
/// an integer below 2²⁴).
fn pack(vectors: &[QuantizedVector]) -> Vec<f32> {
    let mut out = Vec::new();
    for v in vectors {
        out.push(v.scale);
        for three in v.values.chunks(3) {
            let mut n = 0u32;
            for (k, &b) in three.iter().enumerate() {
                n |= u32::from(b as u8) << (8 * k);
            }
            out.push(n as f32);
        }
    }
    out
}

/// [`pack`] read back for `n` sentences of `dim` values; `None` when the cached values are
/// not that (another splitter's sentences, a torn entry).
fn unpack(packed: &[f32], n: usize, dim: usize) -> Option<Vec<QuantizedVector>> {
    let per = 1 + dim.div_ceil(3);
    if packed.len() != n * per {
        return None;
    }
    Some(
        packed
            .chunks_exact(per)
            .map(|p| {
                let values = p[1..]
                    .iter()
                    .flat_map(|&x| {
                        let n = x as u32;
                        [n as u8 as i8, (n >> 8) as u8 as i8, (n >> 16) as u8 as i8]
                    })
                    .take(dim)
                    .collect();
                QuantizedVector { scale: p[0], values }
            })
            .collect(),
    )
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
    /// Files read and the chunks they gave, by format (`jsonl`, `md`, `txt`, `html`, `docx`,
    /// `pdf`); empty for records.
    pub formats: std::collections::BTreeMap<String, FormatTally>,
    /// Documents found in folders that could not be read, each with why (a broken or
    /// encrypted file): left out, the rest ingested.
    pub unreadable: Vec<(PathBuf, String)>,
    /// Documents ingested with a part left out, each with what and why (a PDF's pages
    /// without a text layer, or that could not be decoded).
    pub partly_read: Vec<(PathBuf, String)>,
    /// Entries of folders not followed or not read as files (symbolic links, pipes), each
    /// with why.
    pub not_followed: Vec<(PathBuf, String)>,
    /// Chunks the lexical (BM25) index covers, built with the ingest; `None` for a backend
    /// without one.
    pub lexical: Option<usize>,
    /// Wall time of the whole ingest, in seconds.
    pub seconds: f64,
}

/// Files of one format an ingest read, and the chunks they gave.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FormatTally {
    /// Files read.
    pub files: usize,
    /// Chunks they gave.
    pub chunks: usize,
    /// Pages they hold, for a format that has pages (PDF); 0 for the others (and then not
    /// serialized).
    #[serde(skip_serializing_if = "is_zero")]
    pub pages: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
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
        if !self.formats.is_empty() {
            let read: Vec<String> = self
                .formats
                .iter()
                .map(|(format, t)| match t.pages {
                    0 => format!("{format}: {} files, {} chunks", t.files, t.chunks),
                    pages => format!("{format}: {} files, {pages} pages, {} chunks", t.files, t.chunks),
                })
                .collect();
            write!(f, "\nread {}", read.join("; "))?;
        }
        if !self.skipped.is_empty() {
            // By extension, most first: what a user may want converted.
            let mut by: std::collections::BTreeMap<String, usize> = Default::default();
            for p in &self.skipped {
                let ext = p.extension().map(|e| format!(".{}", e.to_string_lossy().to_lowercase()));
                *by.entry(ext.unwrap_or_else(|| "no extension".into())).or_default() += 1;
            }
            let mut by: Vec<(String, usize)> = by.into_iter().collect();
            by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let by: Vec<String> = by.iter().map(|(e, n)| format!("{e} {n}")).collect();
            write!(f, "\nskipped {} files of other types ({})", self.skipped.len(), by.join(", "))?;
        }
        if !self.unreadable.is_empty() {
            write!(f, "\nleft out {} files that could not be read:", self.unreadable.len())?;
            for (_, why) in &self.unreadable {
                write!(f, "\n  {why}")?;
            }
        }
        if !self.not_followed.is_empty() {
            write!(f, "\nleft out {} entries that are not files of the folder:", self.not_followed.len())?;
            for (path, why) in &self.not_followed {
                write!(f, "\n  {}: {why}", path.display())?;
            }
        }
        if !self.partly_read.is_empty() {
            write!(f, "\nread in part ({}):", self.partly_read.len())?;
            for (_, what) in &self.partly_read {
                write!(f, "\n  {what}")?;
            }
        }
        Ok(())
    }
}

/// Chunks with their vectors and token counts, ready to store.
pub struct Embedded {
    /// The chunks, in input order.
    pub chunks: Vec<EmbeddedChunk>,
    /// Texts embedded now (the others came from the cache or another chunk of the input).
    pub embedded_now: usize,
}

/// The first half of an ingest: validated chunks (read and checked by the caller:
/// [`ragctx_ingest::parse_jsonl`], [`ragctx_ingest::check_unique_ids`], or a file reader) embedded with the
/// cache and their tokens counted once. Touches no store: a long ingest embeds before it
/// opens (and locks) the data dir.
pub fn embed_chunks(
    embedder: &dyn Embedder,
    counter: &dyn TokenCounter,
    cache: Option<&dyn EmbeddingCache>,
    progress: &dyn IngestProgress,
    chunks: Vec<SourcedChunk>,
    sentences: bool,
) -> Result<Embedded> {
    let texts: Vec<&str> = chunks.iter().map(|c| c.chunk.text.as_str()).collect();
    // Each chunk split once: the spans embedded are the spans indexed.
    let spans: Option<Vec<Vec<(usize, usize)>>> =
        sentences.then(|| texts.iter().map(|t| ragctx_core::text::sentence_spans(t)).collect());
    let (vectors, embedded_now) = embed_cached(embedder, cache, &texts, spans.as_deref(), progress)?;
    let (whole, parts): (Vec<Vec<f32>>, Vec<Option<Vec<QuantizedVector>>>) = vectors.into_iter().unzip();
    let pages: Vec<Vec<(usize, u32)>> = chunks.iter().map(|c| c.page_starts.clone()).collect();
    let mut chunks = with_vectors(chunks, whole, counter);
    for (i, (c, p)) in chunks.iter_mut().zip(parts).enumerate() {
        if let (Some(vectors), Some(spans)) = (p, spans.as_ref()) {
            c.sentences = Some(sentence_index(&spans[i], vectors, &pages[i]));
        }
    }
    Ok(Embedded { chunks, embedded_now })
}

/// A chunk's sentence index: its sentences' spans (as [`ragctx_core::text::sentence_spans`]
/// makes them), their vectors, and the page each starts on where the reader knew the pages
/// (`page_starts`: byte offsets in the chunk's text where a page begins).
fn sentence_index(spans: &[(usize, usize)], vectors: Vec<QuantizedVector>, page_starts: &[(usize, u32)]) -> Sentences {
    let page_at = |offset: usize| {
        let k = page_starts.partition_point(|(start, _)| *start <= offset);
        page_starts.get(k.checked_sub(1)?).map(|p| p.1)
    };
    let pages: Vec<Option<u32>> = spans.iter().map(|&(a, _)| page_at(a)).collect();
    Sentences::of(spans, vectors, &pages)
}

/// The second half: the chunks written in one transaction (each document replaced whole,
/// or upserted by id with `append`), the lexical index built beside them, and what changed.
/// `files`, `skipped` and `seconds` of the report are the caller's to fill.
pub fn store_embedded(store: &dyn VectorStore, embedded: Embedded, append: bool) -> Result<IngestReport> {
    let Embedded { chunks, embedded_now } = embedded;
    let (r, documents) = store_chunks(store, &chunks, append)?;
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
        files: 0,
        new: r.new,
        updated: r.updated,
        removed: r.removed,
        embedded: embedded_now,
        cached: chunks.len() - embedded_now,
        stored: store.len()?,
        skipped: Vec::new(),
        formats: Default::default(),
        unreadable: Vec::new(),
        partly_read: Vec::new(),
        not_followed: Vec::new(),
        lexical,
        seconds: 0.0,
    })
}

impl crate::Engine {
    /// The whole ingest with this engine's store, embedder and counter ([`embed_chunks`],
    /// then [`store_embedded`]), using `cache` where given, telling `progress`: what
    /// `POST /v1/documents` and an opened app's ingest (Python's) run.
    pub fn ingest(
        &self,
        chunks: Vec<SourcedChunk>,
        append: bool,
        cache: Option<&dyn EmbeddingCache>,
        progress: &dyn IngestProgress,
    ) -> Result<IngestReport> {
        let started = Instant::now();
        let embedded =
            embed_chunks(self.embedder.as_ref(), self.counter.as_ref(), cache, progress, chunks, self.sentence_index)?;
        let mut report = store_embedded(self.vectors.as_ref(), embedded, append)?;
        report.seconds = started.elapsed().as_secs_f64();
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Counting(Mutex<usize>);
    impl Embedder for Counting {
        fn dimension(&self) -> usize {
            2
        }
        fn model_id(&self) -> &str {
            "counting"
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
            *self.0.lock().unwrap() += texts.len();
            Ok(texts.iter().map(|t| vec![t.len() as f32, 1.0]).collect())
        }
    }

    #[derive(Default)]
    struct Memo(Mutex<HashMap<String, Vec<f32>>>, Mutex<bool>);
    impl EmbeddingCache for Memo {
        fn get(&self, model: &str, texts: &[&str]) -> Result<Vec<Option<Vec<f32>>>> {
            let m = self.0.lock().unwrap();
            Ok(texts.iter().map(|t| m.get(&format!("{model}\0{t}")).cloned()).collect())
        }
        fn put(&self, model: &str, items: &[(&str, &[f32])]) -> Result<()> {
            if *self.1.lock().unwrap() {
                return Err(ragctx_core::Error::InvalidInput("disk full".into()));
            }
            self.0.lock().unwrap().extend(items.iter().map(|(t, v)| (format!("{model}\0{t}"), v.to_vec())));
            Ok(())
        }
        fn place(&self) -> String {
            "memory".into()
        }
    }

    struct Warnings(Mutex<Vec<String>>);
    impl IngestProgress for Warnings {
        fn warn(&self, message: &str) {
            self.0.lock().unwrap().push(message.to_owned());
        }
    }

    #[test]
    fn a_text_is_embedded_once_and_the_cache_is_used_and_filled() {
        let e = Counting(Mutex::new(0));
        let cache = Memo::default();
        let w = Warnings(Mutex::new(vec![]));
        let (v, now) = embed_with_cache(&e, Some(&cache), &["a", "bb", "a"], &w).unwrap();
        assert_eq!((now, *e.0.lock().unwrap()), (2, 2), "the repeated text once");
        assert_eq!(v, [vec![1.0, 1.0], vec![2.0, 1.0], vec![1.0, 1.0]]);
        let (_, now) = embed_with_cache(&e, Some(&cache), &["a", "bb", "ccc"], &w).unwrap();
        assert_eq!((now, *e.0.lock().unwrap()), (1, 3), "two from the cache");
        // A cache that fails to write is reported once and the ingest goes on without it.
        *cache.1.lock().unwrap() = true;
        let (v, now) = embed_with_cache(&e, Some(&cache), &["dddd", "eeeee"], &w).unwrap();
        assert_eq!((v.len(), now), (2, 2));
        assert_eq!(w.0.lock().unwrap().len(), 1, "{:?}", w.0.lock().unwrap());
    }

    #[test]
    fn sentence_vectors_are_cached_beside_the_texts_and_read_back_whole() {
        let v =
            [QuantizedVector::quantize(&[0.5, -1.0, 0.25, 0.0]), QuantizedVector::quantize(&[-0.1, 0.2, 0.3, -0.4])];
        let packed = pack(&v);
        assert_eq!(packed.len(), 2 * (1 + 2), "a scale and three bytes to a value");
        assert!(packed.iter().all(|x| x.is_finite()), "JSON carries every value");
        assert_eq!(unpack(&packed, 2, 4), Some(v.to_vec()));
        assert_eq!(unpack(&packed, 3, 4), None, "another count of sentences: not these");
        // Embedding with sentences: each text's sentences, cached, then read from the cache.
        let e = Counting(Mutex::new(0));
        let cache = Memo::default();
        let w = Warnings(Mutex::new(vec![]));
        let texts = ["One. Two.", "Three."];
        let spans: Vec<Vec<(usize, usize)>> = texts.iter().map(|t| ragctx_core::text::sentence_spans(t)).collect();
        let (first, now) = embed_cached(&e, Some(&cache), &texts, Some(&spans), &w).unwrap();
        assert_eq!(now, 2);
        assert_eq!(first[0].1.as_ref().map(Vec::len), Some(2));
        assert_eq!(first[1].1.as_ref().map(Vec::len), Some(1));
        let asked = *e.0.lock().unwrap();
        let (again, now) = embed_cached(&e, Some(&cache), &texts, Some(&spans), &w).unwrap();
        assert_eq!((now, *e.0.lock().unwrap()), (0, asked), "all from the cache");
        assert_eq!(again, first);
    }
}
