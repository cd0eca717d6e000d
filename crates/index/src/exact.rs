//! The exact path: one pass over the stored vectors in node order, skipping blocked nodes a
//! 64-bit word at a time, with no allocation per candidate. The pass reads the half-precision
//! copy (half the bytes) and keeps a shortlist of every node that could be among the true
//! best given the rounding bound (`half.rs`); the shortlist is re-scored in f32, so the
//! answer is the one an f32 scan gives. Without grouping the pass keeps a bounded heap of the
//! best `k`; with grouping, each document's best chunk (the best `limit` documents are
//! decided by it), then the chosen documents' quotas are filled from their own chunks.

use crate::distance::dot;
use crate::half::{dot_half, error_bound};
use crate::hnsw::Scored;
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
        // Two half scores within `slack` of each other may rank either way in f32.
        let slack = if self.half_ok { 2.0 * error_bound(q, self.max_norm) } else { 0.0 };
        let mut visits = 0;
        let hits = match grouping {
            None => {
                let mut best: BinaryHeap<Reverse<Scored>> = BinaryHeap::with_capacity(limit + 1);
                let mut shortlist: Vec<Scored> = Vec::new();
                self.scan(q, ex, |s| {
                    visits += 1;
                    let floor = if best.len() < limit { f32::NEG_INFINITY } else { best.peek().expect("full").0 .0 };
                    if s.0 >= floor - slack {
                        shortlist.push(s);
                    }
                    if best.len() < limit {
                        best.push(Reverse(s));
                    } else if best.peek().is_some_and(|w| s > w.0) {
                        best.pop();
                        best.push(Reverse(s));
                    }
                });
                let floor = if best.len() < limit { f32::NEG_INFINITY } else { best.peek().expect("full").0 .0 };
                let mut out = self.rescored(q, shortlist.into_iter().filter(|s| s.0 >= floor - slack).map(|s| s.1));
                visits += out.len();
                out.truncate(limit);
                out
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
                    let floor = docs[limit - 1].0 .0 - slack;
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
    pub(crate) fn rescored(&self, q: &[f32], nodes: impl Iterator<Item = u32>) -> Vec<Scored> {
        let mut out: Vec<Scored> = nodes.map(|n| Scored(dot(q, self.vector(n)), n)).collect();
        out.sort_by(|a, b| b.cmp(a));
        out
    }

    /// Scores every node `ex` does not block, in node order: from the half-precision copy
    /// when every vector fits it, else in f32.
    #[inline]
    fn scan(&self, q: &[f32], ex: &ResolvedExclusion, mut each: impl FnMut(Scored)) {
        let nodes = self.nodes();
        let dim = self.dim;
        for (w, &word) in ex.blocked.words().iter().enumerate() {
            let mut open = !word;
            while open != 0 {
                let n = w * 64 + open.trailing_zeros() as usize;
                open &= open - 1;
                if n >= nodes {
                    return;
                }
                let score = if self.half_ok {
                    dot_half(q, &self.halves[n * dim..(n + 1) * dim])
                } else {
                    dot(q, self.vector(n as u32))
                };
                each(Scored(score, n as u32));
            }
        }
    }
}
