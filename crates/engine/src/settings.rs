use ragctx_core::{EffectiveSettings, Error, Fusion, Intent, Memory, Result, Retention, Retrieval};
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// Which of the seed's retrieval paths a turn takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Plain top-k chunks: no grouping, no exclusion.
    None,
    /// Group by document (one quota per document), no exclusion.
    Group,
    /// Exclude what the session has seen, no grouping: the default (the memory mode
    /// decides what becomes of what was excluded).
    Exclude,
    /// Group and exclude: the seed's recipe.
    Full,
}

impl Strategy {
    pub fn groups(self) -> bool {
        matches!(self, Strategy::Group | Strategy::Full)
    }
    pub fn excludes(self) -> bool {
        matches!(self, Strategy::Exclude | Strategy::Full)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::None => "none",
            Strategy::Group => "group",
            Strategy::Exclude => "exclude",
            Strategy::Full => "full",
        }
    }
}

/// What the exclusion set is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    /// A shown document never comes back.
    Document,
    /// Only shown chunks are excluded; other chunks of the same document may come back.
    Chunk,
}

/// Which ids a turn consumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Consumption {
    /// Everything that entered the context.
    Shown,
    /// Only what the answer cited.
    Cited,
}

macro_rules! parse_enum {
    ($t:ty, $what:literal, $($s:literal => $v:expr),+) => {
        impl FromStr for $t {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                match s {
                    $($s => Ok($v),)+
                    _ => Err(Error::InvalidInput(format!(concat!("unknown ", $what, " {:?}: use {}"), s, [$($s),+].join(", ")))),
                }
            }
        }
    };
}
parse_enum!(Strategy, "strategy", "full" => Strategy::Full, "group" => Strategy::Group, "exclude" => Strategy::Exclude, "none" => Strategy::None);
parse_enum!(Granularity, "granularity", "document" => Granularity::Document, "chunk" => Granularity::Chunk);
parse_enum!(Consumption, "consumption", "shown" => Consumption::Shown, "cited" => Consumption::Cited);
parse_enum!(ConversationQuery, "conversation query", "off" => ConversationQuery::Off, "follow_up" => ConversationQuery::FollowUp, "always" => ConversationQuery::Always);

/// Longest question accepted, in characters.
pub const MAX_QUESTION_CHARS: usize = 4_000;

/// When the query mixes in the user's earlier questions (DESIGN §2.3: "the query for a
/// follow-up is built from the conversation where measurement shows that it helps").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConversationQuery {
    /// The question alone.
    Off,
    /// Questions classified `follow_up` mix in the two before them.
    FollowUp,
    /// Every question with history mixes in the two before it.
    Always,
}

impl ConversationQuery {
    pub fn as_str(self) -> &'static str {
        match self {
            ConversationQuery::Off => "off",
            ConversationQuery::FollowUp => "follow_up",
            ConversationQuery::Always => "always",
        }
    }
}

/// Weights of the question and the (up to) two user questions before it in a mixed query:
/// their embeddings are summed with these weights and normalised. Measured on MTRAG against
/// 1 : ½ : ¼, 1 : 0.35 : 0.15, 1 : 0.2 : 0.1, 1 : 0.15 : 0.075 and one earlier question only
/// (bench/README.md): the lighter mix keeps as much evidence with fewer tokens.
pub const MIX_WEIGHTS: [f32; 3] = [1.0, 0.25, 0.125];

/// Default of [`TurnSettings::group_margin`], chosen on MTRAG (bench/README.md).
pub const DEFAULT_GROUP_MARGIN: f32 = 0.1;

/// The settings of one turn, validated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnSettings {
    /// Who keeps earlier contexts: `engine` (the default) or `client`.
    pub memory: Memory,
    pub strategy: Strategy,
    pub granularity: Granularity,
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
    pub group_margin: f32,
    /// Fewer unique documents than this triggers a deeper search.
    pub min_documents: usize,
    /// Context budget in tokens, block headers included.
    pub budget: usize,
    /// Session time-to-live in seconds; 0 = never expires.
    pub ttl_secs: u64,
    /// Forced intent; `None` = classify the question.
    pub mode: Option<Intent>,
    /// When the search query mixes in the user's earlier questions.
    pub conversation_query: ConversationQuery,
    /// Dense, lexical (BM25) or hybrid search.
    #[serde(default)]
    pub retrieval: Retrieval,
    /// How hybrid search fuses its two sides.
    #[serde(default)]
    pub fusion: Fusion,
}

impl Default for TurnSettings {
    fn default() -> Self {
        TurnSettings {
            memory: Memory::Engine,
            // Exclusion without document grouping: on MTRAG one-chunk-per-document grouping
            // keeps less evidence per token than plain ranking, with or without a margin
            // (bench/README.md, "Memory modes"); `full` groups, with `group_margin`.
            strategy: Strategy::Exclude,
            // Chunks, not documents: MTRAG follow-ups return to documents already shown
            // (available recall 0.471 vs 0.345 with document exclusion, bench/README.md).
            granularity: Granularity::Chunk,
            consumption: Consumption::Shown,
            window: 0,
            limit: 8,
            group_size: 3,
            group_margin: DEFAULT_GROUP_MARGIN,
            min_documents: 3,
            budget: 6_000,
            ttl_secs: 86_400,
            mode: None,
            conversation_query: ConversationQuery::Always,
            retrieval: Retrieval::Dense,
            fusion: Fusion::Weighted,
        }
    }
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
        range("window", self.window, 0, 10_000)?;
        if !(self.group_margin.is_finite() && (0.0..=2.0).contains(&self.group_margin)) {
            return Err(Error::InvalidInput(format!(
                "group_margin must be between 0 and 2 (a cosine distance), got {}",
                self.group_margin
            )));
        }
        Ok(())
    }

    pub fn retention(&self) -> Retention {
        Retention { window: self.window, ttl_secs: self.ttl_secs }
    }

    pub fn effective(&self, tokenizer: &str) -> EffectiveSettings {
        EffectiveSettings {
            strategy: self.strategy.as_str().into(),
            // `engine` memory excludes and scores chunks whatever the setting says.
            granularity: match self.memory {
                Memory::Engine => "chunk".into(),
                Memory::Client => format!("{:?}", self.granularity).to_lowercase(),
            },
            consumption: format!("{:?}", self.consumption).to_lowercase(),
            window: self.window,
            limit: self.limit,
            group_size: self.group_size,
            min_documents: self.min_documents,
            budget: self.budget,
            tokenizer: tokenizer.into(),
            memory: self.memory.as_str().into(),
            group_margin: self.group_margin,
            conversation_query: self.conversation_query.as_str().into(),
            retrieval: self.retrieval,
            fusion: self.fusion,
        }
    }
}

/// Rejects empty, oversized or control-character-only questions.
pub fn validate_question(q: &str) -> Result<&str> {
    let t = q.trim();
    if t.is_empty() {
        return Err(Error::InvalidInput("the question is empty".into()));
    }
    let n = t.chars().count();
    if n > MAX_QUESTION_CHARS {
        return Err(Error::InvalidInput(format!("the question has {n} characters; the limit is {MAX_QUESTION_CHARS}")));
    }
    Ok(t)
}
