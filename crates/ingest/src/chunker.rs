use crate::docx::docx_to_markdown;
use crate::pdf::pdf_to_markdown;
use crate::structure::{hide_comments, hide_tags, html_to_markdown, parse, Block, Kind};
use crate::titles::placeholder_title;
use crate::{InputError, SourcedChunk};
use ragctx_core::{Chunk, MetaValue, Metadata, PAGE_END_KEY, PAGE_START_KEY, SECTION_KEY, SECTION_SEPARATOR};

/// Target size of a chunk in characters (about 200–250 MiniLM tokens of English, under the
/// embedder's 256-token window).
pub const CHUNK_CHARS: usize = 1_000;

/// A document format chunked here (JSONL is read as pre-chunked instead); a document that
/// names no title is titled by its file name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DocumentFormat {
    /// `.md`: read by its structure; titled by its front matter's `title:`, else its first
    /// heading of any level.
    Markdown,
    /// `.txt`: paragraphs and list items; titled by its first non-empty line (up to 100
    /// characters).
    Text,
    /// `.html`: the visible text read by its structure (headings, paragraphs, list items, table
    /// rows, `<pre>`), titled by its `<title>`, else its first heading.
    Html,
    /// `.docx`: paragraphs, headings (by style), list items and tables (a row a unit), titled
    /// by the document's own title, else its first heading.
    Docx,
    /// `.pdf`: the text layer in reading order, headings by their larger type, each chunk with
    /// its pages ([`PAGE_START_KEY`], [`PAGE_END_KEY`]); titled by the document's own title,
    /// else its first heading. Pages without text (a scan) are left out and reported.
    Pdf,
}

impl DocumentFormat {
    /// By file extension: `.md`/`.markdown`, `.txt`, `.html`/`.htm`, `.docx`, `.pdf`.
    pub fn from_path(path: &str) -> Option<Self> {
        let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
        match ext.as_str() {
            "md" | "markdown" => Some(Self::Markdown),
            "txt" => Some(Self::Text),
            "html" | "htm" => Some(Self::Html),
            "docx" => Some(Self::Docx),
            "pdf" => Some(Self::Pdf),
            _ => None,
        }
    }

    /// The format of a short name ([`DocumentFormat::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Markdown, Self::Text, Self::Html, Self::Docx, Self::Pdf].into_iter().find(|f| f.name() == name)
    }

    /// The format's short name, as the ingest report counts it (`md`, `txt`, `html`, `docx`, `pdf`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Markdown => "md",
            Self::Text => "txt",
            Self::Html => "html",
            Self::Docx => "docx",
            Self::Pdf => "pdf",
        }
    }
}

/// Chunks one document. `document_id` is the path relative to the ingested argument;
/// chunk ids are `{document_id}#{ordinal}`, stable as long as the text is.
///
/// The document is read by its structure ([`DocumentFormat`]): a heading starts a chunk; a
/// code block, a table row and a list item are cut only when one alone passes the chunk's
/// size; the lines of a hard-wrapped paragraph are joined, so a chunk's text holds whole
/// sentences on one line. A chunk's `start`..`end` is the span of the source (characters)
/// its text was read from; its [`SECTION_KEY`] metadata is its heading path (the headings it
/// sits under, the document's title left out, joined by [`SECTION_SEPARATOR`]).
pub fn chunk_document(
    document_id: &str,
    bytes: &[u8],
    format: DocumentFormat,
) -> Result<Vec<SourcedChunk>, InputError> {
    read_document(document_id, bytes, format).map(|d| d.chunks)
}

/// A document read into chunks, with what of it could not be read.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ReadDocument {
    /// Its chunks, as [`chunk_document`] gives them.
    pub chunks: Vec<SourcedChunk>,
    /// Its pages, for a format that has them (PDF).
    pub pages: Option<u32>,
    /// What of the document was left out, each with why (a PDF's pages without a text layer,
    /// or pages that could not be decoded); the rest is read.
    pub left_out: Vec<String>,
}

