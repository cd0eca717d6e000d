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
    use ragctx_core::{Compress, Rerank};

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
        // Everything else is the base's: a base unlike the defaults in every such setting.
        let kept = TurnSettings {
            window: 5,
            limit: 7,
            min_documents: 2,
            budget: 2_500,
            session_ttl: 60,
            mode: ragctx_core::Mode::New,
            retrieval: ragctx_core::Retrieval::Hybrid,
            fusion: ragctx_core::Fusion::Rrf,
            filter: ragctx_core::Filter::parse(r#"{"topic": "a"}"#).unwrap(),
            condense: ragctx_core::Condense::OpenAi,
            ..base.clone()
        };
        let s = seed_path(&kept, Strategy::Full, Granularity::Document, Consumption::Cited);
        let p = plain_top_k(&kept);
        for got in [&s, &p] {
            assert_eq!((got.window, got.limit, got.min_documents, got.budget), (5, 7, 2, 2_500));
            assert_eq!(
                (got.session_ttl, got.mode, got.retrieval, got.fusion),
                (60, kept.mode, kept.retrieval, kept.fusion)
            );
            assert_eq!((&got.filter, got.condense), (&kept.filter, kept.condense));
        }
        assert_eq!((p.memory, p.granularity, p.consumption), (kept.memory, kept.granularity, kept.consumption));
        assert_eq!(
            (p.group_size, p.group_margin, p.conversation_query),
            (kept.group_size, kept.group_margin, kept.conversation_query)
        );
    }

    /// Every setting has a decided place in the baselines: named by the seed's paths, switched
    /// off as a stage the product adds (its row's `off`), or the base's. A new setting fails
    /// here until it is put in one list.
    #[test]
    fn every_setting_is_decided_for_the_baselines() {
        let named =
            ["memory", "strategy", "granularity", "consumption", "group_size", "group_margin", "conversation_query"];
        let off =
            ["relevance_floor", "engaged_prior", "near_duplicate", "diversity", "rerank", "compress", "freed_slots"];
        let base = [
            "window",
            "limit",
            "min_documents",
            "budget",
            "session_ttl",
            "mode",
            "retrieval",
            "fusion",
            "filter",
            "condense",
        ];
        let mut decided: Vec<&str> = named.iter().chain(&off).chain(&base).copied().collect();
        decided.sort_unstable();
        let mut keys = ragctx_core::TurnOverrides::KEYS.to_vec();
        keys.sort_unstable();
        assert_eq!(decided, keys);
    }
}
