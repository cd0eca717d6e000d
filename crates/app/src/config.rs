//! Settings in two steps: raw layers (defaults → TOML file → `RAGCTX_*` env → flags) merge
//! into one [`RawConfig`], which is validated once into [`Settings`].

use ragctx_core::{Error, Result};

/// Returns a bad-input error with a formatted message.
macro_rules! bad {
    ($($arg:tt)*) => {
        return Err(Error::InvalidInput(format!($($arg)*)))
    };
}
use ragctx_engine::TurnSettings;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Every setting, each optional so that layers can be merged.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub data_dir: Option<PathBuf>,
    pub model_dir: Option<PathBuf>,
    /// `local` (default: the model in `model_dir`, in process) or `openai` (an
    /// OpenAI-compatible `/v1/embeddings` server at `embedder_url`).
    pub embedder: Option<String>,
    /// e.g. `http://127.0.0.1:8000/v1` (what `scripts/embedder-up` prints).
    pub embedder_url: Option<String>,
    pub embedder_model: Option<String>,
    /// Also read from RAGCTX_EMBEDDER_API_KEY.
    pub embedder_api_key: Option<String>,
    /// Send `input_type` query/passage (default true; OpenAI's own API wants false).
    pub embedder_input_type: Option<bool>,
    /// Put before each query / passage before embedding (e5: `query: ` / `passage: `).
    pub embedder_query_prefix: Option<String>,
    pub embedder_passage_prefix: Option<String>,
    /// `fp32` (default) or `int8`: what the in-process model's dense layers compute in.
    pub embedder_precision: Option<String>,
    /// Texts per request (default 16).
    pub embedder_batch: Option<usize>,
    /// Requests in flight at once (default 2).
    pub embedder_concurrency: Option<usize>,
    /// Deadline of one request in seconds (default 120).
    pub embedder_timeout_secs: Option<u64>,
    /// Retries after a failed request, with back-off (default 4).
    pub embedder_retries: Option<u32>,
    pub backend: Option<String>,
    /// Milvus server, e.g. `http://127.0.0.1:19530` (backend `milvus`).
    pub milvus_uri: Option<String>,
    /// Milvus collection (default `ragctx`).
    pub collection: Option<String>,
    /// `hnsw` (default) or `flat`: the index built when the collection is created.
    pub milvus_index: Option<String>,
    /// `session` (default), `bounded`, `eventually` or `strong`.
    pub milvus_consistency: Option<String>,
    /// Per-call deadline in seconds (default 5).
    pub milvus_timeout_secs: Option<u64>,
    /// `user:password` or API key (also read from MILVUS_TOKEN).
    pub milvus_token: Option<String>,
    pub sessions: Option<String>,
    /// `engine` (default: ragctx builds the whole prompt) or `client` (the caller keeps
    /// earlier contexts; chunks of the window are pointed to, not re-sent).
    pub memory: Option<String>,
    /// `auto` (default: classify each question), `new`, `follow_up` or `reshow`.
    pub mode: Option<String>,
    /// `always` (default), `follow_up` or `off`: when the query mixes in earlier questions.
    pub conversation_query: Option<String>,
    /// `dense` (default), `lexical` (BM25) or `hybrid` (both, fused).
    pub retrieval: Option<String>,
    /// `weighted` (default), `rrf` or `rescore`: how `hybrid` fuses its two sides.
    pub fusion: Option<String>,
    pub strategy: Option<String>,
    pub granularity: Option<String>,
    pub consumption: Option<String>,
    pub window: Option<usize>,
    pub limit: Option<usize>,
    pub group_size: Option<usize>,
    /// A further chunk of a document is kept within this cosine distance of its best.
    pub group_margin: Option<f32>,
    pub min_documents: Option<usize>,
    pub budget: Option<usize>,
    pub session_ttl: Option<u64>,
    pub ef_search: Option<usize>,
    /// API keys of `ragctx serve` (env: RAGCTX_API_KEYS, comma-separated).
    pub api_keys: Option<Vec<String>>,
    /// `extractive` (default) or `openai`.
    pub generator: Option<String>,
    pub openai_base_url: Option<String>,
    pub openai_model: Option<String>,
    /// Also read from OPENAI_API_KEY.
    pub openai_api_key: Option<String>,
    pub openai_timeout_secs: Option<u64>,
    /// Deadline of one turn in `ragctx serve` (default 30 s): past it the caller gets 503.
    pub turn_timeout_secs: Option<u64>,
}

