//! The store itself (feature `sdk`, on by default).

mod documents;
mod lexical;

pub use lexical::by_version as full_text_by_version;

use crate::filter::{self, Filter, DOCUMENT_ID, ID};
use milvus::v2::prelude::{
    ClientV2, CollectionSchema, ConnectConfig, ConsistencyLevel, CreateCollectionRequest, CreateIndexRequest, DataType,
    FieldSchema, FilterTemplateValue, GetServerVersionRequest, HasCollectionRequest, IndexParam, IndexType,
    InsertRequest, LoadCollectionRequest, MetricType, QueryRequest, ResultValue, RetryConfig,
    SearchRequest as MilvusSearch, SearchVectors, TelemetryConfig, UpsertRequest,
};
use ragctx_core::{
    Chunk, ChunkId, DocumentId, DocumentSummary, EmbeddedChunk, Error, ExclusionSet, Grouping, Hit, LexicalRequest,
    Replaced, Result, SearchOutcome, SearchPath, SearchRequest, VectorStore,
};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::time::Duration;

/// A fetched chunk and, when asked for, its vector.
type Fetched = (Chunk, Option<Vec<f32>>);

/// What `describe_collection` tells of a collection.
struct Described {
    dimension: usize,
    model: Option<String>,
    full_text: bool,
}

/// What a search looks for: a query vector, or text for the server's BM25.
#[derive(Clone, Copy)]
enum Query<'a> {
    Dense(&'a [f32]),
    Text(&'a str),
}

/// Searches at most per request: the first plus completions of missing groups.
pub const MAX_ROUNDS: u32 = 6;
/// Rows per upsert or fetch call.
const BATCH: usize = 256;
/// Milvus's largest VarChar.
const MAX_VARCHAR: usize = 65_535;
/// Milvus's largest `topk`.
const MAX_TOPK: usize = 16_384;
/// Milvus's largest `group_size`.
const MAX_GROUP_SIZE: usize = 10;
/// Fields a search or fetch returns (all but the vector).
const FIELDS: [&str; 9] = [ID, DOCUMENT_ID, "title", "text", "ordinal", "start", "end", "weight", "tokens"];

/// How the vector field is indexed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexKind {
    /// Exact search: the same answers as a scan.
    Flat,
    /// Graph search; `ef` at query time.
    Hnsw { m: u32, ef_construction: u32, ef: u32 },
}

impl std::str::FromStr for IndexKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "flat" | "FLAT" => Ok(IndexKind::Flat),
            "hnsw" | "HNSW" => Ok(IndexKind::Hnsw { m: 16, ef_construction: 128, ef: 96 }),
            other => Err(Error::InvalidInput(format!("unknown Milvus index {other:?}: use hnsw or flat"))),
        }
    }
}

/// Read consistency of searches and fetches (DESIGN §4: never `Strong` on the hot path
/// unless asked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Consistency {
    Strong,
    Session,
    Bounded,
    Eventually,
}

impl std::str::FromStr for Consistency {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "strong" => Consistency::Strong,
            "session" => Consistency::Session,
            "bounded" => Consistency::Bounded,
            "eventually" => Consistency::Eventually,
            other => {
                return Err(Error::InvalidInput(format!(
                    "unknown consistency {other:?}: use strong, session, bounded or eventually"
                )))
            }
        })
    }
}

impl From<Consistency> for ConsistencyLevel {
    fn from(c: Consistency) -> Self {
        match c {
            Consistency::Strong => ConsistencyLevel::Strong,
            Consistency::Session => ConsistencyLevel::Session,
            Consistency::Bounded => ConsistencyLevel::Bounded,
            Consistency::Eventually => ConsistencyLevel::Eventually,
        }
    }
}

/// Where and how to reach Milvus.
#[derive(Clone, Debug)]
pub struct MilvusConfig {
    pub uri: String,
    pub collection: String,
    /// `user:password` or an API key; `None` without authentication.
    pub token: Option<String>,
    /// Deadline of each call (connect included).
    pub timeout: Duration,
    /// Attempts per call, the first included, for transient failures.
    pub attempts: u32,
    pub consistency: Consistency,
    /// The index built when the collection is created (an existing one is kept).
    pub index: IndexKind,
    /// The embedding model's id: recorded in a property of a collection this store
    /// creates, and checked against that of an existing one (vectors of two models are never
    /// mixed). `None` checks nothing (commands that embed nothing).
    pub model: Option<String>,
    /// Whether `model` is what a collection holding vectors but no recorded model (made
    /// before ragctx recorded models) holds: the in-process fp32 model without prefixes.
    /// Any other model is refused such a collection.
    pub unrecorded_is_model: bool,
}

