//! `ragctx eval conflicts`: the seed's offline hard cases, written by us
//! (`eval/hardcases.json`) — cross-document conflicts whose both sides must reach the
//! context, asked three ways each (the same need must reach the same evidence), with
//! identical and near-identical copies of the sides under other ids (the model must not read
//! the same text twice), among distractors; every citation must name a block of the turn's
//! context, and so a documentID the model was shown.

use crate::error::{read_to_string, Error, Result};
use ragctx_app::config::Settings;
use ragctx_core::{Chunk, SessionId, SessionStore};
use ragctx_engine::TurnSettings;
use ragctx_index::IndexParams;
use serde::Deserialize;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

/// One document of the set.
#[derive(Clone, Deserialize)]
struct Doc {
    document_id: String,
    title: String,
    text: String,
    /// A copy: the side it copies.
    #[serde(default)]
    of: Option<String>,
    /// A copy: `identical` or `near`.
    #[serde(default)]
    kind: Option<String>,
}

/// A conflict: the questions (paraphrases of one need) and the two sides that disagree.
#[derive(Deserialize)]
struct Case {
    id: String,
    questions: Vec<String>,
    sides: Vec<Doc>,
    #[serde(default)]
    duplicates: Vec<Doc>,
}

#[derive(Deserialize)]
struct Set {
    conflicts: Vec<Case>,
    #[serde(default)]
    distractors: Vec<Doc>,
}

/// What one variant scored over every question of the set.
#[derive(Default, serde::Serialize)]
struct Row {
    variant: String,
    budget: usize,
    /// Questions asked (cases × paraphrases).
    questions: usize,
    /// Questions whose context holds both sides (a side or a copy of it).
    both_sides: usize,
    /// Cases whose every paraphrase reached both sides.
    cases_both_every_way: usize,
    /// Cases whose paraphrases reached the same sides (both, one and the same, or none).
    cases_consistent: usize,
    /// Blocks whose text the model already reads in another block of the same context (a
    /// copy beside its original or another copy).
    duplicate_blocks: usize,
    /// Tokens of those blocks.
    duplicate_tokens: usize,
    /// Blocks of a copy trimmed to the sentences that are its own (`near_duplicate`).
    trimmed_blocks: usize,
    /// Copies the turn left out and recorded (`duplicates` in the trace): identical, near.
    recorded_identical: usize,
    recorded_near: usize,
    /// Tokens the recorded copies would have cost.
    tokens_freed: usize,
    /// Context tokens, summed.
    context_tokens: usize,
    /// Citations the answers made, and markers naming no block of the context.
    citations: usize,
    invalid_citations: usize,
    /// Citations whose document was not among the context's blocks (must be 0).
    citations_outside_context: usize,
}

