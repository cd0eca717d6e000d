//! A document read on a thread of its own, so that no file can take the ingest down: the
//! parse runs with a large stack of its own, a panic in a dependency becomes the file's
//! error (printed nowhere), and a file that takes longer than its time is left out, named
//! with the limit it passed (its thread is abandoned, its result never used).
//!
//! The limits inside the parsers (streams' caps, forms' depth: `pdf/limits.rs`; DOCX's
//! entries) keep memory bounded; a process that must bound memory whatever a dependency
//! does reads in a worker process as well (`ragctx_app`'s reader).

use crate::chunker::{read_document, DocumentFormat, ReadDocument};
use crate::panics::{last_panic, quiet_panics, THREAD};
use crate::InputError;
use std::sync::mpsc;
use std::time::Duration;

/// The stack a document is read with: deep enough for any nesting the limits let through.
const STACK: usize = 64 << 20;

/// [`read_document`] on a guarded thread, given at most `time`.
pub fn read_document_guarded(
    document_id: &str,
    bytes: Vec<u8>,
    format: DocumentFormat,
    time: Duration,
) -> Result<ReadDocument, InputError> {
    quiet_panics();
    let (tx, rx) = mpsc::channel();
    let id = document_id.to_owned();
    let spawned = std::thread::Builder::new().name(THREAD.into()).stack_size(STACK).spawn(move || {
        let read = std::panic::catch_unwind(|| read_document(&id, &bytes, format));
        let read = read.unwrap_or_else(|_| {
            let why = last_panic().unwrap_or_else(|| "a panic".into());
            Err(InputError::whole(&id, format!("its reader failed ({why}): ragctx cannot read it")))
        });
        let _ = tx.send(read);
    });
    if let Err(e) = spawned {
        return Err(InputError::whole(document_id, format!("no thread to read it on ({e})")));
    }
    match rx.recv_timeout(time) {
        Ok(read) => read,
        Err(_) => Err(InputError::whole(
            document_id,
            format!("passed a limit: reading it took longer than {} s, the most a file may take", time.as_secs()),
        )),
    }
}
