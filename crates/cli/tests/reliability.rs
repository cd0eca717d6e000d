//! Reliability suites with figures: `ragctx serve` killed under load, 64 concurrent turns
//! on one session (HTTP and CLI, embedded and Redis session stores), Redis and Milvus
//! stopped in the middle of a load run, and slow dependencies behind a delaying proxy.
//! Each suite prints a `RELIABILITY {json}` line; `scripts/reliability` runs them with more
//! trials (`RAGCTX_RELIABILITY_TRIALS`) and prints the table.

mod common;

use common::{http, http_post, milvus_lite, randoms, redis, report, stored_turns, trials, Env, Server, SlowProxy};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

/// The suites measure time-outs and kill moments: they run one at a time, not beside each
/// other on a two-core machine.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const QUESTIONS: [&str; 6] = [
    "How do I file a complaint with the state?",
    "What should I do if my garbage collection is missed?",
    "How do I know I am on a secured government website?",
    "What is New York doing about climate change?",
    "How can I appeal a decision?",
    "Where do I register to vote?",
];

fn turn_body(i: usize) -> String {
    // `client` memory: a turn's new blocks must avoid every chunk shown before it was sent.
    json!({"question": QUESTIONS[i % QUESTIONS.len()], "mode": "new", "memory": "client"}).to_string()
}

/// `ragctx serve` under four turn clients and one document client, killed (SIGKILL) inside a
/// write: every commit pauses 40 ms at a failpoint (`sessions.before-commit` for turns,
/// `chunks.before-commit` for documents) and the kill comes a random moment after the k-th
/// pause of the trial's target, k random. A kill counts as mid-write when the server's stderr
/// shows more pauses than resumes at that point; the test asserts a stated minimum of them,
/// then that every acknowledged turn and document is stored after a restart, the document
/// in flight whole or absent, turn numbers without gaps, no panic.
#[test]
fn serve_killed_under_load_loses_no_acknowledged_turn() {
    let _serial = serial();
    let env = Env::new();
    env.ok(&["ingest", env.govt(80).to_str().unwrap()]);
    let n = trials(3);
    let (mut landed, mut survived, mut acked_total, mut docs_total, mut lost, mut half, mut panics) =
        (0, 0, 0, 0, 0, 0, 0);
    let failpoints = [(ragctx_index::failpoint::VARIABLE, "sessions.before-commit=40,chunks.before-commit=40")];
    let ks = randoms(n, 30, 0x9E37_79B9);
    for (trial, offset) in randoms(n, 25, 0x2545_F491).into_iter().enumerate() {
        let target = if trial % 2 == 0 { "sessions.before-commit" } else { "chunks.before-commit" };
        let mut server = Server::start(&env, &[], &failpoints);
        let acked: Arc<Mutex<HashMap<String, Vec<u64>>>> = Arc::default();
        let documents: Arc<Mutex<Vec<String>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let mut clients: Vec<_> = (0..4)
            .map(|c| {
                let (addr, acked, stop) = (server.addr.clone(), acked.clone(), stop.clone());
                std::thread::spawn(move || {
                    let session = format!("t{trial}c{c}");
                    for i in 0.. {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let (status, body) = http_post(&addr, &format!("/v1/sessions/{session}/turns"), &turn_body(i));
                        if status != 200 {
                            break; // the server is gone
                        }
                        let turn = serde_json::from_str::<Value>(&body).unwrap()["turn"].as_u64().unwrap();
                        acked.lock().unwrap().entry(session.clone()).or_default().push(turn);
                    }
                })
            })
            .collect();
        let (addr, docs, halt) = (server.addr.clone(), documents.clone(), stop.clone());
        clients.push(std::thread::spawn(move || {
            for i in 0.. {
                if halt.load(Ordering::Relaxed) {
                    break;
                }
                let doc = format!("crash-t{trial}-d{i}");
                let chunks: Vec<Value> = (0..2)
                    .map(|c| json!({"_id": format!("{doc}#{c}"), "document_id": doc, "title": doc, "text": format!("Part {c} of {doc}: how to appeal a parking ticket.")}))
                    .collect();
                let (status, _) = http_post(&addr, "/v1/documents", &Value::from(chunks).to_string());
                if status != 200 {
                    break;
                }
                docs.lock().unwrap().push(doc);
            }
        }));
        // Kill a random moment into the (k+1)-th pause at the trial's target.
        let paused = format!("failpoint {target}: paused");
        let want = ks[trial] as usize + 1;
        let start = Instant::now();
        while server.stderr.lock().unwrap().matches(&paused).count() < want {
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "trial {trial}: {target} paused fewer than {want} times"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(offset));
        server.kill(); // SIGKILL, turns and a document in flight
        stop.store(true, Ordering::Relaxed);
        for c in clients {
            c.join().unwrap();
        }
        // The reader has the whole stderr once the pipe is closed; give it a moment.
        std::thread::sleep(Duration::from_millis(200));
        let log = server.stderr.lock().unwrap().clone();
        let mid_write = log.matches(&paused).count() > log.matches(&format!("failpoint {target}: resumed")).count();
        landed += usize::from(mid_write);
        panics += server.panics();
        let restarted = Server::start(&env, &[], &[]);
        let mut ok = mid_write;
        for (session, turns) in acked.lock().unwrap().iter() {
            acked_total += turns.len();
            let stored = stored_turns(&restarted.addr, session);
            let missing = turns.iter().filter(|t| !stored.contains(t)).count();
            lost += missing;
            if stored != (1..=stored.len() as u64).collect::<Vec<_>>() {
                half += 1;
            }
            ok &= missing == 0;
        }
        // Every acknowledged document is there with both chunks; the one in flight has 0 or 2.
        let listed: Value = serde_json::from_str(&common::http_get(&restarted.addr, "/v1/documents")).unwrap();
        let chunks_of: HashMap<&str, u64> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|d| (d["document_id"].as_str().unwrap(), d["chunks"].as_u64().unwrap()))
            .collect();
        let acked_docs = documents.lock().unwrap();
        docs_total += acked_docs.len();
        let missing = acked_docs.iter().filter(|d| chunks_of.get(d.as_str()) != Some(&2)).count();
        let torn = chunks_of.iter().filter(|(d, &c)| d.starts_with("crash-") && c != 2).count();
        lost += missing;
        half += torn;
        ok &= missing == 0 && torn == 0;
        panics += restarted.panics();
        survived += usize::from(ok);
    }
    report(
        "crash: serve under load",
        json!({"trials": n, "kills": n, "kills_mid_write": landed, "kills_survived": survived, "acked_turns": acked_total, "acked_documents": docs_total, "lost": lost, "half_written": half, "panics": panics}),
    );
    assert!(acked_total > 0 && docs_total > 0, "the load ran");
    // A 40 ms pause and a kill within 25 ms of its start: at least two kills in three land.
    assert!(landed * 3 >= n * 2, "{landed} of {n} kills landed inside a write");
    assert_eq!((lost, half, panics), (0, 0, 0));
}

