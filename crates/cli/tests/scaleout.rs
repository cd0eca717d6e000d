//! Several stateless `ragctx serve` processes over one Milvus and one Redis (or a Redis
//! Cluster): the turns of each session are spread round-robin over the processes, several
//! clients ask in the same session at once, a process is killed and restarted mid-run, and
//! documents are replaced and deleted while turns run. Checked on every turn: nothing
//! acknowledged is lost, no session is shown a chunk twice (`client` memory), the markers a
//! response gives are the ones stored, and no turn returns a chunk removed before it began.
//!
//! CI runs a reduced load (2 processes, 200 turns); `scripts/reliability` sets
//! `RAGCTX_SCALEOUT=full` (4 processes, 64 clients, 2,048 turns).

mod common;

use common::{context_chunks, http, milvus_lite, redis, repo, report, Server};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// One at a time: each test starts several servers and loads both cores.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Clone, Copy, Debug)]
struct Load {
    servers: usize,
    clients: usize,
    sessions: usize,
    turns: usize,
}

fn load() -> Load {
    match std::env::var("RAGCTX_SCALEOUT").as_deref() {
        Ok("full") => Load { servers: 4, clients: 64, sessions: 32, turns: 2048 },
        _ => Load { servers: 2, clients: 16, sessions: 8, turns: 200 },
    }
}

const WORDS: [&str; 48] = [
    "river", "copper", "lantern", "orchid", "glacier", "harbor", "meadow", "quartz", "saddle", "timber", "velvet",
    "walnut", "amber", "basalt", "canyon", "dune", "ember", "fjord", "granite", "heron", "iris", "juniper", "kelp",
    "lichen", "marble", "nectar", "oasis", "pepper", "quill", "raven", "sierra", "tundra", "umber", "violet", "willow",
    "yarrow", "zephyr", "acorn", "bramble", "cedar", "delta", "estuary", "falcon", "gorge", "hollow", "inlet",
    "jasper", "knoll",
];

fn word(x: u64) -> &'static str {
    WORDS[(x % WORDS.len() as u64) as usize]
}

/// Our own synthetic corpus: `docs` documents of `per_doc` chunks, each chunk a sentence of
/// words drawn deterministically (no evaluation data).
fn corpus(dir: &Path, docs: usize, per_doc: usize) -> PathBuf {
    let mut lines = Vec::new();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for d in 0..docs {
        for c in 0..per_doc {
            let mut words = Vec::new();
            for _ in 0..18 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                words.push(word(x));
            }
            let text = format!("Note {d}.{c}: the {} and the {}.", words[..9].join(" "), words[9..].join(" "));
            lines.push(json!({"_id": format!("doc{d}#{c}"), "document_id": format!("doc{d}"), "title": format!("Field note {d}"), "text": text, "ordinal": c}).to_string());
        }
    }
    let p = dir.join("corpus.jsonl");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

fn ragctx(backend: &[String]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ragctx"));
    c.arg("--model-dir").arg(repo().join("models/all-MiniLM-L6-v2")).args(backend);
    c.env_remove("RAGCTX_CONFIG");
    c
}

/// A serve process with no usable data dir: `/dev/null/…` cannot be created, so any attempt
/// to open local state fails — the processes must run on Milvus and Redis alone.
fn serve(backend: &[String]) -> Server {
    let mut c = ragctx(backend);
    c.args(["--data-dir", "/dev/null/ragctx-data", "serve", "--addr", "127.0.0.1:0", "--memory", "client"]);
    Server::spawn(c)
}

/// What one acknowledged turn showed: marker → (document, chunk ids), pointers included.
#[derive(Clone, Debug, Default, PartialEq)]
struct Shown {
    blocks: BTreeMap<u64, (String, Vec<String>)>,
    pointers: BTreeMap<u64, String>,
}

fn shown(t: &Value) -> Shown {
    let mut s = Shown::default();
    for b in t["context"].as_array().into_iter().flatten() {
        let ids = b["chunk_ids"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_owned()).collect();
        s.blocks.insert(b["marker"].as_u64().unwrap(), (b["document_id"].as_str().unwrap().to_owned(), ids));
    }
    for p in t["pointers"].as_array().into_iter().flatten() {
        s.pointers.insert(p["marker"].as_u64().unwrap(), p["document_id"].as_str().unwrap().to_owned());
    }
    s
}

#[derive(Default)]
struct Tally {
    acknowledged: Vec<(usize, u64, Shown, Instant)>,
    conflicts_409: usize,
    unavailable: usize,
    other_errors: Vec<String>,
}

