//! The settings a layer gives a turn — a flag, an environment variable, a config file, an
//! HTTP body, a Python call — declared once, typed once: every front reads its layer into a
//! [`TurnOverrides`] and [`TurnOverrides::apply`] makes the validated [`TurnSettings`].

use crate::{
    Compress, Condense, Consumption, ConversationQuery, Error, Filter, FreedSlots, Fusion, Granularity, Memory, Mode,
    Rerank, Result, Retrieval, Strategy, TurnSettings,
};
use serde::Deserialize;
use std::str::FromStr;

/// How a layer's value meets the value below it: it replaces it, except a filter, which holds
/// together with it (a layer narrows the standing filter, never widens it).
/// Also names the JSON type of the value, for the HTTP API's schema.
trait Layered: Sized {
    const JSON_TYPE: &'static str = "string";
    fn onto(self, _below: &Self) -> Self {
        self
    }
}

impl Layered for usize {
    const JSON_TYPE: &'static str = "integer";
}
impl Layered for u64 {
    const JSON_TYPE: &'static str = "integer";
}
impl Layered for f32 {
    const JSON_TYPE: &'static str = "number";
}
impl Layered for Mode {}
impl Layered for Memory {}
impl Layered for ConversationQuery {}
impl Layered for Strategy {}
impl Layered for Retrieval {}
impl Layered for Fusion {}
impl Layered for Granularity {}
impl Layered for Consumption {}
impl Layered for Condense {}
impl Layered for Rerank {}
impl Layered for Compress {}
impl Layered for FreedSlots {}
impl Layered for Filter {
    const JSON_TYPE: &'static str = "object";
    fn onto(self, below: &Filter) -> Filter {
        below.clone().and(self)
    }
}

fn over<T: Layered>(later: Option<T>, earlier: Option<T>) -> Option<T> {
    match (later, earlier) {
        (Some(l), Some(e)) => Some(l.onto(&e)),
        (l, e) => l.or(e),
    }
}

/// Reads `RAGCTX_<NAME>` through `var` (the caller's environment: this crate reads none):
/// unset or empty is no value; a bad one names the variable and says what is accepted, in the
/// words a flag's error uses.
fn var_value<T: FromStr>(var: &dyn Fn(&str) -> Option<String>, field: &str) -> Result<Option<T>>
where
    T::Err: std::fmt::Display,
{
    let name = format!("RAGCTX_{}", field.to_ascii_uppercase());
    match var(&name).filter(|v| !v.is_empty()) {
        Some(v) => v.parse().map(Some).map_err(|e| Error::InvalidInput(format!("{name}={v:?}: {e}"))),
        None => Ok(None),
    }
}

