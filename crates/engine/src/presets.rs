//! The baselines a turn is measured against, as named sets of settings declared once: the
//! seed's retrieval paths (`none`, `group`, `exclude`, `full`, run as they were measured
//! before memory modes) and plain top-k. `eval mtrag` and `eval conflicts` take them from
//! here. Each names every field of [`TurnSettings`] (no `..base`): a new setting does not
//! compile until someone decides what the baselines do with it, so it can never silently
//! change what they measure.

use crate::{ConversationQuery, TurnSettings};
use ragctx_core::{Compress, Consumption, FreedSlots, Granularity, Memory, Rerank, Strategy};

/// One of the seed's paths: one chunk per document, nothing carried, no conversation in the
/// prompt, no relevance floor, no engaged-document prior, no near-duplicate removal, no
/// diversity, no reranker, no compression (peers fill by rank up to `limit` with whole chunks), with `strategy`'s exclusion
/// and grouping at `granularity`, consuming `consumption`. The budget, limit, window,
/// retrieval, filter and condensing are `base`'s.
pub fn seed_path(
    base: &TurnSettings,
    strategy: Strategy,
    granularity: Granularity,
    consumption: Consumption,
) -> TurnSettings {
    let TurnSettings {
        memory: _,
        strategy: _,
        granularity: _,
        consumption: _,
        window,
        limit,
        group_size: _,
        group_margin: _,
        min_documents,
        relevance_floor: _,
        engaged_prior: _,
        near_duplicate: _,
        diversity: _,
        rerank: _,
        compress: _,
        freed_slots: _,
        budget,
        session_ttl,
        mode,
        conversation_query: _,
        retrieval,
        fusion,
        filter,
        condense,
    } = base.clone();
    TurnSettings {
        memory: Memory::Client,
        strategy,
        granularity,
        consumption,
        window,
        limit,
        group_size: 1,
        group_margin: 0.0,
        min_documents,
        relevance_floor: 0.0,
        engaged_prior: 0.0,
        near_duplicate: 0.0,
        diversity: 0.0,
        rerank: Rerank::Off,
        compress: Compress::Off,
        freed_slots: FreedSlots::Refill,
        budget,
        session_ttl,
        mode,
        conversation_query: ConversationQuery::Off,
        retrieval,
        fusion,
        filter,
        condense,
    }
}

/// Plain top-k in `base`'s memory mode: no exclusion, no relevance floor, no engaged prior,
/// no near-duplicate removal, no diversity, no reranker, no compression; the rest is `base`'s.
pub fn plain_top_k(base: &TurnSettings) -> TurnSettings {
    let TurnSettings {
        memory,
        strategy: _,
        granularity,
        consumption,
        window,
        limit,
        group_size,
        group_margin,
        min_documents,
        relevance_floor: _,
        engaged_prior: _,
        near_duplicate: _,
        diversity: _,
        rerank: _,
        compress: _,
        freed_slots: _,
        budget,
        session_ttl,
        mode,
        conversation_query,
        retrieval,
        fusion,
        filter,
        condense,
    } = base.clone();
    TurnSettings {
        memory,
        strategy: Strategy::None,
        granularity,
        consumption,
        window,
        limit,
        group_size,
        group_margin,
        min_documents,
        relevance_floor: 0.0,
        engaged_prior: 0.0,
        near_duplicate: 0.0,
        diversity: 0.0,
        rerank: Rerank::Off,
        compress: Compress::Off,
        freed_slots: FreedSlots::Refill,
        budget,
        session_ttl,
        mode,
        conversation_query,
        retrieval,
        fusion,
        filter,
        condense,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every stage the product adds on top of the seed is off in its paths, whatever the base
    /// turns on.
    #[test]
    fn the_baselines_switch_off_every_stage_the_base_turns_on() {
        let base = TurnSettings {
            diversity: 0.5,
            rerank: Rerank::Remote,
            compress: Compress::Sentences,
            budget: 2_000,
            conversation_query: ConversationQuery::Always,
            ..TurnSettings::default()
        };
        let s = seed_path(&base, Strategy::Full, Granularity::Document, Consumption::Cited);
        assert_eq!(
            (s.memory, s.strategy, s.granularity, s.consumption),
            (Memory::Client, Strategy::Full, Granularity::Document, Consumption::Cited)
        );
        assert_eq!((s.group_size, s.group_margin, s.relevance_floor, s.engaged_prior), (1, 0.0, 0.0, 0.0));
        assert_eq!((s.near_duplicate, s.diversity, s.rerank, s.compress), (0.0, 0.0, Rerank::Off, Compress::Off));
        assert_eq!((s.conversation_query, s.budget), (ConversationQuery::Off, 2_000));
        let p = plain_top_k(&base);
        assert_eq!((p.strategy, p.memory, p.budget), (Strategy::None, Memory::Engine, 2_000));
        assert_eq!((p.relevance_floor, p.engaged_prior, p.near_duplicate, p.diversity), (0.0, 0.0, 0.0, 0.0));
        assert_eq!((p.rerank, p.compress), (Rerank::Off, Compress::Off));
    }
}
