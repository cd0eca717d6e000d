//! `compress learned` (DESIGN §11): each block keeps the sentences a scorer learned on MTRAG's
//! development split judges to carry the turn, with the sentence before and after each, its
//! cuts marked `…`; the tokens freed go to further sources under the same budget. The scorer
//! reads what the sentence index (kept beside the chunks at ingest) and the turn already hold —
//! no encoder runs: each sentence's cosine to the question and to the search vector, the best
//! of its neighbours', its cosine to its chunk, its share of the question's terms weighted by
//! rarity, where it stands in its block, its length, the block's rank and score. A logistic
//! model over them ([`Scorer`]) is fitted by `ragctx eval fit-sentences`, which writes
//! `crates/engine/sentence-scorer.json` with the command, the data and its cross-validated
//! figures.
//!
//! It never withholds on a guess: a block without a sentence index (a store ingested before
//! it, a backend that keeps none) or whose text its sentences do not cover (adjacent chunks
//! merged over an overlap) is kept whole and counted in the trace; a block keeps at least its
//! best sentence.

use crate::dedupe::Fragment;
use crate::Engine;
use ragctx_core::text::terms;
use ragctx_core::{ChunkId, Error, Result, Sentence, Sentences};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

/// The features the scorer reads, in order (their names in the weights file).
pub const FEATURES: [&str; N] = [
    "cos_question",
    "cos_query",
    "cos_question_gap",
    "cos_neighbour",
    "cos_chunk",
    "lexical",
    "lexical_gap",
    "position",
    "first",
    "length",
    "rank",
    "block_score",
    "sentences",
];

/// How many features.
pub const N: usize = 13;

/// A logistic model over [`FEATURES`] (standardised by `mean` and `scale`), and the
/// probability at which a sentence is kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scorer {
    /// The names of the features, as [`FEATURES`].
    pub features: Vec<String>,
    /// Subtracted from each feature before its weight.
    pub mean: Vec<f32>,
    /// Each feature divided by it after the mean.
    pub scale: Vec<f32>,
    /// One weight per feature.
    pub weights: Vec<f32>,
    /// The intercept.
    pub bias: f32,
    /// A sentence whose probability reaches it carries the turn.
    pub threshold: f32,
    /// Sentences kept on each side of one that carries the turn (the one it leans on, the one
    /// that goes on with it).
    pub neighbours: usize,
}

/// The weights file, compiled in.
const SHIPPED: &str = include_str!("../sentence-scorer.json");

impl Scorer {
    /// The scorer `ragctx eval fit-sentences` fitted, shipped in `sentence-scorer.json`.
    pub fn shipped() -> Arc<Scorer> {
        static S: OnceLock<Arc<Scorer>> = OnceLock::new();
        S.get_or_init(|| Arc::new(Scorer::parse(SHIPPED).expect("sentence-scorer.json is checked by a unit test")))
            .clone()
    }

    /// Reads the `scorer` of a weights file (the format `ragctx eval fit-sentences` writes).
    pub fn parse(text: &str) -> Result<Scorer> {
        #[derive(Deserialize)]
        struct File {
            scorer: Scorer,
        }
        let f: File = serde_json::from_str(text).map_err(|e| Error::InvalidInput(format!("sentence scorer: {e}")))?;
        let s = f.scorer;
        let names: Vec<&str> = s.features.iter().map(String::as_str).collect();
        if names != FEATURES || [&s.mean, &s.scale, &s.weights].iter().any(|v| v.len() != N) {
            return Err(Error::InvalidInput(format!(
                "sentence scorer: features {names:?} with {} weights; this build reads {FEATURES:?}",
                s.weights.len()
            )));
        }
        let all = s.mean.iter().chain(&s.scale).chain(&s.weights).chain([&s.bias, &s.threshold]);
        if !all.into_iter().all(|x| x.is_finite()) || s.scale.iter().any(|&x| x <= 0.0) {
            return Err(Error::InvalidInput("sentence scorer: a weight is not finite or a scale not positive".into()));
        }
        Ok(s)
    }

    /// The probability that a sentence with features `x` carries the turn.
    pub fn score(&self, x: &[f32; N]) -> f32 {
        let z: f32 = (0..N).map(|i| (x[i] - self.mean[i]) / self.scale[i] * self.weights[i]).sum::<f32>() + self.bias;
        1.0 / (1.0 + (-z).exp())
    }
}

/// One judged sentence, as [`Engine::sentence_log`] records it (for fitting the scorer).
#[derive(Clone, Debug)]
pub struct Row {
    /// The chunk it is a sentence of.
    pub chunk: ChunkId,
    /// Its text.
    pub text: String,
    /// Its features.
    pub features: [f32; N],
}

