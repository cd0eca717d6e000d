//! Rows to chunks and back: Milvus has no nulls here, so absent numbers are stored as -1;
//! metadata goes into a JSON field with the type of each value beside it
//! ([`crate::filter`] says why).

use super::*;

/// `-1` for an absent number.
pub(super) fn opt<N: Into<u64>>(v: Option<N>) -> i64 {
    v.map(|n| n.into() as i64).unwrap_or(-1)
}

pub(super) fn unopt<N: TryFrom<i64>>(v: i64) -> Option<N> {
    if v < 0 {
        None
    } else {
        N::try_from(v).ok()
    }
}

pub(super) fn string(row: &milvus::v2::prelude::ResultRow<'_>, field: &str) -> Result<String> {
    match row.get(field).map_err(Error::storage)? {
        ResultValue::String(s) => Ok(s.to_owned()),
        other => Err(Error::inconsistent(format!("Milvus field {field} of unexpected type: {other:?}"))),
    }
}

pub(super) fn int(row: &milvus::v2::prelude::ResultRow<'_>, field: &str) -> Result<i64> {
    match row.get(field).map_err(Error::storage)? {
        ResultValue::Int64(v) => Ok(v),
        ResultValue::Int32(v) => Ok(v as i64),
        other => Err(Error::inconsistent(format!("Milvus field {field} of unexpected type: {other:?}"))),
    }
}

/// The `metadata` and `metadata_types` values of a chunk's row; refused when Milvus would
/// refuse them (a JSON value over its size limit).
pub(super) fn metadata_row(chunk: &Chunk) -> Result<(serde_json::Value, serde_json::Value)> {
    let values = serde_json::to_value(&chunk.metadata).map_err(Error::storage)?;
    let size = values.to_string().len();
    if size > MAX_JSON {
        return Err(Error::InvalidInput(format!(
            "chunk {:?}: its metadata is {size} bytes as JSON, over Milvus's limit of {MAX_JSON}",
            chunk.id.as_str()
        )));
    }
    let types: serde_json::Map<String, serde_json::Value> =
        filter::type_tags(&chunk.metadata).into_iter().map(|(k, t)| (k.to_owned(), t.into())).collect();
    Ok((values, types.into()))
}

/// The chunk's metadata from its row's `metadata` field.
fn metadata_of(row: &milvus::v2::prelude::ResultRow<'_>) -> Result<Metadata> {
    match row.get(METADATA).map_err(Error::storage)? {
        ResultValue::Json(value) => serde_json::from_value(value.clone())
            .map_err(|e| Error::inconsistent(format!("Milvus field {METADATA} holds no ragctx metadata: {e}"))),
        other => Err(Error::inconsistent(format!("Milvus field {METADATA} of unexpected type: {other:?}"))),
    }
}

/// The chunk of a row; `metadata`: the row has the metadata field (else none is read).
pub(super) fn chunk_of(row: &milvus::v2::prelude::ResultRow<'_>, metadata: bool) -> Result<Chunk> {
    Ok(Chunk {
        id: ChunkId(string(row, ID)?),
        document_id: DocumentId(string(row, DOCUMENT_ID)?),
        title: string(row, "title")?,
        text: string(row, "text")?,
        ordinal: unopt(int(row, "ordinal")?),
        start: unopt(int(row, "start")?),
        end: unopt(int(row, "end")?),
        weight: match row.get("weight").map_err(Error::storage)? {
            ResultValue::Float(w) => w,
            ResultValue::Double(w) => w as f32,
            other => return Err(Error::inconsistent(format!("Milvus field weight of unexpected type: {other:?}"))),
        },
        tokens: unopt(int(row, "tokens")?),
        metadata: if metadata { metadata_of(row)? } else { Metadata::default() },
    })
}
