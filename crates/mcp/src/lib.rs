#![warn(missing_docs)]
//! ragctx as an MCP tool server (DESIGN §9): a search tool that never hands an agent what it
//! already holds. Each `search` is a retrieve-only turn of the agent's session in `client`
//! memory — the agent's context keeps every earlier result — so a chunk it holds is never
//! sent again, and one that still ranks comes back as a one-line pointer. `open` shows a held
//! chunk again on request; `forget` lets chunks the host dropped come back; `documents` lists
//! what can be found. Sessions travel as tool arguments (the 2026-07-28 spec is stateless),
//! and every call is a step of the session's one history (`ragctx trace`,
//! `GET /v1/sessions/{id}/turns`).
//!
//! The same [`Tools`] serve stdio (`ragctx mcp`, [`serve_stdio`]) and streamable HTTP
//! (`ragctx serve` at `/mcp`, [`http_service`]): over HTTP the server's own key check runs
//! first and puts the caller's [`Scope`] in the request's extensions.

use ragctx_core::{ChunkId, Error, Filter, Memory, Mode, SessionId, Trace, TurnOverrides};
use ragctx_engine::{Engine, TurnInput, TurnSettings};
use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Default of `search`'s `budget`: tokens of one call's blocks and pointers (docs/agents.md).
pub const DEFAULT_SEARCH_BUDGET: usize = 2_000;
/// Default of `search`'s `limit`: results of one call at most.
pub const DEFAULT_SEARCH_LIMIT: usize = 8;
/// Default of `open`'s `budget`.
pub const DEFAULT_OPEN_BUDGET: usize = 4_000;

/// Who is calling: the tenant-scoped engine, the settings a call starts from, and (bare API
/// keys) the prefix of its sessions. Every tool reads, or changes only the caller's own
/// sessions: a `read` key may use them all.
#[derive(Clone)]
pub struct Scope {
    /// The engine as the caller's tenant sees it.
    pub engine: Engine,
    /// The turn settings a call starts from (the configuration's).
    pub base: TurnSettings,
    /// Prefix of the caller's sessions (another key's are invisible), as the HTTP API keeps them.
    pub session_prefix: Option<String>,
    /// Deadline of one call.
    pub timeout: Duration,
}

impl Scope {
    fn session(&self, id: &str) -> Result<SessionId, String> {
        SessionId::parse(id).map_err(|e| format!("session: {}", plain(&e)))?;
        let full = match &self.session_prefix {
            Some(p) => format!("{p}.{id}"),
            None => id.to_owned(),
        };
        SessionId::parse(&full).map_err(|e| format!("session: {}", plain(&e)))
    }
}

impl Scope {
    /// The `search` tool's work, as the tool and `ragctx eval agent` run it: a retrieve-only
    /// turn of the session in `client` memory, each call its own query (forced `new`, not
    /// mixed with earlier ones), within the call's budget and limit. `Err` is a message naming
    /// the argument at fault, or the engine's error; nothing is recorded then.
    pub fn search(&self, args: &SearchArgs) -> Result<(ResultOut, String), String> {
        let session = self.session(&args.session)?;
        let layer = TurnOverrides {
            budget: Some(check_budget("budget", args.budget, DEFAULT_SEARCH_BUDGET)?),
            limit: Some(match args.limit {
                None => DEFAULT_SEARCH_LIMIT,
                Some(l) if (1..=100).contains(&l) => l,
                Some(l) => return Err(format!("limit must be between 1 and 100, got {l}")),
            }),
            filter: Some(filter_of(args.filter.clone())?),
            ..Default::default()
        };
        let settings = step_settings(&self.base, Mode::New, layer)?;
        ragctx_engine::validate_question(&args.query).map_err(|e| format!("query: {}", plain(&e)))?;
        let input =
            TurnInput::new(&session, &args.query, &settings).retrieve_only().deadline(Instant::now() + self.timeout);
        let t = self.engine.run(input).map_err(|e| plain(&e))?;
        Ok(result_of(&args.session, &t))
    }
}

