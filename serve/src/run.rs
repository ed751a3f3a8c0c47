//! One run of a server: its status as the API reports it, its state,
//! and its entry (event log, cancel switch, waiting for its end).

use crate::cancel::Cancel;
use crate::events::EventLog;
use crate::now_ms;
use serde_json::{json, Value as Json};
use std::sync::{Arc, Condvar, Mutex};

/// A run's status as the API reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Accepted, waiting for an executor.
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    /// Stopped before its end without failing (its server was killed):
    /// resumable.
    Paused,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Queued,
        Status::Running,
        Status::Succeeded,
        Status::Failed,
        Status::Cancelled,
        Status::Paused,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Status::Queued => "queued",
            Status::Running => "running",
            Status::Succeeded => "succeeded",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
            Status::Paused => "paused",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|x| x.name() == s)
    }

    /// The run will not change any more (unless resumed).
    pub fn is_final(self) -> bool {
        !matches!(self, Status::Queued | Status::Running)
    }

    pub(crate) fn resumable(self) -> bool {
        matches!(self, Status::Failed | Status::Cancelled | Status::Paused)
    }
}

/// The state of a run.
#[derive(Clone, Debug)]
pub struct RunState {
    pub status: Status,
    pub result: Option<Json>,
    pub error: Option<Json>,
    pub summary: Option<Json>,
    pub started_ms: Option<i64>,
    pub ended_ms: Option<i64>,
}

/// A run started (or resumed) by this server.
pub struct RunEntry {
    pub id: String,
    pub program: String,
    pub entry: Option<String>,
    pub created_ms: i64,
    pub resumes: u32,
    pub(crate) state: Mutex<RunState>,
    pub(crate) cv: Condvar,
    pub(crate) events: Arc<EventLog>,
    pub(crate) cancel: Cancel,
    /// Its questions about destructive tools (`aisc serve --ask`).
    pub(crate) asker: Arc<crate::console::Asker>,
}

impl RunEntry {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, RunState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn state(&self) -> RunState {
        self.lock().clone()
    }

    /// The run's status, without copying its result and summary (read for
    /// every held run when the registry is pruned or counted).
    pub fn status(&self) -> Status {
        self.lock().status
    }

    /// Waits until the run has ended.
    pub fn wait(&self) -> RunState {
        let st = self.lock();
        let st = self
            .cv
            .wait_while(st, |s| !s.status.is_final())
            .unwrap_or_else(|e| e.into_inner());
        st.clone()
    }

    /// Waits until the run has ended, at most `limit`; its state then.
    pub fn wait_timeout(&self, limit: std::time::Duration) -> RunState {
        let st = self.lock();
        let (st, _) = self
            .cv
            .wait_timeout_while(st, limit, |s| !s.status.is_final())
            .unwrap_or_else(|e| e.into_inner());
        st.clone()
    }

    pub fn cancel_switch(&self) -> &Cancel {
        &self.cancel
    }

    pub fn to_json(&self) -> Json {
        let s = self.state();
        let mut j = json!({
            "id": self.id,
            "program": self.program,
            "entry": self.entry,
            "status": s.status.name(),
            "created_ms": self.created_ms,
            "started_ms": s.started_ms,
            "ended_ms": s.ended_ms,
            "resumes": self.resumes,
        });
        if let Some(r) = s.result {
            j["result"] = r;
        }
        if let Some(e) = s.error {
            j["error"] = e;
        }
        if let Some(sm) = s.summary {
            j["summary"] = sm;
        }
        let asking = self.asker.open();
        if !asking.is_empty() {
            j["confirm"] = asking.into();
        }
        j
    }

    /// Ends the run with `status`; its log gets its last event.
    pub(crate) fn settle(
        &self,
        status: Status,
        result: Option<Json>,
        error: Option<Json>,
        summary: Option<Json>,
    ) {
        {
            let mut st = self.lock();
            st.status = status;
            st.result = result.clone();
            st.error = error.clone();
            st.summary = summary;
            st.ended_ms = Some(now_ms());
        }
        self.cv.notify_all();
        let mut done = json!({"status": status.name()});
        if let Some(r) = result {
            done["result"] = r;
        }
        if let Some(e) = error {
            done["error"] = e;
        }
        self.events.push("done", done);
    }
}

/// The state of a run just accepted.
pub(crate) fn queued_state() -> RunState {
    RunState {
        status: Status::Queued,
        result: None,
        error: None,
        summary: None,
        started_ms: None,
        ended_ms: None,
    }
}
