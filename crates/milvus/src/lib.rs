//! [`VectorStore`](ragctx_core::VectorStore) over Milvus: the production vector store of ragctx, on the official Rust
//! SDK (gRPC).
//!
//! One collection holds the chunks: `id` (VarChar primary key), `document_id` (VarChar,
//! grouped by and excluded on), `title`, `text`, `ordinal`/`start`/`end`/`tokens` (Int64,
//! −1 when absent), `weight` (Float), `vector` (FloatVector, cosine, HNSW or FLAT),
//! `metadata` (JSON: the chunk's metadata) with `metadata_types` (JSON: each value's type,
//! see [`filter`]), and `tenant` (VarChar: the tenant of the id;
//! the partition key where the server upserts by it — not Milvus 2.3, see `store/schema.rs`).
//!
//! Searches push grouping (`group_by_field = document_id`) and one predicate — exclusion
//! (`… not in …`), metadata filter and tenant, [`filter::predicate`] — into Milvus, but the result is not trusted blindly: a server that groups after a fixed
//! over-fetch returns fewer groups than asked when one document dominates, so the store
//! searches again without the documents it already has until the groups are complete or the
//! collection has nothing more ([`MAX_ROUNDS`]). Per-document quotas above the server's
//! `group_size` are trimmed here.
//!
//! The SDK is async; the store owns a small Tokio runtime and runs each call on it, so the
//! synchronous trait can be called from any thread, including a server's blocking pool.
//! Every call has a deadline ([`MilvusConfig::timeout`]) and transient failures are retried
//! a bounded number of times; an unreachable server gives [`Error::Unavailable`](ragctx_core::Error::Unavailable) naming it.
//!
//! ```no_run
//! let config = ragctx_milvus::MilvusConfig::new("http://127.0.0.1:19530", "ragctx");
//! let store = ragctx_milvus::MilvusVectorStore::connect(config, 384)?;
//! # Ok::<(), ragctx_core::Error>(())
//! ```

pub mod filter;
#[cfg(feature = "sdk")]
mod store;
#[cfg(feature = "sdk")]
pub use store::*;
