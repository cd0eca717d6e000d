pub use ragctx_core::{Consumption, ConversationQuery, Granularity, Strategy};
use ragctx_core::{EffectiveSettings, Error, Fusion, Intent, Memory, Result, Retention, Retrieval};
use serde::{Deserialize, Serialize};

/// Longest question accepted, in characters.
pub const MAX_QUESTION_CHARS: usize = 4_000;

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
            strategy: self.strategy,
            // `engine` memory excludes and scores chunks whatever the setting says.
            granularity: match self.memory {
                Memory::Engine => Granularity::Chunk,
                Memory::Client => self.granularity,
            },
            consumption: self.consumption,
            window: self.window,
            limit: self.limit,
            group_size: self.group_size,
            min_documents: self.min_documents,
            budget: self.budget,
            tokenizer: tokenizer.into(),
            memory: Some(self.memory),
            group_margin: self.group_margin,
            conversation_query: Some(self.conversation_query),
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
