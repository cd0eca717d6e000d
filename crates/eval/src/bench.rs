//! `ragctx bench search` and `ragctx bench turn`: numbers, printed, for the targets of the
//! embedded index and the turn pipeline. Not tests: they measure this machine.

use crate::error::{bail, write_file, Result};
use crate::stats::percentile;
use clap::Subcommand;
use ragctx_app::app::App;
use ragctx_app::config::Settings;
use ragctx_core::SessionId;
use std::path::PathBuf;
use std::time::Instant;

/// The `ragctx bench` subcommands: what each measures, and its flags.
#[derive(Subcommand)]
pub enum BenchCommand {
    /// Search latency and recall@k against exact search, with random and correlated exclusion
    Search(Box<crate::bench_search::SearchOptions>),
    /// What a small write costs on this store: a new document of a few chunks ingested (its
    /// embeddings cached), the first vector and BM25 searches after it, and its delete
    Ingest(crate::bench_ingest::IngestOptions),
    /// Sliding-window sweep: search latency and repeat rate per window size N
    Window(crate::bench_window::WindowOptions),
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
        /// Print the report as one JSON object
        #[arg(long)]
        json: bool,
    },
    /// Embedding throughput: passages per second over the first N chunks of a corpus
    /// (nothing is cached or stored)
    Embed {
        /// Corpus to read as `ragctx ingest` reads it (JSONL, .md, .txt, .html, .docx, or a folder)
        #[arg(long, default_value = "../shared/data/mtrag/corpus_govt.jsonl")]
        corpus: PathBuf,
        /// Passages to embed: the corpus's first N chunks
        #[arg(long, default_value_t = 256)]
        passages: usize,
        /// Embed one text per call (as a query is) and report latency percentiles
        #[arg(long)]
        single: bool,
        /// Also write the passages timed, one JSON object {"text": ...} a line (for timing
        /// peers on the same texts: bench/embed_peers.py)
        #[arg(long)]
        save_passages: Option<PathBuf>,
        /// Print the timings as one JSON object
        #[arg(long)]
        json: bool,
    },
    /// Lexical (BM25) search latency on the store: MTRAG questions, with none and with
    /// random excluded chunk ids, grouped by document and not
    Lexical {
        /// JSONL whose "question" fields are the queries
        #[arg(long, default_value = "../shared/data/mtrag/turns.jsonl")]
        questions: PathBuf,
        /// Queries per row: the file's first N questions
        #[arg(long, default_value_t = 200)]
        queries: usize,
        /// Seed of the random excluded chunk ids
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Also split the store's chunks among T tenants (round robin) in one index and time
        /// a tenant's search (scored with its own BM25 statistics) against the same search
        /// in an index of its chunks alone, e.g. `--tenants 2,10,100`
        #[arg(long, value_delimiter = ',')]
        tenants: Vec<usize>,
        /// Print the results as one JSON object
        #[arg(long)]
        json: bool,
    },
    /// Agent steps in process: the calls `ragctx eval agent --calls-out` wrote, each run as
    /// the MCP `search` tool runs it (one session per conversation) on this data dir; per-call
    /// latency (the in-process side of `bench/mcp-load`)
    Steps {
        /// Calls (JSONL: `conversation`, `query`), as `eval agent --calls-out` writes them
        #[arg(long)]
        calls: PathBuf,
        /// Tokens one call may return
        #[arg(long, default_value_t = ragctx_engine::agent::DEFAULT_SEARCH_BUDGET)]
        budget: usize,
        /// Results of one call at most
        #[arg(long, default_value_t = ragctx_engine::agent::DEFAULT_SEARCH_LIMIT)]
        limit: usize,
        /// Print the report as one JSON object
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
        /// A metadata filter every turn runs with (JSON, docs/filters.md), with the standing one
        #[arg(long)]
        filter: Option<String>,
        /// Print the per-stage latencies as one JSON object
        #[arg(long)]
        json: bool,
    },
}