/// The collection property that records the model of its vectors (a property, not the
/// description: Milvus Lite keeps properties but drops descriptions).
const MODEL_PROPERTY: &str = "ragctx.embedding_model";

impl MilvusConfig {
    pub fn new(uri: &str, collection: &str) -> Self {
        MilvusConfig {
            uri: uri.to_owned(),
            collection: collection.to_owned(),
            token: None,
            timeout: Duration::from_secs(5),
            attempts: 3,
            consistency: Consistency::Session,
            index: "hnsw".parse().unwrap(),
            model: None,
            unrecorded_is_model: false,
        }
    }
}

/// What the connected server supports, detected once per connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    pub version: String,
    /// Filter templates (`filter_params`, Milvus ≥ 2.5): ids never enter the expression.
    pub templates: bool,
    /// Grouping search (`group_by_field`, Milvus ≥ 2.4; older servers ignore it silently).
    pub group_by: bool,
    /// Full-text (BM25) search on this collection: the server has it (Milvus ≥ 2.5, Milvus
    /// Lite 3) and the collection was made with its BM25 function.
    pub full_text: bool,
}

pub struct MilvusVectorStore {
    runtime: tokio::runtime::Runtime,
    client: ClientV2,
    config: MilvusConfig,
    dimension: usize,
    capabilities: Capabilities,
}

fn unavailable(config: &MilvusConfig, what: &str, e: impl std::fmt::Display) -> Error {
    Error::Unavailable { backend: format!("Milvus at {}", config.uri), message: format!("{what}: {e}") }
}

/// `-1` for an absent number.
fn opt<N: Into<u64>>(v: Option<N>) -> i64 {
    v.map(|n| n.into() as i64).unwrap_or(-1)
}

fn unopt<N: TryFrom<i64>>(v: i64) -> Option<N> {
    if v < 0 {
        None
    } else {
        N::try_from(v).ok()
    }
}

