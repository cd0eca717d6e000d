//! PDF read through its text layer (`pdf-extract` on `lopdf`, chosen by measuring: see
//! `bench/README.md`, "PDF"), each page into lines with their font size and position, then as
//! a reader sees it: running headers, footers and page numbers left out, a word hyphenated at
//! a line's end joined, a TeX accent set on its letter, a ligature spelt out, a bullet read as
//! a list item, a paragraph told by the space above it or its indent, and a heading by its
//! larger type. The result is Markdown for [`crate::structure::parse`], with the character
//! offset where each page starts, so that a chunk knows its pages.
//!
//! A page without a text layer (a scan: ragctx runs no OCR) or one that cannot be read is
//! left out and named; a document with no text at all is refused with why.

mod fonts;
mod limits;

use crate::structure::escape_line_start;
use pdf_extract::{MediaBox, OutputDev, OutputError, Transform};
use std::collections::{HashMap, HashSet};

/// A PDF's text as Markdown, page by page.
#[derive(Debug, Default)]
pub(crate) struct PdfText {
    /// The document's own title (its Info dictionary's `/Title`), when it has one.
    pub title: Option<String>,
    /// The Markdown of the whole document.
    pub markdown: String,
    /// Where each page's text starts in `markdown`, in characters, with its 1-based number
    /// (pages without text are absent).
    pub page_starts: Vec<(usize, u32)>,
    /// Pages in the document.
    pub pages: u32,
    /// Pages without a text layer (1-based).
    pub without_text: Vec<u32>,
    /// Pages that could not be read, with why.
    pub unreadable: Vec<(u32, String)>,
    /// Pages whose only text is a running header, footer or page number (a scan stamped
    /// with one).
    pub only_running: Vec<u32>,
    /// Pages whose glyphs map to no text (fonts without a Unicode map: read as nothing or as
    /// symbols), left out (1-based).
    pub unmapped: Vec<u32>,
    /// The document's outline (bookmarks): each entry's level (1 the top) and title.
    pub outline: Vec<(usize, String)>,
}

/// What stands between the cells of a table's row in a line's text.
const CELL: char = '\u{1F}';

/// The size of a line read without its geometry ([`fallback_lines`]).
const FALLBACK_SIZE: f64 = 1.0;

/// A gap between two glyphs of a line this many font sizes wide parts two cells of a table.
const COLUMN_GAP: f64 = 1.5;

/// One line of a page as laid out.
#[derive(Clone, Debug)]
struct Line {
    text: String,
    /// Left edge and baseline (from the top of the page), in points.
    x: f64,
    y: f64,
    /// The right edge of its last glyph.
    end: f64,
    /// The font size most of its glyphs are set in, in points.
    size: f64,
    /// Whether its last glyph's width was known (`end` is then where it ends).
    advance_known: bool,
}

/// Characters of a line by size (tenths of a point), for [`Line::size`]: the size most of
/// them are set in (a drop cap or one larger glyph does not make a line a heading).
#[derive(Default)]
struct Sizes(Vec<(i64, usize)>);

impl Sizes {
    fn add(&mut self, size: f64, chars: usize) {
        let key = (size * 10.0).round() as i64;
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += chars,
            None => self.0.push((key, chars)),
        }
    }
    fn most(&self) -> Option<f64> {
        // On a tie the smaller: one larger glyph does not make a heading.
        self.0.iter().max_by_key(|(k, n)| (*n, -*k)).map(|(k, _)| *k as f64 / 10.0)
    }
}

/// One glyph as placed on the page.
struct Glyph {
    text: String,
    /// Left edge and baseline (from the top of the page), its advance and font size, in points.
    x: f64,
    y: f64,
    advance: f64,
    size: f64,
    /// The first glyph of a text-showing operator (where a producer may start a word).
    word_start: bool,
}

/// Collects a page's glyphs, laid out into lines at the page's end ([`Lines::lay_out`]).
#[derive(Default)]
struct Lines {
    glyphs: Vec<Glyph>,
    page_height: f64,
    word_start: bool,
}

impl OutputDev for Lines {
    fn begin_page(&mut self, _: u32, media_box: &MediaBox, _: Option<(f64, f64, f64, f64)>) -> Result<(), OutputError> {
        self.page_height = media_box.ury - media_box.lly;
        Ok(())
    }
    fn end_page(&mut self) -> Result<(), OutputError> {
        Ok(())
    }
    fn output_character(
        &mut self,
        trm: &Transform,
        width: f64,
        _: f64,
        font_size: f64,
        c: &str,
    ) -> Result<(), OutputError> {
        let (x, y) = (trm.m31, self.page_height - trm.m32);
        // The type's height: the text matrix's vertical scale (a horizontal squeeze, `Tz`,
        // or a rotation does not change it).
        let size = (font_size * trm.m21.hypot(trm.m22)).abs();
        if x.is_finite() && y.is_finite() && size.is_finite() && size > 0.0 {
            // A glyph's advance follows the horizontal scale (`Tz` squeezes it), its size the vertical.
            let advance = if width.is_finite() { width * (font_size * trm.m11.hypot(trm.m12)).abs() } else { 0.0 };
            self.glyphs.push(Glyph { text: c.to_owned(), x, y, advance, size, word_start: self.word_start });
        }
        self.word_start = false;
        Ok(())
    }
    fn begin_word(&mut self) -> Result<(), OutputError> {
        self.word_start = true;
        Ok(())
    }
    fn end_word(&mut self) -> Result<(), OutputError> {
        Ok(())
    }
    fn end_line(&mut self) -> Result<(), OutputError> {
        Ok(())
    }
}

