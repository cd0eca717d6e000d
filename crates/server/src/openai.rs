//! `POST /v1/chat/completions` and `GET /v1/models`, OpenAI-compatible: stock OpenAI
//! clients talk to ragctx unchanged. The session comes from the `X-Session-Id` header, else
//! `user`, else it is derived from the conversation's first user message (`chat-` and 16 hex
//! digits of its SHA-256: a client that resends the whole conversation keeps its session;
//! the first request of a conversation starts it afresh and the prompt carries the client's
//! messages only, so two conversations that open alike never see each other's turns);
//! the last user message is the question and the messages before it are the conversation
//! (`engine` memory puts them in the prompt); citations and the trace ride in the extra
//! field `ragctx`. With `stream: true` the model's pieces are forwarded as they arrive and
//! the citations, context, trace and the recorded answer come in the last chunk. An extra
//! body field `filter` (the filter language, DESIGN §8) holds with the standing filter.

use crate::{body, caller, json, run_turn, ApiError, AppState, Caller, OnDelta, PreparedTurn, Role, TurnRequest};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::StreamExt;
use ragctx_core::{Filter, Trace};
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
    #[serde(default)]
    filter: Option<Filter>,
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
    /// The session was derived from the first user message (no header, no `user`).
    pub derived: bool,
    /// The turn's own filter (checked), if the body has one.
    pub filter: Option<Filter>,
}

/// Decodes a chat completion body (and the X-Session-Id header) the way
/// `POST /v1/chat/completions` does (the fuzz target `api` drives it).
pub fn decode_chat(body: &[u8], session_header: Option<&str>) -> Result<ChatTurn, ApiError> {
    let req: ChatRequest = json(body)?;
    let last_user = req
        .messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .ok_or_else(|| ApiError::bad_request("no user message in `messages`"))?;
    let (session, derived) = match session_header.map(str::to_owned).or(req.user.clone()) {
        Some(s) => (s, false),
        None => {
            let first = req.messages.iter().find(|m| m["role"] == "user").map(|m| text_of(&m["content"]));
            (derived_session(&first.unwrap_or_default()), true)
        }
    };
    crate::session_id(&None, &session)?;
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
        derived,
        filter: req.filter,
    })
}

/// The session of a conversation that names none: `chat-` and the first 16 hex digits of
/// the SHA-256 of its first user message.
pub fn derived_session(first_user_message: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(first_user_message.as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("chat-{hex}")
}

/// Text of a message's content: a string, or the text parts of an array.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

#[utoipa::path(get, path = "/v1/models",
    responses((status = 200, description = "the one model this server answers as: `ragctx`", body = serde_json::Value)))]
pub async fn models(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Result<Response, ApiError> {
    caller(&state, &headers)?.require(Role::Read, "list models")?;
    Ok(Json(
        json!({"object": "list", "data": [{"id": "ragctx", "object": "model", "created": 0, "owned_by": "ragctx"}]}),
    )
    .into_response())
}

#[utoipa::path(post, path = "/v1/chat/completions", request_body(content = serde_json::Value, description = "an OpenAI chat completion request; the session comes from X-Session-Id, `user`, or the first user message"),
    responses((status = 200, description = "a chat completion (or server-sent chunks with stream: true); citations, context and trace in `ragctx`", body = serde_json::Value),
              (status = 400, description = "no user message", body = crate::ErrorBody)))]
pub async fn chat_completions(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    b: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let who = caller(&state, &headers)?;
    who.require(Role::Read, "run turns")?;
    let engine = state.unscoped.scoped(&who.tenant);
    let header = match headers.get("x-session-id") {
        None => None,
        Some(v) => Some(
            v.to_str()
                .map_err(|_| ApiError::bad_request("X-Session-Id: use ASCII letters, digits, '.', '_', ':' or '-'"))?,
        ),
    };
    let ChatTurn { session, question, conversation, stream, model, derived, filter } = decode_chat(&body(b)?, header)?;
    let conversation = if derived {
        // Another conversation may have opened with the same words: the prompt carries this
        // client's messages only, and a conversation's first request starts the session
        // afresh (nothing shown to the other is excluded, carried or reshown here).
        if conversation.is_empty() {
            let id = crate::session_id(&who.ns, &session)?;
            let sessions = engine.sessions.clone();
            crate::blocking(state.turn_timeout, move || sessions.reset(&id)).await?;
        }
        Some(conversation)
    } else {
        // A client that sends only the question leaves the conversation to the session.
        (!conversation.is_empty()).then_some(conversation)
    };
    let created = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let request = TurnRequest { question, settings: ragctx_core::TurnOverrides { filter, ..Default::default() } }
        .prepare(&who.ns, &session, &state.settings)?;
    if stream {
        return stream_turn(state, who, session, request, conversation, model, created).await;
    }
    let out = run_turn(&state, &who, &session, request, conversation, None).await?;
    let id = format!("chatcmpl-ragctx-{}-{}", out.session_id, out.turn);
    let completion_tokens = engine.counter.count(&out.answer);
    let body = json!({
        "id": id, "object": "chat.completion", "created": created, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": out.answer}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": out.trace.prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": out.trace.prompt_tokens + completion_tokens},
        "ragctx": extra(&out),
    });
    Ok(Json(body).into_response())
}

