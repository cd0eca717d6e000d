//! One turn as one value through a list of stages (DESIGN §2). [`TurnInput`] is everything a
//! caller may ask of a turn; [`Turn`] carries what it was asked, what each stage found so
//! far and the turn's record ([`TraceStats`], filled in as it goes); [`STAGES`] is the
//! pipeline in order. A stage reads what it needs from the turn and writes its results and
//! its own trace fields; the runner ([`Engine::plan`]) times it and opens its span. Adding a
//! stage is a module with one `fn(&Engine, &mut Turn) -> Result<()>`, one line in
//! [`STAGES`], and its setting.

use super::*;
use crate::context::PointerCandidate;
use crate::dedupe::Deduped;
use crate::reads::TurnReads;
use crate::stages::{Built, Query, WorkingSet};

/// What a caller asks of one turn ([`Engine::run`]). Everything but the session, the
/// question and the settings is optional:
///
/// ```no_run
/// # fn demo(engine: ragctx_engine::Engine, deadline: std::time::Instant) -> ragctx_core::Result<()> {
/// use ragctx_engine::{TurnInput, TurnSettings};
/// let session = ragctx_core::SessionId::parse("s1")?;
/// let settings = TurnSettings::default();
/// let turn = engine.run(TurnInput::new(&session, "And the fees?", &settings).deadline(deadline))?;
/// # Ok(()) }
/// ```
#[derive(Clone, Copy)]
pub struct TurnInput<'a> {
    /// The session the turn belongs to.
    pub session: &'a SessionId,
    /// The question as the user asked it (what the answer addresses).
    pub question: &'a str,
    /// The text embedded for the search when it is not the question (a rewrite, or the
    /// question with recent turns, as an evaluation builds it).
    pub query: Option<&'a str>,
    /// The conversation as the caller keeps it (the OpenAI-compatible front passes the
    /// client's `messages`), instead of the session's remembered turns, for an `engine` prompt.
    pub conversation: Option<&'a [Utterance]>,
    /// The turn's settings.
    pub settings: &'a TurnSettings,
    /// Past it, the turn gives up instead of committing: a caller that stopped waiting never
    /// finds the turn recorded behind its back.
    pub deadline: Option<Instant>,
    /// Where the answer streams to, piece by piece, as the generator produces it. Only the
    /// first plan streams: when another process commits a turn of this session meanwhile,
    /// the turn is planned and answered again without streaming, and the answer recorded
    /// differs from what was streamed.
    pub on_delta: Option<&'a (dyn Fn(&str) + Sync)>,
    /// Retrieve only: the context is built and recorded, no answer is generated (an agent's
    /// search tool; the caller's model reads the blocks).
    pub retrieve_only: bool,
    /// Shows these chunks again (`open`: an agent asking for what it held, by id), bypassing
    /// exclusion; the turn runs as a reshow of them instead of the previous turn's.
    pub reshow: Option<&'a [ChunkId]>,
}

impl<'a> TurnInput<'a> {
    /// A turn that asks `question` with `settings`, nothing else given.
    pub fn new(session: &'a SessionId, question: &'a str, settings: &'a TurnSettings) -> Self {
        TurnInput {
            session,
            question,
            query: None,
            conversation: None,
            settings,
            deadline: None,
            on_delta: None,
            retrieve_only: false,
            reshow: None,
        }
    }

    /// Searches with `query` instead of the question.
    pub fn query(self, query: &'a str) -> Self {
        TurnInput { query: Some(query), ..self }
    }

    /// Builds an `engine` prompt with `conversation` instead of the session's turns.
    pub fn conversation(self, conversation: &'a [Utterance]) -> Self {
        TurnInput { conversation: Some(conversation), ..self }
    }

    /// Gives up instead of committing once `deadline` has passed.
    pub fn deadline(self, deadline: Instant) -> Self {
        TurnInput { deadline: Some(deadline), ..self }
    }

    /// Streams the answer to `on_delta` as it is generated.
    pub fn streaming(self, on_delta: &'a (dyn Fn(&str) + Sync)) -> Self {
        TurnInput { on_delta: Some(on_delta), ..self }
    }

    /// Builds and records the context without generating an answer.
    pub fn retrieve_only(self) -> Self {
        TurnInput { retrieve_only: true, ..self }
    }
}

/// One turn on its way through [`STAGES`]: what it was asked, what the stages found so far,
/// and its record.
pub struct Turn<'a> {
    /// The session as the turn read it.
    pub state: &'a SessionState,
    /// The turn's settings.
    pub settings: &'a TurnSettings,
    /// The question as asked.
    pub question: &'a str,
    /// The text to embed (the question, a caller's query, or the condenser's rewrite).
    pub asked_query: &'a str,
    /// The caller's conversation, when it gave one.
    pub conversation: Option<&'a [Utterance]>,
    /// Where the answer streams to.
    pub on_delta: Option<&'a (dyn Fn(&str) + Sync)>,
    /// An exclusion given instead of the session's (a replay's, from its trace).
    pub given_exclusion: Option<ExclusionSet>,
    /// No answer is generated ([`TurnInput::retrieve_only`]).
    pub retrieve_only: bool,
    /// A reshow of these chunks instead of the previous turn's ([`TurnInput::reshow`]).
    pub reshow: Option<Vec<ChunkId>>,
    /// Stage 1: the intent the turn runs with.
    pub intent: Intent,
    /// Stage 2: the exclusion set and the working set.
    pub working: WorkingSet,
    /// Stage 3: the query text and vectors (set by `embed`).
    pub query: Option<Query>,
    /// Stage 3 onwards: the candidates, best first once a stage has ordered them (the new
    /// ones and, in `engine` memory, the working set's that rank).
    pub hits: Vec<Hit>,
    /// `client` memory: the working set's documents that rank, as pointers.
    pub pointers: Vec<PointerCandidate>,
    /// `client` memory: the scores of the working set's chunks that rank.
    pub held_scores: Vec<f32>,
    /// Per-document quotas above `group_size` (a follow-up's documents; a reshow's).
    pub quotas: HashMap<DocumentId, usize>,
    /// The documents of the previous turn (a reshow: in its prompt's order).
    pub previous: Vec<DocumentId>,
    /// Stage 4: what dedupe kept.
    pub deduped: Deduped,
    /// Stage 5: the prompt within the budget (set by `assemble`).
    pub built: Option<Built>,
    /// Stage 6: the answer and what its markers name.
    pub answer: String,
    /// The answer's markers that name a block or pointer.
    pub citations: Vec<ragctx_core::Citation>,
    /// The answer's markers that name nothing of this turn.
    pub invalid_markers: Vec<u32>,
    /// The turn's record, each stage writing its own fields.
    pub stats: TraceStats,
}

