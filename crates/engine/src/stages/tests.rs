//! Each stage's logic on its own, and whole turns through [`STAGES`],, over the in-memory store and a
//! deterministic bag-of-words embedder: no model, no files but a session store's.

use super::*;
use ragctx_core::{Chunk, EmbeddedChunk, Memory, Mode, QuantizedVector, TurnRecord};

/// The stages after the search: rerank, diversity, held slots, forget, compress.
mod after_search;

const DIM: usize = 64;

/// Words hashed into 64 dimensions, counted, normalised: texts that share words are close.
struct Words;

impl Embedder for Words {
    fn dimension(&self) -> usize {
        DIM
    }
    fn model_id(&self) -> &str {
        "test-words"
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|t| words(t)).collect())
    }
}

fn words(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; DIM];
    for w in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        v[(ragctx_core::fx_hash(&w.to_lowercase()) % DIM as u64) as usize] += 1.0;
    }
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    v.iter().map(|x| x / n).collect()
}

fn chunk(id: &str, doc: &str, text: &str) -> EmbeddedChunk {
    EmbeddedChunk { chunk: Chunk::new(id, doc, doc, text), vector: words(text), sentences: None }
}

/// An engine over six chunks of four documents.
fn engine(dir: &tempfile::TempDir) -> Engine {
    let vectors = ragctx_store::MemoryVectorStore::new(DIM, ragctx_index::IndexParams::default());
    vectors
        .upsert(&[
            chunk("cactus#0", "cactus", "cactus water dry soil weeks"),
            chunk("cactus#1", "cactus", "cactus light sun window"),
            chunk("fern#0", "fern", "fern water moist soil twice week"),
            chunk("fern#1", "fern", "fern humidity bathroom shade"),
            chunk("orchid#0", "orchid", "orchid water ice cubes week"),
            chunk("bike#0", "bike", "bicycle chain oil kilometres"),
        ])
        .unwrap();
    let data = ragctx_store::DataDir::open(dir.path(), DIM).unwrap();
    Engine {
        query_weights: QueryWeights::HAND_SET,
        ..Engine::new(
            Arc::new(vectors),
            Arc::new(data.session_store()),
            Arc::new(Words),
            Arc::new(ragctx_models::Cl100kCounter::new()),
            Arc::new(ragctx_models::ExtractiveGenerator::default()),
        )
    }
}

fn record(turn: u64, question: &str, intent: Intent, shown: &[&str], pointed: &[&str]) -> TurnRecord {
    let doc = |c: &&str| DocumentId::from(c.split('#').next().unwrap());
    TurnRecord {
        turn,
        question: question.into(),
        intent,
        shown_chunks: shown.iter().map(|&c| c.into()).collect(),
        shown_documents: shown.iter().map(doc).fold(Vec::new(), |mut v, d| {
            if !v.contains(&d) {
                v.push(d)
            }
            v
        }),
        cited_chunks: shown.iter().take(1).map(|&c| c.into()).collect(),
        cited_documents: shown.iter().take(1).map(doc).collect(),
        at_unix_ms: 0,
        answer: format!("about {question}"),
        query_vector: Some(QuantizedVector::quantize(&words(question))),
        pointed_chunks: pointed.iter().map(|&c| c.into()).collect(),
        forgotten: vec![],
    }
}

fn state(turns: Vec<TurnRecord>) -> SessionState {
    SessionState { turn_count: turns.len() as u64, turns, ..Default::default() }
}

fn ids(hits: &[Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.chunk.id.as_str()).collect()
}

#[test]
fn intent_is_forced_by_mode_or_classified() {
    let s = TurnSettings::default();
    let empty = state(vec![]);
    let one = state(vec![record(1, "cactus water", Intent::New, &["cactus#0"], &[])]);
    assert_eq!(intent_of(&empty, "show me that again", &s), Intent::New, "nothing to show again");
    assert_eq!(intent_of(&one, "show me that again", &s), Intent::Reshow);
    let forced = TurnSettings { mode: Mode::FollowUp, ..s };
    assert_eq!(intent_of(&empty, "show me that again", &forced), Intent::FollowUp);
}