impl Lines {
    /// The page's glyphs as lines: a move down starts a line; within a line a gap is a space
    /// or, as wide as a column's, a table's next cell. A gap is measured from the end of the
    /// glyph before, by its font's width: where the font gives none (some embedded fonts'
    /// widths are not read), the gap holds that glyph's own width too, and only a wide one
    /// (0.8 of the type) is a space; else any gap past a tenth of the type that starts a new
    /// run of text is, as in pdf-extract's own plain text.
    fn lay_out(self) -> Vec<Line> {
        let mut lines: Vec<Line> = Vec::new();
        let mut sizes: Vec<Sizes> = Vec::new();
        // The last glyph placed: a TeX accent set over the letter after it is combined with it.
        let mut last: Option<(f64, f64, char)> = None;
        let mut glyphs = self.glyphs;
        turn_upright(&mut glyphs);
        calibrate_widths(&mut glyphs);
        for g in glyphs {
            let (x, y, size) = (g.x, g.y, g.size);
            let new_line = match lines.last() {
                None => true,
                Some(l) => (y - l.y).abs() > size * 1.5 || (x < l.end && (y - l.y).abs() > size * 0.5),
            };
            if new_line {
                lines.push(Line { text: String::new(), x, y, end: x, size, advance_known: true });
                sizes.push(Sizes::default());
                last = None;
            }
            let line = lines.last_mut().expect("a line");
            sizes.last_mut().expect("a line's sizes").add(size, g.text.chars().count());
            // An accent glyph with its letter set over it (the letter starts before the
            // accent's end; before the accent itself when its width is unknown): one accented
            // letter (`caf´e` → `café`); `Peter´s` stays.
            if let (Some((ax, aw, accent)), Some(letter)) = (last, single_char(&g.text)) {
                let over = if aw > 0.0 { x < ax + aw - size * 0.05 } else { x < ax - size * 0.01 };
                if over {
                    if let Some(marked) = accented(accent, letter) {
                        line.text.pop();
                        line.text.push(marked);
                        line.end = line.end.max(x + g.advance);
                        last = None;
                        continue;
                    }
                }
            }
            last = single_char(&g.text).filter(|c| ACCENTS.contains(c)).map(|c| (x, g.advance, c));
            // Punctuation closes the word before it, however far a producer set it.
            let closing = g.text.starts_with([',', '.', ';', ':', '!', '?', ')']);
            // An accent glyph sits over its letter, a little right of the glyph before it
            // inside a word: only a word space's gap (0.2 of the type) is a space there.
            let accent = single_char(&g.text).is_some_and(|c| ACCENTS.contains(&c));
            if new_line || closing || g.text == " " {
            } else if x > line.end + size * COLUMN_GAP && !line.text.trim().is_empty() {
                // A gap as wide as a column's: the next cell of a table's row.
                while line.text.ends_with(' ') {
                    line.text.pop();
                }
                line.text.push(CELL);
            } else if !line.text.ends_with([' ', CELL]) {
                let gap = x - line.end;
                let word_gap = if accent { 0.2 } else { 0.1 };
                let space = if line.advance_known { g.word_start && gap > size * word_gap } else { gap > size * 0.8 };
                if space {
                    line.text.push(' ');
                }
            }
            if g.text == " " && line.text.ends_with([' ', CELL]) {
                // One space, however many a producer set.
            } else {
                line.text.push_str(&g.text);
            }
            line.end = x + g.advance;
            line.advance_known = g.advance > 0.0;
        }
        for (line, sizes) in lines.iter_mut().zip(&sizes) {
            line.size = sizes.most().unwrap_or(line.size);
        }
        lines
    }
}

/// A page whose text runs down or up it (a landscape page set on a portrait one, rotated
/// 90°: `T h e m o vi e` read glyph by glyph as lines of one letter) turned so that its
/// text runs left to right and its lines go down, as it is read. Told by the glyphs: most
/// of the steps from one to the next go along the page's height.
fn turn_upright(glyphs: &mut [Glyph]) {
    let (mut across, mut down, mut up) = (0usize, 0usize, 0usize);
    for w in glyphs.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let (dx, dy) = (b.x - a.x, b.y - a.y);
        if (a.size - b.size).abs() > 0.05 || a.text.trim().is_empty() {
            continue;
        }
        if dy.abs() < a.size * 0.2 && dx > 0.0 && dx < a.size * 2.0 {
            across += 1;
        } else if dx.abs() < a.size * 0.2 && dy > 0.0 && dy < a.size * 2.0 {
            down += 1;
        } else if dx.abs() < a.size * 0.2 && dy < 0.0 && dy > -a.size * 2.0 {
            up += 1;
        }
    }
    let runs = down.max(up);
    if runs < 20 || runs < across * 2 {
        return;
    }
    // Along the run is the new x; across it, the new y.
    let sign = if down >= up { 1.0 } else { -1.0 };
    for g in glyphs.iter_mut() {
        (g.x, g.y) = (g.y * sign, -g.x * sign);
    }
    // Lines go down: where most steps to a new line go up instead, the lines are turned over.
    let (mut lower, mut higher) = (0usize, 0usize);
    for w in glyphs.windows(2) {
        let dy = w[1].y - w[0].y;
        if dy.abs() > w[0].size * 0.5 {
            if dy > 0.0 {
                lower += 1;
            } else {
                higher += 1;
            }
        }
    }
    if higher > lower {
        for g in glyphs.iter_mut() {
            g.y = -g.y;
        }
    }
}

