#![warn(missing_docs)]
//! ragctx's offline evaluation and benchmarks: the logic behind `ragctx eval` and
//! `ragctx bench`, as a library the binary dispatches to.
//!
//! - evaluation (DESIGN §6): [`mtrag`] (every strategy and memory mode over MTRAG's
//!   conversations: evidence recall, tokens, repeats; [`mtrag_metrics`], the HTML
//!   [`report`]), BEIR-format retrieval quality (`eval beir`, e.g. SciFact), written
//!   conflicts and the intent rules ([`intent`]); the learned follow-up query ([`fit_query`]);
//!   agents calling the MCP search tool against a plain top-k tool ([`agent`]);
//! - benchmarks: search and lexical latency with exclusion ([`bench_search`]), the whole turn,
//!   the sliding window ([`bench_window`]), the embedder, and a load test of a running server
//!   ([`bench_http`]);
//! - [`data`] reads the input files, [`stats`] holds percentiles and seeded randomness.
//!
//! Errors are [`Error`], whose [`Error::kind`] the binary maps to an exit status.

pub mod agent;
pub mod bench;
mod bench_filter;
pub mod bench_http;
mod bench_ingest;
pub mod bench_search;
pub mod bench_window;
pub mod data;
pub mod error;
pub mod eval;
pub mod fit_query;
pub mod fit_sentences;
pub mod hardcases;
pub mod intent;
pub mod mtrag;
pub mod mtrag_metrics;
pub mod progress;
pub mod report;
pub mod stats;

/// The turn settings an evaluation or benchmark replays conversations with: the configured
/// ones, every question classified (a `mode` set in the configuration or `RAGCTX_MODE` would
/// force one intent on every turn and change what is measured).
pub fn replay_settings(settings: &ragctx_app::Settings) -> ragctx_engine::TurnSettings {
    ragctx_engine::TurnSettings { mode: ragctx_core::Mode::Auto, ..settings.turn().clone() }
}

pub use bench::BenchCommand;
pub use error::{Error, Result};
pub use eval::EvalCommand;
