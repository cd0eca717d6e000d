//! The raw layers: every setting that is not a turn's, declared once with its default, and
//! read from a TOML file, a JSON object or the `RAGCTX_*` environment into a [`RawConfig`].

use ragctx_core::{Error, Result, TurnOverrides};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// How docs/configuration.md shows a row's default: its text, else its value, else none.
macro_rules! shown_default {
    ($value:expr; $($default:expr)?; $text:expr) => {
        Some(String::from($text))
    };
    ($value:expr; $default:expr;) => {
        Some($value.shown())
    };
    ($value:expr; ;) => {
        None
    };
}

/// Declares [`RawConfig`] from one list of rows, each a setting's doc, name, type and default:
/// the struct (each field optional so that layers merge; TOML keys are the field names),
/// [`RawConfig::merge`], the environment layer (`RAGCTX_<FIELD>`, the field name in capitals),
/// each default (`default::<field>()`, what `Settings::from_raw` uses when no layer gives one)
/// and [`RawConfig::fields`] (docs/configuration.md's table is checked against them). A
/// setting is added in one place: here, or for a turn's setting in
/// `ragctx_core::TurnOverrides`, which every front reads.
///
/// A row is `name: Type = default` (a value), `name: Type => "shown"` (a default that depends
/// on other settings, as the docs tell it), both (a value the text explains), or neither.
macro_rules! raw_config {
    ($($(#[doc = $doc:literal])* $field:ident: $ty:ty $(= $default:expr)? $(=> $shown:expr)?,)+) => {
        /// Every setting, each optional so that layers can be merged; the turn's settings
        /// are [`TurnOverrides`], one per layer, applied in order.
        #[derive(Clone, Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct RawConfig {
            $($(#[doc = $doc])* pub $field: Option<$ty>,)+
            /// The turn settings of each layer, lowest first.
            #[serde(skip)]
            pub turn: Vec<TurnOverrides>,
        }

        /// Each setting's default where it is a value of its own.
        pub(super) mod default {
            use super::*;
            $($(pub(in crate::config) fn $field() -> $ty {
                $default
            })?)+
        }

        impl RawConfig {
            /// The keys of the settings that are not a turn's.
            const KEYS: &'static [&'static str] = &[$(stringify!($field)),+];

            /// Each setting that is not a turn's, in the declared order: its name, doc and
            /// default as docs/configuration.md shows it.
            pub fn fields() -> Vec<ConfigField> {
                vec![$(ConfigField {
                    name: stringify!($field),
                    doc: concat!($($doc),*).trim(),
                    default: shown_default!(default::$field(); $($default)?; $($shown)?),
                }),+]
            }

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

/// One setting that is not a turn's, as docs/configuration.md's table shows it (a turn's:
/// [`ragctx_core::TurnField`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigField {
    /// The setting's name: its config key; `RAGCTX_` and the name in capitals is its variable.
    pub name: &'static str,
    /// What it is: the doc comment of its row.
    pub doc: &'static str,
    /// Its default in Markdown (`` `embedded` ``, `120`, or a sentence where it depends on
    /// other settings); `None`: unset unless given.
    pub default: Option<String>,
}

raw_config! {
    /// The data dir.
    data_dir: PathBuf = "ragctx-data".into(),
    /// The in-process model's files.
    model_dir: PathBuf = default_model_dir() => format!(
        "`{}` (from the working directory, else the repository ragctx was built in)",
        ragctx_models::DEFAULT_MODEL_DIR
    ),
    /// `local` (the model in `model_dir`, in process) or `openai` (an OpenAI-compatible
    /// `/v1/embeddings` server at `embedder_url`).
    embedder: String = "local".into(),
    /// e.g. `http://127.0.0.1:8000/v1` (what `scripts/embedder-up` prints).
    embedder_url: String,
    /// The model name sent to the embedding server.
    embedder_model: String,
    /// Also read from RAGCTX_EMBEDDER_API_KEY.
    embedder_api_key: String,
    /// Send `input_type` query/passage (OpenAI's own API wants false).
    embedder_input_type: bool = true,
    /// Put before each query before embedding (e5: `query: `).
    embedder_query_prefix: String = String::new(),
    /// Put before each passage before embedding (e5: `passage: `).
    embedder_passage_prefix: String = String::new(),
    // The value is the one a local model over Milvus takes; the embedded store's is its own.
    /// `fp32` or `int8`: what the in-process model's dense layers compute in.
    embedder_precision: String = "fp32".into()
        => "the data dir's own; `int8` for a new one (`fp32` with `backend = \"milvus\"`)",
    /// Texts per request.
    embedder_batch: usize = remote_embedder().batch,
    /// Requests in flight at once.
    embedder_concurrency: usize = remote_embedder().concurrency,
    /// Deadline of one request in seconds.
    embedder_timeout_secs: u64 = remote_embedder().timeout.as_secs(),
    /// Retries after a failed request, with back-off.
    embedder_retries: u32 = remote_embedder().retries,
    /// `embedded` (the data dir's index) or `milvus`.
    backend: String = "embedded".into(),
    /// Milvus server (backend `milvus`).
    milvus_uri: String = "http://127.0.0.1:19530".into(),
    /// Milvus collection.
    collection: String = "ragctx".into(),
    /// `hnsw` or `flat`: the index built when the collection is created.
    milvus_index: String = "hnsw".into(),
    /// `session`, `bounded`, `eventually` or `strong`.
    milvus_consistency: String = "session".into(),
    /// Per-call deadline in seconds.
    milvus_timeout_secs: u64 = 5,
    /// `user:password` or API key (also read from MILVUS_TOKEN).
    milvus_token: String,
    /// `embedded`, `redis://HOST:PORT` or `redis+cluster://HOST:PORT[,HOST:PORT...]`.
    sessions: String = "embedded".into(),
    /// HNSW search breadth of the embedded index (unset: the index's own, scaled up with its
    /// size).
    ef_search: usize => ragctx_index::IndexParams::default().ef_search.to_string(),
    /// API keys of `ragctx serve` (env: RAGCTX_API_KEYS, comma-separated): each `write` in
    /// tenant `default`. `keys_file` scopes keys to tenants and roles instead.
    api_keys: Vec<String> = Vec::new(),
    /// A TOML file of scoped keys for `ragctx serve` (`[[keys]]` with `key` or `sha256`,
    /// `tenant`, `role`): re-read when it changes (DESIGN §8).
    keys_file: PathBuf,
    /// The tenant the CLI and the Python package act as (empty: the default).
    tenant: String = ragctx_core::DEFAULT_TENANT.into(),
    /// `extractive` or `openai`.
    generator: String = "extractive".into(),
    /// The OpenAI-compatible generator's base URL.
    openai_base_url: String = "https://api.openai.com/v1".into(),
    /// The generator's model (needed with `generator = "openai"`).
    openai_model: String,
    /// Also read from OPENAI_API_KEY.
    openai_api_key: String,
    /// Deadline of one generation in seconds.
    openai_timeout_secs: u64 = 60,
    /// The most tokens an answer may take (`max_tokens`; 0 leaves it to the server).
    openai_max_tokens: u32 = 1024,
    /// Deadline of one turn in `ragctx serve` in seconds: past it the caller gets 503.
    turn_timeout_secs: u64 = 30,
    /// The condenser's OpenAI-compatible base URL (`condense openai`), e.g. what
    /// `scripts/llm-up` prints.
    condense_url: String => "the generator's, with `generator = \"openai\"`",
    /// The condenser's model (key: `openai_api_key`).
    condense_model: String => "`openai_model`",
    /// Deadline of one rewrite in milliseconds: past it the turn searches with its own
    /// question.
    condense_timeout_ms: u64 = 3_000,
    /// The rerank endpoint (`rerank remote`), the whole URL: TEI's `http://HOST:PORT/rerank`,
    /// `https://api.cohere.com/v2/rerank`, `https://api.jina.ai/v1/rerank`, llama.cpp
    /// server's `http://HOST:PORT/v1/rerank`.
    rerank_url: String,
    /// The model name sent to the rerank endpoint (Cohere and Jina need one).
    rerank_model: String,
    /// Also read from RAGCTX_RERANK_API_KEY.
    rerank_api_key: String,
    /// `auto` (`tei` when the URL's path is `/rerank`, else `documents`), `tei` (`texts` in, a
    /// bare array out) or `documents` (Cohere, Jina, llama.cpp).
    rerank_api: String = "auto".into(),
    /// Deadline of one rerank in milliseconds: past it the turn keeps the search's order.
    rerank_timeout_ms: u64 = 2_000,
    /// Candidates sent to the reranker at most, the best of the search.
    rerank_top_n: usize = ragctx_engine::DEFAULT_RERANK_TOP_N,
    /// The most seconds reading one file at ingest may take: past it the file is left out,
    /// named with the limit.
    ingest_file_secs: u64 = crate::reader::ReadLimits::default().time.as_secs(),
    /// The most memory (MiB) reading one file may use in a reader process: past it the file
    /// is left out, named with the limit.
    ingest_file_mb: u64 = crate::reader::ReadLimits::default().memory_mb,
    /// Follow a folder's symbolic links that stay inside it (a link out of the folder never
    /// is).
    follow_links: bool = false,
    /// Keep each chunk's sentences with their vectors at ingest (the sentence index that
    /// compress learned reads; about 1 KB per sentence in the data dir, the store's and the
    /// embedding cache's); off: chunks only, and their blocks stay whole. Only with the
    /// in-process embedder and the embedded store.
    sentence_index: bool = true,
}

/// The remote embedder's own defaults (`ragctx_models`), which are the settings' too.
fn remote_embedder() -> ragctx_models::RemoteEmbedderConfig {
    ragctx_models::RemoteEmbedderConfig::new("", "")
}

/// A setting's type: read from an environment variable, shown as a default in the docs.
trait SettingType: Sized {
    fn from_env(text: &str) -> Option<Self>;
    /// Markdown: a word or a path in backticks, a number as it is.
    fn shown(&self) -> String;
}

macro_rules! numbers {
    ($($t:ty),+) => {
        $(impl SettingType for $t {
            fn from_env(text: &str) -> Option<Self> {
                text.parse().ok()
            }
            fn shown(&self) -> String {
                self.to_string()
            }
        })+
    };
}
numbers!(usize, u64, u32);

impl SettingType for String {
    fn from_env(text: &str) -> Option<Self> {
        Some(text.to_owned())
    }
    fn shown(&self) -> String {
        if self.is_empty() {
            "empty".into()
        } else {
            format!("`{self}`")
        }
    }
}

impl SettingType for PathBuf {
    fn from_env(text: &str) -> Option<Self> {
        Some(text.into())
    }
    fn shown(&self) -> String {
        format!("`{}`", self.display())
    }
}

impl SettingType for bool {
    fn from_env(text: &str) -> Option<Self> {
        text.parse().ok()
    }
    fn shown(&self) -> String {
        format!("`{self}`")
    }
}

/// Comma-separated, blanks dropped (`RAGCTX_API_KEYS=k1,k2`).
impl SettingType for Vec<String> {
    fn from_env(text: &str) -> Option<Self> {
        Some(text.split(',').map(|k| k.trim().to_owned()).filter(|k| !k.is_empty()).collect())
    }
    fn shown(&self) -> String {
        if self.is_empty() {
            "none".into()
        } else {
            self.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
        }
    }
}

/// A variable of the process environment: the one place the settings read it.
fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn env_value<T: SettingType>(field: &str) -> Result<Option<T>> {
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