/// Where a page's fonts give wrong widths (a subset's widths read against the wrong codes,
/// or one default width for every glyph: `Origin al autho r(s)`), each glyph's advance is
/// taken from the page itself: a letter's least distance to a letter after it on a line
/// (seen twice at least), punctuation a common face's width. Wrong widths are told by their gaps: in a
/// page set with true widths, the next glyph starts where the last ends or a word space
/// after it; with wrong ones, a third of the gaps fall between (0.03–0.15 of the type) or
/// overlap.
fn calibrate_widths(glyphs: &mut [Glyph]) {
    let same_line = |a: &Glyph, b: &Glyph| {
        (a.y - b.y).abs() < a.size * 0.2 && (a.size - b.size).abs() < 0.05 && b.x > a.x && b.x - a.x < a.size * 2.0
    };
    let key = |g: &Glyph| (g.size * 10.0).round() as i64;
    // By type size (a font's wrong widths show in the text set in it): pairs seen, odd gaps.
    let mut gaps: HashMap<i64, (usize, usize)> = HashMap::new();
    for w in glyphs.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        if !same_line(a, b) || a.text.trim().is_empty() || b.text.trim().is_empty() || a.advance <= 0.0 {
            continue;
        }
        let gap = (b.x - (a.x + a.advance)) / a.size;
        let e = gaps.entry(key(a)).or_default();
        e.0 += 1;
        if gap < -0.05 || (0.03..0.15).contains(&gap) {
            e.1 += 1;
        }
    }
    let wrong: HashSet<i64> =
        gaps.into_iter().filter(|(_, (n, odd))| *n >= 20 && odd * 10 >= n * 3).map(|(k, _)| k).collect();
    if wrong.is_empty() {
        return;
    }
    // A letter's least distance to a letter after it (inside a word), by letter and size, and
    // how often it was seen; punctuation keeps its font's width (it is mostly followed by a space).
    let letter = |g: &Glyph| g.text.chars().all(char::is_alphanumeric) && !g.text.is_empty();
    let mut least: HashMap<(String, i64), (f64, usize)> = HashMap::new();
    for w in glyphs.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        if wrong.contains(&key(a)) && same_line(a, b) && letter(a) && letter(b) {
            let e = least.entry((a.text.clone(), key(a))).or_insert((f64::INFINITY, 0));
            e.0 = e.0.min(b.x - a.x);
            e.1 += 1;
        }
    }
    for g in glyphs.iter_mut() {
        if !wrong.contains(&key(g)) {
            continue;
        }
        if let Some((d, n)) = least.get(&(g.text.clone(), key(g))) {
            if *n >= 2 {
                g.advance = *d;
            }
        } else if matches!(g.text.as_str(), "." | "," | ":" | ";" | "!") {
            // Punctuation: a common face's width (Arial, Times: 0.25–0.28 of the type), so
            // that a word after it is told apart by its space (`step. It`, `3.5`).
            g.advance = g.size * 0.27;
        }
    }
}

/// A page's text as lopdf reads it, when pdf-extract cannot decode the page (some fonts'
/// maps): lines without geometry, set in no size (never a heading), a blank line a paragraph's end.
fn fallback_lines(doc: &pdf_extract::Document, page: u32) -> Option<Vec<Line>> {
    let text = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| doc.extract_text(&[page]))).ok()?.ok()?;
    let mut y = 0.0;
    let mut lines = Vec::new();
    for l in text.lines() {
        y += if l.trim().is_empty() { 4.0 } else { 1.2 };
        if !l.trim().is_empty() {
            lines.push(Line { text: l.to_owned(), x: 0.0, y, end: 0.0, size: FALLBACK_SIZE, advance_known: true });
        }
    }
    Some(lines).filter(|l| !l.is_empty())
}

/// Reads a PDF's text layer, or says why it cannot be read (a limit it passed named).
pub(crate) fn pdf_to_markdown(bytes: &[u8]) -> Result<PdfText, String> {
    let Some(header) = bytes[..bytes.len().min(1024)].windows(5).position(|w| w == b"%PDF-") else {
        return Err("not a PDF file (no %PDF- header)".into());
    };
    // Bytes before the header (a producer's banner) are not the file's: its offsets count
    // from the header, as poppler reads them.
    let mut doc = limits::load(&bytes[header..])?;
    fonts::mend(&mut doc);
    let title = doc
        .trailer
        .get(b"Info")
        .ok()
        .and_then(|info| match info {
            pdf_extract::Object::Reference(id) => doc.get_dictionary(*id).ok(),
            pdf_extract::Object::Dictionary(d) => Some(d),
            _ => None,
        })
        .and_then(|info| info.get(b"Title").ok())
        .and_then(|t| pdf_extract::decode_text_string(t).ok())
        .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|t| !t.is_empty() && !crate::titles::placeholder_title(t));
    let numbers = doc.get_pages();
    // Before any text is read: forms that draw themselves, or too deep or too often.
    limits::check_forms(&doc, numbers.values().map(|id| page_resources(&doc, *id)))?;
    let mut out = PdfText { title, pages: numbers.len() as u32, outline: outline(&doc), ..Default::default() };
    let mut pages: Vec<(u32, Vec<Line>)> = Vec::new();
    for (n, read) in read_pages(&doc, numbers.keys().copied().collect()) {
        let mut glyphs = 0;
        let lines = match read {
            Ok(lines) => {
                // Glyphs drawn but read as nothing (no Unicode map); a drawn space is not one.
                glyphs = lines.glyphs.iter().filter(|g| g.text.is_empty() || !g.text.trim().is_empty()).count();
                lines.lay_out()
            }
            Err(failed) => match fallback_lines(&doc, n) {
                Some(lines) => lines,
                None => {
                    out.unreadable.push((n, failed));
                    continue;
                }
            },
        };
        let lines: Vec<Line> = lines
            .into_iter()
            .map(|mut l| {
                l.text = logical_order(&spelt_out(l.text.trim()));
                l
            })
            .filter(|l| !l.text.is_empty())
            .collect();
        if lines.is_empty() && glyphs > 0 {
            out.unmapped.push(n);
        } else if lines.is_empty() {
            out.without_text.push(n);
        } else if unmapped(&lines) {
            out.unmapped.push(n);
        } else {
            pages.push((n, lines));
        }
    }
    out.only_running = drop_running_lines(&mut pages);
    write_markdown(&pages, &mut out);
    Ok(out)
}

/// The outline's entries in order, each with its level: walked by hand, each entry once (a
/// `/Next` or `/First` that leads back is not followed), at most 10,000 entries 16 deep.
fn outline(doc: &pdf_extract::Document) -> Vec<(usize, String)> {
    use pdf_extract::Object;
    let mut out = Vec::new();
    let Ok(root) = doc.catalog().and_then(|c| c.get(b"Outlines")).and_then(Object::as_reference) else {
        return out;
    };
    let first = |id| doc.get_dictionary(id).ok()?.get(b"First").ok()?.as_reference().ok();
    let mut seen = HashSet::from([root]);
    // Entries to visit: (level, the entry), the next sibling found after a node's children.
    let mut stack: Vec<(usize, pdf_extract::ObjectId)> = first(root).map(|f| (1, f)).into_iter().collect();
    while let Some((level, id)) = stack.pop() {
        if out.len() >= 10_000 || !seen.insert(id) {
            continue;
        }
        let Ok(node) = doc.get_dictionary(id) else { continue };
        if let Some(title) = node.get(b"Title").ok().and_then(|t| pdf_extract::decode_text_string(t).ok()) {
            let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
            if !title.is_empty() {
                out.push((level, title));
            }
        }
        if let Ok(next) = node.get(b"Next").and_then(Object::as_reference) {
            stack.push((level, next));
        }
        if let (Some(child), true) = (first(id), level < 16) {
            stack.push((level + 1, child));
        }
    }
    out
}

