//! Stage 5: the cited context under a token budget (rank → dedupe → cut), with markers
//! that stay stable across the session; and the citation check of stage 6.

use crate::dedupe::Fragment;
use ragctx_core::{citation_markers, Citation, ContextBlock, DocumentId, TokenCounter};
use std::collections::{BTreeMap, BTreeSet};

/// The instructions that open every prompt.
pub const INSTRUCTIONS: &str = "Answer the question using only the numbered sources below. \
Cite each statement with the marker of its source, like [2]. If the sources do not answer the question, say so.";

#[derive(Clone, Debug, Default, PartialEq)]
pub struct BuiltContext {
    /// In rank order.
    pub blocks: Vec<ContextBlock>,
    pub tokens: usize,
    /// Documents with a fragment that did not fit, in rank order.
    pub dropped_by_budget: Vec<DocumentId>,
    /// Markers handed to documents new to the session.
    pub new_markers: BTreeMap<DocumentId, u32>,
}

/// Fills the budget with fragments in rank order; a fragment that does not fit is dropped
/// whole (and listed) and smaller ones after it may still fit. `markers` are the session's.
pub fn build_context(
    fragments: &[Fragment],
    markers: &BTreeMap<DocumentId, u32>,
    budget: usize,
    counter: &dyn TokenCounter,
) -> BuiltContext {
    let mut out = BuiltContext::default();
    let mut next = markers.values().copied().max().unwrap_or(0) + 1;
    for f in fragments {
        let known = markers.get(&f.document_id).or_else(|| out.new_markers.get(&f.document_id)).copied();
        let marker = known.unwrap_or(next);
        let mut block = ContextBlock {
            marker,
            document_id: f.document_id.clone(),
            title: f.title.clone(),
            chunk_ids: f.chunks.iter().map(|c| c.id.clone()).collect(),
            tokens: 0,
            score: f.score,
            text: f.text.clone(),
        };
        block.tokens = block_tokens(&block, f, counter);
        if out.tokens + block.tokens > budget {
            if !out.dropped_by_budget.contains(&f.document_id) {
                out.dropped_by_budget.push(f.document_id.clone());
            }
            continue;
        }
        if known.is_none() {
            out.new_markers.insert(f.document_id.clone(), marker);
            next += 1;
        }
        out.tokens += block.tokens;
        out.blocks.push(block);
    }
    // A document listed as dropped may still have another fragment inside.
    let inside: BTreeSet<&DocumentId> = out.blocks.iter().map(|b| &b.document_id).collect();
    out.dropped_by_budget.retain(|d| !inside.contains(d));
    out
}

fn prompt_head(carried: &str) -> String {
    if carried.is_empty() {
        format!("{INSTRUCTIONS}\n\nSources:\n")
    } else {
        format!("{INSTRUCTIONS}\n\nEarlier sources:\n{carried}Sources:\n")
    }
}

fn prompt_tail(question: &str) -> String {
    format!("Question: {question}\nAnswer:")
}

/// Tokens of a rendered block. A single-chunk block whose text was counted at ingest
/// costs only its header: the header ends in `)\n` and the text starts with a non-space
/// character, a split point of cl100k_base's pre-tokenizer, so the counts add up exactly
/// (checked on real passages in `tests/prompt_tokens.rs`).
pub fn block_tokens(block: &ContextBlock, fragment: &Fragment, counter: &dyn TokenCounter) -> usize {
    match fragment.chunks.as_slice() {
        [c] if c.tokens.is_some() && counter.name() == ragctx_core::CHUNK_TOKENIZER && c.text == block.text => {
            let header = ContextBlock::header(block.marker, &block.title, &block.document_id);
            counter.count(&format!("{header}\n")) + c.tokens.unwrap_or(0) as usize
        }
        _ => counter.count(&block.render()),
    }
}

/// The prompt sent to a model: instructions, optional earlier sources (rendered blocks),
/// this turn's sources, question.
pub fn render_prompt(question: &str, blocks: &[ContextBlock], carried: &str) -> String {
    let mut p = prompt_head(carried);
    for b in blocks {
        p.push_str(&b.render());
    }
    p.push_str(&prompt_tail(question));
    p
}

