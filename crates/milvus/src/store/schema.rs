//! The collection: made with its schema and indexes (the model recorded, full-text where
//! the server has it, the metadata fields), checked when it exists, counted, described.
//!
//! A collection made before the metadata fields (`metadata`, `metadata_types`, `tenant`) is
//! made again while it is empty and a command that embeds opens it; one that holds chunks is
//! kept and served without them: searches without a metadata filter (or filtering on
//! `document_id` only) work, tenants are told apart by id (`default`: no U+001F in the id;
//! `t`: ids starting `t` + U+001F), and a filter on a metadata key or a chunk carrying
//! metadata is refused with the way out (a new `--collection`) — never ignored.

use super::*;

/// What `describe_collection` tells of a collection.
pub(super) struct Described {
    pub(super) dimension: usize,
    pub(super) model: Option<String>,
    pub(super) full_text: bool,
    /// It has the metadata fields.
    pub(super) metadata: bool,
    /// Its `tenant` field is the partition key.
    pub(super) partition_key: bool,
}

/// What a collection was made with.
#[derive(Clone, Copy)]
pub(super) struct Made {
    pub(super) full_text: bool,
    pub(super) metadata: bool,
    pub(super) partition_key: bool,
}

/// Whether a server of this version upserts a row into the partition of its partition key:
/// every Milvus from 2.4 on, and Milvus Lite (`milvus_lite-3.x`). Milvus 2.3's upsert
/// computed the partition from the wrong field (milvus-io/milvus#30607, fixed by #30772 in
/// 2.4; the 2.3 backport #30773 came after 2.3.5): its rows land in arbitrary partitions,
/// and a search with `tenant == "t"`, which the server confines to the partition `t` hashes
/// to, misses most of them. Measured on 2.3.5: 302 chunks upserted, all of tenant
/// `default`, and `tenant == "default"` counted 4 of them (a plain insert places them
/// right, but ragctx writes by upsert). So on 2.3 (every 2.3, to be safe) `tenant` is made
/// a plain field: the same predicate, evaluated row by row.
pub(super) fn upserts_by_partition_key(version: &str) -> bool {
    groups_by(version)
}

/// The collection property that records the model of its vectors (a property, not the
/// description: Milvus Lite keeps properties but drops descriptions).
const MODEL_PROPERTY: &str = "ragctx.embedding_model";

impl MilvusVectorStore {
    pub(super) fn ensure_collection(&mut self) -> Result<()> {
        let name = self.config.collection.clone();
        let exists = self.call("has_collection", {
            let (client, name) = (self.client.clone(), name.clone());
            async move { client.has_collection(HasCollectionRequest::builder().collection_name(name).build()?).await }
        })?;
        let made = if !exists.exists() {
            self.create_collection()?
        } else {
            let Described { dimension: got, model: stored, full_text, metadata, partition_key } =
                self.describe_collection()?;
            let made = Made { full_text, metadata, partition_key };
            if got != self.dimension {
                return Err(Error::InvalidInput(format!(
                    "Milvus collection {name:?} holds {got}-d vectors, the model makes {}-d: use another --collection",
                    self.dimension
                )));
            }
            if let (Some(stored), Some(configured)) = (&stored, &self.config.model) {
                if stored != configured {
                    return Err(Error::ModelMismatch { stored: stored.clone(), configured: configured.clone() });
                }
            }
            // Made by a command that embeds nothing, before the model was recorded, before
            // full-text search on a server that has it, before metadata, or with a partition
            // key on a server whose upsert misplaces rows by it: while still empty, made again
            // as it is made now (nothing to lose; an altered property does not survive a
            // restart of Milvus 2.3.5, #30144). A command that embeds nothing leaves it.
            let outdated = stored.is_none()
                || (!full_text && lexical::by_version(&self.capabilities.version))
                || !metadata
                || (partition_key && !upserts_by_partition_key(&self.capabilities.version));
            match &self.config.model {
                Some(configured) if outdated => {
                    self.load()?;
                    if self.count_strong()? == 0 {
                        self.drop_collection()?;
                        self.create_collection()?
                    } else if stored.is_none() && !self.config.unrecorded_is_model {
                        return Err(Error::ModelMismatch {
                            stored: "unrecorded (the collection predates recorded models: the in-process fp32 model)"
                                .into(),
                            configured: configured.clone(),
                        });
                    } else {
                        made
                    }
                }
                _ => made,
            }
        };
        self.capabilities.full_text = made.full_text;
        self.capabilities.metadata = made.metadata;
        self.capabilities.partition_key = made.partition_key;
        self.load()
    }

    /// Rows, read with strong consistency (another process's recent inserts included).
    pub(super) fn count_strong(&self) -> Result<usize> {
        self.count(ConsistencyLevel::Strong)
    }

