//! The search of the index: the filter and exclusion resolved to blocked nodes, the planner's
//! choice between the graph walk and the exact scan, grouping by document, and re-scoring in
//! f32.

use super::*;

impl VectorIndex {
    pub fn search(&self, request: &SearchRequest) -> IndexHits {
        self.search_with(request, None)
    }

    /// Search with grouping and exclusion applied inside; `force` pins the path.
    pub fn search_with(&self, request: &SearchRequest, force: Option<ForcePath>) -> IndexHits {
        let ex = self.restrict(
            std::sync::Arc::new(self.resolve(&request.exclusion)),
            &request.filter,
            request.tenant.as_deref(),
        );
        self.search_resolved(&request.vector, request.limit, request.grouping.as_ref(), &ex, force)
    }

    /// Search with an exclusion set resolved against this index state
    /// ([`VectorIndex::resolve`]); `limit` counts documents when `grouping` is set.
    ///
    /// Panics when `ex` was resolved against another state of the index (resolve again
    /// after a mutation; [`ResolvedCache`] does).
    pub fn search_resolved(
        &self,
        vector: &[f32],
        limit: usize,
        grouping: Option<&Grouping>,
        ex: &ResolvedExclusion,
        force: Option<ForcePath>,
    ) -> IndexHits {
        assert_eq!(ex.revision, self.revision, "exclusion resolved against another state of the index");
        let live = self.len();
        // A tenant without a point reads what an empty store reads (not that others hold some).
        if live == 0 || limit == 0 || ex.scope_live == Some(0) {
            return IndexHits {
                hits: Vec::new(),
                path: SearchPath::Exact,
                rounds: 0,
                reason: PlanReason::Empty,
                visits: 0,
            };
        }
        let allowed_live = live - ex.excluded_live;
        if allowed_live == 0 {
            return IndexHits {
                hits: Vec::new(),
                path: SearchPath::Exact,
                rounds: 0,
                reason: PlanReason::NothingAllowed,
                visits: 0,
            };
        }
        let allowed_share = allowed_live as f64 / live as f64;
        let per_group = grouping.map_or(1, |g| g.group_size);
        let need = limit * per_group;
        let ef0 = self.ef_for(live).max(need * 2);
        // One cost model decides every switch to a scan: a walk must hold `ef` allowed results,
        // so with a share `a` allowed it costs like a walk of ef / a. The scan reads only the
        // allowed points (`scan_open` skips blocked ones), each scattered among blocked ones
        // costing about `SCATTERED_SCAN` of a contiguous scan's points: it is priced at the
        // lesser of the two.
        let ratio = self.params.scan_ratio;
        let scan_cost = (allowed_live.saturating_mul(SCATTERED_SCAN)).min(live) as f64;
        let walk_costs_more = |ef: f64| force.is_none() && ratio > 0 && ef * ratio as f64 > scan_cost;
        let scan = |reason: PlanReason, rounds: u32, visits: usize| {
            let (hits, v) = self.exact(vector, limit, grouping, ex);
            IndexHits { hits, path: SearchPath::Exact, rounds, reason, visits: visits + v }
        };
        // The reason names no figure of the whole store (its size, `ef`, which scales with it,
        // the nearest points, which may be other tenants'): its share is of the caller's
        // points (a tenant's, when the store holds others), so a tenant reads the same reason
        // whoever else ingests. A tenant above `exact_below` points walks the store's graph,
        // so its path and (approximate) ranking still depend on the store (docs/filters.md).
        let seen = ex.scope_live.unwrap_or(live).max(1);
        let pct = 100.0 * (1.0 - allowed_live as f64 / seen as f64);
        let excluded_pct = match force {
            Some(ForcePath::Exact) => return scan(PlanReason::ForcedExact, 1, 0),
            Some(ForcePath::Graph) => None,
            // A tenant's scope as small as a small index is scanned whatever the store
            // holds: its path, reason and ranking are then its own (exact).
            None if live <= self.params.exact_below || ex.scope_live.is_some_and(|n| n <= self.params.exact_below) => {
                return scan(PlanReason::SmallIndex, 1, 0)
            }
            None if walk_costs_more(ef0 as f64 / allowed_share.max(1e-9)) => {
                return scan(PlanReason::WalkCostsMore { excluded_pct: pct }, 1, 0)
            }
            None => Some(pct),
        };
        let walked = |end| PlanReason::Walk { excluded_pct, end };
        // The walk reads the binary16 copy (half the bytes per node); what it finds is
        // re-scored in f32 below.
        let vectors = self.search_vectors();
        let Some(entry) = self.graph.entry_for(&vectors, vector) else {
            return scan(PlanReason::NoEntryPoint, 1, 0);
        };
        let mut walk = Walk::new(&self.graph, &vectors, vector, 0, &[entry], |n| !ex.blocks(n));
        let settle = live > self.params.settle_above;
        if settle {
            walk.watch(settle_watch(need, ef0));
        }
        let mut ef = ef0;
        let mut rounds = 0;
        let mut unsettled = 0;
        loop {
            rounds += 1;
            walk.run(ef);
            let exhausted = walk.exhausted();
            let near = walk.allowed_near();
            // Exclusions crowd the query's neighbourhood (the consumed ids of a session are the
            // nearest neighbours of its next question). Above 50k points a walk past them finds
            // the ranks behind them poorly, however wide (`crowded_by_exclusion`): scan. Up to
            // 50k it finds them when widened (below). The crowd counts the request's exclusions
            // only (retired nodes — a replaced chunk's old node sits by its new one — are not
            // the neighbourhood taken), and a planner told never to scan on cost (`scan_ratio`
            // 0) or forced to walk widens instead. Not for one tenant of a store that holds
            // others: their points would decide its path and reason (docs/filters.md); its
            // walk widens as before.
            // A crowd is more than `CROWD_SLACK` excluded points in the frontier: a request
            // excluding no more than that (most turns' first search) skips the frontier pass.
            let crowded = rounds == 1
                && !exhausted
                && ex.scope_live.is_none()
                && ex.excluded_live > CROWD_SLACK
                && crowded_by_exclusion(
                    ef,
                    walk.frontier_count(|n| ex.blocks(n) && !self.retired.get(n as usize)),
                    ex.excluded_live as f64 / live as f64,
                );
            if crowded && live > EF_SCALES_ABOVE && force.is_none() && ratio > 0 {
                return scan(walked(WalkEnd::NearestExcluded), 2, walk.visits);
            }
            // A first walk that finds fewer than `CROWDED_BELOW` (40%) of its `ef` nearest
            // points allowed (or a crowd it may not scan past) widens; once widening, the walk
            // goes on until it holds `ef0` allowed points.
            let want = if rounds == 1 && !crowded { first_round_wants(ef0) } else { ef0 };
            // Widening ends by itself: each round grows `ef`, and a walk that would cost more
            // than a scan is not run.
            if !exhausted && near < want {
                let excluded_near = ef - near;
                ef += 2 * excluded_near + ef0.saturating_sub(near);
                // The crowd is at most the whole exclusion set: when even that bound leaves the
                // walk costlier than a scan, and nothing near is allowed, scan now.
                let bound = ex.excluded_live.min(live) + ef0;
                if walk_costs_more(ef as f64) || (near == 0 && walk_costs_more(bound as f64)) {
                    return scan(walked(WalkEnd::MostlyExcluded), rounds + 1, walk.visits);
                }
                continue;
            }
            // Best results still changing late in the walk: it stopped in a crowd of
            // near-equal points, and a wider run finds more of them. Each doubling costs only
            // the extra ground; one that would cost more than a scan scans instead. After
            // `SETTLE_ROUNDS` doublings the walk's results stand.
            if settle && unsettled < SETTLE_ROUNDS && !exhausted && !walk.settled(SETTLED_BY) {
                if walk_costs_more(2.0 * ef as f64) {
                    return scan(walked(WalkEnd::Unsettled), rounds + 1, walk.visits);
                }
                unsettled += 1;
                ef *= 2;
                continue;
            }
            let found = self.walk_hits_in_f32(vector, walk.results(usize::MAX), grouping.is_some(), limit);
            let hits = match grouping {
                Some(g) => self.group(&found, limit, g),
                None => found,
            };
            let groups = match grouping {
                Some(_) => self.count_documents(&hits),
                None => hits.len(),
            };
            if groups >= limit.min(allowed_live) || exhausted {
                let hits = hits.into_iter().map(|s| (s.1, s.0)).collect();
                let reason = walked(if rounds > 1 { WalkEnd::Widened } else { WalkEnd::Found });
                return IndexHits { hits, path: SearchPath::Graph, rounds, reason, visits: walk.visits };
            }
            // Too few groups (a document with many near chunks fills the walk): deeper.
            ef *= 4;
            if walk_costs_more(ef as f64) {
                return scan(walked(WalkEnd::TooFewGroups { groups, limit }), rounds + 1, walk.visits);
            }
        }
    }

