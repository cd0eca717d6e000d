//! The turn's settings live in `core` ([`TurnSettings`], the modes); what is only the
//! engine's is here: the question's limits and the mixed query's weights.

pub use ragctx_core::{Consumption, ConversationQuery, Granularity, Strategy, TurnSettings, DEFAULT_GROUP_MARGIN};
use ragctx_core::{Error, Result};

/// Longest question accepted, in characters.
pub const MAX_QUESTION_CHARS: usize = 4_000;

/// Weights of the question and the (up to) two user questions before it in a mixed query:
/// their embeddings are summed with these weights and normalised. Measured on MTRAG against
/// 1 : ½ : ¼, 1 : 0.35 : 0.15, 1 : 0.2 : 0.1, 1 : 0.15 : 0.075 and one earlier question only
/// (bench/README.md): the lighter mix keeps as much evidence with fewer tokens.
pub const MIX_WEIGHTS: [f32; 3] = [1.0, 0.25, 0.125];

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
