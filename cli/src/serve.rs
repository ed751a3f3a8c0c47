//! `aisc serve` and `aisc mcp`: the command line's side of `ais-serve`.
//! The server owns the listener, the run registry and the protocols; this
//! module loads the programs and implements its [`Engine`] with the same
//! run setup as `aisc run` ([`super::run::prepare_run`]).

use super::aam::MemoryArgs;
use super::args::RunArgs;
use super::journal::BudgetArgs;
use super::load::{self, Loaded};
use super::output::Output;
use super::run::{self, RunSetup, SetupError};
use super::{BackendArgs, OptArgs};
use ais_serve::{ApiError, BudgetSpec, Engine, Finished, Prepared, RunEdge, RunSpec, Served};
use ais_vm::journal::{self, Journal};
use ais_vm::store::Store;

mod queued;
use queued::QueuedRun;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// The environment variable holding the bearer token of `aisc serve`.
pub const TOKEN_VAR: &str = "AIS_SERVE_TOKEN";

/// Options of served runs (shared by `serve` and `mcp`).
#[derive(clap::Args, Debug, Clone)]
pub struct ServedRunArgs {
    /// Runs executing at once; more wait in the queue.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub max_concurrent_runs: usize,
    /// Runs waiting for an executor beyond those; more are refused (429).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub queue: usize,
    /// Ended runs kept in memory with their events; older ones are read
    /// back from the journal (0: all; with --memory :memory: all are kept).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub keep_runs: usize,
    /// The events of at least the newest N runs kept under the memory
    /// directory's serve/events/ (older segments are removed whole; 0: all).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub keep_event_files: usize,
    /// Scheduler worker threads per run.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub workers: usize,
    /// Allow tools marked destructive without asking (a server has nobody
    /// to ask: without it they are refused).
    #[arg(long)]
    pub yes: bool,
    /// Ask over HTTP before a destructive tool runs: the run waits (its
    /// event `confirm`) until `POST /v1/runs/{id}/confirm` or the console
    /// answers, or the run is cancelled (`aisc serve` only).
    #[arg(long, conflicts_with = "yes")]
    pub ask: bool,
    /// Hand every new run to the fleet instead of running it here: it is
    /// queued in the `--store postgres://…` for `aisc worker`s, and its
    /// status and result are read back from the store.
    #[arg(long)]
    pub enqueue: bool,
    /// Default limits of every run (a request's `budget` overrides them).
    #[command(flatten)]
    pub budget: BudgetArgs,
    #[command(flatten)]
    pub memory: MemoryArgs,
}

/// Options of `aisc serve` beyond the served runs'.
#[derive(clap::Args, Debug, Clone)]
pub struct ListenArgs {
    /// Address to listen on. A non-loopback address requires a bearer
    /// token in AIS_SERVE_TOKEN.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Largest request body in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    pub max_body: usize,
    /// Requests answered at once (threads; a request waiting for its run
    /// holds one).
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub http_threads: usize,
    /// Largest request line and headers in bytes (431 beyond).
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 10)]
    pub max_header_bytes: usize,
    /// Seconds a request's head or body may take to arrive, and a
    /// kept-alive connection may stay idle (408 or closed beyond).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0, value_parser = parse_seconds)]
    pub read_timeout: f64,
    /// Connections open at once; more wait until one closes.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_connections: usize,
    /// Event streams (SSE) open at once (503 beyond).
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_streams: usize,
    /// Event streams following one run at once (429 beyond).
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub max_streams_per_run: usize,
    /// An origin (`http://localhost:3000`) whose web pages may call a
    /// server without a token; repeatable. Without a token, requests from
    /// other origins are refused (403).
    #[arg(long, value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
}

/// A positive, finite number of seconds.
fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!(
            "`{s}` is not a number of seconds between 0 and 86400"
        )),
    }
}

/// The engine of `aisc serve` and `aisc mcp`.
struct CliEngine {
    setup: RunSetup,
    runs: ServedRunArgs,
    /// The loaded programs by file name (cloned once, shared by runs;
    /// replaced whole by a reload).
    loaded: std::sync::RwLock<LoadedByFile>,
    /// What a reload compiles again, and how.
    files: Vec<PathBuf>,
    opt: OptArgs,
    backend: BackendArgs,
    /// The store of `--store`: served runs are journaled there (and, with
    /// `--enqueue`, queued there for workers).
    store: Option<Arc<dyn Store>>,
    /// The run backend's slots, shared by the runs least attained service
    /// first (`ais_serve::fair`); `None` for the simulator.
    fair: Option<Arc<ais_serve::fair::FairShare>>,
    /// A run starts with the LLM calls it is sure to make as service
    /// (off only for the benchmark's baseline).
    credit: bool,
}

