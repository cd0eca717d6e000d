//! What the reader targets (`pdf`, `docx`, `html`, `markdown`) check, one format each: the
//! document read as ingest reads it, on the guarded thread (a dependency's panic is the
//! file's error, as in ragctx; a panic in ragctx's own reading code is named as a bug and
//! fails the target, as does a file past the time limit); accepted chunks are non-empty,
//! with unique ids.
use ragctx_ingest::{read_document_guarded, DocumentFormat};
use std::collections::HashSet;

pub fn check(data: &[u8], format: DocumentFormat) {
    let read = match read_document_guarded("dir/doc", data.to_vec(), format, std::time::Duration::from_secs(20)) {
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
}
