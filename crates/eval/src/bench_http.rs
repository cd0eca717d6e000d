//! `ragctx bench http`: a bounded load test of a running server on loopback. Sessions run
//! in parallel, turns within a session in order (as chat clients do); afterwards every
//! session's turns are read back: a turn answered but not remembered counts as lost.

use crate::data::read_questions;
use crate::error::{bail, Error, Result};
use crate::stats::percentile;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Runs `sessions` sessions of `turns` questions each (cycling through `questions`) against the
/// server at `addr`, which must be a loopback address, on `concurrency` threads; prints
/// throughput and latency, then deletes the sessions. Fails on any failed turn or turn not
/// remembered.
pub fn run(addr: &str, sessions: usize, turns: usize, concurrency: usize, questions: &Path, json: bool) -> Result<()> {
    let ip: std::net::SocketAddr =
        addr.parse().map_err(|_| Error::Input(format!("--addr {addr:?} is not HOST:PORT")))?;
    if !ip.ip().is_loopback() {
        bail!("the load test only targets servers on this machine (127.0.0.0/8 or ::1)");
    }
    let pool = read_questions(questions, usize::MAX)?;
    if pool.is_empty() {
        bail!("no questions in {}", questions.display());
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(60)))
        .http_status_as_error(false)
        .build()
        .into();
    let run_id = std::process::id();
    let next = AtomicUsize::new(0);
    let latencies = Mutex::new(Vec::new());
    let errors = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..concurrency.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= sessions {
                    return;
                }
                for t in 0..turns {
                    let q = &pool[(i * turns + t) % pool.len()];
                    let body = serde_json::json!({"question": q});
                    let t0 = Instant::now();
                    let res =
                        agent.post(&format!("http://{addr}/v1/sessions/load-{run_id}-{i}/turns")).send_json(&body);
                    match res {
                        Ok(r) if r.status() == 200 => {
                            latencies.lock().expect("lock").push(t0.elapsed().as_secs_f64() * 1e3)
                        }
                        _ => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });
    let elapsed = started.elapsed().as_secs_f64();
    // Read back: every answered turn must be remembered, numbered 1..n.
    let mut lost = 0usize;
    for i in 0..sessions {
        let url = format!("http://{addr}/v1/sessions/load-{run_id}-{i}/turns");
        let stored: usize = match agent.get(&url).call() {
            Ok(mut r) if r.status() == 200 => {
                r.body_mut().read_json::<Vec<serde_json::Value>>().map(|v| v.len()).unwrap_or(0)
            }
            _ => 0,
        };
        lost += turns.saturating_sub(stored);
        let _ = agent.delete(&format!("http://{addr}/v1/sessions/load-{run_id}-{i}")).call();
    }
    let mut lat = latencies.into_inner().expect("lock");
    lat.sort_by(f64::total_cmp);
    let ok = lat.len();
    let report = serde_json::json!({
        "sessions": sessions, "turns_per_session": turns, "concurrency": concurrency,
        "turns_ok": ok, "errors": errors.load(Ordering::Relaxed), "lost_turns": lost,
        "turns_per_s": ok as f64 / elapsed, "p50_ms": percentile(&lat, 0.5), "p99_ms": percentile(&lat, 0.99),
        "seconds": elapsed,
    });
    if json {
        println!("{report}");
    } else {
        println!(
            "{ok} turns in {elapsed:.1}s ({:.1} turns/s) from {concurrency} clients over {sessions} sessions: p50 {:.1} ms, p99 {:.1} ms, errors {}, lost turns {lost}",
            ok as f64 / elapsed,
            percentile(&lat, 0.5),
            percentile(&lat, 0.99),
            report["errors"]
        );
    }
    if lost > 0 || errors.load(Ordering::Relaxed) > 0 {
        return Err(Error::Failed(format!("{lost} turns lost, {} errors", report["errors"])));
    }
    Ok(())
}
