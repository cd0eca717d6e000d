//! `ragctx eval mtrag`: replay MTRAG conversations, one fresh session per strategy, and
//! score every turn that has gold passages (DESIGN §6).

use crate::data::{conversations, Conversation};
use crate::error::{bail, write_file, Error, Result};
use crate::mtrag_metrics::{Means, StrategyReport, Tally};
use crate::progress::Terminal;
use crate::report;
use memo::MemoEmbedder;
use ragctx_app::config::Settings;
use ragctx_core::{Embedder, SessionId, SessionStore, TokenCounter};
use ragctx_core::{Fusion, Memory, Retrieval};
use ragctx_engine::context::INSTRUCTIONS;
use ragctx_engine::conversation::{fit, CONVERSATION_SHARE};
use ragctx_engine::dedupe::text_hash;
use ragctx_engine::ingest::{embed_chunks, store_embedded};
use ragctx_engine::{Consumption, ConversationQuery, Granularity, Strategy, TurnSettings, Utterance};
use ragctx_index::IndexParams;
use ragctx_ingest::parse_jsonl;
use ragctx_models::Cl100kCounter;
use ragctx_store::MemoryVectorStore;
use ragctx_store::{DataDir, DataDirCache};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub(crate) mod memo;

/// Options of one evaluation run.
pub struct MtragOptions {
    /// Conversations file (turns.jsonl format).
    pub turns: PathBuf,
    /// Folder holding `corpus_DOMAIN.jsonl` for every domain replayed.
    pub corpus_dir: PathBuf,
    /// Domains to replay; empty = every domain of the turns file.
    pub domains: Vec<String>,
    /// Strategies to compare (names of [`ALL_STRATEGIES`]), each run once per query mode and
    /// retrieval, the seed's strategies also once per granularity.
    pub strategies: Vec<String>,
    /// Granularities the seed's strategies run at (the memory modes keep the configured one).
    pub granularities: Vec<Granularity>,
    /// Query modes: `last`, `history`, `weighted`, `rewrite`, `condense` (see `eval mtrag --query`).
    pub queries: Vec<String>,
    /// Retrievals to run each strategy with (hybrid with its fusion).
    pub retrievals: Vec<(Retrieval, Option<Fusion>)>,
    /// Context budget in tokens replacing the configured one.
    pub budget: Option<usize>,
    /// Budgets to run every strategy at (but unbounded `history`): the report's curves.
    pub budgets: Vec<usize>,
    /// Replay at most this many conversations (the first by conversation id).
    pub conversations: Option<usize>,
    /// Replay only this fold's conversations ([`crate::fit_query::fold_of`]).
    pub fold: Option<u64>,
    /// The follow-up query's weights replacing the engine's.
    pub query_weights: Option<ragctx_engine::QueryWeights>,
    /// The sentence scorer replacing the engine's (`compress learned`).
    pub sentence_scorer: Option<ragctx_engine::sentences::Scorer>,
    /// Folder to write `mtrag.json` and `mtrag.html` to.
    pub out: Option<PathBuf>,
    /// Print the report as one JSON object instead of the table.
    pub json: bool,
}

/// Every strategy `eval mtrag` knows, in the order of its default list.
pub const ALL_STRATEGIES: [&str; 8] = ["none", "group", "exclude", "full", "full+cited", "history", "engine", "client"];

/// The baselines a chat app would run at a token budget: `none+conv` (the conversation, then
/// plain top-k filling the rest: a stateless app) and `history@budget` (earlier contexts and
/// exchanges newest first while they fit, then plain top-k filling the rest).
pub const BUDGET_BASELINES: [&str; 2] = ["none+conv", "history@budget"];

/// Chunks per turn unbounded `history` retrieves (the default `limit` before turns filled the
/// budget), whatever `limit` is: the reference point stays the one measured before.
pub const CHAT_APP_K: usize = 8;

/// The smallest budget a turn accepts (`TurnSettings::validate`).
const MIN_BUDGET: usize = 16;

