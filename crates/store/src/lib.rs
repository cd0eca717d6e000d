//! Embedded persistence of ragctx in one data directory: chunks and their vectors, the
//! embedding cache, sessions and traces in one transactional redb database
//! (`ragctx.redb`), and the vector index (`index.bin`) derived from it.
//!
//! The database is the source of truth. Every ingest and every turn is one transaction, so
//! a killed process leaves either all of it or none. The index file records the database
//! generation it reflects; when they differ (a crash between the two writes) the index is
//! rebuilt from the database on open. [`MemoryVectorStore`] is the same store held in memory
//! only, for evaluations and benchmarks.
//!
//! ```no_run
//! use ragctx_store::DataDir;
//! let dir = DataDir::open("ragctx-data".as_ref(), 384)?;
//! let (chunks, sessions) = (dir.vector_store(), dir.session_store());
//! # Ok::<(), ragctx_core::Error>(())
//! ```

mod chunks;
mod db;
mod memory;
mod sessions;

pub use chunks::EmbeddedVectorStore;
pub use db::{holds_store, DataDir, DataDirCache};
pub use memory::MemoryVectorStore;
pub use sessions::EmbeddedSessionStore;
