//! The validated settings of what ragctx connects to: the embedder and the vector backend.

use super::{default, RawConfig};
use ragctx_core::{Error, Result};

/// Where embeddings come from, validated.
#[derive(Clone, Debug)]
pub enum EmbedderSettings {
    /// The model in `model_dir`, run in process.
    Local {
        /// Put before queries and passages.
        prefixes: ragctx_models::Prefixes,
        /// fp32 or int8 dense layers.
        precision: ragctx_models::Precision,
    },
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

    pub(super) fn from_raw(raw: &RawConfig) -> Result<EmbedderSettings> {
        let prefixes = ragctx_models::Prefixes {
            query: raw.embedder_query_prefix.clone().unwrap_or_else(default::embedder_query_prefix),
            passage: raw.embedder_passage_prefix.clone().unwrap_or_else(default::embedder_passage_prefix),
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
        match raw.embedder.clone().unwrap_or_else(default::embedder).as_str() {
            "local" => {
                if let Some((key, _)) = remote_only.iter().find(|(_, set)| *set) {
                    return Err(Error::InvalidInput(format!(
                        "{key} is set, but the embedder is local (the model in --model-dir): use --embedder openai to embed with a server"
                    )));
                }
                let precision = raw.embedder_precision.clone().unwrap_or_else(default::embedder_precision).parse()?;
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
                c.input_type = raw.embedder_input_type.unwrap_or_else(default::embedder_input_type);
                c.prefixes = prefixes;
                c.batch = raw.embedder_batch.unwrap_or_else(default::embedder_batch);
                c.concurrency = raw.embedder_concurrency.unwrap_or_else(default::embedder_concurrency);
                if c.batch == 0 || c.concurrency == 0 {
                    return Err(Error::InvalidInput(
                        "embedder_batch and embedder_concurrency must be at least 1".into(),
                    ));
                }
                c.timeout = match raw.embedder_timeout_secs {
                    Some(0) => return Err(Error::InvalidInput("embedder_timeout_secs must be at least 1".into())),
                    t => std::time::Duration::from_secs(t.unwrap_or_else(default::embedder_timeout_secs)),
                };
                c.retries = raw.embedder_retries.unwrap_or_else(default::embedder_retries);
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
    /// `http://` or `https://` address of the server.
    pub uri: String,
    /// The collection ragctx keeps its chunks in.
    pub collection: String,
    /// `hnsw` or `flat`: the index made with the collection.
    #[cfg(feature = "milvus")]
    pub index: ragctx_milvus::IndexKind,
    /// Read consistency: `session`, `bounded`, `eventually` or `strong`.
    #[cfg(feature = "milvus")]
    pub consistency: ragctx_milvus::Consistency,
    /// Deadline of one call in seconds.
    pub timeout_secs: u64,
    /// `user:password` or an API key.
    pub token: Option<String>,
}

impl Backend {
    /// The Milvus settings, parsed once into the Milvus crate's own types.
    #[cfg(feature = "milvus")]
    pub(super) fn milvus(raw: &RawConfig) -> Result<Backend> {
        let uri = raw.milvus_uri.clone().unwrap_or_else(default::milvus_uri);
        if !(uri.starts_with("http://") || uri.starts_with("https://")) {
            bad!("milvus_uri {uri:?}: use http://HOST:PORT or https://HOST:PORT");
        }
        let timeout_secs = raw.milvus_timeout_secs.unwrap_or_else(default::milvus_timeout_secs);
        if timeout_secs == 0 {
            bad!("milvus_timeout_secs must be at least 1");
        }
        Ok(Backend::Milvus(MilvusSettings {
            uri,
            collection: raw.collection.clone().unwrap_or_else(default::collection),
            index: raw.milvus_index.clone().unwrap_or_else(default::milvus_index).parse()?,
            consistency: raw.milvus_consistency.clone().unwrap_or_else(default::milvus_consistency).parse()?,
            timeout_secs,
            token: raw.milvus_token.clone(),
        }))
    }

    #[cfg(not(feature = "milvus"))]
    pub(super) fn milvus(_: &RawConfig) -> Result<Backend> {
        Err(Error::InvalidInput(
            "this ragctx was built without Milvus support: rebuild with `--features milvus` (on by default)".into(),
        ))
    }
}
