//! `aisc serve --enqueue`: a served run handed to the fleet of `aisc
//! worker`s through the shared store, and followed there until it ends.

use ais_serve::{Finished, Prepared};
use ais_vm::journal;
use ais_vm::store::{NewRun, Store};
use std::sync::Arc;

/// A run handed to the fleet (`--enqueue`): queued in the store when an
/// executor takes it, then followed in the store until a worker ends it.
pub(super) struct QueuedRun {
    pub(super) id: String,
    pub(super) store: Arc<dyn Store>,
    pub(super) program: String,
    pub(super) artifact: Vec<u8>,
    pub(super) entry: Option<String>,
    pub(super) args: String,
    pub(super) cancel: ais_serve::Cancel,
    /// Priority and concurrency key (`POST /v1/runs`).
    pub(super) queue: ais_vm::store::priority::QueueOptions,
    /// Stored before the run is queued (a worker may end it at once).
    pub(super) webhooks: Vec<ais_vm::store::webhook::Hook>,
    /// Queued already (with its thread, `join_thread`): the executor only
    /// follows it.
    pub(super) in_store: bool,
}

/// How often a queued run's row is read while a worker runs it.
const POLL: std::time::Duration = std::time::Duration::from_millis(50);

impl QueuedRun {
    fn new_run(&self) -> NewRun<'_> {
        NewRun {
            id: &self.id,
            program: &self.program,
            artifact: &self.artifact,
            entry: self.entry.as_deref(),
            args: &self.args,
        }
    }

    fn wait(&self) -> Result<serde_json::Value, serde_json::Value> {
        let err =
            |code: &str, message: String| serde_json::json!({"code": code, "message": message});
        if !self.in_store {
            if !self.webhooks.is_empty() {
                self.store
                    .add_webhooks(&self.id, &self.webhooks)
                    .map_err(|e| err(e.code, e.message))?;
            }
            self.store
                .enqueue_with(&self.new_run(), &self.queue)
                .map_err(|e| err(e.code, e.message))?;
        }
        loop {
            if self.cancel.is_cancelled() {
                // Issue 32, defect 8: the cancel must reach the store (no
                // worker takes a queued run) and the worker running it (its
                // fence moves on: its next write is refused and it stops).
                return Err(match self.store.cancel(&self.id, "cancelled") {
                    Ok(_) => err(
                        "cancelled",
                        format!("run `{}` was cancelled", self.id),
                    ),
                    Err(e) => err(
                        "cancelled",
                        format!(
                            "stopped waiting for run `{}`, but the store did not take the cancel ({e}): a worker may still run it",
                            self.id
                        ),
                    ),
                });
            }
            match self.store.run_row(&self.id) {
                Ok(Some(row)) => match row.info.status {
                    journal::Status::Completed => {
                        return Ok(row
                            .result
                            .as_deref()
                            .map(|t| serde_json::from_str(t).unwrap_or_else(|_| t.into()))
                            .unwrap_or_default())
                    }
                    journal::Status::Failed => {
                        return Err(err(
                            "run.failed",
                            row.info.error.unwrap_or_else(|| "the run failed".into()),
                        ))
                    }
                    journal::Status::Paused => {
                        let mut e = err(
                            "run.paused",
                            row.info.error.unwrap_or_else(|| "waiting for input".into()),
                        );
                        e["cause"] = "run.paused".into();
                        return Err(e);
                    }
                    _ => {}
                },
                Ok(None) => {
                    return Err(err(
                        "run.not_found",
                        format!("run `{}` left the store", self.id),
                    ))
                }
                // A store hiccup: the run goes on; read again.
                Err(_) => {}
            }
            std::thread::sleep(POLL);
        }
    }
}

impl Prepared for QueuedRun {
    fn id(&self) -> &str {
        &self.id
    }

    fn execute(self: Box<Self>) -> Finished {
        let outcome = self.wait();
        let summary = self
            .store
            .run_row(&self.id)
            .ok()
            .flatten()
            .map_or(serde_json::Value::Null, |r| {
                serde_json::json!({"journaled_ops": r.info.entries, "takeovers_or_resumes": r.info.resumes, "store": self.store.location()})
            });
        Finished { outcome, summary }
    }

    fn discard(self: Box<Self>, reason: &str) {
        // Only a run queued with its thread is in the store: no worker
        // may take it now.
        if self.in_store {
            let _ = self.store.cancel(&self.id, reason);
        }
    }

    /// Queued in the fleet's store at once, linked to its thread in the
    /// same transaction: its place in the thread is the store's, and the
    /// workers' claim keeps it queued until the runs before it end.
    fn join_thread(
        &mut self,
        store: &dyn Store,
        thread: &str,
        create: bool,
    ) -> Result<i64, ais_vm::store::JournalError> {
        if !self.webhooks.is_empty() {
            self.store.add_webhooks(&self.id, &self.webhooks)?;
        }
        let seq = store.enqueue_on_thread(&self.new_run(), &self.queue, thread, create)?;
        self.in_store = true;
        Ok(seq)
    }
}