/// Runs one benchmark and prints its numbers. `http` only talks to a running server; the
/// others open the data dir of `settings` first.
pub fn run(settings: Settings, what: &BenchCommand) -> Result<()> {
    if let BenchCommand::Http { addr, conversations, turns, concurrency, questions, json } = what {
        return crate::bench_http::run(addr, *conversations, *turns, *concurrency, questions, *json);
    }
    let app = App::open(settings)?;
    match what {
        BenchCommand::Search(opts) => crate::bench_search::search(&app, opts),
        BenchCommand::Window(opts) => crate::bench_window::run(&app, opts),
        BenchCommand::Ingest(opts) => crate::bench_ingest::run(&app, opts),
        BenchCommand::Http { .. } => unreachable!("handled before opening the data dir"),
        BenchCommand::Embed { corpus, passages, single, save_passages, json } => {
            embed(&app, corpus, *passages, *single, save_passages.as_deref(), *json)
        }
        BenchCommand::Turn { turns, domain, conversations, filter, json } => {
            let filter = match filter {
                Some(f) => ragctx_core::Filter::parse(f)?,
                None => ragctx_core::Filter::All,
            };
            turn(&app, turns, domain.as_deref(), *conversations, &filter, *json)
        }
        BenchCommand::Steps { calls, budget, limit, json } => steps(&app, calls, *budget, *limit, *json),
        BenchCommand::Lexical { questions, queries, seed, tenants, json } => {
            crate::bench_search::lexical(&app, questions, *queries, *seed, tenants, *json)
        }
    }
}

/// Times each call of `calls` through [`ragctx_engine::agent::Scope::search`], as the MCP
/// tool runs it, from the caller's side (the whole step, commit included).
fn steps(app: &App, calls: &std::path::Path, budget: usize, limit: usize, json: bool) -> Result<()> {
    let text = crate::error::read_to_string(calls)?;
    let scope = app.agent_scope();
    let mut sessions = std::collections::BTreeSet::new();
    let (mut ms, mut tokens) = (Vec::new(), 0usize);
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let call: serde_json::Value =
            serde_json::from_str(line).map_err(|e| crate::error::Error::json(calls, n + 1, e))?;
        let (Some(conv), Some(query)) = (call["conversation"].as_str(), call["query"].as_str()) else {
            bail!("{}:{}: a call needs \"conversation\" and \"query\"", calls.display(), n + 1);
        };
        let session = format!("bench-steps-{conv}");
        if sessions.insert(session.clone()) {
            app.engine.sessions.delete(&SessionId::parse(&session)?)?;
        }
        let started = Instant::now();
        let found = scope.search(&session, query, &ragctx_core::Filter::All, Some(budget), Some(limit))?;
        ms.push(started.elapsed().as_secs_f64() * 1e3);
        tokens += found.tokens;
    }
    for s in &sessions {
        app.engine.sessions.delete(&SessionId::parse(s)?)?;
    }
    ms.sort_by(f64::total_cmp);
    let report = serde_json::json!({
        "chunks": app.engine.vectors.len()?, "calls": ms.len(), "sessions": sessions.len(), "tokens": tokens,
        "p50_ms": percentile(&ms, 0.5), "p99_ms": percentile(&ms, 0.99),
    });
    if json {
        println!("{report}");
    } else {
        println!(
            "{} calls of {} sessions over {} chunks: p50 {:.2} ms, p99 {:.2} ms, {tokens} tokens returned",
            ms.len(),
            sessions.len(),
            report["chunks"],
            percentile(&ms, 0.5),
            percentile(&ms, 0.99)
        );
    }
    Ok(())
}

fn turn(
    app: &App,
    path: &std::path::Path,
    domain: Option<&str>,
    conversations: usize,
    filter: &ragctx_core::Filter,
    json: bool,
) -> Result<()> {
    let domains: Vec<String> = domain.map(str::to_owned).into_iter().collect();
    let mut convs = crate::data::conversations(path, &domains)?;
    convs.truncate(conversations);
    if convs.is_empty() {
        bail!("no conversations in {}", path.display());
    }
    let mut settings = crate::replay_settings(&app.settings);
    settings.filter = settings.filter.clone().and(filter.clone());
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
    let read = ragctx_app::ingest::read_paths(&[corpus.to_path_buf()], &Default::default())?;
    let texts: Vec<&str> = read.chunks.iter().take(n).map(|c| c.chunk.text.as_str()).collect();
    if texts.is_empty() {
        bail!("{} has no passages", corpus.display());
    }
    if let Some(path) = save {
        let lines: String =
            texts.iter().map(|t| serde_json::json!({ "text": t }).to_string() + "\n").collect::<Vec<_>>().concat();
        write_file(path, lines)?;
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
