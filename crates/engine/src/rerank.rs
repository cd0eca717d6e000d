//! Stage 3, after the search: the candidates re-ordered by a reranker (`rerank remote`), a
//! cross-encoder behind a rerank endpoint scoring each against the question. A reranker that
//! fails, is late or leaves a candidate unscored never fails the turn: the search's order
//! stays, and the trace says why (`reranked.fallback`).

use crate::retrieve::ladder;
use crate::turn::Turn;
use crate::Engine;
use ragctx_core::{Error, Hit, Intent, Rerank, Reranked, Result};
use std::time::Instant;

/// On with `rerank remote`, never for a reshow (it shows again what it showed).
pub fn runs(t: &Turn<'_>) -> bool {
    t.settings.rerank == Rerank::Remote && t.intent != Intent::Reshow
}

/// The first `top_n` candidates by score, re-ordered by the reranker's scores (the rest after
/// them in their order); their cosines are handed out again best first down the new order
/// ([`ladder`]), so the stages after it keep it and the floor stays on the cosine scale.
pub fn stage(e: &Engine, t: &mut Turn<'_>) -> Result<()> {
    let Some(reranker) = &e.reranker else {
        return Err(Error::InvalidInput(
            "rerank remote needs a rerank endpoint: set rerank_url (RAGCTX_RERANK_URL; docs/turns.md)".into(),
        ));
    };
    let mut hits = std::mem::take(&mut t.hits);
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.chunk.id.cmp(&b.chunk.id)));
    let n = hits.len().min(e.rerank_top_n);
    let texts: Vec<String> = hits[..n].iter().map(passage).collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    // The question, not the mixed query: a cross-encoder reads words.
    let query = t.query().text.clone();
    let started = Instant::now();
    let answer = if n == 0 { Ok(Vec::new()) } else { reranker.rerank(&query, &texts) };
    let ms = (started.elapsed().as_secs_f64() * 1e6).round() / 1e3;
    let mut record = Reranked { model: reranker.name().to_owned(), candidates: n, moved: 0, fallback: None, ms };
    match answer.and_then(|scores| order(n, &scores)) {
        Ok(order) => {
            record.moved = order.iter().enumerate().filter(|(at, &i)| *at != i).count();
            let rest = hits.split_off(n);
            let mut slots: Vec<Option<Hit>> = hits.into_iter().map(Some).collect();
            let mut out: Vec<Hit> = order.into_iter().map(|i| slots[i].take().expect("a permutation")).collect();
            out.extend(rest);
            hits = ladder(out);
        }
        Err(e) => record.fallback = Some(e.report().to_string()),
    }
    t.stats.reranked = Some(record);
    t.hits = hits;
    Ok(())
}

/// What a cross-encoder reads of a chunk: its title (when it has one) and its text.
fn passage(h: &Hit) -> String {
    match h.chunk.title.trim() {
        "" => h.chunk.text.clone(),
        title => format!("{title}\n{}", h.chunk.text),
    }
}

/// The indices `0..n` by the reranker's scores, best first (ties keep the search's order);
/// an answer that does not score each of the `n` exactly once, or scores one NaN, is refused.
fn order(n: usize, scores: &[f32]) -> Result<Vec<usize>> {
    if scores.len() != n {
        return Err(Error::Model(format!("the reranker scored {} of the {n} candidates sent", scores.len())));
    }
    if scores.iter().any(|s| s.is_nan()) {
        return Err(Error::Model("the reranker answered a score that is not a number".into()));
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_order_follows_the_scores_and_refuses_what_does_not_score_every_candidate() {
        assert_eq!(order(3, &[0.1, 0.9, 0.5]).unwrap(), [1, 2, 0]);
        assert_eq!(order(3, &[0.5, 0.5, 0.9]).unwrap(), [2, 0, 1], "ties keep the search's order");
        assert!(order(3, &[0.5, 0.5]).unwrap_err().to_string().contains("scored 2 of the 3"));
        assert!(order(1, &[f32::NAN]).is_err());
    }
}
