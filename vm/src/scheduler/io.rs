//! The I/O executor: lanes of blocking calls (LLM, tools), each with a
//! fixed number of I/O threads (its concurrency limit) and a policy queue.

use super::policy::{Policy, PolicyQueue};
use crate::frame::Frame;
use crate::sync::lock;
use crate::value::Val;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// A blocking op waiting for (or running on) an I/O thread.
pub(crate) struct Job<'r> {
    pub frame: Arc<Frame<'r>>,
    pub op: u32,
    pub ready_ns: u64,
    /// Worker that dispatched it.
    pub worker: u32,
    pub args: SmallVec<[Val; 4]>,
}

struct State<'r> {
    queue: PolicyQueue<Job<'r>>,
    closed: bool,
    /// Threads waiting for a job.
    waiting: usize,
}

pub(crate) struct Lane<'r> {
    state: Mutex<State<'r>>,
    cv: Condvar,
    /// Jobs popped and not yet finished (for stall detection and progress).
    pub busy: AtomicUsize,
}

impl<'r> Lane<'r> {
    pub fn new(policy: Policy) -> Lane<'r> {
        Lane {
            state: Mutex::new(State {
                queue: PolicyQueue::new(policy),
                closed: false,
                waiting: 0,
            }),
            cv: Condvar::new(),
            busy: AtomicUsize::new(0),
        }
    }

    /// Queues a job without waking a thread; the caller calls
    /// [`Lane::wake`] later (workers batch the wake-ups of a burst of
    /// dispatches, so I/O threads do not preempt them one call at a time).
    pub fn push_quiet(&self, job: Job<'r>, prio: u64, agent: u32) {
        let mut g = lock(&self.state);
        if g.closed {
            return;
        }
        g.queue.push(job, prio, agent);
    }

    /// Wakes up to `n` waiting threads.
    pub fn wake(&self, n: usize) {
        let waiting = lock(&self.state).waiting;
        if n >= waiting {
            self.cv.notify_all();
        } else {
            for _ in 0..n {
                self.cv.notify_one();
            }
        }
    }

    /// Blocks until a job is available; `None` once the lane is closed.
    /// The caller must call [`Lane::finished`] after running the job.
    pub fn pop(&self) -> Option<Job<'r>> {
        let mut g = lock(&self.state);
        loop {
            if g.closed {
                return None;
            }
            if let Some(j) = g.queue.pop() {
                self.busy.fetch_add(1, Ordering::SeqCst);
                return Some(j);
            }
            g.waiting += 1;
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
            g.waiting -= 1;
        }
    }

    /// Pops a job if fewer than `limit` are running (counting it as
    /// running); never blocks. For backends that start calls without
    /// waiting, where the limit is not a thread count.
    pub fn try_pop(&self, limit: usize) -> Option<Job<'r>> {
        let mut g = lock(&self.state);
        if g.closed || self.busy.load(Ordering::SeqCst) >= limit {
            return None;
        }
        let j = g.queue.pop()?;
        self.busy.fetch_add(1, Ordering::SeqCst);
        Some(j)
    }

    /// Counts up to `n` more jobs as running, as many as keep the count
    /// within `limit` when nothing is queued ahead of them (queued jobs go
    /// first, in policy order); returns how many.
    pub fn try_reserve(&self, limit: usize, n: usize) -> usize {
        let g = lock(&self.state);
        if g.closed || !g.queue.is_empty() {
            return 0;
        }
        let busy = self.busy.load(Ordering::SeqCst);
        let k = limit.saturating_sub(busy).min(n);
        self.busy.fetch_add(k, Ordering::SeqCst);
        k
    }

    pub fn finished(&self) {
        self.busy.fetch_sub(1, Ordering::SeqCst);
    }

    pub fn queued(&self) -> usize {
        lock(&self.state).queue.len()
    }

    /// Stops the lane: queued jobs are dropped, idle threads exit, running
    /// calls finish (they see the run's cancel token) and then exit.
    pub fn close(&self) {
        let dropped = {
            let mut g = lock(&self.state);
            g.closed = true;
            let mut q = PolicyQueue::new(Policy::Fifo);
            std::mem::swap(&mut q, &mut g.queue);
            q
        };
        drop(dropped);
        self.cv.notify_all();
    }
}
