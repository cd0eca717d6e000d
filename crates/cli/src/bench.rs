//! `ragctx bench search` and `ragctx bench turn`: numbers, printed, for the targets of the
//! embedded index and the turn pipeline. Not tests: they measure this machine.

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use ragctx_app::app::App;
use ragctx_app::config::Settings;
use ragctx_core::{ExclusionSet, SearchPath, SearchRequest, SessionId, VectorStore};
use ragctx_index::{ForcePath, IndexParams, VectorIndex};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Search latency and recall@k against exact search, with random and correlated exclusion
    Search {
        /// Queries per row
        #[arg(long, default_value_t = 200)]
        queries: usize,
        #[arg(long, default_value_t = 10)]
        k: usize,
        /// Grow the corpus to this many vectors with noisy copies of the stored ones
        #[arg(long, default_value_t = 0)]
        scale: usize,
        /// JSONL file whose "question" fields are embedded as queries (default: noisy
        /// copies of stored vectors)
        #[arg(long)]
        questions: Option<PathBuf>,
        #[arg(long)]
        json: bool,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Write the vectors, queries, exclusion sets and these results here, for
        /// bench/compare.py to run the peers on exactly the same input
        #[arg(long)]
        export: Option<PathBuf>,
        /// Only these rows, e.g. `--rows correlated:1000` (for profiling one path)
        #[arg(long, value_delimiter = ',')]
        rows: Vec<String>,
    },
    /// Sliding-window sweep: search latency and repeat rate per window size N
    Window {
        /// Conversations file (turns.jsonl format)
        #[arg(long, default_value = "../shared/data/mtrag/turns.jsonl")]
        turns: PathBuf,
        #[arg(long)]
        domain: Option<String>,
        /// Comma-separated window sizes; 0 = all turns
        #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,0")]
        windows: Vec<usize>,
        /// Conversations replayed per window size
        #[arg(long, default_value_t = 30)]
        conversations: usize,
        /// Turns of the synthetic long session (its questions are all the domain's questions)
        #[arg(long, default_value_t = 60)]
        long_session: usize,
        /// Recommend the largest window whose p99 search latency stays under this
        #[arg(long, default_value_t = 5.0)]
        latency_ceiling_ms: f64,
        #[arg(long)]
        json: bool,
    },
    /// Load test of a running `ragctx serve`: concurrent sessions of turns over HTTP, then
    /// checks that every turn was remembered
    Http {
        /// Address of the server, e.g. 127.0.0.1:8080
        #[arg(long)]
        addr: String,
        /// Conversations (sessions) to run
        #[arg(long, default_value_t = 32)]
        conversations: usize,
        /// Turns per conversation
        #[arg(long, default_value_t = 8)]
        turns: usize,
        /// Client threads
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
        /// Questions (turns.jsonl format) to draw from
        #[arg(long, default_value = "../shared/data/mtrag/turns.jsonl")]
        questions: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Embedding throughput: passages per second over the first N chunks of a corpus
    /// (nothing is cached or stored)
    Embed {
        /// Corpus to read as `ragctx ingest` reads it (JSONL, .md, .txt, .html, or a folder)
        #[arg(long, default_value = "../shared/data/mtrag/corpus_govt.jsonl")]
        corpus: PathBuf,
        #[arg(long, default_value_t = 256)]
        passages: usize,
        /// Embed one text per call (as a query is) and report latency percentiles
        #[arg(long)]
        single: bool,
        /// Also write the passages timed, one JSON object {"text": ...} a line (for timing
        /// peers on the same texts: bench/embed_peers.py)
        #[arg(long)]
        save_passages: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Lexical (BM25) search latency on the store: MTRAG questions, with none and with
    /// random excluded chunk ids, grouped by document and not
    Lexical {
        /// JSONL whose "question" fields are the queries
        #[arg(long, default_value = "../shared/data/mtrag/turns.jsonl")]
        questions: PathBuf,
        #[arg(long, default_value_t = 200)]
        queries: usize,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        #[arg(long)]
        json: bool,
    },
    /// Whole turns: replays conversations (MTRAG turns.jsonl format) through the engine
    Turn {
        /// Conversations file (turns.jsonl format); the user messages are replayed in order
        #[arg(long)]
        turns: PathBuf,
        /// Only conversations of this domain
        #[arg(long)]
        domain: Option<String>,
        /// Conversations to replay at most
        #[arg(long, default_value_t = 20)]
        conversations: usize,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(settings: Settings, what: &BenchCommand) -> Result<()> {
    if let BenchCommand::Http { addr, conversations, turns, concurrency, questions, json } = what {
        return crate::bench_http::run(addr, *conversations, *turns, *concurrency, questions, *json);
    }
    let app = App::open(settings)?;
    match what {
        BenchCommand::Search { queries, k, scale, questions, json, seed, export, rows } => {
            let opts = SearchOptions {
                rows: rows.clone(),
                queries: *queries,
                k: *k,
                scale: *scale,
                questions: questions.clone(),
                json: *json,
                seed: *seed,
                export: export.clone(),
            };
            search(&app, &opts)
        }
        BenchCommand::Window { turns, domain, windows, conversations, long_session, latency_ceiling_ms, json } => {
            let opts = crate::bench_window::WindowOptions {
                turns: turns.clone(),
                domain: domain.clone(),
                windows: windows.clone(),
                conversations: *conversations,
                long_session: *long_session,
                latency_ceiling_ms: *latency_ceiling_ms,
                json: *json,
            };
            crate::bench_window::run(&app, &opts)
        }
        BenchCommand::Http { .. } => unreachable!("handled before opening the data dir"),
        BenchCommand::Embed { corpus, passages, single, save_passages, json } => {
            embed(&app, corpus, *passages, *single, save_passages.as_deref(), *json)
        }
        BenchCommand::Turn { turns, domain, conversations, json } => {
            turn(&app, turns, domain.as_deref(), *conversations, *json)
        }
        BenchCommand::Lexical { questions, queries, seed, json } => lexical(&app, questions, *queries, *seed, *json),
    }
}

/// The first `n` "question" fields of a JSONL file (lines without one are passed over).
fn read_questions(path: &std::path::Path, n: usize) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["question"].as_str().map(str::to_owned))
        .take(n)
        .collect())
}