#[test]
fn the_working_set_is_the_window_and_a_reshow_excludes_nothing() {
    let st = state(vec![
        record(1, "cactus", Intent::New, &["cactus#0", "cactus#1"], &[]),
        record(2, "fern", Intent::New, &["fern#0", "cactus#1"], &[]),
    ]);
    let s = TurnSettings::default();
    let w = working_set(&st, Intent::New, &s, None);
    assert_eq!(w.exclusion.chunks.len(), 3);
    assert_eq!(w.first_shown.get(&ChunkId::from("cactus#1")), Some(&1), "the turn that first showed it");
    let w = working_set(&st, Intent::New, &TurnSettings { window: 1, ..s.clone() }, None);
    assert_eq!((w.exclusion.chunks.len(), w.first_shown.len()), (2, 2), "the last turn only");
    assert!(working_set(&st, Intent::Reshow, &s, None).exclusion.is_empty());
    let none = TurnSettings { strategy: Strategy::None, ..s.clone() };
    assert!(working_set(&st, Intent::New, &none, None).exclusion.is_empty());
    // A replay's recorded exclusion replaces the session's.
    let mut given = ExclusionSet::default();
    given.chunks.insert("bike#0".into());
    let w = working_set(&st, Intent::New, &s, Some(given.clone()));
    assert_eq!(w.exclusion, given);
}

#[test]
fn earlier_questions_mix_in_by_the_conversation_query_setting() {
    let st = state(vec![
        record(1, "cactus", Intent::New, &["cactus#0"], &[]),
        record(2, "again", Intent::Reshow, &["cactus#0"], &[]),
        record(3, "fern", Intent::New, &["fern#0"], &[]),
        record(4, "orchid", Intent::New, &["orchid#0"], &[]),
    ]);
    let s = TurnSettings::default();
    let newest_first = earlier_vectors(&st, Intent::New, &s, DIM);
    assert_eq!(newest_first.len(), 2, "two at most");
    assert!(newest_first[0].iter().zip(&words("orchid")).all(|(a, b)| (a - b).abs() < 0.02), "newest first");
    let off = TurnSettings { conversation_query: ConversationQuery::Off, ..s.clone() };
    assert!(earlier_vectors(&st, Intent::New, &off, DIM).is_empty());
    let follow = TurnSettings { conversation_query: ConversationQuery::FollowUp, ..s.clone() };
    assert!(earlier_vectors(&st, Intent::New, &follow, DIM).is_empty());
    assert_eq!(earlier_vectors(&st, Intent::FollowUp, &follow, DIM).len(), 2);
    assert!(earlier_vectors(&st, Intent::Reshow, &s, DIM).is_empty(), "a reshow searches nothing");
    let window = TurnSettings { window: 3, ..s.clone() };
    assert_eq!(earlier_vectors(&st, Intent::New, &window, DIM).len(), 2, "reshows skipped, not counted");
    assert!(earlier_vectors(&st, Intent::New, &s, DIM + 1).is_empty(), "another model's vectors are not mixed");
}

#[test]
fn a_reshow_queries_with_the_question_it_shows_again() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(&dir);
    let st = state(vec![
        record(1, "cactus water", Intent::New, &["cactus#0"], &[]),
        record(2, "again", Intent::Reshow, &["cactus#0"], &[]),
    ]);
    let q = e.query(&st, Intent::Reshow, "show it again", &TurnSettings::default()).unwrap();
    assert_eq!((q.text.as_str(), q.reshown_question.as_deref(), q.mixed), ("cactus water", Some("cactus water"), 0));
    let q = e.query(&st, Intent::New, "fern water", &TurnSettings::default()).unwrap();
    assert_eq!((q.text.as_str(), q.reshown_question, q.mixed), ("fern water", None, 1));
    assert_eq!(q.own_vector, words("fern water"));
    // By hand: the question's vector plus a quarter of the one before it (the hand-set mix,
    // 1 : ¼), normalised.
    let earlier = st.turns[0].query_vector.as_ref().unwrap().dequantize();
    let sum: Vec<f32> = words("fern water").iter().zip(&earlier).map(|(a, b)| a + 0.25 * b).collect();
    let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
    let by_hand: Vec<f32> = sum.iter().map(|x| x / norm).collect();
    assert!(q.vector.iter().zip(&by_hand).all(|(a, b)| (a - b).abs() < 1e-6), "{:?} vs {by_hand:?}", q.vector);
}

