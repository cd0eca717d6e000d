#![warn(missing_docs)]
//! The ragctx turn pipeline, one module per stage:
//! [`intent`] → [`exclusion`] → embed → [`retrieve`] → slots → [`rerank`] → [`diversity`] →
//! [`dedupe`] → [`compress`] → [`context`] → generate → [`memory`] → trace. One turn is one
//! value, [`Turn`], through the list [`STAGES`] ([`pipeline`]: the list, its runner and the
//! small stages); the stages' logic is plain functions over data ([`stages`]); [`Engine`]
//! wires them to the backends (vector store, session store, embedder, token counter,
//! generator, optional condenser and reranker).
//!
//! ```no_run
//! # use std::sync::Arc;
//! # fn demo(engine: ragctx_engine::Engine) -> ragctx_core::Result<()> {
//! use ragctx_engine::TurnSettings;
//! let session = ragctx_core::SessionId::parse("s1")?;
//! let turn = engine.ask(&session, "How do I appeal?", &TurnSettings::default())?;
//! assert!(turn.trace.context_tokens <= 6000);
//! # Ok(()) }
//! ```

pub mod agent;
pub mod compress;
pub mod condense;
pub mod context;
pub mod conversation;
pub mod dedupe;
pub mod diversity;
pub mod exclusion;
pub mod ingest;
pub mod intent;
pub mod memory;
pub mod pipeline;
pub mod presets;
mod reads;
pub mod rerank;
pub mod retrieve;
pub mod scoped;
pub mod sentences;
pub mod settings;
pub mod stages;
pub mod turn;

pub use conversation::Utterance;
pub use pipeline::{Stage, STAGES};
pub use scoped::{ScopedEmbeddingCache, ScopedSessionStore, ScopedVectorStore};
pub use settings::{
    validate_question, Consumption, ConversationQuery, Granularity, QueryWeights, Strategy, TurnSettings,
    DEFAULT_GROUP_MARGIN, MAX_QUESTION_CHARS, MIX_WEIGHTS,
};
pub use turn::{Turn, TurnInput};

use ragctx_core::{
    ChunkId, Condensed, Condenser, DocumentId, Embedder, Error, ExclusionSet, Filter, GenerationRequest, Generator,
    Grouping, Hit, Intent, Memory, Reranker, Result, SearchPath, SessionId, SessionState, SessionStore, TokenCounter,
    Trace, TraceStats, TurnCommit, VectorStore,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The backends a turn runs on.
#[derive(Clone)]
pub struct Engine {
    /// Chunks and their vectors (and the lexical index where the store has one).
    pub vectors: Arc<dyn VectorStore>,
    /// Sessions and their traces.
    pub sessions: Arc<dyn SessionStore>,
    /// Embeds questions (the store's vectors come from the same model).
    pub embedder: Arc<dyn Embedder>,
    /// Counts prompt tokens for the budget (`cl100k_base`).
    pub counter: Arc<dyn TokenCounter>,
    /// Writes the answer from the prompt.
    pub generator: Arc<dyn Generator>,
    /// Queues the turns of one session inside this process (share it between clones).
    pub turn_locks: TurnLocks,
    /// How a mixed query weighs the earlier questions and the previous turn's chunks.
    pub query_weights: QueryWeights,
    /// Rewrites follow-ups into standalone queries (`condense openai`); `None`: not configured.
    pub condenser: Option<Arc<dyn Condenser>>,
    /// Re-orders candidates (`rerank remote`); `None`: not configured.
    pub reranker: Option<Arc<dyn Reranker>>,
    /// Candidates sent to the reranker at most, the best by the search's order.
    pub rerank_top_n: usize,
    /// Judges sentences for `compress learned` (the fitted one, shipped).
    pub sentence_scorer: Arc<sentences::Scorer>,
    /// Where `compress learned` writes every sentence it judges, with its features (for
    /// `ragctx eval fit-sentences`); `None`: nowhere.
    pub sentence_log: Option<sentences::SentenceLog>,
    /// Whether its ingest keeps each chunk's sentences with their vectors (DESIGN §11).
    pub sentence_index: bool,
}

/// Default of [`Engine::rerank_top_n`]: a turn's `limit` (24) with room for the working set's
/// chunks that rank, and within Text Embeddings Inference's default batch limit
/// (`--max-client-batch-size` 32), which refuses a larger request.
pub const DEFAULT_RERANK_TOP_N: usize = 32;

impl Engine {
    /// An engine over these backends with the defaults for the rest: its own turn locks, the
    /// fitted query weights, no condenser, no reranker.
    pub fn new(
        vectors: Arc<dyn VectorStore>,
        sessions: Arc<dyn SessionStore>,
        embedder: Arc<dyn Embedder>,
        counter: Arc<dyn TokenCounter>,
        generator: Arc<dyn Generator>,
    ) -> Engine {
        Engine {
            vectors,
            sessions,
            embedder,
            counter,
            generator,
            turn_locks: TurnLocks::default(),
            query_weights: QueryWeights::default(),
            condenser: None,
            reranker: None,
            rerank_top_n: DEFAULT_RERANK_TOP_N,
            sentence_scorer: sentences::Scorer::shipped(),
            sentence_log: None,
            sentence_index: true,
        }
    }
}

impl Engine {
    /// This engine as `tenant` sees it (DESIGN §8): its stores behind tenant-scoped handles,
    /// so every search, fetch, write and session of the result is the tenant's alone. Call it
    /// on an engine over the unscoped stores (the factory's); the rest is shared.
    pub fn scoped(&self, tenant: &ragctx_core::Tenant) -> Engine {
        Engine {
            vectors: Arc::new(crate::ScopedVectorStore::new(self.vectors.clone(), tenant.clone())),
            sessions: Arc::new(crate::ScopedSessionStore::new(self.sessions.clone(), tenant.clone())),
            // The same session id in two tenants is two sessions: their turns never queue
            // behind each other (nor tell each other's existence by timing).
            turn_locks: TurnLocks { sessions: self.turn_locks.sessions.clone(), tenant: Some(tenant.clone()) },
            ..self.clone()
        }
    }

    /// This engine answering with `generator` (stores, embedder and turn locks shared).
    pub fn with_generator(&self, generator: Arc<dyn Generator>) -> Engine {
        Engine { generator, ..self.clone() }
    }
}

/// How long a turn without a deadline waits for the turn of its session before it in
/// another process ([`SessionStore::lease_turns`]) before it plans anyway.
const LEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A turn's lease on its session across processes ([`SessionStore::lease_turns`]), held while
/// it plans and commits.
struct HeldLease<'a> {
    sessions: &'a dyn SessionStore,
    session: &'a SessionId,
    deadline: Option<Instant>,
    lease: Option<ragctx_core::TurnLease>,
}

