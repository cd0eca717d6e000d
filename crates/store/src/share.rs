//! One data dir, several processes (design §10). The process that holds the database (the
//! first to open the data dir) serves its stores to the others over the data dir's socket
//! ([`crate::wire`]); every other process is its client. When the holder ends, its clients'
//! next call finds the socket gone, and one of them takes the data dir over (the others
//! become its clients), so an agent host that closes takes nobody's knowledge base with it.

use crate::db::{lock_wait, try_db, DataDir};
use crate::wire::{self, Call, Reply, WireError};
use crate::{EmbeddedSessionStore, EmbeddedVectorStore};
use ragctx_core::{
    Chunk, ChunkId, DocumentId, DocumentSummary, EmbeddedChunk, EmbeddingCache, Error, LexicalRequest, Replaced,
    Result, Retention, SearchOutcome, SearchRequest, SessionId, SessionState, SessionStore, Trace, TurnCommit,
    VectorStore,
};
use ragctx_index::IndexParams;
use std::io;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The value of one kind of [`Reply`], `None` for any other: what a call expects back.
macro_rules! pick {
    ($variant:ident) => {
        |r| if let Reply::$variant(x) = r { Some(x) } else { None }
    };
}

/// How long an idle connection of the holder's waits before it looks whether to stop.
const IDLE_POLL: Duration = Duration::from_millis(50);

/// How long a holder that is closing waits for the calls it is answering.
const DRAIN: Duration = Duration::from_secs(30);

/// What the holder serves: its stores.
#[derive(Clone)]
pub(crate) struct Served {
    pub(crate) vectors: EmbeddedVectorStore,
    pub(crate) sessions: EmbeddedSessionStore,
    pub(crate) cache: crate::DataDirCache,
    pub(crate) db: Arc<redb::Database>,
    /// The sessions whose turn is being planned, in this process or another.
    pub(crate) leases: Arc<Leases>,
    pub(crate) dim: usize,
}

/// Turn leases by session ([`SessionStore::lease_turns`]): one turn of a session plans at a
/// time across every process on the data dir.
#[derive(Default)]
pub(crate) struct Leases {
    held: Mutex<std::collections::HashSet<String>>,
    freed: std::sync::Condvar,
}

/// A session's lease; dropped, the next turn of the session goes.
pub(crate) struct Lease {
    leases: Arc<Leases>,
    session: String,
}

impl Leases {
    /// The lease of `session`, waiting at most `wait` for the turn that holds it.
    fn take(self: &Arc<Self>, session: &str, wait: Duration) -> Option<Lease> {
        let until = Instant::now() + wait;
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        while held.contains(session) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            held = self.freed.wait_timeout(held, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        held.insert(session.to_owned());
        Some(Lease { leases: self.clone(), session: session.to_owned() })
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.leases.held.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.session);
        self.leases.freed.notify_all();
    }
}

impl Served {
    fn answer(&self, call: Call) -> Result<Reply> {
        Ok(match call {
            Call::Hello { version } if version == wire::VERSION => {
                Reply::Hello { dimension: self.dim, pid: std::process::id() }
            }
            Call::Hello { version } => {
                return Err(Error::Unavailable {
                    backend: "embedded store".into(),
                    message: format!(
                        "the process holding the data dir speaks protocol {}, this one {version}: use one ragctx version for every process on a data dir",
                        wire::VERSION
                    ),
                })
            }
            Call::Upsert(chunks) => Reply::Count(self.vectors.upsert(&chunks)?),
            Call::Replace { documents, chunks } => Reply::Replaced(self.vectors.replace_documents(&documents, &chunks)?),
            Call::Documents => Reply::Documents(self.vectors.documents()?),
            Call::Search(r) => Reply::Outcome(self.vectors.search(&r)?),
            Call::Lexical(r) => Reply::MaybeOutcome(self.vectors.search_lexical(&r)?),
            Call::PrepareLexical => Reply::MaybeCount(self.vectors.prepare_lexical()?),
            Call::Chunks(ids) => Reply::Chunks(self.vectors.chunks(&ids)?),
            Call::Vectors(ids) => Reply::Vectors(self.vectors.vectors(&ids)?),
            Call::Len => Reply::Count(self.vectors.len()?),
            Call::TenantLen(t) => Reply::Count(self.vectors.tenant_len(&t)?),
            Call::Load(id) => Reply::Session(self.sessions.load(&id)?),
            Call::Commit { id, commit, retention } => Reply::Number(self.sessions.commit_turn(&id, *commit, retention)?),
            Call::Traces(id) => Reply::Traces(self.sessions.traces(&id)?),
            Call::Reset(id) => Reply::Flag(self.sessions.reset(&id)?),
            Call::Delete(id) => Reply::Flag(self.sessions.delete(&id)?),
            Call::CacheGet { model, texts } => {
                let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
                Reply::Vectors(self.cache.get(&model, &texts)?)
            }
            Call::CachePut { model, items } => {
                let items: Vec<(&str, &[f32])> = items.iter().map(|(t, v)| (t.as_str(), v.as_slice())).collect();
                self.cache.put(&model, &items)?;
                Reply::Done
            }
            Call::BindModel { model, local } => {
                crate::db::bind_model(&self.db, &model, local)?;
                Reply::Done
            }
            Call::EmbeddingModel => Reply::Text(crate::db::embedding_model(&self.db)?),
            Call::StoredModel => Reply::Text(crate::db::stored_model(&self.db)?),
            Call::Lease { .. } => {
                return Err(Error::InvalidInput("a turn lease is taken on a connection of its own".into()))
            }
        })
    }
}

