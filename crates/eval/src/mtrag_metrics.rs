//! The metrics of `eval mtrag` (DESIGN §6) per turn, and their means per strategy, domain
//! and turn index.

use serde::Serialize;
use std::collections::BTreeMap;

/// Sums of the per-turn metrics, for means.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Means {
    /// Gold whose text the model reads this turn (DESIGN §6): the context, plus for
    /// `client` and `history` the earlier contexts the client keeps (within the window).
    pub evidence_recall: f64,
    pub fresh_recall: f64,
    pub doc_recall: f64,
    pub available_recall: f64,
    pub repeat_rate: f64,
    pub doc_repeat_rate: f64,
    pub context_tokens: f64,
    pub prompt_tokens: f64,
    pub new_gold_per_1k_tokens: f64,
    pub unique_documents: f64,
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
    pub carried: f64,
    pub pointers: f64,
    /// Tokens of earlier questions and answers the model reads: the conversation `engine`
    /// puts in the prompt, or the exchanges a client keeps (`client`, `history`).
    pub conversation_tokens: f64,
    pub turns: usize,
}

impl Means {
    /// Every averaged metric, listed once.
    fn metrics(&mut self) -> [&mut f64; 19] {
        [
            &mut self.evidence_recall,
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
        ]
    }

    pub(crate) fn add(&mut self, m: &Means) {
        let mut m = m.clone();
        for (sum, x) in self.metrics().into_iter().zip(m.metrics()) {
            *sum += *x;
        }
        self.turns += 1;
    }

    pub(crate) fn mean(&self) -> Means {
        let mut out = self.clone();
        let n = self.turns.max(1) as f64;
        for x in out.metrics() {
            *x /= n;
        }
        out
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

#[derive(Serialize)]
pub struct StrategyReport {
    pub granularity: ragctx_core::Granularity,
    pub query: String,
    pub memory: ragctx_core::Memory,
    /// How `evidence_recall` and `prompt_tokens` count: `stateless` (this turn's prompt
    /// only) or `client_keeps` (plus the earlier contexts of the window).
    pub reader: String,
    pub overall: Means,
    /// Means over gold turns at index ≥ 5.
    pub from_turn_5: Means,
    pub by_domain: BTreeMap<String, Means>,
    pub by_turn: BTreeMap<usize, Means>,
}
