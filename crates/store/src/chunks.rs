use crate::changes;
use crate::database::generation;
use crate::schema::{
    bytes_to_f32s, decode_sentences, encode_ids, encode_sentences, f32s_to_bytes, CHANGES, CHUNKS, META, SENTENCES,
    VECTORS,
};
use ragctx_core::{
    check_replacement, check_vectors, Chunk, ChunkId, DocumentId, DocumentSummary, EmbeddedChunk, Error, Hit,
    LexicalRequest, Replaced, Result, SearchOutcome, SearchPath, SearchReason, SearchRequest, VectorStore,
};
use ragctx_index::{ForcePath, IndexHits, ResolvedCache, VectorIndex};
use redb::{Database, ReadableTable, ReadableTableMetadata};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

/// The embedded default [`VectorStore`]: chunks in redb, vectors in the HNSW index.
#[derive(Clone)]
pub struct EmbeddedVectorStore {
    // Made by `DataDir::vector_store`, which shares its handles.
    pub(crate) db: Arc<Database>,
    pub(crate) index: Arc<RwLock<VectorIndex>>,
    pub(crate) resolved: Arc<ResolvedCache>,
    pub(crate) lexical: Arc<ragctx_lexical::Cached>,
    pub(crate) index_path: PathBuf,
    /// Chunks changed since `index.bin` was written (moved under the index's write lock).
    pub(crate) unsaved: Arc<Mutex<usize>>,
    pub(crate) dim: usize,
}

impl EmbeddedVectorStore {
    /// Runs `f` with read access to the index (benchmarks use it to force a path).
    pub fn with_index<T>(&self, f: impl FnOnce(&VectorIndex) -> T) -> T {
        f(&self.index.read().expect("index lock"))
    }

    /// Search with a pinned path (benchmarks, tests).
    pub fn search_forced(&self, request: &SearchRequest, force: Option<ForcePath>) -> Result<SearchOutcome> {
        self.check_dim(request.vector.len())?;
        // The chunks are read under the index's read lock: a write (which removes chunks
        // under the write lock) cannot commit between the search and the read.
        self.with_index(|ix| {
            let r = search_index(ix, &self.resolved, request, force);
            let ids: Vec<ChunkId> = r.hits.iter().map(|&(n, _)| ChunkId::from(ix.chunk_id(n))).collect();
            self.outcome((r, ids))
        })
    }

    fn check_dim(&self, got: usize) -> Result<()> {
        if got != self.dim {
            return Err(Error::WrongDimension { expected: self.dim, got });
        }
        Ok(())
    }

    fn outcome(&self, (r, ids): (IndexHits, Vec<ChunkId>)) -> Result<SearchOutcome> {
        let chunks = self.chunks(&ids)?;
        if chunks.len() != ids.len() {
            return Err(Error::inconsistent("index and chunk table disagree; delete index.bin to rebuild it"));
        }
        let hits = chunks.into_iter().zip(&r.hits).map(|(chunk, &(_, score))| Hit { chunk, score }).collect();
        Ok(SearchOutcome { hits, path: r.path, rounds: r.rounds, reason: SearchReason::Plan(r.reason) })
    }
}

impl VectorStore for EmbeddedVectorStore {
    fn dimension(&self) -> usize {
        self.dim
    }

    fn upsert(&self, chunks: &[EmbeddedChunk]) -> Result<usize> {
        Ok(self.write(&[], chunks)?.new)
    }

    fn replace_documents(&self, documents: &[DocumentId], chunks: &[EmbeddedChunk]) -> Result<Replaced> {
        check_replacement(documents, chunks)?;
        self.write(documents, chunks)
    }

    fn documents(&self) -> Result<Vec<DocumentSummary>> {
        let rx = self.db.begin_read().map_err(Error::storage)?;
        let t = rx.open_table(CHUNKS).map_err(Error::storage)?;
        let mut chunks: Vec<Chunk> = Vec::new();
        for row in t.iter().map_err(Error::storage)? {
            chunks.push(serde_json::from_slice(row.map_err(Error::storage)?.1.value()).map_err(Error::storage)?);
        }
        Ok(DocumentSummary::of_chunks(&chunks))
    }

    fn search(&self, request: &SearchRequest) -> Result<SearchOutcome> {
        self.search_forced(request, None)
    }

    fn prepare_lexical(&self) -> Result<Option<usize>> {
        self.with_index(|_| Ok(Some(self.lexical_index()?.len())))
    }

    fn search_lexical(&self, request: &LexicalRequest) -> Result<Option<SearchOutcome>> {
        // Under the index's read lock: writers hold its write lock across their commit, so
        // the generation and the chunks read belong together.
        self.with_index(|_| {
            let lexical = self.lexical_index()?;
            let found = lexical.search_request(request);
            let ids: Vec<ChunkId> = found.iter().map(|&(e, _)| lexical.chunk_id(e).clone()).collect();
            let chunks = self.chunks(&ids)?;
            if chunks.len() != ids.len() {
                return Err(Error::inconsistent("the lexical index and the chunk table disagree"));
            }
            let hits = chunks.into_iter().zip(&found).map(|(chunk, &(_, score))| Hit { chunk, score }).collect();
            Ok(Some(lexical_outcome(&lexical, request, hits)))
        })
    }

