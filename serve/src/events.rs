//! A run's events, numbered from 1: `op` (an op finished), `text` (a piece
//! of an LLM reply as it streams), `text_reset` (an attempt's text is void),
//! `print` (a line the program printed), `warning`, `status` (queued,
//! running, ...) and a last `done`. Kept in memory for the clients that
//! watch the run (SSE) and appended, as the run's lines, to the process's
//! current segment in `<memory>/serve/events/` (`ais_vm::telemetry::segments`:
//! no file per run), so a finished run's events can be replayed after a
//! restart. Servers before segments wrote `serve/events/<id>.jsonl`, which
//! is still read.

use crate::metrics::Metrics;
use ais_vm::llm::TextEvent;
use ais_vm::observe::{OpStart, OpUpdate, RunObserver, TextUpdate};
use ais_vm::telemetry::segments::{self, Segments};
use serde_json::{json, Value as Json};
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
    /// Where the events are kept on disk: the process's segments and the
    /// run's key (its id).
    sink: Option<(Arc<Segments>, String)>,
    /// Events already on disk (written here, or loaded).
    kept: usize,
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

    /// The directory of the servers' event segments under the memory
    /// directory.
    pub fn dir(memory: &Path) -> PathBuf {
        memory.join("serve").join("events")
    }

    /// The events file of run `id` written by a server before segments.
    fn old_path(memory: &Path, id: &str) -> PathBuf {
        Self::dir(memory).join(format!("{id}.jsonl"))
    }

    /// The events of run `id` written by earlier processes (a torn last
    /// line is dropped); `done` when its last event is `done`.
    pub fn load(memory: &Path, id: &str) -> EventLog {
        let mut text = std::fs::read(Self::old_path(memory, id)).unwrap_or_default();
        if let Some(more) = segments::read(&Self::dir(memory), id) {
            text.extend_from_slice(&more);
        }
        let log = EventLog::new();
        let mut st = log.lock();
        for line in text.split(|b| *b == b'\n') {
            let Ok(j) = serde_json::from_slice::<Json>(line) else {
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
        st.kept = st.events.len();
        drop(st);
        log
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the events from now on (and the ones so far not yet kept) as
    /// run `id`'s lines in `segments`.
    pub fn attach(&self, segments: Arc<Segments>, id: &str) {
        let mut st = self.lock();
        let mut bytes = Vec::new();
        for e in &st.events[st.kept..] {
            bytes.extend_from_slice(file_line(e).as_bytes());
        }
        let _ = segments.append(id, &bytes);
        st.kept = st.events.len();
        st.sink = Some((segments, id.to_string()));
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
        let kept = st.sink.as_ref().map(|(segments, key)| {
            // A write failure costs the replay after a restart, never the run.
            let _ = segments.append(key, file_line(&e).as_bytes());
        });
        st.events.push(e);
        if kept.is_some() {
            st.kept = st.events.len();
        }
        st.done = kind == "done";
        drop(st);
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
        id
    }

    /// Opens a finished log again (the run is resumed).
    pub fn reopen(&self) {
        self.lock().done = false;
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

    fn kinds(log: &EventLog) -> Vec<String> {
        log.all().iter().map(|e| e.kind.clone()).collect()
    }

    #[test]
    fn a_resumed_run_continues_its_lines_and_runs_share_one_segment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let segments = Arc::new(Segments::new(&EventLog::dir(dir.path()), 1 << 20));
        let log = EventLog::new();
        log.push("status", json!({"status": "queued"}));
        // Events before the log was attached are kept too, once.
        log.attach(segments.clone(), "r1");
        log.push("status", json!({"status": "running"}));
        let other = EventLog::new();
        other.attach(segments.clone(), "r2");
        other.push("done", json!({"status": "succeeded"}));
        log.push("done", json!({"status": "failed"}));
        assert_eq!(log.push("print", json!({"line": "late"})), 0, "after done");
        // A later process resumes it: loaded, reopened, attached again.
        let again = EventLog::load(dir.path(), "r1");
        assert_eq!(kinds(&again), ["status", "status", "done"]);
        assert!(again.is_done());
        again.reopen();
        let later = Arc::new(Segments::new(&EventLog::dir(dir.path()), 1 << 20));
        again.attach(later, "r1");
        again.push("status", json!({"status": "running"}));
        again.push("done", json!({"status": "succeeded"}));
        let last = EventLog::load(dir.path(), "r1");
        let ids: Vec<u64> = last.all().iter().map(|e| e.id).collect();
        assert_eq!(ids, [1, 2, 3, 4, 5], "no event kept twice");
        assert_eq!(kinds(&EventLog::load(dir.path(), "r2")), ["done"]);
        // Two processes' segments and the index: no file per run.
        let files = std::fs::read_dir(EventLog::dir(dir.path()))
            .expect("dir")
            .count();
        assert_eq!(files, 3);
    }

    #[test]
    fn an_event_file_of_an_older_server_is_still_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let old = EventLog::old_path(dir.path(), "r1");
        std::fs::create_dir_all(old.parent().expect("parent")).expect("mkdir");
        let line = |id: u64, kind: &str| {
            file_line(&Event {
                id,
                kind: kind.into(),
                data: json!({}),
            })
        };
        std::fs::write(
            &old,
            line(1, "status") + &line(2, "done") + "{\"id\": 3, \"ev",
        )
        .expect("write");
        let log = EventLog::load(dir.path(), "r1");
        assert_eq!(kinds(&log), ["status", "done"]);
        assert!(log.is_done());
    }
}
