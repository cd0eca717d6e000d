use crate::{ChunkId, DocumentId};
use serde::{Deserialize, Serialize};

/// One block of the context handed to the model: `[marker] title (document_id)` + text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextBlock {
    /// Stable within a session: a document keeps its marker across turns.
    pub marker: u32,
    pub document_id: DocumentId,
    pub title: String,
    pub chunk_ids: Vec<ChunkId>,
    /// Tokens of the rendered block, header included.
    pub tokens: usize,
    pub score: f32,
    pub text: String,
}

impl ContextBlock {
    pub fn header(marker: u32, title: &str, document_id: &DocumentId) -> String {
        format!("[{marker}] {title} ({document_id})")
    }
    /// The block as the model sees it, with the blank line that separates it from the next.
    pub fn render(&self) -> String {
        format!("{}\n{}\n\n", Self::header(self.marker, &self.title, &self.document_id), self.text)
    }
}

/// A marker the answer used that refers to a block of this turn's context.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Citation {
    pub marker: u32,
    pub document_id: DocumentId,
    pub title: String,
    pub chunk_ids: Vec<ChunkId>,
}
