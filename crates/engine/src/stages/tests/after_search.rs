//! The stages after the search through whole turns: rerank, diversity, held slots, forget,
//! compress.

use super::*;

/// A test double of a reranker, in process (the HTTP client has its own tests against the
/// wire shapes): scores a passage by the question words it holds, or fails.
struct WordReranker {
    fails: bool,
}

impl ragctx_core::Reranker for WordReranker {
    fn name(&self) -> &str {
        "test-words-reranker"
    }
    fn rerank(&self, query: &str, texts: &[&str]) -> Result<Vec<f32>> {
        if self.fails {
            return Err(Error::Unavailable { backend: "reranker".into(), message: "down on purpose".into() });
        }
        let q: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        // "bicycle" counts ten times: the double prefers what the search ranks last.
        Ok(texts
            .iter()
            .map(|t| {
                let t = t.to_lowercase();
                q.iter().filter(|w| t.contains(w.as_str())).count() as f32
                    + if t.contains("bicycle") { 10.0 } else { 0.0 }
            })
            .collect())
    }
}

fn block_ids(t: &Trace) -> Vec<String> {
    t.context.iter().flat_map(|b| b.chunk_ids.iter().map(|c| c.as_str().to_owned())).collect()
}

#[test]
fn the_reranker_orders_the_candidates_and_a_failing_one_never_fails_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let base = engine(&dir);
    let plain = TurnSettings { relevance_floor: 0.0, ..TurnSettings::default() };
    let session = |n: &str| ragctx_core::SessionId::parse(n).unwrap();
    let before = base.ask(&session("plain"), "fern water soil", &plain).unwrap();
    assert!(before.trace.reranked.is_none() && !before.trace.timings_ms.contains_key("rerank"), "off: no trace");
    let reranked = TurnSettings { rerank: ragctx_core::Rerank::Remote, ..plain.clone() };
    // Without a reranker the setting is a caller's mistake, said before anything is recorded.
    let e = base.ask(&session("none"), "fern water soil", &reranked).unwrap_err();
    assert_eq!(e.kind(), ragctx_core::ErrorKind::BadInput, "{e}");
    assert!(e.to_string().contains("rerank_url"), "{e}");

    let e2 = Engine { reranker: Some(Arc::new(WordReranker { fails: false })), ..base.clone() };
    let t = e2.ask(&session("ranked"), "fern water soil", &reranked).unwrap();
    let r = t.trace.reranked.as_ref().expect("the reranker's record");
    assert_eq!((r.model.as_str(), r.fallback.as_deref()), ("test-words-reranker", None));
    assert_eq!(r.candidates, before.trace.candidates, "every candidate sent (top_n above them)");
    assert!(r.moved > 0, "{r:?}");
    assert_eq!(block_ids(&t)[0], "bike#0", "the reranker's favourite leads the context: {:?}", block_ids(&t));
    assert!(t.trace.timings_ms.contains_key("rerank"));
    // Cosines handed out again down the new order: the context's scores still fall.
    let scores: Vec<f32> = t.context.iter().map(|b| b.score).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");

    let top1 = Engine { rerank_top_n: 1, ..e2.clone() };
    let t1 = top1.ask(&session("top1"), "fern water soil", &reranked).unwrap();
    assert_eq!(t1.trace.reranked.as_ref().unwrap().candidates, 1);
    assert_eq!(block_ids(&t1), block_ids(&before), "one candidate sent: nothing to re-order");

    let down = Engine { reranker: Some(Arc::new(WordReranker { fails: true })), ..base.clone() };
    let t = down.ask(&session("down"), "fern water soil", &reranked).unwrap();
    let r = t.trace.reranked.as_ref().unwrap();
    assert!(r.fallback.as_deref().unwrap().contains("down on purpose"), "{r:?}");
    assert_eq!(r.moved, 0);
    assert_eq!(block_ids(&t), block_ids(&before), "the search's order kept");
}

#[test]
fn diversity_lets_a_different_chunk_ahead_of_a_near_copy_and_is_off_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(&dir);
    e.vectors
        .upsert(&[
            chunk("fern#2", "fern", "fern water moist soil twice week again"),
            chunk("moss#0", "moss", "moss water"),
        ])
        .unwrap();
    let session = |n: &str| ragctx_core::SessionId::parse(n).unwrap();
    let plain = TurnSettings { relevance_floor: 0.0, near_duplicate: 0.0, ..TurnSettings::default() };
    let before = e.ask(&session("plain"), "fern water moist soil", &plain).unwrap();
    assert!(before.trace.diversified.is_none() && !before.trace.timings_ms.contains_key("diversity"));
    let b = block_ids(&before);
    let (copy, other) = (b.iter().position(|c| c == "fern#2").unwrap(), b.iter().position(|c| c == "moss#0").unwrap());
    assert!(copy < other, "by relevance the near-copy comes first: {b:?}");
    let diverse = TurnSettings { diversity: 0.7, ..plain };
    let t = e.ask(&session("diverse"), "fern water moist soil", &diverse).unwrap();
    let d = t.trace.diversified.as_ref().expect("the stage's record");
    assert!(d.moved > 0 && d.candidates >= b.len(), "{d:?}");
    let a = block_ids(&t);
    let (copy, other) = (a.iter().position(|c| c == "fern#2").unwrap(), a.iter().position(|c| c == "moss#0").unwrap());
    assert!(other < copy, "with diversity the different chunk comes first: {a:?}");
    assert!(t.trace.timings_ms.contains_key("diversity"));
}

