#![warn(missing_docs)]
//! ragctx as a library: the one place that turns layered configuration (defaults → TOML
//! file → `RAGCTX_*` environment → the caller's values) into validated [`Settings`], builds
//! the backends they name (the data dir's store and index, Milvus, Redis, the embedder and
//! the generator) into an [`Engine`](ragctx_engine::Engine), and ingests files or records.
//! The `ragctx` binary and the Python package are both built on it.
//!
//! ```no_run
//! use ragctx_app::{App, RawConfig, Settings, TurnOverrides};
//! let turn = TurnOverrides { budget: Some(2000), ..Default::default() };
//! let raw = RawConfig { data_dir: Some("ragctx-data".into()), turn: vec![turn], ..Default::default() };
//! let settings = Settings::layered(None, raw)?;
//! ragctx_app::ingest::ingest(&settings, &["demo/houseplants".into()], false, &ragctx_engine::ingest::Logged)?;
//! let app = App::open(settings)?;
//! let session = ragctx_core::SessionId::parse("s1")?;
//! let turn = app.engine.ask(&session, "How often should I water ferns?", app.settings.turn())?;
//! println!("{}", turn.answer);
//! # Ok::<(), ragctx_core::Error>(())
//! ```

pub mod app;
pub mod config;
pub mod ingest;
pub mod reader;

pub use app::App;
pub use config::{Backend, ConfigField, EmbedderSettings, MilvusSettings, RawConfig, Settings};
pub use ingest::IngestReport;
pub use ragctx_core::TurnOverrides;
/// Whether a data dir holds an embedded store (its database), without opening or creating one.
pub use ragctx_store::holds_store;