struct CliPrepared {
    id: String,
    loaded: Arc<Loaded>,
    run: run::PreparedRun,
    cancel: ais_serve::Cancel,
    fair: Option<Arc<ais_serve::fair::FairShare>>,
    /// The run's starting service: the LLM calls it is sure to make.
    credit: u64,
}

impl Prepared for CliPrepared {
    fn id(&self) -> &str {
        &self.id
    }

    fn execute(self: Box<Self>) -> Finished {
        let CliPrepared {
            loaded,
            run,
            cancel,
            fair,
            credit,
            ..
        } = *self;
        let backend = cancel.backend(run.backend);
        let backend = match &fair {
            Some(f) => f.for_run(backend, credit),
            None => backend,
        };
        let host = cancel.host(run.host);
        let report = ais_vm::run(&loaded.program, &run.options, backend, host);
        run::keep_latency_history();
        if let Some(k) = &run.telemetry {
            k.finish(&loaded.program, &report);
        }
        Finished {
            outcome: report.outcome.map_err(|e| run::error_json(&e, &loaded)),
            summary: serde_json::to_value(&report.summary).unwrap_or_default(),
        }
    }

    fn discard(self: Box<Self>, reason: &str) {
        if let Some(j) = &self.run.options.journal {
            let _ = j.finish(Err(reason));
        }
        if let Some(k) = &self.run.telemetry {
            k.discard();
        }
    }
}

fn setup_error(e: SetupError) -> ApiError {
    ApiError::internal(format!("cannot set the run up: {e}"))
}

impl CliEngine {
    fn run_args(&self, entry: Option<String>, budget: &BudgetSpec) -> RunArgs {
        let mut b = self.runs.budget.clone();
        b.llm_call_budget = budget.llm_calls.or(b.llm_call_budget);
        b.deadline = budget.deadline_s.or(b.deadline);
        b.cost_budget = budget.cost_usd.or(b.cost_budget);
        RunArgs {
            args: Vec::new(),
            entry,
            workers: Some(self.runs.workers.max(1)),
            policy: "fifo".into(),
            concurrency: None,
            no_speculate: false,
            events: None,
            trace: None,
            report_json: None,
            emit_plans: None,
            stream: false,
            quiet: true,
            memory: self.runs.memory.clone(),
            yes: self.runs.yes,
            budget: b,
            telemetry: Default::default(),
            detach: false,
            thread: None,
            schedule: None,
            tz: "UTC".into(),

            queue: Default::default(),
            webhooks: Default::default(),
        }
    }

    fn edge(&self, edge: RunEdge) -> run::RunEdge {
        run::RunEdge {
            console: Some(edge.console),
            confirm: if self.runs.yes {
                ais_vm::aam::Confirm::Yes
            } else if self.runs.ask {
                ais_vm::aam::Confirm::Ask(edge.confirm.clone())
            } else {
                ais_vm::aam::Confirm::Deny
            },
            progress: None,
            observer: Some(edge.observer),
            unshown: edge.unshown,
        }
    }

    fn finish_prepare(
        &self,
        loaded: Arc<Loaded>,
        args: Vec<(String, serde_json::Value)>,
        run: &RunArgs,
        budget: &BudgetSpec,
        edge: RunEdge,
        resume: Option<Arc<Journal>>,
    ) -> Result<Box<dyn Prepared>, ApiError> {
        let cancel = edge.cancel.clone();
        let mut prepared =
            run::prepare_run(&self.setup, &loaded, args, run, self.edge(edge), resume)
                .map_err(setup_error)?;
        if let Some(t) = budget.tokens {
            prepared.options.budget.tokens = Some(t);
        }
        let id = prepared.options.journal.as_ref().map_or_else(
            || prepared.host.run_id().to_string(),
            |j| j.run_id().to_string(),
        );
        let entry = prepared.options.entry.as_deref();
        let credit = if self.credit {
            loaded.program.entry_sure_llm_calls(entry)
        } else {
            0
        };
        Ok(Box::new(CliPrepared {
            id,
            loaded,
            run: prepared,
            cancel,
            fair: self.fair.clone(),
            credit,
        }))
    }
}