/// What the client sends beside the turn's own prompt.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Client {
    /// Nothing: the turn's prompt is all (the engine's modes, the seed's strategies).
    Nothing,
    /// Every earlier context and exchange of the window (`history`, `client` memory).
    Keeps,
    /// Earlier contexts and exchanges newest first while they fit the budget; the turn's blocks
    /// fill what is left.
    KeepsWithinBudget,
    /// The conversation (newest first, within the engine's conversation share), the turn's
    /// blocks filling the rest of the budget.
    Conversation,
}

struct Variant {
    key: String,
    /// The key without its budget, and the budget, when the run draws curves.
    curve: Option<(String, usize)>,
    settings: TurnSettings,
    query: String,
    client: Client,
}

impl Variant {
    /// The model reads earlier contexts the client kept.
    fn client_keeps(&self) -> bool {
        matches!(self.client, Client::Keeps | Client::KeepsWithinBudget)
    }
}

fn variants(opts: &MtragOptions, base: &TurnSettings) -> Result<Vec<Variant>> {
    let mut out = Vec::new();
    let curves = opts.budgets.len() > 1;
    // Smallest first, so each curve runs left to right.
    let mut budgets = if opts.budgets.is_empty() { vec![base.budget] } else { opts.budgets.clone() };
    budgets.sort_unstable();
    for name in &opts.strategies {
        // The memory modes run with their defaults; the seed's strategies at each granularity.
        let modes = matches!(name.as_str(), "engine" | "client");
        let granularities = if modes { vec![base.granularity] } else { opts.granularities.clone() };
        // Unbounded `history` is the reference point: one run, at the configured budget.
        let at = if name == "history" { vec![base.budget] } else { budgets.clone() };
        for &budget in &at {
            for &g in &granularities {
                for (q, &(retrieval, fusion)) in
                    opts.queries.iter().flat_map(|q| opts.retrievals.iter().map(move |r| (q, r)))
                {
                    let mut s = base.clone();
                    s.budget = budget;
                    s.retrieval = retrieval;
                    s.fusion = fusion.unwrap_or(s.fusion);
                    if q == "condense" {
                        // The engine asks the condenser; the query is the question.
                        s.condense = ragctx_core::Condense::OpenAi;
                    }
                    if modes {
                        s.memory = if name == "engine" { Memory::Engine } else { Memory::Client };
                        if q != "last" && q != "condense" {
                            // The eval builds this query itself; the engine must not mix it again.
                            s.conversation_query = ConversationQuery::Off;
                        }
                    } else {
                        // The seed's paths as they were measured before memory modes
                        // (`presets::seed_path`).
                        let (strategy, consumption) = match name.as_str() {
                            "none" | "none+conv" | "history@budget" | "history" => (Strategy::None, Consumption::Shown),
                            "group" => (Strategy::Group, Consumption::Shown),
                            "exclude" => (Strategy::Exclude, Consumption::Shown),
                            "full" => (Strategy::Full, Consumption::Shown),
                            "full+cited" => (Strategy::Full, Consumption::Cited),
                            other => bail!(
                                "unknown strategy {other:?}: use {}, {}",
                                ALL_STRATEGIES.join(", "),
                                BUDGET_BASELINES.join(", ")
                            ),
                        };
                        s = ragctx_engine::presets::seed_path(&s, strategy, g, consumption);
                        if name == "history" {
                            s.limit = CHAT_APP_K;
                        }
                    }
                    let mut key = name.clone();
                    if opts.granularities.len() > 1 && !modes {
                        key.push_str(&format!("@{g}"));
                    }
                    if opts.queries.len() > 1 {
                        key.push_str(&format!("/{q}"));
                    }
                    if opts.retrievals.len() > 1 || retrieval != Retrieval::Dense {
                        key.push_str(&format!("+{}", retrieval.as_str()));
                        if let Some(f) = fusion {
                            key.push_str(&format!("/{}", f.as_str()));
                        }
                    }
                    let curve = (curves && name != "history").then(|| (key.clone(), budget));
                    if curve.is_some() {
                        key.push_str(&format!("@{budget}"));
                    }
                    let client = match name.as_str() {
                        "history" | "client" => Client::Keeps,
                        "history@budget" => Client::KeepsWithinBudget,
                        "none+conv" => Client::Conversation,
                        _ => Client::Nothing,
                    };
                    out.push(Variant { key, curve, settings: s, query: q.clone(), client });
                }
            }
        }
    }
    Ok(out)
}