/// Where training collects the sentences turns judged.
pub type SentenceLog = Arc<Mutex<Vec<Row>>>;

/// What cutting did in one turn (before the context is filled).
#[derive(Debug, Default)]
pub struct Outcome {
    /// Sentences judged and kept.
    pub kept: usize,
    /// Sentences judged and left out.
    pub cut: usize,
    /// Blocks kept whole for want of a sentence index covering their text.
    pub unjudged: usize,
    /// The blocks that were cut, each by its first chunk (their tokens are counted once
    /// the context is filled, for those that reached it: `compress::record`).
    pub cut_blocks: Vec<ChunkId>,
}

/// A fragment's sentences found in its text: each one's span in the fragment's text, its
/// indexed sentence and the chunk (of the fragment's) it belongs to.
struct Located<'a> {
    spans: Vec<(usize, usize)>,
    sentences: Vec<&'a Sentence>,
    chunk: Vec<usize>,
}

/// A fragment's located sentences and its chunks' vectors.
type Judged<'a> = (Located<'a>, Vec<Option<&'a [f32]>>);

/// The sentences of `f`'s chunks in `f.text`, in order; `None` when a chunk has no index
/// that fits its text, or when text is left over that no sentence covers (nothing to judge
/// it by).
fn locate<'a>(f: &Fragment, index: &[Option<&'a Sentences>]) -> Option<Located<'a>> {
    let mut out = Located { spans: Vec::new(), sentences: Vec::new(), chunk: Vec::new() };
    let mut cursor = 0;
    for (c, (chunk, s)) in f.chunks.iter().zip(index).enumerate() {
        let s = (*s).filter(|s| s.fits(&chunk.text))?;
        for (i, sentence) in s.sentences.iter().enumerate() {
            let text = s.text(&chunk.text, i);
            match f.text[cursor..].find(text) {
                Some(k) => {
                    out.spans.push((cursor + k, cursor + k + text.len()));
                    out.sentences.push(sentence);
                    out.chunk.push(c);
                    cursor += k + text.len();
                }
                // Already in the text before (merged chunks' overlap): covered.
                None if f.text[..cursor].contains(text) => {}
                None => return None,
            }
        }
    }
    // Every character outside the sentences is white space.
    let mut last = 0;
    for &(a, b) in &out.spans {
        if !f.text[last..a].trim().is_empty() {
            return None;
        }
        last = b;
    }
    (f.text[last..].trim().is_empty() && !out.spans.is_empty()).then_some(out)
}

/// The turn's inputs to the features: the question's and the search's vectors, the wanted
/// terms and their weights.
pub struct Asked<'a> {
    /// The embedding of the text searched with, alone.
    pub question: &'a [f32],
    /// The vector searched with (earlier questions mixed in).
    pub query: &'a [f32],
    /// The question and the search text.
    pub texts: [&'a str; 2],
}

