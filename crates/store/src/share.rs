//! One data dir, several processes (design §10). The process that holds the database (the
//! first to open the data dir) serves its stores to the others over the data dir's socket
//! ([`crate::wire`]); every other process is its client. When the holder ends, its clients'
//! next call finds the socket gone, and one of them takes the data dir over (the others
//! become its clients), so an agent host that closes takes nobody's knowledge base with it.

use crate::client::{busy, Client};
use crate::database::lock_wait;
use crate::db::DataDir;
use crate::holder::Served;
use crate::wire::{Call, Reply};
use ragctx_core::{
    Chunk, ChunkId, DocumentId, DocumentSummary, EmbeddedChunk, EmbeddingCache, Error, LexicalRequest, Replaced,
    Result, Retention, SearchOutcome, SearchRequest, SessionId, SessionState, SessionStore, Trace, TurnCommit,
    VectorStore,
};
use ragctx_index::IndexParams;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

enum Role {
    /// This process holds the database and serves it (to itself too: [`DataDir::served`]).
    Holder(Arc<DataDir>),
    Client(Client),
}

/// A data dir shared with the other processes that open it: this process holds it (and
/// serves it to them), or is a client of the process that does. Implements the store traits
/// either way; cheap to clone.
#[derive(Clone)]
pub struct SharedDir {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    want_dim: Option<usize>,
    params: IndexParams,
    role: RwLock<Role>,
    epochs: AtomicUsize,
}

