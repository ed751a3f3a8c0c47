//! A run's events, numbered from 1: `op` (an op finished), `text` (a piece
//! of an LLM reply as it streams), `text_reset` (an attempt's text is void),
//! `print` (a line the program printed), `warning`, `status` (queued,
//! running, ...) and a last `done`. Kept in memory for the clients that
//! watch the run (SSE) and appended to `<memory>/serve/events/<id>.jsonl`,
//! so a finished run's events can be replayed after a restart.

use crate::metrics::Metrics;
use ais_vm::llm::TextEvent;
use ais_vm::observe::{OpStart, OpUpdate, RunObserver, TextUpdate};
use serde_json::{json, Value as Json};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One event as sent: its id, kind and JSON data.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub id: u64,
    pub kind: String,
    pub data: Json,
}

impl Event {
    /// The event as one Server-Sent Events frame.
    pub fn sse(&self) -> String {
        ais_wire::sse::event(self.id, &self.kind, &self.data)
    }
}

#[derive(Default)]
struct LogState {
    events: Vec<Arc<Event>>,
    done: bool,
    /// Open while the run can still add events (closed at `done`: a
    /// server that has run many runs holds no descriptor per run).
    file: Option<std::fs::File>,
    path: Option<PathBuf>,
}

/// The events of one run.
pub struct EventLog {
    state: Mutex<LogState>,
    /// Bumped at every event: the streams following the log wait on it
    /// (on the server's async runtime, without a thread each).
    changed: tokio::sync::watch::Sender<u64>,
    /// Event streams following this log now (bounded per run).
    pub(crate) subscribers: AtomicUsize,
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog {
            state: Mutex::default(),
            changed: tokio::sync::watch::Sender::new(0),
            subscribers: AtomicUsize::new(0),
        }
    }
}

impl EventLog {
    pub fn new() -> EventLog {
        EventLog::default()
    }

    /// The events file of run `id` under the memory directory.
    pub fn path(dir: &Path, id: &str) -> PathBuf {
        dir.join("serve").join("events").join(format!("{id}.jsonl"))
    }

    /// The events written by an earlier process (a torn last line is
    /// dropped); `done` when its last event is `done`.
    pub fn load(path: &Path) -> EventLog {
        let log = EventLog::new();
        if let Ok(f) = std::fs::File::open(path) {
            let mut st = log.lock();
            for line in std::io::BufReader::new(f).lines() {
                let Ok(line) = line else { break };
                let Ok(j) = serde_json::from_str::<Json>(&line) else {
                    continue;
                };
                let (Some(id), Some(kind)) = (j["id"].as_u64(), j["event"].as_str()) else {
                    continue;
                };
                st.done = kind == "done";
                st.events.push(Arc::new(Event {
                    id,
                    kind: kind.to_string(),
                    data: j["data"].clone(),
                }));
            }
        }
        log
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends the events from now on (and the ones so far) to `path`.
    pub fn attach_file(&self, path: &Path) {
        let open = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
        };
        // The directory is made when the first run needs it, not probed
        // per run: `mkdir` of an existing directory still takes its
        // parent's lock, which every run's setup then waits on.
        let file = match open() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match path.parent() {
                Some(parent) => std::fs::create_dir_all(parent).and_then(|()| open()),
                None => Err(e),
            },
            r => r,
        };
        let mut st = self.lock();
        st.path = Some(path.to_path_buf());
        if let Ok(mut f) = file {
            for e in &st.events {
                let _ = f.write_all(file_line(e).as_bytes());
            }
            if !st.done {
                st.file = Some(f);
            }
        }
    }

    /// Adds an event; returns its id.
    pub fn push(&self, kind: &str, data: Json) -> u64 {
        let mut st = self.lock();
        if st.done {
            return 0;
        }
        let id = st.events.last().map_or(1, |e| e.id + 1);
        let e = Arc::new(Event {
            id,
            kind: kind.to_string(),
            data,
        });
        if let Some(f) = &mut st.file {
            let _ = f.write_all(file_line(&e).as_bytes());
        }
        st.events.push(e);
        st.done = kind == "done";
        if st.done {
            st.file = None;
        }
        drop(st);
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
        id
    }

    /// Opens a finished log again (the run is resumed).
    pub fn reopen(&self) {
        let mut st = self.lock();
        st.done = false;
        if st.file.is_none() {
            if let Some(p) = &st.path {
                st.file = std::fs::OpenOptions::new().append(true).open(p).ok();
            }
        }
    }

    pub fn is_done(&self) -> bool {
        self.lock().done
    }

    /// Up to `max` events after id `after`, and whether the log is done
    /// (with every event of it returned).
    fn snapshot(&self, after: u64, max: usize) -> (Vec<Arc<Event>>, bool) {
        let st = self.lock();
        let start = st.events.partition_point(|e| e.id <= after);
        let end = st.events.len().min(start.saturating_add(max.max(1)));
        (
            st.events[start..end].to_vec(),
            st.done && end == st.events.len(),
        )
    }

    /// Up to `max` events after id `after`, waiting up to `wait` for one
    /// when there is none yet; and whether the log is done.
    pub async fn next_after(
        &self,
        after: u64,
        max: usize,
        wait: Duration,
    ) -> (Vec<Arc<Event>>, bool) {
        // Subscribed before looking: an event pushed in between is seen.
        let mut rx = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let (events, done) = self.snapshot(after, max);
            if !events.is_empty() || done {
                return (events, done);
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                // The wait is over (or the log is gone): nothing yet.
                _ => return (Vec::new(), false),
            }
        }
    }

    /// Every event so far.
    pub fn all(&self) -> Vec<Arc<Event>> {
        self.lock().events.clone()
    }
}

