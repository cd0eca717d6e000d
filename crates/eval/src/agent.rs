//! `ragctx eval agent`: MTRAG's conversations replayed as an agent calls a search tool
//! (DESIGN §9), two tools side by side on the same index and model, each with the same
//! per-call budget and limit:
//!
//! - `ragctx`: the MCP `search` tool's own work ([`ragctx_engine::agent::Scope::search`]): one session
//!   per conversation, chunks the agent holds never re-sent, pointers for those that rank;
//! - `plain`: top-k with no session, what `mcp-server-qdrant`'s `qdrant-find` does: the same
//!   search, a fresh session every call, no exclusion, no relevance floor, no near-duplicate
//!   removal ([`ragctx_engine::presets::plain_top_k`]).
//!
//! The schedule of tool calls per user turn is fixed and not tuned on the data: the question
//! as asked, then MTRAG's human rewrite of it (when it has one that differs), then the
//! previous turn's question again (an agent re-checking; from the second turn on).
//!
//! Per tool, overall and from turn 5: tokens returned to the agent per turn, duplicate chunk
//! tokens (blocks holding a chunk the agent already held, returned again in full), the gold
//! evidence the agent holds after each turn (gold passages of the turn among every chunk it
//! was handed in the conversation so far), the support of the turn's reference answer in the
//! text it holds (its content terms, `answer_support`, and its sentences' meaning,
//! `semantic_support`, as `eval mtrag` measures a prompt), and calls that returned nothing new.

use crate::data::conversations;
use crate::error::{bail, Result};
use ragctx_app::config::Settings;
use ragctx_core::SessionStore;
use ragctx_engine::agent::{Found, Scope};
use ragctx_store::DataDir;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of one run.
pub struct AgentOptions {
    /// Conversations in the turns.jsonl format.
    pub turns: PathBuf,
    /// Folder with corpus_DOMAIN.jsonl.
    pub corpus_dir: PathBuf,
    /// Domains (all in the turns file when empty).
    pub domains: Vec<String>,
    /// Tokens one call may return.
    pub budget: usize,
    /// Results of one call at most.
    pub limit: usize,
    /// Replay at most this many conversations.
    pub conversations: Option<usize>,
    /// Print one JSON object instead of the table.
    pub json: bool,
    /// Write every call of the schedule here (JSONL: conversation, domain, turn, query, the
    /// turn's gold passages), for replaying the same calls through an MCP client
    /// (`bench/agent-mcp`).
    pub calls_out: Option<PathBuf>,
}

/// What one tool handed the agent, summed.
#[derive(Clone, Default, Debug, serde::Serialize)]
pub struct Sums {
    /// User turns counted.
    pub turns: usize,
    /// Tool calls made.
    pub calls: usize,
    /// Tokens returned to the agent (blocks and pointers).
    pub tokens: usize,
    /// Tokens of blocks holding a chunk the agent already held.
    pub duplicate_tokens: usize,
    /// Calls that handed over no chunk the agent did not hold.
    pub nothing_new: usize,
    /// Turns with gold passages, and the sum of the evidence held after each.
    pub gold_turns: usize,
    /// Sum over gold turns of the share of the turn's gold passages the agent holds.
    pub evidence_held: f64,
    /// Turns with a reference answer, and the sums of its support in the text the agent holds
    /// (content terms; sentences' meaning).
    pub answered: usize,
    /// Sum over answered turns of the share of the answer's content terms held.
    pub support: f64,
    /// Sum over answered turns of the share of the answer's sentences a held sentence means.
    pub semantic: f64,
}

impl Sums {
    fn add(&mut self, o: &Sums) {
        self.turns += o.turns;
        self.calls += o.calls;
        self.tokens += o.tokens;
        self.duplicate_tokens += o.duplicate_tokens;
        self.nothing_new += o.nothing_new;
        self.gold_turns += o.gold_turns;
        self.evidence_held += o.evidence_held;
        self.answered += o.answered;
        self.support += o.support;
        self.semantic += o.semantic;
    }

