//! The embedded stores run the shared conformance suites.

use ragctx_core::{SessionStore, VectorStore};
use ragctx_index::IndexParams;
use ragctx_store::DataDir;
use std::sync::{Arc, Mutex};

/// `exact_below` 0 with `scan_ratio` 0: the planner always walks the graph; a huge
/// `exact_below`: it always scans. The suite runs on both paths.
fn open(dir: &std::path::Path, exact_below: usize) -> DataDir {
    DataDir::open_with(dir, Some(8), IndexParams { exact_below, scan_ratio: 0, ..IndexParams::default() }).unwrap()
}

#[test]
fn embedded_vector_store_conforms_on_both_search_paths() {
    for exact_below in [0, 1_000_000] {
        let dirs = Mutex::new(Vec::new());
        ragctx_testkit::vector_store_conformance(&|| {
            let dir = tempfile::tempdir().unwrap();
            let store: Box<dyn VectorStore> = Box::new(open(dir.path(), exact_below).vector_store());
            dirs.lock().unwrap().push(dir);
            store
        });
    }
}

/// Metadata filters inside the search, with exclusion, tenants and grouping, on both paths
/// (dense and BM25).
#[test]
fn embedded_filters_conform_on_both_search_paths() {
    for exact_below in [0, 1_000_000] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_owned();
        let n = ragctx_testkit::filter_conformance(&|| Box::new(open(&path, exact_below).vector_store()), 300);
        assert!(n >= 900, "{n} searches checked");
    }
}

/// BM25 with the vector search's exclusion and grouping, on the embedded store; and a
/// reopened data dir rebuilds it from the committed chunks.
#[test]
fn embedded_lexical_search_conforms_and_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    ragctx_testkit::lexical_conformance(&open(dir.path(), 0).vector_store(), 8);
    // The file as the first process left it: the reopened store must load it, not rebuild it
    // (a rebuild renames a new file into place).
    let stamp = |p: &std::path::Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).map(|m| (m.ino(), m.mtime_nsec(), m.mtime())).ok()
    };
    let file = dir.path().join("lexical.bin");
    let written = stamp(&file);
    assert!(written.is_some(), "the searches wrote lexical.bin");
    let again = open(dir.path(), 0).vector_store();
    let out = again
        .search_lexical(&ragctx_core::LexicalRequest {
            query: "windows update 0x80070005".into(),
            limit: 1,
            grouping: None,
            exclusion: Default::default(),
            ..Default::default()
        })
        .unwrap()
        .unwrap();
    assert_eq!(out.hits[0].chunk.id.as_str(), "d11#1");
    assert!(dir.path().join("lexical.bin").is_file(), "kept beside the store");
    assert_eq!(stamp(&file), written, "the reopened store loaded the current lexical.bin");
    // A write moves the generation: the file is stale and the index is rebuilt, in the next
    // process (which finds a file one generation behind) and in this one.
    let vector = again.vectors(&["d11#1".into()]).unwrap().remove(0).unwrap();
    let write = |store: &dyn VectorStore, id: &str, text: &str| {
        let chunk = ragctx_core::Chunk::new(id, id.split('#').next().unwrap(), "", text);
        store.upsert(&[ragctx_core::EmbeddedChunk { chunk, vector: vector.clone(), sentences: None }]).unwrap();
    };
    let first = |store: &dyn VectorStore, query: &str| {
        let req = ragctx_core::LexicalRequest {
            query: query.into(),
            limit: 1,
            grouping: None,
            exclusion: Default::default(),
            ..Default::default()
        };
        store.search_lexical(&req).unwrap().unwrap().hits[0].chunk.id.0.clone()
    };
    write(&again, "late#0", "a late note on 0x80070005 and windows update");
    drop(again); // no search since the write: lexical.bin is one generation behind
    let reopened = open(dir.path(), 0).vector_store();
    assert_eq!(first(&reopened, "late note"), "late#0", "a stale file is rebuilt in the next process");
    write(&reopened, "later#0", "an even later memo");
    assert_eq!(first(&reopened, "later memo"), "later#0", "and in this one");
}