impl MilvusVectorStore {
    /// Connects, creates the collection (schema, vector and scalar indexes) when it does not
    /// exist, loads it, and detects what the server supports.
    pub fn connect(config: MilvusConfig, dimension: usize) -> Result<Self> {
        if config.collection.is_empty()
            || !config.collection.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            || config.collection.starts_with(|c: char| c.is_ascii_digit())
        {
            return Err(Error::InvalidInput(format!(
                "Milvus collection name {:?}: use letters, digits and _, not starting with a digit",
                config.collection
            )));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ragctx-milvus")
            .enable_all()
            .build()
            .map_err(Error::storage)?;
        let mut connect = ConnectConfig::new()
            .uri(config.uri.clone())
            .connect_timeout(config.timeout)
            .rpc_timeout(config.timeout)
            .retry(RetryConfig::new().max_attempts(config.attempts.max(1)).max_retry_timeout(config.timeout * 2))
            .telemetry(TelemetryConfig::new().enabled(false));
        if let Some(token) = &config.token {
            connect = connect.token(token.clone());
        }
        let client = run(&runtime, config.timeout * 2, async move { ClientV2::new(&connect).await })
            .map_err(|e| unavailable(&config, "connect", e))?;
        let version = run(&runtime, config.timeout, {
            let client = client.clone();
            async move { client.server_version(GetServerVersionRequest::builder().build()?).await }
        })
        .map(|v| v.version().to_owned())
        .map_err(|e| unavailable(&config, "server version", e))?;
        let mut store = MilvusVectorStore {
            runtime,
            client,
            config,
            dimension,
            capabilities: Capabilities { group_by: groups_by(&version), version, templates: false, full_text: false },
        };
        store.ensure_collection()?;
        store.capabilities.templates = store.probe_templates();
        Ok(store)
    }

    pub fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    pub fn config(&self) -> &MilvusConfig {
        &self.config
    }

    /// Runs one SDK call on the store's runtime with the configured deadline.
    fn call<T, F>(&self, what: &str, fut: F) -> Result<T>
    where
        T: Send + 'static,
        F: Future<Output = milvus::v2::error::Result<T>> + Send + 'static,
    {
        run(&self.runtime, self.config.timeout * self.config.attempts.max(1), fut).map_err(|e| self.error(what, e))
    }

    /// A read ([`Self::call`]) that reloads the collection and tries once more when the
    /// server says it is not loaded — as a restarted Milvus does until someone loads it.
    fn read<T, F>(&self, what: &str, make: impl Fn() -> F) -> Result<T>
    where
        T: Send + 'static,
        F: Future<Output = milvus::v2::error::Result<T>> + Send + 'static,
    {
        match self.call(what, make()) {
            Err(Error::Storage(m)) if needs_load(&m) => {
                self.load()?;
                // A load is asynchronous on the server: a read right after it can still find
                // the collection released. Wait a little, then call it what it is — a server
                // that is recovering (503), not a rejected request.
                for wait_ms in [0u64, 200, 400, 800] {
                    std::thread::sleep(Duration::from_millis(wait_ms));
                    match self.call(what, make()) {
                        Err(Error::Storage(m)) if needs_load(&m) => continue,
                        r => return r,
                    }
                }
                Err(unavailable(&self.config, what, "the collection is still loading after a restart; try again"))
            }
            r => r,
        }
    }

    fn load(&self) -> Result<()> {
        let (client, name) = (self.client.clone(), self.config.collection.clone());
        self.call("load_collection", async move {
            client.load_collection(LoadCollectionRequest::builder().collection_name(name).build()?).await
        })
    }

    fn error(&self, what: &str, e: CallError) -> Error {
        match e {
            CallError::Sdk(e) if is_rejection(&e) => {
                Error::Storage(format!("Milvus at {} rejected {what}: {e}", self.config.uri))
            }
            e => unavailable(&self.config, what, e),
        }
    }

    fn ensure_collection(&mut self) -> Result<()> {
        let name = self.config.collection.clone();
        let exists = self.call("has_collection", {
            let (client, name) = (self.client.clone(), name.clone());
            async move { client.has_collection(HasCollectionRequest::builder().collection_name(name).build()?).await }
        })?;
        if !exists.exists() {
            self.create_collection()?;
        } else {
            let Described { dimension: got, model: stored, full_text } = self.describe_collection()?;
            let mut made_again = false;
            if got != self.dimension {
                return Err(Error::InvalidInput(format!(
                    "Milvus collection {name:?} holds {got}-d vectors, the model makes {}-d: use another --collection",
                    self.dimension
                )));
            }
            match (stored, &self.config.model) {
                (Some(stored), Some(configured)) if &stored != configured => {
                    return Err(Error::ModelMismatch { stored, configured: configured.clone() });
                }
                // Made by a command that embeds nothing, or before the model was recorded.
                (None, Some(configured)) => {
                    self.load()?;
                    if self.count_strong()? == 0 {
                        // Empty: made again with the model recorded at creation (an altered
                        // property does not survive a restart of Milvus 2.3.5, #30144).
                        self.drop_collection()?;
                        self.create_collection()?;
                        made_again = true;
                    } else if !self.config.unrecorded_is_model {
                        return Err(Error::ModelMismatch {
                            stored: "unrecorded (the collection predates recorded models: the in-process fp32 model)"
                                .into(),
                            configured: configured.clone(),
                        });
                    }
                }
                _ => {}
            }
            // Made before full-text search on a server that has it, and still empty: made
            // again with it, nothing to lose (a command that embeds nothing leaves it).
            if !made_again
                && !full_text
                && lexical::by_version(&self.capabilities.version)
                && self.config.model.is_some()
            {
                self.load()?;
                if self.count_strong()? == 0 {
                    self.drop_collection()?;
                    self.create_collection()?;
                }
            }
        }
        self.capabilities.full_text = self.describe_collection()?.full_text;
        self.load()
    }

    /// Rows, read with strong consistency (another process's recent inserts included).
    fn count_strong(&self) -> Result<usize> {
        self.count(ConsistencyLevel::Strong)
    }

    /// Rows, read at `level`.
    fn count(&self, level: ConsistencyLevel) -> Result<usize> {
        let request = QueryRequest::builder()
            .collection_name(self.config.collection.clone())
            .output_fields(["count(*)"])
            .consistency_level(level)
            .build()
            .map_err(Error::storage)?;
        let response = self.read("count", || {
            let (client, request) = (self.client.clone(), request.clone());
            async move { client.query(request).await }
        })?;
        match response.results().rows().map_err(Error::storage)?.next() {
            Some(row) => Ok(int(&row, "count(*)")? as usize),
            None => Ok(0),
        }
    }

    fn drop_collection(&self) -> Result<()> {
        let name = self.config.collection.clone();
        self.call("drop_collection", {
            let client = self.client.clone();
            async move {
                client
                    .drop_collection(
                        milvus::v2::prelude::DropCollectionRequest::builder().collection_name(name).build()?,
                    )
                    .await
            }
        })
        .map(|_| ())
    }

    fn create_collection(&self) -> Result<()> {
        let varchar = |name: &str, max: u32| FieldSchema::new().name(name).data_type(DataType::VarChar).max_length(max);
        let int = |name: &str| FieldSchema::new().name(name).data_type(DataType::Int64);
        let schema = CollectionSchema::new()
            .add_field(varchar(ID, MAX_VARCHAR as u32).primary_key(true))
            .add_field(varchar(DOCUMENT_ID, MAX_VARCHAR as u32))
            .add_field(varchar("title", MAX_VARCHAR as u32))
            .add_field(varchar("text", MAX_VARCHAR as u32))
            .add_field(int("ordinal"))
            .add_field(int("start"))
            .add_field(int("end"))
            .add_field(int("tokens"))
            .add_field(FieldSchema::new().name("weight").data_type(DataType::Float))
            .add_field(
                FieldSchema::new().name("vector").data_type(DataType::FloatVector).dimension(self.dimension as u32),
            );
        let full_text = lexical::by_version(&self.capabilities.version);
        let schema = if full_text { lexical::with_bm25(schema) } else { schema };
        let name = self.config.collection.clone();
        let properties: HashMap<String, String> =
            self.config.model.iter().map(|m| (MODEL_PROPERTY.to_owned(), m.clone())).collect();
        self.call("create_collection", {
            let (client, name) = (self.client.clone(), name.clone());
            async move {
                client
                    .create_collection(
                        CreateCollectionRequest::builder()
                            .collection_name(name)
                            .properties(properties)
                            .schema(schema)
                            .build()?,
                    )
                    .await
            }
        })?;
        let vector_index = match self.config.index {
            IndexKind::Flat => IndexParam::new().field_name("vector").index_type(IndexType::Flat),
            IndexKind::Hnsw { m, ef_construction, .. } => {
                IndexParam::new().field_name("vector").index_type(IndexType::Hnsw).extra_params(HashMap::from([
                    ("M".to_owned(), m.to_string()),
                    ("efConstruction".to_owned(), ef_construction.to_string()),
                ]))
            }
        }
        .metric_type(MetricType::Cosine);
        self.call("create_index (vector)", {
            let (client, name) = (self.client.clone(), name.clone());
            async move {
                client
                    .create_index(
                        CreateIndexRequest::builder()
                            .collection_name(name)
                            .index_param(vector_index)
                            .sync(false)
                            .build()?,
                    )
                    .await
            }
        })?;
        if full_text {
            self.call("create_index (BM25)", {
                let (client, name) = (self.client.clone(), name.clone());
                async move {
                    client
                        .create_index(
                            CreateIndexRequest::builder()
                                .collection_name(name)
                                .index_param(lexical::index())
                                .sync(false)
                                .build()?,
                        )
                        .await
                }
            })?;
        }
        // A scalar index on document_id speeds up the exclusion filter; a server without
        // inverted indexes still filters correctly without it.
        let _ = self.call("create_index (document_id)", {
            let (client, name) = (self.client.clone(), name);
            async move {
                client
                    .create_index(
                        CreateIndexRequest::builder()
                            .collection_name(name)
                            .index_param(IndexParam::new().field_name(DOCUMENT_ID).index_type(IndexType::Inverted))
                            .sync(false)
                            .build()?,
                    )
                    .await
            }
        });
        Ok(())
    }

    /// The collection's vector dimension, the embedding model it records, and whether it
    /// was made with full-text search.
    fn describe_collection(&self) -> Result<Described> {
        let name = self.config.collection.clone();
        let described = self.call("describe_collection", {
            let client = self.client.clone();
            async move {
                client
                    .describe_collection(
                        milvus::v2::prelude::DescribeCollectionRequest::builder().collection_name(name).build()?,
                    )
                    .await
            }
        })?;
        let description = described.description();
        let dimension = description
            .get_schema()
            .get_fields()
            .iter()
            .find(|f| f.get_name() == "vector")
            .and_then(|f| f.get_type_params().get("dim").and_then(|d| d.parse().ok()))
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "Milvus collection {:?} was not made by ragctx (no `vector` field): use another --collection",
                    self.config.collection
                ))
            })?;
        Ok(Described {
            dimension,
            model: description.get_properties().get(MODEL_PROPERTY).cloned(),
            full_text: lexical::has_bm25(description.get_schema()),
        })
    }

    /// Whether the server takes filter templates: a query whose filter names a template
    /// value succeeds only where templating exists.
    fn probe_templates(&self) -> bool {
        let (client, name) = (self.client.clone(), self.config.collection.clone());
        self.call("template probe", async move {
            client
                .query(
                    QueryRequest::builder()
                        .collection_name(name)
                        .filter(format!("{ID} in {{probe}}"))
                        .filter_templates(HashMap::from([(
                            "probe".to_owned(),
                            FilterTemplateValue::StringArray(vec!["\u{0}ragctx-probe".to_owned()]),
                        )]))
                        .output_fields([ID])
                        .limit(1)
                        .build()?,
                )
                .await
        })
        .map(|r| r.results().rows().map(|rows| rows.count() == 0).unwrap_or(false))
        .unwrap_or(false)
    }

    fn filter(&self, ex: &ExclusionSet) -> Option<Filter> {
        filter::exclusion(ex, self.capabilities.templates)
    }

    /// One search call for `query`, `exclusion` filtered out: hits as Milvus returns them
    /// (BM25 scores made positive: Milvus Lite returns them negated).
    fn search_once(
        &self,
        query: Query<'_>,
        exclusion: &ExclusionSet,
        limit: usize,
        group_size: Option<usize>,
    ) -> Result<Vec<Hit>> {
        let builder = MilvusSearch::builder()
            .collection_name(self.config.collection.clone())
            .output_fields(FIELDS)
            .limit(limit as i64)
            .consistency_level(self.config.consistency.into());
        let mut builder = match query {
            Query::Dense(vector) => {
                let builder = builder
                    .vector_field("vector")
                    .vectors(SearchVectors::Float(vec![vector.to_vec()]))
                    .metric_type(MetricType::Cosine);
                match self.config.index {
                    IndexKind::Hnsw { ef, .. } => {
                        builder.extra_params(HashMap::from([("ef".to_owned(), ef.max(limit as u32).to_string())]))
                    }
                    IndexKind::Flat => builder,
                }
            }
            Query::Text(text) => builder
                .vector_field(lexical::SPARSE)
                .vectors(SearchVectors::EmbeddedText(vec![text.to_owned()]))
                .metric_type(MetricType::Bm25),
        };
        if let Some(Filter { expr, params }) = self.filter(exclusion) {
            builder = builder.filter(expr);
            if !params.is_empty() {
                builder = builder.filter_templates(
                    params.into_iter().map(|(k, v)| (k, FilterTemplateValue::StringArray(v))).collect(),
                );
            }
        }
        if let Some(g) = group_size {
            builder = builder.group_by_field(DOCUMENT_ID).group_size(g as i64).strict_group_size(false);
        }
        let response = self.read("search", || {
            let (client, builder) = (self.client.clone(), builder.clone());
            async move { client.search(builder.build()?).await }
        })?;
        let mut hits = Vec::new();
        for result in response.results().iter() {
            // Milvus before 2.4 does not name the key and score fields of a result; the SDK
            // then refuses to read its rows. The names are known: fill them in.
            let mut result = result.clone();
            if result.get_primary_field_name().is_empty() {
                result.set_primary_field_name(ID);
            }
            if result.get_score_field_name().is_empty() {
                result.set_score_field_name("score");
            }
            for row in result.rows().map_err(Error::storage)? {
                let score = match row.get("score").map_err(Error::storage)? {
                    ResultValue::Float(s) => s,
                    ResultValue::Double(s) => s as f32,
                    other => return Err(Error::Storage(format!("Milvus score of unexpected type: {other:?}"))),
                };
                let score = if matches!(query, Query::Text(_)) { score.abs() } else { score };
                hits.push(Hit { chunk: chunk_of(&row)?, score });
            }
        }
        Ok(hits)
    }

    /// Chunks (with vectors when `vectors`) for `ids`, keyed by id.
    fn fetch(&self, ids: &[ChunkId], vectors: bool) -> Result<HashMap<String, Fetched>> {
        let mut out = HashMap::new();
        let mut fields: Vec<&str> = FIELDS.to_vec();
        if vectors {
            fields.push("vector");
        }
        for batch in ids.chunks(BATCH) {
            let batch: Vec<&str> = batch.iter().map(|i| i.as_str()).collect();
            let response = self.query_ids(&batch, &fields, self.config.consistency.into())?;
            for row in response.results().rows().map_err(Error::storage)? {
                let chunk = chunk_of(&row)?;
                let vector = if vectors {
                    match row.get("vector").map_err(Error::storage)? {
                        ResultValue::FloatVector(v) => Some(v.to_vec()),
                        other => return Err(Error::Storage(format!("Milvus vector of unexpected type: {other:?}"))),
                    }
                } else {
                    None
                };
                out.insert(chunk.id.0.clone(), (chunk, vector));
            }
        }
        Ok(out)
    }

    /// Rows whose id is in `ids` (at most [`BATCH`]).
    fn query_ids(
        &self,
        ids: &[&str],
        fields: &[&str],
        consistency: ConsistencyLevel,
    ) -> Result<milvus::v2::prelude::QueryResponse> {
        self.query_in(ID, ids, fields, consistency, ids.len())
    }

    /// Up to `limit` rows whose `field` is in `values`, by a filter built like the exclusion
    /// filter: templated where the server can, escaped literals otherwise.
    fn query_in(
        &self,
        field: &str,
        values: &[&str],
        fields: &[&str],
        consistency: ConsistencyLevel,
        limit: usize,
    ) -> Result<milvus::v2::prelude::QueryResponse> {
        let mut builder = QueryRequest::builder()
            .collection_name(self.config.collection.clone())
            .output_fields(fields.iter().copied())
            .limit(limit as i64)
            .consistency_level(consistency);
        builder = if self.capabilities.templates {
            builder.filter(format!("{field} in {{values}}")).filter_templates(HashMap::from([(
                "values".to_owned(),
                FilterTemplateValue::StringArray(values.iter().map(|s| s.to_string()).collect()),
            )]))
        } else {
            builder.filter(filter::in_literal(field, values.iter().copied()))
        };
        let request = builder.build().map_err(Error::storage)?;
        self.read("query by id", || {
            let (client, request) = (self.client.clone(), request.clone());
            async move { client.query(request).await }
        })
    }

    /// Ids among `ids` already stored.
    fn existing(&self, ids: &[&str]) -> Result<HashSet<String>> {
        let mut out = HashSet::new();
        for batch in ids.chunks(BATCH) {
            let response = self.query_ids(batch, &[ID], ConsistencyLevel::Strong)?;
            for row in response.results().rows().map_err(Error::storage)? {
                out.insert(string(&row, ID)?);
            }
        }
        Ok(out)
    }

    /// Hits for `query`, best first: `limit` documents (each within its quota) when grouped,
    /// else `limit` chunks; with the searches it took.
    fn grouped_or_not(
        &self,
        query: Query<'_>,
        limit: usize,
        exclusion: &ExclusionSet,
        grouping: &Option<Grouping>,
    ) -> Result<(Vec<Hit>, u32)> {
        let (mut hits, rounds) = match grouping {
            Some(g) => self.search_grouped(query, limit, exclusion, g)?,
            None => {
                let hits = self.search_once(query, exclusion, limit, None)?;
                (hits.into_iter().filter(|h| !exclusion.excludes(&h.chunk.id, &h.chunk.document_id)).collect(), 1)
            }
        };
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok((hits, rounds))
    }

    /// Grouped search, completed here when the server returned fewer groups than asked.
    fn search_grouped(
        &self,
        query: Query<'_>,
        limit: usize,
        exclusion: &ExclusionSet,
        grouping: &Grouping,
    ) -> Result<(Vec<Hit>, u32)> {
        let largest_quota = grouping.quotas.values().copied().max().unwrap_or(0);
        let group_size = grouping.group_size.max(largest_quota).clamp(1, MAX_GROUP_SIZE);
        let mut hits: Vec<Hit> = Vec::new();
        let mut docs: Vec<DocumentId> = Vec::new();
        let mut exclusion = exclusion.clone();
        let mut rounds = 0;
        while docs.len() < limit && rounds < MAX_ROUNDS {
            rounds += 1;
            let want = limit - docs.len();
            let got = if self.capabilities.group_by {
                self.search_once(query, &exclusion, want, Some(group_size))?
            } else {
                // No server-side grouping (Milvus < 2.4 ignores it): over-fetch, group here.
                self.search_once(query, &exclusion, (want * group_size).min(MAX_TOPK), None)?
            };

            let mut new_docs = 0;
            let mut per_doc: HashMap<DocumentId, usize> = HashMap::new();
            for hit in got {
                let doc = hit.chunk.document_id.clone();
                if exclusion.documents.contains(&doc) {
                    continue; // a server that ignored the filter must not weaken it
                }
                let n = per_doc.entry(doc.clone()).or_default();
                if *n >= grouping.quota(doc.as_str(), hit.chunk.weight) {
                    continue;
                }
                if *n == 0 {
                    if docs.len() >= limit {
                        continue;
                    }
                    docs.push(doc.clone());
                    new_docs += 1;
                }
                *n += 1;
                hits.push(hit);
            }
            if new_docs == 0 {
                break; // nothing more to give
            }
            exclusion.documents.extend(per_doc.into_keys());
        }
        Ok((hits, rounds))
    }
}

