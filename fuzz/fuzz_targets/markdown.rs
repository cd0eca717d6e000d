//! The markdown reader alone, from seeds of its own format (fuzz/seeds/markdown), so that mutations stay
//! close enough to the format to reach the parser: never panics, never hangs past libFuzzer's
//! timeout, never takes past its memory limit (the limits inside the reader: issue 63); an
//! accepted document's chunks are non-empty, with unique ids. Read as ingest reads it, on
//! the guarded thread (a dependency's panic is the file's error, as in ragctx; a panic in
//! ragctx's own code is named as a bug and fails the target).
#![no_main]
use libfuzzer_sys::fuzz_target;
use ragctx_ingest::{read_document_guarded, DocumentFormat};
use std::collections::HashSet;

fuzz_target!(|data: &[u8]| {
    let read = read_document_guarded("dir/doc", data.to_vec(), DocumentFormat::Markdown, std::time::Duration::from_secs(20));
    let read = match read {
        Ok(read) => read,
        Err(e) => {
            assert!(!e.message.contains("a bug at"), "{e}");
            assert!(!e.message.contains("passed a limit: reading it took longer"), "{e}");
            return;
        }
    };
    let mut ids = HashSet::new();
    for c in &read.chunks {
        assert!(!c.chunk.text.trim().is_empty(), "empty chunk");
        assert!(ids.insert(c.chunk.id.as_str().to_owned()), "duplicate chunk id");
    }
});
