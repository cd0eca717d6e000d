//! Services a test needs, and the only way to go without one: a skip the run asked for,
//! said out loud and counted. A test whose service is missing fails; `VAR=skip` (e.g.
//! `RAGCTX_TEST_MILVUS=skip`) skips it, printing `SKIPPED <test>: <reason>` and appending
//! that line to `RAGCTX_SKIP_LOG` (`scripts/test` counts the file in its summary); with
//! `RAGCTX_NO_SKIPS` set (CI) a skip is itself a failure.

use std::io::Write;

/// The service's address from `var` (or `default` when unset); `None` when the run asked
/// to skip it (`var=skip`), after saying so (see the module).
pub fn service(var: &str, default: &str) -> Option<String> {
    match std::env::var(var).ok().filter(|v| !v.is_empty()) {
        Some(v) if v == "skip" => {
            skipped(&format!("{var}=skip"));
            None
        }
        Some(v) => Some(v),
        None => Some(default.to_owned()),
    }
}

/// Records that the current test skips for `reason`: `SKIPPED <test>: <reason>` on stderr
/// and in `RAGCTX_SKIP_LOG`; panics instead when `RAGCTX_NO_SKIPS` is set.
pub fn skipped(reason: &str) {
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    let line = format!("SKIPPED {test}: {reason}");
    if std::env::var_os("RAGCTX_NO_SKIPS").is_some_and(|v| !v.is_empty()) {
        panic!("{line}, but RAGCTX_NO_SKIPS is set: this run may not skip");
    }
    eprintln!("{line}");
    if let Some(log) = std::env::var_os("RAGCTX_SKIP_LOG").filter(|v| !v.is_empty()) {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(&log);
        if let Ok(mut f) = file {
            let _ = writeln!(f, "{line}");
        }
    }
}
