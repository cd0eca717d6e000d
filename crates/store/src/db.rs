use crate::cache::DataDirCache;
use crate::database::{bind_model, embedding_model, generation, lock_wait, stored_model, try_db, DATABASE_FILE};
use crate::schema::{bytes_to_f32s, CHANGES, CHUNKS, EMBED_CACHE, META, SESSIONS, TRACES, VECTORS};
use crate::{EmbeddedSessionStore, EmbeddedVectorStore};
use ragctx_core::{EmbeddedChunk, Error, Result};
use ragctx_index::{IndexParams, ResolvedCache, VectorIndex};
use redb::{Database, DatabaseError, ReadableTable};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// A data directory this process holds. Cheap to share: the stores it hands out hold
/// `Arc`s. While it is open it serves its stores to other processes that open the data dir
/// ([`crate::SharedDir`]); dropped, it finishes the calls it is answering first.
pub struct DataDir {
    /// Declared first, dropped first: no call is answered after the rest is gone.
    server: Option<crate::holder::Server>,
    /// Its stores as it serves them, to itself and to the other processes.
    served: Option<crate::holder::Served>,
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
        let served = crate::holder::Served {
            vectors: data.vector_store(),
            sessions: data.session_store(),
            cache: data.embedding_cache(),
            db: data.db.clone(),
            leases: Arc::default(),
            dim,
        };
        data.served = Some(served.clone());
        // A holder that cannot serve still works alone; the others wait for it, as before.
        match crate::holder::Server::start(path, served) {
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
    pub(crate) fn served(&self) -> &crate::holder::Served {
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
        crate::client::briefly(
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
        crate::client::briefly(
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
                                upserts.push(EmbeddedChunk { chunk, vector, sentences: None });
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
        batch.push(EmbeddedChunk { chunk, vector: bytes_to_f32s(v.value()), sentences: None });
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
