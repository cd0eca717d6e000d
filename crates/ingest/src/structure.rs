//! Documents read by their structure before they are chunked: Markdown's headings, paragraphs,
//! list items, code blocks and table rows (plain text's paragraphs and list items), with the
//! lines of a hard-wrapped paragraph or list item joined into one, so that a sentence never
//! ends at a line's end. Every character of a block's text keeps the position in the source
//! it came from, so a chunk's offsets name its span of the source exactly.

use ragctx_core::text::{closes_fence, code_fence, fenced_lines};

/// What a block of a document is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A heading of its level (1–6): `#` lines and underlined (setext) headings.
    Heading(u8),
    /// A paragraph, its lines joined with spaces (a block quote's too).
    Paragraph,
    /// A list item (`-`, `*`, `+`, `1.`, `1)`), its lines joined.
    Item,
    /// A fenced or indented code block, its lines as written, fences included.
    Code,
    /// A table row (`| a | b |`), a unit of its own.
    Row,
}

/// Text with the source position of each of its characters.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Text {
    pub chars: Vec<char>,
    pub at: Vec<usize>,
}

impl Text {
    fn push(&mut self, c: char, at: usize) {
        self.chars.push(c);
        self.at.push(at);
    }
    /// Appends `source[s..e]` as it is.
    fn extend(&mut self, source: &[char], s: usize, e: usize) {
        for (k, &c) in source[s..e].iter().enumerate() {
            self.push(c, s + k);
        }
    }
    pub fn string(&self) -> String {
        self.chars.iter().collect()
    }
}

/// One block of a document.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Block {
    pub kind: Kind,
    /// A heading's own words (no `#`, no underline); empty for other blocks.
    pub heading: String,
    pub text: Text,
}

/// A document read by its structure.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    /// The `title:` of a Markdown front matter block.
    pub front_title: Option<String>,
    pub blocks: Vec<Block>,
}

/// Line spans `(start, end)` of `chars`, the newline excluded.
fn lines(chars: &[char]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut s = 0;
    for (i, &c) in chars.iter().enumerate() {
        if c == '\n' {
            let e = if i > s && chars[i - 1] == '\r' { i - 1 } else { i };
            out.push((s, e));
            s = i + 1;
        }
    }
    if s < chars.len() {
        out.push((s, chars.len()));
    }
    out
}

/// The span `(s, e)` without leading and trailing white space.
fn trimmed(chars: &[char], (mut s, mut e): (usize, usize)) -> (usize, usize) {
    while s < e && chars[s].is_whitespace() {
        s += 1;
    }
    while e > s && chars[e - 1].is_whitespace() {
        e -= 1;
    }
    (s, e)
}

fn indent(chars: &[char], (s, e): (usize, usize)) -> usize {
    chars[s..e].iter().take_while(|c| **c == ' ' || **c == '\t').map(|c| if *c == '\t' { 4 } else { 1 }).sum()
}

/// `#` to `######` followed by a space or the line's end: the level and the heading's words.
fn atx_heading(line: &str) -> Option<(u8, String)> {
    let t = line.trim_start();
    if line.len() - t.len() > 3 {
        return None;
    }
    let level = t.chars().take_while(|c| *c == '#').count();
    let rest = &t[level..];
    if !(1..=6).contains(&level) || !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    // A closing run of `#` (after a space) is not part of the heading.
    let mut words = rest.trim();
    let without = words.trim_end_matches('#');
    if without.is_empty() || without.ends_with([' ', '\t']) {
        words = without.trim_end();
    }
    Some((level as u8, words.to_owned()))
}

/// `---`, `***`, `___` (spaces allowed between): a thematic break.
fn thematic_break(t: &str) -> bool {
    let marks: Vec<char> = t.chars().filter(|c| !c.is_whitespace()).collect();
    marks.len() >= 3 && matches!(marks[0], '-' | '*' | '_') && marks.iter().all(|c| *c == marks[0])
}

