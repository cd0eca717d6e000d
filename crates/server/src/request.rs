//! Request bodies as every handler reads them: within [`BODY_LIMIT`], JSON whose objects
//! never repeat a key.

use crate::{ApiError, BODY_LIMIT};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde::Deserialize;

/// A request body read whole, or the error naming the limit it passed.
pub(crate) fn body(b: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    b.map_err(|e| {
        let status = e.status();
        let code = if status == StatusCode::PAYLOAD_TOO_LARGE { "payload_too_large" } else { "bad_request" };
        ApiError::new(status, code, format!("{e} (limit {BODY_LIMIT} bytes)"))
    })
}

/// A request body as `T`: JSON whose objects never give a key twice (which value would
/// win is not the caller's to guess), then read as `T`.
pub(crate) fn json<T: for<'de> Deserialize<'de>>(b: &[u8]) -> Result<T, ApiError> {
    let Unique(value) =
        serde_json::from_slice(b).map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
    T::deserialize(value).map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

/// A JSON value read so that an object repeating a key is an error naming it.
struct Unique(serde_json::Value);

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{Error, MapAccess, SeqAccess, Visitor};
        use serde_json::Value;
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Value;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E: Error>(self, v: bool) -> Result<Value, E> {
                Ok(Value::Bool(v))
            }
            fn visit_i64<E: Error>(self, v: i64) -> Result<Value, E> {
                Ok(Value::from(v))
            }
            fn visit_u64<E: Error>(self, v: u64) -> Result<Value, E> {
                Ok(Value::from(v))
            }
            fn visit_f64<E: Error>(self, v: f64) -> Result<Value, E> {
                Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
            }
            fn visit_str<E: Error>(self, v: &str) -> Result<Value, E> {
                Ok(Value::String(v.to_owned()))
            }
            fn visit_string<E: Error>(self, v: String) -> Result<Value, E> {
                Ok(Value::String(v))
            }
            fn visit_unit<E: Error>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_none<E: Error>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
                let mut out = Vec::new();
                while let Some(Unique(v)) = seq.next_element()? {
                    out.push(v);
                }
                Ok(Value::Array(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
                let mut out = serde_json::Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    let Unique(v) = map.next_value()?;
                    if out.insert(key.clone(), v).is_some() {
                        return Err(A::Error::custom(format!("the key `{key}` is given twice")));
                    }
                }
                Ok(Value::Object(out))
            }
        }
        d.deserialize_any(V).map(Unique)
    }
}
