//! DOCX (Office Open XML) read as Markdown for [`crate::structure::parse`]: paragraphs,
//! headings (by their style: `heading N`, `Title`, or an outline level), list items (a
//! numbered paragraph or a `List …` style) and tables, each row one line `| a | b |` so that
//! a row stays a unit. The title is the document's own (`docProps/core.xml`), else its first
//! heading.

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
    let styles = part(&mut zip, "word/styles.xml")?.map(|s| style_names(&s)).unwrap_or_default();
    let title = part(&mut zip, "docProps/core.xml")?
        .and_then(|core| element_text(&core, "dc:title"))
        .filter(|t| !t.trim().is_empty());
    Ok((title, body(&document, &styles)))
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

/// Style ids and their names, lower-cased (`Heading1` → `heading 1`, `ListBullet` → `list bullet`).
fn style_names(styles: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for piece in styles.split("<w:style ").skip(1) {
        let head = &piece[..piece.find('>').unwrap_or(piece.len())];
        let body = &piece[..piece.find("</w:style>").unwrap_or(piece.len())];
        let name = body.find("<w:name ").and_then(|n| attribute(&body[n..], "w:val"));
        if let (Some(id), Some(name)) = (attribute(head, "w:styleId"), name) {
            out.insert(id, name.to_lowercase());
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
}

impl Paragraph {
    fn style(&mut self, id: &str, styles: &HashMap<String, String>) {
        let name = styles.get(id).cloned().unwrap_or_else(|| id.to_lowercase());
        if name == "title" {
            self.level = Some(1);
        } else if let Some(n) = name.strip_prefix("heading").map(str::trim).and_then(|n| n.parse::<usize>().ok()) {
            self.level = Some(n.clamp(1, 6));
        } else if name.starts_with("list") {
            self.item = true;
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

/// The body of `word/document.xml` as Markdown.
fn body(xml: &str, styles: &HashMap<String, String>) -> String {
    let mut out = String::new();
    let mut para: Option<Paragraph> = None;
    // Tables may nest: each open table's current row of cells; a nested table's text goes
    // into the cell that holds it.
    let mut rows: Vec<Vec<String>> = Vec::new();
    // Rows written of the outermost table: its first is its header, a delimiter row after it.
    let mut written = 0;
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
        match (name, closing) {
            ("w:p", false) if !tag.ends_with('/') => para = Some(Paragraph::default()),
            ("w:p", true) => {
                let Some(p) = para.take() else { continue };
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
            ("w:t", false) => in_text = !tag.ends_with('/'),
            ("w:t", true) => in_text = false,
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
                if let Some(r) = rows.last_mut() {
                    r.push(String::new());
                }
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
        let styles: HashMap<String, String> =
            [("Heading2", "heading 2"), ("Berschrift1", "Heading 1"), ("ListBullet", "list bullet")]
                .into_iter()
                .map(|(a, b)| (a.to_owned(), b.to_lowercase()))
                .collect();
        let xml = r#"<w:body><w:p><w:pPr><w:pStyle w:val="Berschrift1"/></w:pPr><w:r><w:t>Care</w:t></w:r></w:p><w:p><w:r><w:t xml:space="preserve">Water </w:t></w:r><w:r><w:t>weekly &amp; well.</w:t></w:r></w:p><w:p><w:pPr><w:numPr><w:ilvl w:val="0"/></w:numPr></w:pPr><w:r><w:t>ferns</w:t></w:r></w:p><w:p><w:r><w:t># not a heading</w:t></w:r></w:p><w:tbl><w:tr><w:tc><w:p><w:r><w:t>a</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>b|c</w:t></w:r></w:p><w:p><w:r><w:t>d</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>-5 °C</w:t></w:r></w:p></w:tc></w:tr></w:tbl><w:p/></w:body>"#;
        assert_eq!(
            body(xml, &styles),
            "# Care\n\nWater weekly & well.\n\n- ferns\n\n\\# not a heading\n\n| a | b\\|c d | -5 °C |\n| --- | --- | --- |\n\n"
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
