//! The embedded vector index of ragctx: an HNSW graph with the exclusion filter applied
//! inside the graph walk, grouping by document inside the search, and an exact scan chosen
//! when the estimated share of excluded points (or the corpus size) makes it cheaper or
//! safer. Persisted as one file, replaced atomically.
//!
//! ```
//! use ragctx_core::{ExclusionSet, Grouping, SearchRequest};
//! use ragctx_index::{IndexParams, VectorIndex};
//! let mut ix = VectorIndex::new(2, IndexParams::default());
//! ix.upsert("a#0", "a", 1.0, &[1.0, 0.0]);
//! ix.upsert("a#1", "a", 1.0, &[0.9, 0.436]);
//! ix.upsert("b#0", "b", 1.0, &[0.0, 1.0]);
//! let mut exclusion = ExclusionSet::default();
//! exclusion.chunks.insert("a#0".into());
//! let req = SearchRequest { vector: vec![1.0, 0.0], limit: 1, grouping: Some(Grouping::new(1)), exclusion, ..Default::default() };
//! let found = ix.search(&req);
//! assert_eq!(ix.chunk_id(found.hits[0].0), "a#1");
//! ```

mod distance;
mod exact;
mod exclusion;
pub mod failpoint;
mod filter_index;
mod full;
mod half;
mod hnsw;
mod int8;
mod persist;
mod prepared;
mod search;

pub use distance::dot;
pub use exclusion::{ResolvedCache, ResolvedExclusion};
pub use filter_index::{DocumentPositions, MetadataIndex, PositionBits};
pub use hnsw::ReachStats;
pub use persist::IndexError;
pub use prepared::PreparedExclusions;

use exclusion::{next_revision, Bits};
use hnsw::{Compact, Graph, Scored, Vectors, Walk};
use ragctx_core::{tenant_of, FastMap, Filter, Grouping, Metadata, PlanReason, SearchPath, SearchRequest, WalkEnd};

/// Up to [`EF_SCALES_ABOVE`] points, a first walk is crowded — exclusions sit where the
/// results should be, and it widens — when fewer than this share of its `ef` nearest points
/// are allowed (`search.rs`, `first_round_wants`, for the measurements).
const CROWDED_BELOW: f64 = 0.4;

/// Above [`EF_SCALES_ABOVE`] points: excluded points a first walk's frontier may hold beyond
/// twice what chance puts there before it counts as crowded: a few are noise.
const CROWD_SLACK: usize = 16;

/// Live points up to which [`IndexParams::ef_search`] is used as it is.
pub const EF_SCALES_ABOVE: usize = 50_000;

/// Graphs of this many nodes and more link new nodes in batches (`Graph::insert_batch`):
/// each batch searches the graph on every core, with the compact copy. Below it, nodes are
/// linked one by one in f32, as they always were (the stores MTRAG and SciFact measure stay
/// below it, and keep their graphs).
pub const BATCH_FROM: usize = 50_000;

/// Nodes linked together at most, once the graph holds [`BATCH_FROM`]: they search the graph
/// as it stood before them (0.1–1% of it) and see each other by direct scoring.
pub const BATCH: usize = 512;

/// A point to upsert ([`VectorIndex::upsert_many`]).
#[derive(Clone, Copy, Debug)]
pub struct Point<'a> {
    pub chunk_id: &'a str,
    pub document_id: &'a str,
    pub weight: f32,
    pub metadata: &'a Metadata,
    pub vector: &'a [f32],
}

/// The copy walks score with: the int8 copy of a large index, the binary16 copy when every
/// vector fits it, else f32.
fn compact_of<'a>(int8: Option<&'a Int8Copy>, half_ok: bool, halves: &'a [u16]) -> Compact<'a> {
    match int8 {
        Some(c) => Compact::Int8(&c.codes, &c.scales),
        None if half_ok => Compact::Half(halves),
        None => Compact::F32,
    }
}