#[test]
fn embedded_session_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let data = open(dir.path(), 0);
    let store: Arc<dyn SessionStore> = Arc::new(data.session_store());
    ragctx_testkit::session_store_conformance(store.clone(), "t-");
    ragctx_testkit::ttl_expiry(store, "t-");
}

#[test]
fn the_index_is_rebuilt_when_it_lags_the_store_and_everything_persists() {
    let dir = tempfile::tempdir().unwrap();
    let chunk = |id: &str, axis: usize| ragctx_core::EmbeddedChunk {
        chunk: ragctx_core::Chunk {
            id: id.into(),
            document_id: id.into(),
            title: "t".into(),
            text: format!("text {id}"),
            ordinal: None,
            start: None,
            end: None,
            weight: 1.0,
            tokens: None,
            metadata: Default::default(),
        },
        vector: (0..8).map(|i| if i == axis { 1.0 } else { 0.0 }).collect(),
        sentences: None,
    };
    {
        let data = open(dir.path(), 0);
        data.vector_store().upsert(&[chunk("a", 0), chunk("b", 1)]).unwrap();
    }
    let stale = std::fs::read(dir.path().join("index.bin")).unwrap();
    {
        let data = open(dir.path(), 0);
        data.vector_store().upsert(&[chunk("c", 2)]).unwrap();
    }
    // A crash between the store commit and the index write leaves an older index behind.
    std::fs::write(dir.path().join("index.bin"), stale).unwrap();
    let data = open(dir.path(), 0);
    let store = data.vector_store();
    assert_eq!(store.len().unwrap(), 3);
    let req = ragctx_core::SearchRequest {
        vector: chunk("q", 2).vector,
        limit: 1,
        grouping: None,
        exclusion: Default::default(),
        ..Default::default()
    };
    assert_eq!(store.search(&req).unwrap().hits[0].chunk.id.as_str(), "c", "rebuilt from the store");
    // A corrupt index is rebuilt too.
    drop(store);
    drop(data);
    std::fs::write(dir.path().join("index.bin"), b"garbage").unwrap();
    let data = open(dir.path(), 0);
    assert_eq!(data.vector_store().search(&req).unwrap().hits[0].chunk.id.as_str(), "c");
    drop(data);
    // A different dimension is refused with the numbers.
    let err = DataDir::open(dir.path(), 384).err().unwrap();
    assert!(err.to_string().contains("expected 8, got 384"), "{err}");
}

#[test]
fn a_store_keeps_to_the_embedding_model_of_its_vectors() {
    use ragctx_core::Error;
    let chunk = ragctx_core::EmbeddedChunk {
        chunk: ragctx_core::Chunk {
            id: "a".into(),
            document_id: "a".into(),
            title: "t".into(),
            text: "text".into(),
            ordinal: None,
            start: None,
            end: None,
            weight: 1.0,
            tokens: None,
            metadata: Default::default(),
        },
        vector: (0..8).map(|i| if i == 0 { 1.0 } else { 0.0 }).collect(),
        sentences: None,
    };
    // An empty store takes whichever model comes, and may change its mind.
    let dir = tempfile::tempdir().unwrap();
    let data = open(dir.path(), 0);
    assert_eq!(data.embedding_model().unwrap(), None);
    data.bind_model("e5", false).unwrap();
    data.bind_model("minilm", true).unwrap();
    assert_eq!(data.embedding_model().unwrap().as_deref(), Some("minilm"));
    // Once it holds vectors, only their model.
    data.vector_store().upsert(std::slice::from_ref(&chunk)).unwrap();
    data.bind_model("minilm", true).unwrap();
    match data.bind_model("e5", false) {
        Err(Error::ModelMismatch { stored, configured }) => {
            assert_eq!((stored.as_str(), configured.as_str()), ("minilm", "e5"))
        }
        other => panic!("expected a mismatch, got {other:?}"),
    }
    drop(data);
    // The same check without the data dir held (what a long ingest does first).
    assert!(matches!(DataDir::bind_model_at(dir.path(), "e5", false), Err(Error::ModelMismatch { .. })));
    DataDir::bind_model_at(dir.path(), "minilm", true).unwrap();
    // A store written before models were recorded holds in-process vectors.
    let legacy = tempfile::tempdir().unwrap();
    let data = open(legacy.path(), 0);
    data.vector_store().upsert(std::slice::from_ref(&chunk)).unwrap();
    assert!(matches!(data.bind_model("openai/e5", false), Err(Error::ModelMismatch { .. })));
    data.bind_model("minilm", true).unwrap();
    assert_eq!(data.embedding_model().unwrap().as_deref(), Some("minilm"));
}

