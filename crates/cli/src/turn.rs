//! `ask`, `chat`, `trace` and `session`: one turn, a conversation, and what was remembered.

use anyhow::{bail, Result};
use ragctx_app::app::App;
use ragctx_core::{RetrievalTrace, SessionId, SessionStore, Trace, TraceStats};
use ragctx_engine::TurnSettings;
use std::io::{BufRead, Write};

pub fn print_turn(out: &Trace, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string(out)?);
        return Ok(());
    }
    println!("{}\n", out.answer);
    if !out.context.is_empty() {
        println!("Sources:");
        // One line per document: its blocks (passages) under its one marker, in the order the
        // document first ranks.
        let mut order: Vec<u32> = Vec::new();
        for b in &out.context {
            if !order.contains(&b.marker) {
                order.push(b.marker);
            }
        }
        for marker in order {
            let blocks: Vec<&ragctx_core::ContextBlock> = out.context.iter().filter(|b| b.marker == marker).collect();
            let first = blocks[0];
            let carried: Vec<u64> = blocks.iter().filter_map(|b| b.carried_from).collect();
            let carried = carried.iter().min().map(|t| format!(" — shown in turn {t}")).unwrap_or_default();
            // Lexical and hybrid turns: which side found the document's best block.
            let best = blocks.iter().max_by(|a, b| a.score.total_cmp(&b.score)).expect("a block");
            let side = out
                .trace
                .retrieval
                .as_ref()
                .and_then(|r| r.side(&best.chunk_ids))
                .map(|s| format!(", found by {s}"))
                .unwrap_or_default();
            let passages = match blocks.len() {
                1 => String::new(),
                n => format!("{n} passages, "),
            };
            // The pages the answer cites (a PDF's), or, for a document it does not cite, those
            // of all its passages.
            let pages: Vec<(u32, u32)> = match out.citations.iter().find(|c| c.marker == marker) {
                Some(c) if !c.pages.is_empty() => c.pages.clone(),
                _ => blocks.iter().filter_map(|b| ragctx_core::pages(&b.metadata)).collect(),
            };
            let pages = if pages.is_empty() { String::new() } else { format!(", {}", ragctx_core::page_label(&pages)) };
            println!(
                "  [{marker}] {} ({}{pages}){carried}  {passages}score {:.3}, {} tokens{side}",
                ragctx_core::shown_title(&first.title, &first.metadata),
                first.document_id,
                best.score,
                blocks.iter().map(|b| b.tokens).sum::<usize>()
            );
        }
    }
    if !out.pointers.is_empty() {
        let pointers = &out.pointers;
        println!("Already with you (pointers, not re-sent):");
        for p in pointers {
            println!("  {}  score {:.3}", p.render().trim_end(), p.score);
        }
    }
    println!("{}", summary(out.turn, &out.trace));
    Ok(())
}

/// One line for an agent's `search` or `open`: what it returned and added, without a chat
/// turn's fields (prompt, citations).
fn step_summary(t: &Trace) -> String {
    let s = &t.trace;
    let added: usize = t.context.iter().map(|b| b.chunk_ids.len()).sum();
    let dropped = if s.dropped_by_budget.is_empty() {
        String::new()
    } else {
        format!(" · did not fit: {}", s.dropped_by_budget.iter().map(|d| d.as_str()).collect::<Vec<_>>().join(", "))
    };
    format!(
        "{} candidates → {} blocks ({added} chunks {}) and {} pointers to held ones → {} tokens returned (budget {}) · excluded {} · search {:?} in {:.2} ms{dropped}",
        s.candidates,
        s.context_fragments,
        if s.step_kind() == ragctx_core::StepKind::Open { "shown again" } else { "new to the session" },
        s.pointers,
        s.context_tokens,
        s.settings.turn.budget,
        s.excluded,
        s.search_path,
        s.timings_ms.get("search").copied().unwrap_or(0.0),
    )
}