/// Graph and planning parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IndexParams {
    /// Links per node (layer 0 has twice as many).
    pub m: usize,
    pub ef_construction: usize,
    /// Allowed results the graph walk collects at least, in an index of up to
    /// [`EF_SCALES_ABOVE`] live points; a larger index scales it by √(points / 50,000) (a
    /// fixed ef loses recall as the graph grows: 0.86 at 1M points with ef 96).
    pub ef_search: usize,
    /// Corpora with at most this many live points are always scanned exactly. Larger ones are
    /// scanned too when the cost model says a walk costs more: at the default `scan_ratio`,
    /// every corpus under about `ef_search × scan_ratio` (9,600) points.
    pub exact_below: usize,
    /// A graph walk with a given `ef` costs about as much as a scan of `scan_ratio × ef`
    /// points; the planner scans whenever the walk it would need costs more than the scan of
    /// the points the request allows (priced in `search.rs`, `SCATTERED_SCAN`). Measured with
    /// `bench search` on the 37.5k MTRAG MiniLM vectors, one core: a walk at ef 96 ≈ 0.22 ms
    /// and the half-precision scan ≈ 0.84 ms put the break-even near 100 (at 100k: 0.26 vs
    /// 2.4 ms; 2026-11-30, walk in f32). The break-even depends on the machine: on 2026-12-01's
    /// AMD EPYC, with the walk reading the binary16 copy, it was nearer 50 (bench/README.md,
    /// "Issue 16"). Walks widened past a large crowd of excluded neighbours also lose recall
    /// (0.91 past 1,000 at 100k), so the scan is not taken later than this. 0 = never scan on
    /// cost (tests that must exercise the walk).
    pub scan_ratio: usize,
    /// Above this many nodes the walk and the scan read an int8 copy of the vectors
    /// (`int8.rs`: half the memory of the binary16 copy they read below it); the results are
    /// re-scored in f32 either way. An index crossing it converts once; one read from a file
    /// keeps the copy it was written with.
    pub quantize_above: usize,
    /// In an index of more than this many live points, a graph walk whose best results (three
    /// times as many as asked for: `search.rs`, `SETTLE_WATCH`) were still changing in the
    /// second half of its scoring (a query in a crowd of near-equal points: `SETTLED_BY`)
    /// widens until they settle, up to 8 times its breadth, or scans when that costs less.
    /// Smaller indexes, and every index at `usize::MAX`, walk at `ef` as it is (as FAISS's
    /// `efSearch` does). Default [`EF_SCALES_ABOVE`]: on the 37.5k MTRAG store the walk
    /// already holds recall@10 0.999, and settling there widened 9% of the queries for none,
    /// sending 2% to a scan (p99 0.28 → 1.64 ms; bench/README.md, "issue 41, eleventh part").
    /// Watching three times the results (the twelfth part), settling at 37.5k on a second
    /// held-out set raises the rows a walk held for 92–94% of queries (the query's 10 or 50
    /// nearest excluded) to 100%, at p50 0.17 → 0.30 and 0.29 → 0.72 ms (p99 to 1.6–2.3 ms),
    /// and moves `eval mtrag`'s default evidence recall 0.6227 → 0.6215: not the default
    /// ("issue 41, closing part"; `bench search --settle-above 0`).
    pub settle_above: usize,
}

impl Default for IndexParams {
    fn default() -> Self {
        IndexParams {
            m: 16,
            ef_construction: 128,
            ef_search: 96,
            exact_below: 2_000,
            scan_ratio: 100,
            quantize_above: 200_000,
            settle_above: EF_SCALES_ABOVE,
        }
    }
}

/// Nodes found by a search, best first, and how they were found.
#[derive(Clone, Debug)]
pub struct IndexHits {
    /// `(node, similarity)`.
    pub hits: Vec<(u32, f32)>,
    pub path: SearchPath,
    pub rounds: u32,
    /// Why the planner took the path.
    pub reason: PlanReason,
    /// Similarity computations done (graph walk or scan).
    pub visits: usize,
}

/// Force a search path (benchmarks and tests); `None` lets the planner choose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForcePath {
    Graph,
    Exact,
}

