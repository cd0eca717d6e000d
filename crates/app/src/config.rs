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
use ragctx_core::TurnOverrides;
use ragctx_engine::TurnSettings;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Declares [`RawConfig`] from one list of settings: the struct (each field optional so that
/// layers merge; TOML keys are the field names), [`RawConfig::merge`], and the environment
/// layer (`RAGCTX_<FIELD>`, the field name in capitals). A setting is added in one place:
/// here, or for a turn's setting in `ragctx_core::TurnOverrides`, which every front reads.
macro_rules! raw_config {
    ($($(#[$doc:meta])* $field:ident: $ty:ty,)+) => {
        /// Every setting, each optional so that layers can be merged; the turn's settings
        /// are [`TurnOverrides`], one per layer, applied in order.
        #[derive(Clone, Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct RawConfig {
            $($(#[$doc])* pub $field: Option<$ty>,)+
            /// The turn settings of each layer, lowest first.
            #[serde(skip)]
            pub turn: Vec<TurnOverrides>,
        }

        impl RawConfig {
            /// The keys of the settings that are not a turn's.
            const KEYS: &'static [&'static str] = &[$(stringify!($field)),+];

            /// `other` wins where it has a value; its turn settings apply after these.
            pub fn merge(self, other: RawConfig) -> RawConfig {
                RawConfig { $($field: other.$field.or(self.$field),)+ turn: [self.turn, other.turn].concat() }
            }

            /// Each setting from `RAGCTX_<FIELD>`; unset or empty is no value.
            fn from_env_vars() -> Result<RawConfig> {
                Ok(RawConfig { $($field: env_value(stringify!($field))?,)+ turn: vec![TurnOverrides::from_vars(&env_var)?] })
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
    /// `fp32` or `int8`: what the in-process model's dense layers compute in (default: what
    /// the data dir was made with; int8 for a new one).
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
    /// The most tokens an answer may take (`max_tokens`, default 1024; 0 leaves it to the
    /// server).
    openai_max_tokens: u32,
    /// Deadline of one turn in `ragctx serve` (default 30 s): past it the caller gets 503.
    turn_timeout_secs: u64,
    /// The condenser's OpenAI-compatible base URL (`condense openai`), e.g. what
    /// `scripts/llm-up` prints; default: the generator's when `generator = "openai"`.
    condense_url: String,
    /// The condenser's model; default: `openai_model` (key: `openai_api_key`).
    condense_model: String,
    /// Deadline of one rewrite in milliseconds (default 3000): past it the turn searches
    /// with its own question.
    condense_timeout_ms: u64,
    /// The rerank endpoint (`rerank remote`), the whole URL: TEI's `http://HOST:PORT/rerank`,
    /// `https://api.cohere.com/v2/rerank`, `https://api.jina.ai/v1/rerank`, llama.cpp
    /// server's `http://HOST:PORT/v1/rerank`.
    rerank_url: String,
    /// The model name sent to the rerank endpoint (Cohere and Jina need one).
    rerank_model: String,
    /// Also read from RAGCTX_RERANK_API_KEY.
    rerank_api_key: String,
    /// `auto` (default: `tei` when the URL's path is `/rerank`, else `documents`), `tei`
    /// (`texts` in, a bare array out) or `documents` (Cohere, Jina, llama.cpp).
    rerank_api: String,
    /// Deadline of one rerank in milliseconds (default 2000): past it the turn keeps the
    /// search's order.
    rerank_timeout_ms: u64,
    /// Candidates sent to the reranker at most, the best of the search (default 48).
    rerank_top_n: usize,
    /// The most seconds reading one file at ingest may take (default 120): past it the file
    /// is left out, named with the limit.
    ingest_file_secs: u64,
    /// The most memory (MiB) reading one file may use in a reader process (default 2048):
    /// past it the file is left out, named with the limit.
    ingest_file_mb: u64,
    /// Follow a folder's symbolic links that stay inside it (default false: none followed;
    /// a link out of the folder never is).
    follow_links: bool,
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

/// A variable of the process environment: the one place the settings read it.
fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn env_value<T: FromEnv>(field: &str) -> Result<Option<T>> {
    let name = format!("RAGCTX_{}", field.to_ascii_uppercase());
    match env_var(&name).filter(|v| !v.is_empty()) {
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
        let table: serde_json::Value =
            toml::from_str(&text).map_err(|e| Error::InvalidInput(format!("config {}: {e}", path.display())))?;
        RawConfig::from_json(table).map_err(|e| Error::InvalidInput(format!("config {}: {e}", path.display())))
    }

    /// One layer from a JSON object whose keys are the settings' names (a config file's
    /// table, a Python call's keywords): the turn's settings become its [`TurnOverrides`],
    /// the rest its own fields; an unknown key is an error that lists the known ones.
    pub fn from_json(value: serde_json::Value) -> std::result::Result<RawConfig, String> {
        let serde_json::Value::Object(map) = value else {
            return Err("settings must be a table of names and values".into());
        };
        let (turn, rest): (serde_json::Map<_, _>, serde_json::Map<_, _>) =
            map.into_iter().partition(|(k, _)| TurnOverrides::KEYS.contains(&k.as_str()));
        if let Some(k) = rest.keys().find(|k| !RawConfig::KEYS.contains(&k.as_str())) {
            return Err(format!(
                "unknown setting `{k}`: settings are {}, {}",
                RawConfig::KEYS.join(", "),
                TurnOverrides::KEYS.join(", ")
            ));
        }
        let mut raw: RawConfig = serde_json::from_value(serde_json::Value::Object(rest)).map_err(|e| e.to_string())?;
        raw.turn = vec![serde_json::from_value(serde_json::Value::Object(turn)).map_err(|e| e.to_string())?];
        Ok(raw)
    }

    /// `RAGCTX_<FIELD>` variables, e.g. `RAGCTX_BUDGET=2000`; the Milvus token and the OpenAI
    /// key also from `MILVUS_TOKEN` and `OPENAI_API_KEY`.
    pub fn from_env() -> Result<RawConfig> {
        let mut raw = RawConfig::from_env_vars()?;
        // Prefixes keep their spaces ("query: "), and an empty one is a value.
        raw.embedder_query_prefix = env_var("RAGCTX_EMBEDDER_QUERY_PREFIX");
        raw.embedder_passage_prefix = env_var("RAGCTX_EMBEDDER_PASSAGE_PREFIX");
        let fallback = |name: &str| env_var(name).filter(|k| !k.is_empty());
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
    pub(crate) condense: Option<ragctx_models::OpenAiConfig>,
    pub(crate) rerank: Option<ragctx_models::RerankConfig>,
    pub(crate) rerank_top_n: usize,
    pub(crate) reading: crate::ingest::ReadOptions,
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
    /// Deadline of one turn in `ragctx serve`.
    pub fn turn_timeout(&self) -> std::time::Duration {
        self.turn_timeout
    }
    /// The OpenAI-compatible generator's configuration; `None` = the extractive generator.
    pub fn openai(&self) -> Option<&ragctx_models::OpenAiConfig> {
        self.openai.as_ref()
    }
    /// The condenser's endpoint (`condense openai`); `None` when none is configured.
    pub fn condense(&self) -> Option<&ragctx_models::OpenAiConfig> {
        self.condense.as_ref()
    }

    /// How ingest reads files: each file's limits, and whether links are followed.
    pub fn reading(&self) -> &crate::ingest::ReadOptions {
        &self.reading
    }

    /// The rerank endpoint (`rerank remote`); `None` when none is configured.
    pub fn rerank(&self) -> Option<&ragctx_models::RerankConfig> {
        self.rerank.as_ref()
    }

    /// Every front's layering, in one place: defaults → the TOML file `config` names → the
    /// `RAGCTX_*` environment → `given` (the front's own layer: flags, keyword arguments),
    /// validated once. The CLI, Python and the servers they start all come through here.
    pub fn layered(config: Option<&Path>, given: RawConfig) -> Result<Settings> {
        let mut raw = RawConfig::default();
        if let Some(path) = config {
            raw = raw.merge(RawConfig::from_file(path)?);
        }
        Settings::from_raw(raw.merge(RawConfig::from_env()?).merge(given))
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
        let mut turn = TurnSettings::default();
        for layer in raw.turn.iter().cloned() {
            turn = layer.apply(&turn)?;
        }
        let mut embedder = EmbedderSettings::from_raw(&raw)?;
        let data_dir = raw.data_dir.clone().unwrap_or_else(|| PathBuf::from("ragctx-data"));
        if let (EmbedderSettings::Local { precision, .. }, None, Backend::Embedded) =
            (&mut embedder, &raw.embedder_precision, &backend)
        {
            *precision = store_precision(&data_dir)?;
        }
        let openai = match raw.generator.as_deref().unwrap_or("extractive") {
            "extractive" => None,
            "openai" => Some(ragctx_models::OpenAiConfig {
                base_url: raw.openai_base_url.clone().unwrap_or_else(|| "https://api.openai.com/v1".into()),
                model: raw.openai_model.clone().ok_or_else(|| {
                    Error::InvalidInput("generator openai needs openai_model (RAGCTX_OPENAI_MODEL)".into())
                })?,
                api_key: raw.openai_api_key.clone(),
                timeout: std::time::Duration::from_secs(raw.openai_timeout_secs.unwrap_or(60)),
                retries: 2,
                max_tokens: Some(raw.openai_max_tokens.unwrap_or(1024)).filter(|n| *n > 0),
            }),
            other => bad!("unknown generator {other:?}: use extractive or openai"),
        };
        let condense = condense_config(&raw, openai.as_ref())?;
        if turn.condense == ragctx_core::Condense::OpenAi && condense.is_none() {
            bad!("condense openai needs a condenser endpoint: set condense_url and condense_model (RAGCTX_CONDENSE_URL, RAGCTX_CONDENSE_MODEL), or generator openai to use its endpoint");
        }
        let rerank = rerank_config(&raw)?;
        if turn.rerank == ragctx_core::Rerank::Remote && rerank.is_none() {
            bad!("rerank remote needs a rerank endpoint: set rerank_url (RAGCTX_RERANK_URL)");
        }
        let rerank_top_n = match raw.rerank_top_n {
            Some(n) if !(1..=1_000).contains(&n) => bad!("rerank_top_n must be between 1 and 1000, got {n}"),
            n => n.unwrap_or(ragctx_engine::DEFAULT_RERANK_TOP_N),
        };
        Ok(Settings {
            data_dir,
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
            openai,
            condense,
            rerank,
            rerank_top_n,
            reading: crate::ingest::ReadOptions {
                limits: {
                    let default = crate::reader::ReadLimits::default();
                    crate::reader::ReadLimits {
                        time: match raw.ingest_file_secs {
                            Some(0) => bad!("ingest_file_secs must be at least 1"),
                            Some(t) => std::time::Duration::from_secs(t),
                            None => default.time,
                        },
                        memory_mb: match raw.ingest_file_mb {
                            Some(mb) if mb < 512 => bad!("ingest_file_mb must be at least 512, got {mb}"),
                            mb => mb.unwrap_or(default.memory_mb),
                        },
                    }
                },
                follow_links: raw.follow_links.unwrap_or(false),
            },
        })
    }
}

/// The in-process model's precision when none is set: a data dir keeps the one it was made
/// with (its recorded model; fp32 for a store that predates recorded models), and a new one
/// is made with int8 (2–3× faster to fill, of the same quality: bench/README.md).
fn store_precision(data_dir: &Path) -> Result<ragctx_models::Precision> {
    use ragctx_models::Precision;
    if !ragctx_store::holds_store(data_dir) {
        return Ok(Precision::Int8);
    }
    Ok(match ragctx_store::DataDir::stored_model_at(data_dir)? {
        Some(model) if model.contains("/int8") => Precision::Int8,
        // Another model's, or vectors from before models were recorded: fp32.
        Some(_) => Precision::F32,
        // No vectors yet (a data dir holding only an embedding cache, or never filled): new.
        None => Precision::Int8,
    })
}

/// The rerank endpoint: `rerank_url` with its model, key, shape and time-out; `None` when no
/// URL is set (and then none of the others may be).
fn rerank_config(raw: &RawConfig) -> Result<Option<ragctx_models::RerankConfig>> {
    let Some(url) = &raw.rerank_url else {
        if raw.rerank_model.is_some() || raw.rerank_api.is_some() || raw.rerank_timeout_ms.is_some() {
            bad!("rerank_model, rerank_api and rerank_timeout_ms need rerank_url (RAGCTX_RERANK_URL)");
        }
        return Ok(None);
    };
    let timeout = match raw.rerank_timeout_ms {
        Some(t) if !(1..=60_000).contains(&t) => bad!("rerank_timeout_ms must be between 1 and 60000, got {t}"),
        t => std::time::Duration::from_millis(t.unwrap_or(2_000)),
    };
    Ok(Some(ragctx_models::RerankConfig {
        url: url.clone(),
        model: raw.rerank_model.clone(),
        api_key: raw.rerank_api_key.clone(),
        timeout,
        api: ragctx_models::RerankApi::parse(raw.rerank_api.as_deref().unwrap_or("auto"), url)?,
    }))
}

/// The condenser's endpoint: `condense_url` with `condense_model` (or `openai_model`), or
/// the generator's endpoint when the generator is `openai`; `None` when neither is set.
fn condense_config(
    raw: &RawConfig,
    generator: Option<&ragctx_models::OpenAiConfig>,
) -> Result<Option<ragctx_models::OpenAiConfig>> {
    let timeout = match raw.condense_timeout_ms {
        Some(t) if !(1..=60_000).contains(&t) => bad!("condense_timeout_ms must be between 1 and 60000, got {t}"),
        t => std::time::Duration::from_millis(t.unwrap_or(3_000)),
    };
    let model = raw.condense_model.clone().or_else(|| raw.openai_model.clone());
    let config = match (&raw.condense_url, generator) {
        (Some(url), _) => ragctx_models::OpenAiConfig {
            base_url: url.clone(),
            model: model.ok_or_else(|| {
                Error::InvalidInput("condense_url needs condense_model (RAGCTX_CONDENSE_MODEL)".into())
            })?,
            api_key: raw.openai_api_key.clone(),
            timeout,
            retries: 0,
            max_tokens: None,
        },
        (None, Some(g)) => ragctx_models::OpenAiConfig {
            model: raw.condense_model.clone().unwrap_or_else(|| g.model.clone()),
            timeout,
            retries: 0,
            ..g.clone()
        },
        (None, None) if raw.condense_model.is_some() => {
            bad!("condense_model needs condense_url (RAGCTX_CONDENSE_URL), or generator openai to use its endpoint")
        }
        (None, None) => return Ok(None),
    };
    Ok(Some(config))
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

    fn layer(toml_text: &str) -> RawConfig {
        RawConfig::from_json(toml::from_str(toml_text).unwrap()).unwrap()
    }

    #[test]
    fn layers_merge_later_wins_and_bad_values_fail() {
        let file = layer("budget = 100\nlimit = 4\ncollection = \"c\"");
        let flags =
            RawConfig { turn: vec![TurnOverrides { budget: Some(300), ..Default::default() }], ..Default::default() };
        let s = Settings::from_raw(RawConfig::default().merge(file).merge(flags)).unwrap();
        assert_eq!((s.turn.budget, s.turn.limit), (300, 4));
        let e = RawConfig::from_json(toml::from_str("budgett = 1").unwrap()).unwrap_err();
        assert!(e.contains("unknown setting `budgett`") && e.contains("budget"), "{e}");
        let e = RawConfig::from_json(toml::from_str("strategy = \"fast\"").unwrap()).unwrap_err();
        assert!(e.contains("unknown strategy"), "{e}");
        assert!(Settings::from_raw(layer("limit = 0")).is_err());
    }

    #[test]
    fn mode_is_validated_with_the_rest_and_auto_classifies() {
        use ragctx_core::Mode;
        assert_eq!(Settings::from_raw(layer("mode = \"auto\"")).unwrap().turn().mode, Mode::Auto);
        assert_eq!(Settings::from_raw(layer("mode = \"follow_up\"")).unwrap().turn().mode, Mode::FollowUp);
        assert_eq!(Settings::from_raw(RawConfig::default()).unwrap().turn().mode, Mode::Auto);
        let e = RawConfig::from_json(toml::from_str("mode = \"sideways\"").unwrap()).unwrap_err();
        assert!(e.contains("unknown mode"), "{e}");
    }

    #[test]
    fn a_standing_filter_and_a_later_one_both_hold() {
        let file = layer(r#"filter = '{"a": 1}'"#);
        let table = layer("[filter]\nb = 2");
        let s = Settings::from_raw(file.merge(table)).unwrap();
        assert_eq!(s.turn().filter, ragctx_core::Filter::parse(r#"{"and": [{"a": 1}, {"b": 2}]}"#).unwrap());
    }
}