/// One turn as the client saw it.
struct Seen {
    sent: Instant,
    done: Instant,
    turn: u64,
    shown: BTreeSet<String>,
}

fn shown_chunks(t: &Value) -> BTreeSet<String> {
    t["context"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| b["chunk_ids"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_owned()))
        .collect()
}

/// 64 turns fired at once on one session: all recorded with distinct numbers, and no turn's
/// exclusion set misses a chunk shown by a turn that had completed before it was sent.
fn check_concurrent(label: &str, seen: &[Seen], traces: &[Value], panics: usize) {
    let numbers: BTreeSet<u64> = seen.iter().map(|s| s.turn).collect();
    assert_eq!(numbers, (1..=64).collect(), "{label}: 64 distinct turn numbers");
    assert_eq!(traces.len(), 64, "{label}: 64 traces stored");
    let excluded: HashMap<u64, BTreeSet<String>> = traces
        .iter()
        .map(|t| {
            let chunks = t["exclusion"]["chunks"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_owned());
            (t["turn"].as_u64().unwrap(), chunks.collect())
        })
        .collect();
    let mut violations = 0;
    for b in seen {
        for a in seen.iter().filter(|a| a.done < b.sent) {
            if !a.shown.is_subset(&excluded[&b.turn]) {
                violations += 1;
            }
        }
    }
    let ordered = seen.iter().map(|b| seen.iter().filter(|a| a.done < b.sent).count()).sum::<usize>();
    // How often the race this suite guards against landed: pairs of turns of the session in
    // flight at once, and the plans lost to another turn's commit (re-plans).
    let overlapping = seen
        .iter()
        .enumerate()
        .map(|(i, a)| seen[i + 1..].iter().filter(|b| a.sent < b.done && b.sent < a.done).count())
        .sum::<usize>();
    let replans: u64 = traces.iter().map(|t| t["trace"]["replans"].as_u64().unwrap_or(0)).sum();
    report(
        &format!("concurrency: {label}"),
        json!({"trials": 1, "turns": 64, "recorded": traces.len(), "ordered_pairs": ordered, "overlapping_pairs": overlapping, "replans": replans, "exclusion_violations": violations, "turns_lost": 64 - traces.len(), "panics": panics}),
    );
    assert!(overlapping > 0, "{label}: some turns of the session were in flight at once (the race landed)");
    assert_eq!(panics, 0, "{label}: nothing panics");
    assert!(ordered > 0, "{label}: some turns were sent after others completed (the check is not vacuous)");
    assert_eq!(violations, 0, "{label}: a turn lost a completed predecessor's ids");
}

