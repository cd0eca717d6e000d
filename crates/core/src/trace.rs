use crate::{
    ChunkId, Citation, ContextBlock, DocumentId, ExclusionSet, Fusion, Intent, Memory, Pointer, QuantizedVector,
    Retrieval, SearchPath, TurnSettings,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The settings a turn actually ran with (after config, flags and intent): its
/// [`TurnSettings`] as the turn used them (`engine` memory: chunk granularity) and the token
/// counter. In JSON one flat object, as traces have always been written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EffectiveSettings {
    /// The turn's settings.
    #[serde(flatten)]
    pub turn: TurnSettings,
    /// The token counter's name (`cl100k_base`).
    pub tokenizer: String,
}

/// What a trace or setting written before memory modes means: the caller kept the contexts,
/// nothing was carried.
pub(crate) fn memory_before_modes() -> Memory {
    Memory::Client
}

/// The numbers of one turn: enough to tell "retrieval missed" from "the context did not
/// fit" without rerunning anything.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceStats {
    /// Chunks returned by the search (all rounds).
    pub candidates: usize,
    /// Documents left after dedupe.
    pub unique_documents: usize,
    /// Blocks in the context.
    pub context_fragments: usize,
    /// Tokens of the evidence: blocks and pointers, headers included.
    pub context_tokens: usize,
    /// Everything the model reads this turn from ragctx: instructions, the conversation
    /// (`engine` memory), blocks, pointers and the question.
    pub prompt_tokens: usize,
    /// `engine` memory: tokens of the earlier questions and answers in the prompt.
    #[serde(default)]
    pub conversation_tokens: usize,
    /// Distinct markers of the answer that name a block or pointer of this turn.
    pub answer_citations: usize,
    /// Distinct markers of the answer that name no block or pointer of this turn.
    pub invalid_citations: usize,
    /// Size of the exclusion set (ids).
    pub excluded: usize,
    /// Who keeps earlier contexts: `engine` (ragctx carries the working set) or `client`.
    /// Traces written before memory modes read as `client`: nothing was carried then.
    #[serde(default = "memory_before_modes")]
    pub memory: Memory,
    /// Blocks carried from the working set (shown in an earlier turn of the window).
    #[serde(default)]
    pub carried: usize,
    /// Pointers to chunks the caller already holds (`client` memory).
    #[serde(default)]
    pub pointers: usize,
    /// Earlier questions mixed into the query (`conversation_query`).
    #[serde(default)]
    pub mixed_questions: usize,
    /// Times the turn was planned again because another turn of the session committed
    /// while it was being planned (several servers or clients on one session).
    #[serde(default)]
    pub replans: u32,
    /// Documents left out because their block or pointer did not fit the budget, in rank order.
    pub dropped_by_budget: Vec<DocumentId>,
    /// Documents left out because their best block scored below `relevance_floor` × the
    /// turn's best, in rank order (traces from before the floor: none).
    #[serde(default)]
    pub below_floor: Vec<DocumentId>,
    /// New candidates of documents the window showed or cited that gained `engaged_prior`.
    #[serde(default)]
    pub engaged: usize,
    /// The intent the turn ran with (classified, or forced by `mode`).
    pub intent: Intent,
    /// How the store searched (`exact` for a reshow, which fetches the earlier chunks by id).
    pub search_path: SearchPath,
    /// Searches run, deeper ones included (0 for a reshow).
    pub search_rounds: u32,
    /// Why the store took its path, in words.
    pub search_reason: String,
    /// Lexical or hybrid retrieval: what each side found (absent for dense).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieval: Option<RetrievalTrace>,
    /// Documents whose text duplicated a better-scoring document: `(dropped, kept)`.
    pub aliases: Vec<(DocumentId, DocumentId)>,
    /// Chunks left out, or trimmed to the sentences that are theirs, because a better chunk
    /// of the turn holds their text, identical or nearly (`near_duplicate`), with the tokens
    /// each freed (traces from before: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub duplicates: Vec<Duplicate>,
    /// `condense openai`: the standalone query the model wrote, or why the turn fell back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condensed: Option<Condensed>,
    /// `rerank remote`: what the reranker was given, or why the turn kept the search's order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reranked: Option<Reranked>,
    /// `compress sentences`: the blocks of the context that were cut and the tokens that freed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compressed: Option<Compressed>,
    /// `diversity` above 0: what maximal marginal relevance changed in the candidates' order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diversified: Option<Diversified>,
    /// An agent's `forget` step: the chunks that left the working set (none for a turn).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forgotten: Vec<ChunkId>,
    /// No answer was generated: an agent's `search` (or, with intent `reshow`, its `open`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retrieve_only: bool,
    /// The settings the turn ran with.
    pub settings: EffectiveSettings,
    /// Milliseconds per stage (`embed`, `search`, `dedupe`, `assemble`, `generate`); the turn's
    /// outcome also has `remember` and `total`, which the stored trace lacks.
    pub timings_ms: BTreeMap<String, f64>,
}