#[derive(Clone, Debug)]
pub struct VectorIndex {
    params: IndexParams,
    dim: usize,
    /// The f32 vectors (mapped from the index file when it was read from one).
    vectors: full::Full,
    /// The vectors in half precision, for the walk and the exact path's first pass (empty
    /// once `int8` holds the copy).
    halves: Vec<u16>,
    /// The int8 copy that replaces `halves` above [`IndexParams::quantize_above`] nodes.
    int8: Option<Int8Copy>,
    /// Largest vector norm, for the half pass's error bound.
    max_norm: f32,
    /// Whether every vector fits half precision (else the exact path reads f32 only).
    half_ok: bool,
    chunk_ids: Vec<String>,
    doc_of: Vec<u32>,
    docs: Vec<String>,
    weights: Vec<f32>,
    /// Nodes replaced or removed: still linked in the graph, never returned.
    retired: Bits,
    graph: Graph,
    by_chunk: FastMap<String, u32>,
    by_doc: FastMap<String, u32>,
    doc_nodes: Vec<Vec<u32>>,
    /// Metadata and tenants by node, for filters resolved before a search.
    meta: MetadataIndex,
    /// [`Metadata::digest`] by node: a re-upsert with other metadata takes a new node.
    meta_digest: Vec<u64>,
    /// Changes with every mutation (see [`ResolvedExclusion`]).
    revision: u64,
}

impl DocumentPositions for VectorIndex {
    fn positions_of(&self, document_id: &str) -> &[u32] {
        match self.by_doc.get(document_id) {
            Some(&d) => &self.doc_nodes[d as usize],
            None => &[],
        }
    }
}

impl VectorIndex {
    pub fn new(dim: usize, params: IndexParams) -> Self {
        VectorIndex {
            params,
            dim,
            vectors: full::Full::new(dim),
            halves: Vec::new(),
            int8: None,
            max_norm: 0.0,
            half_ok: true,
            chunk_ids: Vec::new(),
            doc_of: Vec::new(),
            docs: Vec::new(),
            weights: Vec::new(),
            retired: Bits::default(),
            graph: Graph::new(params.m, params.ef_construction),
            by_chunk: FastMap::default(),
            by_doc: FastMap::default(),
            doc_nodes: Vec::new(),
            meta: MetadataIndex::default(),
            meta_digest: Vec::new(),
            revision: next_revision(),
        }
    }

    pub fn dimension(&self) -> usize {
        self.dim
    }
    pub fn params(&self) -> IndexParams {
        self.params
    }
    pub fn set_ef_search(&mut self, ef: usize) {
        self.params.ef_search = ef.max(1);
    }

    /// Applies the search-time parameters (`ef_search`, `exact_below`, `scan_ratio`,
    /// `quantize_above`, `settle_above`) of `p`; the graph's build parameters stay those it was
    /// built with.
    pub fn set_search_params(&mut self, p: IndexParams) {
        self.params.ef_search = p.ef_search.max(1);
        self.params.exact_below = p.exact_below;
        self.params.scan_ratio = p.scan_ratio;
        self.params.quantize_above = p.quantize_above;
        self.params.settle_above = p.settle_above;
    }

    /// Whether the walk and the scan read the int8 copy.
    pub fn is_quantized(&self) -> bool {
        self.int8.is_some()
    }

    /// The walk's breadth for an index of `live` points: `ef_search`, scaled by
    /// √(live / [`EF_SCALES_ABOVE`]) above that size.
    pub fn ef_for(&self, live: usize) -> usize {
        let ef = self.params.ef_search;
        if live <= EF_SCALES_ABOVE {
            ef
        } else {
            (ef as f64 * (live as f64 / EF_SCALES_ABOVE as f64).sqrt()).ceil() as usize
        }
    }

    /// Live (searchable) points.
    pub fn len(&self) -> usize {
        self.by_chunk.len()
    }
    pub fn is_empty(&self) -> bool {
        self.by_chunk.is_empty()
    }
    /// Nodes including replaced ones still linked in the graph.
    pub fn nodes(&self) -> usize {
        self.chunk_ids.len()
    }
    pub fn chunk_id(&self, node: u32) -> &str {
        &self.chunk_ids[node as usize]
    }
    pub fn document_id(&self, node: u32) -> &str {
        &self.docs[self.doc_of[node as usize] as usize]
    }
    pub fn contains(&self, chunk_id: &str) -> bool {
        self.by_chunk.contains_key(chunk_id)
    }
    /// The stored vector of a live chunk.
    pub fn vector_of(&self, chunk_id: &str) -> Option<&[f32]> {
        self.by_chunk.get(chunk_id).map(|&n| self.vector(n))
    }
    /// The vector of a node (live or retired).
    pub fn vector(&self, node: u32) -> &[f32] {
        self.vectors.get(node)
    }

    /// Whether the f32 vectors read from the index file stay in its memory map.
    pub fn is_mapped(&self) -> bool {
        self.vectors.is_mapped()
    }

