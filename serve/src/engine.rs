//! What the server needs from whoever builds runs (the command line): the
//! [`Engine`]. Served runs are built by the same function as `aisc run`'s.

use crate::cancel::Cancel;
use crate::error::ApiError;
use ais_ir::bytecode::Program;
use serde::Deserialize;
use serde_json::Value as Json;
use std::path::PathBuf;
use std::sync::Arc;

/// A program the server offers: compiled once at start.
#[derive(Clone, Debug)]
pub struct Served {
    /// The file name as given on the command line.
    pub path: String,
    /// The file name without directories (`research.ais`).
    pub file: String,
    pub program: Arc<Program>,
    /// The source text (`None` for artifacts).
    pub source: Option<Arc<str>>,
}

impl Served {
    /// The agents of the program, by name.
    pub fn agents(&self) -> impl Iterator<Item = &str> {
        self.program.agents.iter().map(|a| a.name.as_str())
    }

    /// The flows served as MCP tools and A2A skills: the entry flows (for
    /// a program marking none, the flow `aisc run` would pick) and the
    /// flows their agents list as `discoverable`.
    pub fn exposed_flows(&self) -> Vec<u32> {
        let p = &self.program;
        let mut flows: Vec<u32> = (0..p.flows.len() as u32)
            .filter(|&i| p.flows[i as usize].entry)
            .collect();
        if flows.is_empty() {
            flows.extend(p.find_entry(None).ok());
        }
        for i in 0..p.flows.len() as u32 {
            if p.flows[i as usize].discoverable && !flows.contains(&i) {
                flows.push(i);
            }
        }
        flows
    }

    /// Whether `name` designates this program: its path, its file name,
    /// the file name without extension, or one of its agents.
    pub fn answers_to(&self, name: &str) -> bool {
        let stem = self
            .file
            .rsplit_once('.')
            .map_or(self.file.as_str(), |(s, _)| s);
        name == self.path || name == self.file || name == stem || self.agents().any(|a| a == name)
    }

    /// The entry flow for `name` when it is an agent with its own entry
    /// flow (`program: "Researcher"` runs that agent's entry).
    pub fn agent_entry(&self, name: &str) -> Option<String> {
        let a = self.program.agents.iter().position(|a| a.name == name)?;
        let f = self
            .program
            .flows
            .iter()
            .find(|f| f.agent as usize == a && f.entry)?;
        Some(format!("{name}.{}", f.name))
    }
}

/// Limits of one run, beyond the server's defaults.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BudgetSpec {
    /// Input + output tokens of the run's LLM calls.
    pub tokens: Option<u64>,
    /// LLM calls of the run.
    pub llm_calls: Option<u64>,
    /// Wall-clock seconds of this attempt.
    pub deadline_s: Option<f64>,
    /// USD, priced by the backend's `prices`.
    pub cost_usd: Option<f64>,
}

/// A run to start: the entry flow (`None`: the program's `@entry`) and its
/// arguments, already checked against the flow's parameters.
#[derive(Clone, Debug, Default)]
pub struct RunSpec {
    pub entry: Option<String>,
    pub args: Vec<(String, Json)>,
    pub budget: BudgetSpec,
    /// Priority and concurrency key in the fleet's queue (an engine that
    /// runs programs itself refuses anything but the default).
    pub queue: ais_vm::store::priority::QueueOptions,
    /// Webhooks of the run (checked: `ais_vm::webhook::declare`).
    pub webhooks: Vec<ais_vm::store::webhook::Hook>,
}

/// What the server gives a run: where printed lines and warnings go, who
/// watches it, and how it is cancelled.
pub struct RunEdge {
    pub console: Arc<dyn ais_vm::aam::Console>,
    pub observer: ais_vm::observe::Observer,
    pub cancel: Cancel,
    /// Asks over HTTP whether a destructive tool may run (the run's
    /// `confirm` event, `POST /v1/runs/{id}/confirm`): for an engine that
    /// asks (`aisc serve --ask`); others confirm or refuse themselves.
    pub confirm: Arc<dyn ais_vm::aam::Confirmer>,
    /// Nobody is given the run's id before its end (`POST
    /// /v1/runs?wait=true` answers with the finished run): its journal
    /// row need not be durable before it starts, only its outcome before
    /// it is returned (`docs/reliability.md`, "What is durable when").
    pub unshown: bool,
}

/// A run's end: the entry flow's value or the structured error
/// (`{code, message, ...}` as `aisc run --report-json` writes it), and
/// the run summary.
#[derive(Clone, Debug)]
pub struct Finished {
    pub outcome: Result<Json, Json>,
    pub summary: Json,
}

