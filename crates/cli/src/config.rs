//! Settings in two steps: raw layers (defaults → TOML file → `RAGCTX_*` env → flags) merge
//! into one [`RawConfig`], which is validated once into [`Settings`].

use anyhow::{bail, Context, Result};
use ragctx_engine::TurnSettings;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Every setting, each optional so that layers can be merged.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub data_dir: Option<PathBuf>,
    pub model_dir: Option<PathBuf>,
    pub backend: Option<String>,
    pub sessions: Option<String>,
    pub strategy: Option<String>,
    pub granularity: Option<String>,
    pub consumption: Option<String>,
    pub window: Option<usize>,
    pub limit: Option<usize>,
    pub group_size: Option<usize>,
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
            backend,
            sessions,
            strategy,
            granularity,
            consumption,
            window,
            limit,
            group_size,
            min_documents,
            budget,
            session_ttl,
            ef_search,
            api_keys,
            generator,
            openai_base_url,
            openai_model,
            openai_api_key,
            openai_timeout_secs
        )
    }

    pub fn from_file(path: &Path) -> Result<RawConfig> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading config {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("config {}", path.display()))
    }

    /// `RAGCTX_<FIELD>` variables, e.g. `RAGCTX_BUDGET=2000`.
    pub fn from_env() -> Result<RawConfig> {
        fn var(name: &str) -> Option<String> {
            std::env::var(format!("RAGCTX_{name}")).ok().filter(|v| !v.is_empty())
        }
        fn num<T: std::str::FromStr>(name: &str) -> Result<Option<T>> {
            match var(name) {
                Some(v) => v.parse().map(Some).map_err(|_| anyhow::anyhow!("RAGCTX_{name}={v:?} is not a number")),
                None => Ok(None),
            }
        }
        Ok(RawConfig {
            data_dir: var("DATA_DIR").map(PathBuf::from),
            model_dir: var("MODEL_DIR").map(PathBuf::from),
            backend: var("BACKEND"),
            sessions: var("SESSIONS"),
            strategy: var("STRATEGY"),
            granularity: var("GRANULARITY"),
            consumption: var("CONSUMPTION"),
            window: num("WINDOW")?,
            limit: num("LIMIT")?,
            group_size: num("GROUP_SIZE")?,
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
        })
    }
}

/// Validated settings.
#[derive(Clone, Debug)]
pub struct Settings {
    pub data_dir: PathBuf,
    pub model_dir: PathBuf,
    pub turn: TurnSettings,
    pub ef_search: Option<usize>,
    /// `embedded` or a `redis://` URL.
    pub sessions: String,
    pub api_keys: Vec<String>,
    /// `None` = the extractive generator.
    pub openai: Option<ragctx_models::OpenAiConfig>,
}

impl Settings {
    pub fn from_raw(raw: RawConfig) -> Result<Settings> {
        let backend = raw.backend.as_deref().unwrap_or("embedded");
        if backend != "embedded" {
            bail!("backend {backend:?} is not available in this build: use --backend embedded");
        }
        let sessions = raw.sessions.clone().unwrap_or_else(|| "embedded".into());
        if sessions != "embedded" && !sessions.starts_with("redis://") && !sessions.starts_with("rediss://") {
            bail!("session store {sessions:?}: use --sessions embedded or --sessions redis://HOST:PORT");
        }
        let d = TurnSettings::default();
        let turn = TurnSettings {
            strategy: raw.strategy.as_deref().map(str::parse).transpose()?.unwrap_or(d.strategy),
            granularity: raw.granularity.as_deref().map(str::parse).transpose()?.unwrap_or(d.granularity),
            consumption: raw.consumption.as_deref().map(str::parse).transpose()?.unwrap_or(d.consumption),
            window: raw.window.unwrap_or(d.window),
            limit: raw.limit.unwrap_or(d.limit),
            group_size: raw.group_size.unwrap_or(d.group_size),
            min_documents: raw.min_documents.unwrap_or(d.min_documents),
            budget: raw.budget.unwrap_or(d.budget),
            ttl_secs: raw.session_ttl.unwrap_or(d.ttl_secs),
            mode: None,
        };
        turn.validate()?;
        Ok(Settings {
            data_dir: raw.data_dir.unwrap_or_else(|| PathBuf::from("ragctx-data")),
            model_dir: raw.model_dir.unwrap_or_else(default_model_dir),
            turn,
            ef_search: raw.ef_search,
            sessions,
            api_keys: raw.api_keys.unwrap_or_default(),
            openai: match raw.generator.as_deref().unwrap_or("extractive") {
                "extractive" => None,
                "openai" => Some(ragctx_models::OpenAiConfig {
                    base_url: raw.openai_base_url.unwrap_or_else(|| "https://api.openai.com/v1".into()),
                    model: raw.openai_model.context("generator openai needs openai_model (RAGCTX_OPENAI_MODEL)")?,
                    api_key: raw.openai_api_key,
                    timeout: std::time::Duration::from_secs(raw.openai_timeout_secs.unwrap_or(60)),
                    retries: 2,
                }),
                other => bail!("unknown generator {other:?}: use extractive or openai"),
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
}
