//! The store itself (feature `sdk`, on by default).

mod codec;
mod config;
mod documents;
mod lexical;
mod runtime;
mod schema;
mod search;

pub use config::{Capabilities, Consistency, IndexKind, MilvusConfig};
pub use lexical::by_version as full_text_by_version;

use codec::{chunk_of, int, opt, string};
use runtime::{run, unavailable};
use search::{groups_by, Query, Scope};

use crate::filter::{self, Filter, DOCUMENT_ID, ID, METADATA, METADATA_TYPES, TENANT};
use milvus::v2::prelude::{
    ClientV2, CollectionSchema, ConnectConfig, ConsistencyLevel, CreateCollectionRequest, CreateIndexRequest, DataType,
    FieldSchema, FilterTemplateValue, GetServerVersionRequest, HasCollectionRequest, IndexParam, IndexType,
    InsertRequest, LoadCollectionRequest, MetricType, QueryRequest, ResultValue, RetryConfig,
    SearchRequest as MilvusSearch, SearchVectors, TelemetryConfig, UpsertRequest,
};
use ragctx_core::{
    Chunk, ChunkId, DocumentId, DocumentSummary, EmbeddedChunk, Error, ExclusionSet, Grouping, Hit, LexicalRequest,
    Metadata, MilvusKind, Replaced, Result, SearchOutcome, SearchPath, SearchReason, SearchRequest, VectorStore,
};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::time::Duration;

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
/// Fields a search or fetch returns (all but the vector), `metadata` aside.
const FIELDS: [&str; 9] = [ID, DOCUMENT_ID, "title", "text", "ordinal", "start", "end", "weight", "tokens"];
/// Milvus's largest JSON value, in bytes.
const MAX_JSON: usize = 65_536;

pub struct MilvusVectorStore {
    runtime: tokio::runtime::Runtime,
    client: ClientV2,
    config: MilvusConfig,
    dimension: usize,
    capabilities: Capabilities,
    /// Whether `like` takes a pattern with a leading `%` (Milvus 2.3 takes prefixes only):
    /// how the `default` tenant is told apart by id on a collection without the `tenant` field.
    infix_like: bool,
    /// Tenants other than `default` known to hold chunks of a collection without the
    /// `tenant` field, where the server has no infix `like`: a `default` search excludes
    /// their id ranges (see [`filter::TenantScope::DefaultBesides`]).
    other_tenants: std::sync::Mutex<std::collections::BTreeSet<String>>,
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
            capabilities: Capabilities {
                group_by: groups_by(&version),
                version,
                templates: false,
                full_text: false,
                metadata: false,
                partition_key: false,
            },
            infix_like: true,
            other_tenants: Default::default(),
        };
        store.ensure_collection()?;
        store.capabilities.templates = store.probe_templates();
        if !store.capabilities.metadata {
            store.infix_like = store.probe_infix_like();
        }
        Ok(store)
    }

    pub fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    pub fn config(&self) -> &MilvusConfig {
        &self.config
    }
}

impl VectorStore for MilvusVectorStore {
    fn dimension(&self) -> usize {
        self.dimension
    }

    fn upsert(&self, chunks: &[EmbeddedChunk]) -> Result<usize> {
        // Check the whole batch first: a batch Milvus would refuse half-way is refused whole.
        ragctx_core::check_vectors(self.dimension, chunks)?;
        for c in chunks {
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
            if !c.chunk.metadata.is_empty() && !self.capabilities.metadata {
                return Err(Error::InvalidInput(format!(
                    "chunk {:?} carries metadata, but Milvus collection {:?} predates metadata: \
                     ingest into a new --collection to keep it",
                    c.chunk.id.as_str(),
                    self.config.collection
                )));
            }
        }
        let metadata: Vec<Option<(serde_json::Value, serde_json::Value)>> = if self.capabilities.metadata {
            chunks.iter().map(|c| codec::metadata_row(&c.chunk).map(Some)).collect::<Result<_>>()?
        } else {
            vec![None; chunks.len()]
        };
        if !self.capabilities.metadata && !self.infix_like {
            self.know_tenants(chunks.iter().map(|c| ragctx_core::tenant_of(c.chunk.id.as_str())));
        }
        let ids: Vec<&str> = chunks.iter().map(|c| c.chunk.id.as_str()).collect();
        let existing = self.existing(&ids)?;
        let mut seen = HashSet::new();
        let new = ids.iter().filter(|id| !existing.contains(**id) && seen.insert(**id)).count();
        for (batch, metadata) in chunks.chunks(BATCH).zip(metadata.chunks(BATCH)) {
            let rows: Vec<serde_json::Value> = batch
                .iter()
                .zip(metadata)
                .map(|(c, metadata)| {
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
                    if let Some((values, types)) = metadata {
                        row[METADATA] = values.clone();
                        row[METADATA_TYPES] = types.clone();
                        row[TENANT] = ragctx_core::tenant_of(c.chunk.id.as_str()).into();
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
            return Ok(SearchOutcome {
                hits: vec![],
                path: SearchPath::Remote,
                rounds: 0,
                reason: SearchReason::LimitZero,
            });
        }
        let scope = Scope { filter: &request.filter, tenant: request.tenant.as_deref() };
        let (hits, rounds) = self.grouped_or_not(
            Query::Dense(&request.vector),
            request.limit,
            &request.exclusion,
            &request.grouping,
            scope,
        )?;
        let index = match self.config.index {
            IndexKind::Flat => "FLAT".to_owned(),
            IndexKind::Hnsw { ef, .. } => format!("HNSW ef {ef}"),
        };
        let reason = SearchReason::Milvus {
            version: self.capabilities.version.clone(),
            kind: MilvusKind::Dense(index),
            templated: self.capabilities.templates,
            grouped_by_server: self.capabilities.group_by,
            completions: rounds.saturating_sub(1),
        };
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

    /// Counted by the server on the `tenant` field (a range, which every version reads row by
    /// row, whatever partition a row landed in); collections made before it list documents.
    fn tenant_len(&self, tenant: &str) -> Result<usize> {
        if !self.capabilities.metadata {
            let docs = self.documents()?;
            return Ok(docs
                .iter()
                .filter(|d| ragctx_core::tenant_of(d.document_id.as_str()) == tenant)
                .map(|d| d.chunks)
                .sum());
        }
        let t = filter::quote(tenant);
        let expr = format!("{field} >= {t} and {field} <= {t}", field = filter::TENANT);
        self.count_where(self.config.consistency.into(), Some(expr))
    }
}