/// A run with its host and journal open, not started yet.
pub trait Prepared: Send {
    /// The run id (the journal's).
    fn id(&self) -> &str;
    /// Runs it to the end (blocking).
    fn execute(self: Box<Self>) -> Finished;
    /// It will never run (cancelled while queued): its journal says so.
    fn discard(self: Box<Self>, reason: &str);
    /// Makes it thread `thread`'s next run in `store` (created first if
    /// `create`); returns its place, the order its turn comes in. A run
    /// journaled at preparation is linked; a run handed to the fleet's
    /// queue is queued and linked in one transaction instead.
    fn join_thread(
        &mut self,
        store: &dyn ais_vm::store::Store,
        thread: &str,
        create: bool,
    ) -> Result<i64, ais_vm::store::JournalError> {
        store.link_thread_run(thread, self.id(), create)
    }
    /// The run it must wait for before it starts (an earlier run of its
    /// thread, `registry/threads.rs`); asked again while it waits.
    fn waits_for(&self) -> Option<String> {
        None
    }
}

/// A journaled run reopened for resuming.
pub struct Resumed {
    pub prepared: Box<dyn Prepared>,
    /// The program's name as journaled.
    pub program: String,
    pub entry: Option<String>,
}

/// Builds runs: implemented by the command line with the same setup as
/// `aisc run` (configuration, backend, AAM host, journal).
pub trait Engine: Send + Sync {
    /// Opens the host and the journal of a new run of `program`.
    fn prepare(
        &self,
        program: &Served,
        spec: &RunSpec,
        edge: RunEdge,
    ) -> Result<Box<dyn Prepared>, ApiError>;
    /// Reopens the journaled run `id` for resuming (its completed ops are
    /// replayed), answering the `pause` it waits at with `input`; returns
    /// it with its program name and entry.
    fn prepare_resume(
        &self,
        id: &str,
        budget: &BudgetSpec,
        input: Option<Json>,
        edge: RunEdge,
    ) -> Result<Resumed, ApiError>;
    /// The memory directory holding the run journal (`None`: `--memory
    /// :memory:`, nothing outlives the process).
    fn journal_dir(&self) -> Option<PathBuf>;
    /// The shared store runs are journaled in instead of the memory
    /// directory's `runs.db` (`--store postgres://…`); the directory then
    /// keeps only the event files. Default: none.
    fn journal_store(&self) -> Option<Arc<dyn ais_vm::store::Store>> {
        None
    }
    /// The agent store served runs keep long-term memory in (the memory
    /// directory's `memory.db`, or the `--store`), for the memory API
    /// (`/v1/agents/{agent}/memory`). Default: none (`--memory :memory:`).
    fn agent_store(&self) -> Result<Option<Arc<dyn ais_vm::store::AgentStore>>, ApiError> {
        Ok(None)
    }
    /// The LLM backend's name (for metrics).
    fn backend_name(&self) -> String;
    /// Forks the journaled run `id` at step `at` (a step number or key
    /// prefix) with that step's value replaced by `value` (none: kept);
    /// returns the fork's id and what was forked, ready to be resumed.
    fn fork(&self, id: &str, at: &str, value: Option<&Json>) -> Result<(String, Json), ApiError> {
        let _ = (id, at, value);
        Err(ApiError::new(
            501,
            "fork.unsupported",
            "this server cannot fork runs".to_string(),
            "`aisc fork RUN --at STEP` forks a journaled run",
        ))
    }
    /// The journal steps of run `id`, to choose a fork point.
    fn steps(&self, id: &str) -> Result<Json, ApiError> {
        let _ = id;
        Err(ApiError::new(
            501,
            "fork.unsupported",
            "this server cannot list journal steps".to_string(),
            "`aisc fork RUN` lists them",
        ))
    }
    /// The program's dataflow graph as one `<svg>` element whose op nodes
    /// carry `data-key="f{flow}r{region}o{op}"` (the console lights them
    /// up from the op events). Default: none.
    fn graph_svg(&self, _program: &Program) -> Option<String> {
        None
    }
    /// Compiles the served files again: the new programs, or why not (the
    /// served ones are then unchanged). The default: reloading is not
    /// offered.
    fn reload(&self) -> Result<Vec<Served>, ApiError> {
        Err(ApiError::new(
            501,
            "reload.unsupported",
            "this server cannot reload its programs".to_string(),
            "restart it",
        ))
    }
}
