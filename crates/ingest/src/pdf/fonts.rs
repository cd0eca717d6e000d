//! Fonts mended before pdf-extract reads them, where a file is readable and pdf-extract
//! would give up on it (it panics, and the page is lost): a simple font's encoding named
//! `StandardEncoding` (or any name but the three it knows) read as WinAnsi, which spells
//! letters, digits and common marks alike; a `ToUnicode` map or an embedded CMap whose
//! sections announce more entries than they hold (`4 beginbfchar` over three lines: what
//! pdfcpu writes) given the counts they hold, as pypdf and poppler read it.

use pdf_extract::{Document, Object, ObjectId};

/// The simple-font encodings pdf-extract reads.
const KNOWN: [&[u8]; 3] = [b"WinAnsiEncoding", b"MacRomanEncoding", b"MacExpertEncoding"];

/// Mends every font of the document as the module says.
pub(crate) fn mend(doc: &mut Document) {
    let mut maps: Vec<ObjectId> = Vec::new();
    for object in doc.objects.values_mut() {
        let Object::Dictionary(font) = object else { continue };
        if !font.get(b"Type").and_then(Object::as_name).is_ok_and(|t| t == b"Font") {
            continue;
        }
        if let Ok(map) = font.get(b"ToUnicode").and_then(Object::as_reference) {
            maps.push(map);
        }
        if font.get(b"Subtype").and_then(Object::as_name).is_ok_and(|s| s == b"Type0") {
            // An embedded CMap (a stream) is mended as a ToUnicode map is.
            if let Ok(cmap) = font.get(b"Encoding").and_then(Object::as_reference) {
                maps.push(cmap);
            }
            continue;
        }
        match font.get_mut(b"Encoding") {
            Ok(Object::Name(name)) if !KNOWN.contains(&name.as_slice()) => *name = b"WinAnsiEncoding".to_vec(),
            Ok(Object::Dictionary(encoding)) => {
                if let Ok(Object::Name(base)) = encoding.get_mut(b"BaseEncoding") {
                    if !KNOWN.contains(&base.as_slice()) {
                        *base = b"WinAnsiEncoding".to_vec();
                    }
                }
            }
            _ => {}
        }
    }
    for id in maps {
        if let Ok(Object::Stream(stream)) = doc.get_object_mut(id) {
            // Only a map stored inflated (every one the load inflated) is read here.
            if stream.dict.get(b"Filter").is_err() {
                if let Some(fixed) = counted(&stream.content) {
                    stream.set_content(fixed);
                }
            }
        }
    }
}

/// A CMap's `N beginbfchar` (`bfrange`, `cidchar`, `cidrange`) sections with N the entries
/// each holds;
/// `None` when every count is right already.
fn counted(cmap: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(cmap).ok()?;
    // `notdef` sections (what an undefined code shows) are dropped: pdf-extract's parser
    // stops at them, and text needs none.
    let without = without_notdef(text);
    let text = without.as_deref().unwrap_or(text);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut changed = false;
    while let Some((at, (begin, end, per))) = next_section(rest) {
        let body_start = at + begin.len();
        let Some(body_len) = rest[body_start..].find(end) else { break };
        let body = &rest[body_start..body_start + body_len];
        let entries = tokens(body) / per;
        // The count written before the keyword: the last word before it.
        let head = &rest[..at];
        let trimmed = head.trim_end();
        let digits = trimmed.len() - trimmed.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let written: Option<usize> = trimmed[trimmed.len() - digits..].parse().ok();
        if digits > 0 && written != Some(entries) {
            out.push_str(&trimmed[..trimmed.len() - digits]);
            out.push_str(&entries.to_string());
            out.push_str(&head[trimmed.len()..]);
            changed = true;
        } else {
            out.push_str(head);
        }
        out.push_str(&rest[at..body_start + body_len]);
        rest = &rest[body_start + body_len..];
    }
    out.push_str(rest);
    (changed || without.is_some()).then(|| out.into_bytes())
}

/// `N beginnotdefrange … endnotdefrange` and `N beginnotdefchar … endnotdefchar` taken out;
/// `None` when there are none.
fn without_notdef(text: &str) -> Option<String> {
    if !text.contains("beginnotdef") {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("beginnotdef") {
        let Some(end) = rest[at..].find("endnotdef").map(|e| at + e) else { break };
        let head = rest[..at].trim_end();
        out.push_str(head.trim_end_matches(|c: char| c.is_ascii_digit()));
        let after = &rest[end..];
        rest = &after[after.find(|c: char| c.is_whitespace()).unwrap_or(after.len())..];
    }
    out.push_str(rest);
    Some(out)
}

/// The sections a CMap counts, each with its end and the operands of one entry
/// ([`tokens`]: hex strings and arrays).
const SECTIONS: [(&str, &str, usize); 4] = [
    ("beginbfchar", "endbfchar", 2),
    ("beginbfrange", "endbfrange", 3),
    ("begincidchar", "endcidchar", 1),
    ("begincidrange", "endcidrange", 2),
];

/// The next counted section: where its keyword is, and what it is.
fn next_section(text: &str) -> Option<(usize, (&'static str, &'static str, usize))> {
    SECTIONS.iter().filter_map(|s| text.find(s.0).map(|k| (k, *s))).min_by_key(|(k, _)| *k)
}

/// The operands of a section's entries: each `<hex>` string, and each `[ … ]` array as one.
fn tokens(body: &str) -> usize {
    let mut n = 0;
    let mut depth = 0;
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            '[' => {
                if depth == 0 {
                    n += 1;
                }
                depth += 1;
            }
            ']' => depth = (depth - 1).max(0),
            '<' if depth == 0 => {
                n += 1;
                for c in chars.by_ref() {
                    if c == '>' {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::counted;

    #[test]
    fn sections_get_the_counts_they_hold() {
        let cmap = b"1 begincodespacerange\n<0000> <FFFF>\nendcodespacerange\n4 beginbfchar\n<03AA> <03CC>\n<03AB> <03CD>\n<03AC> <03CE>\nendbfchar\n2 beginbfrange\n<0001> <0002> [<0041> <0042>]\nendbfrange\n3 begincidrange\n<20> <7e> 1\nendcidrange\nendcmap";
        let fixed = String::from_utf8(counted(cmap).unwrap()).unwrap();
        assert!(fixed.contains("\n3 beginbfchar\n<03AA>") && fixed.contains("\n1 beginbfrange\n"), "{fixed}");
        assert!(fixed.contains("\n1 begincidrange\n<20>"), "{fixed}");
        let notdef = b"endcodespacerange\n1 beginnotdefrange\n<00> <1F> 1\nendnotdefrange\n1 begincidrange\n<20> <7e> 1\nendcidrange";
        let fixed = String::from_utf8(counted(notdef).unwrap()).unwrap();
        assert_eq!(fixed, "endcodespacerange\n\n1 begincidrange\n<20> <7e> 1\nendcidrange");
        assert_eq!(counted(fixed.as_bytes()), None, "right counts are left as they are");
    }
}