/// Runs the set through the default turn (`engine`), the default turn without near-duplicate
/// removal and plain top-k (`none`, as peers run it), at a tight and at the configured budget.
pub fn run(settings: &Settings, file: &Path, json: bool) -> Result<()> {
    let text = read_to_string(file)?;
    let set: Set = serde_json::from_str(&text).map_err(|e| Error::json(file, e.line(), e))?;
    let mut docs: Vec<&Doc> = Vec::new();
    for c in &set.conflicts {
        docs.extend(&c.sides);
        docs.extend(&c.duplicates);
    }
    docs.extend(&set.distractors);
    // Each copy stands for its side: "both sides in context" counts a side or any copy of it.
    let group_of: HashMap<&str, &str> =
        docs.iter().map(|d| (d.document_id.as_str(), d.of.as_deref().unwrap_or(d.document_id.as_str()))).collect();
    let embedder = ragctx_app::app::embedder(settings)?;
    let sourced: Vec<ragctx_ingest::SourcedChunk> = docs
        .iter()
        .map(|d| {
            let mut chunk = Chunk::new(&format!("{}#0", d.document_id), &d.document_id, &d.title, &d.text);
            chunk.ordinal = Some(0);
            ragctx_ingest::SourcedChunk { chunk, file: file.display().to_string(), line: None, page_starts: Vec::new() }
        })
        .collect();
    // The one ingest path (no cache: a few hundred passages).
    let store = ragctx_store::MemoryVectorStore::new(embedder.dimension(), IndexParams::default());
    let counter = ragctx_models::Cl100kCounter::new();
    let embedded = ragctx_engine::ingest::embed_chunks(
        embedder.as_ref(),
        &counter,
        None,
        &ragctx_engine::ingest::Logged,
        sourced,
        true,
    )?;
    ragctx_engine::ingest::store_embedded(&store, embedded, true)?;
    let dir = std::env::temp_dir().join(format!("ragctx-hardcases-{}", std::process::id()));
    let data = ragctx_store::DataDir::open(&dir, embedder.dimension())?;
    let sessions: Arc<dyn SessionStore> = Arc::new(data.session_store());
    // The configured generator (`generator = "openai"`: citations a real model wrote).
    let mut engine = ragctx_app::app::engine_over(Arc::new(store), sessions.clone(), embedder);
    ragctx_app::app::with_models(&mut engine, settings)?;
    let base = crate::replay_settings(settings);
    let variants: [(&str, TurnSettings); 3] = [
        ("engine", base.clone()),
        ("engine, identical text only", TurnSettings { near_duplicate: 0.0, ..base.clone() }),
        ("none (plain top-k)", ragctx_engine::presets::plain_top_k(&base)),
    ];
    let mut rows = Vec::new();
    for budget in [1_000usize, base.budget] {
        for (v, (name, s)) in variants.iter().enumerate() {
            let s = TurnSettings { budget, ..s.clone() };
            let mut row = Row { variant: (*name).into(), budget, ..Default::default() };
            for c in &set.conflicts {
                let sides: BTreeSet<&str> = c.sides.iter().map(|d| d.document_id.as_str()).collect();
                let mut reached: Vec<BTreeSet<&str>> = Vec::new();
                for (i, q) in c.questions.iter().enumerate() {
                    let session = SessionId::parse(&format!("hard-{v}-{budget}-{}-{i}", c.id))?;
                    sessions.delete(&session)?;
                    let out = engine.ask(&session, q, &s)?;
                    sessions.delete(&session)?;
                    row.questions += 1;
                    let in_context: Vec<&str> = out.context.iter().map(|b| b.document_id.as_str()).collect();
                    let groups: BTreeSet<&str> = in_context
                        .iter()
                        .filter_map(|d| group_of.get(d).copied())
                        .filter(|g| sides.contains(g))
                        .collect();
                    if groups.len() == sides.len() {
                        row.both_sides += 1;
                    }
                    reached.push(groups);
                    let trimmed: BTreeSet<&str> =
                        out.trace.duplicates.iter().filter(|d| d.trimmed).map(|d| d.chunk.as_str()).collect();
                    let mut seen_groups: BTreeSet<&str> = BTreeSet::new();
                    for b in &out.context {
                        let g = group_of.get(b.document_id.as_str()).copied().unwrap_or(b.document_id.as_str());
                        if seen_groups.insert(g) {
                            continue;
                        }
                        if b.chunk_ids.iter().any(|c| trimmed.contains(c.as_str())) {
                            row.trimmed_blocks += 1;
                        } else {
                            row.duplicate_blocks += 1;
                            row.duplicate_tokens += b.tokens;
                        }
                    }
                    for d in &out.trace.duplicates {
                        if d.resemblance >= 1.0 {
                            row.recorded_identical += 1;
                        } else {
                            row.recorded_near += 1;
                        }
                        row.tokens_freed += d.tokens;
                    }
                    row.context_tokens += out.trace.context_tokens;
                    row.citations += out.citations.len();
                    row.invalid_citations += out.invalid_markers.len();
                    row.citations_outside_context +=
                        out.citations.iter().filter(|ct| !in_context.contains(&ct.document_id.as_str())).count();
                }
                if reached.iter().all(|r| r.len() == sides.len()) {
                    row.cases_both_every_way += 1;
                }
                if reached.windows(2).all(|w| w[0] == w[1]) {
                    row.cases_consistent += 1;
                }
            }
            rows.push(row);
        }
    }
    drop(data);
    let _ = std::fs::remove_dir_all(&dir);
    let cases = set.conflicts.len();
    let outside: usize = rows.iter().map(|r| r.citations_outside_context).sum();
    if json {
        println!("{}", serde_json::json!({"cases": cases, "rows": rows}));
    } else {
        print_table(&set, &rows, file);
    }
    if outside > 0 {
        crate::error::bail!("{outside} citations named a document that was not in the turn's context");
    }
    Ok(())
}

fn print_table(set: &Set, rows: &[Row], file: &Path) {
    let cases = set.conflicts.len();
    let copies: usize = set.conflicts.iter().map(|c| c.duplicates.len()).sum();
    let near = set.conflicts.iter().flat_map(|c| &c.duplicates).filter(|d| d.kind.as_deref() == Some("near")).count();
    println!(
        "{cases} conflicts asked {} ways in all, {copies} copies of their sides ({near} near-identical), {} distractors ({})",
        rows.first().map_or(0, |r| r.questions),
        set.distractors.len(),
        file.display()
    );
    println!("| variant | budget | both sides (questions) | both sides every way (cases) | consistent paraphrases (cases) | copies read whole | their tokens | copies trimmed to their own sentences | copies recorded (identical / near) | tokens freed | context tokens / question | citations | invalid | outside context |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {}/{} | {}/{cases} | {}/{cases} | {} | {} | {} | {} / {} | {} | {:.0} | {} | {} | {} |",
            r.variant,
            r.budget,
            r.both_sides,
            r.questions,
            r.cases_both_every_way,
            r.cases_consistent,
            r.duplicate_blocks,
            r.duplicate_tokens,
            r.trimmed_blocks,
            r.recorded_identical,
            r.recorded_near,
            r.tokens_freed,
            r.context_tokens as f64 / r.questions.max(1) as f64,
            r.citations,
            r.invalid_citations,
            r.citations_outside_context
        );
    }
}