/// A page whose text is mostly symbols: its fonts map glyphs to no letters (Japanese set
/// without a Unicode map reads as `2 . . , , .`). Five characters at least, under a fifth
/// of them letters or digits; a run of one mark (a table of contents' leader dots) counts once.
fn unmapped(lines: &[Line]) -> bool {
    let (mut letters, mut others) = (0usize, 0usize);
    for l in lines {
        let mut last = None;
        for c in l.text.chars() {
            if c.is_whitespace() || c == CELL {
                last = None;
                continue;
            }
            if c.is_alphanumeric() {
                letters += 1;
            } else if last != Some(c) {
                others += 1;
            }
            last = Some(c);
        }
    }
    letters + others >= 5 && letters * 5 < letters + others
}

/// A page's resources, its own or inherited from the page tree (as pdf-extract finds them).
fn page_resources(doc: &pdf_extract::Document, page: pdf_extract::ObjectId) -> Option<&pdf_extract::Dictionary> {
    let mut dict = doc.get_dictionary(page).ok()?;
    for _ in 0..limits::FORM_DEPTH * 8 {
        match dict.get(b"Resources") {
            Ok(pdf_extract::Object::Reference(id)) => return doc.get_dictionary(*id).ok(),
            Ok(pdf_extract::Object::Dictionary(d)) => return Some(d),
            _ => dict = doc.get_dictionary(dict.get(b"Parent").ok()?.as_reference().ok()?).ok()?,
        }
    }
    None
}

/// Each page's glyphs, or why the page could not be decoded. The document is read in one
/// pass (pdf-extract finds a page by listing them all: page by page would take time
/// quadratic in the pages); from a page that fails, page by page.
fn read_pages(doc: &pdf_extract::Document, numbers: Vec<u32>) -> Vec<(u32, Result<Lines, String>)> {
    let mut all = ByPage::default();
    // pdf-extract panics on some malformed content streams: one page lost, not the ingest.
    let whole = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pdf_extract::output_doc(doc, &mut all)));
    // The page it failed on: the one begun, or (failing before it began: no media box) the
    // one after the last read.
    let failing = all.current.or_else(|| numbers.get(all.done.len()).copied());
    let failed_at = match whole {
        Ok(Ok(())) => None,
        Ok(Err(e)) => failing.map(|n| (n, e.to_string())),
        Err(_) => failing.map(|n| (n, undecoded())),
    };
    let mut read: Vec<(u32, Result<Lines, String>)> = all.done.into_iter().map(|(n, l)| (n, Ok(l))).collect();
    if let Some((failed, why)) = failed_at {
        read.push((failed, Err(why)));
        for n in numbers.into_iter().filter(|n| *n > failed) {
            let mut lines = Lines::default();
            let one = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pdf_extract::output_doc_page(doc, &mut lines, n)
            }));
            read.push((
                n,
                match one {
                    Ok(Ok(())) => Ok(lines),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err(undecoded()),
                },
            ));
        }
    }
    read
}

/// Why a page's content could not be decoded: pdf-extract's panic, as the guard kept it
/// (`unsupported encoding GBK-EUC-H`).
fn undecoded() -> String {
    match crate::panics::last_panic() {
        Some(why) => format!("its content could not be decoded: {}", why.chars().take(80).collect::<String>()),
        None => "its content could not be decoded".into(),
    }
}

/// The pages of one pass over a document, each page's glyphs apart.
#[derive(Default)]
struct ByPage {
    done: Vec<(u32, Lines)>,
    /// The page being read, and its glyphs so far.
    current: Option<u32>,
    lines: Lines,
}

impl OutputDev for ByPage {
    fn begin_page(
        &mut self,
        n: u32,
        media_box: &MediaBox,
        art: Option<(f64, f64, f64, f64)>,
    ) -> Result<(), OutputError> {
        self.current = Some(n);
        self.lines = Lines::default();
        self.lines.begin_page(n, media_box, art)
    }
    fn end_page(&mut self) -> Result<(), OutputError> {
        if let Some(n) = self.current.take() {
            self.done.push((n, std::mem::take(&mut self.lines)));
        }
        Ok(())
    }
    fn output_character(&mut self, trm: &Transform, w: f64, s: f64, size: f64, c: &str) -> Result<(), OutputError> {
        self.lines.output_character(trm, w, s, size, c)
    }
    fn begin_word(&mut self) -> Result<(), OutputError> {
        self.lines.begin_word()
    }
    fn end_word(&mut self) -> Result<(), OutputError> {
        Ok(())
    }
    fn end_line(&mut self) -> Result<(), OutputError> {
        Ok(())
    }
}

/// A ligature spelt out (`ﬁ` → `fi`), control characters dropped.
fn spelt_out(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{FB00}' => out.push_str("ff"),
            '\u{FB01}' => out.push_str("fi"),
            '\u{FB02}' => out.push_str("fl"),
            '\u{FB03}' => out.push_str("ffi"),
            '\u{FB04}' => out.push_str("ffl"),
            '\u{FB05}' | '\u{FB06}' => out.push_str("st"),
            c if c.is_control() && c != '\t' && c != CELL => {}
            c => out.push(c),
        }
    }
    out
}

/// A letter of a right-to-left script (Hebrew, Arabic, Syriac, Thaana, N'Ko and their
/// presentation forms).
fn rtl(c: char) -> bool {
    matches!(c, '\u{0590}'..='\u{08FF}' | '\u{FB1D}'..='\u{FDFF}' | '\u{FE70}'..='\u{FEFF}') && c.is_alphabetic()
}

