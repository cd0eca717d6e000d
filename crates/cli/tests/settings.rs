//! Every turn setting is reachable under one name from a flag (`--limit`), an environment
//! variable (`RAGCTX_LIMIT`), a config file (`limit = 5`) and an HTTP body (`"limit": 5`),
//! and a bad value gets the same words from each (issue 28). The list of settings is
//! `ragctx_core::TurnOverrides::KEYS`: a setting added there without a row here fails.

mod common;

use common::*;
use ragctx_core::{TurnOverrides, TurnSettings};
use serde_json::{json, Value};
use std::process::Output;

/// One setting: a value that changes the turn (with the settings it needs to act), where
/// the turn shows it, and a value every front must refuse.
struct Case {
    key: &'static str,
    good: Value,
    needs: &'static [(&'static str, &'static str)],
    bad: Value,
}

fn cases() -> Vec<Case> {
    let c = |key, good, needs, bad| Case { key, good, needs, bad };
    vec![
        c("mode", json!("follow_up"), &[], json!("sideways")),
        c("memory", json!("client"), &[], json!("model")),
        c("conversation_query", json!("off"), &[], json!("sometimes")),
        c("strategy", json!("full"), &[], json!("fast")),
        c("retrieval", json!("hybrid"), &[], json!("psychic")),
        c("fusion", json!("rrf"), &[("retrieval", "hybrid")], json!("average")),
        c("granularity", json!("document"), &[("memory", "client")], json!("page")),
        c("consumption", json!("cited"), &[], json!("read")),
        c("window", json!(2), &[], json!(10_001)),
        c("limit", json!(5), &[], json!(0)),
        c("group_size", json!(2), &[], json!(0)),
        c("group_margin", json!(0.25), &[], json!(3)),
        c("min_documents", json!(1), &[], json!(1_001)),
        c("relevance_floor", json!(0.25), &[], json!(1.5)),
        c("engaged_prior", json!(0.125), &[], json!(2)),
        c("near_duplicate", json!(0.5), &[], json!(1.5)),
        c("diversity", json!(0.25), &[], json!(1.5)),
        // Nothing listens at the rerank endpoint (CONDENSER): the turn keeps the search's order.
        c("rerank", json!("remote"), &[], json!("local")),
        c("compress", json!("sentences"), &[], json!("zip")),
        c("freed_slots", json!("keep"), &[("memory", "client")], json!("spill")),
        c("budget", json!(900), &[], json!(1)),
        c("session_ttl", json!(1), &[], json!(400_000_000)),
        c("filter", json!({"topic": "plants"}), &[], json!({"year": {"gt": "x"}})),
        // A first turn has nothing to condense: the endpoint (CONDENSER) is never asked.
        c("condense", json!("openai"), &[], json!("gpt")),
    ]
}

/// A condenser endpoint for `condense openai` (nothing listens: a first turn never asks it)
/// and a rerank endpoint for `rerank remote` (nothing listens: the turn falls back).
const CONDENSER: [(&str, &str); 3] = [
    ("RAGCTX_CONDENSE_URL", "http://127.0.0.1:9/v1"),
    ("RAGCTX_CONDENSE_MODEL", "none"),
    ("RAGCTX_RERANK_URL", "http://127.0.0.1:9/rerank"),
];

/// A value as a flag or an environment variable writes it (a filter as JSON text).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A value as a TOML config file writes it (a filter as a literal string of JSON text).
fn toml_value(v: &Value) -> String {
    match v {
        Value::Object(_) => format!("'{v}'"),
        other => other.to_string(),
    }
}

/// The words every front must use for `key = bad`: what core says, without its category.
fn expected_words(key: &str, bad: &Value) -> String {
    let said = match serde_json::from_value::<TurnOverrides>(json!({ key: bad })) {
        Err(e) => e.to_string(),
        Ok(o) => o.apply(&TurnSettings::default()).expect_err("the bad value is refused").to_string(),
    };
    // A config file or body names the setting first (`mode: ...`); a flag's error names it
    // its own way (`--mode <MODE>`): the words after are the same.
    said.trim_start_matches(&format!("{key}: ")).trim_start_matches("invalid input: ").to_owned()
}

enum Front {
    Flag,
    Env,
    Config,
}

fn ask_with(env: &Env, front: &Front, session: &str, pairs: &[(String, Value)]) -> Output {
    let mut cmd = env.cmd();
    cmd.envs(CONDENSER);
    match front {
        Front::Flag => {
            cmd.args(["ask", "--session", session, "--json"]);
            for (k, v) in pairs {
                cmd.arg(format!("--{}", k.replace('_', "-"))).arg(text(v));
            }
        }
        Front::Env => {
            cmd.args(["ask", "--session", session, "--json"]);
            for (k, v) in pairs {
                cmd.env(format!("RAGCTX_{}", k.to_ascii_uppercase()), text(v));
            }
        }
        Front::Config => {
            let body: String = pairs.iter().map(|(k, v)| format!("{k} = {}\n", toml_value(v))).collect();
            let file = env.write(&format!("{session}.toml"), &body);
            cmd.arg("--config").arg(file).args(["ask", "--session", session, "--json"]);
        }
    }
    cmd.arg("Which plants need little water?");
    cmd.output().unwrap()
}

fn pairs(case: &Case, value: &Value) -> Vec<(String, Value)> {
    let mut p: Vec<(String, Value)> = case.needs.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    p.push((case.key.to_owned(), value.clone()));
    p
}

