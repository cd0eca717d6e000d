use crate::{ChunkId, DocumentId, Trace};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::str::FromStr;

/// What the user wants from this turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Intent {
    /// A new question: everything already shown is excluded.
    New,
    /// More about what was just shown: other chunks of those documents are welcome.
    FollowUp,
    /// "Show me that again": exclusion is off, the previous turn's documents come back.
    Reshow,
}

impl Intent {
    /// The name used in flags, HTTP bodies and traces (`new`, `follow_up`, `reshow`).
    pub fn as_str(self) -> &'static str {
        match self {
            Intent::New => "new",
            Intent::FollowUp => "follow_up",
            Intent::Reshow => "reshow",
        }
    }
}

impl FromStr for Intent {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "new" => Ok(Intent::New),
            "follow_up" | "follow-up" => Ok(Intent::FollowUp),
            "reshow" => Ok(Intent::Reshow),
            _ => Err(crate::Error::InvalidInput(format!("unknown mode {s:?}: use auto, new, follow_up or reshow"))),
        }
    }
}

/// Who keeps the earlier contexts of a conversation (DESIGN §2), which decides what
/// "the model already has it" means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Memory {
    /// ragctx builds the whole prompt every turn (conversation, evidence, question): chunks
    /// of the working set are scored against each question and carried when they rank.
    #[default]
    Engine,
    /// The caller keeps every earlier context in the model's history: chunks shown in the
    /// window are not sent again, only pointed to.
    Client,
}

named!(Memory, "memory mode", Engine = "engine", Client = "client");

/// What a turn consumed, as remembered by the session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// The turn's number in the session (1-based), assigned by the store on commit.
    pub turn: u64,
    /// The question as the user asked it.
    pub question: String,
    /// The intent the turn ran with (classified, or forced by `mode`).
    pub intent: Intent,
    /// Chunks of the context blocks, each once, in block order: the working set, and what
    /// `shown` consumption excludes.
    pub shown_chunks: Vec<ChunkId>,
    /// Documents of those blocks, each once, in block order.
    pub shown_documents: Vec<DocumentId>,
    /// Chunks of the blocks and pointers the answer cited: what `cited` consumption excludes.
    pub cited_chunks: Vec<ChunkId>,
    /// Documents the answer cited, each once, in the order first cited.
    pub cited_documents: Vec<DocumentId>,
    /// When the turn was answered, in milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    /// The answer given, so that `engine` memory can put the conversation in the prompt.
    #[serde(default)]
    pub answer: String,
    /// The embedding of the text this turn searched with, so that later turns can mix it
    /// into their query without embedding it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_vector: Option<QuantizedVector>,
    /// Chunks this turn pointed to (`client` memory): a reshow brings them back too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pointed_chunks: Vec<ChunkId>,
    /// A `forget` step: chunks the caller no longer holds (its host compacted or dropped
    /// them), so they leave the working set and may be sent again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forgotten: Vec<ChunkId>,
}

impl TurnRecord {
    /// A `forget` step (it lists what it let go, never empty): bookkeeping, not a question —
    /// "the previous turn" of a follow-up, a reshow or the query mix is the turn before it.
    pub fn is_forget(&self) -> bool {
        !self.forgotten.is_empty()
    }
}

/// A vector in one byte per dimension and one scale: 384 dimensions take about 1.5 KB of
/// JSON instead of 4.5 KB, at a cosine of ≈ 0.9999 to the original.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QuantizedVector {
    /// The value of one step: the largest magnitude over 127 (1 for a zero vector).
    pub scale: f32,
    /// Each dimension divided by `scale`, rounded into -127..=127.
    pub values: Vec<i8>,
}

impl QuantizedVector {
    /// `v` in one byte per dimension, its largest magnitude mapped to ±127.
    pub fn quantize(v: &[f32]) -> Self {
        let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        let scale = if max > 0.0 && max.is_finite() { max / 127.0 } else { 1.0 };
        QuantizedVector { scale, values: v.iter().map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8).collect() }
    }
    /// The vector back in f32: `values[i] × scale`.
    pub fn dequantize(&self) -> Vec<f32> {
        self.values.iter().map(|&q| q as f32 * self.scale).collect()
    }
}

/// A session's memory: the last `window` turns and the session's citation markers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    /// Number of turns ever committed (the last turn's number).
    pub turn_count: u64,
    /// The remembered turns, oldest first, trimmed to the window.
    pub turns: Vec<TurnRecord>,
    /// Marker of every document this session has shown.
    pub markers: BTreeMap<DocumentId, u32>,
    /// When the last turn was committed, in milliseconds since the Unix epoch (0 before the first).
    pub updated_at_unix_ms: u64,
    /// Moved by every commit and reset (to at least the clock in µs, so a session deleted and
    /// begun again never reuses one): a turn commits only if the session is still at the
    /// version it was planned against (0 for a session that does not exist).
    #[serde(default)]
    pub version: u64,
}

/// How much of a session to keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// Turns kept for exclusion; 0 keeps all.
    pub window: usize,
    /// Seconds of inactivity after which the session (and its traces) expire; 0 = never.
    pub ttl_secs: u64,
}

/// Everything one turn writes, applied atomically by [`crate::SessionStore::commit_turn`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TurnCommit {
    /// The [`SessionState::version`] the turn was planned against: the commit lands only if
    /// the session is still there, else it fails with [`crate::Error::Conflict`] and writes
    /// nothing.
    pub read_version: u64,
    /// `turn` is assigned by the store.
    pub record: TurnRecord,
    /// Markers this turn handed out to documents new to the session.
    pub new_markers: BTreeMap<DocumentId, u32>,
    /// `turn` is assigned by the store.
    pub trace: Trace,
}
