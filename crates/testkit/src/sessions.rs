use ragctx_core::{
    EffectiveSettings, Intent, Retention, SessionId, SessionStore, Trace, TraceStats, TurnCommit, TurnRecord,
};
use std::collections::HashSet;
use std::sync::Arc;

/// A turn commit showing `docs` (one chunk `doc#0` each), with markers 1, 2, ...
pub fn sample_commit(question: &str, docs: &[&str]) -> TurnCommit {
    let markers: Vec<(&str, u32)> = docs.iter().enumerate().map(|(i, &d)| (d, i as u32 + 1)).collect();
    commit(question, docs, &markers)
}

fn commit(question: &str, docs: &[&str], markers: &[(&str, u32)]) -> TurnCommit {
    let record = TurnRecord {
        turn: 0,
        question: question.into(),
        intent: Intent::New,
        shown_chunks: docs.iter().map(|d| format!("{d}#0").into()).collect(),
        shown_documents: docs.iter().map(|&d| d.into()).collect(),
        cited_chunks: vec![],
        cited_documents: vec![],
        at_unix_ms: 0,
        answer: format!("answer to {question}"),
        query_vector: Some(ragctx_core::QuantizedVector::quantize(&[0.5, -0.25, 0.0])),
        pointed_chunks: vec![format!("{question}-pointed").into()],
        forgotten: vec![],
    };
    let trace = Trace {
        session_id: String::new(),
        turn: 0,
        question: question.into(),
        query: question.into(),
        answer: String::new(),
        citations: vec![],
        context: vec![],
        pointers: vec![],
        query_vector: None,
        exclusion: Default::default(),
        invalid_markers: vec![],
        at_unix_ms: 0,
        trace: TraceStats {
            candidates: docs.len(),
            unique_documents: docs.len(),
            context_fragments: docs.len(),
            memory: Default::default(),
            search_rounds: 1,
            ..TraceStats::starting(EffectiveSettings {
                turn: ragctx_core::TurnSettings {
                    strategy: ragctx_core::Strategy::Full,
                    granularity: ragctx_core::Granularity::Document,
                    group_size: 1,
                    group_margin: 0.0,
                    conversation_query: ragctx_core::ConversationQuery::Off,
                    ..Default::default()
                },
                tokenizer: "cl100k_base".into(),
            })
        },
    };
    TurnCommit { read_version: 0, record, new_markers: markers.iter().map(|&(d, m)| (d.into(), m)).collect(), trace }
}

/// Commits `c` against the session's current version (as a turn that just loaded it).
fn commit_now(
    store: &dyn SessionStore,
    id: &SessionId,
    mut c: TurnCommit,
    retention: Retention,
) -> ragctx_core::Result<u64> {
    c.read_version = store.load(id)?.map_or(0, |s| s.version);
    store.commit_turn(id, c, retention)
}