/// `[label]: destination`: a link reference definition.
fn link_definition(t: &str) -> bool {
    let Some(rest) = t.strip_prefix('[') else { return false };
    match rest.find("]:") {
        Some(k) => k > 0 && !rest[..k].contains(['[', ']']) && !rest[k + 2..].trim().is_empty(),
        None => false,
    }
}

/// A line that is one HTML tag and nothing else (`<div class="x">`, `</Listing>`, `<br/>`).
fn lone_tag(t: &str) -> bool {
    let inner = match t.strip_prefix('<').and_then(|r| r.strip_suffix('>')) {
        Some(i) => i,
        None => return false,
    };
    let name = inner.trim_start_matches('/');
    name.starts_with(|c: char| c.is_ascii_alphabetic()) && !inner.contains(['<', '>'])
}

/// The length of a list item's marker and the space after it (`- `, `* `, `+ `, `12. `, `3) `).
fn item_marker(t: &str) -> Option<usize> {
    let b = t.as_bytes();
    if b.len() >= 2 && matches!(b[0], b'-' | b'*' | b'+') && (b[1] == b' ' || b[1] == b'\t') {
        return Some(2);
    }
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if (1..=9).contains(&digits)
        && b.len() > digits + 1
        && matches!(b[digits], b'.' | b')')
        && (b[digits + 1] == b' ' || b[digits + 1] == b'\t')
    {
        return Some(digits + 2);
    }
    None
}

/// A line of plain text (a DOCX paragraph, an HTML text run) as [`parse`] must read it: a
/// leading character Markdown reads as structure — a heading, list, quote, table, fence or
/// underline mark, or an ordered list's number — escaped with a backslash, which [`parse`]
/// drops again. `<p>```</p>` would otherwise open a code block that swallows the rest.
pub(crate) fn escape_line_start(words: &str) -> String {
    let structural = words.starts_with(['#', '|', '>', '`', '~', '-', '*', '+', '=', '_', '\\', '[', '<'])
        || words.starts_with(|c: char| c.is_ascii_digit());
    if structural {
        format!("\\{words}")
    } else {
        words.to_owned()
    }
}

/// A paragraph or list item being read: its lines joined with single spaces.
struct Open {
    kind: Kind,
    text: Text,
}

impl Open {
    /// Appends the words of `chars[s..e]`, joined to what is there by one space.
    fn join(&mut self, chars: &[char], (s, e): (usize, usize)) {
        let (s, e) = trimmed(chars, (s, e));
        if s == e {
            return;
        }
        if let Some(&last) = self.text.at.last() {
            self.text.push(' ', last + 1);
        }
        // Runs of white space inside a line (a comment blanked out, spaces for alignment) are
        // one space, as a reader sees them.
        for (k, &c) in chars.iter().enumerate().take(e).skip(s) {
            let space = c.is_whitespace();
            if !(space && self.text.chars.last().is_some_and(|p| p.is_whitespace())) {
                self.text.push(if space { ' ' } else { c }, k);
            }
        }
    }
}

/// Markdown's HTML comments (`<!-- … -->`, across lines too) blanked out, outside fenced code:
/// what a reader of the rendered page never sees. Line breaks stay, so every other character
/// keeps its position.
pub(crate) fn hide_comments(chars: &mut [char]) {
    let spans = lines(chars);
    let texts: Vec<String> = spans.iter().map(|&(s, e)| chars[s..e].iter().collect()).collect();
    let code = fenced_lines(&texts);
    let mut inside = false;
    for (k, &(s, e)) in spans.iter().enumerate() {
        if code[k] && !inside {
            continue;
        }
        let mut at = s;
        while at < e {
            if !inside && chars[at..e].starts_with(&['<', '!', '-', '-']) {
                inside = true;
                chars[at..at + 4].fill(' ');
                at += 4;
            } else if inside && chars[at..e].starts_with(&['-', '-', '>']) {
                inside = false;
                chars[at..at + 3].fill(' ');
                at += 3;
            } else {
                if inside {
                    chars[at] = ' ';
                }
                at += 1;
            }
        }
    }
}

