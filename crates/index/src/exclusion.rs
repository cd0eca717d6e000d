//! Exclusion sets resolved into the index's own integer space: one bit per node, set for
//! the nodes a session excludes and for retired ones. Resolving turns every excluded id
//! into a node number once (hash look-ups); the searches that follow test a bit.

use crate::PreparedExclusions;
use crate::VectorIndex;
use ragctx_core::ExclusionSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A growable bit set over node numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bits {
    words: Vec<u64>,
    len: usize,
}

impl Bits {
    pub fn push(&mut self, bit: bool) {
        if self.len.is_multiple_of(64) {
            self.words.push(0);
        }
        if bit {
            self.words[self.len / 64] |= 1 << (self.len % 64);
        }
        self.len += 1;
    }
    pub fn words(&self) -> &[u64] {
        &self.words
    }
    #[inline]
    pub fn get(&self, i: usize) -> bool {
        self.words[i / 64] & (1 << (i % 64)) != 0
    }
    /// Sets bit `i`; returns whether it was clear.
    #[inline]
    pub fn set(&mut self, i: usize) -> bool {
        let (w, b) = (i / 64, 1u64 << (i % 64));
        let was_clear = self.words[w] & b == 0;
        self.words[w] |= b;
        was_clear
    }
}

/// Revisions tell index states apart: every mutation of any index takes a fresh one, so a
/// resolved set is used only with the index state it was resolved against.
static NEXT_REVISION: AtomicU64 = AtomicU64::new(1);

pub(crate) fn next_revision() -> u64 {
    NEXT_REVISION.fetch_add(1, Ordering::Relaxed)
}

/// An [`ExclusionSet`] resolved against one state of a [`VectorIndex`]
/// ([`VectorIndex::resolve`]): what FAISS calls a prepared ID selector.
#[derive(Clone, Debug)]
pub struct ResolvedExclusion {
    pub(crate) revision: u64,
    /// Excluded or retired nodes.
    pub(crate) blocked: Bits,
    /// Live nodes the set excludes.
    pub(crate) excluded_live: usize,
    /// When the set is narrowed to one tenant of a store holding others: that tenant's live
    /// points, which is what a search's reason may count (nothing store-wide reaches a
    /// tenant's trace).
    pub(crate) scope_live: Option<usize>,
}

impl ResolvedExclusion {
    /// Live points the set excludes (ids the index does not hold are not counted).
    pub fn excluded(&self) -> usize {
        self.excluded_live
    }
    #[inline]
    pub(crate) fn blocks(&self, node: u32) -> bool {
        self.blocked.get(node as usize)
    }

    /// This set with every node outside `allowed` blocked too (`live`: the index's live
    /// points, to count what stays allowed).
    pub(crate) fn narrowed(&self, allowed: &crate::PositionBits, live: usize) -> ResolvedExclusion {
        let mut blocked = self.blocked.clone();
        let mut open = 0usize;
        let len = blocked.len;
        for (i, w) in blocked.words.iter_mut().enumerate() {
            *w |= !allowed.words().get(i).copied().unwrap_or(0);
            let valid = if (i + 1) * 64 <= len { u64::MAX } else { (1u64 << (len % 64)) - 1 };
            open += (!*w & valid).count_ones() as usize;
        }
        ResolvedExclusion {
            revision: self.revision,
            blocked,
            excluded_live: live - open.min(live),
            scope_live: self.scope_live,
        }
    }
}

impl VectorIndex {
    /// Resolves `set` into node numbers once; searches with the result
    /// ([`VectorIndex::search_resolved`]) test one bit per node instead of looking ids up.
    pub fn resolve(&self, set: &ExclusionSet) -> ResolvedExclusion {
        let mut resolved = ResolvedExclusion {
            revision: self.revision,
            blocked: self.retired.clone(),
            excluded_live: 0,
            scope_live: None,
        };
        self.resolve_more(&mut resolved, set);
        resolved
    }

    /// Adds the ids of `more` to a set resolved against this index state.
    pub(crate) fn resolve_more(&self, resolved: &mut ResolvedExclusion, more: &ExclusionSet) {
        assert_eq!(resolved.revision, self.revision, "exclusion resolved against another state of the index");
        let blocked = &mut resolved.blocked;
        for d in &more.documents {
            if let Some(&di) = self.by_doc.get(d.as_str()) {
                for &n in &self.doc_nodes[di as usize] {
                    resolved.excluded_live += blocked.set(n as usize) as usize;
                }
            }
        }
        for c in &more.chunks {
            if let Some(&n) = self.by_chunk.get(c.as_str()) {
                resolved.excluded_live += blocked.set(n as usize) as usize;
            }
        }
    }
}

/// The sets a store resolved lately ([`PreparedExclusions`]), shared by every handle on an
/// index: reused while the index is unchanged and the set is equal, or extended by the
/// difference when a session's next turn excludes more.
#[derive(Default)]
pub struct ResolvedCache {
    sets: PreparedExclusions<ResolvedExclusion>,
}

impl ResolvedCache {
    /// The resolved form of `set` against `index`, from the cache when possible.
    pub fn get(&self, index: &VectorIndex, set: &ExclusionSet) -> Arc<ResolvedExclusion> {
        self.sets.get(index.revision, set, |s| index.resolve(s), |r, added| index.resolve_more(r, added))
    }
}
