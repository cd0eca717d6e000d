use crate::schema::{
    bytes_to_f32s, f32s_to_bytes, CHANGES, CHUNKS, EMBEDDING_MODEL, EMBED_CACHE, META, SESSIONS, TRACES, VECTORS,
};
use crate::{EmbeddedSessionStore, EmbeddedVectorStore};
use ragctx_core::{EmbeddedChunk, Error, Result};
use ragctx_index::{IndexParams, ResolvedCache, VectorIndex};
use redb::{Database, DatabaseError, ReadableTable, ReadableTableMetadata};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// A data directory this process holds. Cheap to share: the stores it hands out hold
/// `Arc`s. While it is open it serves its stores to other processes that open the data dir
/// ([`crate::SharedDir`]); dropped, it finishes the calls it is answering first.
pub struct DataDir {
    /// Declared first, dropped first: no call is answered after the rest is gone.
    server: Option<crate::share::Server>,
    /// Its stores as it serves them, to itself and to the other processes.
    served: Option<crate::share::Served>,
    path: PathBuf,
    db: Arc<Database>,
    index: Arc<RwLock<VectorIndex>>,
    /// Exclusion sets resolved lately, shared by every handle on this index.
    resolved: Arc<ResolvedCache>,
    /// The BM25 index, rebuilt from the chunks when the store's generation moves.
    lexical: Arc<ragctx_lexical::Cached>,
    /// Chunks changed since `index.bin` was written.
    unsaved: Arc<Mutex<usize>>,
    dim: usize,
}

impl DataDir {
    /// Opens (or creates) the data directory for vectors of `dim` dimensions. Waits (60 s by
    /// default, `RAGCTX_LOCK_WAIT_SECS`) for other ragctx processes that hold the directory.
    pub fn open(path: &Path, dim: usize) -> Result<DataDir> {
        Self::open_with(path, Some(dim), IndexParams::default())
    }

    /// `dim: None` takes the stored dimension (for commands that embed nothing).
    pub fn open_with(path: &Path, dim: Option<usize>, params: IndexParams) -> Result<DataDir> {
        std::fs::create_dir_all(path)
            .map_err(|e| Error::storage_in(format!("cannot create data dir {}", path.display()), e))?;
        let db = open_db(path)?;
        Self::opened(path, db, dim, params)
    }

    /// Opens the data dir if no other process holds it, without waiting; `None` when one does.
    pub(crate) fn try_open_with(path: &Path, dim: Option<usize>, params: IndexParams) -> Result<Option<DataDir>> {
        try_db(path)?.map(|db| Self::opened(path, db, dim, params)).transpose()
    }

    fn opened(path: &Path, db: Database, dim: Option<usize>, params: IndexParams) -> Result<DataDir> {
        let tx = db.begin_write().map_err(Error::storage)?;
        let stored_dim = {
            let mut meta = tx.open_table(META).map_err(Error::storage)?;
            for t in [CHUNKS, VECTORS, SESSIONS] {
                tx.open_table(t).map_err(Error::storage)?;
            }
            tx.open_table(EMBED_CACHE).map_err(Error::storage)?;
            tx.open_table(TRACES).map_err(Error::storage)?;
            tx.open_table(CHANGES).map_err(Error::storage)?;
            let d = meta.get("dimension").map_err(Error::storage)?.map(|v| v.value() as usize);
            if let (None, Some(dim)) = (d, dim) {
                meta.insert("dimension", dim as u64).map_err(Error::storage)?;
            }
            d
        };
        tx.commit().map_err(Error::storage)?;
        let dim = match (stored_dim, dim) {
            (Some(d), Some(want)) if d != want => return Err(Error::WrongDimension { expected: d, got: want }),
            (Some(d), _) | (None, Some(d)) => d,
            (None, None) => 384,
        };
        let db = Arc::new(db);
        let (index, unsaved) = load_or_rebuild_index(&db, path, dim, params)?;
        let mut data = DataDir {
            server: None,
            served: None,
            path: path.to_owned(),
            db,
            index: Arc::new(RwLock::new(index)),
            resolved: Arc::default(),
            lexical: Arc::new(ragctx_lexical::Cached::with_file(&path.join("lexical.bin"))),
            unsaved: Arc::new(Mutex::new(unsaved)),
            dim,
        };
        let served = crate::share::Served {
            vectors: data.vector_store(),
            sessions: data.session_store(),
            cache: data.embedding_cache(),
            db: data.db.clone(),
            leases: Arc::default(),
            dim,
        };
        data.served = Some(served.clone());
        // A holder that cannot serve still works alone; the others wait for it, as before.
        match crate::share::Server::start(path, served) {
            Ok(server) => data.server = Some(server),
            Err(e) => eprintln!(
                "ragctx: other processes cannot share {} while this one holds it: its socket {}: {e}",
                path.display(),
                crate::wire::socket_path(path).display()
            ),
        }
        Ok(data)
    }

