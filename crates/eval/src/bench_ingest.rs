//! `bench ingest`: what one small write costs on the store as it is — a new document of a
//! few chunks ingested as `POST /v1/documents` ingests it (its texts already in the
//! embedding cache, so the time is the store's, not the model's), the first vector and BM25
//! searches after it, and the document's delete — repeated, with percentiles.

use crate::error::{bail, Result};
use crate::stats::percentile;
use ragctx_app::app::App;
use ragctx_core::{DocumentId, LexicalRequest, SearchRequest, VectorStore};
use serde::Serialize;
use std::time::Instant;

/// The flags of `ragctx bench ingest`.
#[derive(clap::Args)]
pub struct IngestOptions {
    /// Writes to time (each a new document, then its delete)
    #[arg(long, default_value_t = 20)]
    pub repeats: usize,
    /// Chunks per document: the texts of the store's first N chunks, under new ids
    #[arg(long, default_value_t = 5)]
    pub chunks: usize,
    /// First grow the store to N chunks (untimed, kept): copies of its chunks' texts under
    /// new ids (`fill-…`), with vectors sampled from a Gaussian fitted to its vectors
    /// (`bench search --generator fitted`), written 20,000 at a time
    #[arg(long)]
    pub fill: Option<usize>,
    /// Print the report as one JSON object
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Report {
    store_chunks: usize,
    repeats: usize,
    chunks: usize,
    /// The ingest as `POST /v1/documents` runs it, embeddings from the cache.
    ingest_ms: Percentiles,
    /// The first vector search after each ingest (finds a new chunk).
    first_search_ms: Percentiles,
    /// The first BM25 search after each ingest (finds a new chunk).
    first_lexical_ms: Percentiles,
    /// The same BM25 search once more, nothing changed since: the search's own cost.
    lexical_again_ms: Percentiles,
    /// `DELETE /v1/documents/{id}`'s write.
    delete_ms: Percentiles,
    /// The first BM25 search after each delete (the document is gone).
    lexical_after_delete_ms: Percentiles,
    /// Times `index.bin` and `lexical.bin` were rewritten during the run.
    index_rewrites: usize,
    lexical_rewrites: usize,
}

#[derive(Serialize)]
struct Percentiles {
    p50: f64,
    p99: f64,
    max: f64,
}

impl Percentiles {
    fn of(mut ms: Vec<f64>) -> Percentiles {
        ms.sort_by(f64::total_cmp);
        Percentiles { p50: percentile(&ms, 0.5), p99: percentile(&ms, 0.99), max: *ms.last().unwrap_or(&0.0) }
    }
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

pub(crate) fn run(app: &App, opts: &IngestOptions) -> Result<()> {
    let data = app.data("bench ingest")?;
    let store = data.vector_store();
    if opts.repeats == 0 || opts.chunks == 0 {
        bail!("--repeats and --chunks must be at least 1");
    }
    if let Some(target) = opts.fill {
        fill(&store, target)?;
    }
    // The texts (untimed): the store's first chunks, so their embeddings are cached.
    let texts: Vec<(String, String)> = store
        .first(opts.chunks * 4 + 16)?
        .into_iter()
        .filter(|c| !c.chunk.document_id.as_str().starts_with("bench-ingest-"))
        .take(opts.chunks)
        .map(|c| (c.chunk.title, c.chunk.text))
        .collect();
    if texts.len() < opts.chunks {
        bail!("the store holds {} chunks: ingest a corpus first (bench ingest times writes into it)", texts.len());
    }
    let store_chunks = store.len()?;
    let stamp = |name: &str| std::fs::metadata(data.path().join(name)).and_then(|m| m.modified()).ok();
    let records = |doc: &str| -> Vec<u8> {
        let mut out = Vec::new();
        for (i, (title, text)) in texts.iter().enumerate() {
            let line =
                serde_json::json!({ "_id": format!("{doc}#{i}"), "document_id": doc, "title": title, "text": text });
            out.extend(line.to_string().into_bytes());
            out.push(b'\n');
        }
        out
    };
    // One untimed write first: the texts reach the embedding cache, the lexical index is
    // loaded, and it is deleted again.
    let warm = format!("bench-ingest-warm-{}", std::process::id());
    app.ingest_records("bench ingest", &records(&warm), false)?;
    store.replace_documents(&[DocumentId::from(warm.as_str())], &[])?;
    store.prepare_lexical()?;
    let (mut index_rewrites, mut lexical_rewrites) = (0, 0);
    let (mut ingest, mut search, mut lexical, mut delete, mut after_delete) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut lexical_again = Vec::new();
    // The first text, as a question that BM25 scores over many postings.
    let query = LexicalRequest { query: texts[0].1.clone(), limit: 10, ..Default::default() };
    let lexical_hits = |request: &LexicalRequest| -> Result<Vec<ragctx_core::Hit>> {
        match store.search_lexical(request)? {
            Some(found) => Ok(found.hits),
            None => bail!("this store has no lexical index"),
        }
    };
    // Each file's stamp, compared after every step that may rewrite it.
    let mut stamps = (stamp("index.bin"), stamp("lexical.bin"));
    let mut count_rewrites = |index_rewrites: &mut usize, lexical_rewrites: &mut usize| {
        let now = (stamp("index.bin"), stamp("lexical.bin"));
        *index_rewrites += usize::from(now.0 != stamps.0);
        *lexical_rewrites += usize::from(now.1 != stamps.1);
        stamps = now;
    };
    let mut one = |k: usize, doc: &str| -> Result<()> {
        let t = Instant::now();
        let report = app.ingest_records("bench ingest", &records(doc), false)?;
        ingest.push(ms(t));
        count_rewrites(&mut index_rewrites, &mut lexical_rewrites);
        if report.embedded > 0 {
            bail!("write {k} embedded {} texts: the embedding cache did not hold them", report.embedded);
        }
        let first = format!("{doc}#0");
        let vector = store.vectors(&[first.as_str().into()])?.remove(0).expect("just written");
        // Timed: the first searches after the write, as a turn runs them. Checked: the same
        // searches narrowed to the new document (the copied texts tie with their originals,
        // so an unfiltered top 10 need not hold the copy).
        let only = ragctx_core::Filter::parse(&serde_json::json!({ "document_id": doc }).to_string())?;
        let request = SearchRequest { vector, limit: 10, ..Default::default() };
        let t = Instant::now();
        store.search(&request)?;
        search.push(ms(t));
        let found = store.search(&SearchRequest { filter: only.clone(), ..request })?;
        if found.hits.first().map(|h| h.chunk.id.as_str()) != Some(first.as_str()) {
            bail!("write {k}: a vector search after it did not find {first}");
        }
        let t = Instant::now();
        lexical_hits(&query)?;
        lexical.push(ms(t));
        // The same search again, nothing changed since: what the search itself costs.
        let t = Instant::now();
        lexical_hits(&query)?;
        lexical_again.push(ms(t));
        let narrowed = LexicalRequest { filter: only.clone(), ..query.clone() };
        if !lexical_hits(&narrowed)?.iter().any(|h| h.chunk.id.as_str() == first) {
            bail!("write {k}: a BM25 search after it did not find {first}");
        }
        count_rewrites(&mut index_rewrites, &mut lexical_rewrites);
        let t = Instant::now();
        let removed = store.replace_documents(&[DocumentId::from(doc)], &[])?.removed;
        delete.push(ms(t));
        if removed != opts.chunks {
            bail!("write {k}: the delete removed {removed} chunks, not {}", opts.chunks);
        }
        count_rewrites(&mut index_rewrites, &mut lexical_rewrites);
        let t = Instant::now();
        lexical_hits(&query)?;
        after_delete.push(ms(t));
        let narrowed = LexicalRequest { filter: only, ..query.clone() };
        if !lexical_hits(&narrowed)?.is_empty() {
            bail!("write {k}: a BM25 search after the delete still found {doc}");
        }
        count_rewrites(&mut index_rewrites, &mut lexical_rewrites);
        Ok(())
    };
    for k in 0..opts.repeats {
        let doc = format!("bench-ingest-{}-{k}", std::process::id());
        if let Err(e) = one(k, &doc) {
            // The store is left as it was found, as far as a failed write allows.
            let _ = store.replace_documents(&[DocumentId::from(doc.as_str())], &[]);
            return Err(e);
        }
    }
    let report = Report {
        store_chunks,
        repeats: opts.repeats,
        chunks: opts.chunks,
        ingest_ms: Percentiles::of(ingest),
        first_search_ms: Percentiles::of(search),
        first_lexical_ms: Percentiles::of(lexical),
        lexical_again_ms: Percentiles::of(lexical_again),
        delete_ms: Percentiles::of(delete),
        lexical_after_delete_ms: Percentiles::of(after_delete),
        index_rewrites,
        lexical_rewrites,
    };
    if opts.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "bench ingest: {} writes of a {}-chunk document into a store of {} chunks (embeddings cached)",
        report.repeats, report.chunks, report.store_chunks
    );
    println!("{:<34} {:>9} {:>9} {:>9}", "ms", "p50", "p99", "max");
    for (name, p) in [
        ("ingest (POST /v1/documents)", &report.ingest_ms),
        ("first vector search after", &report.first_search_ms),
        ("first BM25 search after", &report.first_lexical_ms),
        ("the same BM25 search again", &report.lexical_again_ms),
        ("delete (DELETE /v1/documents)", &report.delete_ms),
        ("first BM25 search after delete", &report.lexical_after_delete_ms),
    ] {
        println!("{name:<34} {:>9.2} {:>9.2} {:>9.2}", p.p50, p.p99, p.max);
    }
    println!("index.bin rewritten {} times, lexical.bin {} times", report.index_rewrites, report.lexical_rewrites);
    Ok(())
}

/// Grows `store` to `target` chunks with copies of its chunks (new ids, fitted vectors).
fn fill(store: &ragctx_store::EmbeddedVectorStore, target: usize) -> Result<()> {
    let have = store.len()?;
    if have >= target {
        return Ok(());
    }
    let all = store.all()?;
    let fitted = crate::stats::Fitted::of(all.iter().map(|c| c.vector.as_slice()))
        .ok_or_else(|| crate::error::Error::Input("--fill needs a store of at least two chunks".into()))?;
    let mut rng = crate::stats::Rng(0x5eed);
    let started = Instant::now();
    let mut added = 0;
    while have + added < target {
        let batch: Vec<ragctx_core::EmbeddedChunk> = (0..(target - have - added).min(20_000))
            .map(|i| {
                let n = have + added + i;
                let src = &all[rng.below(all.len())].chunk;
                let doc = format!("fill-{n}");
                let mut chunk = ragctx_core::Chunk::new(&format!("{doc}#0"), &doc, &src.title, &src.text);
                chunk.tokens = src.tokens;
                ragctx_core::EmbeddedChunk { chunk, vector: fitted.sample(&mut rng), sentences: None }
            })
            .collect();
        added += batch.len();
        store.upsert(&batch)?;
        eprintln!("filled {} of {target} chunks ({:.0}s)", have + added, started.elapsed().as_secs_f64());
    }
    let t = Instant::now();
    store.prepare_lexical()?;
    eprintln!("lexical index of {target} chunks built in {:.0}s", t.elapsed().as_secs_f64());
    Ok(())
}
