//! DOCX (Office Open XML) read as Markdown for [`crate::structure::parse`]: paragraphs,
//! headings (by their style: `heading N`, `Title`, or an outline level, the paragraph's own or
//! its style's, through the styles it is based on), list items (a numbered paragraph or a
//! `List …` style) and tables, each row one line `| a | b |` so that a row stays a unit (a
//! cell merged across columns keeps the columns after it in place). A footnote's text is
//! kept where its mark is (`[1: …]`); an equation is read as its linear text (`(a)/(b)`,
//! `x^2`). The title is the document's own (`docProps/core.xml`) unless it is a template's
//! placeholder, else its first heading.

use crate::structure::escape_line_start;
use std::collections::HashMap;
use std::io::Read;

/// The most of one part of the package read (a `word/document.xml` of 64 MiB is far beyond
/// any document a person wrote; a zip bomb is refused, not inflated).
const MAX_PART: u64 = 64 << 20;

/// The title and the Markdown of a DOCX file, or why it cannot be read.
pub(crate) fn docx_to_markdown(bytes: &[u8]) -> Result<(Option<String>, String), String> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| {
        if bytes.starts_with(&[0xD0, 0xCF, 0x11, 0xE0]) {
            "not a DOCX package: an encrypted (password-protected) document or an old .doc file".to_owned()
        } else {
            format!("not a DOCX package (zip: {e})")
        }
    })?;
    let document = part(&mut zip, "word/document.xml")?
        .ok_or_else(|| "not a Word document: the package has no word/document.xml".to_owned())?;
    let styles = part(&mut zip, "word/styles.xml")?.map(|s| styles(&s)).unwrap_or_default();
    let footnotes = part(&mut zip, "word/footnotes.xml")?.map(|f| footnotes(&f, &styles)).unwrap_or_default();
    let title = part(&mut zip, "docProps/core.xml")?
        .and_then(|core| element_text(&core, "dc:title"))
        .filter(|t| !t.trim().is_empty() && !crate::titles::placeholder_title(t));
    Ok((title, body(&document, &styles, &footnotes)))
}

/// Footnotes by id, each as one line of text.
fn footnotes(xml: &str, styles: &HashMap<String, Style>) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for piece in xml.split("<w:footnote ").skip(1) {
        let head = &piece[..piece.find('>').unwrap_or(piece.len())];
        let inner =
            &piece[piece.find('>').map_or(piece.len(), |k| k + 1)..piece.find("</w:footnote>").unwrap_or(piece.len())];
        // The separator notes Word writes have a type; a reader's note has none.
        if head.contains("w:type=") {
            continue;
        }
        if let Some(id) = attribute(head, "w:id") {
            let text = body(inner, styles, &HashMap::new());
            let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
            if !words.is_empty() {
                out.insert(id, words);
            }
        }
    }
    out
}

/// One part of the package as text; `None` when the package has no such part.
fn part(zip: &mut zip::ZipArchive<std::io::Cursor<&[u8]>>, name: &str) -> Result<Option<String>, String> {
    let file = match zip.by_name(name) {
        Ok(f) => f,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(e) => return Err(format!("{name}: {e}")),
    };
    let mut text = String::new();
    let read = file.take(MAX_PART + 1).read_to_string(&mut text).map_err(|e| format!("{name}: {e}"))?;
    if read as u64 > MAX_PART {
        return Err(format!("{name} is larger than {} MiB", MAX_PART >> 20));
    }
    Ok(Some(text))
}

/// The value of `attr="…"` inside a tag's text.
fn attribute(tag: &str, attr: &str) -> Option<String> {
    let at = tag.find(&format!("{attr}=\""))? + attr.len() + 2;
    let end = tag[at..].find('"')? + at;
    Some(crate::structure::decode_entities(&tag[at..end]))
}

/// The text of the first `<name>…</name>` element.
fn element_text(xml: &str, name: &str) -> Option<String> {
    let open = xml.find(&format!("<{name}"))?;
    let start = xml[open..].find('>')? + open + 1;
    let end = xml[start..].find(&format!("</{name}>"))? + start;
    Some(crate::structure::decode_entities(&xml[start..end]))
}