impl HeldLease<'_> {
    /// Gives the lease back and waits for it again (until the deadline or [`LEASE_WAIT`]).
    /// A turn that lost its commit takes it anew before it plans again: a lease can be lost
    /// under a running turn (a shared data dir's holder exits and its leases go with it; a
    /// Redis lease outlived), and a turn re-planning without one loses to the turns that
    /// hold theirs, again and again. Without a lease (none to be had in time) it pauses.
    fn retake(&mut self, replans: u32) -> Result<()> {
        self.take()?;
        if self.lease.is_none() {
            std::thread::sleep(replan_pause(replans));
        }
        Ok(())
    }

    /// Gives the lease back and waits for it again.
    fn take(&mut self) -> Result<()> {
        self.lease = None;
        let wait = self.deadline.map_or(LEASE_WAIT, |d| d.saturating_duration_since(Instant::now()));
        self.lease = self.sessions.lease_turns(self.session, wait)?;
        Ok(())
    }
}

impl Engine {
    /// Runs `f` as the one turn of `session` at a time: behind the session's other turns in
    /// this process ([`TurnLocks`]), then behind those of other processes that share the
    /// session store (its lease, until `deadline` or [`LEASE_WAIT`]; `f` takes it again
    /// after a conflict, [`HeldLease::retake`]).
    fn one_turn_at_a_time<T>(
        &self,
        session: &SessionId,
        deadline: Option<Instant>,
        f: impl FnOnce(&mut HeldLease<'_>) -> Result<T>,
    ) -> Result<T> {
        self.turn_locks.with(session, || {
            let mut held = HeldLease { sessions: self.sessions.as_ref(), session, deadline, lease: None };
            held.take()?;
            f(&mut held)
        })
    }
}

/// A session's lock, by its tenant (none for an unscoped engine) and id.
type SessionLocks = HashMap<(Option<ragctx_core::Tenant>, SessionId), Arc<std::sync::Mutex<()>>>;

/// Serialises the turns of one session inside a process: concurrent turns of a session wait
/// here for each other instead of planning against the same session version and planning
/// again. Across processes the session store's lease does the same where it has one (a
/// shared data dir, Redis), and its version check keeps turns race-free.
#[derive(Clone, Default)]
pub struct TurnLocks {
    sessions: Arc<std::sync::Mutex<SessionLocks>>,
    /// The tenant of the engine these locks serve ([`Engine::scoped`]): part of every key.
    tenant: Option<ragctx_core::Tenant>,
}

impl TurnLocks {
    fn with<T>(&self, session: &SessionId, f: impl FnOnce() -> T) -> T {
        let key = (self.tenant.clone(), session.clone());
        let lock = {
            let mut map = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            map.entry(key.clone()).or_default().clone()
        };
        let out = {
            let _turn = lock.lock().unwrap_or_else(|e| e.into_inner());
            f()
        };
        let mut map = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        // The map's reference and ours: nobody else waits, forget the session.
        if Arc::strong_count(&lock) == 2 {
            map.remove(&key);
        }
        out
    }
}

/// Plans a turn makes before it gives up on a session that keeps moving under it.
pub const MAX_REPLANS: u32 = 8;

/// A pause of at most `replans` ms before planning again, jittered so that two processes do
/// not collide in lockstep. Kept short: the turn that lost has already waited a whole plan,
/// and a longer pause would hand the next round to the process that just won.
fn replan_pause(replans: u32) -> std::time::Duration {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    std::time::Duration::from_micros(u64::from(nanos) % (u64::from(replans.max(1)) * 1000))
}

fn ms_since(t: Instant) -> f64 {
    (t.elapsed().as_secs_f64() * 1e6).round() / 1e3
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl Engine {
    /// Runs one turn and commits it to the session atomically: [`Engine::run`] with nothing
    /// but the question.
    pub fn ask(&self, session: &SessionId, question: &str, settings: &TurnSettings) -> Result<Trace> {
        self.run(TurnInput::new(session, question, settings))
    }

    /// Runs one turn — every way of asking one is a field of [`TurnInput`] — and commits it
    /// to the session atomically. Turns of one session queue behind each other in this
    /// process, and across processes where the session store leases turns; otherwise the
    /// store's version check makes a turn plan again.
    pub fn run(&self, input: TurnInput<'_>) -> Result<Trace> {
        let started = Instant::now();
        input.settings.validate()?;
        let question = validate_question(input.question)?;
        let query = input.query.map(validate_question).transpose()?;
        if input.reshow.is_some() && input.settings.mode != ragctx_core::Mode::Reshow {
            return Err(Error::InvalidInput("chunks to show again need mode reshow".into()));
        }
        let input = TurnInput { question, query, ..input };
        let session = input.session;
        // One log line per turn: the span's, when it closes (its fields are recorded once the
        // turn is committed; nothing is formatted when no subscriber wants the span). The
        // session id is logged at debug only: a stored id may carry a key's namespace or a
        // tenant (docs/http-api.md, "Boundaries").
        let span = tracing::info_span!(
            "turn",
            turn = tracing::field::Empty,
            intent = tracing::field::Empty,
            candidates = tracing::field::Empty,
            context_tokens = tracing::field::Empty,
            prompt_tokens = tracing::field::Empty,
            timings_ms = tracing::field::Empty
        );
        let _in = span.enter();
        tracing::debug!(session = %session, "turn of session");
        let deadline = input.deadline;
        let out = self.one_turn_at_a_time(session, deadline, |lease| self.plan_and_commit(input, started, lease))?;
        if !span.is_disabled() {
            let t = &out.trace;
            span.record("turn", out.turn)
                .record("intent", out.intent().as_str())
                .record("candidates", t.candidates)
                .record("context_tokens", t.context_tokens)
                .record("prompt_tokens", t.prompt_tokens)
                // Debug of a map of strings to numbers is JSON: {"embed": 1.2, ...}.
                .record("timings_ms", tracing::field::debug(&t.timings_ms));
        }
        Ok(out)
    }

    /// Plans the turn against the session as stored and commits it if the session is still
    /// there; plans again (up to [`MAX_REPLANS`] times) when another process got there first.
    fn plan_and_commit(&self, input: TurnInput<'_>, started: Instant, lease: &mut HeldLease<'_>) -> Result<Trace> {
        let (session, settings, deadline) = (input.session, input.settings, input.deadline);
        let mut replans = 0;
        // The condenser is asked once per turn, on the session as first loaded: a re-plan
        // reuses its rewrite (a turn another process committed meanwhile rarely changes it).
        let mut condensed: Option<Option<Condensed>> = None;
        let late = |spent: f64| Error::Unavailable {
            backend: "turn".into(),
            message: format!("no answer within the deadline ({spent:.1} s spent); the turn was not recorded"),
        };
        loop {
            // A turn that waited its deadline out (queued behind others of its session, or
            // re-planning) gives up before it plans.
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(late(started.elapsed().as_secs_f64()));
            }
            let state = self.sessions.load(session)?.unwrap_or_default();
            let query = input.query.unwrap_or(input.question);
            if condensed.is_none() {
                condensed = Some(self.condensed(&state, input.question, input.conversation, settings)?);
            }
            let rewrite = condensed.clone().flatten();
            let mut turn = self.turn_of(&state, settings, input.question, query, rewrite.as_ref());
            turn.conversation = input.conversation;
            turn.retrieve_only = input.retrieve_only;
            turn.reshow = input.reshow.map(<[ChunkId]>::to_vec);
            // Only the first plan streams (a client cannot take back what it was sent).
            turn.on_delta = input.on_delta.filter(|_| replans == 0);
            turn.stats.replans = replans;
            self.plan(&mut turn)?;
            let (mut trace, record, new_markers) = turn.into_trace(session);
            let remember = Instant::now();
            let remember_span = tracing::info_span!("stage", stage = "remember").entered();
            if deadline.is_some_and(|d| remember >= d) {
                return Err(late(started.elapsed().as_secs_f64()));
            }
            let commit = TurnCommit { read_version: state.version, record, new_markers, trace: trace.clone() };
            match self.sessions.commit_turn(session, commit, settings.retention()) {
                Ok(turn) => trace.turn = turn,
                // Another turn of this session committed since the load: plan again against
                // what it showed, so no chunk is shown twice and no marker handed out twice.
                Err(Error::Conflict(_)) if replans < MAX_REPLANS => {
                    replans += 1;
                    lease.retake(replans)?;
                    continue;
                }
                Err(Error::Conflict(m)) => {
                    return Err(Error::Conflict(format!(
                        "{m}; gave up after {} plans of this turn (too many turns of session {session} at once)",
                        replans + 1
                    )))
                }
                Err(e) => return Err(e),
            }
            // The stored trace carries every timing but its own write.
            drop(remember_span);
            trace.trace.timings_ms.insert("remember".into(), ms_since(remember));
            trace.trace.timings_ms.insert("total".into(), ms_since(started));
            return Ok(trace);
        }
    }

    /// An agent's `forget` step: `chunks` leave the session's working set (its host compacted
    /// or dropped them), so a later search may send them again; recorded as a step of the
    /// session, with the chunks in its trace's `forgotten`. `None` forgets everything the
    /// session holds. Returns the step as recorded; when the session holds none of `chunks`,
    /// nothing is recorded (turn 0, `forgotten` empty).
    pub fn forget(&self, session: &SessionId, chunks: Option<Vec<ChunkId>>, settings: &TurnSettings) -> Result<Trace> {
        self.one_turn_at_a_time(session, None, |lease| {
            for replans in 0..=MAX_REPLANS {
                let state = self.sessions.load(session)?.unwrap_or_default();
                let held = exclusion::first_shown(&state, 0);
                let mut ids: Vec<ChunkId> = match &chunks {
                    Some(c) => c.iter().filter(|c| held.contains_key(*c)).cloned().collect(),
                    None => held.keys().cloned().collect(),
                };
                ids.sort();
                ids.dedup();
                let mut stats = TraceStats::starting(settings.effective(self.counter.name()));
                stats.forgotten = ids;
                stats.search_reason = ragctx_core::SearchReason::Forget.to_string();
                let question = match &chunks {
                    Some(c) => format!("forget {} chunk(s)", c.len()),
                    None => "forget everything".to_owned(),
                };
                let mut trace = Trace {
                    session_id: session.to_string(),
                    turn: 0,
                    question: question.clone(),
                    query: question,
                    answer: String::new(),
                    citations: Vec::new(),
                    context: Vec::new(),
                    pointers: Vec::new(),
                    query_vector: None,
                    exclusion: ExclusionSet::default(),
                    invalid_markers: Vec::new(),
                    at_unix_ms: now_ms(),
                    trace: stats,
                };
                // Nothing held to let go: nothing to record (a step always names what it forgot).
                if trace.trace.forgotten.is_empty() {
                    return Ok(trace);
                }
                let record = memory::record_of(&trace);
                let commit = TurnCommit {
                    read_version: state.version,
                    record,
                    new_markers: BTreeMap::new(),
                    trace: trace.clone(),
                };
                match self.sessions.commit_turn(session, commit, settings.retention()) {
                    Ok(turn) => {
                        trace.turn = turn;
                        return Ok(trace);
                    }
                    Err(Error::Conflict(_)) if replans < MAX_REPLANS => lease.retake(replans + 1)?,
                    Err(e) => return Err(e),
                }
            }
            Err(Error::Conflict(format!("gave up forgetting in session {session}: too many turns at once")))
        })
    }

    /// A turn before its stages, searching with the condenser's rewrite when there is one
    /// (the question stays what is answered).
    fn turn_of<'a>(
        &self,
        state: &'a SessionState,
        settings: &'a TurnSettings,
        question: &'a str,
        query: &'a str,
        condensed: Option<&'a Condensed>,
    ) -> Turn<'a> {
        let query = condensed.and_then(|c| c.query.as_deref()).unwrap_or(query);
        let mut turn = Turn::new(state, settings, question, query, self.counter.name());
        if let Some(c) = condensed {
            turn.stats.timings_ms.insert("condense".into(), c.ms);
            turn.stats.condensed = Some(c.clone());
        }
        turn
    }

    /// Runs turn `trace.turn` again with other settings, against the session as it stood
    /// then (`earlier`: the traces before it, oldest first — the working set, the
    /// conversation and the query mix come from them; the exclusion from the trace), without
    /// remembering anything. With `mode` `auto` the turn runs with the intent it was recorded
    /// with. The current markers of the session are kept. Not reproduced: a `session reset`
    /// between the earlier traces and this one (the traces outlive it), a conversation that
    /// came from an OpenAI client's `messages`, the query mix of turns traced before query
    /// vectors were kept, and an agent's steps as they ran (a replayed `search` generates an
    /// answer, a replayed `open` shows the previous turn's sources again); a `forget` step is
    /// refused.
    pub fn replay(
        &self,
        session: &SessionId,
        trace: &Trace,
        earlier: &[Trace],
        settings: &TurnSettings,
    ) -> Result<Trace> {
        settings.validate()?;
        if !trace.trace.forgotten.is_empty() {
            return Err(Error::InvalidInput(format!(
                "turn {} is a forget step: there is nothing to replay",
                trace.turn
            )));
        }
        let mut state = self.sessions.load(session)?.unwrap_or_default();
        state.turns = earlier.iter().map(memory::record_of).collect();
        let mut s = settings.clone();
        if s.mode == ragctx_core::Mode::Auto {
            s.mode = trace.trace.intent.into();
        }
        // A condensed turn searched with its rewrite: replayed without condensing, it searches
        // with its question; with condensing, the stored rewrite is reused (the model is asked
        // only when the turn was not condensed).
        let stored = trace.trace.condensed.as_ref().filter(|c| c.query.is_some());
        let query = if stored.is_some() { &trace.question } else { &trace.query };
        let condensed = match stored {
            Some(c) if s.condense == ragctx_core::Condense::OpenAi => {
                Some(Condensed { ms: 0.0, cached: true, ..c.clone() })
            }
            _ => self.condensed(&state, &trace.question, None, &s)?,
        };
        let mut turn = self.turn_of(&state, &s, &trace.question, query, condensed.as_ref());
        turn.given_exclusion = Some(trace.exclusion.clone());
        self.plan(&mut turn)?;
        let (mut out, _, _) = turn.into_trace(session);
        out.turn = trace.turn;
        Ok(out)
    }
}

