//! The store's changes by generation: each write's chunk ids (written or removed), committed
//! in the write's own transaction. The derived indexes (`index.bin`, `lexical.bin`) are
//! written only now and then; an index file of an older generation is brought forward by
//! the changes since it — reading only the chunks they name — so a write costs what it
//! adds, not the corpus. Rows are pruned up to the older of the two files' generations
//! once the vector index file is rewritten; an index whose generation the rows no longer
//! reach is rebuilt from the store, as before.

use crate::schema::{bytes_to_f32s, decode_ids, CHANGES, CHUNKS, VECTORS};
use ragctx_core::{Chunk, ChunkId, Error, Result};
use ragctx_lexical::Changes;
use redb::{Database, ReadTransaction};

/// The ids written or removed after generation `from` up to `to`, each once, in the order
/// first touched; `None` when the rows do not hold every generation of that range (pruned,
/// or written by a ragctx that kept none).
pub(crate) fn touched_since(rx: &ReadTransaction, from: u64, to: u64) -> Result<Option<Vec<String>>> {
    if from >= to {
        return Ok(Some(Vec::new()));
    }
    let t = match rx.open_table(CHANGES) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(Error::storage(e)),
    };
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    let mut expected = from + 1;
    for row in t.range(from + 1..=to).map_err(Error::storage)? {
        let (g, ids) = row.map_err(Error::storage)?;
        if g.value() != expected {
            return Ok(None);
        }
        expected += 1;
        // A damaged record is a gap like any other: the index is rebuilt from the chunks.
        let Some(ids) = decode_ids(ids.value()) else { return Ok(None) };
        for id in ids {
            if seen.insert(id.clone()) {
                out.push(id);
            }
        }
    }
    Ok((expected == to + 1).then_some(out))
}

/// A chunk as the store holds it, with its vector.
pub(crate) type Stored = (Chunk, Vec<f32>);

/// The touched chunks as the store holds them now, in order: each one's chunk and vector, or
/// `None` if removed. The tables are opened once for all of them.
pub(crate) fn current(rx: &ReadTransaction, ids: &[String]) -> Result<Vec<Option<Stored>>> {
    let chunks = rx.open_table(CHUNKS).map_err(Error::storage)?;
    let vectors = rx.open_table(VECTORS).map_err(Error::storage)?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let row =
            match (chunks.get(id.as_str()).map_err(Error::storage)?, vectors.get(id.as_str()).map_err(Error::storage)?)
            {
                (Some(c), Some(v)) => {
                    Some((serde_json::from_slice(c.value()).map_err(Error::storage)?, bytes_to_f32s(v.value())))
                }
                _ => None,
            };
        out.push(row);
    }
    Ok(out)
}

/// The lexical index's view of the changes after `from` up to `to`: the touched chunks as
/// they are now, and the ids removed.
pub(crate) fn lexical_changes(db: &Database, from: u64, to: u64) -> Result<Option<Changes>> {
    let rx = db.begin_read().map_err(Error::storage)?;
    let Some(ids) = touched_since(&rx, from, to)? else { return Ok(None) };
    let chunks = rx.open_table(CHUNKS).map_err(Error::storage)?;
    let mut changes = Changes::default();
    for id in ids {
        match chunks.get(id.as_str()).map_err(Error::storage)? {
            Some(c) => changes.chunks.push(serde_json::from_slice(c.value()).map_err(Error::storage)?),
            None => changes.removed.push(ChunkId::from(id.as_str())),
        }
    }
    Ok(Some(changes))
}

/// Drops the rows up to generation `through`: no index file needs them any more.
pub(crate) fn prune(db: &Database, through: u64) -> Result<()> {
    let tx = db.begin_write().map_err(Error::storage)?;
    {
        let mut t = tx.open_table(CHANGES).map_err(Error::storage)?;
        t.retain_in(..=through, |_, _| false).map_err(Error::storage)?;
    }
    ragctx_index::failpoint::pause("changes.before-prune");
    tx.commit().map_err(Error::storage)
}
