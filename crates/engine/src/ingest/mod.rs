//! Ingest's one path: chunks read by `ragctx_ingest` (the file formats' own crate) are
//! embedded (with the cache) and stored ([`embed_chunks`], [`store_embedded`]), for the CLI,
//! the HTTP API, Python and the evaluations alike.

mod pipeline;

pub use pipeline::{
    embed_chunks, embed_with_cache, store_embedded, Embedded, FormatTally, IngestProgress, IngestReport, Logged,
    EMBED_STEP,
};

use ragctx_core::{DocumentId, EmbeddedChunk, Replaced, TokenCounter, VectorStore};
use ragctx_ingest::SourcedChunk;

/// [`ragctx_core::Chunk::tokens`] for a text: its `cl100k_base` count with the blank line that follows
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
            EmbeddedChunk { chunk, vector, sentences: None }
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