    fn report(&self) -> serde_json::Value {
        let per = |x: f64, n: usize| if n == 0 { 0.0 } else { x / n as f64 };
        serde_json::json!({
            "turns": self.turns,
            "calls": self.calls,
            "tokens_per_turn": per(self.tokens as f64, self.turns),
            "duplicate_tokens": self.duplicate_tokens,
            "duplicate_tokens_per_turn": per(self.duplicate_tokens as f64, self.turns),
            "evidence_held": per(self.evidence_held, self.gold_turns),
            "answered_turns": self.answered,
            "answer_support": per(self.support, self.answered),
            "semantic_support": per(self.semantic, self.answered),
            "calls_nothing_new": self.nothing_new,
            "share_nothing_new": per(self.nothing_new as f64, self.calls),
        })
    }
}

/// The tools' names, in the report's order.
pub const TOOLS: [&str; 2] = ["ragctx", "plain"];

/// The queries an agent issues for user turn `i` (0-based): the question, its human rewrite
/// when it has one that differs, and (from the second turn) the previous question again.
pub fn schedule(conv: &crate::data::Conversation, i: usize) -> Vec<String> {
    let mut out = vec![conv.messages[i].clone()];
    if let Some((_, rewrite)) = conv.gold.get(&(i + 1)) {
        if !rewrite.trim().is_empty() && rewrite.trim() != conv.messages[i].trim() {
            out.push(rewrite.clone());
        }
    }
    if i > 0 {
        out.push(conv.messages[i - 1].clone());
    }
    out
}

/// The plain tool: top-k for the query as `qdrant-find` answers it — no exclusion, no relevance
/// floor, no near-duplicate removal, nothing remembered (the caller gives a fresh session) —
/// within the same budget and limit, retrieve-only.
fn plain(
    engine: &ragctx_engine::Engine,
    base: &ragctx_engine::TurnSettings,
    session: &str,
    query: &str,
    budget: usize,
    limit: usize,
) -> Result<Found> {
    let settings = ragctx_engine::TurnSettings {
        memory: ragctx_core::Memory::Client,
        mode: ragctx_core::Mode::New,
        conversation_query: ragctx_core::ConversationQuery::Off,
        budget,
        limit,
        ..ragctx_engine::presets::plain_top_k(base)
    };
    let id = ragctx_core::SessionId::parse(session)?;
    let t = engine.run(ragctx_engine::TurnInput::new(&id, query, &settings).retrieve_only())?;
    Ok(Found::of(session, &t, engine)?)
}

