//! `ragctx eval`: offline evaluation on real data (DESIGN §6).

use crate::error::{bail, read_to_string, Error, Result};
use crate::mtrag::MtragOptions;
use crate::progress::embed_all;
use crate::stats::percentile;
use clap::Subcommand;
use ragctx_app::config::Settings;
use ragctx_core::{
    Chunk, EmbeddedChunk, Embedder, ExclusionSet, Fusion, Retrieval, Strategy, TurnSettings, VectorStore,
};
use ragctx_engine::retrieve::retrieve;
use ragctx_engine::Granularity;
use ragctx_index::IndexParams;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The `ragctx eval` subcommands: what each evaluates, and its flags.
#[derive(Subcommand)]
// Parsed once per process: the size of the MTRAG variant's flags costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum EvalCommand {
    /// The intent rules against labelled sets: accuracy and the confusion matrix. Without
    /// --cases: eval/intent.jsonl (original), eval/intent/train.jsonl and
    /// eval/intent/holdout.jsonl, each reported on its own; the holdout's accuracy is not gated
    Intent {
        /// One JSONL file of {"text", "intent": "new"|"follow_up"|"reshow"} instead of the three sets
        #[arg(long)]
        cases: Option<PathBuf>,
        /// Fail below this accuracy (original and train, or the --cases file); a message
        /// wrongly taken for a reshow fails on every set
        #[arg(long, default_value_t = 0.95)]
        min_accuracy: f64,
        /// Print accuracy, confusion matrix and misses as JSON: one object, or without
        /// --cases one object keyed by set (original, train, holdout)
        #[arg(long)]
        json: bool,
    },
    /// The hard cases written by us: cross-document conflicts asked three ways each, with
    /// identical and near-identical copies of their sides among distractors — do both sides
    /// reach the context, do paraphrases reach the same evidence, is any text read twice, does
    /// every citation name a document of the context?
    Conflicts {
        /// JSON of conflict cases (paraphrased questions, the two documents that disagree and
        /// copies of them) and distractors
        #[arg(long, default_value = "eval/hardcases.json")]
        file: PathBuf,
        /// Print the rows as one JSON object
        #[arg(long)]
        json: bool,
    },
    /// Multi-turn evaluation on MTRAG: strategies side by side, every metric of DESIGN §6
    Mtrag {
        /// Folder with turns.jsonl and corpus_DOMAIN.jsonl
        #[arg(long, default_value = "../shared/data/mtrag")]
        data: PathBuf,
        /// Conversations in the turns.jsonl format [default: DATA/turns.jsonl]
        #[arg(long)]
        turns: Option<PathBuf>,
        /// Folder with corpus_DOMAIN.jsonl [default: DATA]
        #[arg(long)]
        corpus_dir: Option<PathBuf>,
        /// Comma-separated domains (default: all in the turns file)
        #[arg(long, value_delimiter = ',')]
        domains: Vec<String>,
        /// Comma-separated: none, group, exclude, full, full+cited, history (the seed's paths,
        /// one chunk per document), engine, client (the memory modes with their defaults),
        /// none+conv (the conversation plus plain top-k filling the budget: a stateless app),
        /// history@budget (earlier contexts newest first, then plain top-k filling the budget)
        /// (default: all of them but the two baselines, which join with --budgets)
        #[arg(long, value_delimiter = ',')]
        strategies: Vec<String>,
        /// document, chunk, or both
        #[arg(long, default_value = "both")]
        granularity: String,
        /// Comma-separated query modes: last, history (the question after the two user turns
        /// before it), weighted (embeddings of the question and the two before it mixed 1 : ½ : ¼),
        /// rewrite (MTRAG's human rewrite), condense (the engine's `condense openai`: the
        /// configured condenser rewrites each question with earlier turns; see docs/condense.md)
        #[arg(long, value_delimiter = ',', default_value = "last")]
        query: Vec<String>,
        /// Comma-separated: dense, lexical, hybrid [default: the configured retrieval]
        #[arg(long, value_delimiter = ',')]
        retrieval: Vec<String>,
        /// Comma-separated fusions for hybrid: rrf, weighted, rescore [default: the configured fusion]
        #[arg(long, value_delimiter = ',')]
        fusion: Vec<String>,
        /// Context budget in cl100k_base tokens [default: the configured budget]
        #[arg(long, conflicts_with = "budgets")]
        budget: Option<usize>,
        /// Comma-separated budgets: every strategy but unbounded `history` runs at each, and
        /// the report opens with evidence recall against prompt tokens, one curve per strategy
        #[arg(long, value_delimiter = ',')]
        budgets: Vec<usize>,
        /// Replay at most this many conversations
        #[arg(long)]
        conversations: Option<usize>,
        /// Replay only the conversations of this fold (0-4) of `eval fit-query`'s five
        #[arg(long)]
        fold: Option<u64>,
        /// The follow-up query's weights: hand (1 : ¼ : ⅛, no working set), or a weights file
        /// of `eval fit-query` [default: the weights the engine ships]
        #[arg(long)]
        query_weights: Option<String>,
        /// The sentence scorer of `compress learned`: a weights file of `eval fit-sentences`
        /// (with --fold, one fitted with that fold held out) [default: the scorer the engine
        /// ships]
        #[arg(long)]
        sentence_scorer: Option<PathBuf>,
        /// Write mtrag.json and mtrag.html here
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print the report as one JSON object instead of the table
        #[arg(long)]
        json: bool,
    },
    /// MTRAG's conversations replayed as an agent calls a search tool (three calls per user
    /// turn: the question, its human rewrite, the previous question again): ragctx's MCP
    /// `search` beside a plain top-k tool with no session, the same budget and limit per call
    /// — tokens returned, duplicate chunk tokens, evidence held, calls with nothing new
    Agent {
        /// Folder with turns.jsonl and corpus_DOMAIN.jsonl
        #[arg(long, default_value = "../shared/data/mtrag")]
        data: PathBuf,
        /// Comma-separated domains (default: all in the turns file)
        #[arg(long, value_delimiter = ',')]
        domains: Vec<String>,
        /// Tokens one call may return (the MCP search tool's default)
        #[arg(long, default_value_t = ragctx_engine::agent::DEFAULT_SEARCH_BUDGET)]
        budget: usize,
        /// Results of one call at most (the MCP search tool's default)
        #[arg(long, default_value_t = ragctx_engine::agent::DEFAULT_SEARCH_LIMIT)]
        limit: usize,
        /// Replay at most this many conversations
        #[arg(long)]
        conversations: Option<usize>,
        /// Print the report as one JSON object
        #[arg(long)]
        json: bool,
        /// Write every call of the schedule as JSONL (conversation, domain, turn, query, gold),
        /// for replaying the same calls through an MCP client (bench/agent-mcp)
        #[arg(long)]
        calls_out: Option<PathBuf>,
    },
    /// Fits the sentence scorer of `compress learned` on MTRAG's development split: replays
    /// the conversations as `eval mtrag`'s engine row, labels each candidate sentence by the
    /// gold passages and reference answers, cross-validates by conversation (5 folds), prints
    /// the held-out folds and writes the weights file the engine ships
    /// (crates/engine/sentence-scorer.json)
    FitSentences {
        /// Folder with turns.jsonl and corpus_DOMAIN.jsonl
        #[arg(long, default_value = "../shared/data/mtrag")]
        data: PathBuf,
        /// Comma-separated domains (default: all in the turns file)
        #[arg(long, value_delimiter = ',')]
        domains: Vec<String>,
        /// Fit the written weights on every fold but this one (0-4), for `eval mtrag --fold`
        #[arg(long)]
        hold_out: Option<u64>,
        /// The share of the training turns' answer-bearing sentences the threshold keeps
        #[arg(long, default_value_t = crate::fit_sentences::RECALL)]
        recall: f64,
        /// Label the sentences holding the reference answer in every candidate passage, not
        /// only in the gold passages
        #[arg(long)]
        any_passage: bool,
        /// Write the weights file here
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Fits the follow-up query's weights (earlier questions, the previous turn's chunks) on
    /// MTRAG for recall@k, cross-validated by conversation (5 folds); prints the held-out
    /// folds and writes the weights file the engine ships (crates/engine/query-weights.json)
    FitQuery {
        /// Folder with turns.jsonl and corpus_DOMAIN.jsonl
        #[arg(long, default_value = "../shared/data/mtrag")]
        data: PathBuf,
        /// Comma-separated domains (default: all in the turns file)
        #[arg(long, value_delimiter = ',')]
        domains: Vec<String>,
        /// Recall is counted in the top K chunks
        #[arg(long, default_value_t = 10)]
        k: usize,
        /// Fit the written weights on every fold but this one (0-4), for `eval mtrag --fold`
        #[arg(long)]
        hold_out: Option<u64>,
        /// Write the weights file here
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// BEIR-style retrieval check (nDCG@10, Recall@10, Recall@100), e.g. SciFact
    Beir {
        /// Folder with corpus.jsonl, queries_test.jsonl (or queries.jsonl) and qrels/test.tsv
        #[arg(long, alias = "dataset", default_value = "../shared/data/scifact")]
        data: PathBuf,
        /// Comma-separated: dense, lexical (BM25), hybrid; one row each
        #[arg(long, value_delimiter = ',', default_value = "dense")]
        retrieval: Vec<String>,
        /// Comma-separated fusions for hybrid: weighted, rrf, rescore; one row each
        #[arg(long, value_delimiter = ',', default_value = "weighted")]
        fusion: Vec<String>,
        /// Print each row as a JSON object (several rows: one array)
        #[arg(long)]
        json: bool,
    },
}

