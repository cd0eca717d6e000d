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
        Found::of(session, &self.engine.run(input)?, &self.engine)
    }

    /// Shows again, in full, what `reference` names in `session` — one passage by its handle
    /// (`[3.2]`, `3.2`, a range `[3.2–3.4]`) or chunk ID, or a whole document by its marker
    /// (`[3]`, `3`) or ID (every chunk of it the session holds) — within `budget` tokens
    /// (default [`DEFAULT_OPEN_BUDGET`]), bypassing exclusion, recorded as a reshow step.
    /// [`Found::opened`] says what it named and what a whole document cost.
    pub fn open(&self, session: &str, reference: &str, budget: Option<usize>) -> Result<Found> {
        let id = self.session(session)?;
        let layer = TurnOverrides {
            budget: Some(in_range("budget", budget, DEFAULT_OPEN_BUDGET, BUDGET_RANGE, " tokens")?),
            // Every chunk asked for, not only those near its document's best.
            group_margin: Some(2.0),
            ..Default::default()
        };
        let settings = self.step_settings(Mode::Reshow, layer)?;
        let named =
            resolve_refs(&self.engine, &id, std::slice::from_ref(&reference.to_owned())).map_err(about("ref"))?;
        let ids = named.chunks;
        let question = format!("open {reference}");
        let input = TurnInput {
            reshow: Some(&ids),
            ..TurnInput::new(&id, &question, &settings).retrieve_only().deadline(Instant::now() + self.timeout)
        };
        let mut found = Found::of(session, &self.engine.run(input).map_err(about("ref"))?, &self.engine)?;
        found.opened = Some(if named.whole_documents == 0 {
            format!("{} passage(s) named by {reference}", ids.len())
        } else {
            format!(
                "the whole document {reference}: all {} passage(s) you hold of it, {} tokens (open one passage by its handle, e.g. [n.k], to pay for that one only)",
                ids.len(),
                found.tokens
            )
        });
        Ok(found)
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
            Some(r) => Some(resolve_refs(&self.engine, &id, r).map_err(about("refs"))?.chunks),
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

/// A handle as the model reads it: `[3]` / `3` (a document's marker), `[3.2]` / `3.2` (its
/// passage 2), `[3.2–3.4]` / `3.2-4` (passages 2 to 4): the marker and the passages' range.
fn parse_handle(r: &str) -> Option<(u32, Option<(u32, u32)>)> {
    let r = bare(r);
    let (marker, rest) = match r.split_once('.') {
        Some((m, rest)) => (m.parse().ok()?, Some(rest)),
        None => return Some((r.parse().ok()?, None)),
    };
    let rest = rest?;
    let (a, b) = match rest.split_once(['–', '-']) {
        Some((a, b)) => (a, b.rsplit('.').next()?),
        None => (rest, rest),
    };
    let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
    (a >= 1 && b >= a).then_some((marker, Some((a, b))))
}

/// A chunk's handle in a session: `{marker}.{ordinal + 1}` when its position in the document
/// is known, else its chunk ID.
fn handle(marker: u32, ordinal: Option<u32>, id: &ChunkId) -> String {
    match ordinal {
        Some(o) => format!("{marker}.{}", o + 1),
        None => id.as_str().to_owned(),
    }
}

/// How a block's handles head it: `[3.4]`, `[3.4–3.6]` for consecutive passages, or each
/// (`[3.2] [3.7]`, chunk IDs) as `open` takes them.
fn label(handles: &[String]) -> String {
    let places: Option<Vec<(u32, u32)>> = handles
        .iter()
        .map(|h| match parse_handle(h) {
            Some((m, Some((a, b)))) if a == b => Some((m, a)),
            _ => None,
        })
        .collect();
    let consecutive =
        places.is_some_and(|p| p.len() > 1 && p.windows(2).all(|w| w[1].0 == w[0].0 && w[1].1 == w[0].1 + 1));
    match handles {
        [first, .., last] if consecutive => format!("[{first}–{last}]"),
        _ => handles.iter().map(|h| format!("[{h}]")).collect::<Vec<_>>().join(" "),
    }
}

/// A reference without the brackets the text shows it in.
fn bare(r: &str) -> &str {
    let r = r.trim();
    r.strip_prefix('[').and_then(|x| x.strip_suffix(']')).unwrap_or(r)
}

/// What references named: the chunks, and how many of the references named a whole
/// document (a marker without a passage, or a document ID).
#[derive(Default)]
struct Resolved {
    chunks: Vec<ChunkId>,
    whole_documents: usize,
}

/// The chunks of the session `refs` name: a passage handle (`[3.2]`), a document's marker
/// (`[3]`, `3`: every chunk of it held), a held chunk, or a document with held chunks; a
/// reference that names none of them is the caller's mistake.
fn resolve_refs(engine: &Engine, session: &SessionId, refs: &[String]) -> Result<Resolved> {
    let state = engine.sessions.load(session)?.unwrap_or_default();
    let held: Vec<ChunkId> = {
        let mut h: Vec<ChunkId> = exclusion::first_shown(&state, 0).into_keys().collect();
        h.sort();
        h
    };
    let chunks = engine.vectors.chunks(&held)?;
    let mut out = Resolved::default();
    for r in refs {
        let r = r.trim();
        let bare = bare(r);
        let parsed = parse_handle(r);
        let by_marker = parsed.and_then(|(m, _)| state.markers.iter().find(|(_, &v)| v == m)).map(|(d, _)| d);
        let found: Vec<ChunkId> = if let Some(doc) = by_marker {
            let range = parsed.and_then(|(_, k)| k);
            out.whole_documents += usize::from(range.is_none());
            chunks
                .iter()
                .filter(|c| &c.document_id == doc)
                .filter(|c| match (range, c.ordinal) {
                    (None, _) => true,
                    (Some((a, b)), Some(o)) => (a..=b).contains(&(o + 1)),
                    (Some(_), None) => false,
                })
                .map(|c| c.id.clone())
                .collect()
        } else if let Some(c) = held.iter().find(|c| c.as_str() == r || c.as_str() == bare) {
            vec![c.clone()]
        } else {
            out.whole_documents += 1;
            chunks
                .iter()
                .filter(|c| c.document_id.as_str() == r || c.document_id.as_str() == bare)
                .map(|c| c.id.clone())
                .collect()
        };
        if found.is_empty() {
            let shown: String = r.chars().take(80).collect();
            let more = if r.chars().count() > 80 { "…" } else { "" };
            return Err(Error::InvalidInput(format!(
                "{shown:?}{more} names no passage handle ([n.k]), marker ([n]), chunk ID or document ID this session holds (search first)"
            )));
        }
        for c in found {
            if !out.chunks.contains(&c) {
                out.chunks.push(c);
            }
        }
    }
    Ok(out)
}

/// One block of a result: a chunk (or adjacent chunks of one document) in full.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BlockOut {
    /// Its document's marker, stable within the session (`open [n]` shows every passage of
    /// the document the session holds).
    pub marker: u32,
    /// Each of its passages' handles, in order: `n.k` (passage k of document n), or a chunk ID
    /// where the document's order is unknown. Cite one as `[n.k]`; `open` it to see just that
    /// passage again (`[n.k–n.m]` for consecutive ones).
    pub handles: Vec<String>,
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
    /// Its document's marker (the one it was first shown with).
    pub marker: u32,
    /// The handle of each held passage that ranks (`n.k`, or a chunk ID): `open` one to see
    /// just that passage again.
    pub handles: Vec<String>,
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
    /// `open` only: what the reference named (passages, or a whole document and its cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opened: Option<String>,
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
    /// A step's result as the caller sees it (`session` as the caller named it), each block
    /// and pointer with its passages' handles (their positions read from `engine`'s store).
    pub fn of(session: &str, t: &Trace, engine: &Engine) -> Result<Found> {
        let mut ids: Vec<ChunkId> = t.context.iter().flat_map(|b| b.chunk_ids.iter().cloned()).collect();
        ids.extend(t.pointers.iter().flat_map(|p| p.chunk_ids.iter().cloned()));
        let ordinals: std::collections::HashMap<ChunkId, Option<u32>> =
            engine.vectors.chunks(&ids)?.into_iter().map(|c| (c.id, c.ordinal)).collect();
        let handles = |marker: u32, ids: &[ChunkId]| -> Vec<String> {
            ids.iter().map(|c| handle(marker, ordinals.get(c).copied().flatten(), c)).collect()
        };
        let blocks = t
            .context
            .iter()
            .map(|b| BlockOut {
                marker: b.marker,
                handles: handles(b.marker, &b.chunk_ids),
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
                handles: handles(p.marker, &p.chunk_ids),
                chunk_ids: p.chunk_ids.iter().map(|c| c.as_str().to_owned()).collect(),
                document_id: p.document_id.as_str().to_owned(),
                title: p.title.clone(),
                shown_in_step: p.shown_in_turn,
            })
            .collect();
        Ok(Found {
            session: session.to_owned(),
            step: t.turn,
            blocks,
            pointers,
            tokens: t.trace.context_tokens,
            dropped_by_budget: t.trace.dropped_by_budget.iter().map(|d| d.as_str().to_owned()).collect(),
            opened: None,
        })
    }

    /// The text a model reads: pointers first (one line each, with the handles that open
    /// them), then the new blocks in full under `[n.k] Title › Section (document, p. 3)` (a
    /// document's later blocks under `[n.k] … › Section (p. 7)`), then
    /// what did not fit — never "nothing found" when something ranked but did not fit.
    pub fn text(&self) -> String {
        let mut text = String::new();
        if let Some(o) = &self.opened {
            text.push_str(&format!("Opened {o}.\n"));
        }
        for p in &self.pointers {
            let handles: Vec<String> = p.handles.iter().map(|h| format!("[{h}]")).collect();
            text.push_str(&format!(
                "{} {} ({}) — you already hold this (step {}); open {} to see it again\n",
                handles.join(" "),
                p.title,
                p.document_id,
                p.shown_in_step,
                handles.first().map(String::as_str).unwrap_or("it")
            ));
        }
        let mut headed: Vec<&str> = Vec::new();
        for b in ragctx_core::by_document(&self.blocks, |b| b.document_id.as_str()) {
            let metadata: ragctx_core::Metadata = serde_json::from_value(b.metadata.clone()).unwrap_or_default();
            // A document's blocks stand together as in the chat prompt: the later ones under
            // the best one's header, headed by their handles and what is their own.
            if headed.contains(&b.document_id.as_str()) {
                let heading = ragctx_core::ContextBlock::continuation(&metadata);
                text.push_str(&format!("{} {heading}\n{}\n\n", label(&b.handles), b.text.trim_end()));
                continue;
            }
            headed.push(&b.document_id);
            let title = ragctx_core::shown_title(&b.title, &metadata);
            let pages = match ragctx_core::pages(&metadata) {
                Some((a, z)) if a == z => format!(", p. {a}"),
                Some((a, z)) => format!(", pp. {a}–{z}"),
                None => String::new(),
            };
            text.push_str(&format!(
                "{} {title} ({}{pages})\n{}\n\n",
                label(&b.handles),
                b.document_id,
                b.text.trim_end()
            ));
        }
        let dropped = !self.dropped_by_budget.is_empty();
        if self.blocks.is_empty() && self.pointers.is_empty() && !dropped {
            text.push_str("Nothing found that you do not already hold.\n");
        } else if self.blocks.is_empty() && self.pointers.is_empty() {
            text.push_str("Results ranked, but none fit this call's budget: call again with a larger budget.\n");
        } else if self.blocks.is_empty() && !dropped {
            text.push_str("Nothing new: every result that ranks is one you already hold.\n");
        }
        if dropped {
            text.push_str(&format!(
                "Did not fit the budget ({} document(s); a larger budget would bring them): {}\n",
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

#[cfg(test)]
mod tests {
    use super::{label, parse_handle};

    #[test]
    fn handles_parse_as_the_text_shows_them_and_label_blocks() {
        assert_eq!(parse_handle("[3]"), Some((3, None)));
        assert_eq!(parse_handle("3.2"), Some((3, Some((2, 2)))));
        assert_eq!(parse_handle("[3.2–3.4]"), Some((3, Some((2, 4)))));
        assert_eq!(parse_handle("3.2-4"), Some((3, Some((2, 4)))));
        for no in ["3.0", "3.4-2", "d-1-0-10", "[a.b]", ""] {
            assert_eq!(parse_handle(no), None, "{no}");
        }
        let h = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(label(&h(&["3.4"])), "[3.4]");
        assert_eq!(label(&h(&["3.4", "3.5", "3.6"])), "[3.4–3.6]");
        assert_eq!(label(&h(&["3.4", "3.6"])), "[3.4] [3.6]");
        assert_eq!(label(&h(&["d-0-10", "d-10-20"])), "[d-0-10] [d-10-20]");
    }

    #[test]
    fn a_documents_blocks_stand_under_its_first_blocks_header() {
        let block = |handle: &str, doc: &str, section: &str, text: &str| super::BlockOut {
            marker: 1,
            handles: vec![handle.into()],
            chunk_ids: vec![],
            document_id: doc.into(),
            title: "Guide".into(),
            metadata: serde_json::json!({"section": section, "page_start": 3}),
            text: text.into(),
            tokens: 0,
        };
        let found = super::Found {
            session: "s".into(),
            step: 1,
            // In rank order: the document's second block ranks below the other document's.
            blocks: vec![
                block("1.2", "g.pdf", "Fees", "Ten euros."),
                block("2.1", "h.pdf", "Fees", "Free."),
                block("1.7", "g.pdf", "Appeals", "Write to us."),
            ],
            pointers: vec![],
            tokens: 0,
            dropped_by_budget: vec![],
            opened: None,
        };
        assert_eq!(
            found.text(),
            "[1.2] Guide › Fees (g.pdf, p. 3)\nTen euros.\n\n[1.7] … › Appeals (p. 3)\nWrite to us.\n\n\
             [2.1] Guide › Fees (h.pdf, p. 3)\nFree.\n\n"
        );
    }
}
