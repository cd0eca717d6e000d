#![warn(missing_docs)]
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

/// `as_str`, `Display` and `FromStr` for a settings enum, from one list of names: the names
/// are the serde names too (`snake_case`), so a mode reads and prints one way everywhere
/// (flags, config, environment, HTTP, traces).
macro_rules! named {
    ($ty:ident, $what:literal, $($v:ident = $s:literal),+) => {
        impl $ty {
            /// The name used in flags, config files, HTTP bodies and traces.
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$v => $s),+ }
            }
        }
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl std::str::FromStr for $ty {
            type Err = crate::Error;
            fn from_str(s: &str) -> crate::Result<Self> {
                match s {
                    $($s => Ok($ty::$v),)+
                    other => Err(crate::Error::InvalidInput(format!(
                        concat!("unknown ", $what, " {:?}: use {}"), other, [$($s),+].join(", ")
                    ))),
                }
            }
        }
        // Read through `FromStr`, so a config file, an HTTP body and a trace refuse a bad
        // name with the same words as a flag.
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

mod chunk;
mod context;
mod error;
mod filter;
pub mod hash;
mod ids;
mod metadata;
mod modes;
mod overrides;
mod search;
mod sentence;
mod session;
mod tenant;
pub mod text;
mod trace;
mod traits;
mod turn;

pub use chunk::{check_replacement, check_vectors, Chunk, DocumentSummary, EmbeddedChunk, Replaced, CHUNK_TOKENIZER};
pub use context::{
    by_document, citation_markers, merge_pages, page_label, page_ranges, pages, shown_title, Citation, CitedSentence,
    ContextBlock, Pointer, CONTINUED, PAGE_END_KEY, PAGE_START_KEY, SECTION_KEY, SECTION_SEPARATOR,
};
pub use error::{Error, ErrorKind, Report, Result, Source};
pub use filter::{
    Field, Filter, FilterError, Range, Scalar, MAX_DEPTH as MAX_FILTER_DEPTH, MAX_TERMS as MAX_FILTER_TERMS,
};
pub use hash::{fx_hash, FastMap, FxHasher};
pub use ids::{ChunkId, DocumentId, SessionId};
pub use metadata::{valid_key as valid_metadata_key, Json, MetaValue, Metadata};
pub use modes::*;
pub use overrides::{TurnField, TurnOverrides, TurnSettings};
pub use search::{
    ExclusionSet, Fusion, Grouping, Hit, LexicalRequest, MilvusKind, PlanReason, Retrieval, SearchOutcome, SearchPath,
    SearchReason, SearchRequest, WalkEnd,
};
pub use sentence::{Sentence, Sentences};
pub use session::{Intent, Memory, QuantizedVector, Retention, SessionState, TurnCommit, TurnRecord};
pub use tenant::{tenant_of, Tenant, DEFAULT_TENANT, TENANT_SEPARATOR};
pub use trace::{
    Compressed, Condensed, Diversified, Duplicate, EffectiveSettings, Reranked, RetrievalTrace, StepKind, Trace,
    TraceStats, TRACE_VERSION,
};
pub use traits::{
    CondenseRequest, Condenser, Embedder, EmbeddingCache, GenerationRequest, Generator, Reranker, SessionStore,
    SpanVectors, TokenCounter, TurnLease, VectorStore,
};
pub use turn::{
    DEFAULT_ENGAGED_PRIOR, DEFAULT_GROUP_MARGIN, DEFAULT_NEAR_DUPLICATE, DEFAULT_RELEVANCE_FLOOR, REMEMBERED_TURNS,
};
