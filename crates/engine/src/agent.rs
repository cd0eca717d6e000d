//! An agent's steps (DESIGN §9): what the MCP tools (`ragctx mcp`, `/mcp`), the Python
//! `Engine.search`/`open`/`forget` and `ragctx eval agent` run, in one place. A [`Scope`] is
//! who is calling — the tenant-scoped engine, the settings a call starts from, the prefix of
//! the caller's sessions — and each method is one step of a session's one history:
//!
//! - [`Scope::search`]: a retrieve-only turn in `client` memory (the agent holds every earlier
//!   result), so a chunk the session holds is never sent again and one that still ranks comes
//!   back as a one-line pointer;
//! - [`Scope::open`]: chunks the session holds, shown again on request (a reshow);
//! - [`Scope::forget`]: chunks the agent's host dropped, which a later search may send again;
//! - [`Scope::documents`]: what can be found.
//!
//! Errors are the engine's: a caller's mistake is [`Error::InvalidInput`] (or `NotFound`)
//! whose message begins with the argument at fault (`budget: ...`); nothing is recorded then.

use crate::{exclusion, Engine, TurnInput, TurnSettings};
use ragctx_core::{ChunkId, Error, Filter, Memory, Mode, Result, SessionId, Trace, TurnOverrides};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// Default of `search`'s `budget`: tokens of one call's blocks and pointers (docs/agents.md).
pub const DEFAULT_SEARCH_BUDGET: usize = 2_000;
/// Default of `search`'s `limit`: results of one call at most.
pub const DEFAULT_SEARCH_LIMIT: usize = 8;
/// Default of `open`'s `budget`.
pub const DEFAULT_OPEN_BUDGET: usize = 4_000;
/// A call's budget: tokens at least and at most.
pub const BUDGET_RANGE: (usize, usize) = (64, 32_000);
/// A search's limit: results at least and at most.
pub const LIMIT_RANGE: (usize, usize) = (1, 100);
/// References one `forget` may name at most.
pub const MAX_REFS: usize = 1_000;

/// Who is calling: the tenant-scoped engine, the settings a call starts from, and (bare API
/// keys) the prefix of its sessions. Every step reads, or changes only the caller's own
/// sessions: a `read` key may take them all.
#[derive(Clone)]
pub struct Scope {
    /// The engine as the caller's tenant sees it.
    pub engine: Engine,
    /// The turn settings a call starts from (the configuration's).
    pub base: TurnSettings,
    /// Namespace of the caller's sessions (a bare API key's: [`SessionId::private_to`]), as
    /// the HTTP API keeps them.
    pub session_prefix: Option<String>,
    /// Deadline of one call.
    pub timeout: Duration,
}

/// A caller's mistake about `what`: the error's message begins with the argument's name.
/// Other errors (an outage, a time-out: not the argument's fault) pass unchanged.
pub fn about(what: &'static str) -> impl Fn(Error) -> Error {
    move |e| match e {
        Error::InvalidInput(m) => Error::InvalidInput(format!("{what}: {m}")),
        Error::NotFound(m) => Error::NotFound(format!("{what}: {m}")),
        other => other,
    }
}

/// A step's `filter` argument as every front reads it: JSON text of the filter language
/// (docs/filters.md), `None` for no filter; a bad one is the caller's mistake about `filter`.
pub fn filter_arg(json: Option<&str>) -> Result<Filter> {
    match json {
        None => Ok(Filter::All),
        Some(text) => Filter::parse(text).map_err(about("filter")),
    }
}

fn in_range(
    what: &'static str,
    v: Option<usize>,
    default: usize,
    (lo, hi): (usize, usize),
    unit: &str,
) -> Result<usize> {
    match v {
        None => Ok(default),
        Some(x) if (lo..=hi).contains(&x) => Ok(x),
        Some(x) => Err(Error::InvalidInput(format!("{what} must be between {lo} and {hi}{unit}, got {x}"))),
    }
}

impl Scope {
    /// The session `id` names for this caller (under its prefix, if it has one).
    pub fn session(&self, id: &str) -> Result<SessionId> {
        let id = SessionId::parse(id).map_err(about("session"))?;
        Ok(match &self.session_prefix {
            Some(p) => id.private_to(p),
            None => id,
        })
    }

