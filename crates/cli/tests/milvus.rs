//! `--backend milvus` end to end through the `ragctx` binary against real Milvus Lite
//! (3.2.2, PyPI): the shared one on 127.0.0.1:19530 that `scripts/milvus-up` starts
//! (`RAGCTX_TEST_MILVUS`), and private ones this file starts and kills on free loopback
//! ports. `RAGCTX_TEST_MILVUS=skip` skips them, said and counted (`ragctx_testkit::service`); `scripts/test`
//! never does.

mod common;

use common::{context_chunks, milvus_lite, mtrag, Env};
use serde_json::Value;
use std::collections::HashSet;
use std::time::{Duration, Instant};

fn shared_milvus() -> Option<String> {
    ragctx_testkit::service("RAGCTX_TEST_MILVUS", "http://127.0.0.1:19530")
}

/// `ragctx [backend flags] ask --session S --json [extra] QUESTION`, parsed.
fn ask_on(env: &Env, backend: &[&str], session: &str, extra: &[&str], question: &str) -> Value {
    let mut args = backend.to_vec();
    // `client` memory: what a turn showed is excluded and never re-sent (the exclusion is
    // what these tests compare across backends).
    // One chunk per document: Milvus < 2.4 groups client-side from an over-fetch of
    // `limit × group_size` hits, which can miss a document's further chunks that the
    // embedded index finds, so only whole-document results compare exactly.
    args.extend_from_slice(&[
        "ask",
        "--session",
        session,
        "--json",
        "--memory",
        "client",
        "--strategy",
        "full",
        "--group-size",
        "1",
    ]);
    args.extend_from_slice(extra);
    args.push(question);
    serde_json::from_str(&env.ok(&args)).expect("ask --json prints one JSON object")
}