/// Declares [`TurnOverrides`] from one list: the struct (serde for config files, HTTP bodies
/// and Python keywords; clap for flags with the `clap` feature; the doc comments are the
/// flags' help), [`TurnOverrides::KEYS`], merging, the environment layer and applying.
macro_rules! turn_overrides {
    ($($(#[doc = $doc:literal])* $field:ident: $ty:ty,)+) => {
        /// The turn settings one layer gives; `None` leaves the value below it. The same names
        /// everywhere: `--limit`, `RAGCTX_LIMIT`, `limit = 8` in a config file, `"limit": 8` in
        /// an HTTP body or a Python call.
        #[derive(Clone, Debug, Default, PartialEq)]
        #[cfg_attr(feature = "clap", derive(clap::Args))]
        pub struct TurnOverrides {
            $($(#[doc = $doc])* #[cfg_attr(feature = "clap", arg(long))] pub $field: Option<$ty>,)+
        }

        /// A map of the settings' names; an error names the setting (`mode: invalid type:
        /// integer 3, expected a string`), an unknown key is refused with the known ones.
        impl<'de> Deserialize<'de> for TurnOverrides {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                struct Fields;
                impl<'de> serde::de::Visitor<'de> for Fields {
                    type Value = TurnOverrides;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a map of turn settings")
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<TurnOverrides, A::Error> {
                        use serde::de::Error as _;
                        let mut o = TurnOverrides::default();
                        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                            match key.as_ref() {
                                $(stringify!($field) => {
                                    if o.$field.is_some() {
                                        return Err(A::Error::duplicate_field(stringify!($field)));
                                    }
                                    o.$field = map
                                        .next_value::<Option<$ty>>()
                                        .map_err(|e| A::Error::custom(format!("{}: {e}", stringify!($field))))?;
                                })+
                                other => return Err(A::Error::unknown_field(other, TurnOverrides::KEYS)),
                            }
                        }
                        Ok(o)
                    }
                }
                d.deserialize_map(Fields)
            }
        }

        impl TurnOverrides {
            /// Every turn setting's name (a flag has dashes for the underscores).
            pub const KEYS: &'static [&'static str] = &[$(stringify!($field)),+];

            /// Each setting's name, JSON type (`string`, `integer`, `number`, `object`) and
            /// help text (the flag's), for the HTTP API's schema.
            pub const FIELDS: &'static [(&'static str, &'static str, &'static str)] =
                &[$((stringify!($field), <$ty as Layered>::JSON_TYPE, concat!($($doc),*))),+];

            /// `later` wins where it gives a value; filters hold together.
            pub fn merge(self, later: TurnOverrides) -> TurnOverrides {
                TurnOverrides { $($field: over(later.$field, self.$field)),+ }
            }

            /// Each setting from a variable `RAGCTX_<NAME>` (e.g. `RAGCTX_BUDGET=2000`,
            /// `RAGCTX_FILTER` as JSON text) that `var` looks up — the process environment
            /// for the fronts (`ragctx_app`), a map in tests; unset or empty is no value.
            pub fn from_vars(var: &dyn Fn(&str) -> Option<String>) -> Result<TurnOverrides> {
                Ok(TurnOverrides { $($field: var_value(var, stringify!($field))?),+ })
            }

            /// The names of the settings this layer gives.
            pub fn given(&self) -> Vec<&'static str> {
                let mut names = Vec::new();
                $(if self.$field.is_some() { names.push(stringify!($field)); })+
                names
            }

            fn set(self, s: &mut TurnSettings) {
                $(if let Some(v) = self.$field { s.$field = v.onto(&s.$field); })+
            }
        }
    };
}

turn_overrides! {
    /// auto (classify each question), new, follow_up or reshow [default: auto]
    mode: Mode,
    /// engine (ragctx builds the whole prompt, carrying earlier sources that still rank,
    /// marked) or client (your app keeps earlier contexts; they are pointed to, not re-sent)
    /// [default: engine]
    memory: Memory,
    /// always (mix the embeddings of the two previous questions into the query), follow_up
    /// (only for follow-ups) or off [default: always]
    conversation_query: ConversationQuery,
    /// exclude (exclusion inside the search, plain ranking), full (exclusion and grouping by
    /// document), group (grouping only) or none (plain top-k) [default: exclude]
    strategy: Strategy,
    /// dense (embeddings), lexical (BM25 over titles and texts) or hybrid (both, fused)
    /// [default: dense]
    retrieval: Retrieval,
    /// How hybrid retrieval fuses its sides: weighted (scaled scores), rrf (reciprocal ranks)
    /// or rescore (the union ranked by dense similarity); only with retrieval hybrid
    /// [default: weighted]
    fusion: Fusion,
    /// What client memory excludes: chunk (only the chunks shown) or document (a shown
    /// document never comes back); engine memory always excludes chunks [default: chunk]
    granularity: Granularity,
    /// Which ids a turn consumes: shown (everything that entered the context) or cited (only
    /// what the answer cited) [default: shown]
    consumption: Consumption,
    /// Earlier turns whose chunks are excluded (and, in engine memory, whose exchanges the
    /// prompt may carry); 0 = all the session remembers [default: 0]
    window: usize,
    /// Search results per turn at most: chunks, or documents when the strategy groups (full,
    /// group) — a cap: the budget and relevance_floor decide how many are shown; the working
    /// set carried or pointed to is capped at limit × group_size chunks [default: 24]
    limit: usize,
    /// Chunks per document at most when the strategy groups, and the working set's cap
    /// (limit × group_size chunks) [default: 3]
    group_size: usize,
    /// A further chunk of a document is kept when it scores within this cosine distance of
    /// the document's best (strategies that group, and reshows) [default: 0.1]
    group_margin: f32,
    /// Fewer distinct documents than this among the results triggers a deeper search
    /// (capped at limit) [default: 3]
    min_documents: usize,
    /// The budget is filled by rank down to this share of the turn's best score: a weaker
    /// block stays out however much room is left; 0 = off (fill up to limit) [default: 0.6]
    relevance_floor: f32,
    /// Added to the score of a follow-up's new candidates from documents the conversation
    /// already showed or cited, so their other passages rank higher; 0 = off [default: 0.05]
    engaged_prior: f32,
    /// A chunk at least this share of whose word 3-grams a better chunk of the turn holds is
    /// left out as a near-duplicate, recorded in the trace's duplicates; 0 = identical text
    /// only [default: 0.8]
    near_duplicate: f32,
    /// Maximal marginal relevance over the candidates before dedupe: 0 = relevance only
    /// (off), 1 = novelty only; in between, each next candidate trades relevance against its
    /// highest cosine to those ranked before it [default: 0]
    diversity: f32,
    /// off, or remote: the candidates are re-ordered by the rerank endpoint (rerank_url; TEI,
    /// Cohere, Jina or llama.cpp shapes) before dedupe, falling back to the search's order
    /// when it fails or is late (docs/turns.md) [default: off]
    rerank: Rerank,
    /// off, or sentences: each new block keeps the sentences that share the question's terms
    /// (with a neighbour one leans on), its cuts marked with …, and the tokens freed go to
    /// further sources under the same budget; reshows and open show blocks whole
    /// (docs/turns.md) [default: off]
    compress: Compress,
    /// client memory: refill (the result slots the session's held chunks would take go to new
    /// sources) or keep (they stay theirs, as pointers: a turn returns only what ranks in the
    /// top limit; the MCP search tool's) [default: refill]
    freed_slots: FreedSlots,
    /// Context budget in cl100k_base tokens, block headers (and in engine memory the
    /// conversation) included [default: 6000]
    budget: usize,
    /// Session time-to-live in seconds, 0 = never expires, at most ten years [default: 86400]
    session_ttl: u64,
    /// Metadata filter, JSON: {"topic": "pests"}, {"year": {"gte": 2020}},
    /// {"tags": {"in": [..]}}, {"and"|"or": [..]}, {"not": {..}} (docs/filters.md); it holds
    /// together with the filters of the layers below (a config's standing filter)
    filter: Filter,
    /// off, or openai: a question with earlier turns is rewritten into a standalone search
    /// query by the condenser endpoint (condense_url, condense_model; docs/condense.md),
    /// falling back to the question when the model fails or is late [default: off]
    condense: Condense,
}