fn traces_of(env: &Env, flags: &[&str], session: &str) -> Vec<Value> {
    let out = env.ok(&[flags, &["trace", "--session", session, "--json"]].concat());
    serde_json::from_str::<Value>(&out).unwrap().as_array().unwrap().clone()
}

fn concurrent_http(env: &Env, flags: &[&str], label: &str) {
    let server = Server::start(env, flags, &[]);
    let session = format!("conc-http-{}", std::process::id());
    let barrier = Arc::new(Barrier::new(64));
    let handles: Vec<_> = (0..64)
        .map(|i: usize| {
            let (addr, barrier, session) = (server.addr.clone(), barrier.clone(), session.clone());
            std::thread::spawn(move || {
                barrier.wait();
                // The first eight go at once, so turns of the session are in flight together on
                // any machine; the rest are staggered, so later turns follow completed ones.
                std::thread::sleep(Duration::from_millis(15 * i.saturating_sub(7) as u64));
                let sent = Instant::now();
                let (status, body) = http_post(&addr, &format!("/v1/sessions/{session}/turns"), &turn_body(i));
                let done = Instant::now();
                assert_eq!(status, 200, "{body}");
                let t: Value = serde_json::from_str(&body).unwrap();
                Seen { sent, done, turn: t["turn"].as_u64().unwrap(), shown: shown_chunks(&t) }
            })
        })
        .collect();
    let seen: Vec<Seen> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let panics = server.panics();
    drop(server);
    check_concurrent(label, &seen, &traces_of(env, flags, &session), panics);
}

fn concurrent_cli(env: &Env, flags: &[&str], label: &str) {
    let session = format!("conc-cli-{}", std::process::id());
    let barrier = Arc::new(Barrier::new(64));
    let handles: Vec<_> = (0..64)
        .map(|i| {
            let barrier = barrier.clone();
            let mut cmd = env.cmd();
            cmd.args(flags).args([
                "ask",
                "--json",
                "--mode",
                "new",
                "--memory",
                "client",
                "--session",
                &session,
                QUESTIONS[i % 6],
            ]);
            std::thread::spawn(move || {
                barrier.wait();
                // As over HTTP: the first four at once, the rest staggered.
                std::thread::sleep(Duration::from_millis(120 * i.saturating_sub(3) as u64));
                let sent = Instant::now();
                let out = cmd.output().unwrap();
                let done = Instant::now();
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(out.status.success(), "{stderr}");
                let t: Value = serde_json::from_slice(&out.stdout).unwrap();
                let seen = Seen { sent, done, turn: t["turn"].as_u64().unwrap(), shown: shown_chunks(&t) };
                (seen, stderr.matches("panicked").count())
            })
        })
        .collect();
    let (seen, panics): (Vec<Seen>, Vec<usize>) = handles.into_iter().map(|h| h.join().unwrap()).unzip();
    check_concurrent(label, &seen, &traces_of(env, flags, &session), panics.iter().sum());
}