/// Cuts each fragment to the sentences `scorer` judges to carry the turn (reading the
/// sentence index and the chunks' vectors from `e`'s store); rows go to `log` where given.
pub fn cut(
    e: &Engine,
    scorer: &Scorer,
    fragments: &mut [Fragment],
    asked: &Asked<'_>,
    log: Option<&SentenceLog>,
) -> Result<Outcome> {
    let ids: Vec<ChunkId> = fragments.iter().flat_map(|f| f.chunks.iter().map(|c| c.id.clone())).collect();
    let index = e.vectors.sentences(&ids)?;
    let chunk_vectors = e.vectors.vectors(&ids)?;
    let mut at = 0;
    let mut located: Vec<Option<Judged<'_>>> = Vec::with_capacity(fragments.len());
    for f in fragments.iter() {
        let n = f.chunks.len();
        let own: Vec<Option<&Sentences>> = index[at..at + n].iter().map(Option::as_ref).collect();
        let vectors: Vec<Option<&[f32]>> = chunk_vectors[at..at + n].iter().map(|v| v.as_deref()).collect();
        located.push(locate(f, &own).map(|l| (l, vectors)));
        at += n;
    }
    // The wanted terms, each weighted by how few of the turn's sentences hold it (ordered
    // sets: the sums come out the same in every process, so the scores do).
    let wanted: BTreeSet<String> = asked.texts.iter().flat_map(|q| terms(q)).collect();
    let sentence_terms: Vec<Vec<BTreeSet<String>>> = fragments
        .iter()
        .zip(&located)
        .map(|(f, l)| {
            l.as_ref().map_or_else(Vec::new, |(l, _)| {
                l.spans
                    .iter()
                    .map(|&(a, b)| terms(&f.text[a..b]).into_iter().filter(|t| wanted.contains(t)).collect())
                    .collect()
            })
        })
        .collect();
    let total = sentence_terms.iter().map(Vec::len).sum::<usize>().max(1) as f32;
    let mut holding: HashMap<&str, usize> = HashMap::new();
    for t in sentence_terms.iter().flatten().flatten() {
        *holding.entry(t.as_str()).or_insert(0) += 1;
    }
    let weight = |t: &str| holding.get(t).map_or(0.0, |&n| (total / n as f32).ln_1p());
    let wanted_weight: f32 = wanted.iter().map(|t| weight(t)).sum::<f32>().max(1e-6);
    let mut outcome = Outcome::default();
    for (rank, ((f, l), held)) in fragments.iter_mut().zip(located).zip(&sentence_terms).enumerate() {
        let Some((l, vectors)) = l else {
            outcome.unjudged += 1;
            continue;
        };
        let n = l.spans.len();
        let c_question: Vec<f32> = l.sentences.iter().map(|s| s.cosine(asked.question)).collect();
        let c_query: Vec<f32> = l.sentences.iter().map(|s| s.cosine(asked.query)).collect();
        let lexical: Vec<f32> =
            held.iter().map(|ts| ts.iter().map(|t| weight(t)).sum::<f32>() / wanted_weight).collect();
        let best_cos = c_question.iter().copied().fold(f32::MIN, f32::max);
        let best_lex = lexical.iter().copied().fold(0.0, f32::max);
        let scores: Vec<f32> = (0..n)
            .map(|k| {
                let neighbour = [k.checked_sub(1), Some(k + 1).filter(|&j| j < n)]
                    .into_iter()
                    .flatten()
                    .map(|j| c_question[j])
                    .fold(0.0, f32::max);
                let (a, b) = l.spans[k];
                let x: [f32; N] = [
                    c_question[k],
                    c_query[k],
                    c_question[k] - best_cos,
                    neighbour,
                    vectors[l.chunk[k]].map_or(0.0, |v| l.sentences[k].cosine(v)),
                    lexical[k],
                    lexical[k] - best_lex,
                    k as f32 / (n.max(2) - 1) as f32,
                    (k == 0) as u8 as f32,
                    (1.0 + f.text[a..b].split_whitespace().count() as f32).ln(),
                    (1.0 + rank as f32).ln(),
                    f.score,
                    (n as f32).ln(),
                ];
                if let Some(log) = log {
                    let chunk = f.chunks[l.chunk[k]].id.clone();
                    log.lock().expect("sentence log").push(Row { chunk, text: f.text[a..b].to_owned(), features: x });
                }
                scorer.score(&x)
            })
            .collect();
        let keep = kept(&scores, scorer.threshold, scorer.neighbours);
        let kept_n = keep.iter().filter(|&&k| k).count();
        outcome.kept += kept_n;
        outcome.cut += n - kept_n;
        if kept_n == n {
            continue;
        }
        let pages: Vec<Option<u32>> = l.sentences.iter().map(|s| s.page).collect();
        let whole_text = std::mem::take(&mut f.text);
        f.text = cut_text(&whole_text, &l.spans, &keep, &pages);
        // The block's header and citation name the pages its kept sentences stand on (every
        // chunk of a merged block says the same: the header reads the first's).
        let on: Vec<u32> = (0..n).filter(|&k| keep[k]).filter_map(|k| pages[k]).collect();
        if let (Some(&first), Some(&last)) = (on.iter().min(), on.iter().max()) {
            for chunk in f.chunks.iter_mut() {
                for (key, page) in [(ragctx_core::PAGE_START_KEY, first), (ragctx_core::PAGE_END_KEY, last)] {
                    let _ = chunk.metadata.insert(key, ragctx_core::MetaValue::Number(f64::from(page)));
                }
            }
        }
        if let Some(first) = f.chunks.first() {
            outcome.cut_blocks.push(first.id.clone());
            // A merged block's chunks overlap, so their ingest counts do not add up to its
            // text: its cut is counted here (the others' once the context is filled).
            if f.chunks.len() > 1 {
                f.freed = e.counter.count(&whole_text).saturating_sub(e.counter.count(&f.text));
            }
        }
    }
    Ok(outcome)
}

/// Which sentences stay: those at or above `threshold` (at least the best one) and
/// `neighbours` on each side of each.
pub fn kept(scores: &[f32], threshold: f32, neighbours: usize) -> Vec<bool> {
    let best = scores.iter().copied().enumerate().fold((0, f32::MIN), |b, (i, s)| if s > b.1 { (i, s) } else { b }).0;
    let carries: Vec<bool> = scores.iter().enumerate().map(|(i, &s)| s >= threshold || i == best).collect();
    widen(&carries, neighbours)
}

