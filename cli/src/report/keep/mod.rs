//! Keeping a run's telemetry as it happens, one file per attempt, so that
//! a process that dies (SIGKILL, OOM, power) still leaves what it did for
//! `aisc report`.
//!
//! A new run's attempt (attempt 1: `aisc run`, a served run) is kept as
//! the lines of key `ID` in the process's segments of `telemetry/` in the
//! memory directory (`ais_vm::telemetry::segments`): no file per run, which
//! cost a served run about a millisecond of kernel CPU. An attempt whose
//! number is not known in advance (a resume, a worker's takeover) gets a
//! file of its own, `telemetry/ID.n.jsonl` (`ID.jsonl` for attempt 1),
//! numbered by probing; runs before segments kept every attempt so. An
//! attempt starts with an `attempt` header line (`"state": "running"`), then
//! one `--events` op line per event as the run records it (from the
//! process's one writer thread: the observer only queues the event). When
//! the run ends, the run's own thread appends what is still queued, an
//! `end` line and the `summary` line (or, if the file missed an event,
//! writes it whole again: a file is replaced, a segment gets a second
//! header and the reader keeps what follows the last one). No fsync: the goal is to survive the
//! process; the journal is the durable record.

mod kept;

pub use kept::{attempt_path, attempts, safe_id, Kept};
use kept::{create_attempt, Out, DISCARD_TYPE};

use ais_ir::bytecode::Program;
use ais_vm::observe::{OpUpdate, RunObserver};
use ais_vm::telemetry::segments::Segments;
use ais_vm::telemetry::{OpEvent, RunSummary, Status, Track};
use serde_json::{json, Map, Value as Json};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock, Weak};

/// The first line of a kept telemetry file.
pub const HEADER_TYPE: &str = "attempt";
/// The line before the summary of a completed attempt.
pub const END_TYPE: &str = "end";

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// An op the journal answered instead of running it again: on a resumed
/// attempt, an LLM or tool op that completed on a worker (a call the VM
/// makes runs on an LLM or tool lane). Inline effects look the same
/// replayed or not and are not marked.
pub fn is_replayed(e: &OpEvent, attempt: u32) -> bool {
    use ais_ir::ExecClass as X;
    attempt > 1
        && e.status == Status::Ok
        && matches!(e.track, Track::Worker(_))
        && matches!(e.opcode.info().exec, X::Llm | X::Tool)
}

/// One op line: the `--events` object, the flow named as the run named it,
/// and `replayed` when the journal answered it.
/// An event's line: named from the program (completing the file) or from
/// the names the observer was given (streaming, without the program).
fn op_line(
    names: Result<(&Program, &RunSummary), (&str, &str)>,
    e: &OpEvent,
    attempt: u32,
) -> Map<String, Json> {
    let mut o = match names {
        Ok((program, summary)) => ais_vm::telemetry::event_json(program, summary, e),
        Err((flow, agent)) => ais_vm::telemetry::event_json_named(flow, agent, e),
    };
    if is_replayed(e, attempt) {
        o.insert("replayed".into(), json!(true));
    }
    o
}

fn header(run_id: &str, attempt: u32, started_ms: u64, state: &str) -> Map<String, Json> {
    let mut h = Map::new();
    h.insert("type".into(), json!(HEADER_TYPE));
    h.insert("run_id".into(), json!(run_id));
    h.insert("attempt".into(), json!(attempt));
    h.insert("state".into(), json!(state));
    h.insert("started_unix_ms".into(), json!(started_ms));
    h.insert("pid".into(), json!(std::process::id()));
    h
}

/// What the run's observer hands over: the event and the names it was
/// given (the program is not at hand while streaming).
struct Update {
    event: OpEvent,
    flow: String,
    agent: String,
}

/// Warns once: a telemetry write failure costs the telemetry, never the run.
struct Warn(AtomicBool);

impl Warn {
    fn once(&self, place: &str, e: &std::io::Error) {
        if !self.0.swap(true, Ordering::SeqCst) {
            eprintln!(
                "warning: the run's telemetry is no longer kept in {place} for `aisc report`: {e}"
            );
        }
    }
}