impl RawConfig {
    /// `other` wins where it has a value.
    pub fn merge(self, other: RawConfig) -> RawConfig {
        macro_rules! pick {
            ($($f:ident),+) => { RawConfig { $($f: other.$f.or(self.$f)),+ } };
        }
        pick!(
            data_dir,
            model_dir,
            embedder,
            embedder_url,
            embedder_model,
            embedder_api_key,
            embedder_input_type,
            embedder_query_prefix,
            embedder_passage_prefix,
            embedder_precision,
            embedder_batch,
            embedder_concurrency,
            embedder_timeout_secs,
            embedder_retries,
            backend,
            milvus_uri,
            collection,
            milvus_index,
            milvus_consistency,
            milvus_timeout_secs,
            milvus_token,
            sessions,
            memory,
            mode,
            conversation_query,
            retrieval,
            fusion,
            strategy,
            granularity,
            consumption,
            window,
            limit,
            group_size,
            group_margin,
            min_documents,
            budget,
            session_ttl,
            ef_search,
            api_keys,
            generator,
            openai_base_url,
            openai_model,
            openai_api_key,
            openai_timeout_secs,
            turn_timeout_secs
        )
    }

    pub fn from_file(path: &Path) -> Result<RawConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::InvalidInput(format!("reading config {}: {e}", path.display())))?;
        toml::from_str(&text).map_err(|e| Error::InvalidInput(format!("config {}: {e}", path.display())))
    }

    /// `RAGCTX_<FIELD>` variables, e.g. `RAGCTX_BUDGET=2000`.
    pub fn from_env() -> Result<RawConfig> {
        fn var(name: &str) -> Option<String> {
            std::env::var(format!("RAGCTX_{name}")).ok().filter(|v| !v.is_empty())
        }
        fn num<T: std::str::FromStr>(name: &str) -> Result<Option<T>> {
            match var(name) {
                Some(v) => v
                    .parse()
                    .map(Some)
                    .map_err(|_| Error::InvalidInput(format!("RAGCTX_{name}={v:?} is not a valid value"))),
                None => Ok(None),
            }
        }
        // Prefixes keep their spaces ("query: "), and an empty one is a value.
        fn raw_var(name: &str) -> Option<String> {
            std::env::var(format!("RAGCTX_{name}")).ok()
        }
        Ok(RawConfig {
            data_dir: var("DATA_DIR").map(PathBuf::from),
            model_dir: var("MODEL_DIR").map(PathBuf::from),
            embedder: var("EMBEDDER"),
            embedder_url: var("EMBEDDER_URL"),
            embedder_model: var("EMBEDDER_MODEL"),
            embedder_api_key: var("EMBEDDER_API_KEY"),
            embedder_input_type: num("EMBEDDER_INPUT_TYPE")?,
            embedder_query_prefix: raw_var("EMBEDDER_QUERY_PREFIX"),
            embedder_passage_prefix: raw_var("EMBEDDER_PASSAGE_PREFIX"),
            embedder_precision: var("EMBEDDER_PRECISION"),
            embedder_batch: num("EMBEDDER_BATCH")?,
            embedder_concurrency: num("EMBEDDER_CONCURRENCY")?,
            embedder_timeout_secs: num("EMBEDDER_TIMEOUT_SECS")?,
            embedder_retries: num("EMBEDDER_RETRIES")?,
            backend: var("BACKEND"),
            milvus_uri: var("MILVUS_URI"),
            collection: var("COLLECTION"),
            milvus_index: var("MILVUS_INDEX"),
            milvus_consistency: var("MILVUS_CONSISTENCY"),
            milvus_timeout_secs: num("MILVUS_TIMEOUT_SECS")?,
            milvus_token: var("MILVUS_TOKEN").or_else(|| std::env::var("MILVUS_TOKEN").ok().filter(|k| !k.is_empty())),
            sessions: var("SESSIONS"),
            memory: var("MEMORY"),
            mode: var("MODE"),
            conversation_query: var("CONVERSATION_QUERY"),
            retrieval: var("RETRIEVAL"),
            fusion: var("FUSION"),
            strategy: var("STRATEGY"),
            granularity: var("GRANULARITY"),
            consumption: var("CONSUMPTION"),
            window: num("WINDOW")?,
            limit: num("LIMIT")?,
            group_size: num("GROUP_SIZE")?,
            group_margin: num("GROUP_MARGIN")?,
            min_documents: num("MIN_DOCUMENTS")?,
            budget: num("BUDGET")?,
            session_ttl: num("SESSION_TTL")?,
            ef_search: num("EF_SEARCH")?,
            api_keys: var("API_KEYS")
                .map(|v| v.split(',').map(|k| k.trim().to_owned()).filter(|k| !k.is_empty()).collect()),
            generator: var("GENERATOR"),
            openai_base_url: var("OPENAI_BASE_URL"),
            openai_model: var("OPENAI_MODEL"),
            openai_api_key: var("OPENAI_API_KEY")
                .or_else(|| std::env::var("OPENAI_API_KEY").ok().filter(|k| !k.is_empty())),
            openai_timeout_secs: num("OPENAI_TIMEOUT_SECS")?,
            turn_timeout_secs: num("TURN_TIMEOUT_SECS")?,
        })
    }
}