#[test]
fn candidates_exclude_inside_the_search_and_a_reshow_fetches_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(&dir);
    let st = state(vec![record(1, "cactus water", Intent::New, &["cactus#0", "fern#0"], &["orchid#0"])]);
    let s = TurnSettings { limit: 4, ..TurnSettings::default() };
    let w = working_set(&st, Intent::New, &s, None);
    let q = e.query(&st, Intent::New, "water soil", &s).unwrap();
    let c = e.candidates(&st, Intent::New, &q, &w, None, &s).unwrap();
    assert!(!ids(&c.hits).contains(&"cactus#0") && !ids(&c.hits).contains(&"fern#0"), "{:?}", ids(&c.hits));
    assert!(c.quotas.is_empty() && c.rounds >= 1);
    // A follow-up: the documents just shown may take one more chunk.
    let c = e.candidates(&st, Intent::FollowUp, &q, &w, None, &s).unwrap();
    assert_eq!(c.quotas.get(&DocumentId::from("cactus")), Some(&(s.group_size + 1)));
    // A reshow: the last turn's chunks by id, pointed ones first, no search.
    let w = working_set(&st, Intent::Reshow, &s, None);
    let q = e.query(&st, Intent::Reshow, "again", &s).unwrap();
    let c = e.candidates(&st, Intent::Reshow, &q, &w, None, &s).unwrap();
    let mut got = ids(&c.hits);
    got.sort();
    assert_eq!(got, ["cactus#0", "fern#0", "orchid#0"]);
    assert_eq!((c.path, c.rounds), (SearchPath::Exact, 0));
    assert_eq!(c.previous, [DocumentId::from("orchid"), "cactus".into(), "fern".into()]);
}