    fn chunks(&self, ids: &[ChunkId]) -> Result<Vec<Chunk>> {
        let rx = self.db.begin_read().map_err(Error::storage)?;
        let t = rx.open_table(CHUNKS).map_err(Error::storage)?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(v) = t.get(id.as_str()).map_err(Error::storage)? {
                out.push(serde_json::from_slice(v.value()).map_err(Error::storage)?);
            }
        }
        Ok(out)
    }

    fn vectors(&self, ids: &[ChunkId]) -> Result<Vec<Option<Vec<f32>>>> {
        Ok(self.with_index(|ix| ids.iter().map(|id| ix.vector_of(id.as_str()).map(<[f32]>::to_vec)).collect()))
    }

    fn sentences(&self, ids: &[ChunkId]) -> Result<Vec<Option<ragctx_core::Sentences>>> {
        let rx = self.db.begin_read().map_err(Error::storage)?;
        let t = match rx.open_table(SENTENCES) {
            Ok(t) => t,
            // A store from before the sentence index (DESIGN §11): none.
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(vec![None; ids.len()]),
            Err(e) => return Err(Error::storage(e)),
        };
        ids.iter()
            .map(|id| Ok(t.get(id.as_str()).map_err(Error::storage)?.and_then(|v| decode_sentences(v.value()))))
            .collect()
    }

    fn len(&self) -> Result<usize> {
        let rx = self.db.begin_read().map_err(Error::storage)?;
        let t = rx.open_table(CHUNKS).map_err(Error::storage)?;
        Ok(t.len().map_err(Error::storage)? as usize)
    }

    fn tenant_len(&self, tenant: &str) -> Result<usize> {
        Ok(self.with_index(|ix| ix.tenant_len(tenant)))
    }
}

impl EmbeddedVectorStore {
    /// Writes `chunks` and removes the other chunks of `documents`, in one transaction.
    fn write(&self, documents: &[DocumentId], chunks: &[EmbeddedChunk]) -> Result<Replaced> {
        check_vectors(self.dim, chunks)?;
        // Hold the index lock across the transaction so two writes apply in one order; the
        // index mirrors the committed store, so it knows each document's chunks.
        let mut ix = self.index.write().expect("index lock");
        let stale = ix.stale_chunks(documents, chunks);
        let tx = self.db.begin_write().map_err(Error::storage)?;
        let mut out = Replaced { removed: stale.len(), ..Replaced::default() };
        let gen = {
            let mut ct = tx.open_table(CHUNKS).map_err(Error::storage)?;
            let mut vt = tx.open_table(VECTORS).map_err(Error::storage)?;
            let mut st = tx.open_table(SENTENCES).map_err(Error::storage)?;
            let mut meta = tx.open_table(META).map_err(Error::storage)?;
            for c in chunks {
                let json = serde_json::to_vec(&c.chunk).map_err(Error::storage)?;
                if ct.insert(c.chunk.id.as_str(), json.as_slice()).map_err(Error::storage)?.is_none() {
                    out.new += 1;
                } else {
                    out.updated += 1;
                }
                vt.insert(c.chunk.id.as_str(), f32s_to_bytes(&c.vector).as_slice()).map_err(Error::storage)?;
                match &c.sentences {
                    Some(s) => st.insert(c.chunk.id.as_str(), encode_sentences(s).as_slice()).map(drop),
                    None => st.remove(c.chunk.id.as_str()).map(drop),
                }
                .map_err(Error::storage)?;
            }
            for id in &stale {
                ct.remove(id.as_str()).map_err(Error::storage)?;
                vt.remove(id.as_str()).map_err(Error::storage)?;
                st.remove(id.as_str()).map_err(Error::storage)?;
            }
            let g = meta.get("generation").map_err(Error::storage)?.map(|v| v.value()).unwrap_or(0) + 1;
            meta.insert("generation", g).map_err(Error::storage)?;
            // What the index files, written later, are brought forward by.
            let touched =
                encode_ids(chunks.iter().map(|c| c.chunk.id.as_str()).chain(stale.iter().map(String::as_str)));
            tx.open_table(CHANGES).map_err(Error::storage)?.insert(g, touched.as_slice()).map_err(Error::storage)?;
            g
        };
        ragctx_index::failpoint::pause("chunks.before-commit");
        tx.commit().map_err(Error::storage)?;
        ix.upsert_chunks(chunks);
        for id in &stale {
            ix.remove(id);
        }
        let mut unsaved = self.unsaved.lock().unwrap_or_else(|p| p.into_inner());
        *unsaved += chunks.len() + stale.len();
        let compacted = ix.dead_share() > 0.25;
        if compacted {
            *ix = ix.compacted();
        }
        // The file is rewritten once the changes since it pass an eighth of the index or 2,000
        // chunks (or after a compaction, which renumbers it); until then the next open brings
        // it forward by those changes. The write is committed whatever happens here: a file
        // that cannot be written stays behind (the next open brings it forward, or rebuilds).
        if compacted || ragctx_lexical::rewrite_due(*unsaved, ix.len()) {
            match ix.save_and_map(&self.index_path, gen) {
                Ok(()) => {
                    *unsaved = 0;
                    // Rows the older of the two files still needs stay; a failed prune leaves
                    // rows the next one drops.
                    let lexical = self.lexical.file_generation().filter(|&g| g <= gen).unwrap_or(gen);
                    let _ = changes::prune(&self.db, lexical);
                }
                Err(e) => eprintln!("ragctx: {e}; the index file stays behind the store until a later write"),
            }
        }
        Ok(out)
    }

