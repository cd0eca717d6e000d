//! The compression stage (`compress sentences`, after dedupe, before the context is filled):
//! each block keeps the sentences that carry the turn — those sharing the question's or the
//! search query's terms, weighted by how rare a term is among the turn's sentences — with the
//! sentence before and after each (the one it leans on, the one going on). What was left out is
//! marked with `…`; a block keeps at least one sentence, and one that shares no term with the
//! turn is kept whole (nothing to judge it by: never withhold evidence on a guess). The tokens
//! freed go to the next sources by rank, under the same budget (the context is filled after).
//! A reshow and an agent's `open` show blocks whole. The seed: "保留能支撑结论的片段、标题和稳定来源标识即可".

use crate::dedupe::Fragment;
use crate::sentences::{cut_text, widen};
use crate::turn::Turn;
use crate::Engine;
use ragctx_core::text::{sentence_spans, terms};
use ragctx_core::{ChunkId, Compress, Compressed, Intent, Result, TokenCounter};
use std::collections::{HashMap, HashSet};

/// A sentence scoring at least this share of its block's best is kept (measured on MTRAG:
/// bench/README.md, "Compression").
pub const KEEP_SHARE: f64 = 0.5;

/// On for a turn with `compress sentences` or `learned` that is not a reshow (nor an `open`).
pub fn runs(t: &Turn<'_>) -> bool {
    t.settings.compress != Compress::Off && t.intent != Intent::Reshow && t.reshow.is_none()
}

/// The stage: cuts the turn's fragments to their sentences, by the learned scorer
/// ([`crate::sentences`]) or the lexical rule.
pub fn stage(e: &Engine, t: &mut Turn<'_>) -> Result<()> {
    let text = t.query().text.clone();
    if t.settings.compress == Compress::Learned {
        let q = t.query.as_ref().expect("embed runs before compress");
        let asked = crate::sentences::Asked { question: &q.own_vector, query: &q.vector, texts: [t.question, &text] };
        let out =
            crate::sentences::cut(e, &e.sentence_scorer, &mut t.deduped.fragments, &asked, e.sentence_log.as_ref())?;
        t.stats.compressed = Some(Compressed {
            cut: out.cut_blocks,
            kept_sentences: out.kept,
            cut_sentences: out.cut,
            whole_unjudged: out.unjudged,
            ..Compressed::default()
        });
        return Ok(());
    }
    compress(&mut t.deduped.fragments, &[t.question, &text], e.counter.as_ref());
    Ok(())
}

/// Its trace record, once the prompt is built: the cut blocks that made it into the context
/// (each by its first chunk) and the tokens their cuts freed.
pub fn record(e: &Engine, t: &mut Turn<'_>) {
    let Some(built) = t.built.as_ref() else { return };
    if t.settings.compress == Compress::Learned {
        // Counted here, for the blocks that reached the context only: whole, their chunks'
        // tokens (counted at ingest); cut, the block's tokens without its heading.
        let judged = t.stats.compressed.take().unwrap_or_default();
        let cut: HashSet<&ChunkId> = judged.cut.iter().collect();
        let mut reached = Vec::new();
        let mut freed = 0;
        for b in built.context.blocks.iter().filter(|b| b.chunk_ids.first().is_some_and(|id| cut.contains(id))) {
            let Some(f) = t.deduped.fragments.iter().find(|f| f.chunks.first().map(|c| &c.id) == b.chunk_ids.first())
            else {
                continue;
            };
            freed += match f.chunks.as_slice() {
                // Counted by the stage (merged chunks overlap: their counts do not add up).
                [_, _, ..] => f.freed,
                chunks => {
                    let whole: usize = chunks
                        .iter()
                        .map(|c| match c.tokens {
                            Some(n) if e.counter.name() == ragctx_core::CHUNK_TOKENIZER => n as usize,
                            _ => e.counter.count(&c.text),
                        })
                        .sum();
                    let heading = e.counter.count(&format!("{}\n", b.heading()));
                    whole.saturating_sub(b.tokens.saturating_sub(heading))
                }
            };
            reached.push(b.chunk_ids[0].clone());
        }
        t.stats.compressed = Some(Compressed { cut: reached, freed_tokens: freed, ..judged });
        return;
    }
    let freed: HashMap<&ChunkId, usize> = t
        .deduped
        .fragments
        .iter()
        .filter(|f| f.freed > 0)
        .filter_map(|f| Some((&f.chunks.first()?.id, f.freed)))
        .collect();
    let cut: Vec<(ChunkId, usize)> = built
        .context
        .blocks
        .iter()
        .filter_map(|b| b.chunk_ids.first().and_then(|id| freed.get(id).map(|&n| (id.clone(), n))))
        .collect();
    let judged = t.stats.compressed.take().unwrap_or_default();
    t.stats.compressed = Some(Compressed {
        freed_tokens: cut.iter().map(|c| c.1).sum(),
        cut: cut.into_iter().map(|c| c.0).collect(),
        ..judged
    });
}

