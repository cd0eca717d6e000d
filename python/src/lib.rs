//! `ragctx._native`: ragctx's engine for Python (PyO3, abi3). An `Engine` holds the
//! backends its settings name (as `ragctx ask` would open them) for its lifetime; turns and
//! ingests run with the GIL released; ragctx errors are raised as `BadInput`, `NotFound`,
//! `Unavailable` or `Conflict` (all `RagctxError`). Results are the same JSON objects the
//! CLI prints (`ask --json`, `trace --json`, `documents list --json`), as dicts.
//!
//! An engine acts as one tenant (`tenant=`, default `default`: DESIGN §8) and may hold a
//! standing `filter=`; a call's own `filter=` is applied with it, never instead of it.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ragctx_app::{App, RawConfig, Settings};
use ragctx_core::{ErrorKind, Metadata, SessionId, TurnOverrides};
use std::path::PathBuf;

create_exception!(_native, RagctxError, PyException, "An error from ragctx.");
create_exception!(_native, BadInput, RagctxError, "The caller's mistake: fix the input and retry.");
create_exception!(_native, NotFound, RagctxError, "An unknown session, turn or document.");
create_exception!(
    _native,
    Unavailable,
    RagctxError,
    "A backend or model is missing or down (the message names it): retry later or fix the deployment."
);
create_exception!(_native, Conflict, RagctxError, "Other turns of the same session kept committing: retry.");

fn raise(e: ragctx_core::Error) -> PyErr {
    let message = e.report().to_string();
    match e.kind() {
        ErrorKind::BadInput => BadInput::new_err(message),
        ErrorKind::NotFound => NotFound::new_err(message),
        ErrorKind::Unavailable => Unavailable::new_err(message),
        ErrorKind::Conflict => Conflict::new_err(message),
        ErrorKind::Internal => RagctxError::new_err(message),
    }
}

/// A Python object as JSON text, by Python's own `json` module.
fn to_json(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<String> {
    py.import("json")?.call_method1("dumps", (obj,))?.extract()
}

/// JSON text as Python objects.
fn from_json<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (text,))
}

/// A metadata argument (a dict of string, number, bool or list-of-strings values).
fn parse_metadata(py: Python<'_>, obj: Option<&Bound<'_, PyAny>>) -> PyResult<Metadata> {
    match obj {
        Some(o) if !o.is_none() => {
            serde_json::from_str(&to_json(py, o)?).map_err(|e| BadInput::new_err(format!("invalid metadata: {e}")))
        }
        _ => Ok(Metadata::default()),
    }
}

/// A filter argument: a dict, JSON text, or `None` (no filter).
fn parse_filter(py: Python<'_>, obj: Option<&Bound<'_, PyAny>>) -> PyResult<ragctx_core::Filter> {
    let text = match obj {
        Some(o) if !o.is_none() => Some(match o.extract::<String>() {
            Ok(s) => s,
            Err(_) => to_json(py, o)?,
        }),
        _ => None,
    };
    ragctx_engine::agent::filter_arg(text.as_deref()).map_err(raise)
}

/// A step's result as a dict, with the text a model reads under `text`.
fn with_text<'py, T: serde::Serialize>(py: Python<'py>, value: &T, text: String) -> PyResult<Bound<'py, PyAny>> {
    let mut v = serde_json::to_value(value).map_err(|e| RagctxError::new_err(e.to_string()))?;
    v["text"] = serde_json::Value::String(text);
    from_json(py, &v.to_string())
}

/// `record` with `common` metadata under its own (its keys win). A record that is not a dict,
/// or whose `metadata` is not one, is left as it is for the JSONL validation to name.
fn under_metadata<'py>(record: Bound<'py, PyAny>, common: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let (Ok(dict), Ok(common)) = (record.cast::<PyDict>(), common.cast::<PyDict>()) else {
        return Ok(record);
    };
    let merged = common.copy()?;
    match dict.get_item("metadata")? {
        Some(own) if own.is_none() => {}
        Some(own) => match own.cast::<PyDict>() {
            Ok(own) => merged.update(own.as_mapping())?,
            Err(_) => return Ok(record),
        },
        None => {}
    }
    let copy = dict.copy()?;
    copy.set_item("metadata", merged)?;
    Ok(copy.into_any())
}

