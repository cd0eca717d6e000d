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
//! The tools' work is [`ragctx_engine::agent`] (what Python's `Engine.search` and `ragctx
//! eval agent` run too); this crate is the protocol: argument schemas and decoding that name
//! the argument at fault, output schemas, errors as tool errors, and the transports.
//!
//! The same [`Tools`] serve stdio (`ragctx mcp`, [`serve_stdio`]) and streamable HTTP
//! (`ragctx serve` at `/mcp`, [`http_service`]): over HTTP the server's own key check runs
//! first and puts the caller's [`Scope`] in the request's extensions.

use ragctx_core::{Error, Filter};
pub use ragctx_engine::agent::{
    BlockOut, DocumentOut, Documents, Forgotten, Found, PointerOut, Scope, DEFAULT_OPEN_BUDGET, DEFAULT_SEARCH_BUDGET,
    DEFAULT_SEARCH_LIMIT,
};
use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

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

/// `search`'s arguments.
#[derive(Debug, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SearchArgs {
    /// Your session: one per task or conversation (1–128 characters: letters, digits, `.`,
    /// `_`, `:`, `-`). Chunks it already holds are never sent again.
    #[schemars(length(min = 1, max = 128), regex(pattern = r"^[A-Za-z0-9._:-]{1,128}$"))]
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
    #[schemars(length(min = 1, max = 128), regex(pattern = r"^[A-Za-z0-9._:-]{1,128}$"))]
    pub session: String,
    /// What to show again: one passage by its handle from an earlier result (`[3.2]` or
    /// `3.2`; `[3.2–3.4]` for several) or chunk ID — or a whole document by its marker (`[3]`)
    /// or ID, which returns every passage of it you hold (costs more).
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
    #[schemars(length(min = 1, max = 128), regex(pattern = r"^[A-Za-z0-9._:-]{1,128}$"))]
    pub session: String,
    /// Passage handles (`3.2`), markers (`3`: a whole document), chunk IDs or document IDs
    /// your context no longer holds; absent: all of them.
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
fn filter_of(value: Option<serde_json::Value>) -> Result<Filter, Error> {
    ragctx_engine::agent::filter_arg(value.map(|v| v.to_string()).as_deref())
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

    /// Runs a step off the async threads, within the scope's deadline, as the tool's result:
    /// structured content and the text the model reads, or a tool error the model can act on.
    async fn step<T: Serialize + Send + 'static>(
        scope: &Scope,
        f: impl FnOnce() -> ragctx_core::Result<T> + Send + 'static,
        text: fn(&T) -> String,
    ) -> CallToolResult {
        // The engine refuses to commit past the deadline; the wait is a little longer so its own
        // error (which names the cause) usually arrives first.
        let limit = scope.timeout + Duration::from_secs(2);
        // The work runs in the request's span (the turn's span is its child).
        let span = tracing::Span::current();
        match tokio::time::timeout(limit, tokio::task::spawn_blocking(move || span.in_scope(f))).await {
            Ok(Ok(Ok(v))) => {
                let t = text(&v);
                structured(&v, t)
            }
            Ok(Ok(Err(e))) => tool_error(plain(&e)),
            Ok(Err(e)) => {
                tracing::error!(cause = %e, "mcp tool: worker failed");
                tool_error("internal error; the server log has the cause")
            }
            Err(_) => tool_error(format!("no answer within {} s", limit.as_secs())),
        }
    }
}

#[tool_router]
impl Tools {
    /// Searches the documents for `query`. New chunks come back whole; chunks your session
    /// already holds come back as one-line pointers (cite them by marker, or `open` them).
    #[tool(
        description = "Search the knowledge base. Returns new passages in full, each headed by its handle [n.k] (passage k of document n) to cite, and one-line pointers [n.k] to passages your session already holds (never re-sent; open [n.k] shows just that passage again). Use the same session for one task; call forget when your context drops earlier results.",
        output_schema = schema_for_output::<Found>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn search(
        &self,
        Parameters(args): Parameters<SearchArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = self.scope(&ctx)?;
        let s = scope.clone();
        let run = move || s.search(&args.session, &args.query, &filter_of(args.filter)?, args.budget, args.limit);
        Ok(Self::step(&scope, run, Found::text).await)
    }

