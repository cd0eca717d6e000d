//! Stage 4: dedupe by documentID (best score wins), identical text under two ids counted
//! once, and adjacent chunks of one document merged into one block.

use ragctx_core::{Chunk, DocumentId, FxHasher, Grouping, Hit};
use std::collections::HashMap;
use std::hash::Hasher;

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
}

/// Hash of the text with case and white space folded (core's [`FxHasher`] over the folded
/// bytes, streamed: no folded copy is made): auxiliary evidence that two ids hold the same
/// passage.
pub fn text_hash(text: &str) -> u64 {
    let mut h = FxHasher::default();
    let mut space = false;
    for c in text.trim().chars() {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space {
            h.write_u8(b' ');
            space = false;
        }
        for l in c.to_lowercase() {
            h.write(l.encode_utf8(&mut [0u8; 4]).as_bytes());
        }
    }
    h.finish()
}

fn sort_by_score(hits: &mut [Hit]) {
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.chunk.id.cmp(&b.chunk.id)));
}

/// Every hit its own fragment (strategies that do not group): the plain top-k. With
/// `drop_identical_text`, a chunk whose text (case and spacing folded) a better hit already
/// holds is dropped and recorded as an alias: the model never reads the same text twice.
pub fn plain(mut hits: Vec<Hit>, drop_identical_text: bool) -> Deduped {
    sort_by_score(&mut hits);
    let mut aliases: Vec<(DocumentId, DocumentId)> = Vec::new();
    if drop_identical_text {
        let mut owner: HashMap<u64, DocumentId> = HashMap::new();
        hits.retain(|h| match owner.entry(text_hash(&h.chunk.text)) {
            std::collections::hash_map::Entry::Occupied(o) => {
                let pair = (h.chunk.document_id.clone(), o.get().clone());
                if pair.0 != pair.1 && !aliases.contains(&pair) {
                    aliases.push(pair);
                }
                false
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(h.chunk.document_id.clone());
                true
            }
        });
    }
    let mut docs: Vec<&DocumentId> = hits.iter().map(|h| &h.chunk.document_id).collect();
    docs.sort();
    docs.dedup();
    let unique_documents = docs.len();
    let fragments = hits.into_iter().map(Fragment::of).collect();
    Deduped { fragments, unique_documents, aliases }
}