/// A line read in the order its glyphs stand on the page, in the order it is read: where
/// right-to-left letters are most of its letters, the line is turned around (a PDF sets them
/// left to right as they are seen, `םלוע םולש`), runs of left-to-right text and numbers in it
/// keeping their own order, and brackets turned with it; Arabic presentation forms as their
/// letters (`ﺗﺤﻠﻴﻞ` → `تحليل`), so that a search finds them.
fn logical_order(text: &str) -> String {
    let (right, left) = text.chars().fold((0, 0), |(r, l), c| {
        if rtl(c) {
            (r + 1, l)
        } else if c.is_alphabetic() {
            (r, l + 1)
        } else {
            (r, l)
        }
    });
    if right == 0 {
        return text.to_owned();
    }
    if right <= left {
        return letter_forms(text);
    }
    // Turned around, then each left-to-right run (letters and digits of other scripts, with
    // what stands between two of them: `12.5`, `2024-01`, `PDF file`) turned back.
    let mut chars: Vec<char> = text.chars().rev().collect();
    let ltr = |c: char| c.is_alphanumeric() && !rtl(c);
    let mut i = 0;
    while i < chars.len() {
        if ltr(chars[i]) {
            let mut end = i;
            let mut j = i;
            while j < chars.len() && !rtl(chars[j]) {
                if ltr(chars[j]) {
                    end = j;
                }
                j += 1;
            }
            chars[i..=end].reverse();
            i = end + 1;
        } else {
            chars[i] = match chars[i] {
                '(' => ')',
                ')' => '(',
                '[' => ']',
                ']' => '[',
                '{' => '}',
                '}' => '{',
                '<' => '>',
                '>' => '<',
                c => c,
            };
            i += 1;
        }
    }
    letter_forms(&chars.into_iter().collect::<String>())
}

/// Arabic presentation forms as their letters (a ligature as its letters, in order).
fn letter_forms(text: &str) -> String {
    let forms = |c: char| matches!(c, '\u{FB50}'..='\u{FDFF}' | '\u{FE70}'..='\u{FEFF}');
    if !text.chars().any(forms) {
        return text.to_owned();
    }
    use unicode_normalization::UnicodeNormalization;
    text.chars().flat_map(|c| if forms(c) { c.nfkc().collect::<Vec<_>>() } else { vec![c] }).collect()
}

/// The accents TeX sets as glyphs of their own over a letter.
const ACCENTS: [char; 7] = ['\u{00B4}', '`', '\u{02C6}', '\u{00A8}', '\u{02DC}', '\u{02DA}', '\u{02C7}'];

/// The one character of a glyph's text, if it is one.
fn single_char(text: &str) -> Option<char> {
    let mut chars = text.chars();
    chars.next().filter(|_| chars.next().is_none())
}

/// A letter with the accent TeX sets before it, when Unicode has it precomposed.
fn accented(accent: char, letter: char) -> Option<char> {
    let table: &[(char, &str, &str)] = &[
        ('\u{00B4}', "aeiouyAEIOUYcnszCNSZ", "áéíóúýÁÉÍÓÚÝćńśźĆŃŚŹ"),
        ('`', "aeiouAEIOU", "àèìòùÀÈÌÒÙ"),
        ('\u{02C6}', "aeiouAEIOU", "âêîôûÂÊÎÔÛ"),
        ('\u{00A8}', "aeiouyAEIOU", "äëïöüÿÄËÏÖÜ"),
        ('\u{02DC}', "anoANO", "ãñõÃÑÕ"),
        ('\u{02DA}', "aA", "åÅ"),
        ('\u{02C7}', "cszrenCSZREN", "čšžřěňČŠŽŘĚŇ"),
    ];
    let (_, plain, marked) = table.iter().find(|(a, _, _)| *a == accent)?;
    let i = plain.chars().position(|p| p == letter)?;
    marked.chars().nth(i)
}

/// A page number alone on a line: `7`, `- 7 -`, `Page 7`, `7 of 20`, `vii`.
fn page_number(text: &str) -> bool {
    let t = text.trim().trim_matches(|c: char| c == '-' || c == '–' || c == '—' || c.is_whitespace()).to_lowercase();
    let t = t.strip_prefix("page").map(str::trim).unwrap_or(&t);
    let digits = |s: &str| !s.is_empty() && s.len() <= 5 && s.chars().all(|c| c.is_ascii_digit());
    match t.split_once(" of ").or_else(|| t.split_once('/')) {
        Some((a, b)) => digits(a.trim()) && digits(b.trim()),
        None => digits(t) || roman(t),
    }
}

/// A page number that is its page's own (`3`, `Page 3`, `3 of 12` on page 3): left out even
/// where it does not recur (a one-page document's `1`).
fn numbers_its_page(text: &str, page: u32) -> bool {
    let first: String = text.chars().skip_while(|c| !c.is_ascii_digit()).take_while(char::is_ascii_digit).collect();
    page_number(text) && first.parse::<u32>().is_ok_and(|n| n == page)
}

/// A Roman numeral as one is written (`iv`, `xii`; not `civil`, not `iiii`).
fn roman(t: &str) -> bool {
    const NUMERALS: [(u32, &str); 13] = [
        (1000, "m"),
        (900, "cm"),
        (500, "d"),
        (400, "cd"),
        (100, "c"),
        (90, "xc"),
        (50, "l"),
        (40, "xl"),
        (10, "x"),
        (9, "ix"),
        (5, "v"),
        (4, "iv"),
        (1, "i"),
    ];
    let value = |c: char| NUMERALS.iter().find(|(_, s)| s.len() == 1 && s.starts_with(c)).map(|(v, _)| *v);
    if t.is_empty() || t.len() > 8 || !t.chars().all(|c| value(c).is_some()) {
        return false;
    }
    let chars: Vec<i64> = t.chars().filter_map(value).map(i64::from).collect();
    let mut n = 0i64;
    for (i, v) in chars.iter().enumerate() {
        if chars.get(i + 1).is_some_and(|next| next > v) {
            n -= v;
        } else {
            n += v;
        }
    }
    // Written back the canonical way, it must read the same.
    let mut back = String::new();
    let mut rest = n;
    for (v, s) in NUMERALS {
        while rest >= i64::from(v) {
            back.push_str(s);
            rest -= i64::from(v);
        }
    }
    // Front matter is numbered i to c; `mix` or `dix` is a word.
    (1..=100).contains(&n) && back == t
}

