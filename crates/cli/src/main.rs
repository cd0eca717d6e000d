//! `ragctx`: the command-line front of the engine. Arguments become validated settings in
//! `config`, one factory in `app` builds the backends, and each command is a module.

mod documents;
mod serve;
mod turn;

use anyhow::Result;
use clap::{Parser, Subcommand};
use ragctx_app::{app, ingest, RawConfig, Settings};
use ragctx_core::{ErrorKind, SessionId, TurnOverrides};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "ragctx",
    version,
    about = "Multi-turn RAG context engine: no repeats, no crowding, cited and budgeted context"
)]
struct Cli {
    /// Data directory [env: RAGCTX_DATA_DIR] [default: ./ragctx-data]
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    /// TOML config file (keys as the flags, with underscores)
    #[arg(long, global = true, env = "RAGCTX_CONFIG")]
    config: Option<PathBuf>,
    /// Embedding model directory [env: RAGCTX_MODEL_DIR] [default: ./models/all-MiniLM-L6-v2]
    #[arg(long, global = true)]
    model_dir: Option<PathBuf>,
    /// Embeddings from: local (the model in --model-dir, in process) or openai (an
    /// OpenAI-compatible /v1/embeddings server) [env: RAGCTX_EMBEDDER] [default: local]
    #[arg(long, global = true)]
    embedder: Option<String>,
    /// The embedding server's base URL for --embedder openai, e.g. http://127.0.0.1:8000/v1
    /// (key from RAGCTX_EMBEDDER_API_KEY) [env: RAGCTX_EMBEDDER_URL]
    #[arg(long, global = true)]
    embedder_url: Option<String>,
    /// The model name sent to the embedding server [env: RAGCTX_EMBEDDER_MODEL]
    #[arg(long, global = true)]
    embedder_model: Option<String>,
    /// What the in-process model's dense layers compute in: int8 or fp32 (a store keeps the
    /// one it was made with) [env: RAGCTX_EMBEDDER_PRECISION] [default: the data dir's; int8 for a new one]
    #[arg(long, global = true)]
    embedder_precision: Option<String>,
    /// Vector backend: embedded or milvus [env: RAGCTX_BACKEND]
    #[arg(long, global = true)]
    backend: Option<String>,
    /// Milvus server for --backend milvus [env: RAGCTX_MILVUS_URI] [default: http://127.0.0.1:19530]
    #[arg(long, global = true)]
    milvus_uri: Option<String>,
    /// Milvus collection [env: RAGCTX_COLLECTION] [default: ragctx]
    #[arg(long, global = true)]
    collection: Option<String>,
    /// Milvus vector index when the collection is created: hnsw or flat [env: RAGCTX_MILVUS_INDEX] [default: hnsw]
    #[arg(long, global = true)]
    milvus_index: Option<String>,
    /// Milvus read consistency: session, bounded, eventually or strong [env: RAGCTX_MILVUS_CONSISTENCY] [default: session]
    #[arg(long, global = true)]
    milvus_consistency: Option<String>,
    /// Session store: embedded, or redis://HOST:PORT [env: RAGCTX_SESSIONS]
    #[arg(long, global = true)]
    sessions: Option<String>,
    /// The tenant to act as: its documents, sessions and traces only [env: RAGCTX_TENANT] [default: default]
    #[arg(long, global = true)]
    tenant: Option<String>,
    #[command(subcommand)]
    command: Command,
}

/// The turn flags: one per turn setting, declared once in core ([`TurnOverrides`]) with the
/// same names as the config keys, `RAGCTX_*` variables and HTTP fields.
type TurnFlags = TurnOverrides;