    /// The length of the vectors the store holds.
    pub fn dimension(&self) -> usize {
        self.dim
    }

    /// Its stores as it serves them (set by every open).
    pub(crate) fn served(&self) -> &crate::share::Served {
        self.served.as_ref().expect("an opened data dir has its stores")
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The embedding cache through this open data dir (a process that holds it cannot open it
    /// a second time).
    pub fn embedding_cache(&self) -> DataDirCache {
        DataDirCache::Open { db: self.db.clone(), path: self.path.clone() }
    }

    /// The embedding model whose vectors the store holds, when one was recorded.
    pub fn embedding_model(&self) -> Result<Option<String>> {
        embedding_model(&self.db)
    }

    /// Ties the store to the embedding model `model_id` (a [`Embedder::model_id`]): recorded
    /// when the store holds no vectors yet, refused with [`Error::ModelMismatch`] when it
    /// holds another model's. A store written before models were recorded held the
    /// in-process encoder's fp32 vectors, without prefixes: it is taken as that model's
    /// (`local` says whether `model_id` is that) and refused for any other.
    ///
    /// [`Embedder::model_id`]: ragctx_core::Embedder::model_id
    pub fn bind_model(&self, model_id: &str, local: bool) -> Result<()> {
        bind_model(&self.db, model_id, local)
    }

    /// [`DataDir::bind_model`] opening only the database, and only while it checks (a
    /// long ingest checks before it embeds, without holding the data dir meanwhile).
    pub fn bind_model_at(dir: &Path, model_id: &str, local: bool) -> Result<()> {
        crate::share::briefly(
            dir,
            |db| bind_model(db, model_id, local),
            || crate::wire::Call::BindModel { model: model_id.into(), local },
            |r| matches!(r, crate::wire::Reply::Done).then_some(()),
        )
    }

    /// The model the vectors of the store at `dir` were made with: the one recorded, `""` for
    /// vectors without a record (a store from before records: the in-process fp32 encoder's),
    /// `None` for a store without vectors. Opens only its database and only to read (or asks
    /// the process that holds it).
    pub fn stored_model_at(dir: &Path) -> Result<Option<String>> {
        crate::share::briefly(
            dir,
            stored_model,
            || crate::wire::Call::StoredModel,
            |r| match r {
                crate::wire::Reply::Text(t) => Some(t),
                _ => None,
            },
        )
    }

    pub fn vector_store(&self) -> EmbeddedVectorStore {
        EmbeddedVectorStore {
            db: self.db.clone(),
            index: self.index.clone(),
            resolved: self.resolved.clone(),
            lexical: self.lexical.clone(),
            index_path: self.path.join("index.bin"),
            unsaved: self.unsaved.clone(),
            dim: self.dim,
        }
    }

    pub fn session_store(&self) -> EmbeddedSessionStore {
        EmbeddedSessionStore::new(self.db.clone())
    }
}

/// A data dir's embedding cache (keyed by model and text).
#[derive(Clone)]
pub enum DataDirCache {
    /// Through a data dir this process holds open ([`DataDir::embedding_cache`]).
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
            DataDirCache::At(dir) => crate::share::briefly(
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
            DataDirCache::At(dir) => crate::share::briefly(
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

pub(crate) fn embedding_model(db: &Database) -> Result<Option<String>> {
    let rx = db.begin_read().map_err(Error::storage)?;
    let t = match rx.open_table(EMBEDDING_MODEL) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(Error::storage(e)),
    };
    Ok(t.get("model").map_err(Error::storage)?.map(|v| v.value().to_owned()))
}

/// See [`DataDir::stored_model_at`].
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

/// How long a process waits for the data dir held by others: `RAGCTX_LOCK_WAIT_SECS`,
/// default 60 s.
/// The database of a data dir: the source of truth (the index files are derived from it).
const DATABASE_FILE: &str = "ragctx.redb";

/// Whether `dir` holds a store (its database), without opening or creating anything.
pub fn holds_store(dir: &Path) -> bool {
    dir.join(DATABASE_FILE).is_file()
}

pub(crate) fn lock_wait() -> Duration {
    let secs = std::env::var("RAGCTX_LOCK_WAIT_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
    Duration::from_secs(secs)
}

/// Opens the database, waiting (up to [`lock_wait`]) for other processes that hold it.
///
/// Waiters queue on a blocking lock of `ragctx.lock` first, so only the one at the head
/// polls the database: with 64 `ragctx ask` processes on one data dir each gets its turn
/// instead of the luckiest pollers winning again and again.
fn open_db(dir: &Path) -> Result<Database> {
    let db_path = dir.join(DATABASE_FILE);
    let busy = || Error::Unavailable {
        backend: "embedded store".into(),
        message: format!("{} is in use by another ragctx process", db_path.display()),
    };
    let wait = lock_wait();
    let started = Instant::now();
    let queue = std::fs::File::options()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(dir.join("ragctx.lock"))
        .map_err(|e| Error::storage_in(format!("cannot open {}", dir.join("ragctx.lock").display()), e))?;
    // Uncontended (the usual case): the lock is free and no thread is needed.
    if queue.try_lock().is_err() {
        let waiter = queue.try_clone().map_err(Error::storage)?;
        let (tx, rx) = std::sync::mpsc::channel();
        // The lock belongs to the open file, shared by `queue` and `waiter`: it is held until
        // both are closed, that is until this function returns (or, after a time-out, until
        // the waiter gets it and lets go at once).
        std::thread::spawn(move || {
            let _ = tx.send(waiter.lock());
        });
        match rx.recv_timeout(wait) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(Error::storage_in(format!("cannot lock {}", dir.join("ragctx.lock").display()), e))
            }
            Err(_) => return Err(busy()),
        }
    }
    loop {
        match Database::create(&db_path) {
            Ok(db) => return Ok(db), // `queue` closes here: the next waiter goes
            Err(DatabaseError::DatabaseAlreadyOpen) if started.elapsed() < wait => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(DatabaseError::DatabaseAlreadyOpen) => return Err(busy()),
            Err(e) => return Err(Error::storage_in(format!("cannot open {}", db_path.display()), e)),
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

pub(crate) fn generation(db: &Database) -> Result<u64> {
    let rx = db.begin_read().map_err(Error::storage)?;
    let meta = rx.open_table(META).map_err(Error::storage)?;
    Ok(meta.get("generation").map_err(Error::storage)?.map(|v| v.value()).unwrap_or(0))
}

/// Chunks read from the store before a rebuild links them into the index.
const REBUILD_BATCH: usize = 4096;

/// The vector index at the store's generation, with the chunks changed since `index.bin`
/// was written: the file as it is, or brought forward by the changes recorded since its
/// generation (rewritten if they pass an eighth of it), or rebuilt from the store when it is
/// missing, torn, or older than the recorded changes.
fn load_or_rebuild_index(db: &Database, dir: &Path, dim: usize, params: IndexParams) -> Result<(VectorIndex, usize)> {
    let want = generation(db)?;
    let path = dir.join("index.bin");
    match VectorIndex::load(&path) {
        Ok((mut ix, g)) if g <= want && ix.dimension() == dim => {
            ix.set_search_params(params);
            let rx = db.begin_read().map_err(Error::storage)?;
            match crate::changes::touched_since(&rx, g, want)? {
                Some(ids) => {
                    // The ids are distinct: removals and upserts commute.
                    let mut upserts = Vec::new();
                    for (id, now) in ids.iter().zip(crate::changes::current(&rx, &ids)?) {
                        match now {
                            Some((chunk, vector)) if vector.len() == dim => {
                                upserts.push(EmbeddedChunk { chunk, vector });
                            }
                            Some(_) => return Err(Error::inconsistent(format!("chunk {id}: stored vector dimension"))),
                            None => {
                                ix.remove(id);
                            }
                        }
                    }
                    ix.upsert_chunks(&upserts);
                    // Every later open would apply these again: past the rule, write them down
                    // now. A file that cannot be written costs only that.
                    if ragctx_lexical::rewrite_due(ids.len(), ix.len()) {
                        match ix.save_and_map(&path, want) {
                            Ok(()) => return Ok((ix, 0)),
                            Err(e) => eprintln!("ragctx: {e}; the index file stays behind the store"),
                        }
                    }
                    return Ok((ix, ids.len()));
                }
                None => eprintln!("ragctx: index.bin is older than the store's recorded changes; rebuilding it"),
            }
        }
        Ok(_) => eprintln!("ragctx: index.bin does not match the store; rebuilding it"),
        Err(_) if want == 0 => {}
        Err(e) => eprintln!("ragctx: {e}; rebuilding the index"),
    }
    let mut ix = VectorIndex::new(dim, params);
    let rx = db.begin_read().map_err(Error::storage)?;
    let chunks = rx.open_table(CHUNKS).map_err(Error::storage)?;
    let vectors = rx.open_table(VECTORS).map_err(Error::storage)?;
    // In batches: a large index links each batch on every core.
    let mut batch = Vec::with_capacity(REBUILD_BATCH);
    for row in vectors.iter().map_err(Error::storage)? {
        let (id, v) = row.map_err(Error::storage)?;
        let chunk: ragctx_core::Chunk = match chunks.get(id.value()).map_err(Error::storage)? {
            Some(c) => serde_json::from_slice(c.value()).map_err(Error::storage)?,
            None => continue,
        };
        batch.push(EmbeddedChunk { chunk, vector: bytes_to_f32s(v.value()) });
        if batch.len() == REBUILD_BATCH {
            ix.upsert_chunks(&batch);
            batch.clear();
        }
    }
    ix.upsert_chunks(&batch);
    if want > 0 {
        ix.save_and_map(&path, want).map_err(Error::storage)?;
    }
    Ok((ix, 0))
}
