//! `ragctx serve`: the HTTP API (DESIGN §4) over one [`Engine`], an OpenAI-compatible chat
//! front, API keys with a tenant and a role (DESIGN §8, [`auth`]), Prometheus metrics and a
//! page that shows each turn.
//!
//! Every handler resolves its caller first ([`auth::resolve`]: 401, 403) and reaches the
//! stores only through [`Unscoped::scoped`] with the caller's tenant: an id of another tenant
//! is missing there, so it answers exactly as a missing id does. Only admin calls (the
//! tenant listing) and the health probe touch the unscoped stores. A session belongs to its
//! tenant: every key of the keys file in a tenant sees the tenant's sessions; a key of the
//! bare `RAGCTX_API_KEYS` list keeps its sessions private to itself, as before tenants.
//!
//! ```no_run
//! # async fn demo(state: std::sync::Arc<ragctx_server::AppState>) {
//! let app = ragctx_server::router(state);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await.unwrap();
//! axum::serve(listener, app).await.unwrap();
//! # }
//! ```

pub mod auth;
mod documents;
mod error;
mod guard;
mod metrics;
pub mod openai;
mod request;

pub use auth::{Caller, Keys, Role};
pub use error::ApiError;
pub use metrics::Metrics;
pub(crate) use request::{body, json};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use ragctx_core::{SessionId, Tenant, Trace, TurnOverrides};
use ragctx_engine::{Engine, TurnInput, TurnSettings};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;

/// Largest request body accepted.
pub const BODY_LIMIT: usize = 32 << 20;

/// An engine over the unscoped stores, which hands out tenant-scoped engines only: a
/// handler cannot reach another tenant's chunks or sessions by mistake.
pub struct Unscoped(Engine);

impl Unscoped {
    /// `engine` must be over unscoped stores (`App::unscoped`).
    pub fn new(engine: Engine) -> Self {
        Unscoped(engine)
    }
    /// The engine as `tenant` sees it.
    pub fn scoped(&self, tenant: &Tenant) -> Engine {
        self.0.scoped(tenant)
    }
    /// Every tenant's stores: admin calls and the health probe only.
    pub(crate) fn every_tenant(&self) -> &Engine {
        &self.0
    }
}

pub struct AppState {
    /// The stores of every tenant; requests use [`Unscoped::scoped`] with their caller's tenant.
    pub unscoped: Unscoped,
    /// The tenant of calls without keys (no authentication) that name none.
    pub tenant: Tenant,
    /// Turn settings before per-request overrides (with the standing filter).
    pub settings: TurnSettings,
    /// API keys; none = no authentication (bind to loopback only).
    pub keys: Keys,
    pub metrics: Metrics,
    /// Per-request limit for a turn.
    pub turn_timeout: Duration,
    /// Per-request limit for an ingest.
    pub ingest_timeout: Duration,
    /// Vectors already computed (the data dir's cache, unscoped: each ingest sees it through
    /// its caller's tenant), for ingests; `None` embeds everything.
    pub embedding_cache: Option<Arc<dyn ragctx_core::EmbeddingCache>>,
}

/// The longest an ingest (`POST /v1/documents`, a document's delete) may run before the
/// caller gets a 503; the work itself finishes (a write is never cut half-way).
pub const INGEST_TIMEOUT: Duration = Duration::from_secs(1800);

impl AppState {
    /// The state `ragctx serve` runs (and the server tests, over the same factory's engine):
    /// every tenant's stores in `unscoped`, `tenant` for keyless calls, the configured turn
    /// `settings`, `keys`, a turn's deadline, an ingest's [`INGEST_TIMEOUT`], and the data
    /// dir's embedding cache where there is one.
    pub fn new(
        unscoped: Engine,
        tenant: Tenant,
        settings: TurnSettings,
        keys: Keys,
        turn_timeout: Duration,
        embedding_cache: Option<Arc<dyn ragctx_core::EmbeddingCache>>,
    ) -> AppState {
        AppState {
            unscoped: Unscoped::new(unscoped),
            tenant,
            settings,
            keys,
            metrics: Metrics::default(),
            turn_timeout,
            ingest_timeout: INGEST_TIMEOUT,
            embedding_cache,
        }
    }
}

pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .route("/v1/documents", post(documents::documents).get(documents::list_documents))
        .route("/v1/documents/{id}", axum::routing::delete(documents::delete_document))
        .route("/v1/sessions/{id}/turns", post(turn).get(turns))
        .route("/v1/sessions/{id}/turns/{n}", get(one_turn))
        .route("/v1/sessions/{id}", axum::routing::delete(delete_session))
        .route("/v1/sessions/{id}/reset", post(reset_session))
        .route("/v1/tenants", get(tenants))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route("/v1/models", get(openai::models))
        .merge(mcp_routes(&state))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard::guard))
        .layer(axum::middleware::from_fn_with_state(state.clone(), observe))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
}

