//! Stage 4: dedupe by documentID (best score wins), identical or nearly identical text under
//! two ids counted once (the better-scoring chunk kept, the other recorded), and adjacent
//! chunks of one document merged into one block.

use ragctx_core::text::{is_cjk, sentences};
use ragctx_core::{Chunk, DocumentId, Duplicate, FxHasher, Grouping, Hit};
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// Text that will become one context block: one chunk, or adjacent chunks of one document.
#[derive(Clone, Debug, PartialEq)]
pub struct Fragment {
    /// The document of its chunks.
    pub document_id: DocumentId,
    /// The document's title, for the block header.
    pub title: String,
    /// Its chunks, in document order (one unless adjacent chunks were merged).
    pub chunks: Vec<Chunk>,
    /// The best score among its chunks.
    pub score: f32,
    /// The chunks' text, adjacent chunks joined without their overlap.
    pub text: String,
    /// The turn that first showed one of its chunks, when it comes from the working set.
    pub carried_from: Option<u64>,
    /// Tokens the compression stage freed by cutting `text` to its sentences (0: whole).
    pub freed: usize,
}

impl Fragment {
    /// A fragment of one hit, new to the conversation.
    pub fn of(h: Hit) -> Fragment {
        Fragment {
            document_id: h.chunk.document_id.clone(),
            title: h.chunk.title.clone(),
            text: h.chunk.text.clone(),
            score: h.score,
            chunks: vec![h.chunk],
            carried_from: None,
            freed: 0,
        }
    }
}

/// What dedupe kept, and the aliases it found on the way.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Deduped {
    /// Best first.
    pub fragments: Vec<Fragment>,
    /// Documents with a fragment kept (a document whose chunks were all aliases is not counted).
    pub unique_documents: usize,
    /// `(dropped, kept)`: a document whose chunk text duplicated a better one's.
    pub aliases: Vec<(DocumentId, DocumentId)>,
    /// The chunks left out, or trimmed to what is theirs, as identical or near-identical to a
    /// better one, best first.
    pub duplicates: Vec<Duplicate>,
}

/// Word 3-grams of `text`, hashed, sorted and each once: letters and digits folded to lower
/// case make words, every CJK character is a word of its own (Chinese and Japanese have no
/// spaces), anything else separates words. A text of fewer than three words is its words.
pub fn shingles(text: &str) -> Vec<u64> {
    // FxHash's step, inlined: each word hashed as it is read (no word is copied), then each
    // run of three words hashed from the words' hashes.
    const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    let mix = |h: u64, x: u64| (h.rotate_left(5) ^ x).wrapping_mul(K);
    let mut words: Vec<u64> = Vec::with_capacity(text.len() / 5);
    let mut word = 0u64;
    let mut in_word = false;
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            word = mix(word, u64::from(c.to_ascii_lowercase()));
            in_word = true;
            continue;
        }
        let cjk = !c.is_ascii() && is_cjk(c);
        if !c.is_ascii() && c.is_alphanumeric() && !cjk {
            c.to_lowercase().for_each(|l| word = mix(word, u64::from(l)));
            in_word = true;
            continue;
        }
        if in_word {
            words.push(word);
            word = 0;
            in_word = false;
        }
        if cjk {
            words.push(mix(0, u64::from(c)));
        }
    }
    if in_word {
        words.push(word);
    }
    let n = if words.len() >= 3 { 3 } else { 1 };
    let mut out: Vec<u64> = words.windows(n).map(|w| w.iter().fold(0, |h, x| mix(h, *x))).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Share of `a`'s shingles that `b` holds (both sorted, each once): 1 when `b` holds all
/// of `a`; 0 for an empty `a`.
pub fn containment(a: &[u64], b: &[u64]) -> f32 {
    if a.is_empty() {
        return 0.0;
    }
    let (mut i, mut j, mut shared) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    shared as f32 / a.len() as f32
}

/// The texts kept so far in a turn, best first, to tell a chunk whose text (case and spacing
/// folded) a better one already holds.
#[derive(Default)]
struct Kept {
    texts: HashMap<u64, Chunk>,
}

impl Kept {
    /// Checks `chunk` against the texts kept: `None` (the duplicate recorded in `out`, and
    /// the document alias when another document holds it) means leave it out; `Some(hash)`
    /// is its text's, for [`Kept::keep`].
    fn check(&self, chunk: &Chunk, out: &mut Deduped) -> Option<u64> {
        let hash = text_hash(&chunk.text);
        let Some(holder) = self.texts.get(&hash) else { return Some(hash) };
        out.duplicates.push(Duplicate {
            chunk: chunk.id.clone(),
            held_by: holder.id.clone(),
            resemblance: 1.0,
            tokens: chunk.tokens.unwrap_or(0) as usize,
            trimmed: false,
        });
        let pair = (chunk.document_id.clone(), holder.document_id.clone());
        if pair.0 != pair.1 && !out.aliases.contains(&pair) {
            out.aliases.push(pair);
        }
        None
    }

    fn keep(&mut self, chunk: &Chunk, hash: u64) {
        self.texts.entry(hash).or_insert_with(|| chunk.clone());
    }
}