#[test]
fn memory_store_lexical_search_conforms() {
    ragctx_testkit::lexical_conformance(&ragctx_store::MemoryVectorStore::new(8, IndexParams::default()), 8);
}

#[test]
fn memory_store_conforms() {
    ragctx_testkit::vector_store_conformance(&|| {
        Box::new(ragctx_store::MemoryVectorStore::new(8, IndexParams { exact_below: 0, ..IndexParams::default() }))
    });
}

/// A write costs what it changes: small writes into a larger store leave `index.bin` and
/// `lexical.bin` as they were (the changes are recorded in the write's transaction); the
/// next search in this process and the next process see every write; the lexical index
/// brought forward ranks and scores as one rebuilt from the chunks; and once the changes
/// pass an eighth of the store the files are rewritten and the recorded changes pruned, an
/// index file older than what is kept being rebuilt.
#[test]
fn small_writes_leave_the_index_files_and_every_search_sees_them() {
    use ragctx_core::{Chunk, EmbeddedChunk, LexicalRequest, SearchRequest};
    use ragctx_lexical::Brought;
    let dir = tempfile::tempdir().unwrap();
    let words = ["router", "reset", "error", "update", "kettle", "descale", "leaves", "water", "fee", "appeal"];
    let chunk = |id: &str, doc: &str, n: usize| {
        let text: Vec<&str> = (0..6).map(|i| words[(n * 7 + i * 3 + n / 10) % words.len()]).collect();
        // Distinct for every n (a splitmix64 step per coordinate).
        let vector: Vec<f32> = (0..8u64)
            .map(|i| {
                let mut z = (n as u64 * 8 + i).wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                ((z ^ (z >> 27)) % 2001) as f32 - 1000.0
            })
            .collect();
        let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        let vector = vector.iter().map(|x| x / norm).collect();
        EmbeddedChunk { chunk: Chunk::new(id, doc, "", &format!("{} n{n}", text.join(" "))), vector, sentences: None }
    };
    let stamp = |name: &str| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(dir.path().join(name)).map(|m| (m.ino(), m.mtime_nsec(), m.mtime())).unwrap()
    };
    let data = open(dir.path(), 0);
    let store = data.vector_store();
    let base: Vec<EmbeddedChunk> =
        (0..800).map(|n| chunk(&format!("d{}#{}", n / 4, n % 4), &format!("d{}", n / 4), n)).collect();
    store.upsert(&base).unwrap();
    assert_eq!(store.lexical_traced().unwrap(), Brought::Rebuilt);
    let (index_file, lexical_file) = (stamp("index.bin"), stamp("lexical.bin"));
    let lexical = |store: &ragctx_store::EmbeddedVectorStore, query: &str| -> Vec<(String, f32)> {
        let req = LexicalRequest { query: query.into(), limit: 8, ..Default::default() };
        store.search_lexical(&req).unwrap().unwrap().hits.iter().map(|h| (h.chunk.id.0.clone(), h.score)).collect()
    };
    let nearest = |store: &ragctx_store::EmbeddedVectorStore, v: &[f32]| {
        let req = SearchRequest { vector: v.to_vec(), limit: 1, ..Default::default() };
        store.search(&req).unwrap().hits[0].chunk.id.0.clone()
    };
    // 10 rounds of 3 writes, 90 chunks changed (< 770 / 8): a new document, one cut to one
    // chunk of new text, one removed.
    for w in 0..10 {
        let new = chunk(&format!("new{w}#0"), &format!("new{w}"), 1000 + w);
        let replaced = vec![chunk(&format!("d{w}#0"), &format!("d{w}"), 2000 + w)];
        store.upsert(std::slice::from_ref(&new)).unwrap();
        store.replace_documents(&[format!("d{w}").into()], &replaced).unwrap();
        store.replace_documents(&[format!("d{}", 50 + w).into()], &[]).unwrap();
        assert_eq!(store.lexical_traced().unwrap(), Brought::Forward(9), "write {w}: 1 + 4 + 4 chunks");
        assert_eq!(nearest(&store, &new.vector), new.chunk.id.0, "write {w}: the vector index sees it");
        assert_eq!(lexical(&store, &format!("n{}", 1000 + w))[0].0, new.chunk.id.0, "write {w}: BM25 sees it");
        assert!(lexical(&store, &format!("n{}", 50 * 4 + w * 4)).is_empty(), "write {w}: the removed document is gone");
    }
    assert_eq!(stamp("index.bin"), index_file, "small writes do not rewrite index.bin");
    assert_eq!(stamp("lexical.bin"), lexical_file, "nor lexical.bin");
    let queries = ["router reset", "kettle descale water", "fee appeal error update", "leaves"];
    let followed: Vec<_> = queries.iter().map(|q| lexical(&store, q)).collect();
    drop(store);
    drop(data);
    // The next process brings both files forward by the recorded changes.
    let data = open(dir.path(), 0);
    let store = data.vector_store();
    assert_eq!(store.len().unwrap(), 800 + 10 - 10 * 3 - 10 * 4);
    assert_eq!(store.lexical_traced().unwrap(), Brought::Forward(90));
    assert_eq!(queries.iter().map(|q| lexical(&store, q)).collect::<Vec<_>>(), followed);
    assert_eq!(nearest(&store, &chunk("x", "x", 1009).vector), "new9#0");
    drop(store);
    drop(data);
    // Built anew from the chunks: the same ranking and scores, to the bit.
    std::fs::remove_file(dir.path().join("lexical.bin")).unwrap();
    let data = open(dir.path(), 0);
    let store = data.vector_store();
    assert_eq!(store.lexical_traced().unwrap(), Brought::Rebuilt);
    assert_eq!(queries.iter().map(|q| lexical(&store, q)).collect::<Vec<_>>(), followed);
    // Past an eighth of the store, the files are rewritten and the older changes pruned: an
    // index file from before them is rebuilt, and still finds every write.
    let old_index = std::fs::read(dir.path().join("index.bin")).unwrap();
    let many: Vec<EmbeddedChunk> =
        (0..60).map(|n| chunk(&format!("bulk{n}#0"), &format!("bulk{n}"), 3000 + n)).collect();
    store.upsert(&many).unwrap();
    assert_ne!(stamp("index.bin"), index_file, "rewritten");
    drop(store);
    drop(data);
    std::fs::write(dir.path().join("index.bin"), old_index).unwrap();
    let data = open(dir.path(), 0);
    let store = data.vector_store();
    assert_eq!(nearest(&store, &many[59].vector), "bulk59#0");
    assert_eq!(nearest(&store, &chunk("x", "x", 1005).vector), "new5#0");
}