/// `/mcp`: the MCP tools over streamable HTTP (DESIGN §9), behind the same keys, tenants and
/// roles as the rest of the API (a `read` key may use every tool: `forget` only changes the
/// caller's own sessions). Without keys, `Host` must be a loopback name (DNS rebinding).
fn mcp_routes(state: &Arc<AppState>) -> Router<Arc<AppState>> {
    let hosts = if state.keys.configured() {
        Vec::new()
    } else {
        ["localhost", "127.0.0.1", "::1", "[::1]"].map(String::from).to_vec()
    };
    Router::new()
        .nest_service("/mcp", ragctx_mcp::http_service(hosts, BODY_LIMIT))
        .layer(axum::middleware::from_fn_with_state(state.clone(), mcp_scope))
}

/// Resolves the caller of an MCP request before the protocol is read (401 and 403 as for any
/// route) and hands the tools its tenant-scoped engine.
async fn mcp_scope(
    State(state): State<Arc<AppState>>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let who = match caller(&state, req.headers()).and_then(|w| w.require(Role::Read, "use the MCP tools").map(|_| w)) {
        Ok(w) => w,
        Err(e) => return e.into_response(),
    };
    let scope = ragctx_mcp::Scope {
        engine: state.unscoped.scoped(&who.tenant),
        base: state.settings.clone(),
        session_prefix: who.ns.clone(),
        timeout: state.turn_timeout,
    };
    req.extensions_mut().insert(Arc::new(scope));
    // A body that is not a JSON-RPC message is answered as JSON-RPC says (-32700, -32600),
    // not as the transport's "unsupported media type".
    if req.method() == axum::http::Method::POST {
        let (parts, body) = req.into_parts();
        let bytes = match axum::body::to_bytes(body, BODY_LIMIT).await {
            Ok(b) => b,
            Err(_) => {
                let message = format!("the body is over {BODY_LIMIT} bytes");
                return error::ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
                    .into_response();
            }
        };
        if let Some((code, message)) = not_jsonrpc(&bytes) {
            let body = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
            return (StatusCode::BAD_REQUEST, Json(body)).into_response();
        }
        req = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
    }
    next.run(req).await
}

/// Why `body` is not one JSON-RPC 2.0 message, with JSON-RPC's code: -32700 (not JSON) or
/// -32600 (not a request, notification or response; batches are not in MCP since 2025-06-18).
fn not_jsonrpc(body: &[u8]) -> Option<(i32, String)> {
    let v: serde_json::Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return Some((-32700, format!("Parse error: the body is not JSON ({e})"))),
    };
    let has = |k: &str| v.get(k).is_some();
    let message = v.get("jsonrpc").and_then(|j| j.as_str()) == Some("2.0")
        && (v.get("method").is_some_and(|m| m.is_string()) || (has("id") && (has("result") || has("error"))));
    match v {
        _ if message => None,
        serde_json::Value::Array(_) => Some((-32600, "Invalid Request: JSON-RPC batches are not supported".into())),
        _ => Some((
            -32600,
            "Invalid Request: a JSON-RPC 2.0 message is an object with \"jsonrpc\": \"2.0\" and a \"method\" (or a response's \"result\" or \"error\")".into(),
        )),
    }
}

/// Every request: an id (the `x-request-id` header, and the `request_id` of an internal
/// error's answer), a `request` span its work runs in (turns and stages are its children), one
/// log line when it is answered, and its status and latency by route in the metrics.
async fn observe(
    State(state): State<Arc<AppState>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    use tracing::Instrument;
    let id = error::request_id();
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = req.method().clone();
    let span = tracing::info_span!("request", request_id = %id, method = %method, route = %route);
    let started = std::time::Instant::now();
    let mut res = error::REQUEST_ID.scope(id.clone(), next.run(req).instrument(span.clone())).await;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let status = res.status();
    span.in_scope(|| tracing::info!(status = status.as_u16(), ms, "answered"));
    state.metrics.request(&route, status.as_str(), ms);
    if status.is_client_error() || status.is_server_error() {
        state.metrics.error(status.as_str());
    }
    if let Ok(v) = header::HeaderValue::from_str(&id) {
        res.headers_mut().insert("x-request-id", v);
    }
    res
}

/// The caller of a request (see [`auth::resolve`]).
pub(crate) fn caller(state: &AppState, headers: &HeaderMap) -> Result<Caller, ApiError> {
    auth::resolve(&state.keys, &state.tenant, headers)
}

