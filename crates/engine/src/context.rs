//! Stage 5: the cited context under a token budget (rank → dedupe → cut), with markers
//! that stay stable across the session, pointers to chunks the caller already holds, and
//! the prompt around them; and the citation check of stage 6.

use crate::dedupe::Fragment;
use ragctx_core::text::terms;
use ragctx_core::{
    citation_markers, Chunk, ChunkId, Citation, CitedSentence, ContextBlock, DocumentId, Pointer, Sentences,
    TokenCounter,
};
use std::collections::{BTreeMap, BTreeSet};

/// The instructions that open every prompt.
pub const INSTRUCTIONS: &str = "Answer the question using only the numbered sources below. \
Cite each statement with the marker of its source, like [2]. If the sources do not answer the question, say so.";

/// Added to the instructions when a block is carried from an earlier turn.
pub const CARRIED_NOTE: &str = "A source marked \"shown in turn n\" was already used in this conversation: \
build on it instead of repeating what was said.";

/// A chunk the caller already holds that ranks among this turn's results (`client` memory).
#[derive(Clone, Debug, PartialEq)]
pub struct PointerCandidate {
    /// The document the caller already holds chunks of.
    pub document_id: DocumentId,
    /// The document's title, for the pointer line.
    pub title: String,
    /// The ranking chunks of that document, best first.
    pub chunk_ids: Vec<ChunkId>,
    /// The earliest turn of the window that showed one of them.
    pub shown_in_turn: u64,
    /// The best cosine among them against this turn's query.
    pub score: f32,
    /// The metadata of the best of them.
    pub metadata: ragctx_core::Metadata,
}

/// What [`build_context`] admitted within the budget, what it costs and what it left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BuiltContext {
    /// In rank order (the prompt shows them [`ragctx_core::by_document`]: the later blocks of a
    /// document continued under its best one's header).
    pub blocks: Vec<ContextBlock>,
    /// In rank order; each names a document of the session's markers.
    pub pointers: Vec<Pointer>,
    /// Blocks and pointers, headers included.
    pub tokens: usize,
    /// Documents with a fragment that did not fit, in rank order.
    pub dropped_by_budget: Vec<DocumentId>,
    /// Markers handed to documents new to the session.
    pub new_markers: BTreeMap<DocumentId, u32>,
}

impl BuiltContext {
    /// Whether a block or pointer of `tokens` fits what is left of `budget`. If it does, its
    /// tokens are counted and a marker new to the session is handed out (`next` moves on);
    /// if not, its document is listed as dropped.
    fn admit(
        &mut self,
        document: &DocumentId,
        marker: u32,
        known: bool,
        tokens: usize,
        budget: usize,
        next: &mut u32,
    ) -> bool {
        if self.tokens + tokens > budget {
            if !self.dropped_by_budget.contains(document) {
                self.dropped_by_budget.push(document.clone());
            }
            return false;
        }
        if !known {
            self.new_markers.insert(document.clone(), marker);
            *next += 1;
        }
        self.tokens += tokens;
        true
    }
}

