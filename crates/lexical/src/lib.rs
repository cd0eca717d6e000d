//! BM25 over chunk titles and texts: the lexical half of hybrid retrieval, finding what
//! users type verbatim (error codes, command and product names, form numbers) that an
//! embedding blurs.
//!
//! Terms: lower-cased runs of letters and digits, English stop words dropped and the rest
//! stemmed (Snowball English); runs of CJK characters become overlapping character bigrams
//! (a lone character stays a unigram), so Chinese needs no dictionary. Scoring is Lucene's
//! BM25 (k1 = 1.2, b = 0.75, idf = ln(1 + (N − n + 0.5)/(n + 0.5))).
//!
//! A search narrowed to one tenant of a store that holds others scores with that tenant's
//! statistics (its N, its document frequencies, its average length), so its scores — and the
//! ranking — are those of an index of its chunks alone: nothing another tenant ingests can
//! move them (no oracle for another tenant's vocabulary).
//!
//! The search honours the same contract as the vector search ([`ragctx_core::VectorStore`]):
//! excluded chunks never come back and never take a slot; with grouping, `limit` documents
//! come back whenever that many match, none with more chunks than its quota.

use ragctx_core::text::is_cjk;
use ragctx_core::{tenant_of, Chunk, ChunkId, DocumentId, ExclusionSet, FastMap, Grouping, LexicalRequest};
use ragctx_index::{DocumentPositions, MetadataIndex, PositionBits, PreparedExclusions};
use rust_stemmers::{Algorithm, Stemmer};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

mod file;

/// The index of a store, built on first use, brought forward whenever the store's
/// generation (moved by every write) passes the one it reflects, and kept in a file beside
/// the store so the next process loads it instead. Brought forward by the store's
/// [`Changes`] since that generation when the store still has them (the cost of the write,
/// not of the corpus), else rebuilt from the committed chunks. The file is rewritten once
/// the changes applied since it was written pass an eighth of the index or 2,000 chunks
/// ([`rewrite_due`]): an older file is still used, with the changes since it. Derived from the committed
/// chunks and keyed by their generation, it can never disagree with them after a crash: a
/// missing or torn file is rebuilt.
#[derive(Default)]
pub struct Cached {
    slot: Mutex<Option<Held>>,
    file: Option<PathBuf>,
}

struct Held {
    generation: u64,
    index: Arc<LexicalIndex>,
    /// Chunks changed since the file was written (or since the build, without a file).
    unsaved: usize,
}

/// An index file is rewritten when the changes applied since it was written pass this share
/// of the index's chunks ([`rewrite_due`]); a rebuild replaces the index when retired entries
/// pass [`REBUILD_DEAD_SHARE`].
pub const MERGE_SHARE: usize = 8;
/// … or pass this many chunks, whichever comes first: every process that opens the store
/// applies the changes since the file again (a graph insert each for the vector index, about
/// 1 ms at a million points), so their number is bounded, not only their share.
pub const MERGE_AT_MOST: usize = 2_000;

/// Whether an index file `unsaved` changes behind, of an index of `len` chunks, is due to
/// be rewritten (the store's vector index file follows the same rule).
pub fn rewrite_due(unsaved: usize, len: usize) -> bool {
    unsaved > (len / MERGE_SHARE).min(MERGE_AT_MOST)
}
/// Share of retired entries past which the index is rebuilt from the live chunks.
pub const REBUILD_DEAD_SHARE: f64 = 0.25;

/// How an index reached its generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Brought {
    /// Held in memory at that generation.
    Held,
    /// Read from the file, written at that generation.
    Loaded,
    /// Brought forward by this many changed chunks.
    Forward(usize),
    /// Built from every chunk.
    Rebuilt,
}

impl Cached {
    /// Kept in memory and in `path`.
    pub fn with_file(path: &Path) -> Cached {
        Cached { slot: Mutex::default(), file: Some(path.to_owned()) }
    }

    /// The generation of the index file, when there is a whole-looking one (read from its
    /// head only): the store keeps its changes since then.
    pub fn file_generation(&self) -> Option<u64> {
        self.file.as_deref().and_then(file::generation)
    }

