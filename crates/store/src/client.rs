//! A process's calls to the holder of a data dir (design §10): its connections
//! ([`Client`]), and one call on the database whoever holds it ([`briefly`]).

use crate::database::{lock_wait, try_db};
use crate::wire::{self, Call, Reply, WireError};
use ragctx_core::{Error, Result};
use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A client's connections to the holder, reused call after call.
pub(crate) struct Client {
    socket: PathBuf,
    pool: Mutex<Vec<UnixStream>>,
    pub(crate) dim: usize,
    /// Bumped each time this process joins the data dir anew.
    pub(crate) epoch: u64,
}

impl Client {
    pub(crate) fn connect(dir: &Path, epoch: u64) -> io::Result<Result<Client>> {
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
    pub(crate) fn ask<T>(&self, call: &Call, back: impl Fn(Reply) -> Option<T>) -> io::Result<Result<T>> {
        Ok(match self.call(call)? {
            Ok(reply) => back(reply).ok_or_else(|| Error::inconsistent("the data dir's holder answered another call")),
            Err(e) => Err(e.into()),
        })
    }

    /// A session's turn lease from the holder, on a connection of its own that holds it until
    /// it closes; `None` when the wait ran out or the holder went away (the version check
    /// still keeps the turn race-free).
    pub(crate) fn lease(&self, session: &str, wait: Duration) -> Option<ragctx_core::TurnLease> {
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

pub(crate) fn busy(path: &Path) -> Error {
    Error::Unavailable {
        backend: "embedded store".into(),
        message: format!(
            "{} is held by another ragctx process that has not begun to serve it within {} s (it may still be loading or rebuilding its index, or be an older ragctx that does not share a data dir); set RAGCTX_LOCK_WAIT_SECS to wait longer",
            path.display(),
            lock_wait().as_secs()
        ),
    }
}
