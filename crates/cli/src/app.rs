//! The one factory: settings → backends → engine.

use crate::config::Settings;
use anyhow::Result;
use ragctx_core::{Embedder, SessionStore};
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
            vectors: Arc::new(data.vector_store()),
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
