//! The queue of accepted runs and the executor threads that take them:
//! a place reserved per run (429 past the limit), a run queued, dequeued,
//! executed and settled.

use super::{cancelled_error, paused_hint, Job, Registry, Status};
use crate::engine::Prepared;
use crate::error::ApiError;
use crate::now_ms;
use crate::run::RunEntry;
use crossbeam::channel::Receiver;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How often parked runs ask the store whether their turn came.
const TURN_LOOK: Duration = Duration::from_millis(100);

impl Registry {
    pub(super) fn executor(&self, rx: &Receiver<Job>) {
        for Job { entry, prepared } in rx.iter() {
            if entry.status() == Status::Queued && !entry.cancel.is_cancelled() {
                if let Some(first) = prepared.waits_for() {
                    self.park(Job { entry, prepared }, &first);
                    continue;
                }
            }
            let go = {
                let mut st = entry.lock();
                if st.status == Status::Queued && !entry.cancel.is_cancelled() {
                    st.status = Status::Running;
                    st.started_ms = Some(now_ms());
                    true
                } else {
                    false
                }
            };
            if !go {
                prepared.discard("cancelled before it started");
                if !entry.status().is_final() {
                    entry.settle(Status::Cancelled, None, Some(cancelled_error()), None);
                }
                self.pending.fetch_sub(1, Ordering::SeqCst);
                continue;
            }
            entry.events.push("status", json!({"status": "running"}));
            self.running.fetch_add(1, Ordering::SeqCst);
            self.metrics.run_started();
            // A panic in a run must not take its executor thread down.
            let finished =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| prepared.execute()));
            self.running.fetch_sub(1, Ordering::SeqCst);
            let (status, result, error, summary) = match finished {
                Ok(_) if entry.cancel.is_cancelled() => {
                    (Status::Cancelled, None, Some(cancelled_error()), None)
                }
                Ok(f) => match f.outcome {
                    Ok(v) => (Status::Succeeded, Some(v), None, Some(f.summary)),
                    // Stopped at a `pause`: waiting for a person's input
                    // (`POST /v1/runs/{id}/resume` with `input`).
                    Err(mut e) if e["cause"] == "run.paused" => {
                        // The VM's hint is about failures (`try`), and a
                        // pause is not one: say how to answer it.
                        e["hint"] = paused_hint(&entry.id).into();
                        (Status::Paused, None, Some(e), Some(f.summary))
                    }
                    Err(e) => (Status::Failed, None, Some(e), Some(f.summary)),
                },
                Err(_) => (
                    Status::Failed,
                    None,
                    Some(json!({"code": "server.internal", "message": "the run panicked"})),
                    None,
                ),
            };
            entry.settle(status, result, error, summary);
            self.pending.fetch_sub(1, Ordering::SeqCst);
            // A parked run of the same thread may go now.
            self.parked_cv.notify_all();
            self.prune();
        }
    }

    /// Sets a run aside, still queued, until its thread's turn comes: it
    /// holds no executor meanwhile (the run it waits for may need one).
    fn park(&self, job: Job, first: &str) {
        job.entry
            .events
            .push("status", json!({"status": "queued", "waiting_for": first}));
        self.parked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(job);
    }

    /// Puts parked runs whose turn came (or that were cancelled) back in
    /// the executors' queue: at once when a run ends here, and every
    /// [`TURN_LOOK`] for runs that end elsewhere (another server, a
    /// worker). Ends with the registry.
    pub(super) fn unpark_loop(weak: &std::sync::Weak<Registry>) {
        loop {
            let Some(reg) = weak.upgrade() else { return };
            let waiting = {
                let g = reg.parked.lock().unwrap_or_else(|e| e.into_inner());
                let (mut g, _) = reg
                    .parked_cv
                    .wait_timeout(g, TURN_LOOK)
                    .unwrap_or_else(|e| e.into_inner());
                std::mem::take(&mut *g)
            };
            let mut still = Vec::new();
            for job in waiting {
                if job.entry.cancel.is_cancelled() || job.prepared.waits_for().is_none() {
                    if let Err(e) = reg.tx.send(job) {
                        // No executor left: the server is stopping.
                        still.push(e.into_inner());
                    }
                } else {
                    still.push(job);
                }
            }
            if !still.is_empty() {
                let mut g = reg.parked.lock().unwrap_or_else(|e| e.into_inner());
                // Parked meanwhile after those, in the order they came.
                still.append(&mut g);
                *g = still;
            }
        }
    }

    /// Takes one place among the accepted runs, or refuses (429).
    pub(super) fn reserve(&self) -> Result<(), ApiError> {
        let cap = self.config.max_concurrent + self.config.queue;
        let n = self.pending.fetch_add(1, Ordering::SeqCst);
        if n >= cap {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            return Err(ApiError::new(
                429,
                "server.overloaded",
                format!(
                    "{n} runs are queued or running (limit {cap}: --max-concurrent-runs {} plus --queue {})",
                    self.config.max_concurrent, self.config.queue
                ),
                "retry after the number of seconds in Retry-After",
            )
            .with_retry_after(1));
        }
        Ok(())
    }

    pub(super) fn release(&self) {
        self.pending.fetch_sub(1, Ordering::SeqCst);
    }

    /// Queues a run whose log is ready (and, with a journal, attached to
    /// its file).
    pub(super) fn enqueue(
        &self,
        entry: Arc<RunEntry>,
        prepared: Box<dyn Prepared>,
    ) -> Arc<RunEntry> {
        entry.events.push(
            "status",
            json!({"status": "queued", "resumes": entry.resumes}),
        );
        {
            let mut runs = self.lock();
            if runs.by_id.insert(entry.id.clone(), entry.clone()).is_none() {
                runs.order.push(entry.id.clone());
            }
        }
        if let Err(e) = self.tx.send(Job {
            entry: entry.clone(),
            prepared,
        }) {
            // Only when every executor is gone: the run never starts.
            e.into_inner()
                .prepared
                .discard("the server has no executor");
            entry.settle(
                Status::Failed,
                None,
                Some(json!({"code": "server.internal", "message": "no executor"})),
                None,
            );
            self.release();
        }
        entry
    }
}