impl SharedDir {
    /// Opens the data dir: holds it when no other process does (loading its index, serving
    /// it to later processes), else becomes a client of the process that holds it. Waits
    /// (`RAGCTX_LOCK_WAIT_SECS`, default 60 s) only while a holder is starting (loading its
    /// index) or ending. `dim: None` takes the stored dimension.
    pub fn open(path: &Path, dim: Option<usize>, params: IndexParams) -> Result<SharedDir> {
        let role = join(path, dim, params, 0)?;
        Ok(SharedDir {
            inner: Arc::new(Inner {
                path: path.to_owned(),
                want_dim: dim,
                params,
                role: RwLock::new(role),
                epochs: AtomicUsize::new(0),
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The data dir when this process holds it (benchmarks that work on its index).
    pub fn held(&self) -> Option<Arc<DataDir>> {
        match &*self.inner.role.read().unwrap_or_else(|p| p.into_inner()) {
            Role::Holder(d) => Some(d.clone()),
            Role::Client(_) => None,
        }
    }

    /// Whether this process holds the data dir (and serves it to the others).
    pub fn holds(&self) -> bool {
        self.held().is_some()
    }

    /// Ties the store to an embedding model, as [`DataDir::bind_model`] does.
    pub fn bind_model(&self, model_id: &str, local: bool) -> Result<()> {
        self.run(
            |s| crate::database::bind_model(&s.db, model_id, local),
            || Call::BindModel { model: model_id.into(), local },
            |r| matches!(r, Reply::Done).then_some(()),
        )
    }

    /// The embedding model whose vectors the store holds, when one was recorded.
    pub fn embedding_model(&self) -> Result<Option<String>> {
        self.run(|s| crate::database::embedding_model(&s.db), || Call::EmbeddingModel, pick!(Text))
    }

    /// One store call: run here when this process holds the data dir, else sent to the holder.
    /// A holder gone since the last call is replaced (this process takes the data dir over, or
    /// joins the one that did) and the call is sent again, until one answers.
    fn run<T>(
        &self,
        here: impl Fn(&Served) -> Result<T>,
        call: impl Fn() -> Call,
        back: impl Fn(Reply) -> Option<T>,
    ) -> Result<T> {
        let mut lost = None;
        let started = Instant::now();
        // Short-lived holders (CLI commands) may end one after another: the call follows
        // them for as long as a holder is waited for.
        while started.elapsed() < lock_wait() {
            let epoch = {
                let role = self.inner.role.read().unwrap_or_else(|p| p.into_inner());
                match &*role {
                    Role::Holder(d) => return here(d.served()),
                    Role::Client(c) => match c.ask(&call(), &back) {
                        Ok(answer) => return answer,
                        Err(e) => {
                            lost = Some(e);
                            c.epoch
                        }
                    },
                }
            };
            self.rejoin(epoch)?;
        }
        Err(Error::Unavailable {
            backend: "embedded store".into(),
            message: format!(
                "the processes holding {} kept going away during one call for {} s ({})",
                self.inner.path.display(),
                lock_wait().as_secs(),
                lost.map(|e| e.to_string()).unwrap_or_default()
            ),
        })
    }

    /// Joins the data dir anew after its holder went away, unless another thread of this
    /// process already did since `epoch`.
    fn rejoin(&self, epoch: u64) -> Result<()> {
        let mut role = self.inner.role.write().unwrap_or_else(|p| p.into_inner());
        if let Role::Client(c) = &*role {
            if c.epoch == epoch {
                let next = self.inner.epochs.fetch_add(1, Ordering::AcqRel) as u64 + 1;
                *role = join(&self.inner.path, self.inner.want_dim, self.inner.params, next)?;
            }
        }
        Ok(())
    }

    fn dim(&self) -> usize {
        match &*self.inner.role.read().unwrap_or_else(|p| p.into_inner()) {
            Role::Holder(d) => d.dimension(),
            Role::Client(c) => c.dim,
        }
    }
}

/// Holds the data dir if it is free, else connects to its holder; polls both (every 20 ms)
/// while a holder starts or ends, up to [`lock_wait`].
fn join(path: &Path, dim: Option<usize>, params: IndexParams, epoch: u64) -> Result<Role> {
    let started = Instant::now();
    let wait = lock_wait();
    loop {
        if let Some(data) = DataDir::try_open_with(path, dim, params)? {
            return Ok(Role::Holder(Arc::new(data)));
        }
        if let Ok(client) = Client::connect(path, epoch) {
            let client = client?;
            if let Some(want) = dim {
                if want != client.dim {
                    return Err(Error::WrongDimension { expected: client.dim, got: want });
                }
            }
            return Ok(Role::Client(client));
        }
        if started.elapsed() >= wait {
            return Err(busy(path));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl VectorStore for SharedDir {
    fn dimension(&self) -> usize {
        self.dim()
    }

    fn upsert(&self, chunks: &[EmbeddedChunk]) -> Result<usize> {
        self.run(|s| s.vectors.upsert(chunks), || Call::Upsert(chunks.to_vec()), pick!(Count))
    }

    fn replace_documents(&self, documents: &[DocumentId], chunks: &[EmbeddedChunk]) -> Result<Replaced> {
        self.run(
            |s| s.vectors.replace_documents(documents, chunks),
            || Call::Replace { documents: documents.to_vec(), chunks: chunks.to_vec() },
            pick!(Replaced),
        )
    }

    fn documents(&self) -> Result<Vec<DocumentSummary>> {
        self.run(|s| s.vectors.documents(), || Call::Documents, pick!(Documents))
    }

    fn search(&self, request: &SearchRequest) -> Result<SearchOutcome> {
        self.run(|s| s.vectors.search(request), || Call::Search(request.clone()), pick!(Outcome))
    }

    fn search_lexical(&self, request: &LexicalRequest) -> Result<Option<SearchOutcome>> {
        self.run(|s| s.vectors.search_lexical(request), || Call::Lexical(request.clone()), pick!(MaybeOutcome))
    }

    fn prepare_lexical(&self) -> Result<Option<usize>> {
        self.run(|s| s.vectors.prepare_lexical(), || Call::PrepareLexical, pick!(MaybeCount))
    }

    fn chunks(&self, ids: &[ChunkId]) -> Result<Vec<Chunk>> {
        self.run(|s| s.vectors.chunks(ids), || Call::Chunks(ids.to_vec()), pick!(Chunks))
    }

    fn vectors(&self, ids: &[ChunkId]) -> Result<Vec<Option<Vec<f32>>>> {
        self.run(|s| s.vectors.vectors(ids), || Call::Vectors(ids.to_vec()), pick!(Vectors))
    }

    fn sentences(&self, ids: &[ChunkId]) -> Result<Vec<Option<ragctx_core::Sentences>>> {
        self.run(|s| s.vectors.sentences(ids), || Call::Sentences(ids.to_vec()), pick!(Sentences))
    }

    fn len(&self) -> Result<usize> {
        self.run(|s| s.vectors.len(), || Call::Len, pick!(Count))
    }

    fn tenant_len(&self, tenant: &str) -> Result<usize> {
        self.run(|s| s.vectors.tenant_len(tenant), || Call::TenantLen(tenant.into()), pick!(Count))
    }
}

impl SessionStore for SharedDir {
    fn load(&self, id: &SessionId) -> Result<Option<SessionState>> {
        self.run(|s| s.sessions.load(id), || Call::Load(id.clone()), pick!(Session))
    }

    /// Sent again after its holder went away, like every call: a version-checked commit
    /// that landed before the holder was killed answers the second time with a conflict.
    fn commit_turn(&self, id: &SessionId, commit: TurnCommit, retention: Retention) -> Result<u64> {
        // The holder's own turn commits without a copy of its record and trace.
        if let Some(d) = self.held() {
            return d.served().sessions.commit_turn(id, commit, retention);
        }
        self.run(
            |s| s.sessions.commit_turn(id, commit.clone(), retention),
            || Call::Commit { id: id.clone(), commit: Box::new(commit.clone()), retention },
            pick!(Number),
        )
    }

    fn traces(&self, id: &SessionId) -> Result<Vec<Trace>> {
        self.run(|s| s.sessions.traces(id), || Call::Traces(id.clone()), pick!(Traces))
    }

    fn reset(&self, id: &SessionId) -> Result<bool> {
        self.run(|s| s.sessions.reset(id), || Call::Reset(id.clone()), pick!(Flag))
    }

    fn delete(&self, id: &SessionId) -> Result<bool> {
        self.run(|s| s.sessions.delete(id), || Call::Delete(id.clone()), pick!(Flag))
    }

    /// The holder's lease of the session: its turns, from every process on the data dir, plan
    /// one at a time.
    fn lease_turns(&self, id: &SessionId, wait: Duration) -> Result<Option<ragctx_core::TurnLease>> {
        Ok(self.lease(id, wait))
    }
}

impl SharedDir {
    fn lease(&self, id: &SessionId, wait: Duration) -> Option<ragctx_core::TurnLease> {
        match &*self.inner.role.read().unwrap_or_else(|p| p.into_inner()) {
            Role::Holder(d) => d.served().leases.take(id.as_str(), wait).map(|l| Box::new(l) as ragctx_core::TurnLease),
            Role::Client(c) => c.lease(id.as_str(), wait),
        }
    }
}

impl EmbeddingCache for SharedDir {
    fn get(&self, model_id: &str, texts: &[&str]) -> Result<Vec<Option<Vec<f32>>>> {
        self.run(
            |s| s.cache.get(model_id, texts),
            || Call::CacheGet { model: model_id.into(), texts: texts.iter().map(|t| (*t).to_owned()).collect() },
            pick!(Vectors),
        )
    }

    fn put(&self, model_id: &str, items: &[(&str, &[f32])]) -> Result<()> {
        self.run(
            |s| s.cache.put(model_id, items),
            || Call::CachePut {
                model: model_id.into(),
                items: items.iter().map(|(t, v)| ((*t).to_owned(), v.to_vec())).collect(),
            },
            |r| matches!(r, Reply::Done).then_some(()),
        )
    }

    fn place(&self) -> String {
        self.inner.path.display().to_string()
    }
}
