//! `bench search` (the vector index with exclusion sets, against its own exact scan) and
//! `bench lexical` (BM25 with and without exclusions): timings of one store's searches.

use crate::data::read_questions;
use crate::error::{bail, write_file, Error, Result};
use crate::stats::{held, noisy, percentile, Rng, HELD_AT};
use ragctx_app::app::App;
use ragctx_core::{ExclusionSet, SearchPath, SearchRequest, VectorStore};
use ragctx_index::{ForcePath, IndexParams, VectorIndex};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

/// Times `search_lexical` on the embedded store (its index loaded or built first, untimed).
pub(crate) fn lexical(
    app: &App,
    questions: &std::path::Path,
    queries: usize,
    seed: u64,
    tenants: &[usize],
    json: bool,
) -> Result<()> {
    let store = app.data("bench lexical")?.vector_store();
    let qs = read_questions(questions, queries)?;
    if qs.is_empty() {
        bail!("{} has no questions", questions.display());
    }
    let all: Vec<ragctx_core::Chunk> = store.all()?.into_iter().map(|c| c.chunk).collect();
    let ids: Vec<ragctx_core::ChunkId> = all.iter().map(|c| c.id.clone()).collect();
    if ids.is_empty() {
        bail!("the store is empty: ingest a corpus first");
    }
    let started = Instant::now();
    let request = |q: &str, excluded: ExclusionSet, grouping| ragctx_core::LexicalRequest {
        query: q.to_owned(),
        limit: 8,
        grouping,
        exclusion: excluded,
        ..Default::default()
    };
    if store.prepare_lexical()?.is_none() {
        bail!("this store has no lexical index");
    }
    let ready_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut rng = Rng(seed.max(1));
    let mut rows = Vec::new();
    // "fresh": a set never seen before for every query (resolved in full inside the timing);
    // "session": one session's set, 10 more ids each turn (resolved by extending the last).
    for (excluded, sets) in [(0usize, "fresh"), (10_000, "fresh"), (10_000, "session")] {
        for grouped in [false, true] {
            let mut lat = Vec::with_capacity(qs.len());
            let mut hits = 0;
            let mut session = ExclusionSet::default();
            for q in &qs {
                let mut ex = if sets == "session" { session.clone() } else { ExclusionSet::default() };
                let want = if sets == "session" && !ex.is_empty() { ex.len() + 10 } else { excluded };
                while ex.chunks.len() < want.min(ids.len() / 2) {
                    ex.chunks.insert(ids[rng.below(ids.len())].clone());
                }
                if sets == "session" {
                    session = ex.clone();
                }
                let grouping = grouped.then(|| ragctx_core::Grouping::new(3));
                let t = Instant::now();
                let out = store.search_lexical(&request(q, ex, grouping))?.expect("checked above");
                lat.push(t.elapsed().as_secs_f64() * 1e3);
                hits += out.hits.len();
            }
            lat.sort_by(f64::total_cmp);
            rows.push(serde_json::json!({"excluded": excluded, "sets": sets, "grouped": grouped, "queries": lat.len(),
                "p50_ms": percentile(&lat, 0.5), "p99_ms": percentile(&lat, 0.99),
                "mean_hits": hits as f64 / lat.len() as f64}));
        }
    }
    if tenants.contains(&0) {
        bail!("--tenants: every count is at least 1");
    }
    let tenant_rows: Vec<serde_json::Value> = tenants.iter().map(|&t| lexical_tenants(&all, &qs, t)).collect();
    let out =
        serde_json::json!({"chunks": ids.len(), "index_ready_ms": ready_ms, "rows": rows, "tenants": tenant_rows});
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        if !tenant_rows.is_empty() {
            println!("| tenants | tenant p50 ms | p99 ms | alone p50 ms | ratio | store-wide p50 ms | same as alone |");
            println!("|---:|---:|---:|---:|---:|---:|---:|");
            for r in &tenant_rows {
                let f = |k: &str| r[k].as_f64().unwrap_or_default();
                println!(
                    "| {} | {:.3} | {:.3} | {:.3} | {:.2} | {:.3} | {:.3} |",
                    r["tenants"],
                    f("p50_ms"),
                    f("p99_ms"),
                    f("alone_p50_ms"),
                    f("p50_ms") / f("alone_p50_ms").max(1e-9),
                    f("store_wide_p50_ms"),
                    f("same_as_alone")
                );
            }
        }
        println!("lexical index over {} chunks ready in {ready_ms:.0} ms (loaded or built)", ids.len());
        println!("| excluded | sets | grouped | p50 ms | p99 ms |\n|---:|---|---|---:|---:|");
        for r in &rows {
            println!(
                "| {} | {} | {} | {:.3} | {:.3} |",
                r["excluded"],
                r["sets"].as_str().unwrap_or_default(),
                r["grouped"],
                r["p50_ms"].as_f64().unwrap_or_default(),
                r["p99_ms"].as_f64().unwrap_or_default()
            );
        }
    }
    Ok(())
}

