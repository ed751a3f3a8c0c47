//! The HTTP threads of a backend: kept between calls, started on demand,
//! woken in a chain (see [`HttpThreads`]).

use crate::sync::lock;
use std::sync::Arc;

/// Work for an HTTP thread. It calls [`IdleMark::set`] once its result is
/// made and before handing it over, so the caller's next call finds this
/// thread free rather than starting another.
pub(super) type PoolJob = Box<dyn FnOnce(&IdleMark) + Send>;

/// Held by a thread while it runs a job.
pub(super) struct IdleMark {
    pool: Arc<Pool>,
    set: std::cell::Cell<bool>,
}

impl IdleMark {
    pub(super) fn set(&self) {
        if !self.set.replace(true) {
            lock(&self.pool.state).finishing += 1;
        }
    }
}

/// The threads that carry out one backend's HTTP calls. They are kept
/// between calls (a fan-out of 64 calls would otherwise create and destroy
/// 64 threads, about 0.3 ms of CPU each on a small machine) and started on
/// demand. A batch of calls is queued first and the threads are woken in a
/// chain (each woken thread wakes the next), so the scheduler worker
/// submitting a fan-out makes one wake-up and is not preempted by each
/// thread in turn. The threads end when the backend is dropped (a
/// thread stuck on a hung server ends at the attempt timeout).
pub(super) struct HttpThreads {
    pool: Arc<Pool>,
}

struct Pool {
    state: std::sync::Mutex<PoolState>,
    cv: std::sync::Condvar,
}

#[derive(Default)]
struct PoolState {
    jobs: std::collections::VecDeque<PoolJob>,
    /// Threads blocked waiting for a job.
    sleeping: usize,
    /// Of those, woken for a job but not yet running.
    waking: usize,
    /// Threads whose job's result is made and that will look at the queue
    /// next, and how many of them a queued job already counts on.
    finishing: usize,
    finishing_claimed: usize,
    closed: bool,
}

impl HttpThreads {
    pub(super) fn new() -> HttpThreads {
        HttpThreads {
            pool: Arc::new(Pool {
                state: std::sync::Mutex::new(PoolState::default()),
                cv: std::sync::Condvar::new(),
            }),
        }
    }

    pub(super) fn submit(&self, job: PoolJob) -> std::io::Result<()> {
        self.submit_all(vec![job])
    }

    /// Queues `jobs`, wakes as many waiting threads as they need and starts
    /// new threads for the rest. On error (no thread could be started)
    /// nothing is queued.
    pub(super) fn submit_all(&self, jobs: Vec<PoolJob>) -> std::io::Result<()> {
        let n = jobs.len();
        let wake = {
            let mut g = lock(&self.pool.state);
            let free_finishing = g.finishing.saturating_sub(g.finishing_claimed);
            let from_finishing = free_finishing.min(n);
            g.finishing_claimed += from_finishing;
            let free_sleeping = g.sleeping.saturating_sub(g.waking);
            let wake = free_sleeping.min(n - from_finishing);
            g.waking += wake;
            g.jobs.extend(jobs);
            (wake, n - from_finishing - wake)
        };
        let (wake, spawn) = (wake.0, wake.1);
        if wake > 0 {
            // One wake-up here; a thread that takes a job and sees more
            // queued wakes the next (`serve_pool`). Waking them all at once
            // makes them fight over the queue's lock and preempt this
            // thread (a scheduler worker with more of the fan-out to
            // dispatch) one after the other.
            self.pool.cv.notify_one();
        }
        for _ in 0..spawn {
            let pool = Arc::clone(&self.pool);
            let spawned = std::thread::Builder::new()
                .name("apxm-http".into())
                .spawn(move || serve_pool(&pool));
            if let Err(e) = spawned {
                // Without a thread the queued jobs may never run: fail the
                // whole batch rather than leave any waiting.
                let mut g = lock(&self.pool.state);
                if g.sleeping == 0 && g.finishing == 0 {
                    g.jobs.clear();
                }
                return Err(e);
            }
        }
        Ok(())
    }
}

impl Drop for HttpThreads {
    fn drop(&mut self) {
        lock(&self.pool.state).closed = true;
        self.pool.cv.notify_all();
    }
}

fn serve_pool(pool: &Arc<Pool>) {
    let mut g = lock(&pool.state);
    loop {
        if let Some(job) = g.jobs.pop_front() {
            // Pass the wake-up on while jobs wait and threads sleep. When
            // none sleeps, the queued jobs belong to threads that are awake
            // (finishing a job, or just started): each takes the next job
            // whenever it is free, so none is left behind.
            let pass_on = !g.jobs.is_empty() && g.sleeping > 0;
            drop(g);
            if pass_on {
                pool.cv.notify_one();
            }
            let mark = IdleMark {
                pool: Arc::clone(pool),
                set: std::cell::Cell::new(false),
            };
            job(&mark);
            mark.set();
            g = lock(&pool.state);
            g.finishing -= 1;
            if g.finishing_claimed > g.finishing {
                g.finishing_claimed = g.finishing;
            }
            continue;
        }
        if g.closed {
            return;
        }
        g.sleeping += 1;
        g = pool.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        g.sleeping -= 1;
        g.waking = g.waking.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Submits `n` jobs that each wait (up to 5 s) until all `n` run at
    /// once; returns how many saw the others.
    fn all_at_once(threads: &HttpThreads, n: usize) -> usize {
        let gate = Arc::new((std::sync::Mutex::new(0usize), std::sync::Condvar::new()));
        let (tx, rx) = crossbeam::channel::unbounded();
        let jobs: Vec<PoolJob> = (0..n)
            .map(|_| {
                let (gate, tx) = (Arc::clone(&gate), tx.clone());
                let job: PoolJob = Box::new(move |_: &IdleMark| {
                    let (m, cv) = &*gate;
                    let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
                    *g += 1;
                    cv.notify_all();
                    let (g, _) = cv
                        .wait_timeout_while(g, Duration::from_secs(5), |k| *k < n)
                        .unwrap_or_else(|e| e.into_inner());
                    let _ = tx.send(*g >= n);
                });
                job
            })
            .collect();
        assert!(threads.submit_all(jobs).is_ok());
        let deadline = Instant::now() + Duration::from_secs(10);
        (0..n)
            .filter(|_| {
                let left = deadline.saturating_duration_since(Instant::now());
                rx.recv_timeout(left) == Ok(true)
            })
            .count()
    }

    #[test]
    fn a_batch_runs_all_at_once_on_new_and_on_sleeping_threads() {
        let threads = HttpThreads::new();
        // New threads, then the same threads woken from sleep (a chain of
        // wake-ups: each thread that takes a job wakes the next), then a
        // wider batch (the sleepers plus new threads).
        assert_eq!(all_at_once(&threads, 16), 16);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(all_at_once(&threads, 16), 16);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(all_at_once(&threads, 24), 24);
    }
}
