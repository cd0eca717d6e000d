//! The pipeline in one place (DESIGN §2): [`STAGES`] in order, the runner ([`Engine::plan`])
//! and the stages small enough to live here. A stage reads what it needs from the [`Turn`]
//! and writes its results and its own trace fields; a stage with a module of its own
//! ([`crate::rerank`], [`crate::diversity`], [`crate::compress`]) keeps there its switch, its
//! work and its trace record. Adding a stage: its module (`runs`, `stage`, and `record` when
//! its record needs the finished prompt), one line in [`STAGES`], one row for its setting in
//! `turn_overrides!` (ragctx-core), one field for its record in [`TraceStats`].

use super::*;
use crate::context::PointerCandidate;
use crate::reads::TurnReads;

/// One stage of the pipeline.
pub struct Stage {
    /// Its name: its span's, and its key in the trace's `timings_ms` when `timed`.
    pub name: &'static str,
    /// Whether its time is written in the trace (the bookkeeping stages before the first
    /// model call are not: they take microseconds).
    pub timed: bool,
    /// Whether it runs for this turn (a stage that is switched off leaves no timing).
    pub runs: fn(&Turn<'_>) -> bool,
    /// The stage: reads the turn, writes its results and its trace fields.
    pub run: fn(&Engine, &mut Turn<'_>) -> Result<()>,
    /// The part of its trace record that depends on the finished prompt (what of its work
    /// reached the context), written after every stage has run; only if the stage ran.
    pub record: Option<fn(&Engine, &mut Turn<'_>)>,
}

fn always(_: &Turn<'_>) -> bool {
    true
}

/// The pipeline, in order (DESIGN §2; ARCHITECTURE.md draws it). `remember` (the commit) and
/// `condense` (asked once per turn, before the first plan) are the runner's, not stages.
pub const STAGES: &[Stage] = &[
    Stage { name: "intent", timed: false, runs: always, run: intent_stage, record: None },
    Stage { name: "exclusion", timed: false, runs: always, run: exclusion_stage, record: None },
    Stage { name: "embed", timed: true, runs: always, run: embed_stage, record: None },
    Stage { name: "search", timed: true, runs: always, run: search_stage, record: None },
    Stage { name: "slots", timed: false, runs: slots_run, run: slots_stage, record: None },
    Stage { name: "rerank", timed: true, runs: crate::rerank::runs, run: crate::rerank::stage, record: None },
    Stage { name: "diversity", timed: true, runs: crate::diversity::runs, run: crate::diversity::stage, record: None },
    Stage { name: "dedupe", timed: true, runs: always, run: dedupe_stage, record: None },
    Stage {
        name: "compress",
        timed: true,
        runs: crate::compress::runs,
        run: crate::compress::stage,
        record: Some(crate::compress::record),
    },
    Stage { name: "assemble", timed: true, runs: always, run: assemble_stage, record: None },
    Stage { name: "generate", timed: true, runs: |t| !t.retrieve_only, run: generate_stage, record: None },
];

/// Stage 1: the intent — forced by `mode`, or classified.
fn intent_stage(_: &Engine, t: &mut Turn<'_>) -> Result<()> {
    t.intent = stages::intent_of(t.state, t.question, t.settings);
    t.stats.intent = t.intent;
    Ok(())
}

/// Stage 2: the exclusion set and the working set.
fn exclusion_stage(_: &Engine, t: &mut Turn<'_>) -> Result<()> {
    t.working = stages::working_set(t.state, t.intent, t.settings, t.given_exclusion.take());
    t.stats.excluded = t.working.exclusion.len();
    Ok(())
}

/// Stage 3: the query's text and vectors.
fn embed_stage(e: &Engine, t: &mut Turn<'_>) -> Result<()> {
    let query = e.query(t.state, t.intent, t.asked_query, t.settings)?;
    t.stats.mixed_questions = query.mixed;
    t.query = Some(query);
    Ok(())
}

/// Stage 3: the search with exclusion inside it, the engaged documents' prior, then the
/// working set scored against the query (carried in `engine` memory, pointers in `client`).
fn search_stage(e: &Engine, t: &mut Turn<'_>) -> Result<()> {
    let c = e.candidates(t.state, t.intent, t.query(), &t.working, t.reshow.as_deref(), t.settings)?;
    t.stats.candidates = c.hits.len();
    t.stats.search_path = c.path;
    t.stats.search_rounds = c.rounds;
    t.stats.search_reason = c.reason.to_string();
    t.stats.retrieval = c.sides;
    (t.quotas, t.previous) = (c.quotas, c.previous);
    let mut new_hits = c.hits;
    t.stats.engaged = stages::engaged_stage(t.state, t.intent, &t.working, &mut new_hits, t.settings);
    let vector = &t.query().vector;
    let ranked = stages::rank_working_set(
        t.intent,
        &t.working,
        new_hits,
        |ids| e.scored(vector, ids, &t.settings.filter),
        t.settings,
    )?;
    (t.hits, t.pointers, t.held_scores) = (ranked.hits, ranked.pointers, ranked.held_scores);
    Ok(())
}

/// `freed_slots keep` in `client` memory, for a turn whose `limit` counts chunks (a strategy
/// that does not group); never for a reshow (it shows again what it was asked to).
fn slots_run(t: &Turn<'_>) -> bool {
    t.settings.freed_slots == ragctx_core::FreedSlots::Keep
        && t.settings.memory == Memory::Client
        && !t.settings.strategy.groups()
        && t.intent != Intent::Reshow
}

/// Stage 3: the held chunks keep their slots; what falls outside the top `limit` leaves.
fn slots_stage(_: &Engine, t: &mut Turn<'_>) -> Result<()> {
    stages::keep_slots(&mut t.hits, &mut t.pointers, &t.held_scores, t.settings);
    Ok(())
}

/// Stage 4: dedupe by document, the relevance floor, then near-identical text.
fn dedupe_stage(e: &Engine, t: &mut Turn<'_>) -> Result<()> {
    let hits = std::mem::take(&mut t.hits);
    let grouping = (std::mem::take(&mut t.quotas), t.previous.as_slice());
    let mut deduped = stages::dedupe_stage(t.intent, hits, grouping, &t.working.first_shown, t.settings);
    // With held chunks keeping their slots (an agent's search), the floor counts them too.
    let held: &[PointerCandidate] =
        if t.settings.freed_slots == ragctx_core::FreedSlots::Keep { &t.pointers } else { &[] };
    t.stats.below_floor = stages::floor_stage(t.intent, &mut deduped.fragments, held, t.settings);
    // Near-identical text goes where identical text does (strategies that exclude or
    // group); a reshow shows again what it showed.
    if t.intent != Intent::Reshow && (t.settings.strategy.excludes() || t.settings.strategy.groups()) {
        dedupe::near_duplicates(&mut deduped, t.settings.near_duplicate, e.counter.as_ref());
    }
    t.stats.unique_documents = deduped.unique_documents;
    t.stats.aliases = std::mem::take(&mut deduped.aliases);
    t.stats.duplicates = std::mem::take(&mut deduped.duplicates);
    t.deduped = deduped;
    Ok(())
}

/// Stage 5: the conversation, the blocks and pointers within the budget, the prompt.
fn assemble_stage(e: &Engine, t: &mut Turn<'_>) -> Result<()> {
    let asked = t.query().reshown_question.as_deref().unwrap_or(t.question);
    let built = stages::build_prompt(
        t.state,
        asked,
        &t.deduped.fragments,
        &t.pointers,
        t.conversation,
        t.settings,
        e.counter.as_ref(),
    );
    let c = &built.context;
    t.stats.context_fragments = c.blocks.len();
    t.stats.context_tokens = c.tokens;
    t.stats.prompt_tokens = built.prompt_tokens;
    t.stats.conversation_tokens = built.conversation_tokens;
    t.stats.carried = c.blocks.iter().filter(|b| b.carried_from.is_some()).count();
    t.stats.pointers = c.pointers.len();
    t.stats.dropped_by_budget = c.dropped_by_budget.clone();
    t.built = Some(built);
    Ok(())
}

/// Stage 6: the answer (a reshow answers the question it shows again), what its markers name,
/// and the sentences its statements cite.
fn generate_stage(e: &Engine, t: &mut Turn<'_>) -> Result<()> {
    let built = t.built.as_ref().expect("assemble runs before generate");
    let question = t.query().reshown_question.as_deref().unwrap_or(t.question);
    let request = GenerationRequest {
        question,
        blocks: &built.context.blocks,
        pointers: &built.context.pointers,
        prompt: &built.prompt,
    };
    let answer = match t.on_delta {
        Some(f) => e.generator.generate_streaming(&request, f)?,
        None => e.generator.generate(&request)?,
    };
    let blocks = &built.context.blocks;
    let (mut citations, invalid) = context::check_citations(&answer, blocks, &built.context.pointers);
    // The sentences the statements come from, read for the cited blocks only (through the
    // turn's memo: their chunks were read by the search). The answer is given: a read that
    // fails leaves the block's sentences as its text reads, without chunks or their pages.
    let mut sentences = vec![Vec::new(); blocks.len()];
    for (b, list) in blocks.iter().zip(sentences.iter_mut()) {
        if citations.iter().any(|c| c.marker == b.marker) {
            let chunks = e.vectors.chunks(&b.chunk_ids).unwrap_or_else(|err| {
                tracing::warn!(%err, "the cited block's chunks could not be read: its sentences cite no chunk");
                Vec::new()
            });
            let multi_page = chunks.iter().any(|c| ragctx_core::pages(&c.metadata).is_some_and(|(a, z)| a < z));
            let ids: Vec<ChunkId> = chunks.iter().map(|c| c.id.clone()).collect();
            let index = match multi_page {
                true => e.vectors.sentences(&ids).unwrap_or_else(|err| {
                    tracing::warn!(%err, "the sentence index could not be read: cited sentences name no page");
                    vec![None; ids.len()]
                }),
                false => vec![None; ids.len()],
            };
            *list = context::block_sentences(b, &chunks, &index);
        }
    }
    context::cite_sentences(&answer, &mut citations, blocks, &sentences);
    t.stats.answer_citations = citations.len();
    t.stats.invalid_citations = invalid.len();
    (t.answer, t.citations, t.invalid_markers) = (answer, citations, invalid);
    Ok(())
}

impl Engine {
    /// Runs every stage of [`STAGES`] that is on for `turn`, in order, timing each.
    pub fn plan(&self, turn: &mut Turn<'_>) -> Result<()> {
        // Every stage reads the store through one memo: each chunk and vector at most once
        // per plan (`reads.rs`).
        let engine = Engine { vectors: Arc::new(TurnReads::new(self.vectors.clone())), ..self.clone() };
        let engine = &engine;
        let mut records = Vec::new();
        for stage in STAGES {
            if !(stage.runs)(turn) {
                continue;
            }
            let started = Instant::now();
            let _span = tracing::info_span!("stage", stage = stage.name).entered();
            (stage.run)(engine, turn)?;
            if stage.timed {
                turn.stats.timings_ms.insert(stage.name.into(), ms_since(started));
            }
            records.extend(stage.record);
        }
        for record in records {
            record(engine, turn);
        }
        Ok(())
    }
}
