//! Searches (vector or BM25 text) under one predicate — the exclusion, the metadata filter
//! and the tenant — grouped by the server or here and completed when groups come back short
//! (each completion round under the same predicate); fetches by id.

use super::*;

/// A fetched chunk and, when asked for, its vector.
pub(super) type Fetched = (Chunk, Option<Vec<f32>>);

/// What a search looks for: a query vector, or text for the server's BM25.
#[derive(Clone, Copy)]
pub(super) enum Query<'a> {
    Dense(&'a [f32]),
    Text(&'a str),
}

/// What a search is confined to besides its exclusion: the request's metadata filter and
/// tenant.
#[derive(Clone, Copy)]
pub(super) struct Scope<'a> {
    pub(super) filter: &'a ragctx_core::Filter,
    pub(super) tenant: Option<&'a str>,
}

impl MilvusVectorStore {
    /// The search's one predicate: `scope` and `ex` joined, written for this server and
    /// collection (tenants by the `tenant` field — the partition key where the server places
    /// rows by it, read unpruned where it does not — or by id on a collection made before it).
    /// `others`: the tenants a `default` search by id excludes where the server has no infix
    /// `like` ([`filter::TenantScope::DefaultBesides`]).
    pub(super) fn predicate(
        &self,
        ex: &ExclusionSet,
        scope: Scope<'_>,
        others: &[String],
    ) -> Result<filter::Predicate> {
        let misplaced =
            self.capabilities.partition_key && !schema::upserts_by_partition_key(&self.capabilities.version);
        let tenant = match scope.tenant {
            None => filter::TenantScope::All,
            Some(t) if self.capabilities.metadata && misplaced => filter::TenantScope::FieldUnpruned(t),
            Some(t) if self.capabilities.metadata => filter::TenantScope::Field(t),
            Some(t) if t == ragctx_core::DEFAULT_TENANT && !self.infix_like => {
                filter::TenantScope::DefaultBesides(others)
            }
            Some(t) => filter::TenantScope::IdPrefix(t),
        };
        filter::predicate(scope.filter, ex, tenant, self.capabilities.templates, self.capabilities.metadata)
    }