/// Keyword settings (the config file's keys: `budget`, `memory`, `embedder_url`, ...) as a
/// config layer; an unknown key is `BadInput`. A filter may be a dict or JSON text.
fn layer(py: Python<'_>, settings: Option<&Bound<'_, PyDict>>) -> PyResult<RawConfig> {
    match settings {
        None => Ok(RawConfig::default()),
        Some(d) => {
            let value = serde_json::from_str(&to_json(py, d.as_any())?)
                .map_err(|e| BadInput::new_err(format!("settings: {e}")))?;
            RawConfig::from_json(value).map_err(|e| BadInput::new_err(format!("settings: {e}")))
        }
    }
}

/// A call's turn settings (`ask(..., budget=2000, filter={...})`), with the names and
/// checks of the CLI's turn flags.
fn turn_layer(py: Python<'_>, overrides: &Bound<'_, PyDict>) -> PyResult<TurnOverrides> {
    for key in overrides.keys() {
        let key: String = key.extract()?;
        if !TurnOverrides::KEYS.contains(&key.as_str()) {
            return Err(BadInput::new_err(format!(
                "{key:?} is not a turn setting (those are {}); set it on the Engine",
                TurnOverrides::KEYS.join(", ")
            )));
        }
    }
    serde_json::from_str(&to_json(py, overrides.as_any())?).map_err(|e| BadInput::new_err(e.to_string()))
}

#[pyclass(module = "ragctx._native", frozen)]
struct Engine {
    app: App,
    /// The same engine (stores, embedder, turn locks) answering with the extractive
    /// generator: `retrieve` never calls a model.
    retriever: ragctx_engine::Engine,
    /// The engine's agent steps (search, open, forget), as the MCP tools take them.
    agent: ragctx_engine::agent::Scope,
}

#[pymethods]
impl Engine {
    /// `Engine(data_dir=None, model_dir=None, config=None, **settings)`: layers as the CLI's
    /// (defaults → `config` TOML file → `RAGCTX_*` environment → these arguments).
    #[new]
    #[pyo3(signature = (data_dir=None, model_dir=None, config=None, **settings))]
    fn new(
        py: Python<'_>,
        data_dir: Option<PathBuf>,
        model_dir: Option<PathBuf>,
        config: Option<PathBuf>,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let mut given = layer(py, settings)?;
        given.data_dir = data_dir.or(given.data_dir);
        given.model_dir = model_dir.or(given.model_dir);
        let settings = Settings::layered(config.as_deref(), given).map_err(raise)?;
        let app = py.detach(|| App::open(settings)).map_err(raise)?;
        let retriever = app.engine.with_generator(std::sync::Arc::new(ragctx_models::ExtractiveGenerator::default()));
        let agent = app.agent_scope();
        Ok(Engine { app, retriever, agent })
    }

    /// `Engine.from_config(path, **settings)`: the settings of a TOML file (as `--config`).
    #[staticmethod]
    #[pyo3(signature = (path, **settings))]
    fn from_config(py: Python<'_>, path: PathBuf, settings: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        Engine::new(py, None, None, Some(path), settings)
    }

