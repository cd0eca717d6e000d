//! End to end through the `ragctx` binary, one process per command, on real MTRAG
//! government passages (the slice in `tests/fixtures`) and the installed MiniLM model.

use serde_json::Value;
use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Command;

mod common;

use common::{context_chunks, http_get, http_post, mtrag, repo, Env, Server, GOVT_PREFIX};

fn govt_corpus() -> PathBuf {
    mtrag().join("corpus_govt.jsonl")
}

/// The first `n` passages of the government corpus plus chunks with hostile ids.
fn corpus(env: &Env, n: usize) -> PathBuf {
    assert!(n <= GOVT_PREFIX, "the MTRAG slice keeps the first {GOVT_PREFIX} government passages");
    let text = std::fs::read_to_string(govt_corpus()).unwrap();
    let mut lines: Vec<String> = text.lines().take(n).map(str::to_owned).collect();
    for (id, doc, t) in ODD {
        lines.push(serde_json::json!({"_id": id, "document_id": doc, "title": "Odd ids", "text": t}).to_string());
    }
    env.write("corpus.jsonl", &(lines.join("\n") + "\n"))
}

const ODD: [(&str, &str, &str); 2] = [
    (
        "zz\"] or id >= 0 or doc_id in [\"zz",
        "doc \"quoted\" [bracketed] \\back\\ 文档",
        "The quokka festival of Rottnest Island celebrates quokkas every March with quokka counting.",
    ),
    (
        "odd#2 ' \" ]",
        "doc \"quoted\" [bracketed] \\back\\ 文档",
        "Quokka counting volunteers register at the Rottnest Island visitor centre before the festival.",
    ),
];

fn strs(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_owned()).collect()
}

fn context_docs(turn: &Value) -> Vec<String> {
    turn["context"].as_array().unwrap().iter().map(|b| b["document_id"].as_str().unwrap().to_owned()).collect()
}

fn pointers(turn: &Value) -> Vec<Value> {
    turn["pointers"].as_array().cloned().unwrap_or_default()
}

/// Invariants of every turn: budget, citations inside the context, the JSON contract.
fn check_turn(t: &Value, budget: u64) {
    let tr = &t["trace"];
    for key in [
        "candidates",
        "unique_documents",
        "context_fragments",
        "context_tokens",
        "prompt_tokens",
        "answer_citations",
        "invalid_citations",
        "excluded",
        "dropped_by_budget",
        "timings_ms",
    ] {
        assert!(tr.get(key).is_some(), "trace.{key} missing: {tr}");
    }
    assert!(tr["context_tokens"].as_u64().unwrap() <= budget, "budget exceeded: {tr}");
    let tokens: u64 =
        t["context"].as_array().unwrap().iter().chain(&pointers(t)).map(|b| b["tokens"].as_u64().unwrap()).sum();
    assert_eq!(tokens, tr["context_tokens"].as_u64().unwrap(), "blocks and pointers make the context");
    assert!(tr["prompt_tokens"].as_u64().unwrap() > tokens, "the prompt holds the context and more");
    let mut docs: HashSet<String> = context_docs(t).into_iter().collect();
    docs.extend(pointers(t).iter().map(|p| p["document_id"].as_str().unwrap().to_owned()));
    for c in t["citations"].as_array().unwrap() {
        assert!(docs.contains(c["document_id"].as_str().unwrap()), "citation outside the context: {c}");
    }
    // No chunk twice in one prompt, whatever the memory mode.
    let chunks = context_chunks(t);
    assert_eq!(chunks.len(), chunks.iter().collect::<HashSet<_>>().len(), "a chunk twice in one prompt: {t}");
    assert_eq!(tr["invalid_citations"], 0);
    assert_eq!(tr["answer_citations"].as_u64().unwrap() as usize, t["citations"].as_array().unwrap().len());
}

#[test]
fn five_turns_over_govt_never_repeat_and_reshow_brings_back() {
    let env = Env::new();
    let path = corpus(&env, 200);
    let out = env.ok(&["ingest", path.to_str().unwrap()]);
    assert!(out.contains("ingested 202 chunks"), "{out}");

    let questions = [
        "What is New York State doing about climate change?",
        "How does climate change make wildfires worse?",
        "What are the effects of rising global temperatures?",
        "How can I reduce greenhouse gas emissions at home?",
    ];
    let budget = 1500;
    let b = budget.to_string();
    let mut seen_chunks: HashSet<String> = HashSet::new();
    let mut seen_docs: HashSet<String> = HashSet::new();
    let mut turns = Vec::new();
    for (i, q) in questions.iter().enumerate() {
        // The seed's exclusion, as `client` memory applies it: what was shown is not re-sent.
        let flags = [
            "--memory",
            "client",
            "--strategy",
            "full",
            "--group-size",
            "1",
            "--mode",
            "new",
            "--granularity",
            "document",
        ];
        let t = env.ask("s", &[&flags[..], &["--budget", &b]].concat(), q);
        check_turn(&t, budget);
        assert_eq!(t["turn"], i as u64 + 1);
        assert_eq!(t["intent"], "new");
        let tr = &t["trace"];
        assert_eq!(tr["unique_documents"], tr["candidates"], "group_size 1: one chunk per document");
        assert!(tr["context_fragments"].as_u64().unwrap() >= 1);
        // No quota was raised: each document is one block.
        let docs = context_docs(&t);
        assert_eq!(docs.len(), docs.iter().collect::<HashSet<_>>().len());
        for c in context_chunks(&t) {
            assert!(!seen_chunks.contains(&c), "turn {} repeats chunk {c}", i + 1);
        }
        for d in &docs {
            assert!(!seen_docs.contains(d), "turn {} repeats document {d}", i + 1);
        }
        if i > 0 {
            assert_eq!(tr["excluded"].as_u64().unwrap() as usize, seen_docs.len(), "document exclusion set");
        }
        seen_chunks.extend(context_chunks(&t));
        seen_docs.extend(docs);
        turns.push(t);
    }
    assert!(
        turns.iter().any(|t| !t["trace"]["dropped_by_budget"].as_array().unwrap().is_empty()),
        "a budget of {budget} drops blocks somewhere"
    );

    let again = env.ask("s", &["--memory", "client", "--budget", &b], "show me that again");
    check_turn(&again, budget);
    assert_eq!(again["intent"], "reshow");
    // What turn 4 showed and what it pointed to (the caller held those) come back, each
    // under the marker it had; what the budget cannot hold is listed as dropped.
    let mut earlier_marker: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    for b in turns[3]["context"].as_array().unwrap().iter().chain(&pointers(&turns[3])) {
        earlier_marker.insert(b["document_id"].as_str().unwrap().to_owned(), b["marker"].as_u64().unwrap());
    }
    let reshown = |t: &Value| {
        for b in t["context"].as_array().unwrap() {
            let d = b["document_id"].as_str().unwrap();
            assert_eq!(earlier_marker.get(d).copied(), b["marker"].as_u64(), "{d} came back under its marker: {t}");
        }
        let mut back: HashSet<String> = context_docs(t).into_iter().collect();
        back.extend(strs(&t["trace"]["dropped_by_budget"]));
        assert!(context_docs(&turns[3]).iter().all(|d| back.contains(d)), "reshow brings back turn 4: {t}");
    };
    reshown(&again);

    let zh = env.ask("s", &["--memory", "client", "--budget", &b], "再给我看看刚才那个");
    assert_eq!(zh["intent"], "reshow");
    assert_eq!(context_docs(&zh), context_docs(&again), "a reshow of a reshow shows the same again");

    let traces: Value = serde_json::from_str(&env.ok(&["trace", "--session", "s", "--json"])).unwrap();
    let traces = traces.as_array().unwrap();
    assert_eq!(traces.len(), 6);
    for (t, stored) in turns.iter().zip(traces) {
        assert_eq!(stored["trace"]["context_tokens"], t["trace"]["context_tokens"]);
        assert_eq!(context_docs(stored), context_docs(t));
    }
    let human = env.ok(&["trace", "--session", "s"]);
    assert_eq!(human.matches("\nturn ").count() + usize::from(human.starts_with("turn ")), 6, "{human}");
    let one: Value = serde_json::from_str(&env.ok(&["trace", "--session", "s", "--turn", "2", "--json"])).unwrap();
    assert_eq!(one["turn"], 2);

    // Replay turn 2 with a smaller budget: same exclusion, fewer tokens, nothing remembered.
    let replay: Value = serde_json::from_str(&env.ok(&[
        "trace",
        "--session",
        "s",
        "--turn",
        "2",
        "--replay",
        "--memory",
        "client",
        "--strategy",
        "full",
        "--group-size",
        "1",
        "--budget",
        "300",
        "--json",
    ]))
    .unwrap();
    assert_eq!(replay["original"]["context_tokens"], turns[1]["trace"]["context_tokens"]);
    assert!(replay["replay"]["trace"]["context_tokens"].as_u64().unwrap() <= 300);
    assert_eq!(replay["replay"]["trace"]["excluded"], turns[1]["trace"]["excluded"]);
    let replayed = context_docs(&replay["replay"]);
    assert!(replayed.iter().all(|d| context_docs(&turns[1]).contains(d) || !seen_docs.contains(d)));
    let after: Value = serde_json::from_str(&env.ok(&["trace", "--session", "s", "--json"])).unwrap();
    assert_eq!(after.as_array().unwrap().len(), 6, "a replay remembers nothing");

    // Chunk granularity: documents may return, chunks never.
    let mut seen: HashSet<String> = HashSet::new();
    for q in &questions[..3] {
        let t =
            env.ask("c", &["--memory", "client", "--mode", "new", "--granularity", "chunk", "--group-size", "2"], q);
        check_turn(&t, 6000);
        for c in context_chunks(&t) {
            assert!(seen.insert(c.clone()), "chunk {c} repeated at chunk granularity");
        }
    }
}