/// Evidence recall against prompt tokens per strategy, one point per budget (unbounded
/// `history` one point without a budget): overall, from turn 5 on, and per domain.
fn curves(variants: &[Variant], strategies: &serde_json::Value, domains: &[String]) -> serde_json::Value {
    let point = |m: &serde_json::Value| serde_json::json!({"prompt_tokens": m["prompt_tokens"], "evidence_recall": m["evidence_recall"], "answer_support": m["answer_support"], "semantic_support": m["semantic_support"], "answer_sentences_recall": m["answer_sentences_recall"], "turns": m["turns"]});
    let mut out: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    for v in variants {
        let r = &strategies[&v.key];
        let (name, budget) = match &v.curve {
            Some((name, b)) => (name.clone(), serde_json::json!(b)),
            None => (v.key.clone(), serde_json::Value::Null),
        };
        let by_domain: serde_json::Map<String, serde_json::Value> =
            domains.iter().map(|d| (d.clone(), point(&r["by_domain"][d]))).collect();
        let mut p = point(&r["overall"]);
        p["budget"] = budget;
        p["from_turn_5"] = point(&r["from_turn_5"]);
        p["by_domain"] = serde_json::Value::Object(by_domain);
        out.entry(name).or_default().push(p);
    }
    serde_json::json!(out)
}

/// User turn `i` (0-based) and the two before it, oldest first: what `history` and
/// `weighted` queries are made of.
fn recent(conv: &Conversation, i: usize) -> &[String] {
    &conv.messages[i.saturating_sub(2)..=i]
}

/// The text embedded for user turn `i` (0-based) under a query mode.
fn query_text(conv: &Conversation, i: usize, mode: &str) -> String {
    match mode {
        "rewrite" => conv
            .gold
            .get(&(i + 1))
            .map(|g| g.1.clone())
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| conv.messages[i].clone()),
        // The current question after the two user turns before it.
        "history" => recent(conv, i).join(" "),
        // A key the memo embedder resolves to the weighted mix (see `MemoEmbedder::mix`).
        "weighted" => recent(conv, i).iter().rev().map(String::as_str).collect::<Vec<_>>().join(" <- "),
        _ => conv.messages[i].clone(),
    }
}

/// A gold turn's reference answer: its sentences' vectors, and per gold passage the sentences
/// of it that hold the answer.
type Answer = (Vec<Vec<f32>>, HashMap<String, Vec<String>>);

/// An earlier turn as a client keeps it: its chunks, its context tokens, the tokens of its
/// question and answer, its context's terms and its context's sentences.
type Earlier = (HashSet<String>, usize, usize, HashSet<String>, Vec<String>);

/// The median of `xs` (`None` when empty).
fn median(xs: &mut [f32]) -> Option<f32> {
    xs.sort_by(f32::total_cmp);
    xs.get(xs.len() / 2).copied()
}