/// A process that opens a data dir another holds is the holder's client (design §10): the
/// same suites through the socket, the holder being a second open in this process (a
/// holder's lock is its open file's, so this process's own second open is turned away).
#[test]
fn a_client_of_the_holder_conforms() {
    let holders = Mutex::new(Vec::new());
    ragctx_testkit::vector_store_conformance(&|| {
        let dir = tempfile::tempdir().unwrap();
        let holder = open(dir.path(), 0);
        let client = ragctx_store::SharedDir::open(dir.path(), Some(8), IndexParams::default()).unwrap();
        assert!(!client.holds(), "the second open is a client");
        holders.lock().unwrap().push((dir, holder));
        Box::new(client) as Box<dyn VectorStore>
    });
    let dir = tempfile::tempdir().unwrap();
    let holder = open(dir.path(), 0);
    let client = ragctx_store::SharedDir::open(dir.path(), Some(8), IndexParams::default()).unwrap();
    ragctx_testkit::session_store_conformance(Arc::new(client.clone()), "shared");
    ragctx_testkit::lexical_conformance(&client, 8);
    drop(holder);
}

/// When the holder goes, its client's next call takes the data dir over and finds
/// everything the holder acknowledged; a client asking for another dimension is refused.
#[test]
fn a_client_takes_the_data_dir_over_when_its_holder_ends() {
    let dir = tempfile::tempdir().unwrap();
    let holder = open(dir.path(), 0);
    let client = ragctx_store::SharedDir::open(dir.path(), Some(8), IndexParams::default()).unwrap();
    let wrong = ragctx_store::SharedDir::open(dir.path(), Some(16), IndexParams::default());
    assert!(matches!(wrong, Err(ragctx_core::Error::WrongDimension { expected: 8, got: 16 })), "{:?}", wrong.err());
    let mut v = vec![0.0f32; 8];
    v[0] = 1.0;
    let chunk = ragctx_core::EmbeddedChunk {
        chunk: ragctx_core::Chunk::new("c1", "d1", "T", "text one"),
        vector: v.clone(),
        sentences: None,
    };
    assert_eq!(client.upsert(&[chunk]).unwrap(), 1);
    assert_eq!(holder.vector_store().len().unwrap(), 1, "the holder saw the client's write at once");
    drop(holder);
    assert!(!client.holds());
    assert_eq!(client.len().unwrap(), 1, "after the holder ended");
    assert!(client.holds(), "the client took the data dir over");
    let found = client.search(&ragctx_core::SearchRequest { vector: v, limit: 1, ..Default::default() }).unwrap();
    assert_eq!(found.hits[0].chunk.id.as_str(), "c1");
}

