//! The models ragctx runs in process: the MiniLM embedder (a BERT encoder on
//! packed sequences, `gemm` matrix products), the `cl100k_base`
//! token counter (tiktoken) and the extractive generator; and, with the `openai` feature,
//! clients of OpenAI-compatible servers: embeddings ([`RemoteEmbedder`]) and chat
//! completions ([`OpenAiGenerator`]), and of rerank endpoints ([`RemoteReranker`]).
//!
//! ```no_run
//! use ragctx_core::{Embedder, TokenCounter};
//! let embedder = ragctx_models::MiniLmEmbedder::load("models/all-MiniLM-L6-v2".as_ref())?;
//! let v = embedder.embed(&["Where do guinea pigs sleep?"])?;
//! assert_eq!(v[0].len(), 384);
//! assert!(ragctx_models::Cl100kCounter::new().count("hello world") == 2);
//! # Ok::<(), ragctx_core::Error>(())
//! ```

mod bert;
mod embedder;
mod extractive;
#[cfg(feature = "openai")]
mod http;
mod int8;
#[cfg(feature = "openai")]
mod openai;
mod ops;
#[cfg(feature = "openai")]
mod remote;
#[cfg(feature = "openai")]
mod rerank;
mod tokens;
mod workers;

pub use embedder::{model_dimension, MiniLmEmbedder, Precision, Prefixes, BATCH_TOKENS, MAX_TOKENS};
pub use extractive::{is_cjk, sentences, terms, ExtractiveGenerator, NOTHING_FOUND};
#[cfg(feature = "openai")]
pub use openai::{OpenAiCondenser, OpenAiConfig, OpenAiGenerator, CONDENSE_PROMPT};
#[cfg(feature = "openai")]
pub use remote::{RemoteEmbedder, RemoteEmbedderConfig};
#[cfg(feature = "openai")]
pub use rerank::{RemoteReranker, RerankApi, RerankConfig};
pub use tokens::Cl100kCounter;

/// Where the model is installed unless configured otherwise.
pub const DEFAULT_MODEL_DIR: &str = "models/all-MiniLM-L6-v2";