/// Runs `load.turns` turns from `load.clients` clients over the servers in `addrs` (turn k
/// of client c goes to server (c + c / sessions + k) mod n: the clients of one session,
/// c and c + sessions, are at different servers at every step, so their turns race across
/// processes and only the session store's version check keeps them in order); `during`
/// runs beside them once a third of the turns are done.
fn drive(load: Load, prefix: &str, addrs: &Arc<RwLock<Vec<String>>>, during: impl FnOnce() + Send) -> Tally {
    let tally = Mutex::new(Tally::default());
    let done = AtomicUsize::new(0);
    let per_client = load.turns.div_ceil(load.clients);
    std::thread::scope(|scope| {
        for c in 0..load.clients {
            let (tally, done, addrs) = (&tally, &done, addrs.clone());
            scope.spawn(move || {
                let session = c % load.sessions;
                for k in 0..per_client {
                    let addr = {
                        let a = addrs.read().unwrap();
                        a[(c + c / load.sessions + k) % a.len()].clone()
                    };
                    let q = format!(
                        "what about the {} {} near the {}",
                        word(c as u64 * 7 + k as u64),
                        word(k as u64 * 13 + 5),
                        word(c as u64 + k as u64 * 3)
                    );
                    let body = json!({"question": q, "mode": "new", "limit": 4, "group_size": 1}).to_string();
                    let started = Instant::now();
                    let (status, out) = http(
                        &addr,
                        "POST",
                        &format!("/v1/sessions/{prefix}{session}/turns"),
                        &body,
                        Duration::from_secs(60),
                    );
                    let mut t = tally.lock().unwrap();
                    match status {
                        200 => {
                            let v: Value = serde_json::from_str(&out).unwrap();
                            t.acknowledged.push((session, v["turn"].as_u64().unwrap(), shown(&v), started));
                        }
                        409 => t.conflicts_409 += 1,
                        0 | 503 => t.unavailable += 1,
                        s => t.other_errors.push(format!("{s}: {out}")),
                    }
                    drop(t);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let total = per_client * load.clients;
        let done = &done;
        scope.spawn(move || {
            while done.load(Ordering::Relaxed) < total / 3 {
                std::thread::sleep(Duration::from_millis(20));
            }
            during();
        });
    });
    tally.into_inner().unwrap()
}

#[derive(Debug, Default)]
struct Checked {
    stored_turns: usize,
    lost: usize,
    duplicated_chunks: usize,
    marker_disagreements: usize,
    /// Sessions whose stored turn numbers are not 1..n.
    gaps: usize,
    replans: u64,
}

/// Reads every session's stored traces and checks them against the acknowledged turns.
fn check(addr: &str, load: Load, prefix: &str, tally: &Tally) -> Checked {
    let mut out = Checked::default();
    let mut stored: HashMap<(usize, u64), Shown> = HashMap::new();
    for s in 0..load.sessions {
        let (status, body) = http(addr, "GET", &format!("/v1/sessions/{prefix}{s}/turns"), "", Duration::from_secs(30));
        assert_eq!(status, 200, "traces of {prefix}{s}: {body}");
        let traces: Vec<Value> = serde_json::from_str(&body).unwrap();
        let mut seen_chunks: HashSet<String> = HashSet::new();
        let mut doc_marker: HashMap<String, u64> = HashMap::new();
        let mut marker_doc: HashMap<u64, String> = HashMap::new();
        for t in &traces {
            out.replans += t["trace"]["replans"].as_u64().unwrap_or(0);
            let sh = shown(t);
            for (m, (doc, ids)) in &sh.blocks {
                for id in ids {
                    if !seen_chunks.insert(id.clone()) {
                        out.duplicated_chunks += 1;
                    }
                }
                let agree = *doc_marker.entry(doc.clone()).or_insert(*m) == *m
                    && *marker_doc.entry(*m).or_insert_with(|| doc.clone()) == *doc;
                out.marker_disagreements += usize::from(!agree);
            }
            for (m, doc) in &sh.pointers {
                out.marker_disagreements += usize::from(doc_marker.get(doc).is_some_and(|x| x != m));
            }
            stored.insert((s, t["turn"].as_u64().unwrap()), sh);
        }
        let mut numbers: Vec<u64> = traces.iter().map(|t| t["turn"].as_u64().unwrap()).collect();
        numbers.sort_unstable();
        out.gaps += usize::from(numbers != (1..=numbers.len() as u64).collect::<Vec<_>>());
        out.stored_turns += traces.len();
    }
    for (session, turn, sh, _) in &tally.acknowledged {
        match stored.get(&(*session, *turn)) {
            None => out.lost += 1,
            Some(st) if st != sh => out.marker_disagreements += 1,
            Some(_) => {}
        }
    }
    out
}

/// The figures every load run reports, with the run's own in `extra`.
fn figures(load: Load, tally: &Tally, c: &Checked, extra: Value) -> Value {
    let mut v = json!({"servers": load.servers, "clients": load.clients, "sessions": load.sessions,
        "requests": load.turns, "acknowledged": tally.acknowledged.len(), "stored": c.stored_turns,
        "turns_lost": c.lost, "duplicated_chunks": c.duplicated_chunks, "marker_disagreements": c.marker_disagreements,
        "replans": c.replans, "conflicts_409": tally.conflicts_409});
    v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    v
}

fn milvus_backend(port: u16, sessions: &str) -> Vec<String> {
    ["--backend", "milvus", "--milvus-uri", &format!("http://127.0.0.1:{port}"), "--collection", "scaleout"]
        .iter()
        .map(|s| s.to_string())
        .chain(["--sessions".to_string(), sessions.to_string()])
        .collect()
}

/// `url` with the turn lease off: a session's turns in different processes are then ordered
/// by the commit script's version check alone, which these suites race on purpose.
fn raced(url: &str) -> String {
    format!("{url}{}turn_lease=off", if url.contains('?') { '&' } else { '?' })
}

fn ingest(backend: &[String], dir: &Path, file: &Path) {
    let out = ragctx(backend).arg("--data-dir").arg(dir.join("ingest-data")).arg("ingest").arg(file).output().unwrap();
    assert!(out.status.success(), "ingest: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn several_servers_over_milvus_and_redis_share_sessions_race_free() {
    let _serial = serial();
    let load = load();
    let dir = tempfile::tempdir().unwrap();
    let milvus = milvus_lite(&dir.path().join("milvus"));
    let redis = redis(&dir.path().join("redis"));
    let backend = milvus_backend(milvus.port, &raced(&redis.url("redis")));
    ingest(&backend, dir.path(), &corpus(dir.path(), 150, 4));

    let servers: Vec<Server> = (0..load.servers).map(|_| serve(&backend)).collect();
    let addrs = Arc::new(RwLock::new(servers.iter().map(|s| s.addr.clone()).collect::<Vec<_>>()));
    let servers = Mutex::new(servers);
    // A CLI command beside the servers: no data-dir lock stands in its way.
    let cli_ok = AtomicUsize::new(0);
    let cli_err = Mutex::new(String::new());
    let started = Instant::now();
    let tally = drive(load, "so-", &addrs, || {
        // One process killed and restarted mid-run (a new port: the balancer's list changes).
        let mut s = servers.lock().unwrap();
        let victim = s.len() - 1;
        s[victim].kill();
        std::thread::sleep(Duration::from_millis(500));
        let fresh = serve(&backend);
        addrs.write().unwrap()[victim] = fresh.addr.clone();
        s[victim] = fresh;
        // What this checks is that no lock stands in the CLI's way, not Milvus's latency: on a
        // slow machine both cores are busy with the load and a server starting up, so its calls
        // get a wider deadline than the 5 s default; a failure keeps what the CLI said.
        let out = ragctx(&backend)
            .env("RAGCTX_MILVUS_TIMEOUT_SECS", "30")
            .args(["--data-dir", "/dev/null/ragctx-data", "documents", "list", "--json"])
            .output()
            .unwrap();
        if out.status.success() {
            cli_ok.fetch_add(1, Ordering::Relaxed);
        } else {
            *cli_err.lock().unwrap() = format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr));
        }
    });
    let secs = started.elapsed().as_secs_f64();
    let servers = servers.into_inner().unwrap();
    let first = servers[0].addr.clone();
    let c = check(&first, load, "so-", &tally);
    let panics: usize = servers.iter().map(Server::panics).sum();
    report(
        "scale-out: Milvus Lite + Redis",
        figures(
            load,
            &tally,
            &c,
            json!({"failed_while_down": tally.unavailable, "killed_restarted": 1,
                   "cli_beside": cli_ok.load(Ordering::Relaxed), "seconds": (secs * 10.0).round() / 10.0, "panics": panics}),
        ),
    );
    assert!(
        tally.other_errors.is_empty(),
        "unexpected errors: {:?}",
        &tally.other_errors[..tally.other_errors.len().min(5)]
    );
    assert_eq!((c.lost, c.duplicated_chunks, c.marker_disagreements, c.gaps, panics), (0, 0, 0, 0, 0), "{c:?}");
    // The clients of a session raced across processes: the version check fired (a run in
    // which it never did proves nothing about it).
    assert!(c.replans > 0, "no turn was re-planned: the clients of a session never raced ({c:?})");
    assert_eq!(
        cli_ok.load(Ordering::Relaxed),
        1,
        "`ragctx documents list` ran beside the servers: {}",
        cli_err.into_inner().unwrap()
    );
    assert!(tally.acknowledged.len() * 10 >= load.turns * 8, "most turns answered: {}", tally.acknowledged.len());
    assert!(c.stored_turns >= tally.acknowledged.len());
}

/// Documents replaced by shorter versions and deleted while turns run on two servers: no
/// turn that began after a change finished returns a chunk it removed.
#[test]
fn replaced_and_deleted_documents_never_come_back_under_concurrent_turns() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let milvus = milvus_lite(&dir.path().join("milvus"));
    let redis = redis(&dir.path().join("redis"));
    // Several processes must see a delete at once: Milvus's `session` consistency is per
    // connection, `strong` is across processes.
    let mut backend = milvus_backend(milvus.port, &redis.url("redis"));
    backend.extend(["--milvus-consistency".to_string(), "strong".to_string()]);
    ingest(&backend, dir.path(), &corpus(dir.path(), 60, 4));
    let servers: Vec<Server> = (0..2).map(|_| serve(&backend)).collect();
    let addrs: Vec<String> = servers.iter().map(|s| s.addr.clone()).collect();

    // (chunk id, removed at) for every chunk a change removed.
    let removed: Mutex<Vec<(String, Instant)>> = Mutex::new(Vec::new());
    let stop = std::sync::atomic::AtomicBool::new(false);
    let turns = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for c in 0..6 {
            let (addrs, turns, stop) = (&addrs, &turns, &stop);
            scope.spawn(move || {
                let mut k = 0;
                while !stop.load(Ordering::Relaxed) {
                    k += 1;
                    let q = format!("the {} by the {}", word(c * 11 + k), word(k * 5 + 1));
                    // Fresh sessions: nothing excluded, every turn searches the whole corpus.
                    let body = json!({"question": q, "mode": "new", "limit": 8}).to_string();
                    let started = Instant::now();
                    let (status, out) = http(
                        &addrs[(c + k) as usize % 2],
                        "POST",
                        &format!("/v1/sessions/rd-{c}-{k}/turns"),
                        &body,
                        Duration::from_secs(60),
                    );
                    assert_eq!(status, 200, "{out}");
                    let v: Value = serde_json::from_str(&out).unwrap();
                    turns.lock().unwrap().push((started, context_chunks(&v)));
                }
            });
        }
        // Shorten documents 0..20 to one chunk (through either server), delete 20..40.
        for d in 0..40usize {
            let addr = &addrs[d % 2];
            let (status, body) = if d < 20 {
                let chunk = json!({"_id": format!("doc{d}#0"), "document_id": format!("doc{d}"), "title": format!("Field note {d}"), "text": format!("Note {d}.0 rewritten: the river and the harbor."), "ordinal": 0});
                http(addr, "POST", "/v1/documents", &json!([chunk]).to_string(), Duration::from_secs(60))
            } else {
                http(addr, "DELETE", &format!("/v1/documents/doc{d}"), "", Duration::from_secs(60))
            };
            assert!(status == 200 || status == 204, "change of doc{d}: {status} {body}");
            let at = Instant::now();
            let gone = if d < 20 { 1..4 } else { 0..4 };
            removed.lock().unwrap().extend(gone.map(|c| (format!("doc{d}#{c}"), at)));
            std::thread::sleep(Duration::from_millis(30));
        }
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Relaxed);
    });
    let removed: HashMap<String, Instant> = removed.into_inner().unwrap().into_iter().collect();
    let turns = turns.into_inner().unwrap();
    let mut stale = 0;
    for (started, ids) in &turns {
        stale += ids.iter().filter(|id| removed.get(*id).is_some_and(|at| at < started)).count();
    }
    let listed =
        ragctx(&backend).args(["--data-dir", "/dev/null/ragctx-data", "documents", "list", "--json"]).output().unwrap();
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let docs: Vec<Value> = serde_json::from_slice(&listed.stdout).unwrap();
    let chunks: usize = docs.iter().map(|d| d["chunks"].as_u64().unwrap() as usize).sum();
    let panics: usize = servers.iter().map(Server::panics).sum();
    report(
        "scale-out: replace and delete under turns",
        json!({"servers": 2, "turns": turns.len(), "changes": 40, "chunks_removed": removed.len(), "stale_chunks_returned": stale,
               "documents_after": docs.len(), "chunks_after": chunks, "panics": panics}),
    );
    assert_eq!(stale, 0, "a turn returned a chunk removed before it began");
    assert_eq!((docs.len(), chunks), (40, 20 + 20 * 4), "20 shortened to one chunk, 20 deleted, 20 untouched");
    assert!(turns.len() >= 20, "turns ran during the changes: {}", turns.len());
    assert_eq!(panics, 0);
}

