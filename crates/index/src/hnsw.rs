//! A hierarchical navigable small-world graph (Malkov & Yashunin) over inner-product
//! similarity, with a filter applied *during* the layer-0 search.
//!
//! Filtered search keeps walking through excluded nodes (they guide the walk) but only
//! allowed nodes enter the result set, and the walk stops only once `ef` allowed results
//! are held and no candidate can improve them. When the excluded ids are exactly the
//! query's nearest neighbours (the multi-turn case), the walk crosses the excluded region
//! instead of stopping inside it.

use crate::distance::dot;
use crate::half::dot_half;
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
    /// How many layer-0 lists hold each node, kept from the first
    /// [`Graph::reach_unreached`] on (`None` before it, and after a load: the pass counts
    /// them then). Writes to `layer0` other than through `set_neighbours` must leave it
    /// `None`.
    pub ways_in: Option<Vec<u32>>,
    /// The nodes added, or left in no list, since the last pass (while `ways_in` is kept):
    /// the only ones the next pass need look at.
    emptied: Vec<u32>,
    /// What the passes did so far.
    pub reach: ReachStats,
}

/// What the passes that give unreached nodes a way in (run by `VectorIndex::upsert_many`)
/// did over a graph's life in this process.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReachStats {
    /// Passes run.
    pub passes: usize,
    /// Nodes they gave a way in.
    pub linked: usize,
    /// Nodes they looked at (every node of the graph for a pass that counted the ways in).
    pub examined: usize,
    /// Time they took, in seconds.
    pub seconds: f64,
}

pub(crate) struct Vectors<'a> {
    /// The f32 vectors: the first `split` nodes in `head` (a file's map), the rest in `tail`.
    head: &'a [f32],
    tail: &'a [f32],
    split: usize,
    pub dim: usize,
    /// The copy [`Walk`] scores with: binary16 (half the memory read per node) or int8 (a
    /// quarter) when set, and its caller re-scores the results in f32.
    pub compact: Compact<'a>,
}

/// What a walk or a scan scores with.
#[derive(Clone, Copy)]
pub(crate) enum Compact<'a> {
    F32,
    Half(&'a [u16]),
    /// Codes by node and a scale per node.
    Int8(&'a [i8], &'a [f32]),
}

impl<'a> Vectors<'a> {
    pub fn of(full: &'a crate::full::Full, dim: usize, compact: Compact<'a>) -> Vectors<'a> {
        let (head, tail, split) = full.parts();
        Vectors { head, tail, split, dim, compact }
    }

    #[inline]
    pub fn get(&self, node: u32) -> &[f32] {
        crate::full::slice_of(self.head, self.tail, self.split, self.dim, node)
    }

    /// The similarity the walk ranks by: f32, or from the compact copy when there is one.
    #[inline]
    pub fn score(&self, q: &[f32], node: u32) -> f32 {
        let i = node as usize * self.dim;
        match self.compact {
            Compact::Half(h) => dot_half(q, &h[i..i + self.dim]),
            Compact::Int8(c, s) => s[node as usize] * crate::int8::dot_i8(q, &c[i..i + self.dim]),
            Compact::F32 => dot(q, self.get(node)),
        }
    }

    /// `q` as [`Vectors::score_query`] reads it: with its 16-bit codes when the compact copy
    /// is int8, so that the walk's products are integer sums (twice the codes per
    /// instruction of the f32 × int8 path). Only the ranking changes, by the query's
    /// rounding (at most half the query's scale per element, which `int8::error_bound`
    /// holds); callers re-score in f32.
    pub fn prepare<'q>(&self, q: &'q [f32]) -> Query<'q> {
        let i16 = match self.compact {
            Compact::Int8(..) if q.len() <= crate::int8::I16_DIM_MAX => Some(crate::int8::QueryI16::of(q)),
            _ => None,
        };
        Query { v: q, i16 }
    }

    /// [`Vectors::score`] of a prepared query.
    #[inline]
    pub fn score_query(&self, q: &Query<'_>, node: u32) -> f32 {
        match (&q.i16, self.compact) {
            (Some(q16), Compact::Int8(c, s)) => {
                let i = node as usize * self.dim;
                s[node as usize] * q16.scale * q16.dot(&c[i..i + self.dim]) as f32
            }
            _ => self.score(q.v, node),
        }
    }

    /// The similarity of two stored nodes as neighbour selection ranks it: from both int8
    /// codes when the compact copy is int8 (no f32 vector is read), else `a`'s f32 vector
    /// against `b` as [`Vectors::score`] reads it.
    #[inline]
    pub fn between(&self, a: u32, b: u32) -> f32 {
        match self.compact {
            Compact::Int8(c, s) if self.dim <= crate::int8::I16_DIM_MAX => {
                let (i, j) = (a as usize * self.dim, b as usize * self.dim);
                s[a as usize] * s[b as usize] * crate::int8::dot_codes(&c[i..i + self.dim], &c[j..j + self.dim]) as f32
            }
            _ => self.score(self.get(a), b),
        }
    }

    /// Asks the CPU to start loading what [`Vectors::score`] will read of `node`.
    #[inline(always)]
    pub(crate) fn prefetch(&self, node: u32) {
        let i = node as usize * self.dim;
        match self.compact {
            Compact::Half(h) => prefetch(h[i..].as_ptr() as *const i8, 2 * self.dim),
            Compact::Int8(c, s) => {
                // The scale too: it lies in its own array, apart from the codes, and the score
                // needs it as much as them.
                prefetch(s[node as usize..].as_ptr() as *const i8, 1);
                prefetch(c[i..].as_ptr(), self.dim)
            }
            Compact::F32 => prefetch(self.get(node).as_ptr() as *const i8, 4 * self.dim),
        }
    }
}

