//! A document read on a thread of its own, so that no file can take the ingest down: the
//! parse runs with a large stack of its own, a panic in a dependency becomes the file's
//! error (printed nowhere), and a file that takes longer than its time is left out, named
//! with the limit it passed (its thread is abandoned, its result never used).
//!
//! The limits inside the parsers (streams' caps, forms' depth: `pdf/limits.rs`; DOCX's
//! entries) keep memory bounded; a process that must bound memory whatever a dependency
//! does reads in a worker process as well (`ragctx_app`'s reader).

use crate::chunker::{read_document, DocumentFormat, ReadDocument};
use crate::InputError;
use std::cell::RefCell;
use std::sync::{mpsc, Once};
use std::time::Duration;

/// The stack a document is read with: deep enough for any nesting the limits let through.
const STACK: usize = 64 << 20;

/// The name of the threads documents are read on (their panics are quiet).
const THREAD: &str = "ragctx-read";

thread_local! {
    /// The last panic's message on a reading thread.
    static PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

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
            let why = PANIC.with(|p| p.borrow_mut().take()).unwrap_or_default();
            Err(InputError::whole(&id, format!("its reader failed ({}): ragctx cannot read it", short(&why))))
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

/// The last panic's message on this reading thread, taken (a panic caught inside a reader,
/// to say why a part was lost); `None` outside a guarded thread.
pub(crate) fn last_panic() -> Option<String> {
    PANIC.with(|p| p.borrow_mut().take()).map(|m| short(&m))
}

/// A panic's message, on one line and short.
fn short(why: &str) -> String {
    let line = why.lines().next().unwrap_or("a panic").trim();
    let mut s: String = line.chars().take(120).collect();
    if line.chars().count() > 120 {
        s.push('…');
    }
    s
}

/// Installs, once, a panic hook that keeps a reading thread's panic to itself (its message
/// goes to the file's error, no backtrace to the terminal); any other thread's panic goes to
/// the hook there was.
fn quiet_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name() == Some(THREAD) {
                let message = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                // A panic in ragctx's own reading code is a bug to report: where it was goes
                // with it (a dependency's is the file's, named by the file).
                let ours = info.location().filter(|l| l.file().contains("crates/ingest"));
                let message = match ours {
                    Some(l) => format!("a bug at {}:{}: {message}", l.file(), l.line()),
                    None => message,
                };
                PANIC.with(|p| *p.borrow_mut() = Some(message));
            } else {
                before(info);
            }
        }));
    });
}
