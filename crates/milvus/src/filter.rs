//! Boolean expressions for Milvus filters, built so that no id can change their meaning.
//!
//! Milvus ≥ 2.5 takes the id lists as template values (`filter_params`), so the expression
//! holds only field names and placeholders. Older servers get a literal list in which every
//! id is a double-quoted string with `\`, `"`, newline and carriage return escaped — the
//! characters Milvus's expression grammar does not allow bare inside a string. An id such as
//! `zz"] or id >= 0 or doc_id in ["zz` stays one string, and the filter excludes exactly it.

use ragctx_core::ExclusionSet;
use std::collections::HashMap;

/// The primary-key field (chunk id).
pub const ID: &str = "id";
/// The document-id field, grouped by and excluded on.
pub const DOCUMENT_ID: &str = "document_id";

/// A filter expression and the template values it refers to (empty for a literal filter).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub expr: String,
    pub params: HashMap<String, Vec<String>>,
}

/// `"…"` with every character the grammar forbids escaped.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `["a", "b"]`: every id quoted by [`quote`].
fn literal_list<'a>(ids: impl Iterator<Item = &'a str>) -> String {
    format!("[{}]", ids.map(quote).collect::<Vec<_>>().join(", "))
}

/// The filter that keeps excluded chunks and documents out of a search; `None` when nothing
/// is excluded (Milvus rejects an empty list). `templates`: the server takes `filter_params`.
pub fn exclusion(ex: &ExclusionSet, templates: bool) -> Option<Filter> {
    let mut parts = Vec::new();
    let mut params = HashMap::new();
    let documents: Vec<&str> = ex.documents.iter().map(|d| d.as_str()).collect();
    let chunks: Vec<&str> = ex.chunks.iter().map(|c| c.as_str()).collect();
    for (field, name, ids) in [(DOCUMENT_ID, "docs", documents), (ID, "chunks", chunks)] {
        if ids.is_empty() {
            continue;
        }
        if templates {
            parts.push(format!("{field} not in {{{name}}}"));
            params.insert(name.to_owned(), ids.into_iter().map(str::to_owned).collect());
        } else {
            parts.push(format!("{field} not in {}", literal_list(ids.into_iter())));
        }
    }
    match parts.as_slice() {
        [] => None,
        [one] => Some(Filter { expr: one.clone(), params }),
        [a, b] => Some(Filter { expr: format!("({a}) and ({b})"), params }),
        _ => unreachable!("two fields at most"),
    }
}

/// `field in [...]`, literal, for fetching by id.
pub fn in_literal<'a>(field: &str, ids: impl Iterator<Item = &'a str>) -> String {
    format!("{field} in {}", literal_list(ids))
}

/// Parses a literal filter built here back into `(field, ids)` clauses, the way Milvus's
/// grammar reads it: a check that quoting cannot be escaped from. `None` when the text is not
/// of the shape `field not in [..]` joined by `and`.
pub fn parse_not_in(expr: &str) -> Option<Vec<(String, Vec<String>)>> {
    let mut p = Parser { s: expr.as_bytes(), i: 0, text: expr };
    let mut out = Vec::new();
    loop {
        p.ws();
        let paren = p.eat("(");
        p.ws();
        let field = p.ident()?;
        p.ws();
        if !(p.eat("not") && p.ws1() && p.eat("in")) {
            return None;
        }
        p.ws();
        if !p.eat("[") {
            return None;
        }
        let mut ids = Vec::new();
        loop {
            p.ws();
            if p.eat("]") {
                break;
            }
            if !ids.is_empty() {
                if !p.eat(",") {
                    return None;
                }
                p.ws();
            }
            ids.push(p.string()?);
        }
        p.ws();
        if paren && !p.eat(")") {
            return None;
        }
        out.push((field, ids));
        p.ws();
        if p.i == p.s.len() {
            return Some(out);
        }
        if !p.eat("and") {
            return None;
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    text: &'a str,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn ws1(&mut self) -> bool {
        let start = self.i;
        self.ws();
        self.i > start
    }
    fn eat(&mut self, t: &str) -> bool {
        if self.s[self.i..].starts_with(t.as_bytes()) {
            self.i += t.len();
            true
        } else {
            false
        }
    }
    fn ident(&mut self) -> Option<String> {
        let start = self.i;
        while self.i < self.s.len() && (self.s[self.i].is_ascii_alphanumeric() || self.s[self.i] == b'_') {
            self.i += 1;
        }
        (self.i > start).then(|| self.text[start..self.i].to_owned())
    }
    /// A double-quoted string with the escapes Milvus accepts (a subset: those `quote` emits
    /// plus `\'` and `\t`).
    fn string(&mut self) -> Option<String> {
        if !self.eat("\"") {
            return None;
        }
        let mut out = String::new();
        let rest = &self.text[self.i..];
        let mut chars = rest.char_indices();
        while let Some((at, c)) = chars.next() {
            match c {
                '"' => {
                    self.i += at + 1;
                    return Some(out);
                }
                '\n' | '\r' => return None,
                '\\' => match chars.next()?.1 {
                    '\\' => out.push('\\'),
                    '"' => out.push('"'),
                    '\'' => out.push('\''),
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    _ => return None,
                },
                c => out.push(c),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ragctx_core::{ChunkId, DocumentId};

    fn set(docs: &[&str], chunks: &[&str]) -> ExclusionSet {
        ExclusionSet {
            documents: docs.iter().map(|d| DocumentId::from(*d)).collect(),
            chunks: chunks.iter().map(|c| ChunkId::from(*c)).collect(),
        }
    }

    #[test]
    fn empty_exclusion_sends_no_filter() {
        assert_eq!(exclusion(&ExclusionSet::default(), false), None);
        assert_eq!(exclusion(&ExclusionSet::default(), true), None);
    }

    #[test]
    fn hostile_ids_parse_back_to_exactly_themselves() {
        let ids = ragctx_testkit::HOSTILE_IDS;
        let mut all: Vec<&str> = ids.to_vec();
        all.extend(["new\nline", "cr\r", "tab\t", "\\\"", "", "]", "' or '1'='1"]);
        let f = exclusion(&set(&all, &all[..3]), false).unwrap();
        assert!(f.params.is_empty());
        let clauses = parse_not_in(&f.expr).expect("the literal filter parses");
        assert_eq!(clauses.len(), 2, "{}", f.expr);
        let mut want: Vec<String> = all.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(clauses[0].0, DOCUMENT_ID);
        assert_eq!(clauses[0].1, want);
        assert_eq!(clauses[1].0, ID);
        assert_eq!(clauses[1].1.len(), 3);
    }

    #[test]
    fn templated_filter_holds_no_id() {
        let f = exclusion(&set(&["zz\"] or id >= 0 or doc_id in [\"zz"], &["c"]), true).unwrap();
        assert_eq!(f.expr, "(document_id not in {docs}) and (id not in {chunks})");
        assert_eq!(f.params["docs"], vec!["zz\"] or id >= 0 or doc_id in [\"zz".to_string()]);
        assert_eq!(f.params["chunks"], vec!["c".to_string()]);
    }
}
