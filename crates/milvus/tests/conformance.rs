//! The Milvus store runs the shared conformance suite against a real server: Milvus Lite
//! started by `scripts/milvus-up` (`RAGCTX_TEST_MILVUS`, default http://127.0.0.1:19530).
//! `RAGCTX_TEST_MILVUS=skip` skips them, said and counted (`ragctx_testkit::service`); CI never does.

use ragctx_core::{EmbeddedChunk, Error, Grouping, SearchRequest, VectorStore};
use ragctx_milvus::{IndexKind, MilvusConfig, MilvusVectorStore};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn uri() -> Option<String> {
    ragctx_testkit::service("RAGCTX_TEST_MILVUS", "http://127.0.0.1:19530")
}

fn fresh(name: &str, index: IndexKind) -> MilvusVectorStore {
    let uri = uri().unwrap();
    static N: AtomicUsize = AtomicUsize::new(0);
    let collection = format!("t_{name}_{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    let mut config = MilvusConfig::new(&uri, &collection);
    config.index = index;
    config.timeout = Duration::from_secs(20);
    MilvusVectorStore::connect(config, 8)
        .unwrap_or_else(|e| panic!("Milvus at {uri} (start it with scripts/milvus-up): {e}"))
}

#[test]
fn milvus_vector_store_conforms_with_flat_and_hnsw() {
    if uri().is_none() {
        return;
    }
    for index in [IndexKind::Flat, "hnsw".parse().unwrap()] {
        ragctx_testkit::vector_store_conformance(&|| Box::new(fresh("conf", index)));
    }
}

/// One document with 300 chunks right on the query: a server that groups after a fixed
/// over-fetch hands back fewer groups than asked; the store completes them.
#[test]
fn milvus_dominant_document_does_not_starve_other_groups() {
    if uri().is_none() {
        return;
    }
    let store = fresh("dominant", IndexKind::Flat);
    let unit = |a: f32, b: f32| {
        let n = (a * a + b * b).sqrt();
        let mut v = vec![0.0; 8];
        v[0] = a / n;
        v[1] = b / n;
        v
    };
    let mut data = Vec::new();
    for i in 0..300 {
        data.push(chunk(&format!("big#{i}"), "big", unit(1.0, 0.001 * i as f32)));
    }
    for d in 0..10 {
        data.push(chunk(&format!("small{d}#0"), &format!("small{d}"), unit(1.0, 0.5 + d as f32 * 0.1)));
    }
    store.upsert(&data).unwrap();
    let req =
        SearchRequest { vector: unit(1.0, 0.0), limit: 5, grouping: Some(Grouping::new(1)), ..Default::default() };
    let out = store.search(&req).unwrap();
    let docs: std::collections::BTreeSet<_> =
        out.hits.iter().map(|h| h.chunk.document_id.as_str().to_owned()).collect();
    assert_eq!(docs.len(), 5, "5 groups asked: {:?} (rounds {}, {})", docs, out.rounds, out.reason);
    assert_eq!(out.hits.len(), 5);
    assert!(docs.contains("big"));
    eprintln!("dominant document: {} searches, {}", out.rounds, out.reason);
}

/// A collection records the model of its vectors: reopening it with another model is
/// refused with the way out, with the same model (or with none: commands that embed
/// nothing) it opens.
#[test]
fn milvus_collection_keeps_one_embedding_model() {
    let Some(uri) = uri() else { return };
    let collection = format!("t_model_{}", std::process::id());
    let open = |model: Option<&str>| {
        let mut config = MilvusConfig::new(&uri, &collection);
        config.index = IndexKind::Flat;
        config.timeout = Duration::from_secs(20);
        config.model = model.map(str::to_owned);
        MilvusVectorStore::connect(config, 8)
    };
    let store = open(Some("all-MiniLM-L6-v2/256/mean/l2")).expect("created");
    store.upsert(&[chunk("a#0", "a", vec![1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])]).unwrap();
    drop(store);
    match open(Some("all-MiniLM-L6-v2/256/mean/l2/int8")) {
        Err(e @ Error::ModelMismatch { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("/int8") && msg.contains("--collection"), "{msg}");
        }
        other => panic!("another model's vectors must be refused, got {:?}", other.map(|_| ())),
    }
    assert!(open(Some("all-MiniLM-L6-v2/256/mean/l2")).is_ok());
    assert!(open(None).is_ok(), "commands that embed nothing open it");
    // A collection first made by a command that embeds nothing is claimed by the first
    // model that opens it while empty.
    let other = format!("t_model_late_{}", std::process::id());
    let open_other = |model: Option<&str>| {
        let mut config = MilvusConfig::new(&uri, &other);
        config.timeout = Duration::from_secs(20);
        config.model = model.map(str::to_owned);
        MilvusVectorStore::connect(config, 8)
    };
    open_other(None).expect("created without a model");
    open_other(Some("m1")).expect("claimed by m1");
    assert!(matches!(open_other(Some("m2")), Err(Error::ModelMismatch { .. })));
    // One with vectors but no recorded model (made before models were recorded) opens for
    // the in-process fp32 model only.
    let legacy = format!("t_model_legacy_{}", std::process::id());
    let open_legacy = |model: Option<&str>, fp32: bool| {
        let mut config = MilvusConfig::new(&uri, &legacy);
        config.timeout = Duration::from_secs(20);
        config.model = model.map(str::to_owned);
        config.unrecorded_is_model = fp32;
        MilvusVectorStore::connect(config, 8)
    };
    let store = open_legacy(None, false).expect("created without a model");
    store.upsert(&[chunk("a#0", "a", vec![1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])]).unwrap();
    drop(store);
    assert!(matches!(open_legacy(Some("e5"), false), Err(Error::ModelMismatch { .. })));
    assert!(open_legacy(Some("all-MiniLM-L6-v2/256/mean/l2"), true).is_ok());
}

/// Full-text search where the server has it (Milvus Lite 3, Milvus 2.5 on): the lexical
/// share of the conformance suite, exclusion and grouping included. Where it has not
/// (2.3.5), the store says so (`None`, and why) and turns fall back to dense — never a
/// client-side scan.
#[test]
fn milvus_full_text_conforms_where_the_server_has_it() {
    if uri().is_none() {
        return;
    }
    let store = fresh("lexical", IndexKind::Flat);
    let version = store.capabilities().version.clone();
    assert_eq!(store.capabilities().full_text, ragctx_milvus::full_text_by_version(&version), "Milvus {version}");
    // The shared server is Milvus Lite 3 outside the 2.3.5 run: full-text is never skipped there.
    assert!(store.capabilities().full_text || !version.starts_with("milvus_lite"), "Milvus {version}");
    if store.capabilities().full_text {
        ragctx_testkit::lexical_conformance(&store, 8);
        return;
    }
    let req = ragctx_core::LexicalRequest { query: "anything".into(), limit: 3, ..Default::default() };
    assert!(store.search_lexical(&req).unwrap().is_none());
    let why = store.lexical_missing();
    assert!(why.contains(&version) && why.contains("no full-text search"), "{why}");
}

#[test]
fn milvus_unreachable_is_a_clear_error_within_the_deadline() {
    let mut config = MilvusConfig::new("http://127.0.0.1:9", "nothing");
    config.timeout = Duration::from_secs(2);
    let start = Instant::now();
    let err = MilvusVectorStore::connect(config, 8).err().expect("nothing listens on port 9");
    assert!(start.elapsed() < Duration::from_secs(15), "took {:?}", start.elapsed());
    assert!(matches!(err, Error::Unavailable { .. }), "{err}");
    assert!(err.to_string().contains("127.0.0.1:9"), "names the server: {err}");
}

#[test]
fn milvus_bad_collection_names_are_refused_before_connecting() {
    let config = MilvusConfig::new("http://127.0.0.1:9", "x\"] or 1");
    let err = MilvusVectorStore::connect(config, 8).err().unwrap();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
}

fn chunk(id: &str, doc: &str, vector: Vec<f32>) -> EmbeddedChunk {
    EmbeddedChunk {
        chunk: ragctx_core::Chunk {
            id: id.into(),
            document_id: doc.into(),
            title: doc.into(),
            text: id.into(),
            ordinal: None,
            start: None,
            end: None,
            weight: 1.0,
            tokens: None,
            metadata: Default::default(),
        },
        vector,
        sentences: None,
    }
}
