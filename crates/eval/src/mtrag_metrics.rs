//! The metrics of `eval mtrag` (DESIGN §6) per turn, and their means per strategy, domain
//! and turn index.

use serde::Serialize;
use std::collections::{BTreeMap, HashSet};

/// Gold chunks of a turn whose text the model reads (`evidence_recall`'s numerator, DESIGN
/// §6): those in this turn's context `context`, and, when the client keeps earlier contexts
/// (`client` memory, `history`), those in the kept window `kept`.
pub fn readable_gold(
    gold: &HashSet<&String>,
    context: &HashSet<String>,
    kept: &HashSet<&String>,
    client_keeps: bool,
) -> usize {
    gold.iter().filter(|x| context.contains(x.as_str()) || (client_keeps && kept.contains(*x))).count()
}

/// The terms `answer_support` compares: those the lexical index makes of a text (lower-cased
/// runs of letters and digits, Lucene's English stop words out, Snowball English stems; CJK
/// as character bigrams), each once.
pub fn content_terms(analyzer: &mut ragctx_lexical::Analyzer, texts: &[&str]) -> HashSet<String> {
    let mut out = Vec::new();
    for t in texts {
        analyzer.terms(t, &mut out);
    }
    out.into_iter().collect()
}

/// The cosine at which an evidence sentence carries an answer sentence's meaning
/// (`semantic_support`). Calibrated on MTRAG's development split: the median, over the
/// reference answers' sentences, of the best cosine a sentence of the turn's own gold passages
/// reaches — 0.879 on all 78 conversations (all-MiniLM-L6-v2 int8, 2026-12-07): an evidence
/// sentence carries an answer sentence when it is as close to it as the gold passage
/// typically is. Each `eval mtrag` prints the figure on the data it replays.
pub const SEMANTIC_THRESHOLD: f32 = 0.88;

/// A gold passage's sentence carries the turn (the label `eval fit-sentences` learns) when it
/// holds this many of the reference answer's content terms (or all of a shorter answer's).
pub const MIN_SHARED: usize = 2;

/// The sentences of a gold passage that hold the reference answer: at least
/// [`MIN_SHARED`] of its content terms (all of a shorter answer's) —
/// the label the sentence scorer learns.
pub fn answer_bearing<'a>(
    analyzer: &mut ragctx_lexical::Analyzer,
    text: &'a str,
    answer: &HashSet<String>,
) -> Vec<&'a str> {
    ragctx_core::text::sentences(text).into_iter().filter(|s| bears_answer(analyzer, s, answer)).collect()
}

/// Whether `sentence` holds the answer: at least [`MIN_SHARED`] of its
/// content terms (all of a shorter answer's; never for an answer without terms).
pub fn bears_answer(analyzer: &mut ragctx_lexical::Analyzer, sentence: &str, answer: &HashSet<String>) -> bool {
    let need = MIN_SHARED.min(answer.len());
    need > 0 && content_terms(analyzer, &[sentence]).intersection(answer).count() >= need
}

/// The share of `answer` sentences (their vectors) that some `evidence` vector reaches at
/// `threshold` by cosine (unit vectors); `None` for an answer without sentences.
pub fn semantic_support(answer: &[Vec<f32>], evidence: &[Vec<f32>], threshold: f32) -> Option<f64> {
    (!answer.is_empty()).then(|| {
        let carried = answer
            .iter()
            .filter(|a| evidence.iter().any(|e| e.iter().zip(a.iter()).map(|(x, y)| x * y).sum::<f32>() >= threshold))
            .count();
        carried as f64 / answer.len() as f64
    })
}

/// The best cosine each `answer` vector reaches among `evidence` (calibration).
pub fn best_cosines(answer: &[Vec<f32>], evidence: &[Vec<f32>]) -> Vec<f32> {
    answer
        .iter()
        .map(|a| evidence.iter().map(|e| e.iter().zip(a).map(|(x, y)| x * y).sum::<f32>()).fold(f32::MIN, f32::max))
        .filter(|c| c.is_finite() && *c > f32::MIN)
        .collect()
}

