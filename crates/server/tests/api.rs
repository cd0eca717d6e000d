//! The HTTP API through the router, without opening a port (`oneshot`), on the real
//! engine: MiniLM, cl100k_base, the embedded index and session store.

use axum::http::StatusCode;
use ragctx_server::router;
use serde_json::{json, Value};

mod common;
use common::{call, call_json, state, state_with_deadline};

fn corpus() -> Value {
    json!([
        {"_id": "zz\"] or id >= 0 or doc_id in [\"zz", "document_id": "fees \"A\"", "title": "Court fees", "text": "Filing an appeal costs 775 dollars in the Court of Appeal."},
        {"_id": "w1", "document_id": "waiver", "title": "Fee waivers", "text": "You can ask the court to waive the appeal fees if you cannot afford them."},
        {"_id": "f1", "document_id": "forms", "title": "Appeal forms", "text": "Form APP-002 is the notice of appeal for civil cases."},
        {"_id": "d1", "document_id": "deadline", "title": "Deadlines", "text": "The notice of appeal must be filed within 60 days of the judgment."},
        {"_id": "l1", "document_id": "lawyer", "title": "Finding a lawyer", "text": "Legal aid offices help people who cannot pay for a lawyer."}
    ])
}

#[tokio::test(flavor = "multi_thread")]
async fn documents_turns_traces_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let app = router(state(&[], dir.path()));
    let (s, b) = call_json(&app, "POST", "/v1/documents", None, Some(corpus())).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!((b["chunks"].as_u64(), b["new"].as_u64()), (Some(5), Some(5)));

    let (s, t1) = call_json(
        &app,
        "POST",
        "/v1/sessions/s1/turns",
        None,
        Some(json!({"question": "How much does an appeal cost?", "limit": 2})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{t1}");
    for k in ["session_id", "turn", "intent", "answer", "citations", "context", "trace"] {
        assert!(t1.get(k).is_some(), "{k} in {t1}");
    }
    assert_eq!(t1["session_id"], "s1");
    assert_eq!(t1["context"].as_array().unwrap().len(), 2);
    let first: Vec<Value> = t1["context"].as_array().unwrap().iter().map(|b| b["document_id"].clone()).collect();
    assert!(first.contains(&json!("fees \"A\"")), "hostile ids come back: {first:?}");
    let (_, t2) = call_json(
        &app,
        "POST",
        "/v1/sessions/s1/turns",
        None,
        Some(
            json!({"question": "How much does an appeal cost?", "mode": "new", "granularity": "document", "limit": 2, "memory": "client"}),
        ),
    )
    .await;
    assert_eq!(t2["turn"], 2);
    assert!(t2["context"].as_array().unwrap().iter().all(|b| !first.contains(&b["document_id"])), "exclusion: {t2}");
    // `client` memory points to what the caller already holds instead of re-sending it.
    assert_eq!(t2["trace"]["memory"], "client");
    let pointed: Vec<Value> = t2["pointers"].as_array().unwrap().iter().map(|p| p["document_id"].clone()).collect();
    assert!(!pointed.is_empty() && pointed.iter().all(|d| first.contains(d)), "pointers: {t2}");

    let (s, all) = call_json(&app, "GET", "/v1/sessions/s1/turns", None, None).await;
    assert_eq!((s, all.as_array().unwrap().len()), (StatusCode::OK, 2));
    let (s, one) = call_json(&app, "GET", "/v1/sessions/s1/turns/2", None, None).await;
    assert_eq!((s, one["turn"].as_u64()), (StatusCode::OK, Some(2)));
    assert_eq!(one["trace"]["context_tokens"], t2["trace"]["context_tokens"], "the trace equals the turn's answer");

    for (uri, body, status, code) in [
        ("/v1/sessions/s1/turns", json!({"question": "   "}), 400, "bad_request"),
        ("/v1/sessions/s1/turns", json!({"question": "q", "mode": "sideways"}), 400, "bad_request"),
        ("/v1/sessions/s1/turns", json!({"question": "q", "colour": 1}), 400, "bad_request"),
        ("/v1/sessions/s1/turns", json!({"question": "q", "memory": "model"}), 400, "bad_request"),
        ("/v1/sessions/s1/turns", json!({"question": "q", "group_margin": -1.0}), 400, "bad_request"),
        ("/v1/sessions/bad%20id/turns", json!({"question": "q"}), 400, "bad_request"),
        ("/v1/documents", json!([{"_id": "x", "text": ""}]), 400, "bad_request"),
    ] {
        let (s, b) = call_json(&app, "POST", uri, None, Some(body)).await;
        assert_eq!((s.as_u16(), b["code"].as_str()), (status, Some(code)), "{uri}: {b}");
        assert!(b["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    let (s, b) = call(&app, "POST", "/v1/sessions/s1/turns", None, Some(b"{not json".to_vec())).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{}", String::from_utf8_lossy(&b));
    let b: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(b["code"], "bad_request");
    assert!(b["message"].as_str().unwrap().starts_with("invalid JSON body"), "{b}");
    let (s, b) = call(&app, "POST", "/v1/documents", None, Some(vec![b' '; ragctx_server::BODY_LIMIT + 1])).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{}", String::from_utf8_lossy(&b));
    assert_eq!(serde_json::from_slice::<Value>(&b).unwrap()["code"], "payload_too_large");
    let (s, b) = call_json(&app, "GET", "/v1/sessions/nobody/turns", None, None).await;
    assert_eq!((s, b["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")));
    let (s, b) = call_json(&app, "GET", "/v1/sessions/s1/turns/99", None, None).await;
    assert_eq!((s, b["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")));

    let (s, _) = call(&app, "DELETE", "/v1/sessions/s1", None, None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = call(&app, "DELETE", "/v1/sessions/s1", None, None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    let (s, h) = call_json(&app, "GET", "/healthz", None, None).await;
    assert_eq!((s, h["chunks"].as_u64()), (StatusCode::OK, Some(5)));
    let (_, m) = call(&app, "GET", "/metrics", None, None).await;
    let m = String::from_utf8(m).unwrap();
    assert!(m.contains("ragctx_turns_total{intent=\"new\"} 2"), "{m}");
    assert!(m.contains("ragctx_turn_stage_ms_bucket{stage=\"search\""), "{m}");
    assert!(m.contains("ragctx_errors_total{code=\"400\"}"), "{m}");
    assert!(m.contains("ragctx_search_path_total{path=\"exact\"} 2"), "{m}");
    let (s, page) = call(&app, "GET", "/", None, None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(String::from_utf8(page).unwrap().contains("what each turn saw"));
}

#[tokio::test(flavor = "multi_thread")]
async fn keys_scope_sessions_and_openai_clients_work() {
    let dir = tempfile::tempdir().unwrap();
    let app = router(state(&["key-one", "key-two"], dir.path()));
    let (s, b) = call_json(&app, "POST", "/v1/documents", None, Some(corpus())).await;
    assert_eq!((s, b["code"].as_str()), (StatusCode::UNAUTHORIZED, Some("unauthorized")));
    let (s, _) = call_json(&app, "POST", "/v1/documents", Some("key-one"), Some(corpus())).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) =
        call_json(&app, "POST", "/v1/sessions/mine/turns", Some("wrong"), Some(json!({"question": "fees?"}))).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _) =
        call_json(&app, "POST", "/v1/sessions/mine/turns", Some("key-one"), Some(json!({"question": "fees?"}))).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = call_json(&app, "GET", "/v1/sessions/mine/turns", Some("key-two"), None).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "another key's session is invisible");
    let (s, _) = call(&app, "DELETE", "/v1/sessions/mine", Some("key-two"), None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, t) = call_json(&app, "GET", "/v1/sessions/mine/turns", Some("key-one"), None).await;
    assert_eq!((s, t[0]["session_id"].as_str()), (StatusCode::OK, Some("mine")));

    let req = json!({"model": "gpt-x", "user": "chat1", "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "When must the notice of appeal be filed?"}]}]});
    let (s, c) = call_json(&app, "POST", "/v1/chat/completions", Some("key-one"), Some(req.clone())).await;
    assert_eq!(s, StatusCode::OK, "{c}");
    assert_eq!(c["object"], "chat.completion");
    assert_eq!(c["model"], "gpt-x");
    let content = c["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(content.contains("60 days") && content.contains('['), "{content}");
    assert!(!c["ragctx"]["citations"].as_array().unwrap().is_empty());
    assert!(c["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    let mut stream = req.clone();
    stream["stream"] = json!(true);
    let (s, body) =
        call(&app, "POST", "/v1/chat/completions", Some("key-one"), Some(stream.to_string().into_bytes())).await;
    assert_eq!(s, StatusCode::OK);
    let text = String::from_utf8(body).unwrap();
    assert!(text.starts_with("data: {") && text.ends_with("data: [DONE]\n\n"), "{text}");
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|l| *l != "[DONE]")
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(events.iter().all(|e| e["object"] == "chat.completion.chunk"));
    assert_eq!(events.last().unwrap()["choices"][0]["finish_reason"], "stop");
    assert_eq!(events.last().unwrap()["ragctx"]["turn"], 2, "same session, second turn");
    let streamed: String = events.iter().filter_map(|e| e["choices"][0]["delta"]["content"].as_str()).collect();
    assert!(!streamed.is_empty());
    // No `user`, no header: the session comes from the first user message, so a client
    // that resends the conversation (as stock clients do) stays in one session.
    let first = "When is the quokka festival?";
    let (s, b) = call_json(
        &app,
        "POST",
        "/v1/chat/completions",
        Some("key-one"),
        Some(json!({"messages": [{"role": "user", "content": first}]})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let derived = ragctx_server::openai::derived_session(first);
    assert!(derived.starts_with("chat-") && derived.len() == 21, "{derived}");
    assert_eq!((b["ragctx"]["session_id"].as_str(), b["ragctx"]["turn"].as_u64()), (Some(derived.as_str()), Some(1)));
    let (s, b) = call_json(
        &app,
        "POST",
        "/v1/chat/completions",
        Some("key-one"),
        Some(json!({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": first},
                                  {"role": "assistant", "content": "In March."}, {"role": "user", "content": "Who counts them?"}]})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!((b["ragctx"]["session_id"].as_str(), b["ragctx"]["turn"].as_u64()), (Some(derived.as_str()), Some(2)));
    assert!(b["ragctx"]["trace"]["excluded"].as_u64().unwrap() > 0, "the second turn excludes what the first showed");
    // Another conversation that opens with the same words starts the session afresh: nothing
    // the first one was shown is excluded, carried or put in its prompt.
    let (s, b) = call_json(
        &app,
        "POST",
        "/v1/chat/completions",
        Some("key-one"),
        Some(json!({"messages": [{"role": "user", "content": first}]})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["ragctx"]["session_id"].as_str(), Some(derived.as_str()));
    assert_eq!(b["ragctx"]["trace"]["excluded"], 0, "{}", b["ragctx"]["trace"]);
    assert!(b["ragctx"]["context"].as_array().unwrap().iter().all(|c| c["carried_from"].is_null()));
    // Stock clients list the models first.
    let (s, b) = call_json(&app, "GET", "/v1/models", Some("key-one"), None).await;
    assert_eq!((s, b["object"].as_str(), b["data"][0]["id"].as_str()), (StatusCode::OK, Some("list"), Some("ragctx")));
    let (s, _) = call_json(&app, "GET", "/v1/models", None, None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "models need a key where keys are set");
}

#[tokio::test(flavor = "multi_thread")]
async fn openapi_describes_every_route_the_router_serves() {
    let dir = tempfile::tempdir().unwrap();
    let app = router(state(&[], dir.path()));
    let (s, doc) = call_json(&app, "GET", "/openapi.json", None, None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let routes = [
        ("get", "/"),
        ("get", "/healthz"),
        ("get", "/metrics"),
        ("get", "/openapi.json"),
        ("post", "/v1/documents"),
        ("get", "/v1/documents"),
        ("delete", "/v1/documents/{id}"),
        ("post", "/v1/sessions/{id}/turns"),
        ("get", "/v1/sessions/{id}/turns"),
        ("get", "/v1/sessions/{id}/turns/{n}"),
        ("delete", "/v1/sessions/{id}"),
        ("post", "/v1/sessions/{id}/reset"),
        ("get", "/v1/tenants"),
        ("post", "/v1/chat/completions"),
        ("get", "/v1/models"),
    ];
    let paths = doc["paths"].as_object().unwrap();
    let documented: usize = paths.values().map(|p| p.as_object().unwrap().len()).sum();
    assert_eq!(documented, routes.len(), "{}", serde_json::to_string_pretty(&doc["paths"]).unwrap());
    for (method, path) in routes {
        assert!(paths[path].get(method).is_some(), "{method} {path} documented");
        // And served: routing answers with something other than 404/405 for the route itself.
        let uri = path.replace("{id}", "doc-check").replace("{n}", "1");
        let (status, _) = call(&app, &method.to_uppercase(), &uri, None, Some(b"{}".to_vec())).await;
        assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        if !path.contains("{id}") {
            assert_ne!(status, StatusCode::NOT_FOUND, "{method} {path}");
        }
    }
    assert!(doc["components"]["schemas"]["TurnRequest"]["properties"]["question"].is_object());
}

/// A turn that runs past the deadline answers 503 and is not recorded: the client that was
/// told "failed" never finds it in the session (the engine checks the deadline before it
/// commits). A 1 ms deadline is always missed: embedding the question alone takes longer.
#[tokio::test(flavor = "multi_thread")]
async fn a_turn_past_its_deadline_is_a_503_and_not_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let app = router(state_with_deadline(&[], dir.path(), std::time::Duration::from_millis(1)));
    let (s, b) = call_json(&app, "POST", "/v1/documents", None, Some(corpus())).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let turn = json!({"question": "How much does an appeal cost?"});
    let (s, b) = call_json(&app, "POST", "/v1/sessions/late/turns", None, Some(turn)).await;
    assert_eq!((s, b["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable")), "{b}");
    assert!(b["message"].as_str().unwrap().contains("not recorded"), "{b}");
    let (_, turns) = call_json(&app, "GET", "/v1/sessions/late/turns", None, None).await;
    assert_eq!(turns.as_array().map_or(0, Vec::len), 0, "nothing recorded: {turns}");
}

#[tokio::test(flavor = "multi_thread")]
async fn documents_are_listed_replaced_whole_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let app = router(state(&[], dir.path()));
    let (s, b) = call_json(&app, "POST", "/v1/documents", None, Some(corpus())).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (s, t1) =
        call_json(&app, "POST", "/v1/sessions/d/turns", None, Some(json!({"question": "appeal forms", "limit": 5})))
            .await;
    assert_eq!(s, StatusCode::OK, "{t1}");

    // A document sent again with other chunks is replaced whole.
    let two = json!([
        {"_id": "f2", "document_id": "forms", "title": "Appeal forms", "text": "Form APP-003 asks for the record."},
        {"_id": "f3", "document_id": "forms", "title": "Appeal forms", "text": "Form APP-004 lists the parties."}
    ]);
    let (s, b) = call_json(&app, "POST", "/v1/documents", None, Some(two)).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!((b["new"].as_u64(), b["updated"].as_u64(), b["removed"].as_u64()), (Some(2), Some(0), Some(1)), "{b}");
    let (s, list) = call_json(&app, "GET", "/v1/documents", None, None).await;
    assert_eq!(s, StatusCode::OK);
    let forms = list.as_array().unwrap().iter().find(|d| d["document_id"] == "forms").unwrap().clone();
    assert_eq!(forms["chunks"], 2, "{list}");

    // Deleted: 204, then 404; no later turn shows it, and the session keeps its history.
    let (s, _) = call_json(&app, "DELETE", "/v1/documents/waiver", None, None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, b) = call_json(&app, "DELETE", "/v1/documents/waiver", None, None).await;
    assert_eq!((s, b["code"].as_str()), (StatusCode::NOT_FOUND, Some("not_found")), "{b}");
    let (_, t2) = call_json(
        &app,
        "POST",
        "/v1/sessions/fresh/turns",
        None,
        Some(json!({"question": "Can the court waive the fees?", "limit": 5})),
    )
    .await;
    assert!(t2["context"].as_array().unwrap().iter().all(|b| b["document_id"] != "waiver"), "{t2}");
    let (s, traces) = call_json(&app, "GET", "/v1/sessions/d/turns", None, None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(traces[0]["context"], t1["context"], "the session's history is untouched");
    // A document id with a space and quotes, percent-encoded in the path; one with a slash.
    let (s, _) = call_json(&app, "DELETE", "/v1/documents/fees%20%22A%22", None, None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let nested =
        json!([{"_id": "g/1#0", "document_id": "guides/appeal.md", "title": "Guide", "text": "Appeal guide."}]);
    let (s, _) = call_json(&app, "POST", "/v1/documents", None, Some(nested)).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = call_json(&app, "DELETE", "/v1/documents/guides%2Fappeal.md", None, None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);

    // `?append=true` adds to a document instead of replacing it.
    let more =
        json!([{"_id": "f4", "document_id": "forms", "title": "Appeal forms", "text": "Form APP-005 is for costs."}]);
    let (s, b) = call_json(&app, "POST", "/v1/documents?append=true", None, Some(more)).await;
    assert_eq!((s, b["removed"].as_u64()), (StatusCode::OK, Some(0)), "{b}");
    let (_, list) = call_json(&app, "GET", "/v1/documents", None, None).await;
    let forms = list.as_array().unwrap().iter().find(|d| d["document_id"] == "forms").unwrap().clone();
    assert_eq!(forms["chunks"], 3, "{list}");
    let (s, _) = call_json(&app, "POST", "/v1/documents?replace=no", None, Some(json!([]))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}
