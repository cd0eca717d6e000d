//! Progress of a long embedding as the terminal's fronts show it — `ragctx ingest` and the
//! evaluations' corpora. A library's ingest (an opened `App`'s: Python's, the server's) logs
//! its progress instead (`ragctx_engine::ingest::Logged`) and draws nothing on its caller's
//! terminal.

use indicatif::{ProgressBar, ProgressStyle};
use ragctx_core::{Embedder, EmbeddingCache, Result};
use ragctx_engine::ingest::{embed_with_cache, IngestProgress, EMBED_STEP};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Progress on stderr: a bar on a terminal, about ten lines otherwise; warnings as
/// `ragctx: ...` lines.
pub struct Terminal {
    bar: Mutex<Option<ProgressBar>>,
    started: Instant,
    last: AtomicUsize,
}

impl Default for Terminal {
    fn default() -> Self {
        Terminal { bar: Mutex::new(None), started: Instant::now(), last: AtomicUsize::new(0) }
    }
}

impl IngestProgress for Terminal {
    fn embedded(&self, done: usize, total: usize) {
        let mut bar = self.bar.lock().unwrap_or_else(|e| e.into_inner());
        if done == 0 {
            if std::io::stderr().is_terminal() && total > 0 {
                let b = ProgressBar::new(total as u64);
                b.set_style(
                    ProgressStyle::with_template("embedding {bar:30} {pos}/{len} chunks  {per_sec}  eta {eta}")
                        .expect("valid template"),
                );
                *bar = Some(b);
            }
            return;
        }
        match bar.as_ref() {
            Some(b) => b.set_position(done as u64),
            None if done - self.last.load(Ordering::Relaxed) >= (total / 10).max(EMBED_STEP) || done == total => {
                self.last.store(done, Ordering::Relaxed);
                let secs = self.started.elapsed().as_secs_f64();
                let rate = done as f64 / secs.max(1e-9);
                eprintln!(
                    "embedded {done}/{total} chunks ({secs:.0}s, {rate:.1}/s, about {:.0}s left)",
                    (total - done) as f64 / rate
                );
            }
            None => {}
        }
    }

    fn finished(&self) {
        if let Some(b) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).take() {
            b.finish_and_clear();
        }
    }

    fn warn(&self, message: &str) {
        eprintln!("ragctx: {message}");
    }
}

/// Embeds what `cache` lacks, with [`Terminal`] progress, caching as it goes (the
/// evaluations' corpora): the vectors in `texts`' order and how many were embedded now.
pub fn embed_all(
    embedder: &dyn Embedder,
    cache: &dyn EmbeddingCache,
    texts: &[&str],
) -> Result<(Vec<Vec<f32>>, usize)> {
    embed_with_cache(embedder, Some(cache), texts, &Terminal::default())
}