/// Whether a server of this version groups search results: every Milvus from 2.4 on, and
/// Milvus Lite (`milvus_lite-3.x`), which reports its own version.
fn groups_by(version: &str) -> bool {
    let v = version.trim_start_matches('v');
    if !v.starts_with(|c: char| c.is_ascii_digit()) {
        return true;
    }
    let mut parts = v.split(|c: char| !c.is_ascii_digit()).map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (2, 4)
}

/// Whether a refusal means "load the collection first" (Milvus 2.x and Lite wordings).
fn needs_load(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("call load()") || m.contains("not loaded") || m.contains("state 'released'")
}

/// Whether the server answered and refused (bad request, schema) rather than failed to answer.
fn is_rejection(e: &milvus::v2::error::Error) -> bool {
    use milvus::v2::error::Error as E;
    matches!(e, E::Server(_) | E::Conversion(_) | E::Validation(_))
}

enum CallError {
    Sdk(Box<milvus::v2::error::Error>),
    Timeout(Duration),
    Lost,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Sdk(e) => write!(f, "{e}"),
            CallError::Timeout(d) => write!(f, "no answer within {:.1} s", d.as_secs_f64()),
            CallError::Lost => write!(f, "the call was dropped"),
        }
    }
}

/// Runs `fut` on `runtime` from any thread (a Tokio worker's included: the future runs on
/// the store's own runtime and the caller waits on a channel, never nesting runtimes).
fn run<T, F>(runtime: &tokio::runtime::Runtime, deadline: Duration, fut: F) -> std::result::Result<T, CallError>
where
    T: Send + 'static,
    F: Future<Output = milvus::v2::error::Result<T>> + Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime.spawn(async move {
        let out = match tokio::time::timeout(deadline, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(CallError::Sdk(Box::new(e))),
            Err(_) => Err(CallError::Timeout(deadline)),
        };
        let _ = tx.send(out);
    });
    rx.recv().unwrap_or(Err(CallError::Lost))
}

