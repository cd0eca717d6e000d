use crate::{Chunk, ChunkId, DocumentId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};

/// Ids that a search must never return. Applied inside the search: an excluded chunk never
/// comes back and never costs a result slot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExclusionSet {
    pub documents: BTreeSet<DocumentId>,
    pub chunks: BTreeSet<ChunkId>,
}

impl ExclusionSet {
    pub fn is_empty(&self) -> bool {
        self.documents.is_empty() && self.chunks.is_empty()
    }
    pub fn len(&self) -> usize {
        self.documents.len() + self.chunks.len()
    }
    pub fn excludes(&self, chunk: &ChunkId, document: &DocumentId) -> bool {
        self.documents.contains(document) || self.chunks.contains(chunk)
    }
    /// What this set adds to `base` when it holds every id of `base` — a session's next
    /// turn, which excludes what the last one did and more; `None` when it does not.
    /// One walk over both sets in order, no look-ups.
    pub fn added_to(&self, base: &ExclusionSet) -> Option<ExclusionSet> {
        Some(ExclusionSet {
            documents: added(&self.documents, &base.documents)?,
            chunks: added(&self.chunks, &base.chunks)?,
        })
    }
}

/// `set \ base` when `base ⊆ set`, by merging the two in order.
fn added<T: Ord + Clone>(set: &BTreeSet<T>, base: &BTreeSet<T>) -> Option<BTreeSet<T>> {
    if base.len() > set.len() {
        return None;
    }
    let mut out = BTreeSet::new();
    let mut from_base = base.iter().peekable();
    for x in set {
        match from_base.peek() {
            Some(b) if *b == x => {
                from_base.next();
            }
            Some(b) if *b < x => return None, // `b` is not in `set`
            _ => {
                out.insert(x.clone());
            }
        }
    }
    from_base.peek().is_none().then_some(out)
}

/// Exclusion sets turned into an index's own positions (a bit per chunk), kept for the
/// index state they were made against and reused: a turn searches more than once with one
/// set (deeper searches, both sides of hybrid), and a session's next turn excludes what the
/// last one did and a little more, so its set is made from the last one's by adding the
/// difference ([`ExclusionSet::added_to`]) instead of looking every id up again.
pub struct PreparedExclusions<T> {
    slots: std::sync::Mutex<Vec<Prepared<T>>>,
}

struct Prepared<T> {
    revision: u64,
    set: ExclusionSet,
    value: std::sync::Arc<T>,
}

impl<T> Default for PreparedExclusions<T> {
    fn default() -> Self {
        PreparedExclusions { slots: std::sync::Mutex::new(Vec::new()) }
    }
}

/// Sets kept: a few sessions' turns in flight at once.
const PREPARED_SLOTS: usize = 16;

impl<T: Clone> PreparedExclusions<T> {
    /// The prepared form of `set` for index state `revision`: kept, extended from the
    /// largest kept subset with `extend`, or made anew with `make`.
    pub fn get(
        &self,
        revision: u64,
        set: &ExclusionSet,
        make: impl FnOnce(&ExclusionSet) -> T,
        extend: impl FnOnce(&mut T, &ExclusionSet),
    ) -> std::sync::Arc<T> {
        let base = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.retain(|s| s.revision == revision);
            if let Some(i) = slots.iter().position(|s| &s.set == set) {
                let hit = slots.remove(i);
                let value = hit.value.clone();
                slots.push(hit); // most recently used last
                return value;
            }
            let mut kept: Vec<&Prepared<T>> = slots.iter().filter(|s| s.set.len() <= set.len()).collect();
            kept.sort_by_key(|s| std::cmp::Reverse(s.set.len()));
            kept.into_iter().find_map(|s| Some((s.value.clone(), set.added_to(&s.set)?)))
        };
        let value = std::sync::Arc::new(match base {
            Some((value, added)) => {
                let mut value = T::clone(&value);
                extend(&mut value, &added);
                value
            }
            None => make(set),
        });
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if slots.len() >= PREPARED_SLOTS {
            slots.remove(0);
        }
        slots.push(Prepared { revision, set: set.clone(), value: value.clone() });
        value
    }
}

/// Group results by document: at most `group_size` chunks per document unless `quotas`
/// (or a chunk's weight) raises it for a document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grouping {
    pub group_size: usize,
    pub quotas: HashMap<DocumentId, usize>,
}

