//! One read per chunk per turn: the store as one plan of a turn sees it, each chunk and
//! vector fetched at most once. The stages ask for the same ids more than once — the working
//! set's vectors for the query's centroid and again to score it, its chunks to carry them,
//! a lexical hit's vector for its cosine, the candidates' vectors for diversity; on Milvus
//! every ask is a round trip, on the embedded store a read transaction and a JSON decode per
//! chunk. Searches pass through untouched: no stage asks for a hit's chunk again (the
//! working set is excluded from the search), so copying hits into the memo would only cost.

use ragctx_core::{
    Chunk, ChunkId, DocumentId, DocumentSummary, EmbeddedChunk, LexicalRequest, Replaced, Result, SearchOutcome,
    SearchRequest, VectorStore,
};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// `inner` with a memo of what this plan has fetched: chunks and vectors, misses remembered too (an id the store does not hold is not asked
/// again). Writes pass through and are not expected during a plan.
pub(crate) struct TurnReads {
    inner: Arc<dyn VectorStore>,
    chunks: Mutex<HashMap<ChunkId, Option<Chunk>>>,
    vectors: Mutex<HashMap<ChunkId, Option<Vec<f32>>>>,
}

impl TurnReads {
    pub(crate) fn new(inner: Arc<dyn VectorStore>) -> Self {
        TurnReads { inner, chunks: Mutex::default(), vectors: Mutex::default() }
    }
}

/// The ids of `ids` not yet in `memo`, each once, in order (a working set may hold
/// thousands: linear in them).
fn missing<V>(ids: &[ChunkId], memo: &HashMap<ChunkId, V>) -> Vec<ChunkId> {
    let mut seen: HashSet<&ChunkId> = HashSet::new();
    ids.iter().filter(|id| !memo.contains_key(*id) && seen.insert(*id)).cloned().collect()
}