/// Fills the budget with pointers, then fragments, in rank order; a fragment that does not
/// fit is dropped whole (and listed) and smaller ones after it may still fit. `markers` are
/// the session's. A fragment's `carried_from` is kept on its block and shown in its header.
pub fn build_context(
    fragments: &[Fragment],
    pointers: &[PointerCandidate],
    markers: &BTreeMap<DocumentId, u32>,
    budget: usize,
    counter: &dyn TokenCounter,
) -> BuiltContext {
    let mut out = BuiltContext::default();
    let mut next = markers.values().copied().max().unwrap_or(0) + 1;
    // A known document keeps its marker; a new one gets the next free marker once it fits.
    let marker_of = |doc: &DocumentId, out: &BuiltContext, next: u32| -> (u32, bool) {
        match markers.get(doc).or_else(|| out.new_markers.get(doc)) {
            Some(m) => (*m, true),
            None => (next, false),
        }
    };
    for p in pointers {
        let (marker, known) = marker_of(&p.document_id, &out, next);
        let mut pointer = Pointer {
            marker,
            document_id: p.document_id.clone(),
            title: p.title.clone(),
            chunk_ids: p.chunk_ids.clone(),
            shown_in_turn: p.shown_in_turn,
            score: p.score,
            tokens: 0,
            metadata: p.metadata.clone(),
        };
        pointer.tokens = counter.count(&pointer.render());
        if out.admit(&p.document_id, marker, known, pointer.tokens, budget, &mut next) {
            out.pointers.push(pointer);
        }
    }
    for f in fragments {
        let (marker, known) = marker_of(&f.document_id, &out, next);
        let mut block = ContextBlock {
            marker,
            document_id: f.document_id.clone(),
            title: f.title.clone(),
            chunk_ids: f.chunks.iter().map(|c| c.id.clone()).collect(),
            tokens: 0,
            score: f.score,
            carried_from: f.carried_from,
            text: f.text.clone(),
            metadata: block_metadata(&f.chunks),
            // Under the header of a block of its document admitted before it.
            continued: out.blocks.iter().any(|b| b.document_id == f.document_id),
        };
        block.tokens = block_tokens(&block, f, counter);
        if out.admit(&f.document_id, marker, known, block.tokens, budget, &mut next) {
            out.blocks.push(block);
        }
    }
    // A document listed as dropped may still have another fragment inside.
    let inside: BTreeSet<&DocumentId> = out.blocks.iter().map(|b| &b.document_id).collect();
    out.dropped_by_budget.retain(|d| !inside.contains(d));
    out
}

/// A block's metadata: its first chunk's, with the last page any of its chunks is read from
/// (merged adjacent chunks of a PDF span their pages together).
fn block_metadata(chunks: &[ragctx_core::Chunk]) -> ragctx_core::Metadata {
    let mut metadata = chunks.first().map(|c| c.metadata.clone()).unwrap_or_default();
    if let Some((start, _)) = ragctx_core::pages(&metadata) {
        let end = chunks.iter().filter_map(|c| ragctx_core::pages(&c.metadata)).map(|(_, e)| e).max().unwrap_or(start);
        let end = ragctx_core::MetaValue::Number(f64::from(end.max(start)));
        // A metadata already holding its most keys without `page_end` keeps the first page's.
        let _ = metadata.insert(ragctx_core::PAGE_END_KEY, end);
    }
    metadata
}

/// Tokens of a rendered block. A single-chunk block whose text was counted at ingest
/// costs only its header: the header ends in a line break (after `)`, a turn number, or a
/// continued block's `…` or section) and the text starts with a non-space character, a split
/// point of cl100k_base's pre-tokenizer,
/// so the counts add up exactly (checked on real passages in `tests/prompt_tokens.rs`).
pub fn block_tokens(block: &ContextBlock, fragment: &Fragment, counter: &dyn TokenCounter) -> usize {
    match fragment.chunks.as_slice() {
        [c] if c.tokens.is_some() && counter.name() == ragctx_core::CHUNK_TOKENIZER && c.text == block.text => {
            counter.count(&format!("{}\n", block.heading())) + c.tokens.unwrap_or(0) as usize
        }
        _ => counter.count(&block.render()),
    }
}

/// Everything the model reads in one turn, in order: instructions, the conversation so
/// far (`engine` memory), pointers (`client` memory), the sources, the question.
#[derive(Clone, Copy, Debug, Default)]
pub struct Prompt<'a> {
    /// The question the answer addresses, last in the prompt.
    pub question: &'a str,
    /// Rendered earlier turns (see [`crate::conversation`]); empty for none.
    pub conversation: &'a str,
    /// `client` memory: pointer lines, listed before the sources; empty for none.
    pub pointers: &'a [Pointer],
    /// The sources in rank order, shown [`ragctx_core::by_document`], counted by their own
    /// `tokens`.
    pub blocks: &'a [ContextBlock],
}

