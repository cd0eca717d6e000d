use crate::{InputError, SourcedChunk};
use ragctx_core::Chunk;

/// Target size of a chunk in characters (about 200–250 MiniLM tokens of English, under the
/// embedder's 256-token window).
pub const CHUNK_CHARS: usize = 1_000;

/// A document format chunked here (JSONL is read as pre-chunked instead); a document that
/// names no title is titled by its file name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DocumentFormat {
    /// `.md`: titled by its first `# ` heading; the text kept as written.
    Markdown,
    /// `.txt`: titled by its first non-empty line (up to 100 characters).
    Text,
    /// `.html`: the visible text, titled by its `<title>`.
    Html,
}

impl DocumentFormat {
    /// By file extension: `.md`/`.markdown`, `.txt`, `.html`/`.htm`.
    pub fn from_path(path: &str) -> Option<Self> {
        let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
        match ext.as_str() {
            "md" | "markdown" => Some(Self::Markdown),
            "txt" => Some(Self::Text),
            "html" | "htm" => Some(Self::Html),
            _ => None,
        }
    }
}

/// Chunks one document. `document_id` is the path relative to the ingested argument;
/// chunk ids are `{document_id}#{ordinal}`, stable as long as the text is.
pub fn chunk_document(
    document_id: &str,
    bytes: &[u8],
    format: DocumentFormat,
) -> Result<Vec<SourcedChunk>, InputError> {
    let raw = std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
        InputError { file: document_id.to_owned(), line: Some(line), message: "invalid UTF-8".into() }
    })?;
    let (title, text) = match format {
        DocumentFormat::Html => {
            let (title, text) = html_to_text(raw);
            (title.unwrap_or_default(), text)
        }
        DocumentFormat::Markdown => {
            let title = raw.lines().find_map(|l| l.strip_prefix("# ")).map(|t| t.trim().to_owned());
            (title.unwrap_or_default(), raw.to_owned())
        }
        DocumentFormat::Text => {
            let title = raw.lines().map(str::trim).find(|l| !l.is_empty()).map(|l| l.chars().take(100).collect());
            (title.unwrap_or_default(), raw.to_owned())
        }
    };
    let title = if title.is_empty() { document_id.rsplit('/').next().unwrap_or(document_id).to_owned() } else { title };
    let chars: Vec<char> = text.chars().collect();
    let spans = pack(&chars, CHUNK_CHARS);
    if spans.is_empty() {
        return Err(InputError { file: document_id.to_owned(), line: None, message: "document has no text".into() });
    }
    Ok(spans
        .into_iter()
        .enumerate()
        .map(|(i, (s, e))| SourcedChunk {
            chunk: Chunk {
                id: format!("{document_id}#{i}").into(),
                document_id: document_id.into(),
                title: title.clone(),
                text: chars[s..e].iter().collect(),
                ordinal: Some(i as u32),
                start: Some(s as u64),
                end: Some(e as u64),
                weight: 1.0,
                tokens: None,
                metadata: Default::default(),
            },
            file: document_id.to_owned(),
            line: None,
        })
        .collect())
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

/// Character spans of at most `max` width ([`width`]: a character, three for CJK), cut at
/// paragraph breaks where possible, else at white space or CJK punctuation; leading and
/// trailing white space is left out of each span.
fn pack(chars: &[char], max: usize) -> Vec<(usize, usize)> {
    // at[i]: the width of chars[..i].
    let mut at = Vec::with_capacity(chars.len() + 1);
    at.push(0);
    for &c in chars {
        at.push(at.last().copied().unwrap_or(0) + width(c));
    }
    let w = |s: usize, e: usize| at[e] - at[s];
    // Paragraphs: runs separated by a blank line.
    let mut paras: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i >= chars.len() {
            break;
        }
        let start = i;
        let mut end = i;
        while i < chars.len() {
            if chars[i] == '\n' {
                let mut j = i + 1;
                while j < chars.len() && chars[j] != '\n' && chars[j].is_whitespace() {
                    j += 1;
                }
                if j < chars.len() && chars[j] == '\n' {
                    break;
                }
            }
            if !chars[i].is_whitespace() {
                end = i + 1;
            }
            i += 1;
        }
        // Long paragraphs are cut at the last white space (or CJK punctuation) before the limit.
        let mut s = start;
        while w(s, end) > max {
            // The furthest index whose span from s still fits.
            let limit = (s + 1..=end).take_while(|&k| w(s, k) <= max).last().unwrap_or(s + 1);
            let half = (s + 1..=limit).find(|&k| w(s, k) >= max / 2).unwrap_or(limit);
            let cut = (half + 1..=limit).rev().find(|&k| cuts_after(chars[k - 1])).unwrap_or(limit);
            let mut e = cut;
            while e > s && chars[e - 1].is_whitespace() {
                e -= 1;
            }
            paras.push((s, e));
            s = cut;
            while s < end && chars[s].is_whitespace() {
                s += 1;
            }
        }
        if end > s {
            paras.push((s, end));
        }
    }
    // Consecutive paragraphs share a chunk while they fit.
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (s, e) in paras {
        match out.last_mut() {
            Some(last) if w(last.0, e) <= max => last.1 = e,
            _ => out.push((s, e)),
        }
    }
    out
}