/// Turns of one session plan one at a time across processes (the holder's lease): a client's
/// lease waits for the holder's, another session's does not, and a dropped lease (its
/// process ended) frees the session.
#[test]
fn turn_leases_are_one_session_at_a_time_across_holder_and_client() {
    use ragctx_core::{SessionId, SessionStore};
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let holder = ragctx_store::SharedDir::open(dir.path(), Some(8), IndexParams::default()).unwrap();
    let client = ragctx_store::SharedDir::open(dir.path(), Some(8), IndexParams::default()).unwrap();
    assert!(holder.holds() && !client.holds());
    let s1 = SessionId::parse("s1").unwrap();
    let first = holder.lease_turns(&s1, Duration::from_secs(1)).unwrap();
    assert!(first.is_some(), "the holder leases its own turn");
    let t = std::time::Instant::now();
    assert!(client.lease_turns(&s1, Duration::from_millis(200)).unwrap().is_none(), "taken: the wait runs out");
    assert!(t.elapsed() >= Duration::from_millis(190), "it waited its time");
    let other = client.lease_turns(&SessionId::parse("s2").unwrap(), Duration::from_millis(200)).unwrap();
    assert!(other.is_some(), "another session's turn does not wait");
    let waiter = {
        let client = client.clone();
        let s1 = s1.clone();
        std::thread::spawn(move || client.lease_turns(&s1, Duration::from_secs(10)).unwrap().is_some())
    };
    std::thread::sleep(Duration::from_millis(100));
    drop(first);
    assert!(waiter.join().unwrap(), "the client's turn goes once the holder's ends");
    // The client's lease (its connection) dropped: the holder's next turn goes at once.
    assert!(holder.lease_turns(&s1, Duration::from_millis(500)).unwrap().is_some());
}

/// The sentence index kept, replaced and removed with its chunk: in the data dir, in memory,
/// and through the holder's socket.
#[test]
fn the_sentence_index_follows_its_chunk_in_every_store() {
    let dir = tempfile::tempdir().unwrap();
    let data = open(dir.path(), 0);
    ragctx_testkit::sentence_index_conformance(&data.vector_store());
    ragctx_testkit::sentence_index_conformance(&ragctx_store::MemoryVectorStore::new(8, IndexParams::default()));
    let shared = tempfile::tempdir().unwrap();
    let _holder = open(shared.path(), 0);
    let client = ragctx_store::SharedDir::open(shared.path(), Some(8), IndexParams::default()).unwrap();
    assert!(!client.holds(), "the second open is a client");
    ragctx_testkit::sentence_index_conformance(&client);
}
