//! Stage 3: search with grouping and exclusion pushed into the search, and a deeper search
//! when too few unique documents come back — dense, lexical (BM25), or both fused.

use crate::settings::TurnSettings;
use ragctx_core::{
    ChunkId, DocumentId, ExclusionSet, Fusion, Grouping, Hit, LexicalRequest, Result, Retrieval, RetrievalTrace,
    SearchOutcome, SearchReason, SearchRequest, VectorStore,
};
use std::collections::{HashMap, HashSet};

/// Deeper searches at most, each asking for twice as many results.
pub const MAX_DEEPER: u32 = 3;
/// Reciprocal rank fusion's constant (Cormack et al.; what Qdrant, Elasticsearch and Milvus
/// use).
pub const RRF_K: f32 = 60.0;

/// What retrieval returned, with the number of searches it took.
pub struct Retrieved {
    /// The hits, scored by dense cosine whatever the retrieval, and how they were found.
    pub outcome: SearchOutcome,
    /// Searches beyond the first, asked for because too few documents came back.
    pub deeper: u32,
    /// Lexical or hybrid retrieval: what each side found (`None` for dense).
    pub sides: Option<RetrievalTrace>,
}

/// The turn's search. Hits always carry dense similarities (the later stages compare
/// scores as cosines, and order by them). With lexical or hybrid retrieval the other side
/// decides which chunks come back and in what order: the candidates' cosines are handed
/// out again best first down that order ([`ladder`]), so the prompt keeps the fusion's
/// order and the floor and margins stay on the cosine scale.
pub fn retrieve(
    store: &dyn VectorStore,
    vector: Vec<f32>,
    query: &str,
    exclusion: ExclusionSet,
    quotas: HashMap<DocumentId, usize>,
    settings: &TurnSettings,
) -> Result<Retrieved> {
    let grouping = settings.strategy.groups().then_some(Grouping { group_size: settings.group_size, quotas });
    let request = SearchRequest {
        vector,
        limit: settings.limit,
        grouping,
        exclusion,
        filter: settings.filter.clone(),
        tenant: None,
    };
    let lexical = match settings.retrieval {
        Retrieval::Dense => None,
        Retrieval::Lexical | Retrieval::Hybrid => lexical(store, &request, query, settings)?,
    };
    let fallback = |why: &str, r: &mut Retrieved| {
        r.sides = Some(RetrievalTrace {
            retrieval: Retrieval::Dense,
            fusion: None,
            dense: r.outcome.hits.iter().map(|h| h.chunk.id.clone()).collect(),
            lexical: Vec::new(),
            fallback: Some(why.to_owned()),
        });
    };
    let lexical = match lexical {
        None => {
            let mut r = dense(store, request, settings)?;
            if settings.retrieval != Retrieval::Dense {
                fallback(&format!("{}: dense search instead", store.lexical_missing()), &mut r);
            }
            return Ok(r);
        }
        Some(l) if l.0.hits.is_empty() && settings.retrieval == Retrieval::Lexical => {
            let mut r = dense(store, request, settings)?;
            fallback("no chunk left to show shares a term with the question: dense search instead", &mut r);
            return Ok(r);
        }
        Some(l) => l,
    };
    let (lexical, lexical_deeper) = lexical;
    let lexical_ids: Vec<ChunkId> = lexical.hits.iter().map(|h| h.chunk.id.clone()).collect();
    let bm25: Vec<f32> = lexical.hits.iter().map(|h| h.score).collect();
    let lexical_hits = rescored(store, &request.vector, lexical.hits)?;
    if settings.retrieval == Retrieval::Lexical {
        let sides = RetrievalTrace {
            retrieval: Retrieval::Lexical,
            fusion: None,
            dense: Vec::new(),
            lexical: lexical_ids,
            fallback: None,
        };
        let outcome = SearchOutcome { hits: ladder(lexical_hits), ..lexical };
        return Ok(Retrieved { outcome, deeper: lexical_deeper, sides: Some(sides) });
    }
    // The request moves into the dense search: only its limit and grouping are needed after.
    let (asked, grouping) = (request.limit, request.grouping.clone());
    let d = dense(store, request, settings)?;
    let dense_ids: Vec<ChunkId> = d.outcome.hits.iter().map(|h| h.chunk.id.clone()).collect();
    let fused = fuse(settings.fusion, &d.outcome.hits, &bm25, &lexical_hits);
    // As many as the dense side was asked for in the end (its deeper searches included);
    // `select` takes more while too few documents are in.
    let limit = asked << d.deeper;
    let hits = ladder(select(fused, limit, grouping.as_ref(), settings.min_documents.min(settings.limit)));
    let outcome = SearchOutcome {
        hits,
        path: d.outcome.path,
        rounds: d.outcome.rounds + lexical.rounds,
        reason: SearchReason::Fused {
            dense: Box::new(d.outcome.reason),
            lexical: Box::new(lexical.reason),
            fusion: settings.fusion,
        },
    };
    let sides = RetrievalTrace {
        retrieval: Retrieval::Hybrid,
        fusion: Some(settings.fusion),
        dense: dense_ids,
        lexical: lexical_ids,
        fallback: None,
    };
    Ok(Retrieved { outcome, deeper: d.deeper.max(lexical_deeper), sides: Some(sides) })
}