/// A query prepared for [`Vectors::score_query`].
pub(crate) struct Query<'q> {
    pub v: &'q [f32],
    i16: Option<crate::int8::QueryI16>,
}

/// The visited nodes of one walk: a bitset over every node, taken from a per-thread pool and
/// handed back cleared word by word (only the words the walk set), so a walk costs what it
/// visits, not the graph's size. A fresh bitset per walk was 1.25 MB to zero at ten million
/// nodes, for a build walk that visits a few thousand.
#[derive(Default)]
struct Visited {
    bits: Vec<u64>,
    /// The words this walk set from zero: what [`Visited::give_back`] clears.
    touched: Vec<u32>,
}

thread_local! {
    static VISITED_POOL: std::cell::RefCell<Vec<Visited>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Visited {
    /// A clear bitset of at least `n` bits.
    fn take(n: usize) -> Self {
        // `try_with`: a thread tearing down its locals walks with a bitset of its own.
        let pooled = VISITED_POOL.try_with(|p| p.borrow_mut().pop()).ok().flatten();
        let mut v = pooled.unwrap_or_default();
        let words = n.div_ceil(64);
        if v.bits.len() < words {
            v.bits.resize(words, 0);
        }
        v
    }

    /// Clears the words this walk set and keeps the bitset for the thread's next walk.
    fn give_back(mut self) {
        for &w in &self.touched {
            self.bits[w as usize] = 0;
        }
        self.touched.clear();
        // A thread runs one walk at a time, but a caller may hold a few at once: keep a
        // handful, drop the rest (and drop it once the thread's locals are gone).
        let _ = VISITED_POOL.try_with(|p| {
            let mut pool = p.borrow_mut();
            if pool.len() < 4 {
                pool.push(self);
            }
        });
    }

    /// Marks `i`; true when it was not marked before.
    #[inline]
    fn insert(&mut self, i: u32) -> bool {
        let (w, b) = ((i / 64) as usize, i % 64);
        let word = self.bits[w];
        if word & (1 << b) != 0 {
            return false;
        }
        if word == 0 {
            self.touched.push(w as u32);
        }
        self.bits[w] = word | (1 << b);
        true
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
            ways_in: None,
            emptied: Vec::new(),
            reach: ReachStats::default(),
        }
    }

    fn m0(&self) -> usize {
        self.m * 2
    }

    pub fn len(&self) -> usize {
        self.levels.len()
    }

    #[inline]
    pub(crate) fn neighbours(&self, node: u32, layer: u8) -> &[u32] {
        let list = if layer == 0 {
            &self.layer0[self.layer0_slots(node)]
        } else {
            let up = &self.upper[&node];
            let s = (layer as usize - 1) * self.m;
            &up[s..s + self.m]
        };
        let end = list.iter().position(|&x| x == EMPTY).unwrap_or(list.len());
        &list[..end]
    }

    /// Where `node`'s layer-0 list lies in `layer0` (`m0` slots, unused ones `EMPTY`).
    #[inline(always)]
    fn layer0_slots(&self, node: u32) -> std::ops::Range<usize> {
        let m0 = self.m0();
        node as usize * m0..(node as usize + 1) * m0
    }

    /// Asks the CPU to start loading `node`'s layer-0 list (upper layers: nothing).
    #[inline(always)]
    fn prefetch_neighbours(&self, node: u32, layer: u8) {
        if layer == 0 {
            let slots = &self.layer0[self.layer0_slots(node)];
            prefetch(slots.as_ptr() as *const i8, std::mem::size_of_val(slots));
        }
    }

    fn set_neighbours(&mut self, node: u32, layer: u8, list: &[u32]) {
        let slots = if layer == 0 {
            let range = self.layer0_slots(node);
            let slots = &mut self.layer0[range];
            if let Some(ways_in) = &mut self.ways_in {
                // New links first: a node in both lists never reads as emptied.
                list.iter().for_each(|&x| ways_in[x as usize] += 1);
                for &x in slots.iter().take_while(|&&x| x != EMPTY) {
                    ways_in[x as usize] -= 1;
                    if ways_in[x as usize] == 0 {
                        self.emptied.push(x);
                    }
                }
            }
            slots
        } else {
            let m = self.m;
            let up = self.upper.get_mut(&node).expect("node reaches this layer");
            let s = (layer as usize - 1) * m;
            &mut up[s..s + m]
        };
        slots.fill(EMPTY);
        slots[..list.len()].copy_from_slice(list);
    }

    /// Counts a node just appended (in no list yet) while the ways in are kept.
    fn added(&mut self, node: u32) {
        if let Some(ways_in) = &mut self.ways_in {
            ways_in.push(0);
            self.emptied.push(node);
        }
    }

    /// How many layer-0 lists hold each node, counted from the lists.
    pub(crate) fn count_ways_in(&self) -> Vec<u32> {
        let mut ways_in = vec![0u32; self.len()];
        for &x in &self.layer0 {
            if x != EMPTY {
                ways_in[x as usize] += 1;
            }
        }
        ways_in
    }

    /// Nodes that no layer-0 list holds, but the entry point and those `retired` names:
    /// only a scan can return them. Counted afresh from the lists.
    pub(crate) fn unreached(&self, retired: impl Fn(u32) -> bool) -> usize {
        let ways_in = self.count_ways_in();
        (0..self.len() as u32).filter(|&n| ways_in[n as usize] == 0 && n != self.entry && !retired(n)).count()
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
        self.added(node);
        if level > 0 {
            self.upper.insert(node, vec![EMPTY; level as usize * self.m]);
        }
        if self.entry == EMPTY {
            self.entry = node;
            self.max_level = level;
            return;
        }
        let q = vectors.get(node);
        let mut eps = vec![self.descend(|n| dot(q, vectors.get(n)), level)];
        let mut layer = self.max_level.min(level);
        loop {
            let found = self.search_layer(vectors, q, &eps, self.ef_construction, layer, |_| true);
            let cap = if layer == 0 { self.m0() } else { self.m };
            let (chosen, _) = self.select(vectors, &found, self.m, 0, |_, _| true);
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
                    let (kept, _) = self.select(vectors, &cands, cap, 0, |_, _| true);
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

    /// Adds the `count` nodes from `first` (== current length) whose vectors are already in
    /// `vectors`, as a batch: each new node searches the graph as it stood before the batch
    /// (on up to `threads` threads: the graph is only read) and is offered the batch's
    /// earlier nodes besides, scored directly, so nodes of one batch still link to each other
    /// as one-by-one inserts would. Then each new node's links are set, and each node that
    /// gained links keeps at most its cap by [`Graph::select`] (in parallel again). The
    /// result does not depend on `threads`. Walks and selection score with `vectors`' compact
    /// copy when it has one.
    pub fn insert_batch(&mut self, vectors: &Vectors<'_>, first: u32, count: usize, threads: usize) {
        debug_assert_eq!(first as usize, self.levels.len());
        let mut first = first;
        let mut count = count;
        while count > 0 && self.entry == EMPTY {
            self.insert(vectors, first);
            first += 1;
            count -= 1;
        }
        if count == 0 {
            return;
        }
        let batch: Vec<(u32, u8)> = (first..first + count as u32).map(|n| (n, self.random_level())).collect();
        for &(node, level) in &batch {
            self.levels.push(level);
            self.layer0.extend(std::iter::repeat_n(EMPTY, self.m0()));
            self.added(node);
            if level > 0 {
                self.upper.insert(node, vec![EMPTY; level as usize * self.m]);
            }
        }
        // 1. Each new node's links, by layer (top first), from the graph as it stood.
        let plans: Vec<Vec<Vec<u32>>> = {
            let graph = &*self;
            parallel_map(&batch, threads, |&(node, level)| graph.plan(vectors, node, level, &batch))
        };
        let mut gained: Vec<(u8, u32, u32)> = Vec::new();
        for (&(node, level), plan) in batch.iter().zip(&plans) {
            for (layer, chosen) in (0..=level).rev().zip(plan) {
                self.set_neighbours(node, layer, chosen);
                gained.extend(chosen.iter().map(|&nb| (layer, nb, node)));
            }
        }
        // 2. The nodes they link to link back; a list that overflows admits the batch's
        //    links by `Graph::admit`, once for the whole batch.
        gained.sort_unstable();
        let groups: Vec<&[(u8, u32, u32)]> = gained.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)).collect();
        let lists: Vec<Vec<u32>> = {
            let graph = &*self;
            parallel_map(&groups, threads, |group| {
                let (layer, nb) = (group[0].0, group[0].1);
                let cap = if layer == 0 { graph.m0() } else { graph.m };
                let old = graph.neighbours(nb, layer);
                let mut list = old.to_vec();
                list.extend(group.iter().map(|g| g.2).filter(|n| !old.contains(n)));
                if list.len() <= cap {
                    return list;
                }
                graph.admit(vectors, nb, &list, old.len(), cap)
            })
        };
        for (group, list) in groups.iter().zip(&lists) {
            self.set_neighbours(group[0].1, group[0].0, list);
        }
        for &(node, level) in &batch {
            if level > self.max_level {
                self.max_level = level;
                self.entry = node;
            }
        }
    }

    /// Gives every layer-0 node that no layer-0 link reaches (but the entry point and nodes
    /// `retired` names) a way in, and returns how many it linked. The way in is a slot in the
    /// list of one of the node's own links, the nearest that has one to give: a free slot,
    /// or else the slot of a link that keeps another way in after losing it, chosen among
    /// those the orphan itself links to when it can (the host then still reaches that link
    /// through the orphan, one step further), else the one with the most ways in.
    ///
    /// Batches admit new links by a heuristic that may drop a node from every list that
    /// held it (`Graph::admit`): at 1M fitted points 3,374 nodes were left unreachable (a
    /// walk could never return them, only a scan). Free slots alone left 2,875 of them,
    /// whose neighbours' lists were full ("issue 41, eighth part"); this pass leaves none
    /// (bench/README.md, "issue 41, ninth part").
    ///
    /// The first pass counts every node's ways in (23–33 ms at 567k–577k nodes, "ninth
    /// part"); the graph keeps the counts from then on, so a later pass looks only at the
    /// nodes added or left in no list since the one before, and at those it could not link
    /// (`ReachStats::examined`).
    pub(crate) fn reach_unreached(&mut self, vectors: &Vectors<'_>, retired: impl Fn(u32) -> bool) -> usize {
        let started = std::time::Instant::now();
        let m0 = self.m0();
        let emptied = std::mem::take(&mut self.emptied);
        // Taken out while the pass writes lists: it counts its own changes below.
        let (mut ways_in, candidates, examined) = match self.ways_in.take() {
            Some(ways_in) => {
                let mut candidates = emptied;
                // In node order, as a pass over every node would take them.
                candidates.sort_unstable();
                candidates.dedup();
                let examined = candidates.len();
                (ways_in, candidates, examined)
            }
            None => {
                let ways_in = self.count_ways_in();
                let none = (0..self.len() as u32).filter(|&n| ways_in[n as usize] == 0).collect();
                (ways_in, none, self.len())
            }
        };
        let mut linked = 0;
        for &node in &candidates {
            if ways_in[node as usize] > 0 || node == self.entry || retired(node) {
                continue;
            }
            let own = self.neighbours(node, 0);
            let mut hosts: Vec<Scored> = own.iter().map(|&h| Scored(vectors.between(node, h), h)).collect();
            hosts.sort_unstable_by(|a, b| b.cmp(a));
            for &Scored(_, host) in &hosts {
                let mut list = self.neighbours(host, 0).to_vec();
                if list.len() < m0 {
                    list.push(node);
                } else {
                    let spare = |(_, t): &(usize, &u32)| ways_in[**t as usize] >= 2;
                    let through_node = || list.iter().enumerate().rev().filter(spare).find(|(_, t)| own.contains(t));
                    let most = || {
                        list.iter()
                            .enumerate()
                            .filter(spare)
                            .max_by_key(|(_, t)| (ways_in[**t as usize], std::cmp::Reverse(**t)))
                    };
                    let Some((slot, &out)) = through_node().or_else(most) else {
                        continue;
                    };
                    list[slot] = node;
                    ways_in[out as usize] -= 1;
                }
                ways_in[node as usize] += 1;
                self.set_neighbours(host, 0, &list);
                linked += 1;
                break;
            }
        }
        // Those still unreached (no own link had a slot to give, or the entry point, which a
        // later node may replace) are looked at again next time, as a pass over every node
        // would.
        self.emptied.extend(candidates.iter().filter(|&&n| ways_in[n as usize] == 0 && !retired(n)));
        self.ways_in = Some(ways_in);
        self.reach.passes += 1;
        self.reach.linked += linked;
        self.reach.examined += examined;
        self.reach.seconds += started.elapsed().as_secs_f64();
        linked
    }

    /// The links a batch node chooses at each of its layers (its top layer first): from a
    /// walk of the graph as it stood before the batch, and from the batch's earlier nodes.
    ///
    /// The walk goes half the construction breadth first, and widens to all of it (going on
    /// from where it stopped) only when the heuristic keeps fewer than `m / 4` of what it
    /// found: a node whose candidates all lie in one direction, as among near-copies, where
    /// a narrow walk finds only the node's own cluster (the copies generator's 1M graph at
    /// breadth 64 throughout held a 5th-percentile recall of 0.40). With [`Graph::admit`], a
    /// 1M fitted build linked in 156 s against 277 s, recall@10 0.986 → 0.988; on 1M
    /// jittered copies 125 → 132 s, p5 0.90 → 1.00. It left 3,374 fitted nodes that no link
    /// reached, against 692 (bench/README.md, "issue 41, eighth part"), which
    /// [`Graph::reach_unreached`] now links.
    fn plan(&self, vectors: &Vectors<'_>, node: u32, level: u8, batch: &[(u32, u8)]) -> Vec<Vec<u32>> {
        let q = vectors.get(node);
        let prepared = vectors.prepare(q);
        // Descended with the scores the walk then compares the entry point with (the compact
        // copy's), not f32 ones: one scale for every node the plan ranks.
        let mut eps = vec![self.descend(|n| vectors.score_query(&prepared, n), level)];
        let narrow = (self.ef_construction / 2).max(self.m);
        let mut plan = Vec::with_capacity(level as usize + 1);
        for layer in (0..=level).rev() {
            let earlier: Vec<Scored> = batch
                .iter()
                .take_while(|b| b.0 < node)
                .filter(|b| b.1 >= layer)
                .map(|b| Scored(vectors.score_query(&prepared, b.0), b.0))
                .collect();
            let mut walk = (layer <= self.max_level).then(|| Walk::new(self, vectors, q, layer, &eps, |_: u32| true));
            let mut breadth = narrow;
            let chosen = loop {
                let walked = match walk.as_mut() {
                    Some(w) => {
                        w.run(breadth);
                        w.results(breadth)
                    }
                    None => Vec::new(),
                };
                let mut found = walked.clone();
                found.extend(earlier.iter().copied());
                found.sort_by(|a, b| b.cmp(a));
                found.truncate(breadth);
                let (chosen, diverse) = self.select(vectors, &found, self.m, self.m, |_, _| true);
                if diverse >= self.m / 4 || breadth >= self.ef_construction {
                    if walk.is_some() {
                        // The next layer's walk starts from the graph's nodes only: the
                        // batch's are not linked yet.
                        eps = walked;
                    }
                    break chosen;
                }
                breadth = self.ef_construction;
            };
            plan.push(chosen);
        }
        plan
    }

    /// The links `nb` keeps when `list` (its `old` links, then the batch's new ones) holds
    /// more than `cap`: [`Graph::select`] with only the comparisons a new link takes part in.
    /// A new link is kept if `nb` is closer to it than every kept link nearer `nb` is; an old
    /// link stays unless a kept new link is closer to it than `nb` is; over `cap`, the
    /// farthest go; under `m`, the nearest passed over fill back in.
    ///
    /// The old links are not compared with each other again (one appended while the list had
    /// room never was). Re-running the heuristic over the whole list compared every pair: at
    /// 300k fitted points 610 million pairs, more than the walks scored (733 million), against
    /// 109 million this way (an instrumented build; bench/README.md, "issue 41, eighth part").
    pub(crate) fn admit(&self, vectors: &Vectors<'_>, nb: u32, list: &[u32], old: usize, cap: usize) -> Vec<u32> {
        let mut cands: Vec<Scored> = list.iter().map(|&x| Scored(vectors.between(nb, x), x)).collect();
        cands.sort_by(|a, b| b.cmp(a));
        let is_new = |x: u32| list[old..].contains(&x);
        self.select(vectors, &cands, cap, self.m, |c, k| is_new(c) || is_new(k)).0
    }

    /// The neighbour-selection heuristic: keep a candidate only if it is closer to the base
    /// than to every neighbour already kept (spreads links across directions); then, while
    /// fewer than `fill_to` are kept, the nearest candidates it passed over (Malkov &
    /// Yashunin's "keepPrunedConnections"). A candidate is compared only with the kept links
    /// `compared(candidate, kept)` names (every one, but in [`Graph::admit`]). Returns the
    /// links and how many the heuristic kept before the fill.
    ///
    /// Batches fill to `m`; one-by-one inserts (graphs under [`crate::BATCH_FROM`] nodes) fill
    /// nothing, as they always did. Among near-copies every candidate is about as close to
    /// a kept one as to the base, so the heuristic alone keeps a link or two: the 1M
    /// jittered-copies graph had a mean of 4.6 layer-0 links, a median of 3, and 21,788 nodes
    /// that no link reached (a walk can never return them); its 5th-percentile query recall
    /// was 0.70. Filled to `m`: at least 16 links, 74 unreached, p5 0.90 at the same search
    /// time (bench/README.md, "issue 41, sixth part").
    fn select(
        &self,
        vectors: &Vectors<'_>,
        sorted: &[Scored],
        m: usize,
        fill_to: usize,
        compared: impl Fn(u32, u32) -> bool,
    ) -> (Vec<u32>, usize) {
        let mut kept: Vec<u32> = Vec::with_capacity(m);
        for c in sorted {
            if kept.len() >= m {
                break;
            }
            if kept.iter().filter(|&&k| compared(c.1, k)).all(|&k| vectors.between(c.1, k) < c.0) {
                kept.push(c.1);
            }
        }
        let diverse = kept.len();
        let fill_to = fill_to.min(m);
        if kept.len() < fill_to {
            let pruned: Vec<u32> =
                sorted.iter().map(|c| c.1).filter(|n| !kept.contains(n)).take(fill_to - kept.len()).collect();
            kept.extend(pruned);
        }
        (kept, diverse)
    }

    fn greedy(&self, score: &impl Fn(u32) -> f32, mut ep: Scored, layer: u8) -> Scored {
        loop {
            let mut moved = false;
            for &nb in self.neighbours(ep.1, layer) {
                let s = Scored(score(nb), nb);
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

    /// Best-first search of one layer: up to `ef` nodes that pass `allowed`, best first
    /// (construction uses it with every node allowed).
    pub fn search_layer(
        &self,
        vectors: &Vectors<'_>,
        q: &[f32],
        entry: &[Scored],
        ef: usize,
        layer: u8,
        allowed: impl Fn(u32) -> bool,
    ) -> Vec<Scored> {
        let mut walk = Walk::new(self, vectors, q, layer, entry, allowed);
        walk.run(ef);
        walk.results(ef)
    }

    /// Greedy descent through the upper layers: the entry point of a layer-0 walk.
    pub fn entry_for(&self, vectors: &Vectors<'_>, q: &[f32]) -> Option<Scored> {
        if self.entry == EMPTY {
            return None;
        }
        Some(self.descend(|n| dot(q, vectors.get(n)), 0))
    }

    /// Greedy descent from the entry point through the layers above `to`: the node a walk of
    /// layer `to` (or of the node's top layer, when it is below the graph's) starts from.
    /// `score` gives a node's similarity to the query.
    fn descend(&self, score: impl Fn(u32) -> f32, to: u8) -> Scored {
        let mut ep = Scored(score(self.entry), self.entry);
        let mut layer = self.max_level;
        while layer > to {
            ep = self.greedy(&score, ep, layer);
            layer -= 1;
        }
        ep
    }
}

/// A best-first walk of one layer that can be widened: [`Walk::run`] with a larger `ef`
/// goes on from where the last run stopped — nothing already scored is scored again, and
/// the nodes a narrower run passed over are taken up again — so widening costs only the
/// extra ground, not a second walk from the top.
///
/// The walk explores the `ef` nodes nearest the query whether they are allowed or not
/// (excluded nodes guide it), as FAISS's filtered HNSW does: exclusions scattered over the
/// corpus cost the walk nothing extra. Only allowed nodes become results; when exclusions
/// crowd the neighbourhood, [`Walk::allowed_near`] says so and the caller widens.
pub(crate) struct Walk<'a, F> {
    graph: &'a Graph,
    vectors: &'a Vectors<'a>,
    q: Query<'a>,
    layer: u8,
    allowed: F,
    visited: Visited,
    candidates: BinaryHeap<Scored>,
    /// The best `ef` nodes taken so far, allowed or not: the walk stops when no candidate
    /// can enter it.
    frontier: BinaryHeap<Worst>,
    /// Allowed nodes taken (best first on [`Walk::results`]).
    found: Vec<Scored>,
    /// Scored nodes not taken yet (not better than the frontier at the time).
    passed: Vec<Scored>,
    /// Taken nodes pushed out of the frontier: they come back into it when it widens.
    evicted: Vec<Scored>,
    /// Unvisited neighbours of the node being expanded (reused: no allocation per step).
    fresh: Vec<u32>,
    ef: usize,
    /// Similarity computations done.
    pub visits: usize,
    /// How many best allowed nodes [`Walk::settled`] watches (0: none).
    watch: usize,
    /// The best `watch` allowed nodes taken so far, worst on top.
    best: BinaryHeap<Worst>,
    /// `visits` when one of them was last replaced or added.
    last_gain: usize,
}

impl<F> Drop for Walk<'_, F> {
    fn drop(&mut self) {
        std::mem::take(&mut self.visited).give_back();
    }
}

impl<'a, F: Fn(u32) -> bool> Walk<'a, F> {
    pub fn new(
        graph: &'a Graph,
        vectors: &'a Vectors<'a>,
        q: &'a [f32],
        layer: u8,
        entry: &[Scored],
        allowed: F,
    ) -> Self {
        let mut walk = Walk {
            graph,
            vectors,
            q: vectors.prepare(q),
            layer,
            allowed,
            visited: Visited::take(graph.len()),
            candidates: BinaryHeap::new(),
            frontier: BinaryHeap::new(),
            found: Vec::new(),
            passed: Vec::new(),
            evicted: Vec::new(),
            fresh: Vec::new(),
            ef: 0,
            visits: 0,
            watch: 0,
            best: BinaryHeap::new(),
            last_gain: 0,
        };
        for &e in entry {
            if walk.visited.insert(e.1) {
                walk.passed.push(e);
            }
        }
        walk
    }

    /// Walks until the frontier holds `ef` nodes and no candidate can improve it (or the
    /// reachable graph is exhausted). Call again with a larger `ef` to widen.
    pub fn run(&mut self, ef: usize) {
        self.ef = self.ef.max(ef);
        for s in std::mem::take(&mut self.evicted) {
            self.keep(s);
        }
        for s in std::mem::take(&mut self.passed) {
            self.offer(s);
        }
        let graph = self.graph;
        while let Some(c) = self.candidates.pop() {
            if self.frontier.len() >= self.ef && self.frontier.peek().is_some_and(|w| c < w.0) {
                // Not expanded: a wider run starts here.
                self.candidates.push(c);
                break;
            }
            // Every unvisited neighbour (layer 0 holds 2·m links, whatever m is), prefetched
            // before any is scored.
            let mut fresh = std::mem::take(&mut self.fresh);
            fresh.clear();
            for &nb in graph.neighbours(c.1, self.layer) {
                if self.visited.insert(nb) {
                    self.vectors.prefetch(nb);
                    fresh.push(nb);
                }
            }
            self.visits += fresh.len();
            // The list the next expansion most likely reads (unless a fresh node beats it),
            // loading while these are scored.
            if let Some(next) = self.candidates.peek() {
                graph.prefetch_neighbours(next.1, self.layer);
            }
            for &nb in &fresh {
                self.offer(Scored(self.vectors.score_query(&self.q, nb), nb));
            }
            self.fresh = fresh;
        }
    }

    /// Takes a newly scored node if it can enter the frontier; otherwise keeps it for a
    /// wider run.
    #[inline]
    fn offer(&mut self, s: Scored) {
        if self.frontier.len() >= self.ef && self.frontier.peek().is_some_and(|w| s <= w.0) {
            self.passed.push(s);
            return;
        }
        self.candidates.push(s);
        if (self.allowed)(s.1) {
            self.found.push(s);
            if self.watch > 0 && (self.best.len() < self.watch || self.best.peek().is_some_and(|w| s > w.0)) {
                self.best.push(Worst(s));
                if self.best.len() > self.watch {
                    self.best.pop();
                }
                self.last_gain = self.visits;
            }
        }
        self.keep(s);
    }

    /// Puts a taken node into the frontier, pushing its worst node out when full.
    #[inline]
    fn keep(&mut self, s: Scored) {
        self.frontier.push(Worst(s));
        if self.frontier.len() > self.ef {
            // Still among the candidates (or expanded already): only the frontier lost it.
            let out = self.frontier.pop().expect("non-empty").0;
            self.evicted.push(out);
        }
    }

    /// Watches the best `k` allowed nodes for [`Walk::settled`]; call before the first run.
    pub fn watch(&mut self, k: usize) {
        debug_assert_eq!(self.visits, 0, "watch before the walk runs");
        self.watch = k;
    }

    /// Whether the watched best nodes last changed within the first `settled_by` of the
    /// walk's scoring: a walk that still found better results later stopped in a crowd of
    /// near-equal points, and a wider run finds more of them (`search.rs`, `SETTLED_BY`).
    pub fn settled(&self, settled_by: f64) -> bool {
        self.last_gain as f64 <= settled_by * self.visits as f64
    }

    /// Allowed nodes among the frontier: how much of the query's neighbourhood the walk may
    /// return. Far below `ef` means exclusions crowd the neighbourhood.
    pub fn allowed_near(&self) -> usize {
        match self.frontier.peek() {
            Some(w) if self.frontier.len() >= self.ef => self.found.iter().filter(|s| **s >= w.0).count(),
            _ => self.found.len(),
        }
    }

    /// Nodes of the frontier that `pred` holds for.
    pub fn frontier_count(&self, pred: impl Fn(u32) -> bool) -> usize {
        self.frontier.iter().filter(|w| pred(w.0 .1)).count()
    }

    /// Whether the walk ran out of graph before its frontier filled.
    pub fn exhausted(&self) -> bool {
        self.frontier.len() < self.ef
    }

    /// Allowed nodes taken, best first (at most `limit`).
    pub fn results(&self, limit: usize) -> Vec<Scored> {
        let mut out = self.found.clone();
        let by_score = |a: &Scored, b: &Scored| b.cmp(a);
        if limit < out.len() {
            out.select_nth_unstable_by(limit, by_score);
            out.truncate(limit);
        }
        out.sort_by(by_score);
        out
    }
}

/// `f` over `items` on up to `threads` scoped threads, in order. Each thread takes the next
/// few items as it finishes its last, so that one slow share does not leave a core idle. With
/// contiguous halves a 1M fitted build used 154–160% of 2 cores (its generator's one-core
/// share included), 167–172% this way; linking took 156 s against 164 s.
fn parallel_map<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if threads <= 1 || items.len() < 16 {
        return items.iter().map(f).collect();
    }
    const STEP: usize = 4;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done: Vec<(usize, Vec<R>)> = std::thread::scope(|s| {
        let (f, next) = (&f, &next);
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(move || {
                    let mut out = Vec::new();
                    loop {
                        let at = next.fetch_add(STEP, std::sync::atomic::Ordering::Relaxed);
                        if at >= items.len() {
                            return out;
                        }
                        out.push((at, items[at..(at + STEP).min(items.len())].iter().map(f).collect()));
                    }
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("an index worker panicked")).collect()
    });
    done.sort_unstable_by_key(|d| d.0);
    done.into_iter().flat_map(|d| d.1).collect()
}

/// Asks the CPU to start loading the `bytes` from `p` (a vector the walk is about to
/// score), a cache line at a time: a compact vector spans a few lines (384 int8 codes: six
/// when they start on a line, seven when not, as in a heap block that starts 16 bytes into
/// one), and a walk scores a node's unvisited neighbours right after asking for all of them.
#[inline(always)]
fn prefetch(p: *const i8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let (skip, lines) = lines_of(p as usize, bytes);
        let first = p.wrapping_sub(skip);
        for line in 0..lines {
            // SAFETY: prefetching is a hint that never faults, whatever the address (here
            // a line that holds some of the bytes).
            #[allow(unused_unsafe)]
            unsafe {
                _mm_prefetch(first.wrapping_add(line * CACHE_LINE), _MM_HINT_T0)
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, bytes);
}

// Read only where `prefetch` does anything (and by the tests).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const CACHE_LINE: usize = 64;

/// The cache lines that hold `bytes` bytes from address `at`: how far `at` lies into the
/// first, and how many lines.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline(always)]
fn lines_of(at: usize, bytes: usize) -> (usize, usize) {
    let skip = at % CACHE_LINE;
    (skip, (skip + bytes).div_ceil(CACHE_LINE))
}

#[cfg(test)]
mod walk_memory_tests {
    use super::{lines_of, Visited};

    #[test]
    fn a_prefetch_asks_for_every_line_its_bytes_touch() {
        // 384 int8 codes: six lines from a line's start, seven from 16 bytes into one (where
        // a large heap block starts), one more line than asking from the start gave.
        assert_eq!(lines_of(4096, 384), (0, 6));
        assert_eq!(lines_of(4096 + 16, 384), (16, 7));
        // A scale (one byte asked for) and a 128-byte link list across a line's end.
        assert_eq!(lines_of(4096 + 63, 1), (63, 1));
        assert_eq!(lines_of(4096 + 48, 128), (48, 3));
        assert_eq!(lines_of(4096, 0), (0, 0));
    }

    #[test]
    fn a_bitset_handed_back_comes_out_of_the_pool_clear() {
        let mut v = Visited::take(1_000);
        for i in [0, 1, 63, 64, 500, 999] {
            assert!(v.insert(i));
            assert!(!v.insert(i), "{i} marked twice");
        }
        let kept = v.bits.as_ptr();
        v.give_back();
        // The same thread's next walk gets that very bitset again, cleared.
        let mut again = Visited::take(1_000);
        assert_eq!(again.bits.as_ptr(), kept, "the pool did not hand the bitset back");
        assert!(again.bits.iter().all(|&w| w == 0), "bits of the last walk were left set");
        for i in [0, 1, 63, 64, 500, 999] {
            assert!(again.insert(i), "{i} came back marked");
        }
        again.give_back();
        // A larger graph's walk gets it grown, still clear.
        let mut grown = Visited::take(5_000);
        assert!(grown.bits.len() >= 5_000usize.div_ceil(64));
        assert!(grown.bits.iter().all(|&w| w == 0));
        assert!(grown.insert(4_999));
        grown.give_back();
    }
}