/// The stored session id for a caller's session id: another key's sessions are invisible.
pub(crate) fn session_id(ns: &Option<String>, id: &str) -> Result<SessionId, ApiError> {
    let id = SessionId::parse(id)?;
    Ok(match ns {
        Some(n) => id.private_to(n),
        None => id,
    })
}

/// How much longer than the turn deadline a request waits for the engine's own answer.
const TURN_GRACE: Duration = Duration::from_secs(2);

/// Runs blocking engine work off the async threads, bounded in time.
pub(crate) async fn blocking<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> ragctx_core::Result<T> + Send + 'static,
) -> Result<T, ApiError> {
    // The blocking work runs in the request's span (a turn's span is its child).
    let span = tracing::Span::current();
    match tokio::time::timeout(limit, tokio::task::spawn_blocking(move || span.in_scope(f))).await {
        Ok(Ok(r)) => r.map_err(ApiError::from),
        Ok(Err(e)) => Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", format!("worker failed: {e}"))),
        Err(_) => Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "timeout", format!("no answer within {limit:?}"))),
    }
}

/// A turn request: the question and the turn settings it overrides, with the names and
/// checks of the flags and config keys ([`TurnOverrides`]); an unknown key is refused.
#[derive(Debug, Default)]
pub struct TurnRequest {
    pub question: String,
    /// The request's filter holds together with the server's standing filter.
    pub settings: TurnOverrides,
}

/// `question`, then every other key read as a [`TurnOverrides`] field (serde's `flatten`
/// would let an unknown key through).
impl<'de> Deserialize<'de> for TurnRequest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let mut map = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        let question = match map.remove("question") {
            Some(serde_json::Value::String(q)) => q,
            Some(_) => return Err(D::Error::custom("`question` must be a string")),
            None => return Err(D::Error::missing_field("question")),
        };
        let settings = TurnOverrides::deserialize(serde_json::Value::Object(map)).map_err(D::Error::custom)?;
        Ok(TurnRequest { question, settings })
    }
}

/// The request body's schema: `question` and every field of [`TurnOverrides`], from the one
/// list that declares them.
impl utoipa::PartialSchema for TurnRequest {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        let kind = |t: &str| match t {
            "integer" => Type::Integer,
            "number" => Type::Number,
            "object" => Type::Object,
            _ => Type::String,
        };
        let mut o = ObjectBuilder::new()
            .property("question", ObjectBuilder::new().schema_type(Type::String).description(Some("the question")))
            .required("question");
        for field in TurnOverrides::fields() {
            o = o.property(
                field.name,
                ObjectBuilder::new().schema_type(kind(field.json_type)).description(Some(field.help())),
            );
        }
        o.into()
    }
}

impl utoipa::ToSchema for TurnRequest {}

/// A turn request that passed every check, ready to run: the stored session id, the
/// question and the settings over the server's.
pub struct PreparedTurn {
    pub session: SessionId,
    pub question: String,
    pub settings: TurnSettings,
}

impl TurnRequest {
    /// The checks every turn passes before any work (the HTTP turn and the OpenAI front):
    /// the session id, in the caller's namespace `ns`; the question (as the engine checks
    /// it); the settings applied over `base`.
    pub fn prepare(self, ns: &Option<String>, id: &str, base: &TurnSettings) -> Result<PreparedTurn, ApiError> {
        let session = session_id(ns, id)?;
        ragctx_engine::validate_question(&self.question)?;
        let settings = self.settings.apply(base)?;
        Ok(PreparedTurn { session, question: self.question, settings })
    }
}

/// Decodes a turn request body as `POST /v1/sessions/{id}/turns` does — its handler calls
/// this, and the fuzz target `api` drives it: JSON shape, setting overrides, session id.
pub fn decode_turn(body: &[u8], ns: &Option<String>, id: &str, base: &TurnSettings) -> Result<PreparedTurn, ApiError> {
    json::<TurnRequest>(body)?.prepare(ns, id, base)
}

/// Where a streamed turn's answer goes, piece by piece.
pub(crate) type OnDelta = Arc<dyn Fn(&str) + Send + Sync>;