/// Replays the conversations through both tools and prints the side-by-side report.
pub fn run(settings: &Settings, opts: &AgentOptions) -> Result<()> {
    let started = Instant::now();
    let mut convs = conversations(&opts.turns, &opts.domains)?;
    if let Some(n) = opts.conversations {
        convs.truncate(n);
    }
    if convs.is_empty() {
        bail!("no conversations for domains {:?} in {}", opts.domains, opts.turns.display());
    }
    let mut domains: Vec<String> = convs.iter().map(|c| c.domain.clone()).collect();
    domains.sort();
    domains.dedup();
    let embedder = ragctx_app::app::embedder(settings)?;
    // Sentences embedded once for both tools (`semantic_support`).
    let memo = crate::mtrag::memo::MemoEmbedder {
        inner: embedder.clone(),
        memo: Default::default(),
        passages: Default::default(),
    };
    let mut analyzer = ragctx_lexical::Analyzer::default();
    let sessions_dir = std::env::temp_dir().join(format!("ragctx-eval-agent-{}", std::process::id()));
    let sessions_data = DataDir::open(&sessions_dir, embedder.dimension())?;
    let sessions: Arc<dyn SessionStore> = Arc::new(sessions_data.session_store());
    let base = crate::replay_settings(settings);
    // (tool, overall | from turn 5 | domain) → sums; per turn number for the curve.
    let mut sums: BTreeMap<(String, String), Sums> = BTreeMap::new();
    let mut by_turn: BTreeMap<(String, usize), Sums> = BTreeMap::new();
    let mut per_conversation: Vec<serde_json::Value> = Vec::new();
    let mut calls_written = String::new();
    for domain in &domains {
        let (store, _) = crate::mtrag::domain_store(settings, &opts.corpus_dir, domain, embedder.as_ref(), !opts.json)?;
        let engine = ragctx_app::app::engine_over(Arc::new(store), sessions.clone(), embedder.clone());
        let ragctx = Scope {
            engine: engine.clone(),
            base: base.clone(),
            session_prefix: None,
            timeout: Duration::from_secs(600),
        };
        for conv in convs.iter().filter(|c| &c.domain == domain) {
            let mut row = serde_json::json!({"conversation": conv.id, "domain": domain});
            // Per answered turn: the reference answer's content terms and sentences' vectors.
            let mut answers: BTreeMap<usize, (HashSet<String>, Vec<Vec<f32>>)> = BTreeMap::new();
            for (&turn, answer) in &conv.answers {
                let terms = crate::mtrag_metrics::content_terms(&mut analyzer, &[answer.as_str()]);
                answers.insert(turn, (terms, memo.passages(&ragctx_core::text::sentences(answer))?));
            }
            for name in TOOLS {
                let session = format!("agent-{}", conv.id);
                sessions.delete(&ragctx_core::SessionId::parse(&session)?)?;
                let mut held: HashSet<String> = HashSet::new();
                // What the agent holds to answer from: every text handed over, its content terms
                // and its sentences' vectors.
                let mut held_texts: HashSet<String> = HashSet::new();
                let mut held_terms: HashSet<String> = HashSet::new();
                let mut held_vectors: Vec<Vec<f32>> = Vec::new();
                let mut conv_sums = Sums::default();
                let mut calls = 0usize;
                for i in 0..conv.messages.len() {
                    let mut turn = Sums { turns: 1, ..Default::default() };
                    for query in schedule(conv, i) {
                        if name == "ragctx" && opts.calls_out.is_some() {
                            let gold = conv.gold.get(&(i + 1)).map(|g| g.0.clone()).unwrap_or_default();
                            let line = serde_json::json!({"conversation": conv.id, "domain": domain, "turn": i + 1, "query": query, "gold": gold});
                            calls_written.push_str(&format!("{line}\n"));
                        }
                        calls += 1;
                        // The plain tool keeps nothing: a session of its own for every call.
                        let session =
                            if name == "plain" { format!("plain-{}-{calls}", conv.id) } else { session.clone() };
                        let out = if name == "plain" {
                            let out = plain(&engine, &base, &session, &query, opts.budget, opts.limit)?;
                            sessions.delete(&ragctx_core::SessionId::parse(&session)?)?;
                            out
                        } else {
                            let all = ragctx_core::Filter::All;
                            ragctx.search(&session, &query, &all, Some(opts.budget), Some(opts.limit))?
                        };
                        turn.calls += 1;
                        turn.tokens += out.tokens;
                        let mut new = false;
                        for b in &out.blocks {
                            if b.chunk_ids.iter().any(|c| held.contains(c)) {
                                turn.duplicate_tokens += b.tokens;
                            }
                            if held_texts.insert(b.text.clone()) {
                                held_terms
                                    .extend(crate::mtrag_metrics::content_terms(&mut analyzer, &[&b.title, &b.text]));
                                let said: Vec<&str> = ragctx_core::text::sentences(&b.text)
                                    .into_iter()
                                    .filter(|x| x.trim() != ragctx_engine::sentences::CUT)
                                    .collect();
                                held_vectors.extend(memo.passages(&said)?);
                            }
                            for c in &b.chunk_ids {
                                new |= held.insert(c.clone());
                            }
                        }
                        turn.nothing_new += usize::from(!new);
                    }
                    if let Some((gold, _)) = conv.gold.get(&(i + 1)).filter(|(g, _)| !g.is_empty()) {
                        turn.gold_turns = 1;
                        turn.evidence_held =
                            gold.iter().filter(|g| held.contains(*g)).count() as f64 / gold.len() as f64;
                        let answer = answers.get(&(i + 1));
                        if let Some(support) =
                            answer.and_then(|(t, _)| crate::mtrag_metrics::answer_support(t, &held_terms))
                        {
                            let (_, vectors) = answer.expect("answered");
                            let threshold = crate::mtrag_metrics::SEMANTIC_THRESHOLD;
                            turn.answered = 1;
                            turn.support = support;
                            turn.semantic = crate::mtrag_metrics::semantic_support(vectors, &held_vectors, threshold)
                                .unwrap_or(0.0);
                        }
                    }
                    let n = i + 1;
                    let keys = [
                        Some("overall".to_owned()),
                        (n >= 5).then(|| "from_turn_5".to_owned()),
                        Some(format!("domain:{domain}")),
                    ];
                    for k in keys.into_iter().flatten() {
                        sums.entry((name.to_string(), k)).or_default().add(&turn);
                    }
                    by_turn.entry((name.to_string(), n)).or_default().add(&turn);
                    conv_sums.add(&turn);
                }
                row[name] = conv_sums.report();
            }
            per_conversation.push(row);
            // Sentences are shared by the two tools of one conversation, seldom by two.
            memo.passages.lock().expect("memo").clear();
        }
    }
    let _ = std::fs::remove_dir_all(&sessions_dir);
    if let Some(path) = &opts.calls_out {
        crate::error::write_file(path, calls_written.as_bytes())?;
    }
    let mut report = serde_json::json!({
        "budget": opts.budget,
        "limit": opts.limit,
        "conversations": convs.len(),
        "schedule": "per user turn: the question, its human rewrite (when it differs), the previous question again (from turn 2)",
        "seconds": started.elapsed().as_secs_f64(),
    });
    for tool in TOOLS {
        let mut t = serde_json::Map::new();
        for ((name, key), s) in &sums {
            if name == tool {
                t.insert(key.clone(), s.report());
            }
        }
        let turns: serde_json::Map<String, serde_json::Value> = by_turn
            .iter()
            .filter(|((name, _), _)| name == tool)
            .map(|((_, n), s)| (n.to_string(), s.report()))
            .collect();
        t.insert("by_turn".into(), serde_json::Value::Object(turns));
        report[tool] = serde_json::Value::Object(t);
    }
    report["per_conversation"] = serde_json::Value::Array(per_conversation);
    if opts.json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    println!(
        "agent replay: {} conversations, budget {} tokens and limit {} per call ({:.0} s)",
        convs.len(),
        opts.budget,
        opts.limit,
        started.elapsed().as_secs_f64()
    );
    println!(
        "{:<8} {:<12} {:>9} {:>10} {:>11} {:>9} {:>8} {:>8} {:>13}",
        "tool", "turns", "calls", "tokens/turn", "dup tokens", "evidence", "support", "meaning", "nothing new"
    );
    for key in ["overall", "from_turn_5"] {
        for tool in TOOLS {
            let r = &report[tool][key];
            let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
            println!(
                "{:<8} {:<12} {:>9} {:>10.0} {:>11} {:>9.3} {:>8.3} {:>8.3} {:>13}",
                tool,
                key,
                r["calls"],
                f("tokens_per_turn"),
                r["duplicate_tokens"],
                f("evidence_held"),
                f("answer_support"),
                f("semantic_support"),
                r["calls_nothing_new"]
            );
        }
    }
    let ratio = |key: &str| {
        let t = |tool: &str| report[tool][key]["tokens_per_turn"].as_f64().unwrap_or(0.0);
        if t("ragctx") > 0.0 {
            t("plain") / t("ragctx")
        } else {
            0.0
        }
    };
    println!(
        "plain / ragctx tokens per turn: {:.2}× overall, {:.2}× from turn 5",
        ratio("overall"),
        ratio("from_turn_5")
    );
    Ok(())
}
