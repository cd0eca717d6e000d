//! Metadata filters and tenants against a real Milvus (`RAGCTX_TEST_MILVUS`, default
//! http://127.0.0.1:19530, started by `scripts/milvus-up`): random chunks with random
//! metadata (hostile strings, numbers, bools, lists, missing keys) in three tenants, and
//! random filters, exclusions and tenants; every search, grouped or not, dense or BM25, must
//! return exactly the chunks [`Filter::matches`] selects, no more and no fewer.

use ragctx_core::{
    tenant_of, Chunk, ChunkId, EmbeddedChunk, ExclusionSet, Field, Filter, Grouping, LexicalRequest, MetaValue,
    Metadata, Range, Scalar, SearchRequest, VectorStore, DEFAULT_TENANT, TENANT_SEPARATOR,
};
use ragctx_milvus::{Consistency, IndexKind, MilvusConfig, MilvusVectorStore};
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

fn uri() -> Option<String> {
    ragctx_testkit::service("RAGCTX_TEST_MILVUS", "http://127.0.0.1:19530")
}

const DIM: usize = 8;
const CHUNKS: usize = 200;
const DOCUMENTS: usize = 40;
const FILTERS: usize = 200;

/// SplitMix64: reproducible without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const KEYS: [&str; 6] = ["k", "a.b", "x-y", "n", "flag", "tags"];
const STRINGS: [&str; 12] =
    ["v", "w", "3", "1", "true", "a\"b", "c\\d", "[x]", "ü", "e\u{1f}f", "' or id != '", "x\"] or id >= \"\" or [\"y"];
const NUMBERS: [f64; 8] = [0.0, 1.0, 3.0, -2.5, 3.5, 2024.0, 1e20, 0.1];
const TENANTS: [&str; 3] = [DEFAULT_TENANT, "acme", "b_c"];

fn value(rng: &mut Rng) -> MetaValue {
    match rng.below(4) {
        0 => MetaValue::String(rng.pick(&STRINGS).to_string()),
        1 => MetaValue::Number(*rng.pick(&NUMBERS)),
        2 => MetaValue::Bool(rng.chance(50)),
        _ => {
            let n = rng.below(4);
            MetaValue::List((0..n).map(|_| rng.pick(&STRINGS).to_string()).collect())
        }
    }
}

fn scalar(rng: &mut Rng) -> Scalar {
    match rng.below(5) {
        0 | 1 => Scalar::String(rng.pick(&STRINGS).to_string()),
        2 | 3 => Scalar::Number(*rng.pick(&NUMBERS)),
        _ => Scalar::Bool(rng.chance(50)),
    }
}

fn field(rng: &mut Rng) -> Field {
    match rng.below(9) {
        0 => Field::DocumentId,
        1 => Field::Meta("missing".into()),
        _ => Field::Meta(rng.pick(&KEYS).to_string()),
    }
}

fn document(rng: &mut Rng) -> String {
    format!("{}{}", doc_prefix(rng.below(DOCUMENTS)), rng.below(DOCUMENTS))
}

/// Some document ids are hostile too.
fn doc_prefix(d: usize) -> &'static str {
    ["doc", "d\"oc", "d\\oc", "dö[c]"][d % 4]
}

fn doc_id(d: usize) -> String {
    format!("{}{d}", doc_prefix(d))
}

fn filter(rng: &mut Rng, depth: usize) -> Filter {
    let leaf = depth == 0 || rng.chance(45);
    if leaf {
        let f = field(rng);
        let doc_value = |rng: &mut Rng| Scalar::String(document(rng));
        return match rng.below(5) {
            0 | 1 => {
                let s = if f == Field::DocumentId { doc_value(rng) } else { scalar(rng) };
                Filter::Eq(f, s)
            }
            2 => {
                let n = 1 + rng.below(3);
                let values =
                    (0..n).map(|_| if f == Field::DocumentId { doc_value(rng) } else { scalar(rng) }).collect();
                Filter::In(f, values)
            }
            3 if f != Field::DocumentId => {
                let r = *rng.pick(&[Range::Gt, Range::Gte, Range::Lt, Range::Lte]);
                Filter::Range(f, r, *rng.pick(&NUMBERS))
            }
            _ => Filter::Exists(f),
        };
    }
    match rng.below(4) {
        0 => Filter::Not(Box::new(filter(rng, depth - 1))),
        1 => Filter::And((0..1 + rng.below(3)).map(|_| filter(rng, depth - 1)).collect()),
        2 => Filter::Or((0..1 + rng.below(3)).map(|_| filter(rng, depth - 1)).collect()),
        _ => Filter::Not(Box::new(Filter::Or((0..2).map(|_| filter(rng, depth - 1)).collect()))),
    }
}

