//! The Milvus exclusion filter builder. Property: the literal expression, parsed back the way
//! Milvus's grammar reads strings, names exactly the excluded ids — no id can end its string
//! and add a clause. The templated form never contains an id.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ragctx_core::{ChunkId, DocumentId, ExclusionSet};
use ragctx_milvus::filter::{exclusion, parse_not_in, DOCUMENT_ID, ID};
use std::collections::BTreeSet;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // Ids separated by NUL; those after a SOH are chunk ids, before are document ids.
    let (docs, chunks) = text.split_once('\u{1}').unwrap_or((&text, ""));
    let docs: BTreeSet<DocumentId> = docs.split('\0').filter(|s| !s.is_empty()).map(DocumentId::from).collect();
    let chunks: BTreeSet<ChunkId> = chunks.split('\0').filter(|s| !s.is_empty()).map(ChunkId::from).collect();
    let ex = ExclusionSet { documents: docs.clone(), chunks: chunks.clone() };
    let Some(literal) = exclusion(&ex, false) else {
        assert!(ex.is_empty(), "a non-empty exclusion always filters");
        return;
    };
    let clauses = parse_not_in(&literal.expr).expect("the built filter parses");
    let mut want = Vec::new();
    if !docs.is_empty() {
        want.push((DOCUMENT_ID.to_owned(), docs.iter().map(|d| d.as_str().to_owned()).collect::<Vec<_>>()));
    }
    if !chunks.is_empty() {
        want.push((ID.to_owned(), chunks.iter().map(|c| c.as_str().to_owned()).collect::<Vec<_>>()));
    }
    assert_eq!(clauses, want, "filter {:?}", literal.expr);
    let templated = exclusion(&ex, true).unwrap();
    let fixed = [
        "document_id not in {docs}",
        "id not in {chunks}",
        "(document_id not in {docs}) and (id not in {chunks})",
    ];
    assert!(fixed.contains(&templated.expr.as_str()), "ids never enter a templated filter: {:?}", templated.expr);
});