/// An error's message for a model to read: without its category (`invalid input: ...`); an
/// internal failure (a fault of ragctx or its storage, whose text may name files or servers)
/// is logged with its cause and told only as an internal error, as the HTTP API does.
fn plain(e: &Error) -> String {
    if e.kind() == ragctx_core::ErrorKind::Internal {
        tracing::error!(cause = %e.report(), "mcp tool: internal error");
        return "internal error; the server log has the cause".to_owned();
    }
    let text = e.to_string();
    text.strip_prefix("invalid input: ").map(str::to_owned).unwrap_or(text)
}

/// `what: message` for the caller's own mistakes, the message alone for anything else (a
/// time-out or an outage is not the argument's fault).
fn blame(what: &str, e: &Error) -> String {
    match e.kind() {
        ragctx_core::ErrorKind::BadInput | ragctx_core::ErrorKind::NotFound => format!("{what}: {}", plain(e)),
        _ => plain(e),
    }
}

/// The turn settings every agent step runs with over `base` (the configuration's): `client`
/// memory (the agent holds every earlier result), exclusion of every chunk shown in the
/// session (strategy `exclude`, consumption `shown`, the whole session as the window), each
/// query its own (no condensing, no mixing with earlier queries), held chunks keeping their
/// result slots as pointers. What the configuration sets otherwise (the floor, filters,
/// near-duplicates, retrieval) applies as everywhere.
fn step_settings(base: &TurnSettings, mode: Mode, layer: TurnOverrides) -> Result<TurnSettings, String> {
    let agent = TurnOverrides {
        memory: Some(Memory::Client),
        strategy: Some(ragctx_core::Strategy::Exclude),
        consumption: Some(ragctx_core::Consumption::Shown),
        granularity: Some(ragctx_core::Granularity::Chunk),
        window: Some(0),
        condense: Some(ragctx_core::Condense::Off),
        conversation_query: Some(ragctx_core::ConversationQuery::Off),
        freed_slots: Some(ragctx_core::FreedSlots::Keep),
        mode: Some(mode),
        ..Default::default()
    };
    // `fusion` is refused without hybrid retrieval and `granularity document` with engine
    // memory only when a layer gives them: the agent layer gives neither.
    let base = TurnSettings { granularity: ragctx_core::Granularity::Chunk, memory: Memory::Client, ..base.clone() };
    agent.merge(layer).apply(&base).map_err(|e| plain(&e))
}

/// `search`'s arguments.
#[derive(Debug, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SearchArgs {
    /// Your session: one per task or conversation (1–128 characters: letters, digits, `.`,
    /// `_`, `:`, `-`). Chunks it already holds are never sent again.
    #[schemars(length(min = 1, max = 128))]
    pub session: String,
    /// What to look for, in words (1–4000 characters).
    #[schemars(length(min = 1, max = 4000))]
    pub query: String,
    /// Only chunks whose metadata match, e.g. {"topic": "pests"}, {"year": {"gte": 2020}},
    /// {"and": [...]}, {"not": {...}}.
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub filter: Option<serde_json::Value>,
    /// Tokens this call may return, blocks and pointers together (64–32000; default 2000).
    #[schemars(range(min = 64, max = 32000))]
    pub budget: Option<usize>,
    /// Results at most (1–100; default 8).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<usize>,
}

/// `open`'s arguments.
#[derive(Debug, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct OpenArgs {
    /// Your session.
    #[schemars(length(min = 1, max = 128))]
    pub session: String,
    /// What to show again: a marker from an earlier result (`[3]` or `3`), a chunk ID or a
    /// document ID the session holds.
    #[schemars(length(min = 1, max = 512))]
    pub r#ref: String,
    /// Tokens it may return (64–32000; default 4000).
    #[schemars(range(min = 64, max = 32000))]
    pub budget: Option<usize>,
}