/// Share of the reference answer's terms found in `evidence` (the terms of the blocks the
/// model reads); `None` when the answer has no term.
pub fn answer_support(answer: &HashSet<String>, evidence: &HashSet<String>) -> Option<f64> {
    (!answer.is_empty()).then(|| answer.iter().filter(|t| evidence.contains(*t)).count() as f64 / answer.len() as f64)
}

/// Sums of the per-turn metrics, for means.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Means {
    /// Gold whose text the model reads this turn (DESIGN §6): the context, plus for
    /// `client` and `history` the earlier contexts the client keeps (within the window).
    pub evidence_recall: f64,
    /// Share of the turn's gold chunks in this turn's context: |G_t ∩ C_t| / |G_t|.
    pub fresh_recall: f64,
    /// Share of the gold chunks' documents with a block in this turn's context (0 when no gold
    /// chunk is in the corpus).
    pub doc_recall: f64,
    /// Share of the gold chunks in this context or shown in any earlier turn of the session,
    /// |G_t ∩ (C_t ∪ S_<t)| / |G_t|: an upper bound, not what a stateless model reads.
    pub available_recall: f64,
    /// Share of this context's chunks already shown in an earlier turn of the session:
    /// |C_t ∩ S_<t| / |C_t|.
    pub repeat_rate: f64,
    /// `repeat_rate` on documents: share of this context's documents shown in an earlier turn.
    pub doc_repeat_rate: f64,
    /// Tokens of this turn's evidence: blocks and pointers, headers included.
    pub context_tokens: f64,
    /// Every token the model reads this turn: the turn's own prompt (`turn_tokens`), plus for
    /// `client` and `history` the earlier contexts and exchanges the client keeps in the window.
    pub prompt_tokens: f64,
    /// Gold chunks this context shows for the first time in the session, per 1,000
    /// `prompt_tokens`.
    pub new_gold_per_1k_tokens: f64,
    /// Documents left after dedupe.
    pub unique_documents: f64,
    /// Blocks in this turn's context.
    pub context_fragments: f64,
    /// Blocks whose text (case and spacing folded) repeats another block of the same context.
    pub duplicate_text_slots: f64,
    /// Answer markers that named no block of the turn's context.
    pub invalid_citations: f64,
    /// Tokens of blocks whose chunks the model already reads elsewhere in the same prompt
    /// (an earlier block of this turn, or for `client` / `history` a kept earlier context).
    pub duplicate_tokens: f64,
    /// Share of this turn's blocks holding a chunk shown in an earlier turn of the window.
    pub resent_rate: f64,
    /// Tokens this turn's own prompt adds (instructions, conversation, pointers, blocks,
    /// question), without the earlier contexts a client keeps.
    pub turn_tokens: f64,
    /// Blocks carried from the working set (`engine` memory: shown in an earlier turn of the
    /// window).
    pub carried: f64,
    /// Pointers to chunks the caller already holds (`client` memory).
    pub pointers: f64,
    /// Tokens of earlier questions and answers the model reads: the conversation `engine`
    /// puts in the prompt, or the exchanges a client keeps (`client`, `history`).
    pub conversation_tokens: f64,
    /// Chunks left out as near-duplicates of a kept chunk (resemblance below 1).
    pub near_duplicates: f64,
    /// Tokens of the chunks left out as identical or near-identical to a kept one: budget
    /// freed for other evidence.
    pub duplicate_tokens_freed: f64,
    /// Milliseconds the condenser took (`condense` query mode; 0 for turns it was not asked).
    pub condense_ms: f64,
    /// Share of turns whose condensing fell back to the question (error, time-out, no query).
    pub condense_fallback: f64,
    /// Share of turns the condenser rewrote: a rewrite the search used that is not the
    /// question itself.
    pub condensed: f64,
    /// Share of the reference answer's content terms ([`content_terms`]) found in the
    /// evidence the model reads this turn (the blocks counted as `evidence_recall` counts
    /// them): how much of the answer the prompt supports. Averaged over `answered` turns;
    /// `null` in the JSON where none was (a turn index only last turns reach), so no chart
    /// draws a support of 0 that nothing measured.
    #[serde(serialize_with = "finite_or_null")]
    pub answer_support: f64,
    /// The non-lexical support: the share of the reference answer's sentences whose meaning a
    /// sentence of the evidence carries — its cosine to the answer sentence (each embedded
    /// alone by the store's embedder) at least [`SEMANTIC_THRESHOLD`]. Averaged over
    /// `answered` turns, as `answer_support`.
    #[serde(serialize_with = "finite_or_null")]
    pub semantic_support: f64,
    /// Share of the turn's gold passages the model can read with every sentence of theirs
    /// that holds the answer ([`answer_bearing`]): `evidence_recall` counted at the sentence
    /// level, where a cut block that left an answer-bearing sentence out does not count.
    pub answer_sentences_recall: f64,
    /// Gold turns whose reference answer is known (a conversation's last turn has none).
    pub answered: usize,
    /// Gold turns added up (1 for one turn's metrics); not averaged by `mean`.
    pub turns: usize,
}