/// Leaves out the lines that run on the pages, each found at the same height on at least
/// three pages (both of two) and two in five of them: the page number (a page's top or bottom line that
/// is only a number) and a running header or footer (a page's top or bottom line, or the
/// one next to it, with the same words — numbers aside only when it holds one, as
/// `Report 2025 — page 3` does). A table's row is never one. Returns the pages that held
/// nothing else.
fn drop_running_lines(pages: &mut Vec<(u32, Vec<Line>)>) -> Vec<u32> {
    // A page's lines from the top, and which of them are at its edges.
    let edge = |lines: &[Line]| -> Vec<usize> {
        let mut order: Vec<usize> = (0..lines.len()).collect();
        order.sort_by(|a, b| lines[*a].y.total_cmp(&lines[*b].y));
        let n = order.len();
        let mut at: Vec<usize> = order[..n.min(2)].iter().chain(&order[n.saturating_sub(2)..]).copied().collect();
        at.sort_unstable();
        at.dedup();
        at.retain(|&i| !lines[i].text.contains(CELL));
        at
    };
    // A line's key: its height (to 2 pt) and words, numbers as `#` when `numbered`.
    let key = |l: &Line, numbered: bool| -> (i64, String) {
        if page_number(&l.text) {
            return ((l.y / 2.0).round() as i64, "<page number>".into());
        }
        let words: String = l
            .text
            .chars()
            .filter(|c| !c.is_whitespace())
            .map(|c| if numbered && c.is_ascii_digit() { '#' } else { c })
            .collect();
        ((l.y / 2.0).round() as i64, words)
    };
    let numbered = |l: &Line| page_number(&l.text) || l.text.chars().any(|c| c.is_ascii_digit());
    let mut seen: HashMap<(i64, String), usize> = HashMap::new();
    for (_, lines) in pages.iter() {
        let keys: HashSet<(i64, String)> =
            edge(lines).into_iter().map(|i| key(&lines[i], numbered(&lines[i]))).collect();
        for k in keys {
            *seen.entry(k).or_default() += 1;
        }
    }
    let total = pages.len();
    let running = |k: &(i64, String)| seen.get(k).is_some_and(|&n| n >= 3.min(total).max(2) && n * 5 >= total * 2);
    let mut emptied = Vec::new();
    for (page, lines) in pages.iter_mut() {
        // The outermost lines: where a page's own number is, even when it does not recur.
        let top = (0..lines.len()).min_by(|a, b| lines[*a].y.total_cmp(&lines[*b].y));
        let bottom = (0..lines.len()).max_by(|a, b| lines[*a].y.total_cmp(&lines[*b].y));
        let mut drop: HashSet<usize> = edge(lines)
            .into_iter()
            .filter(|&i| {
                running(&key(&lines[i], numbered(&lines[i])))
                    || ((Some(i) == top || Some(i) == bottom) && numbers_its_page(&lines[i].text, *page))
            })
            .collect();
        // A page that would keep nothing keeps its lines that only share a pattern with other
        // pages' (words alike, numbers not: `Entry 1204 of the register`): that is its text,
        // not a running header. A page number, or a line the same on every page, still goes.
        if drop.len() == lines.len() {
            drop.retain(|&i| page_number(&lines[i].text) || !lines[i].text.chars().any(|c| c.is_ascii_digit()));
        }
        let mut i = 0;
        lines.retain(|_| {
            i += 1;
            !drop.contains(&(i - 1))
        });
        if lines.is_empty() {
            emptied.push(*page);
        }
    }
    pages.retain(|(_, lines)| !lines.is_empty());
    emptied
}

/// A bullet that starts a list item (`•`, `◦`, `▪`, Symbol's private-use bullet, …).
fn bullet(text: &str) -> Option<&str> {
    let mut chars = text.chars();
    let first = chars.next()?;
    let rest = chars.as_str();
    let is_bullet = matches!(
        first,
        '•' | '◦'
            | '▪'
            | '▫'
            | '●'
            | '○'
            | '■'
            | '□'
            | '‣'
            | '⁃'
            | '∙'
            | '·'
            | '\u{F0B7}'
            | '\u{F0A7}'
            | '–'
            | '‹'
    ) || (first == '-' && rest.starts_with(' '));
    (is_bullet && rest.starts_with([' ', '\t'])).then(|| rest.trim_start())
}

