//! The index with its chunks held in memory: a [`VectorStore`] for evaluations and
//! benchmarks that build a corpus per run and persist nothing — the data dir's store
//! (vectors, chunks, the BM25 index) without the data dir.

use crate::chunks::{lexical_outcome, search_index};
use ragctx_core::{
    check_replacement, check_vectors, Chunk, ChunkId, DocumentId, DocumentSummary, EmbeddedChunk, Error, Hit,
    LexicalRequest, Replaced, Result, SearchOutcome, SearchReason, SearchRequest, VectorStore,
};
use ragctx_index::{IndexParams, ResolvedCache, VectorIndex};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

pub struct MemoryVectorStore {
    index: RwLock<VectorIndex>,
    chunks: RwLock<HashMap<ChunkId, Chunk>>,
    /// The sentence index of the chunks that have one.
    sentences: RwLock<HashMap<ChunkId, ragctx_core::Sentences>>,
    resolved: ResolvedCache,
    /// Moved by every write: the lexical index is rebuilt when it lags.
    generation: AtomicU64,
    lexical: ragctx_lexical::Cached,
}

impl MemoryVectorStore {
    pub fn new(dim: usize, params: IndexParams) -> Self {
        MemoryVectorStore {
            index: RwLock::new(VectorIndex::new(dim, params)),
            chunks: RwLock::new(HashMap::new()),
            sentences: RwLock::new(HashMap::new()),
            resolved: ResolvedCache::default(),
            generation: AtomicU64::new(0),
            lexical: Default::default(),
        }
    }

    /// Writes `chunks` and removes the other chunks of `documents` under both locks at once,
    /// checked first: a search sees the store before or after, never between.
    fn write(&self, documents: &[DocumentId], chunks: &[EmbeddedChunk]) -> Result<Replaced> {
        let mut ix = self.index.write().expect("lock");
        check_vectors(ix.dimension(), chunks)?;
        let mut map = self.chunks.write().expect("lock");
        let mut sentences = self.sentences.write().expect("lock");
        let stale = ix.stale_chunks(documents, chunks);
        self.generation.fetch_add(1, Ordering::SeqCst);
        let mut out = Replaced { removed: stale.len(), ..Replaced::default() };
        for c in chunks {
            if ix.upsert_chunk(&c.chunk, &c.vector) {
                out.new += 1;
            } else {
                out.updated += 1;
            }
            map.insert(c.chunk.id.clone(), c.chunk.clone());
            match &c.sentences {
                Some(s) => sentences.insert(c.chunk.id.clone(), s.clone()),
                None => sentences.remove(&c.chunk.id),
            };
        }
        for id in &stale {
            ix.remove(id);
            map.remove(id.as_str());
            sentences.remove(id.as_str());
        }
        Ok(out)
    }

    /// The lexical index of `map` (the chunks, read-locked by the caller).
    fn lexical_index(&self, map: &HashMap<ChunkId, Chunk>) -> Result<std::sync::Arc<ragctx_lexical::LexicalIndex>> {
        // No log of changes here: a write makes the next search rebuild.
        self.lexical.get(
            self.generation.load(Ordering::SeqCst),
            |_| Ok(None),
            || {
                let mut all: Vec<Chunk> = map.values().cloned().collect();
                all.sort_by(|a, b| a.id.cmp(&b.id));
                Ok::<_, Error>(all)
            },
        )
    }
}

impl VectorStore for MemoryVectorStore {
    fn dimension(&self) -> usize {
        self.index.read().expect("lock").dimension()
    }

    fn upsert(&self, chunks: &[EmbeddedChunk]) -> Result<usize> {
        Ok(self.write(&[], chunks)?.new)
    }

    fn replace_documents(&self, documents: &[DocumentId], chunks: &[EmbeddedChunk]) -> Result<Replaced> {
        check_replacement(documents, chunks)?;
        self.write(documents, chunks)
    }

    fn documents(&self) -> Result<Vec<DocumentSummary>> {
        let map = self.chunks.read().expect("lock");
        Ok(DocumentSummary::of_chunks(map.values()))
    }

    fn search(&self, request: &SearchRequest) -> Result<SearchOutcome> {
        let dim = self.dimension();
        if request.vector.len() != dim {
            return Err(Error::WrongDimension { expected: dim, got: request.vector.len() });
        }
        let ix = self.index.read().expect("lock");
        let map = self.chunks.read().expect("lock");
        let r = search_index(&ix, &self.resolved, request, None);
        let hits = r.hits.iter().map(|&(n, score)| Hit { chunk: map[ix.chunk_id(n)].clone(), score }).collect();
        Ok(SearchOutcome { hits, path: r.path, rounds: r.rounds, reason: SearchReason::Plan(r.reason) })
    }

    fn prepare_lexical(&self) -> Result<Option<usize>> {
        let map = self.chunks.read().expect("lock");
        Ok(Some(self.lexical_index(&map)?.len()))
    }

    fn search_lexical(&self, request: &LexicalRequest) -> Result<Option<SearchOutcome>> {
        // Writers hold the chunk map's write lock while they move the generation.
        let map = self.chunks.read().expect("lock");
        let lexical = self.lexical_index(&map)?;
        let found = lexical.search_request(request);
        let hits = found.iter().map(|&(e, score)| Hit { chunk: map[lexical.chunk_id(e)].clone(), score }).collect();
        Ok(Some(lexical_outcome(&lexical, request, hits)))
    }

    fn chunks(&self, ids: &[ChunkId]) -> Result<Vec<Chunk>> {
        let map = self.chunks.read().expect("lock");
        Ok(ids.iter().filter_map(|id| map.get(id).cloned()).collect())
    }

    fn vectors(&self, ids: &[ChunkId]) -> Result<Vec<Option<Vec<f32>>>> {
        let ix = self.index.read().expect("lock");
        Ok(ids.iter().map(|id| ix.vector_of(id.as_str()).map(<[f32]>::to_vec)).collect())
    }

    fn sentences(&self, ids: &[ChunkId]) -> Result<Vec<Option<ragctx_core::Sentences>>> {
        let sentences = self.sentences.read().expect("lock");
        Ok(ids.iter().map(|id| sentences.get(id).cloned()).collect())
    }

    fn len(&self) -> Result<usize> {
        Ok(self.index.read().expect("lock").len())
    }

    fn tenant_len(&self, tenant: &str) -> Result<usize> {
        Ok(self.index.read().expect("lock").tenant_len(tenant))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_store_filters_conform() {
        for exact_below in [0, 1_000_000] {
            let params = IndexParams { exact_below, scan_ratio: 0, ..IndexParams::default() };
            let n = ragctx_testkit::filter_conformance(&|| Box::new(MemoryVectorStore::new(8, params)), 300);
            assert!(n >= 900, "{n} searches checked");
        }
    }
}