impl CliEngine {
    /// The store runs are journaled in, for forking.
    fn fork_store(&self) -> Result<Arc<dyn Store>, ApiError> {
        if let Some(s) = &self.store {
            return Ok(s.clone());
        }
        let dir = self.journal_dir().ok_or_else(|| {
            ApiError::conflict(
                "journal.none",
                "`--memory :memory:` keeps no run journal to fork",
                "serve with a memory directory or a `--store`",
            )
        })?;
        ais_vm::store::open(&dir.display().to_string())
            .map_err(|e| ApiError::internal(e.to_string()))
    }
}

impl Engine for CliEngine {
    fn prepare(
        &self,
        program: &Served,
        spec: &RunSpec,
        edge: RunEdge,
    ) -> Result<Box<dyn Prepared>, ApiError> {
        let loaded = self
            .loaded
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&program.file)
            .cloned()
            .ok_or_else(|| ApiError::internal(format!("`{}` is not loaded", program.file)))?;
        // The request's webhooks and the configuration's `[[webhooks]]`.
        let webhooks = ais_vm::webhook::configured_hooks()
            .and_then(|c| ais_vm::webhook::merge(spec.webhooks.clone(), &c))
            .map_err(|e| {
                ApiError::bad_request(
                    e.code(),
                    e.to_string(),
                    "at most 16 webhooks per run, the configuration's included",
                )
            })?;
        if let (true, Some(store)) = (self.runs.enqueue, &self.store) {
            let artifact = ais_ir::bytecode::encode(&loaded.program).map_err(|e| {
                ApiError::internal(format!("cannot encode the program for the run queue: {e}"))
            })?;
            return Ok(Box::new(QueuedRun {
                id: super::queue::queued_run_id(),
                store: store.clone(),
                program: loaded
                    .source
                    .as_ref()
                    .map_or_else(|| program.file.clone(), |(n, _)| n.clone()),
                artifact,
                entry: spec.entry.clone(),
                args: serde_json::to_string(&spec.args).unwrap_or_else(|_| "[]".into()),
                cancel: edge.cancel,
                queue: spec.queue.clone(),
                webhooks,
                in_store: false,
            }));
        }
        if !spec.queue.is_default() {
            return Err(ApiError::bad_request(
                "request.invalid",
                "`priority`, `concurrency_key` and `key_limit` place a run in the fleet's queue: this server runs programs itself",
                "serve with `--store postgres://... --enqueue`, or leave them out",
            ));
        }
        let run = self.run_args(spec.entry.clone(), &spec.budget);
        let prepared =
            self.finish_prepare(loaded, spec.args.clone(), &run, &spec.budget, edge, None)?;
        if webhooks.is_empty() {
            return Ok(prepared);
        }
        // Stored before the run starts, in the store it is journaled in.
        let stored = self.fork_store().and_then(|store| {
            store
                .add_webhooks(prepared.id(), &webhooks)
                .map_err(|e| ApiError::internal(format!("cannot store the webhooks: {e}")))
        });
        match stored {
            Ok(()) => Ok(prepared),
            Err(e) => {
                prepared.discard("its webhooks could not be stored");
                Err(e)
            }
        }
    }

    fn prepare_resume(
        &self,
        id: &str,
        budget: &BudgetSpec,
        input: Option<serde_json::Value>,
        edge: RunEdge,
    ) -> Result<ais_serve::Resumed, ApiError> {
        let dir = self.journal_dir();
        if dir.is_none() && self.store.is_none() {
            return Err(ApiError::conflict(
                "journal.none",
                "`--memory :memory:` keeps no run journal to resume from",
                "serve with a memory directory or a `--store`",
            ));
        }
        let journal_error = |e: journal::JournalError| match e.code {
            "journal.no_run" | "journal.missing" => {
                ApiError::not_found("run.not_found", e.message, "`GET /v1/runs` lists the runs")
            }
            "journal.completed" | "journal.busy" => ApiError::conflict(
                "run.not_resumable",
                e.message,
                "only failed, cancelled and paused runs can be resumed",
            ),
            _ => ApiError::internal(e.to_string()),
        };
        let stored = match (&self.store, &dir) {
            (Some(store), _) => journal::load_run_in(store.as_ref(), id),
            (None, Some(dir)) => journal::load_run(dir, id),
            (None, None) => unreachable!("checked above"),
        }
        .map_err(journal_error)?;
        let program = ais_ir::bytecode::decode(&stored.artifact).map_err(|e| {
            ApiError::internal(format!(
                "the program stored for run `{id}` is not a valid artifact: {e}"
            ))
        })?;
        // A run stopped at a `pause` needs its answer; only such a run
        // takes one (checked before the journal marks the run running).
        let paused = stored.info.status == journal::Status::Paused;
        match (&input, paused) {
            (None, true) => {
                return Err(ApiError::conflict(
                    "run.waiting_for_input",
                    format!(
                        "run `{id}` is paused, {}",
                        stored.info.error.as_deref().unwrap_or("waiting for input")
                    ),
                    "resume it with {\"input\": VALUE}",
                ))
            }
            (Some(_), false) => {
                return Err(ApiError::conflict(
                    "run.not_waiting",
                    format!("run `{id}` waits for no input"),
                    "leave out `input`",
                ))
            }
            _ => {}
        }
        let mut j = match (&self.store, &dir) {
            (Some(store), _) => Journal::resume_in(store.clone(), &stored.info.id),
            (None, Some(dir)) => Journal::resume(dir, &stored.info.id),
            (None, None) => unreachable!("checked above"),
        }
        .map_err(journal_error)?;
        j.set_idempotent_tools(super::journal::idempotent_tools());
        if let Some(value) = &input {
            j.answer(value)
                .map_err(|e| ApiError::internal(e.to_string()))?;
        }
        let loaded = Arc::new(Loaded {
            program,
            source: None,
        });
        let run = self.run_args(stored.info.entry.clone(), budget);
        let prepared =
            self.finish_prepare(loaded, stored.args, &run, budget, edge, Some(Arc::new(j)))?;
        Ok(ais_serve::Resumed {
            prepared,
            program: stored.info.program,
            entry: stored.info.entry,
        })
    }

    fn journal_dir(&self) -> Option<PathBuf> {
        journal::dir_of(&self.runs.memory.storage())
    }

    fn agent_store(&self) -> Result<Option<Arc<dyn ais_vm::store::AgentStore>>, ApiError> {
        let failed = |e: ais_vm::HostError| {
            ApiError::internal(format!("cannot open the agent store: {}", e.message))
        };
        if let Some(url) = self.runs.memory.store_url() {
            return ais_vm::store::open_agent_postgres(&url)
                .map(Some)
                .map_err(failed);
        }
        match self.runs.memory.storage() {
            ais_vm::aam::Storage::Dir(d) => {
                // Before any run made it.
                std::fs::create_dir_all(&d).map_err(|e| {
                    ApiError::internal(format!(
                        "cannot create the memory directory `{}`: {e}",
                        d.display()
                    ))
                })?;
                ais_vm::store::open_agent_sqlite(Some(&d.join(ais_vm::aam::DB_FILE)))
                    .map(|(s, _)| Some(s))
                    .map_err(failed)
            }
            ais_vm::aam::Storage::Ephemeral => Ok(None),
        }
    }

    fn journal_store(&self) -> Option<Arc<dyn Store>> {
        self.store.clone()
    }

    fn backend_name(&self) -> String {
        self.setup.llm.backend.name().to_string()
    }

    fn fork(
        &self,
        id: &str,
        at: &str,
        value: Option<&serde_json::Value>,
    ) -> Result<(String, serde_json::Value), ApiError> {
        let store = self.fork_store()?;
        let f =
            journal::fork_in(&store, id, &journal::ForkAt::parse(at), value).map_err(
                |e| match e.code {
                    "journal.no_run" | "journal.missing" => ApiError::not_found(
                        "run.not_found",
                        e.message,
                        "`GET /v1/runs` lists the runs",
                    ),
                    "fork.no_op" | "fork.bad_op" | "fork.ambiguous" | "fork.not_editable" => {
                        ApiError::bad_request(
                            e.code,
                            e.message,
                            "`GET /v1/runs/{id}/steps` lists the steps",
                        )
                    }
                    _ => ApiError::internal(e.to_string()),
                },
            )?;
        Ok((
            f.id,
            serde_json::json!({
                "from": id,
                "step": f.at.step,
                "op": f.at.op,
                "value": f.at.value,
                "copied": f.copied,
                "original_llm_calls": f.original_llm.0,
                "original_tokens": f.original_llm.1,
            }),
        ))
    }

    fn steps(&self, id: &str) -> Result<serde_json::Value, ApiError> {
        let store = self.fork_store()?;
        let steps = journal::fork_steps(store.as_ref(), id)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        if steps.is_empty() && journal::load_run_in(store.as_ref(), id).is_err() {
            return Err(ApiError::not_found(
                "run.not_found",
                format!("no run `{id}`"),
                "`GET /v1/runs` lists the runs",
            ));
        }
        let list: Vec<serde_json::Value> = steps
            .into_iter()
            .map(|s| {
                serde_json::json!({"step": s.step, "op": s.op, "kind": s.kind,
                    "tokens": s.tokens, "key": s.key, "value": s.value})
            })
            .collect();
        Ok(serde_json::json!({"steps": list}))
    }

    fn graph_svg(&self, program: &ais_ir::bytecode::Program) -> Option<String> {
        Some(crate::report::graph_svg(program))
    }

    fn reload(&self) -> Result<Vec<Served>, ApiError> {
        // Diagnostics go to the server's standard error, as at start.
        let mut out = Output::new(crate::ErrorFormat::Human, crate::ColorChoice::Never);
        match load_all(&mut out, &self.files, &self.opt, &self.backend) {
            Some((served, loaded)) => {
                *self.loaded.write().unwrap_or_else(|e| e.into_inner()) = loaded;
                eprintln!("reloaded {} program(s)", served.len());
                Ok(served)
            }
            None => Err(ApiError::new(
                422,
                "reload.failed",
                "a served file does not compile (its diagnostics are on the server's standard error); the served programs are unchanged",
                "fix the file and reload again",
            )),
        }
    }
}