/// Where an attempt's file stands.
enum Place {
    /// Not created yet (the writer, or whoever needs it first, creates it).
    Pending,
    Open {
        attempt: u32,
        kept: Kept,
        out: Out,
    },
    /// Could not be created (warned): nothing is kept.
    Failed,
    /// Finished or discarded: nothing more is written.
    Closed {
        attempt: u32,
        kept: Kept,
    },
}

/// The file side of a keeper, locked while the file is created or written
/// (by the process's writer or by the run's end), never by the run's
/// observer.
struct FileState {
    place: Place,
    /// Events in the file.
    written: usize,
    /// A write failed: the file misses events (the end rewrites it whole).
    failed: bool,
}

/// A stopped attempt's file, for its end.
struct Stopped {
    attempt: u32,
    kept: Kept,
    /// Still open (`None` when it was stopped before).
    out: Option<Out>,
    /// Events in the file; `None` after a write failure.
    streamed: Option<usize>,
}

/// The events the run recorded that the file does not hold yet.
#[derive(Default)]
struct Queue {
    updates: Vec<Update>,
    /// Handed to the writer and not taken by it yet: one wake-up per batch.
    scheduled: bool,
}

/// Streams one attempt's events to its file; the run's observer (composed
/// with the edge's own). `finish` completes the file.
///
/// One writer thread per process (`writer`) creates the files and appends
/// the events: the observer only queues an event, and no thread is started
/// per run. Creating a file costs about a millisecond on some file systems
/// (a virtual disk here), which a run should not wait for. The run's end
/// does not wait for the writer either: it takes what is queued and
/// completes the file itself (creating it if the writer has not yet), so a
/// run's end never waits on a thread that has not been scheduled.
pub struct Keeper {
    /// Itself, for handing to the writer from the observer.
    me: Weak<Keeper>,
    dir: PathBuf,
    run_id: String,
    /// A new run: its attempt is the first, kept in the segments.
    fresh: bool,
    started_ms: u64,
    file: Mutex<FileState>,
    queue: Mutex<Queue>,
    warn: Warn,
}

/// The process's telemetry writer: one thread, started on first use, that
/// creates kept files and appends queued events. `None` when the thread
/// could not be started: then the run's end does the writing.
fn writer() -> Option<&'static mpsc::Sender<Arc<Keeper>>> {
    static WRITER: OnceLock<Option<mpsc::Sender<Arc<Keeper>>>> = OnceLock::new();
    WRITER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Arc<Keeper>>();
            std::thread::Builder::new()
                .name("ais-telemetry".into())
                .spawn(move || {
                    while let Ok(k) = rx.recv() {
                        k.write_queued();
                    }
                })
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

impl Keeper {
    /// Starts keeping run `run_id`'s next attempt in memory directory
    /// `dir` (`fresh`: a new run, its first attempt): the process's writer
    /// creates the file.
    pub fn start(dir: &Path, run_id: &str, fresh: bool) -> std::io::Result<Arc<Keeper>> {
        let keeper = Arc::new_cyclic(|me| Keeper {
            me: me.clone(),
            dir: dir.to_path_buf(),
            run_id: run_id.to_string(),
            fresh,
            started_ms: now_ms(),
            file: Mutex::new(FileState {
                place: Place::Pending,
                written: 0,
                failed: false,
            }),
            queue: Mutex::new(Queue {
                updates: Vec::new(),
                scheduled: true,
            }),
            warn: Warn(AtomicBool::new(false)),
        });
        match writer() {
            Some(w) if w.send(keeper.clone()).is_ok() => {}
            // No writer: the file is created now, by the run.
            _ => {
                keeper.lock_queue().scheduled = false;
                keeper.write_queued();
            }
        }
        Ok(keeper)
    }

    fn lock_file(&self) -> std::sync::MutexGuard<'_, FileState> {
        self.file.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates the file (with its header) if no one has: under the file's
    /// lock, so exactly once per attempt.
    fn ensure_open(&self, st: &mut FileState) {
        if !matches!(st.place, Place::Pending) {
            return;
        }
        let created =
            create_attempt(&self.dir, &self.run_id, self.fresh).and_then(|(n, kept, mut out)| {
                let h = Json::Object(header(&self.run_id, n, self.started_ms, "running"));
                let mut line = serde_json::to_vec(&h)?;
                line.push(b'\n');
                out.write_all(&line)?;
                Ok((n, kept, out))
            });
        st.place = match created {
            Ok((attempt, kept, out)) => Place::Open { attempt, kept, out },
            Err(e) => {
                self.warn
                    .once(&self.dir.join("telemetry").display().to_string(), &e);
                Place::Failed
            }
        };
    }