/// One `--tenants` row: the store's chunks dealt round robin to `tenants` tenants in one
/// index; each query, as a random tenant, against the same query in an index of that tenant's
/// chunks alone (its hits and scores must be the same: `same_as_alone` is the share that
/// are), and unscoped over the shared index (the store-wide search, for scale).
fn lexical_tenants(all: &[ragctx_core::Chunk], qs: &[String], tenants: usize) -> serde_json::Value {
    let names: Vec<ragctx_core::Tenant> =
        (0..tenants).map(|t| ragctx_core::Tenant::parse(&format!("t{t}")).expect("valid")).collect();
    let mut own: Vec<Vec<ragctx_core::Chunk>> = vec![Vec::new(); tenants];
    for (i, c) in all.iter().enumerate() {
        let t = &names[i % tenants];
        let mut c = c.clone();
        c.id = t.qualify_unchecked(c.id.as_str()).into();
        c.document_id = t.qualify_unchecked(c.document_id.as_str()).into();
        own[i % tenants].push(c);
    }
    let mut shared_chunks: Vec<&ragctx_core::Chunk> = own.iter().flatten().collect();
    shared_chunks.sort_by(|a, b| a.id.cmp(&b.id));
    let shared = ragctx_lexical::LexicalIndex::build(shared_chunks);
    let alone: Vec<ragctx_lexical::LexicalIndex> = own.iter().map(ragctx_lexical::LexicalIndex::build).collect();
    let hits = |ix: &ragctx_lexical::LexicalIndex, r: &ragctx_core::LexicalRequest| -> Vec<(String, f32)> {
        ix.search_request(r).iter().map(|&(e, s)| (ix.chunk_id(e).to_string(), s)).collect()
    };
    let (mut lat, mut alone_lat, mut wide_lat, mut same) = (vec![], vec![], vec![], 0usize);
    for (i, q) in qs.iter().enumerate() {
        let t = i % tenants;
        let mut r = ragctx_core::LexicalRequest {
            query: q.clone(),
            limit: 8,
            grouping: Some(ragctx_core::Grouping::new(3)),
            tenant: Some(names[t].as_str().to_owned()),
            ..Default::default()
        };
        let started = Instant::now();
        let got = hits(&shared, &r);
        lat.push(started.elapsed().as_secs_f64() * 1e3);
        r.tenant = None;
        let started = Instant::now();
        let want = hits(&alone[t], &r);
        alone_lat.push(started.elapsed().as_secs_f64() * 1e3);
        let started = Instant::now();
        let _ = shared.search_request(&r);
        wide_lat.push(started.elapsed().as_secs_f64() * 1e3);
        same += usize::from(got == want);
    }
    for v in [&mut lat, &mut alone_lat, &mut wide_lat] {
        v.sort_by(f64::total_cmp);
    }
    serde_json::json!({"tenants": tenants, "queries": qs.len(), "p50_ms": percentile(&lat, 0.5),
        "p99_ms": percentile(&lat, 0.99), "alone_p50_ms": percentile(&alone_lat, 0.5),
        "store_wide_p50_ms": percentile(&wide_lat, 0.5), "same_as_alone": same as f64 / qs.len().max(1) as f64})
}