/// Times `search_lexical` on the embedded store (its index loaded or built first, untimed).
fn lexical(app: &App, questions: &std::path::Path, queries: usize, seed: u64, json: bool) -> Result<()> {
    let store = app.data("bench lexical")?.vector_store();
    let qs = read_questions(questions, queries)?;
    if qs.is_empty() {
        bail!("{} has no questions", questions.display());
    }
    let ids: Vec<ragctx_core::ChunkId> = store.all()?.into_iter().map(|c| c.chunk.id).collect();
    if ids.is_empty() {
        bail!("the store is empty: ingest a corpus first");
    }
    let started = Instant::now();
    let request = |q: &str, excluded: ExclusionSet, grouping| ragctx_core::LexicalRequest {
        query: q.to_owned(),
        limit: 8,
        grouping,
        exclusion: excluded,
    };
    let first = store.search_lexical(&request("warm up", ExclusionSet::default(), None))?;
    if first.is_none() {
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
    let out = serde_json::json!({"chunks": ids.len(), "index_ready_ms": ready_ms, "rows": rows});
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
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

/// xorshift64: reproducible sampling without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 11) as f32 / (1u64 << 53) as f32 * 2.0 - 1.0
    }
}

fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= n);
    v
}

fn noisy(v: &[f32], rng: &mut Rng, amount: f32) -> Vec<f32> {
    normalise(v.iter().map(|x| x + amount * rng.unit()).collect())
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[derive(Serialize)]
struct SearchRow {
    exclusion: &'static str,
    excluded: usize,
    p50_ms: f64,
    p99_ms: f64,
    #[serde(rename = "recall@10")]
    recall_at_10: f64,
    path: &'static str,
    graph_share: f64,
    exact_p50_ms: f64,
    /// Resolving the excluded ids into node numbers, once per set (outside `p50_ms`, as
    /// FAISS builds its ID selector outside its search).
    resolve_p50_ms: f64,
    /// Resolving a session's next set — the same ids and 10 more — through a store's cache
    /// that also holds the empty set and 14 other sessions' sets of the row's size: the
    /// kept set is extended by the difference. What a turn pays.
    next_turn_resolve_p50_ms: f64,
    /// The path the planner did not choose, forced on the same query: what the other
    /// choice would have cost (a wrong choice shows as alt < p50).
    alt_path: &'static str,
    alt_path_p50_ms: f64,
    alt_path_recall: f64,
}

pub struct SearchOptions {
    /// Only these rows (`random:10000`, `correlated:1000`); empty = all.
    pub rows: Vec<String>,
    pub queries: usize,
    pub k: usize,
    pub scale: usize,
    pub questions: Option<PathBuf>,
    pub json: bool,
    pub seed: u64,
    pub export: Option<PathBuf>,
}

fn write_f32s(path: &std::path::Path, rows: &mut dyn Iterator<Item = &[f32]>) -> Result<()> {
    use std::io::Write;
    let mut w =
        std::io::BufWriter::new(std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?);
    for r in rows {
        for x in r {
            w.write_all(&x.to_le_bytes())?;
        }
    }
    w.flush()?;
    Ok(())
}

fn search(app: &App, o: &SearchOptions) -> Result<()> {
    let (queries, k, scale, questions, json, seed) = (o.queries, o.k, o.scale, o.questions.as_ref(), o.json, o.seed);
    let store = app.data("bench search")?.vector_store();
    let all = store.all()?;
    if all.is_empty() {
        bail!("the store is empty: ingest a corpus first (e.g. ragctx ingest ../shared/data/mtrag/corpus_*.jsonl)");
    }
    let mut rng = Rng(seed.max(1));
    let params = store.with_index(|ix| ix.params());
    let started = Instant::now();
    let index: VectorIndex = if scale > all.len() {
        let mut ix = VectorIndex::new(store.dimension(), IndexParams { exact_below: params.exact_below, ..params });
        for c in &all {
            ix.upsert(c.chunk.id.as_str(), c.chunk.document_id.as_str(), c.chunk.weight, &c.vector);
        }
        for i in 0..scale - all.len() {
            let src = &all[rng.below(all.len())];
            let v = noisy(&src.vector, &mut rng, 0.02);
            ix.upsert(&format!("{}~copy{i}", src.chunk.id), &format!("{}~copy{i}", src.chunk.document_id), 1.0, &v);
            if !json && (i + 1) % 10_000 == 0 {
                eprintln!("built {} of {scale}", all.len() + i + 1);
            }
        }
        ix
    } else {
        store.with_index(|ix| ix.clone())
    };
    let build_secs = if scale > all.len() { started.elapsed().as_secs_f64() } else { 0.0 };
    // Node ids double as the dense ids of the export: no retired nodes.
    let index = if index.dead_share() > 0.0 { index.compacted() } else { index };
    let query_vectors: Vec<Vec<f32>> = match questions {
        Some(path) => {
            let qs = read_questions(path, queries)?;
            let refs: Vec<&str> = qs.iter().map(String::as_str).collect();
            app.embedder.embed_queries(&refs)?
        }
        None => (0..queries).map(|_| noisy(&all[rng.below(all.len())].vector, &mut rng, 0.05)).collect(),
    };
    let n = index.len();
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
        let mut alt_recall = 0.0;
        let mut recall = 0.0;
        let mut graph = 0usize;
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
            // which holds this set, the empty one and other sessions' sets.
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
                ForcePath::Exact
            } else {
                ForcePath::Graph
            };
            let t = Instant::now();
            let other = index.search_resolved(q, k, None, &resolved, Some(alt));
            alt_lat.push(t.elapsed().as_secs_f64() * 1e3);
            alt_recall += recall_of(&other.hits);
            recall += recall_of(&got.hits);
        }
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
            recall_at_10: recall / qn,
            path: if graph * 2 >= query_vectors.len() { "graph" } else { "exact" },
            graph_share: graph as f64 / qn,
            exact_p50_ms: percentile(&exact_lat, 0.5),
            resolve_p50_ms: percentile(&resolve_lat, 0.5),
            next_turn_resolve_p50_ms: percentile(&next_lat, 0.5),
            alt_path: if graph * 2 >= query_vectors.len() { "exact" } else { "graph" },
            alt_path_p50_ms: percentile(&alt_lat, 0.5),
            alt_path_recall: alt_recall / qn,
        });
    }
    let summary = serde_json::json!({ "vectors": n, "queries": query_vectors.len(), "k": k, "ef_search": index.params().ef_search, "m": index.params().m, "rows": rows });
    if let Some(dir) = &o.export {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        write_f32s(&dir.join("vectors.f32"), &mut (0..index.nodes() as u32).map(|i| index.vector(i)))?;
        write_f32s(&dir.join("queries.f32"), &mut query_vectors.iter().map(Vec::as_slice))?;
        std::fs::write(
            dir.join("plan.json"),
            serde_json::to_vec(&serde_json::json!({"dim": store.dimension(), "k": k, "rows": exported_plan}))?,
        )?;
        std::fs::write(dir.join("ragctx.json"), serde_json::to_vec_pretty(&summary)?)?;
    }
    if json {
        println!("{}", summary);
        return Ok(());
    }
    println!(
        "{n} vectors x {} dims, {} queries, k={k}, M={}, ef_search={}{}",
        store.dimension(),
        query_vectors.len(),
        index.params().m,
        index.params().ef_search,
        if build_secs > 0.0 { format!(", graph built in {build_secs:.0}s") } else { String::new() }
    );
    println!(
        "| exclusion | excluded | p50 ms | p99 ms | recall@{k} | path | other path: p50 ms (recall) | resolve p50 ms | next turn's resolve (+10 ids) p50 ms |"
    );
    println!("|---|---:|---:|---:|---:|---|---|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {:.3} | {:.3} | {:.3} | {} ({:.0}% graph) | {} {:.3} ({:.3}) | {:.3} | {:.3} |",
            r.exclusion,
            r.excluded,
            r.p50_ms,
            r.p99_ms,
            r.recall_at_10,
            r.path,
            100.0 * r.graph_share,
            r.alt_path,
            r.alt_path_p50_ms,
            r.alt_path_recall,
            r.resolve_p50_ms,
            r.next_turn_resolve_p50_ms
        );
    }
    Ok(())
}

