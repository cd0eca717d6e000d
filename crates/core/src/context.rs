use crate::{ChunkId, DocumentId};
use serde::{Deserialize, Serialize};

/// One block of the context handed to the model: its header (`[marker] title › section
/// (document_id, p. 3–4)`, [`ContextBlock::header`]) and its text. A document's blocks stand
/// together under its first block's header; each later one is headed only by what is its own
/// (`… › section (p. 7)`, [`ContextBlock::continuation`]): a document takes one source slot
/// ([`by_document`] makes that order from the blocks' rank order).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextBlock {
    /// Stable within a session: a document keeps its marker across turns.
    pub marker: u32,
    /// The document the block's chunks come from, named in its header.
    pub document_id: DocumentId,
    /// The document's title, as the header shows it.
    pub title: String,
    /// The chunks whose text the block holds, in document order (several when adjacent chunks
    /// were merged).
    pub chunk_ids: Vec<ChunkId>,
    /// Tokens of the rendered block, header included.
    pub tokens: usize,
    /// What the block is ranked by: the best score among its chunks — their cosine to the
    /// query, plus `engaged_prior` for a follow-up's engaged documents, handed out again down
    /// another order where a stage re-ordered the candidates (hybrid fusion, a reranker, MMR).
    pub score: f32,
    /// `engine` memory: the turn that first showed this block's chunks, when it is carried
    /// from the working set; `None` for a block new to the conversation.
    #[serde(default)]
    pub carried_from: Option<u64>,
    /// The chunks' text, adjacent chunks joined without their overlap.
    pub text: String,
    /// The metadata of the block's first chunk (a document's chunks usually share it; DESIGN §8),
    /// with `page_end` the last page any of its chunks is read from.
    #[serde(default, skip_serializing_if = "crate::Metadata::is_empty")]
    pub metadata: crate::Metadata,
    /// A block of the same document ranks above it: in the prompt it is shown under that
    /// block's header ([`by_document`]), headed by [`ContextBlock::continuation`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub continued: bool,
}

impl ContextBlock {
    /// `[marker] title › section (document_id, p. 3–4)`: the header of a block or a pointer,
    /// without the turn note or the line break. The heading path ([`SECTION_KEY`]) follows the
    /// title and the pages ([`PAGE_START_KEY`], [`PAGE_END_KEY`]) the document, when the
    /// metadata holds them.
    pub fn header(marker: u32, title: &str, document_id: &DocumentId, metadata: &crate::Metadata) -> String {
        let title = shown_title(title, metadata);
        match pages(metadata) {
            Some(pages) => format!("[{marker}] {title} ({document_id}, {})", page_label(&[pages])),
            None => format!("[{marker}] {title} ({document_id})"),
        }
    }
    /// `… › section (p. 7)`: the heading of a block shown under an earlier block's header (of
    /// its own document): the mark of text left out between them, then its own heading path
    /// and pages where the metadata holds them.
    pub fn continuation(metadata: &crate::Metadata) -> String {
        let mut h = String::from(CONTINUED);
        if let Some(crate::MetaValue::String(section)) = metadata.get(SECTION_KEY) {
            if !section.trim().is_empty() {
                h.push_str(SECTION_SEPARATOR);
                h.push_str(section.trim());
            }
        }
        if let Some(pages) = pages(metadata) {
            h.push_str(&format!(" ({})", page_label(&[pages])));
        }
        h
    }
    /// The header line of this block ([`ContextBlock::header`], or
    /// [`ContextBlock::continuation`] for a continued one): a carried block says which turn
    /// first showed it.
    pub fn heading(&self) -> String {
        let header = match self.continued {
            true => Self::continuation(&self.metadata),
            false => Self::header(self.marker, &self.title, &self.document_id, &self.metadata),
        };
        match self.carried_from {
            Some(turn) => format!("{header} — shown in turn {turn}"),
            None => header,
        }
    }
    /// The block as the model sees it, with the blank line that separates it from the next.
    pub fn render(&self) -> String {
        format!("{}\n{}\n\n", self.heading(), self.text)
    }
}