/// What a step of a session was, as its trace tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// A chat turn: a question answered.
    Turn,
    /// An agent's `search`.
    Search,
    /// An agent's `open`: held passages shown again.
    Open,
    /// An agent's `forget`.
    Forget,
}

impl StepKind {
    /// `turn`, `search`, `open` or `forget`.
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Turn => "turn",
            StepKind::Search => "search",
            StepKind::Open => "open",
            StepKind::Forget => "forget",
        }
    }
}

impl TraceStats {
    /// What the step was: a forget, an agent's open or search (retrieve-only), or a turn.
    pub fn step_kind(&self) -> StepKind {
        match (self.forgotten.is_empty(), self.retrieve_only, self.intent) {
            (false, _, _) => StepKind::Forget,
            (true, true, Intent::Reshow) => StepKind::Open,
            (true, true, _) => StepKind::Search,
            (true, false, _) => StepKind::Turn,
        }
    }

    /// The numbers of a turn before its stages have run: nothing found, nothing kept; each
    /// stage writes its own ([`TraceStats`] is the turn's record as it goes).
    pub fn starting(settings: EffectiveSettings) -> TraceStats {
        TraceStats {
            candidates: 0,
            unique_documents: 0,
            context_fragments: 0,
            context_tokens: 0,
            prompt_tokens: 0,
            conversation_tokens: 0,
            answer_citations: 0,
            invalid_citations: 0,
            excluded: 0,
            memory: settings.turn.memory,
            carried: 0,
            pointers: 0,
            mixed_questions: 0,
            replans: 0,
            dropped_by_budget: Vec::new(),
            below_floor: Vec::new(),
            engaged: 0,
            intent: Intent::New,
            search_path: SearchPath::Exact,
            search_rounds: 0,
            search_reason: String::new(),
            retrieval: None,
            aliases: Vec::new(),
            duplicates: Vec::new(),
            condensed: None,
            reranked: None,
            compressed: None,
            diversified: None,
            forgotten: Vec::new(),
            retrieve_only: false,
            settings,
            timings_ms: BTreeMap::new(),
        }
    }
}

/// `compress sentences`: what cutting blocks to their sentences did in this turn's context.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Compressed {
    /// The blocks of the context that were cut (each by its first chunk).
    pub cut: Vec<ChunkId>,
    /// Tokens the cut blocks would have cost whole, less what they cost cut: what went to
    /// further sources.
    pub freed_tokens: usize,
    /// `learned`: sentences of the turn's candidate blocks judged and kept.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub kept_sentences: usize,
    /// `learned`: sentences judged and left out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cut_sentences: usize,
    /// `learned`: candidate blocks kept whole because no sentence index covers their text
    /// (a store ingested before it, or adjacent chunks merged over an overlap).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub whole_unjudged: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// `rerank remote`: what the reranker was asked and what came of it. The turn keeps the
/// search's order when `fallback` says why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reranked {
    /// The reranker asked (its model's name, or its URL).
    pub model: String,
    /// Candidates sent (the first `rerank_top_n` of the search's order).
    pub candidates: usize,
    /// Candidates whose place the reranker changed.
    pub moved: usize,
    /// Why the turn kept the search's order: the endpoint's error, its time-out, or an
    /// answer that does not score every candidate sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// Milliseconds the endpoint took.
    pub ms: f64,
}