fn string(row: &milvus::v2::prelude::ResultRow<'_>, field: &str) -> Result<String> {
    match row.get(field).map_err(Error::storage)? {
        ResultValue::String(s) => Ok(s.to_owned()),
        other => Err(Error::Storage(format!("Milvus field {field} of unexpected type: {other:?}"))),
    }
}

fn int(row: &milvus::v2::prelude::ResultRow<'_>, field: &str) -> Result<i64> {
    match row.get(field).map_err(Error::storage)? {
        ResultValue::Int64(v) => Ok(v),
        ResultValue::Int32(v) => Ok(v as i64),
        other => Err(Error::Storage(format!("Milvus field {field} of unexpected type: {other:?}"))),
    }
}

fn chunk_of(row: &milvus::v2::prelude::ResultRow<'_>) -> Result<Chunk> {
    Ok(Chunk {
        id: ChunkId(string(row, ID)?),
        document_id: DocumentId(string(row, DOCUMENT_ID)?),
        title: string(row, "title")?,
        text: string(row, "text")?,
        ordinal: unopt(int(row, "ordinal")?),
        start: unopt(int(row, "start")?),
        end: unopt(int(row, "end")?),
        weight: match row.get("weight").map_err(Error::storage)? {
            ResultValue::Float(w) => w,
            ResultValue::Double(w) => w as f32,
            other => return Err(Error::Storage(format!("Milvus field weight of unexpected type: {other:?}"))),
        },
        tokens: unopt(int(row, "tokens")?),
    })
}