    /// The writer's work on this keeper (or the run's, without a writer):
    /// creates the file if needed and appends what is queued, in one write.
    fn write_queued(&self) {
        let mut st = self.lock_file();
        self.lock_queue().scheduled = false;
        self.ensure_open(&mut st);
        self.append_queued(&mut st);
    }

    /// Appends the queued events to an open file (one write); after a
    /// failure, nothing more. Called with the file's lock held.
    fn append_queued(&self, st: &mut FileState) {
        let updates = std::mem::take(&mut self.lock_queue().updates);
        let Place::Open { attempt, kept, out } = &mut st.place else {
            return;
        };
        if st.failed || updates.is_empty() {
            return;
        }
        let mut bytes = Vec::new();
        for u in &updates {
            let line = op_line(Err((&u.flow, &u.agent)), &u.event, *attempt);
            if serde_json::to_writer(&mut bytes, &Json::Object(line)).is_err() {
                st.failed = true;
                return;
            }
            bytes.push(b'\n');
        }
        match out.write_all(&bytes) {
            Ok(()) => st.written += updates.len(),
            Err(e) => {
                st.failed = true;
                self.warn.once(&kept.name(), &e);
            }
        }
    }

    /// The attempt's number and where it is kept, created now if the
    /// writer has not yet; `None` if it could not be.
    pub fn placed(&self) -> Option<(u32, Kept)> {
        let mut st = self.lock_file();
        self.ensure_open(&mut st);
        match &st.place {
            Place::Open { attempt, kept, .. } | Place::Closed { attempt, kept } => {
                Some((*attempt, kept.clone()))
            }
            Place::Pending | Place::Failed => None,
        }
    }

    /// Ends streaming: the file (created now if need be) holds every event
    /// queued so far, and nothing more is streamed to it. Returns the
    /// attempt, its file (open for the end's lines) and how many events it
    /// holds (`None` after a write failure); `None` when there is no file.
    fn stop(&self) -> Option<Stopped> {
        let mut st = self.lock_file();
        self.ensure_open(&mut st);
        self.append_queued(&mut st);
        let streamed = (!st.failed).then_some(st.written);
        let (attempt, kept, out) = match std::mem::replace(&mut st.place, Place::Failed) {
            Place::Open { attempt, kept, out } => (attempt, kept, Some(out)),
            Place::Closed { attempt, kept } => (attempt, kept, None),
            Place::Pending | Place::Failed => return None,
        };
        st.place = Place::Closed {
            attempt,
            kept: kept.clone(),
        };
        Some(Stopped {
            attempt,
            kept,
            out,
            streamed,
        })
    }

    /// Completes the file from the run's report. When the file already
    /// holds every event of the report (the usual case), an `end` line
    /// (outcome, end time, replayed ops) and the summary line are appended:
    /// no second file per run. Otherwise (a write failed, an event was not
    /// streamed) it is rewritten whole through a temporary file: header
    /// (`complete`), every event in start order, `end`, summary.
    pub fn finish(&self, program: &Program, report: &ais_vm::RunReport) {
        let Some(Stopped {
            attempt,
            kept,
            mut out,
            streamed,
        }) = self.stop()
        else {
            return; // no file: warned when it could not be created
        };
        let outcome = match &report.outcome {
            Ok(_) => "ok",
            Err(ais_vm::RunError::OpFailed { code, .. }) if code == ais_vm::exec::PAUSED => {
                "paused"
            }
            Err(_) => "failed",
        };
        let replayed = report
            .events
            .iter()
            .filter(|e| is_replayed(e, attempt))
            .count();
        let end = json!({
            "type": END_TYPE,
            "outcome": outcome,
            "ended_unix_ms": now_ms(),
            "replayed_ops": replayed,
        });
        let mut s = serde_json::to_value(&report.summary).unwrap_or(Json::Null);
        if let Json::Object(m) = &mut s {
            m.insert("type".into(), json!("summary"));
        }
        let mut bytes = Vec::new();
        let written = (|| -> std::io::Result<()> {
            if let (Some(out), Some(n)) = (&mut out, streamed) {
                if n == report.events.len() {
                    serde_json::to_writer(&mut bytes, &end)?;
                    bytes.push(b'\n');
                    serde_json::to_writer(&mut bytes, &s)?;
                    bytes.push(b'\n');
                    return out.write_all(&bytes);
                }
            }
            let h = header(&self.run_id, attempt, self.started_ms, "complete");
            serde_json::to_writer(&mut bytes, &Json::Object(h))?;
            bytes.push(b'\n');
            for e in &report.events {
                let line = op_line(Ok((program, &report.summary)), e, attempt);
                serde_json::to_writer(&mut bytes, &Json::Object(line))?;
                bytes.push(b'\n');
            }
            serde_json::to_writer(&mut bytes, &end)?;
            bytes.push(b'\n');
            serde_json::to_writer(&mut bytes, &s)?;
            bytes.push(b'\n');
            match &kept {
                Kept::File(path) => replace(path, &bytes),
                // The reader keeps what follows the last header.
                Kept::Segment(key) => {
                    Segments::shared(&self.dir.join("telemetry")).append(key, &bytes)
                }
            }
        })();
        if let Err(e) = written {
            self.warn.once(&kept.name(), &e);
        }
    }

