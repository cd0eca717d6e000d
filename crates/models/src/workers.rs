//! Jobs on a few scoped threads, for embedding batches (in process, or requests to a server).

use ragctx_core::{Error, Result};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Runs `job(state, i)` for every `i` in `0..jobs` on up to `workers` threads (on the
/// caller's thread when one is enough), each thread with its own `init()` state; results in
/// job order. The first error stops the jobs not yet started and is returned.
pub(crate) fn in_parallel<S, T: Send>(
    jobs: usize,
    workers: usize,
    init: impl Fn() -> S + Sync,
    job: impl Fn(&mut S, usize) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let out: Mutex<Vec<Option<T>>> = Mutex::new((0..jobs).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let failed: Mutex<Option<Error>> = Mutex::new(None);
    let work = || {
        let mut state = init();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= jobs || failed.lock().map_or(true, |f| f.is_some()) {
                return;
            }
            match job(&mut state, i) {
                Ok(r) => out.lock().expect("no worker panics holding the lock")[i] = Some(r),
                Err(e) => {
                    failed.lock().expect("no worker panics holding the lock").get_or_insert(e);
                    return;
                }
            }
        }
    };
    let workers = workers.min(jobs);
    if workers <= 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(work);
            }
        });
    }
    if let Some(e) = failed.into_inner().expect("workers finished") {
        return Err(e);
    }
    Ok(out.into_inner().expect("workers finished").into_iter().map(|r| r.expect("every job ran")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_job_order_and_the_first_error_wins() {
        let squares = in_parallel(
            50,
            4,
            || 0usize,
            |runs, i| {
                *runs += 1;
                Ok(i * i)
            },
        )
        .unwrap();
        assert_eq!(squares, (0..50).map(|i| i * i).collect::<Vec<_>>());
        let err = in_parallel(50, 3, || (), |_, i| if i == 7 { Err(Error::Model("seven".into())) } else { Ok(i) });
        assert!(matches!(err, Err(Error::Model(m)) if m == "seven"));
        assert!(in_parallel(0, 4, || (), |_, i| Ok(i)).unwrap().is_empty());
    }
}