/// The houseplant demo: eight questions that show every page, then one about a page shown
/// long ago. Withholding it would leave the model without the answer (issue: never withhold
/// evidence the model cannot read).
const TOUR: [&str; 8] = [
    "How often should I water my houseplants?",
    "Why are the leaves turning yellow and soft?",
    "How do I get rid of small black flies around the soil?",
    "When should I repot a plant?",
    "What light do succulents need?",
    "How do I raise humidity for ferns?",
    "How do I propagate a pothos?",
    "What fertilizer should I use?",
];
const CACTUS: &str = "How often should I water a cactus in winter?";

fn chunks_of_turns(turns: &[Value]) -> HashSet<String> {
    turns.iter().flat_map(context_chunks).collect()
}

#[test]
fn memory_modes_never_withhold_what_the_model_cannot_read() {
    let env = Env::new();
    env.ok(&["ingest", repo().join("demo/houseplants").to_str().unwrap()]);

    // engine: the watering page comes back, carried and marked with the turn that showed it.
    let mut turns = Vec::new();
    for q in TOUR {
        let t = env.ask("e", &["--budget", "800"], q);
        check_turn(&t, 800);
        assert_eq!(t["trace"]["memory"], "engine");
        assert!(t.get("pointers").is_none(), "pointers are a client-mode field");
        let earlier = chunks_of_turns(&turns);
        for b in t["context"].as_array().unwrap() {
            let shown_before = strs(&b["chunk_ids"]).iter().any(|c| earlier.contains(c));
            // A block is marked carried exactly when it holds a chunk an earlier turn showed.
            assert_eq!(b["carried_from"].is_u64(), shown_before, "turn {}: {b}", t["turn"]);
        }
        let carried = t["context"].as_array().unwrap().iter().filter(|b| b["carried_from"].is_u64()).count();
        assert_eq!(t["trace"]["carried"].as_u64().unwrap() as usize, carried);
        turns.push(t);
    }
    let first_marker = turns[0]["context"][0]["marker"].clone();
    assert_eq!(turns[0]["context"][0]["document_id"], "watering.md");
    let cactus = env.ask("e", &["--budget", "800"], CACTUS);
    check_turn(&cactus, 800);
    let watering = cactus["context"].as_array().unwrap().iter().find(|b| b["document_id"] == "watering.md");
    let watering = watering.unwrap_or_else(|| panic!("the watering page is withheld: {cactus}"));
    assert_eq!(watering["carried_from"], 1, "first shown in turn 1");
    assert_eq!(watering["marker"], first_marker, "stable marker");
    assert!(cactus["citations"].as_array().unwrap().iter().any(|c| c["document_id"] == "watering.md"), "{cactus}");
    assert!(!cactus["answer"].as_str().unwrap().contains("nothing to cite"));
    // The conversation so far is in the prompt: it costs tokens beyond the evidence.
    assert!(cactus["trace"]["conversation_tokens"].as_u64().unwrap() > 0);
    let stored: Value = serde_json::from_str(&env.ok(&["trace", "--session", "e", "--turn", "9", "--json"])).unwrap();
    assert_eq!(stored["context"], cactus["context"], "the trace keeps carried_from per block");
    assert!(env.ok(&["trace", "--session", "e", "--turn", "9"]).contains("(watering.md) — shown in turn 1"));

    // "How do I water that plant from before?" names a subject: searched, not a reshow.
    let zh = env.ask("e", &["--budget", "800"], "刚才那个植物怎么浇水?");
    assert_eq!(zh["intent"], "follow_up");
    assert!(zh["trace"]["search_reason"].as_str().unwrap() != "reshow: the previous turn's chunks by id");

    // client: the page is still in the window, so it is pointed to, not re-sent.
    let mut turns = Vec::new();
    for q in TOUR {
        let t = env.ask("c", &["--memory", "client", "--budget", "800"], q);
        check_turn(&t, 800);
        let earlier = chunks_of_turns(&turns);
        for c in context_chunks(&t) {
            assert!(!earlier.contains(&c), "turn {} re-sends {c} from the window", t["turn"]);
        }
        for p in pointers(&t) {
            assert!(strs(&p["chunk_ids"]).iter().all(|c| earlier.contains(c)), "a pointer names a shown chunk: {p}");
        }
        turns.push(t);
    }
    let cactus = env.ask("c", &["--memory", "client", "--budget", "800"], CACTUS);
    check_turn(&cactus, 800);
    assert!(!context_docs(&cactus).contains(&"watering.md".to_owned()), "not re-sent: {cactus}");
    let p = pointers(&cactus);
    let p = p.iter().find(|p| p["document_id"] == "watering.md").unwrap_or_else(|| panic!("no pointer: {cactus}"));
    assert_eq!((p["shown_in_turn"].as_u64(), &p["marker"]), (Some(1), &turns[0]["context"][0]["marker"]));
    assert_eq!(cactus["trace"]["pointers"].as_u64().unwrap() as usize, pointers(&cactus).len());
    let cited = cactus["citations"].as_array().unwrap();
    assert!(cited.iter().any(|c| c["marker"] == p["marker"] && c["document_id"] == "watering.md"), "{cactus}");
    assert_eq!(cactus["trace"]["invalid_citations"], 0, "a pointer's marker is a valid citation");
    // Outside the window a chunk is an ordinary candidate again.
    let late = env.ask("c", &["--memory", "client", "--window", "2", "--budget", "800"], CACTUS);
    assert!(context_docs(&late).contains(&"watering.md".to_owned()), "{late}");
    assert!(pointers(&late).iter().all(|p| p["document_id"] != "watering.md"));
    // "Show me that again" after a turn that pointed to the page brings the page back too.
    let pointed = env.ask("c", &["--memory", "client", "--budget", "800"], CACTUS);
    assert!(pointers(&pointed).iter().any(|p| p["document_id"] == "watering.md"), "{pointed}");
    let again = env.ask("c", &["--memory", "client", "--budget", "800"], "show me that again");
    assert_eq!(again["intent"], "reshow");
    assert!(context_docs(&again).contains(&"watering.md".to_owned()), "{again}");
}

/// `--retrieval hybrid` on 200 government passages plus one note whose only tie to the
/// question is an exact form number: the lexical side brings it, the trace says which side
/// found each block, and the second turn excludes what the first showed on both sides.
#[test]
fn hybrid_retrieval_finds_exact_terms_and_says_which_side_found_what() {
    let env = Env::new();
    let govt = env.govt(200);
    let note = env.write(
        "note.jsonl",
        r#"{"_id":"note#0","document_id":"note","title":"Office memo","text":"Submit form QX-7731B to the clerk by Friday; the clerk stamps it."}"#,
    );
    let out = env.ok(&["ingest", govt.to_str().unwrap(), note.to_str().unwrap()]);
    assert!(out.contains("lexical index: 201 chunks"), "ingest builds both indexes: {out}");
    assert!(env.data().join("lexical.bin").is_file() && env.data().join("index.bin").is_file());
    let q = "Where do I send QX-7731B?";
    let turn = env.ask("h", &["--retrieval", "hybrid"], q);
    let sides = &turn["trace"]["retrieval"];
    assert_eq!(sides["retrieval"], "hybrid", "{turn}");
    assert_eq!(sides["fusion"], "weighted");
    assert_eq!(strs(&sides["lexical"]).first().map(String::as_str), Some("note#0"), "BM25 ranks the exact term first");
    assert!(!strs(&sides["dense"]).is_empty());
    assert!(context_docs(&turn).contains(&"note".to_owned()), "the exact-term note reaches the context: {turn}");
    assert!(turn["trace"]["settings"]["retrieval"] == "hybrid");
    let dense = env.ask("d", &["--retrieval", "dense"], q);
    assert!(dense["trace"].get("retrieval").is_none(), "dense turns carry no sides");
    let text = env.ok(&["ask", "--session", "h2", "--retrieval", "hybrid", q]);
    assert!(text.contains("found by lexical") || text.contains("found by both"), "{text}");
    assert!(text.contains("hybrid/weighted: dense"), "{text}");
    // The next turn excludes what was shown, on the lexical side too.
    let again = env.ask("h", &["--retrieval", "hybrid", "--mode", "new", "--memory", "client"], q);
    assert!(!strs(&again["trace"]["retrieval"]["lexical"]).contains(&"note#0".to_owned()), "{again}");
    let lexical = env.ask("l", &["--retrieval", "lexical"], q);
    assert_eq!(lexical["context"][0]["document_id"], "note", "lexical order reaches the prompt: {lexical}");
    // Nothing in common with the corpus: lexical falls back to dense and says so.
    let none = env.ask("n", &["--retrieval", "lexical"], "zzqx wvvy");
    assert!(none["trace"]["retrieval"]["fallback"].as_str().unwrap_or_default().contains("dense"), "{none}");
}