    /// Nodes that no layer-0 link reaches (the entry point and retired nodes aside): a walk
    /// can never return them, only a scan. Counted afresh, over every link.
    pub fn unreached(&self) -> usize {
        self.graph.unreached(|n| self.retired.get(n as usize))
    }

    /// What the passes that give unreached nodes a way in did in this process
    /// (`VectorIndex::upsert_many`).
    pub fn reach_stats(&self) -> ReachStats {
        self.graph.reach
    }

    /// Share of nodes that are replaced (dead) but still in the graph.
    pub fn dead_share(&self) -> f64 {
        if self.nodes() == 0 {
            0.0
        } else {
            1.0 - self.len() as f64 / self.nodes() as f64
        }
    }

    /// Inserts or replaces a chunk. Returns true when the id was new. A replaced chunk keeps
    /// its node when only metadata changed; otherwise the old node is retired (still used to
    /// navigate, never returned) and a new one is linked.
    ///
    /// Panics if `vector.len() != dimension()`: callers validate dimensions first.
    pub fn upsert(&mut self, chunk_id: &str, document_id: &str, weight: f32, vector: &[f32]) -> bool {
        self.upsert_with(chunk_id, document_id, weight, &Metadata::default(), vector)
    }

    /// [`VectorIndex::upsert`] of a chunk with its metadata (its id's tenant too).
    pub fn upsert_chunk(&mut self, chunk: &ragctx_core::Chunk, vector: &[f32]) -> bool {
        self.upsert_with(chunk.id.as_str(), chunk.document_id.as_str(), chunk.weight, &chunk.metadata, vector)
    }

    /// [`VectorIndex::upsert`] with metadata: a chunk whose vector and metadata are unchanged
    /// keeps its node.
    pub fn upsert_with(
        &mut self,
        chunk_id: &str,
        document_id: &str,
        weight: f32,
        metadata: &Metadata,
        vector: &[f32],
    ) -> bool {
        let (is_new, node) = self.stage(&Point { chunk_id, document_id, weight, metadata, vector });
        if let Some(node) = node {
            self.link(node, 1);
        }
        is_new
    }

