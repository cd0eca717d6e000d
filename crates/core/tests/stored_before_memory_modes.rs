//! Sessions and traces stored by the version before memory modes (commit bdb4e40) still
//! load: every field added since has a default, and an old trace reads as `client` memory
//! (nothing was carried then).

use ragctx_core::{Memory, SessionState, Trace};

const OLD_SESSION: &str = r#"{"turn_count":1,"turns":[{"turn":1,"question":"q","intent":"new",
"shown_chunks":["a#0"],"shown_documents":["a"],"cited_chunks":["a#0"],"cited_documents":["a"],"at_unix_ms":5}],
"markers":{"a":1},"updated_at_unix_ms":5}"#;

const OLD_TRACE: &str = r#"{"session_id":"s","turn":1,"question":"q","query":"q","answer":"x [1]",
"citations":[{"marker":1,"document_id":"a","title":"t","chunk_ids":["a#0"]}],
"context":[{"marker":1,"document_id":"a","title":"t","chunk_ids":["a#0"],"tokens":12,"score":0.5,"text":"hello"}],
"exclusion":{"documents":[],"chunks":[]},"invalid_markers":[],"at_unix_ms":5,
"stats":{"candidates":1,"unique_documents":1,"context_fragments":1,"context_tokens":12,"prompt_tokens":40,
"answer_citations":1,"invalid_citations":0,"excluded":0,"dropped_by_budget":[],"intent":"new","search_path":"exact",
"search_rounds":1,"search_reason":"r","aliases":[],"settings":{"strategy":"full","granularity":"chunk",
"consumption":"shown","window":0,"limit":8,"group_size":1,"min_documents":3,"budget":6000,"tokenizer":"cl100k_base"},
"timings_ms":{"embed":1.0}}}"#;

#[test]
fn an_old_session_loads_with_empty_new_fields() {
    let s: SessionState = serde_json::from_str(OLD_SESSION).expect("old session loads");
    let t = &s.turns[0];
    assert_eq!((t.answer.as_str(), t.query_vector.is_none(), t.pointed_chunks.is_empty()), ("", true, true));
    assert_eq!(s.markers.get("a"), Some(&1));
}

#[test]
fn an_old_trace_loads_as_client_memory_with_nothing_carried() {
    let t: Trace = serde_json::from_str(OLD_TRACE).expect("old trace loads");
    assert_eq!(t.trace.memory, Memory::Client);
    assert_eq!((t.trace.carried, t.trace.pointers, t.trace.conversation_tokens), (0, 0, 0));
    assert!(t.pointers.is_empty() && t.query_vector.is_none());
    assert_eq!(t.context[0].carried_from, None);
    assert_eq!(t.trace.settings.turn.memory, Memory::Client); // not recorded then: read as the stats are
                                                              // And it writes back in the new shape, which loads again unchanged.
    let written = serde_json::to_string(&t).unwrap();
    let again: Trace = serde_json::from_str(&written).unwrap();
    assert_eq!(again, t);
    // As the latest version: numbers under `trace`, the intent also at the top.
    let v: serde_json::Value = serde_json::from_str(&written).unwrap();
    assert_eq!((v["version"].as_u64(), v["intent"].as_str()), (Some(ragctx_core::TRACE_VERSION as u64), Some("new")));
    assert!(v.get("stats").is_none() && v["trace"]["context_tokens"] == 12, "{v}");
}