/// Cuts each fragment to the sentences that carry `query` (the question and the search
/// text), recording in each cut one the tokens its cut freed.
pub fn compress(fragments: &mut [Fragment], query: &[&str], counter: &dyn TokenCounter) {
    let wanted: HashSet<String> = query.iter().flat_map(|q| terms(q)).collect();
    if wanted.is_empty() {
        return;
    }
    // Per fragment, its sentences and their terms; how many sentences of the turn hold each
    // wanted term (a term in every sentence tells them apart the least).
    let spans: Vec<Vec<(usize, usize)>> = fragments.iter().map(|f| sentence_spans(&f.text)).collect();
    let held: Vec<Vec<HashSet<String>>> = fragments
        .iter()
        .zip(&spans)
        .map(|(f, spans)| spans.iter().map(|&(a, b)| terms(&f.text[a..b])).collect())
        .collect();
    let total = held.iter().map(Vec::len).sum::<usize>().max(1) as f64;
    let mut holding: HashMap<&str, usize> = HashMap::new();
    for ts in held.iter().flatten() {
        for t in ts.iter().filter(|t| wanted.contains(*t)) {
            *holding.entry(t.as_str()).or_insert(0) += 1;
        }
    }
    let weight = |t: &str| holding.get(t).map_or(0.0, |&n| (total / n as f64).ln_1p());
    let cut: Vec<Option<String>> = fragments
        .iter()
        .zip(spans.iter().zip(&held))
        .map(|(f, (spans, held))| {
            let scores: Vec<f64> = held.iter().map(|ts| ts.iter().map(|t| weight(t)).sum()).collect();
            kept_text(&f.text, spans, &scores)
        })
        .collect();
    for (f, text) in fragments.iter_mut().zip(cut) {
        let Some(text) = text else { continue };
        let whole = match f.chunks.as_slice() {
            [c] if c.text == f.text && counter.name() == ragctx_core::CHUNK_TOKENIZER => {
                c.tokens.map_or_else(|| counter.count(&f.text), |n| n as usize)
            }
            _ => counter.count(&f.text),
        };
        f.freed = whole.saturating_sub(counter.count(&text));
        f.text = text;
    }
}

/// The block's text cut to its kept sentences, `…` where sentences were left out; `None`
/// when it stays whole (every sentence kept, or none shares a term with the turn).
fn kept_text(text: &str, spans: &[(usize, usize)], scores: &[f64]) -> Option<String> {
    let best = scores.iter().copied().fold(0.0, f64::max);
    if best <= 0.0 || spans.len() < 2 {
        return None;
    }
    let carries: Vec<bool> = scores.iter().map(|&s| s > 0.0 && s >= KEEP_SHARE * best).collect();
    // A sentence that carries the turn keeps its neighbours (the one it leans on, the one
    // that goes on with it): kept alone, answers lost more support than the freed budget
    // brought back (bench/README.md, "Compression").
    let keep = widen(&carries, 1);
    (!keep.iter().all(|&k| k)).then(|| cut_text(text, spans, &keep, &[]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ragctx_core::Chunk;

    struct Words;
    impl TokenCounter for Words {
        fn count(&self, text: &str) -> usize {
            text.split_whitespace().count()
        }
        fn name(&self) -> &str {
            "words"
        }
    }

    fn fragment(text: &str) -> Fragment {
        let chunk = Chunk::new("d#0", "d", "Guinea pigs", text);
        Fragment::of(ragctx_core::Hit { chunk, score: 0.9 })
    }

    /// By hand: of seven sentences, the third names the question's "eat" and the fifth its
    /// "hay" (equal weights); each keeps its neighbours, so the second to the sixth stay and
    /// the first and the last are left out, each cut marked. Freed: the words left out, less
    /// the marks.
    #[test]
    fn keeps_the_sentences_that_carry_the_question_and_marks_the_cuts() {
        let text = "The species comes from the Andes. Herds roam the grassland. In the wild they eat grass. \
                    Pet owners buy pellets. They also need hay every day. Cages need cleaning. Many live for eight years.";
        let mut f = [fragment(text), fragment("Nothing here shares a word. Not one.")];
        compress(&mut f, &["What do guinea pigs eat?", "guinea pigs eat hay"], &Words);
        assert_eq!(
            f[0].text,
            "…\nHerds roam the grassland. In the wild they eat grass. Pet owners buy pellets. They also need hay \
             every day. Cages need cleaning.\n…"
        );
        assert_eq!(f[0].freed, Words.count(text) - Words.count(&f[0].text));
        assert_eq!(f[1].text, "Nothing here shares a word. Not one.", "no shared term: kept whole");
        assert_eq!(f[1].freed, 0);
    }

    #[test]
    fn a_block_keeps_at_least_its_best_sentence_and_a_single_sentence_stays_whole() {
        let mut f =
            [fragment("Hay matters most. Water too. Light also helps a little. Shade as well."), fragment("Only hay.")];
        compress(&mut f, &["hay"], &Words);
        assert_eq!(f[0].text, "Hay matters most. Water too.\n…");
        assert_eq!(f[1].text, "Only hay.");
    }
}
