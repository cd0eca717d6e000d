//! A killed process never leaves a half-written ingest or turn. Each kill is placed inside
//! the write it targets: the process runs with `RAGCTX_FAILPOINTS` naming a point inside
//! the write (`ragctx_index::failpoint`), which prints `failpoint NAME: paused`, sleeps, then
//! prints `… resumed`; the test kills it a random moment after the first line. A kill is
//! counted as landed mid-write when the process had paused and not resumed — read from its
//! stderr after it died — and each suite asserts a stated minimum of landed kills before
//! it checks the store: it opens, every write is wholly there or wholly absent, and every
//! committed turn has its trace.

mod common;

use common::{randoms, report, trials};
use serde_json::Value;
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{mtrag, repo};

fn ragctx(data: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ragctx"));
    c.arg("--data-dir").arg(data).arg("--model-dir").arg(repo().join("models/all-MiniLM-L6-v2"));
    c.env_remove("RAGCTX_CONFIG").env_remove(ragctx_index::failpoint::VARIABLE);
    c
}

/// How long a failpoint holds the process: the kill comes within its first two thirds.
const PAUSE_MS: u64 = 300;

/// What one targeted kill did.
#[derive(Debug, Default, Clone, Copy)]
struct Kill {
    /// The process reached the failpoint and was killed while paused there: inside the write.
    /// (One that never reached it finished or failed first.)
    landed: bool,
    panics: usize,
}

