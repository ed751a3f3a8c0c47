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
}

/// How often a queued run's row is read while a worker runs it.
const POLL: std::time::Duration = std::time::Duration::from_millis(50);

impl QueuedRun {
    fn wait(&self) -> Result<serde_json::Value, serde_json::Value> {
        let err =
            |code: &str, message: String| serde_json::json!({"code": code, "message": message});
        if !self.webhooks.is_empty() {
            self.store
                .add_webhooks(&self.id, &self.webhooks)
                .map_err(|e| err(e.code, e.message))?;
        }
        self.store
            .enqueue_with(
                &NewRun {
                    id: &self.id,
                    program: &self.program,
                    artifact: &self.artifact,
                    entry: self.entry.as_deref(),
                    args: &self.args,
                },
                &self.queue,
            )
            .map_err(|e| err(e.code, e.message))?;
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

    fn discard(self: Box<Self>, _reason: &str) {
        // Never queued: nothing in the store to end.
    }
}
