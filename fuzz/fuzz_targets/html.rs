//! The html reader alone, from seeds of its own format (fuzz/seeds/html), so that mutations stay
//! close enough to the format to reach the parser: never panics, never hangs past libFuzzer's
//! timeout, never takes past its memory limit (the limits inside the reader: issue 63); an
//! accepted document's chunks are non-empty, with unique ids.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ragctx_ingest::{read_document, DocumentFormat};
use std::collections::HashSet;

fuzz_target!(|data: &[u8]| {
    let Ok(read) = read_document("dir/doc", data, DocumentFormat::Html) else { return };
    let mut ids = HashSet::new();
    for c in &read.chunks {
        assert!(!c.chunk.text.trim().is_empty(), "empty chunk");
        assert!(ids.insert(c.chunk.id.as_str().to_owned()), "duplicate chunk id");
    }
});
