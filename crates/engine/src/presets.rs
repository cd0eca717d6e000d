//! The baselines a turn is measured against, as named sets of settings declared once: the
//! seed's retrieval paths (`none`, `group`, `exclude`, `full`, run as they were measured
//! before memory modes) and plain top-k. `eval mtrag` and `eval conflicts` take them from
//! here. Every stage the product adds on top of the seed is off in them
//! ([`TurnSettings::stages_off`]: a new stage's setting declares its `off` value in its row,
//! so it is off here without a line of this file); the rest is named below or the base's.

use crate::{ConversationQuery, TurnSettings};
use ragctx_core::{Consumption, Granularity, Memory, Strategy};

/// One of the seed's paths: one chunk per document, nothing carried, no conversation in the
/// prompt, every stage the product adds off ([`TurnSettings::stages_off`]: no relevance floor,
/// no engaged-document prior, no near-duplicate removal, no diversity, no reranker, no
/// compression; peers fill by rank up to `limit` with whole chunks), with `strategy`'s
/// exclusion and grouping at `granularity`, consuming `consumption`. The budget, limit,
/// window, retrieval, filter and condensing are `base`'s.
pub fn seed_path(
    base: &TurnSettings,
    strategy: Strategy,
    granularity: Granularity,
    consumption: Consumption,
) -> TurnSettings {
    TurnSettings {
        memory: Memory::Client,
        strategy,
        granularity,
        consumption,
        group_size: 1,
        group_margin: 0.0,
        conversation_query: ConversationQuery::Off,
        ..base.clone().stages_off()
    }
}

/// Plain top-k in `base`'s memory mode: no exclusion, every stage the product adds off (no
/// relevance floor, no engaged prior, no near-duplicate removal, no diversity, no reranker, no
/// compression); the rest is `base`'s.
pub fn plain_top_k(base: &TurnSettings) -> TurnSettings {
    TurnSettings { strategy: Strategy::None, ..base.clone().stages_off() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ragctx_core::{Compress, FreedSlots, Rerank};

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
        // Everything else is the base's.
        let kept = TurnSettings { freed_slots: FreedSlots::Refill, ..base.clone() };
        let s = seed_path(&kept, Strategy::Full, Granularity::Document, Consumption::Cited);
        assert_eq!(
            (s.limit, s.window, s.min_documents, s.retrieval),
            (kept.limit, kept.window, kept.min_documents, kept.retrieval)
        );
        assert_eq!(
            TurnSettings { strategy: kept.strategy, ..plain_top_k(&kept).stages_off() },
            kept.clone().stages_off()
        );
    }
}