/// Evaluations load the model and use the data dir's embedding cache only: they never
/// touch the chunks or sessions in it.
pub fn run(settings: &Settings, what: &EvalCommand) -> Result<()> {
    match what {
        EvalCommand::Intent { cases: Some(cases), min_accuracy, json } => {
            crate::intent::run(cases, *min_accuracy, *json)
        }
        EvalCommand::Intent { cases: None, min_accuracy, json } => crate::intent::run_splits(*min_accuracy, *json),
        EvalCommand::Conflicts { file, json } => crate::hardcases::run(settings, file, *json),
        EvalCommand::FitQuery { data, domains, k, hold_out, out } => {
            let opts = crate::fit_query::FitOptions {
                turns: data.join("turns.jsonl"),
                corpus_dir: data.clone(),
                domains: domains.clone(),
                k: *k,
                hold_out: *hold_out,
                out: out.clone(),
                command: std::env::args().skip(1).collect::<Vec<_>>().join(" "),
            };
            crate::fit_query::run(settings, &opts)
        }
        EvalCommand::FitSentences { data, domains, hold_out, recall, any_passage, out } => {
            let opts = crate::fit_sentences::FitSentencesOptions {
                turns: data.join("turns.jsonl"),
                corpus_dir: data.clone(),
                domains: domains.clone(),
                hold_out: *hold_out,
                recall: *recall,
                any_passage: *any_passage,
                out: out.clone(),
                command: format!("ragctx {}", std::env::args().skip(1).collect::<Vec<_>>().join(" ")),
            };
            crate::fit_sentences::run(settings, &opts)
        }
        EvalCommand::Agent { data, domains, budget, limit, conversations, json, calls_out } => {
            let opts = crate::agent::AgentOptions {
                turns: data.join("turns.jsonl"),
                corpus_dir: data.clone(),
                domains: domains.clone(),
                budget: *budget,
                limit: *limit,
                conversations: *conversations,
                json: *json,
                calls_out: calls_out.clone(),
            };
            crate::agent::run(settings, &opts)
        }
        EvalCommand::Beir { data, retrieval, fusion, json } => {
            let runs = retrieval_runs(retrieval, fusion)?;
            beir(ragctx_app::app::embedder(settings)?.as_ref(), settings.data_dir(), data, &runs, *json)
        }
        EvalCommand::Mtrag {
            data,
            turns,
            corpus_dir,
            domains,
            strategies,
            granularity,
            query,
            retrieval,
            fusion,
            budget,
            budgets,
            conversations,
            fold,
            query_weights,
            sentence_scorer,
            out,
            json,
        } => {
            let turn = settings.turn();
            let retrieval =
                if retrieval.is_empty() { vec![turn.retrieval.as_str().to_owned()] } else { retrieval.clone() };
            let fusion = if fusion.is_empty() { vec![turn.fusion.as_str().to_owned()] } else { fusion.clone() };
            let granularities = match granularity.as_str() {
                "both" => vec![Granularity::Document, Granularity::Chunk],
                g => vec![g.parse()?],
            };
            for q in query {
                if !["last", "history", "weighted", "rewrite", "condense"].contains(&q.as_str()) {
                    bail!("unknown query mode {q:?}: use last, history, weighted, rewrite or condense");
                }
            }
            if query.iter().any(|q| q == "condense") && settings.condense().is_none() {
                bail!("--query condense needs a condenser endpoint: set condense_url and condense_model (RAGCTX_CONDENSE_URL, RAGCTX_CONDENSE_MODEL; scripts/llm-up starts one)");
            }
            let opts = MtragOptions {
                turns: turns.clone().unwrap_or_else(|| data.join("turns.jsonl")),
                corpus_dir: corpus_dir.clone().unwrap_or_else(|| data.clone()),
                domains: domains.clone(),
                strategies: if strategies.is_empty() {
                    // The budget curves come with the baselines a chat app would run.
                    let baselines = if budgets.is_empty() { &[][..] } else { &crate::mtrag::BUDGET_BASELINES[..] };
                    crate::mtrag::ALL_STRATEGIES.iter().chain(baselines).map(|s| s.to_string()).collect()
                } else {
                    strategies.clone()
                },
                granularities,
                queries: query.clone(),
                retrievals: retrieval_runs(&retrieval, &fusion)?,
                budget: *budget,
                budgets: budgets.clone(),
                conversations: *conversations,
                fold: *fold,
                query_weights: match query_weights.as_deref() {
                    None => None,
                    Some("hand") => Some(ragctx_engine::QueryWeights::HAND_SET),
                    Some(path) => Some(ragctx_engine::QueryWeights::parse(&crate::error::read_to_string(
                        std::path::Path::new(path),
                    )?)?),
                },
                sentence_scorer: match sentence_scorer {
                    None => None,
                    Some(path) => Some(ragctx_engine::sentences::Scorer::parse(&crate::error::read_to_string(path)?)?),
                },
                out: out.clone(),
                json: *json,
            };
            crate::mtrag::run(settings, &opts)
        }
    }
}

