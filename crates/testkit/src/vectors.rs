use ragctx_core::{
    Chunk, ChunkId, DocumentId, EmbeddedChunk, Error, ExclusionSet, Grouping, SearchRequest, VectorStore,
};
use std::collections::{HashMap, HashSet};

/// Ids that break naive filter building: quotes, brackets, backslashes, a filter
/// injection, unicode.
pub const HOSTILE_IDS: [&str; 6] = [
    "zz\"] or id >= 0 or doc_id in [\"zz",
    "back\\slash\\",
    "it's [a] \"quote\"",
    "文档/第一章#3",
    "emoji 🚀 id",
    "trailing space ",
];

const DIM: usize = 8;

/// A unit vector pointing mostly along axis `axis`, nudged by `nudge` on the next axis.
fn vector(axis: usize, nudge: f32) -> Vec<f32> {
    let mut v = [0.0f32; DIM];
    v[axis % DIM] = 1.0;
    v[(axis + 1) % DIM] = nudge;
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / n).collect()
}

fn chunk(id: &str, doc: &str, v: Vec<f32>) -> EmbeddedChunk {
    EmbeddedChunk {
        chunk: Chunk {
            id: id.into(),
            document_id: doc.into(),
            title: format!("title of {doc}"),
            text: format!("text of {id}"),
            ordinal: None,
            start: None,
            end: None,
            weight: 1.0,
            tokens: None,
            metadata: Default::default(),
        },
        vector: v,
        sentences: None,
    }
}

/// Corpus: `dominant` with 40 chunks right on the query axis, 12 other documents of 2
/// chunks each further away, and one document per hostile id.
fn corpus() -> Vec<EmbeddedChunk> {
    let mut out = Vec::new();
    for i in 0..40 {
        out.push(chunk(&format!("dominant#{i}"), "dominant", vector(0, 0.01 + i as f32 * 0.001)));
    }
    for d in 0..12 {
        for c in 0..2 {
            out.push(chunk(&format!("d{d}#{c}"), &format!("d{d}"), vector(0, 0.2 + d as f32 * 0.05 + c as f32 * 0.01)));
        }
    }
    for (i, id) in HOSTILE_IDS.iter().enumerate() {
        out.push(chunk(id, &format!("doc {id}"), vector(3, 0.01 * i as f32)));
    }
    out
}

fn search(
    store: &dyn VectorStore,
    axis: usize,
    limit: usize,
    grouping: Option<Grouping>,
    exclusion: ExclusionSet,
) -> Vec<(String, String)> {
    let req = SearchRequest { vector: vector(axis, 0.0), limit, grouping, exclusion, ..Default::default() };
    let out = store.search(&req).expect("search");
    assert!(out.hits.windows(2).all(|w| w[0].score >= w[1].score - 1e-6), "hits sorted by score, best first");
    out.hits.into_iter().map(|h| (h.chunk.id.0, h.chunk.document_id.0)).collect()
}

fn documents(hits: &[(String, String)]) -> Vec<String> {
    let mut d: Vec<String> = Vec::new();
    for (_, doc) in hits {
        if !d.contains(doc) {
            d.push(doc.clone());
        }
    }
    d
}