/// `documents`' arguments.
#[derive(Debug, Default, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct DocumentsArgs {
    /// Only documents whose (first chunk's) metadata match.
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub filter: Option<serde_json::Value>,
}

/// `forget`'s arguments.
#[derive(Debug, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ForgetArgs {
    /// Your session.
    #[schemars(length(min = 1, max = 128))]
    pub session: String,
    /// Markers, chunk IDs or document IDs your context no longer holds; absent: all of them.
    pub refs: Option<Vec<String>>,
}

/// A tool's arguments as a map, read field by field so that an error names its argument
/// (`budget: invalid type: string "lots", expected usize`), an unknown one is refused by name.
struct Fields(serde_json::Map<String, serde_json::Value>);

impl Fields {
    fn read<'de, D: serde::Deserializer<'de>>(d: D, known: &[&str]) -> Result<Fields, D::Error> {
        use serde::de::Error as _;
        let map = serde_json::Map::deserialize(d)?;
        if let Some(k) = map.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(D::Error::custom(format!("unknown argument `{k}`: the arguments are {}", known.join(", "))));
        }
        Ok(Fields(map))
    }

    fn optional<T: serde::de::DeserializeOwned, E: serde::de::Error>(&mut self, name: &str) -> Result<Option<T>, E> {
        match self.0.remove(name) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => serde_json::from_value(v).map(Some).map_err(|e| E::custom(format!("{name}: {e}"))),
        }
    }

    fn required<T: serde::de::DeserializeOwned, E: serde::de::Error>(&mut self, name: &str) -> Result<T, E> {
        self.optional(name)?.ok_or_else(|| E::custom(format!("{name}: missing, and it is required")))
    }
}

impl<'de> Deserialize<'de> for SearchArgs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut f = Fields::read(d, &["session", "query", "filter", "budget", "limit"])?;
        Ok(SearchArgs {
            session: f.required("session")?,
            query: f.required("query")?,
            filter: f.optional("filter")?,
            budget: f.optional("budget")?,
            limit: f.optional("limit")?,
        })
    }
}

impl<'de> Deserialize<'de> for OpenArgs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut f = Fields::read(d, &["session", "ref", "budget"])?;
        Ok(OpenArgs { session: f.required("session")?, r#ref: f.required("ref")?, budget: f.optional("budget")? })
    }
}

impl<'de> Deserialize<'de> for DocumentsArgs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut f = Fields::read(d, &["filter"])?;
        Ok(DocumentsArgs { filter: f.optional("filter")? })
    }
}

impl<'de> Deserialize<'de> for ForgetArgs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut f = Fields::read(d, &["session", "refs"])?;
        Ok(ForgetArgs { session: f.required("session")?, refs: f.optional("refs")? })
    }
}

/// One block of a result: a chunk (or adjacent chunks of one document) in full.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct BlockOut {
    /// Its marker, stable within the session: cite it as `[n]`.
    pub marker: u32,
    /// The chunks its text holds.
    pub chunk_ids: Vec<String>,
    /// The document they come from.
    pub document_id: String,
    /// The document's title.
    pub title: String,
    /// The first chunk's metadata.
    pub metadata: serde_json::Value,
    /// The text.
    pub text: String,
    /// Tokens of the block as rendered (cl100k_base).
    pub tokens: usize,
}

/// A result the session already holds: named, not sent again.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct PointerOut {
    /// Its marker (the one it was first shown with).
    pub marker: u32,
    /// The held chunks that rank for this query.
    pub chunk_ids: Vec<String>,
    /// Their document.
    pub document_id: String,
    /// The document's title.
    pub title: String,
    /// The step that first showed them.
    pub shown_in_step: u64,
}