/// One line that says why the context looks the way it does.
pub fn summary(turn: u64, t: &TraceStats) -> String {
    let dropped = if t.dropped_by_budget.is_empty() {
        String::new()
    } else {
        format!(
            " · dropped by budget: {}",
            t.dropped_by_budget.iter().map(|d| d.as_str()).collect::<Vec<_>>().join(", ")
        )
    };
    let search = match &t.retrieval {
        None => format!("{:?}", t.search_path),
        Some(RetrievalTrace { fallback: Some(why), .. }) => format!("{:?} ({why})", t.search_path),
        Some(r) => {
            let how = r.fusion.map(|f| format!("/{}", f.as_str())).unwrap_or_default();
            format!("{}{how}: dense {} + lexical {} candidates", r.retrieval.as_str(), r.dense.len(), r.lexical.len())
        }
    };
    // `condense openai`: what the search used instead of the question, or why it did not.
    let condensed = match &t.condensed {
        None => String::new(),
        Some(c) => match (&c.query, &c.fallback) {
            (Some(q), _) => format!(
                " · condensed by {} in {:.0} ms{}: {q:?}",
                c.model,
                c.ms,
                if c.cached { " (stored)" } else { "" }
            ),
            (None, Some(why)) => format!(" · not condensed ({why}); searched with the question"),
            (None, None) => String::new(),
        },
    };
    // `compress sentences`: how many blocks were cut and what their cuts freed for further sources.
    let compressed = match &t.compressed {
        Some(c) if !c.cut.is_empty() => {
            format!(" · compressed {} blocks (cuts marked …), {} tokens freed", c.cut.len(), c.freed_tokens)
        }
        _ => String::new(),
    };
    format!(
        "turn {turn} · {} · memory {} · {} candidates → {} documents → {} fragments ({} carried, {} pointers) → {} tokens (budget {}) · prompt {} · excluded {} · cited {} ({} invalid) · search {search} in {:.2} ms{condensed}{compressed}{dropped}",
        t.intent.as_str(),
        t.memory.as_str(),
        t.candidates,
        t.unique_documents,
        t.context_fragments,
        t.carried,
        t.pointers,
        t.context_tokens,
        t.settings.turn.budget,
        t.prompt_tokens,
        t.excluded,
        t.answer_citations,
        t.invalid_citations,
        t.timings_ms.get("search").copied().unwrap_or_default(),
    )
}

pub fn ask(app: &App, session: &SessionId, question: &str, settings: &TurnSettings, json: bool) -> Result<()> {
    let out = app.engine.ask(session, question, settings)?;
    print_turn(&out, json)
}

pub fn chat(app: &App, session: &SessionId, settings: &TurnSettings) -> Result<()> {
    let stdin = std::io::stdin();
    eprintln!("session {session}: ask a question; /reshow, /trace, /reset, /quit");
    loop {
        eprint!("> ");
        std::io::stderr().flush()?;
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            return Ok(());
        }
        let line = line.trim();
        let mut s = settings.clone();
        let question = match line {
            "" => continue,
            "/quit" | "/exit" => return Ok(()),
            "/trace" => {
                match app.engine.sessions.traces(session)?.last() {
                    Some(t) => println!("{}", summary(t.turn, &t.trace)),
                    None => println!("no turns yet"),
                }
                continue;
            }
            "/reset" => {
                app.engine.sessions.reset(session)?;
                println!("session {session} reset: everything shown may come back");
                continue;
            }
            "/reshow" => {
                s.mode = ragctx_core::Mode::Reshow;
                "show me that again"
            }
            q if q.starts_with('/') => {
                eprintln!("unknown command {q}: /reshow, /trace, /reset, /quit");
                continue;
            }
            q => q,
        };
        match app.engine.ask(session, question, &s) {
            Ok(out) => print_turn(&out, false)?,
            Err(e) => eprintln!("error: {}", e.report()),
        }
    }
}