/// Writes the pages as Markdown: headings by size (the larger the type, the higher the level),
/// paragraphs split where the space above a line or its indent says so, bullets as list items,
/// hyphenated line ends joined. Fills `markdown` and `page_starts`.
fn write_markdown(pages: &[(u32, Vec<Line>)], out: &mut PdfText) {
    // The body's size: the size most characters are set in.
    let mut by_size: HashMap<i64, usize> = HashMap::new();
    for l in pages.iter().flat_map(|(_, ls)| ls).filter(|l| l.size > FALLBACK_SIZE) {
        *by_size.entry((l.size * 10.0).round() as i64).or_default() += l.text.chars().count();
    }
    let body = by_size.iter().max_by_key(|(s, n)| (**n, -**s)).map(|(s, _)| *s as f64 / 10.0).unwrap_or(10.0);
    // Large type that recurs on three pages or more is not a section: a running title, a
    // printer's mark (`3RD PASS PAGES`), a blank page's notice.
    let mut on_pages: HashMap<String, HashSet<u32>> = HashMap::new();
    for (n, lines) in pages {
        for l in lines.iter().filter(|l| l.size >= body * 1.15) {
            on_pages.entry(heading_key(&l.text)).or_default().insert(*n);
        }
    }
    // With an outline, its entries are the headings (by their level), found where a line
    // reads as one.
    let outline: HashMap<String, usize> = out.outline.iter().map(|(level, t)| (heading_key(t), *level)).collect();
    let outlined = out.outline.len() >= 2;
    // A heading: larger type than the body's, a line of at most 20 words with a word of two
    // letters or more (not a glyph, a margin stamp's letters, a figure's label), not recurring
    // (a fallback line, read without its size, never is); with an outline, a line that is one
    // of its entries, or begins one (a heading set over two lines).
    let is_heading = |l: &Line| {
        let key = heading_key(&l.text);
        let recurs = on_pages.get(&key).is_some_and(|p| p.len() >= 3);
        if outlined {
            return l.size > FALLBACK_SIZE
                && !key.is_empty()
                && !recurs
                && (outline.contains_key(&key)
                    || (l.size >= body * 1.15
                        && outline.keys().any(|k| k.starts_with(&key) && key.len() * 2 >= k.len().min(8))));
        }
        let words_of_two = l.text.split_whitespace().any(|w| w.chars().filter(|c| c.is_alphabetic()).count() >= 2);
        let numbered = l
            .text
            .split_whitespace()
            .next()
            .is_some_and(|w| w.trim_end_matches('.').chars().all(|c| c.is_ascii_digit() || c == '.'));
        l.size > FALLBACK_SIZE
            && l.size >= body * 1.15
            && l.text.split_whitespace().count() <= 20
            && (words_of_two || (numbered && l.text.chars().any(char::is_alphabetic)))
            && l.text.chars().filter(|c| c.is_alphabetic()).count() >= 3
            && !recurs
    };
    // Heading levels: the distinct heading sizes, largest first.
    let mut sizes: Vec<i64> =
        pages.iter().flat_map(|(_, ls)| ls).filter(|l| is_heading(l)).map(|l| (l.size * 10.0).round() as i64).collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    sizes.dedup();
    let by_size =
        |l: &Line| sizes.iter().position(|s| *s == (l.size * 10.0).round() as i64).map_or(6, |p| (p + 1).min(6));
    let level = |l: &Line| {
        let key = heading_key(&l.text);
        if contents_heading(&key) {
            // A table of contents holds no section: the next heading of any level ends it.
            return 6;
        }
        match outline.get(&key) {
            Some(level) if outlined => (*level).min(6),
            _ if outlined => outline.iter().find(|(k, _)| k.starts_with(&key)).map_or(6, |(_, l)| (*l).min(6)),
            _ => by_size(l),
        }
    };
    // Words the document spells with a hyphen: `self-` + `service` keeps its hyphen.
    let hyphenated: HashSet<String> = pages
        .iter()
        .flat_map(|(_, ls)| ls)
        .flat_map(|l| l.text.split_whitespace())
        .filter(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).contains('-'))
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase())
        .collect();

    // A heading set over two lines is one heading.
    let pages: Vec<(u32, Vec<Line>)> = pages
        .iter()
        .map(|(n, lines)| {
            let mut merged: Vec<Line> = Vec::with_capacity(lines.len());
            for l in lines {
                match merged.last_mut() {
                    Some(p)
                        if is_heading(p)
                            && is_heading(l)
                            && (p.size - l.size).abs() < 0.05
                            && l.y > p.y
                            && l.y - p.y <= l.size * 1.6 =>
                    {
                        p.text.push(' ');
                        p.text.push_str(&l.text);
                        p.y = l.y;
                    }
                    _ => merged.push(l.clone()),
                }
            }
            (*n, merged)
        })
        .collect();
    let mut md = String::new();
    let mut chars = 0usize;
    // The paragraph being written, as one line (joined), and whether it is a list item.
    let mut para = String::new();
    let flush = |md: &mut String, chars: &mut usize, para: &mut String| {
        if !para.is_empty() {
            let text = format!("{para}\n\n");
            *chars += text.chars().count();
            md.push_str(&text);
            para.clear();
        }
    };
    for (n, lines) in &pages {
        // A paragraph that runs on from the last page stays one, unless the page starts
        // with a heading, a bullet, or a capital after a finished sentence.
        let left = lines.iter().map(|l| l.x).fold(f64::INFINITY, f64::min);
        let mut page_start = Some(*n);
        let mut prev: Option<&Line> = None;
        for l in lines {
            // A table's row: cells that each hold a word or a number (else the gaps were
            // only wide spaces).
            let row = l.text.contains(CELL) && l.text.split(CELL).all(|c| c.chars().any(char::is_alphanumeric));
            let heading = is_heading(l) && !row;
            let in_item = para.starts_with("- ");
            let in_table = para.starts_with("| ");
            // Where a sentence may end: a dash or `‹` (TeX's bullet as pdf-extract reads it)
            // opens an item only there, not inside a sentence (`… the rest – which …`).
            let boundary = para.is_empty()
                || in_table
                || in_item
                || para.trim_end().ends_with(['.', '!', '?', ':', ';', '"', '”', ')'])
                || prev.is_some_and(|p| l.y - p.y > p.size.max(l.size) * 1.6);
            let item = bullet(&l.text).filter(|_| boundary || !l.text.starts_with(['–', '-', '‹']));
            let gap = prev.map(|p| l.y - p.y);
            let indent = l.x - left;
            let new_paragraph = in_table
                || match prev {
                    None => {
                        let ends = para.trim_end().ends_with(['.', '!', '?', ':', '"', '”', ')']);
                        para.is_empty() || ends || l.text.starts_with(char::is_uppercase)
                    }
                    Some(p) => {
                        is_heading(p)
                        || gap.is_some_and(|g| g > p.size.max(l.size) * 1.6 || g < 0.0)
                        // An indented first line (not an item's next line).
                        || (indent > l.size * 0.8 && (p.x - left) < l.size * 0.3 && !in_item)
                        // Back at the margin after an item's indented lines.
                        || (in_item && (p.x - left) > l.size * 0.8 && indent < l.size * 0.3)
                    }
                };
            // Where this line's text starts in the Markdown, wanted for the page's first line:
            // the page's start (`chars` counts what is flushed, `para` what is not yet).
            let first = page_start.is_some();
            let before = if row {
                let cells: Vec<String> = l.text.split(CELL).map(|c| c.trim().replace('|', "\\|")).collect();
                let line = format!("| {} |", cells.join(" | "));
                if in_table {
                    para.push('\n');
                    para.push_str(&line);
                    if first {
                        chars + para.chars().count() - line.chars().count()
                    } else {
                        0
                    }
                } else {
                    // A table's row: one line `| a | b |`, a delimiter after its first row.
                    flush(&mut md, &mut chars, &mut para);
                    para = format!("{line}\n|{}", " --- |".repeat(cells.len()));
                    chars
                }
            } else {
                if heading || item.is_some() || new_paragraph {
                    flush(&mut md, &mut chars, &mut para);
                }
                if heading {
                    let at = chars;
                    let text = format!("{} {}\n\n", "#".repeat(level(l)), l.text.replace(CELL, " "));
                    chars += text.chars().count();
                    md.push_str(&text);
                    at
                } else if let Some(rest) = item {
                    // Not escaped: the parser reads an item's words as they are.
                    para.push_str("- ");
                    para.push_str(&rest.replace(CELL, " "));
                    chars
                } else {
                    let text = l.text.replace(CELL, " ");
                    if para.is_empty() {
                        para.push_str(&escape_line_start(&text));
                        chars
                    } else {
                        join_line(&mut para, &text, &hyphenated);
                        if first {
                            chars + para.chars().count() - text.chars().count()
                        } else {
                            0
                        }
                    }
                }
            };
            if let Some(page) = page_start.take() {
                out.page_starts.push((before, page));
            }
            prev = Some(l);
        }
    }
    flush(&mut md, &mut chars, &mut para);
    out.markdown = md;
}