#[test]
fn sixty_four_concurrent_turns_on_one_session_all_land() {
    let _serial = serial();
    let env = Env::new();
    env.ok(&["ingest", env.govt(300).to_str().unwrap()]);
    let redis = redis(&env.dir.path().join("redis"));
    let url = redis.url("redis");
    concurrent_http(&env, &[], "64 HTTP turns, embedded sessions");
    concurrent_http(&env, &["--sessions", &url], "64 HTTP turns, Redis sessions");
    concurrent_cli(&env, &[], "64 CLI processes, embedded sessions");
    concurrent_cli(&env, &["--sessions", &url], "64 CLI processes, Redis sessions");
}

/// A turn of the fault run: status, error code, seconds taken, phase of the run when it was
/// sent, and for a failure the phase when it was answered and the message.
type Outcome = (u16, String, f64, &'static str, String);

/// Load on a server whose sessions live in Redis and vectors in Milvus Lite; each
/// dependency is stopped mid-run and restarted. Failed turns are 503 `unavailable` within
/// the configured deadline, nothing panics, every acknowledged turn is stored, and turns
/// succeed again after each restart.
#[test]
fn redis_then_milvus_stopped_mid_load() {
    let _serial = serial();
    let env = Env::new();
    let mut redis = redis(&env.dir.path().join("redis"));
    let mut milvus = milvus_lite(&env.dir.path().join("milvus"));
    let (redis_url, milvus_uri) = (redis.url("redis"), milvus.url("http"));
    let flags =
        ["--sessions", &redis_url, "--backend", "milvus", "--milvus-uri", &milvus_uri, "--collection", "faults"];
    env.ok(&[&flags[..], &["ingest", env.govt(60).to_str().unwrap()]].concat());
    let deadline = Duration::from_secs(8);
    let server = Server::start(&env, &flags, &[("RAGCTX_MILVUS_TIMEOUT_SECS", "2"), ("RAGCTX_TURN_TIMEOUT_SECS", "8")]);
    let log: Arc<Mutex<Vec<Outcome>>> = Arc::default();
    let phase: Arc<Mutex<&'static str>> = Arc::new(Mutex::new("up"));
    let acked: Arc<Mutex<Vec<(String, u64)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let (addr, log, phase, acked, stop) =
                (server.addr.clone(), log.clone(), phase.clone(), acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let session = format!("fault{c}");
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let p = *phase.lock().unwrap();
                    let start = Instant::now();
                    let (status, body) = http(
                        &addr,
                        "POST",
                        &format!("/v1/sessions/{session}/turns"),
                        &turn_body(i),
                        Duration::from_secs(60),
                    );
                    let took = start.elapsed().as_secs_f64();
                    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                    if status == 200 {
                        acked.lock().unwrap().push((session.clone(), v["turn"].as_u64().unwrap()));
                    }
                    let mut msg = String::new();
                    if status != 200 {
                        // The phase when the answer came, too: a request sent while a server was
                        // up can fail because it was killed meanwhile.
                        let end = *phase.lock().unwrap();
                        msg = format!("answered {end}: {}", v["message"].as_str().unwrap_or(&body));
                        eprintln!("fault run: client {c} request {i}, sent {p}, {msg}");
                    }
                    log.lock().unwrap().push((status, v["code"].as_str().unwrap_or("").to_owned(), took, p, msg));
                    if status != 200 {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            })
        })
        .collect();
    let set = |p: &'static str| *phase.lock().unwrap() = p;
    std::thread::sleep(Duration::from_secs(2));
    set("redis down");
    redis.kill();
    std::thread::sleep(Duration::from_secs(4));
    redis.restart();
    set("redis back");
    std::thread::sleep(Duration::from_secs(4));
    set("milvus down");
    milvus.kill();
    std::thread::sleep(Duration::from_secs(6));
    milvus.restart();
    set("milvus back");
    std::thread::sleep(Duration::from_secs(8));
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let log = log.lock().unwrap().clone();
    let failed: Vec<_> = log.iter().filter(|r| r.0 != 200).collect();
    // A 503 names the dead dependency ("unavailable"), or says the turn ran out of time
    // ("timeout", after the deadline plus the server's 2 s grace); nothing else.
    let bad: Vec<_> =
        failed.iter().filter(|r| r.0 != 503 || !["unavailable", "timeout"].contains(&r.1.as_str())).collect();
    let slow: Vec<_> = failed.iter().filter(|r| r.2 > deadline.as_secs_f64() + 2.0 + 2.0).collect();
    let ok_after = |p: &str| log.iter().any(|r| r.3 == p && r.0 == 200);
    let acked = acked.lock().unwrap().clone();
    let (mut lost, mut unacked) = (0, 0);
    for c in 0..4 {
        let session = format!("fault{c}");
        let stored = stored_turns(&server.addr, &session);
        lost += acked.iter().filter(|(s, t)| *s == session && !stored.contains(t)).count();
        unacked += stored.iter().filter(|t| !acked.contains(&(session.clone(), **t))).count();
    }
    let max_fail = failed.iter().map(|r| r.2).fold(0.0, f64::max);
    report(
        "faults: Redis, then Milvus, stopped mid-load",
        json!({"trials": 1, "turns": log.len(), "ok": log.len() - failed.len(), "failed": failed.len(), "failed_not_503": bad.len(), "failed_late": slow.len(), "slowest_failure_s": max_fail, "turns_lost": lost, "recorded_but_failed": unacked, "panics": server.panics(), "recovered_redis": ok_after("redis back"), "recovered_milvus": ok_after("milvus back")}),
    );
    assert!(failed.iter().any(|r| r.3 == "redis down"), "turns failed while Redis was down");
    assert!(failed.iter().any(|r| r.3 == "milvus down"), "turns failed while Milvus was down");
    assert!(bad.is_empty(), "every failure is 503 unavailable or timeout; these are not: {bad:?}");
    assert!(slow.is_empty(), "failures answered within the deadline; these were not: {slow:?}");
    assert!(ok_after("redis back") && ok_after("milvus back"), "turns succeed after each restart");
    assert_eq!((lost, server.panics()), (0, 0));
}

