//! Keeping a run's telemetry as it happens, one file per attempt, so that
//! a process that dies (SIGKILL, OOM, power) still leaves what it did for
//! `aisc report`.
//!
//! Attempt 1 of run `ID` is `telemetry/ID.jsonl` in the memory directory,
//! attempt `n` (a resume, a worker's takeover) `telemetry/ID.n.jsonl`. A
//! file starts with an `attempt` header line (`"state": "running"`), then
//! one `--events` op line per event as the run records it (from a writer
//! thread: the observer only hands the event over). When the run ends the
//! file is rewritten whole (header `"state": "complete"`, the events in
//! start order, the `summary` line). No fsync per event: the goal is to
//! survive the process; the journal is the durable record.

use ais_ir::bytecode::Program;
use ais_vm::observe::{OpUpdate, RunObserver};
use ais_vm::telemetry::{OpEvent, RunSummary, Status, Track};
use serde_json::{json, Map, Value as Json};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, RwLock};

/// The first line of a kept telemetry file.
pub const HEADER_TYPE: &str = "attempt";

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

/// The attempts of a run that kept telemetry, in order: `(n, path)`.
pub fn attempts(dir: &Path, run_id: &str) -> Vec<(u32, PathBuf)> {
    let safe = safe_id(run_id);
    let Ok(entries) = std::fs::read_dir(dir.join("telemetry")) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
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
            Some((n, e.path()))
        })
        .collect();
    found.sort();
    found
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
fn op_line(
    program: &Program,
    summary: &RunSummary,
    e: &OpEvent,
    flow: Option<&str>,
    attempt: u32,
) -> Map<String, Json> {
    let mut o = ais_vm::telemetry::event_json(program, summary, e);
    if let Some(f) = flow {
        o.insert("flow".into(), json!(f));
    }
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

/// What the writer thread is sent.
struct Update {
    event: OpEvent,
    flow: String,
}

/// Warns once: a telemetry write failure costs the telemetry, never the run.
struct Warn(AtomicBool);

impl Warn {
    fn once(&self, path: &Path, e: &std::io::Error) {
        if !self.0.swap(true, Ordering::SeqCst) {
            eprintln!(
                "warning: the run's telemetry is no longer kept in `{}` for `aisc report`: {e}",
                path.display()
            );
        }
    }
}

/// Streams one attempt's events to its file; the run's observer (composed
/// with the edge's own). `finish` completes the file.
pub struct Keeper {
    path: PathBuf,
    run_id: String,
    attempt: u32,
    started_ms: u64,
    tx: RwLock<Option<mpsc::Sender<Update>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    warn: Arc<Warn>,
}

impl Keeper {
    /// Opens the next attempt's file of run `run_id` in memory directory
    /// `dir` and writes its header; an error means no telemetry is kept.
    pub fn start(dir: &Path, run_id: &str, program: &Program) -> std::io::Result<Arc<Keeper>> {
        std::fs::create_dir_all(dir.join("telemetry"))?;
        // The next free number; `create_new` so that two processes never
        // share a file.
        let mut n = attempts(dir, run_id).last().map_or(1, |(n, _)| n + 1);
        let (file, path) = loop {
            let path = attempt_path(dir, run_id, n);
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(f) => break (f, path),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100_000 => n += 1,
                Err(e) => return Err(e),
            }
        };
        let started_ms = now_ms();
        let mut out = BufWriter::new(file);
        serde_json::to_writer(
            &mut out,
            &Json::Object(header(run_id, n, started_ms, "running")),
        )?;
        out.write_all(b"\n")?;
        out.flush()?;
        let warn = Arc::new(Warn(AtomicBool::new(false)));
        let (tx, rx) = mpsc::channel::<Update>();
        let program = program.clone();
        let (wpath, wwarn, attempt) = (path.clone(), warn.clone(), n);
        let writer = std::thread::Builder::new()
            .name("ais-telemetry".into())
            .spawn(move || {
                let summary = RunSummary::default();
                let mut failed = false;
                let mut write = |u: Update, out: &mut BufWriter<std::fs::File>| {
                    if failed {
                        return;
                    }
                    let line = op_line(&program, &summary, &u.event, Some(&u.flow), attempt);
                    let r = serde_json::to_writer(&mut *out, &Json::Object(line))
                        .map_err(std::io::Error::from)
                        .and_then(|()| out.write_all(b"\n"));
                    if let Err(e) = r {
                        failed = true;
                        wwarn.once(&wpath, &e);
                    }
                };
                // Flushed whenever no more events wait: a small batch under
                // load, one event at a time otherwise.
                while let Ok(u) = rx.recv() {
                    write(u, &mut out);
                    while let Ok(u) = rx.try_recv() {
                        write(u, &mut out);
                    }
                    if let Err(e) = out.flush() {
                        wwarn.once(&wpath, &e);
                    }
                }
            })?;
        Ok(Arc::new(Keeper {
            path,
            run_id: run_id.to_string(),
            attempt: n,
            started_ms,
            tx: RwLock::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            warn,
        }))
    }

    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops streaming and waits for the writer to write what it was sent.
    fn stop(&self) {
        drop(self.tx.write().unwrap_or_else(|e| e.into_inner()).take());
        let writer = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(w) = writer {
            let _ = w.join();
        }
    }

    /// Completes the file from the run's report: header (`complete`, with
    /// the outcome), every event in start order, the summary. Written
    /// whole through a temporary file, so the streamed file stays until
    /// the complete one replaces it.
    pub fn finish(&self, program: &Program, report: &ais_vm::RunReport) {
        self.stop();
        let outcome = match &report.outcome {
            Ok(_) => "ok",
            Err(ais_vm::RunError::OpFailed { code, .. }) if code == ais_vm::exec::PAUSED => {
                "paused"
            }
            Err(_) => "failed",
        };
        let mut h = header(&self.run_id, self.attempt, self.started_ms, "complete");
        h.insert("outcome".into(), json!(outcome));
        h.insert("ended_unix_ms".into(), json!(now_ms()));
        let replayed = report
            .events
            .iter()
            .filter(|e| is_replayed(e, self.attempt))
            .count();
        h.insert("replayed_ops".into(), json!(replayed));
        let mut bytes = Vec::new();
        let written = (|| -> std::io::Result<()> {
            serde_json::to_writer(&mut bytes, &Json::Object(h))?;
            bytes.push(b'\n');
            for e in &report.events {
                let line = op_line(program, &report.summary, e, None, self.attempt);
                serde_json::to_writer(&mut bytes, &Json::Object(line))?;
                bytes.push(b'\n');
            }
            let mut s = serde_json::to_value(&report.summary).unwrap_or(Json::Null);
            if let Json::Object(m) = &mut s {
                m.insert("type".into(), json!("summary"));
            }
            serde_json::to_writer(&mut bytes, &s)?;
            bytes.push(b'\n');
            crate::run::write_atomic(&self.path, &bytes)
        })();
        if let Err(e) = written {
            self.warn.once(&self.path, &e);
        }
    }

    /// The run never started (a served run discarded before it ran): its
    /// attempt leaves no file.
    pub fn discard(&self) {
        self.stop();
        let _ = std::fs::remove_file(&self.path);
    }
}