impl Means {
    /// Every averaged metric, listed once.
    fn metrics(&mut self) -> [&mut f64; 25] {
        [
            &mut self.evidence_recall,
            &mut self.answer_sentences_recall,
            &mut self.fresh_recall,
            &mut self.doc_recall,
            &mut self.available_recall,
            &mut self.repeat_rate,
            &mut self.doc_repeat_rate,
            &mut self.context_tokens,
            &mut self.prompt_tokens,
            &mut self.new_gold_per_1k_tokens,
            &mut self.unique_documents,
            &mut self.context_fragments,
            &mut self.duplicate_text_slots,
            &mut self.invalid_citations,
            &mut self.duplicate_tokens,
            &mut self.resent_rate,
            &mut self.turn_tokens,
            &mut self.carried,
            &mut self.pointers,
            &mut self.conversation_tokens,
            &mut self.near_duplicates,
            &mut self.duplicate_tokens_freed,
            &mut self.condense_ms,
            &mut self.condense_fallback,
            &mut self.condensed,
        ]
    }

    pub(crate) fn add(&mut self, m: &Means) {
        let mut m = m.clone();
        for (sum, x) in self.metrics().into_iter().zip(m.metrics()) {
            *sum += *x;
        }
        self.answer_support += m.answer_support;
        self.semantic_support += m.semantic_support;
        self.answered += m.answered;
        self.turns += 1;
    }

    pub(crate) fn mean(&self) -> Means {
        let mut out = self.clone();
        let n = self.turns.max(1) as f64;
        for x in out.metrics() {
            *x /= n;
        }
        out.answer_support = if self.answered == 0 { f64::NAN } else { self.answer_support / self.answered as f64 };
        out.semantic_support = if self.answered == 0 { f64::NAN } else { self.semantic_support / self.answered as f64 };
        out
    }
}

/// A mean that nothing was averaged into (NaN) is written as `null`.
fn finite_or_null<S: serde::Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    if x.is_finite() {
        s.serialize_f64(*x)
    } else {
        s.serialize_none()
    }
}

#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) overall: Means,
    /// Gold turns at index 5 and later, where the prompt-token target is set.
    pub(crate) late: Means,
    pub(crate) by_domain: BTreeMap<String, Means>,
    pub(crate) by_turn: BTreeMap<usize, Means>,
}