/// A paragraph style: its name, lower-cased (`Heading1` → `heading 1`), its outline level
/// (0-based, as `w:outlineLvl` gives it) and the style it is based on.
#[derive(Clone, Debug, Default)]
struct Style {
    name: String,
    outline: Option<usize>,
    based_on: Option<String>,
}

/// The package's styles by id.
fn styles(styles: &str) -> HashMap<String, Style> {
    let mut out = HashMap::new();
    for piece in styles.split("<w:style ").skip(1) {
        let head = &piece[..piece.find('>').unwrap_or(piece.len())];
        let body = &piece[..piece.find("</w:style>").unwrap_or(piece.len())];
        let value = |tag: &str| body.find(tag).and_then(|n| attribute(&body[n..], "w:val"));
        if let (Some(id), Some(name)) = (attribute(head, "w:styleId"), value("<w:name ")) {
            let outline = value("<w:outlineLvl ").and_then(|v| v.parse().ok());
            out.insert(id, Style { name: name.to_lowercase(), outline, based_on: value("<w:basedOn ") });
        }
    }
    out
}

/// What a paragraph is, by its properties.
#[derive(Default)]
struct Paragraph {
    text: String,
    /// A heading's level.
    level: Option<usize>,
    item: bool,
    /// An entry of a table of contents (`toc 1` …).
    toc: bool,
}

impl Paragraph {
    fn style(&mut self, id: &str, styles: &HashMap<String, Style>) {
        let name = styles.get(id).map_or_else(|| id.to_lowercase(), |s| s.name.clone());
        if name == "title" {
            self.level = Some(1);
        } else if let Some(n) = name.strip_prefix("heading").map(str::trim).and_then(|n| n.parse::<usize>().ok()) {
            self.level = Some(n.clamp(1, 6));
        } else if name.starts_with("list") {
            self.item = true;
        } else if name.strip_prefix("toc ").is_some_and(|n| n.trim().parse::<u8>().is_ok()) {
            self.toc = true;
        } else if let Some(l) = outline_level(id, styles) {
            // A heading by its style's outline level (`标题 1`, a house style based on one).
            self.level.get_or_insert((l + 1).min(6));
        }
    }