/// What `search` and `open` return.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ResultOut {
    /// The session, as given.
    pub session: String,
    /// This call's step number in the session.
    pub step: u64,
    /// Chunks new to the session (for `open`: those shown again), in rank order.
    pub blocks: Vec<BlockOut>,
    /// Chunks the session already holds that rank for this query.
    pub pointers: Vec<PointerOut>,
    /// Tokens of the blocks and pointers.
    pub tokens: usize,
    /// Documents that ranked but did not fit the call's budget (ask again with a larger one,
    /// or `open` them).
    pub dropped_by_budget: Vec<String>,
}

/// One document of `documents`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct DocumentOut {
    /// The document's ID.
    pub document_id: String,
    /// Its title.
    pub title: String,
    /// Its chunks.
    pub chunks: usize,
    /// Its first chunk's metadata.
    pub metadata: serde_json::Value,
}

/// What `documents` returns.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct DocumentsOut {
    /// The documents, by ID.
    pub documents: Vec<DocumentOut>,
}

/// What `forget` returns.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ForgetOut {
    /// The session, as given.
    pub session: String,
    /// The chunks that left the session: a later search may send them again.
    pub forgotten: Vec<String>,
}

/// The tool server. Over stdio its [`Scope`] is fixed; over HTTP each request brings its own.
#[derive(Clone)]
pub struct Tools {
    scope: Option<Arc<Scope>>,
    tool_router: ToolRouter<Tools>,
}

/// A tool error the model reads; logged (the tool's name at info, the message, which may
/// quote the caller's input, at debug), since a tool error is an HTTP 200.
fn tool_error(message: impl Into<String>) -> CallToolResult {
    let message = message.into();
    tracing::info!("mcp tool error");
    tracing::debug!(message = %message, "mcp tool error");
    CallToolResult::error(vec![ContentBlock::text(message)])
}

fn structured<T: Serialize>(value: &T, text: String) -> CallToolResult {
    let mut out = CallToolResult::success(vec![ContentBlock::text(text)]);
    out.structured_content = Some(serde_json::to_value(value).expect("tool outputs serialise"));
    out
}

/// A filter argument, parsed as every front parses one.
fn filter_of(value: Option<serde_json::Value>) -> Result<Filter, String> {
    match value {
        None => Ok(Filter::All),
        Some(v) => Filter::parse(&v.to_string()).map_err(|e| format!("filter: {}", plain(&e))),
    }
}

fn check_budget(name: &str, v: Option<usize>, default: usize) -> Result<usize, String> {
    match v {
        None => Ok(default),
        Some(b) if (64..=32_000).contains(&b) => Ok(b),
        Some(b) => Err(format!("{name} must be between 64 and 32000 tokens, got {b}")),
    }
}

/// The result of a turn as the tools return it, and the text the model reads.
pub fn result_of(session: &str, t: &Trace) -> (ResultOut, String) {
    let blocks: Vec<BlockOut> = t
        .context
        .iter()
        .map(|b| BlockOut {
            marker: b.marker,
            chunk_ids: b.chunk_ids.iter().map(|c| c.as_str().to_owned()).collect(),
            document_id: b.document_id.as_str().to_owned(),
            title: b.title.clone(),
            metadata: serde_json::to_value(&b.metadata).unwrap_or_default(),
            text: b.text.clone(),
            tokens: b.tokens,
        })
        .collect();
    let pointers: Vec<PointerOut> = t
        .pointers
        .iter()
        .map(|p| PointerOut {
            marker: p.marker,
            chunk_ids: p.chunk_ids.iter().map(|c| c.as_str().to_owned()).collect(),
            document_id: p.document_id.as_str().to_owned(),
            title: p.title.clone(),
            shown_in_step: p.shown_in_turn,
        })
        .collect();
    let mut text = String::new();
    for p in &pointers {
        text.push_str(&format!(
            "[{}] {} ({}) — you already hold this (step {}); open it to see it again\n",
            p.marker, p.title, p.document_id, p.shown_in_step
        ));
    }
    for b in &blocks {
        text.push_str(&format!("[{}] {} ({})\n{}\n\n", b.marker, b.title, b.document_id, b.text.trim_end()));
    }
    if blocks.is_empty() && pointers.is_empty() {
        text.push_str("Nothing found that you do not already hold.\n");
    } else if blocks.is_empty() {
        text.push_str("Nothing new: every result that ranks is one you already hold.\n");
    }
    let dropped_by_budget: Vec<String> = t.trace.dropped_by_budget.iter().map(|d| d.as_str().to_owned()).collect();
    if !dropped_by_budget.is_empty() {
        text.push_str(&format!(
            "Did not fit the budget ({} document(s)): {}\n",
            dropped_by_budget.len(),
            dropped_by_budget.join(", ")
        ));
    }
    let out = ResultOut {
        session: session.to_owned(),
        step: t.turn,
        blocks,
        pointers,
        tokens: t.trace.context_tokens,
        dropped_by_budget,
    };
    (out, text)
}