/// [`chunk_document`], saying also what of the document was left out (a PDF's scanned pages).
pub fn read_document(document_id: &str, bytes: &[u8], format: DocumentFormat) -> Result<ReadDocument, InputError> {
    let error = |message: String| InputError::whole(document_id, message);
    let (named, text, markdown) = match format {
        DocumentFormat::Html => {
            let decoded = html_text(document_id, bytes)?;
            let (title, text) = html_to_markdown(&decoded);
            (title, text, true)
        }
        DocumentFormat::Markdown => (None, utf8(document_id, bytes)?.to_owned(), true),
        DocumentFormat::Text => {
            let raw = utf8(document_id, bytes)?;
            let title = raw.lines().map(str::trim).find(|l| !l.is_empty()).map(|l| l.chars().take(100).collect());
            (title, raw.to_owned(), false)
        }
        DocumentFormat::Docx => {
            let (title, text) = docx_to_markdown(bytes).map_err(error)?;
            (title, text, true)
        }
        DocumentFormat::Pdf => return read_pdf(document_id, bytes),
    };
    let chunks = chunk_text(document_id, named, &text, markdown, true)?;
    Ok(ReadDocument { chunks, ..Default::default() })
}

/// A PDF's chunks, each with the pages its text is read from.
fn read_pdf(document_id: &str, bytes: &[u8]) -> Result<ReadDocument, InputError> {
    let error = |message: String| InputError::whole(document_id, message);
    // lopdf and pdf-extract panic on some malformed files: the file is refused, the ingest goes on.
    let read = std::panic::catch_unwind(|| pdf_to_markdown(bytes))
        .unwrap_or_else(|_| Err("not a readable PDF (its structure could not be decoded)".into()));
    chunk_pdf(document_id, read.map_err(error)?)
}

/// Chunks a PDF's text, each chunk with the pages its text is read from.
pub(crate) fn chunk_pdf(document_id: &str, pdf: crate::pdf::PdfText) -> Result<ReadDocument, InputError> {
    let error = |message: String| InputError::whole(document_id, message);
    let mut left_out = Vec::new();
    if !pdf.without_text.is_empty() {
        left_out.push(format!("{} without a text layer (scanned? ragctx runs no OCR)", page_list(&pdf.without_text)));
    }
    if !pdf.unmapped.is_empty() {
        left_out.push(format!(
            "{} whose fonts map their glyphs to no text (no Unicode map: read as nothing or symbols)",
            page_list(&pdf.unmapped)
        ));
    }
    if !pdf.only_running.is_empty() {
        left_out.push(format!(
            "{} with only a running header or page number (scanned? ragctx runs no OCR)",
            page_list(&pdf.only_running)
        ));
    }
    // Pages that failed alike are named together.
    let mut reasons: Vec<(&str, Vec<u32>)> = Vec::new();
    for (page, why) in &pdf.unreadable {
        match reasons.iter_mut().find(|(w, _)| w == why) {
            Some((_, pages)) => pages.push(*page),
            None => reasons.push((why, vec![*page])),
        }
    }
    for (why, pages) in reasons {
        left_out.push(format!("{} could not be read ({why})", page_list(&pages)));
    }
    if pdf.page_starts.is_empty() {
        let why = if left_out.is_empty() { "no text".to_owned() } else { left_out.join("; ") };
        return Err(error(format!("no text to read in its {} pages: {why}", pdf.pages)));
    }
    let mut chunks = chunk_text(document_id, pdf.title, &pdf.markdown, true, false)?;
    let chars: Vec<char> = pdf.markdown.chars().collect();
    let page_at = |offset: usize| {
        let k = pdf.page_starts.partition_point(|(start, _)| *start <= offset);
        pdf.page_starts[k.saturating_sub(1)].1
    };
    for c in &mut chunks {
        let (start, end) = (c.chunk.start.unwrap_or(0) as usize, c.chunk.end.unwrap_or(0) as usize);
        let (first, last) = (page_at(start), page_at(end.saturating_sub(1).max(start)));
        for (key, page) in [(PAGE_START_KEY, first), (PAGE_END_KEY, last)] {
            c.chunk.metadata.insert(key, MetaValue::Number(f64::from(page))).expect("a valid key and a number");
        }
        c.page_starts = chunk_page_starts(&c.chunk.text, &chars, (start, end), &pdf.page_starts, first);
    }
    Ok(ReadDocument { chunks, pages: Some(pdf.pages), left_out })
}

