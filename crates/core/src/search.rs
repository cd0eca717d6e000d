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
    /// Why this path was chosen ([`SearchReason`]: the trace shows it in words).
    pub reason: SearchReason,
}

/// Why a search went the way it did ([`SearchOutcome::reason`]): a value tests and tools can
/// match, shown in the trace's `search_reason` by its `Display`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchReason {
    /// The local vector index's planner ([`PlanReason`]).
    Plan(PlanReason),
    /// The embedded lexical index: BM25 over this many chunks (the caller's, under a tenant).
    Bm25 {
        /// Chunks scored.
        chunks: usize,
    },
    /// A Milvus search, dense or full-text, and how it was carried out.
    Milvus {
        /// The server's version.
        version: String,
        /// `dense (<index type>)`, or `full-text`.
        kind: MilvusKind,
        /// Whether the filter went as a template (else an escaped literal).
        templated: bool,
        /// Whether the server grouped by document (else ragctx did).
        grouped_by_server: bool,
        /// Searches after the first, for groups the first left short.
        completions: u32,
    },
    /// Nothing was asked for: a limit of 0.
    LimitZero,
    /// A lexical search whose query has no term to search for.
    NoTerms,
    /// A hybrid search: each side's reason, and how they were fused.
    Fused {
        /// The dense side's.
        dense: Box<SearchReason>,
        /// The lexical side's.
        lexical: Box<SearchReason>,
        /// The fusion (`weighted`, `rrf`, `rescore`).
        fusion: Fusion,
    },
    /// A reshow: the chunks read by id, those asked for (`open`) or the previous turn's.
    Reshow {
        /// The caller named them (an agent's `open`).
        asked: bool,
    },
    /// `forget`: no search.
    Forget,
}

/// What the Milvus search was.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MilvusKind {
    /// A vector search on an index of this type.
    Dense(String),
    /// Full-text search (BM25, the analyser asked for English stems and stop words).
    FullText,
}

/// Why the local vector index took its path ([`SearchReason::Plan`]). The shares count the
/// caller's points (a tenant's, when the store holds others), never the whole store's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanReason {
    /// No point to search (an empty store or tenant, or a limit of 0).
    Empty,
    /// Every point is excluded or filtered out.
    NothingAllowed,
    /// The caller forced an exact scan.
    ForcedExact,
    /// Few enough points that a scan is cheapest (`exact_below`).
    SmallIndex,
    /// So much is excluded that a walk would cost more than a scan.
    WalkCostsMore {
        /// Percent of the points excluded.
        excluded_pct: f64,
    },
    /// The graph has no entry point: scanned.
    NoEntryPoint,
    /// A graph walk was planned, and how it ended.
    Walk {
        /// Percent of the points excluded; `None` when the caller forced the walk.
        excluded_pct: Option<f64>,
        /// How the walk ended: its results, or a scan after it.
        end: WalkEnd,
    },
}

/// How a planned walk ended ([`PlanReason::Walk`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WalkEnd {
    /// Its results stand, found in the first round.
    Found,
    /// Its results stand, found after widening.
    Widened,
    /// The query's nearest points are excluded (above 50k points): scanned.
    NearestExcluded,
    /// Widening past the excluded points would cost more than a scan: scanned.
    MostlyExcluded,
    /// The best results were still changing and a wider walk would cost more: scanned.
    Unsettled,
    /// A document with many near chunks left too few groups: scanned.
    TooFewGroups {
        /// Groups the walk found.
        groups: usize,
        /// Groups asked for.
        limit: usize,
    },
}

impl std::fmt::Display for SearchReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let completions =
            |n: u32| if n > 0 { format!(", {n} completion searches for missing groups") } else { String::new() };
        let grouped = |by_server: bool| if by_server { "by the server" } else { "here" };
        match self {
            SearchReason::Plan(p) => p.fmt(f),
            SearchReason::Bm25 { chunks } => write!(f, "BM25 over {chunks} chunks"),
            SearchReason::Milvus { version, kind: MilvusKind::Dense(index), templated, grouped_by_server, completions: n } => {
                let filter = if *templated { "templated" } else { "escaped literal" };
                write!(f, "Milvus {version} ({index}), {filter} filter, grouped {}{}", grouped(*grouped_by_server), completions(*n))
            }
            SearchReason::Milvus { version, kind: MilvusKind::FullText, grouped_by_server, completions: n, .. } => write!(
                f,
                "Milvus {version} full-text search (BM25; analyser asked for English stems and stop words), grouped {}{}",
                grouped(*grouped_by_server),
                completions(*n)
            ),
            SearchReason::LimitZero => f.write_str("limit 0"),
            SearchReason::NoTerms => f.write_str("nothing to search for"),
            SearchReason::Fused { dense, lexical, fusion } => write!(f, "{dense}; {lexical}; fused by {fusion}"),
            SearchReason::Reshow { asked: true } => f.write_str("reshow: the chunks asked for by id"),
            SearchReason::Reshow { asked: false } => f.write_str("reshow: the previous turn's chunks by id"),
            SearchReason::Forget => f.write_str("forget: no search"),
        }
    }
}

impl std::fmt::Display for PlanReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanReason::Empty => f.write_str("empty"),
            PlanReason::NothingAllowed => f.write_str("no chunk passes the exclusion and filter"),
            PlanReason::ForcedExact => f.write_str("forced exact"),
            PlanReason::SmallIndex => f.write_str("exact scan (small index)"),
            PlanReason::WalkCostsMore { excluded_pct } => {
                write!(f, "{excluded_pct:.1}% excluded: exact scan (a walk would cost more)")
            }
            PlanReason::NoEntryPoint => f.write_str("no graph entry point"),
            PlanReason::Walk { excluded_pct, end } => {
                match excluded_pct {
                    Some(pct) => write!(f, "{pct:.1}% excluded: graph walk")?,
                    None => f.write_str("forced graph")?,
                }
                match end {
                    WalkEnd::Found => Ok(()),
                    WalkEnd::Widened => f.write_str("; widened"),
                    WalkEnd::NearestExcluded => f.write_str("; the query's nearest points are excluded: exact scan"),
                    WalkEnd::MostlyExcluded => f.write_str("; the nearest points are mostly excluded: exact scan"),
                    WalkEnd::Unsettled => f.write_str("; the walk had not settled: exact scan"),
                    WalkEnd::TooFewGroups { groups, limit } => write!(f, "; {groups} of {limit} groups: exact scan"),
                }
            }
        }
    }
}