impl VectorStore for MilvusVectorStore {
    fn dimension(&self) -> usize {
        self.dimension
    }

    fn upsert(&self, chunks: &[EmbeddedChunk]) -> Result<usize> {
        // Check the whole batch first: a batch Milvus would refuse half-way is refused whole.
        for c in chunks {
            if c.vector.len() != self.dimension {
                return Err(Error::WrongDimension { expected: self.dimension, got: c.vector.len() });
            }
            for (field, value) in [
                ("id", c.chunk.id.as_str()),
                ("document_id", c.chunk.document_id.as_str()),
                ("title", c.chunk.title.as_str()),
                ("text", c.chunk.text.as_str()),
            ] {
                if value.len() > MAX_VARCHAR {
                    return Err(Error::InvalidInput(format!(
                        "chunk {:?}: {field} is {} bytes, over Milvus's VarChar limit of {MAX_VARCHAR}",
                        c.chunk.id.as_str(),
                        value.len()
                    )));
                }
            }
            if c.chunk.id.as_str().is_empty() {
                return Err(Error::InvalidInput("chunk id is empty".into()));
            }
        }
        let ids: Vec<&str> = chunks.iter().map(|c| c.chunk.id.as_str()).collect();
        let existing = self.existing(&ids)?;
        let mut seen = HashSet::new();
        let new = ids.iter().filter(|id| !existing.contains(**id) && seen.insert(**id)).count();
        for batch in chunks.chunks(BATCH) {
            let rows: Vec<serde_json::Value> = batch
                .iter()
                .map(|c| {
                    let mut row = serde_json::json!({
                        ID: c.chunk.id.as_str(),
                        DOCUMENT_ID: c.chunk.document_id.as_str(),
                        "title": c.chunk.title,
                        "text": c.chunk.text,
                        "ordinal": opt(c.chunk.ordinal),
                        "start": opt(c.chunk.start),
                        "end": opt(c.chunk.end),
                        "tokens": opt(c.chunk.tokens),
                        "weight": c.chunk.weight,
                        "vector": c.vector,
                    });
                    if self.capabilities.full_text {
                        row[lexical::TEXT] = lexical::text_of(&c.chunk).into();
                    }
                    row
                })
                .collect();
            let request = UpsertRequest::builder()
                .insert(
                    InsertRequest::builder()
                        .collection_name(self.config.collection.clone())
                        .rows(rows)
                        .build()
                        .map_err(Error::storage)?,
                )
                .build()
                .map_err(Error::storage)?;
            self.call("upsert", {
                let client = self.client.clone();
                async move { client.upsert(request).await }
            })?;
        }
        Ok(new)
    }

