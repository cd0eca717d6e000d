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

/// The index of a store, built on first use and again whenever the store's generation
/// (moved by every write) differs from the one it was built at, and kept in a file beside
/// the store so the next process loads it instead. Derived from the committed chunks alone
/// and keyed by their generation, it can never disagree with them after a crash: a missing,
/// torn or older file is rebuilt.
#[derive(Default)]
pub struct Cached {
    slot: Mutex<Option<(u64, Arc<LexicalIndex>)>>,
    file: Option<PathBuf>,
}

impl Cached {
    /// Kept in memory and in `path`.
    pub fn with_file(path: &Path) -> Cached {
        Cached { slot: Mutex::default(), file: Some(path.to_owned()) }
    }

    /// The index at `generation`: the one held, else the file's, else built from
    /// `chunks()` (and saved). Callers search while holding off writers, so the generation
    /// matches the chunks read.
    pub fn get<E>(
        &self,
        generation: u64,
        chunks: impl FnOnce() -> Result<Vec<Chunk>, E>,
    ) -> Result<Arc<LexicalIndex>, E> {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((g, ix)) = slot.as_ref() {
            if *g == generation {
                return Ok(ix.clone());
            }
        }
        let loaded = self.file.as_deref().and_then(|p| file::load(p, generation));
        let ix = match loaded {
            Some(ix) => Arc::new(ix),
            None => {
                let ix = Arc::new(LexicalIndex::build(&chunks()?));
                if let Some(path) = &self.file {
                    // A file that cannot be written costs the next process a rebuild, nothing more.
                    let _ = file::save(&ix, path, generation);
                }
                ix
            }
        };
        *slot = Some((generation, ix.clone()));
        Ok(ix)
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
struct Entry {
    chunk: ChunkId,
    document: DocumentId,
    weight: f32,
    /// Terms of title and text.
    length: u32,
}

/// An inverted index over a fixed set of chunks (rebuilt when the chunks change).
pub struct LexicalIndex {
    /// Positions by chunk and by document, to resolve exclusions (thousands of ids looked
    /// up when a session's set is first resolved).
    by_chunk: FastMap<ChunkId, u32>,
    by_document: FastMap<DocumentId, Vec<u32>>,
    terms: HashMap<String, u32>,
    /// Per term: (entry, term frequency), entries ascending.
    postings: Vec<Vec<(u32, u32)>>,
    entries: Vec<Entry>,
    average_length: f32,
    /// Exclusion sets resolved to blocked positions, kept and extended across searches
    /// (the index never changes, so one revision).
    prepared: PreparedExclusions<Vec<bool>>,
    /// Metadata and tenants by position, for the filter (resolved before scoring).
    meta: MetadataIndex,
    /// BM25's statistics per tenant, for searches narrowed to one.
    tenants: TenantStats,
}

/// Each entry's tenant (an ordinal) and each tenant's entries and terms: what a tenant's
/// own N, document frequencies and average length are counted from.
#[derive(Default)]
struct TenantStats {
    ordinal: FastMap<String, u32>,
    of_entry: Vec<u32>,
    /// Per ordinal: entries, and their average length as [`LexicalIndex::build`] computes
    /// the store's.
    sizes: Vec<(usize, f32)>,
}

impl TenantStats {
    fn new(meta: &MetadataIndex, entries: &[Entry]) -> TenantStats {
        let mut stats = TenantStats { of_entry: vec![0; entries.len()], ..TenantStats::default() };
        for (name, positions) in meta.tenants() {
            let t = stats.sizes.len() as u32;
            stats.ordinal.insert(name.to_owned(), t);
            let total: u64 = positions.iter().map(|&p| entries[p as usize].length as u64).sum();
            for &p in positions {
                stats.of_entry[p as usize] = t;
            }
            stats.sizes.push((positions.len(), average_length(total, positions.len())));
        }
        stats
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

impl LexicalIndex {
    /// Indexes title and text of each chunk. The order given is the order ties keep.
    pub fn build<'a>(chunks: impl IntoIterator<Item = &'a Chunk>) -> LexicalIndex {
        let mut analyzer = Analyzer::default();
        let (mut terms, mut postings, mut entries) = (HashMap::new(), Vec::<Vec<(u32, u32)>>::new(), Vec::new());
        let mut buf = Vec::new();
        let mut counts: HashMap<u32, u32> = HashMap::new();
        let mut total = 0u64;
        let mut meta = MetadataIndex::default();
        for chunk in chunks {
            meta.push(entries.len() as u32, tenant_of(chunk.id.as_str()), &chunk.metadata);
            buf.clear();
            analyzer.terms(&chunk.title, &mut buf);
            analyzer.terms(&chunk.text, &mut buf);
            counts.clear();
            for t in buf.drain(..) {
                let next = terms.len() as u32;
                let id = *terms.entry(t).or_insert(next);
                if id as usize == postings.len() {
                    postings.push(Vec::new());
                }
                *counts.entry(id).or_insert(0) += 1;
            }
            let n = entries.len() as u32;
            let length: u32 = counts.values().sum();
            for (&t, &tf) in &counts {
                postings[t as usize].push((n, tf));
            }
            total += length as u64;
            entries.push(Entry {
                chunk: chunk.id.clone(),
                document: chunk.document_id.clone(),
                weight: chunk.weight,
                length,
            });
        }
        let average_length = average_length(total, entries.len());
        LexicalIndex::assemble(terms, postings, entries, average_length, meta)
    }

    /// The index from its parts, with the lookups derived from them.
    fn assemble(
        terms: HashMap<String, u32>,
        postings: Vec<Vec<(u32, u32)>>,
        entries: Vec<Entry>,
        average_length: f32,
        meta: MetadataIndex,
    ) -> LexicalIndex {
        let by_chunk = entries.iter().enumerate().map(|(i, e)| (e.chunk.clone(), i as u32)).collect();
        let mut by_document: FastMap<DocumentId, Vec<u32>> = FastMap::default();
        for (i, e) in entries.iter().enumerate() {
            by_document.entry(e.document.clone()).or_default().push(i as u32);
        }
        let tenants = TenantStats::new(&meta, &entries);
        LexicalIndex {
            by_chunk,
            by_document,
            terms,
            postings,
            entries,
            average_length,
            prepared: PreparedExclusions::default(),
            meta,
            tenants,
        }
    }

    /// Entries of `tenant` (what a search narrowed to it may count).
    pub fn tenant_len(&self, tenant: &str) -> usize {
        self.meta.tenant_positions(tenant).len()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
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
            Some(Some(t)) if self.tenants.sizes[t as usize].0 < self.entries.len() => {
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
            Some(t) => self.tenants.sizes[t as usize],
            None => (n, self.average_length),
        };
        let mut scores = vec![0f32; n];
        let mut touched: Vec<u32> = Vec::new();
        for term in &q {
            let Some(&t) = self.terms.get(term) else { continue };
            let list = &self.postings[t as usize];
            let df = match tenant {
                Some(t) => list.iter().filter(|&&(e, _)| self.tenants.of_entry[e as usize] == t).count(),
                None => list.len(),
            };
            if df == 0 {
                continue;
            }
            let df = df as f32;
            // ln_1p keeps idf above 0 even for a term in every chunk of a large store.
            let idf = ((count as f32 - df + 0.5) / (df + 0.5)).ln_1p();
            for &(e, tf) in list {
                if blocked.get(e as usize).copied().unwrap_or(false) || allowed.is_some_and(|a| !a.get(e as usize)) {
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
        let order = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
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
