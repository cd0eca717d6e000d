//! ragctx as a Rust library: an engine built from code, three documents ingested, two turns
//! of one conversation. The second turn is a follow-up: it gets new evidence, not the first
//! turn's passages again.
//!
//! ```sh
//! scripts/setup                                   # installs the model the engine runs
//! cargo run --release -p ragctx-app --example library
//! ```

use ragctx_app::{App, RawConfig, Settings, TurnOverrides};
use ragctx_core::{Error, SessionId};

/// Three documents of our own (JSONL, as `ragctx ingest` reads it).
const DOCUMENTS: &str = r#"{"_id": "ferns#0", "document_id": "ferns", "title": "Ferns", "text": "Water a Boston fern when the top of the soil feels dry, about twice a week in summer. Ferns like humid air: mist them or stand the pot on a tray of wet pebbles."}
{"_id": "ferns-winter#0", "document_id": "ferns-winter", "title": "Ferns in winter", "text": "In winter a fern grows slowly: water it about once a week and keep it away from radiators, whose dry heat browns the fronds."}
{"_id": "cacti#0", "document_id": "cacti", "title": "Cacti", "text": "A cactus needs water only when its soil is completely dry, every two to three weeks in summer and hardly at all in winter."}
"#;

fn main() -> Result<(), Error> {
    // Settings as the CLI builds them: defaults, then RAGCTX_* from the environment, then
    // the program's own values. Validated once; the engine is built from them.
    // A data dir of its own (removed at the end, pass or fail), vectors and sessions in it.
    let dir = TempDir(std::env::temp_dir().join(format!("ragctx-library-example-{}", std::process::id())));
    let own = RawConfig {
        data_dir: Some(dir.0.clone()),
        backend: Some("embedded".into()),
        sessions: Some("embedded".into()),
        turn: vec![TurnOverrides { budget: Some(600), ..Default::default() }],
        ..Default::default()
    };
    let settings = Settings::layered(None, own)?;
    let app = App::open(settings)?;

    let report = app.ingest_records("example documents", DOCUMENTS.as_bytes(), false)?;
    println!("ingested {} chunks of {} documents", report.stored, report.documents);

    let session = SessionId::parse("library-example")?;
    let mut shown: Vec<String> = Vec::new();
    for question in ["How often should I water a fern?", "And in winter?"] {
        let turn = app.engine.ask(&session, question, app.settings.turn())?;
        println!("\nturn {} ({:?}): {question}", turn.turn, turn.intent());
        let mut new = Vec::new();
        for block in &turn.context {
            let ids: Vec<String> = block.chunk_ids.iter().map(|c| c.to_string()).collect();
            match block.carried_from {
                // `engine` memory keeps what the conversation still needs in the prompt.
                Some(t) => println!("  [{}] {} {ids:?}: carried from turn {t}", block.marker, block.title),
                None => {
                    println!("  [{}] {} {ids:?}: new, {} tokens", block.marker, block.title, block.tokens);
                    new.extend(ids);
                }
            }
        }
        println!("  prompt {} tokens, budget {}", turn.trace.prompt_tokens, app.settings.turn().budget);
        // What CI checks when it runs this example: evidence every turn, none of it re-sent
        // as new.
        assert!(!turn.context.is_empty(), "turn {} has no evidence", turn.turn);
        assert!(!new.iter().any(|id| shown.contains(id)), "turn {} re-sent a chunk as new", turn.turn);
        shown.extend(new);
    }
    Ok(())
}

/// A directory removed when dropped.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}