/// The question's vector with the earlier questions' (newest first) and the previous turn's
/// chunk centroid mixed in by `w`, normalised; the question alone when there is nothing to mix.
pub fn compose_query(question: &[f32], earlier: &[Vec<f32>], centroid: Option<&[f32]>, w: &QueryWeights) -> Vec<f32> {
    let centroid = centroid.filter(|_| w.working_set > 0.0);
    if earlier.is_empty() && centroid.is_none() {
        return question.to_vec();
    }
    let mut sum = question.to_vec();
    let parts = earlier.iter().map(Vec::as_slice).zip(w.earlier).chain(centroid.map(|c| (c, w.working_set)));
    for (v, weight) in parts {
        for (s, x) in sum.iter_mut().zip(v) {
            *s += weight * x;
        }
    }
    let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::MIN_POSITIVE);
    sum.iter_mut().for_each(|x| *x /= norm);
    sum
}

/// The question's vector with earlier ones (newest first) mixed in by `weights` (the
/// question's first), normalised (the eval's `weighted` query; the engine composes with
/// [`compose_query`]).
pub fn mix_vectors(question: &[f32], earlier: &[Vec<f32>], weights: &[f32]) -> Vec<f32> {
    if earlier.is_empty() {
        return question.to_vec();
    }
    let mut sum: Vec<f32> = question.iter().map(|x| x * weights[0]).collect();
    for (v, w) in earlier.iter().zip(&weights[1..]) {
        for (s, x) in sum.iter_mut().zip(v) {
            *s += w * x;
        }
    }
    let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::MIN_POSITIVE);
    sum.iter_mut().for_each(|x| *x /= norm);
    sum
}
