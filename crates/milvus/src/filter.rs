//! Boolean expressions for Milvus filters, built so that no id or value can change their
//! meaning: the exclusion (`… not in …`), the tenant, and a turn's metadata [`MetaFilter`],
//! joined with `and` into one predicate that goes into the search itself.
//!
//! Milvus ≥ 2.5 takes user strings as template values (`filter_params`), so the expression
//! holds only field names, metadata keys (checked by `core`, and quoted), our own constants
//! and placeholders. Older servers, and Milvus Lite 3.2.2 (which rejects every `{…}`), get
//! literals in which every string is double-quoted with `\`, `"`, newline and carriage
//! return escaped — the characters Milvus's expression grammar does not allow bare inside a
//! string. An id such as `zz"] or id >= 0 or doc_id in ["zz` stays one string, and the
//! filter excludes exactly it.
//!
//! # Metadata filters
//!
//! A chunk's metadata is stored as a JSON field ([`METADATA`]) and, beside it, the type of
//! each value ([`METADATA_TYPES`]: `"s"`, `"n"`, `"b"`, `"l"`), because Milvus's JSON
//! comparisons do not keep types apart: Milvus Lite 3.2.2 finds `true` equal to `1` and a
//! bool within `< 100` (measured). Every condition on a key is therefore guarded by its
//! type, e.g. `metadata["year"] >= 2020` becomes
//! `(metadata_types["year"] == "n" and metadata["year"] >= 2020)`.
//!
//! Milvus evaluates comparisons on a missing key, and ranges on a value of another type, to
//! *null*, with three-valued (Kleene) `and`/`or`/`not`: `not (metadata["k"] == "v")` does not
//! match a chunk without `k`, though [`MetaFilter::matches`] says it must. So the filter is
//! put in negation normal form before it is written: `not` is pushed down to the conditions,
//! and each negated condition is written as its own complement,
//! `(not exists metadata["k"] or not (…guarded condition…))`, whose parts are never null
//! where they decide. A positive expression built only of `and`/`or` over conditions that are
//! true exactly when the reference says so (null elsewhere counts as false) then agrees with
//! [`MetaFilter::matches`] exactly.

use ragctx_core::{ExclusionSet, Field, Filter as MetaFilter, MetaValue, Metadata, Range, Scalar, TENANT_SEPARATOR};
use std::collections::HashMap;

/// The primary-key field (chunk id).
pub const ID: &str = "id";
/// The document-id field, grouped by and excluded on.
pub const DOCUMENT_ID: &str = "document_id";

/// The JSON field holding a chunk's metadata, as [`Metadata`] serialises it.
pub const METADATA: &str = "metadata";
/// The JSON field holding the type of each metadata value ([`type_tag`]).
pub const METADATA_TYPES: &str = "metadata_types";
/// The VarChar field holding the tenant of a chunk ([`ragctx_core::tenant_of`] its id).
pub const TENANT: &str = "tenant";

/// A value a template placeholder stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Template {
    /// One string (`field == {p}`, `json_contains(…, {p})`).
    String(String),
    /// A list of strings (`field in {p}`, `json_contains_any(…, {p})`).
    Strings(Vec<String>),
}

/// A filter expression and the template values it refers to (empty for a literal filter).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub expr: String,
    pub params: HashMap<String, Template>,
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
            params.insert(name.to_owned(), Template::Strings(ids.into_iter().map(str::to_owned).collect()));
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

/// The type tag of a metadata value, stored in [`METADATA_TYPES`] under its key.
pub fn type_tag(value: &MetaValue) -> &'static str {
    match value {
        MetaValue::String(_) => "s",
        MetaValue::Number(_) => "n",
        MetaValue::Bool(_) => "b",
        MetaValue::List(_) => "l",
    }
}

/// What [`METADATA_TYPES`] holds for `metadata`: each key with its [`type_tag`].
pub fn type_tags(metadata: &Metadata) -> Vec<(&str, &'static str)> {
    metadata.iter().map(|(k, v)| (k, type_tag(v))).collect()
}