/// Hides Markdown's inline HTML tags outside code (`<a id="x"></a>`, `<b>`, `<br/>`): the
/// text they hold stays, the tags become spaces (positions kept), so that an empty anchor
/// makes no chunk and its id is not searched. A `<` that opens no tag stays.
pub(crate) fn hide_tags(chars: &mut [char]) {
    let spans = lines(chars);
    let texts: Vec<String> = spans.iter().map(|&(s, e)| chars[s..e].iter().collect()).collect();
    let code = fenced_lines(&texts);
    for (k, &(s, e)) in spans.iter().enumerate() {
        if code[k] || texts[k].starts_with("    ") || texts[k].starts_with('\t') {
            continue;
        }
        let mut at = s;
        let mut in_code = false;
        while at < e {
            match chars[at] {
                '`' => in_code = !in_code,
                '<' if !in_code => {
                    let close = chars[at..e].iter().position(|&c| c == '>').map(|p| at + p);
                    let name_starts = chars.get(at + 1).is_some_and(|c| c.is_ascii_alphabetic() || *c == '/');
                    if let (Some(close), true) = (close, name_starts) {
                        let tag: String = chars[at + 1..close].iter().collect();
                        let name: String =
                            tag.trim_start_matches('/').chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
                        // A tag: a known name, no space before it (`a < b` is not one).
                        if !name.is_empty()
                            && !tag.contains('<')
                            && INLINE_TAGS.contains(&name.to_ascii_lowercase().as_str())
                        {
                            chars[at..=close].fill(' ');
                            at = close;
                        }
                    }
                }
                _ => {}
            }
            at += 1;
        }
    }
}

/// The HTML tags Markdown writers put in running text.
const INLINE_TAGS: &[&str] = &[
    "a", "abbr", "b", "br", "code", "del", "em", "font", "i", "img", "ins", "kbd", "mark", "q", "s", "small", "span",
    "strong", "sub", "sup", "u", "var", "wbr", "div", "p", "details", "summary", "center", "hr",
];