/// The mark of left-out text.
pub const CUT: &str = "…";

/// `carries` with `neighbours` sentences on each side of each one that carries kept too.
pub fn widen(carries: &[bool], neighbours: usize) -> Vec<bool> {
    let mut keep = carries.to_vec();
    for (i, _) in carries.iter().enumerate().filter(|(_, &c)| c) {
        keep[i.saturating_sub(neighbours)..=(i + neighbours).min(carries.len() - 1)].fill(true);
    }
    keep
}

/// `text` with only the kept sentences (`spans`, and what lies between two kept neighbours),
/// [`CUT`] where sentences were left out; where the kept sentences stand on more than one page
/// (`pages`, one per span where known), each page's first is marked `(p. N)`.
pub fn cut_text(text: &str, spans: &[(usize, usize)], keep: &[bool], pages: &[Option<u32>]) -> String {
    let kept_pages: std::collections::BTreeSet<u32> =
        (0..spans.len()).filter(|&i| keep[i]).filter_map(|i| pages.get(i).copied().flatten()).collect();
    let mut out = String::new();
    let mut last: Option<usize> = None;
    let mut page: Option<u32> = None;
    for (i, &(a, b)) in spans.iter().enumerate().filter(|(i, _)| keep[*i]) {
        match last {
            None if i > 0 => out.push_str(&format!("{CUT}\n")),
            Some(l) if i > l + 1 => out.push_str(&format!("\n{CUT}\n")),
            Some(l) => out.push_str(&text[spans[l].1..a]),
            None => {}
        }
        let here = pages.get(i).copied().flatten();
        if kept_pages.len() > 1 && here.is_some() && here != page {
            out.push_str(&format!("(p. {}) ", here.unwrap_or_default()));
            page = here;
        }
        out.push_str(&text[a..b]);
        last = Some(i);
    }
    if last.is_some_and(|l| l + 1 < spans.len()) {
        out.push_str(&format!("\n{CUT}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_scorer_reads() {
        let s = Scorer::shipped();
        assert_eq!(s.features, FEATURES);
        assert!((0.0..1.0).contains(&s.threshold));
    }

    #[test]
    fn kept_takes_the_best_and_the_neighbours() {
        assert_eq!(kept(&[0.1, 0.2, 0.9, 0.1, 0.1], 0.5, 1), [false, true, true, true, false]);
        assert_eq!(kept(&[0.1, 0.3, 0.2], 0.5, 0), [false, true, false], "at least the best");
        assert_eq!(kept(&[0.6, 0.1, 0.1, 0.1, 0.7], 0.5, 1), [true, true, false, true, true]);
    }

    #[test]
    fn cut_text_marks_what_was_left_out_and_keeps_the_text_between_kept_neighbours() {
        let text = "One. Two.\nThree. Four. Five.";
        let spans = ragctx_core::text::sentence_spans(text);
        assert_eq!(cut_text(text, &spans, &[false, true, true, false, false], &[]), "…\nTwo.\nThree.\n…");
        assert_eq!(cut_text(text, &spans, &[true, false, false, false, true], &[]), "One.\n…\nFive.");
        // Kept sentences on two pages: each page's first is marked; on one page, none is.
        let pages = [Some(4), Some(4), Some(5), Some(5), Some(5)];
        assert_eq!(
            cut_text(text, &spans, &[true, false, true, true, false], &pages),
            "(p. 4) One.\n…\n(p. 5) Three. Four.\n…"
        );
        assert_eq!(cut_text(text, &spans, &[false, false, true, true, false], &pages), "…\nThree. Four.\n…");
    }

    #[test]
    fn a_fragment_is_located_only_when_its_sentences_cover_its_text() {
        let chunk = ragctx_core::Chunk::new("d#0", "d", "D", "Alpha one. Beta two.");
        let mut f = Fragment::of(ragctx_core::Hit { chunk: chunk.clone(), score: 0.5 });
        let spans = ragctx_core::text::sentence_spans(&chunk.text);
        let index = Sentences::new(&spans, &[vec![1.0, 0.0], vec![0.0, 1.0]], &[]);
        let l = locate(&f, &[Some(&index)]).expect("covered");
        assert_eq!(l.spans, spans);
        assert!(locate(&f, &[None]).is_none(), "no index: whole");
        f.text.push_str(" Gamma added.");
        assert!(locate(&f, &[Some(&index)]).is_none(), "text no sentence covers: whole");
    }
}
