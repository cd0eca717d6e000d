//! Several processes on one data dir (design §10), under load: 4 writers (`ragctx ingest` of
//! a new file each time) and 4 readers (`ragctx ask` turns of their own sessions) as separate
//! processes for a bounded time (`RAGCTX_SHARED_SECS`, default 20; `scripts/reliability`
//! runs 120). The first process holds the data dir and serves it; as holders end, others
//! take over. Afterwards every acknowledged ingest holds its one chunk, once; every reader's
//! session holds exactly its acknowledged turns; and each call's time beyond the same call
//! made alone is reported (its p99 and maximum), with the number over 1 s.

mod common;

use common::*;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn seconds() -> u64 {
    std::env::var("RAGCTX_SHARED_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(20)
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(((v.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(0.0)
}

#[test]
fn four_writers_and_four_readers_share_one_data_dir() {
    let env = Arc::new(Env::new());
    let corpus = env.govt(60);
    env.ok(&["ingest", corpus.to_str().unwrap()]);
    // Each call alone first: the baseline its time under load is measured against.
    let timed = |args: &[&str]| {
        let t = Instant::now();
        let out = env.run(args);
        (out, t.elapsed().as_secs_f64())
    };
    let alone_ask: Vec<f64> =
        (0..3).map(|i| timed(&["ask", "--session", &format!("alone-{i}"), "How do I appeal?"]).1).collect();
    let doc = env.write("alone.md", "# Alone\n\nA baseline file.\n");
    let alone_ingest: Vec<f64> = (0..3).map(|_| timed(&["ingest", doc.to_str().unwrap()]).1).collect();
    let base = |v: &[f64]| {
        let mut v = v.to_vec();
        percentile(&mut v, 0.5)
    };
    let (base_ask, base_ingest) = (base(&alone_ask), base(&alone_ingest));

    let until = Instant::now() + Duration::from_secs(seconds());
    let written = Arc::new(Mutex::new(Vec::<String>::new()));
    let asked = Arc::new(Mutex::new(Vec::<(String, u64)>::new()));
    let excess = Arc::new(Mutex::new(Vec::<f64>::new()));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut threads = Vec::new();
    for w in 0..4 {
        let (env, written, excess, failures) = (env.clone(), written.clone(), excess.clone(), failures.clone());
        threads.push(std::thread::spawn(move || {
            let mut n = 0;
            while Instant::now() < until {
                n += 1;
                let name = format!("w{w}-{n}.md");
                let file = env
                    .write(&name, &format!("# Writer {w} file {n}\n\nPermit number {w}{n} of the lantern harbour.\n"));
                let t = Instant::now();
                let out = env.run(&["ingest", file.to_str().unwrap()]);
                let took = t.elapsed().as_secs_f64();
                if out.status.success() {
                    written.lock().unwrap().push(name);
                    excess.lock().unwrap().push(took - base_ingest);
                } else {
                    failures.lock().unwrap().push(format!("ingest {name}: {}", String::from_utf8_lossy(&out.stderr)));
                }
            }
        }));
    }
    for r in 0..4 {
        let (env, asked, excess, failures) = (env.clone(), asked.clone(), excess.clone(), failures.clone());
        threads.push(std::thread::spawn(move || {
            let session = format!("reader-{r}");
            let mut acked = 0;
            while Instant::now() < until {
                let t = Instant::now();
                let out =
                    env.run(&["ask", "--session", &session, "--json", "What permits does the lantern harbour give?"]);
                let took = t.elapsed().as_secs_f64();
                if out.status.success() {
                    acked += 1;
                    excess.lock().unwrap().push(took - base_ask);
                } else {
                    failures.lock().unwrap().push(format!("ask {session}: {}", String::from_utf8_lossy(&out.stderr)));
                }
            }
            asked.lock().unwrap().push((session, acked));
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    let failures = failures.lock().unwrap().clone();
    assert!(failures.is_empty(), "{} calls failed, first: {}", failures.len(), failures[0]);
    // Nothing acknowledged lost, nothing twice.
    let docs: Vec<Value> = serde_json::from_str(&env.ok(&["documents", "list", "--json"])).unwrap();
    let written = written.lock().unwrap().clone();
    let mut lost = 0;
    let mut duplicated = 0;
    for name in &written {
        match docs.iter().filter(|d| d["document_id"] == name.as_str()).collect::<Vec<_>>().as_slice() {
            [] => lost += 1,
            [d] if d["chunks"] != 1 => duplicated += 1,
            [_] => {}
            _ => duplicated += 1,
        }
    }
    let mut turns_lost = 0;
    for (session, acked) in asked.lock().unwrap().iter() {
        let traces: Vec<Value> = serde_json::from_str(&env.ok(&["trace", "--session", session, "--json"])).unwrap();
        turns_lost += acked.abs_diff(traces.len() as u64);
    }
    let mut excess = excess.lock().unwrap().clone();
    let over_1s = excess.iter().filter(|&&e| e > 1.0).count();
    let figures = json!({
        "trials": excess.len(),
        "seconds": seconds(),
        "ingests": written.len(),
        "turns": asked.lock().unwrap().iter().map(|(_, n)| n).sum::<u64>(),
        "lost": lost + turns_lost,
        "duplicated": duplicated,
        "alone_ask_s": base_ask,
        "alone_ingest_s": base_ingest,
        "extra_p50_s": percentile(&mut excess, 0.5),
        "extra_p99_s": percentile(&mut excess, 0.99),
        "extra_max_s": percentile(&mut excess, 1.0),
        "extra_over_1s": over_1s,
    });
    report("shared data dir: 4 writers, 4 readers", figures.clone());
    assert!(written.len() >= 4 && figures["turns"].as_u64().unwrap() >= 4, "{figures}");
    assert_eq!((lost, duplicated, turns_lost), (0, 0, 0), "{figures}");
}