impl Tools {
    /// Tools over one fixed scope (stdio: the CLI's engine and settings).
    pub fn new(scope: Scope) -> Tools {
        Tools { scope: Some(Arc::new(scope)), tool_router: Tools::tool_router() }
    }

    /// Tools whose scope each HTTP request brings in its extensions ([`http_service`]).
    pub fn per_request() -> Tools {
        Tools { scope: None, tool_router: Tools::tool_router() }
    }

    fn scope(&self, ctx: &RequestContext<RoleServer>) -> Result<Arc<Scope>, ErrorData> {
        if let Some(parts) = ctx.extensions.get::<http::request::Parts>() {
            if let Some(s) = parts.extensions.get::<Arc<Scope>>() {
                return Ok(s.clone());
            }
        }
        self.scope.clone().ok_or_else(|| ErrorData::internal_error("no caller scope for this request", None))
    }

    /// Runs blocking engine work off the async threads, within the scope's deadline; an
    /// engine error becomes a tool error the model can read.
    async fn blocking<T: Send + 'static>(
        scope: &Scope,
        what: &str,
        f: impl FnOnce() -> ragctx_core::Result<T> + Send + 'static,
    ) -> Result<T, String> {
        // The engine refuses to commit past the deadline; the wait is a little longer so its own
        // error (which names the cause) usually arrives first.
        let limit = scope.timeout + Duration::from_secs(2);
        // The work runs in the request's span (the turn's span is its child).
        let span = tracing::Span::current();
        match tokio::time::timeout(limit, tokio::task::spawn_blocking(move || span.in_scope(f))).await {
            Ok(Ok(Ok(v))) => Ok(v),
            Ok(Ok(Err(e))) if what.is_empty() => Err(plain(&e)),
            Ok(Ok(Err(e))) => Err(blame(what, &e)),
            Ok(Err(e)) => {
                tracing::error!(cause = %e, "mcp tool: worker failed");
                Err("internal error; the server log has the cause".to_owned())
            }
            Err(_) => Err(format!("no answer within {} s", limit.as_secs())),
        }
    }
}

