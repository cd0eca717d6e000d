//! The exact path: one pass over the stored vectors in node order, skipping blocked nodes a
//! 64-bit word at a time, with no allocation per candidate. The pass reads the half-precision
//! copy (half the bytes) and keeps a shortlist of every node that could be among the true
//! best given the rounding bound (`half.rs`); the shortlist is re-scored in f32, so the
//! answer is the one an f32 scan gives. Without grouping the pass keeps a bounded heap of the
//! best `k`; with grouping, each document's best chunk (the best `limit` documents are
//! decided by it), then the chosen documents' quotas are filled from their own chunks.

use crate::distance::dot;
use crate::half::error_bound;
use crate::hnsw::{Scored, Vectors};
use crate::{ResolvedExclusion, VectorIndex};
use ragctx_core::Grouping;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

impl VectorIndex {
    /// Exact search with the same exclusion and grouping as the walk: `(node, score)` best
    /// first, and the similarity computations done.
    pub(crate) fn exact(
        &self,
        q: &[f32],
        limit: usize,
        grouping: Option<&Grouping>,
        ex: &ResolvedExclusion,
    ) -> (Vec<(u32, f32)>, usize) {
        let slack = self.slack(q);
        let mut visits = 0;
        let hits = match grouping {
            None => {
                let mut best: BinaryHeap<Reverse<Scored>> = BinaryHeap::with_capacity(limit + 1);
                let floor = |best: &BinaryHeap<Reverse<Scored>>| {
                    if best.len() < limit {
                        f32::NEG_INFINITY
                    } else {
                        best.peek().expect("full").0 .0
                    }
                };
                // Scored from the binary16 copy: every node that may still be among the best
                // in f32 (within `slack` of the running floor) is kept for the re-score.
                let mut shortlist: Vec<Scored> = Vec::new();
                self.scan(q, ex, |s| {
                    visits += 1;
                    if slack.is_some_and(|slack| s.0 >= floor(&best) - slack) {
                        shortlist.push(s);
                    }
                    if best.len() < limit {
                        best.push(Reverse(s));
                    } else if best.peek().is_some_and(|w| s > w.0) {
                        best.pop();
                        best.push(Reverse(s));
                    }
                });
                match slack {
                    Some(slack) => {
                        let mut out = self.rescore_above(q, shortlist, floor(&best), slack);
                        visits += out.len();
                        out.truncate(limit);
                        out
                    }
                    // Scored in f32 already: the heap is the answer.
                    None => {
                        let mut out: Vec<Scored> = best.into_iter().map(|r| r.0).collect();
                        out.sort_by(|a, b| b.cmp(a));
                        out
                    }
                }
            }
            Some(g) => {
                let none = Scored(f32::NEG_INFINITY, u32::MAX);
                let mut best_of_doc = vec![none; self.docs.len()];
                self.scan(q, ex, |s| {
                    visits += 1;
                    let d = self.doc_of[s.1 as usize] as usize;
                    if s > best_of_doc[d] {
                        best_of_doc[d] = s;
                    }
                });
                let mut docs: Vec<(Scored, u32)> = best_of_doc
                    .into_iter()
                    .enumerate()
                    .filter(|(_, s)| s.1 != u32::MAX)
                    .map(|(d, s)| (s, d as u32))
                    .collect();
                let by_best = |a: &(Scored, u32), b: &(Scored, u32)| b.0.cmp(&a.0);
                if limit < docs.len() {
                    docs.select_nth_unstable_by(limit - 1, by_best);
                    // Documents whose best chunk may beat the `limit`-th in f32.
                    let floor = docs[limit - 1].0 .0 - slack.unwrap_or(0.0);
                    docs.retain(|(s, _)| s.0 >= floor);
                }
                let nodes = docs.iter().flat_map(|&(_, d)| self.doc_nodes[d as usize].iter().copied());
                let filled = self.rescored(q, nodes.filter(|&n| !ex.blocks(n)));
                visits += filled.len();
                self.group(&filled, limit, g)
            }
        };
        (hits.into_iter().map(|s| (s.1, s.0)).collect(), visits)
    }

    /// `nodes` scored in f32, best first.
    fn rescored(&self, q: &[f32], nodes: impl Iterator<Item = u32>) -> Vec<Scored> {
        let mut out: Vec<Scored> = nodes.map(|n| Scored(dot(q, self.vector(n)), n)).collect();
        out.sort_by(|a, b| b.cmp(a));
        out
    }

    /// How far apart a binary16 score and the f32 score of the same node may be, both ways
    /// summed (two nodes whose binary16 scores differ by less may rank either way in f32);
    /// `None` when the index scores in f32 (a vector did not fit binary16).
    pub(crate) fn slack(&self, q: &[f32]) -> Option<f32> {
        match &self.int8 {
            Some(c) => Some(2.0 * crate::int8::error_bound(q, self.max_norm, c.max_residual)),
            None => self.half_ok.then(|| 2.0 * error_bound(q, self.max_norm)),
        }
    }

