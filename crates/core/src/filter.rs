//! The one filter language of ragctx (DESIGN §8): parsed from JSON once, evaluated inside
//! every search (the embedded index and BM25 through `MetadataIndex` in the index crate, Milvus as a
//! compiled expression), with [`Filter::matches`] as the reference every backend agrees with.
//!
//! ```
//! use ragctx_core::{Filter, Metadata, Json};
//! let f: Filter = serde_json::from_str(r#"{"topic": "pests", "year": {"gte": 2020}}"#).unwrap();
//! let meta: Metadata = serde_json::from_str(r#"{"topic": "pests", "year": 2024}"#).unwrap();
//! assert!(f.matches("doc-1", &meta));
//! let bad = serde_json::from_str::<Filter>(r#"{"or": [{"year": {"gt": "x"}}]}"#).unwrap_err();
//! assert!(bad.to_string().contains("filter.or[0].year.gt"));
//! ```

use crate::metadata::{valid_key, Json, MetaValue, Metadata, MAX_STRING_BYTES};
use crate::{Error, Result};
use serde::ser::{SerializeMap, Serializer};
use serde::{de, Deserialize, Deserializer, Serialize};

/// Deepest nesting of `and` / `or` / `not` accepted.
pub const MAX_DEPTH: usize = 16;
/// Most conditions and values in one filter.
pub const MAX_TERMS: usize = 1024;

/// The field a condition reads: the chunk's document id, or a metadata key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// `document_id`: filterable like a metadata key (equality, `in`, `nin`, `exists`).
    DocumentId,
    /// A metadata key.
    Meta(String),
}

impl Field {
    /// The name as written in a filter.
    pub fn name(&self) -> &str {
        match self {
            Field::DocumentId => "document_id",
            Field::Meta(k) => k,
        }
    }
}

/// A value a condition compares with.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    /// Equal to a string value, or contained in a list value.
    String(String),
    /// Equal to a number value.
    Number(f64),
    /// Equal to a bool value.
    Bool(bool),
}

/// A comparison with a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Range {
    /// `gt`
    Gt,
    /// `gte`
    Gte,
    /// `lt`
    Lt,
    /// `lte`
    Lte,
}

impl Range {
    /// The operator's name in a filter.
    pub fn as_str(self) -> &'static str {
        match self {
            Range::Gt => "gt",
            Range::Gte => "gte",
            Range::Lt => "lt",
            Range::Lte => "lte",
        }
    }
    /// Whether `value` passes the comparison with `bound`.
    pub fn holds(self, value: f64, bound: f64) -> bool {
        match self {
            Range::Gt => value > bound,
            Range::Gte => value >= bound,
            Range::Lt => value < bound,
            Range::Lte => value <= bound,
        }
    }
}

/// A parsed filter. [`Filter::All`] (the empty object `{}`) lets everything through.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Filter {
    /// No condition.
    #[default]
    All,
    /// `{"f": v}`: equal (a list field: contains).
    Eq(Field, Scalar),
    /// `{"f": {"in": [..]}}`: equal to one of them; `nin` is its [`Filter::Not`].
    In(Field, Vec<Scalar>),
    /// `{"f": {"gt"|"gte"|"lt"|"lte": n}}`: a number field compared with `n`.
    Range(Field, Range, f64),
    /// `{"f": {"exists": true}}` (`false` is its [`Filter::Not`]).
    Exists(Field),
    /// Every one holds.
    And(Vec<Filter>),
    /// At least one holds.
    Or(Vec<Filter>),
    /// It does not hold.
    Not(Box<Filter>),
}

/// A filter that could not be read: where (a JSON path from `filter`) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid filter at {path}: {message}")]
pub struct FilterError {
    /// The JSON path of the bad part, e.g. `filter.and[1].year.gt`.
    pub path: String,
    /// What is wrong and what is accepted.
    pub message: String,
}

impl From<FilterError> for Error {
    fn from(e: FilterError) -> Error {
        Error::InvalidInput(e.to_string())
    }
}

const OPERATORS: &str = "in, nin, gt, gte, lt, lte, exists";

struct Parser {
    terms: usize,
    /// Whether the depth and size bounds apply (input from callers; not a filter ragctx
    /// printed itself, e.g. into a trace: printing may nest one level deeper).
    bounded: bool,
}

impl Parser {
    fn err<T>(path: &str, message: impl Into<String>) -> std::result::Result<T, FilterError> {
        Err(FilterError { path: path.to_owned(), message: message.into() })
    }

