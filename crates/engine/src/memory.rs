//! Stage 7: what the turn consumed, as the session remembers it.

use ragctx_core::{Citation, ContextBlock, DocumentId, Intent, TurnRecord};

fn unique<T: PartialEq + Clone>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// The record of a turn: every chunk and document shown, and those the answer cited.
pub fn turn_record(
    question: &str,
    intent: Intent,
    blocks: &[ContextBlock],
    citations: &[Citation],
    answer: &str,
    query_vector: Option<&[f32]>,
    at_unix_ms: u64,
) -> TurnRecord {
    TurnRecord {
        turn: 0,
        question: question.to_owned(),
        intent,
        shown_chunks: unique(blocks.iter().flat_map(|b| b.chunk_ids.iter().cloned())),
        shown_documents: unique(blocks.iter().map(|b| b.document_id.clone())),
        cited_chunks: unique(citations.iter().flat_map(|c| c.chunk_ids.iter().cloned())),
        cited_documents: unique(citations.iter().map(|c| c.document_id.clone())),
        at_unix_ms,
        answer: answer.to_owned(),
        query_vector: query_vector.map(ragctx_core::QuantizedVector::quantize),
    }
}

/// Documents of the last remembered turn (what `follow_up` and `reshow` refer to).
pub fn last_documents(state: &ragctx_core::SessionState) -> Vec<DocumentId> {
    state.turns.last().map(|t| t.shown_documents.clone()).unwrap_or_default()
}
