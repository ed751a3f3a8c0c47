//! The runs of a server: started through the [`Engine`], queued, executed
//! on a fixed set of executor threads, watched, cancelled, resumed; and the
//! runs only the journal knows (an earlier server's, `aisc run`'s).

use crate::engine::{Engine, Prepared, Served};
use crate::error::ApiError;
use crate::metrics::{Gauges, Metrics};
use crossbeam::channel::{Receiver, Sender};
use serde_json::{json, Value as Json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

mod control;
mod executor;
mod journaled;
mod programs;
mod retention;
mod threads;

pub use crate::run::{RunEntry, Status};
pub use threads::{new_thread_id, Multitask};

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
    /// The files of `serve/events/` when they were last pruned: pruning
    /// reads the segments' index, which grows with every run, so it is
    /// done again only when a segment or a file came or went.
    pruned_files: AtomicUsize,
    /// The runs of each thread in flight here (`threads.rs`).
    gates: threads::Gates,
    /// Runs waiting for their thread's turn, off the executors
    /// (`executor.rs`); the condvar is signalled when a run ends here.
    parked: Mutex<Vec<Job>>,
    parked_cv: std::sync::Condvar,
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
            pruned_files: AtomicUsize::new(usize::MAX),
            gates: threads::Gates::default(),
            parked: Mutex::default(),
            parked_cv: std::sync::Condvar::new(),
        });
        reg.prune_event_files();
        for i in 0..config.max_concurrent {
            let r = reg.clone();
            let rx: Receiver<Job> = rx.clone();
            std::thread::Builder::new()
                .name(format!("ais-serve-run-{i}"))
                .spawn(move || r.executor(&rx))?;
        }
        let weak = Arc::downgrade(&reg);
        std::thread::Builder::new()
            .name("ais-serve-turns".into())
            .spawn(move || Registry::unpark_loop(&weak))?;
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

    pub fn get(&self, id: &str) -> Option<Arc<RunEntry>> {
        self.lock().by_id.get(id).cloned()
    }

    /// The agent store of served runs (for the memory API).
    pub(crate) fn agent_store(
        &self,
    ) -> Result<Option<Arc<dyn ais_vm::store::AgentStore>>, ApiError> {
        self.engine.agent_store()
    }

    fn journal_dir(&self) -> Option<PathBuf> {
        self.engine.journal_dir()
    }

    /// Counts for `/metrics` and `/health`.
    pub(crate) fn gauges(&self) -> Gauges {
        let mut counts = [0usize; 6];
        let runs = self.lock();
        for e in runs.by_id.values() {
            let s = e.status();
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
                    if let Ok(c) = store.delivery_counts() {
                        text.push_str(&c.prometheus());
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

/// The hint of a run stopped at a `pause`: how to give it its answer.
pub(crate) fn paused_hint(id: &str) -> String {
    format!(
        "the run waits for an answer to its `pause` (`try` does not catch a pause): resume it with the answer, `POST /v1/runs/{id}/resume` with {{\"input\": VALUE}} (or `aisc resume {id} --input VALUE`)"
    )
}