/// `client` memory: a chunk the caller already holds (shown in an earlier turn of the
/// window) that ranks among this turn's results. One line in the prompt instead of the
/// text again, citable with its stable marker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pointer {
    /// The document's marker in the session, by which the answer cites it.
    pub marker: u32,
    /// The document the caller already holds chunks of.
    pub document_id: DocumentId,
    /// The document's title, as the pointer line shows it.
    pub title: String,
    /// The chunks of that document that rank this turn, best first.
    pub chunk_ids: Vec<ChunkId>,
    /// The earliest turn of the window that showed one of those chunks.
    pub shown_in_turn: u64,
    /// The best cosine among those chunks against this turn's query.
    pub score: f32,
    /// Tokens of the rendered line.
    pub tokens: usize,
    /// The metadata of the document's best ranking chunk (DESIGN §8).
    #[serde(default, skip_serializing_if = "crate::Metadata::is_empty")]
    pub metadata: crate::Metadata,
}

impl Pointer {
    /// `[3] Title (documentID) — shown in turn 2`, with its line break.
    pub fn render(&self) -> String {
        format!(
            "{} — shown in turn {}\n",
            ContextBlock::header(self.marker, &self.title, &self.document_id, &self.metadata),
            self.shown_in_turn
        )
    }
}

/// `items` (in rank order) as the prompt shows them: each document's together under its best
/// one, the documents in the order of their best, a document's own in rank order. The one
/// place that order is made: the chat prompt, an agent's result and the trace read it.
pub fn by_document<T, K: PartialEq + ?Sized>(items: &[T], document: impl Fn(&T) -> &K) -> Vec<&T> {
    let mut out: Vec<&T> = Vec::with_capacity(items.len());
    let mut done = vec![false; items.len()];
    for i in 0..items.len() {
        if done[i] {
            continue;
        }
        for j in i..items.len() {
            if !done[j] && document(&items[j]) == document(&items[i]) {
                done[j] = true;
                out.push(&items[j]);
            }
        }
    }
    out
}

/// What heads a block shown under its document's earlier block: text of the document was left
/// out between them.
pub const CONTINUED: &str = "…";

/// The metadata key of a chunk's heading path within its document ("Chapter › Section", as
/// the chunker of Markdown and HTML sets it; a JSONL line may give it too).
pub const SECTION_KEY: &str = "section";

/// What joins the parts of a heading path, and a title to its section.
pub const SECTION_SEPARATOR: &str = " › ";

/// How the title of a block or pointer is shown: `Title › Section` when the metadata holds a
/// heading path ([`SECTION_KEY`]), else the title.
pub fn shown_title<'a>(title: &'a str, metadata: &crate::Metadata) -> std::borrow::Cow<'a, str> {
    match metadata.get(SECTION_KEY) {
        Some(crate::MetaValue::String(section)) if !section.trim().is_empty() => {
            std::borrow::Cow::Owned(format!("{title}{SECTION_SEPARATOR}{}", section.trim()))
        }
        _ => std::borrow::Cow::Borrowed(title),
    }
}

/// The metadata key of the first page a chunk's text is read from: the page's place in the
/// file, 1-based (not the label printed on it, which may be `iv` or start anywhere); the PDF
/// reader sets it, a JSONL line may give it too.
pub const PAGE_START_KEY: &str = "page_start";

/// The metadata key of the last page a chunk's text is read from.
pub const PAGE_END_KEY: &str = "page_end";

/// The pages a chunk or block spans, from its metadata: `page_start`..=`page_end` (`page_end`
/// defaults to `page_start`); `None` without a whole positive `page_start`.
pub fn pages(metadata: &crate::Metadata) -> Option<(u32, u32)> {
    let page = |key| match metadata.get(key) {
        Some(crate::MetaValue::Number(n)) if *n >= 1.0 && *n <= u32::MAX as f64 && n.fract() == 0.0 => Some(*n as u32),
        _ => None,
    };
    let start = page(PAGE_START_KEY)?;
    Some((start, page(PAGE_END_KEY).unwrap_or(start).max(start)))
}