/// Lexical search, deeper while too few documents come back (as [`dense`]); `None` when the
/// backend has no lexical index.
fn lexical(
    store: &dyn VectorStore,
    request: &SearchRequest,
    query: &str,
    settings: &TurnSettings,
) -> Result<Option<(SearchOutcome, u32)>> {
    let mut asked = LexicalRequest {
        query: query.to_owned(),
        limit: request.limit,
        grouping: request.grouping.clone(),
        exclusion: request.exclusion.clone(),
        filter: request.filter.clone(),
        tenant: request.tenant.clone(),
    };
    deepen(request.limit, request.grouping.is_some(), settings, |limit| {
        asked.limit = limit;
        store.search_lexical(&asked)
    })
}

/// Runs `search` asking for `limit` results, then twice as many (at most [`MAX_DEEPER`] more
/// times) while fewer unique documents than the settings' minimum come back — unless the
/// store had nothing more to give. Returns the last outcome and how many deeper searches it
/// took; `None` as soon as `search` has no index to search.
fn deepen(
    limit: usize,
    grouped: bool,
    settings: &TurnSettings,
    mut search: impl FnMut(usize) -> Result<Option<SearchOutcome>>,
) -> Result<Option<(SearchOutcome, u32)>> {
    // Asking for fewer documents than the minimum means the caller wants fewer.
    let min_documents = settings.min_documents.min(settings.limit);
    let (mut limit, mut deeper) = (limit, 0);
    loop {
        let Some(outcome) = search(limit)? else { return Ok(None) };
        let docs: HashSet<&DocumentId> = outcome.hits.iter().map(|h| &h.chunk.document_id).collect();
        // Fewer hits than asked means the store has nothing more to give.
        let exhausted = if grouped { docs.len() < limit } else { outcome.hits.len() < limit };
        if docs.len() >= min_documents || exhausted || deeper >= MAX_DEEPER {
            return Ok(Some((outcome, deeper)));
        }
        deeper += 1;
        limit *= 2;
    }
}

/// The hits in their order, with their cosines handed out again best first: the k-th hit
/// gets the k-th best cosine among them, so sorting by score keeps this order.
pub fn ladder(mut hits: Vec<Hit>) -> Vec<Hit> {
    let mut cosines: Vec<f32> = hits.iter().map(|h| h.score).collect();
    cosines.sort_by(|a, b| b.total_cmp(a));
    for (h, c) in hits.iter_mut().zip(cosines) {
        h.score = c;
    }
    hits
}

/// Dense search, deeper while too few documents come back.
fn dense(store: &dyn VectorStore, mut request: SearchRequest, settings: &TurnSettings) -> Result<Retrieved> {
    let (limit, grouped) = (request.limit, request.grouping.is_some());
    let searched = deepen(limit, grouped, settings, |limit| {
        request.limit = limit;
        store.search(&request).map(Some)
    })?;
    let (outcome, deeper) = searched.expect("a dense search always answers");
    Ok(Retrieved { outcome, deeper, sides: None })
}

/// The same hits scored by dense similarity to `vector` (their order kept).
pub(crate) fn rescored(store: &dyn VectorStore, vector: &[f32], hits: Vec<Hit>) -> Result<Vec<Hit>> {
    let ids: Vec<ChunkId> = hits.iter().map(|h| h.chunk.id.clone()).collect();
    let vectors = store.vectors(&ids)?;
    Ok(hits
        .into_iter()
        .zip(vectors)
        .map(|(h, v)| Hit { score: v.map_or(0.0, |v| v.iter().zip(vector).map(|(a, b)| a * b).sum()), ..h })
        .collect())
}

/// Both sides' candidates in fused order, each with its dense score. `lexical` is the
/// lexical side in its order (best first) scored densely, `bm25` its BM25 scores.
pub fn fuse(fusion: Fusion, dense: &[Hit], bm25: &[f32], lexical: &[Hit]) -> Vec<Hit> {
    let ranks = |n: usize| -> Vec<f32> { (0..n).map(|r| 1.0 / (RRF_K + r as f32 + 1.0)).collect() };
    let half = |scores: &[f32]| -> Vec<f32> { unit_range(scores).into_iter().map(|s| 0.5 * s).collect() };
    let dense_scores: Vec<f32> = dense.iter().map(|h| h.score).collect();
    let (from_dense, from_lexical) = match fusion {
        Fusion::Rrf => (ranks(dense.len()), ranks(bm25.len())),
        Fusion::Weighted => (half(&dense_scores), half(bm25)),
        // The union ranked by dense similarity: the lexical side brings candidates only.
        Fusion::Rescore => (dense_scores, lexical.iter().map(|h| h.score).collect()),
    };
    let mut fused: Vec<(f32, &Hit)> = Vec::with_capacity(dense.len() + lexical.len());
    let mut at: HashMap<&ChunkId, usize> = HashMap::new();
    for (hits, scores) in [(dense, from_dense), (lexical, from_lexical)] {
        for (h, s) in hits.iter().zip(scores) {
            match at.get(&h.chunk.id) {
                // Found by both: RRF and the weighted sum add up; a rescore is the same cosine.
                Some(&i) if fusion != Fusion::Rescore => fused[i].0 += s,
                Some(_) => {}
                None => {
                    at.insert(&h.chunk.id, fused.len());
                    fused.push((s, h));
                }
            }
        }
    }
    fused.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.chunk.id.cmp(&b.1.chunk.id)));
    fused.into_iter().map(|(_, h)| h.clone()).collect()
}