impl Prompt<'_> {
    fn head(&self) -> String {
        let mut h = String::from(INSTRUCTIONS);
        if self.blocks.iter().any(|b| b.carried_from.is_some()) {
            h.push(' ');
            h.push_str(CARRIED_NOTE);
        }
        h.push_str("\n\n");
        if !self.conversation.is_empty() {
            h.push_str("Conversation so far:\n");
            h.push_str(self.conversation);
            h.push('\n');
        }
        if !self.pointers.is_empty() {
            h.push_str("Sources you already have (cite them by marker):\n");
            for p in self.pointers {
                h.push_str(&p.render());
            }
            h.push('\n');
        }
        h.push_str("Sources:\n");
        h
    }

    fn tail(&self) -> String {
        format!("Question: {}\nAnswer:", self.question)
    }

    /// The prompt as sent to a model.
    pub fn render(&self) -> String {
        let mut p = self.head();
        for b in ragctx_core::by_document(self.blocks, |b| &b.document_id) {
            p.push_str(&b.render());
        }
        p.push_str(&self.tail());
        p
    }

    /// Tokens of [`Prompt::render`] without counting the blocks again: every block starts
    /// with `[` (a continued one with `…`) after a line break and the tail with a letter, where cl100k_base's
    /// pre-tokenizer always splits, so the count of the whole is the sum of its pieces
    /// (checked against the whole prompt on real passages in `tests/prompt_tokens.rs`).
    pub fn tokens(&self, counter: &dyn TokenCounter) -> usize {
        counter.count(&self.head()) + self.blocks.iter().map(|b| b.tokens).sum::<usize>() + counter.count(&self.tail())
    }
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

/// Citations of the answer that refer to this turn's blocks or pointers, and the markers
/// that name neither.
pub fn check_citations(answer: &str, blocks: &[ContextBlock], pointers: &[Pointer]) -> (Vec<Citation>, Vec<u32>) {
    let mut citations = Vec::new();
    let mut invalid = Vec::new();
    for m in parse_markers(answer) {
        type Named<'a> = (&'a DocumentId, &'a str, &'a [ChunkId], &'a ragctx_core::Metadata);
        let named: Vec<Named> = blocks
            .iter()
            .filter(|b| b.marker == m)
            .map(|b| (&b.document_id, b.title.as_str(), b.chunk_ids.as_slice(), &b.metadata))
            .chain(
                pointers
                    .iter()
                    .filter(|p| p.marker == m)
                    .map(|p| (&p.document_id, p.title.as_str(), p.chunk_ids.as_slice(), &p.metadata)),
            )
            .collect();
        match named.first() {
            Some((document_id, title, _, _)) => citations.push(Citation {
                marker: m,
                document_id: (*document_id).clone(),
                title: (*title).to_owned(),
                chunk_ids: named.iter().flat_map(|n| n.2.iter().cloned()).collect(),
                pages: ragctx_core::merge_pages(
                    &named.iter().filter_map(|n| ragctx_core::pages(n.3)).collect::<Vec<_>>(),
                ),
                sentences: Vec::new(),
            }),
            None => invalid.push(m),
        }
    }
    (citations, invalid)
}

/// A statement of the answer cites a sentence when it shares at least this share of its terms
/// with it, and two of them (or its one); the extractive answer quotes its sentences whole.
pub const CITED_SHARE: f64 = 0.5;

/// The sentences of a block a citation can name, in order: each as the block shows it, with
/// its chunk, span and page where known ([`block_sentences`] reads them).
pub type BlockSentences = Vec<CitedSentence>;

