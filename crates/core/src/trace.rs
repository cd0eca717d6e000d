use crate::{Citation, ContextBlock, DocumentId, ExclusionSet, Intent, SearchPath};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The settings a turn actually ran with (after config, flags and intent).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EffectiveSettings {
    pub strategy: String,
    pub granularity: String,
    pub consumption: String,
    pub window: usize,
    pub limit: usize,
    pub group_size: usize,
    pub min_documents: usize,
    pub budget: usize,
    pub tokenizer: String,
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
    pub context_tokens: usize,
    /// Everything sent to the model: instructions, context and question.
    pub prompt_tokens: usize,
    pub answer_citations: usize,
    pub invalid_citations: usize,
    /// Size of the exclusion set (ids).
    pub excluded: usize,
    pub dropped_by_budget: Vec<DocumentId>,
    pub intent: Intent,
    pub search_path: SearchPath,
    pub search_rounds: u32,
    pub search_reason: String,
    /// Documents whose text duplicated a better-scoring document: `(dropped, kept)`.
    pub aliases: Vec<(DocumentId, DocumentId)>,
    pub settings: EffectiveSettings,
    pub timings_ms: BTreeMap<String, f64>,
}

/// Everything persisted about one turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub session_id: String,
    pub turn: u64,
    pub question: String,
    /// The query text actually embedded (may differ from `question`).
    pub query: String,
    pub answer: String,
    pub citations: Vec<Citation>,
    pub context: Vec<ContextBlock>,
    /// The exclusion applied to the search, so the turn can be replayed.
    pub exclusion: ExclusionSet,
    pub invalid_markers: Vec<u32>,
    pub at_unix_ms: u64,
    pub stats: TraceStats,
}