    /// Candidates with binary16 scores → every one that may rank at or above `floor` (a
    /// binary16 score) in f32, re-scored in f32, best first. The walk and the exact path
    /// both end here.
    pub(crate) fn rescore_above(
        &self,
        q: &[f32],
        candidates: impl IntoIterator<Item = Scored>,
        floor: f32,
        slack: f32,
    ) -> Vec<Scored> {
        self.rescored(q, candidates.into_iter().filter(|s| s.0 >= floor - slack).map(|s| s.1))
    }

    /// The vectors searches score with: the int8 copy of a large index, the binary16 copy
    /// when every vector fits it, else f32.
    pub(crate) fn search_vectors(&self) -> Vectors<'_> {
        Vectors::of(&self.vectors, self.dim, crate::compact_of(self.int8.as_ref(), self.half_ok, &self.halves))
    }

    /// Scores every node `ex` does not block, in node order, with [`VectorIndex::search_vectors`].
    #[inline]
    fn scan(&self, q: &[f32], ex: &ResolvedExclusion, mut each: impl FnMut(Scored)) {
        match &self.int8 {
            // The int8 copy is scanned with the query in 16-bit fixed point: integer sums,
            // twice the codes per instruction (`int8::QueryI16`; its error is in the bound).
            // Written out rather than through `Vectors::score_query`, whose match on the copy
            // per node made the contiguous 1M scan about 10% slower (21.3–22.7 against
            // 23.0–25.7 ms, four runs each; 2026-12-05).
            Some(c) if self.dim <= crate::int8::I16_DIM_MAX => {
                let q16 = crate::int8::QueryI16::of(q);
                let vectors = self.search_vectors();
                self.scan_open(
                    ex,
                    |n| vectors.prefetch(n),
                    |n| {
                        let at = n as usize * self.dim;
                        let s = c.scales[n as usize] * q16.scale * q16.dot(&c.codes[at..at + self.dim]) as f32;
                        each(Scored(s, n))
                    },
                )
            }
            _ => {
                let vectors = self.search_vectors();
                self.scan_open(ex, |n| vectors.prefetch(n), |n| each(Scored(vectors.score(q, n), n)))
            }
        }
    }

    /// Every node `ex` does not block, in node order: `prefetch` is called on each when it is
    /// reached and `each` [`AHEAD`] nodes later ([`Ahead`]), so a scattered node's vector is
    /// on its way from memory while the nodes before it are scored.
    #[inline]
    fn scan_open(&self, ex: &ResolvedExclusion, prefetch: impl Fn(u32), mut each: impl FnMut(u32)) {
        let nodes = self.nodes();
        let mut ahead = Ahead::default();
        'words: for (w, &word) in ex.blocked.words().iter().enumerate() {
            let mut open = !word;
            while open != 0 {
                let n = w * 64 + open.trailing_zeros() as usize;
                open &= open - 1;
                if n >= nodes {
                    break 'words;
                }
                prefetch(n as u32);
                if let Some(due) = ahead.push(n as u32) {
                    each(due);
                }
            }
        }
        ahead.drain().for_each(each);
    }
}

/// Nodes a scan has asked the CPU to load but not scored yet: a node is scored [`AHEAD`]
/// nodes after its prefetch, so that scattered nodes (a filter's passing ones) arrive from
/// memory while the nodes before them are scored. A contiguous scan streams without it.
#[derive(Default)]
struct Ahead {
    ring: [u32; AHEAD],
    head: usize,
    len: usize,
}

const AHEAD: usize = 8;

impl Ahead {
    /// Queues `n`; returns the node queued [`AHEAD`] pushes before, now due.
    #[inline]
    fn push(&mut self, n: u32) -> Option<u32> {
        if self.len < AHEAD {
            self.ring[(self.head + self.len) % AHEAD] = n;
            self.len += 1;
            return None;
        }
        let due = std::mem::replace(&mut self.ring[self.head], n);
        self.head = (self.head + 1) % AHEAD;
        Some(due)
    }

    /// The nodes still queued, oldest first.
    fn drain(self) -> impl Iterator<Item = u32> {
        (0..self.len).map(move |i| self.ring[(self.head + i) % AHEAD])
    }
}

#[cfg(test)]
mod ahead_tests {
    use super::{Ahead, AHEAD};

    #[test]
    fn every_node_queued_comes_out_once_in_order() {
        for n in [0, 1, AHEAD - 1, AHEAD, AHEAD + 1, 100] {
            let mut ahead = Ahead::default();
            let mut out: Vec<u32> = (0..n as u32).filter_map(|i| ahead.push(i)).collect();
            assert_eq!(out.len(), n.saturating_sub(AHEAD), "due before the drain, {n} queued");
            out.extend(ahead.drain());
            assert_eq!(out, (0..n as u32).collect::<Vec<_>>(), "{n} queued");
        }
    }
}
