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
    let hits =
        vec![hit("a1", "a", 0.5, "first in array", 0), hit("a2", "a", 0.9, "best", 100), hit("b1", "b", 0.7, "b", 0)];
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
fn text_hash_folds_case_and_spacing_only() {
    // Longer than the 64-byte buffer, with non-ASCII letters, so both paths and the
    // buffer's flush are taken.
    let a = "The Ärzte-Kammer sets FEES for 2024; renewals are due by 31 March, after which a late fee of 10% applies. 申请费用";
    let b = "  the ärzte-kammer   sets fees for 2024;\nrenewals are due by 31 march, after which a late fee of 10%  applies. 申请费用 ";
    assert_eq!(text_hash(a), text_hash(b));
    for other in [
        "The Ärzte-Kammer sets FEES for 2025; renewals are due by 31 March, after which a late fee of 10% applies. 申请费用",
        "TheÄrzte-Kammer sets FEES for 2024; renewals are due by 31 March, after which a late fee of 10% applies. 申请费用",
        "The Ärzte-Kammer sets FEES for 2024; renewals are due by 31 March, after which a late fee of 10% applies. 申请费",
    ] {
        assert_ne!(text_hash(a), text_hash(other), "{other}");
    }
}

#[test]
fn adjacent_chunks_merge_into_one_fragment_by_offsets() {
    // "abcdef" at 0..6 and "defghi" at 3..9 overlap by three characters.
    let mut g = Grouping::new(3);
    g.quotas.insert("a".into(), 3);
    let hits = vec![hit("a1", "a", 0.6, "abcdef", 0), hit("a2", "a", 0.9, "defghi", 3), hit("a3", "a", 0.5, "far", 50)];
    let d = dedupe_by_document(hits, &g, 1.0);
    assert_eq!(d.unique_documents, 1);
    assert_eq!(d.fragments.len(), 2);
    assert_eq!(d.fragments[0].text, "abcdefghi");
    assert_eq!(d.fragments[0].score, 0.9);
    assert_eq!(d.fragments[1].text, "far");
}

/// A chunker's consecutive chunks (ordinals 0 and 1) with the blank line between them in the
/// source merge into one fragment, apart by that blank line; a chunk further on does not.
#[test]
fn consecutive_chunks_of_a_chunker_merge_across_the_blank_line_between_them() {
    let mut g = Grouping::new(3);
    g.quotas.insert("a".into(), 3);
    let numbered = |id: &str, text: &str, start: u64, ordinal: u32| {
        let mut h = hit(id, "a", 0.7, text, start);
        h.chunk.ordinal = Some(ordinal);
        h
    };
    let hits =
        vec![numbered("a#0", "## One", 0, 0), numbered("a#1", "## Two", 8, 1), numbered("a#3", "## Four", 30, 3)];
    let d = dedupe_by_document(hits, &g, 1.0);
    assert_eq!(d.fragments.len(), 2);
    assert_eq!(d.fragments[0].text, "## One\n\n## Two");
    assert_eq!(d.fragments[1].text, "## Four");
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

const NOTICE: &str = "This page is maintained by the Office of Benefits. Content last reviewed \
    on 3 May 2024. For questions about eligibility, call the helpline between 9 and 5 on weekdays.";

/// Counts words: enough to tell that a trimmed text is shorter.
struct Words;
impl ragctx_core::TokenCounter for Words {
    fn name(&self) -> &str {
        "words"
    }
    fn count(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }
}

fn near(hits: Vec<Hit>, threshold: f32) -> Deduped {
    let mut d = plain(hits, true);
    near_duplicates(&mut d, threshold, &Words);
    d
}

#[test]
fn a_copy_that_says_nothing_new_leaves_and_is_recorded() {
    // The same passage, one word changed in a clause repeated elsewhere in it: no
    // sentence of the copy is new to the turn.
    let copy = format!("{NOTICE} Content last reviewed on 3 May 2024.");
    let hits = vec![
        hit("a#0", "a", 0.9, NOTICE, 0),
        hit("b#0", "b", 0.8, &copy, 0),
        hit("c#0", "c", 0.7, "Appeals must be filed within 60 days of the decision letter.", 0),
    ];
    let d = near(hits.clone(), 0.8);
    let ids: Vec<&str> = d.fragments.iter().map(|f| f.chunks[0].id.as_str()).collect();
    assert_eq!(ids, ["a#0", "c#0"]);
    assert_eq!(d.aliases, vec![(DocumentId::from("b"), DocumentId::from("a"))]);
    let dup = &d.duplicates[0];
    assert_eq!((dup.chunk.as_str(), dup.held_by.as_str(), dup.trimmed), ("b#0", "a#0", false));
    assert!(dup.resemblance >= 0.8 && dup.tokens == ragctx_core::TokenCounter::count(&Words, &copy), "{dup:?}");
    assert_eq!(d.unique_documents, 2);
    // Off: both stay.
    assert_eq!(near(hits, 0.0).fragments.len(), 3);
}

#[test]
fn a_copy_with_a_changed_figure_keeps_the_sentence_that_differs() {
    // Shared boilerplate with one sentence of its own: that sentence is the evidence.
    let a = format!("Renewal costs 30 dollars. {NOTICE}");
    let b = format!("Renewal costs 45 dollars. {NOTICE}");
    let d = near(vec![hit("a#0", "a", 0.9, &a, 0), hit("b#0", "b", 0.8, &b, 0)], 0.8);
    assert_eq!(d.fragments.len(), 2, "no side of a conflict is lost");
    assert_eq!(d.fragments[0].text, a);
    assert_eq!(d.fragments[1].text, "Renewal costs 45 dollars. (The rest of this passage repeats a.)");
    let dup = &d.duplicates[0];
    assert!(dup.trimmed && dup.tokens > 0, "{dup:?}");
    assert!(d.aliases.is_empty(), "a trimmed source is no alias");
}

#[test]
fn a_chunk_that_says_more_is_not_a_duplicate_of_one_it_contains() {
    // The better chunk is the short notice; the longer one holds it and more: whole.
    let longer = format!(
        "{NOTICE} Applications received after the deadline are reviewed in the order they arrive, and late fees apply."
    );
    let d = near(vec![hit("a#0", "a", 0.9, NOTICE, 0), hit("b#0", "b", 0.8, &longer, 0)], 0.8);
    assert_eq!(d.fragments[1].text, longer);
    assert!(d.duplicates.is_empty());
    // The other way round, the short one is inside the better long one: it leaves.
    let d = near(vec![hit("b#0", "b", 0.9, &longer, 0), hit("a#0", "a", 0.8, NOTICE, 0)], 0.8);
    assert_eq!(d.fragments.len(), 1);
    assert_eq!(d.duplicates[0].resemblance, 1.0);
}

#[test]
fn shingles_split_chinese_by_character() {
    let a = shingles("绿萝喜欢散射光，避免阳光直射。");
    let b = shingles("绿萝喜欢散射光，请避免阳光直射。");
    assert!(a.len() > 5);
    assert!(containment(&a, &b) > 0.8, "{}", containment(&a, &b));
    assert!(containment(&a, &shingles("多肉植物需要充足的阳光。")) < 0.2);
    assert_eq!(
        sentences("第一句。第二句！Third one. And 3.5 stays"),
        ["第一句。", "第二句！", "Third one.", "And 3.5 stays"]
    );
}