    /// Fields a search or fetch returns (all but the vector).
    pub(super) fn fields(&self) -> Vec<&'static str> {
        let mut fields = FIELDS.to_vec();
        if self.capabilities.metadata {
            fields.push(METADATA);
        }
        fields
    }

    /// Records tenants other than `default` as holding chunks (see `other_tenants`).
    pub(super) fn know_tenants<'a>(&self, tenants: impl Iterator<Item = &'a str>) -> usize {
        let mut known = self.other_tenants.lock().unwrap_or_else(|e| e.into_inner());
        let before = known.len();
        known.extend(tenants.filter(|t| *t != ragctx_core::DEFAULT_TENANT).map(str::to_owned));
        known.len() - before
    }

    /// One search for `query` within `scope`, `exclusion` filtered out: hits as Milvus
    /// returns them (BM25 scores made positive: Milvus Lite returns them negated). A
    /// `default` search by id on a server without infix `like` excludes the other tenants
    /// known so far; a hit of one not yet known (written by another process) makes it known,
    /// and the search is made again, so none is ever returned.
    pub(super) fn search_once(
        &self,
        query: Query<'_>,
        exclusion: &ExclusionSet,
        scope: Scope<'_>,
        limit: usize,
        group_size: Option<usize>,
    ) -> Result<Vec<Hit>> {
        let by_ranges =
            !self.capabilities.metadata && !self.infix_like && scope.tenant == Some(ragctx_core::DEFAULT_TENANT);
        loop {
            let others: Vec<String> =
                self.other_tenants.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned().collect();
            let hits = self.search_under(query, exclusion, scope, limit, group_size, &others)?;
            if !by_ranges {
                return Ok(hits);
            }
            let foreign: Vec<&str> = hits
                .iter()
                .map(|h| ragctx_core::tenant_of(h.chunk.id.as_str()))
                .filter(|t| *t != ragctx_core::DEFAULT_TENANT)
                .collect();
            if foreign.is_empty() {
                return Ok(hits);
            }
            if self.know_tenants(foreign.iter().copied()) == 0 {
                return Err(Error::inconsistent(format!(
                    "Milvus returned chunks of tenants {foreign:?} that the search's filter excludes"
                )));
            }
        }
    }

    /// One search call under the predicate of `scope`, `exclusion` and `others`.
    fn search_under(
        &self,
        query: Query<'_>,
        exclusion: &ExclusionSet,
        scope: Scope<'_>,
        limit: usize,
        group_size: Option<usize>,
        others: &[String],
    ) -> Result<Vec<Hit>> {
        let predicate = self.predicate(exclusion, scope, others)?;
        if predicate == filter::Predicate::Nothing {
            return Ok(Vec::new());
        }
        let builder = MilvusSearch::builder()
            .collection_name(self.config.collection.clone())
            .output_fields(self.fields())
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
        if let filter::Predicate::Where(Filter { expr, params }) = predicate {
            builder = builder.filter(expr);
            if !params.is_empty() {
                builder = builder.filter_templates(
                    params
                        .into_iter()
                        .map(|(k, v)| {
                            let v = match v {
                                filter::Template::String(s) => FilterTemplateValue::String(s),
                                filter::Template::Strings(l) => FilterTemplateValue::StringArray(l),
                            };
                            (k, v)
                        })
                        .collect(),
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
                    other => return Err(Error::inconsistent(format!("Milvus score of unexpected type: {other:?}"))),
                };
                let score = if matches!(query, Query::Text(_)) { score.abs() } else { score };
                hits.push(Hit { chunk: chunk_of(&row, self.capabilities.metadata)?, score });
            }
        }
        Ok(hits)
    }

    /// Chunks (with vectors when `vectors`) for `ids`, keyed by id.
    pub(super) fn fetch(&self, ids: &[ChunkId], vectors: bool) -> Result<HashMap<String, Fetched>> {
        let mut out = HashMap::new();
        let mut fields = self.fields();
        if vectors {
            fields.push("vector");
        }
        for batch in ids.chunks(BATCH) {
            let batch: Vec<&str> = batch.iter().map(|i| i.as_str()).collect();
            let response = self.query_ids(&batch, &fields, self.config.consistency.into())?;
            for row in response.results().rows().map_err(Error::storage)? {
                let chunk = chunk_of(&row, self.capabilities.metadata)?;
                let vector = if vectors {
                    match row.get("vector").map_err(Error::storage)? {
                        ResultValue::FloatVector(v) => Some(v.to_vec()),
                        other => {
                            return Err(Error::inconsistent(format!("Milvus vector of unexpected type: {other:?}")))
                        }
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
    pub(super) fn query_ids(
        &self,
        ids: &[&str],
        fields: &[&str],
        consistency: ConsistencyLevel,
    ) -> Result<milvus::v2::prelude::QueryResponse> {
        self.query_in(ID, ids, fields, consistency, ids.len())
    }

    /// Up to `limit` rows whose `field` is in `values`, by a filter built like the exclusion
    /// filter: templated where the server can, escaped literals otherwise.
    pub(super) fn query_in(
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
    pub(super) fn existing(&self, ids: &[&str]) -> Result<HashSet<String>> {
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
    pub(super) fn grouped_or_not(
        &self,
        query: Query<'_>,
        limit: usize,
        exclusion: &ExclusionSet,
        grouping: &Option<Grouping>,
        scope: Scope<'_>,
    ) -> Result<(Vec<Hit>, u32)> {
        let (mut hits, rounds) = match grouping {
            Some(g) => self.search_grouped(query, limit, exclusion, g, scope)?,
            None => {
                let hits = self.search_once(query, exclusion, scope, limit, None)?;
                (hits.into_iter().filter(|h| !exclusion.excludes(&h.chunk.id, &h.chunk.document_id)).collect(), 1)
            }
        };
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok((hits, rounds))
    }

    /// Grouped search, completed here when the server returned fewer groups than asked.
    pub(super) fn search_grouped(
        &self,
        query: Query<'_>,
        limit: usize,
        exclusion: &ExclusionSet,
        grouping: &Grouping,
        scope: Scope<'_>,
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
                self.search_once(query, &exclusion, scope, want, Some(group_size))?
            } else {
                // No server-side grouping (Milvus < 2.4 ignores it): over-fetch, group here.
                self.search_once(query, &exclusion, scope, (want * group_size).min(MAX_TOPK), None)?
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
pub(super) fn groups_by(version: &str) -> bool {
    let v = version.trim_start_matches('v');
    if !v.starts_with(|c: char| c.is_ascii_digit()) {
        return true;
    }
    let mut parts = v.split(|c: char| !c.is_ascii_digit()).map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (2, 4)
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