/// The sentences `block` shows, by its chunks (`chunks`: those of its chunks that were read,
/// `index`: their sentence index, `None` where there is none): each chunk's sentence that
/// stands in the block's text, with its span and its page (the chunk's page when it is on
/// one, else the index's). A block whose text no chunk sentence is found in (a replaced
/// near-duplicate's) is split as it reads, each sentence on the block's page when it is on one.
pub fn block_sentences(block: &ContextBlock, chunks: &[Chunk], index: &[Option<Sentences>]) -> BlockSentences {
    let one_page = |m: &ragctx_core::Metadata| ragctx_core::pages(m).filter(|(a, z)| a == z).map(|(a, _)| a);
    let mut out: BlockSentences = Vec::new();
    for (chunk, sentences) in chunks.iter().zip(index) {
        let indexed = sentences.as_ref().filter(|s| s.fits(&chunk.text));
        for (i, (a, b)) in ragctx_core::text::sentence_spans(&chunk.text).into_iter().enumerate() {
            let text = &chunk.text[a..b];
            if !block.text.contains(text) || out.iter().any(|s| s.text == text) {
                continue;
            }
            let page = one_page(&chunk.metadata).or_else(|| indexed.and_then(|s| s.sentences[i].page));
            out.push(CitedSentence {
                text: text.to_owned(),
                chunk_id: Some(chunk.id.clone()),
                span: Some((a as u32, b as u32)),
                page,
            });
        }
    }
    if out.is_empty() {
        let page = one_page(&block.metadata);
        out = ragctx_core::text::sentences(&block.text)
            .into_iter()
            .filter(|s| s.trim() != ragctx_core::CONTINUED)
            .map(|s| CitedSentence { text: s.to_owned(), chunk_id: None, span: None, page })
            .collect();
    }
    out
}

