//! The one factory: settings → backends → engine.

use crate::config::{Backend, EmbedderSettings, MilvusSettings, Settings};
use ragctx_core::{Embedder, Error, Result, SessionStore, VectorStore};
use ragctx_engine::Engine;
use ragctx_index::IndexParams;
use ragctx_models::{Cl100kCounter, ExtractiveGenerator, MiniLmEmbedder, OpenAiGenerator, RemoteEmbedder};
use ragctx_redis::RedisSessionStore;
use ragctx_store::{DataDir, SharedDir};
use std::sync::Arc;

/// An opened ragctx: its settings, the backends they name and the engine over them.
pub struct App {
    /// The settings it was opened with.
    pub settings: Settings,
    /// The data dir, when a backend lives there: held by this process (and served to the
    /// others that open it) or reached through the process that holds it (design §10).
    /// `None` with Milvus and Redis (production): nothing local is opened.
    pub data: Option<SharedDir>,
    /// The embedder the settings name, shared with the engine.
    pub embedder: Arc<dyn Embedder>,
    /// The same embedder when it runs in process (for what only it can tell: its tokens).
    pub local: Option<Arc<MiniLmEmbedder>>,
    /// The turn pipeline over the opened stores as the settings' tenant sees them, the
    /// embedder, the cl100k counter and the generator the settings name (extractive without
    /// an OpenAI endpoint).
    pub engine: Engine,
    /// The same over the unscoped stores: for a server that serves several tenants
    /// ([`Engine::scoped`] per request) and admin listings. Nothing else uses it.
    pub unscoped: Engine,
}

/// The embedder the settings name: the model in `model_dir` run in process, or an
/// OpenAI-compatible server (asked once for a query embedding, which gives its dimension).
pub fn embedder(settings: &Settings) -> Result<Arc<dyn Embedder>> {
    Ok(embedders(settings)?.0)
}

/// The embedder, and the same one as the in-process model when it is that.
type Embedders = (Arc<dyn Embedder>, Option<Arc<MiniLmEmbedder>>);

fn embedders(settings: &Settings) -> Result<Embedders> {
    Ok(match &settings.embedder {
        EmbedderSettings::Local { prefixes, precision } => {
            let local = MiniLmEmbedder::load(&settings.model_dir)?.with_precision(*precision);
            let local = Arc::new(local.with_prefixes(prefixes.clone()));
            (local.clone(), Some(local))
        }
        EmbedderSettings::OpenAi(c) => (Arc::new(RemoteEmbedder::connect(c.clone())?), None),
    })
}

/// Ties the data dir to the embedder's model (refused when it holds another model's vectors).
pub fn bind_model(settings: &Settings, data: &SharedDir, embedder: &dyn Embedder) -> Result<()> {
    data.bind_model(embedder.model_id(), settings.embedder.is_unrecorded_default())
}

/// The vector index's parameters: the defaults, with the settings' `ef_search` (at least 1)
/// when set.
pub fn index_params(settings: &Settings) -> IndexParams {
    let mut p = IndexParams::default();
    if let Some(ef) = settings.ef_search {
        p.ef_search = ef.max(1);
    }
    p
}

/// An engine over the given stores and embedder, with ragctx's token counter and the
/// extractive generator: what [`App::open`] builds before it adds the configured generator,
/// and what the evaluations replay conversations through (over in-memory stores).
pub fn engine_over(
    vectors: Arc<dyn VectorStore>,
    sessions: Arc<dyn SessionStore>,
    embedder: Arc<dyn Embedder>,
) -> Engine {
    Engine::new(vectors, sessions, embedder, Arc::new(Cl100kCounter::new()), Arc::new(ExtractiveGenerator::default()))
}

/// Gives `engine` the generator, the condenser and the reranker the settings name: the
/// `openai` generator when one is configured (else it keeps its own), the condenser of
/// `condense_url` or of the generator's endpoint, and the reranker of `rerank_url`. The
/// factory does this for every engine it opens; evaluations over their own stores call it too.
pub fn with_models(engine: &mut Engine, settings: &Settings) -> Result<()> {
    if let Some(c) = &settings.openai {
        engine.generator = Arc::new(OpenAiGenerator::new(c.clone())?);
    }
    engine.condenser = condenser(settings)?;
    engine.reranker = match &settings.rerank {
        Some(c) => Some(Arc::new(ragctx_models::RemoteReranker::new(c.clone())?)),
        None => None,
    };
    engine.rerank_top_n = settings.rerank_top_n;
    engine.sentence_index = settings.sentence_index();
    Ok(())
}

/// The condenser the settings name (`condense_url`, or the `openai` generator's endpoint).
pub fn condenser(settings: &Settings) -> Result<Option<Arc<dyn ragctx_core::Condenser>>> {
    Ok(match &settings.condense {
        Some(c) => Some(Arc::new(ragctx_models::OpenAiCondenser::new(c.clone())?)),
        None => None,
    })
}

/// Whether the settings keep anything in the data dir (vectors or sessions).
pub fn uses_data_dir(settings: &Settings) -> bool {
    matches!(settings.backend, Backend::Embedded) || settings.sessions == "embedded"
}

impl App {
    /// The agent steps (the MCP tools, Python's `search`/`open`/`forget`, `bench steps`) over
    /// this app's engine and turn settings, with the configured turn deadline.
    pub fn agent_scope(&self) -> ragctx_engine::agent::Scope {
        ragctx_engine::agent::Scope {
            engine: self.engine.clone(),
            base: self.settings.turn().clone(),
            session_prefix: None,
            timeout: self.settings.turn_timeout(),
        }
    }