fn turn(app: &App, path: &std::path::Path, domain: Option<&str>, conversations: usize, json: bool) -> Result<()> {
    let domains: Vec<String> = domain.map(str::to_owned).into_iter().collect();
    let mut convs = crate::eval_mtrag::conversations(path, &domains)?;
    convs.truncate(conversations);
    if convs.is_empty() {
        bail!("no conversations in {}", path.display());
    }
    let settings = app.settings.turn.clone();
    // Every stage of the trace, plus the engine's own share of a turn.
    let mut parts: std::collections::BTreeMap<String, Vec<f64>> = std::collections::BTreeMap::new();
    for (i, conv) in convs.iter().enumerate() {
        let session = SessionId::parse(&format!("bench-turn-{i}"))?;
        app.engine.sessions.delete(&session)?;
        for question in &conv.messages {
            let out = app.engine.ask(&session, question, &settings)?;
            let t = &out.trace.timings_ms;
            let get = |k: &str| t.get(k).copied().unwrap_or_default();
            for (k, v) in t {
                parts.entry(k.clone()).or_default().push(*v);
            }
            parts.entry("overhead".into()).or_default().push(get("total") - get("embed") - get("generate"));
            parts
                .entry("overhead_without_commit".into())
                .or_default()
                .push(get("total") - get("embed") - get("generate") - get("remember"));
        }
        app.engine.sessions.delete(&session)?;
    }
    for v in parts.values_mut() {
        v.sort_by(f64::total_cmp);
    }
    let turns = parts.get("total").map_or(0, Vec::len);
    let stats: serde_json::Map<String, serde_json::Value> = parts
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::json!({"p50_ms": percentile(v, 0.5), "p99_ms": percentile(v, 0.99)})))
        .collect();
    let report = serde_json::json!({"chunks": app.engine.vectors.len()?, "turns": turns, "conversations": convs.len(), "parts": stats});
    if json {
        println!("{report}");
    } else {
        println!("{turns} turns of {} conversations over {} chunks", convs.len(), report["chunks"]);
        println!("| part | p50 ms | p99 ms |\n|---|---:|---:|");
        let names = [
            ("total", "full turn"),
            ("overhead", "engine overhead (total − embed − generate)"),
            ("overhead_without_commit", "engine overhead without the durable commit"),
            ("embed", "query embedding"),
            ("search", "search"),
            ("dedupe", "dedupe"),
            ("assemble", "context assembly (budget, markers)"),
            ("generate", "extractive generation"),
            ("remember", "durable commit (session + trace)"),
        ];
        for (k, name) in names {
            if let Some(v) = parts.get(k) {
                println!("| {name} | {:.2} | {:.2} |", percentile(v, 0.5), percentile(v, 0.99));
            }
        }
    }
    Ok(())
}