    fn count(&mut self, path: &str, n: usize) -> std::result::Result<(), FilterError> {
        self.terms += n;
        if self.bounded && self.terms > MAX_TERMS {
            return Self::err(path, format!("a filter holds at most {MAX_TERMS} conditions and values"));
        }
        Ok(())
    }

    fn filter(&mut self, json: &Json, path: &str, depth: usize) -> std::result::Result<Filter, FilterError> {
        if self.bounded && depth > MAX_DEPTH {
            return Self::err(path, format!("filters nest at most {MAX_DEPTH} deep"));
        }
        if depth > 4 * MAX_DEPTH {
            return Self::err(path, "nested too deeply");
        }
        let Json::Object(entries) = json else {
            return Self::err(
                path,
                format!("is {}: a filter is an object such as {{\"topic\": \"pests\"}}", json.kind()),
            );
        };
        let mut all = Vec::with_capacity(entries.len());
        for (key, value) in entries {
            let at = format!("{path}.{key}");
            self.count(&at, 1)?;
            let clause = match key.as_str() {
                "and" | "or" => {
                    let Json::Array(items) = value else {
                        return Self::err(&at, format!("is {}: `{key}` takes an array of filters", value.kind()));
                    };
                    if items.is_empty() {
                        return Self::err(&at, format!("`{key}` takes at least one filter"));
                    }
                    let parts = items
                        .iter()
                        .enumerate()
                        .map(|(i, f)| self.filter(f, &format!("{at}[{i}]"), depth + 1))
                        .collect::<std::result::Result<Vec<_>, _>>()?;
                    if key == "and" {
                        Filter::And(parts)
                    } else {
                        Filter::Or(parts)
                    }
                }
                "not" => Filter::Not(Box::new(self.filter(value, &at, depth + 1)?)),
                field => self.condition(field_of(field, &at)?, value, &at)?,
            };
            all.push(clause);
        }
        Ok(match all.len() {
            0 => Filter::All,
            1 => all.pop().expect("one"),
            _ => Filter::And(all),
        })
    }

    fn condition(&mut self, field: Field, value: &Json, path: &str) -> std::result::Result<Filter, FilterError> {
        let Json::Object(ops) = value else {
            return Ok(Filter::Eq(field.clone(), scalar(&field, value, path)?));
        };
        if ops.is_empty() {
            return Self::err(path, format!("an operator object needs one of {OPERATORS}"));
        }
        let mut all = Vec::with_capacity(ops.len());
        for (op, arg) in ops {
            let at = format!("{path}.{op}");
            let clause = match op.as_str() {
                "in" | "nin" => {
                    let Json::Array(items) = arg else {
                        return Self::err(&at, format!("is {}: `{op}` takes an array of values", arg.kind()));
                    };
                    if items.is_empty() {
                        return Self::err(&at, format!("`{op}` takes at least one value"));
                    }
                    self.count(&at, items.len())?;
                    let values = items
                        .iter()
                        .enumerate()
                        .map(|(i, v)| scalar(&field, v, &format!("{at}[{i}]")))
                        .collect::<std::result::Result<Vec<_>, _>>()?;
                    let f = Filter::In(field.clone(), values);
                    if op == "nin" {
                        Filter::Not(Box::new(f))
                    } else {
                        f
                    }
                }
                "gt" | "gte" | "lt" | "lte" => {
                    if field == Field::DocumentId {
                        return Self::err(&at, "document_id takes equality, in, nin and exists only");
                    }
                    let Json::Number(n) = arg else {
                        return Self::err(&at, format!("is {}: `{op}` compares with a number", arg.kind()));
                    };
                    let range = match op.as_str() {
                        "gt" => Range::Gt,
                        "gte" => Range::Gte,
                        "lt" => Range::Lt,
                        _ => Range::Lte,
                    };
                    Filter::Range(field.clone(), range, *n)
                }
                "exists" => match arg {
                    Json::Bool(true) => Filter::Exists(field.clone()),
                    Json::Bool(false) => Filter::Not(Box::new(Filter::Exists(field.clone()))),
                    other => return Self::err(&at, format!("is {}: `exists` takes true or false", other.kind())),
                },
                other => return Self::err(&at, format!("unknown operator {other:?}: use {OPERATORS}")),
            };
            all.push(clause);
        }
        Ok(if all.len() == 1 { all.pop().expect("one") } else { Filter::And(all) })
    }
}

