//! The turn's settings live in `core` ([`TurnSettings`], the modes); what is only the
//! engine's is here: the question's limits and the mixed query's weights.

pub use ragctx_core::{Consumption, ConversationQuery, Granularity, Strategy, TurnSettings, DEFAULT_GROUP_MARGIN};
use ragctx_core::{Error, Result};
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// Longest question accepted, in characters.
pub const MAX_QUESTION_CHARS: usize = 4_000;

/// Weights of the question and the (up to) two user questions before it in a mixed query:
/// their embeddings are summed with these weights and normalised. Measured on MTRAG against
/// 1 : ½ : ¼, 1 : 0.35 : 0.15, 1 : 0.2 : 0.1, 1 : 0.15 : 0.075 and one earlier question only
/// (bench/README.md): the lighter mix keeps as much evidence with fewer tokens.
pub const MIX_WEIGHTS: [f32; 3] = [1.0, 0.25, 0.125];

/// How a turn's search vector is made when it mixes (`conversation_query`): the question's
/// embedding, plus the (up to) two user questions before it, newest first, and the centroid of
/// the chunks the previous turn showed, each times its weight, summed and normalised.
/// [`QueryWeights::HAND_SET`] is the 1 : ¼ : ⅛ mix chosen by hand; [`QueryWeights::fitted`]
/// is `crates/engine/query-weights.json`, fitted on MTRAG by `ragctx eval fit-query` (the
/// command and its cross-validated figures are in that file).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueryWeights {
    /// Weights of the question before this one and the one before that (the question's is 1).
    pub earlier: [f32; 2],
    /// Weight of the centroid of the previous turn's shown chunks.
    pub working_set: f32,
}

/// The fitted weights' file, compiled in.
const FITTED: &str = include_str!("../query-weights.json");

impl QueryWeights {
    /// The mix chosen by hand before the learned query ([`MIX_WEIGHTS`]' earlier questions).
    pub const HAND_SET: QueryWeights = QueryWeights { earlier: [MIX_WEIGHTS[1], MIX_WEIGHTS[2]], working_set: 0.0 };

    /// The weights `ragctx eval fit-query` fitted, shipped in `query-weights.json`.
    pub fn fitted() -> QueryWeights {
        static W: OnceLock<QueryWeights> = OnceLock::new();
        *W.get_or_init(|| QueryWeights::parse(FITTED).expect("query-weights.json is checked by a unit test"))
    }

    /// Reads the `weights` of a weights file (the format `ragctx eval fit-query` writes).
    pub fn parse(text: &str) -> Result<QueryWeights> {
        #[derive(Deserialize)]
        struct File {
            weights: QueryWeights,
        }
        let f: File = serde_json::from_str(text).map_err(|e| {
            Error::InvalidInput(format!(
                "query weights: {e} (expected {{\"weights\": {{\"earlier\": [a, b], \"working_set\": c}}}})"
            ))
        })?;
        let w = f.weights;
        if !w.earlier.iter().chain([&w.working_set]).all(|x| x.is_finite() && (0.0..=4.0).contains(x)) {
            return Err(Error::InvalidInput(format!("query weights {w:?}: each must be between 0 and 4")));
        }
        Ok(w)
    }
}

impl Default for QueryWeights {
    fn default() -> Self {
        QueryWeights::fitted()
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
