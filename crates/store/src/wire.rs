//! How several processes share one data dir (design §10): the process that holds the
//! database serves the stores to the others over a unix socket in the data dir, one call per
//! request. A frame is a little-endian `u32` length and that many bytes of JSON: a [`Call`]
//! one way, a `Result<Reply, WireError>` back.
//!
//! Measured before choosing it (design §10): opening redb for each operation, as SQLite's
//! model would, costs ~3 ms a time on a 270 MB database (two syncs to take and let go of it)
//! and serialises every reader across processes; a call over the socket costs a round trip.

use ragctx_core::{
    Chunk, ChunkId, DocumentId, DocumentSummary, EmbeddedChunk, Error, LexicalRequest, Replaced, Retention,
    SearchOutcome, SearchRequest, SessionId, SessionState, Trace, TurnCommit,
};
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// The protocol's version: a client of another version is told so instead of misreading it.
pub(crate) const VERSION: u32 = 3;

/// The most a frame may hold: a bound on what a peer can make this process allocate.
const MAX_FRAME: usize = 1 << 30;

/// The socket's file in the data dir.
const SOCKET_FILE: &str = "ragctx.sock";

/// One call of a store's, as a client sends it.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Call {
    Hello {
        version: u32,
    },
    Upsert(Vec<EmbeddedChunk>),
    Replace {
        documents: Vec<DocumentId>,
        chunks: Vec<EmbeddedChunk>,
    },
    Documents,
    Search(SearchRequest),
    Lexical(LexicalRequest),
    PrepareLexical,
    Chunks(Vec<ChunkId>),
    Vectors(Vec<ChunkId>),
    Len,
    TenantLen(String),
    Load(SessionId),
    Commit {
        id: SessionId,
        commit: Box<TurnCommit>,
        retention: Retention,
    },
    Traces(SessionId),
    Reset(SessionId),
    Delete(SessionId),
    CacheGet {
        model: String,
        texts: Vec<String>,
    },
    CachePut {
        model: String,
        items: Vec<(String, Vec<f32>)>,
    },
    BindModel {
        model: String,
        local: bool,
    },
    EmbeddingModel,
    /// The model the store's vectors were made with: recorded, `""` for vectors without a
    /// record (a store from before records), none for a store without vectors.
    StoredModel,
    /// A session's turn lease, held by the holder until this connection's next frame or its
    /// end; answered `Flag(granted)` within `wait_ms`.
    Lease {
        session: String,
        wait_ms: u64,
    },
    /// The sentence index of chunks (DESIGN §11).
    Sentences(Vec<ChunkId>),
}

/// What the holder answers.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Reply {
    Hello { dimension: usize, pid: u32 },
    Count(usize),
    MaybeCount(Option<usize>),
    Replaced(Replaced),
    Documents(Vec<DocumentSummary>),
    Outcome(SearchOutcome),
    MaybeOutcome(Option<SearchOutcome>),
    Chunks(Vec<Chunk>),
    Vectors(Vec<Option<Vec<f32>>>),
    Session(Option<SessionState>),
    Number(u64),
    Traces(Vec<Trace>),
    Flag(bool),
    Text(Option<String>),
    Done,
    Sentences(Vec<Option<ragctx_core::Sentences>>),
}

/// An [`Error`] as it crosses the socket: the variant and its fields (a storage error's cause
/// as its text).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum WireError {
    InvalidInput(String),
    NotFound(String),
    WrongDimension { expected: usize, got: usize },
    ModelMissing { path: String },
    Model(String),
    ModelMismatch { stored: String, configured: String },
    Unavailable { backend: String, message: String },
    Storage(String),
    Conflict(String),
}

impl From<Error> for WireError {
    fn from(e: Error) -> Self {
        match e {
            Error::InvalidInput(m) => WireError::InvalidInput(m),
            Error::NotFound(m) => WireError::NotFound(m),
            Error::WrongDimension { expected, got } => WireError::WrongDimension { expected, got },
            Error::ModelMissing { path } => WireError::ModelMissing { path },
            Error::Model(m) => WireError::Model(m),
            Error::ModelMismatch { stored, configured } => WireError::ModelMismatch { stored, configured },
            Error::Unavailable { backend, message } => WireError::Unavailable { backend, message },
            e @ Error::Storage { .. } => {
                WireError::Storage(e.report().to_string().trim_start_matches("storage error: ").to_owned())
            }
            Error::Conflict(m) => WireError::Conflict(m),
        }
    }
}

impl From<WireError> for Error {
    fn from(e: WireError) -> Self {
        match e {
            WireError::InvalidInput(m) => Error::InvalidInput(m),
            WireError::NotFound(m) => Error::NotFound(m),
            WireError::WrongDimension { expected, got } => Error::WrongDimension { expected, got },
            WireError::ModelMissing { path } => Error::ModelMissing { path },
            WireError::Model(m) => Error::Model(m),
            WireError::ModelMismatch { stored, configured } => Error::ModelMismatch { stored, configured },
            WireError::Unavailable { backend, message } => Error::Unavailable { backend, message },
            WireError::Storage(message) => Error::Storage { message, source: None },
            WireError::Conflict(m) => Error::Conflict(m),
        }
    }
}

/// Where the holder of `dir` listens: `ragctx.sock` in it, or, when that path is too long for
/// a socket address (107 bytes), a name in the temporary directory made from the data dir's
/// full path.
pub(crate) fn socket_path(dir: &Path) -> PathBuf {
    let own = dir.join(SOCKET_FILE);
    if own.as_os_str().len() < 100 {
        return own;
    }
    use sha2::Digest;
    let full = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
    let hash = sha2::Sha256::digest(full.as_os_str().as_encoded_bytes());
    let name: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
    std::env::temp_dir().join(format!("ragctx-{name}.sock"))
}

pub(crate) fn write_frame(stream: &mut UnixStream, value: &impl Serialize) -> io::Result<()> {
    let body = serde_json::to_vec(value).map_err(io::Error::other)?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend((body.len() as u32).to_le_bytes());
    frame.extend(body);
    stream.write_all(&frame)
}

/// Reads one frame; `Ok(None)` at a clean end of the stream (or, with `idle` given, when it
/// says to stop before a frame began).
pub(crate) fn read_frame(stream: &mut UnixStream, idle: Option<&dyn Fn() -> bool>) -> io::Result<Option<Vec<u8>>> {
    let mut head = [0u8; 4];
    if !read_full(stream, &mut head, idle)? {
        return Ok(None);
    }
    let n = u32::from_le_bytes(head) as usize;
    if n > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("a frame of {n} bytes (at most {MAX_FRAME})")));
    }
    let mut body = vec![0u8; n];
    if !read_full(stream, &mut body, None)? {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(Some(body))
}

/// Fills `buf`; `false` when the stream ended (or `idle` said stop) before its first byte.
/// Read time-outs are waited through, asking `idle` while nothing has been read.
fn read_full(stream: &mut UnixStream, buf: &mut [u8], idle: Option<&dyn Fn() -> bool>) -> io::Result<bool> {
    let mut at = 0;
    while at < buf.len() {
        match stream.read(&mut buf[at..]) {
            Ok(0) if at == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => at += n,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                if at == 0 && idle.is_some_and(|stop| stop()) {
                    return Ok(false);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}