    /// The turn settings every agent step runs with over the scope's base: `client` memory,
    /// exclusion of every chunk shown in the session (strategy `exclude`, consumption `shown`,
    /// the whole session as the window), each query its own (no condensing, no mixing with
    /// earlier queries), held chunks keeping their result slots as pointers. What the
    /// configuration sets otherwise (the floor, filters, near-duplicates, retrieval) applies
    /// as everywhere.
    pub fn step_settings(&self, mode: Mode, layer: TurnOverrides) -> Result<TurnSettings> {
        let agent = TurnOverrides {
            memory: Some(Memory::Client),
            strategy: Some(ragctx_core::Strategy::Exclude),
            consumption: Some(ragctx_core::Consumption::Shown),
            granularity: Some(ragctx_core::Granularity::Chunk),
            window: Some(0),
            condense: Some(ragctx_core::Condense::Off),
            conversation_query: Some(ragctx_core::ConversationQuery::Off),
            freed_slots: Some(ragctx_core::FreedSlots::Keep),
            mode: Some(mode),
            ..Default::default()
        };
        // `fusion` is refused without hybrid retrieval and `granularity document` with engine
        // memory only when a layer gives them: the agent layer gives neither.
        let base =
            TurnSettings { granularity: ragctx_core::Granularity::Chunk, memory: Memory::Client, ..self.base.clone() };
        agent.merge(layer).apply(&base)
    }

    /// One search step of `session`: a retrieve-only turn for `query` (forced `new`, not mixed
    /// with earlier queries) within `budget` tokens (default [`DEFAULT_SEARCH_BUDGET`]) and
    /// `limit` results (default [`DEFAULT_SEARCH_LIMIT`]), narrowed by `filter` (with the
    /// configuration's standing filter, never instead of it).
    pub fn search(
        &self,
        session: &str,
        query: &str,
        filter: &Filter,
        budget: Option<usize>,
        limit: Option<usize>,
    ) -> Result<Found> {
        let id = self.session(session)?;
        let layer = TurnOverrides {
            budget: Some(in_range("budget", budget, DEFAULT_SEARCH_BUDGET, BUDGET_RANGE, " tokens")?),
            limit: Some(in_range("limit", limit, DEFAULT_SEARCH_LIMIT, LIMIT_RANGE, "")?),
            filter: Some(filter.clone()),
            ..Default::default()
        };
        let settings = self.step_settings(Mode::New, layer)?;
        crate::validate_question(query).map_err(about("query"))?;
        let input = TurnInput::new(&id, query, &settings).retrieve_only().deadline(Instant::now() + self.timeout);
        Ok(Found::of(session, &self.engine.run(input)?))
    }

    /// Shows again, in full, what `reference` names in `session` — a marker (`[3]`, `3`), a
    /// held chunk ID or a document ID with held chunks — within `budget` tokens (default
    /// [`DEFAULT_OPEN_BUDGET`]): every chunk it names, bypassing exclusion, recorded as a
    /// reshow step.
    pub fn open(&self, session: &str, reference: &str, budget: Option<usize>) -> Result<Found> {
        let id = self.session(session)?;
        let layer = TurnOverrides {
            budget: Some(in_range("budget", budget, DEFAULT_OPEN_BUDGET, BUDGET_RANGE, " tokens")?),
            // Every chunk asked for, not only those near its document's best.
            group_margin: Some(2.0),
            ..Default::default()
        };
        let settings = self.step_settings(Mode::Reshow, layer)?;
        let ids = resolve_refs(&self.engine, &id, std::slice::from_ref(&reference.to_owned())).map_err(about("ref"))?;
        let question = format!("open {reference}");
        let input = TurnInput {
            reshow: Some(&ids),
            ..TurnInput::new(&id, &question, &settings).retrieve_only().deadline(Instant::now() + self.timeout)
        };
        Ok(Found::of(session, &self.engine.run(input).map_err(about("ref"))?))
    }