    /// [`VectorIndex::upsert_with`] of many points, in order; returns how many ids were new.
    /// Once the graph holds [`BATCH_FROM`] nodes, new nodes are linked in batches of up to
    /// [`BATCH`] that search the graph on every core (`hnsw.rs`, `Graph::insert_batch`).
    ///
    /// Panics, before changing anything, if a vector's length is not `dimension()`.
    pub fn upsert_many<'p>(&mut self, points: impl IntoIterator<Item = Point<'p>>) -> usize {
        let points: Vec<Point<'p>> = points.into_iter().collect();
        // Checked first: a panic between staging and linking would leave nodes unlinked.
        assert!(points.iter().all(|p| p.vector.len() == self.dim), "vector dimension");
        let mut new = 0;
        let mut first = None;
        let before = self.nodes();
        for p in points {
            let (is_new, node) = self.stage(&p);
            new += usize::from(is_new);
            if let Some(node) = node {
                let from = *first.get_or_insert(node);
                if (node - from) as usize + 1 >= BATCH {
                    self.link(from, BATCH);
                    first = None;
                }
            }
        }
        if let Some(from) = first {
            self.link(from, self.nodes() - from as usize);
        }
        // A call that linked a batch or more gives the nodes its batches left unreachable a
        // way in (`Graph::reach_unreached`): the first such call in a process counts every
        // node's ways in, later ones look only at what changed. A one-document ingest does
        // not run it.
        let linked = self.nodes() - before;
        if linked >= BATCH && self.graph.len() > BATCH_FROM {
            let compact = compact_of(self.int8.as_ref(), self.half_ok, &self.halves);
            let retired = &self.retired;
            self.graph.reach_unreached(&Vectors::of(&self.vectors, self.dim, compact), |n| retired.get(n as usize));
        }
        new
    }

    /// [`VectorIndex::upsert_many`] of chunks with their vectors.
    pub fn upsert_chunks(&mut self, chunks: &[ragctx_core::EmbeddedChunk]) -> usize {
        self.upsert_many(chunks.iter().map(|c| Point {
            chunk_id: c.chunk.id.as_str(),
            document_id: c.chunk.document_id.as_str(),
            weight: c.chunk.weight,
            metadata: &c.chunk.metadata,
            vector: &c.vector,
        }))
    }

    /// Everything of an upsert but the graph's links: returns whether the id was new and the
    /// node appended for it (none when only its weight, document or nothing changed).
    fn stage(&mut self, p: &Point<'_>) -> (bool, Option<u32>) {
        let Point { chunk_id, document_id, weight, metadata, vector } = *p;
        assert_eq!(vector.len(), self.dim, "vector dimension");
        let digest = metadata.digest();
        self.revision = next_revision();
        let doc = match self.by_doc.get(document_id) {
            Some(&d) => d,
            None => {
                let d = self.docs.len() as u32;
                self.docs.push(document_id.to_owned());
                self.doc_nodes.push(Vec::new());
                self.by_doc.insert(document_id.to_owned(), d);
                d
            }
        };
        if let Some(&old) = self.by_chunk.get(chunk_id) {
            if self.vector(old) == vector && self.meta_digest[old as usize] == digest {
                self.weights[old as usize] = weight;
                if self.doc_of[old as usize] != doc {
                    let prev = self.doc_of[old as usize] as usize;
                    self.doc_nodes[prev].retain(|&n| n != old);
                    self.doc_of[old as usize] = doc;
                    self.doc_nodes[doc as usize].push(old);
                }
                return (false, None);
            }
            self.retired.set(old as usize);
            let prev = self.doc_of[old as usize] as usize;
            self.doc_nodes[prev].retain(|&n| n != old);
        }
        let node = self.chunk_ids.len() as u32;
        let is_new = self.by_chunk.insert(chunk_id.to_owned(), node).is_none();
        self.chunk_ids.push(chunk_id.to_owned());
        self.doc_of.push(doc);
        self.weights.push(weight);
        self.retired.push(false);
        self.doc_nodes[doc as usize].push(node);
        self.meta.push(node, tenant_of(chunk_id), metadata);
        self.meta_digest.push(digest);
        self.vectors.push(vector);
        self.push_compact(node);
        (is_new, Some(node))
    }

    /// Links the `count` staged nodes from `first` into the graph: one by one in f32 while it
    /// holds fewer than [`BATCH_FROM`] nodes (the graphs of small stores are built as they
    /// always were), then as one batch scored with the compact copy.
    fn link(&mut self, first: u32, count: usize) {
        let end = first + count as u32;
        let mut node = first;
        while node < end && self.graph.len() < BATCH_FROM {
            self.graph.insert(&Vectors::of(&self.vectors, self.dim, Compact::F32), node);
            node += 1;
        }
        if node < end {
            let compact = compact_of(self.int8.as_ref(), self.half_ok, &self.halves);
            static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
            let threads = *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            self.graph.insert_batch(
                &Vectors::of(&self.vectors, self.dim, compact),
                node,
                (end - node) as usize,
                threads,
            );
        }
    }

    /// Appends the compact copy of a node's vector (nodes are added in order): binary16, or
    /// int8 once the index holds more than [`IndexParams::quantize_above`] nodes (the copy is
    /// converted then, once).
    pub(crate) fn push_compact(&mut self, node: u32) {
        let v = self.vectors.get(node);
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        self.max_norm = self.max_norm.max(norm);
        if let Some(int8) = &mut self.int8 {
            int8.push(v);
            return;
        }
        self.half_ok &= half::representable(v);
        self.halves.extend(v.iter().map(|&x| half::to_half(x)));
        if self.nodes() > self.params.quantize_above {
            let mut int8 = Int8Copy::default();
            for n in 0..self.nodes() as u32 {
                int8.push(self.vectors.get(n));
            }
            self.int8 = Some(int8);
            self.halves = Vec::new();
        }
    }

    /// Removes a chunk: its node is retired (still used to navigate, never returned).
    /// Returns false when the id was not there.
    pub fn remove(&mut self, chunk_id: &str) -> bool {
        let Some(node) = self.by_chunk.remove(chunk_id) else { return false };
        self.revision = next_revision();
        self.retired.set(node as usize);
        let doc = self.doc_of[node as usize] as usize;
        self.doc_nodes[doc].retain(|&n| n != node);
        true
    }

    /// The live chunk ids of a document.
    pub fn chunks_of(&self, document_id: &str) -> Vec<&str> {
        match self.by_doc.get(document_id) {
            Some(&d) => self.doc_nodes[d as usize].iter().map(|&n| self.chunk_id(n)).collect(),
            None => Vec::new(),
        }
    }

    /// The live chunks of `documents` that `keep` does not hold: what replacing those
    /// documents by `keep` removes.
    pub fn stale_chunks(
        &self,
        documents: &[ragctx_core::DocumentId],
        keep: &[ragctx_core::EmbeddedChunk],
    ) -> Vec<String> {
        let kept: std::collections::HashSet<&str> = keep.iter().map(|c| c.chunk.id.as_str()).collect();
        documents
            .iter()
            .flat_map(|d| self.chunks_of(d.as_str()))
            .filter(|id| !kept.contains(id))
            .map(str::to_owned)
            .collect()
    }

    /// A copy without retired nodes (rebuilds the graph).
    pub fn compacted(&self) -> VectorIndex {
        let mut fresh = VectorIndex::new(self.dim, self.params);
        let mut map = vec![None; self.nodes()];
        let empty = Metadata::default();
        let live: Vec<u32> = (0..self.nodes() as u32).filter(|&n| !self.retired.get(n as usize)).collect();
        for (to, &node) in live.iter().enumerate() {
            map[node as usize] = Some(to as u32);
        }
        fresh.upsert_many(live.iter().map(|&node| Point {
            chunk_id: self.chunk_id(node),
            document_id: self.document_id(node),
            weight: self.weights[node as usize],
            metadata: &empty,
            vector: self.vector(node),
        }));
        for (to, &node) in live.iter().enumerate() {
            fresh.meta_digest[to] = self.meta_digest[node as usize];
        }
        fresh.meta = self.meta.remapped(&map, fresh.nodes());
        fresh
    }

    /// A copy whose nodes carry `metadata` (one per node, in node order) in place of their
    /// own, with the same graph: metadata never shapes the graph, so the benchmarks attach
    /// their synthetic fields to a million points without linking them again.
    ///
    /// Panics unless `metadata` holds one entry per node.
    pub fn with_metadata(&self, metadata: &[Metadata]) -> VectorIndex {
        assert_eq!(metadata.len(), self.nodes(), "one metadata per node");
        let mut out = self.clone();
        out.revision = next_revision();
        out.meta = MetadataIndex::default();
        out.meta_digest.clear();
        for (node, m) in metadata.iter().enumerate() {
            out.meta.push(node as u32, tenant_of(self.chunk_id(node as u32)), m);
            out.meta_digest.push(m.digest());
        }
        out
    }

    /// Live chunks of `tenant`.
    pub fn tenant_len(&self, tenant: &str) -> usize {
        self.meta.tenant_positions(tenant).iter().filter(|&&n| !self.retired.get(n as usize)).count()
    }

    /// The metadata index (its size for the benchmarks, tenants for admin listings).
    pub fn metadata_index(&self) -> &MetadataIndex {
        &self.meta
    }

    /// `ex` narrowed to the chunks of `tenant` (`None`: any) that pass `filter`: one
    /// predicate, resolved to bits before the search. `ex` itself when nothing narrows it.
    pub fn restrict(
        &self,
        ex: std::sync::Arc<ResolvedExclusion>,
        filter: &Filter,
        tenant: Option<&str>,
    ) -> std::sync::Arc<ResolvedExclusion> {
        match self.meta.allowed(filter, tenant, self) {
            None => ex,
            Some(allowed) => {
                let mut narrowed = ex.narrowed(&allowed, self.len());
                // One tenant of a store that holds others: the reason counts its points.
                narrowed.scope_live = tenant
                    .filter(|t| self.meta.tenant_positions(t).len() < self.meta.len())
                    .map(|t| self.tenant_len(t));
                std::sync::Arc::new(narrowed)
            }
        }
    }
}

/// The int8 copy of the vectors (`int8.rs`): codes by node, a scale per node, and the
/// largest residual norm (its error bound).
#[derive(Clone, Debug, Default)]
pub(crate) struct Int8Copy {
    codes: Vec<i8>,
    scales: Vec<f32>,
    max_residual: f32,
}

impl Int8Copy {
    fn push(&mut self, v: &[f32]) {
        let (scale, residual) = int8::quantize(v, &mut self.codes);
        self.scales.push(scale);
        self.max_residual = self.max_residual.max(residual);
    }
}

#[cfg(test)]
mod tests;
