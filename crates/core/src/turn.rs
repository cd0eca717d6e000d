//! The settings of one turn, and their check.

use crate::{ConversationQuery, EffectiveSettings, Error, Granularity, Memory, Mode, Result, Retention, TurnSettings};

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

pub(crate) fn is_zero(x: &f32) -> bool {
    *x == 0.0
}

pub(crate) fn query_before_mixing() -> ConversationQuery {
    ConversationQuery::Off
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Filter;

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