#[derive(Serialize)]
struct SearchRow {
    exclusion: &'static str,
    excluded: usize,
    p50_ms: f64,
    p99_ms: f64,
    #[serde(rename = "recall@10")]
    recall_at_10: f64,
    /// The 5th percentile of the queries' own recall.
    recall_p5: f64,
    /// The share of queries whose own recall is at least [`HELD_AT`] (a path holds the row
    /// when 95% do).
    held_share: f64,
    path: &'static str,
    graph_share: f64,
    /// The share of queries the planner's walk answered after widening (past exclusions, or
    /// unsettled: `IndexParams::settle_above`).
    widened_share: f64,
    exact_p50_ms: f64,
    /// Resolving the excluded ids into node numbers, once per set (outside `p50_ms`, as
    /// FAISS builds its ID selector outside its search).
    resolve_p50_ms: f64,
    /// Resolving a session's next set — the same ids and 10 more — through a store's cache
    /// that also holds other sessions' sets (the empty set and 14 of the row's size at
    /// first, the earlier queries' sets after): the kept set is extended by the difference.
    /// What a turn pays.
    next_turn_resolve_p50_ms: f64,
    /// The path the planner did not choose, forced on the same query: what the other
    /// choice would have cost (a wrong choice shows as alt < p50).
    alt_path: &'static str,
    alt_path_p50_ms: f64,
    alt_path_recall: f64,
    alt_path_held_share: f64,
}

/// Options of `bench search`, as its flags give them.
#[derive(clap::Args)]
pub struct SearchOptions {
    /// Queries per row
    #[arg(long, default_value_t = 200)]
    pub queries: usize,
    /// Nearest neighbours per query (the k of recall@k)
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// Grow the corpus to this many vectors with generated ones (`--generator`)
    #[arg(long, default_value_t = 0)]
    pub scale: usize,
    /// How `--scale` makes its vectors: `copies` (a stored vector with uniform noise of ±0.02
    /// per component, normalised: clusters of near-copies) or `fitted` (sampled from a
    /// Gaussian with the stored vectors' mean and covariance, normalised: docs/evaluation.md)
    #[arg(long, default_value = "copies")]
    pub generator: String,
    /// JSONL file whose "question" fields are embedded as queries (default: noisy
    /// copies of stored vectors)
    #[arg(long)]
    pub questions: Option<PathBuf>,
    /// Queries: this many stored passages, chosen at random (by `--seed`) and taken out of the
    /// index and of what `--scale` generates from — real vectors that no parameter was tuned on
    #[arg(long, default_value_t = 0)]
    pub held_out: usize,
    /// Save the index built into DIR/index.bin, drop it and search the copy read back (its
    /// f32 vectors mapped from the file, as a data dir's index is), reporting the peak RSS of
    /// the search alone. A build past `--map-every` generated points also saves there every
    /// so many and goes on with the vectors so far mapped from the file (how 10M fit in memory)
    #[arg(long)]
    pub mapped: Option<PathBuf>,
    /// With `--mapped`: generated points between those saves (a multiple of 10,000)
    #[arg(long, default_value_t = 2_000_000, requires = "mapped")]
    pub map_every: usize,
    /// Search DIR/index.bin (as `--mapped` saved it) instead of building one: the same
    /// `--held-out` and `--seed` give the same queries, without the build's wait
    #[arg(long, conflicts_with_all = ["mapped", "scale"])]
    pub load: Option<PathBuf>,
    /// Print the results as one JSON object
    #[arg(long)]
    pub json: bool,
    /// Seed of the random copies, queries and exclusion sets
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Write the vectors, queries, exclusion sets and these results here, for
    /// bench/compare.py to run the peers on exactly the same input (with
    /// `--filter-selectivity`: the metadata and each query's filter too)
    #[arg(long)]
    pub export: Option<PathBuf>,
    /// The planner's walk-to-scan cost ratio to run with (IndexParams::scan_ratio; default:
    /// the index's own)
    #[arg(long)]
    pub scan_ratio: Option<usize>,
    /// HNSW search breadth to run with (default: the index's own)
    #[arg(long)]
    pub ef: Option<usize>,
    /// Walk at `ef` as it is, without widening a walk whose best results were still changing
    /// in the second half of its scoring (IndexParams::settle_above at its maximum)
    #[arg(long)]
    pub no_settle: bool,
    /// Settle walks in an index of more than this many live points (IndexParams::settle_above;
    /// default: the index's own, 50,000)
    #[arg(long, conflicts_with = "no_settle")]
    pub settle_above: Option<usize>,
    /// Links per node of a graph this run builds (`--scale`, `--held-out`; default: the
    /// store's)
    #[arg(long)]
    pub m: Option<usize>,
    /// Build breadth of a graph this run builds (default: the store's)
    #[arg(long)]
    pub ef_construction: Option<usize>,
    /// Above this many points a graph this run builds walks and scans an int8 copy
    /// (IndexParams::quantize_above; default: the store's, 200,000)
    #[arg(long)]
    pub quantize_above: Option<usize>,
    /// Only these rows, e.g. `--rows correlated:1000` (for profiling one path)
    #[arg(long, value_delimiter = ',')]
    pub rows: Vec<String>,
    /// Metadata-filter rows instead of exclusion rows: filters keeping these shares of the
    /// chunks, random and correlated with the query, with 0 and 1,000 ids excluded, e.g.
    /// `--filter-selectivity 0.5,0.1,0.01,0.001`
    #[arg(long, value_delimiter = ',')]
    pub filter_selectivity: Vec<f64>,
    /// Tenant rows instead: TENANTSxCHUNKS layouts in one index, each tenant's search timed
    /// against an index of its chunks alone, e.g. `--tenants 1000x40,10x3750`
    #[arg(long, value_delimiter = ',')]
    pub tenants: Vec<String>,
}

