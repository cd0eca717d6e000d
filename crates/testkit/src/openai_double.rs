//! A test double of an OpenAI-compatible `/v1/chat/completions` endpoint: the design names
//! no LLM that can run on this machine, so tests of the OpenAI generator talk to this.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Test double of an OpenAI-compatible endpoint: answers each request with the next
/// scripted `(status, body, delay)` and records the request bodies and headers it saw.
pub struct OpenAiTestDouble {
    pub url: String,
    /// `(authorization header line, request body)` of each request, in order.
    pub seen: Arc<Mutex<Vec<(String, String)>>>,
}

impl OpenAiTestDouble {
    /// Serves the script on 127.0.0.1 (a free port), one connection per entry.
    pub fn start(script: Vec<(u16, String, u64)>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for (status, body, delay) in script {
                let Ok((mut stream, _)) = listener.accept() else { return };
                read_request(&stream, &log);
                std::thread::sleep(Duration::from_millis(delay));
                let _ = write!(stream, "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
            }
        });
        OpenAiTestDouble { url, seen }
    }

    /// Streams every request's answer as server-sent events, the way OpenAI does with
    /// `stream: true`: `pieces` one event each, `gap_ms` apart (a slow model), then
    /// `[DONE]`. Serves `requests` requests.
    pub fn streaming(pieces: Vec<String>, gap_ms: u64, requests: usize) -> Self {
        Self::stream(pieces, gap_ms, requests, true)
    }

    /// Streams `pieces` once and closes the connection without a `finish_reason` or
    /// `[DONE]`: a model server that died mid-answer.
    pub fn cut_stream(pieces: Vec<String>) -> Self {
        Self::stream(pieces, 0, 1, false)
    }

    fn stream(pieces: Vec<String>, gap_ms: u64, requests: usize, finish: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for _ in 0..requests {
                let Ok((mut stream, _)) = listener.accept() else { return };
                read_request(&stream, &log);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n"
                );
                for piece in &pieces {
                    std::thread::sleep(Duration::from_millis(gap_ms));
                    let piece = piece.replace('\\', "\\\\").replace('"', "\\\"");
                    let event = format!(
                        "{{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{piece}\"}},\"finish_reason\":null}}]}}"
                    );
                    let _ = write!(stream, "data: {event}\n\n");
                    let _ = stream.flush();
                }
                if finish {
                    let _ = write!(stream, "data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\n\ndata: [DONE]\n\n");
                }
            }
        });
        OpenAiTestDouble { url, seen }
    }
}

/// Reads one request (headers and a `Content-Length` body) and records its authorization
/// header and body.
fn read_request(stream: &std::net::TcpStream, log: &Mutex<Vec<(String, String)>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let (mut len, mut auth) = (0usize, String::new());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("authorization:") {
            auth = line.trim().to_owned();
        }
    }
    let mut buf = vec![0; len];
    reader.read_exact(&mut buf).unwrap();
    log.lock().unwrap().push((auth, String::from_utf8_lossy(&buf).into_owned()));
}

/// A chat completion whose answer is `text`.
pub fn completion(text: &str) -> String {
    let text = text.replace('\\', "\\\\").replace('"', "\\\"");
    format!(
        "{{\"id\":\"x\",\"object\":\"chat.completion\",\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":\"{text}\"}},\"finish_reason\":\"stop\"}}]}}"
    )
}
