//! Metadata filters and tenants through the binary, as a new user tries them (issues 24, 25):
//! `ingest --meta`, `ask --filter` across turns of one session, a malformed filter, JSONL
//! metadata, and two tenants over one data dir with the same document ids.

mod common;

use common::{repo, Env};
use serde_json::Value;
use std::collections::BTreeSet;

fn houseplants(name: &str) -> String {
    repo().join("demo/houseplants").join(name).to_str().unwrap().to_owned()
}

fn block_docs(turn: &Value) -> BTreeSet<String> {
    turn["context"].as_array().unwrap().iter().map(|b| b["document_id"].as_str().unwrap().to_owned()).collect()
}

fn block_chunks(turn: &Value) -> Vec<String> {
    turn["context"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| b["chunk_ids"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_owned()))
        .collect()
}

#[test]
fn a_filtered_turn_answers_only_from_matching_documents_and_keeps_the_session() {
    let env = Env::new();
    env.ok(&["ingest", "--meta", "topic=pests", "--meta", "year=2024", &houseplants("pests.md")]);
    let care: Vec<String> =
        ["watering.md", "light.md", "soil.md", "humidity.txt"].iter().map(|n| houseplants(n)).collect();
    let mut args = vec!["ingest", "--meta", "topic=care", "--meta", "year=2021"];
    args.extend(care.iter().map(String::as_str));
    env.ok(&args);

    let listed: Value = serde_json::from_str(&env.ok(&["documents", "list", "--json"])).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 5);
    let pests = listed.as_array().unwrap().iter().find(|d| d["document_id"] == "pests.md").unwrap();
    assert_eq!(pests["metadata"], serde_json::json!({"topic": "pests", "year": 2024}), "{pests}");

    // Turn 1: pests only, whatever the question leans to.
    let t1 = env.ask("s", &["--filter", r#"{"topic":"pests"}"#], "How often should I water my plants?");
    assert_eq!(block_docs(&t1), BTreeSet::from(["pests.md".to_owned()]), "{t1}");
    for b in t1["context"].as_array().unwrap() {
        assert_eq!(b["metadata"]["topic"], "pests");
        assert_eq!(b["metadata"]["year"], 2024, "numbers stay numbers");
    }
    // Turn 2, same session, another filter: care documents only, and a range.
    let t2 = env.ask("s", &["--filter", r#"{"and":[{"topic":"care"},{"year":{"lt":2022}}]}"#], "How much light?");
    assert!(!block_docs(&t2).is_empty());
    assert!(!block_docs(&t2).contains("pests.md"), "{t2}");
    // Turn 3 asks about pests again: nothing of turn 1 is re-sent except as a carried block.
    let t3 = env.ask("s", &["--filter", r#"{"topic":"pests"}"#], "How do I get rid of spider mites?");
    assert!(block_docs(&t3).iter().all(|d| d == "pests.md"), "{t3}");
    let first: BTreeSet<String> = block_chunks(&t1).into_iter().collect();
    for b in t3["context"].as_array().unwrap() {
        let again = b["chunk_ids"].as_array().unwrap().iter().any(|c| first.contains(c.as_str().unwrap()));
        assert!(!again || !b["carried_from"].is_null(), "a chunk of turn 1 came back as new: {b}");
    }
    // Client memory: what fails the turn's filter is not pointed to either.
    let client = ["--memory", "client"];
    env.ask("c", &[&client[..], &["--filter", r#"{"topic":"pests"}"#]].concat(), "spider mites on leaves");
    let c2 = env.ask("c", &[&client[..], &["--filter", r#"{"topic":"care"}"#]].concat(), "spider mites on leaves");
    let pointed: Vec<&str> = c2["pointers"]
        .as_array()
        .map(|p| p.iter().map(|x| x["document_id"].as_str().unwrap()).collect())
        .unwrap_or_default();
    assert!(!pointed.contains(&"pests.md") && !block_docs(&c2).contains("pests.md"), "{c2}");
    let c3 = env.ask("c", &[&client[..], &["--filter", r#"{"topic":"pests"}"#]].concat(), "spider mites on leaves");
    let pointed: Vec<&str> = c3["pointers"]
        .as_array()
        .map(|p| p.iter().map(|x| x["document_id"].as_str().unwrap()).collect())
        .unwrap_or_default();
    assert!(pointed.contains(&"pests.md"), "back under a filter it passes, it is pointed to: {c3}");
    assert!(!block_docs(&c3).contains("pests.md"), "and not re-sent: {c3}");
    // A filter nothing passes: an empty context, exit 0.
    let none = env.ask("s", &["--filter", r#"{"topic":"cacti"}"#], "What about cacti?");
    assert!(none["context"].as_array().unwrap().is_empty(), "{none}");

    // A malformed filter: exit 2, the JSON path named, nothing committed.
    let bad = env.run(&["ask", "--session", "s", "--filter", r#"{"or":[{"year":{"gt":"x"}}]}"#, "water?"]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("filter.or[0].year.gt"), "{err}");
    let bad = env.run(&["ask", "--session", "s", "--filter", "{not json", "water?"]);
    assert_eq!(bad.status.code(), Some(2));
    let trace: Value = serde_json::from_str(&env.ok(&["trace", "--session", "s", "--json"])).unwrap();
    assert_eq!(trace.as_array().map(Vec::len), Some(4), "bad turns commit nothing");
    // A bad --meta is bad input too.
    let bad = env.run(&["ingest", "--meta", "no equals sign", &houseplants("light.md")]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn jsonl_metadata_is_checked_by_line_and_replaced_with_its_document() {
    let env = Env::new();
    let good = env.write(
        "a.jsonl",
        concat!(
            r#"{"_id":"a#0","document_id":"a","title":"A","text":"Ferns like humid air.","metadata":{"lang":"en","tags":["fern","humid"]}}"#,
            "\n",
            r#"{"_id":"b#0","document_id":"b","title":"B","text":"Cacti like dry air.","metadata":{"lang":"en","tags":["cactus"]}}"#,
            "\n"
        ),
    );
    env.ok(&["ingest", good.to_str().unwrap()]);
    let t = env.ask("j", &["--filter", r#"{"tags":"fern"}"#], "Which plants like humid air?");
    assert_eq!(block_docs(&t), BTreeSet::from(["a".to_owned()]));
    assert_eq!(t["context"][0]["metadata"]["tags"], serde_json::json!(["fern", "humid"]));
    // A bad value on line 2: nothing of the file is ingested.
    let bad = env.write(
        "bad.jsonl",
        concat!(
            r#"{"_id":"c#0","document_id":"c","text":"Orchids.","metadata":{"lang":"en"}}"#,
            "\n",
            r#"{"_id":"d#0","document_id":"d","text":"Palms.","metadata":{"lang":{"code":"en"}}}"#,
            "\n"
        ),
    );
    let out = env.run(&["ingest", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.jsonl:2") && err.contains("metadata.lang is an object"), "{err}");
    let listed: Value = serde_json::from_str(&env.ok(&["documents", "list", "--json"])).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2, "nothing of the bad file was stored");
    // Replacing a document replaces its metadata.
    let again = env.write(
        "a2.jsonl",
        r#"{"_id":"a#0","document_id":"a","title":"A","text":"Ferns like humid air.","metadata":{"lang":"de"}}"#,
    );
    env.ok(&["ingest", again.to_str().unwrap()]);
    let t = env.ask("j2", &["--filter", r#"{"tags":"fern"}"#], "Which plants like humid air?");
    assert!(block_docs(&t).is_empty(), "the old tags are gone: {t}");
    let t = env.ask("j3", &["--filter", r#"{"lang":"de"}"#], "Which plants like humid air?");
    assert_eq!(block_docs(&t), BTreeSet::from(["a".to_owned()]));
}

#[test]
fn two_tenants_share_a_data_dir_and_ids_without_meeting() {
    let env = Env::new();
    let en = ["--tenant", "plants-en"];
    let other = ["--tenant", "plants-other"];
    env.ok(&[&en[..], &["ingest", &houseplants("watering.md"), &houseplants("humidity.txt")]].concat());
    // The same document ids, other texts, in the other tenant.
    let dir = env.dir.path().join("other");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("watering.md"), "# Watering cacti\n\nWater a cactus once a month in winter.\n").unwrap();
    env.ok(&[&other[..], &["ingest", dir.to_str().unwrap()]].concat());
    let list = |t: &[&str]| -> BTreeSet<String> {
        let v: Value = serde_json::from_str(&env.ok(&[t, &["documents", "list", "--json"]].concat())).unwrap();
        v.as_array().unwrap().iter().map(|d| d["document_id"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(list(&en), BTreeSet::from(["humidity.txt".to_owned(), "watering.md".to_owned()]));
    assert_eq!(list(&other), BTreeSet::from(["watering.md".to_owned()]));
    assert!(list(&[]).is_empty(), "the default tenant holds nothing");

    // The same session id in both tenants: two sessions, each citing its own texts.
    let a = env.ask("s", &en, "How often should I water?");
    let b = env.ask("s", &other, "How often should I water?");
    assert!(a["context"].to_string().contains("humid") || a["context"].to_string().contains("soil"), "{a}");
    assert!(b["context"].to_string().contains("cactus"), "{b}");
    assert!(!a["context"].to_string().contains("cactus"), "{a}");
    let trace = |t: &[&str]| -> Value {
        serde_json::from_str(&env.ok(&[t, &["trace", "--session", "s", "--json"]].concat())).unwrap()
    };
    assert_eq!(trace(&en).as_array().unwrap().len(), 1);
    assert_eq!(trace(&other).as_array().unwrap().len(), 1);
    // A document id naming another tenant's stored id is refused, not followed.
    let out = env.run(&["documents", "delete", "plants-en\u{1f}watering.md"]);
    assert_ne!(out.status.code(), Some(0));
    // Deleting in one tenant leaves the other's document of the same id.
    env.ok(&[&other[..], &["documents", "delete", "watering.md"]].concat());
    assert!(list(&other).is_empty());
    assert_eq!(list(&en).len(), 2);
    let bad = env.run(&["--tenant", "no spaces", "documents", "list"]);
    assert_eq!(bad.status.code(), Some(2));
}