impl TurnOverrides {
    /// `base` with this layer's settings: checked as a whole ([`TurnSettings::validate`]),
    /// and a setting this layer gives that would do nothing in the turn it makes is refused
    /// (a silently ignored setting reads as a result it did not produce).
    pub fn apply(self, base: &TurnSettings) -> Result<TurnSettings> {
        self.refuse_idle(base)?;
        let mut s = base.clone();
        self.set(&mut s);
        s.validate()?;
        Ok(s)
    }

    /// The settings this layer gives that would do nothing over `base` (in the memory and
    /// retrieval the turn ends up with).
    fn refuse_idle(&self, base: &TurnSettings) -> Result<()> {
        let memory = self.memory.unwrap_or(base.memory);
        let retrieval = self.retrieval.unwrap_or(base.retrieval);
        if self.granularity == Some(Granularity::Document) && memory == Memory::Engine {
            return Err(Error::InvalidInput(
                "granularity document does nothing with memory engine, which excludes and carries chunks: use memory client, or leave granularity at chunk".into(),
            ));
        }
        if self.freed_slots == Some(FreedSlots::Keep) && memory == Memory::Engine {
            return Err(Error::InvalidInput(
                "freed_slots keep applies to memory client only (engine memory carries the chunks that rank instead of pointing to them)".into(),
            ));
        }
        if self.fusion.is_some() && retrieval != Retrieval::Hybrid {
            return Err(Error::InvalidInput(format!(
                "fusion applies to retrieval hybrid only (this turn's retrieval is {retrieval})"
            )));
        }
        Ok(())
    }
}

