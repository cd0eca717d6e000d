//! The one factory: settings → backends → engine.

use crate::config::{Backend, MilvusSettings, Settings};
use anyhow::Result;
use ragctx_core::{Embedder, SessionStore, VectorStore};
use ragctx_engine::Engine;
use ragctx_index::IndexParams;
use ragctx_models::{Cl100kCounter, ExtractiveGenerator, MiniLmEmbedder, OpenAiGenerator};
use ragctx_redis::RedisSessionStore;
use ragctx_store::DataDir;
use std::sync::Arc;

pub struct App {
    pub settings: Settings,
    pub data: DataDir,
    pub embedder: Arc<MiniLmEmbedder>,
    pub engine: Engine,
}

pub fn index_params(settings: &Settings) -> IndexParams {
    let mut p = IndexParams::default();
    if let Some(ef) = settings.ef_search {
        p.ef_search = ef.max(1);
    }
    p
}

impl App {
    /// Loads the model and opens the data dir.
    pub fn open(settings: Settings) -> Result<App> {
        let embedder = Arc::new(MiniLmEmbedder::load(&settings.model_dir)?);
        let data = DataDir::open_with(&settings.data_dir, Some(embedder.dimension()), index_params(&settings))?;
        let engine = Engine {
            vectors: vector_store(&settings, &data, embedder.dimension())?,
            sessions: session_store(&settings, &data)?,
            embedder: embedder.clone(),
            counter: Arc::new(Cl100kCounter::new()),
            generator: match &settings.openai {
                Some(c) => Arc::new(OpenAiGenerator::new(c.clone())?),
                None => Arc::new(ExtractiveGenerator::default()),
            },
        };
        Ok(App { settings, data, embedder, engine })
    }
}

/// The vector store the settings name: the data dir's index, or a Milvus collection.
pub fn vector_store(settings: &Settings, data: &DataDir, dimension: usize) -> Result<Arc<dyn VectorStore>> {
    Ok(match &settings.backend {
        Backend::Embedded => Arc::new(data.vector_store()),
        Backend::Milvus(m) => milvus_store(m, dimension)?,
    })
}

#[cfg(feature = "milvus")]
fn milvus_store(m: &MilvusSettings, dimension: usize) -> Result<Arc<dyn VectorStore>> {
    let mut config = ragctx_milvus::MilvusConfig::new(&m.uri, &m.collection);
    config.index = m.index.parse()?;
    config.consistency = m.consistency.parse()?;
    config.timeout = std::time::Duration::from_secs(m.timeout_secs);
    config.token = m.token.clone();
    Ok(Arc::new(ragctx_milvus::MilvusVectorStore::connect(config, dimension)?))
}

#[cfg(not(feature = "milvus"))]
fn milvus_store(_: &MilvusSettings, _: usize) -> Result<Arc<dyn VectorStore>> {
    anyhow::bail!("this ragctx was built without Milvus support: rebuild with `--features milvus` (on by default)")
}

/// The session store the settings name: the data dir's, or Redis.
pub fn session_store(settings: &Settings, data: &DataDir) -> Result<Arc<dyn SessionStore>> {
    Ok(if settings.sessions == "embedded" {
        Arc::new(data.session_store())
    } else {
        Arc::new(RedisSessionStore::connect(&settings.sessions)?)
    })
}

/// The data dir alone, for commands that embed nothing (trace, session).
pub fn open_data(settings: &Settings) -> Result<DataDir> {
    Ok(DataDir::open_with(&settings.data_dir, None, index_params(settings))?)
}
