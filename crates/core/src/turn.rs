//! The settings of one turn, and their check.

use crate::trace::memory_before_modes;
use crate::{
    Compress, Condense, Consumption, ConversationQuery, EffectiveSettings, Error, Filter, FreedSlots, Fusion,
    Granularity, Memory, Mode, Rerank, Result, Retention, Retrieval, Strategy,
};
use serde::{Deserialize, Serialize};

/// Turns a session store keeps of a session, whatever one turn's `window`: the bound on a
/// session's size, and the largest window a turn may ask for.
pub const REMEMBERED_TURNS: usize = 10_000;

/// The longest session time-to-live accepted, in seconds (ten years): stores keep expiry
/// times in milliseconds, and a longer one is a mistake rather than a wish.
pub const MAX_SESSION_TTL: u64 = 315_360_000;

/// Default of [`TurnSettings::group_margin`] (declared with the setting in
/// [`TurnOverrides`](crate::TurnOverrides)).
pub const DEFAULT_GROUP_MARGIN: f32 = TurnSettings::DEFAULT.group_margin;

/// Default of [`TurnSettings::relevance_floor`] (declared with the setting in
/// [`TurnOverrides`](crate::TurnOverrides)).
pub const DEFAULT_RELEVANCE_FLOOR: f32 = TurnSettings::DEFAULT.relevance_floor;

/// Default of [`TurnSettings::engaged_prior`] (declared with the setting in
/// [`TurnOverrides`](crate::TurnOverrides)).
pub const DEFAULT_ENGAGED_PRIOR: f32 = TurnSettings::DEFAULT.engaged_prior;

/// Default of [`TurnSettings::near_duplicate`] (declared with the setting in
/// [`TurnOverrides`](crate::TurnOverrides)).
pub const DEFAULT_NEAR_DUPLICATE: f32 = TurnSettings::DEFAULT.near_duplicate;