/// The loaded programs by file name.
type LoadedByFile = HashMap<String, Arc<Loaded>>;

/// Compiles every file (diagnostics rendered); `None` when one fails.
fn load_all(
    out: &mut Output,
    files: &[PathBuf],
    opt: &OptArgs,
    backend: &BackendArgs,
) -> Option<(Vec<Served>, LoadedByFile)> {
    let mut served = Vec::new();
    let mut loaded = HashMap::new();
    let mut failed = false;
    let libraries = load::imported_libraries(files);
    for path in files.iter().filter(|p| !libraries.contains(*p)) {
        let Some(l) = load::load_in(out, path, opt, backend) else {
            failed = true;
            continue;
        };
        let file = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        if loaded.contains_key(&file) {
            eprintln!("error: two served files are named `{file}`");
            return None;
        }
        served.push(Served {
            path: path.display().to_string(),
            file: file.clone(),
            program: Arc::new(l.program.clone()),
            source: l.source.as_ref().map(|(_, s)| Arc::from(s.as_str())),
        });
        loaded.insert(file, Arc::new(l));
    }
    (!failed).then_some((served, loaded))
}

/// Loads the programs and the configuration and starts the registry.
fn start(
    out: &mut Output,
    files: &[PathBuf],
    opt: &OptArgs,
    backend: &BackendArgs,
    runs: &ServedRunArgs,
) -> Result<Arc<ais_serve::Registry>, i32> {
    let (served, loaded) = load_all(out, files, opt, backend).ok_or(1)?;
    let mut setup = match RunSetup::load(backend) {
        Ok(s) => s,
        Err(SetupError::Config(e)) => return Err(super::config::report(out, &e)),
        Err(e) => {
            eprintln!("error: {e}");
            return Err(2);
        }
    };
    if let Err(e) = super::journal::budget(&runs.budget, &setup.settings) {
        eprintln!("error: {e}");
        return Err(2);
    }
    if let Some(n) = &setup.llm.notice {
        eprintln!("{n}");
    }
    let runs = runs.clone();
    let store = match runs.memory.store_url() {
        Some(url) => match MemoryArgs::shared_store(&url) {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("error: {e}");
                return Err(1);
            }
        },
        None => None,
    };
    if runs.enqueue && store.as_ref().is_none_or(|s| s.backend() != "postgres") {
        eprintln!("error: `--enqueue` hands runs to `aisc worker`s through a shared store: give `--store postgres://...` (or set AIS_STORE)");
        return Err(2);
    }
    if let Some(url) = runs.memory.store_url() {
        if let Err(e) = super::worker::limit_fleet(&mut setup, &url) {
            eprintln!("error: {e}");
            return Err(1);
        }
    }
    // AIS_SERVE_FAIR=fifo | off | las-uncounted: the benchmark's baselines
    // (docs/serve.md).
    let mode = std::env::var("AIS_SERVE_FAIR").unwrap_or_default();
    let fair =
        (mode != "off" && ais_serve::fair::FairShare::gates(&*setup.llm.backend)).then(|| {
            ais_serve::fair::FairShare::with_order(setup.llm.backend.concurrency(), mode != "fifo")
        });
    let engine = CliEngine {
        store,
        fair,
        credit: mode != "las-uncounted",
        setup,
        runs: runs.clone(),
        loaded: std::sync::RwLock::new(loaded),
        files: files.to_vec(),
        opt: opt.clone(),
        backend: backend.clone(),
    };
    ais_serve::Registry::start(
        Arc::new(engine),
        served,
        ais_serve::RegistryConfig {
            max_concurrent: runs.max_concurrent_runs,
            queue: runs.queue,
            keep_runs: runs.keep_runs,
            keep_event_files: runs.keep_event_files,
        },
    )
    .map_err(|e| {
        eprintln!("error: cannot start the run executors: {e}");
        1
    })
}