fn field_of(key: &str, path: &str) -> std::result::Result<Field, FilterError> {
    if key == "document_id" {
        return Ok(Field::DocumentId);
    }
    if !valid_key(key) {
        return Parser::err(
            path,
            format!("{key:?} is neither `and`, `or`, `not` nor a metadata key (letters, digits, '_', '.', '-')"),
        );
    }
    Ok(Field::Meta(key.to_owned()))
}

fn scalar(field: &Field, json: &Json, path: &str) -> std::result::Result<Scalar, FilterError> {
    let value = match json {
        Json::String(s) if s.len() > MAX_STRING_BYTES => {
            return Parser::err(path, format!("a string of at most {MAX_STRING_BYTES} bytes"))
        }
        Json::String(s) => Scalar::String(s.clone()),
        Json::Number(n) => Scalar::Number(*n),
        Json::Bool(b) => Scalar::Bool(*b),
        Json::Array(_) => {
            return Parser::err(path, "is an array: use {\"in\": [...]} to match one of several values");
        }
        other => return Parser::err(path, format!("is {}: compare with a string, a number or a bool", other.kind())),
    };
    if *field == Field::DocumentId && !matches!(value, Scalar::String(_)) {
        return Parser::err(path, "document_id is compared with strings");
    }
    Ok(value)
}

impl Filter {
    /// Parses the filter object `json`; errors name the JSON path of the bad part.
    pub fn from_json(json: &Json) -> std::result::Result<Filter, FilterError> {
        Parser { terms: 0, bounded: true }.filter(json, "filter", 0)
    }

    /// [`Filter::from_json`] without the depth and size bounds, for a filter ragctx wrote
    /// itself (a trace's settings): the bounds guard input, and a printed filter (or two
    /// filters joined by `and`) may exceed them by a level.
    pub fn from_stored_json(json: &Json) -> std::result::Result<Filter, FilterError> {
        Parser { terms: 0, bounded: false }.filter(json, "filter", 0)
    }

    /// Reads a stored filter (see [`Filter::from_stored_json`]) with serde.
    pub fn deserialize_stored<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Filter, D::Error> {
        let json = Json::deserialize(d)?;
        if json == Json::Null {
            return Ok(Filter::All);
        }
        Filter::from_stored_json(&json).map_err(de::Error::custom)
    }

    /// Parses a filter from JSON text (`--filter`, `RAGCTX_FILTER`, the config's `filter`).
    pub fn parse(text: &str) -> Result<Filter> {
        let json: Json = serde_json_lite::from_str(text)
            .map_err(|e| Error::InvalidInput(format!("invalid filter: not JSON ({e}): {text}")))?;
        Ok(Filter::from_json(&json)?)
    }

    /// True for [`Filter::All`].
    pub fn is_all(&self) -> bool {
        *self == Filter::All
    }

    /// Both filters: `self` and `other` (an empty side drops out).
    pub fn and(self, other: Filter) -> Filter {
        match (self, other) {
            (Filter::All, f) | (f, Filter::All) => f,
            (Filter::And(mut a), Filter::And(b)) => {
                a.extend(b);
                Filter::And(a)
            }
            (Filter::And(mut a), f) => {
                a.push(f);
                Filter::And(a)
            }
            (f, g) => Filter::And(vec![f, g]),
        }
    }