/// Each retrieval asked for, hybrid once per fusion.
pub fn retrieval_runs(retrieval: &[String], fusion: &[String]) -> Result<Vec<(Retrieval, Option<Fusion>)>> {
    let mut runs = Vec::new();
    for r in retrieval {
        let r: Retrieval = r.parse()?;
        match r {
            Retrieval::Hybrid => {
                for f in fusion {
                    runs.push((r, Some(f.parse()?)));
                }
            }
            _ => runs.push((r, None)),
        }
    }
    Ok(runs)
}

fn read_jsonl(path: &Path) -> Result<Vec<serde_json::Value>> {
    let text = read_to_string(path)?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| Error::json(path, i + 1, e)))
        .collect()
}

/// `query-id → (doc-id → relevance)` from a BEIR qrels TSV with a header line.
pub fn read_qrels(path: &Path) -> Result<HashMap<String, HashMap<String, f64>>> {
    let text = read_to_string(path)?;
    let mut out: HashMap<String, HashMap<String, f64>> = HashMap::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 3 {
            bail!("{}:{}: expected query-id, corpus-id, score", path.display(), i + 1);
        }
        let score: f64 =
            f[2].trim().parse().map_err(|e| Error::Input(format!("{}:{}: bad score: {e}", path.display(), i + 1)))?;
        out.entry(f[0].to_owned()).or_default().insert(f[1].to_owned(), score);
    }
    Ok(out)
}

