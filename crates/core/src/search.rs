use crate::{Chunk, ChunkId, DocumentId, Filter};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};

/// Ids that a search must never return. Applied inside the search: an excluded chunk never
/// comes back and never costs a result slot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExclusionSet {
    /// Documents none of whose chunks may come back (`document` granularity).
    pub documents: BTreeSet<DocumentId>,
    /// Single chunks that may not come back; other chunks of their documents may.
    pub chunks: BTreeSet<ChunkId>,
}

impl ExclusionSet {
    /// True when nothing is excluded.
    pub fn is_empty(&self) -> bool {
        self.documents.is_empty() && self.chunks.is_empty()
    }
    /// Ids in the set, documents and chunks together (the trace's `excluded`).
    pub fn len(&self) -> usize {
        self.documents.len() + self.chunks.len()
    }
    /// Whether a chunk is excluded, by its own id or by its document's.
    pub fn excludes(&self, chunk: &ChunkId, document: &DocumentId) -> bool {
        self.documents.contains(document) || self.chunks.contains(chunk)
    }
}

/// Group results by document: at most `group_size` chunks per document unless `quotas`
/// (or a chunk's weight) raises it for a document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grouping {
    /// Chunks each document may place in the result, before quotas and source weights.
    pub group_size: usize,
    /// Raised quotas of some documents (a follow-up's or a reshow's); an entry below `group_size`
    /// changes nothing.
    pub quotas: HashMap<DocumentId, usize>,
}

impl Grouping {
    /// Grouping with `group_size` chunks per document (at least 1) and no raised quotas.
    pub fn new(group_size: usize) -> Self {
        Self { group_size: group_size.max(1), quotas: HashMap::new() }
    }
    /// Chunks a document may place in the result: `group_size`, times a source weight
    /// `w >= 2` (rounded down), or the document's entry in `quotas` if larger.
    pub fn quota(&self, document_id: &str, weight: f32) -> usize {
        let w = if weight.is_finite() && weight >= 2.0 { weight.floor() as usize } else { 1 };
        self.quotas.get(document_id).copied().unwrap_or(0).max(self.group_size * w)
    }
}

/// One vector search.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SearchRequest {
    /// L2-normalised query vector.
    pub vector: Vec<f32>,
    /// Documents when `grouping` is set, chunks otherwise.
    pub limit: usize,
    /// Group by document with quotas; `None`: the best `limit` chunks.
    pub grouping: Option<Grouping>,
    /// Ids never returned and never costing a result slot.
    pub exclusion: ExclusionSet,
    /// Metadata a chunk must match to come back; with `exclusion` and `tenant` one predicate,
    /// applied inside the search (a chunk that fails it never costs a result slot).
    pub filter: Filter,
    /// The tenant searched (its stored ids only); `None` searches every tenant (an admin's or
    /// a single-tenant tool's call). A tenant-scoped store always sets it.
    pub tenant: Option<String>,
}

/// A chunk returned by a search with its similarity (cosine; higher is closer).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// The stored chunk, whole.
    pub chunk: Chunk,
    /// Similarity to the query, higher is closer: cosine for a vector search, BM25 for a lexical
    /// one.
    pub score: f32,
}

/// How a search was carried out, for the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchPath {
    /// Filtered graph (HNSW) search.
    Graph,
    /// Exact scan over every stored vector.
    Exact,
    /// Done by a remote engine (e.g. Milvus).
    Remote,
    /// BM25 over titles and texts (the lexical index).
    Lexical,
}

/// One lexical (BM25) search, under the same exclusion and grouping contract as
/// [`SearchRequest`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LexicalRequest {
    /// The text matched against titles and texts (in a turn, the question alone).
    pub query: String,
    /// Documents when `grouping` is set, chunks otherwise.
    pub limit: usize,
    /// Group by document with quotas, as in a vector search; `None`: the best `limit` chunks.
    pub grouping: Option<Grouping>,
    /// Ids never returned and never costing a result slot.
    pub exclusion: ExclusionSet,
    /// As [`SearchRequest::filter`].
    pub filter: Filter,
    /// As [`SearchRequest::tenant`].
    pub tenant: Option<String>,
}

/// Which index a turn searches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Retrieval {
    /// Embeddings only.
    #[default]
    Dense,
    /// BM25 only (dense where the backend has no lexical index).
    Lexical,
    /// Both, fused by a [`Fusion`].
    Hybrid,
}

/// How hybrid retrieval merges the dense and the lexical candidates. The default won on
/// SciFact and on MTRAG `none`; `rrf` was 0.006 ahead in `engine` memory (bench/README.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fusion {
    /// Reciprocal rank fusion: Σ 1 / (60 + rank) over the two lists.
    Rrf,
    /// Each side's scores scaled to [0, 1] over its list, then averaged.
    #[default]
    Weighted,
    /// The union of both lists, ranked by exact dense similarity.
    Rescore,
}

named!(Retrieval, "retrieval", Dense = "dense", Lexical = "lexical", Hybrid = "hybrid");
named!(Fusion, "fusion", Rrf = "rrf", Weighted = "weighted", Rescore = "rescore");

/// Hits sorted by score, best first, and how they were found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SearchOutcome {
    /// Best first; never an excluded chunk.
    pub hits: Vec<Hit>,
    /// How the store searched: graph walk, exact scan, remote engine or BM25.
    pub path: SearchPath,
    /// Searches run (more than one when grouping needed a deeper pass).
    pub rounds: u32,
    /// Why this path was chosen, in words.
    pub reason: String,
}