impl RunObserver for Keeper {
    fn op(&self, u: &OpUpdate<'_>) {
        let tx = self.tx.read().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = tx.as_ref() {
            // A closed channel means the writer stopped: nothing to do.
            let _ = tx.send(Update {
                event: u.event.clone(),
                flow: u.flow.to_string(),
            });
        }
    }
}

/// Two observers as one: the edge's (e.g. `--stream`) and the keeper.
pub struct Both(pub Arc<dyn RunObserver>, pub Arc<dyn RunObserver>);

impl RunObserver for Both {
    fn op(&self, u: &OpUpdate<'_>) {
        self.0.op(u);
        self.1.op(u);
    }

    fn text(&self, u: &ais_vm::observe::TextUpdate<'_>) {
        self.0.text(u);
        self.1.text(u);
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
            flow: 0,
            region: 0,
            op,
            opcode,
            agent: 0,
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

    fn lines(path: &Path) -> Vec<Json> {
        std::fs::read_to_string(path)
            .expect("kept")
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON line"))
            .collect()
    }

    #[test]
    fn each_attempt_gets_its_own_file_and_streams_its_events() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = program();
        let first = Keeper::start(dir.path(), "r-1", &p).expect("first");
        let second = Keeper::start(dir.path(), "r-1", &p).expect("second");
        assert_eq!((first.attempt(), second.attempt()), (1, 2));
        assert!(first.path().ends_with("telemetry/r-1.jsonl"));
        assert!(second.path().ends_with("telemetry/r-1.2.jsonl"));
        // Another run whose id starts the same is not an attempt of this one.
        let other = Keeper::start(dir.path(), "r-10", &p).expect("other");
        assert_eq!(other.attempt(), 1);
        let found: Vec<u32> = attempts(dir.path(), "r-1").iter().map(|a| a.0).collect();
        assert_eq!(found, [1, 2]);

        let e = event(4, Opcode::Ask, Track::Worker(0));
        second.op(&OpUpdate {
            event: &e,
            flow: "A.main",
            agent: "A",
        });
        second.stop();
        let kept = lines(second.path());
        assert_eq!(kept[0]["type"], "attempt");
        assert_eq!(kept[0]["state"], "running");
        assert_eq!(kept[1]["op"], 4);
        assert_eq!(kept[1]["flow"], "A.main");
        // An LLM op that completed on a worker in a later attempt: replayed.
        assert_eq!(kept[1]["replayed"], true);
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

    #[test]
    fn finishing_completes_the_file_and_a_failed_write_costs_only_the_telemetry() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = program();
        let k = Keeper::start(dir.path(), "r", &p).expect("start");
        let report = ais_vm::RunReport {
            outcome: Ok(Json::Null),
            summary: RunSummary::default(),
            events: vec![event(1, Opcode::Const, Track::Worker(0))],
            plans: Vec::new(),
        };
        k.finish(&p, &report);
        let kept = lines(k.path());
        assert_eq!(kept[0]["state"], "complete");
        assert_eq!(kept[0]["outcome"], "ok");
        assert_eq!(kept[1]["type"], "op");
        assert_eq!(kept.last().expect("lines")["type"], "summary");

        let gone = Keeper::start(dir.path(), "s", &p).expect("start");
        std::fs::remove_dir_all(dir.path().join("telemetry")).expect("remove");
        gone.finish(&p, &report);
        assert!(gone.warn.0.load(Ordering::SeqCst), "warned");
        assert!(!gone.path().exists());
    }
}