/// A dependency that answers slowly (a proxy holding every packet) hits the deadline and
/// gives 503, not a hang; once it is fast again the next turn works.
#[test]
fn slow_redis_and_slow_milvus_hit_the_deadline_not_a_hang() {
    let _serial = serial();
    let env = Env::new();
    let redis = redis(&env.dir.path().join("redis"));
    let milvus = milvus_lite(&env.dir.path().join("milvus"));
    let slow_redis = SlowProxy::start(redis.port);
    let slow_milvus = SlowProxy::start(milvus.port);
    let redis_url = format!("redis://127.0.0.1:{}", slow_redis.port);
    let milvus_uri = format!("http://127.0.0.1:{}", slow_milvus.port);
    let flags = ["--sessions", &redis_url, "--backend", "milvus", "--milvus-uri", &milvus_uri, "--collection", "slow"];
    env.ok(&[&flags[..], &["ingest", env.govt(30).to_str().unwrap()]].concat());
    let server =
        Server::start(&env, &flags, &[("RAGCTX_MILVUS_TIMEOUT_SECS", "2"), ("RAGCTX_TURN_TIMEOUT_SECS", "10")]);
    let ask = |i: usize| {
        let start = Instant::now();
        let (status, body) =
            http(&server.addr, "POST", "/v1/sessions/slow/turns", &turn_body(i), Duration::from_secs(60));
        (status, body, start.elapsed())
    };
    assert_eq!(ask(0).0, 200);
    let mut rows = Vec::new();
    for (name, proxy) in [("redis", &slow_redis), ("milvus", &slow_milvus)] {
        proxy.set_delay(15_000);
        let (status, body, took) = ask(1);
        proxy.set_delay(0);
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        assert_eq!(status, 503, "slow {name}: {body}");
        assert!(matches!(v["code"].as_str(), Some("unavailable" | "timeout")), "slow {name}: {body}");
        assert!(took < Duration::from_secs(14), "slow {name}: answered in {took:?}, not after the 15 s stall");
        std::thread::sleep(Duration::from_secs(16)); // let the stalled connections drain
        let (status, body, _) = ask(2);
        assert_eq!(status, 200, "after slow {name}: {body}");
        rows.push(json!({"dependency": name, "code": v["code"], "answered_s": took.as_secs_f64()}));
    }
    report("faults: slow Redis / slow Milvus", json!({"trials": 2, "cases": rows, "panics": server.panics()}));
    assert_eq!(server.panics(), 0);
}