/// Validated settings: made only by [`Settings::from_raw`], read through its methods, never
/// changed after (a caller who wants other values merges another [`RawConfig`] layer and
/// validates again).
#[derive(Clone, Debug)]
pub struct Settings {
    pub(crate) data_dir: PathBuf,
    pub(crate) model_dir: PathBuf,
    pub(crate) embedder: EmbedderSettings,
    pub(crate) turn: TurnSettings,
    pub(crate) ef_search: Option<usize>,
    pub(crate) backend: Backend,
    pub(crate) sessions: String,
    pub(crate) api_keys: Vec<String>,
    pub(crate) turn_timeout: std::time::Duration,
    pub(crate) openai: Option<ragctx_models::OpenAiConfig>,
}

impl Settings {
    /// The data dir: the embedded store, its sessions, the embedding cache.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }
    /// Where the in-process embedding model's files are.
    pub fn model_dir(&self) -> &Path {
        &self.model_dir
    }
    /// Where embeddings come from.
    pub fn embedder(&self) -> &EmbedderSettings {
        &self.embedder
    }
    /// The default settings of a turn (a request or a call may pass others, which the engine
    /// validates).
    pub fn turn(&self) -> &TurnSettings {
        &self.turn
    }
    /// The HNSW search breadth, when set.
    pub fn ef_search(&self) -> Option<usize> {
        self.ef_search
    }
    /// Where vectors live: the data dir, or a Milvus collection.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }
    /// The session store: `embedded`, or a `redis://` / `redis+cluster://` URL.
    pub fn sessions(&self) -> &str {
        &self.sessions
    }
    /// The API keys `ragctx serve` accepts (none: loopback only).
    pub fn api_keys(&self) -> &[String] {
        &self.api_keys
    }
    /// Deadline of one turn in `ragctx serve`.
    pub fn turn_timeout(&self) -> std::time::Duration {
        self.turn_timeout
    }
    /// The OpenAI-compatible generator's configuration; `None` = the extractive generator.
    pub fn openai(&self) -> Option<&ragctx_models::OpenAiConfig> {
        self.openai.as_ref()
    }