/// The cluster of `scripts/redis-cluster-up`, or RAGCTX_TEST_REDIS_CLUSTER.
fn cluster_url() -> String {
    std::env::var("RAGCTX_TEST_REDIS_CLUSTER")
        .unwrap_or_else(|_| "redis+cluster://127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103".into())
}

fn cli(port: &str, args: &[&str]) -> String {
    let out = Command::new("redis-cli").args(["-h", "127.0.0.1", "-p", port]).args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `(port, pid)` of a master of the local cluster.
fn a_master() -> (String, u32) {
    let seed = cluster_url().trim_start_matches("redis+cluster://").split(',').next().unwrap().to_owned();
    let port = seed.rsplit(':').next().unwrap().to_owned();
    let nodes = cli(&port, &["cluster", "nodes"]);
    let master = nodes
        .lines()
        .find(|l| l.contains("master") && !l.contains("fail") && l.split_whitespace().count() > 8)
        .expect("a master with slots");
    let port =
        master.split_whitespace().nth(1).unwrap().split('@').next().unwrap().rsplit(':').next().unwrap().to_owned();
    let pid = cli(&port, &["info", "server"])
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|p| p.trim().parse().ok())
        .expect("the master's pid");
    (port, pid)
}

fn cluster_ok(port: &str) -> bool {
    cli(port, &["cluster", "info"]).contains("cluster_state:ok")
}