/// Scores scaled to [0, 1] over the list (all 1 when they are equal).
fn unit_range(scores: &[f32]) -> Vec<f32> {
    let lo = scores.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    scores.iter().map(|&s| if hi > lo { (s - lo) / (hi - lo) } else { 1.0 }).collect()
}

/// The first `limit` documents (each up to its quota) of a fused list; without grouping the
/// first `limit` chunks, and more while they hold fewer than `min_documents` documents.
fn select(fused: Vec<Hit>, limit: usize, grouping: Option<&Grouping>, min_documents: usize) -> Vec<Hit> {
    let Some(grouping) = grouping else {
        let mut docs: HashSet<DocumentId> = HashSet::new();
        let mut out = Vec::new();
        for h in fused {
            if out.len() >= limit && docs.len() >= min_documents {
                break;
            }
            if out.len() >= limit && docs.contains(&h.chunk.document_id) {
                // Past the limit, only a chunk that brings another document is worth its tokens.
                continue;
            }
            docs.insert(h.chunk.document_id.clone());
            out.push(h);
        }
        return out;
    };
    let mut taken: HashMap<DocumentId, usize> = HashMap::new();
    let mut out = Vec::new();
    for h in fused {
        let full = taken.len() >= limit;
        let quota = grouping.quota(h.chunk.document_id.as_str(), h.chunk.weight);
        match taken.get_mut(&h.chunk.document_id) {
            Some(k) if *k >= quota => continue,
            Some(k) => *k += 1,
            None if full => continue,
            None => {
                taken.insert(h.chunk.document_id.clone(), 1);
            }
        }
        out.push(h);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ragctx_core::Chunk;

    fn hit(id: &str, doc: &str, score: f32) -> Hit {
        Hit { chunk: Chunk::new(id, doc, "", id), score }
    }

    #[test]
    fn the_ladder_keeps_the_order_and_the_cosines() {
        // BM25's best has the lowest cosine.
        let hits = ladder(vec![hit("x", "a", 0.1), hit("y", "b", 0.7), hit("z", "c", 0.4)]);
        let ids: Vec<&str> = hits.iter().map(|h| h.chunk.id.as_str()).collect();
        assert_eq!(ids, ["x", "y", "z"], "the given order");
        let scores: Vec<f32> = hits.iter().map(|h| h.score).collect();
        assert_eq!(scores, [0.7, 0.4, 0.1], "the same cosines, best first down that order");
    }

    #[test]
    fn select_without_grouping_takes_more_until_enough_documents() {
        let fused: Vec<Hit> = (0..6)
            .map(|i| hit(&format!("a#{i}"), "a", 0.9))
            .chain([hit("b#0", "b", 0.5), hit("a#9", "a", 0.4), hit("c#0", "c", 0.3)])
            .collect();
        let got = select(fused.clone(), 4, None, 3);
        let ids: Vec<&str> = got.iter().map(|h| h.chunk.id.as_str()).collect();
        assert_eq!(ids, ["a#0", "a#1", "a#2", "a#3", "b#0", "c#0"], "past the limit only new documents");
        assert_eq!(select(fused, 4, None, 1).len(), 4, "enough documents: the limit");
    }

    #[test]
    fn fusions_merge_both_sides_without_duplicates() {
        let dense = vec![hit("d1", "a", 0.9), hit("both", "b", 0.8)];
        let bm25 = [12.0, 3.0];
        let lexical = vec![hit("both", "b", 0.8), hit("l1", "c", 0.2)];
        for f in [Fusion::Rrf, Fusion::Weighted, Fusion::Rescore] {
            let ids: Vec<String> =
                fuse(f, &dense, &bm25, &lexical).iter().map(|h| h.chunk.id.as_str().to_owned()).collect();
            assert_eq!(ids.len(), 3, "{f:?}: {ids:?}");
            if f != Fusion::Rescore {
                assert_eq!(ids[0], "both", "{f:?}: found by both sides first");
            } else {
                assert_eq!(ids, ["d1", "both", "l1"], "rescore: by cosine");
            }
        }
    }
}