    /// The walk's allowed nodes (best first by the walk's scores) with f32 scores: when the
    /// walk ranked by the binary16 copy, every node that could be among the best `limit` in
    /// f32 (all of them when grouping) is re-scored, as in the exact path. At most `limit`
    /// without grouping.
    fn walk_hits_in_f32(&self, q: &[f32], found: Vec<Scored>, grouping: bool, limit: usize) -> Vec<Scored> {
        let mut out = match self.slack(q) {
            Some(slack) => {
                let floor = if grouping || found.len() <= limit { f32::NEG_INFINITY } else { found[limit - 1].0 };
                self.rescore_above(q, found, floor, slack)
            }
            None => found,
        };
        if !grouping {
            out.truncate(limit);
        }
        out
    }

    fn count_documents(&self, hits: &[Scored]) -> usize {
        let mut docs: Vec<u32> = hits.iter().map(|s| self.doc_of[s.1 as usize]).collect();
        docs.sort_unstable();
        docs.dedup();
        docs.len()
    }

    /// Keeps, in score order, at most `limit` documents and each document's quota of chunks.
    pub(crate) fn group(&self, sorted: &[Scored], limit: usize, grouping: &Grouping) -> Vec<Scored> {
        let mut taken: FastMap<u32, usize> = FastMap::default();
        let mut out = Vec::new();
        for &s in sorted {
            let node = s.1 as usize;
            let doc = self.doc_of[node];
            let docs_so_far = taken.len();
            let count = taken.entry(doc).or_insert(0);
            if *count == 0 && docs_so_far >= limit {
                taken.remove(&doc);
                continue;
            }
            if *count < grouping.quota(&self.docs[doc as usize], self.weights[node]) {
                *count += 1;
                out.push(s);
            }
        }
        out
    }
}