/// How a search is confined to one tenant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TenantScope<'a> {
    /// Every tenant (no condition).
    All,
    /// `tenant == "t"` on the [`TENANT`] field (the partition key: the server searches only
    /// that tenant's partition).
    Field(&'a str),
    /// `tenant >= "t" and tenant <= "t"`: the same rows as [`TenantScope::Field`], written so
    /// that the server does not confine the search to the partition `t` hashes to. For a
    /// partition-key collection on Milvus 2.3, whose upsert put rows in the wrong partitions
    /// (milvus-io/milvus#30607): its proxy prunes partitions by `==` and `in` on the key
    /// only, and reads a range row by row (measured on 2.3.5: `tenant == "default"` counted 4
    /// of 302 rows of tenant `default`, this range all 302).
    FieldUnpruned(&'a str),
    /// By the stored ids alone, for a collection made before the [`TENANT`] field: the
    /// `default` tenant's ids hold no U+001F; another tenant's lie in `["t\u{1f}", "t\u{20}")`,
    /// which is exactly the ids that start with `t` and U+001F.
    IdPrefix(&'a str),
    /// The `default` tenant by the stored ids, on a server whose `like` takes no leading `%`
    /// (Milvus 2.3): every id outside the ranges of [`TenantScope::IdPrefix`] of the tenants
    /// listed. Exact only when the list holds every other tenant in the collection; the store
    /// checks each search's hits and searches again with the tenants they reveal, so no hit of
    /// another tenant is ever returned.
    DefaultBesides(&'a [String]),
}

/// What a search's whole predicate (filter, exclusion, tenant) comes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Predicate {
    /// No condition at all.
    Everything,
    /// No chunk can pass (e.g. `{"not": {}}`): the search returns nothing.
    Nothing,
    /// The chunks this expression selects.
    Where(Filter),
}

/// Writes the one predicate of a search: `filter`, `exclusion` and `tenant` joined by `and`
/// (DESIGN §8: evaluated inside the search, never after it). `templates`: the server takes
/// `filter_params`. `metadata`: the collection has the metadata fields; without them a
/// filter that reads a metadata key is refused (never ignored), while `document_id`
/// conditions still work.
pub fn predicate(
    filter: &MetaFilter,
    exclusion: &ExclusionSet,
    tenant: TenantScope<'_>,
    templates: bool,
    metadata: bool,
) -> ragctx_core::Result<Predicate> {
    let mut w = Writer { templates, metadata, params: HashMap::new() };
    let tenant = w.tenant(tenant);
    let filter = w.filter(filter, true)?;
    let exclusion = match self::exclusion(exclusion, templates) {
        Some(Filter { expr, params }) => {
            w.params.extend(params);
            Expr::Text(expr)
        }
        None => Expr::True,
    };
    Ok(match join(vec![tenant, exclusion, filter], true) {
        Expr::True => Predicate::Everything,
        Expr::False => Predicate::Nothing,
        Expr::Text(expr) => Predicate::Where(Filter { expr, params: w.params }),
    })
}

/// An expression being written, with `true` and `false` kept apart so they fold away (Milvus
/// has no boolean literal that every version reads).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Expr {
    True,
    False,
    Text(String),
}

/// `parts` joined by `and` (or `or`), constants folded, every operand parenthesised.
fn join(parts: Vec<Expr>, and: bool) -> Expr {
    let (unit, zero, op) = if and { (Expr::True, Expr::False, " and ") } else { (Expr::False, Expr::True, " or ") };
    let mut texts = Vec::new();
    for part in parts {
        match part {
            Expr::Text(t) => texts.push(t),
            p if p == zero => return zero,
            _ => {}
        }
    }
    match texts.len() {
        0 => unit,
        1 => Expr::Text(texts.pop().expect("one")),
        _ => Expr::Text(texts.iter().map(|t| format!("({t})")).collect::<Vec<_>>().join(op)),
    }
}

/// A number as Milvus's grammar reads it back to the same `f64`: integers as integers, the
/// rest in Rust's shortest round-trip form (`0.1`, `1e20`, `-1.5e-7`).
fn number(n: f64) -> ragctx_core::Result<String> {
    if !n.is_finite() {
        return Err(ragctx_core::Error::InvalidInput(format!("filter number {n} is not finite")));
    }
    Ok(if n.fract() == 0.0 && n.abs() < 9.0e15 { format!("{}", n as i64) } else { format!("{n:?}") })
}

struct Writer {
    templates: bool,
    metadata: bool,
    params: HashMap<String, Template>,
}

impl Writer {
    /// A user string: a placeholder, or quoted.
    fn string(&mut self, s: &str) -> String {
        if self.templates {
            let name = format!("v{}", self.params.len());
            self.params.insert(name.clone(), Template::String(s.to_owned()));
            format!("{{{name}}}")
        } else {
            quote(s)
        }
    }

    /// A list of user strings: a placeholder, or a literal list of quoted strings.
    fn strings(&mut self, list: &[&str]) -> String {
        if self.templates {
            let name = format!("v{}", self.params.len());
            self.params.insert(name.clone(), Template::Strings(list.iter().map(|s| s.to_string()).collect()));
            format!("{{{name}}}")
        } else {
            literal_list(list.iter().copied())
        }
    }

    fn tenant(&mut self, scope: TenantScope<'_>) -> Expr {
        match scope {
            TenantScope::All => Expr::True,
            TenantScope::Field(t) => Expr::Text(format!("{TENANT} == {}", self.string(t))),
            TenantScope::FieldUnpruned(t) => {
                let (from, to) = (self.string(t), self.string(t));
                Expr::Text(format!("{TENANT} >= {from} and {TENANT} <= {to}"))
            }
            TenantScope::IdPrefix(ragctx_core::DEFAULT_TENANT) => {
                Expr::Text(format!("not ({ID} like {})", quote(&format!("%{TENANT_SEPARATOR}%"))))
            }
            TenantScope::IdPrefix(t) => {
                let from = self.string(&format!("{t}{TENANT_SEPARATOR}"));
                let to = self.string(&format!("{t}\u{20}"));
                Expr::Text(format!("{ID} >= {from} and {ID} < {to}"))
            }
            TenantScope::DefaultBesides(others) => {
                let outside = others
                    .iter()
                    .filter(|t| t.as_str() != ragctx_core::DEFAULT_TENANT)
                    .map(|t| {
                        let from = self.string(&format!("{t}{TENANT_SEPARATOR}"));
                        let to = self.string(&format!("{t}\u{20}"));
                        Expr::Text(format!("{ID} < {from} or {ID} >= {to}"))
                    })
                    .collect();
                join(outside, true)
            }
        }
    }

    /// `filter` (`positive`) or its complement, in negation normal form.
    fn filter(&mut self, filter: &MetaFilter, positive: bool) -> ragctx_core::Result<Expr> {
        Ok(match filter {
            MetaFilter::All => {
                if positive {
                    Expr::True
                } else {
                    Expr::False
                }
            }
            MetaFilter::And(parts) | MetaFilter::Or(parts) => {
                let all = matches!(filter, MetaFilter::And(_)) == positive;
                let parts = parts.iter().map(|p| self.filter(p, positive)).collect::<ragctx_core::Result<Vec<_>>>()?;
                join(parts, all)
            }
            MetaFilter::Not(inner) => self.filter(inner, !positive)?,
            MetaFilter::Eq(Field::DocumentId, s) => self.document(std::slice::from_ref(s), positive),
            MetaFilter::In(Field::DocumentId, values) => self.document(values, positive),
            MetaFilter::Range(Field::DocumentId, ..) => self.filter(&MetaFilter::All, !positive)?,
            MetaFilter::Exists(Field::DocumentId) => self.filter(&MetaFilter::All, positive)?,
            MetaFilter::Eq(Field::Meta(k), s) => self.meta(k, std::slice::from_ref(s), None, positive)?,
            MetaFilter::In(Field::Meta(k), values) => self.meta(k, values, None, positive)?,
            MetaFilter::Range(Field::Meta(k), range, bound) => self.meta(k, &[], Some((*range, *bound)), positive)?,
            MetaFilter::Exists(Field::Meta(k)) => {
                let key = self.key(k)?;
                Expr::Text(if positive {
                    format!("exists {METADATA}[{key}]")
                } else {
                    format!("not exists {METADATA}[{key}]")
                })
            }
        })
    }

    /// `document_id` equal to one of `values` (a VarChar field: never null, so `not` is its
    /// complement).
    fn document(&mut self, values: &[Scalar], positive: bool) -> Expr {
        let ids: Vec<&str> = values
            .iter()
            .filter_map(|v| match v {
                Scalar::String(s) => Some(s.as_str()),
                _ => None,
            })
            .collect();
        if ids.is_empty() {
            return if positive { Expr::False } else { Expr::True };
        }
        let list = self.strings(&ids);
        Expr::Text(if positive { format!("{DOCUMENT_ID} in {list}") } else { format!("{DOCUMENT_ID} not in {list}") })
    }

    /// The quoted key, checked (a filter made by `core`'s parser always passes).
    fn key(&self, k: &str) -> ragctx_core::Result<String> {
        if !self.metadata {
            return Err(ragctx_core::Error::InvalidInput(format!(
                "the filter reads metadata key {k:?}, but this Milvus collection predates metadata: \
                 re-ingest into a new --collection to filter on metadata"
            )));
        }
        if !ragctx_core::valid_metadata_key(k) {
            return Err(ragctx_core::Error::InvalidInput(format!(
                "metadata key {k:?} is invalid: use letters, digits, '_', '.' or '-'"
            )));
        }
        Ok(quote(k))
    }

    /// Key `k` equal to one of `values` (contained, for a list), or within `range`; each
    /// comparison guarded by the value's type, so it is never null once the key exists. The
    /// complement is `not exists` or `not` of that.
    fn meta(
        &mut self,
        k: &str,
        values: &[Scalar],
        range: Option<(Range, f64)>,
        positive: bool,
    ) -> ragctx_core::Result<Expr> {
        let key = self.key(k)?;
        let value = format!("{METADATA}[{key}]");
        let tag = |t: &str| format!("{METADATA_TYPES}[{key}] == \"{t}\"");
        let mut strings = Vec::new();
        let (mut numbers, mut bools) = (Vec::new(), Vec::new());
        for v in values {
            match v {
                Scalar::String(s) => strings.push(s.as_str()),
                Scalar::Number(n) => numbers.push(format!("{value} == {}", number(*n)?)),
                Scalar::Bool(b) => bools.push(format!("{value} == {b}")),
            }
        }
        let mut any = Vec::new();
        if !strings.is_empty() {
            let equal: Vec<String> = strings.iter().map(|s| format!("{value} == {}", self.string(s))).collect();
            any.push(join(vec![Expr::Text(tag("s")), join(equal.into_iter().map(Expr::Text).collect(), false)], true));
            let contains = match strings.as_slice() {
                [one] => format!("json_contains({value}, {})", self.string(one)),
                many => format!("json_contains_any({value}, {})", self.strings(many)),
            };
            any.push(join(vec![Expr::Text(tag("l")), Expr::Text(contains)], true));
        }
        for (t, equal) in [("n", numbers), ("b", bools)] {
            if !equal.is_empty() {
                any.push(join(
                    vec![Expr::Text(tag(t)), join(equal.into_iter().map(Expr::Text).collect(), false)],
                    true,
                ));
            }
        }
        if let Some((range, bound)) = range {
            let op = match range {
                Range::Gt => ">",
                Range::Gte => ">=",
                Range::Lt => "<",
                Range::Lte => "<=",
            };
            any.push(join(vec![Expr::Text(tag("n")), Expr::Text(format!("{value} {op} {}", number(bound)?))], true));
        }
        let holds = join(any, false);
        Ok(match (positive, holds) {
            (true, e) => e,
            (false, Expr::Text(t)) => Expr::Text(format!("(not exists {value}) or (not ({t}))")),
            (false, Expr::True) => Expr::False,
            (false, Expr::False) => Expr::True,
        })
    }
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
mod tests;
