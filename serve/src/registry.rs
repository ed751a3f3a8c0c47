//! The runs of a server: started through the [`Engine`], queued, executed
//! on a fixed set of executor threads, watched, cancelled, resumed; and the
//! runs only the journal knows (an earlier server's, `aisc run`'s).

use crate::cancel::Cancel;
use crate::engine::{BudgetSpec, Engine, Prepared, RunEdge, RunSpec, Served};
use crate::error::ApiError;
use crate::events::{EventLog, LogConsole, Watcher};
use crate::metrics::{Gauges, Metrics};
use crate::now_ms;
use crate::run::queued_state;
use crossbeam::channel::{Receiver, Sender};
use serde_json::{json, Value as Json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

pub use crate::run::{RunEntry, Status};

/// Limits of the registry.
#[derive(Clone, Debug)]
pub struct RegistryConfig {
    /// Runs executing at once (executor threads).
    pub max_concurrent: usize,
    /// Runs accepted beyond those, waiting in the queue; more are refused
    /// with 429.
    pub queue: usize,
    /// Ended runs kept in memory with their events; older ones are then
    /// answered from the journal and their event files (0: keep all).
    /// Without a journal (`--memory :memory:`) nothing is dropped, since
    /// it could not be found again.
    pub keep_runs: usize,
    /// Event files under `serve/events/` kept, newest first; older ones
    /// (of runs not held in memory) are deleted (0: keep all).
    pub keep_event_files: usize,
}

struct Job {
    entry: Arc<RunEntry>,
    prepared: Box<dyn Prepared>,
}

#[derive(Default)]
struct Runs {
    by_id: HashMap<String, Arc<RunEntry>>,
    order: Vec<String>,
}

/// The runs of this server.
pub struct Registry {
    engine: Arc<dyn Engine>,
    /// Replaced whole by a reload; a run keeps the program it started with.
    programs: std::sync::RwLock<Arc<Vec<Served>>>,
    runs: Mutex<Runs>,
    tx: Sender<Job>,
    /// Accepted runs not yet ended (queued + running).
    pending: AtomicUsize,
    running: AtomicUsize,
    config: RegistryConfig,
    pub(crate) metrics: Arc<Metrics>,
    backend: String,
    /// Ended runs dropped from memory so far (`prune`).
    dropped: AtomicUsize,
}

impl Registry {
    /// A registry with its executor threads started.
    pub fn start(
        engine: Arc<dyn Engine>,
        programs: Vec<Served>,
        config: RegistryConfig,
    ) -> Result<Arc<Registry>, std::io::Error> {
        let (tx, rx) = crossbeam::channel::unbounded::<Job>();
        let config = RegistryConfig {
            max_concurrent: config.max_concurrent.max(1),
            ..config
        };
        let backend = engine.backend_name();
        let reg = Arc::new(Registry {
            engine,
            programs: std::sync::RwLock::new(Arc::new(programs)),
            runs: Mutex::default(),
            tx,
            pending: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            config: config.clone(),
            metrics: Arc::new(Metrics::default()),
            backend,
            dropped: AtomicUsize::new(0),
        });
        reg.prune_event_files();
        for i in 0..config.max_concurrent {
            let r = reg.clone();
            let rx: Receiver<Job> = rx.clone();
            std::thread::Builder::new()
                .name(format!("ais-serve-run-{i}"))
                .spawn(move || r.executor(&rx))?;
        }
        Ok(reg)
    }

    /// The served programs now.
    pub fn programs(&self) -> Arc<Vec<Served>> {
        self.programs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Compiles the served files again and serves the new programs (runs
    /// in flight finish with the ones they started with). When a file does
    /// not compile nothing changes, and the error says which.
    pub fn reload(&self) -> Result<Arc<Vec<Served>>, ApiError> {
        let fresh = Arc::new(self.engine.reload()?);
        *self.programs.write().unwrap_or_else(|e| e.into_inner()) = fresh.clone();
        Ok(fresh)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Runs> {
        self.runs.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn executor(&self, rx: &Receiver<Job>) {
        for Job { entry, prepared } in rx.iter() {
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
                if !entry.state().status.is_final() {
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
            self.prune();
        }
    }

    /// Drops the oldest ended runs from memory beyond `keep_runs` (the
    /// journal and their event files still answer for them), and every 64
    /// drops the oldest event files beyond `keep_event_files`.
    fn prune(&self) {
        if self.config.keep_runs == 0
            || (self.journal_dir().is_none() && self.engine.journal_store().is_none())
        {
            return;
        }
        let dropped = {
            let mut runs = self.lock();
            let ended: Vec<String> = runs
                .order
                .iter()
                .filter(|id| {
                    runs.by_id.get(*id).is_some_and(|e| {
                        !matches!(e.state().status, Status::Queued | Status::Running)
                    })
                })
                .cloned()
                .collect();
            let excess = ended.len().saturating_sub(self.config.keep_runs);
            let drop: std::collections::HashSet<&String> = ended.iter().take(excess).collect();
            if !drop.is_empty() {
                let Runs { by_id, order } = &mut *runs;
                order.retain(|id| !drop.contains(id));
                by_id.retain(|id, _| !drop.contains(id));
            }
            excess
        };
        let n = self.dropped.fetch_add(dropped, Ordering::Relaxed) + dropped;
        if dropped > 0 && n / 64 != (n - dropped) / 64 {
            self.prune_event_files();
        }
    }

    /// Deletes the oldest event files beyond `keep_event_files`, except
    /// those of runs held in memory.
    pub fn prune_event_files(&self) {
        let (Some(dir), keep) = (self.journal_dir(), self.config.keep_event_files) else {
            return;
        };
        if keep == 0 {
            return;
        }
        let events = dir.join("serve").join("events");
        let Ok(read) = std::fs::read_dir(&events) else {
            return;
        };
        let mut files: Vec<(std::time::SystemTime, PathBuf)> = read
            .filter_map(Result::ok)
            .filter_map(|e| {
                let at = e.metadata().ok()?.modified().ok()?;
                Some((at, e.path()))
            })
            .collect();
        if files.len() <= keep {
            return;
        }
        files.sort();
        let held: std::collections::HashSet<String> = self.lock().by_id.keys().cloned().collect();
        let excess = files.len() - keep;
        for (_, path) in files.into_iter().take(excess) {
            let id = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            if !held.contains(id) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    /// Takes one place among the accepted runs, or refuses (429).
    fn reserve(&self) -> Result<(), ApiError> {
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

    fn release(&self) {
        self.pending.fetch_sub(1, Ordering::SeqCst);
    }

    fn edge(
        &self,
        log: &Arc<EventLog>,
        cancel: &Cancel,
        asker: &Arc<crate::console::Asker>,
    ) -> RunEdge {
        RunEdge {
            confirm: asker.clone(),
            console: Arc::new(LogConsole(log.clone())),
            observer: ais_vm::observe::Observer(Arc::new(Watcher {
                log: log.clone(),
                metrics: self.metrics.clone(),
                backend: self.backend.clone(),
            })),
            cancel: cancel.clone(),
        }
    }

    /// The served program called `name`.
    pub fn find_program(&self, name: &str) -> Result<Served, ApiError> {
        let programs = self.programs();
        let hits: Vec<&Served> = programs.iter().filter(|p| p.answers_to(name)).collect();
        match hits.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(ApiError::not_found(
                "program.unknown",
                format!("no served program is called `{name}`"),
                &format!("served programs: {}", self.program_names().join(", ")),
            )),
            _ => Err(ApiError::bad_request(
                "program.ambiguous",
                format!("`{name}` names several served programs"),
                "name the program by its file name",
            )),
        }
    }

    fn program_names(&self) -> Vec<String> {
        self.programs()
            .iter()
            .map(|p| {
                let agents: Vec<&str> = p.agents().collect();
                format!("{} (agents {})", p.file, agents.join(", "))
            })
            .collect()
    }

    /// Checks a run request: the program, its entry flow and the arguments.
    pub fn check(
        &self,
        program: &str,
        entry: Option<&str>,
        args: &Json,
    ) -> Result<(Served, RunSpec), ApiError> {
        let served = self.find_program(program)?;
        let entry = entry
            .map(str::to_string)
            .or_else(|| served.agent_entry(program));
        let flow = served.program.find_entry(entry.as_deref()).map_err(|e| {
            ApiError::bad_request(
                "run.bad_entry",
                e.to_string(),
                "pass `entry` as `Agent.flow`, or mark one flow @entry",
            )
        })?;
        let args: Vec<(String, Json)> = match args {
            Json::Null => Vec::new(),
            Json::Object(m) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            other => {
                return Err(ApiError::bad_request(
                    "run.bad_args",
                    format!("`args` must be an object of the entry flow's parameters, got {other}"),
                    "send `\"args\": {\"name\": value}`",
                ))
            }
        };
        if let Err(e) = ais_vm::exec::entry_args(&served.program, flow, &args) {
            let params: Vec<String> = served
                .program
                .flows
                .get(flow as usize)
                .map(|f| {
                    f.params
                        .iter()
                        .map(|(n, t)| format!("{n}: {}", served.program.type_of(*t)))
                        .collect()
                })
                .unwrap_or_default();
            let mut message = match e {
                ais_vm::RunError::Argument(m) => m,
                other => other.to_string(),
            };
            // The VM's hint is the command line's (`--arg`).
            if let Some(i) = message.find(" (pass --arg") {
                message.truncate(i);
            }
            return Err(ApiError::bad_request(
                "run.bad_args",
                message,
                &format!(
                    "@{} takes ({}); pass each in `args`",
                    served.program.flow_name(flow),
                    params.join(", ")
                ),
            ));
        }
        Ok((
            served,
            RunSpec {
                entry,
                args,
                budget: BudgetSpec::default(),
                queue: Default::default(),
            },
        ))
    }

    /// Starts a run: checked, journaled, queued.
    pub fn start_run(
        &self,
        program: &str,
        entry: Option<&str>,
        args: &Json,
        budget: BudgetSpec,
    ) -> Result<Arc<RunEntry>, ApiError> {
        self.start_run_queued(program, entry, args, budget, Default::default())
    }

    /// [`Registry::start_run`] with a place in the fleet's queue (`aisc
    /// serve --enqueue`: priority, concurrency key).
    pub fn start_run_queued(
        &self,
        program: &str,
        entry: Option<&str>,
        args: &Json,
        budget: BudgetSpec,
        queue: ais_vm::store::priority::QueueOptions,
    ) -> Result<Arc<RunEntry>, ApiError> {
        let (served, mut spec) = self.check(program, entry, args)?;
        spec.budget = budget;
        spec.queue = queue;
        self.reserve()?;
        let log = Arc::new(EventLog::new());
        let cancel = Cancel::new();
        let asker = crate::console::Asker::new(log.clone(), cancel.clone());
        let prepared = match self
            .engine
            .prepare(&served, &spec, self.edge(&log, &cancel, &asker))
        {
            Ok(p) => p,
            Err(e) => {
                self.release();
                return Err(e);
            }
        };
        let entry = Arc::new(RunEntry {
            id: prepared.id().to_string(),
            program: served.file.clone(),
            entry: spec.entry.clone(),
            created_ms: now_ms(),
            resumes: 0,
            state: Mutex::new(queued_state()),
            cv: Condvar::new(),
            events: log,
            cancel,
            asker,
        });
        if let Some(dir) = self.engine.journal_dir() {
            entry.events.attach_file(&EventLog::path(&dir, &entry.id));
        }
        Ok(self.enqueue(entry, prepared))
    }

    /// Queues a run whose log is ready (and, with a journal, attached to
    /// its file).
    fn enqueue(&self, entry: Arc<RunEntry>, prepared: Box<dyn Prepared>) -> Arc<RunEntry> {
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

    pub fn get(&self, id: &str) -> Option<Arc<RunEntry>> {
        self.lock().by_id.get(id).cloned()
    }

    fn journal_dir(&self) -> Option<PathBuf> {
        self.engine.journal_dir()
    }

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
            if status.is_none_or(|w| w == e.state().status) {
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
        let log = EventLog::load(&EventLog::path(&dir, id));
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

    /// Cancels a queued or running run.
    pub fn cancel(&self, id: &str) -> Result<Arc<RunEntry>, ApiError> {
        let Some(e) = self.get(id) else {
            self.describe(id)?;
            return Err(ApiError::conflict(
                "run.not_active",
                format!("run `{id}` is not running in this server"),
                "only queued and running runs can be cancelled",
            ));
        };
        let queued = {
            let st = e.lock();
            if st.status.is_final() {
                return Err(ApiError::conflict(
                    "run.finished",
                    format!("run `{id}` has already ended ({})", st.status.name()),
                    "only queued and running runs can be cancelled",
                ));
            }
            st.status == Status::Queued
        };
        e.cancel.cancel();
        if queued {
            // Settled now; the executor that dequeues it discards it.
            let settled = {
                let mut st = e.lock();
                if st.status == Status::Queued {
                    st.status = Status::Cancelled;
                    true
                } else {
                    false
                }
            };
            if settled {
                e.settle(Status::Cancelled, None, Some(cancelled_error()), None);
            }
        }
        Ok(e)
    }

    /// Resumes a failed, cancelled or paused run: its completed ops are
    /// replayed from the journal.
    pub fn resume(
        &self,
        id: &str,
        budget: BudgetSpec,
        input: Option<Json>,
    ) -> Result<Arc<RunEntry>, ApiError> {
        let old = self.get(id);
        if let Some(e) = &old {
            let s = e.state().status;
            if !s.resumable() {
                return Err(ApiError::conflict(
                    "run.not_resumable",
                    format!("run `{id}` is {}", s.name()),
                    "only failed, cancelled and paused runs can be resumed",
                ));
            }
        }
        let log = match (&old, self.journal_dir()) {
            (Some(e), _) => e.events.clone(),
            (None, Some(dir)) => Arc::new(EventLog::load(&EventLog::path(&dir, id))),
            (None, None) => return Err(unknown_run(id)),
        };
        self.reserve()?;
        let cancel = Cancel::new();
        let asker = crate::console::Asker::new(log.clone(), cancel.clone());
        let crate::engine::Resumed {
            prepared,
            program,
            entry,
        } = match self
            .engine
            .prepare_resume(id, &budget, input, self.edge(&log, &cancel, &asker))
        {
            Ok(p) => p,
            Err(e) => {
                self.release();
                return Err(e);
            }
        };
        log.reopen();
        let entry = Arc::new(RunEntry {
            id: prepared.id().to_string(),
            program,
            entry,
            created_ms: old.as_ref().map_or_else(now_ms, |e| e.created_ms),
            resumes: old.as_ref().map_or(1, |e| e.resumes + 1),
            state: Mutex::new(queued_state()),
            cv: Condvar::new(),
            events: log,
            cancel,
            asker,
        });
        if old.is_none() {
            // The file is appended to from here on.
            if let Some(dir) = self.journal_dir() {
                entry.events.attach_file(&EventLog::path(&dir, id));
            }
        }
        Ok(self.enqueue(entry, prepared))
    }

    /// Answers a destructive tool's question of a running run (`request`:
    /// its number in the `confirm` event; `None`: the only open one).
    pub fn confirm(
        &self,
        id: &str,
        request: Option<u64>,
        allow: bool,
    ) -> Result<Arc<RunEntry>, ApiError> {
        let e = self.get(id).ok_or_else(|| unknown_run(id))?;
        e.asker.answer(request, allow)?;
        Ok(e)
    }

    /// The dataflow graph of a run's program (`<svg>`), when the engine
    /// draws graphs and the program is still served.
    pub fn graph(&self, id: &str) -> Result<String, ApiError> {
        let name = match self.get(id) {
            Some(e) => e.program.clone(),
            None => self.describe(id)?["program"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        };
        let served = self.find_program(&name)?;
        self.engine.graph_svg(&served.program).ok_or_else(|| {
            ApiError::not_found(
                "graph.unavailable",
                "this server draws no graphs",
                "`aisc graph FILE` draws one",
            )
        })
    }

    /// The served programs with their exposed flows and parameters (the
    /// console's form to start a run).
    pub fn programs_json(&self) -> Json {
        let programs = self.programs();
        let list: Vec<Json> = programs
            .iter()
            .map(|s| {
                let p = &s.program;
                let flows: Vec<Json> = s
                    .exposed_flows()
                    .into_iter()
                    .filter_map(|i| {
                        let f = p.flows.get(i as usize)?;
                        Some(json!({
                            "name": p.flow_name(i),
                            "entry": f.entry,
                            "params": f.params.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
                        }))
                    })
                    .collect();
                json!({"file": s.file, "flows": flows})
            })
            .collect();
        json!({"programs": list})
    }

    /// Forks run `id` at journal step `at` (value `value`, or kept) and
    /// runs the fork: every effect whose inputs did not change is replayed.
    pub fn fork(
        &self,
        id: &str,
        at: &str,
        value: Option<&Json>,
    ) -> Result<(Arc<RunEntry>, Json), ApiError> {
        let (fork_id, what) = self.engine.fork(id, at, value)?;
        let entry = self.resume(&fork_id, BudgetSpec::default(), None)?;
        Ok((entry, what))
    }

    /// The journal steps of run `id` (`GET /v1/runs/{id}/steps`).
    pub fn steps(&self, id: &str) -> Result<Json, ApiError> {
        self.engine.steps(id)
    }

    /// Counts for `/metrics` and `/health`.
    pub(crate) fn gauges(&self) -> Gauges {
        let mut counts = [0usize; 6];
        let runs = self.lock();
        for e in runs.by_id.values() {
            let s = e.state().status;
            if let Some(i) = Status::ALL.iter().position(|x| *x == s) {
                counts[i] += 1;
            }
        }
        let running = self.running.load(Ordering::SeqCst);
        let pending = self.pending.load(Ordering::SeqCst);
        Gauges {
            by_status: Status::ALL
                .iter()
                .zip(counts)
                .map(|(s, n)| (s.name(), n))
                .collect(),
            queued: pending.saturating_sub(running),
            running,
            max_concurrent: self.config.max_concurrent,
        }
    }

    pub fn metrics_text(&self) -> String {
        let mut text = self.metrics.render(&self.gauges());
        if let Some(store) = self.engine.journal_store() {
            match store.status() {
                Ok(s) if s.backend == "postgres" => {
                    text.push_str(&crate::metrics::render_store(&s));
                    if let Ok(v) = store.queue_view() {
                        text.push_str(&crate::metrics::render_queue(&v));
                    }
                }
                Ok(_) => {}
                // A scrape must still answer: the store's error is a comment.
                Err(e) => text.push_str(&format!(
                    "# the store cannot be read: {}\n",
                    e.to_string().replace('\n', " ")
                )),
            }
        }
        text
    }

    pub(crate) fn observe_http(&self, status: u16) {
        self.metrics.observe_http(status);
    }
}

fn cancelled_error() -> Json {
    json!({"code": crate::cancel::CANCELLED, "message": "the run was cancelled"})
}

fn unknown_run(id: &str) -> ApiError {
    ApiError::not_found(
        "run.not_found",
        format!("no run `{id}`"),
        "`GET /v1/runs` lists the runs",
    )
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
                EventLog::load(&EventLog::path(dir, &info.id))
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

/// The hint of a run stopped at a `pause`: how to give it its answer.
pub(crate) fn paused_hint(id: &str) -> String {
    format!(
        "the run waits for an answer to its `pause` (`try` does not catch a pause): resume it with the answer, `POST /v1/runs/{id}/resume` with {{\"input\": VALUE}} (or `aisc resume {id} --input VALUE`)"
    )
}
