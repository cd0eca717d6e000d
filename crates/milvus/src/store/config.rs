//! What a store is told: where Milvus is, the collection, the index, consistency; and what
//! the server turned out to support.

use super::*;

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
    /// This collection has the metadata fields (`metadata`, `metadata_types`, `tenant`):
    /// chunks keep their metadata, filters on it and tenant scopes are written on these
    /// fields. A collection made before them serves unfiltered and `document_id` searches,
    /// scopes tenants by id, and refuses metadata filters and chunks carrying metadata.
    pub metadata: bool,
    /// This collection's `tenant` field is its partition key (a tenant's search reads only
    /// its partitions). New collections get one only where the server's upsert puts rows in
    /// their key's partition (Milvus ≥ 2.4 and Milvus Lite, not 2.3); elsewhere `tenant` is a
    /// plain field, filtered row by row, with the same results.
    pub partition_key: bool,
}
