use crate::{ChunkId, DocumentId};
use serde::{Deserialize, Serialize};

/// One retrievable passage of a source document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    pub id: ChunkId,
    pub document_id: DocumentId,
    pub title: String,
    pub text: String,
    /// Position of the chunk in its document (0-based), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordinal: Option<u32>,
    /// Character offsets of the chunk in its document, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<u64>,
    /// Per-source weight: a weight `w >= 2` lets the document take `floor(w)` times the
    /// usual number of chunks per result group. Scores are never changed by it.
    #[serde(default = "default_weight")]
    pub weight: f32,
}

fn default_weight() -> f32 {
    1.0
}

impl Chunk {
    /// True when `other` (of the same document) touches or overlaps this chunk, by offsets
    /// when both have them, else by consecutive ordinals.
    pub fn is_adjacent_to(&self, other: &Chunk) -> bool {
        if self.document_id != other.document_id {
            return false;
        }
        if let (Some(a0), Some(a1), Some(b0), Some(b1)) = (self.start, self.end, other.start, other.end) {
            return a0 <= b1 + 1 && b0 <= a1 + 1;
        }
        match (self.ordinal, other.ordinal) {
            (Some(a), Some(b)) => a.abs_diff(b) <= 1,
            _ => false,
        }
    }
}

/// A chunk with its embedding, as handed to [`crate::VectorStore::upsert`].
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddedChunk {
    pub chunk: Chunk,
    pub vector: Vec<f32>,
}