    /// The index at `generation`: the one held, else the file's, brought forward with
    /// `changes_since(their generation)` when that gives the changes (`None`: the store no
    /// longer has them), else built from `chunks()` (and saved). Callers search while
    /// holding off writers, so the generation matches the chunks read.
    pub fn get<E>(
        &self,
        generation: u64,
        changes_since: impl FnOnce(u64) -> Result<Option<Changes>, E>,
        chunks: impl FnOnce() -> Result<Vec<Chunk>, E>,
    ) -> Result<Arc<LexicalIndex>, E> {
        self.get_traced(generation, changes_since, chunks).map(|(ix, _)| ix)
    }

    /// [`Cached::get`], saying how the index was reached (tests and benchmarks).
    pub fn get_traced<E>(
        &self,
        generation: u64,
        changes_since: impl FnOnce(u64) -> Result<Option<Changes>, E>,
        chunks: impl FnOnce() -> Result<Vec<Chunk>, E>,
    ) -> Result<(Arc<LexicalIndex>, Brought), E> {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = slot.as_ref().filter(|h| h.generation == generation) {
            return Ok((held.index.clone(), Brought::Held));
        }
        // A base to bring forward: the index held, else the file's (an older generation). The
        // changes since it are asked for first: without them the base is not worth a copy.
        let held = slot.take().filter(|h| h.generation < generation);
        let base_generation = match &held {
            Some(h) => Some(h.generation),
            None => self.file.as_deref().and_then(file::generation).filter(|&g| g <= generation),
        };
        let changes = match base_generation {
            Some(g) if g < generation => changes_since(g)?,
            Some(_) => Some(Changes::default()),
            None => None,
        };
        let forward = match changes {
            Some(changes) => {
                let base = match held {
                    Some(h) => {
                        Some((h.generation, Arc::try_unwrap(h.index).unwrap_or_else(|a| (*a).clone()), h.unsaved))
                    }
                    None => self.file.as_deref().and_then(|p| file::load(p, generation)).map(|(g, ix)| (g, ix, 0)),
                };
                match base {
                    // The file changed between its head and its read: rebuild.
                    Some((from, _, _)) if Some(from) != base_generation => None,
                    Some((from, ix, unsaved)) if from == generation => Some((ix, unsaved, Brought::Loaded)),
                    // More changes than half the index: a rebuild reads fewer chunks.
                    Some((_, mut ix, unsaved)) if changes.len() <= ix.len() / 2 + 64 => {
                        ix.apply(&changes);
                        let n = changes.len();
                        (ix.dead_share() <= REBUILD_DEAD_SHARE).then_some((ix, unsaved + n, Brought::Forward(n)))
                    }
                    _ => None,
                }
            }
            None => None,
        };
        let (ix, mut unsaved, brought) = match forward {
            Some(f) => f,
            None => {
                let ix = LexicalIndex::build(&chunks()?);
                let all = ix.len() + 1;
                (ix, all, Brought::Rebuilt)
            }
        };
        if let Some(path) = &self.file {
            // A file that cannot be written costs the next process more changes to apply,
            // or a rebuild, nothing more.
            if rewrite_due(unsaved, ix.len()) && file::save(&ix, path, generation).is_ok() {
                unsaved = 0;
            }
        }
        let ix = Arc::new(ix);
        *slot = Some(Held { generation, index: ix.clone(), unsaved });
        Ok((ix, brought))
    }
}

const K1: f32 = 1.2;
const B: f32 = 0.75;

/// Lucene's English stop words.
const STOP: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of",
    "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with",
];

/// Turns text into terms, remembering the stems of words it has seen.
pub struct Analyzer {
    stemmer: Stemmer,
    stems: HashMap<String, String>,
}

impl Default for Analyzer {
    fn default() -> Self {
        Analyzer { stemmer: Stemmer::create(Algorithm::English), stems: HashMap::new() }
    }
}

impl Analyzer {
    /// Appends the terms of `text` to `out`, in order (repeats kept).
    pub fn terms(&mut self, text: &str, out: &mut Vec<String>) {
        let mut word = String::new();
        let mut cjk: Vec<char> = Vec::new();
        for c in text.chars().chain(std::iter::once(' ')) {
            if is_cjk(c) {
                self.flush_word(&mut word, out);
                cjk.push(c);
            } else if c.is_alphanumeric() {
                flush_cjk(&mut cjk, out);
                word.extend(c.to_lowercase());
            } else {
                self.flush_word(&mut word, out);
                flush_cjk(&mut cjk, out);
            }
        }
    }

