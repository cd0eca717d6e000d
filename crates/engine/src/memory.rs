//! Stage 7: what the turn consumed, as the session remembers it.

use ragctx_core::{DocumentId, Trace, TurnRecord};

fn unique<T: PartialEq + Clone>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// The record of a turn, from its report (a turn just run, or a replay's earlier turns):
/// every chunk and document shown, those pointed to, those the answer cited, the answer and
/// the query vector.
pub fn record_of(t: &Trace) -> TurnRecord {
    TurnRecord {
        turn: t.turn,
        question: t.question.clone(),
        intent: t.intent(),
        shown_chunks: unique(t.context.iter().flat_map(|b| b.chunk_ids.iter().cloned())),
        shown_documents: unique(t.context.iter().map(|b| b.document_id.clone())),
        cited_chunks: unique(t.citations.iter().flat_map(|c| c.chunk_ids.iter().cloned())),
        cited_documents: unique(t.citations.iter().map(|c| c.document_id.clone())),
        at_unix_ms: t.at_unix_ms,
        answer: t.answer.clone(),
        query_vector: t.query_vector.clone(),
        pointed_chunks: unique(t.pointers.iter().flat_map(|p| p.chunk_ids.iter().cloned())),
        forgotten: t.trace.forgotten.clone(),
    }
}

/// The last remembered turn that is not a `forget` step: what `follow_up` and `reshow`
/// refer to.
pub fn last_turn(state: &ragctx_core::SessionState) -> Option<&TurnRecord> {
    state.turns.iter().rev().find(|t| !t.is_forget())
}

/// Documents of the last remembered turn (what `follow_up` and `reshow` refer to).
pub fn last_documents(state: &ragctx_core::SessionState) -> Vec<DocumentId> {
    last_turn(state).map(|t| t.shown_documents.clone()).unwrap_or_default()
}