fn file_line(e: &Event) -> String {
    format!("{}\n", json!({"id": e.id, "event": e.kind, "data": e.data}))
}

/// The observer of a served run: its op events and streamed text go to
/// the run's log, op latencies and LLM use to the metrics.
pub struct Watcher {
    pub log: Arc<EventLog>,
    pub metrics: Arc<Metrics>,
    pub backend: String,
}

impl RunObserver for Watcher {
    fn wants_starts(&self) -> bool {
        true
    }

    fn start(&self, u: &OpStart<'_>) {
        self.log.push(
            "op_start",
            json!({
                "frame": u.frame,
                "flow": u.flow,
                "flow_id": u.flow_id,
                "region": u.region,
                "agent": u.agent,
                "op": u.op,
                "opcode": u.opcode.mnemonic(),
                "start_ns": u.start_ns,
            }),
        );
    }

    fn op(&self, u: &OpUpdate<'_>) {
        let e = u.event;
        let mut data = json!({
            "frame": e.frame,
            "flow": u.flow,
            "flow_id": e.flow,
            "region": e.region,
            "agent": u.agent,
            "op": e.op,
            "opcode": e.opcode.mnemonic(),
            "ready_ns": e.ready_ns,
            "status": match e.status {
                ais_vm::telemetry::Status::Ok => "ok",
                ais_vm::telemetry::Status::Failed => "failed",
                ais_vm::telemetry::Status::Cancelled => "cancelled",
            },
            "start_ns": e.start_ns,
            "end_ns": e.end_ns,
        });
        self.metrics
            .observe_op(e.opcode.mnemonic(), e.duration_ns() as f64 / 1e9);
        if let Some(l) = &e.llm {
            data["llm"] = json!({
                "model": l.model,
                "input_tokens": l.input_tokens,
                "output_tokens": l.output_tokens,
                "simulated": l.simulated,
                "cost_usd": l.cost_micro_usd as f64 / 1e6,
            });
            self.metrics
                .observe_llm(&self.backend, l.input_tokens, l.output_tokens);
        }
        self.log.push("op", data);
    }

    fn text(&self, u: &TextUpdate<'_>) {
        let mut data = json!({
            "frame": u.frame,
            "flow": u.flow,
            "agent": u.agent,
            "op": u.op,
        });
        if let Some(t) = u.turn {
            data["turn"] = t.into();
        }
        match u.event {
            TextEvent::Delta { attempt, text } => {
                data["attempt"] = (*attempt).into();
                data["text"] = text.as_str().into();
                self.log.push("text", data);
            }
            TextEvent::Reset { attempt } => {
                data["attempt"] = (*attempt).into();
                self.log.push("text_reset", data);
            }
        }
    }
}

/// Printed lines and run-time warnings of a served run, as events (and
/// nothing on the server's terminal).
pub struct LogConsole(pub Arc<EventLog>);

impl ais_vm::aam::Console for LogConsole {
    fn print(&self, line: &str) {
        self.0.push("print", json!({"line": line}));
    }

    fn warn(&self, message: &str) {
        self.0.push("warning", json!({"message": message}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_closed_at_done_and_reopened_for_a_resume() {
        let dir = std::env::temp_dir().join(format!("ais-serve-events-{}", std::process::id()));
        let path = EventLog::path(&dir, "r1");
        let log = EventLog::new();
        log.attach_file(&path);
        log.push("status", json!({"status": "running"}));
        log.push("done", json!({"status": "failed"}));
        assert!(log.lock().file.is_none());
        log.reopen();
        assert!(log.lock().file.is_some());
        log.push("status", json!({"status": "running"}));
        log.push("done", json!({"status": "succeeded"}));
        let again = EventLog::load(&path);
        let kinds: Vec<String> = again.all().iter().map(|e| e.kind.clone()).collect();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(kinds, ["status", "done", "status", "done"]);
        assert!(again.is_done());
    }
}