#[test]
fn the_working_set_is_carried_in_engine_memory_and_pointed_to_in_client_memory() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(&dir);
    let st = state(vec![record(1, "cactus water", Intent::New, &["cactus#0", "bike#0"], &[])]);
    // Two candidates: the weaker of them is the floor a working-set chunk must reach.
    let s = TurnSettings { limit: 2, ..TurnSettings::default() };
    let w = working_set(&st, Intent::New, &s, None);
    let q = e.query(&st, Intent::New, "cactus water soil", &s).unwrap();
    let c = e.candidates(&st, Intent::New, &q, &w, None, &s).unwrap();
    let floor = c.hits.iter().map(|h| h.score).fold(f32::INFINITY, f32::min);
    let scored = |ids: &[ChunkId]| e.scored(&q.vector, ids, &Filter::All);
    let r = rank_working_set(Intent::New, &w, c.hits.clone(), scored, &s).unwrap();
    let carried: Vec<&Hit> = r.hits.iter().filter(|h| w.first_shown.contains_key(&h.chunk.id)).collect();
    assert_eq!(carried.len(), 1, "the cactus chunk ranks, the bicycle chunk does not");
    assert!(carried[0].chunk.id.as_str() == "cactus#0" && carried[0].score >= floor);
    assert!(r.pointers.is_empty());
    let client = TurnSettings { memory: Memory::Client, ..s.clone() };
    let r = rank_working_set(Intent::New, &w, c.hits.clone(), scored, &client).unwrap();
    assert_eq!(r.hits.len(), c.hits.len(), "nothing carried");
    assert_eq!(r.pointers.len(), 1);
    assert_eq!((r.pointers[0].document_id.as_str(), r.pointers[0].shown_in_turn), ("cactus", 1));
    // What fails the turn's filter is neither carried nor pointed to.
    let filtered = |ids: &[ChunkId]| e.scored(&q.vector, ids, &Filter::parse(r#"{"document_id": "fern"}"#)?);
    assert!(rank_working_set(Intent::New, &w, c.hits.clone(), filtered, &client).unwrap().pointers.is_empty());
    // A reshow scores no working set.
    let r = rank_working_set(Intent::Reshow, &w, c.hits.clone(), |_| unreachable!(), &s).unwrap();
    assert_eq!(r.hits.len(), c.hits.len());
}

#[test]
fn dedupe_marks_carried_blocks_and_keeps_a_reshows_order() {
    let hit = |id: &str, doc: &str, score: f32| Hit { chunk: chunk(id, doc, id).chunk, score };
    let first_shown: HashMap<ChunkId, u64> = [("cactus#0".into(), 2)].into_iter().collect();
    let hits = vec![hit("cactus#0", "cactus", 0.9), hit("fern#0", "fern", 0.8)];
    let s = TurnSettings::default();
    let d = dedupe_stage(Intent::New, hits.clone(), (HashMap::new(), &[]), &first_shown, &s);
    let carried: Vec<Option<u64>> = d.fragments.iter().map(|f| f.carried_from).collect();
    assert_eq!(carried, [Some(2), None]);
    let client = TurnSettings { memory: Memory::Client, ..s.clone() };
    let d = dedupe_stage(Intent::New, hits.clone(), (HashMap::new(), &[]), &first_shown, &client);
    assert!(d.fragments.iter().all(|f| f.carried_from.is_none()), "client memory marks nothing");
    let previous: [DocumentId; 2] = ["fern".into(), "cactus".into()];
    let d = dedupe_stage(Intent::Reshow, hits, (HashMap::new(), &previous), &first_shown, &s);
    let order: Vec<&str> = d.fragments.iter().map(|f| f.document_id.as_str()).collect();
    assert_eq!(order, ["fern", "cactus"], "the earlier prompt's order, not the scores'");
}

#[test]
fn the_prompt_fits_the_budget_with_the_conversation_counted_first() {
    let counter = ragctx_models::Cl100kCounter::new();
    let st = state(vec![record(1, "cactus water", Intent::New, &["cactus#0"], &[])]);
    let long = "water ".repeat(300);
    let fragments: Vec<dedupe::Fragment> = [("cactus#0", "cactus", long.as_str()), ("fern#0", "fern", "fern water")]
        .iter()
        .map(|(id, doc, text)| dedupe::Fragment::of(Hit { chunk: chunk(id, doc, text).chunk, score: 0.5 }))
        .collect();
    let s = TurnSettings { budget: 200, ..TurnSettings::default() };
    let b = build_prompt(&st, "And ferns?", &fragments, &[], None, &s, &counter);
    assert!(b.conversation.contains("cactus water") && b.conversation_tokens > 0);
    assert!(b.context.tokens + b.conversation_tokens <= s.budget);
    assert_eq!(b.context.dropped_by_budget, [DocumentId::from("cactus")], "dropped whole, listed");
    assert_eq!(b.context.blocks.len(), 1);
    assert!(b.prompt_tokens >= b.context.tokens + b.conversation_tokens, "the prompt holds both, and the question");
    let client = TurnSettings { memory: Memory::Client, ..s.clone() };
    let b = build_prompt(&st, "And ferns?", &fragments, &[], None, &client, &counter);
    assert_eq!((b.conversation.as_str(), b.conversation_tokens), ("", 0), "the caller keeps the conversation");
    // A conversation given by the caller replaces the session's.
    let given = [Utterance::user("What about orchids?")];
    let b = build_prompt(&st, "And ferns?", &fragments, &[], Some(&given), &s, &counter);
    assert!(b.conversation.contains("orchids") && !b.conversation.contains("cactus water"));
}

/// A generator that takes its time: the deadline passes after the turn was planned and
/// before it commits.
struct Slow(std::time::Duration);

impl ragctx_core::Generator for Slow {
    fn name(&self) -> &str {
        "slow test double"
    }
    fn generate(&self, _: &ragctx_core::GenerationRequest<'_>) -> Result<String> {
        std::thread::sleep(self.0);
        Ok("Water ferns twice a week [1].".into())
    }
}

/// The check before the commit (`plan_and_commit`): a turn whose deadline passes between
/// planning and commit is refused and nothing of it is recorded; the same turn with time to
/// spare is recorded.
#[test]
fn a_turn_whose_deadline_passes_before_its_commit_is_not_recorded() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let e = Engine { generator: Arc::new(Slow(Duration::from_millis(400))), ..engine(&dir) };
    let s = TurnSettings::default();
    let session = ragctx_core::SessionId::parse("late").unwrap();
    let started = Instant::now();
    let err = e.run(TurnInput::new(&session, "fern water", &s).deadline(started + Duration::from_millis(150)));
    let err = err.expect_err("past the deadline");
    assert!(started.elapsed() >= Duration::from_millis(400), "the turn was planned and generated before it gave up");
    assert_eq!(err.kind(), ragctx_core::ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("the turn was not recorded"), "{err}");
    assert!(e.sessions.load(&session).unwrap().is_none_or(|st| st.turns.is_empty()), "nothing committed");
    assert!(e.sessions.traces(&session).unwrap().is_empty(), "no trace");
    let t = e.run(TurnInput::new(&session, "fern water", &s).deadline(Instant::now() + Duration::from_secs(30)));
    assert_eq!(t.unwrap().turn, 1, "with time to spare the same turn is the session's first");
}

