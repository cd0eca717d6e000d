//! Stage 3, after the search and any reranker: maximal marginal relevance (Carbonell &
//! Goldstein, 1998) over the turn's candidates by embedding similarity (`diversity` λ above
//! 0), before dedupe. The seed asks that source diversity not be a mechanical
//! one-chunk-per-document rule: MMR lets a second chunk of a document in when it adds
//! something, and lets a near-copy of a ranked chunk fall back however well it scores.

use crate::retrieve::ladder;
use crate::turn::Turn;
use crate::Engine;
use ragctx_core::{Diversified, Hit, Intent, Result};

/// On when `diversity` is above 0, never for a reshow (it shows again what it showed).
pub fn runs(t: &Turn<'_>) -> bool {
    t.settings.diversity > 0.0 && t.intent != Intent::Reshow
}

/// Re-orders the candidates by MMR; their cosines are handed out again best first down the
/// new order ([`ladder`]), so the stages after it keep the order and the floor stays on the
/// cosine scale.
pub fn stage(e: &Engine, t: &mut Turn<'_>) -> Result<()> {
    let ids: Vec<_> = t.hits.iter().map(|h| h.chunk.id.clone()).collect();
    let vectors = e.vectors.vectors(&ids)?;
    let (hits, moved) = mmr(std::mem::take(&mut t.hits), &vectors, t.settings.diversity);
    t.stats.diversified = Some(Diversified { candidates: hits.len(), moved });
    t.hits = hits;
    Ok(())
}

/// `hits` (with `vectors[i]` the stored vector of `hits[i]`, `None` when unknown) in MMR
/// order: starting from the best, each next one maximises `(1 − λ) · score − λ · max cosine
/// to those already taken`. Returns the hits laddered down that order and how many changed
/// place against the order by score.
pub fn mmr(hits: Vec<Hit>, vectors: &[Option<Vec<f32>>], lambda: f32) -> (Vec<Hit>, usize) {
    let mut items: Vec<(Hit, Option<&[f32]>)> =
        hits.into_iter().zip(vectors.iter().map(|v| v.as_deref()).chain(std::iter::repeat(None))).collect();
    // By score first (ties by id, never array order): the order MMR departs from.
    items.sort_by(|a, b| b.0.score.total_cmp(&a.0.score).then_with(|| a.0.chunk.id.cmp(&b.0.chunk.id)));
    let n = items.len();
    let cosine = |a: Option<&[f32]>, b: Option<&[f32]>| match (a, b) {
        (Some(a), Some(b)) if a.len() == b.len() => a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>(),
        _ => 0.0,
    };
    // The highest similarity of each remaining candidate to those taken, kept up to date.
    let mut nearest = vec![f32::NEG_INFINITY; n];
    let mut taken = vec![false; n];
    let mut order = Vec::with_capacity(n);
    for _ in 0..n {
        let mut best: Option<(usize, f32)> = None;
        for i in (0..n).filter(|&i| !taken[i]) {
            let redundancy = if order.is_empty() { 0.0 } else { nearest[i] };
            let value = (1.0 - lambda) * items[i].0.score - lambda * redundancy;
            // Strictly better only: ties keep the order by score.
            if best.is_none_or(|(_, v)| value > v) {
                best = Some((i, value));
            }
        }
        let (pick, _) = best.expect("a candidate is left while fewer than n are taken");
        taken[pick] = true;
        order.push(pick);
        for i in (0..n).filter(|&i| !taken[i]) {
            nearest[i] = nearest[i].max(cosine(items[i].1, items[pick].1));
        }
    }
    let moved = order.iter().enumerate().filter(|(at, &i)| *at != i).count();
    let mut slots: Vec<Option<Hit>> = items.into_iter().map(|(h, _)| Some(h)).collect();
    let reordered = order.into_iter().map(|i| slots[i].take().expect("each candidate is taken once")).collect();
    (ladder(reordered), moved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ragctx_core::Chunk;

    fn hit(id: &str, score: f32) -> Hit {
        Hit { chunk: Chunk::new(id, &id[..1], "", id), score }
    }

    fn ids(hits: &[Hit]) -> Vec<&str> {
        hits.iter().map(|h| h.chunk.id.as_str()).collect()
    }

    #[test]
    fn a_near_copy_of_a_taken_candidate_falls_behind_a_different_one() {
        // a1 and a2 are the same direction; b1 is orthogonal and scores a little lower.
        let hits = vec![hit("a1", 0.90), hit("a2", 0.89), hit("b1", 0.80)];
        let v = |x: f32, y: f32| Some(vec![x, y]);
        let vectors = [v(1.0, 0.0), v(1.0, 0.0), v(0.0, 1.0)];
        let (plain, moved) = mmr(hits.clone(), &vectors, 0.0);
        assert_eq!((ids(&plain), moved), (vec!["a1", "a2", "b1"], 0), "λ 0 is the order by score");
        let (diverse, moved) = mmr(hits, &vectors, 0.5);
        assert_eq!(ids(&diverse), ["a1", "b1", "a2"]);
        assert_eq!(moved, 2, "b1 and a2 swapped places");
        let scores: Vec<f32> = diverse.iter().map(|h| h.score).collect();
        assert_eq!(scores, [0.90, 0.89, 0.80], "the same cosines, best first down the new order");
    }

    #[test]
    fn the_value_is_the_weighted_difference_computed_by_hand() {
        // After x (taken first: best score), y: 0.5·0.7 − 0.5·0.6 = 0.05; z: 0.5·0.5 − 0.5·0 = 0.25.
        let hits = vec![hit("x", 0.8), hit("y", 0.7), hit("z", 0.5)];
        let vectors = [Some(vec![1.0, 0.0]), Some(vec![0.6, 0.8]), Some(vec![0.0, 1.0])];
        let (out, _) = mmr(hits.clone(), &vectors, 0.5);
        assert_eq!(ids(&out), ["x", "z", "y"]);
        // With λ 0.2: y 0.8·0.7 − 0.2·0.6 = 0.44 beats z 0.8·0.5 − 0 = 0.40.
        let (out, moved) = mmr(hits, &vectors, 0.2);
        assert_eq!((ids(&out), moved), (vec!["x", "y", "z"], 0));
    }

    #[test]
    fn candidates_without_vectors_count_as_novel_and_nothing_is_lost() {
        let hits = vec![hit("p", 0.9), hit("q", 0.8), hit("r", 0.7)];
        let (out, _) = mmr(hits, &[Some(vec![1.0]), None], 0.9);
        assert_eq!(out.len(), 3);
        let (empty, moved) = mmr(Vec::new(), &[], 0.5);
        assert!(empty.is_empty() && moved == 0);
    }
}
