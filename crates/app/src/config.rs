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
mod raw;
pub use backends::{Backend, EmbedderSettings, MilvusSettings};
use ragctx_engine::TurnSettings;
use raw::default;
pub use raw::{ConfigField, RawConfig};
use std::path::{Path, PathBuf};

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
    pub(crate) reading: ReadOptions,
    /// Whether ingest keeps the sentence index (`sentence_index`; never with Milvus).
    pub(crate) sentence_index: bool,
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

    /// Whether ingest keeps the sentence index: `sentence_index`, with the embedded store
    /// (Milvus keeps none) and the in-process encoder (a remote one would be sent every
    /// sentence again, and its vectors are not those the scorer was fitted on).
    pub fn sentence_index(&self) -> bool {
        self.sentence_index
            && matches!(self.backend, Backend::Embedded)
            && matches!(self.embedder, EmbedderSettings::Local { .. })
    }

    /// How ingest reads files: each file's limits, and whether links are followed.
    pub fn reading(&self) -> &ReadOptions {
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
        let backend = match raw.backend.clone().unwrap_or_else(default::backend).as_str() {
            "embedded" => Backend::Embedded,
            "milvus" => Backend::milvus(&raw)?,
            other => bad!("unknown backend {other:?}: use --backend embedded or --backend milvus"),
        };
        let sessions = raw.sessions.clone().unwrap_or_else(default::sessions);
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
        let data_dir = raw.data_dir.clone().unwrap_or_else(default::data_dir);
        if let (EmbedderSettings::Local { precision, .. }, None, Backend::Embedded) =
            (&mut embedder, &raw.embedder_precision, &backend)
        {
            *precision = store_precision(&data_dir)?;
        }
        let openai = match raw.generator.clone().unwrap_or_else(default::generator).as_str() {
            "extractive" => None,
            "openai" => Some(ragctx_models::OpenAiConfig {
                base_url: raw.openai_base_url.clone().unwrap_or_else(default::openai_base_url),
                model: raw.openai_model.clone().ok_or_else(|| {
                    Error::InvalidInput("generator openai needs openai_model (RAGCTX_OPENAI_MODEL)".into())
                })?,
                api_key: raw.openai_api_key.clone(),
                timeout: std::time::Duration::from_secs(
                    raw.openai_timeout_secs.unwrap_or_else(default::openai_timeout_secs),
                ),
                retries: 2,
                max_tokens: Some(raw.openai_max_tokens.unwrap_or_else(default::openai_max_tokens)).filter(|n| *n > 0),
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
            n => n.unwrap_or_else(default::rerank_top_n),
        };
        Ok(Settings {
            data_dir,
            model_dir: raw.model_dir.unwrap_or_else(default::model_dir),
            embedder,
            turn,
            ef_search: raw.ef_search,
            backend,
            sessions,
            api_keys: raw.api_keys.unwrap_or_else(default::api_keys),
            keys_file: raw.keys_file,
            tenant: ragctx_core::Tenant::parse(&raw.tenant.filter(|t| !t.is_empty()).unwrap_or_else(default::tenant))?,
            turn_timeout: match raw.turn_timeout_secs {
                Some(0) => bad!("turn_timeout_secs must be at least 1"),
                t => std::time::Duration::from_secs(t.unwrap_or_else(default::turn_timeout_secs)),
            },
            openai,
            condense,
            rerank,
            rerank_top_n,
            sentence_index: raw.sentence_index.unwrap_or_else(default::sentence_index),
            reading: ReadOptions {
                limits: crate::reader::ReadLimits {
                    time: match raw.ingest_file_secs {
                        Some(0) => bad!("ingest_file_secs must be at least 1"),
                        t => std::time::Duration::from_secs(t.unwrap_or_else(default::ingest_file_secs)),
                    },
                    memory_mb: match raw.ingest_file_mb {
                        Some(mb) if mb < 512 => bad!("ingest_file_mb must be at least 512, got {mb}"),
                        mb => mb.unwrap_or_else(default::ingest_file_mb),
                    },
                },
                follow_links: raw.follow_links.unwrap_or_else(default::follow_links),
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
        t => std::time::Duration::from_millis(t.unwrap_or_else(default::rerank_timeout_ms)),
    };
    Ok(Some(ragctx_models::RerankConfig {
        url: url.clone(),
        model: raw.rerank_model.clone(),
        api_key: raw.rerank_api_key.clone(),
        timeout,
        api: ragctx_models::RerankApi::parse(&raw.rerank_api.clone().unwrap_or_else(default::rerank_api), url)?,
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
        t => std::time::Duration::from_millis(t.unwrap_or_else(default::condense_timeout_ms)),
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

/// How files are read: each file's limits, and whether a folder's symbolic links are followed.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// What one file may take (`ingest_file_secs`, `ingest_file_mb`).
    pub limits: crate::reader::ReadLimits,
    /// Follow a folder's symbolic links that stay inside it (`follow_links`, `ingest
    /// --follow-links`); a link out of the folder is never followed, nor one back into a
    /// folder being walked.
    pub follow_links: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use ragctx_core::TurnOverrides;

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