/// Runs every vector-store check on fresh, empty stores made by `make`.
pub fn vector_store_conformance(make: &dyn Fn() -> Box<dyn VectorStore>) {
    let store = make();
    assert!(store.is_empty().unwrap(), "a new store is empty");
    let data = corpus();
    assert_eq!(store.upsert(&data).unwrap(), data.len(), "all ids are new");
    assert_eq!(store.len().unwrap(), data.len());

    // Grouping: `limit` counts documents, and the dominant document keeps its quota.
    let hits = search(store.as_ref(), 0, 5, Some(Grouping::new(1)), ExclusionSet::default());
    let docs = documents(&hits);
    assert_eq!(docs.len(), 5, "5 groups asked, 5 returned despite a dominant document: {hits:?}");
    assert_eq!(hits.len(), 5, "group_size 1: one chunk per document");
    assert_eq!(docs[0], "dominant");
    let hits = search(store.as_ref(), 0, 4, Some(Grouping::new(3)), ExclusionSet::default());
    let mut per_doc: HashMap<&str, usize> = HashMap::new();
    for (_, d) in &hits {
        *per_doc.entry(d).or_default() += 1;
    }
    assert_eq!(per_doc.len(), 4);
    assert!(per_doc.values().all(|&n| n <= 3), "group_size 3 respected: {per_doc:?}");
    assert_eq!(per_doc["dominant"], 3);
    let mut g = Grouping::new(1);
    g.quotas.insert("dominant".into(), 4);
    let hits = search(store.as_ref(), 0, 3, Some(g), ExclusionSet::default());
    assert_eq!(hits.iter().filter(|h| h.1 == "dominant").count(), 4, "a raised quota applies to its document only");
    assert_eq!(documents(&hits).len(), 3);

    // Exclusion by document: never returned, never costs a slot.
    let mut ex = ExclusionSet::default();
    ex.documents.insert("dominant".into());
    ex.documents.insert("d0".into());
    let hits = search(store.as_ref(), 0, 5, Some(Grouping::new(1)), ex);
    let docs = documents(&hits);
    assert_eq!(docs.len(), 5, "excluded documents cost no slot");
    assert!(!docs.contains(&"dominant".to_string()) && !docs.contains(&"d0".to_string()));

    // Exclusion by chunk: other chunks of the document may come back.
    let mut ex = ExclusionSet::default();
    for i in 0..39 {
        ex.chunks.insert(format!("dominant#{i}").into());
    }
    let hits = search(store.as_ref(), 0, 3, Some(Grouping::new(1)), ex);
    assert_eq!(hits[0].0, "dominant#39", "the one chunk left of the dominant document");
    let ex = ExclusionSet { chunks: hits.iter().map(|h| ChunkId::from(h.0.as_str())).collect(), ..Default::default() };
    let again = search(store.as_ref(), 0, 3, None, ex.clone());
    assert_eq!(again.len(), 3, "ungrouped: limit counts chunks");
    assert!(again.iter().all(|h| !ex.chunks.contains(h.0.as_str())));

    // Hostile ids round-trip and exclude exactly themselves.
    let hits = search(store.as_ref(), 3, HOSTILE_IDS.len(), Some(Grouping::new(1)), ExclusionSet::default());
    let got: HashSet<&str> = hits.iter().map(|h| h.0.as_str()).collect();
    assert_eq!(got, HOSTILE_IDS.iter().copied().collect(), "hostile ids come back byte for byte");
    for (i, id) in HOSTILE_IDS.iter().enumerate() {
        let mut ex = ExclusionSet::default();
        ex.chunks.insert((*id).into());
        ex.documents.insert(DocumentId::from(format!("doc {}", HOSTILE_IDS[(i + 1) % HOSTILE_IDS.len()])));
        let hits = search(store.as_ref(), 3, HOSTILE_IDS.len(), Some(Grouping::new(1)), ex);
        let ids: Vec<&str> = hits.iter().map(|h| h.0.as_str()).collect();
        assert!(!ids.contains(id), "{id:?} excluded by chunk id");
        assert!(!ids.contains(&HOSTILE_IDS[(i + 1) % HOSTILE_IDS.len()]), "excluded by document id");
        assert!(hits.len() >= HOSTILE_IDS.len() - 2, "the filter excluded exactly two hostile ids: {ids:?}");
    }
    let fetched = store.chunks(&HOSTILE_IDS.iter().map(|&i| ChunkId::from(i)).collect::<Vec<_>>()).unwrap();
    assert_eq!(
        fetched.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        HOSTILE_IDS.to_vec(),
        "chunks() in the order asked"
    );

    // Upsert replaces by id: new text and vector, no duplicate.
    let mut moved = chunk("d11#1", "d11", vector(5, 0.0));
    moved.chunk.text = "replaced".into();
    assert_eq!(store.upsert(&[moved]).unwrap(), 0, "replacing is not new");
    assert_eq!(store.len().unwrap(), data.len());
    let hits = search(store.as_ref(), 5, 1, None, ExclusionSet::default());
    assert_eq!(hits[0].0, "d11#1");
    assert_eq!(store.chunks(&["d11#1".into()]).unwrap()[0].text, "replaced");
    let hits = search(store.as_ref(), 0, 30, None, ExclusionSet::default());
    assert!(!hits.iter().any(|h| h.0 == "d11#1"), "the old vector is gone");

    // Errors: wrong dimension, and a bad batch leaves nothing behind.
    let bad = SearchRequest { vector: vec![1.0; DIM + 1], limit: 1, ..Default::default() };
    assert!(matches!(store.search(&bad), Err(Error::WrongDimension { .. })));
    let batch = vec![chunk("fresh", "fresh", vector(6, 0.0)), chunk("short", "short", vec![1.0; DIM - 1])];
    assert!(store.upsert(&batch).is_err());
    assert!(store.chunks(&["fresh".into()]).unwrap().is_empty(), "a failed upsert writes nothing");
    assert_eq!(store.len().unwrap(), data.len());
    // A non-finite vector is refused whole, by upsert and by replace alike.
    let mut nan = vector(7, 0.0);
    nan[3] = f32::NAN;
    let batch = vec![chunk("fresh", "fresh", vector(6, 0.0)), chunk("nan", "fresh", nan)];
    assert!(matches!(store.upsert(&batch), Err(Error::InvalidInput(_))), "a NaN is refused");
    assert!(matches!(store.replace_documents(&["fresh".into()], &batch), Err(Error::InvalidInput(_))));
    assert!(store.chunks(&["fresh".into()]).unwrap().is_empty(), "a refused batch writes nothing");
    assert_eq!(store.len().unwrap(), data.len());

    document_lifecycle(store.as_ref(), data.len());
}

