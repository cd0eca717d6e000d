//! Tenant-scoped handles on the stores (DESIGN §8): the only way the engine, the server, the
//! CLI and the Python package reach a store. Every id going in is qualified with the tenant,
//! every search carries the tenant in its predicate, and whatever comes out is the tenant's
//! own with its ids as the caller gave them. A call across tenants needs the unscoped store,
//! which only the factory holds (the admin listing).

use ragctx_core::{
    Chunk, ChunkId, DocumentId, DocumentSummary, EmbeddedChunk, Error, ExclusionSet, Hit, LexicalRequest, Replaced,
    Result, SearchOutcome, SearchRequest, SessionId, SessionState, SessionStore, Tenant, Trace, TurnCommit,
    VectorStore,
};
use std::sync::Arc;

/// A [`VectorStore`] that sees one tenant's chunks only.
pub struct ScopedVectorStore {
    inner: Arc<dyn VectorStore>,
    tenant: Tenant,
}

impl ScopedVectorStore {
    /// `inner` as `tenant` sees it.
    pub fn new(inner: Arc<dyn VectorStore>, tenant: Tenant) -> Self {
        ScopedVectorStore { inner, tenant }
    }
    /// The tenant.
    pub fn tenant(&self) -> &Tenant {
        &self.tenant
    }

    fn qualify_chunk(&self, c: &EmbeddedChunk) -> Result<EmbeddedChunk> {
        let mut out = c.clone();
        out.chunk.id = self.tenant.qualify(c.chunk.id.as_str())?.into();
        out.chunk.document_id = self.tenant.qualify(c.chunk.document_id.as_str())?.into();
        Ok(out)
    }

    /// The caller's view of a stored chunk; `None` when it is another tenant's.
    fn own(&self, mut c: Chunk) -> Option<Chunk> {
        c.id = self.tenant.unqualify(c.id.as_str())?.to_owned().into();
        c.document_id = self.tenant.unqualify(c.document_id.as_str())?.to_owned().into();
        Some(c)
    }

    /// Ids of this tenant as stored; an id that cannot be this tenant's is dropped (nothing
    /// of another tenant can be named through it).
    fn stored_ids<'a, T: AsRef<str> + 'a>(&self, ids: impl IntoIterator<Item = &'a T>) -> Vec<String> {
        ids.into_iter().filter_map(|i| self.tenant.qualify(i.as_ref()).ok()).collect()
    }

    fn exclusion(&self, ex: &ExclusionSet) -> ExclusionSet {
        ExclusionSet {
            documents: self.stored_ids(ex.documents.iter().map(|d| &d.0)).into_iter().map(DocumentId::from).collect(),
            chunks: self.stored_ids(ex.chunks.iter().map(|c| &c.0)).into_iter().map(ChunkId::from).collect(),
        }
    }

    fn outcome(&self, mut o: SearchOutcome) -> Result<SearchOutcome> {
        let n = o.hits.len();
        o.hits = o.hits.into_iter().filter_map(|h| Some(Hit { chunk: self.own(h.chunk)?, score: h.score })).collect();
        if o.hits.len() != n {
            // The tenant is part of the search's own predicate: a foreign hit is a backend bug.
            return Err(Error::inconsistent("a search returned another tenant's chunk"));
        }
        Ok(o)
    }

    /// A request's grouping, exclusion and filter in stored ids, and the tenant as the
    /// search's own condition: what a dense and a lexical search carry alike.
    fn predicate(
        &self,
        grouping: &Option<ragctx_core::Grouping>,
        exclusion: &ExclusionSet,
        filter: &ragctx_core::Filter,
    ) -> (Option<ragctx_core::Grouping>, ExclusionSet, ragctx_core::Filter, Option<String>) {
        let grouping = grouping.as_ref().map(|g| ragctx_core::Grouping {
            group_size: g.group_size,
            quotas: g
                .quotas
                .iter()
                .filter_map(|(d, q)| Some((self.tenant.qualify(d.as_str()).ok()?.into(), *q)))
                .collect(),
        });
        (grouping, self.exclusion(exclusion), self.filter(filter), Some(self.tenant.as_str().to_owned()))
    }