#[test]
fn hostile_ids_round_trip_through_ingest_and_exclusion() {
    let env = Env::new();
    let path = corpus(&env, 40);
    env.ok(&["ingest", path.to_str().unwrap()]);
    let q = "When is the quokka festival on Rottnest Island?";
    let first =
        env.ask("o", &["--memory", "client", "--strategy", "full", "--group-size", "2", "--group-margin", "1"], q);
    let odd_doc = ODD[0].1;
    // Two non-adjacent chunks of one document: two blocks under one marker.
    let blocks: Vec<&Value> =
        first["context"].as_array().unwrap().iter().filter(|b| b["document_id"] == odd_doc).collect();
    assert_eq!(blocks.len(), 2, "the quokka document leads with both chunks: {first}");
    assert_eq!(blocks[0]["marker"], blocks[1]["marker"]);
    let ids: HashSet<String> = blocks.iter().flat_map(|b| strs(&b["chunk_ids"])).collect();
    assert_eq!(ids, ODD.iter().map(|o| o.0.to_owned()).collect(), "both hostile chunk ids, byte for byte");
    let second = env.ask("o", &["--memory", "client", "--mode", "new", "--granularity", "document"], q);
    assert!(!context_docs(&second).contains(&odd_doc.to_owned()), "excluded by its quoted id");
    // ...and pointed to instead, under its stable marker, since it still ranks first.
    let p = pointers(&second);
    assert!(p.iter().any(|p| p["document_id"] == odd_doc && p["marker"] == blocks[0]["marker"]), "{second}");
    let first_docs: HashSet<String> = context_docs(&first).into_iter().collect();
    assert_eq!(second["trace"]["excluded"].as_u64().unwrap() as usize, first_docs.len());
    let state: Value = serde_json::from_str(&env.ok(&["session", "show", "--session", "o"])).unwrap();
    assert!(state["markers"].get(odd_doc).is_some(), "{state}");
}