/// Replacing and deleting whole documents, and listing them (on the conformance corpus).
fn document_lifecycle(store: &dyn VectorStore, total: usize) {
    let listed = store.documents().unwrap();
    assert_eq!(listed.len(), 1 + 12 + HOSTILE_IDS.len(), "every document listed once");
    assert_eq!(listed.iter().map(|d| d.chunks).sum::<usize>(), total);
    let dominant = listed.iter().find(|d| d.document_id.as_str() == "dominant").expect("dominant listed");
    assert_eq!((dominant.chunks, dominant.title.as_str()), (40, "title of dominant"));
    assert!(listed.iter().any(|d| d.document_id.as_str() == format!("doc {}", HOSTILE_IDS[0])), "hostile ids listed");

    // A document that became shorter: its old chunks beyond the new end are gone at once.
    let shorter: Vec<EmbeddedChunk> =
        (0..3).map(|i| chunk(&format!("dominant#{i}"), "dominant", vector(0, 0.01 + i as f32 * 0.001))).collect();
    let r = store.replace_documents(&["dominant".into()], &shorter).unwrap();
    assert_eq!((r.new, r.updated, r.removed), (0, 3, 37), "{r:?}");
    assert_eq!(store.len().unwrap(), total - 37);
    let hits = search(store, 0, 50, None, ExclusionSet::default());
    let stale: Vec<&String> =
        hits.iter().map(|h| &h.0).filter(|id| id.starts_with("dominant#") && id.as_str() >= "dominant#3").collect();
    assert!(stale.is_empty(), "chunks no longer in the document are never returned: {stale:?}");
    assert!(store.chunks(&["dominant#39".into()]).unwrap().is_empty(), "nor fetched by id");
    assert_eq!(store.vectors(&["dominant#39".into()]).unwrap(), vec![None]);

    // A chunk given for a document that is not being replaced is refused, nothing written.
    let stray = chunk("stray#0", "stray", vector(6, 0.0));
    assert!(store.replace_documents(&["dominant".into()], &[stray]).is_err());
    assert!(store.chunks(&["stray#0".into()]).unwrap().is_empty());

    // Deleting a document (hostile id included) removes every chunk of it, and only those.
    let hostile_doc = DocumentId::from(format!("doc {}", HOSTILE_IDS[0]));
    let r = store.replace_documents(&["d3".into(), hostile_doc.clone()], &[]).unwrap();
    assert_eq!(r.removed, 3, "{r:?}");
    assert_eq!(store.len().unwrap(), total - 40);
    let hits = search(store, 0, 50, Some(Grouping::new(3)), ExclusionSet::default());
    assert!(hits.iter().all(|h| h.1 != "d3" && h.1 != hostile_doc.as_str()), "deleted documents never return");
    let listed = store.documents().unwrap();
    assert!(!listed.iter().any(|d| d.document_id.as_str() == "d3" || d.document_id == hostile_doc));
    assert_eq!(listed.iter().find(|d| d.document_id.as_str() == "dominant").unwrap().chunks, 3);
    let r = store.replace_documents(&["never-stored".into()], &[]).unwrap();
    assert_eq!(r, Default::default(), "deleting an unknown document changes nothing");

    // Re-adding after a delete works like a first ingest.
    let back = vec![chunk("d3#0", "d3", vector(0, 0.35))];
    assert_eq!(store.replace_documents(&["d3".into()], &back).unwrap().new, 1);
    assert_eq!(store.chunks(&["d3#0".into()]).unwrap().len(), 1);
}

/// The sentence index of a store that keeps one (DESIGN §11; not Milvus): a chunk's
/// sentences come back as written, are dropped when the chunk is written again without them
/// and when its document is removed, and an unknown id has none.
pub fn sentence_index_conformance(store: &dyn VectorStore) {
    let dim = store.dimension();
    let mut v = vec![0.0f32; dim];
    v[0] = 1.0;
    let text = "One sentence here. Another one there.";
    let spans = ragctx_core::text::sentence_spans(text);
    let vectors: Vec<Vec<f32>> =
        (0..spans.len()).map(|i| (0..dim).map(|d| if d == i { 1.0 } else { -0.25 }).collect()).collect();
    let sentences = ragctx_core::Sentences::new(&spans, &vectors, &[Some(3), Some(4)]);
    let with = EmbeddedChunk {
        chunk: Chunk::new("sent#0", "sent", "Sentences", text),
        vector: v.clone(),
        sentences: Some(sentences.clone()),
    };
    let ids = [ChunkId::from("sent#0"), ChunkId::from("nobody#0")];
    store.upsert(std::slice::from_ref(&with)).unwrap();
    let got = store.sentences(&ids).unwrap();
    assert_eq!(got, vec![Some(sentences.clone()), None], "kept as written; none for an unknown id");
    assert!(got[0].as_ref().unwrap().fits(text));
    store.upsert(&[EmbeddedChunk { sentences: None, ..with.clone() }]).unwrap();
    assert_eq!(store.sentences(&ids).unwrap(), vec![None, None], "written again without: none");
    store.upsert(std::slice::from_ref(&with)).unwrap();
    store.replace_documents(&["sent".into()], &[]).unwrap();
    assert_eq!(store.sentences(&ids).unwrap(), vec![None, None], "its document removed: none");
}
