//! The holder's side of a shared data dir (design §10): the stores it serves ([`Served`]),
//! the listener that answers other processes' calls ([`Server`]), and the turn leases that
//! let one turn of a session plan at a time across them ([`Leases`]).

use crate::wire::{self, Call, Reply, WireError};
use crate::{EmbeddedSessionStore, EmbeddedVectorStore};
use ragctx_core::{EmbeddingCache, Error, Result, SessionStore, VectorStore};
use std::io;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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
    pub(crate) fn take(self: &Arc<Self>, session: &str, wait: Duration) -> Option<Lease> {
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
            Call::Sentences(ids) => Reply::Sentences(self.vectors.sentences(&ids)?),
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
                crate::database::bind_model(&self.db, &model, local)?;
                Reply::Done
            }
            Call::EmbeddingModel => Reply::Text(crate::database::embedding_model(&self.db)?),
            Call::StoredModel => Reply::Text(crate::database::stored_model(&self.db)?),
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