    /// Shows what a marker, chunk ID or document ID of the session named, again, in full.
    #[tool(
        description = "Show again, in full, passages your session already holds. open [3.2] returns just passage 2 of document 3 (the handle on a pointer or block); open [3] or a document ID returns every passage of that document you hold, which costs more. Use it when you need the text of a pointer.",
        output_schema = schema_for_output::<Found>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn open(
        &self,
        Parameters(args): Parameters<OpenArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = self.scope(&ctx)?;
        let s = scope.clone();
        let run = move || s.open(&args.session, &args.r#ref, args.budget);
        Ok(Self::step(&scope, run, Found::text).await)
    }

    /// Lists the documents that can be found.
    #[tool(
        description = "List the documents in the knowledge base: ID, title, chunks, metadata; optionally only those matching a metadata filter.",
        output_schema = schema_for_output::<Documents>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn documents(
        &self,
        Parameters(args): Parameters<DocumentsArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = self.scope(&ctx)?;
        let s = scope.clone();
        let run = move || s.documents(&filter_of(args.filter)?);
        Ok(Self::step(&scope, run, Documents::text).await)
    }

    /// Lets chunks the agent's context dropped be sent again.
    #[tool(
        description = "Tell the knowledge base your context no longer holds some results (after compaction or truncation), by passage handle ([3.2]), marker ([3]: a whole document), chunk ID or document ID, or all of them when refs is absent: a later search may send them again.",
        output_schema = schema_for_output::<Forgotten>(),
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn forget(
        &self,
        Parameters(args): Parameters<ForgetArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = self.scope(&ctx)?;
        let s = scope.clone();
        let run = move || s.forget(&args.session, args.refs.as_deref());
        Ok(Self::step(&scope, run, Forgotten::text).await)
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

/// The largest stdio message `ragctx mcp` reads (a line of JSON): one over it is answered
/// with an error that names this limit, never dropped in silence.
pub const MAX_STDIO_MESSAGE: usize = 16 << 20;

/// Serves `tools` over stdin and stdout until the client closes them (`ragctx mcp`).
///
/// Stdin is read here, line by line, before the protocol sees it: a message over
/// [`MAX_STDIO_MESSAGE`] bytes, or a last one without its newline, is answered with a JSON-RPC
/// error (-32600, its `id` when the first bytes give it) instead of leaving its caller waiting.
/// Stdout has one writer, so those answers never cut into the protocol's own lines.
pub async fn serve_stdio(tools: Tools) -> Result<(), Error> {
    use rmcp::ServiceExt;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let unavailable = |e: String| Error::Unavailable { backend: "mcp stdio".into(), message: e };
    let (mut to_protocol, protocol_in) = tokio::io::duplex(1 << 20);
    let (protocol_out, from_protocol) = tokio::io::duplex(1 << 20);
    let (lines, mut outbox) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
    // The one writer of stdout.
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = outbox.recv().await {
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let answers = lines.clone();
    let forward = tokio::spawn(async move {
        let mut from_protocol = tokio::io::BufReader::new(from_protocol);
        loop {
            let mut line = Vec::new();
            match from_protocol.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if answers.send(line).await.is_err() {
                        break;
                    }
                }
            }
        }
    });
    // Stdin is pumped from the start: the protocol's handshake reads the first message.
    let pump = tokio::spawn(async move {
        let mut stdin = tokio::io::stdin();
        let mut chunk = vec![0u8; 64 << 10];
        let mut line: Vec<u8> = Vec::new();
        // Bytes of an over-long message dropped so far (its first ones kept in `line` for its id).
        let mut skipped = 0usize;
        loop {
            // A read error ends the input as its end does.
            let n: usize = stdin.read(&mut chunk).await.unwrap_or_default();
            if n == 0 {
                if !line.is_empty() || skipped > 0 {
                    let id = id_of(&line);
                    let _ =
                        lines.send(rejected(id, "the last message has no newline: each message ends with one")).await;
                }
                break;
            }
            let mut rest = &chunk[..n];
            while let Some(at) = rest.iter().position(|&b| b == b'\n') {
                let (head, tail) = rest.split_at(at + 1);
                if skipped > 0 || line.len() + head.len() > MAX_STDIO_MESSAGE + 1 {
                    let message = format!(
                        "a message of {} bytes is over the limit of {MAX_STDIO_MESSAGE} bytes",
                        skipped + line.len() + head.len() - 1
                    );
                    let _ = lines.send(rejected(id_of(&line), &message)).await;
                } else if line.is_empty() {
                    if to_protocol.write_all(head).await.is_err() {
                        break;
                    }
                } else {
                    line.extend_from_slice(head);
                    if to_protocol.write_all(&line).await.is_err() {
                        break;
                    }
                }
                line.clear();
                skipped = 0;
                rest = tail;
            }
            // A message that passes the limit keeps its first 4 kB (for its id) and drops the rest.
            if skipped > 0 || line.len() + rest.len() > MAX_STDIO_MESSAGE {
                let keep = 4096usize.saturating_sub(line.len()).min(rest.len());
                line.extend_from_slice(&rest[..keep]);
                skipped += rest.len() - keep;
            } else {
                line.extend_from_slice(rest);
            }
        }
        drop(to_protocol);
    });
    let served = match tools.serve((protocol_in, protocol_out)).await {
        Ok(running) => running.waiting().await.map(|_| ()).map_err(|e| unavailable(e.to_string())),
        Err(e) => Err(unavailable(e.to_string())),
    };
    let _ = pump.await;
    let _ = forward.await;
    let _ = writer.await;
    served
}

/// The JSON-RPC error answer to a message refused before it was read, as one line.
fn rejected(id: serde_json::Value, message: &str) -> Vec<u8> {
    let answer = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message": message}});
    let mut line = serde_json::to_vec(&answer).expect("a JSON value serialises");
    line.push(b'\n');
    line
}

/// The `id` a message's first bytes give (`"id": 7` or `"id": "a"`), else null: what its
/// caller waits on.
fn id_of(start: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(&start[..start.len().min(4096)]);
    let Some(at) = text.find("\"id\"") else { return serde_json::Value::Null };
    let after = text[at + 4..].trim_start();
    let Some(value) = after.strip_prefix(':').map(str::trim_start) else { return serde_json::Value::Null };
    if let Some(s) = value.strip_prefix('"') {
        return s.split('"').next().map_or(serde_json::Value::Null, serde_json::Value::from);
    }
    let number: String = value.chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
    number.parse::<i64>().map_or(serde_json::Value::Null, serde_json::Value::from)
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

#[cfg(test)]
mod tests {
    #[test]
    fn a_refused_message_is_answered_with_its_id() {
        assert_eq!(super::id_of(br#"{"jsonrpc":"2.0","id": 7,"method":"tools/call","params":{"#), serde_json::json!(7));
        assert_eq!(super::id_of(br#"{"id":"req-1","jsonrpc""#), serde_json::json!("req-1"));
        assert_eq!(super::id_of(b"garbage"), serde_json::Value::Null);
        let line = super::rejected(serde_json::json!(7), "too long");
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!((v["id"].clone(), v["error"]["code"].clone()), (serde_json::json!(7), serde_json::json!(-32600)));
        assert!(line.ends_with(b"\n"));
    }
}