/// Runs a prepared turn for a caller and shapes the answer with the caller's session id `id`.
pub(crate) async fn run_turn(
    state: &Arc<AppState>,
    who: &Caller,
    id: &str,
    turn: PreparedTurn,
    conversation: Option<Vec<ragctx_engine::Utterance>>,
    on_delta: Option<OnDelta>,
) -> Result<Trace, ApiError> {
    let PreparedTurn { session, question, settings } = turn;
    let engine = state.unscoped.scoped(&who.tenant);
    // The engine refuses to commit after the deadline; the wait is a little longer so its
    // own error (which names the cause) usually arrives before the bare timeout.
    let deadline = std::time::Instant::now() + state.turn_timeout;
    let turn = move || {
        let input = TurnInput {
            conversation: conversation.as_deref(),
            on_delta: on_delta.as_deref().map(|f| f as _),
            ..TurnInput::new(&session, &question, &settings).deadline(deadline)
        };
        engine.run(input)
    };
    let mut out = blocking(state.turn_timeout + TURN_GRACE, turn).await?;
    out.session_id = id.to_owned();
    state.metrics.turn(&out);
    Ok(out)
}

#[utoipa::path(post, path = "/v1/sessions/{id}/turns", params(("id" = String, Path, description = "session id")),
    request_body = TurnRequest,
    responses((status = 200, description = "the turn: answer, citations, context, trace", body = serde_json::Value),
              (status = 400, description = "the caller's mistake", body = ErrorBody), (status = 409, description = "other turns of the session kept committing while this one re-planned (8 times): retry", body = ErrorBody),
              (status = 503, description = "a backend is down", body = ErrorBody)))]
async fn turn(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    b: Result<Bytes, BytesRejection>,
) -> Result<Json<Trace>, ApiError> {
    let who = caller(&state, &headers)?;
    who.require(Role::Read, "run turns")?;
    let prepared = decode_turn(&body(b)?, &who.ns, &id, &state.settings)?;
    Ok(Json(run_turn(&state, &who, &id, prepared, None, None).await?))
}

async fn load_traces(state: &Arc<AppState>, headers: &HeaderMap, id: &str) -> Result<Vec<Trace>, ApiError> {
    let who = caller(state, headers)?;
    who.require(Role::Read, "read traces")?;
    let session = session_id(&who.ns, id)?;
    let sessions = state.unscoped.scoped(&who.tenant).sessions;
    let mut traces = blocking(state.turn_timeout, move || sessions.traces(&session)).await?;
    if traces.is_empty() {
        return Err(ApiError::not_found(format!("session {id} has no turns")));
    }
    for t in &mut traces {
        t.session_id = id.to_owned();
    }
    Ok(traces)
}

#[utoipa::path(get, path = "/v1/sessions/{id}/turns", params(("id" = String, Path, description = "session id")),
    responses((status = 200, description = "every trace of the session, oldest first", body = serde_json::Value),
              (status = 404, description = "unknown session", body = ErrorBody)))]
async fn turns(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Vec<Trace>>, ApiError> {
    Ok(Json(load_traces(&state, &headers, &id).await?))
}

#[utoipa::path(get, path = "/v1/sessions/{id}/turns/{n}", params(("id" = String, Path), ("n" = u64, Path, description = "turn number")),
    responses((status = 200, description = "the trace of turn n", body = serde_json::Value), (status = 404, description = "unknown session or turn", body = ErrorBody)))]
async fn one_turn(
    State(state): State<Arc<AppState>>,
    Path((id, n)): Path<(String, u64)>,
    headers: HeaderMap,
) -> Result<Json<Trace>, ApiError> {
    let traces = load_traces(&state, &headers, &id).await?;
    traces
        .into_iter()
        .find(|t| t.turn == n)
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("session {id} has no turn {n}")))
}

#[utoipa::path(delete, path = "/v1/sessions/{id}", params(("id" = String, Path)),
    responses((status = 204, description = "deleted"), (status = 404, description = "unknown session", body = ErrorBody)))]
async fn delete_session(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    let who = caller(&state, &headers)?;
    who.require(Role::Read, "delete sessions")?;
    let session = session_id(&who.ns, &id)?;
    let sessions = state.unscoped.scoped(&who.tenant).sessions;
    if blocking(state.turn_timeout, move || sessions.delete(&session)).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("session {id}")))
    }
}

#[utoipa::path(post, path = "/v1/sessions/{id}/reset", params(("id" = String, Path)),
    responses((status = 204, description = "the session's turns forgotten: the next turn starts afresh"), (status = 404, description = "unknown session", body = ErrorBody)))]
/// `POST /v1/sessions/{id}/reset`: forgets the session's turns, as `ragctx session reset`.
async fn reset_session(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    let who = caller(&state, &headers)?;
    who.require(Role::Read, "reset sessions")?;
    let session = session_id(&who.ns, &id)?;
    let sessions = state.unscoped.scoped(&who.tenant).sessions;
    if blocking(state.turn_timeout, move || sessions.reset(&session)).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("session {id}")))
    }
}