/// A domain's corpus (`corpus_DOMAIN.jsonl` in `corpus_dir`) in an in-memory store, ingested
/// by the one ingest path as `ragctx ingest` takes it (the data dir's embedding cache), and
/// each chunk's document.
pub fn domain_store(
    settings: &Settings,
    corpus_dir: &std::path::Path,
    domain: &str,
    embedder: &dyn Embedder,
    say: bool,
) -> Result<(MemoryVectorStore, HashMap<String, String>)> {
    let path = corpus_dir.join(format!("corpus_{domain}.jsonl"));
    let bytes = std::fs::read(&path).map_err(|source| Error::Read { path: path.clone(), source })?;
    let read = parse_jsonl(&path.display().to_string(), &bytes)?;
    if say {
        eprintln!("{domain}: {} passages (embeddings cached in {})", read.len(), settings.data_dir().display());
    }
    let cache = DataDirCache::At(settings.data_dir().to_owned());
    let counter = Cl100kCounter::new();
    let embedded = embed_chunks(embedder, &counter, Some(&cache), &Terminal::default(), read, true)?;
    let doc_of: HashMap<String, String> =
        embedded.chunks.iter().map(|c| (c.chunk.id.0.clone(), c.chunk.document_id.0.clone())).collect();
    let store = MemoryVectorStore::new(embedder.dimension(), IndexParams::default());
    store_embedded(&store, embedded, true)?;
    Ok((store, doc_of))
}