/// Keeps each document's best chunk and, up to its quota, further chunks that score within
/// `margin` of that best or touch a chunk already kept (by score, never by arrival order);
/// drops chunks whose text another document already holds (recording the alias); merges a
/// document's adjacent or overlapping chunks into one fragment.
pub fn dedupe_by_document(mut hits: Vec<Hit>, grouping: &Grouping, margin: f32) -> Deduped {
    sort_by_score(&mut hits);
    let mut text_owner: HashMap<u64, DocumentId> = HashMap::new();
    let mut kept: Vec<(DocumentId, Vec<Hit>)> = Vec::new();
    let mut slot: HashMap<DocumentId, usize> = HashMap::new();
    let mut aliases: Vec<(DocumentId, DocumentId)> = Vec::new();
    for hit in hits {
        let doc = hit.chunk.document_id.clone();
        let h = text_hash(&hit.chunk.text);
        match text_owner.get(&h) {
            Some(owner) if *owner != doc => {
                let pair = (doc.clone(), owner.clone());
                if !aliases.contains(&pair) {
                    aliases.push(pair);
                }
                continue;
            }
            Some(_) => continue, // the same text twice in one document
            None => {}
        }
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
        if welcome && group.len() < quota {
            text_owner.insert(h, doc);
            kept[i].1.push(hit);
        }
    }
    // A document all of whose chunks were aliases of others is not a unique document.
    kept.retain(|(_, hs)| !hs.is_empty());
    let unique_documents = kept.len();
    let mut fragments: Vec<Fragment> = kept.into_iter().flat_map(|(_, hs)| merge_adjacent(hs)).collect();
    fragments.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.chunks[0].id.cmp(&b.chunks[0].id)));
    Deduped { fragments, unique_documents, aliases }
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
    if overlap == 0 && !text.ends_with(char::is_whitespace) {
        text.push(' ');
    }
    text.push_str(&rest);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(id: &str, doc: &str, score: f32, text: &str, start: u64) -> Hit {
        Hit {
            chunk: Chunk {
                id: id.into(),
                document_id: doc.into(),
                title: format!("T {doc}"),
                text: text.into(),
                ordinal: None,
                start: Some(start),
                end: Some(start + text.chars().count() as u64),
                weight: 1.0,
                tokens: None,
                metadata: Default::default(),
            },
            score,
        }
    }

    #[test]
    fn keeps_the_best_chunk_per_document_not_the_first() {
        let hits = vec![
            hit("a1", "a", 0.5, "first in array", 0),
            hit("a2", "a", 0.9, "best", 100),
            hit("b1", "b", 0.7, "b", 0),
        ];
        let d = dedupe_by_document(hits, &Grouping::new(1), 0.0);
        assert_eq!(d.unique_documents, 2);
        assert_eq!(d.fragments[0].chunks[0].id.as_str(), "a2");
        assert_eq!(d.fragments[1].document_id.as_str(), "b");
    }

    #[test]
    fn identical_text_under_two_ids_counts_once_and_is_recorded() {
        let hits = vec![hit("x", "dx", 0.8, "Same  Text here", 0), hit("y", "dy", 0.9, "same text HERE", 0)];
        let d = dedupe_by_document(hits, &Grouping::new(1), 0.0);
        assert_eq!(d.unique_documents, 1);
        assert_eq!(d.fragments[0].document_id.as_str(), "dy");
        assert_eq!(d.aliases, vec![(DocumentId::from("dx"), DocumentId::from("dy"))]);
    }

    #[test]
    fn adjacent_chunks_merge_into_one_fragment_by_offsets() {
        // "abcdef" at 0..6 and "defghi" at 3..9 overlap by three characters.
        let mut g = Grouping::new(3);
        g.quotas.insert("a".into(), 3);
        let hits =
            vec![hit("a1", "a", 0.6, "abcdef", 0), hit("a2", "a", 0.9, "defghi", 3), hit("a3", "a", 0.5, "far", 50)];
        let d = dedupe_by_document(hits, &g, 1.0);
        assert_eq!(d.unique_documents, 1);
        assert_eq!(d.fragments.len(), 2);
        assert_eq!(d.fragments[0].text, "abcdefghi");
        assert_eq!(d.fragments[0].score, 0.9);
        assert_eq!(d.fragments[1].text, "far");
    }

    #[test]
    fn plain_keeps_every_hit_or_drops_identical_text() {
        let hits = vec![hit("x", "dx", 0.8, "Same  Text here", 0), hit("y", "dy", 0.9, "same text HERE", 0)];
        assert_eq!(plain(hits.clone(), false).fragments.len(), 2, "plain top-k as peers do it");
        let d = plain(hits, true);
        assert_eq!(d.fragments.len(), 1);
        assert_eq!(d.fragments[0].document_id.as_str(), "dy");
        assert_eq!(d.aliases, vec![(DocumentId::from("dx"), DocumentId::from("dy"))]);
    }

    #[test]
    fn a_further_chunk_stays_only_within_the_margin_or_when_adjacent() {
        let g = Grouping::new(3);
        let hits = vec![
            hit("a1", "a", 0.80, "best passage", 0),
            hit("a2", "a", 0.77, "close second", 500),
            hit("a3", "a", 0.60, "far and weak", 1000),
            hit("a4", "a", 0.55, "touching the best", 13),
            hit("b1", "b", 0.70, "other source", 0),
        ];
        let d = dedupe_by_document(hits.clone(), &g, 0.05);
        let ids: Vec<&str> = d.fragments.iter().flat_map(|f| f.chunks.iter().map(|c| c.id.as_str())).collect();
        assert!(ids.contains(&"a2"), "within the margin: {ids:?}");
        assert!(!ids.contains(&"a3"), "outside the margin and not adjacent: {ids:?}");
        assert!(ids.contains(&"a4"), "adjacent to the best: {ids:?}");
        assert_eq!(d.fragments[0].text, "best passage touching the best", "merged into one block");
        assert_eq!(d.unique_documents, 2);
        // Margin 0 keeps only the best and what touches it; the cap holds whatever the margin.
        let strict = dedupe_by_document(hits.clone(), &g, 0.0);
        assert_eq!(strict.fragments.iter().map(|f| f.chunks.len()).sum::<usize>(), 3);
        let capped = dedupe_by_document(hits, &Grouping::new(2), 1.0);
        assert_eq!(
            capped.fragments.iter().filter(|f| f.document_id.as_str() == "a").map(|f| f.chunks.len()).sum::<usize>(),
            2
        );
    }
}