#[derive(Subcommand)]
enum Command {
    /// Ingest .jsonl chunks or .md/.txt/.html/.docx/.pdf documents (files or directories); each
    /// document is replaced whole: chunks it no longer has are removed
    Ingest {
        /// Upsert chunks by id and keep a document's other chunks (add to documents)
        #[arg(long)]
        append: bool,
        /// Metadata for every chunk read, KEY=VALUE (repeatable; numbers and true/false typed;
        /// a JSONL line's own metadata wins)
        #[arg(long = "meta", value_name = "KEY=VALUE")]
        meta: Vec<String>,
        /// Follow a folder's symbolic links that stay inside it (a link out of the folder is
        /// never followed)
        #[arg(long)]
        follow_links: bool,
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Reads the files ingest asks for, in a process of its own (started by ingest)
    #[command(hide = true)]
    ReadWorker,
    /// list the stored documents, or delete documents with all their chunks
    Documents {
        #[command(subcommand)]
        action: DocumentsAction,
    },
    /// Ask one question in a session
    Ask {
        #[arg(long)]
        session: String,
        /// Print the turn as one JSON object
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        turn: TurnFlags,
        #[arg(required = true, num_args = 1..)]
        question: Vec<String>,
    },
    /// Interactive conversation: /reshow, /trace, /reset, /quit
    Chat {
        #[arg(long)]
        session: String,
        #[command(flatten)]
        turn: TurnFlags,
    },
    /// Show a session's traces; with --replay, run a turn again with other settings
    Trace {
        #[arg(long)]
        session: String,
        /// The bare API key (`RAGCTX_API_KEYS`) whose session this is: such a key's sessions
        /// are stored apart under a digest of it, and only its holder can name them
        #[arg(long, env = "RAGCTX_TRACE_KEY", hide_env_values = true)]
        key: Option<String>,
        #[arg(long)]
        turn: Option<u64>,
        #[arg(long)]
        json: bool,
        /// Re-run --turn N with the given settings (nothing is remembered)
        #[arg(long, requires = "turn")]
        replay: bool,
        #[command(flatten)]
        flags: TurnFlags,
    },
    /// show, reset or delete a session
    Session {
        #[arg(value_parser = ["show", "reset", "delete"])]
        action: String,
        #[arg(long)]
        session: String,
    },
    /// The HTTP API, the OpenAI-compatible chat front and the trace page; the turn flags
    /// set the defaults that each request may override
    Serve {
        /// Address to bind; without API keys only loopback addresses are accepted
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: String,
        #[command(flatten)]
        turn: TurnFlags,
    },
    /// The MCP tool server over stdin/stdout, for agent hosts (docs/agents.md): search,
    /// open, documents, forget; the turn flags set the defaults of every call
    Mcp {
        #[command(flatten)]
        turn: TurnFlags,
    },
    /// Offline evaluation on real data
    Eval {
        #[command(subcommand)]
        what: ragctx_eval::EvalCommand,
    },
    /// Benchmarks
    Bench {
        #[command(subcommand)]
        what: ragctx_eval::BenchCommand,
    },
}

#[derive(Subcommand)]
enum DocumentsAction {
    /// Every stored document: id, chunks, title
    List {
        /// One JSON array
        #[arg(long)]
        json: bool,
    },
    /// Remove documents and all their chunks
    Delete {
        #[arg(required = true)]
        ids: Vec<String>,
    },
}

fn settings(cli: &Cli, turn: Option<&TurnFlags>) -> Result<Settings> {
    Ok(Settings::layered(cli.config.as_deref(), flags(cli, turn))?)
}

/// The global flags (and a turn's) as the last settings layer.
fn flags(cli: &Cli, turn: Option<&TurnFlags>) -> RawConfig {
    RawConfig {
        data_dir: cli.data_dir.clone(),
        model_dir: cli.model_dir.clone(),
        embedder: cli.embedder.clone(),
        embedder_url: cli.embedder_url.clone(),
        embedder_model: cli.embedder_model.clone(),
        embedder_precision: cli.embedder_precision.clone(),
        backend: cli.backend.clone(),
        milvus_uri: cli.milvus_uri.clone(),
        collection: cli.collection.clone(),
        milvus_index: cli.milvus_index.clone(),
        milvus_consistency: cli.milvus_consistency.clone(),
        sessions: cli.sessions.clone(),
        tenant: cli.tenant.clone(),
        // The flags are the last layer: their filter holds with the standing one.
        turn: turn.cloned().into_iter().collect(),
        ..Default::default()
    }
}

/// A turn over a data dir that does not exist would create an empty one and answer from
/// nothing: said before anything is touched, with the command that fills it.
fn require_store(s: &Settings) -> Result<()> {
    if matches!(s.backend(), ragctx_app::Backend::Embedded) && !ragctx_app::holds_store(s.data_dir()) {
        return Err(ragctx_core::Error::NotFound(format!(
            "no ragctx store at {}: fill it first with `ragctx ingest PATH...` (.jsonl, .md, .txt, .html, .docx or .pdf files or folders), or point --data-dir (RAGCTX_DATA_DIR) at an existing one",
            s.data_dir().display()
        ))
        .into());
    }
    Ok(())
}

/// A store with nothing in it (for this tenant) answers every question with "no source": said
/// instead, with the command that fills it.
fn require_documents(app: &app::App) -> Result<()> {
    if app.engine.vectors.is_empty()? {
        let tenant = app.settings.tenant();
        let whose = if tenant.is_default() { String::new() } else { format!(" for tenant {tenant}") };
        let place = match app.settings.backend() {
            ragctx_app::Backend::Embedded => format!("the store at {}", app.settings.data_dir().display()),
            _ => "the Milvus collection".to_owned(),
        };
        return Err(ragctx_core::Error::NotFound(format!(
            "{place} holds no documents{whose}: add some with `ragctx ingest PATH...`"
        ))
        .into());
    }
    Ok(())
}

/// The session `trace --session S [--key KEY]` reads: a bare API key's sessions are stored
/// under its namespace.
fn traced_session(session: &str, key: Option<&str>) -> Result<SessionId> {
    let id = SessionId::parse(session)?;
    Ok(match key {
        Some(k) => ragctx_server::auth::bare_key_session(k, &id),
        None => id,
    })
}

/// `ingest --meta KEY=VALUE` pairs as metadata (values typed as [`MetaValue::from_text`](ragctx_core::MetaValue::from_text)).
fn metadata_flags(pairs: &[String]) -> Result<ragctx_core::Metadata> {
    let mut m = ragctx_core::Metadata::default();
    for p in pairs {
        let Some((k, v)) = p.split_once('=') else {
            return Err(ragctx_core::Error::InvalidInput(format!("--meta {p:?}: use KEY=VALUE")).into());
        };
        m.insert(k, ragctx_core::MetaValue::from_text(v))?;
    }
    Ok(m)
}

fn run(cli: Cli) -> Result<()> {
    match &cli.command {
        Command::ReadWorker => Ok(ragctx_app::reader::serve_worker()?),
        Command::Ingest { paths, append, meta, follow_links } => {
            let meta = metadata_flags(meta)?;
            let mut given = flags(&cli, None);
            if *follow_links {
                given.follow_links = Some(true);
            }
            println!(
                "{}",
                ingest::ingest_with_metadata(
                    &Settings::layered(cli.config.as_deref(), given)?,
                    paths,
                    *append,
                    &meta,
                    &ragctx_eval::progress::Terminal::default()
                )?
            );
            Ok(())
        }
        Command::Documents { action } => {
            let store = app::vectors_only(&settings(&cli, None)?)?;
            match action {
                DocumentsAction::List { json } => documents::list(store.as_ref(), *json),
                DocumentsAction::Delete { ids } => documents::delete(store.as_ref(), ids),
            }
        }
        Command::Ask { session, json, turn, question } => {
            let s = settings(&cli, Some(turn))?;
            let id = SessionId::parse(session)?;
            require_store(&s)?;
            let app = app::App::open(s)?;
            require_documents(&app)?;
            let t = app.settings.turn().clone();
            turn::ask(&app, &id, &question.join(" "), &t, *json)
        }
        Command::Chat { session, turn } => {
            let s = settings(&cli, Some(turn))?;
            let id = SessionId::parse(session)?;
            require_store(&s)?;
            let app = app::App::open(s)?;
            require_documents(&app)?;
            let t = app.settings.turn().clone();
            turn::chat(&app, &id, &t)
        }
        Command::Trace { session, turn: Some(n), json, replay: true, flags, key } => {
            let app = app::App::open(settings(&cli, Some(flags))?)?;
            // Only `--mode` forces a replay's intent (not a config's standing mode): with `auto`
            // the engine replays the intent the turn was recorded with.
            turn::replay(&app, &traced_session(session, key.as_deref())?, *n, *json, flags.mode.unwrap_or_default())
        }
        Command::Trace { session, turn, json, key, .. } => {
            let s = settings(&cli, None)?;
            turn::trace(app::sessions_only(&s)?.as_ref(), &traced_session(session, key.as_deref())?, *turn, *json)
        }
        Command::Session { action, session } => {
            let s = settings(&cli, None)?;
            turn::session(app::sessions_only(&s)?.as_ref(), action, &SessionId::parse(session)?)
        }
        Command::Bench { what } => Ok(ragctx_eval::bench::run(settings(&cli, None)?, what)?),
        Command::Serve { addr, turn } => serve::run(app::App::open(settings(&cli, Some(turn))?)?, addr),
        Command::Mcp { turn } => serve::mcp_stdio(app::App::open(settings(&cli, Some(turn))?)?),
        Command::Eval { what } => Ok(ragctx_eval::eval::run(&settings(&cli, None)?, what)?),
    }
}

/// The embedder allocates and frees tens of megabytes per layer; glibc's defaults hand
/// those back to the kernel each time (mmap/munmap and page faults: half the CPU time of an
/// ingest went to the kernel). Keeping freed memory in the process makes ingest ~1.5x faster.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tune_allocator() {
    // SAFETY: mallopt only changes allocator thresholds; called once before other threads exist.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TOP_PAD, 256 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_allocator() {}

/// Logs as JSON lines on stderr: `RAGCTX_LOG` (else `RUST_LOG`) filters them, e.g. `info`,
/// `ragctx_engine=debug`; by default `info` for `serve` (a line per request and per turn)
/// and `warn` otherwise. Spans are logged when they close, with their duration: `request`
/// (request_id, method, route), `turn` (session, turn, intent, token counts, timings_ms) and `stage`.
/// Built with the `otlp` feature, the same spans also go to an OpenTelemetry collector when
/// `RAGCTX_OTLP_ENDPOINT` (e.g. `http://127.0.0.1:4318`) is set.
fn init_logs(serving: bool) {
    use tracing_subscriber::fmt::format::FmtSpan;
    use tracing_subscriber::prelude::*;
    let wanted = std::env::var("RAGCTX_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| if serving { "info" } else { "warn" }.to_owned());
    let filter = tracing_subscriber::EnvFilter::try_new(&wanted).unwrap_or_else(|e| {
        eprintln!("ragctx: log filter {wanted:?} is not valid ({e}); logging at info");
        tracing_subscriber::EnvFilter::new("info")
    });
    let lines = tracing_subscriber::fmt::layer()
        .json()
        .with_span_events(FmtSpan::CLOSE)
        .with_current_span(true)
        .with_span_list(true)
        .with_writer(std::io::stderr);
    let registry = tracing_subscriber::registry().with(filter).with(lines);
    #[cfg(feature = "otlp")]
    if let Some(endpoint) = std::env::var("RAGCTX_OTLP_ENDPOINT").ok().filter(|e| !e.is_empty()) {
        match otlp::provider(&endpoint) {
            Ok(provider) => {
                use opentelemetry::trace::TracerProvider as _;
                let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("ragctx"));
                let _ = otlp::PROVIDER.set(provider);
                registry.with(layer).init();
                return;
            }
            Err(e) => eprintln!("ragctx: no OTLP export to {endpoint}: {e}"),
        }
    }
    registry.init();
}

/// OpenTelemetry export (the `otlp` feature): spans batched to `ENDPOINT/v1/traces` over
/// HTTP/protobuf by a background thread, flushed when the command ends.
#[cfg(feature = "otlp")]
mod otlp {
    pub static PROVIDER: std::sync::OnceLock<opentelemetry_sdk::trace::SdkTracerProvider> = std::sync::OnceLock::new();

