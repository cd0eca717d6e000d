//! Whole-document writes and listing: replace a document's chunks, delete documents, list
//! them. Milvus has no transactions, so the order is what keeps readers safe: the new chunks
//! are written first, the stale ones deleted after, so a crash in between leaves extra
//! chunks of the old version (removed by the next replace), never a document without its
//! chunks.

use super::{string, MilvusVectorStore, BATCH};
use crate::filter::{self, DOCUMENT_ID, ID};
use milvus::v2::prelude::{ConsistencyLevel, DeleteRequest, FilterTemplateValue, QueryRequest};
use ragctx_core::{
    check_replacement, DocumentId, DocumentSummary, EmbeddedChunk, Error, Replaced, Result, VectorStore,
};
use std::collections::{HashMap, HashSet};

/// Milvus's largest query window (`offset + limit`).
const MAX_QUERY: usize = 16_384;
/// Documents per "chunks of these documents" query.
const DOCUMENTS_PER_QUERY: usize = 64;

impl MilvusVectorStore {
    /// Chunk ids of `documents`, read with strong consistency (a replace must see every
    /// chunk written before it).
    fn chunk_ids_of(&self, documents: &[DocumentId]) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for batch in documents.chunks(DOCUMENTS_PER_QUERY) {
            let values: Vec<&str> = batch.iter().map(|d| d.as_str()).collect();
            let response = self.query_in(DOCUMENT_ID, &values, &[ID], ConsistencyLevel::Strong, MAX_QUERY)?;
            let rows: Vec<String> = response
                .results()
                .rows()
                .map_err(Error::storage)?
                .map(|row| string(&row, ID))
                .collect::<Result<_>>()?;
            if rows.len() >= MAX_QUERY {
                return Err(Error::InvalidInput(format!(
                    "documents {values:?} hold {MAX_QUERY} chunks or more, more than one Milvus query returns; replace them in smaller groups"
                )));
            }
            out.extend(rows);
        }
        Ok(out)
    }

    /// Deletes rows by id: templated filter where the server can, escaped literals otherwise.
    fn delete_ids(&self, ids: &[String]) -> Result<()> {
        for batch in ids.chunks(BATCH) {
            let mut builder = DeleteRequest::builder().collection_name(self.config.collection.clone());
            builder = if self.capabilities.templates {
                builder.filter(format!("{ID} in {{ids}}")).filter_templates(HashMap::from([(
                    "ids".to_owned(),
                    FilterTemplateValue::StringArray(batch.to_vec()),
                )]))
            } else {
                builder.filter(filter::in_literal(ID, batch.iter().map(String::as_str)))
            };
            let request = builder.build().map_err(Error::storage)?;
            self.call("delete", {
                let client = self.client.clone();
                async move { client.delete(request).await }
            })?;
            self.await_gone(batch)?;
        }
        Ok(())
    }

    /// Waits until a strong read no longer finds `ids`: once it returns, every later read
    /// of this process misses them too — also on servers (2.3.5) whose delete response does
    /// not advance the SDK's session timestamp.
    fn await_gone(&self, ids: &[String]) -> Result<()> {
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        for wait_ms in [0u64, 50, 100, 200, 400, 800, 1600] {
            std::thread::sleep(std::time::Duration::from_millis(wait_ms));
            let left = self.query_in(ID, &ids, &[ID], ConsistencyLevel::Strong, ids.len())?;
            if left.results().rows().map_err(Error::storage)?.next().is_none() {
                return Ok(());
            }
        }
        Err(Error::Unavailable {
            backend: format!("Milvus at {}", self.config.uri),
            message: format!("{} deleted chunks are still readable after 3 s; run the command again", ids.len()),
        })
    }

    pub(super) fn replace(&self, documents: &[DocumentId], chunks: &[EmbeddedChunk]) -> Result<Replaced> {
        check_replacement(documents, chunks)?;
        let given: HashSet<&str> = chunks.iter().map(|c| c.chunk.id.as_str()).collect();
        let stale: Vec<String> =
            self.chunk_ids_of(documents)?.into_iter().filter(|id| !given.contains(id.as_str())).collect();
        let new = if chunks.is_empty() { 0 } else { self.upsert(chunks)? };
        self.delete_ids(&stale)?;
        Ok(Replaced { new, updated: chunks.len() - new, removed: stale.len() })
    }

    /// Every document: the collection is walked in primary-key order, a page at a time
    /// (`id > last` — Milvus returns a limited query in key order).
    pub(super) fn list(&self) -> Result<Vec<DocumentSummary>> {
        // (chunk id, document id, title) of every row.
        let mut rows: Vec<(String, String, String)> = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let mut builder = QueryRequest::builder()
                .collection_name(self.config.collection.clone())
                .output_fields([ID, DOCUMENT_ID, "title"])
                .limit(MAX_QUERY as i64)
                .consistency_level(self.config.consistency.into());
            builder = match (&after, self.capabilities.templates) {
                (None, _) => builder,
                (Some(last), true) => builder
                    .filter(format!("{ID} > {{last}}"))
                    .filter_templates(HashMap::from([("last".to_owned(), FilterTemplateValue::String(last.clone()))])),
                (Some(last), false) => builder.filter(format!("{ID} > {}", filter::quote(last))),
            };
            let request = builder.build().map_err(Error::storage)?;
            let response = self.read("list documents", || {
                let (client, request) = (self.client.clone(), request.clone());
                async move { client.query(request).await }
            })?;
            let before = rows.len();
            for row in response.results().rows().map_err(Error::storage)? {
                rows.push((string(&row, ID)?, string(&row, DOCUMENT_ID)?, string(&row, "title")?));
            }
            let page = &rows[before..];
            if page.len() < MAX_QUERY {
                return Ok(DocumentSummary::tally(rows.iter().map(|(i, d, t)| (i.as_str(), d.as_str(), t.as_str()))));
            }
            after = page.iter().map(|r| &r.0).max().cloned();
        }
    }
}
