//! A killed process never leaves a half-written ingest or turn: SIGKILL at random moments
//! of an upsert and of turns, then check that the store holds all of a batch or none of it,
//! and that every committed turn has its trace.

mod common;

use common::{randoms, report, trials};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{mtrag, repo};

fn ragctx(data: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ragctx"));
    c.arg("--data-dir").arg(data).arg("--model-dir").arg(repo().join("models/all-MiniLM-L6-v2"));
    c
}

/// Starts `ragctx ARGS` on `data` with stderr in `log`, kills it after `ms` if it still
/// runs; returns whether it was killed and how many panics it reported.
fn run_and_kill(data: &Path, args: &[&str], ms: u64, log: &Path) -> (bool, usize) {
    let err = std::fs::File::create(log).unwrap();
    let mut child = ragctx(data).args(args).stdout(Stdio::null()).stderr(err).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(ms));
    let killed = child.try_wait().unwrap().is_none();
    if killed {
        child.kill().unwrap();
    }
    child.wait().unwrap();
    (killed, std::fs::read_to_string(log).unwrap_or_default().matches("panicked").count())
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn killed_ingests_and_turns_leave_whole_states() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = std::fs::read_to_string(mtrag().join("corpus_govt.jsonl")).unwrap();
    let lines: Vec<&str> = corpus.lines().take(150).collect();
    let v1 = dir.path().join("v1.jsonl");
    std::fs::write(&v1, lines.join("\n")).unwrap();
    // The same chunks with new titles: the upsert replaces all 150 or none.
    let v2 = dir.path().join("v2.jsonl");
    let renamed: Vec<String> = lines
        .iter()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            v["title"] = Value::from("RENAMED");
            v.to_string()
        })
        .collect();
    std::fs::write(&v2, renamed.join("\n")).unwrap();
    let base = dir.path().join("base");
    assert!(ragctx(&base).arg("ingest").arg(&v1).output().unwrap().status.success());

    let (mut killed, mut survived, mut old, mut new, mut half, mut panics) = (0, 0, 0, 0, 0, 0);
    let ingest_trials = trials(12);
    for (trial, ms) in randoms(ingest_trials, 900, 0x2545_F491_4F6C_DD1D).into_iter().enumerate() {
        let data = dir.path().join(format!("trial-{trial}"));
        copy_dir(&base, &data);
        let (k, p) = run_and_kill(&data, &["ingest", v2.to_str().unwrap()], ms, &dir.path().join("ingest.err"));
        killed += usize::from(k);
        panics += p;
        // Whatever happened, the store opens and holds one version of all 150 chunks.
        let out = ragctx(&data)
            .args(["ask", "--session", "probe", "--json", "--limit", "50", "--group-size", "3", "court fees appeal"])
            .output()
            .unwrap();
        assert!(out.status.success(), "trial {trial}: {}", String::from_utf8_lossy(&out.stderr));
        let t: Value = serde_json::from_slice(&out.stdout).unwrap();
        let titles: Vec<&str> = t["context"].as_array().unwrap().iter().map(|b| b["title"].as_str().unwrap()).collect();
        let renamed = titles.iter().filter(|t| **t == "RENAMED").count();
        let whole = renamed == 0 || renamed == titles.len();
        if !whole {
            eprintln!("trial {trial} (kill at {ms} ms): half-written ingest: {titles:?}");
            half += 1;
        }
        // The lexical index agrees with the store: "renamed" is only in the new titles.
        let out = ragctx(&data)
            .args(["ask", "--session", "lexical-probe", "--json", "--retrieval", "lexical", "--limit", "50", "renamed"])
            .output()
            .unwrap();
        assert!(out.status.success(), "trial {trial}: {}", String::from_utf8_lossy(&out.stderr));
        let lx: Value = serde_json::from_slice(&out.stdout).unwrap();
        let found = lx["trace"]["retrieval"]["lexical"].as_array().map_or(0, Vec::len);
        assert_eq!(found > 0, renamed > 0, "trial {trial}: lexical index and store disagree: {}", lx["trace"]);
        survived += usize::from(k && whole && p == 0);
        if renamed == 0 {
            old += 1
        } else {
            new += 1
        }
        let again = ragctx(&data).args(["ingest"]).arg(&v1).output().unwrap();
        assert!(String::from_utf8_lossy(&again.stdout).contains("store holds 150 chunks"), "trial {trial}");
    }
    report(
        "crash: ingest",
        serde_json::json!({"trials": ingest_trials, "kills": killed, "kills_survived": survived, "half_present": half, "old_whole": old, "new_whole": new, "panics": panics}),
    );
    assert!(killed > 0, "some ingests were killed mid-way");
    assert_eq!((half, panics), (0, 0), "every ingest is wholly present or wholly absent, and nothing panicked");

    // Turns: kill mid-turn; committed turns all have traces, numbered 1..n without gaps.
    let data = dir.path().join("turns");
    copy_dir(&base, &data);
    let (mut lost_or_half, mut killed, mut survived, mut panics) = (0, 0, 0, 0);
    let turn_trials = trials(10);
    for (i, ms) in randoms(turn_trials, 400, 0x2545_F491_4F6C_DD1D).into_iter().enumerate() {
        let question = format!("question {i} about appeal fees and forms");
        let (k, p) = run_and_kill(&data, &["ask", "--session", "k", &question], ms, &dir.path().join("ask.err"));
        killed += usize::from(k);
        panics += p;
        let state = ragctx(&data).args(["session", "show", "--session", "k"]).output().unwrap();
        let traces = ragctx(&data).args(["trace", "--session", "k", "--json"]).output().unwrap();
        if !state.status.success() {
            assert!(!traces.status.success(), "no session, no traces");
            survived += usize::from(k && p == 0);
            continue;
        }
        let s: Value = serde_json::from_slice(&state.stdout).unwrap();
        let t: Value = serde_json::from_slice(&traces.stdout).unwrap();
        let n = s["turn_count"].as_u64().unwrap();
        let turns: Vec<u64> = t.as_array().unwrap().iter().map(|x| x["turn"].as_u64().unwrap()).collect();
        let whole = turns == (1..=n).collect::<Vec<_>>() && s["turns"].as_array().unwrap().len() as u64 == n;
        lost_or_half += usize::from(!whole);
        survived += usize::from(k && whole && p == 0);
    }
    report(
        "crash: turns",
        serde_json::json!({"trials": turn_trials, "kills": killed, "kills_survived": survived, "half_written": lost_or_half, "panics": panics}),
    );
    assert_eq!((lost_or_half, panics), (0, 0), "every committed turn has its record and trace; nothing panicked");
}