    fn filter(&self, f: &ragctx_core::Filter) -> ragctx_core::Filter {
        // A document id that cannot be this tenant's names nothing: qualified, it still
        // carries the tenant, so it matches no stored id.
        f.map_document_ids(&|d| self.tenant.qualify_unchecked(d))
    }
}

impl VectorStore for ScopedVectorStore {
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    fn upsert(&self, chunks: &[EmbeddedChunk]) -> Result<usize> {
        let chunks = chunks.iter().map(|c| self.qualify_chunk(c)).collect::<Result<Vec<_>>>()?;
        self.inner.upsert(&chunks)
    }
    fn replace_documents(&self, documents: &[DocumentId], chunks: &[EmbeddedChunk]) -> Result<Replaced> {
        let documents = documents
            .iter()
            .map(|d| Ok(self.tenant.qualify(d.as_str())?.into()))
            .collect::<Result<Vec<DocumentId>>>()?;
        let chunks = chunks.iter().map(|c| self.qualify_chunk(c)).collect::<Result<Vec<_>>>()?;
        self.inner.replace_documents(&documents, &chunks)
    }
    fn documents(&self) -> Result<Vec<DocumentSummary>> {
        Ok(self
            .inner
            .documents()?
            .into_iter()
            .filter_map(|mut d| {
                d.document_id = self.tenant.unqualify(d.document_id.as_str())?.to_owned().into();
                Some(d)
            })
            .collect())
    }
    fn search(&self, request: &SearchRequest) -> Result<SearchOutcome> {
        let (grouping, exclusion, filter, tenant) =
            self.predicate(&request.grouping, &request.exclusion, &request.filter);
        let scoped =
            SearchRequest { vector: request.vector.clone(), limit: request.limit, grouping, exclusion, filter, tenant };
        self.outcome(self.inner.search(&scoped)?)
    }
    fn search_lexical(&self, request: &LexicalRequest) -> Result<Option<SearchOutcome>> {
        let (grouping, exclusion, filter, tenant) =
            self.predicate(&request.grouping, &request.exclusion, &request.filter);
        let scoped =
            LexicalRequest { query: request.query.clone(), limit: request.limit, grouping, exclusion, filter, tenant };
        match self.inner.search_lexical(&scoped)? {
            Some(o) => Ok(Some(self.outcome(o)?)),
            None => Ok(None),
        }
    }
    fn lexical_missing(&self) -> String {
        self.inner.lexical_missing()
    }
    fn prepare_lexical(&self) -> Result<Option<usize>> {
        // The chunks it covers, as this tenant may count them: its own.
        match self.inner.prepare_lexical()? {
            Some(_) => Ok(Some(self.len()?)),
            None => Ok(None),
        }
    }
    fn chunks(&self, ids: &[ChunkId]) -> Result<Vec<Chunk>> {
        let stored: Vec<ChunkId> = self.stored_ids(ids.iter().map(|c| &c.0)).into_iter().map(ChunkId::from).collect();
        Ok(self.inner.chunks(&stored)?.into_iter().filter_map(|c| self.own(c)).collect())
    }
    fn vectors(&self, ids: &[ChunkId]) -> Result<Vec<Option<Vec<f32>>>> {
        // One answer per id asked, in order: an id that cannot be this tenant's is `None`.
        let stored: Vec<Option<ChunkId>> =
            ids.iter().map(|c| self.tenant.qualify(c.as_str()).ok().map(ChunkId::from)).collect();
        let known: Vec<ChunkId> = stored.iter().flatten().cloned().collect();
        let mut found = self.inner.vectors(&known)?.into_iter();
        Ok(stored.iter().map(|s| s.as_ref().and_then(|_| found.next().flatten())).collect())
    }
    fn sentences(&self, ids: &[ChunkId]) -> Result<Vec<Option<ragctx_core::Sentences>>> {
        // As `vectors`: one answer per id asked, `None` for an id that cannot be this tenant's.
        let stored: Vec<Option<ChunkId>> =
            ids.iter().map(|c| self.tenant.qualify(c.as_str()).ok().map(ChunkId::from)).collect();
        let known: Vec<ChunkId> = stored.iter().flatten().cloned().collect();
        let mut found = self.inner.sentences(&known)?.into_iter();
        Ok(stored.iter().map(|s| s.as_ref().and_then(|_| found.next().flatten())).collect())
    }
    fn len(&self) -> Result<usize> {
        self.inner.tenant_len(self.tenant.as_str())
    }
    fn tenant_len(&self, tenant: &str) -> Result<usize> {
        // A scoped handle sees its own tenant only.
        if tenant == self.tenant.as_str() {
            self.len()
        } else {
            Ok(0)
        }
    }
}