#[test]
fn bad_input_fails_clearly_and_changes_nothing() {
    let env = Env::new();
    let good =
        env.write("good.jsonl", "{\"_id\":\"a\",\"document_id\":\"A\",\"title\":\"t\",\"text\":\"Apples are red.\"}\n");
    env.ok(&["ingest", good.to_str().unwrap()]);
    let bad = env.write(
        "bad.jsonl",
        "{\"_id\":\"b\",\"text\":\"Bananas are yellow.\"}\n{\"_id\":\"c\",\"text\":\"ok\"}\n{\"_id\":\"d\",\"text\": oops}\n",
    );
    let out = env.run(&["ingest", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.jsonl:3:"), "{err}");
    // Nothing of the bad file landed: re-ingesting the good file finds one chunk in store.
    let again = env.ok(&["ingest", good.to_str().unwrap()]);
    assert!(again.contains("0 new, 1 updated") && again.contains("store holds 1 chunks"), "{again}");

    let dup = env.write("dup.jsonl", "{\"_id\":\"x\",\"text\":\"one\"}\n{\"_id\":\"x\",\"text\":\"two\"}\n");
    let out = env.run(&["ingest", dup.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("duplicate id \"x\""));

    for (args, code) in [
        (vec!["ask", "--session", "s", "   "], 2),
        (vec!["ask", "--session", "bad id!", "q"], 2),
        (vec!["ask", "--session", "s", "--mode", "sideways", "q"], 2),
        (vec!["ask", "--session", "s", "--budget", "0", "q"], 2),
        (vec!["trace", "--session", "never"], 3),
        // Errors of `ragctx-eval` keep their kind: a file the caller named that is not there.
        (vec!["eval", "intent", "--cases", "/nonexistent/cases.jsonl"], 2),
        (vec!["serve", "--addr", "not-an-address"], 2),
        // A check that fails is not the caller's mistake: exit 1 (no accuracy reaches 1.01).
        (
            vec![
                "eval",
                "intent",
                "--cases",
                concat!(env!("CARGO_MANIFEST_DIR"), "/../../eval/intent.jsonl"),
                "--min-accuracy",
                "1.01",
            ],
            1,
        ),
    ] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "));
    }
    // An address `serve` cannot bind (taken here) is "unavailable", not bad input.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = env.run(&["serve", "--addr", &addr]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains(&format!("address {addr} is unavailable: cannot bind it")), "{stderr}");
    let long = "why ".repeat(1200);
    let out = env.run(&["ask", "--session", "s", &long]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("limit is 4000"));

    let out = Command::new(env!("CARGO_BIN_EXE_ragctx"))
        .args([
            "--data-dir",
            env.data().to_str().unwrap(),
            "--model-dir",
            "/nonexistent/minilm",
            "ask",
            "--session",
            "s",
            "q",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("scripts/setup"));
}

#[test]
fn documents_are_replaced_whole_listed_and_deleted() {
    let env = Env::new();
    let doc = |n: usize| -> String {
        // About 1,100 characters a part: more than one chunk's worth (the chunker cuts at 1,000).
        (0..n)
            .map(|i| {
                format!("## Part {i}\n\n{}\n\n", format!("The zebra finch of part {i} sings at dawn. ").repeat(30))
            })
            .collect()
    };
    let dir = env.dir.path().join("notes");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("finch.md"), doc(6)).unwrap();
    std::fs::write(dir.join("other.md"), "# Kettles\n\nA kettle boils water for tea.\n").unwrap();
    env.ok(&["ingest", dir.to_str().unwrap()]);
    let listed: Value = serde_json::from_str(&env.ok(&["documents", "list", "--json"])).unwrap();
    let chunks_of = |v: &Value, d: &str| {
        v.as_array().unwrap().iter().find(|x| x["document_id"] == d).map(|x| x["chunks"].as_u64().unwrap())
    };
    let before = chunks_of(&listed, "finch.md").expect("finch.md listed");
    assert!(before >= 2, "the long document has several chunks: {listed}");
    let first = env.ask("life", &["--memory", "client"], "When does the zebra finch sing?");
    let shown_first = context_chunks(&first);
    assert!(!shown_first.is_empty());

    // The document shrinks to one part: re-ingesting it removes its other chunks at once.
    std::fs::write(dir.join("finch.md"), doc(1)).unwrap();
    let out = env.ok(&["ingest", dir.to_str().unwrap()]);
    let listed: Value = serde_json::from_str(&env.ok(&["documents", "list", "--json"])).unwrap();
    let after = chunks_of(&listed, "finch.md").unwrap();
    assert!(after < before, "{before} → {after}");
    assert!(out.contains(&format!("{} removed", before - after)), "{out}");
    let t = env.ask("fresh", &["--limit", "20", "--group-size", "10"], "When does the zebra finch sing?");
    let kept: Vec<String> = (0..after).map(|i| format!("finch.md#{i}")).collect();
    let stale: Vec<String> =
        context_chunks(&t).into_iter().filter(|c| c.starts_with("finch.md#") && !kept.contains(c)).collect();
    assert!(stale.is_empty(), "chunks no longer in the document never come back: {stale:?}");

    // Deleted: gone from search, list and fetch; the session that showed it keeps its history.
    let out = env.ok(&["documents", "delete", "finch.md"]);
    assert!(out.contains(&format!("deleted finch.md ({after} chunks)")), "{out}");
    let t = env.ask("fresh2", &["--limit", "20"], "When does the zebra finch sing?");
    assert!(!context_docs(&t).contains(&"finch.md".to_string()), "a deleted document never returns");
    let reshow = env.ask("life", &["--mode", "reshow"], "show me that again");
    assert!(!context_docs(&reshow).contains(&"finch.md".to_string()), "not even on a reshow");
    let traces: Value = serde_json::from_str(&env.ok(&["trace", "--session", "life", "--json"])).unwrap();
    assert_eq!(context_chunks(&traces[0]), shown_first, "history keeps what turn 1 showed");
    let missing = env.run(&["documents", "delete", "finch.md", "other.md"]);
    assert_eq!(missing.status.code(), Some(3), "an unknown id is 'not found'");
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no document finch.md"));
    let listed: Value = serde_json::from_str(&env.ok(&["documents", "list", "--json"])).unwrap();
    assert!(listed.as_array().unwrap().is_empty(), "other.md was deleted despite the unknown id: {listed}");

    // --append keeps the old behaviour: chunks are added to a document by id.
    let a = env.write("a.jsonl", "{\"_id\": \"n#0\", \"document_id\": \"n\", \"text\": \"first part\"}\n");
    let b = env.write("b.jsonl", "{\"_id\": \"n#1\", \"document_id\": \"n\", \"text\": \"second part\"}\n");
    env.ok(&["ingest", a.to_str().unwrap()]);
    env.ok(&["ingest", "--append", b.to_str().unwrap()]);
    let listed: Value = serde_json::from_str(&env.ok(&["documents", "list", "--json"])).unwrap();
    assert_eq!(chunks_of(&listed, "n"), Some(2));
    env.ok(&["ingest", b.to_str().unwrap()]);
    let listed: Value = serde_json::from_str(&env.ok(&["documents", "list", "--json"])).unwrap();
    assert_eq!(chunks_of(&listed, "n"), Some(1), "without --append the document is replaced");

    // TLS to Redis is refused up front, naming the reason.
    let tls = env.run(&["--sessions", "rediss://127.0.0.1:6380", "trace", "--session", "x"]);
    assert_eq!(tls.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&tls.stderr).contains("TLS"), "{}", String::from_utf8_lossy(&tls.stderr));
}

/// A folder as a user keeps it (hard-wrapped Markdown with `##` headings, HTML, DOCX, a
/// broken DOCX and a PDF): every readable file is read and said so per format, the broken one
/// is left out by name and the rest ingested; blocks carry their heading path, the CLI shows
/// one source line per document with its section, and the answer quotes whole sentences.
#[test]
fn documents_as_users_have_them() {
    let env = Env::new();
    let dir = env.dir.path().join("library");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("ch09-errors.md"),
        "## Recoverable Errors with Result\n\nMost errors are not serious enough to require the\nprogram to stop entirely.\n\n### Propagating Errors\n\nWhen a function's implementation calls something that\nmight fail, instead of handling the error within the\nfunction itself you can return the error to the calling\ncode so that it can decide what to do. This is known as\npropagating the error.\n\n```rust\nlet f = File::open(\"hello.txt\")?; // propagating the error to the calling code\n```\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("kettles.html"),
        "<html><head><title>Kettles</title></head><body><h1>Kettles</h1><h2>Descaling</h2><p>Descale a kettle\nwith white vinegar once a month in hard water areas.</p></body></html>",
    )
    .unwrap();
    std::fs::copy(repo().join("tests/fixtures/documents/care-guide.docx"), dir.join("care-guide.docx")).unwrap();
    std::fs::write(dir.join("broken.docx"), "not a zip package").unwrap();
    let pdfs = repo().join("tests/fixtures/documents/pdf");
    std::fs::copy(pdfs.join("report-libreoffice.pdf"), dir.join("report.pdf")).unwrap();
    std::fs::copy(pdfs.join("notice-scanned.pdf"), dir.join("notice.pdf")).unwrap();
    std::fs::write(dir.join("broken.pdf"), "%PDF-1.4").unwrap();
    std::fs::write(dir.join("logo.svg"), "<svg/>").unwrap();
    let out = env.ok(&["ingest", dir.to_str().unwrap()]);
    assert!(
        out.contains("read docx: 1 files, 3 chunks; html: 1 files, 1 chunks; md: 1 files, 2 chunks; pdf: 2 files, 8 pages, 7 chunks"),
        "{out}"
    );
    assert!(out.contains("skipped 1 files of other types (.svg 1)"), "{out}");
    assert!(out.contains("left out 2 files that could not be read:"), "{out}");
    assert!(
        out.contains("broken.docx: not a DOCX package") && out.contains("broken.pdf: not a readable PDF ("),
        "{out}"
    );
    assert!(out.contains("read in part (1):") && out.contains("notice.pdf: page 2 without a text layer"), "{out}");

    let question = "What does propagating the error to the calling code mean?";
    let t = env.ask("docs", &["--budget", "1000"], question);
    let block =
        t["context"].as_array().unwrap().iter().find(|b| b["document_id"] == "ch09-errors.md").expect("the chapter");
    assert_eq!(block["title"], "Recoverable Errors with Result");
    assert_eq!(block["metadata"]["section"], "Propagating Errors", "{block}");
    // Every quoted sentence is a whole sentence of the chapter's prose: it ends as a sentence
    // ends, and no code line is quoted.
    let prose = "When a function's implementation calls something that might fail, instead of handling the error within the function itself you can return the error to the calling code so that it can decide what to do. This is known as propagating the error.";
    let answer = t["answer"].as_str().unwrap();
    let quoted: Vec<&str> = answer
        .split(" [")
        .map(|s| s.trim_start_matches(|c: char| c.is_ascii_digit() || c == ']').trim())
        .filter(|s| !s.is_empty())
        .collect();
    assert!(quoted.iter().any(|s| prose.contains(s)), "{answer}");
    for s in &quoted {
        assert!(s.ends_with(['.', '!', '?']), "a sentence cut at a line's end: {s:?} in {answer}");
        assert!(!s.contains("File::open"), "a code line quoted: {answer}");
    }
    let docx = env.ask("docx", &["--budget", "1000"], "When should I water a calathea?");
    let block =
        docx["context"].as_array().unwrap().iter().find(|b| b["document_id"] == "care-guide.docx").expect("the DOCX");
    assert_eq!(block["title"], "Care guide for tropical plants");
    assert!(
        block["text"].as_str().unwrap().contains("| Calathea | the top centimetre is dry | less often |"),
        "{block}"
    );

    // The CLI: one line per document, the section beside the title.
    let shown = env.ok(&["ask", "--session", "plain", "--budget", "1000", question]);
    let line = shown.lines().find(|l| l.contains("(ch09-errors.md)")).unwrap_or_else(|| panic!("{shown}"));
    assert!(line.contains("Recoverable Errors with Result › Propagating Errors (ch09-errors.md)"), "{shown}");
    assert_eq!(shown.lines().filter(|l| l.contains("(ch09-errors.md)")).count(), 1, "{shown}");

    // A PDF: each block names its page, in its metadata, its header and the citation; the
    // CLI's source line names the pages.
    let question = "How many people does the reading room on the third floor seat?";
    let pdf = env.ask("pdf", &["--budget", "1000"], question);
    let blocks = pdf["context"].as_array().unwrap();
    let block = blocks.iter().find(|b| b["text"].as_str().unwrap().contains("seats 84 people")).expect("page 3");
    assert_eq!(block["document_id"], "report.pdf");
    assert_eq!(block["title"], "Harbour Street Library: annual report 2025");
    assert_eq!((block["metadata"]["page_start"].as_u64(), block["metadata"]["page_end"].as_u64()), (Some(3), Some(3)));
    assert_eq!(block["metadata"]["section"], "The reading room on the third floor");
    let cited = pdf["citations"].as_array().unwrap().iter().find(|c| c["document_id"] == "report.pdf").expect("cited");
    let covers = |r: &Value| r[0].as_u64().unwrap() <= 3 && 3 <= r[1].as_u64().unwrap();
    assert!(cited["pages"].as_array().unwrap().iter().any(covers), "{cited}");
    let shown = env.ok(&["ask", "--session", "pdf-plain", "--budget", "1000", question]);
    let line = shown.lines().find(|l| l.contains("(report.pdf")).unwrap_or_else(|| panic!("{shown}"));
    // The same pages as the JSON turn's citation (same question, same store, another session),
    // as a reader names them.
    let ranges: Vec<(u32, u32)> = cited["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].as_u64().unwrap() as u32, r[1].as_u64().unwrap() as u32))
        .collect();
    let label = ragctx_core::page_label(&ranges);
    assert!(line.contains(&format!("(report.pdf, {label})")), "{label}: {shown}");
}

#[test]
fn sessions_in_redis_work_unchanged() {
    let env = Env::new();
    let path = corpus(&env, 60);
    env.ok(&["ingest", path.to_str().unwrap()]);
    let redis = std::env::var("RAGCTX_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let session = format!("e2e-{}", std::process::id());
    let r = ["--sessions", redis.as_str()];
    let fresh = env.run(&[&r[..], &["session", "delete", "--session", &session]].concat());
    assert_eq!(fresh.status.code(), Some(3), "a new session id is unknown to Redis");
    let first = env.ask(&session, &r, "What is New York State doing about climate change?");
    let second = env.ask(
        &session,
        &[&r[..], &["--mode", "new", "--granularity", "document", "--memory", "client"]].concat(),
        "What is New York State doing about climate change?",
    );
    assert_eq!(second["turn"], 2);
    // The key's TTL, as an operator sees it: the default day, refreshed by each turn.
    let ttl = Command::new("redis-cli")
        .args(["-u", redis.as_str(), "TTL", &format!("{{ragctx:{session}}}:turns")])
        .output()
        .expect("redis-cli (Debian redis-tools, installed with the server)");
    let ttl: i64 = String::from_utf8_lossy(&ttl.stdout).trim().parse().unwrap();
    assert!((86_000..=86_400).contains(&ttl), "redis-cli TTL shows the session TTL: {ttl}");
    let earlier: HashSet<String> = context_docs(&first).into_iter().collect();
    assert!(context_docs(&second).iter().all(|d| !earlier.contains(d)), "exclusion remembered in Redis");
    let traces: Value =
        serde_json::from_str(&env.ok(&[&r[..], &["trace", "--session", &session, "--json"]].concat())).unwrap();
    assert_eq!(traces.as_array().unwrap().len(), 2);
    // The embedded store of the data dir knows nothing of this session.
    assert_eq!(env.run(&["trace", "--session", &session]).status.code(), Some(3));
    env.ok(&[&r[..], &["session", "delete", "--session", &session]].concat());
}

#[test]
fn eval_mtrag_scores_strategies_side_by_side() {
    let env = Env::new();
    // Two govt conversations, their gold passages and 150 other passages.
    let data = mtrag();
    let turns_text = std::fs::read_to_string(data.join("turns.jsonl")).unwrap();
    let mut convs: Vec<String> = Vec::new();
    let mut turns = Vec::new();
    for l in turns_text.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        let cid = v["conversation_id"].as_str().unwrap().to_owned();
        if v["domain"] != "govt" || (!convs.contains(&cid) && convs.len() == 2) {
            continue;
        }
        if !convs.contains(&cid) {
            convs.push(cid);
        }
        turns.push(v);
    }
    let gold: HashSet<String> = turns.iter().flat_map(|t| strs(&t["gold"])).collect();
    let corpus_text = std::fs::read_to_string(data.join("corpus_govt.jsonl")).unwrap();
    let corpus: Vec<&str> = corpus_text
        .lines()
        .enumerate()
        .filter(|(i, l)| *i < 150 || gold.iter().any(|g| l.contains(&format!("\"_id\": \"{g}\""))))
        .map(|(_, l)| l)
        .collect();
    let dir = env.dir.path().join("mtrag");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("corpus_govt.jsonl"), corpus.join("\n")).unwrap();
    let tfile = env.write("turns.jsonl", &turns.iter().map(|t| t.to_string()).collect::<Vec<_>>().join("\n"));
    let out = env.dir.path().join("report");
    // `ragctx eval mtrag --json` over the slice, with `extra` flags.
    let eval = |extra: &[&str]| -> Value {
        let slice =
            ["eval", "mtrag", "--turns", tfile.to_str().unwrap(), "--corpus-dir", dir.to_str().unwrap(), "--json"];
        serde_json::from_str(&env.ok(&[&slice[..], extra].concat())).unwrap()
    };
    let json = eval(&["--out", out.to_str().unwrap()]);
    let s = &json["strategies"];
    let gold_turns = turns.len() as u64;
    for name in ["none", "group", "exclude", "full", "full+cited", "history"] {
        for g in ["chunk", "document"] {
            let r = &s[format!("{name}@{g}")];
            assert_eq!(r["granularity"], g);
            let o = &r["overall"];
            assert_eq!(o["turns"].as_u64(), Some(gold_turns), "{name}@{g}");
            let value = |k: &str| o[k].as_f64().unwrap_or_else(|| panic!("{name}@{g}.{k}: {o}"));
            for k in ["fresh_recall", "doc_recall", "available_recall", "repeat_rate", "doc_repeat_rate"] {
                assert!((0.0..=1.0).contains(&value(k)), "{name}@{g}.{k} is a share: {o}");
            }
            assert!(value("fresh_recall") > 0.0, "{name}@{g} finds some gold: {o}");
            assert!(
                value("context_tokens") > 0.0 && value("prompt_tokens") >= value("context_tokens"),
                "{name}@{g}: {o}"
            );
            let per_1k = value("new_gold_per_1k_tokens");
            assert!(per_1k.is_finite() && per_1k > 0.0, "{name}@{g}: {o}");
            assert!(o["available_recall"].as_f64() >= o["fresh_recall"].as_f64(), "available includes fresh");
            assert!(r["by_domain"]["govt"]["turns"].as_u64() == Some(gold_turns));
            assert!(r["by_turn"].as_object().unwrap().len() >= 2);
        }
    }
    // Exclusion at chunk granularity never re-sends a chunk; at document level never a document.
    assert_eq!(s["full@chunk"]["overall"]["repeat_rate"], 0.0);
    assert_eq!(s["exclude@chunk"]["overall"]["repeat_rate"], 0.0);
    // Grouping gives one fragment per document (no quota raised by a follow-up here or there).
    let f = &s["full@document"]["overall"];
    assert!(f["context_fragments"].as_f64().unwrap() - f["unique_documents"].as_f64().unwrap() < 0.5);
    // Carrying every earlier context costs prompt tokens.
    assert!(
        s["history@chunk"]["overall"]["prompt_tokens"].as_f64() > s["none@chunk"]["overall"]["prompt_tokens"].as_f64()
    );
    // The memory modes with their defaults, side by side with the seed's strategies.
    for name in ["engine", "client"] {
        let o = &s[name]["overall"];
        assert_eq!(s[name]["memory"], name);
        assert_eq!(o["turns"].as_u64(), Some(gold_turns), "{name}");
        let value = |k: &str| o[k].as_f64().unwrap_or_else(|| panic!("{name}.{k}: {o}"));
        assert!(value("evidence_recall") > 0.0 && value("evidence_recall") <= 1.0, "{name}: {o}");
        // Every conversation's turns but its last have a reference answer in a later line.
        assert!(o["answered"].as_u64().is_some_and(|a| a > 0 && a <= gold_turns), "{name}: {o}");
        assert!(value("answer_support") > 0.0 && value("answer_support") <= 1.0, "{name}: {o}");
        assert_eq!(value("duplicate_tokens"), 0.0, "{name}: nothing is read twice: {o}");
        assert!(value("turn_tokens") > 0.0 && (0.0..=1.0).contains(&value("resent_rate")), "{name}: {o}");
        if name == "client" {
            assert_eq!(value("carried"), 0.0, "client memory carries nothing: {o}");
            assert_eq!(value("resent_rate"), 0.0, "client memory re-sends nothing the window holds: {o}");
        } else {
            assert_eq!(value("pointers"), 0.0, "engine memory carries instead of pointing: {o}");
        }
        assert!(s[name]["from_turn_5"].is_object());
    }
    // What the model reads: engine sends no chunk twice; client never re-sends the window
    // and reads the earlier contexts it keeps, so it sees at least what it was sent now.
    assert_eq!(s["engine"]["overall"]["duplicate_tokens"], 0.0);
    assert!(s["engine"]["overall"]["carried"].as_f64() > Some(0.0), "follow-ups carry earlier blocks");
    assert!(s["engine"]["overall"]["conversation_tokens"].as_f64() > Some(0.0), "the conversation is in the prompt");
    assert_eq!(s["client"]["overall"]["resent_rate"], 0.0);
    assert!(s["client"]["overall"]["pointers"].as_f64() > Some(0.0), "earlier chunks that rank are pointed to");
    assert!(s["client"]["overall"]["prompt_tokens"].as_f64() > s["client"]["overall"]["turn_tokens"].as_f64());
    let html = std::fs::read_to_string(out.join("mtrag.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("full@chunk") && !html.contains("http"), "self-contained report");
    assert!(out.join("mtrag.json").is_file());
    // Read as a person would: the trade-off first, three lines per chart until others are picked.
    let dom = chromium_dom(&env, &format!("file://{}", out.join("mtrag.html").display()));
    let pareto = dom.find("id=\"pareto\"").expect("the evidence/tokens view is on the page");
    assert!(pareto < dom.find("<table").unwrap(), "the trade-off comes before the tables");
    let figure = &dom[pareto..dom.find("</figure>").unwrap()];
    for name in s.as_object().unwrap().keys() {
        assert!(figure.contains(&format!("{name}</text>")) || figure.contains(&format!("{name} = ")), "{name} plotted");
    }
    let picked = dom.matches("type=\"checkbox\"").count();
    assert_eq!(picked, s.as_object().unwrap().len(), "every strategy can be picked");
    for chart in ["evidence recall", "answer support", "prompt tokens"] {
        assert!(dom.contains(&format!("<figcaption>{chart}</figcaption>")), "{chart} per turn index");
    }
    let visible = dom.matches("<polyline class=\"s-").count() - dom.matches("style=\"display:none\"><title>").count();
    assert_eq!(visible, 3 * 5, "engine, none and history drawn in each of the five charts");

    // Budget curves against the two baselines a chat app would run (issue 26): each strategy
    // at each budget, unbounded `history` once; the page opens with the curves.
    let curves_out = env.dir.path().join("curves");
    let c = eval(&[
        "--strategies",
        "none+conv,history@budget,history,engine",
        "--granularity",
        "chunk",
        "--budgets",
        "1000,3000",
        "--out",
        curves_out.to_str().unwrap(),
    ]);
    let curves = c["curves"].as_object().unwrap();
    assert_eq!(curves.keys().collect::<Vec<_>>(), ["engine", "history", "history@budget", "none+conv"]);
    for name in ["engine", "history@budget", "none+conv"] {
        let pts = curves[name].as_array().unwrap();
        assert_eq!(pts.iter().map(|p| p["budget"].as_u64().unwrap()).collect::<Vec<_>>(), [1000, 3000], "{name}");
        for (p, budget) in pts.iter().zip([1000.0, 3000.0]) {
            let tokens = p["prompt_tokens"].as_f64().unwrap();
            // The whole prompt within the budget, plus the question and instructions (~100).
            assert!(tokens > 0.0 && tokens <= budget + 150.0, "{name} at {budget}: {tokens} tokens");
            assert_eq!(
                c["strategies"][format!("{name}@{}", budget as u64)]["overall"]["prompt_tokens"],
                p["prompt_tokens"]
            );
        }
        assert!(pts[1]["prompt_tokens"].as_f64() > pts[0]["prompt_tokens"].as_f64(), "{name}: a larger budget is used");
    }
    assert_eq!(curves["history"].as_array().unwrap().len(), 1, "unbounded history is one point");
    assert!(curves["history"][0]["budget"].is_null());
    // none+conv sends the conversation; history@budget keeps earlier contexts only within it.
    assert!(c["strategies"]["none+conv@3000"]["overall"]["conversation_tokens"].as_f64() > Some(0.0));
    assert_eq!(c["strategies"]["none+conv@3000"]["reader"], "client_sends_conversation");
    let text = env.ok(&[
        "eval",
        "mtrag",
        "--turns",
        tfile.to_str().unwrap(),
        "--corpus-dir",
        dir.to_str().unwrap(),
        "--strategies",
        "none+conv,engine",
        "--granularity",
        "chunk",
        "--budgets",
        "1000,3000",
    ]);
    assert!(
        text.starts_with("| strategy | budget | prompt tokens | evidence recall |"),
        "the curves print first: {text}"
    );
    // Without --strategies, the curves come with both baselines beside every strategy.
    let d = eval(&["--granularity", "chunk", "--budgets", "1000,3000"]);
    let names: HashSet<&str> = d["curves"].as_object().unwrap().keys().map(String::as_str).collect();
    let expected: HashSet<&str> = [
        "none",
        "group",
        "exclude",
        "full",
        "full+cited",
        "history",
        "engine",
        "client",
        "none+conv",
        "history@budget",
    ]
    .into();
    assert_eq!(names, expected, "the default curves: every strategy and both baselines");
    let dom = chromium_dom(&env, &format!("file://{}", curves_out.join("mtrag.html").display()));
    let first = dom.find("<figure").expect("a chart");
    assert!(dom[first..].starts_with("<figure id=\"curves\""), "the curves are the page's first chart");
    let figure = &dom[first..first + dom[first..].find("</figure>").unwrap()];
    for name in curves.keys() {
        assert!(figure.contains(&format!("data-name=\"{name}\"")), "{name} has a curve");
    }
    assert_eq!(figure.matches("<polyline").count(), 4, "one line per strategy");
    assert!(dom.contains("id=\"curves-late\"") && dom.contains("id=\"curves-govt\""), "turns ≥ 5, then per domain");

    // Query modes side by side: the weighted mix runs and is scored like the others.
    let q = eval(&["--strategies", "none", "--granularity", "chunk", "--query", "last,weighted,rewrite"]);
    for mode in ["last", "weighted", "rewrite"] {
        let o = &q["strategies"][format!("none/{mode}")]["overall"];
        assert!(o["fresh_recall"].as_f64().is_some_and(|r| (0.0..=1.0).contains(&r)), "none/{mode}: {o}");
    }
    let bad = env.run(&["eval", "mtrag", "--turns", tfile.to_str().unwrap(), "--query", "mixed"]);
    assert_eq!(bad.status.code(), Some(2), "unknown query mode is bad input");
}

/// `eval beir` on the BEIR form of the MTRAG slice (`tests/fixtures/beir`): each government
/// turn's human rewrite is a query, MTRAG's gold passages of that turn are its judgements, the
/// corpus is the slice's 320 government passages (SciFact, which this test read before, may
/// not be copied into the repo: its licence is non-commercial).
#[test]
fn eval_beir_on_the_mtrag_slice() {
    let env = Env::new();
    let dir = repo().join("tests/fixtures/beir");
    let qrels = std::fs::read_to_string(dir.join("qrels/test.tsv")).unwrap();
    let queries: HashSet<&str> = qrels.lines().skip(1).map(|l| l.split('\t').next().unwrap()).collect();
    assert!(queries.len() >= 5, "the slice has judged queries");
    let documents = std::fs::read_to_string(dir.join("corpus.jsonl")).unwrap().lines().count();
    assert!(documents >= 300, "more documents than the deepest cut-off, so recall@100 means something");
    let r: Value = serde_json::from_str(&env.ok(&["eval", "beir", "--data", dir.to_str().unwrap(), "--json"])).unwrap();
    assert_eq!(r["queries"].as_u64().unwrap() as usize, queries.len());
    assert_eq!(r["documents"].as_u64().unwrap() as usize, documents);
    for k in ["ndcg@10", "recall@10", "recall@100"] {
        let x = r[k].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&x), "{k} = {x}");
    }
    // A working embedder and index find most judged passages: MiniLM scores recall@100 0.98,
    // recall@10 0.81, nDCG@10 0.55 here; a random ranking of these 320 passages about 0.31,
    // 0.03 and 0.02.
    assert!(r["recall@100"].as_f64().unwrap() > 0.9, "{r}");
    assert!(r["recall@10"].as_f64().unwrap() > 0.7, "{r}");
    assert!(r["ndcg@10"].as_f64().unwrap() > 0.5, "{r}");
    // Warm: the embedding cache answers the second run.
    let again: Value =
        serde_json::from_str(&env.ok(&["eval", "beir", "--data", dir.to_str().unwrap(), "--json"])).unwrap();
    assert_eq!(again["embedded"], 0);
    assert_eq!(again["ndcg@10"], r["ndcg@10"]);
}