/// What one allowed point costs a scan that skips blocked ones, in points of a scan over all:
/// the scan reads only the points a filter, tenant or exclusion lets through, but scattered
/// among blocked ones each costs more than in a contiguous pass (no run to stream through).
/// Measured on 1M fitted points, int8, one core (bench/README.md, "A slower machine"): a scan
/// keeping 50% took 1.03× the full scan's time, 10% 0.38×, 1% 0.058×, 0.1% 0.0037×: about
/// `min(1, 4 × share)`. On a faster machine (the "fifth part"): 1.84×, 0.55×, 0.024×,
/// 0.0042×. Half the points scattered cost more than all of them, but there the walk is
/// cheaper by far either way; the price matters near 10%, where the two machines put it at 3.8
/// and 5.5. Since the scan prefetches the points it is about to score (`exact.rs`, `Ahead`),
/// a third machine put it at 2.8 (10%) and 3.5 (1%) (the "sixth part").
const SCATTERED_SCAN: usize = 4;

/// A walk has settled when its best results last changed within this share of its scoring
/// (`Walk::settled`); otherwise it doubles its breadth, at most [`SETTLE_ROUNDS`] times.
///
/// Chosen on 1M points fitted from the government domain (833 passages; 100 held out as
/// queries, `--seed 7`), where the walk at the default breadth gives recall@10 0.911 with a
/// 5th percentile of 0.50: the queries sit among many near-equal points. Of the 20 queries
/// below 0.9, 15 had still found one of their best 10 in the last half of their scoring.
/// Settling at 0.5 with 3 doublings, watching the ten asked for (before [`SETTLE_WATCH`]),
/// gave 0.963 (p5 0.80) for p50 2.54 ms against 2.31 ms and p99 14.9 ms against 2.6 ms (the
/// scan: 41 ms); at 0.75, 0.942 (p5 0.70); at 0.5 with 4 doublings, 0.968 for p99 68 ms.
/// Measured on other queries and corpora in bench/README.md ("issue 41, eleventh part").
const SETTLED_BY: f64 = 0.5;