    fn flush_word(&mut self, word: &mut String, out: &mut Vec<String>) {
        if word.is_empty() {
            return;
        }
        if !STOP.contains(&word.as_str()) {
            let stem = match self.stems.get(word.as_str()) {
                Some(s) => s.clone(),
                None => {
                    let s = self.stemmer.stem(word).into_owned();
                    // Bounded: a corpus of random strings must not grow it without end.
                    if self.stems.len() < 1 << 20 {
                        self.stems.insert(word.clone(), s.clone());
                    }
                    s
                }
            };
            out.push(stem);
        }
        word.clear();
    }
}

fn flush_cjk(run: &mut Vec<char>, out: &mut Vec<String>) {
    match run.len() {
        0 => {}
        1 => out.push(run[0].to_string()),
        _ => out.extend(run.windows(2).map(|w| w.iter().collect::<String>())),
    }
    run.clear();
}

/// One chunk as the index keeps it.
#[derive(Clone)]
struct Entry {
    chunk: ChunkId,
    document: DocumentId,
    weight: f32,
    /// Terms of title and text.
    length: u32,
}

/// What changed in a store since a generation the index was built at: the chunks written
/// (new or replacing one of the same id) and the ids removed. What [`Cached`] asks the
/// store for, so an index follows a write in the time of the write's own chunks.
#[derive(Clone, Debug, Default)]
pub struct Changes {
    pub chunks: Vec<Chunk>,
    pub removed: Vec<ChunkId>,
}

