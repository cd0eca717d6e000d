//! The hostile and bad input matrix (DESIGN §5), one test per case, through the HTTP API on
//! the real engine. Each bad input gets a clear 4xx error and writes nothing (no chunk, no
//! session); each odd-but-valid input round-trips byte for byte — and an excluded hostile id
//! stays excluded without taking anything else with it.

mod common;

use axum::http::StatusCode;
use common::{call, call_json, state};
use ragctx_core::SessionId;
use ragctx_server::AppState;
use serde_json::{json, Value};
use std::sync::Arc;

struct Fixture {
    app: axum::Router,
    state: Arc<AppState>,
    _dir: tempfile::TempDir,
}

fn corpus() -> Value {
    json!([
        {"_id": "fees#1", "document_id": "fees", "title": "Court fees", "text": "Filing an appeal costs 775 dollars in the Court of Appeal."},
        {"_id": "w1", "document_id": "waiver", "title": "Fee waivers", "text": "You can ask the court to waive the appeal fees if you cannot afford them."},
        {"_id": "f1", "document_id": "forms", "title": "Appeal forms", "text": "Form APP-002 is the notice of appeal for civil cases."},
        {"_id": "d1", "document_id": "deadline", "title": "Deadlines", "text": "The notice of appeal must be filed within 60 days of the judgment."},
        {"_id": "l1", "document_id": "lawyer", "title": "Finding a lawyer", "text": "Legal aid offices help people who cannot pay for a lawyer."}
    ])
}

impl Fixture {
    async fn new(keys: &[&str]) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let state = state(keys, dir.path());
        let app = ragctx_server::router(state.clone());
        let (s, b) = call_json(&app, "POST", "/v1/documents", keys.first().copied(), Some(corpus())).await;
        assert_eq!(s, StatusCode::OK, "{b}");
        Fixture { app, state, _dir: dir }
    }

    fn chunks(&self) -> usize {
        self.state.unscoped.scoped(&Default::default()).vectors.len().unwrap()
    }

    fn session_exists(&self, id: &str) -> bool {
        SessionId::parse(id)
            .ok()
            .is_some_and(|s| self.state.unscoped.scoped(&Default::default()).sessions.load(&s).unwrap().is_some())
    }

    /// Posts `body` to `path`; asserts the status, a JSON error with a code and a message,
    /// and that no chunk and no session was written.
    async fn rejects(&self, path: &str, key: Option<&str>, body: Vec<u8>, status: u16) -> String {
        let before = self.chunks();
        let (s, b) = call(&self.app, "POST", path, key, Some(body)).await;
        let text = String::from_utf8_lossy(&b).into_owned();
        assert_eq!(s.as_u16(), status, "{path}: {text}");
        let err: Value = serde_json::from_slice(&b).unwrap_or_else(|_| panic!("a JSON error body: {text}"));
        assert!(err["code"].as_str().is_some_and(|c| !c.is_empty()), "{text}");
        let message = err["message"].as_str().unwrap_or_default().to_owned();
        assert!(!message.is_empty(), "{text}");
        assert_eq!(self.chunks(), before, "{path}: a rejected request wrote chunks");
        for session in ["s", "s1", "victim"] {
            assert!(!self.session_exists(session), "{path}: a rejected request wrote session {session}");
        }
        message
    }

    async fn rejects_turn(&self, body: Value, status: u16) -> String {
        self.rejects("/v1/sessions/s/turns", None, body.to_string().into_bytes(), status).await
    }

    async fn rejects_documents(&self, body: &[u8]) -> String {
        self.rejects("/v1/documents", None, body.to_vec(), 400).await
    }

    async fn turn(&self, session: &str, body: Value) -> Value {
        let (s, t) = call_json(&self.app, "POST", &format!("/v1/sessions/{session}/turns"), None, Some(body)).await;
        assert_eq!(s, StatusCode::OK, "{t}");
        t
    }
}

fn docs(t: &Value) -> Vec<String> {
    t["context"].as_array().unwrap().iter().map(|b| b["document_id"].as_str().unwrap().to_owned()).collect()
}

fn chunk_ids(t: &Value) -> Vec<String> {
    t["context"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| b["chunk_ids"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_owned()))
        .collect()
}