    pub fn provider(endpoint: &str) -> Result<opentelemetry_sdk::trace::SdkTracerProvider, String> {
        use opentelemetry_otlp::WithExportConfig;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(opentelemetry_sdk::Resource::builder().with_service_name("ragctx").build())
            .build())
    }
}

/// Sends what the OTLP exporter still holds (nothing without the `otlp` feature).
fn flush_telemetry() {
    #[cfg(feature = "otlp")]
    if let Some(p) = otlp::PROVIDER.get() {
        if let Err(e) = p.shutdown() {
            eprintln!("ragctx: OTLP export: {e}");
        }
    }
}

/// README "Exit codes": 2 only for the caller's mistakes, 1 for anything that is not a
/// classified ragctx error (an I/O failure on the terminal, say).
fn exit_code(e: &anyhow::Error) -> i32 {
    let kind = match (e.downcast_ref::<ragctx_core::Error>(), e.downcast_ref::<ragctx_eval::Error>()) {
        (Some(e), _) => e.kind(),
        (None, Some(e)) => e.kind(),
        (None, None) => ErrorKind::Internal,
    };
    kind.exit_code()
}

/// A closed pipe (`ragctx documents list | head`) ends the command quietly, as it ends other
/// Unix tools, instead of printing a panic with a backtrace: Rust ignores SIGPIPE, so
/// `println!` panics with "failed printing to stdout" when the reader has gone.
fn quiet_on_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

fn main() {
    quiet_on_closed_pipe();
    tune_allocator();
    let cli = Cli::parse();
    // Documents are read in a process of this binary's own: no file can end this one.
    if let Ok(me) = std::env::current_exe() {
        ragctx_app::reader::set_worker(vec![me.to_string_lossy().into_owned(), "read-worker".into()]);
    }
    init_logs(matches!(cli.command, Command::Serve { .. }));
    let result = run(cli);
    flush_telemetry();
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(exit_code(&e));
    }
}
