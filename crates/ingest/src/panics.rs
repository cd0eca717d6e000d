//! A reading thread's panics kept to itself: a hook installed once takes the message of a
//! panic on a thread named [`THREAD`] (a dependency's becomes the file's error, ours is named
//! as a bug with its location), and the reader asks for it with [`last_panic`].

use std::cell::RefCell;
use std::sync::Once;

/// The name of the threads documents are read on (their panics are quiet).
pub(crate) const THREAD: &str = "ragctx-read";

thread_local! {
    /// The last panic's message on a reading thread.
    static PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
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
pub(crate) fn quiet_panics() {
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