/// The first `n` government passages and two chunks whose ids and document id would break
/// a naively built filter.
fn corpus(env: &Env, n: usize) -> std::path::PathBuf {
    let text = std::fs::read_to_string(mtrag().join("corpus_govt.jsonl")).unwrap();
    let mut lines: Vec<String> = text.lines().take(n).map(str::to_owned).collect();
    let doc = "doc \"quoted\" [bracketed] \\back\\ 文档";
    for (id, t) in [
        (
            "zz\"] or id >= 0 or doc_id in [\"zz",
            "The quokka festival of Rottnest Island celebrates quokkas every March.",
        ),
        ("odd#2 ' \" ]\nline", "Quokka counting volunteers register at the Rottnest Island visitor centre."),
    ] {
        lines.push(serde_json::json!({"_id": id, "document_id": doc, "title": "Odd ids", "text": t}).to_string());
    }
    let p = env.dir.path().join("corpus.jsonl");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

/// The user questions of the first government conversation with at least five turns.
fn conversation() -> Vec<String> {
    let text = std::fs::read_to_string(mtrag().join("turns.jsonl")).unwrap();
    let rows: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut by_conv: Vec<(String, Vec<String>)> = Vec::new();
    for r in rows.iter().filter(|r| r["domain"] == "govt") {
        let id = r["conversation_id"].as_str().unwrap().to_owned();
        match by_conv.iter_mut().find(|(c, _)| *c == id) {
            Some((_, qs)) => qs.push(r["question"].as_str().unwrap().to_owned()),
            None => by_conv.push((id, vec![r["question"].as_str().unwrap().to_owned()])),
        }
    }
    by_conv.into_iter().map(|(_, q)| q).find(|q| q.len() >= 5).unwrap()[..5].to_vec()
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn context_docs(turn: &Value) -> Vec<String> {
    turn["context"].as_array().unwrap().iter().map(|b| b["document_id"].as_str().unwrap().to_owned()).collect()
}

/// `--retrieval hybrid` on Milvus: where the server has full-text search (Milvus Lite 3,
/// Milvus 2.5 on) the trace shows both sides and the exact term comes from the lexical
/// one; where it has not (2.3.5) the turn is dense and the trace says why.
#[test]
fn milvus_hybrid_turns_use_full_text_search_or_say_why_not() {
    let Some(uri) = shared_milvus() else { return };
    let env = Env::new();
    let govt = env.govt(60);
    let note = env.write(
        "note.jsonl",
        r#"{"_id":"note#0","document_id":"note","title":"Office memo","text":"Submit form QX-7731B to the clerk by Friday; the clerk stamps it."}"#,
    );
    let collection = format!("e2e_hybrid_{}", std::process::id());
    let backend = ["--backend", "milvus", "--milvus-uri", &uri, "--collection", &collection];
    env.ok(&[&backend[..], &["ingest", govt.to_str().unwrap(), note.to_str().unwrap()]].concat());
    let q = "Where do I send QX-7731B?";
    let turn = ask_on(&env, &backend, "h", &["--retrieval", "hybrid"], q);
    let sides = &turn["trace"]["retrieval"];
    let lexical: Vec<&str> = sides["lexical"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    match sides["fallback"].as_str() {
        None => {
            assert_eq!(sides["retrieval"], "hybrid", "{turn}");
            assert_eq!(lexical.first(), Some(&"note#0"), "BM25 on the server ranks the exact term first: {turn}");
            assert!(context_docs(&turn).contains(&"note".to_owned()), "{turn}");
            // What was shown stays excluded on the lexical side too.
            let again = ask_on(&env, &backend, "h", &["--retrieval", "hybrid", "--mode", "new"], q);
            let lexical = again["trace"]["retrieval"]["lexical"].as_array().unwrap().clone();
            assert!(!lexical.contains(&Value::from("note#0")), "{again}");
        }
        Some(why) => {
            assert!(why.contains("no full-text search") && !why.contains("milvus_lite-3"), "{turn}");
            assert!(lexical.is_empty() && sides["retrieval"] == "dense", "{turn}");
        }
    }
}

#[test]
fn milvus_five_mtrag_turns_give_the_same_documents_as_embedded() {
    let Some(uri) = shared_milvus() else { return };
    let env = Env::new();
    let path = corpus(&env, 300);
    let path = path.to_str().unwrap();
    env.ok(&["ingest", path]);
    let tag = std::process::id();
    let flat = format!("e2e_flat_{tag}");
    let hnsw = format!("e2e_hnsw_{tag}");
    // The data dir was made with int8 (a new store's default); a Milvus collection takes no
    // default from what it holds, so the same precision is named (docs/embeddings.md).
    let milvus = |collection: &str, index: &str| -> Vec<String> {
        [
            "--backend",
            "milvus",
            "--milvus-uri",
            &uri,
            "--collection",
            collection,
            "--milvus-index",
            index,
            "--embedder-precision",
            "int8",
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let flat_args = milvus(&flat, "flat");
    let hnsw_args = milvus(&hnsw, "hnsw");
    for args in [&flat_args, &hnsw_args] {
        let out = env.ok(&[&refs(args)[..], &["ingest", path]].concat());
        assert!(
            out.contains("302 new") && out.contains("302 from cache"),
            "embeddings reused from the data dir: {out}"
        );
    }

    let questions = conversation();
    let mut docs: Vec<Vec<Vec<String>>> = vec![Vec::new(); 3];
    for (b, backend) in [vec![], refs(&flat_args), refs(&hnsw_args)].iter().enumerate() {
        let session = format!("conv-{b}");
        let mut seen: HashSet<String> = HashSet::new();
        let mut seen_chunks: HashSet<String> = HashSet::new();
        for (i, q) in questions.iter().enumerate() {
            // `new` on every turn: a follow-up raises a document's quota, and Milvus < 2.4
            // groups client-side from a bounded over-fetch, which can then differ from the
            // embedded index's full groups.
            let t = ask_on(&env, backend, &session, &["--granularity", "document", "--mode", "new"], q);
            assert_eq!(t["turn"], i as u64 + 1);
            let d = context_docs(&t);
            let chunks = context_chunks(&t);
            match t["intent"].as_str().unwrap() {
                "new" => assert!(d.iter().all(|d| !seen.contains(d)), "backend {b} turn {} repeats a document", i + 1),
                // A follow-up ("But if parents do?") excludes chunks only: its documents may return.
                "follow_up" => {
                    assert!(
                        chunks.iter().all(|c| !seen_chunks.contains(c)),
                        "backend {b} turn {} repeats a chunk",
                        i + 1
                    )
                }
                _ => {}
            }
            seen.extend(d.iter().cloned());
            seen_chunks.extend(chunks);
            if b > 0 {
                assert_eq!(t["trace"]["search_path"], "remote", "{}", t["trace"]);
            }
            docs[b].push(d);
        }
    }
    let mut same = 0;
    let mut total = 0;
    for (turn, ((embedded, flat), hnsw)) in docs[0].iter().zip(&docs[1]).zip(&docs[2]).enumerate() {
        assert_eq!(flat, embedded, "FLAT Milvus and embedded differ at turn {}", turn + 1);
        let embedded_set: HashSet<&String> = embedded.iter().collect();
        same += hnsw.iter().filter(|d| embedded_set.contains(d)).count();
        total += embedded.len().max(hnsw.len());
    }
    let share = same as f64 / total as f64;
    eprintln!("milvus e2e: FLAT = embedded on all 5 turns; HNSW shares {same}/{total} = {share:.3} of documents");
    assert!(share >= 0.9, "HNSW Milvus shares only {share:.3} of documents with embedded");

    // Hostile ids through Milvus: found, cited, and excluded by document in the next turn.
    let b = refs(&flat_args);
    let first =
        ask_on(&env, &b, "odd", &["--granularity", "document"], "When is the quokka festival on Rottnest Island?");
    let odd = "doc \"quoted\" [bracketed] \\back\\ 文档";
    assert_eq!(context_docs(&first)[0], odd, "{first}");
    let next = ask_on(
        &env,
        &b,
        "odd",
        &["--granularity", "document", "--mode", "new"],
        "When is the quokka festival on Rottnest Island?",
    );
    assert!(!context_docs(&next).contains(&odd.to_owned()), "the hostile document id was excluded exactly");
    let first_docs: HashSet<String> = context_docs(&first).into_iter().collect();
    assert_eq!(next["trace"]["excluded"].as_u64().unwrap() as usize, first_docs.len());
    assert!(next["pointers"].as_array().unwrap().iter().any(|p| p["document_id"] == odd), "pointed to: {next}");
    // `engine` memory on Milvus: the working set is fetched by id and scored, and the hostile
    // document, still the best answer, comes back carried from turn 1.
    let mut engine_args = b.clone();
    engine_args.extend(["ask", "--session", "odd", "--json", "--memory", "engine"]);
    engine_args.push("When is the quokka festival on Rottnest Island?");
    let carried: Value = serde_json::from_str(&env.ok(&engine_args)).unwrap();
    let block = carried["context"].as_array().unwrap().iter().find(|b| b["document_id"] == odd).cloned();
    let block = block.unwrap_or_else(|| panic!("carried back: {carried}"));
    assert_eq!(block["carried_from"], 1, "{block}");
}

#[test]
fn killing_milvus_mid_conversation_is_a_clear_error_and_the_next_turn_after_restart_works() {
    if shared_milvus().is_none() {
        return;
    }
    let env = Env::new();
    let path = corpus(&env, 60);
    let mut milvus = milvus_lite(&env.dir.path().join("milvus"));
    let uri = milvus.url("http");
    let b = ["--backend", "milvus", "--milvus-uri", &uri, "--collection", "killed", "--milvus-index", "flat"];
    env.ok(&[&b[..], &["ingest", path.to_str().unwrap()]].concat());
    let first = ask_on(&env, &b, "k", &[], "How do I file a complaint with the state?");
    assert!(!context_docs(&first).is_empty());

    milvus.kill(); // SIGKILL
    let started = Instant::now();
    let out =
        env.run(&[&b[..], &["ask", "--session", "k", "--json", "What if I want to file in other states?"]].concat());
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "unavailable backend → exit 4: {stderr}");
    assert!(stderr.contains(&format!("Milvus at {uri}")), "the error names the server: {stderr}");
    assert!(took < Duration::from_secs(40), "failed within the deadline, took {took:?}");
    eprintln!("milvus e2e: turn with Milvus killed failed in {took:?}: {}", stderr.trim());

    milvus.restart();
    let second = ask_on(&env, &b, "k", &[], "What if I want to file in other states?");
    assert_eq!(second["turn"], 2, "the failed turn was not recorded");
    assert!(!context_docs(&second).is_empty(), "the collection survived the kill");
}