    /// Ingests files or folders as `ragctx ingest` does, into this engine's tenant; `metadata`
    /// is set on every chunk read (as `ingest --meta`; a JSONL line's own keys win). Returns
    /// what changed.
    #[pyo3(signature = (paths, append=false, metadata=None))]
    fn ingest<'py>(
        &self,
        py: Python<'py>,
        paths: Vec<PathBuf>,
        append: bool,
        metadata: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let metadata = parse_metadata(py, metadata)?;
        let report = py.detach(|| self.app.ingest_with_metadata(&paths, append, &metadata)).map_err(raise)?;
        from_json(py, &serde_json::to_string(&report).map_err(|e| RagctxError::new_err(e.to_string()))?)
    }

    /// Ingests records `{"_id", "document_id", "title", "text"[, "weight", "metadata"]}`
    /// validated as JSONL lines are, into this engine's tenant; `metadata` goes under each
    /// record's own (its keys win). Returns what changed.
    #[pyo3(signature = (records, append=false, metadata=None))]
    fn ingest_records<'py>(
        &self,
        py: Python<'py>,
        records: &Bound<'py, PyAny>,
        append: bool,
        metadata: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let common = match metadata {
            Some(m) if !m.is_none() => {
                parse_metadata(py, Some(m))?;
                Some(m)
            }
            _ => None,
        };
        let mut jsonl = String::new();
        for record in records.try_iter()? {
            let record = record?;
            let record = match common {
                Some(common) => under_metadata(record, common)?,
                None => record,
            };
            jsonl.push_str(&to_json(py, &record)?);
            jsonl.push('\n');
        }
        let report = py.detach(|| self.app.ingest_records("records", jsonl.as_bytes(), append)).map_err(raise)?;
        from_json(py, &serde_json::to_string(&report).map_err(|e| RagctxError::new_err(e.to_string()))?)
    }

    /// Runs one turn of `session`; `overrides` are the CLI's turn flags (`memory='client'`,
    /// `budget=2000`, `mode='reshow'`, ...) and `filter` (a dict or JSON text), which holds
    /// together with the engine's standing filter. Returns the object `ask --json` prints.
    #[pyo3(signature = (session, question, **overrides))]
    fn ask<'py>(
        &self,
        py: Python<'py>,
        session: &str,
        question: &str,
        overrides: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.turn(py, &self.app.engine, session, question, overrides)
    }

    /// [`ask`](Engine::ask) for retrieval: the same turn (recorded, excluded next time,
    /// traced) with the extractive generator, so no model is called whatever `generator` the
    /// engine was given. What the framework retrievers use.
    #[pyo3(signature = (session, question, **overrides))]
    fn retrieve<'py>(
        &self,
        py: Python<'py>,
        session: &str,
        question: &str,
        overrides: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.turn(py, &self.retriever, session, question, overrides)
    }

    /// One search step of an agent's `session` (DESIGN §9; the MCP `search` tool's work): a
    /// retrieve-only turn in `client` memory, so a chunk the session already holds is never
    /// returned again, and one that still ranks comes back as a pointer. `filter` (a dict or
    /// JSON text) narrows it with the standing filter; `budget` (64–32000 tokens, default
    /// 2000) and `limit` (1–100, default 8) bound it. Returns `{"session", "step", "blocks",
    /// "pointers", "tokens", "dropped_by_budget", "text"}` (`text`: what a model reads).
    #[pyo3(signature = (session, query, filter=None, budget=None, limit=None))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        session: &str,
        query: &str,
        filter: Option<&Bound<'py, PyAny>>,
        budget: Option<usize>,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let filter = parse_filter(py, filter)?;
        let found = py.detach(|| self.agent.search(session, query, &filter, budget, limit)).map_err(raise)?;
        with_text(py, &found, found.text())
    }

    /// Shows again, in full, what `ref` names in an agent's `session`: a marker (`3`, `[3]`),
    /// a chunk ID or a document ID the session holds (the MCP `open` tool's work), within
    /// `budget` tokens (default 4000). Returns what [`search`](Engine::search) returns.
    #[pyo3(name = "open", signature = (session, r#ref, budget=None))]
    fn open_again<'py>(
        &self,
        py: Python<'py>,
        session: &str,
        r#ref: &str,
        budget: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let found = py.detach(|| self.agent.open(session, r#ref, budget)).map_err(raise)?;
        with_text(py, &found, found.text())
    }

    /// Lets what `refs` name (markers, chunk IDs, document IDs; `None`: everything) be
    /// returned again by a later [`search`](Engine::search) of `session`: the agent's context
    /// dropped it. Returns `{"session", "forgotten": [chunk IDs]}`.
    #[pyo3(signature = (session, refs=None))]
    fn forget<'py>(&self, py: Python<'py>, session: &str, refs: Option<Vec<String>>) -> PyResult<Bound<'py, PyAny>> {
        let out = py.detach(|| self.agent.forget(session, refs.as_deref())).map_err(raise)?;
        from_json(py, &serde_json::to_string(&out).map_err(|e| RagctxError::new_err(e.to_string()))?)
    }

    /// The documents of this engine's tenant: `{"document_id", "title", "chunks", "metadata"?}`
    /// each (metadata: its first chunk's, when it has any), by
    /// id (as `ragctx documents list --json`).
    fn documents<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let docs = py.detach(|| self.app.engine.vectors.documents()).map_err(raise)?;
        from_json(py, &serde_json::to_string(&docs).map_err(|e| RagctxError::new_err(e.to_string()))?)
    }

    /// Every trace of `session`, oldest first (as `ragctx trace --json`); `NotFound` when it
    /// has none.
    fn trace<'py>(&self, py: Python<'py>, session: &str) -> PyResult<Bound<'py, PyAny>> {
        let id = SessionId::parse(session).map_err(raise)?;
        let traces = py.detach(|| self.app.engine.sessions.traces(&id)).map_err(raise)?;
        if traces.is_empty() {
            return Err(NotFound::new_err(format!("session {session} has no turns")));
        }
        from_json(py, &serde_json::to_string(&traces).map_err(|e| RagctxError::new_err(e.to_string()))?)
    }

    /// Forgets what `session` was shown (its traces stay); False when it is unknown.
    fn reset(&self, py: Python<'_>, session: &str) -> PyResult<bool> {
        let id = SessionId::parse(session).map_err(raise)?;
        py.detach(|| self.app.engine.sessions.reset(&id)).map_err(raise)
    }

    /// The tenant this engine acts as.
    #[getter]
    fn tenant(&self) -> String {
        self.app.settings.tenant().as_str().to_owned()
    }

    /// The standing filter as a dict (`{}`: none).
    #[getter]
    fn filter<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        from_json(py, &self.app.settings.turn().filter.to_json_string())
    }

    /// The data dir, the embedding model and the tenant, for display.
    fn __repr__(&self) -> String {
        format!(
            "Engine(data_dir={:?}, embedder={:?}, tenant={:?})",
            self.app.settings.data_dir().display().to_string(),
            self.app.embedder.model_id(),
            self.app.settings.tenant().as_str()
        )
    }
}

