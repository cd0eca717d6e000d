//! The full-precision (f32) vectors. Those read from an index file stay in the file's memory
//! map: the walk and the scan read the compact copy (`half.rs`) and only the candidates they
//! re-score read f32, so the page cache holds the f32 section and the process touches a few
//! pages of it per search, instead of keeping every vector in its own memory (1.5 GB of
//! 384-d vectors at a million points). Vectors added after the file was read are kept in
//! memory until the file is written again.
//!
//! The map is of a file ragctx never changes in place: index files are written beside the
//! old one and renamed over it, so a mapped file keeps its contents while it is mapped (its
//! inode lives on after the rename). A file changed by another program under a running
//! process is outside that contract.

use std::sync::Arc;

/// A memory-mapped run of `nodes × dim` little-endian f32s.
struct Mapped {
    map: memmap2::Mmap,
    offset: usize,
    nodes: usize,
}

impl Mapped {
    fn floats(&self, dim: usize) -> &[f32] {
        let bytes = &self.map[self.offset..self.offset + self.nodes * dim * 4];
        // SAFETY: `Full::mapped` checked that the range lies in the map, that it starts on a
        // 4-byte boundary and that the target is little-endian (the file's byte order), so
        // the bytes are `nodes × dim` valid f32s; the map is read-only and lives as long as
        // `self`, which the returned slice borrows.
        unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<f32>(), self.nodes * dim) }
    }
}

impl std::fmt::Debug for Full {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Full")
            .field("mapped", &self.split())
            .field("in_memory", &(self.tail.len() / self.dim.max(1)))
            .finish()
    }
}

/// The f32 vectors by node: a mapped head (nodes read from a file) and a tail in memory.
#[derive(Clone)]
pub(crate) struct Full {
    dim: usize,
    mapped: Option<Arc<Mapped>>,
    tail: Vec<f32>,
}

impl Full {
    pub fn new(dim: usize) -> Full {
        Full { dim, mapped: None, tail: Vec::new() }
    }

    /// The `nodes` vectors at `offset` of `file`, mapped; `None` when they cannot be used
    /// in place (a big-endian target, a misaligned offset, a file shorter than them).
    pub fn mapped(file: &std::fs::File, offset: usize, nodes: usize, dim: usize) -> Option<Full> {
        if cfg!(target_endian = "big") || !offset.is_multiple_of(4) {
            return None;
        }
        // SAFETY: see the module's note: index files are never changed in place.
        let map = unsafe { memmap2::Mmap::map(file) }.ok()?;
        let end = nodes.checked_mul(dim)?.checked_mul(4)?.checked_add(offset)?;
        if end > map.len() || !(map.as_ptr() as usize + offset).is_multiple_of(4) {
            return None;
        }
        // Searches read a few scattered vectors: without this, each read maps the pages
        // around it too, and a process soon holds the whole section for a few vectors' use.
        let _ = map.advise(memmap2::Advice::Random);
        Some(Full { dim, mapped: Some(Arc::new(Mapped { map, offset, nodes })), tail: Vec::new() })
    }

    fn split(&self) -> usize {
        self.mapped.as_ref().map_or(0, |m| m.nodes)
    }

    pub fn push(&mut self, v: &[f32]) {
        self.tail.extend_from_slice(v);
    }

    /// The mapped head and the tail, for [`crate::hnsw::Vectors`].
    pub fn parts(&self) -> (&[f32], &[f32], usize) {
        match &self.mapped {
            Some(m) => (m.floats(self.dim), &self.tail, m.nodes),
            None => (&[], &self.tail, 0),
        }
    }

    /// Whether the head is mapped from a file.
    pub fn is_mapped(&self) -> bool {
        self.mapped.is_some()
    }

    #[inline]
    pub fn get(&self, node: u32) -> &[f32] {
        let (head, tail, split) = self.parts();
        slice_of(head, tail, split, self.dim, node)
    }
}

/// Node `node`'s vector in a head of `split` nodes followed by a tail.
#[inline]
pub(crate) fn slice_of<'a>(head: &'a [f32], tail: &'a [f32], split: usize, dim: usize, node: u32) -> &'a [f32] {
    let n = node as usize;
    if n < split {
        &head[n * dim..(n + 1) * dim]
    } else {
        let i = (n - split) * dim;
        &tail[i..i + dim]
    }
}
