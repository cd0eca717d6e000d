//! `/v1/documents`: ingest (a JSON array of chunks or JSONL, read as every ingest of
//! records is), the list of a tenant's documents, and a document's delete.

use crate::auth::Role;
use crate::{blocking, body, caller, ApiError, AppState, ErrorBody};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use std::sync::Arc;

#[utoipa::path(post, path = "/v1/documents", params(("append" = Option<bool>, Query, description = "true: upsert by id and keep a document's other chunks; default: replace each document whole")),
    request_body(content = serde_json::Value, description = "a JSON array of chunks or JSONL: _id, text, document_id?, title?, start?, end?, ordinal?, weight?"),
    responses((status = 200, description = "chunks ingested: new, updated, removed", body = serde_json::Value),
              (status = 400, description = "invalid chunk (line named)", body = ErrorBody), (status = 413, description = "body over the limit", body = ErrorBody)))]
/// `POST /v1/documents`: a JSON array of chunks or JSONL, validated as `ragctx ingest`
/// validates (all or nothing), embedded, and each document replaced whole (`?append=true`:
/// upserted by id).
pub(crate) async fn documents(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
    b: Result<Bytes, BytesRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let who = caller(&state, &headers)?;
    who.require(Role::Write, "ingest documents")?;
    // `?append=true`: upsert by id, keeping a document's other chunks (a document sent in
    // several requests); by default each document is replaced whole.
    let append = match query.as_deref() {
        None | Some("") | Some("append=false") => false,
        Some("append=true") => true,
        Some(q) => return Err(ApiError::bad_request(format!("unknown query {q:?}: use append=true or nothing"))),
    };
    // Read as every ingest of records reads them (Python's `ingest_records` too).
    let chunks = ragctx_ingest::read_records("request body", &body(b)?).map_err(ragctx_core::Error::from)?;
    let engine = state.unscoped.scoped(&who.tenant);
    // The one ingest path, as `ragctx ingest` takes it: the embedding cache, each document
    // replaced whole (or upserted with `append`), the lexical index built beside.
    // The cache as the caller's tenant sees it: a tenant's report and timing never tell it
    // which texts another tenant ingested.
    let cache = state.embedding_cache.clone().map(|c| ragctx_engine::ScopedEmbeddingCache::new(c, who.tenant.clone()));
    let report = blocking(state.ingest_timeout, move || {
        let cache = cache.as_ref().map(|c| c as &dyn ragctx_core::EmbeddingCache);
        engine.ingest(chunks, append, cache, &ragctx_engine::ingest::Logged)
    })
    .await?;
    // The ingest report; a request reads no files.
    let r = report;
    Ok(Json(serde_json::json!({
        "chunks": r.chunks, "documents": r.documents, "new": r.new, "updated": r.updated, "removed": r.removed,
        "embedded": r.embedded, "cached": r.cached, "stored": r.stored, "lexical": r.lexical, "seconds": r.seconds,
    })))
}

#[utoipa::path(get, path = "/v1/documents", responses((status = 200, description = "every stored document: document_id, title, chunks", body = serde_json::Value)))]
/// `GET /v1/documents`: every stored document with its chunk count and title.
pub(crate) async fn list_documents(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Json<Vec<ragctx_core::DocumentSummary>>, ApiError> {
    let who = caller(&state, &headers)?;
    who.require(Role::Read, "list documents")?;
    let vectors = state.unscoped.scoped(&who.tenant).vectors;
    Ok(Json(blocking(state.turn_timeout, move || vectors.documents()).await?))
}

#[utoipa::path(delete, path = "/v1/documents/{id}", params(("id" = String, Path, description = "document id")),
    responses((status = 204, description = "deleted with all its chunks"), (status = 404, description = "no such document", body = ErrorBody)))]
/// `DELETE /v1/documents/{id}`: the document and all its chunks. Sessions that showed it
/// keep their history; no later turn shows it.
pub(crate) async fn delete_document(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let who = caller(&state, &headers)?;
    who.require(Role::Write, "delete documents")?;
    let vectors = state.unscoped.scoped(&who.tenant).vectors;
    let doc = ragctx_core::DocumentId::from(id.as_str());
    let removed = blocking(state.ingest_timeout, move || vectors.replace_documents(&[doc], &[])).await?.removed;
    if removed == 0 {
        return Err(ApiError::not_found(format!("document {id}")));
    }
    Ok(StatusCode::NO_CONTENT)
}
