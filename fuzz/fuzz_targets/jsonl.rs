//! The JSONL reader: any bytes give chunks or a located error, never a panic; every chunk
//! it accepts has an id, a document id and text, and duplicate ids are caught.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ragctx_ingest::{check_unique_ids, parse_jsonl};

fuzz_target!(|data: &[u8]| {
    match parse_jsonl("fuzz.jsonl", data) {
        Ok(chunks) => {
            for c in &chunks {
                assert!(!c.chunk.id.as_str().is_empty(), "empty id accepted");
                assert!(!c.chunk.document_id.as_str().is_empty(), "empty document id accepted");
                assert!(!c.chunk.text.trim().is_empty(), "empty text accepted");
                assert!(c.line.is_some_and(|l| l >= 1), "chunk without its line");
            }
            let mut ids: Vec<&str> = chunks.iter().map(|c| c.chunk.id.as_str()).collect();
            ids.sort_unstable();
            let dup = ids.windows(2).any(|w| w[0] == w[1]);
            assert_eq!(check_unique_ids(&chunks).is_err(), dup, "duplicate check disagrees");
        }
        Err(e) => {
            assert_eq!(e.file, "fuzz.jsonl");
            assert!(!e.message.is_empty());
        }
    }
});