#[test]
fn the_floor_holds_back_blocks_far_below_the_best_and_never_a_reshow() {
    let fragments = || -> Vec<dedupe::Fragment> {
        [("a", 0.9), ("b", 0.75), ("c", 0.7), ("b", 0.5), ("d", 0.4)]
            .iter()
            .enumerate()
            .map(|(i, &(doc, score))| {
                dedupe::Fragment::of(Hit { chunk: chunk(&format!("{doc}{i}"), doc, "text").chunk, score })
            })
            .collect()
    };
    let docs = |f: &[dedupe::Fragment]| f.iter().map(|f| f.document_id.as_str().to_owned()).collect::<Vec<_>>();
    let settings = TurnSettings { relevance_floor: 0.8, ..TurnSettings::default() };
    let mut f = fragments();
    let held = floor_stage(Intent::New, &mut f, &[], &settings);
    // 0.8 × 0.9 = 0.72: "c" (0.70) and "d" (0.40) stay out; "b" keeps its better block.
    assert_eq!(docs(&f), ["a", "b"]);
    assert_eq!(held, [DocumentId::from("c"), DocumentId::from("d")], "held back in rank order, b not listed");
    let mut f = fragments();
    assert!(floor_stage(Intent::Reshow, &mut f, &[], &settings).is_empty());
    assert_eq!(f.len(), 5, "a reshow shows again all it showed");
    let mut f = fragments();
    let off = TurnSettings { relevance_floor: 0.0, ..settings.clone() };
    assert!(floor_stage(Intent::FollowUp, &mut f, &[], &off).is_empty());
    assert_eq!(f.len(), 5, "0 is off");
    // A pointer that ranks above every new block (client memory) raises the floor: 0.8 × 1.0.
    let pointer = context::PointerCandidate {
        document_id: "z".into(),
        title: "z".into(),
        metadata: Default::default(),
        chunk_ids: vec!["z#0".into()],
        shown_in_turn: 1,
        score: 1.0,
    };
    let mut f = fragments();
    let held = floor_stage(Intent::New, &mut f, &[pointer], &settings);
    assert_eq!(docs(&f), ["a"], "0.8 × 1.0: only a (0.9) stays");
    assert_eq!(held.len(), 3, "{held:?}");
}

