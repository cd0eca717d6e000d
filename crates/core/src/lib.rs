//! Core types and traits of ragctx: no I/O, no async runtime.
//!
//! Everything the turn pipeline passes between stages lives here ([`Chunk`], [`Hit`],
//! [`ExclusionSet`], [`ContextBlock`], [`Trace`], ...), together with the traits that
//! backends implement ([`VectorStore`], [`SessionStore`], [`Embedder`], [`Generator`],
//! [`TokenCounter`]). Backends depend on this crate; this crate depends on nothing that
//! opens a socket or a file.
//!
//! ```
//! use ragctx_core::{ExclusionSet, ChunkId, DocumentId};
//! let mut ex = ExclusionSet::default();
//! ex.documents.insert(DocumentId::from("doc-\"7\"]"));
//! assert!(ex.excludes(&ChunkId::from("c1"), &DocumentId::from("doc-\"7\"]")));
//! assert!(!ex.excludes(&ChunkId::from("c1"), &DocumentId::from("d8")));
//! ```

mod chunk;
mod context;
mod error;
pub mod hash;
mod ids;
mod search;
mod session;
mod trace;
mod traits;

pub use chunk::{check_replacement, Chunk, DocumentSummary, EmbeddedChunk, Replaced, CHUNK_TOKENIZER};
pub use context::{citation_markers, Citation, ContextBlock, Pointer};
pub use error::{Error, ErrorKind, Result};
pub use hash::{fx_hash, FastMap, FxHasher};
pub use ids::{ChunkId, DocumentId, SessionId};
pub use search::{
    ExclusionSet, Fusion, Grouping, Hit, LexicalRequest, PreparedExclusions, Retrieval, SearchOutcome, SearchPath,
    SearchRequest,
};
pub use session::{Intent, Memory, QuantizedVector, Retention, SessionState, TurnCommit, TurnRecord};
pub use trace::{EffectiveSettings, RetrievalTrace, Trace, TraceStats};
pub use traits::{Embedder, GenerationRequest, Generator, SessionStore, TokenCounter, VectorStore};
