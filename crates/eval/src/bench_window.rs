//! `ragctx bench window`: the seed sizes the sliding window N by a load test. For each N,
//! replay conversations (and one synthetic long session) and measure search latency and
//! how much of each context the session had already seen.

use crate::data::conversations;
use crate::error::{bail, Result};
use crate::stats::percentile;
use ragctx_app::app::App;
use ragctx_core::SessionId;
use std::collections::HashSet;
use std::path::PathBuf;

/// Options of `bench window`, as its flags give them.
#[derive(clap::Args)]
pub struct WindowOptions {
    /// Conversations file (turns.jsonl format)
    #[arg(long, default_value = "../shared/data/mtrag/turns.jsonl")]
    pub turns: PathBuf,
    /// Only conversations of this domain (the long session's questions too)
    #[arg(long)]
    pub domain: Option<String>,
    /// Comma-separated window sizes; 0 = all turns
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,0")]
    pub windows: Vec<usize>,
    /// Conversations replayed per window size
    #[arg(long, default_value_t = 30)]
    pub conversations: usize,
    /// Turns of the synthetic long session (its questions are all the domain's questions)
    #[arg(long, default_value_t = 60)]
    pub long_session: usize,
    /// Recommend the largest window whose p99 search latency stays under this
    #[arg(long, default_value_t = 5.0)]
    pub latency_ceiling_ms: f64,
    /// Print the rows and the recommended window as one JSON object
    #[arg(long)]
    pub json: bool,
}

#[derive(serde::Serialize)]
struct Row {
    window: String,
    turns: usize,
    search_p50_ms: f64,
    search_p99_ms: f64,
    excluded_mean: f64,
    repeat_rate: f64,
    long_session_search_p99_ms: f64,
    long_session_repeat_rate: f64,
}

/// Replays `sessions` (lists of questions) with window `n`; returns search latencies,
/// exclusion sizes and the share of context chunks seen earlier in the session.
fn replay(app: &App, sessions: &[Vec<String>], n: usize, tag: &str) -> Result<(Vec<f64>, Vec<f64>, f64)> {
    let mut settings = crate::replay_settings(&app.settings);
    settings.window = n;
    let (mut lat, mut excluded) = (Vec::new(), Vec::new());
    let (mut repeated, mut shown_total) = (0usize, 0usize);
    for (i, questions) in sessions.iter().enumerate() {
        let session = SessionId::parse(&format!("bench-window-{tag}-{n}-{i}"))?;
        app.engine.sessions.delete(&session)?;
        let mut seen: HashSet<String> = HashSet::new();
        for q in questions {
            let out = app.engine.ask(&session, q, &settings)?;
            lat.push(out.trace.timings_ms.get("search").copied().unwrap_or_default());
            excluded.push(out.trace.excluded as f64);
            for c in out.context.iter().flat_map(|b| b.chunk_ids.iter()) {
                shown_total += 1;
                if !seen.insert(c.0.clone()) {
                    repeated += 1;
                }
            }
        }
        app.engine.sessions.delete(&session)?;
    }
    lat.sort_by(f64::total_cmp);
    Ok((lat, excluded, if shown_total == 0 { 0.0 } else { repeated as f64 / shown_total as f64 }))
}

/// Replays the conversations and the long session once per window size in fresh sessions,
/// prints a row per size and recommends the largest window under the latency ceiling.
pub fn run(app: &App, opts: &WindowOptions) -> Result<()> {
    let domains: Vec<String> = opts.domain.iter().cloned().collect();
    let mut convs = conversations(&opts.turns, &domains)?;
    if convs.is_empty() {
        bail!("no conversations in {}", opts.turns.display());
    }
    let long: Vec<String> = convs.iter().flat_map(|c| c.messages.iter().cloned()).take(opts.long_session).collect();
    convs.truncate(opts.conversations);
    let sessions: Vec<Vec<String>> = convs.into_iter().map(|c| c.messages).collect();
    let mut rows = Vec::new();
    for &n in &opts.windows {
        let (lat, excluded, repeat) = replay(app, &sessions, n, "c")?;
        let (long_lat, _, long_repeat) = replay(app, std::slice::from_ref(&long), n, "long")?;
        rows.push(Row {
            window: if n == 0 { "all".into() } else { n.to_string() },
            turns: lat.len(),
            search_p50_ms: percentile(&lat, 0.5),
            search_p99_ms: percentile(&lat, 0.99),
            excluded_mean: excluded.iter().sum::<f64>() / excluded.len().max(1) as f64,
            repeat_rate: repeat,
            long_session_search_p99_ms: percentile(&long_lat, 0.99),
            long_session_repeat_rate: long_repeat,
        });
    }
    // Larger windows repeat less; take the largest whose worst latency fits the ceiling.
    let fits = |r: &Row| r.search_p99_ms.max(r.long_session_search_p99_ms) <= opts.latency_ceiling_ms;
    let rank = |w: &str| if w == "all" { usize::MAX } else { w.parse().unwrap_or(0) };
    let best = rows.iter().filter(|r| fits(r)).max_by_key(|r| rank(&r.window)).map(|r| r.window.clone());
    if opts.json {
        println!(
            "{}",
            serde_json::json!({"rows": rows, "latency_ceiling_ms": opts.latency_ceiling_ms, "recommended_window": best, "long_session_turns": long.len()})
        );
        return Ok(());
    }
    println!("| window N | turns | search p50 ms | search p99 ms | mean excluded | repeat rate | long session ({} turns) p99 ms | long session repeat rate |", long.len());
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {:.3} | {:.3} | {:.1} | {:.3} | {:.3} | {:.3} |",
            r.window,
            r.turns,
            r.search_p50_ms,
            r.search_p99_ms,
            r.excluded_mean,
            r.repeat_rate,
            r.long_session_search_p99_ms,
            r.long_session_repeat_rate
        );
    }
    match best {
        Some(w) => println!("recommended window for a {:.1} ms search ceiling: {w}", opts.latency_ceiling_ms),
        None => println!("no window keeps search p99 under {:.1} ms", opts.latency_ceiling_ms),
    }
    Ok(())
}
