//! Stage 3: vector search with grouping and exclusion pushed into the search, and a deeper
//! search when too few unique documents come back.

use crate::settings::TurnSettings;
use ragctx_core::{DocumentId, ExclusionSet, Grouping, Result, SearchOutcome, SearchRequest, VectorStore};
use std::collections::{HashMap, HashSet};

/// Deeper searches at most, each asking for twice as many results.
pub const MAX_DEEPER: u32 = 3;

/// What retrieval returned, with the number of searches it took.
pub struct Retrieved {
    pub outcome: SearchOutcome,
    /// Searches beyond the first, asked for because too few documents came back.
    pub deeper: u32,
}

pub fn retrieve(
    store: &dyn VectorStore,
    vector: Vec<f32>,
    exclusion: ExclusionSet,
    quotas: HashMap<DocumentId, usize>,
    settings: &TurnSettings,
) -> Result<Retrieved> {
    let grouping = settings.strategy.groups().then_some(Grouping { group_size: settings.group_size, quotas });
    let mut request = SearchRequest { vector, limit: settings.limit, grouping, exclusion };
    // Asking for fewer documents than the minimum means the caller wants fewer.
    let min_documents = settings.min_documents.min(settings.limit);
    let mut deeper = 0;
    loop {
        let outcome = store.search(&request)?;
        let docs: HashSet<&DocumentId> = outcome.hits.iter().map(|h| &h.chunk.document_id).collect();
        // Fewer hits than asked means the store has nothing more to give.
        let exhausted = match &request.grouping {
            Some(_) => docs.len() < request.limit,
            None => outcome.hits.len() < request.limit,
        };
        if docs.len() >= min_documents || exhausted || deeper >= MAX_DEEPER {
            return Ok(Retrieved { outcome, deeper });
        }
        deeper += 1;
        request.limit *= 2;
    }
}