/// The settings of one turn: what flags, config and requests choose, checked by
/// [`TurnSettings::validate`] (the engine checks them at the start of every turn).
///
/// Serialised inside each trace ([`EffectiveSettings`]). The serde defaults are what a field
/// missing from a trace written before it existed meant then; `ttl_secs` and `mode` are not
/// part of a trace (the intent is recorded on its own).
///
/// Made from a front's input by [`TurnOverrides::apply`](crate::TurnOverrides::apply). Each
/// field is a setting of [`TurnOverrides`](crate::TurnOverrides), declared there with its
/// default ([`TurnSettings::DEFAULT`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnSettings {
    /// Who keeps earlier contexts: `engine` (the default) or `client`. Traces from before
    /// memory modes read as `client`: nothing was carried then.
    #[serde(default = "memory_before_modes")]
    pub memory: Memory,
    /// Which of the seed's retrieval paths the turn takes.
    pub strategy: Strategy,
    /// What the exclusion set is made of (`engine` memory: always chunks).
    pub granularity: Granularity,
    /// Which ids a turn consumes: shown or cited.
    pub consumption: Consumption,
    /// Turns whose ids are excluded; 0 = all.
    pub window: usize,
    /// Documents per search (chunks when the strategy does not group).
    pub limit: usize,
    /// Chunks per document at most (a hard cap): a further chunk of a document is kept only
    /// when it scores within `group_margin` of the document's best or touches a kept one.
    pub group_size: usize,
    /// Cosine distance from a document's best chunk within which a further chunk of the
    /// same document is kept (up to `group_size`); 0 keeps ties only.
    #[serde(default)]
    pub group_margin: f32,
    /// Fewer unique documents than this triggers a deeper search.
    pub min_documents: usize,
    /// A block enters the context only when its score is at least this share of the turn's
    /// best (0 = off): the budget is filled by rank down to it, `limit` caps the results.
    /// Traces from before it read 0: nothing was held back.
    #[serde(default)]
    pub relevance_floor: f32,
    /// Added to the score of a follow-up's new candidates from documents the window already
    /// showed or cited (their unshown chunks), before the turn ranks, floors and fills.
    /// Traces from before it read 0.
    #[serde(default)]
    pub engaged_prior: f32,
    /// A chunk at least this share of whose word 3-grams a better chunk of the turn holds is
    /// left out as a near-duplicate (recorded in the trace); 0 = identical text only. Only
    /// where identical text is dropped (strategies that exclude or group, and reshows).
    /// Traces from before it read 0.
    #[serde(default)]
    pub near_duplicate: f32,
    /// Maximal marginal relevance over the candidates, after exclusion and before dedupe: 0
    /// ranks by relevance alone (off), 1 by novelty alone; in between each next candidate is
    /// the one best at `(1 − diversity) × relevance − diversity × its highest cosine to
    /// those already ranked` (Qdrant's `mmr.diversity`). Not written while 0; traces from
    /// before it read 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub diversity: f32,
    /// `remote`: the candidates are re-ordered by the configured rerank endpoint before
    /// dedupe, falling back to the search's order when it fails or is late. Not written while
    /// `off`; traces from before it read `off`.
    #[serde(default, skip_serializing_if = "Rerank::is_off")]
    pub rerank: Rerank,
    /// `sentences`: each new block keeps the sentences that carry the turn, its cuts marked
    /// with `…`, before the context is filled. Not written while `off`; traces from before it
    /// read `off`.
    #[serde(default, skip_serializing_if = "Compress::is_off")]
    pub compress: Compress,
    /// `client` memory: whether the result slots the working set's ranking chunks would take
    /// go to new sources (`refill`) or stay theirs, as pointers (`keep`: the MCP search
    /// tool's). Not written while `refill`; traces from before it read `refill`.
    #[serde(default, skip_serializing_if = "FreedSlots::is_refill")]
    pub freed_slots: FreedSlots,
    /// Context budget in tokens, block headers included.
    pub budget: usize,
    /// Session time-to-live in seconds; 0 = never expires.
    #[serde(skip)]
    pub session_ttl: u64,
    /// The intent the turn runs with: `auto` classifies the question.
    #[serde(skip)]
    pub mode: Mode,
    /// When the search query mixes in the user's earlier questions (traces from before it
    /// could: `off`).
    #[serde(default = "query_before_mixing")]
    pub conversation_query: ConversationQuery,
    /// Dense, lexical (BM25) or hybrid search.
    #[serde(default)]
    pub retrieval: Retrieval,
    /// How hybrid search fuses its two sides.
    #[serde(default)]
    pub fusion: Fusion,
    /// The metadata a chunk must match to be searched, shown, carried or pointed to
    /// (DESIGN §8): the standing filter of the settings and the turn's own, both holding.
    #[serde(default, skip_serializing_if = "Filter::is_all", deserialize_with = "Filter::deserialize_stored")]
    pub filter: Filter,
    /// Whether a question with earlier turns is rewritten into a standalone query by the
    /// condenser endpoint before the search (traces from before it read `off`).
    #[serde(default)]
    pub condense: Condense,
}

impl TurnSettings {
    /// Checks ranges; the message says which setting and what is accepted.
    pub fn validate(&self) -> Result<()> {
        let range = |name: &str, v: usize, lo: usize, hi: usize| {
            if v < lo || v > hi {
                Err(Error::InvalidInput(format!("{name} must be between {lo} and {hi}, got {v}")))
            } else {
                Ok(())
            }
        };
        range("limit", self.limit, 1, 1_000)?;
        range("group_size", self.group_size, 1, 100)?;
        range("min_documents", self.min_documents, 0, 1_000)?;
        range("budget", self.budget, 16, 1_000_000)?;
        range("window", self.window, 0, REMEMBERED_TURNS)?;
        if self.session_ttl > MAX_SESSION_TTL {
            return Err(Error::InvalidInput(format!(
                "session_ttl must be at most {MAX_SESSION_TTL} seconds (ten years; 0 = never expires), got {}",
                self.session_ttl
            )));
        }
        let share = |name: &str, v: f32, hi: f32, what: &str| {
            if v.is_finite() && (0.0..=hi).contains(&v) {
                Ok(())
            } else {
                Err(Error::InvalidInput(format!("{name} must be between 0 and {hi} ({what}), got {v}")))
            }
        };
        share("group_margin", self.group_margin, 2.0, "a cosine distance")?;
        share("engaged_prior", self.engaged_prior, 1.0, "added to a cosine score")?;
        share("relevance_floor", self.relevance_floor, 1.0, "a share of the turn's best score; 0 = off")?;
        share(
            "near_duplicate",
            self.near_duplicate,
            1.0,
            "a share of a chunk's word 3-grams; 0 = identical text only",
        )?;
        share("diversity", self.diversity, 1.0, "0 = relevance only (off), 1 = novelty only")?;
        Ok(())
    }