/// Times `embed` over the first `n` chunks of `corpus`, read as `ragctx ingest` reads it:
/// all in one call (throughput), or one text per call (query latency).
fn embed(
    app: &App,
    corpus: &std::path::Path,
    n: usize,
    single: bool,
    save: Option<&std::path::Path>,
    json: bool,
) -> Result<()> {
    let read = ragctx_app::ingest::read_paths(&[corpus.to_path_buf()])?;
    let texts: Vec<&str> = read.chunks.iter().take(n).map(|c| c.chunk.text.as_str()).collect();
    if texts.is_empty() {
        bail!("{} has no passages", corpus.display());
    }
    if let Some(path) = save {
        let lines: String =
            texts.iter().map(|t| serde_json::json!({ "text": t }).to_string() + "\n").collect::<Vec<_>>().concat();
        std::fs::write(path, lines).with_context(|| format!("writing {}", path.display()))?;
    }
    // Tokens as the encoder sees them: known for the in-process model only.
    let tokens: Option<usize> = match &app.local {
        Some(local) => Some(local.token_counts(&texts)?.iter().sum()),
        None => None,
    };
    let mean_tokens = tokens.map(|t| t as f64 / texts.len() as f64);
    let about = match mean_tokens {
        Some(m) => format!("{m:.0} tokens on average"),
        None => format!("via {}", app.embedder.model_id()),
    };
    if single {
        let mut ms = Vec::with_capacity(texts.len());
        for text in &texts {
            let t = Instant::now();
            app.embedder.embed_queries(&[text])?;
            ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        ms.sort_by(f64::total_cmp);
        let (p50, p99) = (percentile(&ms, 0.5), percentile(&ms, 0.99));
        if json {
            let out = serde_json::json!({"texts": ms.len(), "mean_tokens": mean_tokens, "p50_ms": p50, "p99_ms": p99});
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            println!("{} texts one at a time ({about}): p50 {p50:.2} ms, p99 {p99:.2} ms", ms.len());
        }
        return Ok(());
    }
    let start = Instant::now();
    let vectors = app.embedder.embed(&texts)?;
    let secs = start.elapsed().as_secs_f64();
    let rate = vectors.len() as f64 / secs;
    if json {
        let out = serde_json::json!({"passages": vectors.len(), "seconds": secs, "passages_per_s": rate,
            "tokens": tokens, "tokens_per_s": tokens.map(|t| t as f64 / secs), "mean_tokens": mean_tokens,
            "model": app.embedder.model_id()});
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let tokens_per_s = tokens.map(|t| format!(", {:.0} tokens/s", t as f64 / secs)).unwrap_or_default();
        println!("{} passages ({about}) in {secs:.2} s: {rate:.1} passages/s{tokens_per_s}", vectors.len());
    }
    Ok(())
}