impl<'a> Turn<'a> {
    /// A turn before its stages: `query` is the text to embed.
    pub fn new(
        state: &'a SessionState,
        settings: &'a TurnSettings,
        question: &'a str,
        query: &'a str,
        tokenizer: &str,
    ) -> Turn<'a> {
        Turn {
            state,
            settings,
            question,
            asked_query: query,
            conversation: None,
            on_delta: None,
            given_exclusion: None,
            retrieve_only: false,
            reshow: None,
            intent: Intent::New,
            working: WorkingSet { exclusion: ExclusionSet::default(), first_shown: HashMap::new() },
            query: None,
            hits: Vec::new(),
            pointers: Vec::new(),
            held_scores: Vec::new(),
            quotas: HashMap::new(),
            previous: Vec::new(),
            deduped: Deduped::default(),
            built: None,
            answer: String::new(),
            citations: Vec::new(),
            invalid_markers: Vec::new(),
            stats: TraceStats::starting(settings.effective(tokenizer)),
        }
    }

    /// The query the `embed` stage made; a stage after it may rely on it.
    pub fn query(&self) -> &Query {
        self.query.as_ref().expect("the embed stage runs before every stage that reads the query")
    }

    /// The finished turn as its trace (turn number 0 until committed), the record the
    /// session keeps, and the markers it handed out.
    pub fn into_trace(self, session: &SessionId) -> (Trace, ragctx_core::TurnRecord, BTreeMap<DocumentId, u32>) {
        let query = self.query.expect("a finished turn has run every stage");
        let built = self.built.expect("a finished turn has run every stage");
        let trace = Trace {
            session_id: session.to_string(),
            turn: 0,
            question: self.question.to_owned(),
            query: query.text,
            answer: self.answer,
            citations: self.citations,
            context: built.context.blocks,
            pointers: built.context.pointers,
            query_vector: Some(ragctx_core::QuantizedVector::quantize(&query.own_vector)),
            exclusion: self.working.exclusion,
            invalid_markers: self.invalid_markers,
            at_unix_ms: now_ms(),
            trace: TraceStats { retrieve_only: self.retrieve_only, ..self.stats },
        };
        let record = memory::record_of(&trace);
        (trace, record, built.context.new_markers)
    }
}

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
}

fn always(_: &Turn<'_>) -> bool {
    true
}

/// The pipeline, in order (DESIGN §2; ARCHITECTURE.md draws it). `remember` (the commit) and
/// `condense` (asked once per turn, before the first plan) are the runner's, not stages.
pub const STAGES: &[Stage] = &[
    Stage { name: "intent", timed: false, runs: always, run: intent_stage },
    Stage { name: "exclusion", timed: false, runs: always, run: exclusion_stage },
    Stage { name: "embed", timed: true, runs: always, run: embed_stage },
    Stage { name: "search", timed: true, runs: always, run: search_stage },
    Stage { name: "slots", timed: false, runs: slots_run, run: slots_stage },
    Stage { name: "rerank", timed: true, runs: crate::rerank::runs, run: crate::rerank::stage },
    Stage { name: "diversity", timed: true, runs: crate::diversity::runs, run: crate::diversity::stage },
    Stage { name: "dedupe", timed: true, runs: always, run: dedupe_stage },
    Stage { name: "compress", timed: true, runs: crate::compress::runs, run: crate::compress::stage },
    Stage { name: "assemble", timed: true, runs: always, run: assemble_stage },
    Stage { name: "generate", timed: true, runs: |t| !t.retrieve_only, run: generate_stage },
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
    t.stats.search_reason = c.reason;
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
    if crate::compress::runs(t) {
        // The cut blocks that made it into the context, each by its first chunk.
        let freed: HashMap<&ChunkId, usize> = t
            .deduped
            .fragments
            .iter()
            .filter(|f| f.freed > 0)
            .filter_map(|f| Some((&f.chunks.first()?.id, f.freed)))
            .collect();
        let cut: Vec<(ChunkId, usize)> = c
            .blocks
            .iter()
            .filter_map(|b| b.chunk_ids.first().and_then(|id| freed.get(id).map(|&n| (id.clone(), n))))
            .collect();
        t.stats.compressed = Some(ragctx_core::Compressed {
            freed_tokens: cut.iter().map(|c| c.1).sum(),
            cut: cut.into_iter().map(|c| c.0).collect(),
        });
    }
    t.built = Some(built);
    Ok(())
}

/// Stage 6: the answer (a reshow answers the question it shows again), and what its markers
/// name.
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
    let (citations, invalid) = context::check_citations(&answer, &built.context.blocks, &built.context.pointers);
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
        }
        Ok(())
    }
}