/// The turn shows the setting: in its effective settings, its intent (`mode`) or, for
/// `session_ttl`, by the session expiring (checked at the end).
fn shows(case: &Case, turn: &Value) -> bool {
    match case.key {
        "mode" => turn["intent"] == case.good,
        "session_ttl" => true,
        key => turn["trace"]["settings"][key] == case.good,
    }
}

const CORPUS: &str = r#"{"_id": "cactus#0", "document_id": "cactus", "title": "Cacti", "text": "A cactus needs water only when its soil is dry, every two or three weeks.", "metadata": {"topic": "plants"}}
{"_id": "fern#0", "document_id": "fern", "title": "Ferns", "text": "Ferns like moist soil and need water twice a week in summer.", "metadata": {"topic": "plants"}}
{"_id": "succulent#0", "document_id": "succulent", "title": "Succulents", "text": "Succulents store water in their leaves and need little of it.", "metadata": {"topic": "plants"}}
{"_id": "bike#0", "document_id": "bike", "title": "Bicycles", "text": "A bicycle chain needs oil every few hundred kilometres.", "metadata": {"topic": "machines"}}
"#;

#[test]
fn every_turn_setting_is_reachable_from_flag_env_config_and_http_with_one_name_and_one_error() {
    let keys: Vec<&str> = cases().iter().map(|c| c.key).collect();
    assert_eq!(keys, TurnOverrides::KEYS, "one row per turn setting, in the declared order");
    let env = Env::new();
    env.ok(&["ingest", env.write("plants.jsonl", CORPUS).to_str().unwrap()]);
    let mut expiring = Vec::new();
    for case in cases() {
        let words = expected_words(case.key, &case.bad);
        for (name, front) in [("flag", Front::Flag), ("env", Front::Env), ("config", Front::Config)] {
            let session = format!("{}-{name}", case.key.replace('_', "-"));
            let out = ask_with(&env, &front, &session, &pairs(&case, &case.good));
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{} by {name}: {}", case.key, String::from_utf8_lossy(&out.stderr));
            let turn: Value = serde_json::from_str(&stdout).unwrap();
            assert!(
                shows(&case, &turn),
                "{} by {name} did not reach the turn: {}",
                case.key,
                turn["trace"]["settings"]
            );
            if case.key == "session_ttl" {
                expiring.push(session.clone());
            }
            let out = ask_with(&env, &front, &format!("bad-{session}"), &pairs(&case, &case.bad));
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{} = {} by {name}: {stderr}", case.key, case.bad);
            assert!(stderr.contains(&words), "{} by {name}: {stderr:?} lacks {words:?}", case.key);
        }
    }

    let server = Server::start(&env, &[], &CONDENSER);
    for case in cases() {
        let words = expected_words(case.key, &case.bad);
        let session = format!("{}-http", case.key.replace('_', "-"));
        let body = |v: &Value| {
            let mut b: serde_json::Map<String, Value> = pairs(&case, v).into_iter().collect();
            b.insert("question".into(), json!("Which plants need little water?"));
            Value::Object(b).to_string()
        };
        let (status, text) = http_post(&server.addr, &format!("/v1/sessions/{session}/turns"), &body(&case.good));
        assert_eq!(status, 200, "{} by http: {text}", case.key);
        let turn: Value = serde_json::from_str(&text).unwrap();
        assert!(shows(&case, &turn), "{} by http did not reach the turn: {}", case.key, turn["trace"]["settings"]);
        if case.key == "session_ttl" {
            expiring.push(session.clone());
        }
        let (status, text) = http_post(&server.addr, &format!("/v1/sessions/bad-{session}/turns"), &body(&case.bad));
        let error: Value = serde_json::from_str(&text).unwrap();
        assert_eq!((status, error["code"].as_str()), (400, Some("bad_request")), "{} by http: {text}", case.key);
        let message = error["message"].as_str().unwrap();
        assert!(message.contains(&words), "{} by http: {message:?} lacks {words:?}", case.key);
    }
    drop(server);

    // `session_ttl 1` by each front: the session is gone two seconds later.
    std::thread::sleep(std::time::Duration::from_millis(2_100));
    assert_eq!(expiring.len(), 4);
    for session in expiring {
        let out = env.run(&["session", "show", "--session", &session]);
        assert!(!out.status.success(), "{session} outlived its ttl: {}", String::from_utf8_lossy(&out.stdout));
    }
}

#[test]
fn a_setting_that_would_do_nothing_is_refused_not_ignored() {
    let env = Env::new();
    env.ok(&["ingest", env.write("plants.jsonl", CORPUS).to_str().unwrap()]);
    for (flags, words) in [
        (&["--granularity", "document"][..], "granularity document does nothing with memory engine"),
        (&["--fusion", "rrf"][..], "fusion applies to retrieval hybrid only"),
    ] {
        let out = env.run(&[&["ask", "--session", "idle"][..], flags, &["Which plants need water?"]].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(words), "{flags:?}: {stderr}");
    }
    // Condensing without an endpoint is a configuration error, said before any turn runs.
    let out = env.run(&["ask", "--session", "idle", "--condense", "openai", "Which plants need water?"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("condense openai needs a condenser endpoint: set condense_url"), "{stderr}");
    // The same settings where they act are taken.
    env.ask("idle", &["--granularity", "document", "--memory", "client"], "Which plants need water?");
    env.ask("idle", &["--fusion", "rrf", "--retrieval", "hybrid"], "Which plants need water?");
}