/// Ingests one chunk with `id` and `doc` about quokkas, asks for it, then asks again at
/// document granularity: it comes back byte for byte, then stays out — and the rest of the
/// corpus still comes back (the exclusion took nothing else with it).
async fn round_trips(id: &str, doc: &str) {
    let f = Fixture::new(&[]).await;
    let chunk = json!([{"_id": id, "document_id": doc, "title": "Quokkas", "text": "Quokkas live on Rottnest Island and are counted every March."}]);
    let (s, b) = call_json(&f.app, "POST", "/v1/documents", None, Some(chunk)).await;
    assert_eq!((s, b["new"].as_u64()), (StatusCode::OK, Some(1)), "{b}");
    // One document shown, so the next turn has the five others to give.
    let first = f.turn("s", json!({"question": "Where do quokkas live?", "limit": 1})).await;
    assert_eq!(docs(&first), [doc], "the document id round-trips: {first}");
    assert!(chunk_ids(&first).contains(&id.to_owned()), "the chunk id round-trips: {first}");
    let (_, traces) = call_json(&f.app, "GET", "/v1/sessions/s/turns", None, None).await;
    assert_eq!(traces[0]["context"][0]["document_id"], doc, "the stored trace holds it untouched");
    let next = f
        .turn(
            "s",
            // No relevance floor: the five others are unrelated to quokkas, and all must come.
            json!({"question": "Where do quokkas live?", "granularity": "document", "mode": "new", "memory": "client", "relevance_floor": 0}),
        )
        .await;
    assert!(!docs(&next).contains(&doc.to_owned()), "excluded by document: {next}");
    // Still the best match: pointed to (client memory), the hostile id byte for byte.
    assert_eq!(next["pointers"][0]["document_id"], doc, "{next}");
    assert_eq!(next["pointers"][0]["chunk_ids"][0], id, "{next}");
    assert!(!chunk_ids(&next).contains(&id.to_owned()), "excluded: {next}");
    assert_eq!(docs(&next).len(), 5, "the exclusion took nothing else: all five other documents come back: {next}");
    assert_eq!(next["trace"]["excluded"], 1);
}

macro_rules! turn_rejected {
    ($($name:ident: $body:expr => $status:expr;)+) => {$(
        #[tokio::test(flavor = "multi_thread")]
        async fn $name() {
            let f = Fixture::new(&[]).await;
            f.rejects_turn($body, $status).await;
        }
    )+};
}

turn_rejected! {
    turn_empty_question: json!({"question": ""}) => 400;
    turn_whitespace_question: json!({"question": " \n\t  "}) => 400;
    turn_huge_question: json!({"question": "why ".repeat(5_000)}) => 400;
    turn_question_wrong_type: json!({"question": 42}) => 400;
    turn_question_null: json!({"question": null}) => 400;
    turn_question_missing: json!({"budget": 100}) => 400;
    turn_unknown_field: json!({"question": "fees?", "budgett": 10}) => 400;
    turn_array_body: json!(["fees?"]) => 400;
    turn_budget_zero: json!({"question": "fees?", "budget": 0}) => 400;
    turn_budget_negative: json!({"question": "fees?", "budget": -5}) => 400;
    turn_budget_huge: json!({"question": "fees?", "budget": 1e30}) => 400;
    turn_budget_string: json!({"question": "fees?", "budget": "100"}) => 400;
    turn_limit_zero: json!({"question": "fees?", "limit": 0}) => 400;
    turn_group_size_zero: json!({"question": "fees?", "group_size": 0}) => 400;
    turn_bad_mode: json!({"question": "fees?", "mode": "fast"}) => 400;
    turn_bad_granularity: json!({"question": "fees?", "granularity": "page"}) => 400;
    turn_bad_consumption: json!({"question": "fees?", "consumption": "all"}) => 400;
    turn_bad_strategy: json!({"question": "fees?", "strategy": "magic"}) => 400;
}

