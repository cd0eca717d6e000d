use crate::{ChunkId, DocumentId, Metadata};
use serde::{Deserialize, Serialize};

/// One retrievable passage of a source document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// Unique in the store: upserts and replacements key on it, and an ingest refuses two in one input.
    pub id: ChunkId,
    /// The document it is part of: what grouping, dedupe, citation and document exclusion count by.
    pub document_id: DocumentId,
    /// Its document's title: shown in block headers and searched by BM25 with the text.
    pub title: String,
    /// The passage: what is embedded, searched, counted and shown to the model.
    pub text: String,
    /// Position of the chunk in its document (0-based), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordinal: Option<u32>,
    /// Character offsets of the chunk in its document, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<u64>,
    /// Where the chunk ends in its document, exclusive (the chunker's in characters), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<u64>,
    /// Per-source weight: a weight `w >= 2` lets the document take `floor(w)` times the
    /// usual number of chunks per result group. Scores are never changed by it.
    #[serde(default = "default_weight")]
    pub weight: f32,
    /// `cl100k_base` tokens of `text` followed by a blank line, counted once at ingest so
    /// that turns count only block headers. `None` when unknown or when the text starts
    /// with white space (its count would then depend on what precedes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u32>,
    /// What the chunk's source says of itself (DESIGN §8): filtered on by a turn's filter and
    /// returned with its blocks. A document's chunks carry its metadata.
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

fn default_weight() -> f32 {
    1.0
}

/// The name of the tokenizer [`Chunk::tokens`] is counted with.
pub const CHUNK_TOKENIZER: &str = "cl100k_base";

impl Chunk {
    /// A chunk with nothing known beyond its ids, title and text (weight 1).
    pub fn new(id: &str, document_id: &str, title: &str, text: &str) -> Chunk {
        Chunk {
            id: id.into(),
            document_id: document_id.into(),
            title: title.into(),
            text: text.into(),
            ordinal: None,
            start: None,
            end: None,
            weight: 1.0,
            tokens: None,
            metadata: Metadata::default(),
        }
    }

    /// True when `other` (of the same document) touches or overlaps this chunk by offsets,
    /// or follows or precedes it by ordinal (a chunker's consecutive chunks, whatever white
    /// space lay between them).
    pub fn is_adjacent_to(&self, other: &Chunk) -> bool {
        if self.document_id != other.document_id {
            return false;
        }
        let touch = match (self.start, self.end, other.start, other.end) {
            (Some(a0), Some(a1), Some(b0), Some(b1)) => a0 <= b1 + 1 && b0 <= a1 + 1,
            _ => false,
        };
        let consecutive = matches!((self.ordinal, other.ordinal), (Some(a), Some(b)) if a.abs_diff(b) <= 1);
        touch || consecutive
    }
}

/// A chunk with its embedding, as handed to [`crate::VectorStore::upsert`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmbeddedChunk {
    /// The chunk as it will be stored.
    pub chunk: Chunk,
    /// Its passage embedding (L2-normalised), of the store's dimension.
    pub vector: Vec<f32>,
    /// Its sentences with their vectors (DESIGN §11), where the ingest made them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentences: Option<crate::Sentences>,
}

/// A stored document, as `ragctx documents list` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DocumentSummary {
    /// The document, by the id that `documents delete` takes.
    pub document_id: DocumentId,
    /// The title of its first chunk (by id).
    pub title: String,
    /// How many chunks the store holds for it.
    pub chunks: usize,
    /// The metadata of its first chunk (by id), where the store lists it (DESIGN §8).
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
}

impl DocumentSummary {
    /// The documents of `(chunk id, document id, title)` rows, by document id, each titled
    /// by its first chunk (smallest id): how every store lists what it holds.
    pub fn tally<'a>(rows: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>) -> Vec<DocumentSummary> {
        let mut docs: std::collections::BTreeMap<&str, (&str, &str, usize)> = Default::default();
        for (id, doc, title) in rows {
            let e = docs.entry(doc).or_insert((id, title, 0));
            if id < e.0 {
                (e.0, e.1) = (id, title);
            }
            e.2 += 1;
        }
        docs.into_iter()
            .map(|(doc, (_, title, chunks))| DocumentSummary {
                document_id: doc.into(),
                title: title.to_owned(),
                chunks,
                metadata: Metadata::default(),
            })
            .collect()
    }

    /// [`DocumentSummary::tally`] of whole chunks, each document with its first chunk's metadata.
    pub fn of_chunks<'a>(chunks: impl IntoIterator<Item = &'a Chunk>) -> Vec<DocumentSummary> {
        let mut first: std::collections::BTreeMap<&str, &Chunk> = Default::default();
        let chunks: Vec<&Chunk> = chunks.into_iter().collect();
        for c in &chunks {
            let e = first.entry(c.document_id.as_str()).or_insert(c);
            if c.id < e.id {
                *e = c;
            }
        }
        let mut out = Self::tally(chunks.iter().map(|c| (c.id.as_str(), c.document_id.as_str(), c.title.as_str())));
        for d in &mut out {
            d.metadata = first[d.document_id.as_str()].metadata.clone();
        }
        out
    }
}

/// What [`crate::VectorStore::replace_documents`] changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replaced {
    /// Chunk ids that were not stored before.
    pub new: usize,
    /// Chunks written again (same id).
    pub updated: usize,
    /// Chunks of the replaced documents that are gone (no longer in the document).
    pub removed: usize,
}

/// Checks a batch before any of it is written: every vector has the store's `dimension` and
/// only finite values (a NaN would poison every cosine it meets). Every store calls it first,
/// so a bad chunk refuses the whole batch and nothing is half-written.
pub fn check_vectors(dimension: usize, chunks: &[EmbeddedChunk]) -> crate::Result<()> {
    for c in chunks {
        if c.vector.len() != dimension {
            return Err(crate::Error::WrongDimension { expected: dimension, got: c.vector.len() });
        }
        if c.vector.iter().any(|x| !x.is_finite()) {
            return Err(crate::Error::InvalidInput(format!("chunk {:?} has a non-finite vector", c.chunk.id.as_str())));
        }
    }
    Ok(())
}

/// Checks the arguments of [`crate::VectorStore::replace_documents`]: every chunk belongs
/// to one of the documents being replaced.
pub fn check_replacement(documents: &[DocumentId], chunks: &[EmbeddedChunk]) -> crate::Result<()> {
    let named: std::collections::HashSet<&DocumentId> = documents.iter().collect();
    match chunks.iter().find(|c| !named.contains(&c.chunk.document_id)) {
        Some(c) => Err(crate::Error::InvalidInput(format!(
            "chunk {:?} belongs to document {:?}, which is not being replaced",
            c.chunk.id.as_str(),
            c.chunk.document_id.as_str()
        ))),
        None => Ok(()),
    }
}
