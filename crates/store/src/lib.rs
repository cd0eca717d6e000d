//! Embedded persistence of ragctx in one data directory: chunks and their vectors, the
//! embedding cache, sessions and traces in one transactional redb database
//! (`ragctx.redb`), and the vector index (`index.bin`) derived from it.
//!
//! The database is the source of truth. Every ingest and every turn is one transaction, so
//! a killed process leaves either all of it or none. The index files record the database
//! generation they reflect, and each write records the chunk ids it touched in the same
//! transaction: an index file of an older generation is brought forward by those changes on
//! open (the files are rewritten only once the changes since them pass an eighth of the
//! index), and one the recorded changes no longer reach is rebuilt from the database. [`MemoryVectorStore`] is the same store held in memory
//! only, for evaluations and benchmarks.
//!
//! ```no_run
//! use ragctx_store::DataDir;
//! let dir = DataDir::open("ragctx-data".as_ref(), 384)?;
//! let (chunks, sessions) = (dir.vector_store(), dir.session_store());
//! # Ok::<(), ragctx_core::Error>(())
//! ```

/// The value of one kind of `Reply`, `None` for any other: what a call expects back.
macro_rules! pick {
    ($variant:ident) => {
        |r| if let Reply::$variant(x) = r { Some(x) } else { None }
    };
}

mod cache;
mod changes;
mod chunks;
mod client;
mod database;
mod db;
mod holder;
mod memory;
mod schema;
mod sessions;
mod share;
mod wire;

pub use cache::DataDirCache;
pub use chunks::EmbeddedVectorStore;
pub use database::holds_store;
pub use db::DataDir;
pub use memory::MemoryVectorStore;
pub use sessions::EmbeddedSessionStore;
pub use share::SharedDir;