#[test]
fn the_openai_generator_is_used_and_its_citations_are_checked() {
    let env = Env::new();
    let path = corpus(&env, 40);
    env.ok(&["ingest", path.to_str().unwrap()]);
    let double = ragctx_testkit::OpenAiTestDouble::start(vec![
        (200, ragctx_testkit::completion("Quokkas are counted in March [1], says [42]."), 0),
        (200, ragctx_testkit::completion("Volunteers count them [1]."), 0),
    ]);
    // One turn through the generator test double, as `ask --json`.
    let ask = |question: &str| -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_ragctx"))
            .args([
                "--data-dir",
                env.data().to_str().unwrap(),
                "--model-dir",
                repo().join("models/all-MiniLM-L6-v2").to_str().unwrap(),
            ])
            .args(["ask", "--session", "llm", "--json", question])
            .env("RAGCTX_GENERATOR", "openai")
            .env("RAGCTX_OPENAI_BASE_URL", &double.url)
            .env("RAGCTX_OPENAI_MODEL", "test-model")
            .env("RAGCTX_OPENAI_API_KEY", "sk-e2e")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // The prompt the double received for request `n`.
    let prompt_sent = |n: usize| -> String {
        let seen = double.seen.lock().unwrap();
        let sent: Value = serde_json::from_str(&seen[n].1).unwrap();
        sent["messages"][0]["content"].as_str().unwrap().to_owned()
    };
    let t = ask("When is the quokka festival?");
    assert_eq!(t["answer"], "Quokkas are counted in March [1], says [42].");
    assert_eq!(t["trace"]["invalid_citations"], 1, "[42] named no block of the context");
    assert_eq!(t["citations"].as_array().unwrap().len(), 1);
    let prompt = prompt_sent(0);
    assert!(
        prompt.contains("[1] Odd ids (doc \"quoted\" [bracketed] \\back\\ 文档)"),
        "the cited context was sent: {prompt}"
    );
    // The next turn's prompt carries the conversation so far (`engine` memory, the default).
    ask("Who counts them?");
    let prompt = prompt_sent(1);
    let conversation = "Conversation so far:\nUser: When is the quokka festival?\nAssistant: Quokkas are counted in March [1], says [42].\n";
    assert!(prompt.contains(conversation), "the conversation so far was sent: {prompt}");
}