/// The chunks of the session `r` names: a marker (`[3]`, `3`), a held chunk, or a document
/// with held chunks.
fn resolve_refs(engine: &Engine, session: &SessionId, refs: &[String]) -> ragctx_core::Result<Vec<ChunkId>> {
    let state = engine.sessions.load(session)?.unwrap_or_default();
    let held: Vec<ChunkId> = {
        let mut h: Vec<ChunkId> = ragctx_engine::exclusion::first_shown(&state, 0).into_keys().collect();
        h.sort();
        h
    };
    let chunks = engine.vectors.chunks(&held)?;
    let mut out: Vec<ChunkId> = Vec::new();
    for r in refs {
        let r = r.trim();
        let marker = r.trim_start_matches('[').trim_end_matches(']');
        let by_marker =
            marker.parse::<u32>().ok().and_then(|m| state.markers.iter().find(|(_, &v)| v == m)).map(|(d, _)| d);
        let found: Vec<ChunkId> = if let Some(doc) = by_marker {
            chunks.iter().filter(|c| &c.document_id == doc).map(|c| c.id.clone()).collect()
        } else if held.iter().any(|c| c.as_str() == r) {
            vec![ChunkId::from(r)]
        } else {
            chunks.iter().filter(|c| c.document_id.as_str() == r).map(|c| c.id.clone()).collect()
        };
        if found.is_empty() {
            return Err(Error::InvalidInput(format!(
                "ref {r:?} names no marker, chunk ID or document ID this session holds (search first)"
            )));
        }
        for c in found {
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    Ok(out)
}

#[tool_router]
impl Tools {
    /// Searches the documents for `query`. New chunks come back whole; chunks your session
    /// already holds come back as one-line pointers (cite them by marker, or `open` them).
    #[tool(
        description = "Search the knowledge base. Returns new passages in full, each with a marker [n] to cite, and one-line pointers to passages your session already holds (never re-sent). Use the same session for one task; call forget when your context drops earlier results.",
        output_schema = schema_for_output::<ResultOut>()
    )]
    async fn search(
        &self,
        Parameters(args): Parameters<SearchArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = self.scope(&ctx)?;
        let run = {
            let scope = scope.clone();
            move || Ok(scope.search(&args))
        };
        match Self::blocking(&scope, "", run).await {
            Ok(Ok((out, text))) => Ok(structured(&out, text)),
            Ok(Err(m)) | Err(m) => Ok(tool_error(m)),
        }
    }

    /// Shows what a marker, chunk ID or document ID of the session named, again, in full.
    #[tool(
        description = "Show again, in full, passages your session already holds: by marker ([3] or 3), chunk ID or document ID. Use it when you need the text of a pointer.",
        output_schema = schema_for_output::<ResultOut>()
    )]
    async fn open(
        &self,
        Parameters(args): Parameters<OpenArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = self.scope(&ctx)?;
        let prepared = (|| -> Result<(SessionId, TurnSettings), String> {
            let session = scope.session(&args.session)?;
            let layer = TurnOverrides {
                budget: Some(check_budget("budget", args.budget, DEFAULT_OPEN_BUDGET)?),
                // Every chunk asked for, not only those near its document's best.
                group_margin: Some(2.0),
                ..Default::default()
            };
            Ok((session, step_settings(&scope.base, Mode::Reshow, layer)?))
        })();
        let (session, settings) = match prepared {
            Ok(p) => p,
            Err(m) => return Ok(tool_error(m)),
        };
        let engine = scope.engine.clone();
        let reference = args.r#ref.clone();
        let timeout = scope.timeout;
        let run = move || {
            let ids = resolve_refs(&engine, &session, std::slice::from_ref(&reference))?;
            let question = format!("open {reference}");
            let input = TurnInput {
                reshow: Some(&ids),
                ..TurnInput::new(&session, &question, &settings).retrieve_only().deadline(Instant::now() + timeout)
            };
            engine.run(input)
        };
        match Self::blocking(&scope, "ref", run).await {
            Ok(t) => {
                let (out, text) = result_of(&args.session, &t);
                Ok(structured(&out, text))
            }
            Err(m) => Ok(tool_error(m)),
        }
    }

    /// Lists the documents that can be found.
    #[tool(
        description = "List the documents in the knowledge base: ID, title, chunks, metadata; optionally only those matching a metadata filter.",
        output_schema = schema_for_output::<DocumentsOut>()
    )]
    async fn documents(
        &self,
        Parameters(args): Parameters<DocumentsArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = self.scope(&ctx)?;
        let filter = match filter_of(args.filter) {
            Ok(f) => f,
            Err(m) => return Ok(tool_error(m)),
        };
        let vectors = scope.engine.vectors.clone();
        match Self::blocking(&scope, "", move || vectors.documents()).await {
            Ok(docs) => {
                let documents: Vec<DocumentOut> = docs
                    .into_iter()
                    .filter(|d| filter.matches(d.document_id.as_str(), &d.metadata))
                    .map(|d| DocumentOut {
                        document_id: d.document_id.as_str().to_owned(),
                        title: d.title,
                        chunks: d.chunks,
                        metadata: serde_json::to_value(&d.metadata).unwrap_or_default(),
                    })
                    .collect();
                let text = documents
                    .iter()
                    .map(|d| format!("{} — {} ({} chunks)", d.document_id, d.title, d.chunks))
                    .collect::<Vec<_>>()
                    .join("\n");
                Ok(structured(&DocumentsOut { documents }, text))
            }
            Err(m) => Ok(tool_error(m)),
        }
    }

    /// Lets chunks the agent's context dropped be sent again.
    #[tool(
        description = "Tell the knowledge base your context no longer holds some results (after compaction or truncation), by marker, chunk ID or document ID, or all of them when refs is absent: a later search may send them again.",
        output_schema = schema_for_output::<ForgetOut>()
    )]
    async fn forget(
        &self,
        Parameters(args): Parameters<ForgetArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = self.scope(&ctx)?;
        let session = match scope.session(&args.session) {
            Ok(s) => s,
            Err(m) => return Ok(tool_error(m)),
        };
        if args.refs.as_ref().is_some_and(|r| r.is_empty() || r.len() > 1_000) {
            return Ok(tool_error("refs: give 1 to 1000 references, or leave refs out to forget everything"));
        }
        let engine = scope.engine.clone();
        // Recorded as the agent's other steps are.
        let settings = match step_settings(&scope.base, Mode::New, TurnOverrides::default()) {
            Ok(s) => s,
            Err(m) => return Ok(tool_error(m)),
        };
        let refs = args.refs.clone();
        let run = move || {
            let chunks = match &refs {
                Some(r) => Some(resolve_refs(&engine, &session, r)?),
                None => None,
            };
            engine.forget(&session, chunks, &settings)
        };
        match Self::blocking(&scope, "refs", run).await {
            Ok(t) => {
                let forgotten: Vec<String> = t.trace.forgotten.iter().map(|c| c.as_str().to_owned()).collect();
                let text = format!("forgot {} chunk(s): a later search may send them again", forgotten.len());
                Ok(structured(&ForgetOut { session: args.session, forgotten }, text))
            }
            Err(m) => Ok(tool_error(m)),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ragctx", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Search a knowledge base without receiving what you already hold: pass one session per task to every call. search returns new passages in full and pointers to held ones; open shows a held one again; forget lets dropped ones come back.",
            )
    }
}

/// Serves `tools` over stdin and stdout until the client closes them (`ragctx mcp`).
pub async fn serve_stdio(tools: Tools) -> Result<(), Error> {
    use rmcp::ServiceExt;
    let unavailable = |e: String| Error::Unavailable { backend: "mcp stdio".into(), message: e };
    let running = tools.serve(rmcp::transport::stdio()).await.map_err(|e| unavailable(e.to_string()))?;
    running.waiting().await.map_err(|e| unavailable(e.to_string()))?;
    Ok(())
}

/// The streamable HTTP service for `ragctx serve`'s `/mcp`: stateless (sessions are tool
/// arguments), JSON answers, each request's [`Scope`] taken from its extensions (the server
/// checks the key first). `allowed_hosts` guards against DNS rebinding; empty allows any.
pub fn http_service(
    allowed_hosts: Vec<String>,
    max_body: usize,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    Tools,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(max_body);
    config = if allowed_hosts.is_empty() {
        config.disable_allowed_hosts()
    } else {
        config.with_allowed_hosts(allowed_hosts)
    };
    StreamableHttpService::new(|| Ok(Tools::per_request()), Default::default(), config)
}
