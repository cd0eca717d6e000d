//! The embedding cache of a data dir (keyed by model and text), read and written through
//! whichever process holds the database.

use crate::database::holds_store;
use crate::schema::{bytes_to_f32s, f32s_to_bytes, EMBED_CACHE};
use ragctx_core::{Error, Result};
use redb::Database;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::Arc;

/// A data dir's embedding cache (keyed by model and text).
#[derive(Clone)]
pub enum DataDirCache {
    /// Through a data dir this process holds open ([`DataDir::embedding_cache`](crate::DataDir::embedding_cache)).
    Open {
        /// The open database.
        db: Arc<Database>,
        /// Its data dir, for messages.
        path: PathBuf,
    },
    /// The data dir at this path, opened for each look-up and write only: long ingests embed
    /// without keeping the data dir locked against other processes.
    At(PathBuf),
}

impl ragctx_core::EmbeddingCache for DataDirCache {
    fn get(&self, model_id: &str, texts: &[&str]) -> Result<Vec<Option<Vec<f32>>>> {
        match self {
            DataDirCache::Open { db, .. } => cached_embeddings(db, model_id, texts),
            DataDirCache::At(dir) if !holds_store(dir) => Ok(vec![None; texts.len()]),
            DataDirCache::At(dir) => crate::client::briefly(
                dir,
                |db| cached_embeddings(db, model_id, texts),
                || crate::wire::Call::CacheGet {
                    model: model_id.into(),
                    texts: texts.iter().map(|t| (*t).to_owned()).collect(),
                },
                |r| if let crate::wire::Reply::Vectors(v) = r { Some(v) } else { None },
            ),
        }
    }

    fn put(&self, model_id: &str, items: &[(&str, &[f32])]) -> Result<()> {
        match self {
            DataDirCache::Open { db, .. } => cache_embeddings(db, model_id, items),
            DataDirCache::At(dir) => crate::client::briefly(
                dir,
                |db| cache_embeddings(db, model_id, items),
                || crate::wire::Call::CachePut {
                    model: model_id.into(),
                    items: items.iter().map(|(t, v)| ((*t).to_owned(), v.to_vec())).collect(),
                },
                |r| matches!(r, crate::wire::Reply::Done).then_some(()),
            ),
        }
    }

    fn place(&self) -> String {
        match self {
            DataDirCache::Open { path, .. } | DataDirCache::At(path) => path.display().to_string(),
        }
    }
}

fn cached_embeddings(db: &Database, model_id: &str, texts: &[&str]) -> Result<Vec<Option<Vec<f32>>>> {
    let rx = db.begin_read().map_err(Error::storage)?;
    let t = match rx.open_table(EMBED_CACHE) {
        Ok(t) => t,
        // A database no write has made the table in yet: nothing cached.
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(vec![None; texts.len()]),
        Err(e) => return Err(Error::storage(e)),
    };
    texts
        .iter()
        .map(|text| {
            Ok(t.get(cache_key(model_id, text).as_slice()).map_err(Error::storage)?.map(|v| bytes_to_f32s(v.value())))
        })
        .collect()
}

fn cache_embeddings(db: &Database, model_id: &str, items: &[(&str, &[f32])]) -> Result<()> {
    let tx = db.begin_write().map_err(Error::storage)?;
    {
        let mut t = tx.open_table(EMBED_CACHE).map_err(Error::storage)?;
        for (text, v) in items {
            t.insert(cache_key(model_id, text).as_slice(), f32s_to_bytes(v).as_slice()).map_err(Error::storage)?;
        }
    }
    tx.commit().map_err(Error::storage)
}

fn cache_key(model_id: &str, text: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(model_id.as_bytes());
    h.update([0]);
    h.update(text.as_bytes());
    h.finalize().into()
}
