//! Tenant isolation as a property (issue 25): three tenants hold the same document and chunk
//! ids with their own texts in one store; a million random searches through tenant-scoped
//! handles — random filters (document ids of other tenants among them), exclusions of ids
//! (stored ids of other tenants among them), limits, grouping, the graph walk and the exact
//! scan, lexical and dense, with documents replaced and deleted along the way — never return
//! a chunk of another tenant. Every hit's text names its tenant.

use ragctx_core::{
    ChunkId, DocumentId, EmbeddedChunk, ExclusionSet, Grouping, LexicalRequest, SearchRequest, Tenant, VectorStore,
};
use ragctx_engine::ScopedVectorStore;
use ragctx_index::IndexParams;
use ragctx_store::MemoryVectorStore;
use ragctx_testkit::{random_filter, random_metadata, Rng};
use std::sync::Arc;

const DIM: usize = 8;
const TENANTS: [&str; 3] = ["default", "acme", "b.c-d"];

fn unit(rng: &mut Rng) -> Vec<f32> {
    let v: Vec<f32> = (0..DIM).map(|_| rng.below(2001) as f32 / 1000.0 - 1.0).collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    v.iter().map(|x| x / n).collect()
}

fn document(rng: &mut Rng, tenant: &str, d: usize) -> Vec<EmbeddedChunk> {
    let meta = random_metadata(rng);
    (0..1 + rng.below(3))
        .map(|c| {
            let mut chunk = ragctx_core::Chunk::new(
                &format!("doc{d}#{c}"),
                &format!("doc{d}"),
                "plant",
                &format!("plant text of tenant={tenant} doc {d}"),
            );
            chunk.metadata = meta.clone();
            EmbeddedChunk { chunk, vector: unit(rng), sentences: None }
        })
        .collect()
}

#[test]
fn a_million_random_queries_never_reach_another_tenant() {
    let mut checked = 0usize;
    for exact_below in [0, 1_000_000] {
        let params = IndexParams { exact_below, scan_ratio: 0, ..IndexParams::default() };
        let raw: Arc<dyn VectorStore> = Arc::new(MemoryVectorStore::new(DIM, params));
        let scoped: Vec<ScopedVectorStore> =
            TENANTS.iter().map(|t| ScopedVectorStore::new(raw.clone(), Tenant::parse(t).unwrap())).collect();
        let mut rng = Rng::new(0x007e_4a47 + exact_below as u64);
        let docs = 40;
        for s in &scoped {
            for d in 0..docs {
                s.upsert(&document(&mut rng, s.tenant().as_str(), d)).unwrap();
            }
        }
        let rounds = 500_000;
        for i in 0..rounds {
            let t = i % TENANTS.len();
            let store = &scoped[t];
            let name = TENANTS[t];
            if i % 5_000 == 0 {
                // Replace or delete a document of some tenant: the others' stay theirs.
                let owner = &scoped[rng.below(3) as usize];
                let d = rng.below(docs as u64) as usize;
                let id = DocumentId::from(format!("doc{d}"));
                let chunks =
                    if rng.below(4) == 0 { Vec::new() } else { document(&mut rng, owner.tenant().as_str(), d) };
                owner.replace_documents(&[id], &chunks).unwrap();
            }
            let filter =
                if rng.below(3) == 0 { ragctx_core::Filter::All } else { random_filter(&mut rng, 2, docs as u64) };
            let mut exclusion = ExclusionSet::default();
            for _ in 0..rng.below(6) {
                let d = rng.below(docs as u64);
                match rng.below(3) {
                    0 => {
                        exclusion.documents.insert(format!("doc{d}").into());
                    }
                    1 => {
                        exclusion.chunks.insert(ChunkId::from(format!("doc{d}#0")));
                    }
                    // Another tenant's stored id, as a caller might try: refused by the handle.
                    _ => {
                        exclusion.chunks.insert(ChunkId::from(format!("acme\u{1f}doc{d}#0")));
                    }
                }
            }
            let limit = 1 + rng.below(10) as usize;
            let grouping = (rng.below(2) == 0).then(|| Grouping::new(1 + rng.below(2) as usize));
            let hits = if rng.below(4) == 0 {
                let req =
                    LexicalRequest { query: "plant text".into(), limit, grouping, exclusion, filter, tenant: None };
                store.search_lexical(&req).unwrap().unwrap().hits
            } else {
                let req = SearchRequest { vector: unit(&mut rng), limit, grouping, exclusion, filter, tenant: None };
                store.search(&req).unwrap().hits
            };
            for h in &hits {
                assert!(h.chunk.text.contains(&format!("tenant={name} ")), "tenant {name} got {:?}", h.chunk.text);
            }
            checked += 1;
        }
        // Fetching by id: another tenant's stored id names nothing.
        for s in &scoped {
            let got = s.chunks(&[ChunkId::from("acme\u{1f}doc1#0"), ChunkId::from("doc1#0")]).unwrap();
            assert!(got.iter().all(|c| c.text.contains(&format!("tenant={} ", s.tenant()))));
            checked += 1;
        }
    }
    assert!(checked >= 1_000_000, "{checked} queries checked");
    eprintln!("tenant isolation: {checked} random queries checked, 0 foreign hits");
}

/// The sentence index through tenant-scoped handles: a tenant reads its own chunk's
/// sentences; another asking for that id (bare, or as stored, qualified with the owner's
/// tenant) gets exactly what an id nobody stored gets.
#[test]
fn a_foreign_chunks_sentences_answer_as_a_missing_chunks() {
    let raw: Arc<dyn VectorStore> = Arc::new(MemoryVectorStore::new(DIM, IndexParams::default()));
    let [a, b] = ["acme", "globex"].map(|t| ScopedVectorStore::new(raw.clone(), Tenant::parse(t).unwrap()));
    let text = "First sentence. Second one.";
    let spans = ragctx_core::text::sentence_spans(text);
    let mut vector = vec![0.0; DIM];
    vector[0] = 1.0;
    let sentences = ragctx_core::Sentences::new(&spans, &[vector.clone(), vector.clone()], &[]);
    let chunk = EmbeddedChunk {
        chunk: ragctx_core::Chunk::new("doc#0", "doc", "Doc", text),
        vector,
        sentences: Some(sentences.clone()),
    };
    a.upsert(&[chunk]).unwrap();
    assert_eq!(a.sentences(&["doc#0".into()]).unwrap(), vec![Some(sentences)], "the owner reads them");
    let stored = a.tenant().qualify("doc#0").unwrap();
    let asked: Vec<ragctx_core::ChunkId> = vec!["doc#0".into(), stored.as_str().into(), "nobody#0".into()];
    assert_eq!(b.sentences(&asked).unwrap(), vec![None, None, None], "foreign ids answer as missing ones");
}