impl Engine {
    /// One turn on `engine` (this one's, or its retrieval twin) with per-turn overrides.
    fn turn<'py>(
        &self,
        py: Python<'py>,
        engine: &ragctx_engine::Engine,
        session: &str,
        question: &str,
        overrides: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let id = SessionId::parse(session).map_err(raise)?;
        let base = self.app.settings.turn();
        let turn = match overrides {
            // The call's filter narrows the standing one, never replaces it.
            Some(o) if !o.is_empty() => turn_layer(py, o)?.apply(base).map_err(raise)?,
            _ => base.clone(),
        };
        let out = py.detach(|| engine.ask(&id, question, &turn)).map_err(raise)?;
        from_json(py, &serde_json::to_string(&out).map_err(|e| RagctxError::new_err(e.to_string()))?)
    }
}

/// A reader process's life (`ragctx._native._read_worker()`): the files an ingest of the
/// process that started it asks for, read one by one under its memory cap. Not for users.
#[pyfunction]
fn _read_worker(py: Python<'_>) -> PyResult<()> {
    py.detach(ragctx_app::reader::serve_worker).map_err(raise)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_function(wrap_pyfunction!(_read_worker, m)?)?;
    // Documents are read in a Python process of this interpreter's own, as the CLI reads
    // them in one of its binary: no file can end the caller's process.
    let python: String = py.import("sys")?.getattr("executable")?.extract()?;
    if !python.is_empty() {
        ragctx_app::reader::set_worker(vec![
            python,
            "-c".into(),
            "from ragctx import _native; _native._read_worker()".into(),
        ]);
    }
    m.add_class::<Engine>()?;
    m.add("RagctxError", py.get_type::<RagctxError>())?;
    m.add("BadInput", py.get_type::<BadInput>())?;
    m.add("NotFound", py.get_type::<NotFound>())?;
    m.add("Unavailable", py.get_type::<Unavailable>())?;
    m.add("Conflict", py.get_type::<Conflict>())?;
    Ok(())
}
