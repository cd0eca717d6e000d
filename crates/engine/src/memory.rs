//! Stage 7: what the turn consumed, as the session remembers it.

use ragctx_core::{Citation, ContextBlock, DocumentId, Intent, Pointer, Trace, TurnRecord};

fn unique<T: PartialEq + Clone>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// What a turn showed and said, as [`turn_record`] remembers it.
pub struct Shown<'a> {
    pub question: &'a str,
    pub intent: Intent,
    pub blocks: &'a [ContextBlock],
    pub pointers: &'a [Pointer],
    pub citations: &'a [Citation],
    pub answer: &'a str,
    pub query_vector: Option<ragctx_core::QuantizedVector>,
    pub at_unix_ms: u64,
}

/// The record of a turn as a replay rebuilds it from the turn's trace.
pub fn record_of_trace(t: &Trace) -> TurnRecord {
    let mut r = turn_record(Shown {
        question: &t.question,
        intent: t.stats.intent,
        blocks: &t.context,
        pointers: &t.pointers,
        citations: &t.citations,
        answer: &t.answer,
        query_vector: t.query_vector.clone(),
        at_unix_ms: t.at_unix_ms,
    });
    r.turn = t.turn;
    r
}

/// The record of a turn: every chunk and document shown, those pointed to, and those the
/// answer cited.
pub fn turn_record(shown: Shown<'_>) -> TurnRecord {
    let Shown { question, intent, blocks, pointers, citations, answer, query_vector, at_unix_ms } = shown;
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
        query_vector,
        pointed_chunks: unique(pointers.iter().flat_map(|p| p.chunk_ids.iter().cloned())),
    }
}

/// Documents of the last remembered turn (what `follow_up` and `reshow` refer to).
pub fn last_documents(state: &ragctx_core::SessionState) -> Vec<DocumentId> {
    state.turns.last().map(|t| t.shown_documents.clone()).unwrap_or_default()
}
