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

use ais_ir::bytecode::Program;
use ais_vm::observe::{OpUpdate, RunObserver};
use ais_vm::telemetry::segments::{self, Segments};
use ais_vm::telemetry::{OpEvent, RunSummary, Status, Track};
use serde_json::{json, Map, Value as Json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock, Weak};

/// The first line of a kept telemetry file.
pub const HEADER_TYPE: &str = "attempt";
/// The line before the summary of a completed attempt.
pub const END_TYPE: &str = "end";

/// Run ids are made by the host; keep only safe characters anyway (no
/// `.`, so `ID.2.jsonl` cannot be another run's first attempt).
pub fn safe_id(run_id: &str) -> String {
    run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The file of attempt `n` (from 1) of a run.
pub fn attempt_path(dir: &Path, run_id: &str, n: u32) -> PathBuf {
    let safe = safe_id(run_id);
    let name = if n <= 1 {
        format!("{safe}.jsonl")
    } else {
        format!("{safe}.{n}.jsonl")
    };
    dir.join("telemetry").join(name)
}

/// Where an attempt's lines are kept.
#[derive(Clone, Debug, PartialEq)]
pub enum Kept {
    /// A file of its own.
    File(PathBuf),
    /// The lines of this key in the segments of `telemetry/`.
    Segment(String),
}

impl Kept {
    /// The attempt's lines, from its last header on (a segment holds a
    /// second header when the attempt was written whole again).
    pub fn read(&self, dir: &Path) -> std::io::Result<String> {
        match self {
            Kept::File(path) => std::fs::read_to_string(path),
            Kept::Segment(key) => {
                let bytes = segments::read(&dir.join("telemetry"), key).unwrap_or_default();
                let text = String::from_utf8_lossy(&bytes);
                let mut last_header = 0;
                let mut at = 0;
                for line in text.split_inclusive('\n') {
                    if line_is(line, HEADER_TYPE) {
                        last_header = at;
                    }
                    at += line.len();
                }
                Ok(text[last_header..].to_string())
            }
        }
    }

    /// How the report names it.
    pub fn name(&self) -> String {
        match self {
            Kept::File(path) => path
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            Kept::Segment(key) => format!("{key} in telemetry/*.seg"),
        }
    }
}

/// The attempts of a run that kept telemetry, in order: `(n, where)`.
pub fn attempts(dir: &Path, run_id: &str) -> Vec<(u32, Kept)> {
    let safe = safe_id(run_id);
    let mut found: Vec<(u32, Kept)> = Vec::new();
    if !segments::keys(&dir.join("telemetry"), |k| k == safe).is_empty() {
        let key = Kept::Segment(safe.clone());
        // A discarded attempt (its run never started) is not one.
        if key
            .read(dir)
            .is_ok_and(|t| !t.lines().any(|l| line_is(l, DISCARD_TYPE)))
        {
            found.push((1, key));
        }
    }
    let Ok(entries) = std::fs::read_dir(dir.join("telemetry")) else {
        return found;
    };
    found.extend(entries.filter_map(Result::ok).filter_map(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        let rest = name.strip_prefix(&safe)?.strip_suffix(".jsonl")?;
        let n = match rest {
            "" => 1,
            r => r
                .strip_prefix('.')?
                .parse::<u32>()
                .ok()
                .filter(|n| *n >= 2)?,
        };
        Some((n, Kept::File(e.path())))
    }));
    found.sort_by_key(|(n, _)| *n);
    found
}

/// The line that voids a discarded attempt kept in a segment.
const DISCARD_TYPE: &str = "discarded";

/// Whether a kept line is of type `t` (parsed only when it may be).
fn line_is(line: &str, t: &str) -> bool {
    line.contains(t)
        && serde_json::from_str::<Json>(line).is_ok_and(|v| v["type"].as_str() == Some(t))
}

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

/// Where an open attempt's lines go.
enum Out {
    File(std::fs::File),
    Segment(Arc<Segments>, String),
}

impl Out {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Out::File(f) => f.write_all(bytes),
            Out::Segment(s, key) => s.append(key, bytes),
        }
    }
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