/// Where pages begin in a chunk's text (byte offsets), the first at 0 on page `first`: each
/// page break inside the chunk's span of the document (`span`, in characters) found by the
/// words that follow it (the chunk's text is the document's, re-joined: offsets do not carry
/// over). A break whose words are not found is left out (its sentences keep the page before).
fn chunk_page_starts(
    text: &str,
    document: &[char],
    span: (usize, usize),
    page_starts: &[(usize, u32)],
    first: u32,
) -> Vec<(usize, u32)> {
    let mut out = vec![(0, first)];
    for &(at, page) in page_starts.iter().filter(|(at, _)| *at > span.0 && *at < span.1) {
        let follows: String = document[at..span.1.min(at + 40)].iter().collect();
        let follows = follows.split_whitespace().take(4).collect::<Vec<_>>().join(" ");
        let from = out.last().map_or(0, |l| l.0);
        if let Some(k) = (!follows.is_empty()).then(|| text[from..].find(&follows)).flatten() {
            out.push((from + k, page));
        }
    }
    out
}

/// `page 3` or `pages 2, 5–7`.
fn page_list(pages: &[u32]) -> String {
    let ranges: Vec<(u32, u32)> = pages.iter().map(|p| (*p, *p)).collect();
    let one = ranges.iter().all(|r| *r == ranges[0]);
    format!("{} {}", if one { "page" } else { "pages" }, ragctx_core::page_ranges(&ranges))
}

/// An HTML page's text in the charset it declares (a BOM, `<meta charset>` or
/// `http-equiv` in its first 1,024 bytes), unless it is valid UTF-8 without a BOM; UTF-8
/// when it declares none.
fn html_text(document_id: &str, bytes: &[u8]) -> Result<String, InputError> {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(1024)]).to_ascii_lowercase();
    let declared = head.find("charset=").map(|at| {
        head[at + 8..]
            .trim_start_matches(['"', '\''])
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "-_:.".contains(*c))
            .collect::<String>()
    });
    let encoding = match encoding_rs::Encoding::for_bom(bytes) {
        Some((e, _)) => Some(e),
        None => declared.as_deref().and_then(|d| encoding_rs::Encoding::for_label(d.as_bytes())),
    };
    let bom = encoding_rs::Encoding::for_bom(bytes).is_some();
    match encoding {
        // A page that declares another charset but is valid UTF-8 is UTF-8 (saved again
        // without its declaration changed: a `gb2312` page in UTF-8).
        Some(e) if e != encoding_rs::UTF_8 && (bom || std::str::from_utf8(bytes).is_err()) => {
            Ok(e.decode(bytes).0.into_owned())
        }
        _ => Ok(utf8(document_id, bytes)?.to_owned()),
    }
}

/// The document's text without a byte-order mark, or the line its UTF-8 breaks on.
fn utf8<'a>(document_id: &str, bytes: &'a [u8]) -> Result<&'a str, InputError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
        InputError { file: document_id.to_owned(), line: Some(line), message: "invalid UTF-8".into() }
    })
}

/// Chunks a document's text (Markdown when `markdown`, else plain text), titled `named`
/// when it names itself; `comments`: HTML comments in Markdown are hidden (not in Markdown
/// written from a PDF's text, whose every character was on the page).
fn chunk_text(
    document_id: &str,
    named: Option<String>,
    text: &str,
    markdown: bool,
    comments: bool,
) -> Result<Vec<SourcedChunk>, InputError> {
    let mut chars: Vec<char> = text.chars().collect();
    if markdown && comments {
        hide_comments(&mut chars);
        hide_tags(&mut chars);
    }
    let parsed = parse(&chars, markdown);
    // The first heading that names the document: not a placeholder, not a part's name
    // (`Contents`, `Foreword`, `Definitions`, `前言`).
    let first_heading = parsed
        .blocks
        .iter()
        .filter(|b| matches!(b.kind, Kind::Heading(_)))
        .map(|b| b.heading.clone())
        .find(|h| !placeholder_title(h) && !part_name(h));
    // The document's own title unless a placeholder, its front matter's, its first heading,
    // its file name: the first that names it.
    let real = |t: &String| !t.trim().is_empty() && !placeholder_title(t);
    let title = named
        .filter(real)
        .or(parsed.front_title.clone().filter(real))
        .or(first_heading.filter(real))
        .unwrap_or_else(|| document_id.rsplit('/').next().unwrap_or(document_id).to_owned());
    let chunks = pack_blocks(&parsed.blocks, &title, CHUNK_CHARS);
    if chunks.is_empty() {
        return Err(InputError::whole(document_id, "document has no text"));
    }
    Ok(chunks
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let mut metadata = Metadata::default();
            if !c.section.is_empty() {
                // A metadata string holds at most 1 KiB: a longer path keeps its start.
                let mut end = c.section.len().min(MAX_SECTION_BYTES);
                while !c.section.is_char_boundary(end) {
                    end -= 1;
                }
                let section = MetaValue::String(c.section[..end].to_owned());
                metadata.insert(SECTION_KEY, section).expect("a valid key and a string within the limit");
            }
            SourcedChunk {
                chunk: Chunk {
                    id: format!("{document_id}#{i}").into(),
                    document_id: document_id.into(),
                    title: title.clone(),
                    text: c.text,
                    ordinal: Some(i as u32),
                    start: Some(c.start as u64),
                    end: Some(c.end as u64),
                    weight: 1.0,
                    tokens: None,
                    metadata,
                },
                file: document_id.to_owned(),
                line: None,
                page_starts: Vec::new(),
            }
        })
        .collect())
}