#[test]
fn held_chunks_keep_their_slots_and_nothing_outside_the_top_limit_stays() {
    let s = TurnSettings { limit: 3, memory: Memory::Client, ..TurnSettings::default() };
    let hit = |id: &str, score: f32| Hit { chunk: chunk(id, &id[..1], "x").chunk, score };
    let pointer = |doc: &str, score: f32| context::PointerCandidate {
        document_id: doc.into(),
        title: doc.into(),
        metadata: Default::default(),
        chunk_ids: vec![format!("{doc}#0").as_str().into()],
        shown_in_turn: 1,
        score,
    };
    // New 0.9, 0.7, 0.5; held 0.8, 0.4: the top 3 are 0.9, 0.8 (held), 0.7.
    let mut hits = vec![hit("a#0", 0.9), hit("b#0", 0.7), hit("c#0", 0.5)];
    let mut pointers = vec![pointer("h", 0.8), pointer("k", 0.4)];
    assert_eq!(keep_slots(&mut hits, &mut pointers, &[0.8, 0.4], &s), 1);
    assert_eq!(ids(&hits), ["a#0", "b#0"]);
    assert_eq!(pointers.len(), 1, "the held chunk below the cut is no pointer either");
    // Nothing held ranks: the deeper search's extras stay.
    let mut hits = vec![hit("a#0", 0.9), hit("b#0", 0.7), hit("c#0", 0.5), hit("d#0", 0.4)];
    assert_eq!(keep_slots(&mut hits, &mut Vec::new(), &[], &s), 0);
    assert_eq!(hits.len(), 4);
}

#[test]
fn forget_lets_a_chunk_come_back_and_a_step_with_nothing_to_forget_is_not_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(&dir);
    let s = TurnSettings { memory: Memory::Client, relevance_floor: 0.0, ..TurnSettings::default() };
    let session = ragctx_core::SessionId::parse("agent").unwrap();
    let nothing = e.forget(&session, None, &s).unwrap();
    assert_eq!((nothing.turn, nothing.trace.forgotten.len()), (0, 0), "an empty session: nothing recorded");
    assert!(e.sessions.traces(&session).unwrap().is_empty());
    let first = e.run(TurnInput::new(&session, "fern water", &s).retrieve_only()).unwrap();
    assert_eq!(first.answer, "", "retrieve-only: no answer");
    let top = first.context[0].chunk_ids[0].clone();
    let again = e.run(TurnInput::new(&session, "fern water", &s).retrieve_only()).unwrap();
    assert!(!block_ids(&again).contains(&top.as_str().to_owned()), "held: not sent again");
    let step = e.forget(&session, Some(vec![top.clone(), "never-held#9".into()]), &s).unwrap();
    assert_eq!(step.trace.forgotten, std::slice::from_ref(&top), "only what the session held is forgotten");
    assert_eq!(step.turn, 3);
    let back = e.run(TurnInput::new(&session, "fern water", &s).retrieve_only()).unwrap();
    assert!(block_ids(&back).contains(&top.as_str().to_owned()), "forgotten: it comes back in full");
    // A follow-up right after a forget step refers to the turn before it, not to the step.
    let state = e.sessions.load(&session).unwrap().unwrap();
    assert_eq!(memory::last_turn(&state).unwrap().turn, 4);
    let replay = e.replay(&session, &step, &[], &s).unwrap_err();
    assert!(replay.to_string().contains("forget step"), "{replay}");
    let bad = TurnInput { reshow: Some(&[]), ..TurnInput::new(&session, "x", &s) };
    assert!(e.run(bad).unwrap_err().to_string().contains("mode reshow"));
}