    fn replace_documents(&self, documents: &[DocumentId], chunks: &[EmbeddedChunk]) -> Result<Replaced> {
        self.replace(documents, chunks)
    }

    fn documents(&self) -> Result<Vec<DocumentSummary>> {
        self.list()
    }

    fn search(&self, request: &SearchRequest) -> Result<SearchOutcome> {
        if request.vector.len() != self.dimension {
            return Err(Error::WrongDimension { expected: self.dimension, got: request.vector.len() });
        }
        if request.limit == 0 {
            return Ok(SearchOutcome { hits: vec![], path: SearchPath::Remote, rounds: 0, reason: "limit 0".into() });
        }
        let (hits, rounds) =
            self.grouped_or_not(Query::Dense(&request.vector), request.limit, &request.exclusion, &request.grouping)?;
        let index = match self.config.index {
            IndexKind::Flat => "FLAT".to_owned(),
            IndexKind::Hnsw { ef, .. } => format!("HNSW ef {ef}"),
        };
        let reason = format!(
            "Milvus {} ({index}), {} filter, grouped {}{}",
            self.capabilities.version,
            if self.capabilities.templates { "templated" } else { "escaped literal" },
            if self.capabilities.group_by { "by the server" } else { "here" },
            if rounds > 1 { format!(", {} completion searches for missing groups", rounds - 1) } else { String::new() }
        );
        Ok(SearchOutcome { hits, path: SearchPath::Remote, rounds, reason })
    }

