//! The settings a layer gives a turn — a flag, an environment variable, a config file, an
//! HTTP body, a Python call — declared once, typed once: every front reads its layer into a
//! [`TurnOverrides`] and [`TurnOverrides::apply`] makes the validated [`TurnSettings`].

use crate::{
    Compress, Condense, Consumption, ConversationQuery, Error, Filter, FreedSlots, Fusion, Granularity, Memory, Mode,
    Rerank, Result, Retrieval, Strategy,
};
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// How a layer's value meets the value below it: it replaces it, except a filter, which holds
/// together with it (a layer narrows the standing filter, never widens it).
/// Also names the JSON type of the value, for the HTTP API's schema, and shows it as a default.
trait Layered: Sized {
    const JSON_TYPE: &'static str;
    /// The value as `--help` and docs/configuration.md show a default: what a flag would give.
    fn shown(&self) -> String;
    fn onto(self, _below: &Self) -> Self {
        self
    }
}

/// Values that replace the one below them and show as they print.
macro_rules! replaced {
    ($($ty:ty: $json:literal),+ $(,)?) => {
        $(impl Layered for $ty {
            const JSON_TYPE: &'static str = $json;
            fn shown(&self) -> String {
                self.to_string()
            }
        })+
    };
}

replaced! {
    usize: "integer", u64: "integer", f32: "number", Mode: "string", Memory: "string",
    ConversationQuery: "string", Strategy: "string", Retrieval: "string", Fusion: "string",
    Granularity: "string", Consumption: "string", Condense: "string", Rerank: "string",
    Compress: "string", FreedSlots: "string",
}

impl Layered for Filter {
    const JSON_TYPE: &'static str = "object";
    /// `none`: no filter (the one below holds as it is).
    fn shown(&self) -> String {
        if self.is_all() {
            "none".into()
        } else {
            self.to_json_string()
        }
    }
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

/// One turn setting as the fronts describe it: a flag's `--help`, the HTTP API's schema,
/// docs/configuration.md's table.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnField {
    /// The setting's name (a flag has dashes for the underscores).
    pub name: &'static str,
    /// Its JSON type: `string`, `integer`, `number` or `object`.
    pub json_type: &'static str,
    /// What it does: the doc comment of its row.
    pub doc: &'static str,
    /// Its default as a flag would give it (`auto`, `0.6`, `6000`; the filter's is `none`).
    pub default: String,
}

impl TurnField {
    fn of<T: Layered>(name: &'static str, doc: &'static str, default: &T) -> TurnField {
        TurnField { name, json_type: T::JSON_TYPE, doc: doc.trim(), default: default.shown() }
    }

    /// The flag's help and the HTTP field's description: what it does, then `[default: …]`.
    pub fn help(&self) -> String {
        format!("{} [default: {}]", self.doc, self.default)
    }
}

