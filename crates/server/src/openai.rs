//! `POST /v1/chat/completions`, OpenAI-compatible: any OpenAI client can talk to ragctx.
//! The session comes from `user` or the `X-Session-Id` header; the last user message is
//! the question and the messages before it are the conversation (`engine` memory puts them
//! in the prompt); citations and the trace ride in the extra field `ragctx`.

use crate::{body, caller, json, run_turn, ApiError, AppState, TurnRequest};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::Json;
use ragctx_engine::Utterance;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Deserialize)]
struct ChatRequest {
    #[serde(default)]
    model: Option<String>,
    messages: Vec<Value>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    user: Option<String>,
}

/// What a chat completion request asks for.
#[derive(Debug)]
pub struct ChatTurn {
    pub session: String,
    pub question: String,
    /// The user and assistant messages before the question, oldest first.
    pub conversation: Vec<Utterance>,
    pub stream: bool,
    pub model: String,
}

/// Decodes a chat completion body (and the X-Session-Id header) the way
/// `POST /v1/chat/completions` does (the fuzz target `api` drives it).
pub fn decode_chat(body: &[u8], session_header: Option<&str>) -> Result<ChatTurn, ApiError> {
    let req: ChatRequest = json(body)?;
    let session = session_header
        .map(str::to_owned)
        .or(req.user.clone())
        .ok_or_else(|| ApiError::bad_request("no session: set the `user` field or the X-Session-Id header"))?;
    crate::session_id(&None, &session)?;
    let last_user = req
        .messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .ok_or_else(|| ApiError::bad_request("no user message in `messages`"))?;
    let question = text_of(&req.messages[last_user]["content"]);
    let conversation = req.messages[..last_user]
        .iter()
        .filter_map(|m| match m["role"].as_str() {
            Some("user") => Some(Utterance::user(text_of(&m["content"]))),
            Some("assistant") => Some(Utterance::assistant(text_of(&m["content"]))),
            _ => None,
        })
        .filter(|u| !u.text.trim().is_empty())
        .collect();
    Ok(ChatTurn {
        session,
        question,
        conversation,
        stream: req.stream,
        model: req.model.unwrap_or_else(|| "ragctx".into()),
    })
}

/// Text of a message's content: a string, or the text parts of an array.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

#[utoipa::path(post, path = "/v1/chat/completions", request_body(content = serde_json::Value, description = "an OpenAI chat completion request; the session comes from `user` or X-Session-Id"),
    responses((status = 200, description = "a chat completion (or server-sent chunks with stream: true); citations, context and trace in `ragctx`", body = serde_json::Value),
              (status = 400, description = "no session or no user message", body = crate::ErrorBody)))]
pub async fn chat_completions(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    b: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let ns = caller(&state, &headers)?;
    let header = headers.get("x-session-id").and_then(|v| v.to_str().ok());
    let ChatTurn { session, question, conversation, stream, model } = decode_chat(&body(b)?, header)?;
    // A client that sends only the question leaves the conversation to the session.
    let conversation = (!conversation.is_empty()).then_some(conversation);
    let out = run_turn(&state, &ns, &session, TurnRequest { question, ..Default::default() }, conversation).await?;
    let created = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let id = format!("chatcmpl-ragctx-{}-{}", out.session_id, out.turn);
    let completion_tokens = state.engine.counter.count(&out.answer);
    let mut extra = json!({"session_id": out.session_id, "turn": out.turn, "intent": out.intent, "citations": out.citations, "context": out.context, "trace": out.trace});
    if let Some(p) = &out.pointers {
        extra["pointers"] = json!(p);
    }
    if !stream {
        let body = json!({
            "id": id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": out.answer}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": out.trace.prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": out.trace.prompt_tokens + completion_tokens},
            "ragctx": extra,
        });
        return Ok(Json(body).into_response());
    }
    // Server-sent events in the standard chunk format: role, content, stop, [DONE].
    let chunk = |delta: Value, finish: Value, extra: Option<&Value>| {
        let mut c = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        if let Some(e) = extra {
            c["ragctx"] = e.clone();
        }
        format!("data: {c}\n\n")
    };
    let mut sse = chunk(json!({"role": "assistant", "content": ""}), Value::Null, None);
    let words: Vec<&str> = out.answer.split_inclusive(' ').collect();
    for piece in words.chunks(8) {
        sse.push_str(&chunk(json!({"content": piece.concat()}), Value::Null, None));
    }
    sse.push_str(&chunk(json!({}), json!("stop"), Some(&extra)));
    sse.push_str("data: [DONE]\n\n");
    Ok(([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], sse).into_response())
}