    /// Lets what `refs` name (markers, chunk IDs, document IDs; `None`: everything the session
    /// holds) be sent again by a later search: the agent's host compacted or dropped it.
    /// Recorded as a step when the session held any of it.
    pub fn forget(&self, session: &str, refs: Option<&[String]>) -> Result<Forgotten> {
        let id = self.session(session)?;
        if refs.is_some_and(|r| r.is_empty() || r.len() > MAX_REFS) {
            return Err(Error::InvalidInput(format!(
                "refs: give 1 to {MAX_REFS} references, or leave refs out to forget everything"
            )));
        }
        // Recorded as the agent's other steps are.
        let settings = self.step_settings(Mode::New, TurnOverrides::default())?;
        let chunks = match refs {
            Some(r) => Some(resolve_refs(&self.engine, &id, r).map_err(about("refs"))?),
            None => None,
        };
        let t = self.engine.forget(&id, chunks, &settings)?;
        Ok(Forgotten {
            session: session.to_owned(),
            forgotten: t.trace.forgotten.iter().map(|c| c.as_str().to_owned()).collect(),
        })
    }

    /// The documents of the caller's tenant, by ID; only those whose (first chunk's) metadata
    /// match `filter`.
    pub fn documents(&self, filter: &Filter) -> Result<Documents> {
        let documents = self
            .engine
            .vectors
            .documents()?
            .into_iter()
            .filter(|d| filter.matches(d.document_id.as_str(), &d.metadata))
            .map(|d| DocumentOut {
                document_id: d.document_id.as_str().to_owned(),
                title: d.title,
                chunks: d.chunks,
                metadata: serde_json::to_value(&d.metadata).unwrap_or_default(),
            })
            .collect();
        Ok(Documents { documents })
    }
}

/// The chunks of the session `refs` name: a marker (`[3]`, `3`), a held chunk, or a document
/// with held chunks; a reference that names none of them is the caller's mistake.
fn resolve_refs(engine: &Engine, session: &SessionId, refs: &[String]) -> Result<Vec<ChunkId>> {
    let state = engine.sessions.load(session)?.unwrap_or_default();
    let held: Vec<ChunkId> = {
        let mut h: Vec<ChunkId> = exclusion::first_shown(&state, 0).into_keys().collect();
        h.sort();
        h
    };
    let chunks = engine.vectors.chunks(&held)?;
    let mut out: Vec<ChunkId> = Vec::new();
    for r in refs {
        let r = r.trim();
        let marker = r.trim_start_matches('[').trim_end_matches(']');
        let by_marker =
            marker.parse::<u32>().ok().and_then(|m| state.markers.iter().find(|(_, &v)| v == m)).map(|(d, _)| d);
        let found: Vec<ChunkId> = if let Some(doc) = by_marker {
            chunks.iter().filter(|c| &c.document_id == doc).map(|c| c.id.clone()).collect()
        } else if held.iter().any(|c| c.as_str() == r) {
            vec![ChunkId::from(r)]
        } else {
            chunks.iter().filter(|c| c.document_id.as_str() == r).map(|c| c.id.clone()).collect()
        };
        if found.is_empty() {
            return Err(Error::InvalidInput(format!(
                "{r:?} names no marker, chunk ID or document ID this session holds (search first)"
            )));
        }
        for c in found {
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    Ok(out)
}

/// One block of a result: a chunk (or adjacent chunks of one document) in full.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BlockOut {
    /// Its marker, stable within the session: cite it as `[n]`.
    pub marker: u32,
    /// The chunks its text holds.
    pub chunk_ids: Vec<String>,
    /// The document they come from.
    pub document_id: String,
    /// The document's title.
    pub title: String,
    /// The first chunk's metadata (`page_end`: the last chunk's page).
    pub metadata: serde_json::Value,
    /// The text.
    pub text: String,
    /// Tokens of the block as rendered (cl100k_base).
    pub tokens: usize,
}

/// A result the session already holds: named, not sent again.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PointerOut {
    /// Its marker (the one it was first shown with).
    pub marker: u32,
    /// The held chunks that rank for this query.
    pub chunk_ids: Vec<String>,
    /// Their document.
    pub document_id: String,
    /// The document's title.
    pub title: String,
    /// The step that first showed them.
    pub shown_in_step: u64,
}

