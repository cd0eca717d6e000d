//! The lexical search's share of the store contract: the same exclusion and grouping as
//! the vector search, on a corpus whose texts decide the ranking.

use ragctx_core::{Chunk, ChunkId, EmbeddedChunk, ExclusionSet, Grouping, LexicalRequest, SearchPath, VectorStore};
use std::collections::HashMap;

fn chunk(id: &str, doc: &str, text: &str, dim: usize) -> EmbeddedChunk {
    let mut vector = vec![0.0; dim];
    vector[0] = 1.0;
    EmbeddedChunk { chunk: Chunk::new(id, doc, "", text), vector, sentences: None }
}

fn search(
    store: &dyn VectorStore,
    query: &str,
    limit: usize,
    grouping: Option<Grouping>,
    exclusion: ExclusionSet,
) -> Vec<(String, String)> {
    let out = store
        .search_lexical(&LexicalRequest { query: query.into(), limit, grouping, exclusion, ..Default::default() })
        .expect("lexical search")
        .expect("this store has a lexical index");
    assert_eq!(out.path, SearchPath::Lexical);
    assert!(out.hits.windows(2).all(|w| w[0].score >= w[1].score), "hits sorted by score, best first");
    out.hits.into_iter().map(|h| (h.chunk.id.0, h.chunk.document_id.0)).collect()
}

/// Runs the lexical checks on a fresh, empty store of `dim`-d vectors that has a lexical
/// index (a backend without one must answer `Ok(None)`; its own tests say so).
pub fn lexical_conformance(store: &dyn VectorStore, dim: usize) {
    assert!(
        search(store, "router reset", 5, Some(Grouping::new(2)), ExclusionSet::default()).is_empty(),
        "empty store"
    );
    let mut data = Vec::new();
    // One document that matches the query in 40 chunks, 12 that match once each, and one
    // exact error code in a document of its own.
    for i in 0..40 {
        data.push(chunk(&format!("dominant#{i}"), "dominant", &format!("router firmware reset step {i}"), dim));
    }
    for d in 0..12 {
        data.push(chunk(&format!("d{d}#0"), &format!("d{d}"), "the router needs a reset after updates", dim));
        data.push(chunk(&format!("d{d}#1"), &format!("d{d}"), "unrelated gardening notes", dim));
    }
    data.push(chunk("code#0", "code", "error 0x80070005 means access denied", dim));
    store.upsert(&data).unwrap();

    let hits = search(store, "0x80070005", 3, None, ExclusionSet::default());
    assert_eq!(hits.first().map(|h| h.0.as_str()), Some("code#0"), "the exact term ranks first: {hits:?}");
    assert!(search(store, "photosynthesis", 5, None, ExclusionSet::default()).is_empty(), "no shared term, no hit");
    // Stop words only: answered (whether they count is the analyser's business: Milvus
    // Lite 3.2.2 keeps them).
    search(store, "the? and, of", 5, None, ExclusionSet::default());

    // Grouping: `limit` documents despite the dominant one, none above its quota.
    let hits = search(store, "router firmware reset", 5, Some(Grouping::new(2)), ExclusionSet::default());
    let mut per_doc: HashMap<&str, usize> = HashMap::new();
    for (_, d) in &hits {
        *per_doc.entry(d).or_default() += 1;
    }
    assert_eq!(per_doc.len(), 5, "5 documents asked, 5 returned: {hits:?}");
    assert_eq!(per_doc["dominant"], 2, "the dominant document keeps its quota");
    assert!(per_doc.values().all(|&n| n <= 2));
    let mut g = Grouping::new(1);
    g.quotas.insert("dominant".into(), 4);
    let hits = search(store, "router firmware reset", 3, Some(g), ExclusionSet::default());
    assert_eq!(hits.iter().filter(|h| h.1 == "dominant").count(), 4, "a raised quota applies to its document");

    // Exclusion: never returned, never costs a slot (by document and by chunk).
    let mut ex = ExclusionSet::default();
    ex.documents.insert("dominant".into());
    ex.chunks.insert(ChunkId::from("d0#0"));
    let hits = search(store, "router firmware reset", 5, Some(Grouping::new(1)), ex);
    assert_eq!(hits.len(), 5, "excluded ids cost no slot: {hits:?}");
    assert!(hits.iter().all(|h| h.1 != "dominant" && h.0 != "d0#0"));
    let ex = ExclusionSet {
        chunks: (0..39).map(|i| ChunkId::from(format!("dominant#{i}"))).collect(),
        ..Default::default()
    };
    let hits = search(store, "firmware", 10, None, ex);
    assert_eq!(hits.iter().map(|h| h.0.as_str()).collect::<Vec<_>>(), ["dominant#39"], "the one chunk left");

    // Writes are seen: replaced text is searchable, deleted documents are gone.
    let mut moved = chunk("d11#1", "d11", "now about 0x80070005 too", dim);
    moved.chunk.title = "Windows update".into();
    store.upsert(&[moved]).unwrap();
    let hits = search(store, "0x80070005 windows", 5, None, ExclusionSet::default());
    assert_eq!(hits.first().map(|h| h.0.as_str()), Some("d11#1"), "title and new text indexed: {hits:?}");
    store.replace_documents(&["code".into()], &[]).unwrap();
    let hits = search(store, "0x80070005", 5, None, ExclusionSet::default());
    assert!(hits.iter().all(|h| h.1 != "code"), "a deleted document is gone from the lexical index");
}