/// nDCG@k with graded gains (2^rel - 1, as BEIR's pytrec_eval); 0 when nothing is relevant.
pub fn ndcg_at(ranked: &[String], rel: &HashMap<String, f64>, k: usize) -> f64 {
    let gain = |r: f64| 2f64.powf(r) - 1.0;
    let dcg: f64 = ranked
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, d)| gain(*rel.get(d).unwrap_or(&0.0)) / (i as f64 + 2.0).log2())
        .sum();
    let mut ideal: Vec<f64> = rel.values().copied().filter(|&r| r > 0.0).collect();
    ideal.sort_by(|a, b| b.total_cmp(a));
    let idcg: f64 = ideal.iter().take(k).enumerate().map(|(i, &r)| gain(r) / (i as f64 + 2.0).log2()).sum();
    if idcg == 0.0 {
        0.0
    } else {
        dcg / idcg
    }
}

/// Recall@k: the share of the documents with relevance > 0 that rank in the first `k`; 0
/// when there are none.
pub fn recall_at(ranked: &[String], rel: &HashMap<String, f64>, k: usize) -> f64 {
    let relevant: HashSet<&String> = rel.iter().filter(|(_, &r)| r > 0.0).map(|(d, _)| d).collect();
    if relevant.is_empty() {
        return 0.0;
    }
    ranked.iter().take(k).filter(|d| relevant.contains(d)).count() as f64 / relevant.len() as f64
}