/// Page ranges in order, overlapping and touching ones merged.
pub fn merge_pages(ranges: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut sorted = ranges.to_vec();
    sorted.sort_unstable();
    let mut merged: Vec<(u32, u32)> = Vec::new();
    for (s, e) in sorted {
        match merged.last_mut() {
            Some(last) if s <= last.1.saturating_add(1) => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// Pages as a citation names them: `p. 3`, `p. 3–4`, `pp. 2, 5–7` (ranges in order, overlapping
/// and touching ones merged).
pub fn page_label(ranges: &[(u32, u32)]) -> String {
    let merged = merge_pages(ranges);
    let prefix = if merged.len() > 1 { "pp." } else { "p." };
    format!("{prefix} {}", page_ranges(&merged))
}

/// Merged page ranges written out: `3`, `3–4`, `2, 5–7`.
pub fn page_ranges(ranges: &[(u32, u32)]) -> String {
    let parts: Vec<String> =
        merge_pages(ranges).iter().map(|&(s, e)| if s == e { s.to_string() } else { format!("{s}–{e}") }).collect();
    parts.join(", ")
}

/// Every citation marker `[n]` (1 to 6 digits) in `text`, with its byte range, in order.
/// The one definition of a marker: the engine reads citations with it and the extractive
/// generator uses it to keep quoted footnotes from passing for citations.
pub fn citation_markers(text: &str) -> Vec<(std::ops::Range<usize>, u32)> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'[' {
            let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits > 0 && digits <= 6 && b.get(i + 1 + digits) == Some(&b']') {
                let n: u32 = text[i + 1..i + 1 + digits].parse().expect("at most 6 ascii digits");
                out.push((i..i + digits + 2, n));
                i += digits + 2;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// A marker the answer used that refers to a block of this turn's context.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Citation {
    /// The marker `[n]` as the answer wrote it.
    pub marker: u32,
    /// The document the marker stands for in this session.
    pub document_id: DocumentId,
    /// That document's title.
    pub title: String,
    /// Every chunk of this turn's blocks and pointers under that marker.
    pub chunk_ids: Vec<ChunkId>,
    /// The pages cited (`[start, end]`, 1-based, in order, overlapping ranges merged): those of
    /// [`Citation::sentences`] where each one's page is known, else those the blocks and
    /// pointers under the marker are read from; empty for a document without pages.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pages: Vec<(u32, u32)>,
    /// The sentences of the marker's blocks that the answer's statements citing it come from,
    /// in the order first cited: empty where no statement could be matched to one (a
    /// pointer's, or a statement sharing too little with every sentence).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sentences: Vec<CitedSentence>,
}

/// A sentence of a block that a statement of the answer cites.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CitedSentence {
    /// The sentence as its block shows it.
    pub text: String,
    /// The chunk it belongs to, where its block's chunks were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_id: Option<ChunkId>,
    /// Its byte span in that chunk's text (`[start, end)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<(u32, u32)>,
    /// The page it stands on (PDFs), where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MetaValue, Metadata};

    fn meta(pairs: &[(&str, MetaValue)]) -> Metadata {
        let mut m = Metadata::default();
        for (k, v) in pairs {
            m.insert(k, v.clone()).unwrap();
        }
        m
    }

    #[test]
    fn a_header_names_the_section_and_the_pages() {
        let (n, s) = (MetaValue::Number, |s: &str| MetaValue::String(s.into()));
        let m = meta(&[(PAGE_START_KEY, n(3.0)), (PAGE_END_KEY, n(4.0)), (SECTION_KEY, s("Money"))]);
        assert_eq!(ContextBlock::header(2, "Report", &"r.pdf".into(), &m), "[2] Report › Money (r.pdf, p. 3–4)");
        assert_eq!(pages(&meta(&[(PAGE_START_KEY, n(7.0))])), Some((7, 7)));
        // Not a page: zero, a fraction, a string; an end before the start reads as the start.
        for bad in [n(0.0), n(2.5), s("3")] {
            assert_eq!(pages(&meta(&[(PAGE_START_KEY, bad)])), None);
        }
        assert_eq!(pages(&meta(&[(PAGE_START_KEY, n(5.0)), (PAGE_END_KEY, n(2.0))])), Some((5, 5)));
        assert_eq!(ContextBlock::header(1, "T", &"d".into(), &Metadata::default()), "[1] T (d)");
        assert_eq!(page_label(&[(6, 7), (2, 2), (3, 3), (9, 9)]), "pp. 2–3, 6–7, 9");
        assert_eq!(page_label(&[(4, 4), (4, 5)]), "p. 4–5");
        // A continued block is headed by what is its own.
        assert_eq!(ContextBlock::continuation(&m), "… › Money (p. 3–4)");
        assert_eq!(ContextBlock::continuation(&Metadata::default()), "…");
    }
}