/// Doublings an unsettled walk takes at most (8 times its breadth), fewer when a scan would
/// cost less.
const SETTLE_ROUNDS: u32 = 3;

/// How many of a walk's best allowed results [`Walk::settled`] watches, in multiples of the
/// `need` asked for ([`settle_watch`]).
///
/// Watching only the results asked for left half the misses unflagged: on the government fit
/// (set 1 above), 10 of the 22 queries below 0.95 had settled in their first walk, each
/// missing one to four of its true ten (in 2 of them the first). Chosen on that set alone,
/// one run each, alone (bench/README.md, "issue 41, twelfth part"), against FAISS HNSW at its
/// lowest efSearch reaching recall@10 0.95 there (1,720: p50 9.76 ms, 76% of queries ≥ 0.95):
/// watching 1× gave 0.963 (p5 0.80, 78%) at p50 3.12 ms, 2× 0.979 (p5 0.90, 87%) at 5.19 ms,
/// **3× 0.985 (p5 0.90, 91%) at 6.23 ms** (4×: 0.987, p5 0.90, 92%, timed beside other work).
/// Scanning a walk still unsettled after its last doubling added 3 of those queries at 3×
/// (94%) for a p99 of 33 ms against 15 ms, and on the four-domain fit none for a p99 of 32 ms
/// against 12 ms: not taken.
pub(crate) const SETTLE_WATCH: usize = 3;

/// The best results a settling walk watches: [`SETTLE_WATCH`] times those asked for, but no
/// more than half its first breadth (a walk watching more than its frontier holds would never
/// settle). The search's first breadth is at least twice `need`, so the walk always watches
/// at least what it was asked for.
pub(crate) fn settle_watch(need: usize, ef0: usize) -> usize {
    (need * SETTLE_WATCH).min(ef0 / 2)
}

/// The allowed points a first walk of frontier `ef` must hold not to widen: 40% of `ef0`
/// ([`CROWDED_BELOW`]), unless its frontier is crowded by the request's exclusions
/// ([`crowded_by_exclusion`]): then it widens until it holds `ef0` (up to
/// [`EF_SCALES_ABOVE`] points) or is scanned (above). The 40% rule still widens a walk that a
/// filter or tenant keeping a small share leaves with few allowed points.
fn first_round_wants(ef0: usize) -> usize {
    (ef0 as f64 * CROWDED_BELOW) as usize
}

/// Whether a first walk's frontier of `ef` holds `excluded` of the request's excluded live
/// points (filtered out, excluded by id or document, another tenant's) where chance puts
/// `ef × excluded_share` there: more than twice that plus [`CROWD_SLACK`] means the query's
/// own neighbourhood is excluded, as a session's consumed chunks are.
///
/// Above [`EF_SCALES_ABOVE`] points the search then scans. Past such a crowd the results are
/// ranks a few hundred deep, which a walk of a large graph finds poorly however far it widens.
/// Measured on 1M fitted points with 100 held-out passages as queries (bench/README.md, "A
/// million points"): the widened walk holds recall@10 0.930 with the query's 50 nearest
/// excluded, 0.849 with 200 and 0.700 with 1,000 (4× the breadth: 0.900 at 200); FAISS HNSW
/// needs efSearch 6,880 (47 ms) to reach 0.95 at 200 and does not at 1,000; the int8 scan is
/// exact in 40–50 ms.
///
/// Up to it the walk widens until it holds `ef0` allowed points. The 37.5k MTRAG vectors,
/// 100 held-out passages, the query's 50 nearest excluded (bench/README.md, "issue 41, fifth
/// part"): recall@10 0.974 with 81% of queries ≥ 0.95 unwidened, 0.996 and 96% widened at
/// 2.1× the time; on a second held-out set (`--seed 11`) 0.954 / 75% against 0.991 / 92%.
fn crowded_by_exclusion(ef: usize, excluded: usize, excluded_share: f64) -> bool {
    let by_chance = ef as f64 * excluded_share;
    excluded as f64 > 2.0 * by_chance + CROWD_SLACK as f64
}
