use crate::{
    ChunkId, Citation, Consumption, ContextBlock, ConversationQuery, DocumentId, ExclusionSet, Fusion, Granularity,
    Intent, Memory, Pointer, QuantizedVector, Retrieval, SearchPath, Strategy,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The settings a turn actually ran with (after config, flags and intent).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EffectiveSettings {
    pub strategy: Strategy,
    /// What the exclusion set was made of (`engine` memory: always chunks).
    pub granularity: Granularity,
    pub consumption: Consumption,
    pub window: usize,
    pub limit: usize,
    pub group_size: usize,
    pub min_documents: usize,
    pub budget: usize,
    pub tokenizer: String,
    /// Who kept earlier contexts; `None` in traces written before memory modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// A document's further chunk is kept when it scores within this of the document's best.
    #[serde(default)]
    pub group_margin: f32,
    /// When the query mixed in earlier questions; `None` in traces written before it could.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_query: Option<ConversationQuery>,
    /// `dense`, `lexical` or `hybrid` (traces from before lexical retrieval: dense).
    #[serde(default)]
    pub retrieval: Retrieval,
    /// How hybrid retrieval fused its sides.
    #[serde(default)]
    pub fusion: Fusion,
}

fn memory_before_modes() -> Memory {
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
    pub answer_citations: usize,
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
    pub dropped_by_budget: Vec<DocumentId>,
    pub intent: Intent,
    pub search_path: SearchPath,
    pub search_rounds: u32,
    pub search_reason: String,
    /// Lexical or hybrid retrieval: what each side found (absent for dense).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieval: Option<RetrievalTrace>,
    /// Documents whose text duplicated a better-scoring document: `(dropped, kept)`.
    pub aliases: Vec<(DocumentId, DocumentId)>,
    pub settings: EffectiveSettings,
    pub timings_ms: BTreeMap<String, f64>,
}

/// What the lexical and the dense side of a search found, best first, and how they were
/// merged: enough to say which side brought each context block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetrievalTrace {
    /// What ran (`dense` when the lexical side was asked for but the backend has none).
    pub retrieval: Retrieval,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fusion: Option<Fusion>,
    pub dense: Vec<ChunkId>,
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
    /// `client` memory: one-line pointers to chunks the caller already holds.
    #[serde(default)]
    pub pointers: Vec<Pointer>,
    /// The embedding of `query`, so a replay can mix it into later turns as the turn did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_vector: Option<QuantizedVector>,
    /// The exclusion applied to the search, so the turn can be replayed.
    pub exclusion: ExclusionSet,
    pub invalid_markers: Vec<u32>,
    pub at_unix_ms: u64,
    pub stats: TraceStats,
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
