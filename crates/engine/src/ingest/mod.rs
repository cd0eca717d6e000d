//! Ingest: reading input into chunks before anything is written — pre-chunked JSONL, and
//! `.md`, `.txt`, `.html` documents chunked here; pure functions over text, every error
//! naming the file and line — then the one path that embeds (with the cache) and stores
//! them ([`embed_chunks`], [`store_embedded`]), for the CLI, the HTTP API, Python and the evaluations alike.

mod chunker;
mod jsonl;
mod pipeline;

pub use chunker::{chunk_document, html_to_text, DocumentFormat, CHUNK_CHARS};
pub use jsonl::parse_jsonl;
pub use pipeline::{
    embed_chunks, embed_with_cache, store_embedded, Embedded, IngestProgress, IngestReport, Logged, EMBED_STEP,
};

use ragctx_core::{Chunk, DocumentId, EmbeddedChunk, Replaced, TokenCounter, VectorStore};
use std::collections::HashMap;

/// A problem with the input, located.
#[derive(Debug, Clone, PartialEq)]
pub struct InputError {
    /// The file at fault, as it was named or found in a folder.
    pub file: String,
    /// The 1-based line at fault, when there is one (a JSONL line, invalid UTF-8).
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.file, l, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for InputError {}

impl From<InputError> for ragctx_core::Error {
    fn from(e: InputError) -> Self {
        ragctx_core::Error::InvalidInput(e.to_string())
    }
}

/// [`Chunk::tokens`] for a text: its `cl100k_base` count with the blank line that follows
/// it in a block, or `None` when the text starts with white space (or the counter is
/// another tokenizer).
pub fn text_tokens(counter: &dyn TokenCounter, text: &str) -> Option<u32> {
    let starts_clean = text.chars().next().is_some_and(|c| !c.is_whitespace());
    (starts_clean && counter.name() == ragctx_core::CHUNK_TOKENIZER)
        .then(|| counter.count(&format!("{text}\n\n")) as u32)
}

/// The chunks paired with their vectors (in order), each with its token count: what every
/// ingest stores.
pub fn with_vectors(
    chunks: Vec<SourcedChunk>,
    vectors: Vec<Vec<f32>>,
    counter: &dyn TokenCounter,
) -> Vec<EmbeddedChunk> {
    chunks
        .into_iter()
        .zip(vectors)
        .map(|(s, vector)| {
            let mut chunk = s.chunk;
            chunk.tokens = text_tokens(counter, &chunk.text);
            EmbeddedChunk { chunk, vector }
        })
        .collect()
}

/// Writes embedded chunks as `ragctx ingest` and `POST /v1/documents` do: each document
/// they belong to replaced whole, or with `append` upserted by id (a document's other chunks
/// stay). Returns what changed and how many documents the chunks belong to.
pub fn store(
    vectors: &dyn VectorStore,
    chunks: &[EmbeddedChunk],
    append: bool,
) -> ragctx_core::Result<(Replaced, usize)> {
    let mut docs: Vec<DocumentId> = chunks.iter().map(|c| c.chunk.document_id.clone()).collect();
    docs.sort_unstable();
    docs.dedup();
    let r = if append {
        let new = vectors.upsert(chunks)?;
        Replaced { new, updated: chunks.len() - new, removed: 0 }
    } else {
        vectors.replace_documents(&docs, chunks)?
    };
    Ok((r, docs.len()))
}

/// A chunk and where it came from, for duplicate reports.
#[derive(Clone, Debug, PartialEq)]
pub struct SourcedChunk {
    /// The chunk as read, before its tokens are counted.
    pub chunk: Chunk,
    /// The file it was read from.
    pub file: String,
    /// Its JSONL line; `None` for a chunked document.
    pub line: Option<usize>,
}

/// Rejects two chunks with one id in the same input: an upsert would silently keep only
/// the later one.
pub fn check_unique_ids(chunks: &[SourcedChunk]) -> Result<(), InputError> {
    let mut seen: HashMap<&str, &SourcedChunk> = HashMap::new();
    for c in chunks {
        if let Some(first) = seen.insert(c.chunk.id.as_str(), c) {
            let at = |s: &SourcedChunk| match s.line {
                Some(l) => format!("{}:{l}", s.file),
                None => s.file.clone(),
            };
            return Err(InputError {
                file: c.file.clone(),
                line: c.line,
                message: format!("duplicate id {:?} (first at {})", c.chunk.id.as_str(), at(first)),
            });
        }
    }
    Ok(())
}