/// Runs `ragctx ARGS` on `data` with failpoint `point` armed; once it pauses there, kills it
/// `offset_ms` later (SIGKILL). Its stderr goes to `log`.
fn kill_at(data: &Path, args: &[&str], point: &str, offset_ms: u64, log: &Path) -> Kill {
    assert!(offset_ms < PAUSE_MS * 2 / 3, "the kill comes well inside the pause");
    let mut child = ragctx(data)
        .args(args)
        .env(ragctx_index::failpoint::VARIABLE, format!("{point}={PAUSE_MS}"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let paused = format!("failpoint {point}: paused");
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if line == paused {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    // Disconnected (the process ended without pausing) or the point never came: not reached.
    let reached = rx.recv_timeout(Duration::from_secs(120)).is_ok();
    if reached {
        std::thread::sleep(Duration::from_millis(offset_ms));
    }
    let _ = child.kill();
    child.wait().unwrap();
    let text = reader.join().unwrap();
    std::fs::write(log, &text).unwrap();
    let count = |what: &str| text.matches(&format!("failpoint {point}: {what}")).count();
    Kill { landed: reached && count("paused") > count("resumed"), panics: text.matches("panicked").count() }
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

    // Four points inside an ingest, in turn: before its transaction commits (the store must
    // stay old), after the commit while the vector index file is written, while the recorded
    // changes are pruned, and while the lexical index file is written (the store is new; the
    // next open must bring the stale index forward or rebuild it).
    const POINTS: [&str; 4] =
        ["chunks.before-commit", "index.before-rename", "changes.before-prune", "lexical.before-rename"];
    let (mut landed, mut survived, mut old, mut new, mut half, mut wrong_side, mut panics) = (0, 0, 0, 0, 0, 0, 0);
    let ingest_trials = trials(12);
    for (trial, ms) in randoms(ingest_trials, 200, 0x2545_F491_4F6C_DD1D).into_iter().enumerate() {
        let data = dir.path().join(format!("trial-{trial}"));
        copy_dir(&base, &data);
        let point = POINTS[trial % POINTS.len()];
        let k = kill_at(&data, &["ingest", v2.to_str().unwrap()], point, ms, &dir.path().join("ingest.err"));
        landed += usize::from(k.landed);
        panics += k.panics;
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
            eprintln!("trial {trial} (killed {ms} ms into {point}): half-written ingest: {titles:?}");
            half += 1;
        }
        // Killed before the commit: old; after it: new. Anything else is a lost or a torn write.
        let right_side = !k.landed || (renamed == 0) == (point == "chunks.before-commit");
        if !right_side {
            eprintln!("trial {trial} (killed {ms} ms into {point}): {renamed} of {} chunks new", titles.len());
            wrong_side += 1;
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
        survived += usize::from(k.landed && whole && right_side && k.panics == 0);
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
        serde_json::json!({"trials": ingest_trials, "kills_mid_write": landed, "kills_survived": survived, "half_present": half, "wrong_side_of_commit": wrong_side, "old_whole": old, "new_whole": new, "panics": panics}),
    );
    // The pause is 300 ms and the kill comes within 200 ms of it: only a stalled machine
    // misses, so at least three kills in four must land inside the write.
    assert!(landed * 4 >= ingest_trials * 3, "{landed} of {ingest_trials} kills landed inside the write");
    assert_eq!(
        (half, wrong_side, panics),
        (0, 0, 0),
        "every ingest is wholly present or wholly absent, on the side of its commit the kill was, and nothing panicked"
    );

    // Turns: killed inside the session store's write transaction, before it commits. The
    // session keeps the turns it had (the killed one is not half there), numbered 1..n
    // without gaps, each with its record and trace; between kills a turn is let through.
    let data = dir.path().join("turns");
    copy_dir(&base, &data);
    let (mut lost_or_half, mut landed, mut survived, mut committed_anyway, mut panics) = (0, 0, 0, 0, 0);
    let turn_trials = trials(10);
    let session = |data: &Path| -> (u64, Vec<u64>, usize) {
        let state = ragctx(data).args(["session", "show", "--session", "k"]).output().unwrap();
        if !state.status.success() {
            return (0, Vec::new(), 0);
        }
        let traces = ragctx(data).args(["trace", "--session", "k", "--json"]).output().unwrap();
        let s: Value = serde_json::from_slice(&state.stdout).unwrap();
        // A trace that cannot be read (missing, torn) is a turn without its trace.
        let t: Value = serde_json::from_slice(&traces.stdout).unwrap_or_default();
        let turns: Vec<u64> =
            t.as_array().map_or(Vec::new(), |a| a.iter().filter_map(|x| x["turn"].as_u64()).collect());
        (s["turn_count"].as_u64().unwrap(), turns, s["turns"].as_array().unwrap().len())
    };
    for (i, ms) in randoms(turn_trials, 200, 0x2545_F491_4F6C_DD1D).into_iter().enumerate() {
        let before = session(&data).0;
        let question = format!("question {i} about appeal fees and forms");
        let k = kill_at(
            &data,
            &["ask", "--session", "k", &question],
            "sessions.before-commit",
            ms,
            &dir.path().join("ask.err"),
        );
        landed += usize::from(k.landed);
        panics += k.panics;
        let (n, turns, records) = session(&data);
        let whole = turns == (1..=n).collect::<Vec<_>>() && records as u64 == n;
        lost_or_half += usize::from(!whole);
        // Killed before its commit, the turn is not there.
        committed_anyway += usize::from(k.landed && n != before);
        survived += usize::from(k.landed && whole && n == before && k.panics == 0);
        // One turn goes through, so later kills land on a session with turns.
        let out =
            ragctx(&data).args(["ask", "--session", "k", &format!("follow-up {i} on the fees")]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let (n, turns, _) = session(&data);
    report(
        "crash: turns",
        serde_json::json!({"trials": turn_trials, "kills_mid_write": landed, "kills_survived": survived, "half_written": lost_or_half, "committed_after_kill": committed_anyway, "turns_at_end": n, "panics": panics}),
    );
    assert!(landed * 4 >= turn_trials * 3, "{landed} of {turn_trials} kills landed inside the turn's write");
    assert_eq!(turns, (1..=n).collect::<Vec<_>>(), "turn numbers 1..n at the end");
    assert_eq!(
        (lost_or_half, committed_anyway, panics),
        (0, 0, 0),
        "every committed turn has its record and trace; a killed turn is not stored; nothing panicked"
    );
}

/// A re-ingest that shortens documents (their last chunk gone), killed inside its write
/// transaction on even trials and at a random moment of its run on odd ones (which also
/// reaches moments no failpoint names, such as the commit itself): the store holds every
/// document in its old form or every one in its new form, never new chunks beside stale ones.
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
    let mut landed = 0;
    for (trial, ms) in randoms(n, span, 0x5DEE_CE66_D1CE_4E5B).into_iter().enumerate() {
        let data = dir.path().join(format!("trial-{trial}"));
        copy_dir(&base, &data);
        let log = dir.path().join("ingest.err");
        let args = ["ingest", v2.to_str().unwrap()];
        let (k, p) = if trial % 2 == 0 {
            let k = kill_at(&data, &args, "chunks.before-commit", ms % 200, &log);
            landed += usize::from(k.landed);
            (k.landed, k.panics)
        } else {
            run_and_kill(&data, &args, ms, &log)
        };
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
        serde_json::json!({"trials": n, "kills": killed, "kills_mid_write": landed, "kills_survived": survived, "half_present": half, "old_whole": old, "new_whole": new, "ingest_ms": span * 5 / 6, "panics": panics}),
    );
    let targeted = n.div_ceil(2);
    assert!(landed * 4 >= targeted * 3, "{landed} of {targeted} targeted kills landed inside the write");
    assert_eq!((half, panics), (0, 0), "every document is wholly old or wholly new, and nothing panicked");
}