/// A heading's text as it is compared: letters and digits only, lower-cased.
fn heading_key(text: &str) -> String {
    text.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

/// A table of contents' heading (`Contents`, `Table of contents`, `目录`, `Inhalt`).
fn contents_heading(key: &str) -> bool {
    matches!(
        key,
        "contents"
            | "tableofcontents"
            | "目录"
            | "目次"
            | "inhalt"
            | "inhaltsverzeichnis"
            | "sommaire"
            | "índice"
            | "indice"
            | "차례"
            | "목차"
    )
}

/// Joins the next line of a paragraph: a word hyphenated at the line's end is joined without
/// its hyphen, unless the document spells it with one (`self-service`).
fn join_line(para: &mut String, next: &str, hyphenated: &HashSet<String>) {
    let last_word: String = para.rsplit(' ').next().unwrap_or("").to_owned();
    let first_word = next.split_whitespace().next().unwrap_or("");
    let broken = last_word.len() > 1
        && last_word.ends_with('-')
        && last_word[..last_word.len() - 1].ends_with(char::is_alphabetic)
        && first_word.starts_with(char::is_lowercase);
    if broken {
        let whole = format!("{last_word}{first_word}");
        let whole = whole.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
        if !hyphenated.contains(&whole) {
            para.pop();
        }
        para.push_str(next);
    } else {
        para.push(' ');
        para.push_str(next);
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod unit {
    use super::*;

    /// Right-to-left lines as a PDF sets them (left to right as seen) read in logical order,
    /// numbers and Latin words in them kept; presentation forms as letters.
    #[test]
    fn right_to_left_lines_in_the_order_they_are_read() {
        assert_eq!(logical_order("םלוע םולש"), "שלום עולם");
        assert_eq!(logical_order("2024 ןושאר"), "ראשון 2024");
        assert_eq!(logical_order("PDF file ץבוק (ןושאר)"), "(ראשון) קובץ PDF file");
        // تحليل البيانات in presentation forms, set left to right as seen.
        let seen: String = "ﺕﺎﻧﺎﻴﺒﻟﺍ ﻞﻴﻠﺤﺗ".to_owned();
        assert_eq!(logical_order(&seen), "تحليل البيانات");
        assert_eq!(logical_order("Plain English (2024)."), "Plain English (2024).");
        // A lam-alef ligature is its two letters in reading order (لا), not turned.
        assert_eq!(logical_order("ﻻ"), "لا");
    }

    /// A page read as marks is unmapped; a table of contents' leader dots are not.
    #[test]
    fn a_page_of_marks_is_unmapped() {
        let page = |texts: &[&str]| -> Vec<Line> {
            texts
                .iter()
                .map(|t| Line { text: (*t).into(), x: 0.0, y: 0.0, end: 0.0, size: 10.0, advance_known: true })
                .collect()
        };
        assert!(unmapped(&page(&[
            "2 .", ". ,", ", .", ".", ",", ", .", ",", ". .", ", .", ". BM .", ". .", ". .", ". ,", ".", ", .", ", ,",
            ". , ,", "1"
        ])));
        assert!(!unmapped(&page(&[
            "Contents",
            "What is cancer?.................. 4",
            "1 Introduction . . . . . . . . . . 7"
        ])));
        assert!(!unmapped(&page(&["x = (a + b) / 2;", "y = x * x;"])));
    }

    #[test]
    fn a_reader_s_text_from_a_typesetter_s_glyphs() {
        assert_eq!(spelt_out("\u{FB01}nd e\u{FB00}ort\u{7}"), "find effort");
        for n in ["7", "- 12 -", "Page 3", "3 of 20", "iv", "xii", "12/40"] {
            assert!(page_number(n), "{n}");
        }
        for not in ["2025 was a year", "Visits 131,700", "mixed", "Page one", "civil", "iiii", "vx"] {
            assert!(!page_number(not), "{not}");
        }
        assert_eq!(bullet("\u{F0B7} Story hours"), Some("Story hours"));
        assert_eq!(bullet("- item"), Some("item"));
        assert_eq!(bullet("-5 °C at night"), None);
        let hyphenated: HashSet<String> = ["self-service".to_owned()].into();
        let mut p = "It welcomed wel-".to_owned();
        join_line(&mut p, "comed guests and two self-", &hyphenated);
        join_line(&mut p, "service machines.", &hyphenated);
        assert_eq!(p, "It welcomed welcomed guests and two self-service machines.");
        let placeholder = crate::titles::placeholder_title;
        assert!(placeholder("Microsoft Word - report.doc") && !placeholder("Annual report"));
        for p in ["Untitled", "Front cover", "（填写标准名称）", "标准名称", "Document1", "Pro-\tceedings of", "T"]
        {
            assert!(placeholder(p), "{p}");
        }
        for t in ["Walden", "GB/T 7714—2015 信息与文献", "Title IX compliance", "1984"] {
            assert!(!placeholder(t), "{t}");
        }
    }
}