/// A heading that names a part of a document, not the document: a title is not taken from
/// it.
fn part_name(heading: &str) -> bool {
    let bare: String = heading
        .trim()
        .trim_end_matches(['.', ':', '：'])
        .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c.is_whitespace())
        .to_lowercase();
    // `前 言` as `前言`: CJK headings are often spaced out.
    let spaced: String = bare.chars().filter(|c| !c.is_whitespace()).collect();
    let bare = if bare.chars().any(|c| c as u32 >= 0x2E80) { spaced } else { bare };
    const PARTS: &[&str] = &[
        "foreword",
        "preface",
        "introduction",
        "abstract",
        "summary",
        "overview",
        "definitions",
        "background",
        "acknowledgements",
        "acknowledgments",
        "appendix",
        "references",
        "index",
        "glossary",
        "前言",
        "引言",
        "概述",
        "范围",
        "摘要",
        "附录",
        "参考文献",
        "はじめに",
        "序論",
        "概要",
        "머리말",
        "서론",
        "vorwort",
        "einleitung",
        "préface",
        "introducción",
        "prefacio",
    ];
    PARTS.contains(&bare.as_str())
}

/// A heading path is kept up to this many bytes (a metadata string holds 1 KiB).
const MAX_SECTION_BYTES: usize = 512;

/// One chunk of a document before it is named.
struct Packed {
    text: String,
    start: usize,
    end: usize,
    section: String,
}

/// A piece of a block that fits a chunk: its text, source span, and the heading path it sits
/// under.
struct Unit {
    text: Vec<char>,
    start: usize,
    end: usize,
    kind: Kind,
    path: Vec<String>,
}

impl Unit {
    fn heading(&self) -> bool {
        matches!(self.kind, Kind::Heading(_))
    }
}