/// Stage 4, after dedupe: fragments most of whose text a better fragment of the turn already
/// holds — at least `near` of their word 3-grams — say only what is theirs. A fragment none of
/// whose sentences is new to the turn leaves (recorded, and its document an alias of the
/// holder's); one with new sentences keeps those, and a note names the source that holds the
/// rest: shared boilerplate and lightly edited copies stop costing the budget twice, and a
/// sentence that differs (a changed date, a conflicting figure) is never lost. Fragments are
/// best first; a carried fragment is trimmed like a new one. Each is recorded in
/// `duplicates` with the tokens it freed.
pub fn near_duplicates(deduped: &mut Deduped, near: f32, counter: &dyn ragctx_core::TokenCounter) {
    if near <= 0.0 || deduped.fragments.len() < 2 {
        return;
    }
    let mut kept: Vec<(Fragment, Vec<u64>)> = Vec::with_capacity(deduped.fragments.len());
    // Every shingle of the kept text: a fragment most of whose shingles it lacks has no holder
    // (checked before any one kept fragment is), and a sentence is the turn's when it holds them.
    let mut union: HashSet<u64, BuildHasherDefault<FxHasher>> = HashSet::default();
    let mut dropped: Vec<DocumentId> = Vec::new();
    let held = |sh: &[u64], union: &HashSet<u64, BuildHasherDefault<FxHasher>>| {
        if sh.is_empty() {
            return 0.0;
        }
        sh.iter().filter(|x| union.contains(x)).count() as f32 / sh.len() as f32
    };
    for mut f in std::mem::take(&mut deduped.fragments) {
        let sh = shingles(&f.text);
        let holder = if held(&sh, &union) < near {
            None
        } else {
            kept.iter()
                .map(|(k, ksh)| (k, containment(&sh, ksh)))
                .filter(|(_, r)| *r >= near)
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(k, r)| (k.chunks[0].id.clone(), k.document_id.clone(), r))
        };
        let Some((held_by, holder_doc, resemblance)) = holder else {
            union.extend(sh.iter().copied());
            kept.push((f, sh));
            continue;
        };
        // A sentence is new when the turn's kept text does not hold `near` of its 3-grams
        // (a sentence of fewer than three words always is: it is too short to tell).
        let new: Vec<&str> = sentences(&f.text)
            .into_iter()
            .filter(|sentence| {
                let words = sentence.split_whitespace().count() + sentence.chars().filter(|c| is_cjk(*c)).count();
                words < 3 || held(&shingles(sentence), &union) < near
            })
            .collect();
        let before = counter.count(&f.text);
        let trimmed = !new.is_empty();
        let freed = if trimmed {
            let text = format!("{} (The rest of this passage repeats {}.)", new.join(" … "), holder_doc.as_str());
            let after = counter.count(&text);
            if after >= before {
                // Nothing to gain: the passage stays whole.
                union.extend(sh.iter().copied());
                kept.push((f, sh));
                continue;
            }
            f.text = text;
            before - after
        } else {
            dropped.push(f.document_id.clone());
            let pair = (f.document_id.clone(), holder_doc.clone());
            if pair.0 != pair.1 && !deduped.aliases.contains(&pair) {
                deduped.aliases.push(pair);
            }
            before
        };
        deduped.duplicates.push(Duplicate {
            chunk: f.chunks[0].id.clone(),
            held_by,
            resemblance,
            tokens: freed,
            trimmed,
        });
        if trimmed {
            union.extend(sh.iter().copied());
            kept.push((f, sh));
        }
    }
    deduped.fragments = kept.into_iter().map(|(f, _)| f).collect();
    // A document whose every fragment left as a near-duplicate is no longer a unique one
    // (the count stays "after dedupe": documents the floor held back still count).
    let mut gone: Vec<DocumentId> = dropped;
    gone.sort();
    gone.dedup();
    gone.retain(|d| !deduped.fragments.iter().any(|f| &f.document_id == d));
    deduped.unique_documents = deduped.unique_documents.saturating_sub(gone.len());
}

/// Hash of the text with case and white space folded (core's [`FxHasher`] over the folded
/// bytes, streamed through a small buffer so the hasher takes eight bytes at a time; ASCII
/// folds without Unicode tables; no folded copy is made): auxiliary evidence that two ids
/// hold the same passage.
pub fn text_hash(text: &str) -> u64 {
    let mut f = Folded { h: FxHasher::default(), buf: [0; 64], n: 0 };
    let mut space = false;
    for c in text.trim().chars() {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space {
            f.push(b' ');
            space = false;
        }
        if c.is_ascii() {
            f.push(c.to_ascii_lowercase() as u8);
        } else {
            for l in c.to_lowercase() {
                for &b in l.encode_utf8(&mut [0u8; 4]).as_bytes() {
                    f.push(b);
                }
            }
        }
    }
    f.finish()
}

/// [`text_hash`]'s folded bytes on their way into the hasher.
struct Folded {
    h: FxHasher,
    buf: [u8; 64],
    n: usize,
}

