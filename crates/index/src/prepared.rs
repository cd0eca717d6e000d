//! Exclusion sets resolved to an index's positions, kept while the index state lasts.

use ragctx_core::{fx_hash, ExclusionSet};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// Exclusion sets turned into an index's own positions (a bit per chunk), kept while the
/// index state they were made against lasts (a small LRU shared by every session): a turn
/// searches more than once with one set (deeper searches, both sides of hybrid), and a
/// session's next turn usually excludes what its last one did and a little more, so its
/// set is made from the kept one by adding the difference instead of looking every id up
/// again. A set that shrank (a sliding window, another granularity) or an index that
/// changed is made anew. Kept sets are remembered by a 64-bit hash per id in the set's own
/// order, so telling "equal" or "holds a kept set" is one sequential walk over integers,
/// with no id copied. Both indexes (vectors and BM25) keep one.
pub struct PreparedExclusions<T> {
    slots: Mutex<Vec<Prepared<T>>>,
}

struct Prepared<T> {
    revision: u64,
    key: Arc<Key>,
    value: Arc<T>,
}

impl<T> Clone for Prepared<T> {
    fn clone(&self) -> Self {
        Prepared { revision: self.revision, key: self.key.clone(), value: self.value.clone() }
    }
}

/// A set by the [`fx_hash`] of its ids, in its order (sorted by id). Two different sets
/// share a key only by a collision (odds about n² / 2⁶⁴ for ids not crafted to collide:
/// this keeps a session from being re-sent what it saw; it is no security boundary).
#[derive(PartialEq, Eq)]
struct Key {
    documents: Vec<u64>,
    chunks: Vec<u64>,
}

impl Key {
    fn of(set: &ExclusionSet) -> Key {
        Key {
            documents: set.documents.iter().map(|d| fx_hash(d.as_str())).collect(),
            chunks: set.chunks.iter().map(|c| fx_hash(c.as_str())).collect(),
        }
    }
    fn len(&self) -> usize {
        self.documents.len() + self.chunks.len()
    }
}

/// Positions in `new` of the ids not in `base`, when `base` holds no id that `new` lacks
/// (both in the sets' order); `None` otherwise — given up as soon as more ids than the
/// sizes allow fail to match.
fn added_positions(new: &[u64], base: &[u64]) -> Option<Vec<usize>> {
    let extra = new.len().checked_sub(base.len())?;
    let mut added = Vec::with_capacity(extra);
    let mut j = 0;
    for (i, &h) in new.iter().enumerate() {
        if j < base.len() && base[j] == h {
            j += 1;
        } else {
            if added.len() == extra {
                return None;
            }
            added.push(i);
        }
    }
    (j == base.len()).then_some(added)
}

/// A copy keeps no set: an index copied to be changed has other positions.
impl<T> Clone for PreparedExclusions<T> {
    fn clone(&self) -> Self {
        PreparedExclusions::default()
    }
}

impl<T> Default for PreparedExclusions<T> {
    fn default() -> Self {
        PreparedExclusions { slots: Mutex::new(Vec::new()) }
    }
}

/// Sets kept: a few sessions' turns in flight at once.
const PREPARED_SLOTS: usize = 16;

impl<T: Clone> PreparedExclusions<T> {
    /// The prepared form of `set` for index state `revision`: kept, extended with `extend`
    /// from a kept non-empty subset that holds at least half of it, or made anew with
    /// `make`. The sets are compared outside the lock.
    pub fn get(
        &self,
        revision: u64,
        set: &ExclusionSet,
        make: impl FnOnce(&ExclusionSet) -> T,
        extend: impl FnOnce(&mut T, &ExclusionSet),
    ) -> Arc<T> {
        let kept: Vec<Prepared<T>> = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.retain(|s| s.revision == revision);
            slots.clone()
        };
        let key = Key::of(set);
        if let Some(hit) = kept.iter().find(|k| *k.key == key) {
            self.keep(hit.clone(), None);
            return hit.value.clone();
        }
        let mut bases: Vec<&Prepared<T>> = kept
            .iter()
            .filter(|k| k.key.len() > 0 && k.key.len() <= key.len() && 2 * k.key.len() >= key.len())
            .collect();
        bases.sort_by_key(|k| std::cmp::Reverse(k.key.len()));
        let base = bases.into_iter().find_map(|k| Some((k, added(set, &key, &k.key)?)));
        let (value, replaced) = match base {
            Some((k, added)) => {
                let mut value = T::clone(&k.value);
                extend(&mut value, &added);
                // The session has moved on: its last set gives way to this one.
                (value, Some(k.key.clone()))
            }
            None => (make(set), None),
        };
        let value = Arc::new(value);
        self.keep(Prepared { revision, key: Arc::new(key), value: value.clone() }, replaced);
        value
    }

    /// Keeps `prepared` as the most recently used, once (an equal set kept by another
    /// thread meanwhile gives way), dropping `replaced` and the least recently used beyond
    /// the limit.
    fn keep(&self, prepared: Prepared<T>, replaced: Option<Arc<Key>>) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.retain(|s| {
            let same = Arc::ptr_eq(&s.key, &prepared.key) || (s.revision == prepared.revision && s.key == prepared.key);
            !same && replaced.as_ref().is_none_or(|r| !Arc::ptr_eq(&s.key, r))
        });
        if slots.len() >= PREPARED_SLOTS {
            slots.remove(0);
        }
        slots.push(prepared);
    }
}

