//! Stage 2: the ids the session has consumed in its last `window` turns.

use crate::settings::{Consumption, Granularity, TurnSettings};
use ragctx_core::{ChunkId, ExclusionSet, Intent, Memory, SessionState, TurnRecord};
use std::collections::HashMap;

/// The last `window` remembered turns (0 = all).
pub fn window_turns(state: &SessionState, window: usize) -> &[TurnRecord] {
    let turns = &state.turns;
    let from = if window == 0 { 0 } else { turns.len().saturating_sub(window) };
    &turns[from..]
}

/// The working set: every chunk shown in the last `window` turns, with the turn that first
/// showed it, but those a later `forget` step let go. What `engine` memory carries and
/// `client` memory points to.
pub fn first_shown(state: &SessionState, window: usize) -> HashMap<ChunkId, u64> {
    let mut out = HashMap::new();
    for t in window_turns(state, window) {
        for c in &t.forgotten {
            out.remove(c);
        }
        for c in &t.shown_chunks {
            out.entry(c.clone()).or_insert(t.turn);
        }
    }
    out
}

/// The exclusion set for a turn. `reshow` excludes nothing; `follow_up` and `engine` memory
/// exclude at chunk granularity whatever the setting, so other chunks of the documents just
/// shown may come back (and, in `engine` memory, the shown ones are scored and carried).
pub fn exclusion_set(state: &SessionState, intent: Intent, settings: &TurnSettings) -> ExclusionSet {
    let mut set = ExclusionSet::default();
    if intent == Intent::Reshow || !settings.strategy.excludes() {
        return set;
    }
    // `engine` memory scores the working set's chunks exactly: excluding whole documents
    // would hide their other chunks from both the search and the scoring.
    let granularity = if intent == Intent::FollowUp || settings.memory == Memory::Engine {
        Granularity::Chunk
    } else {
        settings.granularity
    };
    for t in window_turns(state, settings.window) {
        let (chunks, docs) = match settings.consumption {
            Consumption::Shown => (&t.shown_chunks, &t.shown_documents),
            Consumption::Cited => (&t.cited_chunks, &t.cited_documents),
        };
        // A chunk forgotten after it was shown may come back (documents excluded whole stay
        // excluded: forgetting names chunks).
        for c in &t.forgotten {
            set.chunks.remove(c);
        }
        match granularity {
            Granularity::Document => set.documents.extend(docs.iter().cloned()),
            Granularity::Chunk => set.chunks.extend(chunks.iter().cloned()),
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use ragctx_core::TurnRecord;

    fn turn(n: u64, chunk: &str, doc: &str, cited: bool) -> TurnRecord {
        TurnRecord {
            turn: n,
            question: "q".into(),
            intent: Intent::New,
            shown_chunks: vec![chunk.into()],
            shown_documents: vec![doc.into()],
            cited_chunks: if cited { vec![chunk.into()] } else { vec![] },
            cited_documents: if cited { vec![doc.into()] } else { vec![] },
            at_unix_ms: 0,
            answer: String::new(),
            query_vector: None,
            pointed_chunks: vec![],
            forgotten: vec![],
        }
    }

    #[test]
    fn window_granularity_consumption_and_intent() {
        let state = SessionState {
            turn_count: 3,
            turns: vec![turn(1, "a#1", "a", true), turn(2, "b#1", "b", false), turn(3, "c#1", "c", true)],
            ..Default::default()
        };
        let mut s =
            TurnSettings { granularity: Granularity::Document, memory: Memory::Client, ..TurnSettings::default() };
        let engine = TurnSettings { memory: Memory::Engine, ..s.clone() };
        let carried = exclusion_set(&state, Intent::New, &engine);
        assert!(carried.documents.is_empty() && carried.chunks.len() == 3, "engine memory excludes chunks");
        let all = exclusion_set(&state, Intent::New, &s);
        assert_eq!(all.documents.len(), 3);
        assert!(all.chunks.is_empty());
        s.window = 2;
        let last2 = exclusion_set(&state, Intent::New, &s);
        assert!(!last2.documents.contains("a") && last2.documents.contains("b"));
        s.consumption = Consumption::Cited;
        let cited = exclusion_set(&state, Intent::New, &s);
        assert_eq!(cited.documents.iter().map(|d| d.as_str()).collect::<Vec<_>>(), vec!["c"]);
        let follow = exclusion_set(&state, Intent::FollowUp, &s);
        assert!(follow.documents.is_empty() && follow.chunks.contains("c#1"));
        assert!(exclusion_set(&state, Intent::Reshow, &s).is_empty());
        s.strategy = crate::Strategy::Group;
        assert!(exclusion_set(&state, Intent::New, &s).is_empty());
    }

    /// A `forget` step lets go of what it names: out of the exclusion and the working set
    /// until a later turn shows it again.
    #[test]
    fn a_forgotten_chunk_leaves_until_it_is_shown_again() {
        let forget = |n: u64, chunk: &str| TurnRecord {
            shown_chunks: vec![],
            shown_documents: vec![],
            forgotten: vec![chunk.into()],
            ..turn(n, "x", "x", false)
        };
        let s = TurnSettings { memory: Memory::Client, ..TurnSettings::default() };
        let mut state = SessionState {
            turns: vec![turn(1, "a#1", "a", false), turn(2, "b#1", "b", false), forget(3, "a#1")],
            ..Default::default()
        };
        let ex = exclusion_set(&state, Intent::New, &s);
        assert_eq!(ex.chunks.iter().map(|c| c.as_str()).collect::<Vec<_>>(), ["b#1"]);
        let held = first_shown(&state, 0);
        assert!(!held.contains_key(&ChunkId::from("a#1")) && held.contains_key(&ChunkId::from("b#1")));
        assert!(state.turns[2].is_forget() && !state.turns[1].is_forget());
        // Shown again after the step: held again, first shown by the turn that showed it again.
        state.turns.push(turn(4, "a#1", "a", false));
        assert!(exclusion_set(&state, Intent::New, &s).chunks.contains("a#1"));
        assert_eq!(first_shown(&state, 0)[&ChunkId::from("a#1")], 4);
    }
}
