//! Full-text (BM25) search done by Milvus itself: a collection made on a server that has it
//! (Milvus 2.5 on, Milvus Lite 3) carries title and text in an analysed VarChar field and a
//! BM25 function that turns it into a sparse vector; searches send the question as text.
//! Exclusion, metadata filter, tenant and grouping are those of the vector search (the same
//! predicate, the same server-side grouping and completion rounds). Elsewhere — older servers, or a collection
//! made before — the store answers `None` and says why, and the turn searches dense: never
//! a client-side scan.

use super::{Capabilities, MilvusConfig, MilvusVectorStore, Query, Scope, MAX_VARCHAR};
use milvus::v2::prelude::{
    CollectionSchema, DataType, FieldSchema, Function, FunctionType, IndexParam, IndexType, MetricType,
};
use ragctx_core::{Chunk, LexicalRequest, MilvusKind, Result, SearchOutcome, SearchPath, SearchReason};

/// The analysed field: title and text, as the embedded lexical index reads them.
pub(super) const TEXT: &str = "lexical_text";
/// The BM25 function's output.
pub(super) const SPARSE: &str = "lexical_sparse";
const FUNCTION: &str = "ragctx_bm25";

/// Whether a server of this version has BM25 functions: Milvus 2.5 and later, and Milvus
/// Lite from 3 (`milvus_lite-3.2.2`; Lite 2.4 has none).
pub fn by_version(version: &str) -> bool {
    let lite = version.starts_with("milvus_lite");
    let digits = version.trim_start_matches(|c: char| !c.is_ascii_digit());
    let mut parts = digits.split(|c: char| !c.is_ascii_digit()).map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if lite {
        major >= 3
    } else {
        (major, minor) >= (2, 5)
    }
}

/// `schema` with the analysed text field, its sparse vector and the BM25 function between
/// them. The analyser is asked for what Milvus's `english` one does (Lite does not know it
/// by name): standard tokens, lower case, English stems and stop words. What the server does
/// with it is its own: Milvus Lite 3.2.2 lower-cases but does not stem (measured), and the
/// standard tokenizer does not make the embedded index's CJK bigrams, so Chinese text
/// searches better on the embedded store.
pub(super) fn with_bm25(schema: CollectionSchema) -> CollectionSchema {
    schema
        .add_field(
            FieldSchema::new()
                .name(TEXT)
                .data_type(DataType::VarChar)
                .max_length(MAX_VARCHAR as u32)
                .enable_analyzer(true)
                .analyzer_params(serde_json::json!({
                    "tokenizer": "standard",
                    "filter": ["lowercase", {"type": "stemmer", "language": "english"}, {"type": "stop", "stop_words": ["_english_"]}]
                })),
        )
        .add_field(FieldSchema::new().name(SPARSE).data_type(DataType::SparseFloatVector))
        .add_function(
            Function::new()
                .name(FUNCTION)
                .function_type(FunctionType::Bm25)
                .input_fields([TEXT])
                .output_fields([SPARSE]),
        )
}

/// The sparse field's index.
pub(super) fn index() -> IndexParam {
    IndexParam::new().field_name(SPARSE).index_type(IndexType::SparseInvertedIndex).metric_type(MetricType::Bm25)
}

/// Whether a collection's schema has the BM25 function this store writes.
pub(super) fn has_bm25(schema: &CollectionSchema) -> bool {
    schema
        .get_functions()
        .iter()
        .any(|f| f.get_function_type() == FunctionType::Bm25 && f.get_output_fields().iter().any(|o| o == SPARSE))
}

/// What the analysed field holds for `chunk`: title and text, cut to Milvus's VarChar
/// limit on a character boundary (each alone is within it; both together may not be).
pub(super) fn text_of(chunk: &Chunk) -> String {
    let mut s = String::with_capacity(chunk.title.len() + 1 + chunk.text.len());
    s.push_str(&chunk.title);
    s.push('\n');
    s.push_str(&chunk.text);
    if s.len() > MAX_VARCHAR {
        let mut end = MAX_VARCHAR;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// Why this store answers no lexical search.
pub(super) fn missing(config: &MilvusConfig, capabilities: &Capabilities) -> String {
    if capabilities.full_text {
        format!("Milvus collection {:?} has full-text search", config.collection)
    } else if by_version(&capabilities.version) {
        format!(
            "Milvus collection {:?} was made without full-text search (before ragctx used it): \
             ingest into a new --collection to get it",
            config.collection
        )
    } else {
        format!("Milvus {} has no full-text search (BM25 functions came in 2.5)", capabilities.version)
    }
}

impl MilvusVectorStore {
    /// BM25 search by the server; `None` where this collection has none.
    pub(super) fn full_text_search(&self, request: &LexicalRequest) -> Result<Option<SearchOutcome>> {
        if !self.capabilities.full_text {
            return Ok(None);
        }
        if request.limit == 0 || request.query.trim().is_empty() {
            return Ok(Some(SearchOutcome {
                hits: vec![],
                path: SearchPath::Lexical,
                rounds: 0,
                reason: SearchReason::NoTerms,
            }));
        }
        let scope = Scope { filter: &request.filter, tenant: request.tenant.as_deref() };
        let (hits, rounds) = self.grouped_or_not(
            Query::Text(&request.query),
            request.limit,
            &request.exclusion,
            &request.grouping,
            scope,
        )?;
        let reason = SearchReason::Milvus {
            version: self.capabilities.version.clone(),
            kind: MilvusKind::FullText,
            templated: self.capabilities.templates,
            grouped_by_server: self.capabilities.group_by,
            completions: rounds.saturating_sub(1),
        };
        Ok(Some(SearchOutcome { hits, path: SearchPath::Lexical, rounds, reason }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_text_is_known_by_version() {
        assert!(by_version("milvus_lite-3.2.2"));
        assert!(!by_version("milvus_lite-2.4.11"));
        assert!(!by_version("v2.3.5-lite"));
        assert!(!by_version("2.4.13"));
        assert!(by_version("v2.5.0"));
        assert!(by_version("v2.6.1"));
        assert!(by_version("3.0.0"));
    }

    #[test]
    fn the_analysed_text_is_title_and_text_within_the_varchar_limit() {
        assert_eq!(text_of(&Chunk::new("a#0", "a", "Router", "reset it")), "Router\nreset it");
        let long = Chunk::new("a#1", "a", &"t".repeat(40_000), &"é".repeat(20_000));
        let s = text_of(&long);
        assert!(s.len() <= MAX_VARCHAR && s.len() > MAX_VARCHAR - 2, "{}", s.len());
    }
}