#[test]
fn the_shipped_query_weights_parse_and_the_hand_set_mix_is_the_old_one() {
    let fitted = QueryWeights::fitted();
    assert!(fitted.earlier.iter().chain([&fitted.working_set]).all(|w| (0.0..=4.0).contains(w)));
    assert_eq!(QueryWeights::HAND_SET, QueryWeights { earlier: [0.25, 0.125], working_set: 0.0 });
    assert!(QueryWeights::parse(r#"{"weights": {"earlier": [0.5, 9], "working_set": 0}}"#)
        .unwrap_err()
        .to_string()
        .contains("between 0 and 4"));
    assert!(QueryWeights::parse("{}").unwrap_err().to_string().contains("query weights"));
}

#[test]
fn a_working_set_weight_pulls_the_query_toward_what_the_last_turn_showed() {
    let q = words("fern water");
    let earlier = vec![words("orchid")];
    let centroid = words("bicycle chain");
    let none = QueryWeights { earlier: [0.25, 0.125], working_set: 0.0 };
    // Without a working-set weight it is the old mix, exactly.
    assert_eq!(compose_query(&q, &earlier, Some(&centroid), &none), mix_vectors(&q, &earlier, &MIX_WEIGHTS));
    let some = QueryWeights { working_set: 0.5, ..none };
    let v = compose_query(&q, &earlier, Some(&centroid), &some);
    let cos = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    assert!((cos(&v, &v) - 1.0).abs() < 1e-5, "normalised");
    assert!(cos(&v, &centroid) > cos(&mix_vectors(&q, &earlier, &MIX_WEIGHTS), &centroid));
    assert_eq!(compose_query(&q, &[], None, &some), q, "nothing to mix: the question alone");
}

#[test]
fn the_centroid_is_the_previous_turns_shown_chunks_and_only_when_the_query_mixes() {
    let mut state = SessionState::default();
    state.turns.push(record(1, "bikes", Intent::New, &["bike#0"], &[]));
    state.turns.push(record(2, "again", Intent::Reshow, &["fern#0"], &[]));
    let w = QueryWeights { earlier: [0.0, 0.0], working_set: 1.0 };
    let vectors = |ids: &[ChunkId]| -> Result<Vec<Option<Vec<f32>>>> {
        assert_eq!(ids, [ChunkId::from("bike#0")], "the last turn that was not a reshow");
        Ok(vec![Some(vec![3.0, 4.0])])
    };
    let s = TurnSettings::default();
    let c = working_centroid(&state, Intent::FollowUp, &s, &w, vectors, 2).unwrap();
    assert_eq!(c, Some(vec![0.6, 0.8]));
    let off = TurnSettings { conversation_query: ConversationQuery::Off, ..s.clone() };
    assert_eq!(working_centroid(&state, Intent::FollowUp, &off, &w, |_| unreachable!(), 2).unwrap(), None);
    assert_eq!(working_centroid(&state, Intent::Reshow, &s, &w, |_| unreachable!(), 2).unwrap(), None);
    assert_eq!(
        working_centroid(&state, Intent::New, &s, &QueryWeights::HAND_SET, |_| unreachable!(), 2).unwrap(),
        None
    );
}

#[test]
fn engaged_documents_lift_their_unshown_chunks_for_a_follow_up_only() {
    let mut state = SessionState::default();
    state.turns.push(record(1, "ferns", Intent::New, &["fern#0"], &[]));
    let settings = TurnSettings { engaged_prior: 0.1, ..TurnSettings::default() };
    let working = working_set(&state, Intent::FollowUp, &settings, None);
    let hits = || {
        vec![
            Hit { chunk: chunk("orchid#0", "orchid", "x").chunk, score: 0.5 },
            Hit { chunk: chunk("fern#1", "fern", "x").chunk, score: 0.45 },
            Hit { chunk: chunk("fern#0", "fern", "x").chunk, score: 0.4 },
        ]
    };
    let mut h = hits();
    assert_eq!(engaged_stage(&state, Intent::FollowUp, &working, &mut h, &settings), 1);
    assert!((h[1].score - 0.55).abs() < 1e-6, "an unshown chunk of a shown document gains the prior");
    assert_eq!(h[2].score, 0.4, "a chunk shown before is the working set's, not lifted");
    assert_eq!(h[0].score, 0.5);
    let mut h = hits();
    assert_eq!(engaged_stage(&state, Intent::New, &working, &mut h, &settings), 0, "a new question is not a follow-up");
    let off = TurnSettings { engaged_prior: 0.0, ..settings };
    assert_eq!(engaged_stage(&state, Intent::FollowUp, &working, &mut hits(), &off), 0);
}
