//! The data dir's database file, below every store and role: whether a dir holds one, taking
//! it when no process holds it ([`try_db`]), how long to wait for a process that does, and
//! the few reads and writes every role makes on it (the embedding model bound to the store,
//! the store's generation).

use crate::schema::{EMBEDDING_MODEL, META, VECTORS};
use ragctx_core::{Error, Result};
use redb::{Database, DatabaseError, ReadableTable, ReadableTableMetadata};
use std::path::Path;
use std::time::Duration;

/// The embedding model the store is bound to, if any.
pub(crate) fn embedding_model(db: &Database) -> Result<Option<String>> {
    let rx = db.begin_read().map_err(Error::storage)?;
    let t = match rx.open_table(EMBEDDING_MODEL) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(Error::storage(e)),
    };
    Ok(t.get("model").map_err(Error::storage)?.map(|v| v.value().to_owned()))
}

/// The model the store's vectors were made with (see `DataDir::stored_model_at`).
pub(crate) fn stored_model(db: &Database) -> Result<Option<String>> {
    if let Some(model) = embedding_model(db)? {
        return Ok(Some(model));
    }
    let rx = db.begin_read().map_err(Error::storage)?;
    let empty = match rx.open_table(VECTORS) {
        Ok(t) => t.is_empty().map_err(Error::storage)?,
        Err(redb::TableError::TableDoesNotExist(_)) => true,
        Err(e) => return Err(Error::storage(e)),
    };
    Ok((!empty).then(String::new))
}

/// Binds the store to `model_id`, refusing another model once vectors are stored.
pub(crate) fn bind_model(db: &Database, model_id: &str, local: bool) -> Result<()> {
    let tx = db.begin_write().map_err(Error::storage)?;
    {
        let mut t = tx.open_table(EMBEDDING_MODEL).map_err(Error::storage)?;
        let stored = t.get("model").map_err(Error::storage)?.map(|v| v.value().to_owned());
        let empty = tx.open_table(VECTORS).map_err(Error::storage)?.is_empty().map_err(Error::storage)?;
        match stored {
            Some(s) if s == model_id => return Ok(()),
            Some(s) if !empty => return Err(Error::ModelMismatch { stored: s, configured: model_id.into() }),
            None if !empty && !local => {
                return Err(Error::ModelMismatch {
                    stored: "the in-process encoder (this store predates recorded models)".into(),
                    configured: model_id.into(),
                })
            }
            _ => {
                t.insert("model", model_id).map_err(Error::storage)?;
            }
        }
    }
    tx.commit().map_err(Error::storage)
}

/// The database of `dir` if no process holds it, without waiting; `None` when one does.
pub(crate) fn try_db(dir: &Path) -> Result<Option<Database>> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::storage_in(format!("cannot create data dir {}", dir.display()), e))?;
    let db_path = dir.join(DATABASE_FILE);
    match Database::create(&db_path) {
        Ok(db) => Ok(Some(db)),
        Err(DatabaseError::DatabaseAlreadyOpen) => Ok(None),
        Err(e) => Err(Error::storage_in(format!("cannot open {}", db_path.display()), e)),
    }
}

/// The database of a data dir: the source of truth (the index files are derived from it).
pub(crate) const DATABASE_FILE: &str = "ragctx.redb";

/// Whether `dir` holds a store (its database), without opening or creating anything.
pub fn holds_store(dir: &Path) -> bool {
    dir.join(DATABASE_FILE).is_file()
}

/// How long a process waits for the data dir held by others: `RAGCTX_LOCK_WAIT_SECS`,
/// default 60 s.
pub(crate) fn lock_wait() -> Duration {
    let secs = std::env::var("RAGCTX_LOCK_WAIT_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
    Duration::from_secs(secs)
}

/// The store's generation: bumped by every write.
pub(crate) fn generation(db: &Database) -> Result<u64> {
    let rx = db.begin_read().map_err(Error::storage)?;
    let meta = rx.open_table(META).map_err(Error::storage)?;
    Ok(meta.get("generation").map_err(Error::storage)?.map(|v| v.value()).unwrap_or(0))
}
