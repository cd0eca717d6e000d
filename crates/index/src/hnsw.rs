//! A hierarchical navigable small-world graph (Malkov & Yashunin) over inner-product
//! similarity, with a filter applied *during* the layer-0 search.
//!
//! Filtered search keeps walking through excluded nodes (they guide the walk) but only
//! allowed nodes enter the result set, and the walk stops only once `ef` allowed results
//! are held and no candidate can improve them. When the excluded ids are exactly the
//! query's nearest neighbours (the multi-turn case), the walk crosses the excluded region
//! instead of stopping inside it.

use crate::distance::dot;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

pub(crate) const EMPTY: u32 = u32::MAX;

/// A node with its similarity to the query. Ordered by similarity, then by lower node id.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Scored(pub f32, pub u32);
impl Eq for Scored {}
impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0).then_with(|| other.1.cmp(&self.1))
    }
}

/// Reversed order, for a min-heap of results (worst on top).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Worst(Scored);
impl PartialOrd for Worst {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Worst {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.cmp(&self.0)
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Graph {
    pub m: usize,
    pub ef_construction: usize,
    pub levels: Vec<u8>,
    /// `m0 = 2m` neighbour slots per node at layer 0, `EMPTY` padded.
    pub layer0: Vec<u32>,
    /// Layers 1.. of the nodes that reach them: `level * m` slots, layer 1 first.
    pub upper: HashMap<u32, Vec<u32>>,
    pub entry: u32,
    pub max_level: u8,
    pub rng: u64,
}

pub(crate) struct Vectors<'a> {
    pub data: &'a [f32],
    pub dim: usize,
}
impl Vectors<'_> {
    #[inline]
    pub fn get(&self, node: u32) -> &[f32] {
        let i = node as usize * self.dim;
        &self.data[i..i + self.dim]
    }
}

/// A reusable bitset of visited nodes.
struct Visited(Vec<u64>);
impl Visited {
    fn new(n: usize) -> Self {
        Visited(vec![0; n.div_ceil(64)])
    }
    /// Marks `i`; true when it was not marked before.
    #[inline]
    fn insert(&mut self, i: u32) -> bool {
        let (w, b) = ((i / 64) as usize, i % 64);
        let was = self.0[w] & (1 << b) != 0;
        self.0[w] |= 1 << b;
        !was
    }
}