    fn search_lexical(&self, request: &LexicalRequest) -> Result<Option<SearchOutcome>> {
        self.full_text_search(request)
    }

    /// The server builds the BM25 side as rows arrive: nothing to prepare; the rows it
    /// covers where the collection has it.
    fn prepare_lexical(&self) -> Result<Option<usize>> {
        if self.capabilities.full_text {
            Ok(Some(self.len()?))
        } else {
            Ok(None)
        }
    }

    fn lexical_missing(&self) -> String {
        lexical::missing(&self.config, &self.capabilities)
    }

    fn chunks(&self, ids: &[ChunkId]) -> Result<Vec<Chunk>> {
        let mut found = self.fetch(ids, false)?;
        Ok(ids.iter().filter_map(|id| found.remove(id.as_str()).map(|(c, _)| c)).collect())
    }

    fn vectors(&self, ids: &[ChunkId]) -> Result<Vec<Option<Vec<f32>>>> {
        let mut found = self.fetch(ids, true)?;
        Ok(ids.iter().map(|id| found.remove(id.as_str()).and_then(|(_, v)| v)).collect())
    }

    fn len(&self) -> Result<usize> {
        self.count(self.config.consistency.into())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn grouping_is_known_by_version() {
        assert!(!super::groups_by("v2.3.5-lite"));
        assert!(!super::groups_by("2.3.13"));
        assert!(super::groups_by("v2.4.0"));
        assert!(super::groups_by("v2.5.10"));
        assert!(super::groups_by("milvus_lite-3.2.2"));
    }
}