#[utoipa::path(get, path = "/healthz", responses((status = 200, description = "backends answer", body = serde_json::Value), (status = 503, description = "a backend is down", body = ErrorBody)))]
async fn healthz(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    // A probe of the backends; the chunk count (of every tenant) only for an admin.
    let admin = caller(&state, &headers).is_ok_and(|c| c.role == Role::Admin);
    let engine = state.unscoped.every_tenant().clone();
    let checked = blocking(Duration::from_secs(5), move || {
        let chunks = engine.vectors.len()?;
        engine.sessions.load(&SessionId::parse("healthz-probe")?)?;
        Ok(chunks)
    })
    .await;
    match checked {
        Ok(chunks) if admin => Json(serde_json::json!({"status": "ok", "chunks": chunks})).into_response(),
        Ok(_) => Json(serde_json::json!({"status": "ok"})).into_response(),
        Err(e) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", e.message).into_response(),
    }
}

#[utoipa::path(get, path = "/metrics", responses((status = 200, description = "Prometheus text format (an admin key where keys are set)", content_type = "text/plain"),
    (status = 403, description = "not an admin key", body = ErrorBody)))]
async fn metrics(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Result<Response, ApiError> {
    // Labels are route templates, statuses, stages, intents and paths: never a key, a tenant
    // or an id. Still the server's traffic as a whole: admins only where keys are set.
    caller(&state, &headers)?.require(Role::Admin, "read the metrics")?;
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.metrics.render()).into_response())
}

#[utoipa::path(get, path = "/v1/tenants", responses((status = 200, description = "every tenant with stored documents: tenant, documents, chunks (admin)", body = serde_json::Value),
    (status = 403, description = "not an admin key", body = ErrorBody)))]
/// `GET /v1/tenants`: the tenants that hold documents, with their document and chunk counts.
async fn tenants(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Result<Json<serde_json::Value>, ApiError> {
    caller(&state, &headers)?.require(Role::Admin, "list tenants")?;
    let vectors = state.unscoped.every_tenant().vectors.clone();
    let docs = blocking(state.turn_timeout, move || vectors.documents()).await?;
    let mut by: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    for d in &docs {
        let e = by.entry(ragctx_core::tenant_of(d.document_id.as_str())).or_default();
        e.0 += 1;
        e.1 += d.chunks;
    }
    let list: Vec<_> = by
        .into_iter()
        .map(|(t, (documents, chunks))| serde_json::json!({"tenant": t, "documents": documents, "chunks": chunks}))
        .collect();
    Ok(Json(serde_json::Value::Array(list)))
}

#[utoipa::path(get, path = "/", responses((status = 200, description = "the trace page", content_type = "text/html")))]
async fn page() -> Html<&'static str> {
    Html(include_str!("page.html"))
}

/// The body of every error response.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// `bad_request`, `unauthorized`, `forbidden`, `not_found`, `payload_too_large`, `timeout`, `unavailable`, `internal`.
    pub code: String,
    pub message: String,
}

/// The API description, generated from the handlers' annotations.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "ragctx",
        description = "Multi-turn RAG context engine: no repeats, no crowding, cited and budgeted context. Where keys are set every call under /v1 and /metrics needs `Authorization: Bearer KEY`; a key has a tenant and a role (read, write, admin); an admin key names the tenant of a call with `X-Ragctx-Tenant` (absent: its own, `default` unless set)."
    ),
    paths(
        turn,
        turns,
        one_turn,
        delete_session,
        reset_session,
        tenants,
        documents::documents,
        documents::list_documents,
        documents::delete_document,
        healthz,
        metrics,
        page,
        openai::chat_completions,
        openai::models,
        openapi
    ),
    components(schemas(TurnRequest, ErrorBody))
)]
pub struct ApiDoc;

#[utoipa::path(get, path = "/openapi.json", responses((status = 200, description = "this document", body = serde_json::Value)))]
async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(<ApiDoc as utoipa::OpenApi>::openapi())
}

#[cfg(test)]
mod jsonrpc_tests {
    #[test]
    fn malformed_bodies_get_jsonrpc_codes() {
        assert_eq!(super::not_jsonrpc(b"{not json").map(|e| e.0), Some(-32700));
        assert_eq!(super::not_jsonrpc(br#"{"hello":1}"#).map(|e| e.0), Some(-32600));
        assert_eq!(super::not_jsonrpc(b"[1,2]").map(|e| e.0), Some(-32600));
        assert_eq!(super::not_jsonrpc(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), None);
        assert_eq!(super::not_jsonrpc(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#), None);
        assert_eq!(super::not_jsonrpc(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#), None);
    }
}
