//! The MCP tool server (DESIGN §9) with clients we did not write: the official MCP Python SDK
//! over stdio (`ragctx mcp`) and over streamable HTTP (`ragctx serve` at `/mcp`, with keys and
//! two tenants), and fastmcp's client over HTTP. The clients' checks are in `mcp_client.py`
//! (bench/.venv, installed by bench/setup); here the servers are started, the script is run,
//! and what the session store recorded is checked through the CLI and the HTTP API.

mod common;

use common::*;
use serde_json::Value;
use std::process::Command;

fn python() -> std::path::PathBuf {
    let p = repo().join("bench/.venv/bin/python");
    assert!(p.is_file(), "the MCP Python SDK is installed by bench/setup (scripts/test runs it)");
    p
}

fn client(args: &[&str]) -> Value {
    let script = repo().join("crates/cli/tests/mcp_client.py");
    let out = Command::new(python()).arg(script).args(args).output().expect("python runs");
    assert!(
        out.status.success(),
        "mcp_client.py {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn an_agent_over_stdio_never_gets_a_chunk_twice_and_its_steps_are_traced() {
    let env = Env::new();
    let corpus = env.govt(120);
    env.ok(&["ingest", corpus.to_str().unwrap()]);
    let model = repo().join("models/all-MiniLM-L6-v2");
    // Launched as docs/agents.md's host configs launch it: a binary copied away from its
    // build folder, the data dir and the model given by absolute paths.
    let bin = env.dir.path().join("bin/ragctx");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_ragctx"), &bin).unwrap();
    let r = client(&["stdio", bin.to_str().unwrap(), env.data().to_str().unwrap(), model.to_str().unwrap()]);
    let session = r["session"].as_str().unwrap();
    let calls = r["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 4);
    assert!(calls[3]["pointers"].as_u64().unwrap() > 0, "{r}");
    // Every call a step of the session's one history: the searches, the two opens, the forget,
    // the search after it, and the bad inputs' none (nothing was recorded for them).
    let traces: Vec<Value> = serde_json::from_str(&env.ok(&["trace", "--session", session, "--json"])).unwrap();
    let questions: Vec<&str> = traces.iter().map(|t| t["question"].as_str().unwrap()).collect();
    assert_eq!(questions.len(), 9, "{questions:?}");
    // The fixture's JSONL lines give no `ordinal`: a passage's handle is its chunk ID.
    assert!(questions[5].starts_with("open [") && questions[5] != questions[6], "a passage's handle: {questions:?}");
    assert!(questions[6].starts_with("open "), "{questions:?}");
    assert_eq!(traces[5]["trace"]["intent"], "reshow", "open is a re-show");
    assert_eq!(traces[5]["context"].as_array().unwrap().len(), 1, "a handle opens one passage");
    assert!(questions[7].starts_with("forget"), "{questions:?}");
    assert_eq!(traces[7]["trace"]["forgotten"].as_array().unwrap().len(), 1);
    for t in &traces {
        assert_eq!(t["answer"], "", "retrieve-only: no answer generated");
        assert_eq!(t["trace"]["memory"], "client");
    }
    assert!(!traces[3]["pointers"].as_array().unwrap().is_empty(), "the repeat's pointers are traced");
    // As a person reads it: each step named as what it was, with what it returned or forgot,
    // and none of a chat turn's fields.
    let human = env.ok(&["trace", "--session", session]);
    for step in ["search 1: ", "open 6: ", "open 7: ", "forget 8: ", "search 9: "] {
        assert!(human.contains(step), "{step:?} in {human}");
    }
    assert!(human.contains("forgot 1 chunk(s): "), "{human}");
    assert!(human.contains("tokens returned (budget"), "{human}");
    assert!(!human.contains("prompt ") && !human.contains("\nturn "), "no chat fields: {human}");
}

#[test]
fn the_same_tools_over_http_behind_keys_and_tenants() {
    let env = Env::new();
    let corpus = env.govt(120);
    let keys = env.write(
        "keys.toml",
        "[[keys]]\nkey = \"a-write\"\ntenant = \"a\"\nrole = \"write\"\n\n[[keys]]\nkey = \"b-read\"\ntenant = \"b\"\nrole = \"read\"\n",
    );
    env.ok(&["--tenant", "a", "ingest", corpus.to_str().unwrap()]);
    let keys = keys.to_str().unwrap();
    let server = Server::start(&env, &[], &[("RAGCTX_KEYS_FILE", keys)]);
    let url = format!("http://{}/mcp", server.addr);
    // No key: 401 before the protocol is read, in the API's error shape.
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let (status, body) = http_post(&server.addr, "/mcp", init);
    assert_eq!(status, 401, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["code"], "unauthorized", "{body}");
    // A foreign Origin is refused with keys too (the MCP transport's rule); a loopback one is
    // let through to the protocol.
    let origin = |o: &str| {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&server.addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
        let req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nOrigin: {o}\r\nAuthorization: Bearer a-write\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{init}",
            server.addr,
            init.len()
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out.split_whitespace().nth(1).and_then(|c| c.parse::<u16>().ok()).unwrap_or(0)
    };
    assert_eq!(origin("https://evil.example"), 403);
    assert_eq!(origin("http://localhost:5173"), 200);
    // Malformed JSON-RPC is answered in JSON-RPC's terms.
    for (body, code) in [("{not json", -32700), (r#"{"hello":1}"#, -32600), ("[1,2]", -32600)] {
        let (status, answer) = http_key(&server.addr, "a-write", "POST", "/mcp", body);
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(serde_json::from_str::<Value>(&answer).unwrap()["error"]["code"], code, "{body}: {answer}");
    }
    let r = client(&["http", &url, "a-write", "b-read"]);
    assert!(r["documents_a"].as_u64().unwrap() > 0, "{r}");
    let f = client(&["fastmcp", &url, "b-read"]);
    assert_eq!(f["blocks"], 0, "tenant b holds nothing to find: {f}");
    let f = client(&["fastmcp", &url, "a-write"]);
    assert!(f["blocks"].as_u64().unwrap() > 0 && f["pointers_again"].as_u64().unwrap() > 0, "{f}");
    // The agent's steps through the HTTP API, for its tenant only.
    let (status, steps) = call(&server.addr, "a-write", "GET", "/v1/sessions/agent-h/turns");
    assert_eq!(status, 200, "{steps}");
    assert!(serde_json::from_str::<Value>(&steps).unwrap().as_array().unwrap().len() >= 4);
    // Tenant b's session of the same name is its own: the one search it made, which found
    // nothing of tenant a's.
    let (status, b_steps) = call(&server.addr, "b-read", "GET", "/v1/sessions/agent-h/turns");
    assert_eq!(status, 200, "{b_steps}");
    let b_steps: Value = serde_json::from_str(&b_steps).unwrap();
    assert_eq!(b_steps.as_array().unwrap().len(), 1, "{b_steps}");
    assert!(b_steps[0]["context"].as_array().unwrap().is_empty(), "{b_steps}");
    assert_eq!(server.panics(), 0);
}

fn call(addr: &str, key: &str, method: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("server answers");
    s.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
    let req =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}

/// Bare API keys (each `write` in the default tenant) keep their sessions apart, as the HTTP
/// API does; without keys, `/mcp` answers only a loopback `Host` (DNS rebinding).
#[test]
fn bare_keys_keep_sessions_apart_and_keyless_mcp_refuses_a_foreign_host() {
    let env = Env::new();
    let corpus = env.govt(60);
    env.ok(&["ingest", corpus.to_str().unwrap()]);
    let server = Server::start(&env, &[], &[("RAGCTX_API_KEYS", "bare-one,bare-two")]);
    let r = client(&["barekeys", &format!("http://{}/mcp", server.addr), "bare-one", "bare-two"]);
    assert!(r["key_2"][0].as_u64().unwrap() > 0, "{r}");
    // An operator who holds a bare key reads its sessions' steps (while `serve` holds the data
    // dir); without the key the name finds nothing.
    let steps = |key: &str| {
        let out = env.ok(&["trace", "--session", "shared-name", "--key", key, "--json"]);
        serde_json::from_str::<Value>(&out).unwrap().as_array().unwrap().len()
    };
    assert_eq!((steps("bare-one"), steps("bare-two")), (2, 1));
    assert!(!env.run(&["trace", "--session", "shared-name"]).status.success(), "the bare name is no session");
    drop(server);

    let open = Server::start(&env, &[], &[]);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let ask = |host: &str| {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&open.addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
        let req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{init}",
            init.len()
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out.split_whitespace().nth(1).and_then(|c| c.parse::<u16>().ok()).unwrap_or(0)
    };
    assert_eq!(ask(&open.addr), 200, "a loopback Host is served");
    let foreign = ask("evil.example");
    assert!((400..500).contains(&foreign), "a foreign Host is refused, got {foreign}");
}

/// Several processes on one data dir at once (design §10): two `ragctx mcp` hosts through the
/// official SDK's stdio client, `ragctx serve` through its streamable HTTP client, and the CLI
/// (`ingest`, `trace`, `documents list`). The checks are `mcp_client.py shared`'s: the CLI's
/// new file found by every agent's next search, no chunk sent to a session twice, the holder
/// SIGKILLed inside a session write losing nothing acknowledged, the others answering on.
#[test]
fn hosts_serve_and_the_cli_share_one_data_dir() {
    let env = Env::new();
    let corpus = env.govt(120);
    env.ok(&["ingest", corpus.to_str().unwrap()]);
    let doc = env.write(
        "lantern-boats.md",
        "# Lantern boat permits\n\nThe quillfeather ordinance permits lantern boats on the river after dusk, \
         with a permit from the harbour office that costs twelve dollars a season.\n",
    );
    let work = tempfile::tempdir().unwrap();
    let model = repo().join("models/all-MiniLM-L6-v2");
    let r = client(&[
        "shared",
        env!("CARGO_BIN_EXE_ragctx"),
        env.data().to_str().unwrap(),
        model.to_str().unwrap(),
        doc.to_str().unwrap(),
        work.path().to_str().unwrap(),
    ]);
    assert!(r["killed_after"].as_u64().unwrap() >= 2, "{r}");
    eprintln!("shared data dir: {r}");
}

/// A stdio message over the limit, or a last one without its newline, gets an answer (an
/// error with its id that names the limit) instead of leaving the client waiting; the server
/// goes on answering the messages after an over-long one.
#[test]
fn an_oversize_or_unterminated_stdio_message_is_answered() {
    use std::io::{BufRead, Write};
    let env = Env::new();
    let corpus = env.govt(20);
    env.ok(&["ingest", corpus.to_str().unwrap()]);
    let mut child = env
        .cmd()
        .arg("mcp")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let huge =
        format!(r#"{{"jsonrpc":"2.0","id":99,"method":"tools/list","params":{{"pad":"{}"}}}}"#, "x".repeat(17 << 20));
    let writer = std::thread::spawn(move || {
        writeln!(stdin, "{init}").unwrap();
        writeln!(stdin, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).unwrap();
        writeln!(stdin, "{huge}").unwrap();
        writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list"}}"#).unwrap();
        write!(stdin, r#"{{"jsonrpc":"2.0","id":100,"method":"tools/list"}}"#).unwrap();
        // Closing stdin ends the session after the answers.
    });
    let mut answers = std::collections::HashMap::new();
    for line in stdout.lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        answers.insert(v["id"].to_string(), v);
    }
    writer.join().unwrap();
    let _ = child.wait();
    assert!(answers["1"]["result"].is_object(), "{answers:?}");
    let over = &answers["99"]["error"];
    assert_eq!(over["code"], -32600, "{answers:?}");
    assert!(over["message"].as_str().unwrap().contains("limit of 16777216 bytes"), "{over}");
    assert!(answers["2"]["result"]["tools"].is_array(), "served on after it: {:?}", answers.get("2"));
    assert!(answers["100"]["error"]["message"].as_str().unwrap().contains("newline"), "{answers:?}");
}