    /// The paragraph's words, white space collapsed (a table cell's text).
    fn words(&self) -> String {
        self.text.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// The paragraph as a Markdown line: a heading, an item, or text whose leading mark
    /// Markdown would read as structure escaped.
    fn markdown(&self) -> String {
        let words = self.words();
        match (self.level, self.item) {
            _ if words.is_empty() => words,
            (Some(l), _) => format!("{} {words}", "#".repeat(l)),
            (None, true) => format!("- {words}"),
            (None, false) => escape_line_start(&words),
        }
    }
}

/// A style's outline level, its own or the nearest of the styles it is based on (9 is body text).
fn outline_level(id: &str, styles: &HashMap<String, Style>) -> Option<usize> {
    let mut at = styles.get(id)?;
    for _ in 0..16 {
        if let Some(l) = at.outline {
            return (l < 9).then_some(l);
        }
        at = styles.get(at.based_on.as_deref()?)?;
    }
    None
}

/// The body of `word/document.xml` (or a footnote's) as Markdown.
fn body(xml: &str, styles: &HashMap<String, Style>, footnotes: &HashMap<String, String>) -> String {
    let mut out = String::new();
    let mut para: Option<Paragraph> = None;
    // Tables may nest: each open table's current row of cells; a nested table's text goes
    // into the cell that holds it.
    let mut rows: Vec<Vec<String>> = Vec::new();
    // Rows written of the outermost table: its first is its header, a delimiter row after it.
    let mut written = 0;
    // Columns the cell being read spans (`w:gridSpan`).
    let mut span = 1usize;
    // Inside a text box's `mc:Fallback` copy, how deep.
    let mut fallback = 0usize;
    let mut in_text = false;
    let mut i = 0;
    while i < xml.len() {
        let Some(lt) = xml[i..].find('<').map(|k| i + k) else { break };
        if in_text {
            if let Some(p) = para.as_mut() {
                p.text.push_str(&crate::structure::decode_entities(&xml[i..lt]));
            }
        }
        let Some(gt) = xml[lt..].find('>').map(|k| lt + k) else { break };
        let tag = &xml[lt + 1..gt];
        i = gt + 1;
        let closing = tag.starts_with('/');
        let name = tag.trim_start_matches('/').split([' ', '/', '\t', '\n']).next().unwrap_or("");
        // A text box's copy for older readers (`mc:Fallback` beside its `mc:Choice`) is the
        // same text again: read once.
        if name == "mc:Fallback" && !tag.ends_with('/') {
            fallback = if closing { fallback.saturating_sub(1) } else { fallback + 1 };
            in_text = false;
            continue;
        }
        if fallback > 0 {
            continue;
        }
        match (name, closing) {
            ("w:p", false) if !tag.ends_with('/') => para = Some(Paragraph::default()),
            ("w:p", true) => {
                let Some(p) = para.take() else { continue };
                // A table of contents' entries repeat the headings (and their page numbers).
                if p.toc {
                    continue;
                }
                match rows.last_mut().and_then(|r| r.last_mut()) {
                    // A cell's paragraphs are one line of the row, their words as written.
                    Some(cell) => {
                        let words = p.words();
                        if !words.is_empty() && !cell.is_empty() {
                            cell.push(' ');
                        }
                        cell.push_str(&words);
                    }
                    None => {
                        let line = p.markdown();
                        if !line.is_empty() {
                            out.push_str(&line);
                            out.push_str("\n\n");
                        }
                    }
                }
            }
            ("w:pStyle", _) => {
                if let (Some(p), Some(id)) = (para.as_mut(), attribute(tag, "w:val")) {
                    p.style(&id, styles);
                }
            }
            ("w:outlineLvl", _) => {
                if let (Some(p), Some(l)) =
                    (para.as_mut(), attribute(tag, "w:val").and_then(|v| v.parse::<usize>().ok()))
                {
                    if l < 9 {
                        p.level = Some((l + 1).min(6));
                    }
                }
            }
            ("w:numPr", false) => {
                if let Some(p) = para.as_mut() {
                    p.item = true;
                }
            }
            ("w:t" | "m:t", false) => in_text = !tag.ends_with('/'),
            ("w:t" | "m:t", true) => in_text = false,
            ("w:footnoteReference", _) => {
                if let (Some(p), Some(id)) = (para.as_mut(), attribute(tag, "w:id")) {
                    match footnotes.get(&id) {
                        Some(note) => p.text.push_str(&format!(" [{id}: {note}]")),
                        None => p.text.push_str(&format!(" [{id}]")),
                    }
                }
            }
            // An equation's linear text: a fraction as `(a)/(b)`, powers and indices marked.
            (m @ ("m:f" | "m:num" | "m:den" | "m:sSup" | "m:sup" | "m:sub" | "m:rad" | "m:e"), _) => {
                if let Some(p) = para.as_mut() {
                    let mark = match (m, closing) {
                        ("m:num" | "m:den", false) => "(",
                        ("m:num", true) => ")/",
                        ("m:den", true) => ")",
                        ("m:sup", false) => "^",
                        ("m:sub", false) => "_",
                        ("m:rad", false) => "√",
                        _ => "",
                    };
                    p.text.push_str(mark);
                }
            }
            ("w:gridSpan", _) => span = attribute(tag, "w:val").and_then(|v| v.parse().ok()).unwrap_or(1).clamp(1, 64),
            ("w:tab" | "w:br" | "w:cr", _) => {
                if let Some(p) = para.as_mut() {
                    p.text.push(' ');
                }
            }
            ("w:tbl", false) => {
                if rows.is_empty() {
                    written = 0;
                }
                rows.push(Vec::new());
            }
            ("w:tbl", true) => {
                rows.pop();
                if rows.is_empty() {
                    out.push('\n');
                }
            }
            ("w:tr", false) => {
                if let Some(r) = rows.last_mut() {
                    r.clear();
                }
            }
            ("w:tr", true) => {
                if let Some(cells) = rows.last_mut().map(std::mem::take) {
                    let row =
                        format!("| {} |", cells.iter().map(|c| c.replace('|', "\\|")).collect::<Vec<_>>().join(" | "));
                    match rows.len() {
                        // A row of the outermost table is a line of its own.
                        1 => {
                            out.push_str(&row);
                            out.push('\n');
                            if written == 0 {
                                out.push_str(&format!("|{}\n", " --- |".repeat(cells.len().max(1))));
                            }
                            written += 1;
                        }
                        // A nested table's row goes into the cell that holds it.
                        n => {
                            if let Some(cell) = rows[n - 2].last_mut() {
                                if !cell.is_empty() {
                                    cell.push(' ');
                                }
                                cell.push_str(&row);
                            }
                        }
                    }
                }
            }
            ("w:tc", false) => {
                span = 1;
                if let Some(r) = rows.last_mut() {
                    r.push(String::new());
                }
            }
            // A cell merged across columns: the columns it covers, empty after it.
            ("w:tc", true) => {
                if let Some(r) = rows.last_mut() {
                    r.extend(std::iter::repeat_n(String::new(), span - 1));
                }
                span = 1;
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_or_encrypted_file_is_named_as_such() {
        assert!(docx_to_markdown(b"plain text").unwrap_err().starts_with("not a DOCX package (zip:"));
        let ole = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1, 0, 0, 0, 0];
        assert!(docx_to_markdown(&ole).unwrap_err().contains("encrypted"));
    }

    #[test]
    fn paragraphs_headings_items_and_rows() {
        let styles: HashMap<String, Style> =
            [("Heading2", "heading 2"), ("Berschrift1", "Heading 1"), ("ListBullet", "list bullet")]
                .into_iter()
                .map(|(a, b)| (a.to_owned(), Style { name: b.to_lowercase(), ..Style::default() }))
                .collect();
        let xml = r#"<w:body><w:p><w:pPr><w:pStyle w:val="Berschrift1"/></w:pPr><w:r><w:t>Care</w:t></w:r></w:p><w:p><w:r><w:t xml:space="preserve">Water </w:t></w:r><w:r><w:t>weekly &amp; well.</w:t></w:r></w:p><w:p><w:pPr><w:numPr><w:ilvl w:val="0"/></w:numPr></w:pPr><w:r><w:t>ferns</w:t></w:r></w:p><w:p><w:r><w:t># not a heading</w:t></w:r></w:p><w:tbl><w:tr><w:tc><w:p><w:r><w:t>a</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>b|c</w:t></w:r></w:p><w:p><w:r><w:t>d</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>-5 °C</w:t></w:r></w:p></w:tc></w:tr></w:tbl><w:p/></w:body>"#;
        assert_eq!(
            body(xml, &styles, &HashMap::new()),
            "# Care\n\nWater weekly & well.\n\n- ferns\n\n\\# not a heading\n\n| a | b\\|c d | -5 °C |\n| --- | --- | --- |\n\n"
        );
    }

    /// Headings by a style's outline level (through `basedOn`), a footnote kept at its mark,
    /// an equation as its linear text, a cell merged over two columns keeping the third in
    /// place.
    #[test]
    fn outline_levels_footnotes_equations_and_merged_cells() {
        let styles = styles(
            r#"<w:styles><w:style w:type="paragraph" w:styleId="a1"><w:name w:val="标题 1"/><w:pPr><w:outlineLvl w:val="0"/></w:pPr></w:style><w:style w:type="paragraph" w:styleId="house"><w:name w:val="House chapter"/><w:basedOn w:val="a1"/></w:style><w:style w:type="paragraph" w:styleId="TOC1"><w:name w:val="toc 1"/></w:style><w:style w:type="paragraph" w:styleId="a2"><w:name w:val="章节 2"/><w:pPr><w:outlineLvl w:val="1"/></w:pPr></w:style></w:styles>"#,
        );
        let notes = footnotes(
            r#"<w:footnotes><w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote><w:footnote w:id="1"><w:p><w:r><w:t>Measured at noon.</w:t></w:r></w:p></w:footnote></w:footnotes>"#,
            &styles,
        );
        let xml = r#"<w:body><w:p><w:pPr><w:pStyle w:val="TOC1"/></w:pPr><w:r><w:t>范围 1</w:t></w:r></w:p><w:p><w:pPr><w:pStyle w:val="house"/></w:pPr><w:r><w:t>范围</w:t></w:r></w:p><w:p><mc:AlternateContent><mc:Choice Requires="wps"><w:r><w:t>In a box</w:t></w:r></mc:Choice><mc:Fallback><w:r><w:t>In a box</w:t></w:r></mc:Fallback></mc:AlternateContent></w:p><w:p><w:pPr><w:pStyle w:val="a2"/></w:pPr><w:r><w:t>Heat</w:t></w:r></w:p><w:p><w:r><w:t>It was 31 °C</w:t></w:r><w:r><w:footnoteReference w:id="1"/></w:r><w:r><w:t>.</w:t></w:r></w:p><w:p><m:oMath><m:f><m:num><m:r><m:t>a</m:t></m:r></m:num><m:den><m:r><m:t>b</m:t></m:r></m:den></m:f><m:sSup><m:e><m:r><m:t>x</m:t></m:r></m:e><m:sup><m:r><m:t>2</m:t></m:r></m:sup></m:sSup></m:oMath></w:p><w:tbl><w:tr><w:tc><w:p><w:r><w:t>A</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>B</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>C</w:t></w:r></w:p></w:tc></w:tr><w:tr><w:tc><w:tcPr><w:gridSpan w:val="2"/></w:tcPr><w:p><w:r><w:t>both</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>c</w:t></w:r></w:p></w:tc></w:tr></w:tbl></w:body>"#;
        assert_eq!(
            body(xml, &styles, &notes),
            "# 范围\n\nIn a box\n\n## Heat\n\nIt was 31 °C [1: Measured at noon.].\n\n(a)/(b)x^2\n\n| A | B | C |\n| --- | --- | --- |\n| both |  | c |\n\n"
        );
    }

    /// A file python-docx wrote (Word's package layout; `tests/fixtures/documents/make-docx.py`).
    #[test]
    fn a_real_package_reads_with_its_title_sections_items_and_rows() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/documents/care-guide.docx");
        let bytes = std::fs::read(path).unwrap();
        let chunks = crate::chunk_document("care-guide.docx", &bytes, crate::DocumentFormat::Docx).unwrap();
        assert!(chunks.iter().all(|c| c.chunk.title == "Care guide for tropical plants"));
        let text: Vec<&str> = chunks.iter().map(|c| c.chunk.text.as_str()).collect();
        assert_eq!(
            text,
            vec![
                "# Tropical plants\n\nTropical plants come from forests where the air is warm and humid all year. They need bright light without direct sun.",
                "## Humidity\n\nGroup plants together: the water each one gives off raises the humidity around the others.\n\n- Set pots on a tray of wet pebbles.\n- Run a humidifier in winter, when heating dries the air.",
                "## Watering by species\n\n| Plant | Water when | Winter |\n| --- | --- | --- |\n| Fern | the surface feels dry | keep moist |\n| Calathea | the top centimetre is dry | less often |\n| Monstera | half the soil is dry | every two weeks |\n\nSoft water or rain water keeps calathea leaves from browning at the tips.",
            ]
        );
        let section = |i: usize| chunks[i].chunk.metadata.get(ragctx_core::SECTION_KEY).cloned();
        assert_eq!(section(0), Some(ragctx_core::MetaValue::String("Tropical plants".into())));
        assert_eq!(section(2), Some(ragctx_core::MetaValue::String("Tropical plants › Watering by species".into())));
    }
}