/// The holder's listener: a thread that accepts, and one per connection that answers its
/// calls in turn. Dropped, it stops taking calls and waits (up to 30 s) for those it is
/// answering, so a holder that closes loses no client's call halfway; a call that arrives
/// after that is closed unanswered and not run (its client sends it to the next holder).
pub(crate) struct Server {
    socket: PathBuf,
    /// The listening socket, shut down to wake the accepting thread.
    listener: UnixListener,
    stop: Arc<AtomicBool>,
    /// Connections being answered: each holds the database until its thread ends.
    active: Arc<AtomicUsize>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    pub(crate) fn start(dir: &Path, served: Served) -> io::Result<Server> {
        use std::os::unix::fs::PermissionsExt;
        let socket = wire::socket_path(dir);
        // Only the holder of the database binds, so a file left here is a dead holder's.
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket)?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
        let accepting = listener.try_clone()?;
        let stop = Arc::new(AtomicBool::new(false));
        let active = Arc::new(AtomicUsize::new(0));
        let (s, a) = (stop.clone(), active.clone());
        let accept = std::thread::Builder::new().name("ragctx-share".into()).spawn(move || {
            for conn in accepting.incoming() {
                if s.load(Ordering::Acquire) {
                    break;
                }
                let Ok(conn) = conn else {
                    // Shut down (below), or out of descriptors for a moment.
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let (served, s) = (served.clone(), s.clone());
                a.fetch_add(1, Ordering::AcqRel);
                let done = a.clone();
                let spawned = std::thread::Builder::new().name("ragctx-share-conn".into()).spawn(move || {
                    let _ = answer_calls(conn, &served, &s);
                    done.fetch_sub(1, Ordering::AcqRel);
                });
                if spawned.is_err() {
                    a.fetch_sub(1, Ordering::AcqRel);
                }
            }
        })?;
        Ok(Server { socket, listener, stop, active, accept: Some(accept) })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the accepting thread, which sees `stop` (whether or not the socket's file is
        // still there).
        use std::os::fd::AsRawFd;
        // SAFETY: shutdown on a descriptor this value owns; it stays open until it drops.
        unsafe { libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR) };
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.socket);
        let started = Instant::now();
        while self.active.load(Ordering::Acquire) > 0 && started.elapsed() < DRAIN {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn answer_calls(mut conn: UnixStream, served: &Served, stop: &AtomicBool) -> io::Result<()> {
    conn.set_read_timeout(Some(IDLE_POLL))?;
    let stopping = || stop.load(Ordering::Acquire);
    // A turn lease this connection holds: kept until its next frame, or until it closes (its
    // process ended or was killed).
    let mut lease = None;
    while let Some(frame) = wire::read_frame(&mut conn, Some(&stopping))? {
        lease = None;
        if stopping() {
            // Closed unanswered and not run: the client sends it again to the next holder.
            break;
        }
        let reply: std::result::Result<Reply, WireError> = match serde_json::from_slice::<Call>(&frame) {
            Ok(Call::Lease { session, wait_ms }) => {
                lease = served.leases.take(&session, Duration::from_millis(wait_ms));
                Ok(Reply::Flag(lease.is_some()))
            }
            Ok(call) => served.answer(call).map_err(WireError::from),
            Err(e) => Err(WireError::InvalidInput(format!("a call this holder cannot read: {e}"))),
        };
        wire::write_frame(&mut conn, &reply)?;
    }
    drop(lease);
    Ok(())
}

/// A client's connections to the holder, reused call after call.
struct Client {
    socket: PathBuf,
    pool: Mutex<Vec<UnixStream>>,
    dim: usize,
    /// Bumped each time this process joins the data dir anew.
    epoch: u64,
}

impl Client {
    fn connect(dir: &Path, epoch: u64) -> io::Result<Result<Client>> {
        let socket = wire::socket_path(dir);
        let mut conn = UnixStream::connect(&socket)?;
        let reply = exchange(&mut conn, &Call::Hello { version: wire::VERSION })?;
        let dim = match reply {
            Ok(Reply::Hello { dimension, .. }) => dimension,
            Ok(other) => return Ok(Err(unexpected(&other))),
            Err(e) => return Ok(Err(e.into())),
        };
        Ok(Ok(Client { socket, pool: Mutex::new(vec![conn]), dim, epoch }))
    }

    /// One call over a pooled connection; an `Err` of I/O means the holder is gone.
    fn call(&self, call: &Call) -> io::Result<std::result::Result<Reply, WireError>> {
        let pooled = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut conn = match pooled {
            Some(c) => c,
            None => UnixStream::connect(&self.socket)?,
        };
        let reply = exchange(&mut conn, call)?;
        self.pool.lock().unwrap_or_else(|p| p.into_inner()).push(conn);
        Ok(reply)
    }
}

impl Client {
    /// [`Client::call`], its reply read by `back` (the kind of reply the call expects) and its
    /// error made ragctx's; an `Err` of I/O means the holder is gone.
    fn ask<T>(&self, call: &Call, back: impl Fn(Reply) -> Option<T>) -> io::Result<Result<T>> {
        Ok(match self.call(call)? {
            Ok(reply) => back(reply).ok_or_else(|| Error::inconsistent("the data dir's holder answered another call")),
            Err(e) => Err(e.into()),
        })
    }

    /// A session's turn lease from the holder, on a connection of its own that holds it until
    /// it closes; `None` when the wait ran out or the holder went away (the version check
    /// still keeps the turn race-free).
    fn lease(&self, session: &str, wait: Duration) -> Option<ragctx_core::TurnLease> {
        let mut conn = UnixStream::connect(&self.socket).ok()?;
        let call = Call::Lease { session: session.to_owned(), wait_ms: wait.as_millis() as u64 };
        match exchange(&mut conn, &call) {
            Ok(Ok(Reply::Flag(true))) => Some(Box::new(conn)),
            _ => None,
        }
    }
}

fn exchange(conn: &mut UnixStream, call: &Call) -> io::Result<std::result::Result<Reply, WireError>> {
    wire::write_frame(conn, call)?;
    let frame = wire::read_frame(conn, None)?.ok_or(io::ErrorKind::UnexpectedEof)?;
    serde_json::from_slice(&frame).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

fn unexpected(reply: &Reply) -> Error {
    Error::inconsistent(format!("the data dir's holder answered {reply:?}"))
}

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
            |s| crate::db::bind_model(&s.db, model_id, local),
            || Call::BindModel { model: model_id.into(), local },
            |r| matches!(r, Reply::Done).then_some(()),
        )
    }