impl Folded {
    #[inline(always)]
    fn push(&mut self, b: u8) {
        if self.n == self.buf.len() {
            self.h.write(&self.buf);
            self.n = 0;
        }
        self.buf[self.n] = b;
        self.n += 1;
    }

    fn finish(mut self) -> u64 {
        self.h.write(&self.buf[..self.n]);
        self.h.finish()
    }
}

fn sort_by_score(hits: &mut [Hit]) {
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.chunk.id.cmp(&b.chunk.id)));
}

/// Every hit its own fragment (strategies that do not group): the plain top-k. With
/// `drop_identical_text`, a chunk whose text (case and spacing folded) a better hit already
/// holds is dropped and recorded: the model never reads the same text twice.
pub fn plain(mut hits: Vec<Hit>, drop_identical_text: bool) -> Deduped {
    sort_by_score(&mut hits);
    let mut out = Deduped::default();
    if drop_identical_text {
        let mut kept = Kept::default();
        hits.retain(|h| match kept.check(&h.chunk, &mut out) {
            Some(hash) => {
                kept.keep(&h.chunk, hash);
                true
            }
            None => false,
        });
    }
    let mut docs: Vec<&DocumentId> = hits.iter().map(|h| &h.chunk.document_id).collect();
    docs.sort();
    docs.dedup();
    out.unique_documents = docs.len();
    out.fragments = hits.into_iter().map(Fragment::of).collect();
    out
}

/// Keeps each document's best chunk and, up to its quota, further chunks that score within
/// `margin` of that best or touch a chunk already kept (by score, never by arrival order);
/// drops chunks whose text a kept chunk already holds (case and spacing folded), recording
/// them; merges a document's adjacent or overlapping chunks into one fragment.
pub fn dedupe_by_document(mut hits: Vec<Hit>, grouping: &Grouping, margin: f32) -> Deduped {
    sort_by_score(&mut hits);
    let mut out = Deduped::default();
    let mut seen = Kept::default();
    let mut kept: Vec<(DocumentId, Vec<Hit>)> = Vec::new();
    let mut slot: HashMap<DocumentId, usize> = HashMap::new();
    for hit in hits {
        let doc = hit.chunk.document_id.clone();
        let quota = grouping.quota(doc.as_str(), hit.chunk.weight);
        let i = *slot.entry(doc.clone()).or_insert_with(|| {
            kept.push((doc.clone(), Vec::new()));
            kept.len() - 1
        });
        let group = &kept[i].1;
        let welcome = match group.first() {
            None => true,
            // Hits arrive best first: the first kept is the document's best.
            Some(best) => hit.score >= best.score - margin || group.iter().any(|k| k.chunk.is_adjacent_to(&hit.chunk)),
        };
        if !welcome || group.len() >= quota {
            continue;
        }
        if let Some(hash) = seen.check(&hit.chunk, &mut out) {
            seen.keep(&hit.chunk, hash);
            kept[i].1.push(hit);
        }
    }
    // A document all of whose chunks were aliases of others is not a unique document.
    kept.retain(|(_, hs)| !hs.is_empty());
    out.unique_documents = kept.len();
    let mut fragments: Vec<Fragment> = kept.into_iter().flat_map(|(_, hs)| merge_adjacent(hs)).collect();
    fragments.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.chunks[0].id.cmp(&b.chunks[0].id)));
    out.fragments = fragments;
    out
}

fn position(c: &Chunk) -> (u64, u32) {
    (c.start.unwrap_or(u64::MAX), c.ordinal.unwrap_or(u32::MAX))
}

/// Chunks of one document, in document order, merged where they touch or overlap.
fn merge_adjacent(mut hits: Vec<Hit>) -> Vec<Fragment> {
    hits.sort_by_key(|h| position(&h.chunk));
    let mut out: Vec<Fragment> = Vec::new();
    for h in hits {
        if let Some(f) = out.last_mut() {
            let last = f.chunks.last().expect("fragment has a chunk");
            if last.is_adjacent_to(&h.chunk) {
                append_text(&mut f.text, last, &h.chunk);
                f.score = f.score.max(h.score);
                f.chunks.push(h.chunk);
                continue;
            }
        }
        out.push(Fragment::of(h));
    }
    out
}

/// Appends `next` after `prev`, skipping the characters the two share by their offsets.
fn append_text(text: &mut String, prev: &Chunk, next: &Chunk) {
    let overlap = match (prev.end, next.start) {
        (Some(e), Some(s)) if e > s => (e - s) as usize,
        _ => 0,
    };
    let rest: String = next.text.chars().skip(overlap).collect();
    if rest.trim().is_empty() {
        return;
    }
    // Consecutive chunks with a gap between them in the source (the blank line between a
    // chunker's blocks) stay apart by a blank line; touching ones by a space.
    let gap = matches!((prev.end, next.start), (Some(e), Some(s)) if s > e + 1);
    if gap {
        text.push_str("\n\n");
    } else if overlap == 0 && !text.ends_with(char::is_whitespace) {
        text.push(' ');
    }
    text.push_str(&rest);
}

#[cfg(test)]
mod tests;