/// What `set` (whose key is `key`) adds to the set whose key is `base`, when it holds every
/// id of it; `None` when it does not.
fn added(set: &ExclusionSet, key: &Key, base: &Key) -> Option<ExclusionSet> {
    let documents = added_positions(&key.documents, &base.documents)?;
    let chunks = added_positions(&key.chunks, &base.chunks)?;
    Some(ExclusionSet { documents: pick(&set.documents, &documents), chunks: pick(&set.chunks, &chunks) })
}

/// The ids of `set` at `positions` (ascending, in the set's order).
fn pick<I: Ord + Clone>(set: &BTreeSet<I>, positions: &[usize]) -> BTreeSet<I> {
    let mut at = positions.iter().peekable();
    set.iter().enumerate().filter(|(i, _)| at.next_if_eq(&i).is_some()).map(|(_, x)| x.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn set(docs: &[&str], chunks: &[&str]) -> ExclusionSet {
        ExclusionSet {
            documents: docs.iter().map(|&d| d.into()).collect(),
            chunks: chunks.iter().map(|&c| c.into()).collect(),
        }
    }

    #[test]
    fn added_is_the_difference_only_for_a_superset() {
        let added_to = |s: &ExclusionSet, base: &ExclusionSet| added(s, &Key::of(s), &Key::of(base));
        let base = set(&["d1"], &["a#0", "b#2"]);
        assert_eq!(
            added_to(&set(&["d1", "d2"], &["a#0", "a#1", "b#2", "c#0"]), &base),
            Some(set(&["d2"], &["a#1", "c#0"]))
        );
        assert_eq!(added_to(&base, &base), Some(ExclusionSet::default()));
        // Missing one of base's ids, at the start, in the middle or at the end.
        assert_eq!(added_to(&set(&["d1"], &["b#2", "c#0"]), &base), None);
        assert_eq!(added_to(&set(&["d1"], &["a#0", "a#1", "c#0"]), &base), None);
        assert_eq!(added_to(&set(&["d1"], &["a#0"]), &base), None);
        assert_eq!(added_to(&set(&[], &["a#0", "b#2", "z#9"]), &base), None);
    }

    /// A prepared form is a sorted list of the ids: made, extended or reused, it must equal
    /// what making it from scratch gives, and making happens only when nothing kept helps.
    #[test]
    fn prepared_sets_are_reused_extended_and_never_cross_revisions() {
        let made = AtomicUsize::new(0);
        let cache = PreparedExclusions::<Vec<String>>::default();
        let all = |s: &ExclusionSet| -> Vec<String> {
            let mut v: Vec<String> =
                s.documents.iter().map(|d| d.0.clone()).chain(s.chunks.iter().map(|c| c.0.clone())).collect();
            v.sort();
            v
        };
        let get = |revision: u64, s: &ExclusionSet| {
            cache.get(
                revision,
                s,
                |s| {
                    made.fetch_add(1, Ordering::Relaxed);
                    all(s)
                },
                |v, added| {
                    v.extend(all(added));
                    v.sort();
                },
            )
        };
        let turn1 = set(&[], &["a#0", "b#1"]);
        let turn2 = set(&["d"], &["a#0", "b#1", "c#3"]);
        let other_session = set(&[], &["x#0"]);
        assert_eq!(*get(1, &turn1), all(&turn1));
        assert_eq!(*get(1, &other_session), all(&other_session));
        assert_eq!(made.load(Ordering::Relaxed), 2);
        assert_eq!(*get(1, &turn2), all(&turn2), "extended from turn 1's");
        assert_eq!(*get(1, &turn2), all(&turn2), "kept");
        assert_eq!(made.load(Ordering::Relaxed), 2);
        // Smaller than what is kept: made anew.
        assert_eq!(*get(1, &set(&[], &["a#0"])), vec!["a#0".to_owned()]);
        assert_eq!(made.load(Ordering::Relaxed), 3);
        // Another index state: nothing kept is used.
        assert_eq!(*get(2, &turn2), all(&turn2));
        assert_eq!(made.load(Ordering::Relaxed), 4);
        // The empty set, or a kept subset under half of the set, is no base: made anew.
        assert!(get(2, &ExclusionSet::default()).is_empty());
        let five = set(&[], &["a#0", "b#1", "c#3", "e#0", "f#0"]);
        assert_eq!(*get(2, &set(&[], &["a#0", "b#1"])), ["a#0", "b#1"]);
        assert_eq!(made.load(Ordering::Relaxed), 6);
        assert_eq!(*get(2, &five), all(&five), "2 of 5 kept: made anew");
        assert_eq!(made.load(Ordering::Relaxed), 7);
    }
}