/// `diversity` above 0: maximal marginal relevance over the turn's candidates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Diversified {
    /// Candidates re-ordered (the new ones and, in `engine` memory, the working set's that rank).
    pub candidates: usize,
    /// Candidates whose place changed.
    pub moved: usize,
}

/// A chunk whose text a better-scoring chunk of the turn already holds, identical or nearly:
/// left out, or (`trimmed`) kept with only its sentences the other lacks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Duplicate {
    /// The chunk left out or trimmed (the first of its block when adjacent chunks merged).
    pub chunk: ChunkId,
    /// The better-scoring chunk that holds its text.
    pub held_by: ChunkId,
    /// Share of `chunk`'s word 3-grams `held_by` holds (1 for identical text, case and
    /// spacing folded).
    pub resemblance: f32,
    /// Tokens freed: the whole chunk's, or what trimming saved.
    pub tokens: usize,
    /// The chunk stayed with the sentences that are its own and a note naming the holder.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trimmed: bool,
}

/// `condense openai`: what the condenser made of a question with earlier turns. The turn
/// searched with `query` when there is one, else with its question (and the learned mix).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Condensed {
    /// The model asked (the condenser's name).
    pub model: String,
    /// The standalone query the turn searched with; `None` when it fell back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Why the turn searched with its own question instead: the model's error, its time-out,
    /// or an answer that is no query (empty, too long).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// Milliseconds the model took (0 when the rewrite came from the stored turn).
    pub ms: f64,
    /// The rewrite came from the stored turn (a replay), not from the model.
    #[serde(default)]
    pub cached: bool,
}

/// What the lexical and the dense side of a search found, best first, and how they were
/// merged: enough to say which side brought each context block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetrievalTrace {
    /// What ran (`dense` when the lexical side was asked for but the backend has none).
    pub retrieval: Retrieval,
    /// How the two sides were fused; `None` unless both ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fusion: Option<Fusion>,
    /// Chunk ids the dense search found, best first; empty when only the lexical side ran.
    pub dense: Vec<ChunkId>,
    /// Chunk ids the lexical search found, in BM25 order; empty when it did not run.
    pub lexical: Vec<ChunkId>,
    /// Why the lexical side did not run, when it was asked for and did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

impl RetrievalTrace {
    /// `dense`, `lexical` or `both`: which side found `chunks` (a block's; `both` also when
    /// its chunks came from different sides), `None`: neither, e.g. a block carried from
    /// the working set.
    pub fn side(&self, chunks: &[ChunkId]) -> Option<&'static str> {
        let found = |side: &[ChunkId]| chunks.iter().any(|c| side.contains(c));
        match (found(&self.dense), found(&self.lexical)) {
            (true, true) => Some("both"),
            (true, false) => Some("dense"),
            (false, true) => Some("lexical"),
            (false, false) => None,
        }
    }
}

/// The version of [`Trace`] this build writes. 1: stored traces before one report (numbers
/// under `stats`, pointers always written, no `version`, no top-level `intent`); 2: the one
/// report, numbers under `trace` as the turn's answer always named them.
pub const TRACE_VERSION: u32 = 2;