impl Grouping {
    pub fn new(group_size: usize) -> Self {
        Self { group_size: group_size.max(1), quotas: HashMap::new() }
    }
    /// Chunks a document may place in the result: `group_size`, times a source weight
    /// `w >= 2` (rounded down), or the document's entry in `quotas` if larger.
    pub fn quota(&self, document_id: &str, weight: f32) -> usize {
        let w = if weight.is_finite() && weight >= 2.0 { weight.floor() as usize } else { 1 };
        self.quotas.get(document_id).copied().unwrap_or(0).max(self.group_size * w)
    }
}

/// One vector search.
#[derive(Clone, Debug)]
pub struct SearchRequest {
    /// L2-normalised query vector.
    pub vector: Vec<f32>,
    /// Documents when `grouping` is set, chunks otherwise.
    pub limit: usize,
    pub grouping: Option<Grouping>,
    pub exclusion: ExclusionSet,
}

/// A chunk returned by a search with its similarity (cosine; higher is closer).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    pub chunk: Chunk,
    pub score: f32,
}

/// How a search was carried out, for the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchPath {
    /// Filtered graph (HNSW) search.
    Graph,
    /// Exact scan over every stored vector.
    Exact,
    /// Done by a remote engine (e.g. Milvus).
    Remote,
    /// BM25 over titles and texts (the lexical index).
    Lexical,
}

/// One lexical (BM25) search, under the same exclusion and grouping contract as
/// [`SearchRequest`].
#[derive(Clone, Debug)]
pub struct LexicalRequest {
    pub query: String,
    /// Documents when `grouping` is set, chunks otherwise.
    pub limit: usize,
    pub grouping: Option<Grouping>,
    pub exclusion: ExclusionSet,
}

/// Which index a turn searches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Retrieval {
    /// Embeddings only.
    #[default]
    Dense,
    /// BM25 only (dense where the backend has no lexical index).
    Lexical,
    /// Both, fused by a [`Fusion`].
    Hybrid,
}

/// How hybrid retrieval merges the dense and the lexical candidates. The default won on
/// SciFact and on MTRAG `none`; `rrf` was 0.006 ahead in `engine` memory (bench/README.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fusion {
    /// Reciprocal rank fusion: Σ 1 / (60 + rank) over the two lists.
    Rrf,
    /// Each side's scores scaled to [0, 1] over its list, then averaged.
    #[default]
    Weighted,
    /// The union of both lists, ranked by exact dense similarity.
    Rescore,
}

macro_rules! named {
    ($ty:ident, $what:literal, $($v:ident = $s:literal),+) => {
        impl $ty {
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$v => $s),+ }
            }
        }
        impl std::str::FromStr for $ty {
            type Err = crate::Error;
            fn from_str(s: &str) -> crate::Result<Self> {
                match s {
                    $($s => Ok($ty::$v),)+
                    other => Err(crate::Error::InvalidInput(format!(
                        concat!($what, " {:?}: expected one of {}"), other, [$($s),+].join(", ")
                    ))),
                }
            }
        }
    };
}
named!(Retrieval, "retrieval", Dense = "dense", Lexical = "lexical", Hybrid = "hybrid");
named!(Fusion, "fusion", Rrf = "rrf", Weighted = "weighted", Rescore = "rescore");

/// Hits sorted by score, best first, and how they were found.
#[derive(Clone, Debug)]
pub struct SearchOutcome {
    pub hits: Vec<Hit>,
    pub path: SearchPath,
    /// Searches run (more than one when grouping needed a deeper pass).
    pub rounds: u32,
    /// Why this path was chosen, in words.
    pub reason: String,
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
    fn added_to_is_the_difference_only_for_a_superset() {
        let base = set(&["d1"], &["a#0", "b#2"]);
        assert_eq!(
            set(&["d1", "d2"], &["a#0", "a#1", "b#2", "c#0"]).added_to(&base),
            Some(set(&["d2"], &["a#1", "c#0"]))
        );
        assert_eq!(base.added_to(&base), Some(ExclusionSet::default()));
        // Missing one of base's ids, at the start, in the middle or at the end.
        assert_eq!(set(&["d1"], &["b#2", "c#0"]).added_to(&base), None);
        assert_eq!(set(&["d1"], &["a#0", "a#1", "c#0"]).added_to(&base), None);
        assert_eq!(set(&["d1"], &["a#0"]).added_to(&base), None);
        assert_eq!(set(&[], &["a#0", "b#2", "z#9"]).added_to(&base), None);
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
    }
}