/// Blocks packed into chunks of at most `max` width: a heading starts a chunk (unless the
/// chunk holds only headings), blocks share a chunk while they fit, a block too long alone is
/// cut (code at line ends, other text at white space or CJK punctuation).
fn pack_blocks(blocks: &[Block], title: &str, max: usize) -> Vec<Packed> {
    let mut units: Vec<Unit> = Vec::new();
    let mut path: Vec<(u8, String)> = Vec::new();
    for b in blocks {
        if let Kind::Heading(level) = b.kind {
            while path.last().is_some_and(|(l, _)| *l >= level) {
                path.pop();
            }
            path.push((level, b.heading.clone()));
        }
        let names: Vec<String> = path.iter().map(|(_, n)| n.clone()).collect();
        let code = b.kind == Kind::Code;
        // A fenced block cut in pieces: each piece fenced again, so that no piece's lines
        // read as prose (room for the two fence lines kept).
        let fence: Option<String> = code
            .then(|| b.text.chars.iter().take_while(|c| **c == '`' || **c == '~').collect::<String>())
            .filter(|f| f.chars().count() >= 3);
        let room = if fence.is_some() { max.saturating_sub(8).max(1) } else { max };
        let pieces = cut(&b.text.chars, room, code);
        let last = pieces.len().saturating_sub(1);
        for (k, &(s, e)) in pieces.iter().enumerate() {
            let mut text = Vec::new();
            if let (Some(f), true) = (&fence, k > 0) {
                text.extend(f.chars().chain(['\n']));
            }
            text.extend_from_slice(&b.text.chars[s..e]);
            if let (Some(f), true) = (&fence, k < last) {
                text.extend(['\n'].into_iter().chain(f.chars()));
            }
            units.push(Unit {
                text,
                start: b.text.at[s],
                end: b.text.at[e - 1] + 1,
                kind: b.kind,
                path: names.clone(),
            });
        }
    }
    let mut out: Vec<Packed> = Vec::new();
    let mut current: Vec<Unit> = Vec::new();
    let mut filled = 0;
    let flush = |current: &mut Vec<Unit>, out: &mut Vec<Packed>| {
        if current.is_empty() {
            return;
        }
        // Blocks apart by a blank line; a table's rows, and a list's items, line by line.
        let mut text = String::new();
        for (k, u) in current.iter().enumerate() {
            if k > 0 {
                let run = u.kind == current[k - 1].kind && matches!(u.kind, Kind::Row | Kind::Item);
                text.push_str(if run { "\n" } else { "\n\n" });
            }
            text.extend(u.text.iter());
        }
        // The path of the chunk's first text (a chunk of headings only: its last heading's).
        let at = current.iter().find(|u| !u.heading()).unwrap_or(current.last().expect("not empty"));
        let mut names: &[String] = &at.path;
        // The title as the root of every path says nothing (`WALDEN` under `Walden`).
        let same = |a: &str, b: &str| {
            let key =
                |s: &str| s.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect::<String>();
            key(a) == key(b)
        };
        if names.first().is_some_and(|n| same(n, title)) {
            names = &names[1..];
        }
        out.push(Packed {
            text,
            start: current[0].start,
            end: current.last().expect("not empty").end,
            section: names.join(SECTION_SEPARATOR),
        });
        current.clear();
    };
    for u in units {
        let w = u.text.iter().copied().map(width).sum::<usize>();
        let starts_section = u.heading() && current.iter().any(|c| !c.heading());
        if starts_section || (!current.is_empty() && filled + 2 + w > max) {
            flush(&mut current, &mut out);
            filled = 0;
        }
        filled += if current.is_empty() { w } else { w + 2 };
        current.push(u);
    }
    flush(&mut current, &mut out);
    out
}

/// How much of a chunk's room a character takes: a CJK character carries about as much
/// text (and as many model tokens) as a short English word, so it counts three.
fn width(c: char) -> usize {
    // CJK punctuation and full-width forms are as wide as the characters they sit among.
    if ragctx_core::text::is_cjk(c) || matches!(c as u32, 0x3000..=0x303F | 0xFF00..=0xFFEF) {
        3
    } else {
        1
    }
}

/// Whether a span may end after `c`: white space, or a CJK sentence or clause end (CJK
/// text has no spaces to cut at).
fn cuts_after(c: char) -> bool {
    c.is_whitespace() || matches!(c, '。' | '！' | '？' | '；' | '，' | '、' | '：')
}

