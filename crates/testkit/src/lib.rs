//! Conformance suites that every implementation of a ragctx trait runs: the embedded
//! stores, Milvus and Redis, against real servers. Each check panics with a message that
//! names the broken contract.
//!
//! ```no_run
//! # fn make() -> Box<dyn ragctx_core::VectorStore> { unimplemented!() }
//! ragctx_testkit::vector_store_conformance(&|| make());
//! ```

mod filters;
mod lexical;
mod openai_double;
mod rerank_double;
mod sessions;
mod skips;
mod vectors;

pub use filters::{filter_conformance, filter_corpus, random_filter, random_metadata, Rng, HOSTILE_VALUES};
pub use lexical::lexical_conformance;
pub use openai_double::{completion, OpenAiTestDouble};
pub use rerank_double::{overlap, RerankTestDouble};
pub use sessions::{sample_commit, session_store_conformance, ttl_expiry};
pub use skips::{service, skipped};
pub use vectors::{sentence_index_conformance, vector_store_conformance, HOSTILE_IDS};