/// Runs every session-store check. `prefix` keeps sessions of one run apart (shared servers).
pub fn session_store_conformance(store: Arc<dyn SessionStore>, prefix: &str) {
    let id = SessionId::parse(&format!("{prefix}basic")).unwrap();
    store.delete(&id).unwrap();
    assert!(store.load(&id).unwrap().is_none(), "unknown session loads as None");
    assert!(store.traces(&id).unwrap().is_empty());
    let keep_two = Retention { window: 2, ttl_secs: 3600 };
    let st = store.as_ref();
    assert_eq!(commit_now(st, &id, commit("q1", &["a"], &[("a", 1)]), keep_two).unwrap(), 1);
    assert_eq!(commit_now(st, &id, commit("q2", &["b \"q\" [x]"], &[("b \"q\" [x]", 2)]), keep_two).unwrap(), 2);
    assert_eq!(commit_now(st, &id, commit("q3", &["c"], &[("c", 3)]), keep_two).unwrap(), 3);
    let s = store.load(&id).unwrap().expect("session exists");
    assert_eq!(s.turn_count, 3);
    let v3 = s.version;
    assert!(v3 > 1_600_000_000_000_000, "versions start at the clock in µs, never reused: {v3}");
    assert_eq!(s.turns.iter().map(|t| t.turn).collect::<Vec<_>>(), vec![2, 3], "trimmed to the window");
    assert_eq!(s.turns[1].answer, "answer to q3", "the answer is remembered for the conversation");
    let v = s.turns[1].query_vector.as_ref().expect("the query vector is remembered").dequantize();
    assert!((v[0] - 0.5).abs() < 1e-6 && (v[1] + 0.25).abs() < 0.003 && v[2] == 0.0, "{v:?}");
    assert_eq!(s.turns[1].pointed_chunks, vec![ragctx_core::ChunkId::from("q3-pointed")], "pointers remembered");
    assert_eq!(s.markers.len(), 3, "markers outlive the window");
    assert_eq!(s.markers.get("b \"q\" [x]"), Some(&2), "hostile document ids round-trip");
    let traces = store.traces(&id).unwrap();
    assert_eq!(traces.iter().map(|t| t.turn).collect::<Vec<_>>(), vec![1, 2, 3], "every trace kept, in order");
    assert_eq!(traces[1].question, "q2");

    // A commit planned against an older version writes nothing and says so.
    let mut stale = commit("stale", &["s"], &[("s", 4)]);
    stale.read_version = 2;
    let err = store.commit_turn(&id, stale, keep_two).unwrap_err();
    assert_eq!(err.kind(), ragctx_core::ErrorKind::Conflict, "{err}");
    let after = store.load(&id).unwrap().unwrap();
    assert_eq!((after.version, after.turn_count, store.traces(&id).unwrap().len()), (v3, 3, 3), "nothing written");
    assert!(!after.markers.contains_key("s"));

    // A marker already taken by another document is never handed out twice: the commit fails
    // whole, so the trace can never disagree with the session.
    assert!(commit_now(st, &id, commit("q4", &["d"], &[("d", 3)]), keep_two).is_err());
    let s = store.load(&id).unwrap().unwrap();
    assert_eq!((s.version, s.markers.len()), (v3, 3), "nothing of the clashing commit stored");
    commit_now(st, &id, commit("q4", &["d"], &[("d", 4)]), keep_two).unwrap();
    let s = store.load(&id).unwrap().unwrap();
    let values: HashSet<u32> = s.markers.values().copied().collect();
    assert_eq!(values.len(), s.markers.len(), "markers unique: {:?}", s.markers);

    // A reset moves the version: a turn planned before it cannot commit what it excluded.
    let before_reset = s.version;
    assert!(store.reset(&id).unwrap());
    let s = store.load(&id).unwrap().unwrap();
    assert!(s.turns.is_empty() && s.markers.is_empty(), "reset forgets turns and markers");
    assert!(s.version > before_reset, "reset moves the version");
    let mut planned = commit("planned before the reset", &["a"], &[]);
    planned.read_version = before_reset;
    assert_eq!(store.commit_turn(&id, planned, keep_two).unwrap_err().kind(), ragctx_core::ErrorKind::Conflict);
    assert_eq!(store.traces(&id).unwrap().len(), 4, "reset keeps traces");
    assert_eq!(commit_now(st, &id, commit("q5", &["a"], &[]), keep_two).unwrap(), 5, "numbering continues");
    let before_delete = store.load(&id).unwrap().unwrap().version;
    assert!(store.delete(&id).unwrap());
    assert!(store.load(&id).unwrap().is_none() && store.traces(&id).unwrap().is_empty(), "delete removes all");
    // Begun again, the session never reuses a version a turn planned before the delete read.
    commit_now(st, &id, commit("again", &["a"], &[]), keep_two).unwrap();
    let mut stale = commit("planned before the delete", &["b"], &[]);
    stale.read_version = before_delete;
    let reborn = store.load(&id).unwrap().unwrap().version;
    assert_ne!(reborn, before_delete, "a new version after delete");
    assert_eq!(store.commit_turn(&id, stale, keep_two).unwrap_err().kind(), ragctx_core::ErrorKind::Conflict);
    assert!(store.delete(&id).unwrap());
    assert!(!store.delete(&id).unwrap() && !store.reset(&id).unwrap(), "unknown session: false");

    // Two turns planned against one version: exactly one lands.
    let id = SessionId::parse(&format!("{prefix}race")).unwrap();
    store.delete(&id).unwrap();
    let all = Retention { window: 0, ttl_secs: 3600 };
    let results: Vec<_> = std::thread::scope(|scope| {
        let racers: Vec<_> = (0..2)
            .map(|i| {
                let store = &store;
                let id = &id;
                scope.spawn(move || store.commit_turn(id, commit(&format!("r{i}"), &["x"], &[("x", 1)]), all))
            })
            .collect();
        racers.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1, "one of two racing commits lands: {results:?}");
    let s = store.load(&id).unwrap().unwrap();
    assert_eq!((s.turn_count, s.turns.len(), s.markers.len()), (1, 1, 1));
    store.delete(&id).unwrap();

    // 64 concurrent turns of one session, each re-planning on conflict: all land, numbered
    // 1..=64, each having seen every turn numbered before it.
    let id = SessionId::parse(&format!("{prefix}concurrent")).unwrap();
    store.delete(&id).unwrap();
    let handles: Vec<_> = (0..64)
        .map(|i| {
            let (store, id) = (store.clone(), id.clone());
            std::thread::spawn(move || {
                for _ in 0..10_000 {
                    let state = store.load(&id).unwrap().unwrap_or_default();
                    let mut c = commit(&format!("q{i}"), &[&format!("doc{i}")], &[]);
                    c.read_version = state.version;
                    c.record.answer = format!("planned after {} turns", state.turn_count);
                    match store.commit_turn(&id, c, all) {
                        Ok(turn) => return (turn, state.turn_count),
                        Err(e) if e.kind() == ragctx_core::ErrorKind::Conflict => {
                            std::thread::sleep(std::time::Duration::from_micros(200 + i * 7))
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                panic!("turn {i} never committed")
            })
        })
        .collect();
    let mut turns: Vec<(u64, u64)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    turns.sort_unstable();
    assert_eq!(turns.iter().map(|t| t.0).collect::<Vec<_>>(), (1..=64).collect::<Vec<_>>(), "distinct turn numbers");
    assert!(turns.iter().all(|&(turn, seen)| seen == turn - 1), "each turn planned against all before it");
    let s = store.load(&id).unwrap().unwrap();
    assert_eq!(s.turns.len(), 64, "64 concurrent appends, 64 records");
    assert_eq!(store.traces(&id).unwrap().len(), 64);
    store.delete(&id).unwrap();
}

/// A session with a 1 s TTL is gone, traces included, once it has expired.
pub fn ttl_expiry(store: Arc<dyn SessionStore>, prefix: &str) {
    let id = SessionId::parse(&format!("{prefix}ttl")).unwrap();
    store.delete(&id).unwrap();
    commit_now(store.as_ref(), &id, commit("q", &["a"], &[("a", 1)]), Retention { window: 0, ttl_secs: 1 }).unwrap();
    assert!(store.load(&id).unwrap().is_some());
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert!(store.load(&id).unwrap().is_none(), "expired");
    assert!(store.traces(&id).unwrap().is_empty(), "traces expire with the session");
    let n = commit_now(store.as_ref(), &id, commit("q", &["a"], &[]), Retention { window: 0, ttl_secs: 60 }).unwrap();
    assert_eq!(n, 1, "an expired session starts again");
    store.delete(&id).unwrap();
}