fn unit(rng: &mut Rng) -> Vec<f32> {
    let v: Vec<f32> = (0..DIM).map(|_| (rng.below(2001) as f32 - 1000.0) / 1000.0 + 0.001).collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / n).collect()
}

fn corpus(rng: &mut Rng) -> Vec<EmbeddedChunk> {
    (0..CHUNKS)
        .map(|i| {
            let d = i % DOCUMENTS;
            let tenant = TENANTS[d % TENANTS.len()];
            let qualify = |s: &str| {
                if tenant == DEFAULT_TENANT {
                    s.to_owned()
                } else {
                    format!("{tenant}{TENANT_SEPARATOR}{s}")
                }
            };
            let mut metadata = Metadata::default();
            for key in KEYS {
                if rng.chance(70) {
                    metadata.insert(key, value(rng)).unwrap();
                }
            }
            let mut chunk = Chunk::new(
                &qualify(&format!("{}#{i}", doc_id(d))),
                &qualify(&doc_id(d)),
                "alpha title",
                &format!("alpha text {i}"),
            );
            chunk.metadata = metadata;
            EmbeddedChunk { chunk, vector: unit(rng), sentences: None }
        })
        .collect()
}

fn exclusion(rng: &mut Rng, data: &[EmbeddedChunk]) -> ExclusionSet {
    let mut ex = ExclusionSet::default();
    if rng.chance(50) {
        for _ in 0..rng.below(6) {
            ex.documents.insert(rng.pick(data).chunk.document_id.clone());
        }
        for _ in 0..rng.below(10) {
            ex.chunks.insert(rng.pick(data).chunk.id.clone());
        }
    }
    ex
}

fn ids(hits: &[ragctx_core::Hit]) -> BTreeSet<String> {
    let set: BTreeSet<String> = hits.iter().map(|h| h.chunk.id.0.clone()).collect();
    assert_eq!(set.len(), hits.len(), "no chunk twice");
    set
}

#[test]
fn milvus_filters_agree_with_the_reference_on_random_metadata() {
    let Some(uri) = uri() else { return };
    let collection = format!("t_filters_{}", std::process::id());
    let mut config = MilvusConfig::new(&uri, &collection);
    config.index = IndexKind::Flat;
    config.timeout = Duration::from_secs(20);
    config.consistency = Consistency::Strong;
    let store = MilvusVectorStore::connect(config, DIM)
        .unwrap_or_else(|e| panic!("Milvus at {uri} (start it with scripts/milvus-up): {e}"));
    assert!(store.capabilities().metadata, "a new collection has the metadata fields");
    let mut rng = Rng(0x5eed_f11e);
    let data = corpus(&mut rng);
    assert_eq!(store.upsert(&data).unwrap(), CHUNKS);

    // Metadata comes back as written, from searches and from fetches.
    let by_id: HashMap<&str, &Chunk> = data.iter().map(|c| (c.chunk.id.as_str(), &c.chunk)).collect();
    let all_ids: Vec<ChunkId> = data.iter().map(|c| c.chunk.id.clone()).collect();
    let fetched = store.chunks(&all_ids).unwrap();
    assert_eq!(fetched.len(), CHUNKS);
    for c in &fetched {
        assert_eq!(c.metadata, by_id[c.id.as_str()].metadata, "{:?}", c.id);
    }

    let full_text = store.capabilities().full_text;
    let (mut checked, mut nonempty, mut lexical, mut grouped, mut total) = (0, 0, 0, 0, 0);
    for round in 0..FILTERS {
        let f = filter(&mut rng, 3);
        let ex = exclusion(&mut rng, &data);
        let tenant = match rng.below(5) {
            0 => None,
            t => Some(TENANTS[(t - 1) % TENANTS.len()].to_owned()),
        };
        let want: BTreeSet<String> = data
            .iter()
            .map(|c| &c.chunk)
            .filter(|c| !ex.excludes(&c.id, &c.document_id))
            .filter(|c| tenant.as_deref().is_none_or(|t| tenant_of(c.id.as_str()) == t))
            .filter(|c| f.matches(c.document_id.as_str(), &c.metadata))
            .map(|c| c.id.0.clone())
            .collect();
        let what = format!("round {round}: filter {} tenant {tenant:?} exclusion {ex:?}", f.to_json_string());
        let request = SearchRequest {
            vector: unit(&mut rng),
            limit: CHUNKS,
            grouping: None,
            exclusion: ex.clone(),
            filter: f.clone(),
            tenant: tenant.clone(),
        };
        let out = store.search(&request).unwrap_or_else(|e| panic!("{what}: {e}"));
        let got = ids(&out.hits);
        assert_eq!(got, want, "{what}: {}", out.reason);
        for h in &out.hits {
            assert_eq!(h.chunk.metadata, by_id[h.chunk.id.as_str()].metadata, "hits carry their metadata");
        }
        // Grouped: every document (each has CHUNKS / DOCUMENTS chunks) with all its chunks.
        if round % 2 == 0 {
            let per_doc = CHUNKS / DOCUMENTS;
            let request = SearchRequest { limit: DOCUMENTS, grouping: Some(Grouping::new(per_doc)), ..request.clone() };
            let out = store.search(&request).unwrap_or_else(|e| panic!("{what} (grouped): {e}"));
            assert_eq!(ids(&out.hits), want, "{what} (grouped): {}", out.reason);
            grouped += 1;
        }
        if full_text && round % 4 == 1 {
            let request = LexicalRequest {
                query: "alpha".into(),
                limit: CHUNKS,
                grouping: None,
                exclusion: ex.clone(),
                filter: f.clone(),
                tenant: tenant.clone(),
            };
            let out = store.search_lexical(&request).unwrap().expect("full-text");
            assert_eq!(ids(&out.hits), want, "{what} (BM25): {}", out.reason);
            lexical += 1;
        }
        checked += 1;
        total += want.len();
        if !want.is_empty() && want.len() < CHUNKS {
            nonempty += 1;
        }
    }
    eprintln!(
        "{checked} filters over {CHUNKS} chunks ({nonempty} selecting some but not all; {total} ids in all), \
         {grouped} grouped, {lexical} BM25"
    );
    assert!(nonempty > FILTERS / 3, "the random filters select something: {nonempty}");
}