fn write_f32s(path: &std::path::Path, rows: &mut dyn Iterator<Item = &[f32]>) -> Result<()> {
    use std::io::Write;
    let failed = |source| Error::Write { path: path.to_path_buf(), source };
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).map_err(failed)?);
    for r in rows {
        for x in r {
            w.write_all(&x.to_le_bytes()).map_err(failed)?;
        }
    }
    w.flush().map_err(failed)
}

pub(crate) fn search(app: &App, o: &SearchOptions) -> Result<()> {
    let (queries, k, scale, questions, json, seed) = (o.queries, o.k, o.scale, o.questions.as_ref(), o.json, o.seed);
    let store = app.data("bench search")?.vector_store();
    let all = store.all()?;
    if all.is_empty() {
        bail!("the store is empty: ingest a corpus first (e.g. ragctx ingest ../shared/data/mtrag/corpus_*.jsonl)");
    }
    let mut rng = Rng(seed.max(1));
    let mut params = store.with_index(|ix| ix.params());
    params.m = o.m.unwrap_or(params.m);
    params.ef_construction = o.ef_construction.unwrap_or(params.ef_construction);
    params.quantize_above = o.quantize_above.unwrap_or(params.quantize_above);
    // Checked before a build that may take an hour.
    if o.map_every == 0 || !o.map_every.is_multiple_of(10_000) {
        bail!("--map-every {}: use a positive multiple of 10,000 (points are generated 10,000 at a time)", o.map_every);
    }
    let map_path = match &o.mapped {
        Some(dir) => {
            if ragctx_store::holds_store(dir) {
                bail!("--mapped {}: that is a data dir; name an empty directory", dir.display());
            }
            std::fs::create_dir_all(dir).map_err(|source| Error::Write { path: dir.to_path_buf(), source })?;
            Some(dir.join("index.bin"))
        }
        None => None,
    };
    let started = Instant::now();
    // Held out: stored passages taken out of the index (and out of what generates the rest)
    // to be the queries — real vectors no parameter was chosen on.
    let mut all = all;
    let held_out: Vec<Vec<f32>> = if o.held_out > 0 {
        if questions.is_some() {
            bail!("--held-out and --questions both name the queries: give one");
        }
        if o.held_out * 2 > all.len() {
            bail!("--held-out {}: the store holds {} chunks; hold out at most half", o.held_out, all.len());
        }
        let mut out = Vec::with_capacity(o.held_out);
        for _ in 0..o.held_out {
            let i = rng.below(all.len());
            out.push(all.swap_remove(i).vector);
        }
        out
    } else {
        Vec::new()
    };
    // Time spent making the points, not linking them: kept out of the build's time (a
    // peer's build is timed on the exported vectors).
    let mut generating = std::time::Duration::ZERO;
    let fitting = Instant::now();
    let fitted = match o.generator.as_str() {
        "copies" => None,
        "fitted" => Some(
            crate::stats::Fitted::of(all.iter().map(|c| c.vector.as_slice()))
                .ok_or_else(|| Error::Input("--generator fitted needs at least two stored vectors".into()))?,
        ),
        other => bail!("--generator {other}: use copies or fitted"),
    };
    generating += fitting.elapsed();
    let loaded = match &o.load {
        Some(dir) => Some(VectorIndex::load(&dir.join("index.bin")).map_err(ragctx_core::Error::storage)?.0),
        None => None,
    };
    let index: VectorIndex = if let Some(ix) = loaded {
        ix
    } else if scale > all.len() || !held_out.is_empty() {
        let mut ix = VectorIndex::new(store.dimension(), IndexParams { exact_below: params.exact_below, ..params });
        ix.upsert_chunks(&all);
        // Generated in batches, so that a large index links each batch on every core.
        let extra = scale.saturating_sub(all.len());
        let none = ragctx_core::Metadata::default();
        let mut i = 0;
        while i < extra {
            let end = (i + 10_000).min(extra);
            let making = Instant::now();
            let batch: Vec<(String, String, Vec<f32>)> = (i..end)
                .map(|i| {
                    let src = &all[rng.below(all.len())];
                    let v = match &fitted {
                        Some(f) => f.sample(&mut rng),
                        None => noisy(&src.vector, &mut rng, 0.02),
                    };
                    (format!("{}~copy{i}", src.chunk.id), format!("{}~copy{i}", src.chunk.document_id), v)
                })
                .collect();
            generating += making.elapsed();
            ix.upsert_many(batch.iter().map(|(id, doc, v)| ragctx_index::Point {
                chunk_id: id,
                document_id: doc,
                weight: 1.0,
                metadata: &none,
                vector: v,
            }));
            i = end;
            // With `--mapped`, the f32 vectors built so far move to the file's map every
            // `--map-every` points (the page cache holds them, not the process): ten million
            // 384-d vectors are 15.4 GB, which the build could not also hold in memory.
            if let Some(path) = map_path.as_deref().filter(|_| end % o.map_every == 0 && i < extra) {
                ix.save_and_map(path, 0).map_err(ragctx_core::Error::storage)?;
                if !ix.is_mapped() {
                    // The build would go on holding every vector: say why before memory runs out.
                    return Err(Error::Failed(format!(
                        "--mapped {}: saved, but its vectors could not be mapped from it",
                        path.display()
                    )));
                }
                eprintln!("saved {} and mapped its {} vectors", path.display(), ix.nodes());
            }
            if !json {
                eprintln!(
                    "built {} of {scale} ({:.0} s, of which {:.0} s generating)",
                    all.len() + i,
                    started.elapsed().as_secs_f64(),
                    generating.as_secs_f64()
                );
            }
        }
        ix
    } else {
        store.with_index(|ix| ix.clone())
    };
    let built = o.load.is_none() && (scale > all.len() || o.held_out > 0);
    let build_secs = if built { (started.elapsed() - generating).as_secs_f64() } else { 0.0 };
    let generate_secs = generating.as_secs_f64();
    // Read before a compaction or a reload resets them.
    let reach = index.reach_stats();
    let counting = Instant::now();
    let unreached = index.unreached();
    let unreached_count_ms = counting.elapsed().as_secs_f64() * 1e3;
    // Node ids double as the dense ids of the export: no retired nodes.
    let index = if index.dead_share() > 0.0 { index.compacted() } else { index };
    let mut index = match &map_path {
        Some(path) => {
            index.save(path, 0).map_err(ragctx_core::Error::storage)?;
            drop(index);
            VectorIndex::load(path).map_err(ragctx_core::Error::storage)?.0
        }
        None => index,
    };
    let mut p = index.params();
    if let Some(r) = o.scan_ratio {
        p.scan_ratio = r;
    }
    if let Some(ef) = o.ef {
        p.ef_search = ef;
    }
    if o.no_settle {
        p.settle_above = usize::MAX;
    }
    if let Some(n) = o.settle_above {
        p.settle_above = n;
    }
    index.set_search_params(p);
    let query_vectors: Vec<Vec<f32>> = match questions {
        None if !held_out.is_empty() => held_out,
        Some(path) => {
            let qs = read_questions(path, queries)?;
            let refs: Vec<&str> = qs.iter().map(String::as_str).collect();
            app.embedder.embed_queries(&refs)?
        }
        None => (0..queries).map(|_| noisy(&all[rng.below(all.len())].vector, &mut rng, 0.05)).collect(),
    };
    let n = index.len();
    let rss_before_search = crate::stats::rss_mb();
    // From here the peak is the search's (and the index's as it is held for it).
    let peak_reset = crate::stats::reset_peak_rss();
    let search_peak = || crate::stats::peak_rss_mb().filter(|_| peak_reset);
    if !o.tenants.is_empty() {
        let layouts = o
            .tenants
            .iter()
            .map(|l| {
                let (t, c) = l.split_once('x').ok_or(())?;
                Ok::<_, ()>((t.parse::<usize>().map_err(|_| ())?, c.parse::<usize>().map_err(|_| ())?))
            })
            .collect::<std::result::Result<Vec<_>, _>>();
        let layouts = match layouts {
            Ok(l) if l.iter().all(|&(t, c)| t > 0 && c > 0) => l,
            _ => bail!("--tenants {}: use TENANTSxCHUNKS, both at least 1, e.g. 1000x40", o.tenants.join(",")),
        };
        let rows = crate::bench_filter::tenant_rows(&index, &layouts, &query_vectors, k, &mut rng);
        if json {
            println!("{}", serde_json::json!({ "queries": query_vectors.len(), "k": k, "rows": rows }));
        } else {
            crate::bench_filter::print_tenants(&rows, k);
        }
        return Ok(());
    }
    if !o.filter_selectivity.is_empty() {
        if let Some(bad) = o.filter_selectivity.iter().find(|s| !(**s > 0.0 && **s <= 1.0)) {
            bail!("--filter-selectivity {bad}: use shares in (0, 1]");
        }
        let (ix, centroids, values) = crate::bench_filter::with_metadata(&index, &o.filter_selectivity, &mut rng);
        let (rows, plans) = crate::bench_filter::rows(&ix, &centroids, &query_vectors, k, &mut rng, o.export.is_some());
        let summary = serde_json::json!({ "vectors": n, "queries": query_vectors.len(), "k": k,
            "ef_search": ix.ef_for(n), "ef_configured": ix.params().ef_search, "m": ix.params().m, "rows": rows });
        if let Some(dir) = &o.export {
            // The filtered copy has the node numbers of `index`: its vectors are the export's.
            std::fs::create_dir_all(dir).map_err(|source| Error::Write { path: dir.to_path_buf(), source })?;
            write_f32s(&dir.join("vectors.f32"), &mut (0..index.nodes() as u32).map(|i| index.vector(i)))?;
            write_f32s(&dir.join("queries.f32"), &mut query_vectors.iter().map(Vec::as_slice))?;
            crate::bench_filter::export(dir, &centroids, &values, store.dimension(), k, &plans, &summary)?;
        }
        if json {
            println!("{summary}");
        } else {
            println!("{n} vectors, {} queries, k={k}, ef_search={}", query_vectors.len(), ix.ef_for(n));
            crate::bench_filter::print(&rows, k, ix.metadata_index().bytes(), ix.nodes() * ix.dimension() * 6);
        }
        return Ok(());
    }
    // A loaded index's f32 section is read through once first, as a serving process's page
    // cache holds it (FAISS holds its vectors in memory): otherwise the first row alone pays
    // mapping in the pages its searches re-score. The same for every query, so it favours none.
    if index.is_mapped() {
        let touched: f32 = (0..index.nodes() as u32).map(|n| index.vector(n)[0]).sum();
        std::hint::black_box(touched);
    }
    let mut rows = Vec::new();
    let plan: Vec<(&'static str, usize)> = [0, 10, 100, 1_000, 10_000]
        .into_iter()
        .map(|e| ("random", e))
        .chain([10, 50, 200, 1_000].into_iter().map(|e| ("correlated", e)))
        .filter(|&(_, e)| e < n / 2)
        .filter(|(kind, e)| o.rows.is_empty() || o.rows.iter().any(|r| *r == format!("{kind}:{e}")))
        .collect();
    if plan.is_empty() {
        bail!(
            "no row matches --rows {} (rows are random:0|10|100|1000|10000, correlated:10|50|200|1000)",
            o.rows.join(",")
        );
    }
    let mut exported_plan = Vec::new();
    for (kind, excluded) in plan {
        let mut sets: Vec<Vec<u32>> = Vec::new();
        let mut lat = Vec::new();
        let mut exact_lat = Vec::new();
        let mut resolve_lat = Vec::new();
        let mut next_lat = Vec::new();
        let cache = ragctx_index::ResolvedCache::default();
        cache.get(&index, &ExclusionSet::default());
        for _ in 0..14 {
            let mut other = ExclusionSet::default();
            while other.chunks.len() < excluded {
                other.chunks.insert(index.chunk_id(rng.below(index.nodes()) as u32).into());
            }
            cache.get(&index, &other);
        }
        let mut alt_lat = Vec::new();
        let mut alt_per_query = Vec::with_capacity(query_vectors.len());
        let mut graph = 0usize;
        let mut widened = 0usize;
        let mut per_query = Vec::with_capacity(query_vectors.len());
        for q in &query_vectors {
            // Exclusion sets are drawn as node numbers (exported as they are) and handed to the
            // index as chunk ids, the way a session passes them.
            let nodes: Vec<u32> = if kind == "random" {
                let mut picked = std::collections::BTreeSet::new();
                while picked.len() < excluded {
                    picked.insert(rng.below(index.nodes()) as u32);
                }
                picked.into_iter().collect()
            } else {
                let own = SearchRequest {
                    vector: q.clone(),
                    limit: excluded,
                    grouping: None,
                    exclusion: ExclusionSet::default(),
                    ..Default::default()
                };
                index.search_with(&own, Some(ForcePath::Exact)).hits.into_iter().map(|(n, _)| n).collect()
            };
            let ex = ExclusionSet {
                chunks: nodes.iter().map(|&n| index.chunk_id(n).into()).collect(),
                ..Default::default()
            };
            if o.export.is_some() {
                sets.push(nodes);
            }
            let t = Instant::now();
            let resolved = index.resolve(&ex);
            resolve_lat.push(t.elapsed().as_secs_f64() * 1e3);
            // The session's next turn: the same ids and 10 more, through the store's cache,
            // which holds this set and other sessions' (the 14 drawn before the loop at first, then the
            // earlier queries').
            cache.get(&index, &ex);
            let mut next = ex.clone();
            while next.chunks.len() < ex.chunks.len() + 10 {
                next.chunks.insert(index.chunk_id(rng.below(index.nodes()) as u32).into());
            }
            let t = Instant::now();
            let next_resolved = cache.get(&index, &next);
            next_lat.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!(next_resolved.excluded(), index.resolve(&next).excluded(), "extended = resolved anew");
            let t = Instant::now();
            let got = index.search_resolved(q, k, None, &resolved, None);
            lat.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let truth = index.search_resolved(q, k, None, &resolved, Some(ForcePath::Exact));
            exact_lat.push(t.elapsed().as_secs_f64() * 1e3);
            let truth: Vec<u32> = truth.hits.iter().map(|h| h.0).collect();
            let recall_of = |hits: &[(u32, f32)]| {
                hits.iter().filter(|h| truth.contains(&h.0)).count() as f64 / truth.len().max(1) as f64
            };
            let alt = if got.path == SearchPath::Graph {
                graph += 1;
                widened += usize::from(got.rounds > 1);
                ForcePath::Exact
            } else {
                ForcePath::Graph
            };
            let t = Instant::now();
            let other = index.search_resolved(q, k, None, &resolved, Some(alt));
            alt_lat.push(t.elapsed().as_secs_f64() * 1e3);
            alt_per_query.push(recall_of(&other.hits));
            per_query.push(recall_of(&got.hits));
        }
        per_query.sort_by(f64::total_cmp);
        lat.sort_by(f64::total_cmp);
        exact_lat.sort_by(f64::total_cmp);
        resolve_lat.sort_by(f64::total_cmp);
        next_lat.sort_by(f64::total_cmp);
        alt_lat.sort_by(f64::total_cmp);
        if o.export.is_some() {
            exported_plan.push(serde_json::json!({"exclusion": kind, "excluded": excluded, "sets": sets}));
        }
        let qn = query_vectors.len() as f64;
        rows.push(SearchRow {
            exclusion: kind,
            excluded,
            p50_ms: percentile(&lat, 0.5),
            p99_ms: percentile(&lat, 0.99),
            recall_at_10: per_query.iter().sum::<f64>() / qn,
            recall_p5: percentile(&per_query, 0.05),
            held_share: held(&per_query),
            path: if graph * 2 >= query_vectors.len() { "graph" } else { "exact" },
            graph_share: graph as f64 / qn,
            widened_share: widened as f64 / qn,
            exact_p50_ms: percentile(&exact_lat, 0.5),
            resolve_p50_ms: percentile(&resolve_lat, 0.5),
            next_turn_resolve_p50_ms: percentile(&next_lat, 0.5),
            alt_path: if graph * 2 >= query_vectors.len() { "exact" } else { "graph" },
            alt_path_p50_ms: percentile(&alt_lat, 0.5),
            alt_path_recall: alt_per_query.iter().sum::<f64>() / qn,
            alt_path_held_share: held(&alt_per_query),
        });
    }
    let summary = serde_json::json!({ "vectors": n, "queries": query_vectors.len(), "k": k, "ef_search": index.ef_for(n), "ef_configured": index.params().ef_search, "m": index.params().m, "mapped": index.is_mapped(), "loaded": o.load.is_some(), "rss_before_search_mb": rss_before_search, "search_peak_rss_mb": search_peak(), "rss_split_mb_after": crate::stats::rss_split_mb(), "generator": if scale > all.len() { o.generator.as_str() } else { "none" }, "queries_from": if o.held_out > 0 { "held-out passages" } else if questions.is_some() { "questions" } else { "noisy copies" }, "build_secs": build_secs, "generate_secs": generate_secs, "unreached": unreached, "unreached_count_ms": unreached_count_ms, "reach_passes": reach.passes, "reach_examined": reach.examined, "reach_linked": reach.linked, "reach_secs": reach.seconds, "rows": rows });
    if let Some(dir) = &o.export {
        std::fs::create_dir_all(dir).map_err(|source| Error::Write { path: dir.to_path_buf(), source })?;
        write_f32s(&dir.join("vectors.f32"), &mut (0..index.nodes() as u32).map(|i| index.vector(i)))?;
        write_f32s(&dir.join("queries.f32"), &mut query_vectors.iter().map(Vec::as_slice))?;
        write_file(
            &dir.join("plan.json"),
            serde_json::to_vec(&serde_json::json!({"dim": store.dimension(), "k": k, "rows": exported_plan}))?,
        )?;
        write_file(&dir.join("ragctx.json"), serde_json::to_vec_pretty(&summary)?)?;
    }
    if json {
        println!("{}", summary);
        return Ok(());
    }
    println!(
        "{n} vectors x {} dims{}, {} queries, k={k}, M={}, ef_search={}{}",
        store.dimension(),
        if scale > all.len() { format!(" ({} generated: {})", scale - all.len(), o.generator) } else { String::new() },
        query_vectors.len(),
        index.params().m,
        index.ef_for(n),
        if build_secs > 0.0 {
            format!(", graph built in {build_secs:.0}s (and {generate_secs:.0}s generating the points)")
        } else {
            String::new()
        }
    );
    println!(
        "{unreached} nodes no layer-0 link reaches (counted over every link in {unreached_count_ms:.1} ms){}",
        if reach.passes > 0 {
            format!(
                "; the build's {} passes giving such nodes a way in looked at {} nodes, linked {}, in {:.2} s",
                reach.passes, reach.examined, reach.linked, reach.seconds
            )
        } else {
            String::new()
        }
    );
    if let (Some(before), Some(peak), Some((anon, file))) =
        (rss_before_search, search_peak(), crate::stats::rss_split_mb())
    {
        println!(
            "RSS {before:.0} MB before the searches, peak {peak:.0} MB during them, {anon:.0} MB own + {file:.0} MB of mapped files after ({})",
            if index.is_mapped() { "f32 vectors mapped from the file" } else { "f32 vectors in memory" }
        );
    }
    println!(
        "| exclusion | excluded | p50 ms | p99 ms | recall@{k} | 5th pct recall | queries ≥ {HELD_AT} | path | other path: p50 ms (recall; queries ≥ {HELD_AT}) | resolve p50 ms | next turn's resolve (+10 ids) p50 ms |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.0}% | {} ({:.0}% graph, {:.0}% widened) | {} {:.3} ({:.3}; {:.0}%) | {:.3} | {:.3} |",
            r.exclusion,
            r.excluded,
            r.p50_ms,
            r.p99_ms,
            r.recall_at_10,
            r.recall_p5,
            100.0 * r.held_share,
            r.path,
            100.0 * r.graph_share,
            100.0 * r.widened_share,
            r.alt_path,
            r.alt_path_p50_ms,
            r.alt_path_recall,
            100.0 * r.alt_path_held_share,
            r.resolve_p50_ms,
            r.next_turn_resolve_p50_ms
        );
    }
    Ok(())
}