/// Reads `chars` into blocks: Markdown when `markdown`, else plain text (paragraphs separated
/// by blank lines, and list items).
pub(crate) fn parse(chars: &[char], markdown: bool) -> Parsed {
    let mut out = Parsed::default();
    let spans = lines(chars);
    let texts: Vec<String> = spans.iter().map(|&(s, e)| chars[s..e].iter().collect()).collect();
    let line = |k: usize| texts[k].as_str();
    let mut open: Option<Open> = None;
    let flush = |open: &mut Option<Open>, out: &mut Parsed| {
        if let Some(o) = open.take() {
            if !o.text.chars.is_empty() {
                out.blocks.push(Block { kind: o.kind, heading: String::new(), text: o.text });
            }
        }
    };
    let mut k = 0;
    // Front matter: `---` on the first line up to the next `---` (or `...`).
    if markdown && !spans.is_empty() && line(0).trim_end() == "---" {
        if let Some(close) = (1..spans.len()).find(|&j| matches!(line(j).trim_end(), "---" | "...")) {
            out.front_title = (1..close).find_map(|j| {
                let l = line(j);
                let v = l.strip_prefix("title:")?.trim().trim_matches(|c| c == '"' || c == '\'').trim().to_owned();
                (!v.is_empty()).then_some(v)
            });
            k = close + 1;
        }
    }
    while k < spans.len() {
        let (s, e) = spans[k];
        let l = line(k);
        let t = l.trim();
        if markdown {
            if let Some(open_fence) = code_fence(l) {
                flush(&mut open, &mut out);
                let mut text = Text::default();
                text.extend(chars, s, e);
                let mut j = k + 1;
                while j < spans.len() {
                    let (js, je) = spans[j];
                    text.push('\n', js.saturating_sub(1));
                    text.extend(chars, js, je);
                    let closes = closes_fence(line(j), open_fence);
                    j += 1;
                    if closes {
                        break;
                    }
                }
                out.blocks.push(Block { kind: Kind::Code, heading: String::new(), text });
                k = j;
                continue;
            }
        }
        if t.is_empty() {
            flush(&mut open, &mut out);
            k += 1;
            continue;
        }
        // What a reader of the rendered page never sees: a link's reference definition
        // (`[label]: url`) and a line of one bare HTML tag (`<Listing …>`, `</div>`).
        if markdown && (link_definition(t) || lone_tag(t)) {
            flush(&mut open, &mut out);
            k += 1;
            continue;
        }
        if markdown {
            if let Some((level, words)) = atx_heading(l) {
                flush(&mut open, &mut out);
                // An empty heading (`<h3></h3>`, a lone `#`) shows nothing and names no section.
                if words.is_empty() {
                    k += 1;
                    continue;
                }
                let mut text = Text::default();
                let (ts, te) = trimmed(chars, (s, e));
                text.extend(chars, ts, te);
                out.blocks.push(Block { kind: Kind::Heading(level), heading: words, text });
                k += 1;
                continue;
            }
            // An underline turns the paragraph above it into a heading.
            let underline = t.chars().all(|c| c == '=') || (t.len() >= 2 && t.chars().all(|c| c == '-'));
            if underline && open.as_ref().is_some_and(|o| o.kind == Kind::Paragraph) {
                let o = open.take().expect("an open paragraph");
                let level = if t.starts_with('=') { 1 } else { 2 };
                let words = o.text.string();
                let mut text = Text::default();
                let first = o.text.at.first().copied().unwrap_or(s);
                for c in "#".repeat(level as usize).chars().chain([' ']) {
                    text.push(c, first);
                }
                text.chars.extend(o.text.chars);
                text.at.extend(o.text.at);
                out.blocks.push(Block { kind: Kind::Heading(level), heading: words, text });
                k += 1;
                continue;
            }
            if thematic_break(t) {
                flush(&mut open, &mut out);
                k += 1;
                continue;
            }
            if t.starts_with('|') {
                flush(&mut open, &mut out);
                let mut text = Text::default();
                let (ts, te) = trimmed(chars, (s, e));
                text.extend(chars, ts, te);
                out.blocks.push(Block { kind: Kind::Row, heading: String::new(), text });
                k += 1;
                continue;
            }
            // An indented code block: only where no paragraph or item goes on.
            if open.is_none() && indent(chars, (s, e)) >= 4 {
                let mut text = Text::default();
                let mut j = k;
                let mut last = k;
                while j < spans.len() && (line(j).trim().is_empty() || indent(chars, spans[j]) >= 4) {
                    if !line(j).trim().is_empty() {
                        last = j;
                    }
                    j += 1;
                }
                for (n, i) in (k..=last).enumerate() {
                    if n > 0 {
                        text.push('\n', spans[i].0.saturating_sub(1));
                    }
                    text.extend(chars, spans[i].0, spans[i].1);
                }
                out.blocks.push(Block { kind: Kind::Code, heading: String::new(), text });
                k = last + 1;
                continue;
            }
        }
        let lead = e - s - l.trim_start().chars().count();
        if item_marker(t).is_some() {
            flush(&mut open, &mut out);
            let mut o = Open { kind: Kind::Item, text: Text::default() };
            o.join(chars, (s + lead, e));
            open = Some(o);
        } else if markdown && t.starts_with('>') {
            // A block quote's lines: the marks dropped, the first kept as the quote's sign.
            let body = s + lead + t.chars().take_while(|c| *c == '>' || *c == ' ').count();
            let o = open.get_or_insert_with(|| Open { kind: Kind::Paragraph, text: Text::default() });
            if o.text.chars.is_empty() {
                // `join` puts the one space between the sign and the words.
                o.text.push('>', s + lead);
            }
            o.join(chars, (body, e));
        } else {
            // A line opened by a backslash escape (`\# not a heading`): the backslash dropped.
            let escaped = markdown
                && t.starts_with('\\')
                && t[1..].starts_with(|c: char| c.is_ascii_punctuation() || c.is_ascii_digit());
            let from = if escaped { s + lead + 1 } else { s };
            open.get_or_insert_with(|| Open { kind: Kind::Paragraph, text: Text::default() }).join(chars, (from, e));
        }
        k += 1;
    }
    flush(&mut open, &mut out);
    out
}