/// BEIR's depth: every ranking is cut at 100.
const BEIR_DEPTH: usize = 100;

fn beir(
    embedder: &dyn Embedder,
    data_dir: &Path,
    dir: &Path,
    runs: &[(Retrieval, Option<Fusion>)],
    json: bool,
) -> Result<()> {
    let started = Instant::now();
    let corpus = read_jsonl(&dir.join("corpus.jsonl"))?;
    let queries_path = [dir.join("queries_test.jsonl"), dir.join("queries.jsonl")].into_iter().find(|p| p.is_file());
    let Some(queries_path) = queries_path else { bail!("{}: no queries_test.jsonl or queries.jsonl", dir.display()) };
    let queries = read_jsonl(&queries_path)?;
    let qrels = read_qrels(&dir.join("qrels/test.tsv"))?;
    let chunks: Vec<Chunk> = corpus
        .iter()
        .map(|d| {
            let id = d["_id"].as_str().unwrap_or_default();
            Chunk::new(id, id, d["title"].as_str().unwrap_or(""), d["text"].as_str().unwrap_or(""))
        })
        .collect();
    // BEIR's sentence-transformers convention: "title text".
    let texts: Vec<String> = chunks
        .iter()
        .map(|c| if c.title.is_empty() { c.text.clone() } else { format!("{} {}", c.title, c.text) })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    if !json {
        eprintln!("embedding {} documents (cached in {})", refs.len(), data_dir.display());
    }
    let (vectors, embedded) = embed_all(embedder, &ragctx_store::DataDirCache::At(data_dir.to_owned()), &refs)?;
    // The store every evaluation runs over, searched by the turn's own retrieval (deeper
    // searches, fusion, `select` and `ladder` as they ship), without grouping or exclusion.
    let store = ragctx_store::MemoryVectorStore::new(embedder.dimension(), IndexParams::default());
    let rows_in: Vec<EmbeddedChunk> = chunks
        .iter()
        .zip(vectors)
        .map(|(c, vector)| EmbeddedChunk { chunk: c.clone(), vector, sentences: None })
        .collect();
    store.upsert(&rows_in)?;
    let judged: Vec<&serde_json::Value> =
        queries.iter().filter(|q| q["_id"].as_str().is_some_and(|id| qrels.contains_key(id))).collect();
    let qtexts: Vec<&str> = judged.iter().map(|q| q["text"].as_str().unwrap_or("")).collect();
    let qvecs = embedder.embed_queries(&qtexts)?;
    let mut rows = Vec::new();
    for &(retrieval, fusion) in runs {
        let (mut ndcg, mut r10, mut r100) = (0.0, 0.0, 0.0);
        let mut lat = Vec::new();
        for ((q, v), text) in judged.iter().zip(&qvecs).zip(&qtexts) {
            let rel = &qrels[q["_id"].as_str().unwrap()];
            let t = Instant::now();
            let settings = TurnSettings {
                strategy: Strategy::None,
                retrieval,
                fusion: fusion.unwrap_or_default(),
                limit: BEIR_DEPTH,
                ..TurnSettings::default()
            };
            let found = retrieve(&store, v.clone(), text, ExclusionSet::default(), HashMap::new(), &settings)?;
            let mut ranked = found.outcome.hits;
            ranked.truncate(BEIR_DEPTH);
            lat.push(t.elapsed().as_secs_f64() * 1e3);
            let ranked: Vec<String> = ranked.iter().map(|h| h.chunk.id.as_str().to_owned()).collect();
            ndcg += ndcg_at(&ranked, rel, 10);
            r10 += recall_at(&ranked, rel, 10);
            r100 += recall_at(&ranked, rel, 100);
        }
        let n = judged.len().max(1) as f64;
        lat.sort_by(f64::total_cmp);
        let name = match fusion {
            Some(f) => format!("{}/{}", retrieval.as_str(), f.as_str()),
            None => retrieval.as_str().to_owned(),
        };
        if !json {
            println!(
                "{} [{name}]: {} queries over {} documents: nDCG@10 {:.4}, Recall@10 {:.4}, Recall@100 {:.4} (published for all-MiniLM-L6-v2 on SciFact: nDCG@10 0.645; BM25 0.665)",
                dir.display(), judged.len(), chunks.len(), ndcg / n, r10 / n, r100 / n
            );
        }
        rows.push(serde_json::json!({
            "retrieval": retrieval.as_str(), "fusion": fusion.map(Fusion::as_str),
            "ndcg@10": ndcg / n, "recall@10": r10 / n, "recall@100": r100 / n, "queries": judged.len(),
            "documents": chunks.len(), "embedded": embedded, "search_p50_ms": percentile(&lat, 0.5),
            "seconds": started.elapsed().as_secs_f64(),
        }));
    }
    if json {
        // One run prints its row as before; several print a list.
        match rows.len() {
            1 => println!("{}", rows[0]),
            _ => println!("{}", serde_json::Value::Array(rows)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ndcg_and_recall_by_hand() {
        let rel: HashMap<String, f64> = [("a".to_string(), 1.0), ("b".to_string(), 1.0)].into();
        let ranked: Vec<String> = ["x", "a", "y", "b"].iter().map(|s| s.to_string()).collect();
        let dcg = 1.0 / 3f64.log2() + 1.0 / 5f64.log2();
        let idcg = 1.0 + 1.0 / 3f64.log2();
        assert!((ndcg_at(&ranked, &rel, 10) - dcg / idcg).abs() < 1e-12);
        assert_eq!(recall_at(&ranked, &rel, 2), 0.5);
        assert_eq!(recall_at(&ranked, &rel, 10), 1.0);
        assert_eq!(ndcg_at(&ranked, &HashMap::new(), 10), 0.0);
    }
}