impl Changes {
    /// Chunks written and removed.
    pub fn len(&self) -> usize {
        self.chunks.len() + self.removed.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An inverted index over a set of chunks. Chunks added later are appended; a replaced or
/// removed chunk's entry is retired (never returned, and left out of every statistic, so a
/// search scores exactly as on an index built anew from the live chunks) until a rebuild.
#[derive(Clone)]
pub struct LexicalIndex {
    /// Positions by chunk and by document, to resolve exclusions (thousands of ids looked
    /// up when a session's set is first resolved). Live entries only.
    by_chunk: FastMap<ChunkId, u32>,
    by_document: FastMap<DocumentId, Vec<u32>>,
    terms: HashMap<String, u32>,
    /// Per term: (entry, term frequency), entries ascending.
    postings: Vec<Vec<(u32, u32)>>,
    entries: Vec<Entry>,
    /// Entries retired by a later write: still in the postings, skipped everywhere.
    dead: Vec<bool>,
    /// Live entries and their terms in all.
    live: usize,
    total_length: u64,
    average_length: f32,
    /// Exclusion sets resolved to blocked positions, kept and extended across searches
    /// (made anew when the index changes).
    prepared: PreparedExclusions<Vec<bool>>,
    /// Metadata and tenants by position, for the filter (resolved before scoring).
    meta: MetadataIndex,
    /// BM25's statistics per tenant, for searches narrowed to one.
    tenants: TenantStats,
}

/// Each entry's tenant (an ordinal) and each tenant's live entries and terms: what a
/// tenant's own N, document frequencies and average length are counted from.
#[derive(Clone, Default)]
struct TenantStats {
    ordinal: FastMap<String, u32>,
    of_entry: Vec<u32>,
    /// Per ordinal: live entries and their terms in all.
    sizes: Vec<(usize, u64)>,
}

impl TenantStats {
    /// Counts entry `e` (of `length` terms, in `tenant`) in (`live`, as appended) or out
    /// (retired).
    fn count(&mut self, tenant: &str, e: usize, length: u32, live: bool) {
        let t = match self.ordinal.get(tenant) {
            Some(&t) => t,
            None => {
                let t = self.sizes.len() as u32;
                self.ordinal.insert(tenant.to_owned(), t);
                self.sizes.push((0, 0));
                t
            }
        };
        if e == self.of_entry.len() {
            self.of_entry.push(t);
        }
        let size = &mut self.sizes[t as usize];
        if live {
            *size = (size.0 + 1, size.1 + length as u64);
        } else {
            *size = (size.0 - 1, size.1 - length as u64);
        }
    }

    /// A tenant's N and average length.
    fn of(&self, t: u32) -> (usize, f32) {
        let (n, total) = self.sizes[t as usize];
        (n, average_length(total, n))
    }
}

/// Terms per entry, at least 1 (an empty index's too).
fn average_length(total: u64, entries: usize) -> f32 {
    if entries == 0 {
        1.0
    } else {
        (total as f32 / entries as f32).max(1.0)
    }
}

impl DocumentPositions for LexicalIndex {
    fn positions_of(&self, document_id: &str) -> &[u32] {
        self.by_document.get(document_id).map(Vec::as_slice).unwrap_or_default()
    }
}

/// A lexical hit: the chunk's position in the index and its BM25 score.
pub type Scored = (usize, f32);

impl Default for LexicalIndex {
    fn default() -> Self {
        LexicalIndex {
            by_chunk: FastMap::default(),
            by_document: FastMap::default(),
            terms: HashMap::new(),
            postings: Vec::new(),
            entries: Vec::new(),
            dead: Vec::new(),
            live: 0,
            total_length: 0,
            average_length: 1.0,
            prepared: PreparedExclusions::default(),
            meta: MetadataIndex::default(),
            tenants: TenantStats::default(),
        }
    }
}

impl LexicalIndex {
    /// Indexes title and text of each chunk.
    pub fn build<'a>(chunks: impl IntoIterator<Item = &'a Chunk>) -> LexicalIndex {
        let mut ix = LexicalIndex::default();
        let mut analyzer = Analyzer::default();
        for chunk in chunks {
            ix.append(&mut analyzer, chunk);
        }
        ix.average_length = average_length(ix.total_length, ix.live);
        ix
    }

    /// Follows a write: the changed chunks' old entries are retired and their new ones
    /// appended, removed ones retired. The result searches as [`LexicalIndex::build`] of the
    /// live chunks would.
    pub fn apply(&mut self, changes: &Changes) {
        for id in changes.removed.iter().chain(changes.chunks.iter().map(|c| &c.id)) {
            self.retire(id);
        }
        let mut analyzer = Analyzer::default();
        for chunk in &changes.chunks {
            self.append(&mut analyzer, chunk);
        }
        self.average_length = average_length(self.total_length, self.live);
        self.prepared = PreparedExclusions::default();
    }

    /// Share of entries retired (a rebuild drops them).
    pub fn dead_share(&self) -> f64 {
        if self.entries.is_empty() {
            0.0
        } else {
            1.0 - self.live as f64 / self.entries.len() as f64
        }
    }

    fn append(&mut self, analyzer: &mut Analyzer, chunk: &Chunk) {
        let n = self.entries.len() as u32;
        self.meta.push(n, tenant_of(chunk.id.as_str()), &chunk.metadata);
        let mut buf = Vec::new();
        analyzer.terms(&chunk.title, &mut buf);
        analyzer.terms(&chunk.text, &mut buf);
        let mut counts: FastMap<u32, u32> = FastMap::default();
        for t in buf {
            let next = self.terms.len() as u32;
            let id = *self.terms.entry(t).or_insert(next);
            if id as usize == self.postings.len() {
                self.postings.push(Vec::new());
            }
            *counts.entry(id).or_insert(0) += 1;
        }
        let length: u32 = counts.values().sum();
        for (&t, &tf) in &counts {
            self.postings[t as usize].push((n, tf));
        }
        self.tenants.count(tenant_of(chunk.id.as_str()), n as usize, length, true);
        if let Some(old) = self.by_chunk.insert(chunk.id.clone(), n) {
            // Callers retire first; kept whole if one did not.
            self.retire_at(old);
            self.by_chunk.insert(chunk.id.clone(), n);
        }
        self.by_document.entry(chunk.document_id.clone()).or_default().push(n);
        self.entries.push(Entry {
            chunk: chunk.id.clone(),
            document: chunk.document_id.clone(),
            weight: chunk.weight,
            length,
        });
        self.dead.push(false);
        self.live += 1;
        self.total_length += length as u64;
    }

    fn retire(&mut self, id: &ChunkId) {
        if let Some(&e) = self.by_chunk.get(id) {
            self.retire_at(e);
        }
    }

    fn retire_at(&mut self, e: u32) {
        if std::mem::replace(&mut self.dead[e as usize], true) {
            return;
        }
        let Entry { chunk, document, length, .. } = &self.entries[e as usize];
        if self.by_chunk.get(chunk) == Some(&e) {
            self.by_chunk.remove(chunk);
        }
        if let Some(list) = self.by_document.get_mut(document) {
            list.retain(|&x| x != e);
            if list.is_empty() {
                self.by_document.remove(document);
            }
        }
        self.live -= 1;
        self.total_length -= *length as u64;
        self.tenants.count(tenant_of(chunk.as_str()), e as usize, *length, false);
    }

    /// The index from its parts (as a file holds them), with the lookups derived from them.
    fn assemble(
        terms: HashMap<String, u32>,
        postings: Vec<Vec<(u32, u32)>>,
        entries: Vec<Entry>,
        dead: Vec<bool>,
        meta: MetadataIndex,
    ) -> LexicalIndex {
        let mut ix = LexicalIndex { terms, postings, meta, ..LexicalIndex::default() };
        for (i, e) in entries.iter().enumerate() {
            ix.tenants.count(tenant_of(e.chunk.as_str()), i, e.length, true);
            ix.by_chunk.insert(e.chunk.clone(), i as u32);
            ix.by_document.entry(e.document.clone()).or_default().push(i as u32);
            ix.total_length += e.length as u64;
        }
        ix.live = entries.len();
        ix.dead = vec![false; entries.len()];
        ix.entries = entries;
        for (i, gone) in dead.into_iter().enumerate() {
            if gone {
                ix.retire_at(i as u32);
            }
        }
        ix.average_length = average_length(ix.total_length, ix.live);
        ix
    }

    /// Entries of `tenant` (what a search narrowed to it may count).
    pub fn tenant_len(&self, tenant: &str) -> usize {
        self.tenants.ordinal.get(tenant).map_or(0, |&t| self.tenants.sizes[t as usize].0)
    }

    /// Live chunks.
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The chunk at a position [`LexicalIndex::search`] returned.
    pub fn chunk_id(&self, at: usize) -> &ChunkId {
        &self.entries[at].chunk
    }

    /// The best chunks for `query`, best first (ties in index order): `limit` documents with
    /// grouping (each at most its quota of chunks), `limit` chunks without. Chunks that share
    /// no term with the query are never returned.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        grouping: Option<&Grouping>,
        exclusion: &ExclusionSet,
    ) -> Vec<Scored> {
        self.search_allowed(query, limit, grouping, exclusion, None, None)
    }