    /// Rows, read at `level`.
    pub(super) fn count(&self, level: ConsistencyLevel) -> Result<usize> {
        self.count_where(level, None)
    }

    /// Rows that `expr` selects (all without one), read at `level`.
    pub(super) fn count_where(&self, level: ConsistencyLevel, expr: Option<String>) -> Result<usize> {
        let mut builder = QueryRequest::builder();
        builder = builder.collection_name(self.config.collection.clone());
        if let Some(e) = expr {
            builder = builder.filter(e);
        }
        let request = builder.output_fields(["count(*)"]).consistency_level(level).build().map_err(Error::storage)?;
        let response = self.read("count", || {
            let (client, request) = (self.client.clone(), request.clone());
            async move { client.query(request).await }
        })?;
        match response.results().rows().map_err(Error::storage)?.next() {
            Some(row) => Ok(int(&row, "count(*)")? as usize),
            None => Ok(0),
        }
    }

    pub(super) fn drop_collection(&self) -> Result<()> {
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

    /// Makes the collection, with full-text search where the server has it, and the metadata
    /// fields: `metadata` and `metadata_types` (JSON) and `tenant` (VarChar, the partition
    /// key: a tenant's search reads only its partitions; Milvus has partition keys from 2.2.9
    /// and Milvus Lite 3.2.2 has them, measured — but only where the server upserts by it,
    /// [`upserts_by_partition_key`]; elsewhere a plain VarChar field).
    pub(super) fn create_collection(&self) -> Result<Made> {
        let partition_key = upserts_by_partition_key(&self.capabilities.version);
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
            )
            .add_field(FieldSchema::new().name(METADATA).data_type(DataType::Json))
            .add_field(FieldSchema::new().name(METADATA_TYPES).data_type(DataType::Json))
            .add_field(varchar(TENANT, MAX_VARCHAR as u32).partition_key(partition_key));
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
        self.create_index("create_index (vector)", vector_index)?;
        if full_text {
            self.create_index("create_index (BM25)", lexical::index())?;
        }
        // A scalar index on document_id speeds up the exclusion filter; a server without
        // inverted indexes still filters correctly without it.
        let _ = self.create_index(
            "create_index (document_id)",
            IndexParam::new().field_name(DOCUMENT_ID).index_type(IndexType::Inverted),
        );
        Ok(Made { full_text, metadata: true, partition_key })
    }

    /// Asks for an index on the collection (built by the server in the background).
    fn create_index(&self, what: &str, param: IndexParam) -> Result<()> {
        let (client, name) = (self.client.clone(), self.config.collection.clone());
        self.call(what, async move {
            client
                .create_index(
                    CreateIndexRequest::builder().collection_name(name).index_param(param).sync(false).build()?,
                )
                .await
        })
        .map(|_| ())
    }

    /// The collection's vector dimension, the embedding model it records, and whether it
    /// was made with full-text search.
    pub(super) fn describe_collection(&self) -> Result<Described> {
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
        let fields = description.get_schema().get_fields();
        let has = |name: &str, kind: DataType| fields.iter().any(|f| f.get_name() == name && f.get_data_type() == kind);
        Ok(Described {
            metadata: has(METADATA, DataType::Json)
                && has(METADATA_TYPES, DataType::Json)
                && has(TENANT, DataType::VarChar),
            partition_key: fields.iter().any(|f| f.get_name() == TENANT && f.is_partition_key()),
            dimension,
            model: description.get_properties().get(MODEL_PROPERTY).cloned(),
            full_text: lexical::has_bm25(description.get_schema()),
        })
    }

    /// Whether the server takes a `like` pattern that starts with `%`: Milvus 2.3.5 refuses
    /// one ("only prefix pattern match like ab% and equal match like ab(no wildcards) are
    /// supported", measured); Milvus Lite 3.2.2 takes it.
    pub(super) fn probe_infix_like(&self) -> bool {
        let (client, name) = (self.client.clone(), self.config.collection.clone());
        self.call("like probe", async move {
            client
                .query(
                    QueryRequest::builder()
                        .collection_name(name)
                        .filter(format!("{ID} like {}", filter::quote(&format!("%{}%", ragctx_core::TENANT_SEPARATOR))))
                        .output_fields([ID])
                        .limit(1)
                        .build()?,
                )
                .await
        })
        .is_ok()
    }

    /// Whether the server takes filter templates: a query whose filter names a template
    /// value succeeds only where templating exists.
    pub(super) fn probe_templates(&self) -> bool {
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
}

#[cfg(test)]
mod tests {
    #[test]
    fn partition_keys_only_where_upsert_places_rows_by_them() {
        assert!(!super::upserts_by_partition_key("v2.3.5-lite"));
        assert!(!super::upserts_by_partition_key("2.3.21"));
        assert!(super::upserts_by_partition_key("v2.4.0"));
        assert!(super::upserts_by_partition_key("milvus_lite-3.2.2"));
    }
}
