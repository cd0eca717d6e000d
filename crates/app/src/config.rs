//! Settings in two steps: raw layers (defaults → TOML file → `RAGCTX_*` env → flags) merge
//! into one [`RawConfig`], which is validated once into [`Settings`].

use ragctx_core::{Error, Result};

/// Returns a bad-input error with a formatted message.
macro_rules! bad {
    ($($arg:tt)*) => {
        return Err(Error::InvalidInput(format!($($arg)*)))
    };
}

mod backends;
pub use backends::{Backend, EmbedderSettings, MilvusSettings};
use ragctx_engine::TurnSettings;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Declares [`RawConfig`] from one list of settings: the struct (each field optional so that
/// layers merge; TOML keys are the field names), [`RawConfig::merge`], and the environment
/// layer (`RAGCTX_<FIELD>`, the field name in capitals). A setting is added in one place.
macro_rules! raw_config {
    ($($(#[$doc:meta])* $field:ident: $ty:ty,)+) => {
        /// Every setting, each optional so that layers can be merged.
        #[derive(Clone, Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct RawConfig {
            $($(#[$doc])* pub $field: Option<$ty>,)+
        }

        impl RawConfig {
            /// `other` wins where it has a value.
            pub fn merge(self, other: RawConfig) -> RawConfig {
                RawConfig { $($field: other.$field.or(self.$field)),+ }
            }

            /// Each setting from `RAGCTX_<FIELD>`; unset or empty is no value.
            fn from_env_vars() -> Result<RawConfig> {
                Ok(RawConfig { $($field: env_value(stringify!($field))?),+ })
            }
        }
    };
}

raw_config! {
    /// The data dir (default `ragctx-data`).
    data_dir: PathBuf,
    /// The in-process model's files (default `models/all-MiniLM-L6-v2`).
    model_dir: PathBuf,
    /// `local` (default: the model in `model_dir`, in process) or `openai` (an
    /// OpenAI-compatible `/v1/embeddings` server at `embedder_url`).
    embedder: String,
    /// e.g. `http://127.0.0.1:8000/v1` (what `scripts/embedder-up` prints).
    embedder_url: String,
    /// The model name sent to the embedding server.
    embedder_model: String,
    /// Also read from RAGCTX_EMBEDDER_API_KEY.
    embedder_api_key: String,
    /// Send `input_type` query/passage (default true; OpenAI's own API wants false).
    embedder_input_type: bool,
    /// Put before each query / passage before embedding (e5: `query: ` / `passage: `).
    embedder_query_prefix: String,
    /// See `embedder_query_prefix`.
    embedder_passage_prefix: String,
    /// `fp32` (default) or `int8`: what the in-process model's dense layers compute in.
    embedder_precision: String,
    /// Texts per request (default 16).
    embedder_batch: usize,
    /// Requests in flight at once (default 2).
    embedder_concurrency: usize,
    /// Deadline of one request in seconds (default 120).
    embedder_timeout_secs: u64,
    /// Retries after a failed request, with back-off (default 4).
    embedder_retries: u32,
    /// `embedded` (default: the data dir's index) or `milvus`.
    backend: String,
    /// Milvus server, e.g. `http://127.0.0.1:19530` (backend `milvus`).
    milvus_uri: String,
    /// Milvus collection (default `ragctx`).
    collection: String,
    /// `hnsw` (default) or `flat`: the index built when the collection is created.
    milvus_index: String,
    /// `session` (default), `bounded`, `eventually` or `strong`.
    milvus_consistency: String,
    /// Per-call deadline in seconds (default 5).
    milvus_timeout_secs: u64,
    /// `user:password` or API key (also read from MILVUS_TOKEN).
    milvus_token: String,
    /// `embedded` (default), `redis://HOST:PORT` or `redis+cluster://HOST:PORT[,HOST:PORT...]`.
    sessions: String,
    /// `engine` (default: ragctx builds the whole prompt) or `client` (the caller keeps
    /// earlier contexts; chunks of the window are pointed to, not re-sent).
    memory: String,
    /// `auto` (default: classify each question), `new`, `follow_up` or `reshow`.
    mode: String,
    /// `always` (default), `follow_up` or `off`: when the query mixes in earlier questions.
    conversation_query: String,
    /// `dense` (default), `lexical` (BM25) or `hybrid` (both, fused).
    retrieval: String,
    /// `weighted` (default), `rrf` or `rescore`: how `hybrid` fuses its two sides.
    fusion: String,
    /// `exclude` (default), `full`, `group` or `none`.
    strategy: String,
    /// `chunk` (default) or `document`: what the exclusion set is made of (`client` memory).
    granularity: String,
    /// `shown` (default) or `cited`: which ids a turn consumes.
    consumption: String,
    /// Turns whose ids are excluded, 0 = all (default).
    window: usize,
    /// Documents per search (default 8).
    limit: usize,
    /// Chunks per document at most (default 3).
    group_size: usize,
    /// A further chunk of a document is kept within this cosine distance of its best.
    group_margin: f32,
    /// Fewer unique documents than this triggers a deeper search.
    min_documents: usize,
    /// Context budget in cl100k_base tokens (default 6000).
    budget: usize,
    /// Session time-to-live in seconds, 0 = never (default 86400).
    session_ttl: u64,
    /// HNSW search breadth of the embedded index.
    ef_search: usize,
    /// API keys of `ragctx serve` (env: RAGCTX_API_KEYS, comma-separated): each `write` in
    /// tenant `default`. `keys_file` scopes keys to tenants and roles instead.
    api_keys: Vec<String>,
    /// A TOML file of scoped keys for `ragctx serve` (`[[keys]]` with `key` or `sha256`,
    /// `tenant`, `role`): re-read when it changes (DESIGN §8).
    keys_file: PathBuf,
    /// The tenant the CLI and the Python package act as (default `default`).
    tenant: String,
    /// A standing filter (JSON text of the filter language): every turn's own filter is
    /// applied with it, never instead of it.
    filter: String,
    /// `extractive` (default) or `openai`.
    generator: String,
    /// The OpenAI-compatible generator's base URL (default `https://api.openai.com/v1`).
    openai_base_url: String,
    /// The generator's model (needed with `generator = "openai"`).
    openai_model: String,
    /// Also read from OPENAI_API_KEY.
    openai_api_key: String,
    /// Deadline of one generation in seconds (default 60).
    openai_timeout_secs: u64,
    /// Deadline of one turn in `ragctx serve` (default 30 s): past it the caller gets 503.
    turn_timeout_secs: u64,
}

/// A setting's type as read from an environment variable.
trait FromEnv: Sized {
    fn from_env(text: &str) -> Option<Self>;
}

macro_rules! from_env_by_parse {
    ($($t:ty),+) => {
        $(impl FromEnv for $t {
            fn from_env(text: &str) -> Option<Self> {
                text.parse().ok()
            }
        })+
    };
}
from_env_by_parse!(String, PathBuf, usize, u64, u32, f32, bool);

/// Comma-separated, blanks dropped (`RAGCTX_API_KEYS=k1,k2`).
impl FromEnv for Vec<String> {
    fn from_env(text: &str) -> Option<Self> {
        Some(text.split(',').map(|k| k.trim().to_owned()).filter(|k| !k.is_empty()).collect())
    }
}

fn env_value<T: FromEnv>(field: &str) -> Result<Option<T>> {
    let name = format!("RAGCTX_{}", field.to_ascii_uppercase());
    match std::env::var(&name).ok().filter(|v| !v.is_empty()) {
        Some(v) => {
            T::from_env(&v).map(Some).ok_or_else(|| Error::InvalidInput(format!("{name}={v:?} is not a valid value")))
        }
        None => Ok(None),
    }
}

impl RawConfig {
    /// A TOML file whose keys are the field names; unknown keys are errors.
    pub fn from_file(path: &Path) -> Result<RawConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::InvalidInput(format!("reading config {}: {e}", path.display())))?;
        toml::from_str(&text).map_err(|e| Error::InvalidInput(format!("config {}: {e}", path.display())))
    }

    /// `RAGCTX_<FIELD>` variables, e.g. `RAGCTX_BUDGET=2000`; the Milvus token and the OpenAI
    /// key also from `MILVUS_TOKEN` and `OPENAI_API_KEY`.
    pub fn from_env() -> Result<RawConfig> {
        let mut raw = RawConfig::from_env_vars()?;
        // Prefixes keep their spaces ("query: "), and an empty one is a value.
        raw.embedder_query_prefix = std::env::var("RAGCTX_EMBEDDER_QUERY_PREFIX").ok();
        raw.embedder_passage_prefix = std::env::var("RAGCTX_EMBEDDER_PASSAGE_PREFIX").ok();
        let fallback = |name: &str| std::env::var(name).ok().filter(|k| !k.is_empty());
        raw.milvus_token = raw.milvus_token.or_else(|| fallback("MILVUS_TOKEN"));
        raw.openai_api_key = raw.openai_api_key.or_else(|| fallback("OPENAI_API_KEY"));
        Ok(raw)
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
    pub(crate) keys_file: Option<PathBuf>,
    pub(crate) tenant: ragctx_core::Tenant,
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
    /// The scoped keys file of `ragctx serve`, when set.
    pub fn keys_file(&self) -> Option<&Path> {
        self.keys_file.as_deref()
    }
    /// The tenant the CLI and the Python package act as.
    pub fn tenant(&self) -> &ragctx_core::Tenant {
        &self.tenant
    }
    /// These settings with `filter` applied together with the standing one (a command's own
    /// filter, already checked): it narrows the standing filter, never replaces it.
    pub fn with_turn_filter(mut self, filter: ragctx_core::Filter) -> Settings {
        self.turn.filter = std::mem::take(&mut self.turn.filter).and(filter);
        self
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
            filter: match raw.filter.as_deref() {
                None | Some("") => ragctx_core::Filter::All,
                Some(text) => ragctx_core::Filter::parse(text)?,
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
            keys_file: raw.keys_file,
            tenant: match raw.tenant.as_deref() {
                None | Some("") => ragctx_core::Tenant::default(),
                Some(t) => ragctx_core::Tenant::parse(t)?,
            },
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

    #[test]
    fn mode_is_validated_with_the_rest_and_auto_classifies() {
        let with = |m: &str| Settings::from_raw(RawConfig { mode: Some(m.into()), ..Default::default() });
        assert_eq!(with("auto").unwrap().turn().mode, None);
        assert_eq!(with("follow_up").unwrap().turn().mode, Some(ragctx_core::Intent::FollowUp));
        assert_eq!(Settings::from_raw(RawConfig::default()).unwrap().turn().mode, None);
        assert!(with("sideways").unwrap_err().to_string().contains("unknown mode"));
        let file: RawConfig = toml::from_str("mode = \"new\"").unwrap();
        assert_eq!(Settings::from_raw(file).unwrap().turn().mode, Some(ragctx_core::Intent::New));
    }
}