/// Replays every conversation once per variant (a strategy with its granularity, query mode
/// and retrieval) in a fresh, temporary session, scores the turns with gold passages, and
/// prints the report as a table or JSON (also written as `mtrag.json` and `mtrag.html` to
/// `out` when set). Passage embeddings are cached in the configured data dir.
pub fn run(settings: &Settings, opts: &MtragOptions) -> Result<()> {
    let started = Instant::now();
    let convs = {
        let mut c = conversations(&opts.turns, &opts.domains)?;
        if let Some(f) = opts.fold {
            if f >= crate::fit_query::FOLDS {
                bail!("--fold {f}: folds are 0..{}", crate::fit_query::FOLDS - 1);
            }
            c.retain(|c| crate::fit_query::fold_of(&c.id) == f);
        }
        if let Some(n) = opts.conversations {
            c.truncate(n);
        }
        c
    };
    if convs.is_empty() {
        bail!("no conversations for domains {:?} in {}", opts.domains, opts.turns.display());
    }
    let mut domains: Vec<String> = convs.iter().map(|c| c.domain.clone()).collect();
    domains.sort();
    domains.dedup();
    let mut base = crate::replay_settings(settings);
    if let Some(b) = opts.budget {
        base.budget = b;
    }
    // One budget in `--budgets` is `--budget`: no curves, and the report says it.
    if let [b] = opts.budgets[..] {
        base.budget = b;
    }
    base.validate()?;
    for &b in &opts.budgets {
        TurnSettings { budget: b, ..base.clone() }.validate()?;
    }
    let mut budgets = opts.budgets.clone();
    budgets.sort_unstable();
    budgets.dedup();
    if budgets.len() != opts.budgets.len() {
        bail!("--budgets {:?}: each budget once", opts.budgets);
    }
    let variants = variants(opts, &base)?;
    let embedder = Arc::new(MemoEmbedder {
        inner: ragctx_app::app::embedder(settings)?,
        memo: Mutex::new(HashMap::new()),
        passages: Mutex::new(HashMap::new()),
    });
    let counter = Arc::new(Cl100kCounter::new());
    let carried_head = counter.count("Earlier sources:\n");
    let instructions = counter.count(INSTRUCTIONS);
    let sessions_dir = std::env::temp_dir().join(format!("ragctx-eval-{}", std::process::id()));
    let sessions_data = DataDir::open(&sessions_dir, embedder.dimension())?;
    let sessions: Arc<dyn SessionStore> = Arc::new(sessions_data.session_store());
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let mut analyzer = ragctx_lexical::Analyzer::default();
    let mut calibration: Vec<f32> = Vec::new();
    for domain in &domains {
        let (store, doc_of) = domain_store(settings, &opts.corpus_dir, domain, embedder.inner.as_ref(), !opts.json)?;
        let store = Arc::new(store);
        let mut engine = ragctx_app::app::engine_over(store.clone(), sessions.clone(), embedder.clone());
        // Per gold turn, once: the reference answer's sentences (vectors) and the sentences of
        // each gold passage that hold it; the calibration of the semantic threshold.
        let mut answers: HashMap<(String, usize), Answer> = HashMap::new();
        for conv in convs.iter().filter(|c| &c.domain == domain) {
            for (&turn, (gold, _)) in &conv.gold {
                let Some(answer) = conv.answers.get(&turn) else { continue };
                let terms = crate::mtrag_metrics::content_terms(&mut analyzer, &[answer.as_str()]);
                let ids: Vec<ragctx_core::ChunkId> = gold.iter().map(|g| g.as_str().into()).collect();
                let chunks = ragctx_core::VectorStore::chunks(store.as_ref(), &ids)?;
                let bearing: HashMap<String, Vec<String>> = chunks
                    .iter()
                    .map(|c| {
                        let b = crate::mtrag_metrics::answer_bearing(&mut analyzer, &c.text, &terms);
                        (c.id.0.clone(), b.into_iter().map(str::to_owned).collect())
                    })
                    .collect();
                let vectors = embedder.passages(&ragctx_core::text::sentences(answer))?;
                let gold_sentences: Vec<&str> =
                    chunks.iter().flat_map(|c| ragctx_core::text::sentences(&c.text)).collect();
                calibration.extend(crate::mtrag_metrics::best_cosines(&vectors, &embedder.passages(&gold_sentences)?));
                answers.insert((conv.id.clone(), turn), (vectors, bearing));
            }
        }
        if let Some(w) = opts.query_weights {
            engine.query_weights = w;
        }
        if let Some(s) = &opts.sentence_scorer {
            engine.sentence_scorer = Arc::new(s.clone());
        }
        // The condenser only: answers stay extractive (the metrics are about evidence).
        engine.condenser = ragctx_app::app::condenser(settings)?;
        for conv in convs.iter().filter(|c| &c.domain == domain) {
            for v in &variants {
                let session = SessionId::parse(&format!("eval-{}-{}", conv.id, v.key.replace(['+', '@', '/'], "_")))?;
                sessions.delete(&session)?;
                let mut shown_chunks: HashSet<String> = HashSet::new();
                let mut shown_docs: HashSet<String> = HashSet::new();
                // Per earlier turn: its chunks, its context tokens and the tokens of its question
                // and answer (what a client keeps in the model's history), and its context's
                // terms (for `answer_support`).
                // (and its context's sentences, for `semantic_support`).
                let mut earlier: Vec<Earlier> = Vec::new();
                // The conversation so far, for `none+conv`.
                let mut said: Vec<Utterance> = Vec::new();
                for i in 0..conv.messages.len() {
                    let q = query_text(conv, i, &v.query);
                    if v.query == "weighted" {
                        let newest_first: Vec<&str> = recent(conv, i).iter().rev().map(String::as_str).collect();
                        embedder.mix(&q, &newest_first)?;
                    }
                    // `none+conv`: the conversation takes its share of the budget first (newest
                    // first, as the engine fits its own), the blocks fill what is left.
                    let sent_conversation = match v.client {
                        Client::Conversation => {
                            let share = (v.settings.budget as f64 * CONVERSATION_SHARE) as usize;
                            fit(&said, share, counter.as_ref()).1
                        }
                        _ => 0,
                    };
                    // `history@budget`: earlier contexts and exchanges first, newest first, while
                    // they fit beside the instructions and the question; the blocks get the rest.
                    let window = v.settings.window;
                    let mut from = if window == 0 { 0 } else { earlier.len().saturating_sub(window) };
                    let mut taken = 0;
                    if v.client == Client::KeepsWithinBudget {
                        let overhead = instructions + counter.count(&conv.messages[i]) + carried_head;
                        let room = v.settings.budget.saturating_sub(overhead);
                        let mut k = earlier.len();
                        while k > from && taken + earlier[k - 1].1 + earlier[k - 1].2 <= room {
                            taken += earlier[k - 1].1 + earlier[k - 1].2;
                            k -= 1;
                        }
                        from = k;
                    }
                    let turn_settings;
                    let settings = if sent_conversation + taken > 0 {
                        let mut s = v.settings.clone();
                        s.budget = s.budget.saturating_sub(sent_conversation + taken).max(MIN_BUDGET);
                        turn_settings = s;
                        &turn_settings
                    } else {
                        &v.settings
                    };
                    let out =
                        engine.run(ragctx_engine::TurnInput::new(&session, &conv.messages[i], settings).query(&q))?;
                    let c: HashSet<String> =
                        out.context.iter().flat_map(|b| b.chunk_ids.iter().map(|c| c.0.clone())).collect();
                    let cd: HashSet<String> = out.context.iter().map(|b| b.document_id.0.clone()).collect();
                    let texts: Vec<&str> =
                        out.context.iter().flat_map(|b| [b.title.as_str(), b.text.as_str()]).collect();
                    let terms = crate::mtrag_metrics::content_terms(&mut analyzer, &texts);
                    // The context's sentences, without the marks of cut text.
                    let said_here: Vec<String> = out
                        .context
                        .iter()
                        .flat_map(|b| ragctx_core::text::sentences(&b.text))
                        .filter(|x| x.trim() != ragctx_engine::sentences::CUT)
                        .map(str::to_owned)
                        .collect();
                    let kept = &earlier[from..];
                    let in_window: HashSet<&String> = kept.iter().flat_map(|k| k.0.iter()).collect();
                    let kept_tokens: usize = kept.iter().map(|k| k.1).sum();
                    let kept_exchanges: usize = kept.iter().map(|k| k.2).sum();
                    let conversation = match v.client {
                        Client::Keeps | Client::KeepsWithinBudget => kept_exchanges,
                        Client::Conversation => sent_conversation,
                        Client::Nothing => out.trace.conversation_tokens,
                    };
                    let kept_contexts = if kept_tokens > 0 { carried_head + kept_tokens } else { 0 };
                    let prompt = out.trace.prompt_tokens
                        + match v.client {
                            Client::Keeps | Client::KeepsWithinBudget => kept_contexts + kept_exchanges,
                            Client::Conversation => sent_conversation,
                            Client::Nothing => 0,
                        };
                    let mut seen_in_prompt: HashSet<&str> = HashSet::new();
                    let mut seen_text: HashSet<u64> = HashSet::new();
                    let mut duplicate_tokens = 0usize;
                    let mut resent = 0usize;
                    for b in &out.context {
                        let again = b.chunk_ids.iter().any(|c| in_window.contains(&c.0));
                        let twice = b.chunk_ids.iter().any(|c| !seen_in_prompt.insert(c.as_str()))
                            || !seen_text.insert(text_hash(&b.text))
                            || (v.client_keeps() && again);
                        if twice {
                            duplicate_tokens += b.tokens;
                        }
                        resent += again as usize;
                    }
                    if let Some((gold, _)) = conv.gold.get(&(i + 1)) {
                        let g: HashSet<&String> = gold.iter().collect();
                        let gd: HashSet<&String> = gold.iter().filter_map(|x| doc_of.get(x)).collect();
                        let inter = |a: &HashSet<String>| g.iter().filter(|x| a.contains(x.as_str())).count() as f64;
                        let fresh = inter(&c);
                        let readable = crate::mtrag_metrics::readable_gold(&g, &c, &in_window, v.client_keeps()) as f64;
                        let available =
                            g.iter().filter(|x| c.contains(x.as_str()) || shown_chunks.contains(x.as_str())).count()
                                as f64;
                        let new_gold =
                            g.iter().filter(|x| c.contains(x.as_str()) && !shown_chunks.contains(x.as_str())).count()
                                as f64;
                        let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
                        // The reference answer against the evidence the model reads: this
                        // context, and the kept window where the client keeps it.
                        let support = conv.answers.get(&(i + 1)).and_then(|answer| {
                            let answer = crate::mtrag_metrics::content_terms(&mut analyzer, &[answer]);
                            let mut evidence = terms.clone();
                            if v.client_keeps() {
                                kept.iter().for_each(|k| evidence.extend(k.3.iter().cloned()));
                            }
                            crate::mtrag_metrics::answer_support(&answer, &evidence)
                        });
                        let known = answers.get(&(conv.id.clone(), i + 1));
                        let semantic = match known {
                            Some((answer, _)) if support.is_some() => {
                                let mut evidence: Vec<&str> = said_here.iter().map(String::as_str).collect();
                                if v.client_keeps() {
                                    kept.iter().for_each(|k| evidence.extend(k.4.iter().map(String::as_str)));
                                }
                                crate::mtrag_metrics::semantic_support(
                                    answer,
                                    &embedder.passages(&evidence)?,
                                    crate::mtrag_metrics::SEMANTIC_THRESHOLD,
                                )
                            }
                            _ => None,
                        };
                        // A gold passage counts when readable and, shown in this turn's context,
                        // with every sentence of it that holds the answer.
                        let whole_sentences = |id: &str| {
                            let Some(bearing) = known.and_then(|k| k.1.get(id)) else { return true };
                            match out.context.iter().find(|b| b.chunk_ids.iter().any(|c| c.0 == id)) {
                                Some(b) => bearing.iter().all(|x| b.text.contains(x.as_str())),
                                None => true,
                            }
                        };
                        let answer_sentences = g
                            .iter()
                            .filter(|x| {
                                let readable = c.contains(x.as_str()) || (v.client_keeps() && in_window.contains(*x));
                                readable && whole_sentences(x)
                            })
                            .count() as f64;
                        let m = Means {
                            answer_support: support.unwrap_or(0.0),
                            semantic_support: semantic.unwrap_or(0.0),
                            answer_sentences_recall: answer_sentences / g.len().max(1) as f64,
                            answered: support.is_some() as usize,
                            evidence_recall: readable / g.len().max(1) as f64,
                            fresh_recall: fresh / g.len().max(1) as f64,
                            doc_recall: ratio(gd.iter().filter(|d| cd.contains(d.as_str())).count(), gd.len()),
                            available_recall: available / g.len().max(1) as f64,
                            repeat_rate: ratio(c.iter().filter(|x| shown_chunks.contains(*x)).count(), c.len()),
                            doc_repeat_rate: ratio(cd.iter().filter(|x| shown_docs.contains(*x)).count(), cd.len()),
                            context_tokens: out.trace.context_tokens as f64,
                            prompt_tokens: prompt as f64,
                            new_gold_per_1k_tokens: if prompt == 0 { 0.0 } else { new_gold * 1000.0 / prompt as f64 },
                            unique_documents: out.trace.unique_documents as f64,
                            context_fragments: out.trace.context_fragments as f64,
                            duplicate_text_slots: {
                                let hashes: Vec<u64> = out.context.iter().map(|b| text_hash(&b.text)).collect();
                                let distinct: HashSet<&u64> = hashes.iter().collect();
                                (hashes.len() - distinct.len()) as f64
                            },
                            invalid_citations: out.trace.invalid_citations as f64,
                            duplicate_tokens: duplicate_tokens as f64,
                            resent_rate: ratio(resent, out.context.len()),
                            turn_tokens: out.trace.prompt_tokens as f64,
                            carried: out.trace.carried as f64,
                            conversation_tokens: conversation as f64,
                            pointers: out.trace.pointers as f64,
                            near_duplicates: out.trace.duplicates.iter().filter(|d| d.resemblance < 1.0).count() as f64,
                            duplicate_tokens_freed: out.trace.duplicates.iter().map(|d| d.tokens).sum::<usize>() as f64,
                            condense_ms: out.trace.condensed.as_ref().map_or(0.0, |c| c.ms),
                            condense_fallback: out
                                .trace
                                .condensed
                                .as_ref()
                                .map_or(0.0, |c| c.fallback.is_some() as u8 as f64),
                            condensed: out.trace.condensed.as_ref().and_then(|c| c.query.as_deref()).map_or(0.0, |q| {
                                // A rewrite that repeats the question changed nothing.
                                (q.trim().to_lowercase() != conv.messages[i].trim().to_lowercase()) as u8 as f64
                            }),
                            turns: 1,
                        };
                        let t = tallies.entry(v.key.clone()).or_default();
                        t.overall.add(&m);
                        if i + 1 >= 5 {
                            t.late.add(&m);
                        }
                        t.by_domain.entry(domain.clone()).or_default().add(&m);
                        t.by_turn.entry(i + 1).or_default().add(&m);
                    }
                    let exchange = Utterance::user(conv.messages[i].as_str()).render()
                        + &Utterance::assistant(out.answer.as_str()).render();
                    earlier.push((c.clone(), out.trace.context_tokens, counter.count(&exchange), terms, said_here));
                    said.push(Utterance::user(conv.messages[i].as_str()));
                    said.push(Utterance::assistant(out.answer.as_str()));
                    shown_chunks.extend(c);
                    shown_docs.extend(cd);
                }
                sessions.delete(&session)?;
            }
        }
    }
    drop(sessions_data);
    let _ = std::fs::remove_dir_all(&sessions_dir);
    let strategies: BTreeMap<String, StrategyReport> = variants
        .iter()
        .map(|v| {
            let t = tallies.remove(&v.key).unwrap_or_default();
            (
                v.key.clone(),
                StrategyReport {
                    granularity: v.settings.granularity,
                    query: v.query.clone(),
                    memory: v.settings.memory,
                    reader: match v.client {
                        Client::Keeps => "client_keeps",
                        Client::KeepsWithinBudget => "client_keeps_within_budget",
                        Client::Conversation => "client_sends_conversation",
                        Client::Nothing => "stateless",
                    }
                    .into(),
                    overall: t.overall.mean(),
                    from_turn_5: t.late.mean(),
                    by_domain: t.by_domain.iter().map(|(k, m)| (k.clone(), m.mean())).collect(),
                    by_turn: t.by_turn.iter().map(|(k, m)| (*k, m.mean())).collect(),
                },
            )
        })
        .collect();
    let strategies = serde_json::to_value(&strategies)?;
    let mut report = serde_json::json!({
        "strategies": strategies,
        "conversations": convs.len(),
        "domains": domains,
        "budget": base.budget,
        "limit": base.limit,
        "query_weights": opts.query_weights.unwrap_or_else(ragctx_engine::QueryWeights::fitted),
        "fold": opts.fold,
        "semantic_threshold": {
            "used": crate::mtrag_metrics::SEMANTIC_THRESHOLD,
            "calibrated_here": median(&mut calibration),
            "calibration": "the median, over the reference answers' sentences of the turns replayed, of the best cosine a sentence of the turn's gold passages reaches",
        },
        "instructions_tokens": counter.count(INSTRUCTIONS),
        "seconds": started.elapsed().as_secs_f64(),
    });
    if opts.budgets.len() > 1 {
        report["budgets"] = serde_json::json!(opts.budgets);
        report["curves"] = curves(&variants, &report["strategies"], &domains);
    }
    if let Some(dir) = &opts.out {
        std::fs::create_dir_all(dir).map_err(|source| Error::Write { path: dir.to_path_buf(), source })?;
        write_file(&dir.join("mtrag.json"), serde_json::to_string_pretty(&report)?)?;
        write_file(&dir.join("mtrag.html"), report::mtrag_html(&report))?;
        if !opts.json {
            eprintln!("wrote {0}/mtrag.json and {0}/mtrag.html", dir.display());
        }
    }
    if opts.json {
        println!("{report}");
    } else {
        print!("{}", report::mtrag_table(&report));
    }
    Ok(())
}
