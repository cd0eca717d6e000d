//! Issue 25's "done when", through the binary: a keys file with a `write` key for tenant
//! `plants-en`, a `write` key for `plants-zh` and a `read` key for `plants-en`; four `serve`
//! processes over one Milvus Lite and one Redis (private servers on loopback); the write keys
//! ingest the two demo corpora through `POST /v1/documents`; every list, turn and
//! OpenAI-front answer shows only the caller's tenant, whichever process answers; the read key
//! cannot ingest; the other tenant's key cannot delete `humidity.txt`, which survives.

mod common;

use common::{milvus_lite, redis, repo, Server};
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::Command;

/// One request with a bearer key; `(status, body)`.
fn call(addr: &str, key: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    common::http_key(addr, key, method, path, body)
}

/// A demo folder as ingest records, one per file.
fn records(dir: &str) -> String {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(repo().join(dir)).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for f in files {
        let name = f.file_name().unwrap().to_str().unwrap().to_owned();
        let text = std::fs::read_to_string(&f).unwrap();
        out.push(serde_json::json!({"_id": format!("{name}#0"), "document_id": name, "title": name, "text": text}));
    }
    serde_json::to_string(&out).unwrap()
}

fn listed(addr: &str, key: &str) -> BTreeSet<String> {
    let (status, body) = call(addr, key, "GET", "/v1/documents", "");
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v.as_array().unwrap().iter().map(|d| d["document_id"].as_str().unwrap().to_owned()).collect()
}

/// Whether any block of the turn holds CJK text (the zh corpus; the en one has none).
fn has_cjk(turn: &Value) -> bool {
    turn["context"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["text"].as_str().unwrap().chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)))
}

fn docs_of(turn: &Value) -> BTreeSet<String> {
    turn["context"].as_array().unwrap().iter().map(|b| b["document_id"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn four_servers_over_milvus_and_redis_keep_tenants_apart() {
    let dir = tempfile::tempdir().unwrap();
    let milvus = milvus_lite(&dir.path().join("milvus"));
    let redis = redis(&dir.path().join("redis"));
    let keys = dir.path().join("keys.toml");
    std::fs::write(
        &keys,
        r#"
[[keys]]
key = "en-write"
tenant = "plants-en"
role = "write"

[[keys]]
key = "zh-write"
tenant = "plants-zh"
role = "write"

[[keys]]
key = "en-read"
tenant = "plants-en"
role = "read"
"#,
    )
    .unwrap();
    let servers: Vec<Server> = (0..4)
        .map(|_| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_ragctx"));
            c.arg("--model-dir").arg(repo().join("models/all-MiniLM-L6-v2"));
            c.args(["--backend", "milvus", "--milvus-uri", &milvus.url("http"), "--collection", "tenants"]);
            c.args(["--sessions", &redis.url("redis"), "--milvus-consistency", "strong"]);
            c.args(["--data-dir", "/dev/null/ragctx-data", "serve", "--addr", "127.0.0.1:0"]);
            c.env_remove("RAGCTX_CONFIG").env_remove("RAGCTX_API_KEYS").env("RAGCTX_KEYS_FILE", &keys);
            Server::spawn(c)
        })
        .collect();
    let at = |i: usize| servers[i % 4].addr.as_str();

    let (s, b) = call(at(0), "en-write", "POST", "/v1/documents", &records("demo/houseplants"));
    assert_eq!(s, 200, "{b}");
    let (s, b) = call(at(1), "zh-write", "POST", "/v1/documents", &records("demo/zh-houseplants"));
    assert_eq!(s, 200, "{b}");
    let (s, b) = call(at(2), "en-read", "POST", "/v1/documents", &records("demo/houseplants"));
    assert_eq!(s, 403, "a read key cannot ingest: {b}");

    let en: BTreeSet<String> = std::fs::read_dir(repo().join("demo/houseplants"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().to_owned())
        .collect();
    let zh: BTreeSet<String> = std::fs::read_dir(repo().join("demo/zh-houseplants"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().to_owned())
        .collect();
    for i in 0..4 {
        assert_eq!(listed(at(i), "en-read"), en, "server {i}");
        assert_eq!(listed(at(i), "en-write"), en, "server {i}");
        assert_eq!(listed(at(i), "zh-write"), zh, "server {i}");
    }
    // Turns of the same session id in both tenants, alternating servers.
    for (i, q) in ["How often should I water?", "What about pests?", "And humidity?"].iter().enumerate() {
        let body = serde_json::json!({"question": q}).to_string();
        let (s, b) = call(at(i), "en-read", "POST", "/v1/sessions/s1/turns", &body);
        assert_eq!(s, 200, "{b}");
        let t: Value = serde_json::from_str(&b).unwrap();
        assert!(docs_of(&t).is_subset(&en) && !docs_of(&t).is_empty(), "{t}");
        assert!(!has_cjk(&t), "plants-en read plants-zh text: {t}");
        assert_eq!(t["turn"], i as u64 + 1);
        let (s, b) = call(at(i + 1), "zh-write", "POST", "/v1/sessions/s1/turns", &body);
        assert_eq!(s, 200, "{b}");
        let t: Value = serde_json::from_str(&b).unwrap();
        assert!(docs_of(&t).is_subset(&zh) && !docs_of(&t).is_empty(), "{t}");
        assert!(
            t["context"]
                .as_array()
                .unwrap()
                .iter()
                .all(|b| { b["text"].as_str().unwrap().chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)) }),
            "every plants-zh block is Chinese text: {t}"
        );
        assert_eq!(t["turn"], i as u64 + 1, "the same session id in another tenant is another session");
    }
    // The OpenAI-compatible front.
    let chat = serde_json::json!({"model": "ragctx", "messages": [{"role": "user", "content": "How much light?"}]});
    let (s, b) = call(at(3), "zh-write", "POST", "/v1/chat/completions", &chat.to_string());
    assert_eq!(s, 200, "{b}");
    let v: Value = serde_json::from_str(&b).unwrap();
    assert!(docs_of(&v["ragctx"]).is_subset(&zh) && has_cjk(&v["ragctx"]), "{v}");
    // The other tenant's document: 404, as a missing one, and it survives.
    let (s, foreign) = call(at(2), "zh-write", "DELETE", "/v1/documents/humidity.txt", "");
    assert_eq!(s, 404);
    let (s, missing) = call(at(2), "zh-write", "DELETE", "/v1/documents/no-such-file.txt", "");
    assert_eq!(s, 404);
    assert_eq!(foreign.replace("humidity.txt", "X"), missing.replace("no-such-file.txt", "X"), "existence never leaks");
    for i in 0..4 {
        assert!(listed(at(i), "en-read").contains("humidity.txt"));
    }
    for s in &servers {
        assert_eq!(s.panics(), 0, "{}", s.stderr.lock().unwrap());
    }
}