/// Markdown of an HTML page, for [`parse`]: headings as `#` lines, list items as `- `, table
/// rows as `| a | b |`, `<pre>` as a fenced block, paragraphs and other blocks apart by a
/// blank line; scripts and styles removed, common entities decoded. Also the `<title>`.
pub(crate) fn html_to_markdown(html: &str) -> (Option<String>, String) {
    let lower = html.to_ascii_lowercase();
    let mut out = String::with_capacity(html.len());
    let mut title = None;
    let mut pre = false;
    // Header cells of the row being read: a row of them is followed by a delimiter row.
    let mut header_cells = 0;
    let mut i = 0;
    let b = html.as_bytes();
    while i < b.len() {
        if b[i] == b'<' {
            let close = match lower[i..].find('>') {
                Some(c) => i + c,
                None => break,
            };
            let closing = lower[i + 1..].starts_with('/');
            let tag = lower[i + 1..close].trim_start_matches('/');
            let name: String = tag.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            if matches!(name.as_str(), "script" | "style" | "title") && !closing {
                let end_tag = format!("</{name}");
                let end = lower[close..].find(&end_tag).map(|e| close + e).unwrap_or(b.len());
                if name == "title" {
                    title = Some(decode_entities(html[close + 1..end].trim()));
                }
                i = lower[end..].find('>').map(|e| end + e + 1).unwrap_or(b.len());
                continue;
            }
            match (name.as_str(), closing) {
                ("h1" | "h2" | "h3" | "h4" | "h5" | "h6", false) => {
                    let level = name[1..].parse::<usize>().unwrap_or(1);
                    out.push_str("\n\n");
                    out.push_str(&"#".repeat(level));
                    out.push(' ');
                }
                ("li", false) => out.push_str("\n- "),
                ("tr", false) => {
                    header_cells = 0;
                    out.push_str("\n|");
                }
                ("tr", true) if header_cells > 0 => {
                    out.push_str(&format!("\n|{}", " --- |".repeat(header_cells)));
                    header_cells = 0;
                }
                ("th", false) => {
                    header_cells += 1;
                    out.push(' ');
                }
                ("td" | "th", true) => out.push_str(" |"),
                ("td", false) => out.push(' '),
                ("br", _) => out.push('\n'),
                ("pre", false) => {
                    pre = true;
                    out.push_str("\n\n```\n");
                }
                ("pre", true) => {
                    pre = false;
                    out.push_str("\n```\n\n");
                }
                (
                    "p" | "div" | "section" | "article" | "table" | "ul" | "ol" | "blockquote" | "h1" | "h2" | "h3"
                    | "h4" | "h5" | "h6" | "header" | "footer" | "main" | "nav" | "dl" | "dt" | "dd",
                    _,
                ) => out.push_str("\n\n"),
                _ => {}
            }
            i = close + 1;
        } else {
            let next = lower[i..].find('<').map(|n| i + n).unwrap_or(b.len());
            let text = decode_entities(&html[i..next]);
            if pre {
                out.push_str(&text);
            } else {
                // Outside `<pre>`, white space (line breaks and indentation of the source
                // included) is one space, and none at the start of a line, where a mark that
                // Markdown would read as structure is escaped.
                let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
                if words.is_empty() {
                    // White space alone between two inline elements is a space between
                    // their words (`<b>ISBN</b> <span>978…</span>`).
                    if !text.is_empty() && !out.is_empty() && !out.ends_with([' ', '\n']) {
                        out.push(' ');
                    }
                } else {
                    if out.is_empty() || out.ends_with('\n') {
                        out.push_str(&escape_line_start(&words));
                    } else {
                        if !out.ends_with(' ') && text.starts_with(char::is_whitespace) {
                            out.push(' ');
                        }
                        out.push_str(&words);
                    }
                    if text.ends_with(char::is_whitespace) {
                        out.push(' ');
                    }
                }
            }
            i = next;
        }
    }
    (title, out)
}

/// `&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;`, `&nbsp;` and numeric entities decoded.
pub(crate) fn decode_entities(s: &str) -> String {
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
mod tests;