/// `compress sentences` through a whole turn: the long chunk is cut to the sentences about
/// the question (its cut marked), the trace names it and the tokens freed, citations still
/// name the whole chunk; a reshow shows it whole; with `off` nothing is cut.
#[test]
fn compression_cuts_blocks_to_their_sentences_and_a_reshow_shows_them_whole() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(&dir);
    let long = "Ferns come from damp forests. Their fronds uncurl slowly in spring. Water a fern twice a week \
                so the soil stays moist. Many growers like clay pots. Repotting is rarely needed. \
                Old fronds can be cut at the base.";
    e.vectors.upsert(&[chunk("guide#0", "guide", long)]).unwrap();
    let session = SessionId::parse("c1").unwrap();
    let s = TurnSettings { compress: ragctx_core::Compress::Sentences, ..TurnSettings::default() };
    let t = e.run(TurnInput::new(&session, "How often should I water a fern?", &s)).unwrap();
    let block = t.context.iter().find(|b| b.document_id.as_str() == "guide").expect("the guide is shown");
    assert_eq!(
        block.text,
        "…\nTheir fronds uncurl slowly in spring. Water a fern twice a week so the soil stays moist. Many growers like clay pots.\n…"
    );
    assert_eq!(block.chunk_ids, vec![ChunkId::from("guide#0")], "the block still names its whole chunk");
    let c = t.trace.compressed.as_ref().expect("the trace says what was cut");
    assert!(c.cut.contains(&ChunkId::from("guide#0")) && c.freed_tokens > 10, "{c:?}");
    let again = e.run(TurnInput::new(&session, "show me that again", &s)).unwrap();
    let whole = again.context.iter().find(|b| b.document_id.as_str() == "guide").expect("reshown");
    assert_eq!(whole.text, long, "a reshow shows the block whole");
    assert!(again.trace.compressed.is_none());
    let off = e
        .run(TurnInput::new(
            &SessionId::parse("c2").unwrap(),
            "How often should I water a fern?",
            &TurnSettings::default(),
        ))
        .unwrap();
    assert!(off.context.iter().any(|b| b.text == long) && off.trace.compressed.is_none());
}

/// `compress learned` through a whole turn: a chunk with a sentence index is cut to the
/// sentences the scorer judges to carry the question (here a hand-set scorer on the question's
/// cosine; the shipped one is fitted by `eval fit-sentences`), with their neighbours and the
/// cut marked; a chunk without one stays whole and the trace counts it; a reshow shows whole.
#[test]
fn learned_compression_cuts_judged_blocks_and_keeps_unjudged_ones_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut e = engine(&dir);
    let long = "Ferns come from damp forests. Their fronds uncurl slowly in spring. Stones line the old path. \
                Water a fern twice a week. Many growers like clay pots. Repotting is rarely needed. \
                Old fronds can be cut at the base.";
    let spans = ragctx_core::text::sentence_spans(long);
    let vectors: Vec<Vec<f32>> = spans.iter().map(|&(a, b)| words(&long[a..b])).collect();
    let mut indexed = chunk("guide#0", "guide", long);
    indexed.sentences = Some(ragctx_core::Sentences::new(&spans, &vectors, &[]));
    let bare = "How often should I water a fern? Water a fern often.";
    e.vectors.upsert(&[indexed, chunk("bare#0", "bare", bare)]).unwrap();
    let mut weights = vec![0.0; crate::sentences::N];
    weights[0] = 20.0;
    e.sentence_scorer = Arc::new(crate::sentences::Scorer {
        features: crate::sentences::FEATURES.iter().map(|f| f.to_string()).collect(),
        mean: vec![0.0; crate::sentences::N],
        scale: vec![1.0; crate::sentences::N],
        weights,
        bias: -8.0,
        threshold: 0.5,
        neighbours: 1,
    });
    let session = SessionId::parse("l1").unwrap();
    // No floor: both chunks reach the context whatever their cosines.
    let s = TurnSettings { compress: ragctx_core::Compress::Learned, relevance_floor: 0.0, ..TurnSettings::default() };
    let t = e.run(TurnInput::new(&session, "How often should I water a fern?", &s)).unwrap();
    let block = t.context.iter().find(|b| b.document_id.as_str() == "guide").expect("the guide is shown");
    assert_eq!(block.text, "…\nStones line the old path. Water a fern twice a week. Many growers like clay pots.\n…");
    let whole = t.context.iter().find(|b| b.document_id.as_str() == "bare").expect("the bare chunk is shown");
    assert_eq!(whole.text, bare, "no sentence index: kept whole");
    let c = t.trace.compressed.as_ref().expect("the trace says what was cut");
    assert_eq!(c.cut, vec![ChunkId::from("guide#0")]);
    // The fixture's other chunks have no index either: every candidate but the guide.
    assert_eq!((c.kept_sentences, c.cut_sentences), (3, 4), "{c:?}");
    assert_eq!(c.whole_unjudged, t.trace.candidates - 1, "{c:?}");
    assert!(c.freed_tokens > 10, "{c:?}");
    let again = e.run(TurnInput::new(&session, "show me that again", &s)).unwrap();
    let shown = again.context.iter().find(|b| b.document_id.as_str() == "guide").expect("reshown");
    assert_eq!(shown.text, long, "a reshow shows the block whole");
}