/// What `search` and `open` return.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Found {
    /// The session, as given.
    pub session: String,
    /// This call's step number in the session.
    pub step: u64,
    /// Chunks new to the session (for `open`: those shown again), in rank order.
    pub blocks: Vec<BlockOut>,
    /// Chunks the session already holds that rank for this query.
    pub pointers: Vec<PointerOut>,
    /// Tokens of the blocks and pointers.
    pub tokens: usize,
    /// Documents that ranked but did not fit the call's budget (ask again with a larger one,
    /// or `open` them).
    pub dropped_by_budget: Vec<String>,
}

/// One document of `documents`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DocumentOut {
    /// The document's ID.
    pub document_id: String,
    /// Its title.
    pub title: String,
    /// Its chunks.
    pub chunks: usize,
    /// Its first chunk's metadata.
    pub metadata: serde_json::Value,
}

/// What `documents` returns.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Documents {
    /// The documents, by ID.
    pub documents: Vec<DocumentOut>,
}

/// What `forget` returns.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Forgotten {
    /// The session, as given.
    pub session: String,
    /// The chunks that left the session: a later search may send them again.
    pub forgotten: Vec<String>,
}

impl Found {
    /// A step's result as the caller sees it (`session` as the caller named it).
    pub fn of(session: &str, t: &Trace) -> Found {
        let blocks = t
            .context
            .iter()
            .map(|b| BlockOut {
                marker: b.marker,
                chunk_ids: b.chunk_ids.iter().map(|c| c.as_str().to_owned()).collect(),
                document_id: b.document_id.as_str().to_owned(),
                title: b.title.clone(),
                metadata: serde_json::to_value(&b.metadata).unwrap_or_default(),
                text: b.text.clone(),
                tokens: b.tokens,
            })
            .collect();
        let pointers = t
            .pointers
            .iter()
            .map(|p| PointerOut {
                marker: p.marker,
                chunk_ids: p.chunk_ids.iter().map(|c| c.as_str().to_owned()).collect(),
                document_id: p.document_id.as_str().to_owned(),
                title: p.title.clone(),
                shown_in_step: p.shown_in_turn,
            })
            .collect();
        Found {
            session: session.to_owned(),
            step: t.turn,
            blocks,
            pointers,
            tokens: t.trace.context_tokens,
            dropped_by_budget: t.trace.dropped_by_budget.iter().map(|d| d.as_str().to_owned()).collect(),
        }
    }

    /// The text a model reads: pointers first (one line each), then the new blocks in full,
    /// then what did not fit.
    pub fn text(&self) -> String {
        let mut text = String::new();
        for p in &self.pointers {
            text.push_str(&format!(
                "[{}] {} ({}) — you already hold this (step {}); open it to see it again\n",
                p.marker, p.title, p.document_id, p.shown_in_step
            ));
        }
        for b in &self.blocks {
            text.push_str(&format!("[{}] {} ({})\n{}\n\n", b.marker, b.title, b.document_id, b.text.trim_end()));
        }
        if self.blocks.is_empty() && self.pointers.is_empty() {
            text.push_str("Nothing found that you do not already hold.\n");
        } else if self.blocks.is_empty() {
            text.push_str("Nothing new: every result that ranks is one you already hold.\n");
        }
        if !self.dropped_by_budget.is_empty() {
            text.push_str(&format!(
                "Did not fit the budget ({} document(s)): {}\n",
                self.dropped_by_budget.len(),
                self.dropped_by_budget.join(", ")
            ));
        }
        text
    }
}

impl Documents {
    /// The text a model reads: one line per document.
    pub fn text(&self) -> String {
        self.documents
            .iter()
            .map(|d| format!("{} — {} ({} chunks)", d.document_id, d.title, d.chunks))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Forgotten {
    /// The text a model reads.
    pub fn text(&self) -> String {
        format!("forgot {} chunk(s): a later search may send them again", self.forgotten.len())
    }
}
