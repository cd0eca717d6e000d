//! The prompt's token count is the sum of its pieces' counts (so the engine counts each
//! block once): checked with cl100k_base on real MTRAG passages (every passage of the
//! slice in `tests/fixtures/mtrag`, cut by `scripts/make-fixtures`) and odd texts.

use ragctx_core::{ContextBlock, TokenCounter};
use ragctx_engine::context::Prompt;
use ragctx_models::Cl100kCounter;

/// Every passage of the MTRAG slice of `domain` (`tests/fixtures/mtrag/corpus_DOMAIN.jsonl`).
fn slice(domain: &str) -> Vec<serde_json::Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../../tests/fixtures/mtrag/corpus_{domain}.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The slice's domains: IBM Cloud documentation first, then government pages (56 and 320
/// passages, see `tests/fixtures/README.md`).
const DOMAINS: [&str; 2] = ["cloud", "govt"];

fn block(counter: &Cl100kCounter, marker: u32, title: &str, doc: &str, text: &str) -> ContextBlock {
    let mut b = ContextBlock {
        marker,
        document_id: doc.into(),
        title: title.into(),
        chunk_ids: vec![],
        tokens: 0,
        score: 0.0,
        carried_from: None,
        text: text.into(),
        metadata: Default::default(),
        continued: false,
    };
    b.tokens = counter.count(&b.render());
    b
}

#[test]
fn prompt_count_is_additive_over_blocks() {
    let counter = Cl100kCounter::new();
    let passages: Vec<serde_json::Value> = DOMAINS.into_iter().flat_map(slice).collect();
    let odd = [
        "ends with spaces   ",
        "ends with newline\n",
        "\n\nstarts with blank lines",
        "中文结尾。",
        "[3] looks like a marker",
        " ",
    ];
    let mut checked = 0;
    for (i, group) in passages.chunks(6).enumerate() {
        let mut blocks: Vec<ContextBlock> = group
            .iter()
            .enumerate()
            .map(|(j, p)| {
                block(
                    &counter,
                    j as u32 + 1,
                    p["title"].as_str().unwrap(),
                    p["document_id"].as_str().unwrap(),
                    p["text"].as_str().unwrap(),
                )
            })
            .collect();
        blocks.push(block(&counter, 99, "odd", "odd \"id\"", odd[i % odd.len()]));
        if i % 4 == 1 {
            // A carried block's header names the turn that first showed it.
            blocks[1].carried_from = Some(2);
            blocks[1].tokens = counter.count(&blocks[1].render());
        }
        if i % 3 == 2 {
            // A block under its document's earlier block: headed `…` and what is its own.
            blocks[2].continued = true;
            blocks[2].carried_from = (i % 2 == 0).then_some(3);
            blocks[2].tokens = counter.count(&blocks[2].render());
        }
        let question = if i % 2 == 0 { "What is IBM Cloud?" } else { "  再给我看看刚才那个\n" };
        let conversation = if i % 3 == 0 {
            format!("User: {}\nAssistant: {} [1]\n", odd[i % 6], blocks[0].text)
        } else {
            String::new()
        };
        let pointers = if i % 5 == 0 {
            vec![ragctx_core::Pointer {
                marker: 7,
                document_id: "p \"7\"".into(),
                title: blocks[0].title.clone(),
                chunk_ids: vec![],
                shown_in_turn: 1,
                score: 0.5,
                tokens: 0,
                metadata: Default::default(),
            }]
        } else {
            vec![]
        };
        let prompt = Prompt { question, conversation: &conversation, pointers: &pointers, blocks: &blocks };
        let whole = counter.count(&prompt.render());
        assert_eq!(prompt.tokens(&counter), whole, "group {i}");
        checked += 1;
    }
    assert_eq!(checked, passages.len().div_ceil(6));
    assert!(checked >= 60, "{checked} prompts");
}

#[test]
fn block_count_from_ingest_time_text_count_is_exact() {
    use ragctx_core::Chunk;
    use ragctx_engine::context::block_tokens;
    use ragctx_engine::dedupe::Fragment;
    let counter = Cl100kCounter::new();
    let mut checked = 0;
    let mut total = 0;
    for domain in DOMAINS {
        let passages = slice(domain);
        total += passages.len();
        for (i, p) in passages.iter().enumerate() {
            let body = p["text"].as_str().unwrap();
            let chunk = Chunk {
                id: p["_id"].as_str().unwrap().into(),
                document_id: p["document_id"].as_str().unwrap().into(),
                title: p["title"].as_str().unwrap().into(),
                text: body.into(),
                ordinal: None,
                start: None,
                end: None,
                weight: 1.0,
                tokens: ragctx_engine::ingest::text_tokens(&counter, body),
                metadata: Default::default(),
            };
            let f = Fragment {
                document_id: chunk.document_id.clone(),
                title: chunk.title.clone(),
                text: body.into(),
                score: 0.5,
                chunks: vec![chunk],
                carried_from: (i % 3 == 0).then_some(i as u64),
                freed: 0,
            };
            let b = ContextBlock {
                marker: i as u32 + 1,
                document_id: f.document_id.clone(),
                title: f.title.clone(),
                chunk_ids: vec![],
                tokens: 0,
                score: 0.5,
                carried_from: f.carried_from,
                text: body.into(),
                metadata: Default::default(),
                continued: i % 4 == 1,
            };
            assert_eq!(block_tokens(&b, &f, &counter), counter.count(&b.render()), "{domain} passage {i}");
            checked += 1;
        }
    }
    assert_eq!(checked, total);
    assert!(checked >= 370, "{checked} passages");
}