pub fn trace(sessions: &dyn SessionStore, session: &SessionId, turn: Option<u64>, json: bool) -> Result<()> {
    let all = sessions.traces(session)?;
    if all.is_empty() {
        bail!(ragctx_core::Error::NotFound(format!("session {session} has no turns")));
    }
    let chosen: Vec<&Trace> = match turn {
        Some(n) => match all.iter().find(|t| t.turn == n) {
            Some(t) => vec![t],
            None => bail!(ragctx_core::Error::NotFound(format!("session {session} has no turn {n}"))),
        },
        None => all.iter().collect(),
    };
    if json {
        if turn.is_some() {
            println!("{}", serde_json::to_string(chosen[0])?);
        } else {
            println!("{}", serde_json::to_string(&chosen)?);
        }
        return Ok(());
    }
    for t in chosen {
        let kind = t.trace.step_kind();
        println!("{} {}: {}", kind.as_str(), t.turn, t.question);
        match kind {
            ragctx_core::StepKind::Turn => println!("  {}", summary(t.turn, &t.trace)),
            ragctx_core::StepKind::Forget => println!(
                "  forgot {} chunk(s): {}",
                t.trace.forgotten.len(),
                t.trace.forgotten.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ")
            ),
            ragctx_core::StepKind::Search | ragctx_core::StepKind::Open => println!("  {}", step_summary(t)),
        }
        for b in ragctx_core::by_document(&t.context, |b| &b.document_id) {
            let cited = t.citations.iter().any(|c| c.marker == b.marker);
            let indent = if b.continued { "  " } else { "" };
            println!("  {indent}{}{}", b.heading(), if cited { "  cited" } else { "" });
        }
        for p in &t.pointers {
            let cited = t.citations.iter().any(|c| c.marker == p.marker);
            println!("  pointer {}{}", p.render().trim_end(), if cited { "  cited" } else { "" });
        }
        if !t.trace.aliases.is_empty() {
            let a: Vec<String> = t.trace.aliases.iter().map(|(d, k)| format!("{d} = {k}")).collect();
            println!("  duplicate text: {}", a.join(", "));
        }
        println!(
            "  timings ms: {}",
            t.trace.timings_ms.iter().map(|(k, v)| format!("{k} {v:.2}")).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(())
}

/// `trace --turn N --replay`: the turn again with the given settings, beside the original;
/// with the intent it was recorded with unless `mode` (the `--mode` flag) forces one.
pub fn replay(app: &App, session: &SessionId, turn: u64, json: bool, mode: ragctx_core::Mode) -> Result<()> {
    let all = app.engine.sessions.traces(session)?;
    let Some(pos) = all.iter().position(|t| t.turn == turn) else {
        bail!(ragctx_core::Error::NotFound(format!("session {session} has no turn {turn}")));
    };
    let settings = ragctx_core::TurnSettings { mode, ..app.settings.turn().clone() };
    let out = app.engine.replay(session, &all[pos], &all[..pos], &settings)?;
    if json {
        println!("{}", serde_json::json!({"replay": out, "original": all[pos].trace}));
        return Ok(());
    }
    println!("original: {}", summary(turn, &all[pos].trace));
    println!("replayed: {}", summary(turn, &out.trace));
    for b in &out.context {
        println!("  [{}] {} ({})", b.marker, b.title, b.document_id);
    }
    Ok(())
}

pub fn session(sessions: &dyn SessionStore, action: &str, session: &SessionId) -> Result<()> {
    match action {
        "show" => match sessions.load(session)? {
            Some(s) => println!("{}", serde_json::to_string_pretty(&s)?),
            None => bail!(ragctx_core::Error::NotFound(format!("session {session}"))),
        },
        "reset" => {
            if !sessions.reset(session)? {
                bail!(ragctx_core::Error::NotFound(format!("session {session}")));
            }
            println!("session {session} reset");
        }
        "delete" => {
            if !sessions.delete(session)? {
                bail!(ragctx_core::Error::NotFound(format!("session {session}")));
            }
            println!("session {session} deleted");
        }
        other => bail!(ragctx_core::Error::InvalidInput(format!(
            "unknown session action {other:?}: use show, reset or delete"
        ))),
    }
    Ok(())
}