/// Visible text of an HTML page and its `<title>`: scripts and styles removed, block tags
/// turned into line breaks, common entities decoded.
pub fn html_to_text(html: &str) -> (Option<String>, String) {
    let lower = html.to_ascii_lowercase();
    let mut out = String::with_capacity(html.len());
    let mut title = None;
    let mut i = 0;
    let b = html.as_bytes();
    while i < b.len() {
        if b[i] == b'<' {
            let close = match lower[i..].find('>') {
                Some(c) => i + c,
                None => break,
            };
            let tag = lower[i + 1..close].trim_start_matches('/');
            let name: String = tag.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            if matches!(name.as_str(), "script" | "style" | "title") && !lower[i + 1..].starts_with('/') {
                let end_tag = format!("</{name}");
                let end = lower[close..].find(&end_tag).map(|e| close + e).unwrap_or(b.len());
                if name == "title" {
                    title = Some(decode_entities(html[close + 1..end].trim()));
                }
                i = lower[end..].find('>').map(|e| end + e + 1).unwrap_or(b.len());
                continue;
            }
            if matches!(
                name.as_str(),
                "p" | "div"
                    | "br"
                    | "li"
                    | "tr"
                    | "h1"
                    | "h2"
                    | "h3"
                    | "h4"
                    | "h5"
                    | "h6"
                    | "section"
                    | "article"
                    | "table"
                    | "ul"
                    | "ol"
                    | "pre"
                    | "blockquote"
            ) {
                out.push_str("\n\n");
            }
            i = close + 1;
        } else {
            let next = lower[i..].find('<').map(|n| i + n).unwrap_or(b.len());
            out.push_str(&decode_entities(&html[i..next]));
            i = next;
        }
    }
    (title, out)
}

fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(a) = rest.find('&') {
        out.push_str(&rest[..a]);
        let tail = &rest[a..];
        let semi = tail.find(';').filter(|&k| k <= 10);
        let decoded = semi.and_then(|k| {
            let ent = &tail[1..k];
            let c = match ent {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" | "#39" => Some('\''),
                "nbsp" => Some(' '),
                _ if ent.starts_with("#x") => u32::from_str_radix(&ent[2..], 16).ok().and_then(char::from_u32),
                _ if ent.starts_with('#') => ent[1..].parse().ok().and_then(char::from_u32),
                _ => None,
            };
            c.map(|c| (c, k))
        });
        match decoded {
            Some((c, k)) => {
                out.push(c);
                rest = &tail[k + 1..];
            }
            None => {
                out.push('&');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
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
            assert_eq!(chars[s..e].iter().collect::<String>(), ch.text);
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

    #[test]
    fn html_text_and_title() {
        let html = "<html><head><title>Fees &amp; Waivers</title><style>p{}</style></head><body><p>One&nbsp;two</p><script>x()</script><p>Three &lt;4&gt; &#233;</p></body></html>";
        let (t, text) = html_to_text(html);
        assert_eq!(t.as_deref(), Some("Fees & Waivers"));
        assert_eq!(text.split_whitespace().collect::<Vec<_>>(), vec!["One", "two", "Three", "<4>", "é"]);
        let c = chunk_document("a.html", html.as_bytes(), DocumentFormat::Html).unwrap();
        assert_eq!(c[0].chunk.title, "Fees & Waivers");
    }

    #[test]
    fn bad_documents_fail_clearly() {
        let e = chunk_document("x.txt", b"ok\n\xff", DocumentFormat::Text).unwrap_err();
        assert_eq!(e.to_string(), "x.txt:2: invalid UTF-8");
        assert!(chunk_document("x.txt", b"  \n ", DocumentFormat::Text).is_err());
    }
}
