//! One turn as one value (DESIGN §2). [`TurnInput`] is everything a caller may ask of a turn;
//! [`Turn`] carries what it was asked, what each stage found so far and the turn's record
//! ([`TraceStats`], filled in as it goes). The stages that move it along are in
//! [`crate::pipeline`].

use super::*;
use crate::context::PointerCandidate;
use crate::dedupe::Deduped;
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

/// One turn on its way through [`crate::STAGES`]: what it was asked, what the stages found so far,
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
