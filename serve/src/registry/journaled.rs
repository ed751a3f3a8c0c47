//! Runs as JSON and their events, whether this server holds them or only
//! the journal knows them (an earlier server's, `aisc run`'s).

use super::{unknown_run, Registry, Status};
use crate::error::ApiError;
use crate::events::EventLog;
use crate::run::RunEntry;
use serde_json::{json, Value as Json};
use std::sync::Arc;

impl Registry {
    /// A run as JSON: this server's, or one only the journal knows.
    pub fn describe(&self, id: &str) -> Result<Json, ApiError> {
        if let Some(e) = self.get(id) {
            return Ok(e.to_json());
        }
        let dir = self.journal_dir();
        let rec = match (self.engine.journal_store(), &dir) {
            (Some(store), _) => ais_vm::journal::load_record_in(store.as_ref(), id),
            (None, Some(dir)) => ais_vm::journal::load_record(dir, id),
            (None, None) => return Err(unknown_run(id)),
        }
        .map_err(|e| match e.code {
            "journal.no_run" | "journal.missing" => unknown_run(id),
            _ => ApiError::internal(e.to_string()),
        })?;
        let status = journal_status(dir.as_deref(), &rec.info);
        let mut j = info_json(&rec.info, status);
        if let Some(r) = rec.result {
            j["result"] = r;
        }
        j["summary"] = json!({"journaled_ops": rec.info.entries, "in_doubt": rec.info.in_doubt});
        Ok(j)
    }

    /// Every run, oldest first: those only the journal knows, then this
    /// server's; with `status`, only those.
    pub fn list(&self, status: Option<Status>) -> Result<Vec<Json>, ApiError> {
        let mine: Vec<Arc<RunEntry>> = {
            let runs = self.lock();
            runs.order
                .iter()
                .filter_map(|id| runs.by_id.get(id).cloned())
                .collect()
        };
        let mut out = Vec::new();
        let dir = self.journal_dir();
        let journaled = match (self.engine.journal_store(), &dir) {
            (Some(store), _) => Some(store.list_runs()),
            (None, Some(dir)) => Some(ais_vm::journal::list_runs(dir)),
            (None, None) => None,
        };
        if let Some(journaled) = journaled {
            let journaled = journaled.map_err(|e| ApiError::internal(e.to_string()))?;
            for info in journaled {
                if self.get(&info.id).is_some() {
                    continue;
                }
                let s = journal_status(dir.as_deref(), &info);
                if status.is_none_or(|w| w == s) {
                    out.push(info_json(&info, s));
                }
            }
        }
        for e in mine {
            if status.is_none_or(|w| w == e.status()) {
                out.push(e.to_json());
            }
        }
        Ok(out)
    }

    /// The events of a run (for a run of an earlier server, from its file).
    pub fn events(&self, id: &str) -> Result<Arc<EventLog>, ApiError> {
        if let Some(e) = self.get(id) {
            return Ok(e.events.clone());
        }
        let j = self.describe(id)?;
        let dir = self.journal_dir().ok_or_else(|| unknown_run(id))?;
        let log = EventLog::load(&dir, id);
        if !log.is_done() {
            // Nothing more will come from this process: the log ends with
            // what the journal says.
            let mut done = json!({"status": j["status"]});
            if let Some(r) = j.get("result") {
                done["result"] = r.clone();
            }
            if let Some(e) = j.get("error") {
                done["error"] = e.clone();
            }
            log.push("done", done);
        }
        Ok(Arc::new(log))
    }

    /// The journal steps of run `id` (`GET /v1/runs/{id}/steps`).
    pub fn steps(&self, id: &str) -> Result<Json, ApiError> {
        self.engine.steps(id)
    }
}

/// The API status of a journaled run this server does not hold.
fn journal_status(dir: Option<&std::path::Path>, info: &ais_vm::journal::RunInfo) -> Status {
    use ais_vm::journal::Status as J;
    match info.status {
        J::Completed => Status::Succeeded,
        J::Running => Status::Running,
        J::Queued => Status::Queued,
        J::Interrupted | J::Paused => Status::Paused,
        J::Failed => {
            // A cancelled run is `failed` in the journal; its event log
            // says it was cancelled.
            let cancelled = dir.is_some_and(|dir| {
                EventLog::load(dir, &info.id)
                    .all()
                    .last()
                    .is_some_and(|e| e.kind == "done" && e.data["status"] == "cancelled")
            });
            if cancelled {
                Status::Cancelled
            } else {
                Status::Failed
            }
        }
    }
}

fn info_json(info: &ais_vm::journal::RunInfo, status: Status) -> Json {
    let mut j = json!({
        "id": info.id,
        "program": info.program,
        "entry": info.entry,
        "status": status.name(),
        "created_ms": info.started_ms,
        "started_ms": info.started_ms,
        "ended_ms": info.ended_ms,
        "resumes": info.resumes,
    });
    if let Some(e) = &info.error {
        j["error"] = json!({"code": "run.failed", "message": e});
    }
    j
}
