//! A test double of rerank endpoints: no cross-encoder's weights are on the registries this
//! project installs from, so the reranker's tests talk to this. It speaks the four wire
//! shapes users run, by path:
//!
//! - `/rerank` — Text Embeddings Inference: `{query, texts}` → `[{index, score}]`;
//! - `/v2/rerank` — Cohere: `{model, query, documents, top_n}` → `{id, results: [{index,
//!   relevance_score}], meta}`;
//! - `/jina/v1/rerank` — Jina: the same request → `{model, usage, results: [{index,
//!   document: {text}, relevance_score}]}`;
//! - `/v1/rerank` — llama.cpp server: the same request → `{model, object, usage, results}`;
//!
//! each answer sorted by score (as the servers do), so a client must match by `index`. The
//! score is the share of the query's words found in the text, a stand-in for a
//! cross-encoder. Faults: `/slow/...` answers after 1.5 s, `/short/...` leaves the last text
//! unscored, `/fail/...` answers HTTP 500.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The double, serving on 127.0.0.1 until the test process ends.
pub struct RerankTestDouble {
    /// `http://127.0.0.1:PORT`: endpoints are this plus a path above.
    pub base: String,
    /// `(path, request body)` of each request, in order.
    pub seen: Arc<Mutex<Vec<(String, Value)>>>,
}

impl RerankTestDouble {
    /// Starts serving on a free loopback port.
    pub fn start() -> RerankTestDouble {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let log = log.clone();
                std::thread::spawn(move || serve(stream, &log));
            }
        });
        RerankTestDouble { base, seen }
    }
}

/// The share of the query's words (lower-cased letters and digits) found in `text`.
pub fn overlap(query: &str, text: &str) -> f64 {
    let words = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
    };
    let (q, t) = (words(query), words(text));
    if q.is_empty() {
        return 0.0;
    }
    q.iter().filter(|w| t.contains(w)).count() as f64 / q.len() as f64
}

fn serve(stream: TcpStream, log: &Mutex<Vec<(String, Value)>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return;
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut buf = vec![0; len];
    if reader.read_exact(&mut buf).is_err() {
        return;
    }
    let body: Value = serde_json::from_slice(&buf).unwrap_or(Value::Null);
    log.lock().unwrap().push((path.clone(), body.clone()));
    let (status, answer) = answer(&path, &body);
    let answer = answer.to_string();
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
        answer.len()
    );
}

fn answer(path: &str, body: &Value) -> (u16, Value) {
    let mut path = path;
    let mut short = false;
    if let Some(rest) = path.strip_prefix("/slow") {
        std::thread::sleep(Duration::from_millis(1_500));
        path = rest;
    }
    if let Some(rest) = path.strip_prefix("/fail") {
        let _ = rest;
        return (500, json!({"error": "the test double fails on purpose"}));
    }
    if let Some(rest) = path.strip_prefix("/short") {
        short = true;
        path = rest;
    }
    let query = body["query"].as_str().unwrap_or("");
    let texts: Vec<&str> = match body.get("texts").or_else(|| body.get("documents")) {
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => return (422, json!({"error": "no texts or documents"})),
    };
    let mut scored: Vec<(usize, f64)> = texts.iter().enumerate().map(|(i, t)| (i, overlap(query, t))).collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    if short {
        scored.retain(|(i, _)| *i + 1 != texts.len());
    }
    if let Some(n) = body["top_n"].as_u64() {
        scored.truncate(n as usize);
    }
    let results = |with_text: bool| -> Vec<Value> {
        scored
            .iter()
            .map(|&(i, s)| {
                let mut r = json!({"index": i, "relevance_score": s});
                if with_text {
                    r["document"] = json!({"text": texts[i]});
                }
                r
            })
            .collect()
    };
    match path {
        "/rerank" => (200, Value::Array(scored.iter().map(|&(i, s)| json!({"index": i, "score": s})).collect())),
        "/v2/rerank" => {
            (200, json!({"id": "double", "results": results(false), "meta": {"api_version": {"version": "2"}}}))
        }
        "/jina/v1/rerank" => {
            (200, json!({"model": body["model"], "usage": {"total_tokens": 1}, "results": results(true)}))
        }
        "/v1/rerank" => (
            200,
            json!({"model": body["model"], "object": "list", "usage": {"prompt_tokens": 1, "total_tokens": 1}, "results": results(false)}),
        ),
        _ => (404, json!({"error": format!("no route {path}")})),
    }
}