#[tokio::test(flavor = "multi_thread")]
async fn turn_invalid_utf8_body() {
    let f = Fixture::new(&[]).await;
    f.rejects("/v1/sessions/s/turns", None, b"{\"question\": \"fe\xff\xfees\"}".to_vec(), 400).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn turn_broken_json() {
    let f = Fixture::new(&[]).await;
    let m = f.rejects("/v1/sessions/s/turns", None, b"{\"question\": \"fees?\"".to_vec(), 400).await;
    assert!(m.starts_with("invalid JSON body"), "{m}");
}

#[tokio::test(flavor = "multi_thread")]
async fn turn_empty_body() {
    let f = Fixture::new(&[]).await;
    f.rejects("/v1/sessions/s/turns", None, Vec::new(), 400).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn turn_oversized_body() {
    let f = Fixture::new(&[]).await;
    let mut body = b"{\"question\": \"".to_vec();
    body.extend(std::iter::repeat_n(b'a', ragctx_server::BODY_LIMIT));
    body.extend(b"\"}");
    f.rejects("/v1/sessions/s/turns", None, body, 413).await;
}

macro_rules! session_rejected {
    ($($name:ident: $id:expr;)+) => {$(
        #[tokio::test(flavor = "multi_thread")]
        async fn $name() {
            let f = Fixture::new(&[]).await;
            let path = format!("/v1/sessions/{}/turns", $id);
            let m = f.rejects(&path, None, json!({"question": "fees?"}).to_string().into_bytes(), 400).await;
            assert!(m.contains("session id"), "{m}");
        }
    )+};
}

session_rejected! {
    session_path_traversal: "..%2F..%2Fetc%2Fpasswd";
    session_too_long: "s".repeat(129);
    session_with_quote: "a%22b";
    session_with_space: "a%20b";
    session_with_newline: "a%0Ab";
    session_with_brackets: "%5Bx%5D";
    session_with_unicode: "%E6%96%87";
}

#[tokio::test(flavor = "multi_thread")]
async fn documents_broken_json_array() {
    let f = Fixture::new(&[]).await;
    f.rejects_documents(b"[{\"_id\": \"x\", \"text\": \"a\"}").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn documents_broken_line_in_jsonl_names_it_and_writes_nothing() {
    let f = Fixture::new(&[]).await;
    let body = b"{\"_id\": \"n1\", \"text\": \"new one\"}\n{\"_id\": \"n2\", \"text\": \"new two\"}\n{broken\n";
    let m = f.rejects_documents(body).await;
    assert!(m.contains(":3"), "names line 3: {m}");
}

#[tokio::test(flavor = "multi_thread")]
async fn documents_missing_text() {
    let f = Fixture::new(&[]).await;
    f.rejects_documents(br#"[{"_id": "n1", "title": "no text"}]"#).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn documents_missing_id() {
    let f = Fixture::new(&[]).await;
    f.rejects_documents(br#"[{"text": "no id"}]"#).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn documents_text_wrong_type() {
    let f = Fixture::new(&[]).await;
    f.rejects_documents(br#"[{"_id": "n1", "text": 42}]"#).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn documents_id_wrong_type() {
    let f = Fixture::new(&[]).await;
    f.rejects_documents(br#"[{"_id": ["n1"], "text": "array id"}]"#).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn documents_empty_text() {
    let f = Fixture::new(&[]).await;
    f.rejects_documents(br#"[{"_id": "n1", "text": ""}]"#).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn documents_whitespace_text() {
    let f = Fixture::new(&[]).await;
    f.rejects_documents(br#"[{"_id": "n1", "text": "  \n\t "}]"#).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn documents_duplicate_ids_in_one_request() {
    let f = Fixture::new(&[]).await;
    let m = f.rejects_documents(br#"[{"_id": "n1", "text": "one"}, {"_id": "n1", "text": "two"}]"#).await;
    assert!(m.contains("n1"), "names the id: {m}");
}

#[tokio::test(flavor = "multi_thread")]
async fn documents_invalid_utf8() {
    let f = Fixture::new(&[]).await;
    f.rejects_documents(b"{\"_id\": \"n1\", \"text\": \"caf\xe9\"}\n").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn documents_empty_body() {
    let f = Fixture::new(&[]).await;
    f.rejects_documents(b"").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn documents_empty_array() {
    let f = Fixture::new(&[]).await;
    f.rejects_documents(b"[]").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn documents_enormous_document_is_refused_whole() {
    let f = Fixture::new(&[]).await;
    let text = "word ".repeat((ragctx_server::BODY_LIMIT / 5) + 1);
    let body = json!([{"_id": "huge", "text": text}]).to_string().into_bytes();
    f.rejects("/v1/documents", None, body, 413).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_api_key() {
    let f = Fixture::new(&["key-one"]).await;
    f.rejects("/v1/sessions/s/turns", Some("key-onf"), json!({"question": "fees?"}).to_string().into_bytes(), 401)
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_api_key() {
    let f = Fixture::new(&["key-one"]).await;
    f.rejects("/v1/documents", None, corpus().to_string().into_bytes(), 401).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn another_keys_session_is_invisible_and_untouched() {
    let f = Fixture::new(&["key-one", "key-two"]).await;
    let uri = "/v1/sessions/victim/turns";
    let (s, _) = call_json(&f.app, "POST", uri, Some("key-one"), Some(json!({"question": "fees?"}))).await;
    assert_eq!(s, StatusCode::OK);
    for (method, path) in [("GET", uri), ("GET", "/v1/sessions/victim/turns/1"), ("DELETE", "/v1/sessions/victim")] {
        let (s, b) = call_json(&f.app, method, path, Some("key-two"), None).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{method} {path}: {b}");
    }
    let (s, t) = call_json(&f.app, "GET", uri, Some("key-one"), None).await;
    assert_eq!((s, t.as_array().map(Vec::len)), (StatusCode::OK, Some(1)), "the owner still has it");
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_without_user_message() {
    let f = Fixture::new(&[]).await;
    let body = json!({"model": "m", "user": "s", "messages": [{"role": "system", "content": "hi"}]});
    f.rejects("/v1/chat/completions", None, body.to_string().into_bytes(), 400).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_messages_wrong_type() {
    let f = Fixture::new(&[]).await;
    let body = json!({"model": "m", "user": "s", "messages": "fees?"});
    f.rejects("/v1/chat/completions", None, body.to_string().into_bytes(), 400).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_with_a_blank_question() {
    // (A chat without a session is no longer an error: its session comes from the first
    // user message.)
    let f = Fixture::new(&[]).await;
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "  \n "}]});
    f.rejects("/v1/chat/completions", None, body.to_string().into_bytes(), 400).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_with_a_hostile_session_id() {
    let f = Fixture::new(&[]).await;
    let body = json!({"model": "m", "user": "../../s\"]", "messages": [{"role": "user", "content": "fees?"}]});
    f.rejects("/v1/chat/completions", None, body.to_string().into_bytes(), 400).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_turn_number_is_not_found() {
    let f = Fixture::new(&[]).await;
    f.turn("s", json!({"question": "fees?"})).await;
    for path in ["/v1/sessions/s/turns/0", "/v1/sessions/s/turns/2", "/v1/sessions/nobody/turns"] {
        let (s, b) = call_json(&f.app, "GET", path, None, None).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{path}: {b}");
    }
    let (s, _) = call_json(&f.app, "GET", "/v1/sessions/s/turns/x", None, None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread")]
async fn question_with_control_characters_is_answered_and_stored_verbatim() {
    let f = Fixture::new(&[]).await;
    let q = "fees?\u{0}\u{7}\r\n\"]) or 1=1 --";
    let t = f.turn("s", json!({"question": q})).await;
    let (_, traces) = call_json(&f.app, "GET", "/v1/sessions/s/turns/1", None, None).await;
    assert_eq!(traces["question"], q, "{t}");
}

#[tokio::test(flavor = "multi_thread")]
async fn id_expression_fragment_round_trips() {
    round_trips("zz\"] or id >= 0 or doc_id in [\"zz", "doc_id in [\"zz\"] or true").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn id_double_quote_round_trips() {
    round_trips("say \"hi\"", "\"quoted\" doc").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn id_single_quote_round_trips() {
    round_trips("it's", "' or '1'='1").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn id_backslash_round_trips() {
    round_trips("back\\slash\\", "C:\\docs\\").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn id_brackets_round_trip() {
    round_trips("[a]]", "]]doc[[").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn id_newline_round_trips() {
    round_trips("line\nbreak\r\n", "doc\nwith\nlines").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn id_unicode_round_trips() {
    round_trips("文档/第一章#3 🚀", "Ünïcödé 文档").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn id_path_traversal_is_just_an_id() {
    round_trips("../../etc/passwd", "../../../root").await;
}
