//! Readers of the evaluation's input files: MTRAG conversations and question lists.

use crate::error::{read_to_string, Error, Result};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// The first `n` "question" fields of a JSONL file (lines without one are passed over).
pub fn read_questions(path: &std::path::Path, n: usize) -> Result<Vec<String>> {
    let text = read_to_string(path)?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["question"].as_str().map(str::to_owned))
        .take(n)
        .collect())
}

/// One MTRAG conversation: its user messages in order and the gold passages per turn.
pub struct Conversation {
    /// MTRAG's `conversation_id`.
    pub id: String,
    /// The MTRAG domain, which names its corpus file (`corpus_DOMAIN.jsonl`).
    pub domain: String,
    /// The user messages, oldest first: those of the conversation's longest line (the user
    /// turns of its history, then its question).
    pub messages: Vec<String>,
    /// 1-based user turn → (gold chunk ids, rewrite).
    pub gold: HashMap<usize, (Vec<String>, String)>,
    /// 1-based user turn → the agent's reply to it, as a later line's history gives it (the
    /// reference answer; a conversation's last turn has none). For measuring only: no stage
    /// ever reads it.
    pub answers: HashMap<usize, String>,
}

/// Conversations of `domains` (all when empty) with every user message in order.
pub fn conversations(path: &Path, domains: &[String]) -> Result<Vec<Conversation>> {
    let text = read_to_string(path)?;
    let mut by_id: BTreeMap<String, Conversation> = BTreeMap::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| Error::json(path, i + 1, e))?;
        let field = |k: &str| {
            v[k].as_str()
                .map(str::to_owned)
                .ok_or_else(|| Error::Input(format!("{}:{}: no {k}", path.display(), i + 1)))
        };
        let (cid, domain, question) = (field("conversation_id")?, field("domain")?, field("question")?);
        if !domains.is_empty() && !domains.contains(&domain) {
            continue;
        }
        // The agent's reply after user message k (1-based) of this line's history.
        let mut replies: Vec<(usize, String)> = Vec::new();
        let mut users = 0;
        for m in v["history"].as_array().into_iter().flatten() {
            match (m["speaker"].as_str(), m["text"].as_str()) {
                (Some("user"), _) => users += 1,
                (Some("agent"), Some(t)) if users > 0 && !t.trim().is_empty() => replies.push((users, t.to_owned())),
                _ => {}
            }
        }
        let mut messages: Vec<String> = v["history"]
            .as_array()
            .map(|h| {
                h.iter()
                    .filter(|m| m["speaker"] == "user")
                    .filter_map(|m| m["text"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        messages.push(question);
        let turn = messages.len();
        let gold: Vec<String> = v["gold"]
            .as_array()
            .map(|g| g.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        let rewrite = v["rewrite"].as_str().unwrap_or_default().to_owned();
        let c = by_id.entry(cid.clone()).or_insert_with(|| Conversation {
            id: cid,
            domain,
            messages: Vec::new(),
            gold: HashMap::new(),
            answers: HashMap::new(),
        });
        for (k, text) in replies {
            c.answers.entry(k).or_insert(text);
        }
        if messages.len() > c.messages.len() {
            c.messages = messages;
        }
        if !gold.is_empty() {
            c.gold.insert(turn, (gold, rewrite));
        }
    }
    Ok(by_id.into_values().collect())
}
