//! The filter conformance suite (DESIGN §8): every [`VectorStore`] runs it. A corpus with
//! random metadata (hostile keys and values among them) and two tenants; named cases for each
//! operator, then random filters with random exclusions, tenants and grouping — each search's
//! answer checked against [`Filter::matches`]: nothing that fails the predicate comes back,
//! and nothing that passes it is missing when the limit leaves room.

use ragctx_core::{
    Chunk, ChunkId, EmbeddedChunk, ExclusionSet, Field, Filter, Grouping, LexicalRequest, MetaValue, Metadata, Range,
    Scalar, SearchRequest, Tenant, VectorStore,
};
use std::collections::{BTreeSet, HashSet};

const DIM: usize = 8;

/// Strings that break naive expression building, as metadata values and document ids.
pub const HOSTILE_VALUES: [&str; 6] = ["a\"b", "c\\d", "[x] or 1", "ü文", "it's", "\"]) or true or ([\""];

/// A seeded xorshift: the same corpus and filters on every backend.
pub struct Rng(u64);

impl Rng {
    /// Seeded (0 is replaced).
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

const WORDS: [&str; 4] = ["care", "pests", "light", "soil"];

fn word(rng: &mut Rng) -> String {
    if rng.below(5) == 0 {
        HOSTILE_VALUES[rng.below(HOSTILE_VALUES.len() as u64) as usize].to_owned()
    } else {
        WORDS[rng.below(WORDS.len() as u64) as usize].to_owned()
    }
}

/// Random metadata over the keys `topic` (string), `year` (number), `draft` (bool), `tags`
/// (list) and `a.b-c` (string), each present three times in four.
pub fn random_metadata(rng: &mut Rng) -> Metadata {
    let mut m = Metadata::default();
    for key in ["topic", "year", "draft", "tags", "a.b-c"] {
        if rng.below(4) == 0 {
            continue;
        }
        let v = match key {
            "year" => MetaValue::Number(2018.0 + rng.below(8) as f64 + if rng.below(4) == 0 { 0.5 } else { 0.0 }),
            "draft" => MetaValue::Bool(rng.below(2) == 0),
            "tags" => MetaValue::List((0..rng.below(4)).map(|_| word(rng)).collect()),
            _ => MetaValue::String(word(rng)),
        };
        m.insert(key, v).expect("valid metadata");
    }
    m
}

/// A random filter over [`random_metadata`]'s keys, a missing key and `document_id`
/// (documents `doc0`..`doc{docs}`), nested up to `depth`.
pub fn random_filter(rng: &mut Rng, depth: u32, docs: u64) -> Filter {
    let field = |rng: &mut Rng| match rng.below(7) {
        0 => Field::DocumentId,
        1 => Field::Meta("missing".into()),
        i => Field::Meta(["topic", "year", "draft", "tags", "a.b-c"][i as usize - 2].into()),
    };
    let scalar = |rng: &mut Rng, f: &Field| match (f, rng.below(4)) {
        (Field::DocumentId, _) => Scalar::String(format!("doc{}", rng.below(docs + 2))),
        (_, 0) | (_, 1) => Scalar::String(word(rng)),
        (_, 2) => Scalar::Number(2018.0 + rng.below(8) as f64),
        _ => Scalar::Bool(rng.below(2) == 0),
    };
    match if depth == 0 { rng.below(4) } else { rng.below(7) } {
        0 => {
            let f = field(rng);
            let s = scalar(rng, &f);
            Filter::Eq(f, s)
        }
        1 => {
            let f = field(rng);
            let n = 1 + rng.below(3);
            Filter::In(f.clone(), (0..n).map(|_| scalar(rng, &f)).collect())
        }
        2 => {
            let r = [Range::Gt, Range::Gte, Range::Lt, Range::Lte][rng.below(4) as usize];
            Filter::Range(Field::Meta("year".into()), r, 2018.0 + rng.below(8) as f64 + rng.below(2) as f64 * 0.5)
        }
        3 => Filter::Exists(field(rng)),
        4 => Filter::And((0..1 + rng.below(3)).map(|_| random_filter(rng, depth - 1, docs)).collect()),
        5 => Filter::Or((0..1 + rng.below(3)).map(|_| random_filter(rng, depth - 1, docs)).collect()),
        _ => Filter::Not(Box::new(random_filter(rng, depth - 1, docs))),
    }
}

/// A unit vector from the generator.
fn unit(rng: &mut Rng) -> Vec<f32> {
    let v: Vec<f32> = (0..DIM).map(|_| rng.below(2001) as f32 / 1000.0 - 1.0).collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    v.iter().map(|x| x / n).collect()
}

/// The corpus: `docs` documents of 1 to 4 chunks with random metadata (shared by a
/// document's chunks, one chunk in four with its own), every fifth document a hostile id;
/// stored ids as the stores hold them: documents of tenant `t2` qualified.
pub fn filter_corpus(rng: &mut Rng, docs: usize) -> Vec<EmbeddedChunk> {
    let t2 = Tenant::parse("t2").expect("valid");
    let mut out = Vec::new();
    for d in 0..docs {
        let doc =
            if d % 5 == 4 { format!("doc{d} {}", HOSTILE_VALUES[d % HOSTILE_VALUES.len()]) } else { format!("doc{d}") };
        let tenant = if d % 3 == 2 { &t2 } else { &Tenant::default() };
        let meta = random_metadata(rng);
        for c in 0..1 + rng.below(4) {
            let mut chunk = Chunk::new(
                &tenant.qualify_unchecked(&format!("{doc}#{c}")),
                &tenant.qualify_unchecked(&doc),
                &format!("title {d}"),
                &format!("plant text {d} {c} {}", WORDS[(d + c as usize) % WORDS.len()]),
            );
            chunk.metadata = if rng.below(4) == 0 { random_metadata(rng) } else { meta.clone() };
            out.push(EmbeddedChunk { chunk, vector: unit(rng), sentences: None });
        }
    }
    out
}

fn passes(c: &Chunk, filter: &Filter, tenant: Option<&str>, ex: &ExclusionSet) -> bool {
    filter.matches(c.document_id.as_str(), &c.metadata)
        && tenant.is_none_or(|t| ragctx_core::tenant_of(c.id.as_str()) == t)
        && !ex.excludes(&c.id, &c.document_id)
}

/// Checks one search's answer against the predicate; returns the ids returned.
fn check(
    what: &str,
    hits: &[ragctx_core::Hit],
    corpus: &[EmbeddedChunk],
    request: (&Filter, Option<&str>, &ExclusionSet, usize, Option<&Grouping>),
    complete: bool,
) -> BTreeSet<String> {
    let (filter, tenant, ex, limit, grouping) = request;
    let expected: Vec<&Chunk> = corpus.iter().map(|c| &c.chunk).filter(|c| passes(c, filter, tenant, ex)).collect();
    let got: BTreeSet<String> = hits.iter().map(|h| h.chunk.id.0.clone()).collect();
    let f = filter.to_json_string();
    assert_eq!(got.len(), hits.len(), "{what}: a chunk came back twice for {f}");
    for h in hits {
        assert!(passes(&h.chunk, filter, tenant, ex), "{what}: {:?} fails {f} (tenant {tenant:?})", h.chunk.id);
        let stored = corpus.iter().find(|c| c.chunk.id == h.chunk.id).expect("a stored chunk");
        assert_eq!(h.chunk.metadata, stored.chunk.metadata, "{what}: metadata returned as stored");
    }
    match grouping {
        None => assert_eq!(hits.len(), limit.min(expected.len()), "{what}: {f} tenant {tenant:?}: chunks"),
        Some(g) => {
            let docs: HashSet<&str> = expected.iter().map(|c| c.document_id.as_str()).collect();
            let got_docs: HashSet<&str> = hits.iter().map(|h| h.chunk.document_id.as_str()).collect();
            assert_eq!(got_docs.len(), limit.min(docs.len()), "{what}: {f} tenant {tenant:?}: documents");
            for d in &got_docs {
                let n = hits.iter().filter(|h| h.chunk.document_id.as_str() == *d).count();
                assert!(n <= g.group_size, "{what}: {d} over its quota");
            }
        }
    }
    if complete {
        let want: BTreeSet<String> = expected.iter().map(|c| c.id.0.clone()).collect();
        assert_eq!(got, want, "{what}: {f} tenant {tenant:?}: the whole allowed set");
    }
    got
}

/// Runs the suite on a fresh store from `make` (dimension 8); `filters` random filters.
/// Returns the number of searches checked.
pub fn filter_conformance(make: &dyn Fn() -> Box<dyn VectorStore>, filters: usize) -> usize {
    let store = make();
    let mut rng = Rng::new(0x5eed_f117);
    let docs = 60;
    let corpus = filter_corpus(&mut rng, docs);
    store.upsert(&corpus).expect("upsert");
    let all = corpus.len() + 10;
    let q = unit(&mut Rng::new(7));
    let search = |filter: &Filter, tenant: Option<&str>, ex: &ExclusionSet, limit: usize, g: Option<Grouping>| {
        let req = SearchRequest {
            vector: q.clone(),
            limit,
            grouping: g,
            exclusion: ex.clone(),
            filter: filter.clone(),
            tenant: tenant.map(str::to_owned),
        };
        store.search(&req).expect("search").hits
    };
    let lexical = |filter: &Filter, tenant: Option<&str>, ex: &ExclusionSet, limit: usize, g: Option<Grouping>| {
        let req = LexicalRequest {
            query: "plant text".into(),
            limit,
            grouping: g,
            exclusion: ex.clone(),
            filter: filter.clone(),
            tenant: tenant.map(str::to_owned),
        };
        store.search_lexical(&req).expect("lexical search").map(|o| o.hits)
    };
    let none = ExclusionSet::default();
    let mut checked = 0;
    // Named cases: each operator, hostile values, a filter nothing passes.
    let named = [
        r#"{"topic":"pests"}"#,
        r#"{"tags":"soil"}"#,
        r#"{"year":{"gte":2020,"lt":2023}}"#,
        r#"{"year":2021}"#,
        r#"{"topic":{"in":["care","light"]}}"#,
        r#"{"topic":{"nin":["care","light"]}}"#,
        r#"{"draft":{"exists":false}}"#,
        r#"{"or":[{"draft":true},{"not":{"tags":"care"}}]}"#,
        r#"{"a.b-c":"a\"b"}"#,
        r#"{"topic":"c\\d"}"#,
        r#"{"tags":{"in":["[x] or 1","ü文"]}}"#,
        r#"{"document_id":{"in":["doc0","doc4 it's"]}}"#,
        r#"{"topic":"no such value"}"#,
        r#"{"missing":"x"}"#,
    ];
    for text in named {
        let filter = Filter::parse(text).expect("a valid filter");
        for tenant in [None, Some("default"), Some("t2")] {
            let hits = search(&filter, tenant, &none, all, None);
            check(text, &hits, &corpus, (&filter, tenant, &none, all, None), true);
            if let Some(hits) = lexical(&filter, tenant, &none, all, None) {
                check(&format!("lexical {text}"), &hits, &corpus, (&filter, tenant, &none, all, None), true);
            }
            checked += 2;
        }
    }
    // Random filters, with random exclusions, tenants, limits and grouping.
    for i in 0..filters {
        let filter = random_filter(&mut rng, 3, docs as u64);
        let tenant = [None, Some("default"), Some("t2"), Some("t3")][i % 4];
        let mut ex = ExclusionSet::default();
        for _ in 0..rng.below(12) {
            let c = &corpus[rng.below(corpus.len() as u64) as usize].chunk;
            if rng.below(3) == 0 {
                ex.documents.insert(c.document_id.clone());
            } else {
                ex.chunks.insert(ChunkId::from(c.id.as_str()));
            }
        }
        let limit = 1 + rng.below(12) as usize;
        let grouping = (rng.below(2) == 0).then(|| Grouping::new(1 + rng.below(3) as usize));
        let hits = search(&filter, tenant, &ex, limit, grouping.clone());
        check("random", &hits, &corpus, (&filter, tenant, &ex, limit, grouping.as_ref()), false);
        let hits = search(&filter, tenant, &ex, all, None);
        check("random, all", &hits, &corpus, (&filter, tenant, &ex, all, None), true);
        if let Some(hits) = lexical(&filter, tenant, &ex, limit, grouping.clone()) {
            check("lexical random", &hits, &corpus, (&filter, tenant, &ex, limit, grouping.as_ref()), false);
        }
        checked += 3;
    }
    // Replacing a document replaces its metadata.
    let first = corpus.iter().find(|c| c.chunk.document_id.as_str() == "doc0").expect("doc0").clone();
    let mut changed = first.clone();
    changed.chunk.metadata = Metadata::default();
    changed.chunk.metadata.insert("topic", MetaValue::String("replaced".into())).expect("valid");
    store
        .replace_documents(std::slice::from_ref(&first.chunk.document_id), std::slice::from_ref(&changed))
        .expect("replace");
    let replaced = Filter::parse(r#"{"topic":"replaced"}"#).expect("valid");
    let hits = search(&replaced, None, &none, all, None);
    assert_eq!(hits.len(), 1, "the replaced document's new metadata is searched");
    assert_eq!(hits[0].chunk.metadata, changed.chunk.metadata);
    if let Some(MetaValue::String(old)) = first.chunk.metadata.get("topic") {
        let f = Filter::Eq(Field::Meta("topic".into()), Scalar::String(old.clone()))
            .and(Filter::Eq(Field::DocumentId, Scalar::String("doc0".into())));
        assert!(search(&f, None, &none, all, None).is_empty(), "the old metadata is gone");
    }
    checked + 2
}