/// Tokens of [`render_prompt`] without counting the blocks again: every piece starts with
/// `[` or a letter after a line break, where cl100k_base's pre-tokenizer always splits, so
/// the count of the whole is the sum of the counts of its pieces (checked against the
/// whole prompt on real passages in `tests/prompt_tokens.rs`).
pub fn prompt_tokens(counter: &dyn TokenCounter, question: &str, blocks: &[ContextBlock], carried: &str) -> usize {
    counter.count(&prompt_head(carried))
        + blocks.iter().map(|b| b.tokens).sum::<usize>()
        + counter.count(&prompt_tail(question))
}

/// Markers `[n]` in the order the answer first uses them.
pub fn parse_markers(answer: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for (_, n) in citation_markers(answer) {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// Citations of the answer that refer to this turn's blocks, and the markers that do not.
pub fn check_citations(answer: &str, blocks: &[ContextBlock]) -> (Vec<Citation>, Vec<u32>) {
    let mut citations = Vec::new();
    let mut invalid = Vec::new();
    for m in parse_markers(answer) {
        let of_marker: Vec<&ContextBlock> = blocks.iter().filter(|b| b.marker == m).collect();
        match of_marker.first() {
            Some(b) => citations.push(Citation {
                marker: m,
                document_id: b.document_id.clone(),
                title: b.title.clone(),
                chunk_ids: of_marker.iter().flat_map(|b| b.chunk_ids.iter().cloned()).collect(),
            }),
            None => invalid.push(m),
        }
    }
    (citations, invalid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ragctx_core::Chunk;
    use ragctx_models::Cl100kCounter;

    fn frag(doc: &str, words: usize, score: f32) -> Fragment {
        let text = vec!["word"; words].join(" ");
        Fragment {
            document_id: doc.into(),
            title: "t".into(),
            chunks: vec![Chunk {
                id: format!("{doc}#0").into(),
                document_id: doc.into(),
                title: "t".into(),
                text: text.clone(),
                ordinal: None,
                start: None,
                end: None,
                weight: 1.0,
                tokens: None,
            }],
            score,
            text,
        }
    }

    #[test]
    fn budget_is_never_exceeded_blocks_drop_whole_and_markers_are_stable() {
        let mut markers = BTreeMap::new();
        markers.insert(DocumentId::from("old"), 4);
        let counter = Cl100kCounter::new();
        let frags = [frag("a", 10, 0.9), frag("big", 80, 0.8), frag("old", 5, 0.7), frag("c", 5, 0.6)];
        let c = build_context(&frags, &markers, 50, &counter);
        let docs: Vec<&str> = c.blocks.iter().map(|b| b.document_id.as_str()).collect();
        assert_eq!(docs, vec!["a", "old", "c"]);
        for b in &c.blocks {
            assert_eq!(b.tokens, counter.count(&b.render()), "header counted");
        }
        assert_eq!(c.tokens, c.blocks.iter().map(|b| b.tokens).sum::<usize>());
        assert!(c.tokens <= 50);
        assert_eq!(c.dropped_by_budget, vec![DocumentId::from("big")]);
        assert_eq!(c.blocks[1].marker, 4, "a known document keeps its marker");
        assert_eq!((c.blocks[0].marker, c.blocks[2].marker), (5, 6), "new ones take the next free markers");
        assert_eq!(c.new_markers.len(), 2);
        assert!(c.blocks[0].render().starts_with("[5] t (a)\n"));
    }

    #[test]
    fn citations_are_checked_against_the_context() {
        let c = build_context(&[frag("a", 3, 0.9)], &BTreeMap::new(), 100, &Cl100kCounter::new());
        let (cites, invalid) = check_citations("x [1] y [9] z [1] [abc] [12345678]", &c.blocks);
        assert_eq!(cites.len(), 1);
        assert_eq!(cites[0].document_id.as_str(), "a");
        assert_eq!(invalid, vec![9]);
    }
}
