//! With the `otlp` feature (`cargo test --features otlp --test otlp`, run by scripts/test):
//! a turn's spans reach an OpenTelemetry collector over OTLP/HTTP. The collector here is a
//! test double (no collector is installable from this machine's registries): a loopback
//! listener that records what is posted to it and answers 200.
#![cfg(feature = "otlp")]

mod common;

use common::{repo, Env};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::Duration;

/// Accepts posts until one to `/v1/traces` arrives (or 60 s pass); returns its body.
fn collector() -> (String, std::thread::JoinHandle<Option<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    let handle = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            let Ok((stream, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            stream.set_nonblocking(false).unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut path, mut len) = (String::new(), 0usize);
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if let Some(p) = line.split_whitespace().nth(1) {
                path = p.to_owned();
            }
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            let mut stream = stream;
            let _ = write!(stream, "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            if path == "/v1/traces" {
                return Some(body);
            }
        }
        None
    });
    (url, handle)
}

#[test]
fn a_turns_spans_reach_the_collector() {
    let env = Env::new();
    env.ok(&["ingest", repo().join("demo/houseplants").to_str().unwrap()]);
    let (url, posted) = collector();
    let out = env
        .cmd()
        .args(["ask", "--session", "otel1", "How often should I water ferns?"])
        .env("RAGCTX_LOG", "info")
        .env("RAGCTX_OTLP_ENDPOINT", &url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let body = posted.join().unwrap().expect("spans posted to /v1/traces before ragctx exited");
    // OTLP protobuf keeps strings as they are: span names, attributes, the service name.
    let has = |s: &str| body.windows(s.len()).any(|w| w == s.as_bytes());
    for s in ["turn", "stage", "search", "timings_ms", "ragctx"] {
        assert!(has(s), "{s:?} in the {}-byte export", body.len());
    }
    // The session id is logged at debug only (a stored id may carry a key's namespace or a
    // tenant: docs/http-api.md, "Boundaries"); the export at info has none.
    assert!(!has("otel1"), "no session id in the info export");
}