/// Declares [`TurnSettings`] and [`TurnOverrides`] from one list of rows, each a setting's
/// doc, how a trace stores it (`#[serde(...)]`), name, type, default (`limit: usize = 24`) and,
/// for a stage the product adds, its `off` value: the two structs (serde for traces, config
/// files, HTTP bodies and Python keywords; clap for flags with the `clap` feature, the doc and
/// the default the flag's help), [`TurnSettings::DEFAULT`], [`TurnSettings::stages_off`],
/// [`TurnOverrides::KEYS`] and [`TurnOverrides::fields`], merging, the environment layer and
/// applying. A setting is one row here.
macro_rules! turn_overrides {
    ($($(#[doc = $doc:literal])* $(#[serde($($serde:tt)*)])? $field:ident: $ty:ty = $default:expr $(; off = $off:expr)?,)+) => {
        /// The settings of one turn: what flags, config and requests choose, checked by
        /// [`TurnSettings::validate`] (the engine checks them at the start of every turn).
        ///
        /// Serialised inside each trace ([`EffectiveSettings`](crate::EffectiveSettings)). A row's serde
        /// default is what the field missing from a trace written before it existed meant then (a
        /// stage's setting: off); `session_ttl` and `mode` are not part of a trace (the intent is
        /// recorded on its own).
        ///
        /// Made from a front's input by [`TurnOverrides::apply`]. Declared with [`TurnOverrides`], one
        /// row per setting: its help, its stored form, its name, type and default
        /// ([`TurnSettings::DEFAULT`]).
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        pub struct TurnSettings {
            $($(#[doc = $doc])* $(#[serde($($serde)*)])? pub $field: $ty,)+
        }

        /// The turn settings one layer gives; `None` leaves the value below it. The same names
        /// everywhere: `--limit`, `RAGCTX_LIMIT`, `limit = 8` in a config file, `"limit": 8` in
        /// an HTTP body or a Python call.
        #[derive(Clone, Debug, Default, PartialEq)]
        #[cfg_attr(feature = "clap", derive(clap::Args))]
        pub struct TurnOverrides {
            $(
                $(#[doc = $doc])*
                #[cfg_attr(feature = "clap", arg(long, help = TurnField::of(
                    stringify!($field), concat!($($doc),*), &TurnSettings::DEFAULT.$field).help()))]
                pub $field: Option<$ty>,
            )+
        }

        impl TurnSettings {
            /// Every setting's default, declared with the setting in [`TurnOverrides`].
            pub const DEFAULT: TurnSettings = TurnSettings { $($field: $default),+ };
        }

        impl TurnSettings {
            /// These settings with every stage the product adds on top of the seed's paths
            /// switched off (each row that declares `off = …`): what the baselines compare
            /// against (the engine's `presets`).
            pub fn stages_off(self) -> TurnSettings {
                TurnSettings { $($($field: $off,)?)* ..self }
            }
        }

        impl Default for TurnSettings {
            fn default() -> Self {
                TurnSettings::DEFAULT
            }
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

            /// Each setting's name, JSON type, doc and default, in the declared order: for the
            /// HTTP API's schema and the docs.
            pub fn fields() -> Vec<TurnField> {
                vec![$(TurnField::of(stringify!($field), concat!($($doc),*), &TurnSettings::DEFAULT.$field)),+]
            }

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

// Each row: what the setting does (a flag's help, the HTTP field's description, the field's
// doc; the default is added to the help), how a trace stores it (serde: what a trace from
// before it meant), its name, type and default, and for a stage the product adds on top of
// the seed's paths its `off` value (the baselines', `TurnSettings::stages_off`); why a
// default is what it is, above its row. A new setting is one row.
turn_overrides! {
    /// auto (classify each question), new, follow_up or reshow
    #[serde(skip)]
    mode: Mode = Mode::Auto,
    /// engine (ragctx builds the whole prompt, carrying earlier sources that still rank,
    /// marked) or client (your app keeps earlier contexts; they are pointed to, not re-sent)
    // A trace from before memory modes reads `client`: nothing was carried then.
    #[serde(default = "crate::trace::memory_before_modes")]
    memory: Memory = Memory::Engine,
    /// always (mix the embeddings of the two previous questions into the query), follow_up
    /// (only for follow-ups) or off
    // A trace from before the mixing reads `off`.
    #[serde(default = "crate::turn::query_before_mixing")]
    conversation_query: ConversationQuery = ConversationQuery::Always,
    // Exclusion without document grouping: on MTRAG one-chunk-per-document grouping keeps
    // less evidence per token than plain ranking, with or without a margin (bench/README.md,
    // "Memory modes"); `full` groups, with `group_margin`.
    /// exclude (exclusion inside the search, plain ranking), full (exclusion and grouping by
    /// document), group (grouping only) or none (plain top-k)
    strategy: Strategy = Strategy::Exclude,
    /// dense (embeddings), lexical (BM25 over titles and texts) or hybrid (both, fused)
    #[serde(default)]
    retrieval: Retrieval = Retrieval::Dense,
    /// How hybrid retrieval fuses its sides: weighted (scaled scores), rrf (reciprocal ranks)
    /// or rescore (the union ranked by dense similarity); only with retrieval hybrid
    #[serde(default)]
    fusion: Fusion = Fusion::Weighted,
    // Chunks, not documents: MTRAG follow-ups return to documents already shown (available
    // recall 0.471 vs 0.345 with document exclusion, bench/README.md).
    /// What client memory excludes: chunk (only the chunks shown) or document (a shown
    /// document never comes back); engine memory always excludes chunks
    granularity: Granularity = Granularity::Chunk,
    /// Which ids a turn consumes: shown (everything that entered the context) or cited (only
    /// what the answer cited)
    consumption: Consumption = Consumption::Shown,
    /// Earlier turns whose chunks are excluded (and, in engine memory, whose exchanges the
    /// prompt may carry); 0 = all the session remembers
    window: usize = 0,
    // A cap: the budget and the relevance floor decide how many blocks a turn shows.
    /// Search results per turn at most: chunks, or documents when the strategy groups (full,
    /// group) — a cap: the budget and relevance_floor decide how many are shown; the working
    /// set carried or pointed to is capped at limit × group_size chunks
    limit: usize = 24,
    /// Chunks per document at most when the strategy groups, and the working set's cap
    /// (limit × group_size chunks)
    group_size: usize = 3,
    // Chosen on MTRAG (bench/README.md).
    /// A further chunk of a document is kept when it scores within this cosine distance of
    /// the document's best (strategies that group, and reshows)
    // A trace from before it reads 0 (ties only).
    #[serde(default)]
    group_margin: f32 = 0.1,
    /// Fewer distinct documents than this among the results triggers a deeper search
    /// (capped at limit)
    min_documents: usize = 3,
    // Chosen on MTRAG's government conversations (bench/README.md, "Budget curves").
    /// The budget is filled by rank down to this share of the turn's best score: a weaker
    /// block stays out however much room is left; 0 = off (fill up to limit)
    // A trace from before it reads 0: nothing was held back.
    #[serde(default)]
    relevance_floor: f32 = 0.6; off = 0.0,
    // bench/README.md, "Engaged documents".
    /// Added to the score of a follow-up's new candidates from documents the conversation
    /// already showed or cited, so their other passages rank higher; 0 = off
    // A trace from before it reads 0.
    #[serde(default)]
    engaged_prior: f32 = 0.05; off = 0.0,
    // The resemblance threshold web-scale near-duplicate removal commonly uses (Broder's
    // shingle resemblance; 0.8 in the MinHash deduplication of C4-style corpora), checked on
    // our hard cases (docs/evaluation.md).
    /// A chunk at least this share of whose word 3-grams a better chunk of the turn holds is
    /// left out as a near-duplicate, recorded in the trace's duplicates; 0 = identical text
    /// only
    // A trace from before it reads 0 (identical text only).
    #[serde(default)]
    near_duplicate: f32 = 0.8; off = 0.0,
    // Off until measured to help (bench/README.md, "Diversity").
    /// Maximal marginal relevance over the candidates before dedupe: 0 = relevance only
    /// (off), 1 = novelty only; in between, each next candidate trades relevance against its
    /// highest cosine to those ranked before it
    // Not written while 0; a trace from before it reads 0.
    #[serde(default, skip_serializing_if = "crate::turn::is_zero")]
    diversity: f32 = 0.0; off = 0.0,
    /// off, or remote: the candidates are re-ordered by the rerank endpoint (rerank_url; TEI,
    /// Cohere, Jina or llama.cpp shapes) before dedupe, falling back to the search's order
    /// when it fails or is late (docs/turns.md)
    // Not written while off; a trace from before it reads off.
    #[serde(default, skip_serializing_if = "Rerank::is_off")]
    rerank: Rerank = Rerank::Off; off = Rerank::Off,
    /// off, learned or sentences: each new block keeps the sentences that carry the turn —
    /// learned: those a scorer fitted on MTRAG judges so, from the sentence index (a block
    /// without one stays whole); sentences: those sharing the question's terms — with the
    /// neighbours they lean on, its cuts marked with …, and the tokens freed go to further
    /// sources under the same budget; reshows and open show blocks whole (docs/turns.md)
    // Not written while off; a trace from before it reads off.
    #[serde(default, skip_serializing_if = "Compress::is_off")]
    compress: Compress = Compress::Off; off = Compress::Off,
    /// client memory: refill (the result slots the session's held chunks would take go to new
    /// sources) or keep (they stay theirs, as pointers: a turn returns only what ranks in the
    /// top limit; the MCP search tool's)
    // Not written while refill; a trace from before it reads refill.
    #[serde(default, skip_serializing_if = "FreedSlots::is_refill")]
    freed_slots: FreedSlots = FreedSlots::Refill; off = FreedSlots::Refill,
    /// Context budget in cl100k_base tokens, block headers (and in engine memory the
    /// conversation) included
    budget: usize = 6_000,
    /// Session time-to-live in seconds, 0 = never expires, at most ten years
    #[serde(skip)]
    session_ttl: u64 = 86_400,
    /// Metadata filter, JSON: {"topic": "pests"}, {"year": {"gte": 2020}},
    /// {"tags": {"in": [..]}}, {"and"|"or": [..]}, {"not": {..}} (docs/filters.md); it holds
    /// together with the filters of the layers below (a config's standing filter)
    #[serde(default, skip_serializing_if = "Filter::is_all", deserialize_with = "Filter::deserialize_stored")]
    filter: Filter = Filter::All,
    /// off, or openai: a question with earlier turns is rewritten into a standalone search
    /// query by the condenser endpoint (condense_url, condense_model; docs/condense.md),
    /// falling back to the question when the model fails or is late
    // A trace from before it reads off.
    #[serde(default)]
    condense: Condense = Condense::Off,
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

    #[test]
    fn each_default_is_declared_once_and_shown_as_a_flag_would_give_it() {
        let fields = TurnOverrides::fields();
        assert_eq!(fields.iter().map(|f| f.name).collect::<Vec<_>>(), TurnOverrides::KEYS);
        let field = |name: &str| fields.iter().find(|f| f.name == name).unwrap();
        let shown = ["mode", "relevance_floor", "budget", "diversity", "filter"].map(|n| field(n).default.as_str());
        assert_eq!(shown, ["auto", "0.6", "6000", "0", "none"]);
        assert!(field("limit").help().ends_with("capped at limit × group_size chunks [default: 24]"));
        // Each default, given as its help shows it, is the default (the filter's `none` is
        // no filter, which is what an empty layer gives).
        for f in fields.iter().filter(|f| f.name != "filter") {
            let value = match f.json_type {
                "string" => serde_json::Value::from(f.default.as_str()),
                _ => serde_json::from_str(&f.default).unwrap(),
            };
            let layer: TurnOverrides = serde_json::from_value(serde_json::json!({ f.name: value })).unwrap();
            let mut s = TurnSettings::DEFAULT;
            layer.set(&mut s);
            assert_eq!(s, TurnSettings::DEFAULT, "{} shown as {}", f.name, f.default);
        }
    }
}