    /// The reference evaluation: whether a chunk of `document_id` with `meta` passes. Every
    /// index and backend must agree with it (property-tested).
    pub fn matches(&self, document_id: &str, meta: &Metadata) -> bool {
        let value = |f: &Field| -> Option<Value<'_>> {
            match f {
                Field::DocumentId => Some(Value::Doc(document_id)),
                Field::Meta(k) => meta.get(k).map(Value::Meta),
            }
        };
        match self {
            Filter::All => true,
            Filter::Eq(f, s) => value(f).is_some_and(|v| v.equals(s)),
            Filter::In(f, list) => value(f).is_some_and(|v| list.iter().any(|s| v.equals(s))),
            Filter::Range(f, r, bound) => {
                matches!(value(f), Some(Value::Meta(MetaValue::Number(n))) if r.holds(*n, *bound))
            }
            Filter::Exists(f) => value(f).is_some(),
            Filter::And(parts) => parts.iter().all(|p| p.matches(document_id, meta)),
            Filter::Or(parts) => parts.iter().any(|p| p.matches(document_id, meta)),
            Filter::Not(inner) => !inner.matches(document_id, meta),
        }
    }

    /// Rewrites every `document_id` value with `f` (a tenant-scoped store qualifies them).
    pub fn map_document_ids(&self, f: &impl Fn(&str) -> String) -> Filter {
        let doc = |field: &Field, s: &Scalar| match (field, s) {
            (Field::DocumentId, Scalar::String(v)) => Scalar::String(f(v)),
            _ => s.clone(),
        };
        match self {
            Filter::Eq(field, s) => Filter::Eq(field.clone(), doc(field, s)),
            Filter::In(field, list) => Filter::In(field.clone(), list.iter().map(|s| doc(field, s)).collect()),
            Filter::And(p) => Filter::And(p.iter().map(|x| x.map_document_ids(f)).collect()),
            Filter::Or(p) => Filter::Or(p.iter().map(|x| x.map_document_ids(f)).collect()),
            Filter::Not(x) => Filter::Not(Box::new(x.map_document_ids(f))),
            other => other.clone(),
        }
    }

    /// The filter as JSON text, in the language it was parsed from (a key order of its own).
    pub fn to_json_string(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out);
        out
    }

    fn write_json(&self, out: &mut String) {
        let field = |f: &Field, out: &mut String| json_string(f.name(), out);
        match self {
            Filter::All => out.push_str("{}"),
            Filter::Eq(f, s) => {
                out.push('{');
                field(f, out);
                out.push(':');
                scalar_json(s, out);
                out.push('}');
            }
            Filter::In(f, list) => {
                out.push('{');
                field(f, out);
                out.push_str(":{\"in\":[");
                for (i, s) in list.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    scalar_json(s, out);
                }
                out.push_str("]}}");
            }
            Filter::Range(f, r, n) => {
                out.push('{');
                field(f, out);
                out.push_str(&format!(":{{\"{}\":", r.as_str()));
                number_json(*n, out);
                out.push_str("}}");
            }
            Filter::Exists(f) => {
                out.push('{');
                field(f, out);
                out.push_str(":{\"exists\":true}}");
            }
            Filter::And(p) | Filter::Or(p) => {
                out.push_str(if matches!(self, Filter::And(_)) { "{\"and\":[" } else { "{\"or\":[" });
                for (i, x) in p.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    x.write_json(out);
                }
                out.push_str("]}");
            }
            Filter::Not(x) => {
                out.push_str("{\"not\":");
                x.write_json(out);
                out.push('}');
            }
        }
    }
}

fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn number_json(n: f64, out: &mut String) {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        out.push_str(&(n as i64).to_string());
    } else {
        out.push_str(&format!("{n:?}"));
    }
}

fn scalar_json(s: &Scalar, out: &mut String) {
    match s {
        Scalar::String(v) => json_string(v, out),
        Scalar::Number(n) => number_json(*n, out),
        Scalar::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
    }
}

enum Value<'a> {
    Doc(&'a str),
    Meta(&'a MetaValue),
}

impl Value<'_> {
    fn equals(&self, s: &Scalar) -> bool {
        match (self, s) {
            (Value::Doc(d), Scalar::String(v)) => d == v,
            (Value::Meta(MetaValue::String(a)), Scalar::String(b)) => a == b,
            (Value::Meta(MetaValue::List(l)), Scalar::String(b)) => l.iter().any(|x| x == b),
            (Value::Meta(MetaValue::Number(a)), Scalar::Number(b)) => a == b,
            (Value::Meta(MetaValue::Bool(a)), Scalar::Bool(b)) => a == b,
            _ => false,
        }
    }
}

impl Serialize for Filter {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        // Through the JSON value, so any serde format (JSON, TOML) gets the same object.
        let json: Json = serde_json_lite::from_str(&self.to_json_string()).map_err(serde::ser::Error::custom)?;
        let Json::Object(fields) = json else { unreachable!("a filter prints an object") };
        let mut m = s.serialize_map(Some(fields.len()))?;
        for (k, v) in &fields {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// A filter object, or its JSON text (a config file's `filter = '{"a": 1}'`, as `--filter`
/// and `RAGCTX_FILTER` write it): no filter is a string, so the two cannot be confused.
impl<'de> Deserialize<'de> for Filter {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Filter, D::Error> {
        match Json::deserialize(d)? {
            Json::Null => Ok(Filter::All),
            Json::String(text) if text.trim().is_empty() => Ok(Filter::All),
            Json::String(text) => Filter::parse(&text).map_err(de::Error::custom),
            json => Filter::from_json(&json).map_err(de::Error::custom),
        }
    }
}

mod serde_json_lite;

#[cfg(test)]
mod tests;