    /// Loads the model and opens the backends: the data dir only when one of them is in it.
    pub fn open(settings: Settings) -> Result<App> {
        let (embedder, local) = embedders(&settings)?;
        let data =
            if uses_data_dir(&settings) { Some(open_data(&settings, Some(embedder.dimension()))?) } else { None };
        if let (Some(d), Backend::Embedded) = (&data, &settings.backend) {
            bind_model(&settings, d, embedder.as_ref())?;
        }
        let mut engine = engine_over(
            vector_store(&settings, data.as_ref(), embedder.dimension(), Some(embedder.model_id()))?,
            session_store(&settings, data.as_ref())?,
            embedder.clone(),
        );
        with_models(&mut engine, &settings)?;
        let unscoped = engine;
        let engine = unscoped.scoped(&settings.tenant);
        Ok(App { settings, data, embedder, local, engine, unscoped })
    }

    /// The data dir held by this process, for commands that work on the embedded store's
    /// index itself (benchmarks): refused while another process holds it.
    pub fn data(&self, what: &str) -> Result<Arc<DataDir>> {
        let shared = self
            .data
            .as_ref()
            .ok_or_else(|| Error::InvalidInput(format!("{what} needs the embedded backend (--backend embedded)")))?;
        shared.held().ok_or_else(|| Error::Unavailable {
            backend: "embedded store".into(),
            message: format!(
                "{what} works on the index itself and needs {} to itself: another ragctx process holds it",
                shared.path().display()
            ),
        })
    }
}

fn data_dir(data: Option<&SharedDir>) -> Result<&SharedDir> {
    data.ok_or_else(|| Error::InvalidInput("the data dir was not opened for an embedded backend".into()))
}

/// The vector store the settings name: the data dir's index, or a Milvus collection (created
/// for `model`'s vectors, or checked to hold them; `None` for commands that embed nothing).
pub fn vector_store(
    settings: &Settings,
    data: Option<&SharedDir>,
    dimension: usize,
    model: Option<&str>,
) -> Result<Arc<dyn VectorStore>> {
    Ok(match &settings.backend {
        Backend::Embedded => Arc::new(data_dir(data)?.clone()),
        Backend::Milvus(m) => milvus_store(m, dimension, model, settings.embedder.is_unrecorded_default())?,
    })
}

#[cfg(feature = "milvus")]
fn milvus_store(
    m: &MilvusSettings,
    dimension: usize,
    model: Option<&str>,
    unrecorded_default: bool,
) -> Result<Arc<dyn VectorStore>> {
    let mut config = ragctx_milvus::MilvusConfig::new(&m.uri, &m.collection);
    config.index = m.index;
    config.consistency = m.consistency;
    config.timeout = std::time::Duration::from_secs(m.timeout_secs);
    config.token = m.token.clone();
    config.model = model.map(str::to_owned);
    config.unrecorded_is_model = unrecorded_default;
    Ok(Arc::new(ragctx_milvus::MilvusVectorStore::connect(config, dimension)?))
}

#[cfg(not(feature = "milvus"))]
fn milvus_store(_: &MilvusSettings, _: usize, _: Option<&str>, _: bool) -> Result<Arc<dyn VectorStore>> {
    Err(Error::InvalidInput(
        "this ragctx was built without Milvus support: rebuild with `--features milvus` (on by default)".into(),
    ))
}

/// The session store the settings name: the data dir's, or Redis (one server or a cluster).
pub fn session_store(settings: &Settings, data: Option<&SharedDir>) -> Result<Arc<dyn SessionStore>> {
    Ok(if settings.sessions == "embedded" {
        Arc::new(data_dir(data)?.clone())
    } else {
        Arc::new(RedisSessionStore::connect(&settings.sessions)?)
    })
}

/// The data dir of the settings, held or reached through its holder; `dim: None` takes the
/// stored dimension (commands that embed nothing).
pub fn open_data(settings: &Settings, dim: Option<usize>) -> Result<SharedDir> {
    SharedDir::open(&settings.data_dir, dim, index_params(settings))
}

/// The session store alone, for commands that embed nothing (trace, session): the data dir
/// is opened only when the sessions live there.
pub fn sessions_only(settings: &Settings) -> Result<Arc<dyn SessionStore>> {
    let data = if settings.sessions == "embedded" { Some(open_data(settings, None)?) } else { None };
    Ok(Arc::new(ragctx_engine::ScopedSessionStore::new(
        session_store(settings, data.as_ref())?,
        settings.tenant.clone(),
    )))
}

/// The vector store alone, for commands that embed nothing (documents list and delete), as
/// the settings' tenant sees it.
pub fn vectors_only(settings: &Settings) -> Result<Arc<dyn VectorStore>> {
    Ok(Arc::new(ragctx_engine::ScopedVectorStore::new(unscoped_vectors(settings)?, settings.tenant.clone())))
}

fn unscoped_vectors(settings: &Settings) -> Result<Arc<dyn VectorStore>> {
    match &settings.backend {
        Backend::Embedded => {
            let data = open_data(settings, None)?;
            let dim = data.dimension();
            vector_store(settings, Some(&data), dim, None)
        }
        Backend::Milvus(_) => {
            // The dimension is checked against the collection on connect; the model's
            // config gives it without loading the weights.
            let dim = match &settings.embedder {
                EmbedderSettings::Local { .. } => ragctx_models::model_dimension(&settings.model_dir)?,
                EmbedderSettings::OpenAi(_) => embedder(settings)?.dimension(),
            };
            vector_store(settings, None, dim, None)
        }
    }
}