/// The same load against the Redis Cluster with one master killed (SIGKILL) mid-run: its
/// replica takes over; turns of sessions in its slots fail with a clean 503 meanwhile, and
/// nothing acknowledged is lost or shown twice. The sessions URL asks each commit to wait
/// for a replica (`?min_replicas=1`), which is what makes "acknowledged" mean "survives the
/// master" (`crates/redis/tests/replication.rs` shows the loss without it): until the killed
/// node is back as the new master's replica, turns of its slots are 503s, not acknowledged
/// turns a second fail-over could lose. The node is restarted as soon as the fail-over is
/// done, and the run goes on.
#[test]
fn a_redis_cluster_master_killed_mid_run_fails_over_cleanly() {
    let _serial = serial();
    let mut load = load();
    load.servers = load.servers.min(2);
    let dir = tempfile::tempdir().unwrap();
    let milvus = milvus_lite(&dir.path().join("milvus"));
    let url = format!("{}?min_replicas=1&replica_timeout_ms=1000", cluster_url());
    let backend = milvus_backend(milvus.port, &url);
    ingest(&backend, dir.path(), &corpus(dir.path(), 150, 4));
    // Sessions of earlier runs live on in the shared cluster: this run's are its own.
    let prefix = format!("rc{}-", std::process::id());
    let servers: Vec<Server> = (0..load.servers).map(|_| serve(&backend)).collect();
    let addrs = Arc::new(RwLock::new(servers.iter().map(|s| s.addr.clone()).collect::<Vec<_>>()));
    let killed: Mutex<Option<(String, f64, bool, f64)>> = Mutex::new(None);
    let tally = drive(load, &prefix, &addrs, || {
        let (port, pid) = a_master();
        let t = Instant::now();
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        // Wait for the replica to take over (node timeout 2 s).
        let seeds = cluster_url();
        let other = seeds
            .trim_start_matches("redis+cluster://")
            .split(',')
            .filter_map(|n| n.rsplit(':').next())
            .find(|p| *p != port)
            .expect("a second seed node")
            .to_owned();
        // Taken over: the others mark the killed node failed and a replica holds its slots.
        // (Restarted before that, the node would come back empty — no persistence — as the
        // master of its slots again.)
        let taken_over = || {
            let nodes = cli(&other, &["cluster", "nodes"]);
            let gone = nodes.lines().find(|l| l.contains(&format!(":{port}@")));
            gone.is_some_and(|l| l.contains(",fail ") && l.split_whitespace().count() <= 8) && cluster_ok(&other)
        };
        while !taken_over() {
            assert!(t.elapsed() < Duration::from_secs(60), "no replica took over from the master on {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        let failover = t.elapsed().as_secs_f64();
        // The killed node comes back as the new master's replica.
        let restarted = Command::new(repo().join("scripts/redis-cluster-node")).arg(&port).status().unwrap().success();
        while !cluster_ok(&port) && t.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(200));
        }
        *killed.lock().unwrap() = Some((port, failover, restarted, t.elapsed().as_secs_f64()));
    });
    let (port, failover_s, restarted, rejoined_s) = killed.into_inner().unwrap().expect("a master was killed");
    let c = check(&addrs.read().unwrap()[0], load, &prefix, &tally);
    let panics: usize = servers.iter().map(Server::panics).sum();
    report(
        "scale-out: Redis Cluster, a master killed",
        figures(
            load,
            &tally,
            &c,
            json!({"failed_503": tally.unavailable, "failover_seconds": (failover_s * 10.0).round() / 10.0, "replica_back_seconds": (rejoined_s * 10.0).round() / 10.0, "min_replicas": 1, "panics": panics}),
        ),
    );
    assert!(restarted && cluster_ok(&port), "the killed node rejoined and the cluster is ok");
    assert!(
        tally.other_errors.is_empty(),
        "only 503s while failing over: {:?}",
        &tally.other_errors[..tally.other_errors.len().min(5)]
    );
    assert_eq!((c.lost, c.duplicated_chunks, c.marker_disagreements, c.gaps, panics), (0, 0, 0, 0, 0), "{c:?}");
}