    /// Validates merged layers: every value parsed and range-checked, the message naming the
    /// setting and what it accepts.
    pub fn from_raw(raw: RawConfig) -> Result<Settings> {
        let backend = match raw.backend.as_deref().unwrap_or("embedded") {
            "embedded" => Backend::Embedded,
            "milvus" => Backend::milvus(&raw)?,
            other => bad!("unknown backend {other:?}: use --backend embedded or --backend milvus"),
        };
        let sessions = raw.sessions.clone().unwrap_or_else(|| "embedded".into());
        if sessions.starts_with("rediss://") || sessions.starts_with("rediss+cluster://") {
            return Err(Error::InvalidInput(format!(
                "session store {sessions:?}: TLS to Redis (rediss://) is not built into this ragctx; use redis:// on a trusted network, or a local TLS tunnel (stunnel, spiped) to the server"
            )));
        }
        if sessions != "embedded" && !sessions.starts_with("redis://") && !sessions.starts_with("redis+cluster://") {
            bad!(
                "session store {sessions:?}: use --sessions embedded, redis://HOST:PORT or redis+cluster://HOST:PORT[,HOST:PORT...]"
            );
        }
        let d = TurnSettings::default();
        let turn = TurnSettings {
            memory: raw.memory.as_deref().map(str::parse).transpose()?.unwrap_or(d.memory),
            group_margin: raw.group_margin.unwrap_or(d.group_margin),
            conversation_query: raw
                .conversation_query
                .as_deref()
                .map(str::parse)
                .transpose()?
                .unwrap_or(d.conversation_query),
            strategy: raw.strategy.as_deref().map(str::parse).transpose()?.unwrap_or(d.strategy),
            retrieval: raw.retrieval.as_deref().map(str::parse).transpose()?.unwrap_or(d.retrieval),
            fusion: raw.fusion.as_deref().map(str::parse).transpose()?.unwrap_or(d.fusion),
            granularity: raw.granularity.as_deref().map(str::parse).transpose()?.unwrap_or(d.granularity),
            consumption: raw.consumption.as_deref().map(str::parse).transpose()?.unwrap_or(d.consumption),
            window: raw.window.unwrap_or(d.window),
            limit: raw.limit.unwrap_or(d.limit),
            group_size: raw.group_size.unwrap_or(d.group_size),
            min_documents: raw.min_documents.unwrap_or(d.min_documents),
            budget: raw.budget.unwrap_or(d.budget),
            ttl_secs: raw.session_ttl.unwrap_or(d.ttl_secs),
            mode: match raw.mode.as_deref() {
                None | Some("auto") => None,
                Some(m) => Some(m.parse()?),
            },
        };
        turn.validate()?;
        let embedder = EmbedderSettings::from_raw(&raw)?;
        Ok(Settings {
            data_dir: raw.data_dir.unwrap_or_else(|| PathBuf::from("ragctx-data")),
            model_dir: raw.model_dir.unwrap_or_else(default_model_dir),
            embedder,
            turn,
            ef_search: raw.ef_search,
            backend,
            sessions,
            api_keys: raw.api_keys.unwrap_or_default(),
            turn_timeout: match raw.turn_timeout_secs {
                Some(0) => bad!("turn_timeout_secs must be at least 1"),
                t => std::time::Duration::from_secs(t.unwrap_or(30)),
            },
            openai: match raw.generator.as_deref().unwrap_or("extractive") {
                "extractive" => None,
                "openai" => Some(ragctx_models::OpenAiConfig {
                    base_url: raw.openai_base_url.unwrap_or_else(|| "https://api.openai.com/v1".into()),
                    model: raw.openai_model.ok_or_else(|| {
                        Error::InvalidInput("generator openai needs openai_model (RAGCTX_OPENAI_MODEL)".into())
                    })?,
                    api_key: raw.openai_api_key,
                    timeout: std::time::Duration::from_secs(raw.openai_timeout_secs.unwrap_or(60)),
                    retries: 2,
                }),
                other => bad!("unknown generator {other:?}: use extractive or openai"),
            },
        })
    }
}