/// What one turn produced — one report, one set of names: the object `ask --json`,
/// `POST /v1/sessions/{id}/turns` and Python's `ask` return, the trace a session keeps
/// (`ragctx trace`, `GET /v1/sessions/{id}/turns`, the page), and what a replay starts from.
/// Stored traces of every version read back ([`TRACE_VERSION`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "wire::Report", into = "wire::Report")]
pub struct Trace {
    /// The session the turn belongs to.
    pub session_id: String,
    /// The turn's number in the session (1-based), assigned on commit.
    pub turn: u64,
    /// The question as the user asked it.
    pub question: String,
    /// The query text actually embedded (may differ from `question`).
    pub query: String,
    /// The generator's answer, with its `[n]` markers.
    pub answer: String,
    /// The answer's markers that name a block or pointer of this turn, in the order first used.
    pub citations: Vec<Citation>,
    /// The blocks the model read, in rank order (the prompt shows a document's together:
    /// [`crate::by_document`]).
    pub context: Vec<ContextBlock>,
    /// `client` memory: one-line pointers to chunks the caller already holds (written only
    /// in `client` memory).
    pub pointers: Vec<Pointer>,
    /// The embedding of `query`, so a replay can mix it into later turns as the turn did.
    pub query_vector: Option<QuantizedVector>,
    /// The exclusion applied to the search, so the turn can be replayed.
    pub exclusion: ExclusionSet,
    /// Markers of the answer that name no block or pointer of this turn.
    pub invalid_markers: Vec<u32>,
    /// When the turn was answered, in milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    /// The numbers of the turn: counts, intent, search path, settings and timings.
    pub trace: TraceStats,
}

impl Trace {
    /// The intent the turn ran with.
    pub fn intent(&self) -> Intent {
        self.trace.intent
    }
}

/// The JSON form of a [`Trace`], every version: written as the latest, read from any.
mod wire {
    use super::*;

    fn first_version() -> u32 {
        1
    }

    #[derive(Clone, Serialize, Deserialize)]
    pub(super) struct Report {
        #[serde(default = "first_version")]
        version: u32,
        session_id: String,
        turn: u64,
        /// Also under `trace`; written at the top for callers, ignored on reading.
        #[serde(default, skip_deserializing)]
        intent: Option<Intent>,
        question: String,
        query: String,
        answer: String,
        citations: Vec<Citation>,
        context: Vec<ContextBlock>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pointers: Option<Vec<Pointer>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        query_vector: Option<QuantizedVector>,
        exclusion: ExclusionSet,
        invalid_markers: Vec<u32>,
        at_unix_ms: u64,
        /// `stats` in version 1.
        #[serde(alias = "stats")]
        trace: TraceStats,
    }

    impl From<Report> for Trace {
        fn from(r: Report) -> Trace {
            Trace {
                session_id: r.session_id,
                turn: r.turn,
                question: r.question,
                query: r.query,
                answer: r.answer,
                citations: r.citations,
                context: r.context,
                pointers: r.pointers.unwrap_or_default(),
                query_vector: r.query_vector,
                exclusion: r.exclusion,
                invalid_markers: r.invalid_markers,
                at_unix_ms: r.at_unix_ms,
                trace: r.trace,
            }
        }
    }

    impl From<Trace> for Report {
        fn from(t: Trace) -> Report {
            Report {
                version: TRACE_VERSION,
                session_id: t.session_id,
                turn: t.turn,
                intent: Some(t.trace.intent),
                question: t.question,
                query: t.query,
                answer: t.answer,
                citations: t.citations,
                context: t.context,
                pointers: (t.trace.memory == Memory::Client).then_some(t.pointers),
                query_vector: t.query_vector,
                exclusion: t.exclusion,
                invalid_markers: t.invalid_markers,
                at_unix_ms: t.at_unix_ms,
                trace: t.trace,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_found_by_each_side_that_found_one_of_its_chunks() {
        let ids = |v: &[&str]| v.iter().map(|&c| ChunkId::from(c)).collect::<Vec<_>>();
        let r = RetrievalTrace {
            retrieval: Retrieval::Hybrid,
            fusion: Some(Fusion::Weighted),
            dense: ids(&["a#0", "c#0"]),
            lexical: ids(&["b#0", "c#0"]),
            fallback: None,
        };
        assert_eq!(r.side(&ids(&["a#0"])), Some("dense"));
        assert_eq!(r.side(&ids(&["b#0"])), Some("lexical"));
        assert_eq!(r.side(&ids(&["c#0"])), Some("both"));
        assert_eq!(r.side(&ids(&["a#0", "b#0"])), Some("both"), "chunks from different sides");
        assert_eq!(r.side(&ids(&["z#9"])), None, "carried from the working set");
    }
}
