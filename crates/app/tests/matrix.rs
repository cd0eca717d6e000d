//! The supported matrix (ARCHITECTURE.md, "Supported combinations"), end to end: every
//! product combination of memory, strategy, granularity, consumption and retrieval runs one
//! short conversation through the library (settings → App → engine → the data dir's store,
//! the in-process model, cl100k budgets) and each turn is checked against the invariants of
//! its mode:
//! - no chunk twice in one prompt (blocks, and blocks with pointers);
//! - `client` memory: nothing the window consumed is re-sent as a block (the excluded ids
//!   come back, at most, as pointers);
//! - `engine` memory: a block of a chunk shown before is marked with the turn that first
//!   showed it, and a new block is not;
//! - exclusion inside the search: no search result is an excluded id, and the search still
//!   fills its slots (`candidates` ≥ `limit` while the corpus has more to give);
//! - a reshow brings back the previous turn's documents.

use ragctx_app::{App, RawConfig, Settings, TurnOverrides};
use ragctx_core::{Memory, SessionId, Trace, TurnSettings};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

/// Twelve documents of three chunks on plants, pets and bicycles: questions on one topic
/// find several documents, and three turns leave plenty unexcluded.
fn corpus() -> String {
    let topics = [
        (
            "fern",
            "Ferns",
            "ferns like moist soil and shade",
            "water ferns twice a week in summer",
            "ferns grow from spores, not seeds",
        ),
        (
            "cactus",
            "Cacti",
            "a cactus needs sun and dry soil",
            "water a cactus every three weeks",
            "cacti store water in thick stems",
        ),
        (
            "orchid",
            "Orchids",
            "orchids grow on bark, not soil",
            "water orchids with three ice cubes a week",
            "orchids flower once a year",
        ),
        (
            "basil",
            "Basil",
            "basil wants sun and warm soil",
            "water basil when the soil surface is dry",
            "pinch basil flowers to keep leaves coming",
        ),
        (
            "cat",
            "Cats",
            "cats sleep sixteen hours a day",
            "feed a cat twice a day with wet food",
            "cats drink little water; a fountain helps",
        ),
        (
            "dog",
            "Dogs",
            "dogs need a walk every day",
            "feed a dog once or twice a day",
            "dogs drink about fifty millilitres of water per kilo",
        ),
        (
            "rabbit",
            "Rabbits",
            "rabbits eat hay all day",
            "rabbits need fresh water every day",
            "rabbits chew to wear their teeth down",
        ),
        (
            "parrot",
            "Parrots",
            "parrots live fifty years",
            "parrots eat seeds, fruit and nuts",
            "parrots bathe in shallow water",
        ),
        (
            "chain",
            "Bicycle chains",
            "oil a bicycle chain every few hundred kilometres",
            "a worn chain skips on the sprockets",
            "clean the chain with a dry rag",
        ),
        (
            "tyre",
            "Bicycle tyres",
            "pump road tyres to six bar",
            "a puncture is patched from inside the tyre",
            "wider tyres ride softer",
        ),
        (
            "brake",
            "Bicycle brakes",
            "disc brakes stop well in rain",
            "replace brake pads when the groove is gone",
            "rim brakes wear the rim",
        ),
        (
            "light",
            "Bicycle lights",
            "a front light must be white",
            "a rear light must be red",
            "dynamo lights need no batteries",
        ),
    ];
    let mut out = String::new();
    for (doc, title, a, b, c) in topics {
        for (i, text) in [a, b, c].iter().enumerate() {
            let line = json!({"_id": format!("{doc}#{i}"), "document_id": doc, "title": title, "text": text});
            out.push_str(&line.to_string());
            out.push('\n');
        }
    }
    out
}

const QUESTIONS: [&str; 3] =
    ["How often should I water my plants?", "How much water do pets need?", "Which plants like dry soil?"];

/// The supported combinations: memory × strategy × granularity (`client` only) ×
/// consumption × retrieval. Evaluation-only settings (strategies `none` and `group`, the
/// seed's baselines) are not product features and are not in it.
fn matrix() -> Vec<Value> {
    let mut rows = Vec::new();
    for memory in ["engine", "client"] {
        for strategy in ["exclude", "full"] {
            let granularities: &[&str] = if memory == "client" { &["chunk", "document"] } else { &["chunk"] };
            for granularity in granularities {
                for consumption in ["shown", "cited"] {
                    for retrieval in ["dense", "lexical", "hybrid"] {
                        rows.push(json!({"memory": memory, "strategy": strategy, "granularity": granularity,
                            "consumption": consumption, "retrieval": retrieval, "limit": 3}));
                    }
                }
            }
        }
    }
    rows
}

fn settings_of(row: &Value, base: &TurnSettings) -> TurnSettings {
    let o: TurnOverrides = serde_json::from_value(row.clone()).unwrap();
    o.apply(base).unwrap_or_else(|e| panic!("{row}: {e}"))
}

fn chunks_of(t: &Trace) -> Vec<String> {
    t.context.iter().flat_map(|b| b.chunk_ids.iter().map(|c| c.as_str().to_owned())).collect()
}