/// Where embeddings come from, validated.
#[derive(Clone, Debug)]
pub enum EmbedderSettings {
    /// The model in `model_dir`, run in process.
    Local { prefixes: ragctx_models::Prefixes, precision: ragctx_models::Precision },
    /// An OpenAI-compatible `/v1/embeddings` server.
    OpenAi(ragctx_models::RemoteEmbedderConfig),
}

impl EmbedderSettings {
    /// Whether these are the vectors a store written before models were recorded holds: the
    /// in-process model in fp32, without prefixes (what ragctx could compute then).
    pub fn is_unrecorded_default(&self) -> bool {
        match self {
            EmbedderSettings::Local { prefixes, precision } => {
                *precision == ragctx_models::Precision::F32 && *prefixes == ragctx_models::Prefixes::default()
            }
            EmbedderSettings::OpenAi(_) => false,
        }
    }

    fn from_raw(raw: &RawConfig) -> Result<EmbedderSettings> {
        let prefixes = ragctx_models::Prefixes {
            query: raw.embedder_query_prefix.clone().unwrap_or_default(),
            passage: raw.embedder_passage_prefix.clone().unwrap_or_default(),
        };
        let remote_only = [
            ("embedder_url", raw.embedder_url.is_some()),
            ("embedder_model", raw.embedder_model.is_some()),
            ("embedder_api_key", raw.embedder_api_key.is_some()),
            ("embedder_input_type", raw.embedder_input_type.is_some()),
            ("embedder_batch", raw.embedder_batch.is_some()),
            ("embedder_concurrency", raw.embedder_concurrency.is_some()),
            ("embedder_timeout_secs", raw.embedder_timeout_secs.is_some()),
            ("embedder_retries", raw.embedder_retries.is_some()),
        ];
        match raw.embedder.as_deref().unwrap_or("local") {
            "local" => {
                if let Some((key, _)) = remote_only.iter().find(|(_, set)| *set) {
                    return Err(Error::InvalidInput(format!(
                        "{key} is set, but the embedder is local (the model in --model-dir): use --embedder openai to embed with a server"
                    )));
                }
                let precision = raw.embedder_precision.as_deref().unwrap_or("fp32").parse()?;
                Ok(EmbedderSettings::Local { prefixes, precision })
            }
            "openai" => {
                let precision = raw.embedder_precision.as_deref().map(str::parse::<ragctx_models::Precision>);
                if precision.transpose()?.is_some_and(|p| p != ragctx_models::Precision::F32) {
                    return Err(Error::InvalidInput(
                        "embedder_precision applies to the in-process model; the server decides how it computes".into(),
                    ));
                }
                let url = raw.embedder_url.clone().ok_or_else(|| {
                    Error::InvalidInput(
                        "--embedder openai needs --embedder-url (e.g. http://127.0.0.1:8000/v1; RAGCTX_EMBEDDER_URL)"
                            .into(),
                    )
                })?;
                let model = raw.embedder_model.clone().ok_or_else(|| {
                    Error::InvalidInput("--embedder openai needs --embedder-model (RAGCTX_EMBEDDER_MODEL)".into())
                })?;
                let mut c = ragctx_models::RemoteEmbedderConfig::new(&url, &model);
                c.api_key = raw.embedder_api_key.clone();
                c.input_type = raw.embedder_input_type.unwrap_or(true);
                c.prefixes = prefixes;
                c.batch = raw.embedder_batch.unwrap_or(c.batch);
                c.concurrency = raw.embedder_concurrency.unwrap_or(c.concurrency);
                if c.batch == 0 || c.concurrency == 0 {
                    return Err(Error::InvalidInput(
                        "embedder_batch and embedder_concurrency must be at least 1".into(),
                    ));
                }
                match raw.embedder_timeout_secs {
                    Some(0) => return Err(Error::InvalidInput("embedder_timeout_secs must be at least 1".into())),
                    Some(t) => c.timeout = std::time::Duration::from_secs(t),
                    None => {}
                }
                c.retries = raw.embedder_retries.unwrap_or(c.retries);
                Ok(EmbedderSettings::OpenAi(c))
            }
            other => Err(Error::InvalidInput(format!(
                "unknown embedder {other:?}: use local (the model in --model-dir) or openai (a /v1/embeddings server)"
            ))),
        }
    }
}