    /// The run never started (a served run discarded before it ran): its
    /// attempt leaves no file.
    pub fn discard(&self) {
        self.lock_queue().updates.clear();
        let mut st = self.lock_file();
        match std::mem::replace(&mut st.place, Place::Failed) {
            Place::Open {
                kept: Kept::File(path),
                ..
            }
            | Place::Closed {
                kept: Kept::File(path),
                ..
            } => {
                let _ = std::fs::remove_file(path);
            }
            Place::Open {
                kept: Kept::Segment(key),
                ..
            }
            | Place::Closed {
                kept: Kept::Segment(key),
                ..
            } => {
                let line = format!("{}\n", json!({"type": DISCARD_TYPE}));
                let _ = Segments::shared(&self.dir.join("telemetry")).append(&key, line.as_bytes());
            }
            Place::Pending | Place::Failed => {}
        }
    }
}

impl RunObserver for Keeper {
    fn op(&self, u: &OpUpdate<'_>) {
        let wake = {
            let mut q = self.lock_queue();
            q.updates.push(Update {
                event: u.event.clone(),
                flow: u.flow.to_string(),
                agent: u.agent.to_string(),
            });
            !std::mem::replace(&mut q.scheduled, true)
        };
        if wake {
            // The writer holds the keeper until it has written; without a
            // writer, the run's end writes what is queued.
            if let (Some(w), Some(me)) = (writer(), self.me.upgrade()) {
                let _ = w.send(me);
            }
        }
    }
}

/// Replaces `path` with `bytes` through a temporary file and a rename (a
/// reader sees the streamed file or the complete one), without the fsync
/// of `run::write_atomic`: kept telemetry must survive the process, not
/// the machine, and a served run must not pay a disk flush for it.
fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("jsonl.tmp{}", std::process::id()));
    let r = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// Two observers as one: the edge's (e.g. `--stream`) and the keeper.
pub struct Both(pub Arc<dyn RunObserver>, pub Arc<dyn RunObserver>);

impl RunObserver for Both {
    fn wants_starts(&self) -> bool {
        self.0.wants_starts() || self.1.wants_starts()
    }

    fn start(&self, u: &ais_vm::observe::OpStart<'_>) {
        self.0.start(u);
        self.1.start(u);
    }

    fn op(&self, u: &OpUpdate<'_>) {
        self.0.op(u);
        self.1.op(u);
    }

    fn call(&self, u: &OpUpdate<'_>) {
        self.0.call(u);
        self.1.call(u);
    }

    fn text(&self, u: &ais_vm::observe::TextUpdate<'_>) {
        self.0.text(u);
        self.1.text(u);
    }

    fn wants_flow_calls(&self) -> bool {
        self.0.wants_flow_calls() || self.1.wants_flow_calls()
    }

    fn flow_calls(&self, calls: &[ais_vm::observe::FlowCall]) {
        self.0.flow_calls(calls);
        self.1.flow_calls(calls);
    }
}

#[cfg(test)]
mod tests;