/// A [`SessionStore`] whose session ids live in one tenant: the same session id in two
/// tenants is two sessions (the stored id is `tenant` U+001F `session`, as every stored id of a
/// tenant; the separator is not a session-id character, so no caller's id can name another
/// tenant's session). The default tenant's sessions keep their ids, as before tenants.
pub struct ScopedSessionStore {
    inner: Arc<dyn SessionStore>,
    tenant: Tenant,
}

impl ScopedSessionStore {
    /// `inner` as `tenant` sees it.
    pub fn new(inner: Arc<dyn SessionStore>, tenant: Tenant) -> Self {
        ScopedSessionStore { inner, tenant }
    }
    /// The stored id: the tenant's one encoding, as every id it owns ([`Tenant::qualify`];
    /// a session id never holds the separator).
    fn id(&self, id: &SessionId) -> SessionId {
        SessionId(self.tenant.qualify_unchecked(id.as_str()))
    }
}

impl SessionStore for ScopedSessionStore {
    fn load(&self, id: &SessionId) -> Result<Option<SessionState>> {
        self.inner.load(&self.id(id))
    }
    fn commit_turn(&self, id: &SessionId, commit: TurnCommit, retention: ragctx_core::Retention) -> Result<u64> {
        self.inner.commit_turn(&self.id(id), commit, retention)
    }
    fn traces(&self, id: &SessionId) -> Result<Vec<Trace>> {
        self.inner.traces(&self.id(id))
    }
    fn reset(&self, id: &SessionId) -> Result<bool> {
        self.inner.reset(&self.id(id))
    }
    fn delete(&self, id: &SessionId) -> Result<bool> {
        self.inner.delete(&self.id(id))
    }
    fn lease_turns(&self, id: &SessionId, wait: std::time::Duration) -> Result<Option<ragctx_core::TurnLease>> {
        self.inner.lease_turns(&self.id(id), wait)
    }
}

/// An [`EmbeddingCache`](ragctx_core::EmbeddingCache) one tenant shares with nobody: its entries
/// are keyed by the model qualified with the tenant (the default tenant's keep the bare
/// model id, as before tenants). Without it an ingest's report — or its speed — would tell
/// a tenant that another had already ingested the same text.
pub struct ScopedEmbeddingCache {
    inner: Arc<dyn ragctx_core::EmbeddingCache>,
    tenant: Tenant,
}

impl ScopedEmbeddingCache {
    /// `inner` as `tenant` sees it.
    pub fn new(inner: Arc<dyn ragctx_core::EmbeddingCache>, tenant: Tenant) -> Self {
        ScopedEmbeddingCache { inner, tenant }
    }
}

impl ragctx_core::EmbeddingCache for ScopedEmbeddingCache {
    fn get(&self, model_id: &str, texts: &[&str]) -> Result<Vec<Option<Vec<f32>>>> {
        self.inner.get(&self.tenant.qualify_unchecked(model_id), texts)
    }
    fn put(&self, model_id: &str, items: &[(&str, &[f32])]) -> Result<()> {
        self.inner.put(&self.tenant.qualify_unchecked(model_id), items)
    }
    fn place(&self) -> String {
        self.inner.place()
    }
}
