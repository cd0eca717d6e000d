//! How ingest reads a document file so that no file can take it down (DESIGN §5, issue 63).
//!
//! Every document is read on a guarded thread ([`read_document_guarded`]: its own stack,
//! panics kept to the file, a time limit). A front that can start one (the CLI, Python)
//! also reads in a **worker process** ([`set_worker`]): the worker caps its own memory
//! (`RLIMIT_AS`), so a file whose parse would exhaust memory or overflow a stack ends the
//! worker, not the ingest; the file is named with the limit it passed and a new worker reads
//! the next one. Measured (bench/README.md, "Files from the wild"): a worker costs one
//! process start per ingest and a JSON round trip per file.

use ragctx_core::{Error, Result};
use ragctx_ingest::{read_document_guarded, DocumentFormat, InputError, ReadDocument};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

/// What one file may take to read, and how it is read.
#[derive(Clone, Debug)]
pub struct ReadLimits {
    /// The time one file may take (`ingest_file_secs`, default 120 s).
    pub time: Duration,
    /// The memory a worker may use while it reads one file (`ingest_file_mb`, default 2,048
    /// MiB); without a worker, only the parsers' own caps bound it.
    pub memory_mb: u64,
}

impl Default for ReadLimits {
    fn default() -> Self {
        ReadLimits { time: Duration::from_secs(120), memory_mb: 2048 }
    }
}

/// The command that starts a worker (the program and its arguments), set once by a front.
static WORKER: OnceLock<Vec<String>> = OnceLock::new();

/// Makes this process read documents in workers started with `command` (e.g. the `ragctx`
/// binary and `read-worker`); set once, by the front, before any ingest.
pub fn set_worker(command: Vec<String>) {
    let _ = WORKER.set(command);
}

/// What a reader process says first, before any file is asked of it.
const GREETING: &str = "ragctx read-worker 1";

/// A request to a worker: one file.
#[derive(Serialize, Deserialize)]
struct Request {
    path: String,
    document_id: String,
    format: String,
}

/// A worker's answer: the document, or the file's error.
#[derive(Serialize, Deserialize)]
enum Reply {
    Read(ReadDocument),
    Failed(InputError),
}

/// Reads documents one after another, in a worker when the front set one.
pub(crate) struct Reader {
    limits: ReadLimits,
    /// The command that starts a worker; `None`: read on a guarded thread here.
    command: Option<Vec<String>>,
    worker: Option<Worker>,
}

impl Reader {
    /// A reader with the worker the front set, if any (`RAGCTX_READ_IN_PROCESS=1`: none, on
    /// the guarded thread only, where a process may not start another).
    pub(crate) fn new(limits: ReadLimits) -> Reader {
        let in_process = std::env::var("RAGCTX_READ_IN_PROCESS").is_ok_and(|v| v == "1");
        Reader { limits, command: WORKER.get().filter(|_| !in_process).cloned(), worker: None }
    }

    /// Reads one document file, `shown` naming it in errors.
    pub(crate) fn read(
        &mut self,
        path: &Path,
        document_id: &str,
        format: DocumentFormat,
        shown: &str,
    ) -> Result<ReadDocument> {
        let named = |mut e: InputError| {
            e.file = shown.to_owned();
            Error::from(e)
        };
        let Some(command) = &self.command else {
            let bytes = std::fs::read(path).map_err(|e| Error::InvalidInput(format!("cannot read {shown}: {e}")))?;
            return read_document_guarded(document_id, bytes, format, self.limits.time).map_err(named);
        };
        let worker = match self.worker.take() {
            Some(w) => w,
            None => match Worker::start(command, self.limits.memory_mb) {
                Ok(w) => w,
                // A reader that cannot start or does not greet (an embedding host whose
                // `sys.executable` is not Python): read here, on the guarded thread.
                Err(e) => {
                    tracing::warn!(error = %e, "documents are read in this process: no reader process");
                    self.command = None;
                    return self.read(path, document_id, format, shown);
                }
            },
        };
        let request = Request {
            path: path.to_string_lossy().into_owned(),
            document_id: document_id.to_owned(),
            format: format.name().to_owned(),
        };
        match worker.ask(&request, self.limits.time) {
            Ok((worker, Reply::Read(d))) => {
                self.worker = Some(worker);
                Ok(d)
            }
            Ok((worker, Reply::Failed(e))) => {
                self.worker = Some(worker);
                Err(named(e))
            }
            Err(why) => Err(Error::InvalidInput(format!("{shown}: {why}"))),
        }
    }
}