/// Spans of `chars` of at most `max` width ([`width`]: a character, three for CJK), leading
/// and trailing white space left out: the whole when it fits, else cut past half the width at
/// the last line end (`code`), or white space or CJK punctuation, before the limit.
fn cut(chars: &[char], max: usize, code: bool) -> Vec<(usize, usize)> {
    // at[i]: the width of chars[..i].
    let mut at = Vec::with_capacity(chars.len() + 1);
    at.push(0);
    for &c in chars {
        at.push(at.last().copied().unwrap_or(0) + width(c));
    }
    let w = |s: usize, e: usize| at[e] - at[s];
    let mut out = Vec::new();
    let (mut s, mut end) = (0, chars.len());
    while s < end && chars[s].is_whitespace() {
        s += 1;
    }
    while end > s && chars[end - 1].is_whitespace() {
        end -= 1;
    }
    while w(s, end) > max {
        // The furthest index whose span from s still fits.
        let limit = (s + 1..=end).take_while(|&k| w(s, k) <= max).last().unwrap_or(s + 1);
        let half = (s + 1..=limit).find(|&k| w(s, k) >= max / 2).unwrap_or(limit);
        let line_end = code.then(|| (half + 1..=limit).rev().find(|&k| chars[k - 1] == '\n')).flatten();
        let cut = line_end.or_else(|| (half + 1..=limit).rev().find(|&k| cuts_after(chars[k - 1]))).unwrap_or(limit);
        let mut e = cut;
        while e > s && chars[e - 1].is_whitespace() {
            e -= 1;
        }
        out.push((s, e));
        s = cut;
        while s < end && chars[s].is_whitespace() {
            s += 1;
        }
    }
    if end > s {
        out.push((s, end));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_have_stable_ids_offsets_and_fit() {
        let para = "Word ".repeat(150);
        let doc = format!("# Guide\n\nIntro line.\n\n{para}\n\n{para}\n\nEnd.");
        let a = chunk_document("docs/guide.md", doc.as_bytes(), DocumentFormat::Markdown).unwrap();
        let b = chunk_document("docs/guide.md", doc.as_bytes(), DocumentFormat::Markdown).unwrap();
        assert_eq!(a, b, "stable");
        assert!(a.len() >= 2);
        let chars: Vec<char> = doc.chars().collect();
        for (i, c) in a.iter().enumerate() {
            let ch = &c.chunk;
            assert_eq!(ch.id.as_str(), format!("docs/guide.md#{i}"));
            assert_eq!(ch.title, "Guide");
            assert!(ch.text.chars().count() <= CHUNK_CHARS);
            let (s, e) = (ch.start.unwrap() as usize, ch.end.unwrap() as usize);
            let span: String = chars[s..e].iter().collect();
            assert_eq!(span.split_whitespace().collect::<Vec<_>>(), ch.text.split_whitespace().collect::<Vec<_>>());
        }
        let all: String = a.iter().map(|c| c.chunk.text.as_str()).collect::<Vec<_>>().join(" ");
        assert_eq!(all.split_whitespace().count(), doc.split_whitespace().count(), "no word lost");
    }

    #[test]
    fn cjk_text_counts_wider_and_is_cut_after_its_punctuation() {
        // One paragraph of 600 CJK characters in sentences of 20: 1,800 wide.
        let para = "植物需要光照和水分也需要空气和养分。".repeat(30);
        let doc = format!("# 指南\n\n{para}");
        let chunks = chunk_document("zh/guide.md", doc.as_bytes(), DocumentFormat::Markdown).unwrap();
        assert!(chunks.len() >= 2, "600 CJK characters do not fit one chunk");
        for c in &chunks[..chunks.len() - 1] {
            let t = &c.chunk.text;
            assert!(t.chars().map(width).sum::<usize>() <= CHUNK_CHARS, "{}", t.chars().count());
            assert!(t.ends_with('。') || t.ends_with("指南"), "cut after a sentence: {t}");
        }
        let all: String = chunks.iter().map(|c| c.chunk.text.as_str()).collect();
        assert_eq!(
            all.chars().filter(|c| !c.is_whitespace()).count(),
            doc.chars().filter(|c| !c.is_whitespace()).count()
        );
    }

    /// Markdown's inline HTML is read as the text it holds (an empty anchor is no chunk and
    /// its id is not text); a BOM is not text (the first heading titles the file); HTML's
    /// inline elements keep the space between them and its declared charset is honoured.
    #[test]
    fn inline_html_boms_and_charsets() {
        let md = "\u{feff}# Ownership\n\n<a id=\"ch04-01-what-is-ownership\"></a>\n\nEach value has an <em>owner</em> and a <a href=\"#x\">scope</a>; `a <b> c` stays.\n";
        let c = chunk_document("book.md", md.as_bytes(), DocumentFormat::Markdown).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].chunk.title, "Ownership");
        let words: Vec<&str> = c[0].chunk.text.split_whitespace().collect();
        assert_eq!(words.join(" "), "# Ownership Each value has an owner and a scope ; `a <b> c` stays.");
        assert!(!c[0].chunk.text.contains("ch04"), "{}", c[0].chunk.text);
        let html = b"<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=windows-1252\"><title>Caf\xe9 notes</title></head><body><p><b>ISBN</b>\n<span>978-0-14</span></p><p><span>1</span> <span>Etymology</span></p></body></html>";
        let c = chunk_document("cafe.html", html, DocumentFormat::Html).unwrap();
        assert_eq!(c[0].chunk.title, "Café notes");
        assert!(
            c[0].chunk.text.contains("ISBN 978-0-14") && c[0].chunk.text.contains("1 Etymology"),
            "{}",
            c[0].chunk.text
        );
        // Declared gb2312 but saved as UTF-8 (and no BOM): read as the UTF-8 it is.
        let saved = "<html><head><meta charset=\"gb2312\"><title>深度学习</title></head><body><h1>概述</h1><h3></h3><p>正文。</p></body></html>";
        let c = chunk_document("zh.html", saved.as_bytes(), DocumentFormat::Html).unwrap();
        assert_eq!(c[0].chunk.title, "深度学习");
        // An empty heading names no section.
        assert_eq!(c[0].chunk.metadata.get(SECTION_KEY), Some(&MetaValue::String("概述".into())), "{:?}", c[0].chunk);
        // Undeclared and not UTF-8: refused with its line, as before.
        assert!(chunk_document("x.html", b"<p>caf\xe9</p>", DocumentFormat::Html).is_err());
    }

    #[test]
    fn html_text_and_title() {
        let html = "<html><head><title>Fees &amp; Waivers</title><style>p{}</style></head><body><p>One&nbsp;two</p><script>x()</script><p>Three &lt;4&gt; &#233;</p></body></html>";
        let c = chunk_document("a.html", html.as_bytes(), DocumentFormat::Html).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].chunk.title, "Fees & Waivers");
        assert_eq!(c[0].chunk.text.split_whitespace().collect::<Vec<_>>(), vec!["One", "two", "Three", "<4>", "é"]);
        // Without a <title>, the first heading names the page.
        let c = chunk_document("b.html", b"<h3>Repotting</h3><p>Use a larger pot.</p>", DocumentFormat::Html).unwrap();
        assert_eq!(c[0].chunk.title, "Repotting");
    }

    #[test]
    fn markdown_is_titled_by_any_heading_and_chunks_carry_their_section() {
        let long = "Errors propagate upward through the call stack when the question mark is used. ".repeat(8);
        let md = format!(
            "## Recoverable Errors with Result\n\nMost errors are not\nserious enough to stop.\n\n### Propagating Errors\n\n{long}\n\n```rust\nlet f = File::open(p)?;\n```\n\n#### A Shortcut\n\nThe `?` operator\nshortens it.\n"
        );
        let c = chunk_document("ch09-02.md", md.as_bytes(), DocumentFormat::Markdown).unwrap();
        let section = |i: usize| c[i].chunk.metadata.get(SECTION_KEY).cloned();
        assert!(c.iter().all(|c| c.chunk.title == "Recoverable Errors with Result"));
        assert_eq!(c[0].chunk.text, "## Recoverable Errors with Result\n\nMost errors are not serious enough to stop.");
        assert_eq!(section(0), None, "the title's own heading is not a section");
        assert!(c[1].chunk.text.starts_with("### Propagating Errors\n\nErrors propagate"));
        assert!(c[1].chunk.text.ends_with("```rust\nlet f = File::open(p)?;\n```"), "{}", c[1].chunk.text);
        assert_eq!(section(1), Some(MetaValue::String("Propagating Errors".into())));
        assert_eq!(c[2].chunk.text, "#### A Shortcut\n\nThe `?` operator shortens it.");
        assert_eq!(section(2), Some(MetaValue::String("Propagating Errors › A Shortcut".into())));
        // Spans follow each other in the source and cover what each chunk's text was read from.
        let chars: Vec<char> = md.chars().collect();
        for w in c.windows(2) {
            assert!(w[0].chunk.end.unwrap() <= w[1].chunk.start.unwrap());
        }
        for ch in &c {
            let span: String = chars[ch.chunk.start.unwrap() as usize..ch.chunk.end.unwrap() as usize].iter().collect();
            assert_eq!(
                span.split_whitespace().collect::<Vec<_>>(),
                ch.chunk.text.split_whitespace().collect::<Vec<_>>()
            );
        }
        // A heading path longer than a metadata string may hold keeps its start, whole characters.
        let long = format!("# Tea\n\n## {}\n\nText.\n", "🌿".repeat(400));
        let c = chunk_document("l.md", long.as_bytes(), DocumentFormat::Markdown).unwrap();
        match c[0].chunk.metadata.get(SECTION_KEY) {
            Some(MetaValue::String(s)) => assert!(s.len() <= 512 && s.starts_with('🌿'), "{} bytes", s.len()),
            other => panic!("{other:?}"),
        }
        // A part's name or a placeholder does not name the document: the first heading that does.
        let parts = "# Contents\n\nOne.\n\n# Foreword\n\nTwo.\n\n# 前 言\n\n三。\n\n# The Tidal Atlas\n\nThree.\n";
        let c = chunk_document("atlas.md", parts.as_bytes(), DocumentFormat::Markdown).unwrap();
        assert!(c.iter().all(|c| c.chunk.title == "The Tidal Atlas"), "{:?}", c[0].chunk.title);
        // Front matter names the document before any heading.
        let c =
            chunk_document("g.md", b"---\ntitle: Care guide\n---\n# Ferns\n\nMist them.\n", DocumentFormat::Markdown)
                .unwrap();
        assert_eq!(c[0].chunk.title, "Care guide");
        assert_eq!(c[0].chunk.metadata.get(SECTION_KEY), Some(&MetaValue::String("Ferns".into())));
    }

    #[test]
    fn code_blocks_and_table_rows_are_cut_only_when_one_alone_is_too_long() {
        let rows: String = (0..60).map(|i| format!("| row {i} | value {i} of the table |\n")).collect();
        let code: String = (0..80).map(|i| format!("let value_{i} = compute({i});\n")).collect();
        let md = format!("# T\n\n{rows}\n```\n{code}```\n");
        let c = chunk_document("t.md", md.as_bytes(), DocumentFormat::Markdown).unwrap();
        for ch in &c {
            assert!(ch.chunk.text.chars().count() <= CHUNK_CHARS);
            for line in ch.chunk.text.lines() {
                let whole = line.is_empty()
                    || line.starts_with('#')
                    || line.starts_with("```")
                    || (line.starts_with("| row") && line.ends_with("table |"))
                    || (line.starts_with("let value_") && line.ends_with(");"));
                assert!(whole, "a row or a code line was cut: {line:?}");
            }
        }
        let all: String = c.iter().map(|c| c.chunk.text.as_str()).collect::<Vec<_>>().join("\n");
        assert_eq!(all.matches("| row ").count(), 60);
        assert_eq!(all.matches("let value_").count(), 80);
        // Every piece of the cut code block is fenced: its lines never read as prose.
        for ch in c.iter().filter(|c| c.chunk.text.contains("let value_")) {
            let fences = ch.chunk.text.lines().filter(|l| l.starts_with("```")).count();
            assert_eq!(fences, 2, "{}", ch.chunk.text);
        }
    }

    #[test]
    fn bad_documents_fail_clearly() {
        let e = chunk_document("x.txt", b"ok\n\xff", DocumentFormat::Text).unwrap_err();
        assert_eq!(e.to_string(), "x.txt:2: invalid UTF-8");
        assert!(chunk_document("x.txt", b"  \n ", DocumentFormat::Text).is_err());
    }

    /// Documents of random pieces of Markdown syntax, text and CJK, some long: none panics,
    /// every chunk fits, holds text, and spans follow each other in the source.
    #[test]
    fn random_markdown_never_breaks_the_chunker() {
        const PIECES: &[&str] = &[
            "# ",
            "## ",
            "###### ",
            "\n",
            "\n\n",
            "```",
            "~~~",
            "| a | b |",
            "|",
            "- ",
            "* ",
            "1. ",
            "> ",
            "    ",
            "\t",
            "---",
            "===",
            "word ",
            "Sentence ends. ",
            "中文句子。",
            "\r\n",
            "<h2>",
            "</p>",
            "<pre>",
            "&amp;",
            " ",
        ];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..3_000 {
            let n = (next() % 400) as usize;
            let doc: String = (0..n).map(|_| PIECES[(next() % PIECES.len() as u64) as usize]).collect();
            let chars = doc.chars().count() as u64;
            for format in [DocumentFormat::Markdown, DocumentFormat::Text, DocumentFormat::Html] {
                let Ok(chunks) = chunk_document("r.md", doc.as_bytes(), format) else { continue };
                let mut last_end = 0;
                for c in &chunks {
                    let c = &c.chunk;
                    assert!(!c.text.trim().is_empty(), "round {round}: an empty chunk of {doc:?}");
                    assert!(c.text.chars().map(width).sum::<usize>() <= CHUNK_CHARS, "round {round}: too long");
                    let (s, e) = (c.start.unwrap(), c.end.unwrap());
                    assert!(s < e && s >= last_end, "round {round}: span {s}..{e} after {last_end} in {doc:?}");
                    if format != DocumentFormat::Html {
                        assert!(e <= chars, "round {round}: span past the end");
                    }
                    last_end = e;
                }
            }
        }
    }
}