/// What ragctx adds to a completion: the turn's citations, context, trace (and pointers).
fn extra(out: &Trace) -> Value {
    let mut extra = json!({"session_id": out.session_id, "turn": out.turn, "intent": out.intent(), "citations": out.citations, "context": out.context, "trace": out.trace});
    if out.trace.memory == ragctx_core::Memory::Client {
        let p = &out.pointers;
        extra["pointers"] = json!(p);
    }
    extra
}

/// What a streamed turn sends on: the model's pieces, then the turn.
enum Event {
    Delta(String),
    Done(Box<Result<Trace, ApiError>>),
}

/// Server-sent events in the standard chunk format: a role chunk, a content chunk per piece
/// the model produced (forwarded as it arrives), a stop chunk carrying `ragctx` (with the
/// recorded answer), then `[DONE]`. A failure before the first piece is an ordinary HTTP
/// error; one after it is an `error` event before `[DONE]`.
async fn stream_turn(
    state: Arc<AppState>,
    who: Caller,
    session: String,
    request: PreparedTurn,
    conversation: Option<Vec<Utterance>>,
    model: String,
    created: u64,
) -> Result<Response, ApiError> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let pieces = tx.clone();
    let on_delta: OnDelta = Arc::new(move |piece: &str| {
        let _ = pieces.send(Event::Delta(piece.to_owned()));
    });
    let id = format!("chatcmpl-ragctx-{session}-{created}");
    let span = tracing::Span::current();
    let turn = async move {
        let r = run_turn(&state, &who, &session, request, conversation, Some(on_delta)).await;
        let _ = tx.send(Event::Done(Box::new(r)));
    };
    tokio::spawn(tracing::Instrument::instrument(turn, span));
    let first = rx.recv().await.unwrap_or_else(|| {
        Event::Done(Box::new(Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the turn ended without a word",
        ))))
    });
    let first = match first {
        Event::Done(done) => match *done {
            Err(e) => return Err(e),
            ok => Event::Done(Box::new(ok)),
        },
        delta => delta,
    };
    let chunk = move |delta: Value, finish: Value, extra: Option<Value>| {
        let mut c = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        if let Some(e) = extra {
            c["ragctx"] = e;
        }
        format!("data: {c}\n\n")
    };
    let role = chunk(json!({"role": "assistant", "content": ""}), Value::Null, None);
    let sse = move |event: Event| -> String {
        match event {
            Event::Delta(piece) => chunk(json!({"content": piece}), Value::Null, None),
            Event::Done(done) => match *done {
                Ok(out) => {
                    let mut e = extra(&out);
                    e["answer"] = json!(out.answer);
                    chunk(json!({}), json!("stop"), Some(e)) + "data: [DONE]\n\n"
                }
                Err(e) => format!("data: {}\n\ndata: [DONE]\n\n", json!({"error": e.public_body()})),
            },
        }
    };
    let finished = matches!(first, Event::Done(_));
    let opening = role + &sse(first);
    let rest = futures_util::stream::unfold((rx, sse, finished), |(mut rx, sse, done)| async move {
        if done {
            return None;
        }
        let event = rx.recv().await?;
        let finished = matches!(event, Event::Done(_));
        Some((Ok::<_, std::convert::Infallible>(sse(event)), (rx, sse, finished)))
    });
    let body = futures_util::stream::once(async move { Ok(opening) }).chain(rest);
    Ok((
        [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")],
        axum::body::Body::from_stream(body),
    )
        .into_response())
}