    /// What the session keeps: its last [`REMEMBERED_TURNS`] turns (the largest `window` a
    /// turn may ask for) and the time-to-live. `window` is applied when a turn reads the
    /// session, never when it writes: one request's window must not change what every later
    /// turn of the session remembers (a turn with `window 1` once trimmed the stored working
    /// set for good).
    pub fn retention(&self) -> Retention {
        Retention { window: REMEMBERED_TURNS, ttl_secs: self.session_ttl }
    }

    /// The settings as the turn ran with them, for its trace. `session_ttl` and `mode` are not
    /// recorded (a trace holds the intent itself): they are 0 and `auto` here, as a stored
    /// trace reads back.
    pub fn effective(&self, tokenizer: &str) -> EffectiveSettings {
        let mut turn = TurnSettings { session_ttl: 0, mode: Mode::Auto, ..self.clone() };
        // `engine` memory excludes and scores chunks whatever the setting says.
        if turn.memory == Memory::Engine {
            turn.granularity = Granularity::Chunk;
        }
        EffectiveSettings { turn, tokenizer: tokenizer.into() }
    }
}

fn is_zero(x: &f32) -> bool {
    *x == 0.0
}

fn query_before_mixing() -> ConversationQuery {
    ConversationQuery::Off
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effective_settings_read_back_as_written_in_one_flat_object() {
        let s = TurnSettings {
            mode: Mode::New,
            session_ttl: 60,
            memory: Memory::Client,
            granularity: Granularity::Document,
            ..Default::default()
        };
        let e = s.effective("cl100k_base");
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(serde_json::from_str::<EffectiveSettings>(&json).unwrap(), e);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!((v["granularity"].as_str(), v["memory"].as_str()), (Some("document"), Some("client")));
        assert_eq!((v["tokenizer"].as_str(), v["strategy"].as_str()), (Some("cl100k_base"), Some("exclude")));
        assert!(v.get("session_ttl").is_none() && v.get("mode").is_none() && v.get("turn").is_none(), "{v}");
        // `engine` memory records chunk granularity, whatever was asked.
        let engine = TurnSettings { memory: Memory::Engine, ..s }.effective("cl100k_base");
        assert_eq!(engine.turn.granularity, Granularity::Chunk);
    }

    /// A filter at the input bounds prints one level deeper (`nin` as `not`), and a standing
    /// and a turn filter joined may exceed them: a trace that holds one still reads back.
    #[test]
    fn a_trace_reads_back_a_filter_at_the_bounds() {
        let deepest = format!(
            "{}{}{}",
            r#"{"not":"#.repeat(crate::MAX_FILTER_DEPTH),
            r#"{"year":{"nin":[1,2]},"a":{"gte":1,"lt":2}}"#,
            "}".repeat(crate::MAX_FILTER_DEPTH)
        );
        let f = Filter::parse(&deepest).unwrap();
        assert!(Filter::parse(&f.to_json_string()).is_err(), "printed, it exceeds the input bounds");
        let s = TurnSettings { filter: f.clone().and(f), ..Default::default() };
        let e = s.effective("cl100k_base");
        let back: EffectiveSettings = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(back, e);
    }
}