    /// The embedding model whose vectors the store holds, when one was recorded.
    pub fn embedding_model(&self) -> Result<Option<String>> {
        self.run(|s| crate::db::embedding_model(&s.db), || Call::EmbeddingModel, pick!(Text))
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

/// One call on the database of `dir` without holding the data dir: run here on the database
/// opened for it alone when no process holds it, else sent to the holder (the embedding
/// cache and the model binding of a long ingest, which holds nothing while it embeds).
pub(crate) fn briefly<T>(
    dir: &Path,
    here: impl Fn(&redb::Database) -> Result<T>,
    call: impl Fn() -> Call,
    back: impl Fn(Reply) -> Option<T>,
) -> Result<T> {
    let started = Instant::now();
    loop {
        if let Some(db) = try_db(dir)? {
            return here(&db);
        }
        if let Ok(client) = Client::connect(dir, 0) {
            if let Ok(answer) = client?.ask(&call(), &back) {
                return answer;
            }
        }
        if started.elapsed() >= lock_wait() {
            return Err(busy(dir));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn busy(path: &Path) -> Error {
    Error::Unavailable {
        backend: "embedded store".into(),
        message: format!(
            "{} is held by another ragctx process that has not begun to serve it within {} s (it may still be loading or rebuilding its index, or be an older ragctx that does not share a data dir); set RAGCTX_LOCK_WAIT_SECS to wait longer",
            path.display(),
            lock_wait().as_secs()
        ),
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
