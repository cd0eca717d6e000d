//! The md/txt/html/docx/pdf chunker: never panics; accepted documents give non-empty chunks with
//! unique ids, consecutive ordinals and offsets inside the text, each under the size cap.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ragctx_ingest::{chunk_document, DocumentFormat, CHUNK_CHARS};
use std::collections::HashSet;

fuzz_target!(|data: &[u8]| {
    for format in [
        DocumentFormat::Markdown,
        DocumentFormat::Text,
        DocumentFormat::Html,
        DocumentFormat::Docx,
        DocumentFormat::Pdf,
    ] {
        let Ok(chunks) = chunk_document("dir/doc.x", data, format) else { continue };
        assert!(!chunks.is_empty());
        let mut ids = HashSet::new();
        for (i, c) in chunks.iter().enumerate() {
            let c = &c.chunk;
            assert!(ids.insert(c.id.as_str().to_owned()), "duplicate chunk id {}", c.id.as_str());
            assert_eq!(c.document_id.as_str(), "dir/doc.x");
            assert_eq!(c.ordinal, Some(i as u32), "ordinals consecutive");
            assert!(!c.text.trim().is_empty(), "empty chunk");
            assert!(c.text.chars().count() <= 2 * CHUNK_CHARS, "chunk of {} chars", c.text.chars().count());
            if let (Some(s), Some(e)) = (c.start, c.end) {
                assert!(s < e, "offsets {s}..{e}");
            }
        }
    }
});