/// A filter that reads a key no chunk has, negated, selects every chunk; `{"not": {}}` none.
#[test]
fn milvus_negated_filters_on_missing_keys_are_complements() {
    let Some(uri) = uri() else { return };
    let collection = format!("t_filters_not_{}", std::process::id());
    let mut config = MilvusConfig::new(&uri, &collection);
    config.index = IndexKind::Flat;
    config.timeout = Duration::from_secs(20);
    config.consistency = Consistency::Strong;
    let store = MilvusVectorStore::connect(config, DIM).unwrap();
    let mut rng = Rng(7);
    let data: Vec<EmbeddedChunk> = corpus(&mut rng).into_iter().take(20).collect();
    store.upsert(&data).unwrap();
    let search = |f: &str| {
        let request = SearchRequest {
            vector: unit(&mut Rng(1)),
            limit: 50,
            filter: Filter::parse(f).unwrap(),
            ..Default::default()
        };
        store.search(&request).unwrap().hits.len()
    };
    assert_eq!(search(r#"{"missing": {"nin": ["v"]}}"#), 20);
    assert_eq!(search(r#"{"not": {"missing": {"gt": 1}}}"#), 20);
    assert_eq!(search(r#"{"missing": {"exists": false}}"#), 20);
    assert_eq!(search(r#"{"not": {}}"#), 0);
    assert_eq!(search(r#"{"document_id": {"exists": true}}"#), 20);
}

/// The shared filter conformance suite (`ragctx-testkit`), which every store runs.
#[test]
fn milvus_filter_conformance() {
    let Some(uri) = uri() else { return };
    let checked = ragctx_testkit::filter_conformance(
        &|| {
            let collection = format!("t_filter_conf_{}", std::process::id());
            let mut config = MilvusConfig::new(&uri, &collection);
            config.index = IndexKind::Flat;
            config.timeout = Duration::from_secs(20);
            config.consistency = Consistency::Strong;
            Box::new(MilvusVectorStore::connect(config, DIM).unwrap())
        },
        100,
    );
    eprintln!("filter conformance: {checked} searches checked");
}

/// A collection made before the metadata fields: made again while empty; with chunks, kept
/// and served — tenants told apart by id, `document_id` filters written — while a metadata
/// filter or a chunk carrying metadata is refused, never ignored.
#[test]
fn milvus_collection_without_metadata_fields_never_ignores_a_filter_or_tenant() {
    use milvus::v2::prelude::{
        ClientV2, CollectionSchema, ConnectConfig, CreateCollectionRequest, CreateIndexRequest, DataType, FieldSchema,
        IndexParam, IndexType, MetricType,
    };
    let Some(uri) = uri() else { return };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let make_old = |name: &str| {
        runtime.block_on(async {
            let client = ClientV2::new(&ConnectConfig::new().uri(uri.clone())).await.unwrap();
            let varchar = |n: &str| FieldSchema::new().name(n).data_type(DataType::VarChar).max_length(65_535);
            let int = |n: &str| FieldSchema::new().name(n).data_type(DataType::Int64);
            let schema = CollectionSchema::new()
                .add_field(varchar("id").primary_key(true))
                .add_field(varchar("document_id"))
                .add_field(varchar("title"))
                .add_field(varchar("text"))
                .add_field(int("ordinal"))
                .add_field(int("start"))
                .add_field(int("end"))
                .add_field(int("tokens"))
                .add_field(FieldSchema::new().name("weight").data_type(DataType::Float))
                .add_field(FieldSchema::new().name("vector").data_type(DataType::FloatVector).dimension(DIM as u32));
            client
                .create_collection(
                    CreateCollectionRequest::builder().collection_name(name).schema(schema).build().unwrap(),
                )
                .await
                .unwrap();
            let index =
                IndexParam::new().field_name("vector").index_type(IndexType::Flat).metric_type(MetricType::Cosine);
            client
                .create_index(
                    CreateIndexRequest::builder().collection_name(name).index_param(index).sync(false).build().unwrap(),
                )
                .await
                .unwrap();
        })
    };
    let open = |name: &str, model: Option<&str>| {
        let mut config = MilvusConfig::new(&uri, name);
        config.index = IndexKind::Flat;
        config.timeout = Duration::from_secs(20);
        config.consistency = Consistency::Strong;
        config.model = model.map(str::to_owned);
        config.unrecorded_is_model = true;
        MilvusVectorStore::connect(config, DIM).unwrap()
    };
    // Empty: made again by the first command that embeds.
    let empty = format!("t_old_empty_{}", std::process::id());
    make_old(&empty);
    assert!(!open(&empty, None).capabilities().metadata, "a command that embeds nothing leaves it");
    assert!(open(&empty, Some("m")).capabilities().metadata, "made again while empty");

    // With chunks: kept.
    let old = format!("t_old_{}", std::process::id());
    make_old(&old);
    let store = open(&old, None);
    let mut rng = Rng(11);
    let data: Vec<EmbeddedChunk> = corpus(&mut rng)
        .into_iter()
        .take(30)
        .map(|mut c| {
            c.chunk.metadata = Metadata::default();
            c
        })
        .collect();
    store.upsert(&data).unwrap();
    drop(store);
    let store = open(&old, Some("m"));
    assert!(!store.capabilities().metadata, "a collection with chunks is kept as it is");
    let search = |filter: Filter, tenant: Option<&str>| {
        let request = SearchRequest {
            vector: unit(&mut Rng(3)),
            limit: 100,
            filter,
            tenant: tenant.map(str::to_owned),
            ..Default::default()
        };
        store.search(&request).map(|o| ids(&o.hits))
    };
    for tenant in TENANTS {
        let want: BTreeSet<String> =
            data.iter().filter(|c| tenant_of(c.chunk.id.as_str()) == tenant).map(|c| c.chunk.id.0.clone()).collect();
        assert!(!want.is_empty());
        assert_eq!(search(Filter::All, Some(tenant)).unwrap(), want, "tenant {tenant} by id");
    }
    assert_eq!(search(Filter::All, None).unwrap().len(), data.len());
    let doc = data[0].chunk.document_id.as_str();
    let by_doc = search(Filter::Eq(Field::DocumentId, Scalar::String(doc.to_owned())), None).unwrap();
    assert!(!by_doc.is_empty() && by_doc.iter().all(|id| by_id_doc(&data, id) == doc));
    let err = search(Filter::parse(r#"{"topic": "x"}"#).unwrap(), None).unwrap_err();
    assert!(err.to_string().contains("--collection"), "{err}");
    let mut with_metadata = data[0].clone();
    with_metadata.chunk.metadata.insert("topic", MetaValue::String("x".into())).unwrap();
    let err = store.upsert(&[with_metadata]).unwrap_err();
    assert!(err.to_string().contains("--collection"), "{err}");
}

fn by_id_doc<'a>(data: &'a [EmbeddedChunk], id: &str) -> &'a str {
    data.iter().find(|c| c.chunk.id.as_str() == id).map(|c| c.chunk.document_id.as_str()).unwrap()
}
