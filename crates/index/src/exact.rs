//! The exact path: one pass over the stored vectors in node order, skipping blocked nodes a
//! 64-bit word at a time, with no allocation per candidate — a bounded heap of the best `k`
//! without grouping; with grouping, each document's best chunk (the best `limit` documents
//! are decided by it), then the chosen documents' quotas filled from their own chunks.

use crate::distance::dot;
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
        let mut visits = 0;
        let hits = match grouping {
            None => {
                let mut best: BinaryHeap<Reverse<Scored>> = BinaryHeap::with_capacity(limit + 1);
                self.scan(q, ex, |s| {
                    visits += 1;
                    if best.len() < limit {
                        best.push(Reverse(s));
                    } else if best.peek().is_some_and(|w| s > w.0) {
                        best.pop();
                        best.push(Reverse(s));
                    }
                });
                let mut out: Vec<Scored> = best.into_iter().map(|r| r.0).collect();
                out.sort_by(|a, b| b.cmp(a));
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
                    docs.select_nth_unstable_by(limit, by_best);
                    docs.truncate(limit);
                }
                let mut filled: Vec<Scored> = Vec::new();
                for &(_, d) in &docs {
                    for &n in &self.doc_nodes[d as usize] {
                        if !ex.blocks(n) {
                            filled.push(Scored(dot(q, self.vector(n)), n));
                        }
                    }
                }
                visits += filled.len();
                filled.sort_by(|a, b| b.cmp(a));
                self.group(&filled, limit, g)
            }
        };
        (hits.into_iter().map(|s| (s.1, s.0)).collect(), visits)
    }

    /// Scores every node `ex` does not block, in node order.
    #[inline]
    fn scan(&self, q: &[f32], ex: &ResolvedExclusion, mut each: impl FnMut(Scored)) {
        let nodes = self.nodes();
        for (w, &word) in ex.blocked.words().iter().enumerate() {
            let mut open = !word;
            while open != 0 {
                let n = w * 64 + open.trailing_zeros() as usize;
                open &= open - 1;
                if n >= nodes {
                    return;
                }
                let n = n as u32;
                each(Scored(dot(q, self.vector(n)), n));
            }
        }
    }
}
