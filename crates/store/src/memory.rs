//! The index with its chunks held in memory: a [`VectorStore`] for evaluations and
//! benchmarks that build a corpus per run and persist nothing — the data dir's store
//! (vectors, chunks, the BM25 index) without the data dir.

use ragctx_core::{
    check_replacement, Chunk, ChunkId, DocumentId, DocumentSummary, EmbeddedChunk, Error, Hit, LexicalRequest,
    Replaced, Result, SearchOutcome, SearchPath, SearchRequest, VectorStore,
};
use ragctx_index::{IndexParams, ResolvedCache, VectorIndex};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

pub struct MemoryVectorStore {
    index: RwLock<VectorIndex>,
    chunks: RwLock<HashMap<ChunkId, Chunk>>,
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
            resolved: ResolvedCache::default(),
            generation: AtomicU64::new(0),
            lexical: Default::default(),
        }
    }

    /// The lexical index of `map` (the chunks, read-locked by the caller).
    fn lexical_index(&self, map: &HashMap<ChunkId, Chunk>) -> Result<std::sync::Arc<ragctx_lexical::LexicalIndex>> {
        self.lexical.get(self.generation.load(Ordering::SeqCst), || {
            let mut all: Vec<Chunk> = map.values().cloned().collect();
            all.sort_by(|a, b| a.id.cmp(&b.id));
            Ok::<_, Error>(all)
        })
    }
}

impl VectorStore for MemoryVectorStore {
    fn dimension(&self) -> usize {
        self.index.read().expect("lock").dimension()
    }

    fn upsert(&self, chunks: &[EmbeddedChunk]) -> Result<usize> {
        let dim = self.dimension();
        if let Some(bad) = chunks.iter().find(|c| c.vector.len() != dim) {
            return Err(Error::WrongDimension { expected: dim, got: bad.vector.len() });
        }
        let mut ix = self.index.write().expect("lock");
        let mut map = self.chunks.write().expect("lock");
        self.generation.fetch_add(1, Ordering::SeqCst);
        let mut new = 0;
        for c in chunks {
            if ix.upsert_chunk(&c.chunk, &c.vector) {
                new += 1;
            }
            map.insert(c.chunk.id.clone(), c.chunk.clone());
        }
        Ok(new)
    }

    fn replace_documents(&self, documents: &[DocumentId], chunks: &[EmbeddedChunk]) -> Result<Replaced> {
        check_replacement(documents, chunks)?;
        let stale = self.index.read().expect("lock").stale_chunks(documents, chunks);
        let new = self.upsert(chunks)?;
        let mut ix = self.index.write().expect("lock");
        let mut map = self.chunks.write().expect("lock");
        self.generation.fetch_add(1, Ordering::SeqCst);
        for id in &stale {
            ix.remove(id);
            map.remove(id.as_str());
        }
        Ok(Replaced { new, updated: chunks.len() - new, removed: stale.len() })
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
        let ex = self.resolved.get(&ix, &request.exclusion);
        let ex = ix.restrict(ex, &request.filter, request.tenant.as_deref());
        let r = ix.search_resolved(&request.vector, request.limit, request.grouping.as_ref(), &ex, None);
        let hits = r.hits.iter().map(|&(n, score)| Hit { chunk: map[ix.chunk_id(n)].clone(), score }).collect();
        Ok(SearchOutcome { hits, path: r.path, rounds: r.rounds, reason: r.reason })
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
        let reason = format!(
            "BM25 over {} chunks",
            // A search narrowed to a tenant counts its chunks only.
            request.tenant.as_deref().map_or(lexical.len(), |t| lexical.tenant_len(t))
        );
        Ok(Some(SearchOutcome { hits, path: SearchPath::Lexical, rounds: 1, reason }))
    }

    fn chunks(&self, ids: &[ChunkId]) -> Result<Vec<Chunk>> {
        let map = self.chunks.read().expect("lock");
        Ok(ids.iter().filter_map(|id| map.get(id).cloned()).collect())
    }

    fn vectors(&self, ids: &[ChunkId]) -> Result<Vec<Option<Vec<f32>>>> {
        let ix = self.index.read().expect("lock");
        Ok(ids.iter().map(|id| ix.vector_of(id.as_str()).map(<[f32]>::to_vec)).collect())
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