/// The DOM of `url` after its scripts ran, from headless Chromium (installed by scripts/test).
fn chromium_dom(env: &Env, url: &str) -> String {
    let chromium = ["chromium", "chromium-browser"]
        .iter()
        .find(|b| Command::new(b).arg("--version").output().is_ok_and(|o| o.status.success()))
        .expect("chromium is installed by scripts/test");
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", env.dir.path().join("chrome").display()))
        .args(["--virtual-time-budget=10000", "--dump-dom", url])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The number inside `<... data-k="KEY"><span>N</span>` (funnel steps) or
/// `<span data-k="KEY">N</span>` (side notes), after `from` in `dom`.
fn dom_number(dom: &str, from: usize, key: &str) -> u64 {
    let at =
        dom[from..].find(&format!("data-k=\"{key}\"")).map(|i| from + i).unwrap_or_else(|| panic!("{key} on the page"));
    let rest = &dom[at..];
    let start = rest.find('>').unwrap() + 1;
    let text: String = rest[start..].trim_start_matches("<span>").chars().take_while(|c| c.is_ascii_digit()).collect();
    text.parse().unwrap_or_else(|_| panic!("number for {key}: {}", &rest[..80.min(rest.len())]))
}

#[test]
fn the_trace_page_shows_the_api_numbers_in_headless_chromium() {
    let env = Env::new();
    let path = corpus(&env, 60);
    env.ok(&["ingest", path.to_str().unwrap()]);
    // Asked again, the first question's blocks come back carried (engine memory), then
    // pointed to (client memory).
    let q = "What is New York State doing about climate change?";
    for memory in ["engine", "engine", "client"] {
        env.ask("page", &["--budget", "800", "--memory", memory], q);
    }
    let mut server = Server::start(&env, &[], &[]);
    let addr = server.addr.clone();
    let api: Value = serde_json::from_str(&http_get(&addr, "/v1/sessions/page/turns")).unwrap();
    let dom = chromium_dom(&env, &format!("http://{addr}/?session=page"));
    server.kill();
    let turns = api.as_array().unwrap();
    assert_eq!(turns.len(), 3);
    for t in turns {
        let at = dom
            .find(&format!("data-turn=\"{}\"", t["turn"]))
            .unwrap_or_else(|| panic!("turn {} on the page: {dom}", t["turn"]));
        let s = &t["trace"];
        for k in
            ["candidates", "unique_documents", "context_fragments", "context_tokens", "excluded", "carried", "pointers"]
        {
            assert_eq!(dom_number(&dom, at, k), s[k].as_u64().unwrap(), "turn {} {k}", t["turn"]);
        }
        assert_eq!(
            dom_number(&dom, at, "dropped_by_budget") as usize,
            s["dropped_by_budget"].as_array().unwrap().len()
        );
    }
    assert!(dom.contains("data-chart=\"prompt tokens\""), "charts across turns");
    // Each block says whether it is new or carried, and from which turn (the rendered turns
    // only: the page's script holds the same words).
    let rendered = &dom[dom.find("data-turn=").unwrap()..];
    let rendered = &rendered[..rendered.find("<script").unwrap_or(rendered.len())];
    let carried: usize = turns.iter().map(|t| t["trace"]["carried"].as_u64().unwrap() as usize).sum();
    assert!(carried > 0, "the repeated question carries blocks");
    assert_eq!(rendered.matches(" · carried, shown in turn ").count(), carried, "carried blocks marked");
    let blocks: usize = turns.iter().map(|t| t["context"].as_array().unwrap().len()).sum();
    assert_eq!(rendered.matches("data-carried=\"\"").count(), blocks - carried, "new blocks marked");
    // `pointers` is written in `client` memory only.
    let pointers: usize = turns.iter().map(|t| t["pointers"].as_array().map_or(0, Vec::len)).sum();
    assert!(pointers > 0, "the client-memory turn points to what it would have re-sent");
    assert_eq!(rendered.matches(">pointer [").count(), pointers, "pointers listed");
}

#[test]
fn the_openai_python_client_gets_a_cited_answer() {
    let python = repo().join("bench/.venv/bin/python");
    assert!(python.is_file(), "the OpenAI Python client is installed by bench/setup (scripts/test runs it)");
    let env = Env::new();
    let path = corpus(&env, 40);
    env.ok(&["ingest", path.to_str().unwrap()]);
    let mut server = Server::start(&env, &[], &[]);
    let addr = server.addr.clone();
    let script = r#"
import json, sys
from openai import OpenAI
client = OpenAI(base_url=f"http://{sys.argv[1]}/v1", api_key="unused")
r = client.chat.completions.create(model="ragctx", user="py1",
    messages=[{"role": "user", "content": "When is the quokka festival on Rottnest Island?"}])
extra = (r.model_extra or {}).get("ragctx") or {}
chunks = list(client.chat.completions.create(model="ragctx", messages=[{"role": "user", "content": "show me that again"}],
    stream=True, extra_headers={"X-Session-Id": "py1"}))
streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
print(json.dumps({"content": r.choices[0].message.content, "citations": extra.get("citations", []),
                  "context": [b["document_id"] for b in extra.get("context", [])], "streamed": streamed,
                  "finish": chunks[-1].choices[0].finish_reason}))
"#;
    let out = Command::new(&python).arg("-c").arg(script).arg(&addr).output().unwrap();
    server.kill();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let content = r["content"].as_str().unwrap();
    assert!(content.contains("quokka") && content.contains('['), "a cited answer: {content}");
    let cited = r["citations"].as_array().unwrap();
    assert!(!cited.is_empty());
    for c in cited {
        assert!(r["context"].as_array().unwrap().contains(&c["document_id"]), "citation inside the context");
    }
    assert!(r["streamed"].as_str().unwrap().contains('['), "the streamed reshow is cited too: {r}");
    assert_eq!(r["finish"], "stop");
}

/// `stream: true` forwards the model's pieces as it writes them: through a generator test
/// double that writes four pieces 700 ms apart, the OpenAI Python client, LangChain's
/// `ChatOpenAI` and `curl -N` each see the first piece well before the model has finished,
/// the whole answer in order, and the citations in the last chunk. No client names a
/// session: each is derived from the first message.
#[test]
fn answers_stream_from_the_model_as_it_writes_them() {
    use std::io::BufRead;
    let python = repo().join("bench/.venv/bin/python");
    assert!(python.is_file(), "the OpenAI Python client is installed by bench/setup (scripts/test runs it)");
    let env = Env::new();
    let path = corpus(&env, 40);
    env.ok(&["ingest", path.to_str().unwrap()]);
    let pieces = ["Quokkas ", "are counted ", "in March ", "[1]."];
    let double = ragctx_testkit::OpenAiTestDouble::streaming(pieces.iter().map(|p| p.to_string()).collect(), 700, 3);
    let vars =
        [("RAGCTX_GENERATOR", "openai"), ("RAGCTX_OPENAI_BASE_URL", &double.url), ("RAGCTX_OPENAI_MODEL", "slow")];
    let mut server = Server::start(&env, &[], &vars);
    let addr = server.addr.clone();
    // Each client prints {"content", "first", "last", "ragctx"}: seconds from the request to
    // the first and the last content piece.
    let script = r#"
import json, sys, time
from openai import OpenAI
base = f"http://{sys.argv[1]}/v1"
question = "When is the quokka festival on Rottnest Island?"
start = time.monotonic()
times, content, extra = [], "", {}
if sys.argv[2] == "openai":
    client = OpenAI(base_url=base, api_key="unused")
    assert [m.id for m in client.models.list()] == ["ragctx"]
    start = time.monotonic()
    for c in client.chat.completions.create(model="ragctx", messages=[{"role": "user", "content": question}], stream=True):
        if c.choices and c.choices[0].delta.content:
            times.append(time.monotonic() - start); content += c.choices[0].delta.content
        extra = (c.model_extra or {}).get("ragctx") or extra
else:
    from langchain_openai import ChatOpenAI
    llm = ChatOpenAI(base_url=base, api_key="unused", model="ragctx")
    for c in llm.stream("For LangChain: " + question):
        if c.content:
            times.append(time.monotonic() - start); content += c.content
print(json.dumps({"content": content, "first": times[0], "last": times[-1], "ragctx": extra}))
"#;
    for client in ["openai", "langchain"] {
        let out = Command::new(&python).arg("-c").arg(script).arg(&addr).arg(client).output().unwrap();
        assert!(out.status.success(), "{client}: {}", String::from_utf8_lossy(&out.stderr));
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["content"], pieces.concat(), "{client}: {r}");
        let (first, last) = (r["first"].as_f64().unwrap(), r["last"].as_f64().unwrap());
        assert!(
            last - first > 1.5,
            "{client}: the first piece came {first:.2} s in, the last {last:.2} s: not streamed"
        );
        if client == "openai" {
            let extra = &r["ragctx"];
            assert_eq!(extra["answer"], pieces.concat());
            assert!(extra["session_id"].as_str().unwrap().starts_with("chat-"), "a derived session: {extra}");
            assert_eq!(extra["citations"].as_array().unwrap().len(), 1, "[1] is checked against the context: {extra}");
        }
    }
    // curl -N: the bytes as they leave the server.
    let body = r#"{"model":"ragctx","stream":true,"messages":[{"role":"user","content":"Who counts the quokkas?"}]}"#;
    let mut curl = Command::new("curl")
        .args(["-sN", "-H", "Content-Type: application/json", "-d", body])
        .arg(format!("http://{addr}/v1/chat/completions"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("curl");
    let start = std::time::Instant::now();
    let (mut first, mut last, mut streamed) = (None, 0.0, String::new());
    for line in std::io::BufReader::new(curl.stdout.take().unwrap()).lines().map_while(Result::ok) {
        let Some(data) = line.strip_prefix("data: ").filter(|d| *d != "[DONE]") else { continue };
        let event: Value = serde_json::from_str(data).unwrap();
        if let Some(piece) = event["choices"][0]["delta"]["content"].as_str().filter(|p| !p.is_empty()) {
            let at = start.elapsed().as_secs_f64();
            first.get_or_insert(at);
            last = at;
            streamed.push_str(piece);
        }
    }
    assert!(curl.wait().unwrap().success());
    server.kill();
    assert_eq!(streamed, pieces.concat());
    assert!(last - first.unwrap() > 1.5, "curl: first piece {first:?} s, last {last:.2} s: not streamed");
    // The prompts the model got carried the retrieved context.
    let seen = double.seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    for (_, request) in seen.iter() {
        let sent: Value = serde_json::from_str(request).unwrap();
        assert_eq!(sent["stream"], true);
        assert!(sent["messages"][0]["content"].as_str().unwrap().contains("[1] "), "context sent: {sent}");
    }
}

/// `serve` logs JSON lines: one per answered request (request id, route, status, time) and
/// the `turn` span with its turn number, intent and stage timings (no session id), the `stage`
/// spans inside it; `/metrics` counts answers by route and status.
#[test]
fn serve_logs_requests_and_turns_as_json_and_counts_statuses() {
    let env = Env::new();
    let path = corpus(&env, 40);
    env.ok(&["ingest", path.to_str().unwrap()]);
    let mut server = Server::start(&env, &[], &[("RAGCTX_LOG", "info")]);
    let addr = server.addr.clone();
    let (status, _) = http_post(&addr, "/v1/sessions/logs1/turns", r#"{"question": "When is the quokka festival?"}"#);
    assert_eq!(status, 200);
    let (status, _) = http_post(&addr, "/v1/sessions/logs1/turns", r#"{"question": "  "}"#);
    assert_eq!(status, 400);
    let metrics = http_get(&addr, "/metrics");
    assert!(
        metrics.contains(r#"ragctx_http_requests_total{route="/v1/sessions/{id}/turns",status="200"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"ragctx_http_requests_total{route="/v1/sessions/{id}/turns",status="400"} 1"#),
        "{metrics}"
    );
    assert!(metrics.contains(r#"ragctx_http_request_ms_count{route="/v1/sessions/{id}/turns"} 2"#), "{metrics}");
    // The reader thread may lag the server by a moment.
    let lines = |want: &dyn Fn(&Value) -> bool| -> Vec<Value> {
        for _ in 0..50 {
            let found: Vec<Value> = server
                .stderr
                .lock()
                .unwrap()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|v| want(v))
                .collect();
            if !found.is_empty() {
                return found;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("no such log line in: {}", server.stderr.lock().unwrap());
    };
    let answered = lines(&|v| v["fields"]["message"] == "answered" && v["fields"]["status"] == 200);
    let request = &answered[0]["span"];
    assert_eq!(
        (request["name"].as_str(), request["route"].as_str()),
        (Some("request"), Some("/v1/sessions/{id}/turns"))
    );
    assert!(request["request_id"].as_str().is_some_and(|id| !id.is_empty()), "{request}");
    assert!(answered[0]["fields"]["ms"].as_f64().is_some());
    // The turn span, closed after its commit: turn number and the stage timings; the session
    // id only at debug (a stored id may carry a key's namespace or a tenant).
    let turn = &lines(&|v| v["span"]["name"] == "turn" && v["fields"]["message"] == "close")[0];
    assert_eq!(turn["span"]["turn"].as_u64(), Some(1), "{turn}");
    assert!(turn["span"].get("session").is_none() && !turn.to_string().contains("logs1"), "{turn}");
    assert!(turn["span"]["context_tokens"].as_u64().is_some_and(|t| t > 0), "{turn}");
    assert!(turn["span"]["candidates"].as_u64().is_some(), "{turn}");
    let timings: Value = serde_json::from_str(turn["span"]["timings_ms"].as_str().unwrap()).unwrap();
    for stage in ["embed", "search", "dedupe", "assemble", "generate", "remember", "total"] {
        assert!(timings[stage].as_f64().is_some(), "{stage} in {timings}");
    }
    assert_eq!(turn["spans"][0]["name"], "request", "the turn runs inside its request's span: {turn}");
    let stages = lines(&|v| v["span"]["name"] == "stage" && v["fields"]["message"] == "close");
    let names: HashSet<&str> = stages.iter().filter_map(|v| v["span"]["stage"].as_str()).collect();
    assert!(names.contains("search") && names.contains("generate"), "{names:?}");
    server.kill();
}

#[test]
fn load_test_loses_no_turn() {
    let env = Env::new();
    let path = corpus(&env, 40);
    env.ok(&["ingest", path.to_str().unwrap()]);
    let mut server = Server::start(&env, &[], &[]);
    let addr = server.addr.clone();
    let out = Command::new(env!("CARGO_BIN_EXE_ragctx"))
        .args([
            "bench",
            "http",
            "--addr",
            &addr,
            "--conversations",
            "8",
            "--turns",
            "4",
            "--concurrency",
            "4",
            "--json",
        ])
        .arg("--questions")
        .arg(mtrag().join("turns.jsonl"))
        .output()
        .unwrap();
    server.kill();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (r["turns_ok"].as_u64(), r["lost_turns"].as_u64(), r["errors"].as_u64()),
        (Some(32), Some(0), Some(0)),
        "{r}"
    );
}

#[test]
fn redis_down_mid_conversation_is_a_503_and_the_next_turn_after_restart_works() {
    let env = Env::new();
    let path = corpus(&env, 40);
    env.ok(&["ingest", path.to_str().unwrap()]);
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let start_redis = || {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server (scripts/redis-up installs it)");
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        child
    };
    let mut redis = start_redis();
    let url = format!("redis://127.0.0.1:{port}");
    let mut server = Server::start(&env, &["--sessions", &url], &[]);
    let addr = server.addr.clone();
    let ask = |q: &str| http_post(&addr, "/v1/sessions/r1/turns", &serde_json::json!({"question": q}).to_string());
    assert_eq!(ask("When is the quokka festival?").0, 200);
    let _ = redis.kill();
    let _ = redis.wait();
    let (status, body) = ask("What is New York doing about climate change?");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((status, v["code"].as_str()), (503, Some("unavailable")), "{body}");
    assert!(v["message"].as_str().unwrap().contains(&format!("redis at redis://127.0.0.1:{port}")), "{body}");
    let mut redis = start_redis();
    let (status, body) = ask("What is New York doing about climate change?");
    server.kill();
    let _ = redis.kill();
    let _ = redis.wait();
    assert_eq!(status, 200, "the next turn after the restart works: {body}");
    // Redis keeps nothing on disk here, so the session starts again at turn 1.
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["turn"], 1);
}

/// One request's settings never change what the session remembers (issue 27): three turns
/// over government passages in `client` memory, a turn with `--window 1` (or another
/// granularity, consumption or memory), then a default turn that asks the first question
/// again — none of the first turn's chunks is re-sent (they were trimmed for good before).
#[test]
fn one_turns_settings_never_change_what_the_session_remembers() {
    let env = Env::new();
    env.ok(&["ingest", env.govt(300).to_str().unwrap()]);
    let redis = std::env::var("RAGCTX_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let first_q = "How do I get a fee waiver for an appeal?";
    for store in ["embedded", redis.as_str()] {
        for (s, odd) in [
            ("w", vec!["--window", "1"]),
            ("g", vec!["--granularity", "document"]),
            ("c", vec!["--consumption", "cited"]),
            ("m", vec!["--memory", "engine"]),
        ] {
            let s = format!("remember-{s}-{}-{}", std::process::id(), store.len());
            // No relevance floor: every turn shows all that fits, so there is something to re-send.
            let client = ["--memory", "client", "--sessions", store, "--relevance-floor", "0"];
            let t1 = env.ask(&s, &client, first_q);
            env.ask(&s, &client, "Who can apply for food assistance?");
            env.ask(&s, &client, "How do I register a vehicle?");
            let mut args = vec!["--sessions", store, "--relevance-floor", "0"];
            if !odd.contains(&"--memory") {
                args.extend(["--memory", "client"]);
            }
            args.extend(odd.iter().copied());
            env.ask(&s, &args, "What are the rules for unemployment benefits?");
            let again = env.ask(&s, &client, first_q);
            let first: HashSet<String> =
                t1["context"].as_array().unwrap().iter().flat_map(|b| strs(&b["chunk_ids"])).collect();
            assert!(first.len() >= 4, "{t1}");
            let resent: Vec<String> = again["context"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|b| strs(&b["chunk_ids"]))
                .filter(|c| first.contains(c))
                .collect();
            assert!(resent.is_empty(), "{store}: after {odd:?}, turn 5 re-sends turn 1's {resent:?}: {again}");
            env.ok(&["--sessions", store, "session", "delete", "--session", &s]);
        }
    }
}

/// A newcomer's first mistake (issue 28): a question before any ingest says where the store
/// is missing or empty and which command fills it, and creates nothing.
#[test]
fn a_question_before_any_ingest_names_the_command_that_fills_the_store() {
    let env = Env::new();
    let out = env.run(&["ask", "--session", "s", "hello"]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no ragctx store at") && err.contains("ragctx ingest"), "{err}");
    assert!(!env.data().exists(), "nothing was created");
    // A store that holds documents of another tenant only is empty for this one.
    env.ok(&["--tenant", "other", "ingest", repo().join("demo/houseplants/pests.md").to_str().unwrap()]);
    let out = env.run(&["ask", "--session", "s", "hello"]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("holds no documents") && err.contains("ragctx ingest"), "{err}");
    env.ok(&["--tenant", "other", "ask", "--session", "s", "hello"]);
}

/// `bench search --mapped` with saves during the build (`--map-every`: the vectors so far
/// move to the file's map and the build goes on) gives the index the build in memory gives:
/// the same recall in every row, searched from the file it left.
#[test]
fn bench_search_mapped_during_the_build_finds_what_the_build_in_memory_finds() {
    let env = Env::new();
    let path = corpus(&env, 40);
    env.ok(&["ingest", path.to_str().unwrap()]);
    let dir = env.dir.path().join("mapped");
    let args = ["bench", "search", "--scale", "25000", "--queries", "20", "--rows", "random:0,random:100", "--json"];
    let plain: Value = serde_json::from_str(&env.ok(&args)).unwrap();
    let mut with_map = args.to_vec();
    with_map.extend(["--mapped", dir.to_str().unwrap(), "--map-every", "10000"]);
    let out = env.run(&with_map);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // Saved at 10,000 and 20,000 generated points besides the stored chunks (not at the
    // end: that is the final save).
    let saved: Vec<usize> =
        err.lines().filter_map(|l| l.split("and mapped its ").nth(1)?.split(' ').next()?.parse().ok()).collect();
    assert!(saved.len() == 2 && saved[1] - saved[0] == 10_000 && saved[0] > 10_000, "{err}");
    let mapped: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(mapped["mapped"], true, "{mapped}");
    assert_eq!(plain["mapped"], false, "{plain}");
    assert_eq!(mapped["vectors"], 25000, "{mapped}");
    let recall = |r: &Value| r["rows"].as_array().unwrap().iter().map(|x| x["recall@10"].clone()).collect::<Vec<_>>();
    assert_eq!(recall(&mapped), recall(&plain), "{mapped}\n{plain}");
    // Two rows, each a recall (clusters of ~600 near-copies of 40 passages: a hard set, so
    // only its being measured is checked; equality above is the point).
    assert_eq!(recall(&plain).len(), 2, "{plain}");
    assert!(recall(&plain).iter().all(|r| r.as_f64().is_some_and(|x| x > 0.0)), "{plain}");
    // The file it left is the whole index.
    let loaded: Value = serde_json::from_str(&env.ok(&[
        "bench",
        "search",
        "--load",
        dir.to_str().unwrap(),
        "--queries",
        "20",
        "--rows",
        "random:0",
        "--json",
    ]))
    .unwrap();
    assert_eq!(loaded["vectors"], 25000, "{loaded}");
    let bad =
        env.run(&["bench", "search", "--scale", "25000", "--mapped", dir.to_str().unwrap(), "--map-every", "15000"]);
    assert_eq!(bad.status.code(), Some(2), "{}", String::from_utf8_lossy(&bad.stderr));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--map-every 15000"));
}

/// `bench ingest` times small writes into the store and leaves it as it found it: each
/// write is found by the first searches after it and gone after its delete (the command
/// fails otherwise), and the store holds the same chunks at the end.
#[test]
fn bench_ingest_times_small_writes_and_leaves_the_store_as_it_was() {
    let env = Env::new();
    let path = corpus(&env, 40);
    env.ok(&["ingest", path.to_str().unwrap()]);
    let before = env.ok(&["documents", "list"]);
    let out = env.ok(&["bench", "ingest", "--repeats", "3", "--chunks", "2", "--json"]);
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((r["repeats"].as_u64(), r["chunks"].as_u64()), (Some(3), Some(2)), "{r}");
    assert!(r["store_chunks"].as_u64().is_some_and(|n| n >= 40), "{r}");
    for field in ["ingest_ms", "first_search_ms", "first_lexical_ms", "delete_ms", "lexical_after_delete_ms"] {
        assert!(r[field]["p50"].as_f64().is_some_and(|ms| ms > 0.0), "{field}: {r}");
    }
    assert_eq!(env.ok(&["documents", "list"]), before, "the store is left as it was");
}