/// Names in each citation the sentences its statements come from: for every marker in the
/// answer, the last sentence since the marker before it (markers right before it passed over:
/// they cite the same statement) is matched to the sentence of the marker's blocks
/// (`sentences`, one list per block) that holds the most of its terms, at least
/// [`CITED_SHARE`] and two (among equals the one quoting it word for word, then the closest). A citation whose statements each
/// found a sentence, each on a known page, names those pages only.
pub fn cite_sentences(answer: &str, citations: &mut [Citation], blocks: &[ContextBlock], sentences: &[BlockSentences]) {
    let markers = citation_markers(answer);
    // Markers with a statement that found no sentence: their pages stay their blocks'.
    let mut unmatched: BTreeSet<u32> = BTreeSet::new();
    // Each sentence's terms, once for every marker that may cite it.
    let held_terms: Vec<Vec<std::collections::HashSet<String>>> =
        sentences.iter().map(|list| list.iter().map(|s| terms(&s.text)).collect()).collect();
    for (k, (range, marker)) in markers.iter().enumerate() {
        let Some(citation) = citations.iter_mut().find(|c| c.marker == *marker) else { continue };
        // The statement: the last sentence between the marker before it (past the markers
        // right before it, which cite the same statement) and it.
        let mut end = range.start;
        let mut begin = 0;
        for (r, _) in markers[..k].iter().rev() {
            if answer[r.end..end].trim().is_empty() {
                end = r.start;
            } else {
                begin = r.end;
                break;
            }
        }
        let before = answer[begin..end].trim_end();
        let statement = ragctx_core::text::sentences(before).last().map(|s| s.trim()).unwrap_or_default();
        let wanted = terms(statement);
        if wanted.is_empty() {
            unmatched.insert(*marker);
            continue;
        }
        // By the share of the statement's terms a sentence holds; among equals, the sentence
        // that holds the statement word for word, then the one with the fewest other terms (a
        // list's `1.` or a one-word line holds a share of no statement).
        let mut best: Option<((f64, bool, f64), &CitedSentence)> = None;
        let lists = blocks.iter().zip(sentences.iter().zip(&held_terms)).filter(|(b, _)| b.marker == *marker);
        for (list, list_terms) in lists.map(|(_, l)| l) {
            for (s, have) in list.iter().zip(list_terms) {
                let held = wanted.iter().filter(|t| have.contains(*t)).count() as f64;
                let key = (held / wanted.len() as f64, s.text.contains(statement), held / have.len().max(1) as f64);
                let enough = key.0 >= CITED_SHARE && held >= wanted.len().min(2) as f64;
                if enough && best.is_none_or(|(b, _)| key.partial_cmp(&b) == Some(std::cmp::Ordering::Greater)) {
                    best = Some((key, s));
                }
            }
        }
        match best {
            Some((_, s)) if !citation.sentences.contains(s) => citation.sentences.push(s.clone()),
            Some(_) => {}
            None => {
                unmatched.insert(*marker);
            }
        }
    }
    for c in citations.iter_mut().filter(|c| !unmatched.contains(&c.marker)) {
        let pages: Option<Vec<(u32, u32)>> = c.sentences.iter().map(|s| s.page.map(|p| (p, p))).collect();
        if let Some(pages) = pages.filter(|p| !p.is_empty()) {
            c.pages = ragctx_core::merge_pages(&pages);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ragctx_core::{Chunk, Metadata};
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
                metadata: Default::default(),
            }],
            score,
            text,
            carried_from: None,
            freed: 0,
        }
    }

    #[test]
    fn budget_is_never_exceeded_blocks_drop_whole_and_markers_are_stable() {
        let mut markers = BTreeMap::new();
        markers.insert(DocumentId::from("old"), 4);
        let counter = Cl100kCounter::new();
        let frags = [frag("a", 10, 0.9), frag("big", 80, 0.8), frag("old", 5, 0.7), frag("c", 5, 0.6)];
        let c = build_context(&frags, &[], &markers, 50, &counter);
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

    /// A document's blocks stand together under its first block's header, the documents in
    /// the order of their best block; the later blocks are headed by what is their own, and
    /// the prompt counts what it renders.
    #[test]
    fn a_documents_blocks_stand_under_one_header() {
        let counter = Cl100kCounter::new();
        let mut second = frag("a", 6, 0.7);
        second.chunks[0].id = "a#5".into();
        let mut section = Metadata::default();
        section.insert(ragctx_core::SECTION_KEY, ragctx_core::MetaValue::String("Fees".into())).unwrap();
        second.chunks[0].metadata = section;
        let frags = [frag("a", 8, 0.9), frag("b", 8, 0.8), second, frag("c", 4, 0.6)];
        let c = build_context(&frags, &[], &BTreeMap::new(), 500, &counter);
        let order: Vec<(&str, bool)> = c.blocks.iter().map(|b| (b.document_id.as_str(), b.continued)).collect();
        // The blocks stay in rank order; the prompt shows the document's together.
        assert_eq!(order, vec![("a", false), ("b", false), ("a", true), ("c", false)]);
        assert_eq!(c.blocks.iter().map(|b| b.marker).collect::<Vec<_>>(), vec![1, 2, 1, 3]);
        for b in &c.blocks {
            assert_eq!(b.tokens, counter.count(&b.render()), "header counted");
        }
        let prompt = Prompt { question: "q", conversation: "", pointers: &[], blocks: &c.blocks };
        let text = prompt.render();
        assert!(text.contains("[1] t (a)\nword word word word word word word word\n\n… › Fees\nword"), "{text}");
        assert_eq!(text.matches("[1]").count(), 1, "one header for the document");
        assert_eq!(prompt.tokens(&counter), counter.count(&text));
        // The first block of a document that does not fit leaves the header to the next one.
        let c = build_context(
            &[frag("a", 400, 0.9), frag("b", 8, 0.8), frag("a", 8, 0.7)],
            &[],
            &BTreeMap::new(),
            60,
            &counter,
        );
        let order: Vec<(&str, bool)> = c.blocks.iter().map(|b| (b.document_id.as_str(), b.continued)).collect();
        assert_eq!(order, vec![("b", false), ("a", false)]);
        let shown: Vec<&str> =
            ragctx_core::by_document(&c.blocks, |b| &b.document_id).iter().map(|b| b.document_id.as_str()).collect();
        assert_eq!(shown, vec!["b", "a"]);
    }

    /// A statement's citation names the sentence it comes from (quoted or in other words) with
    /// its page, and the citation's pages narrow to the cited sentences' pages.
    #[test]
    fn a_citation_names_the_sentence_and_its_page() {
        let counter = Cl100kCounter::new();
        let text =
            "Alpha beta gamma delta epsilon. The annual fee is ten dollars for members. Other words follow here.";
        let mut f = frag("r.pdf", 1, 0.9);
        f.text = text.into();
        f.chunks[0].text = text.into();
        for (k, v) in [(ragctx_core::PAGE_START_KEY, 2.0), (ragctx_core::PAGE_END_KEY, 3.0)] {
            f.chunks[0].metadata.insert(k, ragctx_core::MetaValue::Number(v)).unwrap();
        }
        let c = build_context(&[f.clone(), frag("b", 8, 0.8)], &[], &BTreeMap::new(), 500, &counter);
        let spans = ragctx_core::text::sentence_spans(text);
        let index = Sentences::new(&spans, &vec![vec![1.0, 0.0]; spans.len()], &[Some(2), Some(3), Some(3)]);
        let sentences: Vec<BlockSentences> = c
            .blocks
            .iter()
            .map(|b| match b.document_id.as_str() {
                "r.pdf" => block_sentences(b, &f.chunks, &[Some(index.clone())]),
                _ => block_sentences(b, &[], &[]),
            })
            .collect();
        for answer in
            ["The annual fee is ten dollars for members. [1]", "Members pay an annual fee of ten dollars [1][2]."]
        {
            let (mut cites, _) = check_citations(answer, &c.blocks, &[]);
            assert_eq!(cites[0].pages, vec![(2, 3)], "the block's pages before");
            cite_sentences(answer, &mut cites, &c.blocks, &sentences);
            let s = &cites[0].sentences;
            assert_eq!(s.len(), 1, "{answer}: {s:?}");
            assert_eq!(s[0].text, "The annual fee is ten dollars for members.");
            assert_eq!((s[0].chunk_id.as_ref().map(|c| c.as_str()), s[0].page), (Some("r.pdf#0"), Some(3)));
            assert_eq!(s[0].span.map(|(a, b)| &text[a as usize..b as usize]), Some(s[0].text.as_str()));
            assert_eq!(cites[0].pages, vec![(3, 3)], "{answer}: the cited sentence's page");
        }
        // A list's `1.` or a one-word line is no statement's sentence; a marker mid-sentence
        // cites the clause since the marker before it.
        let listy = "1. Members\nThe annual fee is ten dollars for members. Other words follow here.";
        let mut g = f.clone();
        (g.text, g.chunks[0].text) = (listy.into(), listy.into());
        let c2 = build_context(&[g.clone()], &[], &BTreeMap::new(), 500, &counter);
        let s2 = vec![block_sentences(&c2.blocks[0], &g.chunks, &[None])];
        let answer = "Members pay 1.50 or so [1], and the annual fee is ten dollars for members [1].";
        let (mut cites, _) = check_citations(answer, &c2.blocks, &[]);
        cite_sentences(answer, &mut cites, &c2.blocks, &s2);
        let texts: Vec<&str> = cites[0].sentences.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(texts, vec!["The annual fee is ten dollars for members."], "{:?}", cites[0].sentences);
        // One statement of the marker matched, another not: the unmatched one's page is
        // unknown, so the pages stay the block's.
        let mixed = "The annual fee is ten dollars for members [1]. Something else entirely [1].";
        let (mut cites, _) = check_citations(mixed, &c.blocks, &[]);
        cite_sentences(mixed, &mut cites, &c.blocks, &sentences);
        assert_eq!((cites[0].sentences.len(), cites[0].pages.clone()), (1, vec![(2, 3)]));
        // A statement sharing too little with every sentence names none; the pages stay the block's.
        let (mut cites, _) = check_citations("Something else entirely [1]", &c.blocks, &[]);
        cite_sentences("Something else entirely [1]", &mut cites, &c.blocks, &sentences);
        assert!(cites[0].sentences.is_empty());
        assert_eq!(cites[0].pages, vec![(2, 3)]);
    }

    /// Adjacent chunks of a PDF merged into one block span their pages: the header, the
    /// block's metadata and the citation name them all.
    #[test]
    fn a_block_over_a_page_break_names_its_pages() {
        let counter = Cl100kCounter::new();
        let mut f = frag("r.pdf", 20, 0.9);
        let mut second = f.chunks[0].clone();
        second.id = "r.pdf#1".into();
        for (c, page) in [(&mut f.chunks[0], 2.0), (&mut second, 3.0)] {
            c.metadata.insert(ragctx_core::PAGE_START_KEY, ragctx_core::MetaValue::Number(page)).unwrap();
            c.metadata.insert(ragctx_core::PAGE_END_KEY, ragctx_core::MetaValue::Number(page)).unwrap();
        }
        f.chunks.push(second);
        let c = build_context(&[f], &[], &BTreeMap::new(), 200, &counter);
        assert!(c.blocks[0].render().starts_with("[1] t (r.pdf, p. 2–3)\n"), "{}", c.blocks[0].render());
        assert_eq!(c.blocks[0].tokens, counter.count(&c.blocks[0].render()));
        assert_eq!(ragctx_core::pages(&c.blocks[0].metadata), Some((2, 3)));
        let (cites, _) = check_citations("as [1] says", &c.blocks, &[]);
        assert_eq!(cites[0].pages, vec![(2, 3)]);
    }

    #[test]
    fn citations_are_checked_against_the_context() {
        let c = build_context(&[frag("a", 3, 0.9)], &[], &BTreeMap::new(), 100, &Cl100kCounter::new());
        let (cites, invalid) = check_citations("x [1] y [9] z [1] [abc] [12345678]", &c.blocks, &[]);
        assert_eq!(cites.len(), 1);
        assert_eq!(cites[0].document_id.as_str(), "a");
        assert_eq!(invalid, vec![9]);
    }

    #[test]
    fn pointers_keep_the_session_marker_count_in_the_budget_and_are_citable() {
        let mut markers = BTreeMap::new();
        markers.insert(DocumentId::from("seen"), 3);
        let counter = Cl100kCounter::new();
        let p = PointerCandidate {
            document_id: "seen".into(),
            title: "Watering".into(),
            chunk_ids: vec!["seen#0".into()],
            shown_in_turn: 2,
            score: 0.8,
            metadata: Default::default(),
        };
        let mut carried = frag("old", 5, 0.7);
        carried.carried_from = Some(1);
        let c = build_context(&[frag("a", 5, 0.9), carried], &[p], &markers, 200, &counter);
        assert_eq!(c.pointers[0].render(), "[3] Watering (seen) — shown in turn 2\n");
        assert_eq!(c.pointers[0].tokens, counter.count(&c.pointers[0].render()));
        assert_eq!(c.tokens, c.pointers[0].tokens + c.blocks.iter().map(|b| b.tokens).sum::<usize>());
        assert!(c.blocks[1].render().starts_with("[5] t (old) — shown in turn 1\n"), "{}", c.blocks[1].render());
        assert_eq!(c.blocks[1].tokens, counter.count(&c.blocks[1].render()));
        let (cites, invalid) = check_citations("see [3] and [4]", &c.blocks, &c.pointers);
        assert!(invalid.is_empty());
        assert_eq!(cites[0].chunk_ids, vec![ChunkId::from("seen#0")]);
        // A budget too small for the pointer leaves it out and hands out no marker for it.
        let tight = build_context(
            &[],
            &[c.pointers
                .iter()
                .map(|_| PointerCandidate {
                    document_id: "new".into(),
                    title: "T".into(),
                    chunk_ids: vec![],
                    shown_in_turn: 1,
                    score: 0.5,
                    metadata: Default::default(),
                })
                .next()
                .unwrap()],
            &markers,
            2,
            &counter,
        );
        assert!(tight.pointers.is_empty() && tight.new_markers.is_empty());
        assert_eq!(tight.dropped_by_budget, vec![DocumentId::from("new")], "a pointer that does not fit is listed");
        let prompt = Prompt {
            question: "q?",
            conversation: "User: hi\nAssistant: hello [3]\n",
            pointers: &c.pointers,
            blocks: &c.blocks,
        };
        assert_eq!(prompt.tokens(&counter), counter.count(&prompt.render()));
        assert!(prompt.render().contains(CARRIED_NOTE));
    }
}