/// Where vectors live.
#[derive(Clone, Debug)]
pub enum Backend {
    /// The data dir's own index.
    Embedded,
    /// A Milvus collection (built with the `milvus` feature, on by default).
    Milvus(MilvusSettings),
}

/// How to reach Milvus, validated.
#[derive(Clone, Debug)]
pub struct MilvusSettings {
    pub uri: String,
    pub collection: String,
    pub index: String,
    pub consistency: String,
    pub timeout_secs: u64,
    pub token: Option<String>,
}

impl Backend {
    fn milvus(raw: &RawConfig) -> Result<Backend> {
        let uri = raw.milvus_uri.clone().unwrap_or_else(|| "http://127.0.0.1:19530".into());
        if !(uri.starts_with("http://") || uri.starts_with("https://")) {
            bad!("milvus_uri {uri:?}: use http://HOST:PORT or https://HOST:PORT");
        }
        let index = raw.milvus_index.clone().unwrap_or_else(|| "hnsw".into());
        if !matches!(index.as_str(), "hnsw" | "flat") {
            bad!("milvus_index {index:?}: use hnsw or flat");
        }
        let consistency = raw.milvus_consistency.clone().unwrap_or_else(|| "session".into());
        if !matches!(consistency.as_str(), "strong" | "session" | "bounded" | "eventually") {
            bad!("milvus_consistency {consistency:?}: use session, bounded, eventually or strong");
        }
        let timeout_secs = raw.milvus_timeout_secs.unwrap_or(5);
        if timeout_secs == 0 {
            bad!("milvus_timeout_secs must be at least 1");
        }
        Ok(Backend::Milvus(MilvusSettings {
            uri,
            collection: raw.collection.clone().unwrap_or_else(|| "ragctx".into()),
            index,
            consistency,
            timeout_secs,
            token: raw.milvus_token.clone(),
        }))
    }
}

/// `./models/all-MiniLM-L6-v2`, or the one next to the repository the binary was built in
/// (so `target/release/ragctx` works from any directory).
fn default_model_dir() -> PathBuf {
    let local = PathBuf::from(ragctx_models::DEFAULT_MODEL_DIR);
    if local.is_dir() {
        return local;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(ragctx_models::DEFAULT_MODEL_DIR);
    if repo.is_dir() {
        repo
    } else {
        local
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_merge_later_wins_and_bad_values_fail() {
        let file: RawConfig = toml::from_str("budget = 100\nlimit = 4").unwrap();
        let flags = RawConfig { budget: Some(300), ..Default::default() };
        let s = Settings::from_raw(RawConfig::default().merge(file).merge(flags)).unwrap();
        assert_eq!((s.turn.budget, s.turn.limit), (300, 4));
        assert!(toml::from_str::<RawConfig>("budgett = 1").is_err(), "unknown keys are errors");
        let bad = RawConfig { strategy: Some("fast".into()), ..Default::default() };
        assert!(Settings::from_raw(bad).unwrap_err().to_string().contains("unknown strategy"));
        let bad = RawConfig { limit: Some(0), ..Default::default() };
        assert!(Settings::from_raw(bad).is_err());
    }
}