#[test]
fn every_supported_combination_keeps_the_invariants_of_its_mode() {
    let dir = tempfile::tempdir().unwrap();
    let raw = RawConfig { data_dir: Some(dir.path().join("data")), ..Default::default() };
    let app = App::open(Settings::from_raw(RawConfig::from_env().unwrap().merge(raw)).unwrap()).unwrap();
    app.ingest_records("matrix corpus", corpus().as_bytes(), false).unwrap();
    let total_chunks = corpus().lines().count();
    let rows = matrix();
    assert_eq!(rows.len(), 36, "2 × 2 × (1 + 2) × 2 × 3");
    for (n, row) in rows.iter().enumerate() {
        let s = settings_of(row, app.settings.turn());
        let new = TurnSettings { mode: ragctx_core::Mode::New, ..s.clone() };
        let session = SessionId::parse(&format!("matrix-{n}")).unwrap();
        let mut turns: Vec<Trace> = Vec::new();
        for q in QUESTIONS {
            let t = app.engine.ask(&session, q, &new).unwrap_or_else(|e| panic!("{row}: {e}"));
            let why = format!("{row}, turn {}", t.turn);
            // No chunk twice in one prompt, in blocks or between blocks and pointers.
            let blocks = chunks_of(&t);
            let unique: HashSet<&String> = blocks.iter().collect();
            assert_eq!(unique.len(), blocks.len(), "{why}: a chunk twice");
            let pointed: HashSet<String> =
                t.pointers.iter().flat_map(|p| p.chunk_ids.iter().map(|c| c.as_str().to_owned())).collect();
            assert!(blocks.iter().all(|c| !pointed.contains(c)), "{why}: a chunk both sent and pointed to");
            // What the window consumed (window 0: every earlier turn).
            let consumed: HashSet<String> = turns
                .iter()
                .flat_map(|e| match row["consumption"].as_str() {
                    Some("cited") => e.citations.iter().flat_map(|c| c.chunk_ids.clone()).collect::<Vec<_>>(),
                    _ => e.context.iter().flat_map(|b| b.chunk_ids.clone()).collect(),
                })
                .map(|c| c.as_str().to_owned())
                .collect();
            let consumed_docs: HashSet<String> =
                consumed.iter().map(|c| c.split('#').next().unwrap().to_owned()).collect();
            let excluded: HashSet<String> = t
                .exclusion
                .chunks
                .iter()
                .map(|c| c.as_str().to_owned())
                .chain(t.exclusion.documents.iter().map(|d| d.as_str().to_owned()))
                .collect();
            match s.memory {
                Memory::Client => {
                    for b in &t.context {
                        assert!(!b.chunk_ids.iter().any(|c| consumed.contains(c.as_str())), "{why}: re-sent {b:?}");
                        if row["granularity"] == "document" {
                            assert!(!consumed_docs.contains(b.document_id.as_str()), "{why}: document re-sent");
                        }
                        assert_eq!(b.carried_from, None, "{why}: client memory carries nothing");
                    }
                }
                Memory::Engine => {
                    let first_shown: HashMap<String, u64> = turns
                        .iter()
                        .rev()
                        .flat_map(|e| {
                            e.context
                                .iter()
                                .flat_map(move |b| b.chunk_ids.iter().map(move |c| (c.as_str().to_owned(), e.turn)))
                        })
                        .collect();
                    for b in &t.context {
                        let earliest = b.chunk_ids.iter().filter_map(|c| first_shown.get(c.as_str())).min().copied();
                        assert_eq!(b.carried_from, earliest, "{why}: carried blocks are marked, new ones are not");
                    }
                    assert!(t.pointers.is_empty(), "{why}: engine memory points to nothing");
                }
            }
            // Exclusion inside the search: no result of either side is excluded, and the
            // search fills its slots (the corpus has far more than the window consumed).
            assert_eq!(t.trace.excluded, excluded.len(), "{why}");
            if !turns.is_empty() {
                assert!(!excluded.is_empty(), "{why}: the window excludes what was consumed");
            }
            if let Some(sides) = &t.trace.retrieval {
                for c in sides.dense.iter().chain(&sides.lexical) {
                    let doc = c.as_str().split('#').next().unwrap();
                    assert!(!excluded.contains(c.as_str()) && !excluded.contains(doc), "{why}: search returned {c}");
                }
            }
            for b in t.context.iter().filter(|b| b.carried_from.is_none()) {
                assert!(
                    !b.chunk_ids
                        .iter()
                        .any(|c| excluded.contains(c.as_str()) || excluded.contains(b.document_id.as_str())),
                    "{why}: a new block of an excluded id: {b:?}"
                );
            }
            // BM25 alone finds only the chunks that share a word with the question.
            if row["retrieval"] != "lexical" {
                assert!(excluded.len() + s.limit <= total_chunks);
                assert!(
                    t.trace.candidates >= s.limit,
                    "{why}: {} candidates for limit {}",
                    t.trace.candidates,
                    s.limit
                );
            }
            turns.push(t);
        }
        // "Show that again": the previous turn's documents come back.
        let again = app.engine.ask(&session, "show me that again", &s).unwrap();
        assert_eq!(again.intent(), ragctx_core::Intent::Reshow, "{row}");
        let before: HashSet<&str> = turns.last().unwrap().context.iter().map(|b| b.document_id.as_str()).collect();
        let back: HashSet<&str> = again.context.iter().map(|b| b.document_id.as_str()).collect();
        let pointed: HashSet<&str> = turns.last().unwrap().pointers.iter().map(|p| p.document_id.as_str()).collect();
        assert!(before.is_subset(&back), "{row}: reshow brought back {back:?}, not {before:?}");
        assert!(back.is_subset(&before.union(&pointed).copied().collect()), "{row}: reshow added {back:?}");
    }
}
