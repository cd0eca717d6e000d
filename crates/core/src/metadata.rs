//! Metadata a chunk carries (DESIGN §8): a small object of strings, numbers, bools and lists
//! of strings, checked when it enters, returned with the chunk, and filtered on by
//! [`crate::Filter`].

use crate::{Error, Result};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Longest string value, in bytes.
pub const MAX_STRING_BYTES: usize = 1024;
/// Most strings in a list value.
pub const MAX_LIST_LEN: usize = 64;
/// Most keys in one chunk's metadata.
pub const MAX_KEYS: usize = 64;
/// Longest key, in bytes (keys are `[A-Za-z0-9_.-]`).
pub const MAX_KEY_BYTES: usize = 64;

/// A JSON value as read from any serde format (JSON bodies, TOML config, Python dicts made
/// JSON): what metadata and filters are parsed from, with the path of a bad part.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// Any number (integers within ±2⁵³ are exact).
    Number(f64),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object, keys in the order given.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// What kind of value it is, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a bool",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Json;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E>(self) -> Result<Json, E> {
                Ok(Json::Null)
            }
            fn visit_none<E>(self) -> Result<Json, E> {
                Ok(Json::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
                Json::deserialize(d)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
                Ok(Json::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
                Ok(Json::Number(v as f64))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
                Ok(Json::Number(v as f64))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Json, E> {
                Ok(Json::Number(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Json, E> {
                Ok(Json::String(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Json, E> {
                Ok(Json::String(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Json, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = a.next_element()? {
                    out.push(v);
                }
                Ok(Json::Array(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Json, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = a.next_entry::<String, Json>()? {
                    out.push((k, v));
                }
                Ok(Json::Object(out))
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Number(n) => serialize_number(*n, s),
            Json::String(v) => s.serialize_str(v),
            Json::Array(v) => v.serialize(s),
            Json::Object(v) => {
                let mut m = s.serialize_map(Some(v.len()))?;
                for (k, x) in v {
                    m.serialize_entry(k, x)?;
                }
                m.end()
            }
        }
    }
}

/// Integral numbers print as integers (`3`, not `3.0`), as they were given.
pub(crate) fn serialize_number<S: Serializer>(n: f64, s: S) -> Result<S::Ok, S::Error> {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        s.serialize_i64(n as i64)
    } else {
        s.serialize_f64(n)
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    /// A string of at most 1 KiB.
    String(String),
    /// A finite number.
    Number(f64),
    /// A bool.
    Bool(bool),
    /// At most 64 strings (a filter's equality on it means "contains").
    List(Vec<String>),
}

impl Serialize for MetaValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MetaValue::String(v) => s.serialize_str(v),
            MetaValue::Number(n) => serialize_number(*n, s),
            MetaValue::Bool(b) => s.serialize_bool(*b),
            MetaValue::List(v) => v.serialize(s),
        }
    }
}

/// True for a key ragctx accepts: 1 to 64 of `[A-Za-z0-9_.-]`.
pub fn valid_key(k: &str) -> bool {
    !k.is_empty() && k.len() <= MAX_KEY_BYTES && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// Names the filter language gives a meaning of its own: a metadata key of that name could
/// never be filtered on, so it is refused when metadata comes in.
pub const RESERVED_KEYS: [&str; 4] = ["document_id", "and", "or", "not"];

fn key_error(k: &str) -> String {
    if RESERVED_KEYS.contains(&k) {
        return format!(
            "metadata key {k:?} is reserved by the filter language ({}): rename it",
            RESERVED_KEYS.join(", ")
        );
    }
    format!("metadata key {k:?} is invalid: use 1 to {MAX_KEY_BYTES} characters of letters, digits, '_', '.' or '-'")
}

fn key_ok(k: &str) -> bool {
    valid_key(k) && !RESERVED_KEYS.contains(&k)
}

fn string_ok(s: &str, what: &str) -> std::result::Result<(), String> {
    if s.len() > MAX_STRING_BYTES {
        return Err(format!("{what} is {} bytes long; at most {MAX_STRING_BYTES} are accepted", s.len()));
    }
    Ok(())
}

impl MetaValue {
    /// The value of `json` at `path`, or a message naming what is wrong there.
    pub fn from_json(json: &Json, path: &str) -> std::result::Result<MetaValue, String> {
        match json {
            Json::String(s) => string_ok(s, path).map(|_| MetaValue::String(s.clone())),
            Json::Number(n) if n.is_finite() => Ok(MetaValue::Number(*n)),
            Json::Bool(b) => Ok(MetaValue::Bool(*b)),
            Json::Array(items) => {
                if items.len() > MAX_LIST_LEN {
                    return Err(format!("{path} holds {} values; at most {MAX_LIST_LEN} are accepted", items.len()));
                }
                let mut out = Vec::with_capacity(items.len());
                for (i, v) in items.iter().enumerate() {
                    match v {
                        Json::String(s) => {
                            string_ok(s, &format!("{path}[{i}]"))?;
                            out.push(s.clone());
                        }
                        other => {
                            return Err(format!("{path}[{i}] is {}: a list holds strings only", other.kind()));
                        }
                    }
                }
                Ok(MetaValue::List(out))
            }
            other => Err(format!(
                "{path} is {}: a metadata value is a string, a number, a bool or a list of strings",
                other.kind()
            )),
        }
    }

    /// Reads a `key=value` value as `ingest --meta` gives it: `true`/`false` are bools, a
    /// number written the way it prints (`3`, `-2.5`, `2024`) is a number, anything else a
    /// string — `02134` and `1.10` stay strings, as written.
    pub fn from_text(text: &str) -> MetaValue {
        match text {
            "true" => MetaValue::Bool(true),
            "false" => MetaValue::Bool(false),
            t => match t.parse::<f64>() {
                Ok(n) if n.is_finite() && n.to_string() == t => MetaValue::Number(n),
                _ => MetaValue::String(t.to_owned()),
            },
        }
    }
}

/// A chunk's metadata: keys of `[A-Za-z0-9_.-]{1,64}`, at most 64 of them, each a
/// [`MetaValue`]. Made only through the checks ([`Metadata::from_json`], [`Metadata::insert`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata(BTreeMap<String, MetaValue>);

impl Metadata {
    /// No keys.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Keys held.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.0.get(key)
    }
    /// Keys and values, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &MetaValue)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }
    /// Sets `key` (checked) to `value` (checked).
    pub fn insert(&mut self, key: &str, value: MetaValue) -> Result<()> {
        if !key_ok(key) {
            return Err(Error::InvalidInput(key_error(key)));
        }
        if let MetaValue::String(s) = &value {
            string_ok(s, &format!("metadata value of {key:?}")).map_err(Error::InvalidInput)?;
        }
        if !self.0.contains_key(key) && self.0.len() >= MAX_KEYS {
            return Err(Error::InvalidInput(format!("metadata holds at most {MAX_KEYS} keys")));
        }
        self.0.insert(key.to_owned(), value);
        Ok(())
    }
    /// `other`'s keys set over this one's.
    pub fn merged(&self, other: &Metadata) -> Result<Metadata> {
        let mut out = self.clone();
        for (k, v) in other.iter() {
            out.insert(k, v.clone())?;
        }
        Ok(out)
    }

    /// The metadata of an object, or a message naming the path (`path` is where the object
    /// sits, e.g. `metadata`) of the first bad part.
    pub fn from_json(json: &Json, path: &str) -> std::result::Result<Metadata, String> {
        let Json::Object(fields) = json else {
            return Err(format!("{path} is {}: metadata is an object", json.kind()));
        };
        if fields.len() > MAX_KEYS {
            return Err(format!("{path} has {} keys; at most {MAX_KEYS} are accepted", fields.len()));
        }
        let mut out = BTreeMap::new();
        for (k, v) in fields {
            if !key_ok(k) {
                return Err(format!("{path}: {}", key_error(k)));
            }
            if out.insert(k.clone(), MetaValue::from_json(v, &format!("{path}.{k}"))?).is_some() {
                return Err(format!("{path}.{k} is given twice"));
            }
        }
        Ok(Metadata(out))
    }

    /// A stable 64-bit digest (index nodes compare it to tell a metadata change).
    pub fn digest(&self) -> u64 {
        use std::hash::Hasher;
        let mut h = crate::FxHasher::default();
        for (k, v) in &self.0 {
            h.write(k.as_bytes());
            h.write_u8(0xff);
            match v {
                MetaValue::String(s) => {
                    h.write_u8(1);
                    h.write(s.as_bytes());
                }
                MetaValue::Number(n) => {
                    h.write_u8(2);
                    h.write_u64(n.to_bits());
                }
                MetaValue::Bool(b) => h.write_u8(3 + *b as u8),
                MetaValue::List(l) => {
                    h.write_u8(5);
                    for s in l {
                        h.write(s.as_bytes());
                        h.write_u8(0xfe);
                    }
                }
            }
            h.write_u8(0xfd);
        }
        h.finish()
    }
}

impl Serialize for Metadata {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Metadata, D::Error> {
        let json = Json::deserialize(d)?;
        if json == Json::Null {
            return Ok(Metadata::default());
        }
        Metadata::from_json(&json, "metadata").map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(s: &str) -> Json {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn values_are_checked_with_their_path() {
        let m = Metadata::from_json(&json(r#"{"topic":"pests","year":2024,"ok":true,"tags":["a","b"]}"#), "metadata")
            .unwrap();
        assert_eq!(m.get("year"), Some(&MetaValue::Number(2024.0)));
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"ok":true,"tags":["a","b"],"topic":"pests","year":2024}"#);
        let bad = |s: &str| Metadata::from_json(&json(s), "metadata").unwrap_err();
        assert!(bad(r#"{"a":{"b":1}}"#).contains("metadata.a is an object"), "{}", bad(r#"{"a":{"b":1}}"#));
        assert!(bad(r#"{"a":[1]}"#).contains("metadata.a[0] is a number"));
        assert!(bad(r#"{"a b":1}"#).contains("\"a b\" is invalid"));
        assert!(bad(r#"{"a":null}"#).contains("metadata.a is null"));
        assert!(bad(r#"{"document_id":"x"}"#).contains("reserved"));
        assert!(bad(r#"{"and":1}"#).contains("reserved"));
        let long = format!(r#"{{"a":"{}"}}"#, "x".repeat(1025));
        assert!(bad(&long).contains("1025 bytes"));
        let many = format!(r#"{{"a":[{}]}}"#, vec!["\"x\""; 65].join(","));
        assert!(bad(&many).contains("65 values"));
    }

    #[test]
    fn text_values_are_typed() {
        assert_eq!(MetaValue::from_text("3"), MetaValue::Number(3.0));
        assert_eq!(MetaValue::from_text("-2.5"), MetaValue::Number(-2.5));
        assert_eq!(MetaValue::from_text("true"), MetaValue::Bool(true));
        assert_eq!(MetaValue::from_text("inf"), MetaValue::String("inf".into()));
        assert_eq!(MetaValue::from_text("NaN"), MetaValue::String("NaN".into()));
        assert_eq!(MetaValue::from_text("pests"), MetaValue::String("pests".into()));
        assert_eq!(MetaValue::from_text(""), MetaValue::String("".into()));
        assert_eq!(MetaValue::from_text("02134"), MetaValue::String("02134".into()));
        assert_eq!(MetaValue::from_text("1.10"), MetaValue::String("1.10".into()));
        assert_eq!(MetaValue::from_text("2024"), MetaValue::Number(2024.0));
    }
}