/// 64 turns of four sessions at once through four processes — sixteen turns of each session
/// in flight together, spread over all four (`drive`'s routing) — with the sessions in one
/// Redis, then in the Redis Cluster, the session lease off (`turn_lease=off`): the turn locks
/// of one process cannot order them, only the commit script's version check can. Every acknowledged turn stored, numbers gapless,
/// no chunk shown twice, markers one-to-one, nothing but a documented 409 (a turn that lost
/// the race eight times) as an error, and the version check fired (re-plans counted).
#[test]
fn sixty_four_turns_of_four_sessions_race_through_four_processes() {
    let _serial = serial();
    let load = Load { servers: 4, clients: 64, sessions: 4, turns: 64 };
    let dir = tempfile::tempdir().unwrap();
    let milvus = milvus_lite(&dir.path().join("milvus"));
    let redis = redis(&dir.path().join("redis"));
    for (label, sessions) in [("redis", redis.url("redis")), ("redis cluster", cluster_url())] {
        let backend = milvus_backend(milvus.port, &raced(&sessions));
        if label == "redis" {
            ingest(&backend, dir.path(), &corpus(dir.path(), 150, 4));
        }
        let servers: Vec<Server> = (0..load.servers).map(|_| serve(&backend)).collect();
        let addrs = Arc::new(RwLock::new(servers.iter().map(|s| s.addr.clone()).collect::<Vec<_>>()));
        let prefix = format!("race{}-{}-", std::process::id(), label.len());
        let tally = drive(load, &prefix, &addrs, || {});
        let c = check(&servers[0].addr, load, &prefix, &tally);
        let panics: usize = servers.iter().map(Server::panics).sum();
        report(
            &format!("concurrency: 64 turns, 4 sessions, 4 processes, {label}"),
            figures(load, &tally, &c, json!({"panics": panics})),
        );
        assert!(tally.other_errors.is_empty(), "{label}: {:?}", &tally.other_errors[..tally.other_errors.len().min(5)]);
        assert_eq!(tally.unavailable, 0, "{label}: nothing was down");
        assert_eq!(
            (c.lost, c.duplicated_chunks, c.marker_disagreements, c.gaps, panics),
            (0, 0, 0, 0, 0),
            "{label}: {c:?}"
        );
        assert_eq!(c.stored_turns, tally.acknowledged.len(), "{label}: every acknowledged turn, and only those");
        assert_eq!(tally.acknowledged.len() + tally.conflicts_409, 64, "{label}");
        assert!(c.replans > 0, "{label}: the version check never fired: the turns did not race ({c:?})");
    }
}
