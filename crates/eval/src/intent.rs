//! `ragctx eval intent`: the intent rules against a labelled set (DESIGN §2, stage 1).
//! Each case is judged as the second message of a session whose first was an ordinary
//! question, which is what `classify(text, has_history = true)` sees.

use crate::error::{bail, read_to_string, Error, Result};
use ragctx_core::Intent;
use ragctx_engine::intent::classify;
use std::collections::BTreeMap;
use std::path::Path;

const INTENTS: [Intent; 3] = [Intent::New, Intent::FollowUp, Intent::Reshow];

/// One labelled message.
pub struct Case {
    /// The message, classified as a session's second.
    pub text: String,
    /// The expected intent.
    pub intent: Intent,
    /// 1-based line in the cases file, for reporting misses.
    pub line: usize,
}

/// Reads JSONL `{"text", "intent"}` cases; lines with only `_comment` are skipped.
pub fn read_cases(path: &Path) -> Result<Vec<Case>> {
    let text = read_to_string(path)?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| Error::json(path, i + 1, e))?;
        if v.get("text").is_none() && v.get("_comment").is_some() {
            continue;
        }
        let field = |k: &str| {
            v[k].as_str().ok_or_else(|| Error::Input(format!("{}:{}: `{k}` must be a string", path.display(), i + 1)))
        };
        let intent: Intent = field("intent")?
            .parse()
            .map_err(|e| Error::Input(format!("{}:{}: bad `intent`: {e}", path.display(), i + 1)))?;
        out.push(Case { text: field("text")?.to_owned(), intent, line: i + 1 });
    }
    if out.is_empty() {
        bail!("{}: no cases", path.display());
    }
    Ok(out)
}

/// Classifies every case of `path` and prints accuracy, the confusion matrix and the misses.
/// Fails below `min_accuracy` or when any message is wrongly taken for a reshow.
pub fn run(path: &Path, min_accuracy: f64, json: bool) -> Result<()> {
    let cases = read_cases(path)?;
    // confusion[expected][predicted]
    let mut confusion: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    let mut wrong = Vec::new();
    for c in &cases {
        let got = classify(&c.text, true);
        *confusion.entry(c.intent.as_str()).or_default().entry(got.as_str()).or_default() += 1;
        if got != c.intent {
            wrong.push((c, got));
        }
    }
    let correct = cases.len() - wrong.len();
    let accuracy = correct as f64 / cases.len() as f64;
    // The error that hides evidence: a message with a subject of its own taken for "show that again".
    let false_reshow = wrong.iter().filter(|(_, got)| *got == Intent::Reshow).count();
    if json {
        let misses: Vec<serde_json::Value> = wrong
            .iter()
            .map(|(c, got)| serde_json::json!({"line": c.line, "text": c.text, "expected": c.intent, "got": got}))
            .collect();
        println!(
            "{}",
            serde_json::json!({"cases": cases.len(), "accuracy": accuracy, "false_reshow": false_reshow,
                               "confusion": confusion, "misses": misses})
        );
    } else {
        println!(
            "{} cases from {}: accuracy {accuracy:.3} ({correct} right), false reshow {false_reshow}",
            cases.len(),
            path.display()
        );
        println!("| expected \\ got | {} |", INTENTS.map(|i| i.as_str()).join(" | "));
        println!("|---|---:|---:|---:|");
        for e in INTENTS {
            let row = confusion.get(e.as_str());
            let cells: Vec<String> =
                INTENTS.iter().map(|g| row.and_then(|r| r.get(g.as_str())).copied().unwrap_or(0).to_string()).collect();
            println!("| {} | {} |", e.as_str(), cells.join(" | "));
        }
        for (c, got) in &wrong {
            println!("miss (line {}): {:?} expected {}, got {}", c.line, c.text, c.intent.as_str(), got.as_str());
        }
    }
    if accuracy < min_accuracy || false_reshow > 0 {
        return Err(Error::Failed(format!(
            "intent accuracy {accuracy:.3} (needs {min_accuracy}) with {false_reshow} message(s) wrongly taken for a reshow"
        )));
    }
    Ok(())
}