impl Graph {
    pub fn new(m: usize, ef_construction: usize) -> Self {
        Graph {
            m: m.max(2),
            ef_construction: ef_construction.max(m),
            levels: Vec::new(),
            layer0: Vec::new(),
            upper: HashMap::new(),
            entry: EMPTY,
            max_level: 0,
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    fn m0(&self) -> usize {
        self.m * 2
    }

    pub fn len(&self) -> usize {
        self.levels.len()
    }

    fn neighbours(&self, node: u32, layer: u8) -> &[u32] {
        let list = if layer == 0 {
            let m0 = self.m0();
            &self.layer0[node as usize * m0..(node as usize + 1) * m0]
        } else {
            let up = &self.upper[&node];
            let s = (layer as usize - 1) * self.m;
            &up[s..s + self.m]
        };
        let end = list.iter().position(|&x| x == EMPTY).unwrap_or(list.len());
        &list[..end]
    }

    fn set_neighbours(&mut self, node: u32, layer: u8, list: &[u32]) {
        let slots = if layer == 0 {
            let m0 = self.m0();
            &mut self.layer0[node as usize * m0..(node as usize + 1) * m0]
        } else {
            let m = self.m;
            let up = self.upper.get_mut(&node).expect("node reaches this layer");
            let s = (layer as usize - 1) * m;
            &mut up[s..s + m]
        };
        slots.fill(EMPTY);
        slots[..list.len()].copy_from_slice(list);
    }

    fn random_level(&mut self) -> u8 {
        // xorshift64*; deterministic so that builds are reproducible.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let u = ((r >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        let ml = 1.0 / (self.m as f64).ln();
        ((-u.ln() * ml).floor() as u8).min(16)
    }

    /// Adds node `node` (== current length) whose vector is already in `vectors`.
    pub fn insert(&mut self, vectors: &Vectors<'_>, node: u32) {
        debug_assert_eq!(node as usize, self.levels.len());
        let level = self.random_level();
        self.levels.push(level);
        self.layer0.extend(std::iter::repeat_n(EMPTY, self.m0()));
        if level > 0 {
            self.upper.insert(node, vec![EMPTY; level as usize * self.m]);
        }
        if self.entry == EMPTY {
            self.entry = node;
            self.max_level = level;
            return;
        }
        let q = vectors.get(node);
        let mut ep = Scored(dot(q, vectors.get(self.entry)), self.entry);
        let mut layer = self.max_level;
        while layer > level {
            ep = self.greedy(vectors, q, ep, layer);
            layer -= 1;
        }
        let mut eps = vec![ep];
        loop {
            let (found, _) = self.search_layer(vectors, q, &eps, self.ef_construction, layer, &|_| true, None);
            let cap = if layer == 0 { self.m0() } else { self.m };
            let chosen = self.select(vectors, &found, self.m);
            self.set_neighbours(node, layer, &chosen);
            for &nb in &chosen {
                let mut list: Vec<u32> = self.neighbours(nb, layer).to_vec();
                if list.len() < cap {
                    list.push(node);
                    self.set_neighbours(nb, layer, &list);
                } else {
                    let base = vectors.get(nb);
                    let mut cands: Vec<Scored> = list
                        .iter()
                        .chain(std::iter::once(&node))
                        .map(|&x| Scored(dot(base, vectors.get(x)), x))
                        .collect();
                    cands.sort_by(|a, b| b.cmp(a));
                    let kept = self.select(vectors, &cands, cap);
                    self.set_neighbours(nb, layer, &kept);
                }
            }
            eps = found;
            if layer == 0 {
                break;
            }
            layer -= 1;
        }
        if level > self.max_level {
            self.max_level = level;
            self.entry = node;
        }
    }

    /// The neighbour-selection heuristic: keep a candidate only if it is closer to the base
    /// than to every neighbour already kept (spreads links across directions).
    fn select(&self, vectors: &Vectors<'_>, sorted: &[Scored], m: usize) -> Vec<u32> {
        let mut kept: Vec<u32> = Vec::with_capacity(m);
        for c in sorted {
            if kept.len() >= m {
                break;
            }
            let cv = vectors.get(c.1);
            if kept.iter().all(|&k| dot(cv, vectors.get(k)) < c.0) {
                kept.push(c.1);
            }
        }
        kept
    }

    fn greedy(&self, vectors: &Vectors<'_>, q: &[f32], mut ep: Scored, layer: u8) -> Scored {
        loop {
            let mut moved = false;
            for &nb in self.neighbours(ep.1, layer) {
                let s = Scored(dot(q, vectors.get(nb)), nb);
                if s > ep {
                    ep = s;
                    moved = true;
                }
            }
            if !moved {
                return ep;
            }
        }
    }

    /// Best-first search of one layer. Returns up to `ef` nodes that pass `allowed`, best
    /// first, and how many excluded nodes the walk met that score better than the worst
    /// result (many means the query's neighbourhood is excluded: the walk needs a larger
    /// `ef` to see past it). `visits`, when given, counts the similarity computations.
    #[allow(clippy::too_many_arguments)]
    pub fn search_layer(
        &self,
        vectors: &Vectors<'_>,
        q: &[f32],
        entry: &[Scored],
        ef: usize,
        layer: u8,
        allowed: &dyn Fn(u32) -> bool,
        mut visits: Option<&mut usize>,
    ) -> (Vec<Scored>, usize) {
        let mut visited = Visited::new(self.len());
        let mut excluded_scores: Vec<f32> = Vec::new();
        let mut candidates: BinaryHeap<Scored> = BinaryHeap::new();
        let mut results: BinaryHeap<Worst> = BinaryHeap::with_capacity(ef + 1);
        for &e in entry {
            if visited.insert(e.1) {
                candidates.push(e);
                if allowed(e.1) {
                    results.push(Worst(e));
                }
            }
        }
        while let Some(c) = candidates.pop() {
            if results.len() >= ef {
                if let Some(w) = results.peek() {
                    if c < w.0 {
                        break;
                    }
                }
            }
            for &nb in self.neighbours(c.1, layer) {
                if !visited.insert(nb) {
                    continue;
                }
                let s = Scored(dot(q, vectors.get(nb)), nb);
                if let Some(v) = visits.as_deref_mut() {
                    *v += 1;
                }
                let full = results.len() >= ef;
                if !full || s > results.peek().map(|w| w.0).unwrap_or(s) {
                    candidates.push(s);
                    if allowed(nb) {
                        results.push(Worst(s));
                        if results.len() > ef {
                            results.pop();
                        }
                    } else {
                        excluded_scores.push(s.0);
                    }
                }
            }
        }
        let worst = results.peek().map_or(f32::NEG_INFINITY, |w| w.0 .0);
        let excluded_closer = excluded_scores.iter().filter(|&&x| x > worst).count();
        let mut out: Vec<Scored> = results.into_iter().map(|w| w.0).collect();
        out.sort_by(|a, b| b.cmp(a));
        (out, excluded_closer)
    }

    /// Filtered k-NN: greedy descent through the upper layers, then a filtered layer-0 search.
    pub fn search(
        &self,
        vectors: &Vectors<'_>,
        q: &[f32],
        ef: usize,
        allowed: &dyn Fn(u32) -> bool,
        visits: Option<&mut usize>,
    ) -> (Vec<Scored>, usize) {
        if self.entry == EMPTY {
            return (Vec::new(), 0);
        }
        let mut ep = Scored(dot(q, vectors.get(self.entry)), self.entry);
        let mut layer = self.max_level;
        while layer > 0 {
            ep = self.greedy(vectors, q, ep, layer);
            layer -= 1;
        }
        self.search_layer(vectors, q, &[ep], ef, 0, allowed, visits)
    }
}
