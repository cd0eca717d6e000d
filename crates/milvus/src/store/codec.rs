//! Rows to chunks and back: Milvus has no nulls here, so absent numbers are stored as -1.

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

pub(super) fn chunk_of(row: &milvus::v2::prelude::ResultRow<'_>) -> Result<Chunk> {
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
    })
}