    /// [`LexicalIndex::search`] under the request's whole predicate: exclusion, filter and
    /// tenant, resolved to positions before any posting is scored.
    pub fn search_request(&self, r: &LexicalRequest) -> Vec<Scored> {
        let allowed = self.meta.allowed(&r.filter, r.tenant.as_deref(), self);
        let tenant = r.tenant.as_deref().map(|t| self.tenants.ordinal.get(t).copied());
        match tenant {
            // A tenant with no chunk here: nothing of it can match.
            Some(None) => Vec::new(),
            Some(Some(t)) if self.tenants.sizes[t as usize].0 < self.live => {
                self.search_allowed(&r.query, r.limit, r.grouping.as_ref(), &r.exclusion, allowed.as_ref(), Some(t))
            }
            // No tenant, or one that holds every chunk: the store's statistics are its own.
            _ => self.search_allowed(&r.query, r.limit, r.grouping.as_ref(), &r.exclusion, allowed.as_ref(), None),
        }
    }

    fn search_allowed(
        &self,
        query: &str,
        limit: usize,
        grouping: Option<&Grouping>,
        exclusion: &ExclusionSet,
        allowed: Option<&PositionBits>,
        tenant: Option<u32>,
    ) -> Vec<Scored> {
        let mut q = Vec::new();
        Analyzer::default().terms(query, &mut q);
        q.sort();
        q.dedup();
        let n = self.entries.len();
        // Excluded ids resolved to positions (kept across searches, extended for a session's
        // next turn): a flag test per candidate.
        let blocked = (!exclusion.is_empty()).then(|| {
            self.prepared.get(
                0,
                exclusion,
                |set| {
                    let mut blocked = vec![false; n];
                    self.block(&mut blocked, set);
                    blocked
                },
                |blocked, added| self.block(blocked, added),
            )
        });
        let blocked = blocked.as_deref().map(Vec::as_slice).unwrap_or_default();
        // The statistics scores are counted from: the tenant's own when narrowed to one.
        let (count, average) = match tenant {
            Some(t) => self.tenants.of(t),
            None => (self.live, self.average_length),
        };
        let retired = self.live < n;
        let mut scores = vec![0f32; n];
        let mut touched: Vec<u32> = Vec::new();
        for term in &q {
            let Some(&t) = self.terms.get(term) else { continue };
            let list = &self.postings[t as usize];
            let df = match tenant {
                Some(t) => list
                    .iter()
                    .filter(|&&(e, _)| self.tenants.of_entry[e as usize] == t && !self.dead[e as usize])
                    .count(),
                None if retired => list.iter().filter(|&&(e, _)| !self.dead[e as usize]).count(),
                None => list.len(),
            };
            if df == 0 {
                continue;
            }
            let df = df as f32;
            // ln_1p keeps idf above 0 even for a term in every chunk of a large store.
            let idf = ((count as f32 - df + 0.5) / (df + 0.5)).ln_1p();
            for &(e, tf) in list {
                if self.dead[e as usize]
                    || blocked.get(e as usize).copied().unwrap_or(false)
                    || allowed.is_some_and(|a| !a.get(e as usize))
                {
                    continue;
                }
                let tf = tf as f32;
                let norm = K1 * (1.0 - B + B * self.entries[e as usize].length as f32 / average);
                let s = &mut scores[e as usize];
                if *s == 0.0 {
                    touched.push(e);
                }
                *s += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        let mut ranked: Vec<(u32, f32)> = touched.into_iter().map(|e| (e, scores[e as usize])).collect();
        // Ties go by chunk id: the order an index built anew keeps (its entries in id order),
        // whatever order writes appended them in.
        let id = |e: u32| &self.entries[e as usize].chunk;
        let order =
            |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then_with(|| id(a.0).cmp(id(b.0)).then(a.0.cmp(&b.0)));
        // Only the head is sorted: widened while grouping leaves documents to fill.
        let mut head = limit.saturating_mul(16).max(64);
        loop {
            let all = head >= ranked.len();
            if all {
                ranked.sort_by(order);
            } else {
                ranked.select_nth_unstable_by(head, order);
                ranked[..head].sort_by(order);
            }
            let prefix = &ranked[..head.min(ranked.len())];
            let Some(grouping) = grouping else {
                return prefix.iter().take(limit).map(|&(e, s)| (e as usize, s)).collect();
            };
            let mut taken: FastMap<&str, usize> = FastMap::default();
            let mut out = Vec::new();
            self.fill_groups(prefix, limit, grouping, &mut taken, &mut out);
            if taken.len() >= limit || all {
                if !all {
                    // The documents are chosen; their further chunks below the head still
                    // count toward their quotas (they rank below every chunk of the head),
                    // found through each document's own chunks.
                    let last = *prefix.last().expect("documents were taken from it");
                    let mut further: Vec<(u32, f32)> = Vec::new();
                    for (&doc, &k) in &taken {
                        let entries = self.by_document.get(doc).map(Vec::as_slice).unwrap_or_default();
                        if k >= entries.len() || k >= grouping.quota(doc, self.entries[entries[0] as usize].weight) {
                            continue;
                        }
                        // Below the head in the total order: not in it. Excluded chunks were
                        // never scored (0) and stay out.
                        further.extend(
                            entries
                                .iter()
                                .map(|&e| (e, scores[e as usize]))
                                .filter(|p| p.1 > 0.0 && order(p, &last) == std::cmp::Ordering::Greater),
                        );
                    }
                    further.sort_by(order);
                    self.fill_groups(&further, limit, grouping, &mut taken, &mut out);
                }
                return out;
            }
            head = head.saturating_mul(4);
        }
    }

    /// Flags the positions of the chunks and documents `set` excludes.
    fn block(&self, blocked: &mut [bool], set: &ExclusionSet) {
        for c in &set.chunks {
            if let Some(&e) = self.by_chunk.get(c) {
                blocked[e as usize] = true;
            }
        }
        for d in &set.documents {
            for &e in self.by_document.get(d).map(Vec::as_slice).unwrap_or_default() {
                blocked[e as usize] = true;
            }
        }
    }

    /// Takes chunks in order, each document up to its quota, while fewer than `limit`
    /// documents are in (`taken` counts each document's chunks).
    fn fill_groups<'a>(
        &'a self,
        ranked: &[(u32, f32)],
        limit: usize,
        grouping: &Grouping,
        taken: &mut FastMap<&'a str, usize>,
        out: &mut Vec<Scored>,
    ) {
        for &(e, s) in ranked {
            let entry = &self.entries[e as usize];
            let doc = entry.document.as_str();
            let quota = grouping.quota(doc, entry.weight);
            let full = taken.len() >= limit;
            match taken.get_mut(doc) {
                Some(k) if *k >= quota => continue,
                Some(k) => *k += 1,
                None if full => continue,
                None => {
                    taken.insert(doc, 1);
                }
            }
            out.push((e as usize, s));
        }
    }
}

#[cfg(test)]
mod tests;