/// `aisc serve FILE...`.
pub fn serve(
    out: &mut Output,
    files: &[PathBuf],
    listen: &ListenArgs,
    runs: &ServedRunArgs,
    opt: &OptArgs,
    backend: &BackendArgs,
) -> i32 {
    let token = std::env::var(TOKEN_VAR)
        .ok()
        .filter(|t| !t.trim().is_empty());
    let config = ais_serve::ServeConfig {
        listen: listen.listen.clone(),
        token: token.map(|t| t.trim().to_string()),
        token_var: TOKEN_VAR.into(),
        max_body: listen.max_body,
        http_threads: listen.http_threads,
        max_header_bytes: listen.max_header_bytes,
        read_timeout: std::time::Duration::from_secs_f64(listen.read_timeout),
        max_connections: listen.max_connections,
        max_streams: listen.max_streams,
        max_streams_per_run: listen.max_streams_per_run,
        allowed_origins: listen.allow_origin.clone(),
    };
    // Refuse a listener without its token before compiling anything.
    if config.token.is_none() && !is_loopback(&config.listen) {
        eprintln!(
            "error: --listen `{}` is not a loopback address, and every request to it must be authenticated: set {TOKEN_VAR} to a bearer token",
            config.listen
        );
        return 2;
    }
    let registry = match start(out, files, opt, backend, runs) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mcp = Arc::new(ais_serve::mcp::Mcp::new(registry.clone()));
    let stop_webhooks = super::webhooks::deliver_served_in_background(&runs.memory);
    let n = registry.programs().len();
    let place = match runs.memory.store_url() {
        Some(url) if runs.enqueue => format!(
            "runs queued for workers in {}",
            ais_vm::store::postgres::redact(&url)
        ),
        Some(url) => format!(
            "runs journaled in {}",
            ais_vm::store::postgres::redact(&url)
        ),
        None => format!(
            "runs journaled in {}",
            journal::dir_of(&runs.memory.storage())
                .map_or_else(|| "memory only".to_string(), |d| d.display().to_string())
        ),
    };
    let result = ais_serve::serve(config, registry, mcp, |addr| {
        eprintln!(
            "aisc serve: listening on http://{addr} ({n} program{}; {place})",
            if n == 1 { "" } else { "s" },
        );
    });
    if let Some(stop) = stop_webhooks {
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

/// True when every address `listen` resolves to is a loopback one (an
/// unresolvable address is left to the server to report).
fn is_loopback(listen: &str) -> bool {
    use std::net::ToSocketAddrs;
    match listen.to_socket_addrs() {
        Ok(addrs) => addrs.into_iter().all(|a| a.ip().is_loopback()),
        Err(_) => true,
    }
}

/// `aisc mcp FILE...`: the MCP server on stdin/stdout.
pub fn mcp(
    out: &mut Output,
    files: &[PathBuf],
    runs: &ServedRunArgs,
    opt: &OptArgs,
    backend: &BackendArgs,
) -> i32 {
    let registry = match start(out, files, opt, backend, runs) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mcp = Arc::new(ais_serve::mcp::Mcp::new(registry));
    let stdout: Arc<std::sync::Mutex<dyn std::io::Write + Send>> =
        Arc::new(std::sync::Mutex::new(std::io::stdout()));
    match ais_serve::mcp::serve_stdio(mcp, std::io::stdin().lock(), stdout) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: reading stdin: {e}");
            1
        }
    }
}