/// What one variant of `eval mtrag` (a strategy with its granularity, query mode and
/// retrieval) scored: its settings and the means of its gold turns.
#[derive(Serialize)]
pub struct StrategyReport {
    /// The exclusion granularity setting the variant ran with (the memory modes: the configured one).
    pub granularity: ragctx_core::Granularity,
    /// Query mode: `last`, `history`, `weighted` or `rewrite`.
    pub query: String,
    /// Memory mode the variant ran with (`client` for the seed's strategies, which carry nothing).
    pub memory: ragctx_core::Memory,
    /// How `evidence_recall` and `prompt_tokens` count: `stateless` (this turn's prompt
    /// only) or `client_keeps` (plus the earlier contexts of the window).
    pub reader: String,
    /// Means over every gold turn.
    pub overall: Means,
    /// Means over gold turns at index ≥ 5.
    pub from_turn_5: Means,
    /// Means over the gold turns of each domain.
    pub by_domain: BTreeMap<String, Means>,
    /// Means over the gold turns at each 1-based user turn index.
    pub by_turn: BTreeMap<usize, Means>,
}

#[cfg(test)]
mod readable_tests {
    use super::{answer_support, content_terms, readable_gold, Means};
    use std::collections::HashSet;

    /// By hand: gold {g1, g2, g3, g4}; this turn's context holds g1 and x; the client's kept
    /// window holds g2 and y. A stateless turn reads g1 (1 of 4: recall 0.25); a client that
    /// keeps its window reads g1 and g2 (2 of 4: 0.5); g3 and g4 are read by neither.
    #[test]
    fn evidence_recall_counts_what_the_model_reads() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
        let gold_v = s(&["g1", "g2", "g3", "g4"]);
        let gold: HashSet<&String> = gold_v.iter().collect();
        let context: HashSet<String> = s(&["g1", "x"]).into_iter().collect();
        let kept_v = s(&["g2", "y"]);
        let kept: HashSet<&String> = kept_v.iter().collect();
        assert_eq!(readable_gold(&gold, &context, &kept, false), 1);
        assert_eq!(readable_gold(&gold, &context, &kept, true), 2);
        assert_eq!(readable_gold(&gold, &HashSet::new(), &HashSet::new(), true), 0);
        let recall = |n: usize| n as f64 / gold.len() as f64;
        assert_eq!((recall(1), recall(2)), (0.25, 0.5));
    }

    /// By hand: the answer "Guinea pigs eat hay and fresh vegetables." has the terms guinea,
    /// pig, eat, hay, fresh, veget ("and" is a stop word); the evidence "Wild guinea pigs graze
    /// on grass and hay." holds guinea, pig, hay: 3 of 6 = 0.5. An answer of stop words only
    /// scores nothing and is not counted; the mean is over answered turns only.
    #[test]
    fn answer_support_is_the_share_of_answer_terms_the_evidence_holds() {
        let mut a = ragctx_lexical::Analyzer::default();
        let answer = content_terms(&mut a, &["Guinea pigs eat hay and fresh vegetables."]);
        assert_eq!(answer.len(), 6, "{answer:?}");
        let evidence = content_terms(&mut a, &["Wild guinea pigs graze on grass", "and hay."]);
        assert_eq!(answer_support(&answer, &evidence), Some(0.5));
        assert_eq!(answer_support(&content_terms(&mut a, &["It is the."]), &evidence), None);
        let mut sum = Means::default();
        sum.add(&Means { answer_support: 0.5, answered: 1, evidence_recall: 1.0, ..Means::default() });
        sum.add(&Means { evidence_recall: 0.0, ..Means::default() });
        let mean = sum.mean();
        assert_eq!((mean.answer_support, mean.evidence_recall, mean.turns), (0.5, 0.5, 2));
        // Turns none of which has a reference answer support nothing measured: null, not 0.
        let mut last_turns = Means::default();
        last_turns.add(&Means { evidence_recall: 1.0, ..Means::default() });
        let json = serde_json::to_value(last_turns.mean()).unwrap();
        assert_eq!(
            (json["answer_support"].clone(), json["evidence_recall"].clone()),
            (serde_json::Value::Null, 1.0.into())
        );
    }
}