impl VectorStore for TurnReads {
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    fn upsert(&self, chunks: &[EmbeddedChunk]) -> Result<usize> {
        self.inner.upsert(chunks)
    }
    fn replace_documents(&self, documents: &[DocumentId], chunks: &[EmbeddedChunk]) -> Result<Replaced> {
        self.inner.replace_documents(documents, chunks)
    }
    fn documents(&self) -> Result<Vec<DocumentSummary>> {
        self.inner.documents()
    }
    fn search(&self, request: &SearchRequest) -> Result<SearchOutcome> {
        self.inner.search(request)
    }
    fn search_lexical(&self, request: &LexicalRequest) -> Result<Option<SearchOutcome>> {
        self.inner.search_lexical(request)
    }
    fn lexical_missing(&self) -> String {
        self.inner.lexical_missing()
    }
    fn prepare_lexical(&self) -> Result<Option<usize>> {
        self.inner.prepare_lexical()
    }
    /// The chunks of `ids` the store holds, in the order asked, each read from the store at
    /// most once per plan.
    fn chunks(&self, ids: &[ChunkId]) -> Result<Vec<Chunk>> {
        let mut memo = self.chunks.lock().expect("memo lock");
        let asked = missing(ids, &memo);
        if !asked.is_empty() {
            let mut found: HashMap<ChunkId, Chunk> =
                self.inner.chunks(&asked)?.into_iter().map(|c| (c.id.clone(), c)).collect();
            for id in asked {
                let chunk = found.remove(&id);
                memo.insert(id, chunk);
            }
        }
        Ok(ids.iter().filter_map(|id| memo.get(id).cloned().flatten()).collect())
    }
    /// The vectors of `ids` (`None` for an id the store does not hold), each read from the
    /// store at most once per plan.
    fn vectors(&self, ids: &[ChunkId]) -> Result<Vec<Option<Vec<f32>>>> {
        let mut memo = self.vectors.lock().expect("memo lock");
        let asked = missing(ids, &memo);
        if !asked.is_empty() {
            let got = self.inner.vectors(&asked)?;
            memo.extend(asked.into_iter().zip(got));
        }
        Ok(ids.iter().map(|id| memo.get(id).cloned().flatten()).collect())
    }
    /// Read when a turn cuts its blocks, once per plan: not memoised.
    fn sentences(&self, ids: &[ChunkId]) -> Result<Vec<Option<ragctx_core::Sentences>>> {
        self.inner.sentences(ids)
    }
    fn len(&self) -> Result<usize> {
        self.inner.len()
    }
    fn tenant_len(&self, tenant: &str) -> Result<usize> {
        self.inner.tenant_len(tenant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A store of three chunks that counts the ids it is asked for.
    #[derive(Default)]
    struct Counting {
        asked_chunks: AtomicUsize,
        asked_vectors: AtomicUsize,
    }
    fn held(id: &ChunkId) -> Option<Chunk> {
        ["a#0", "a#1", "b#0"].contains(&id.as_str()).then(|| Chunk::new(id.as_str(), &id.as_str()[..1], "", "text"))
    }
    impl VectorStore for Counting {
        fn dimension(&self) -> usize {
            2
        }
        fn upsert(&self, _: &[EmbeddedChunk]) -> Result<usize> {
            Ok(0)
        }
        fn replace_documents(&self, _: &[DocumentId], _: &[EmbeddedChunk]) -> Result<Replaced> {
            Ok(Replaced::default())
        }
        fn documents(&self) -> Result<Vec<DocumentSummary>> {
            Ok(Vec::new())
        }
        fn search(&self, _: &SearchRequest) -> Result<SearchOutcome> {
            let hits = vec![ragctx_core::Hit { chunk: held(&"b#0".into()).unwrap(), score: 0.5 }];
            Ok(SearchOutcome {
                hits,
                path: ragctx_core::SearchPath::Exact,
                rounds: 1,
                reason: ragctx_core::SearchReason::Plan(ragctx_core::PlanReason::SmallIndex),
            })
        }
        fn chunks(&self, ids: &[ChunkId]) -> Result<Vec<Chunk>> {
            self.asked_chunks.fetch_add(ids.len(), Ordering::SeqCst);
            Ok(ids.iter().filter_map(held).collect())
        }
        fn vectors(&self, ids: &[ChunkId]) -> Result<Vec<Option<Vec<f32>>>> {
            self.asked_vectors.fetch_add(ids.len(), Ordering::SeqCst);
            Ok(ids.iter().map(|id| held(id).map(|_| vec![1.0, 0.0])).collect())
        }
        fn len(&self) -> Result<usize> {
            Ok(3)
        }
    }

    #[test]
    fn each_id_is_read_once_and_answers_stay_the_store_s() {
        let inner = Arc::new(Counting::default());
        let reads = TurnReads::new(inner.clone());
        let ids: Vec<ChunkId> = ["a#1", "zz", "a#0", "a#1"].into_iter().map(ChunkId::from).collect();
        let first = reads.chunks(&ids).unwrap();
        assert_eq!(first.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["a#1", "a#0", "a#1"]);
        assert_eq!(inner.asked_chunks.load(Ordering::SeqCst), 3, "a#1, zz, a#0: each once");
        assert_eq!(reads.chunks(&ids).unwrap(), first, "the same answer again");
        assert_eq!(inner.asked_chunks.load(Ordering::SeqCst), 3, "nothing read twice, the unknown zz included");
        let v = reads.vectors(&ids).unwrap();
        assert_eq!(v, vec![Some(vec![1.0, 0.0]), None, Some(vec![1.0, 0.0]), Some(vec![1.0, 0.0])]);
        reads.vectors(&ids).unwrap();
        assert_eq!(inner.asked_vectors.load(Ordering::SeqCst), 3, "vectors, unknown ones included, read once");
        // A search passes through (nothing copied); a hit's chunk asked later is read once.
        let hits = reads.search(&SearchRequest::default()).unwrap().hits;
        assert_eq!(hits[0].chunk.id.as_str(), "b#0");
        reads.chunks(&["b#0".into()]).unwrap();
        reads.chunks(&["b#0".into()]).unwrap();
        assert_eq!(inner.asked_chunks.load(Ordering::SeqCst), 4, "b#0 read once, after the search");
    }
}