/// Creates where the next attempt of run `run_id` in `dir` is kept: a new
/// run's first attempt in the process's segments; otherwise a file, the
/// first free number probed with `create_new` (so that two processes never
/// share a file) rather than by listing the directory, which holds every
/// run's files, after attempt 1 if the segments hold it.
fn create_attempt(dir: &Path, run_id: &str, fresh: bool) -> std::io::Result<(u32, Kept, Out)> {
    let safe = safe_id(run_id);
    if fresh {
        let segments = Segments::shared(&dir.join("telemetry"));
        return Ok((1, Kept::Segment(safe.clone()), Out::Segment(segments, safe)));
    }
    let in_segments = !segments::keys(&dir.join("telemetry"), |k| k == safe).is_empty();
    let (n, path, file) = create_attempt_file(dir, run_id, if in_segments { 2 } else { 1 })?;
    Ok((n, Kept::File(path), Out::File(file)))
}

fn create_attempt_file(
    dir: &Path,
    run_id: &str,
    first: u32,
) -> std::io::Result<(u32, PathBuf, std::fs::File)> {
    let mut n = first;
    loop {
        let path = attempt_path(dir, run_id, n);
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path);
        match opened {
            Ok(f) => return Ok((n, path, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100_000 => n += 1,
            // The directory is made once, when the first file needs it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && n == first => {
                std::fs::create_dir_all(dir.join("telemetry"))?;
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path);
                match f {
                    Ok(f) => return Ok((n, path, f)),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
    }
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
mod tests {
    use super::*;
    use ais_ir::Opcode;

    fn program() -> Program {
        Program {
            source: None,
            types: Vec::new(),
            consts: Vec::new(),
            agents: Vec::new(),
            flows: Vec::new(),
        }
    }

    fn event(op: u32, opcode: Opcode, track: Track) -> OpEvent {
        OpEvent {
            frame: 0,
            frame_key: 0,
            flow: 0,
            region: 0,
            op,
            opcode,
            agent: 0,
            invocation: Default::default(),
            track,
            worker: 0,
            ready_ns: 1,
            start_ns: 2,
            end_ns: 3,
            status: Status::Ok,
            llm: None,
            detail: None,
        }
    }

    fn lines(dir: &Path, kept: &Kept) -> Vec<Json> {
        kept.read(dir)
            .expect("kept")
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON line"))
            .collect()
    }

    #[test]
    fn each_attempt_is_kept_apart_and_streams_its_events() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Attempts of a run are sequential: the first is placed (by the
        // writer, or `placed`) before the second starts. A new run's first
        // attempt is kept in the segments, a resume in a file of its own.
        let first = Keeper::start(dir.path(), "r-1", true).expect("first");
        assert_eq!(first.placed().expect("placed").0, 1);
        let second = Keeper::start(dir.path(), "r-1", false).expect("second");
        assert_eq!(second.placed().expect("placed").0, 2);
        assert_eq!(
            first.placed().expect("placed").1,
            Kept::Segment("r-1".into())
        );
        let Kept::File(path) = second.placed().expect("placed").1 else {
            panic!("a resume is kept in a file");
        };
        assert!(path.ends_with("telemetry/r-1.2.jsonl"));
        // Another run whose id starts the same is not an attempt of this one.
        let other = Keeper::start(dir.path(), "r-10", true).expect("other");
        assert_eq!(other.placed().expect("placed").0, 1);
        // A worker's takeover of a run no attempt of which was kept: 1.
        let taken = Keeper::start(dir.path(), "r-2", false).expect("taken");
        assert_eq!(taken.placed().expect("placed").0, 1);
        let found: Vec<u32> = attempts(dir.path(), "r-1").iter().map(|a| a.0).collect();
        assert_eq!(found, [1, 2]);

        let e = event(4, Opcode::Ask, Track::Worker(0));
        second.op(&OpUpdate {
            event: &e,
            flow: "A.main",
            agent: "A",
        });
        second.stop();
        let kept = lines(dir.path(), &second.placed().expect("placed").1);
        assert_eq!(kept[0]["type"], "attempt");
        assert_eq!(kept[0]["state"], "running");
        assert_eq!(kept[1]["op"], 4);
        assert_eq!(kept[1]["flow"], "A.main");
        // An LLM op that completed on a worker in a later attempt: replayed.
        assert_eq!(kept[1]["replayed"], true);
    }

    #[test]
    fn runs_ending_while_the_writer_works_each_complete_their_own_file() {
        // The process's one writer and each run's end race to create and
        // append: every file still gets its header once, every event once
        // and in order, then the end, without being rewritten.
        let dir = tempfile::tempdir().expect("tempdir");
        let p = program();
        let events: Vec<OpEvent> = (0..3)
            .map(|i| event(i, Opcode::Const, Track::Worker(0)))
            .collect();
        let report = ais_vm::RunReport {
            outcome: Ok(Json::Null),
            summary: RunSummary::default(),
            events: events.clone(),
            plans: Vec::new(),
        };
        let runs: Vec<String> = (0..40).map(|i| format!("r{i}")).collect();
        std::thread::scope(|s| {
            for id in &runs {
                let (dir, p, events, report) = (dir.path(), &p, &events, &report);
                s.spawn(move || {
                    let k = Keeper::start(dir, id, true).expect("start");
                    for e in events {
                        k.op(&OpUpdate {
                            event: e,
                            flow: "A.main",
                            agent: "A",
                        });
                    }
                    k.finish(p, report);
                });
            }
        });
        for id in &runs {
            let kept = lines(dir.path(), &Kept::Segment(id.clone()));
            let types: Vec<&str> = kept.iter().map(line_type).collect();
            assert_eq!(
                types,
                ["attempt", "op", "op", "op", "end", "summary"],
                "{id}"
            );
            assert_eq!(kept[0]["state"], "running", "{id}: appended, not rewritten");
            let ops: Vec<u64> = kept[1..4].iter().filter_map(|l| l["op"].as_u64()).collect();
            assert_eq!(ops, [0, 1, 2], "{id}");
            assert_eq!(attempts(dir.path(), id).len(), 1, "{id}: one attempt");
        }
        // One segment and its index for the forty runs.
        let files = std::fs::read_dir(dir.path().join("telemetry"))
            .expect("dir")
            .count();
        assert_eq!(files, 2);
    }

    #[test]
    fn only_later_attempts_mark_calls_answered_on_a_worker_as_replayed() {
        let on_worker = event(0, Opcode::Ask, Track::Worker(0));
        let on_lane = event(0, Opcode::Ask, Track::Llm(0));
        let pure = event(0, Opcode::Const, Track::Worker(0));
        assert!(!is_replayed(&on_worker, 1));
        assert!(is_replayed(&on_worker, 2));
        assert!(!is_replayed(&on_lane, 2));
        assert!(!is_replayed(&pure, 2));
    }

    fn line_type(l: &Json) -> &str {
        l["type"].as_str().unwrap_or("")
    }

    #[test]
    fn finishing_completes_the_file_and_a_failed_write_costs_only_the_telemetry() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = program();
        let e = event(1, Opcode::Const, Track::Worker(0));
        let report = ais_vm::RunReport {
            outcome: Ok(Json::Null),
            summary: RunSummary::default(),
            events: vec![e.clone()],
            plans: Vec::new(),
        };
        // Every event streamed: the end and summary lines are appended.
        let k = Keeper::start(dir.path(), "r", true).expect("start");
        k.op(&OpUpdate {
            event: &e,
            flow: "A.main",
            agent: "A",
        });
        k.finish(&p, &report);
        let kept = lines(dir.path(), &k.placed().expect("placed").1);
        let types: Vec<&str> = kept.iter().map(line_type).collect();
        assert_eq!(types, ["attempt", "op", "end", "summary"]);
        assert_eq!(kept[0]["state"], "running");
        assert_eq!(kept[2]["outcome"], "ok");
        // An event the attempt missed: written whole again, complete (a
        // file replaced, a segment's lines from the second header on).
        for fresh in [true, false] {
            let k = Keeper::start(dir.path(), &format!("q{fresh}"), fresh).expect("start");
            k.finish(&p, &report);
            let kept = lines(dir.path(), &k.placed().expect("placed").1);
            let types: Vec<&str> = kept.iter().map(line_type).collect();
            assert_eq!(types, ["attempt", "op", "end", "summary"], "{fresh}");
            assert_eq!(kept[0]["state"], "complete");
            assert_eq!(kept[2]["outcome"], "ok");
        }

        // A discarded run leaves no attempt, in a segment or a file.
        for fresh in [true, false] {
            let id = format!("d{fresh}");
            let k = Keeper::start(dir.path(), &id, fresh).expect("start");
            let _ = k.placed();
            assert_eq!(attempts(dir.path(), &id).len(), 1);
            k.discard();
            assert!(attempts(dir.path(), &id).is_empty(), "{fresh}");
        }

        let gone = Keeper::start(dir.path(), "s", false).expect("start");
        // Once its file exists, the directory goes away.
        let _ = gone.placed();
        std::fs::remove_dir_all(dir.path().join("telemetry")).expect("remove");
        gone.finish(&p, &report);
        assert!(gone.warn.0.load(Ordering::SeqCst), "warned");
        let Kept::File(path) = gone.placed().expect("placed").1 else {
            panic!("a file");
        };
        assert!(!path.exists());
    }
}
