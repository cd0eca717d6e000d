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
    /// The question as the user asked it.
    pub question: &'a str,
    /// The intent the turn ran with.
    pub intent: Intent,
    /// The context blocks: what the turn showed.
    pub blocks: &'a [ContextBlock],
    /// `client` memory: the pointers, remembered as pointed to rather than shown.
    pub pointers: &'a [Pointer],
    /// The answer's citations that name a block or pointer of this turn.
    pub citations: &'a [Citation],
    /// The answer, kept for `engine` memory's conversation.
    pub answer: &'a str,
    /// The embedding the turn searched with, for later turns to mix in; `None` in traces from
    /// before query vectors were kept.
    pub query_vector: Option<ragctx_core::QuantizedVector>,
    /// When the turn was answered, in milliseconds since the Unix epoch.
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