/// A re-ingest that shortens documents (their last chunk gone), killed at random moments:
/// the store holds every document in its old form or every one in its new form, never new
/// chunks beside stale ones.
#[test]
fn killed_replacing_ingests_leave_old_or_new_documents_whole() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = std::fs::read_to_string(mtrag().join("corpus_govt.jsonl")).unwrap();
    let lines: Vec<Value> = corpus.lines().take(150).map(|l| serde_json::from_str(l).unwrap()).collect();
    let v1 = dir.path().join("v1.jsonl");
    std::fs::write(&v1, lines.iter().map(Value::to_string).collect::<Vec<_>>().join("\n")).unwrap();
    // Each document of two chunks or more loses its last chunk; what stays is retitled.
    let mut last: std::collections::HashMap<String, String> = Default::default();
    for l in &lines {
        last.insert(l["document_id"].as_str().unwrap().to_owned(), l["_id"].as_str().unwrap().to_owned());
    }
    let shorter: Vec<String> = lines
        .iter()
        .filter(|l| last[l["document_id"].as_str().unwrap()] != l["_id"].as_str().unwrap())
        .map(|l| {
            let mut v = l.clone();
            v["title"] = Value::from("SHORTENED");
            v.to_string()
        })
        .collect();
    let mut per_doc: std::collections::HashMap<&str, usize> = Default::default();
    for l in &lines {
        *per_doc.entry(l["document_id"].as_str().unwrap()).or_default() += 1;
    }
    let short_docs = per_doc.values().filter(|&&n| n >= 2).count();
    let v2 = dir.path().join("v2.jsonl");
    std::fs::write(&v2, shorter.join("\n")).unwrap();
    let base = dir.path().join("base");
    assert!(ragctx(&base).arg("ingest").arg(&v1).output().unwrap().status.success());

    let (mut killed, mut survived, mut old, mut new, mut half, mut panics) = (0, 0, 0, 0, 0, 0);
    // Kill moments spread over how long a whole replacing ingest takes here.
    let timing = dir.path().join("timing");
    copy_dir(&base, &timing);
    let t = std::time::Instant::now();
    assert!(ragctx(&timing).arg("ingest").arg(&v2).output().unwrap().status.success());
    let span = (t.elapsed().as_millis() as u64 * 6 / 5).max(50);
    let n = trials(8);
    for (trial, ms) in randoms(n, span, 0x5DEE_CE66_D1CE_4E5B).into_iter().enumerate() {
        let data = dir.path().join(format!("trial-{trial}"));
        copy_dir(&base, &data);
        let (k, p) = run_and_kill(&data, &["ingest", v2.to_str().unwrap()], ms, &dir.path().join("ingest.err"));
        killed += usize::from(k);
        panics += p;
        let out = ragctx(&data).args(["documents", "list", "--json"]).output().unwrap();
        assert!(out.status.success(), "trial {trial}: {}", String::from_utf8_lossy(&out.stderr));
        let docs: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        let chunks: usize = docs.iter().map(|d| d["chunks"].as_u64().unwrap() as usize).sum();
        let retitled = docs.iter().filter(|d| d["title"] == "SHORTENED").count();
        let whole_old = chunks == lines.len() && retitled == 0;
        // Documents of one chunk are not in the new file, so they are not replaced.
        let whole_new = chunks == lines.len() - short_docs && retitled == short_docs;
        if !(whole_old || whole_new) {
            eprintln!("trial {trial} (kill at {ms} ms): {chunks} chunks, {retitled} documents retitled");
            half += 1;
        }
        old += usize::from(whole_old);
        new += usize::from(whole_new);
        survived += usize::from(k && (whole_old || whole_new) && p == 0);
    }
    report(
        "crash: replacing ingest",
        serde_json::json!({"trials": n, "kills": killed, "kills_survived": survived, "half_present": half, "old_whole": old, "new_whole": new, "ingest_ms": span * 5 / 6, "panics": panics}),
    );
    assert!(killed > 0, "some ingests were killed mid-way");
    assert_eq!((half, panics), (0, 0), "every document is wholly old or wholly new, and nothing panicked");
}