/// A worker process and its answers, line by line.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    memory_mb: u64,
}

impl Worker {
    fn start(command: &[String], memory_mb: u64) -> Result<Worker> {
        let unavailable = |e: std::io::Error| Error::Unavailable {
            backend: "the reader process".into(),
            message: format!("cannot start {} ({e})", command[0]),
        };
        let mut child = Command::new(&command[0])
            .args(&command[1..])
            .env("RAGCTX_READ_WORKER_MB", memory_mb.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(unavailable)?;
        let stdin = child.stdin.take().expect("piped stdin");
        let lines = forward_lines(child.stdout.take().expect("piped stdout"));
        let stderr = forward_lines(child.stderr.take().expect("piped stderr"));
        let mut worker = Worker { child, stdin, lines, stderr, memory_mb };
        // The reader says it is one before it is given a file.
        match worker.lines.recv_timeout(Duration::from_secs(30)) {
            Ok(hello) if hello == GREETING => Ok(worker),
            other => {
                let _ = worker.child.kill();
                let said = match other {
                    Ok(line) => format!("it said {:?}", line.chars().take(80).collect::<String>()),
                    Err(_) => "it said nothing".into(),
                };
                Err(Error::Unavailable {
                    backend: "the reader process".into(),
                    message: format!("{} did not start as one ({said})", command[0]),
                })
            }
        }
    }

    /// One file's answer within `time` (and a grace for the answer's way back); a worker that
    /// died or took too long is ended, and why is said.
    fn ask(mut self, request: &Request, time: Duration) -> std::result::Result<(Worker, Reply), String> {
        let within = time + Duration::from_secs(5);
        let line = serde_json::to_string(request).expect("a request serializes");
        if writeln!(self.stdin, "{line}").and_then(|()| self.stdin.flush()).is_err() {
            return Err(self.ended());
        }
        match self.lines.recv_timeout(within) {
            Ok(answer) => {
                // What it said while it read is wanted only to say why it ended: dropped once
                // it answers, so that a talkative reader holds no memory here.
                self.stderr.try_iter().for_each(drop);
                match serde_json::from_str(&answer) {
                    Ok(reply) => Ok((self, reply)),
                    Err(e) => Err(format!("its reader answered what cannot be read ({e})")),
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                Err(format!(
                    "passed a limit: reading it took longer than {} s, the most a file may take",
                    time.as_secs()
                ))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(self.ended()),
        }
    }

    /// Why the worker ended while reading a file.
    fn ended(mut self) -> String {
        let status = self.child.wait().ok();
        // What it said last: its stderr closes as it ends (its reading thread then stops).
        let mut said: Vec<String> = Vec::new();
        while let Ok(line) = self.stderr.recv_timeout(Duration::from_secs(2)) {
            said.push(line);
        }
        let memory = said.iter().any(|l| l.contains("memory allocation") || l.contains("out of memory"));
        let stack = said.iter().any(|l| l.contains("overflowed its stack"));
        let how = status.map(|s| s.to_string()).unwrap_or_else(|| "ended".into());
        if memory {
            format!("passed a limit: reading it needed more than {} MiB, the most a file may use", self.memory_mb)
        } else if stack {
            "passed a limit: reading it nested deeper than a reader's stack".into()
        } else {
            format!("its reader process ended reading it ({how}): ragctx cannot read it")
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A pipe's lines, on a channel (a thread reads them until the pipe closes).
fn forward_lines(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// A worker's life (`ragctx read-worker`): caps its own memory, then reads the files asked
/// for on stdin, one answer line each on stdout, until stdin closes.
pub fn serve_worker() -> Result<()> {
    let mb: u64 = std::env::var("RAGCTX_READ_WORKER_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(2048);
    cap_memory(mb << 20);
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{GREETING}")
        .and_then(|()| out.flush())
        .map_err(|e| Error::storage_in("read-worker: greeting", e))?;
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| Error::storage_in("read-worker: reading a request", e))?;
        let request: Request =
            serde_json::from_str(&line).map_err(|e| Error::InvalidInput(format!("read-worker: {e}")))?;
        let reply = match read_one(&request) {
            Ok(d) => Reply::Read(d),
            Err(e) => Reply::Failed(e),
        };
        let json = serde_json::to_string(&reply).map_err(|e| Error::storage_in("read-worker: an answer", e))?;
        writeln!(out, "{json}")
            .and_then(|()| out.flush())
            .map_err(|e| Error::storage_in("read-worker: answering", e))?;
    }
    Ok(())
}

fn read_one(request: &Request) -> std::result::Result<ReadDocument, InputError> {
    let whole = |m: String| InputError { file: request.document_id.clone(), line: None, message: m };
    let format = DocumentFormat::from_name(&request.format).ok_or_else(|| whole("unknown format".into()))?;
    let bytes = std::fs::read(&request.path).map_err(|e| whole(format!("cannot read it: {e}")))?;
    // The time limit is the caller's: it ends this process past it, thread and all.
    read_document_guarded(&request.document_id, bytes, format, Duration::from_secs(u64::from(u32::MAX)))
}

/// Caps this process's address space (the worker's memory budget).
fn cap_memory(bytes: u64) {
    #[cfg(unix)]
    {
        let limit = libc::rlimit { rlim_cur: bytes as libc::rlim_t, rlim_max: bytes as libc::rlim_t };
        // SAFETY: setrlimit reads the struct passed by pointer and changes only this process.
        unsafe {
            libc::setrlimit(libc::RLIMIT_AS, &limit);
        }
    }
    #[cfg(not(unix))]
    let _ = bytes;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(script: &str, secs: u64) -> Reader {
        let limits = ReadLimits { time: Duration::from_secs(secs), memory_mb: 512 };
        Reader { limits, command: Some(vec!["sh".into(), "-c".into(), script.into()]), worker: None }
    }

    fn read(r: &mut Reader) -> String {
        let path = Path::new("/dev/null");
        match r.read(path, "a.pdf", DocumentFormat::Pdf, "dir/a.pdf") {
            Ok(d) => format!("read {} chunks", d.chunks.len()),
            Err(e) => e.to_string(),
        }
    }

    /// A worker that dies while reading (a stack overflow, memory past its cap, a crash in a
    /// dependency) or takes too long costs its file only: the file is named with why, and the
    /// next file is read by a new worker.
    #[test]
    fn a_worker_that_dies_or_hangs_costs_its_file_only() {
        let mut r = reader("echo 'ragctx read-worker 1'; read line; echo 'memory allocation of 4294967296 bytes failed' >&2; kill -ABRT $$", 30);
        let first = read(&mut r);
        assert_eq!(
            first,
            "invalid input: dir/a.pdf: passed a limit: reading it needed more than 512 MiB, the most a file may use"
        );
        let mut r = reader("echo 'ragctx read-worker 1'; read line; echo \"thread 'ragctx-read' has overflowed its stack\" >&2; kill -ABRT $$", 30);
        assert_eq!(
            read(&mut r),
            "invalid input: dir/a.pdf: passed a limit: reading it nested deeper than a reader's stack"
        );
        let mut r = reader("echo 'ragctx read-worker 1'; read line; kill -SEGV $$", 30);
        let crashed = read(&mut r);
        assert!(crashed.contains("its reader process ended reading it (signal: 11"), "{crashed}");
        // The next file starts a new worker, which answers.
        r.command = Some(vec![
            "sh".into(),
            "-c".into(),
            r#"echo 'ragctx read-worker 1'; while read line; do echo '{"Read":{"chunks":[],"pages":2,"left_out":[]}}'; done"#.into(),
        ]);
        assert_eq!(read(&mut r), "read 0 chunks");
        assert_eq!(read(&mut r), "read 0 chunks", "the same worker reads the next file");
        let started = std::time::Instant::now();
        let mut r = reader("echo 'ragctx read-worker 1'; read line; sleep 30", 1);
        assert_eq!(
            read(&mut r),
            "invalid input: dir/a.pdf: passed a limit: reading it took longer than 1 s, the most a file may take"
        );
        assert!(started.elapsed() < Duration::from_secs(20), "the hung worker was ended");
        // A program that is no reader (no greeting): the file is read here instead.
        let mut r = reader("echo 'Python 3.11'; sleep 30", 30);
        assert_eq!(read(&mut r), "invalid input: dir/a.pdf: not a PDF file (no %PDF- header)");
        assert!(r.command.is_none(), "the reader process is given up for this ingest");
    }
}