impl FromStr for Filter {
    type Err = Error;
    /// JSON text (`--filter`, `RAGCTX_FILTER`).
    fn from_str(text: &str) -> Result<Filter> {
        Filter::parse(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> std::result::Result<TurnOverrides, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn a_layer_replaces_values_and_narrows_filters() {
        let below = json(r#"{"limit": 4, "strategy": "full", "filter": {"a": 1}}"#).unwrap();
        let above = json(r#"{"limit": 6, "filter": {"b": 2}}"#).unwrap();
        let s = below.merge(above).apply(&TurnSettings::default()).unwrap();
        assert_eq!((s.limit, s.strategy), (6, Strategy::Full));
        assert_eq!(s.filter, Filter::parse(r#"{"and": [{"a": 1}, {"b": 2}]}"#).unwrap());
    }

    #[test]
    fn names_and_values_are_checked_in_the_same_words() {
        assert!(json(r#"{"limitt": 4}"#).unwrap_err().contains("unknown field `limitt`"));
        let e = json(r#"{"strategy": "fast"}"#).unwrap_err();
        assert!(e.contains(r#"unknown strategy "fast": use none, group, exclude, full"#), "{e}");
        assert_eq!(
            "fast".parse::<Strategy>().unwrap_err().to_string(),
            r#"invalid input: unknown strategy "fast": use none, group, exclude, full"#
        );
        let zero = json(r#"{"limit": 0}"#).unwrap().apply(&TurnSettings::default()).unwrap_err();
        assert!(zero.to_string().contains("limit must be between 1 and 1000, got 0"), "{zero}");
    }

    #[test]
    fn auto_is_a_mode_and_forces_nothing() {
        let s = json(r#"{"mode": "auto"}"#).unwrap().apply(&TurnSettings::default()).unwrap();
        assert_eq!((s.mode, s.mode.forced()), (Mode::Auto, None));
        let s = json(r#"{"mode": "follow_up"}"#).unwrap().apply(&TurnSettings::default()).unwrap();
        assert_eq!(s.mode.forced(), Some(crate::Intent::FollowUp));
    }

    #[test]
    fn a_setting_that_would_do_nothing_is_refused_in_its_own_layer_only() {
        let d = TurnSettings::default();
        let e = json(r#"{"granularity": "document"}"#).unwrap().apply(&d).unwrap_err();
        assert!(e.to_string().contains("granularity document does nothing with memory engine"), "{e}");
        json(r#"{"granularity": "document", "memory": "client"}"#).unwrap().apply(&d).unwrap();
        let e = json(r#"{"fusion": "rrf"}"#).unwrap().apply(&d).unwrap_err();
        assert!(e.to_string().contains("fusion applies to retrieval hybrid only"), "{e}");
        // A config made hybrid with rrf; one request asks for dense: its own layer gave no
        // fusion, so nothing it gave is idle.
        let hybrid = json(r#"{"retrieval": "hybrid", "fusion": "rrf"}"#).unwrap().apply(&d).unwrap();
        let dense = json(r#"{"retrieval": "dense"}"#).unwrap().apply(&hybrid).unwrap();
        assert_eq!(dense.retrieval, Retrieval::Dense);
    }

    #[test]
    fn every_key_sets_its_own_field() {
        // A value for each key that differs from the default: a key the macro forgot to
        // apply leaves the settings at their default and fails here.
        let values = serde_json::json!({
            "mode": "new", "memory": "client", "conversation_query": "off", "strategy": "full",
            "retrieval": "hybrid", "fusion": "rrf", "granularity": "document", "consumption": "cited",
            "window": 2, "limit": 5, "group_size": 2, "group_margin": 0.3, "min_documents": 1, "relevance_floor": 0.5, "engaged_prior": 0.1, "near_duplicate": 0.5, "diversity": 0.3, "rerank": "remote", "compress": "sentences", "freed_slots": "keep",
            "budget": 900, "session_ttl": 60, "filter": {"a": 1}, "condense": "openai"
        });
        assert_eq!(values.as_object().unwrap().len(), TurnOverrides::KEYS.len());
        let d = TurnSettings::default();
        for key in TurnOverrides::KEYS {
            let mut one = serde_json::Map::new();
            one.insert(key.to_string(), values[key].clone());
            // Settings that only act in some modes are given with the mode they act in.
            match *key {
                "granularity" => one.insert("memory".into(), "client".into()),
                "fusion" => one.insert("retrieval".into(), "hybrid".into()),
                "freed_slots" => one.insert("memory".into(), "client".into()),
                _ => None,
            };
            let o: TurnOverrides = serde_json::from_value(serde_json::Value::Object(one)).unwrap();
            assert!(o.given().contains(key));
            let s = o.apply(&d).unwrap();
            let changed = serde_json::to_value(&s).unwrap() != serde_json::to_value(&d).unwrap()
                || s.mode != d.mode
                || s.session_ttl != d.session_ttl;
            assert!(changed, "{key} changed nothing");
        }
    }
}
