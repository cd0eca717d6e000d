//! Named pauses inside writes, so crash tests can prove where their kill landed.
//!
//! Off unless `RAGCTX_FAILPOINTS` names points when the process first passes one:
//! `RAGCTX_FAILPOINTS=sessions.before-commit=200,chunks.before-commit=200` makes each named
//! point print `failpoint NAME: paused` to stderr, sleep the given milliseconds, then print
//! `failpoint NAME: resumed` (10 s at most). A test that kills the process after the first line and before
//! the second has killed it inside that write (the crash suites count such kills). The only
//! action is a pause: a stray variable slows writes, it cannot change them. Compiled into every
//! build (one read of the variable per process, then a load per point) so that the crash
//! suites test the binary that ships and CI builds the workspace once.
//!
//! The points: `chunks.before-commit` (an ingest's rows are written, its redb transaction not
//! committed), `index.before-rename` (the vector index file written beside the old one, not
//! yet renamed over it), `lexical.before-rename` (the same for the lexical index),
//! `changes.before-prune` (after `index.bin` is rewritten, the recorded changes no index file
//! needs any more deleted, the transaction not committed),
//! `sessions.before-commit` (a turn's record and trace written, the transaction not
//! committed).

use std::sync::OnceLock;
use std::time::Duration;

/// The variable that names the points.
pub const VARIABLE: &str = "RAGCTX_FAILPOINTS";

fn points() -> &'static [(String, u64)] {
    static POINTS: OnceLock<Vec<(String, u64)>> = OnceLock::new();
    POINTS.get_or_init(|| std::env::var(VARIABLE).map(|v| parse(&v)).unwrap_or_default())
}

/// The longest pause: a stray variable can slow a write, never hold it for long.
pub const MAX_PAUSE_MS: u64 = 10_000;

/// `name=ms` pairs separated by commas (ms capped at [`MAX_PAUSE_MS`]); a pair without a
/// valid `ms` is ignored.
fn parse(spec: &str) -> Vec<(String, u64)> {
    spec.split(',')
        .filter_map(|p| {
            let (name, ms) = p.split_once('=')?;
            Some((name.trim().to_owned(), ms.trim().parse::<u64>().ok()?.min(MAX_PAUSE_MS)))
        })
        .collect()
}

/// Pauses here when `RAGCTX_FAILPOINTS` names `name` (see the module docs).
pub fn pause(name: &str) {
    let points = points();
    if points.is_empty() {
        return;
    }
    if let Some((_, ms)) = points.iter().find(|(n, _)| n == name) {
        use std::io::Write;
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "failpoint {name}: paused");
        let _ = err.flush();
        drop(err);
        std::thread::sleep(Duration::from_millis(*ms));
        let _ = writeln!(std::io::stderr().lock(), "failpoint {name}: resumed");
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn pairs_parse_and_bad_ones_are_ignored() {
        assert_eq!(
            parse("a.b=10, c=x,d,e= 7,f=99999999"),
            vec![("a.b".to_owned(), 10), ("e".to_owned(), 7), ("f".to_owned(), super::MAX_PAUSE_MS)],
            "names with their pauses; a pair without a number is no point"
        );
        assert!(parse("").is_empty());
    }
}