    /// The lexical index at the store's generation, brought forward by the changes since
    /// the one it holds (or its file's), or rebuilt. Callers hold the index lock.
    fn lexical_index(&self) -> Result<Arc<ragctx_lexical::LexicalIndex>> {
        self.lexical_reached().map(|(ix, _)| ix)
    }

    /// [`Self::lexical_index`] and how it was reached.
    fn lexical_reached(&self) -> Result<(Arc<ragctx_lexical::LexicalIndex>, ragctx_lexical::Brought)> {
        let generation = self.generation()?;
        self.lexical.get_traced(
            generation,
            |from| changes::lexical_changes(&self.db, from, generation),
            || self.all_chunks(),
        )
    }

    /// Brings the lexical index to the store's generation as a search does, and says how it
    /// was reached (tests, benchmarks).
    pub fn lexical_traced(&self) -> Result<ragctx_lexical::Brought> {
        self.with_index(|_| Ok(self.lexical_reached()?.1))
    }

    /// Every stored chunk with its vector, in id order (for export and benchmarks).
    pub fn all(&self) -> Result<Vec<EmbeddedChunk>> {
        self.first(usize::MAX)
    }

    /// The first `n` stored chunks with their vectors, in id order.
    pub fn first(&self, n: usize) -> Result<Vec<EmbeddedChunk>> {
        let rx = self.db.begin_read().map_err(Error::storage)?;
        let ct = rx.open_table(CHUNKS).map_err(Error::storage)?;
        let vt = rx.open_table(VECTORS).map_err(Error::storage)?;
        let mut out = Vec::new();
        for row in ct.iter().map_err(Error::storage)?.take(n) {
            let (id, c) = row.map_err(Error::storage)?;
            let vector =
                vt.get(id.value()).map_err(Error::storage)?.map(|v| bytes_to_f32s(v.value())).unwrap_or_default();
            out.push(EmbeddedChunk {
                chunk: serde_json::from_slice(c.value()).map_err(Error::storage)?,
                vector,
                sentences: None,
            });
        }
        Ok(out)
    }

    /// Every stored chunk without its vector, in id order.
    fn all_chunks(&self) -> Result<Vec<Chunk>> {
        let rx = self.db.begin_read().map_err(Error::storage)?;
        let ct = rx.open_table(CHUNKS).map_err(Error::storage)?;
        let mut out = Vec::new();
        for row in ct.iter().map_err(Error::storage)? {
            let (_, c) = row.map_err(Error::storage)?;
            out.push(serde_json::from_slice(c.value()).map_err(Error::storage)?);
        }
        Ok(out)
    }

    /// The store generation (bumped by every upsert).
    pub fn generation(&self) -> Result<u64> {
        generation(&self.db)
    }
}

/// A search of `ix` under `request`: its exclusion resolved (or reused from `resolved`), its
/// filter and tenant applied as blocked positions, then the planner's path. The one search of
/// the index that both the data dir's store and the in-memory store run.
pub(crate) fn search_index(
    ix: &VectorIndex,
    resolved: &ResolvedCache,
    request: &SearchRequest,
    force: Option<ForcePath>,
) -> IndexHits {
    let ex = resolved.get(ix, &request.exclusion);
    let ex = ix.restrict(ex, &request.filter, request.tenant.as_deref());
    ix.search_resolved(&request.vector, request.limit, request.grouping.as_ref(), &ex, force)
}

/// A BM25 search's outcome, its reason counting the chunks the caller may see: a search
/// narrowed to a tenant counts that tenant's only.
pub(crate) fn lexical_outcome(
    lexical: &ragctx_lexical::LexicalIndex,
    request: &LexicalRequest,
    hits: Vec<Hit>,
) -> SearchOutcome {
    let counted = request.tenant.as_deref().map_or(lexical.len(), |t| lexical.tenant_len(t));
    SearchOutcome { hits, path: SearchPath::Lexical, rounds: 1, reason: SearchReason::Bm25 { chunks: counted } }
}
