//! `aisc build -o`, `aisc run` and `aisc inspect`: from source (or an
//! artifact) to a validated program, then onto the VM.

use super::output::Output;
use super::{BackendArgs, OptArgs};
use ais_compiler::driver;
use ais_ir::bytecode::{self, Program};
use ais_ir::Diagnostic;
use ais_vm::{Policy, RunOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A program ready to run, with the source it came from (for error spans).
pub struct Loaded {
    pub program: Program,
    /// `(file name, source)` when compiled from `.ais`.
    pub source: Option<(String, String)>,
}

pub fn is_artifact(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "apxmobj")
}

/// Compiles `.ais` (checked, lowered, optimized, code-generated) or loads
/// and validates an `.apxmobj`. Diagnostics are rendered on the way.
pub fn load(out: &mut Output, path: &Path, opt: &OptArgs) -> Option<Loaded> {
    load_in(out, path, opt, &BackendArgs::default())
}

/// [`load`] with the configuration `backend` names: a call of a name the
/// language does not know is a tool call when that configuration provides
/// such a tool (a subprocess or MCP tool), as in the reference.
pub fn load_in(
    out: &mut Output,
    path: &Path,
    opt: &OptArgs,
    backend: &BackendArgs,
) -> Option<Loaded> {
    let name = path.display().to_string();
    if is_artifact(path) {
        return load_artifact(out, path).map(|program| Loaded {
            program,
            source: None,
        });
    }
    let source = out.read_source(path)?;
    let remote = remote_agents(backend);
    let plain = ais_compiler::sema::Environment {
        remote_agents: remote.clone(),
        ..Default::default()
    };
    let (mut sources, mut compiled) = crate::compile_input(path, &source, &plain);
    // Only a name nothing in the language provides sends us to the
    // configuration (which may start MCP servers to list their tools).
    if let Err(diags) = &compiled {
        if diags.iter().any(|d| d.code == "E0114") {
            let mut env = configured_tools(backend);
            if !env.tools.is_empty() {
                env.remote_agents = remote;
                (sources, compiled) = crate::compile_input(path, &source, &env);
            }
        }
    }
    let mut compiled = match compiled {
        Ok(c) => c,
        Err(diags) => {
            out.diagnostics_map(&sources, &diags);
            return None;
        }
    };
    out.diagnostics_map(&sources, &compiled.diagnostics);
    if let Err(e) = driver::optimize(&mut compiled.module, &opt.options()) {
        eprintln!("error: {e}");
        return None;
    }
    match bytecode::compile(&compiled.module) {
        Ok(program) => Some(Loaded {
            program,
            source: Some((name, source)),
        }),
        Err(e) => {
            eprintln!("error: internal compiler error: code generation failed: {e}");
            None
        }
    }
}

/// The remote agents the configuration names (`[[remote_agents]]`); none
/// when it does not load (its error is reported when a run loads it).
pub(crate) fn remote_agents(backend: &BackendArgs) -> Vec<String> {
    super::config::load_all(backend)
        .map(|(_, aam)| aam.remote_agents.iter().map(|r| r.name.clone()).collect())
        .unwrap_or_default()
}

/// The subprocess and MCP tools the configuration provides, with their
/// parameters in positional order (required ones first, as their schema
/// lists them, then the others). A configuration that does not load gives
/// none: its error is reported when a run loads it.
pub(crate) fn configured_tools(backend: &BackendArgs) -> ais_compiler::sema::Environment {
    let Ok((_, aam)) = super::config::load_all(backend) else {
        return Default::default();
    };
    if aam.subprocess.is_empty() && aam.mcp_servers.is_empty() {
        return Default::default();
    }
    let Ok(host) = ais_vm::aam::AamHost::open(ais_vm::aam::AamOptions {
        storage: ais_vm::aam::Storage::Ephemeral,
        config: aam,
        confirm: ais_vm::aam::Confirm::Deny,
        console: None,
    }) else {
        return Default::default();
    };
    let tools = host
        .tool_list()
        .into_iter()
        .filter(|t| matches!(t["origin"].as_str(), Some("subprocess" | "mcp")))
        .filter_map(|t| {
            let name = t["name"].as_str()?.to_string();
            Some((
                name,
                positional_params(&t["input_schema"], &t["param_order"]),
            ))
        })
        .collect();
    ais_compiler::sema::Environment {
        tools,
        ..Default::default()
    }
}

/// A configured tool's parameters in the order positional arguments bind:
/// the schema's `required` names in their order, then its other
/// properties in the order the server wrote them (`param_order`, kept by
/// the MCP client: the parsed schema's keys are sorted), then any left, by
/// name.
fn positional_params(schema: &serde_json::Value, param_order: &serde_json::Value) -> Vec<String> {
    let mut params: Vec<String> = Vec::new();
    let mut add = |p: &str| {
        if !params.iter().any(|q| q == p) {
            params.push(p.to_string());
        }
    };
    let names = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .map(|r| {
                r.iter()
                    .filter_map(|p| p.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let props = schema["properties"].as_object();
    for p in names(&schema["required"]) {
        add(&p);
    }
    for p in names(param_order) {
        if props.is_some_and(|m| m.contains_key(&p)) {
            add(&p);
        }
    }
    for p in props.into_iter().flat_map(|m| m.keys()) {
        add(p);
    }
    params
}

/// Writes `bytes` to `path` atomically, through a temporary file in the same
/// folder and a rename: a failed write never leaves a partial file behind.
/// A file that existed keeps its permissions.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp = dir.join(format!(".{file_name}.tmp{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        if let Ok(meta) = std::fs::metadata(path) {
            std::fs::set_permissions(&tmp, meta.permissions())?;
        }
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

pub fn build_artifact(out: &mut Output, file: &Path, output: &Path, opt: &OptArgs) -> i32 {
    let Some(loaded) = load(out, file, opt) else {
        return 1;
    };
    let bytes = match bytecode::encode(&loaded.program) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: cannot encode the artifact: {e}");
            return 1;
        }
    };
    match write_atomic(output, &bytes) {
        Ok(()) => {
            out.summary(
                &format!("wrote {} ({} bytes)", output.display(), bytes.len()),
                serde_json::json!({"file": output.display().to_string(), "bytes": bytes.len()}),
            );
            0
        }
        Err(e) => {
            eprintln!("error: cannot write `{}`: {e}", output.display());
            1
        }
    }
}

/// Reads and validates an artifact; a file that is not one is reported as
/// its `L` diagnostic in the chosen error format.
fn load_artifact(out: &mut Output, path: &Path) -> Option<Program> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            out.io_error(path, &e.to_string());
            return None;
        }
    };
    match bytecode::decode(&bytes) {
        Ok(p) => Some(p),
        Err(e) => {
            let name = path.display().to_string();
            out.report(Some(&name), &ais_ir::IntoDiagnostic::into_diagnostic(e));
            None
        }
    }
}

pub fn inspect(out: &mut Output, path: &Path) -> i32 {
    match load_artifact(out, path) {
        Some(p) => {
            out.stdout(&bytecode::inspect(&p));
            0
        }
        None => 1,
    }
}

/// Options of `aisc run` beyond the backend and optimization flags.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Entry-flow argument `name=value` (repeatable). Values are converted to
    /// the parameter's type; JSON parameters accept JSON text.
    #[arg(long = "arg", value_name = "NAME=VALUE")]
    pub args: Vec<String>,
    /// Entry flow `Agent.flow` (default: the flow marked @entry).
    #[arg(long)]
    pub entry: Option<String>,
    /// Scheduler worker threads (default: one per core).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Order of queued LLM and tool calls.
    #[arg(long, default_value = "fifo", value_parser = ["fifo", "critical-path", "round-robin"])]
    pub policy: String,
    /// Concurrent calls per backend (default: the backend's limit).
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Write per-op events as JSON lines.
    #[arg(long, value_name = "PATH")]
    pub events: Option<PathBuf>,
    /// Write a Chrome/Perfetto trace.
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// Write the outcome and run summary as JSON.
    #[arg(long, value_name = "PATH")]
    pub report_json: Option<PathBuf>,
    /// Write each inner plan the run accepted (`solve`) into DIR, as
    /// `plan-N.ais` (check or rerun it with aisc) and `plan-N.aisir`
    /// (ais-opt reads it).
    #[arg(long, value_name = "DIR")]
    pub emit_plans: Option<PathBuf>,
    /// Print the text of LLM calls on stderr as the model streams it, each
    /// line prefixed with its op (`[Agent.flow %3]`); replaces the
    /// progress line. Backends that do not stream (sim, replays) print
    /// nothing here.
    #[arg(long)]
    pub stream: bool,
    /// No run summary, progress or simulator note on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub memory: super::aam::MemoryArgs,
    /// Allow tools marked destructive without asking.
    #[arg(long)]
    pub yes: bool,
    #[command(flatten)]
    pub budget: super::runs::BudgetArgs,
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
    /// Queue the run in the `--store` for a worker (`aisc worker`) and
    /// print its id, instead of running it here.
    #[arg(long)]
    pub detach: bool,
}

/// What the run's events keep of prompts, replies and tool arguments
/// (default: `[telemetry]` in the config).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TelemetryArgs {
    /// Keep no prompts, replies or tool arguments in the run's events,
    /// trace and report.
    #[arg(long)]
    pub redact: bool,
    /// Most bytes kept of each prompt message, reply and tool argument
    /// text (default 4096; 0 keeps none).
    #[arg(long, value_name = "BYTES")]
    pub telemetry_text_limit: Option<usize>,
}

/// The text policy of a run: the config's `[telemetry]`, the flags over
/// it, and the selected backend's secrets (API key, `$VAR` headers), which
/// are scrubbed from every kept text.
fn text_policy(
    t: &TelemetryArgs,
    settings: &ais_vm::config::Settings,
) -> ais_vm::telemetry::TextPolicy {
    let mut p = settings.config.telemetry.clone();
    p.redact |= t.redact;
    if let Some(n) = t.telemetry_text_limit {
        p.limit = n;
    }
    let b = settings.selected();
    let vars = b
        .api_key_env
        .iter()
        .cloned()
        .chain(b.headers.iter().filter_map(|(_, v)| match v {
            ais_vm::config::HeaderValue::Env { var, .. } => Some(var.clone()),
            ais_vm::config::HeaderValue::Literal(_) => None,
        }));
    p.secrets.extend(
        vars.filter_map(|v| std::env::var(v).ok())
            .filter(|s| !s.is_empty()),
    );
    p
}

pub fn run(
    out: &mut Output,
    file: &Path,
    run: &RunArgs,
    opt: &OptArgs,
    backend: &BackendArgs,
) -> i32 {
    let args = match parse_args(&run.args) {
        Ok(a) => a,
        Err(e) => {
            render_arg_error(out, &e);
            return 2;
        }
    };
    let Some(loaded) = load_in(out, file, opt, backend) else {
        return 1;
    };
    if let Err(e) = check_args(&loaded.program, run.entry.as_deref(), &args) {
        render_arg_error(out, &e);
        return 2;
    }
    if run.detach {
        return super::worker::detach(file, &loaded, &args, run);
    }
    run_loaded(out, loaded, args, run, backend, None)
}

/// A bad entry point or `--arg`: a usage error (exit 2), caught before the
/// run starts so that no run is journaled for it.
#[derive(Debug, thiserror::Error)]
pub enum ArgError {
    #[error("--arg expects NAME=VALUE, got `{0}`")]
    Malformed(String),
    #[error("--arg `{0}` is given more than once")]
    Duplicate(String),
    #[error("--arg `{name}`: invalid JSON for the `json` parameter at line {line}, column {column}: {message}")]
    InvalidJson {
        name: String,
        value: String,
        /// Byte offset of the error in `value`.
        offset: usize,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{0}")]
    Entry(#[from] ais_ir::bytecode::EntryError),
    #[error("{0}")]
    Argument(String),
}

impl ArgError {
    fn code(&self) -> &'static str {
        match self {
            ArgError::Entry(_) => "R0001",
            _ => "R0002",
        }
    }

    fn hint(&self) -> &'static str {
        match self {
            ArgError::Malformed(_) => "write `--arg name=value`, one per parameter",
            ArgError::Duplicate(_) => "give each parameter once",
            ArgError::InvalidJson { .. } => {
                "a `json` parameter takes JSON text: quote strings (`--arg p='\"text\"'`), objects as `--arg p='{\"k\": 1}'`"
            }
            ArgError::Entry(_) => "mark one flow `@entry`, or pass `--entry Agent.flow`",
            ArgError::Argument(_) => "pass one `--arg NAME=VALUE` per parameter of the entry flow",
        }
    }
}

/// `--arg NAME=VALUE` pairs, in order; a name given twice is an error
/// (silently keeping one of them would hide a typo in a script).
pub fn parse_args(raw: &[String]) -> Result<Vec<(String, serde_json::Value)>, ArgError> {
    let mut args: Vec<(String, serde_json::Value)> = Vec::new();
    for a in raw {
        let Some((k, v)) = a.split_once('=').filter(|(k, _)| !k.trim().is_empty()) else {
            return Err(ArgError::Malformed(a.clone()));
        };
        let k = k.trim();
        if args.iter().any(|(n, _)| n == k) {
            return Err(ArgError::Duplicate(k.to_string()));
        }
        args.push((k.to_string(), serde_json::Value::String(v.to_string())));
    }
    Ok(args)
}

/// Checks the entry flow and the arguments against its parameters before
/// the run: JSON text for `json` parameters must parse (text that is not JSON
/// is an error, not a string), and the VM's own conversion must succeed.
pub fn check_args(
    program: &Program,
    entry: Option<&str>,
    args: &[(String, serde_json::Value)],
) -> Result<(), ArgError> {
    let flow = program.find_entry(entry)?;
    if let Some(f) = program.flows.get(flow as usize) {
        for (name, t) in &f.params {
            let Some((_, serde_json::Value::String(v))) = args.iter().find(|(n, _)| n == name)
            else {
                continue;
            };
            if program.type_of(*t) == ais_ir::Type::Json {
                if let Err(e) = serde_json::from_str::<serde_json::Value>(v) {
                    let (line, column) = (e.line(), e.column());
                    let offset = offset_of(v, line, column);
                    return Err(ArgError::InvalidJson {
                        name: name.clone(),
                        value: v.clone(),
                        offset,
                        line,
                        column,
                        message: e.to_string(),
                    });
                }
            }
        }
    }
    ais_vm::exec::entry_args(program, flow, args)
        .map(|_| ())
        .map_err(|e| match e {
            ais_vm::RunError::Argument(m) => ArgError::Argument(m),
            other => ArgError::Argument(other.to_string()),
        })
}

/// Byte offset of serde_json's 1-based line and column (column 0: before the
/// first character, as serde reports for an empty input).
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    let rest = text.get(start..).unwrap_or("");
    let col = rest
        .char_indices()
        .nth(column.saturating_sub(1))
        .map_or(rest.len(), |(i, _)| i);
    (start + col).min(text.len())
}

fn render_arg_error(out: &mut Output, e: &ArgError) {
    match e {
        ArgError::InvalidJson {
            name,
            value,
            offset,
            message,
            ..
        } => {
            // The value itself is the source, so the caret points at the error.
            let end = value[*offset..]
                .chars()
                .next()
                .map_or(*offset, |c| offset + c.len_utf8());
            let d = Diagnostic::error(
                e.code(),
                format!("--arg `{name}`: invalid JSON for the `json` parameter"),
                ais_ir::Span::new(*offset, end),
            )
            .with_label(message.clone())
            .with_help(e.hint());
            out.diagnostics(&format!("--arg {name}"), value, &[d]);
        }
        _ => out.report(
            None,
            &Diagnostic::error(e.code(), e.to_string(), ais_ir::Span::DUMMY).with_help(e.hint()),
        ),
    }
}

/// The configuration the runs of one process share: the settings (flags
/// over environment over file), the AAM's settings and the LLM backend
/// built from them. `aisc run` and `aisc resume` build one per run; `aisc
/// serve` and `aisc mcp` build one at start and share it between runs.
pub struct RunSetup {
    pub settings: ais_vm::config::Settings,
    pub aam: ais_vm::aam::config::AamConfig,
    pub llm: ais_vm::llm::factory::RunBackend,
}

/// Why a run could not be set up: a configuration problem (rendered as its
/// `K` diagnostic) or another usage problem (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{}", .0.message())]
    Config(ais_vm::config::ConfigError),
    #[error("{0}")]
    Other(String),
}

impl RunSetup {
    pub fn load(backend: &BackendArgs) -> Result<RunSetup, SetupError> {
        let (settings, aam) = super::config::load_all(backend).map_err(SetupError::Config)?;
        let llm = settings
            .build_run()
            .map_err(|e| SetupError::Other(e.to_string()))?;
        Ok(RunSetup { settings, aam, llm })
    }
}

/// What the edge gives a run besides its options: who shows printed lines,
/// who answers confirmations of destructive tools, the progress line and
/// the live observer.
pub struct RunEdge {
    pub console: Option<Arc<dyn ais_vm::aam::Console>>,
    pub confirm: ais_vm::aam::Confirm,
    pub progress: Option<ais_vm::progress::ProgressSink>,
    pub observer: Option<ais_vm::observe::Observer>,
}

/// A run ready to start: its options (journal included), its host (with
/// the program's capabilities loaded) and the backend to call.
pub struct PreparedRun {
    pub options: RunOptions,
    pub host: Arc<ais_vm::aam::AamHost>,
    /// Lines for the edge to show before the run (simulated stand-ins).
    pub notes: Vec<String>,
    pub backend: Arc<dyn ais_vm::llm::LlmBackend>,
    /// This attempt's telemetry, streamed to the memory directory as the
    /// run goes (`None`: `:memory:`, or the file could not be started),
    /// and its OpenTelemetry trace when export is configured; the edge
    /// calls `finish` with the report.
    pub telemetry: Option<super::report::otlp::RunTelemetry>,
}

/// Builds a run the same way for `aisc run`, `aisc resume` and `aisc
/// serve`: budget and limits from the flags and the config, the AAM host on
/// the memory directory, and the journal (a new run, or `resume`: an
/// earlier run whose completed ops are replayed).
pub fn prepare_run(
    setup: &RunSetup,
    loaded: &Loaded,
    args: Vec<(String, serde_json::Value)>,
    run: &RunArgs,
    edge: RunEdge,
    resume: Option<Arc<ais_vm::journal::Journal>>,
) -> Result<PreparedRun, SetupError> {
    let settings = &setup.settings;
    // Before anything is journaled: a backend the program names must exist.
    let backend = settings
        .route(&setup.llm, &loaded.program.named_backends())
        .map_err(SetupError::Config)?;
    let journal_args = args.clone();
    let budget = super::runs::budget(&run.budget, settings).map_err(SetupError::Other)?;
    let mut options = RunOptions {
        entry: run.entry.clone(),
        args,
        workers: run.workers,
        policy: run.policy.parse::<Policy>().unwrap_or_default(),
        concurrency: run.concurrency,
        progress: edge.progress,
        observer: edge.observer,
        budget,
        watchdog: Some(run.budget.watchdog),
        planner: Some(Arc::new(ais_planner::FrontEndPlanner::default())),
        max_live_frames: run
            .budget
            .max_frames
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
            .or(settings.config.limits.max_live_frames)
            .unwrap_or(ais_vm::scheduler::limits::DEFAULT_MAX_LIVE_FRAMES),
        max_call_depth: settings
            .config
            .limits
            .max_call_depth
            .unwrap_or(RunOptions::default().max_call_depth),
        max_value_bytes: settings
            .config
            .limits
            .max_value_bytes
            .unwrap_or(ais_vm::scheduler::limits::DEFAULT_MAX_VALUE_BYTES),
        telemetry_text: text_policy(&run.telemetry, settings),
        flow_policy: with_remote_agents(settings.config.policy.clone(), &setup.aam),
        ..RunOptions::default()
    };
    let mut aam = setup.aam.clone();
    // On the simulator, web search is simulated too (labelled), unless a
    // provider is configured.
    aam.simulate_search = setup.llm.simulated;
    let mut host = super::aam::open_host(&run.memory, aam, edge.confirm, edge.console)
        .map_err(SetupError::Other)?;
    if let Some(j) = &resume {
        host.set_run_id(j.run_id());
    }
    let host = Arc::new(host);
    host.load_program(&loaded.program);
    // Before any call: every declared capability needs a tool. The
    // simulator stands in for the missing ones (labelled); a real run stops.
    let missing = host.unprovided_capabilities(&loaded.program);
    let mut notes = Vec::new();
    if !missing.is_empty() {
        let list = missing
            .iter()
            .map(|(a, c)| format!("`{c}` (agent {a})"))
            .collect::<Vec<_>>()
            .join(", ");
        if setup.llm.simulated {
            host.simulate_capabilities(&missing);
            notes.push(format!(
                "note: no tool provides {list}; on the simulator its calls are simulated from the declared signature (results say `[simulated …]`)"
            ));
        } else {
            return Err(SetupError::Other(format!(
                "no tool provides the declared capability {list}; nothing was called.\n  = help: configure a tool of that name ([[tools.subprocess]], an MCP server in [[mcp_servers]], or [tools.search] for `search`), or remove the declaration; `aisc tools` lists the tools a run has"
            )));
        }
    }
    let name = loaded
        .source
        .as_ref()
        .map_or_else(|| "(artifact)".to_string(), |(n, _)| n.clone());
    let resumed = resume.is_some();
    options.journal = match resume {
        Some(j) => Some(j),
        None => Some(
            super::runs::begin(
                &run.memory,
                host.run_id(),
                &name,
                loaded,
                run.entry.as_deref(),
                &journal_args,
            )
            .map_err(SetupError::Other)?,
        ),
    };
    let telemetry = super::report::otlp::with_trace(
        keep_telemetry(&run.memory, &mut options),
        &settings.config,
        &mut options,
        resumed,
    );
    Ok(PreparedRun {
        options,
        host,
        backend,
        notes,
        telemetry,
    })
}

/// Starts keeping the run's telemetry next to its journal, as it happens
/// (`report::keep`), composed with the edge's observer. A file that cannot
/// be started costs the report, never the run.
fn keep_telemetry(
    memory: &super::aam::MemoryArgs,
    options: &mut RunOptions,
) -> Option<Arc<super::report::keep::Keeper>> {
    use super::report::keep::{Both, Keeper};
    let dir = ais_vm::journal::dir_of(&memory.storage())?;
    let id = options.journal.as_ref()?.run_id().to_string();
    let keeper = match Keeper::start(&dir, &id) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("warning: the run's telemetry is not kept for `aisc report`: {e}");
            return None;
        }
    };
    let mine: Arc<dyn ais_vm::observe::RunObserver> = keeper.clone();
    options.observer = Some(ais_vm::observe::Observer(match options.observer.take() {
        Some(edge) => Arc::new(Both(edge.0, mine)),
        None => mine,
    }));
    Some(keeper)
}

/// Runs a loaded program on the AAM host with a run journal: a new run, or
/// (`resume`) an earlier run whose completed ops are replayed.
/// Exit code of a run that stopped at a `pause`, waiting for input.
pub const PAUSED_EXIT: i32 = 3;

pub fn run_loaded(
    out: &mut Output,
    loaded: Loaded,
    args: Vec<(String, serde_json::Value)>,
    run: &RunArgs,
    backend: &BackendArgs,
    resume: Option<Arc<ais_vm::journal::Journal>>,
) -> i32 {
    let setup = match RunSetup::load(backend) {
        Ok(s) => s,
        Err(SetupError::Config(e)) => return super::config::report(out, &e),
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let llm = &setup.llm;
    if let (Some(n), false) = (&llm.notice, run.quiet) {
        eprintln!("{n}");
    }
    let edge = RunEdge {
        console: Some(Arc::new(crate::tty::TtyConsole)),
        confirm: crate::tty::confirm_mode(run.yes),
        progress: crate::tty::progress_bar(run.quiet || run.stream),
        observer: run.stream.then(|| {
            ais_vm::observe::Observer(Arc::new(crate::stream::TextPrinter::new(std::io::stderr())))
        }),
    };
    let PreparedRun {
        mut options,
        host,
        backend: llm_backend,
        notes,
        telemetry,
    } = match prepare_run(&setup, &loaded, args, run, edge, resume) {
        Ok(p) => p,
        Err(SetupError::Config(e)) => return super::config::report(out, &e),
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    if !run.quiet {
        for n in &notes {
            eprintln!("{n}");
        }
    }
    options.flow_approver = crate::tty::flow_approver();
    // The run's id when it can be resumed: `--memory :memory:` journals in
    // memory only, unless a shared store (`--store`) keeps the journal.
    let kept = !matches!(host.storage(), ais_vm::aam::Storage::Ephemeral)
        || run.memory.store_url().is_some();
    let resumable_id = options
        .journal
        .as_ref()
        .filter(|_| kept)
        .map(|j| j.run_id().to_string());
    let memory_flag = super::aam::memory_flag(host.storage());
    stop_on_interrupt(resumable_id.clone(), memory_flag.clone());
    // Printed lines go to this process's stdout (`TtyConsole`): the marks
    // of which reached it make them exactly-once across kill + resume.
    if let (Some(dir), Some(j)) = (
        ais_vm::journal::dir_of(&run.memory.storage()),
        &options.journal,
    ) {
        options.stdout_marks = Some(ais_vm::journal::marks_path(&dir, j.run_id()));
    }
    let report = ais_vm::run(&loaded.program, &options, llm_backend, host.clone());
    let s = &report.summary;
    // The exports are written whatever the outcome: a failed run's telemetry
    // up to the failure is what its user needs most.
    let export_failed =
        write_exports(out, run, &loaded.program, &report) | write_plans(out, run, &report.plans);
    // Completes the telemetry streamed to the memory directory; a failure
    // to keep it costs only the report.
    if let Some(k) = &telemetry {
        k.finish(&loaded.program, &report);
    }
    super::report::otlp::flush(telemetry.as_ref());
    let code = match &report.outcome {
        Ok(value) => {
            let text = match value {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Null => String::new(),
                other => serde_json::to_string_pretty(other).unwrap_or_default(),
            };
            if !text.is_empty() {
                println!("{text}");
            }
            i32::from(export_failed)
        }
        Err(ais_vm::RunError::OpFailed { code, payload, .. }) if code == ais_vm::exec::PAUSED => {
            let message = payload["message"].as_str().unwrap_or_default();
            eprintln!("paused: {message}");
            match &resumable_id {
                Some(id) => eprintln!(
                    "  = the run waits for your answer: aisc resume {id}{memory_flag} --input VALUE"
                ),
                None => eprintln!("  = this run keeps no journal, so it cannot be resumed"),
            }
            PAUSED_EXIT
        }
        Err(e) => {
            let resumable = resumable_id.as_deref().map(|id| (id, memory_flag.clone()));
            render_run_error(out, &loaded, e, resumable);
            1
        }
    };
    // Even with -q: a value built from a cut-off or filtered reply must not
    // pass unnoticed.
    if s.incomplete_replies > 0 {
        let one = s.incomplete_replies == 1;
        eprintln!(
            "warning: {} incomplete LLM {} (cut off at the token limit, or filtered) used as {}: the backend sets `accept_incomplete` (docs/backends.md)",
            s.incomplete_replies,
            if one { "reply" } else { "replies" },
            if one { "a value" } else { "values" },
        );
    }
    if !run.quiet {
        let sim = if llm.simulated { " (simulated)" } else { "" };
        // Retries are part of the cost: shown when there were any.
        let attempts = if s.llm_retries > 0 {
            format!(" ({} attempts, {} retries)", s.llm_attempts, s.llm_retries)
        } else {
            String::new()
        };
        eprintln!(
            "run: {:.1} ms makespan (critical path estimate {} ms), {} ops, {} LLM calls{attempts}{sim}, {} tool calls, {} tokens, cost ${:.6}, parallelism avg {:.2} / peak {}, scheduler {:.2} µs/op",
            s.makespan_ms,
            s.critical_path_estimate_ms,
            s.ops,
            s.llm_calls,
            s.tool_calls,
            s.input_tokens + s.output_tokens,
            s.cost_usd,
            s.avg_parallelism,
            s.peak_parallelism,
            s.sched_overhead_us_per_op,
        );
        eprintln!("{}", super::aam::run_footer(&host));
    }
    if let Some(path) = &run.report_json {
        let json = serde_json::json!({
            "ok": report.outcome.is_ok(),
            "result": report.outcome.as_ref().ok(),
            "error": report.outcome.as_ref().err().map(|e| error_json(e, &loaded)),
            "simulated": llm.simulated,
            "summary": serde_json::to_value(s).unwrap_or_default(),
        });
        if let Err(e) = write_atomic(path, format!("{json:#}\n").as_bytes()) {
            eprintln!("error: cannot write `{}`: {e}", path.display());
        }
    }
    code
}

/// Writes `--events` and `--trace`, each atomically (a file is either
/// complete or absent); reports each failure as `R0004`. True when one
/// failed.
fn write_exports(
    out: &mut Output,
    run: &RunArgs,
    program: &Program,
    report: &ais_vm::RunReport,
) -> bool {
    type Format = fn(
        &mut dyn Write,
        &Program,
        &[ais_vm::telemetry::OpEvent],
        &ais_vm::telemetry::RunSummary,
    ) -> std::io::Result<()>;
    let exports: [(&str, &Option<PathBuf>, Format); 2] = [
        ("events", &run.events, ais_vm::telemetry::write_jsonl),
        ("trace", &run.trace, ais_vm::telemetry::write_chrome_trace),
    ];
    let mut failed = false;
    for (what, path, format) in exports {
        let Some(path) = path else { continue };
        let mut bytes = Vec::new();
        let written = format(&mut bytes, program, &report.events, &report.summary)
            .and_then(|()| write_atomic(path, &bytes));
        if let Err(e) = written {
            failed = true;
            out.report(
                None,
                &Diagnostic::error(
                    "R0004",
                    format!("cannot write the run's {what} to `{}`: {e}", path.display()),
                    ais_ir::Span::DUMMY,
                )
                .with_help("check that the directory exists and is writable; the run's result and journal are unaffected"),
            );
        }
    }
    failed
}

/// Writes `--emit-plans DIR`: for each accepted plan, its program
/// (`plan-N.ais`) and its optimised IR (`plan-N.aisir`), atomically; a
/// header comment says where it came from. True when one failed.
fn write_plans(out: &mut Output, run: &RunArgs, plans: &[ais_vm::scheduler::LinkedPlan]) -> bool {
    let Some(dir) = &run.emit_plans else {
        return false;
    };
    if plans.is_empty() {
        return false;
    }
    let mut failed = false;
    let mut report = |what: String, e: std::io::Error| {
        failed = true;
        out.report(
            None,
            &Diagnostic::error(
                "R0004",
                format!("cannot write {what}: {e}"),
                ais_ir::Span::DUMMY,
            )
            .with_help("check that the directory can be created and written; the run's result is unaffected"),
        );
    };
    if let Err(e) = std::fs::create_dir_all(dir) {
        report(format!("`{}`", dir.display()), e);
        return true;
    }
    for (i, p) in plans.iter().enumerate() {
        let header = format!(
            "// Inner plan {} of this run, written by the model for op {} of {} and accepted by the checker.
",
            i + 1,
            p.op,
            p.made_by
        );
        for (ext, text) in [("ais", &p.source), ("aisir", &p.ir)] {
            let path = dir.join(format!("plan-{}.{ext}", i + 1));
            if let Err(e) = write_atomic(&path, format!("{header}{text}").as_bytes()) {
                report(format!("`{}`", path.display()), e);
            }
        }
    }
    failed
}

/// An uncaught failure as a diagnostic with the run error's own code (R0003
/// for a failed op; see `aisc explain`): with a source snippet when the
/// program was compiled from source, without one for artifacts and resumes.
/// The structured form of a run error for `--report-json`: the same fields
/// a `catch` region receives (`cause` is the dotted failure code), plus the
/// diagnostic code and the source position when there is one.
pub(crate) fn error_json(e: &ais_vm::RunError, loaded: &Loaded) -> serde_json::Value {
    let mut j = serde_json::json!({"code": e.code(), "message": e.to_string()});
    if let ais_vm::RunError::OpFailed {
        flow,
        opcode,
        span,
        code,
        message,
        payload,
        ..
    } = e
    {
        j["cause"] = code.as_str().into();
        j["message"] = message.as_str().into();
        j["flow"] = flow.as_str().into();
        j["op"] = (*opcode).into();
        j["payload"] = (**payload).clone();
        j["hint"] = ais_vm::error::hint_for(code).into();
        if !span.is_dummy() {
            let mut at = serde_json::json!({"start": span.start, "end": span.end});
            if let Some((name, source)) = &loaded.source {
                let sources = program_sources(name, source);
                if let Some(f) = sources.file_of(*span) {
                    let local = f.local(*span).start;
                    let (line, column) = ais_ir::diag::line_col(&f.text, local);
                    at["file"] = f.name.as_str().into();
                    at["line"] = line.into();
                    at["column"] = column.into();
                }
            }
            j["span"] = at;
        }
    }
    j
}

/// Ctrl-C (SIGINT) during a run ends the process, as it would without a
/// handler, but first says what became of the run: what completed is in
/// its journal, and `aisc resume` goes on from there (an LLM or tool call
/// that was in flight is in doubt, and the resume says so). Exit status
/// 130, the shell's for SIGINT.
fn stop_on_interrupt(id: Option<String>, memory: String) {
    let message = match id {
        Some(id) => format!(
            "interrupted: run {id} stopped; what it completed is journaled\n  = help: continue it with `aisc resume {id}{memory}`"
        ),
        None => "interrupted: the run stopped; it kept no journal (--memory :memory:), so it cannot be resumed".to_string(),
    };
    let Ok(mut signals) = signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT]) else {
        return;
    };
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            eprintln!("\n{message}");
            std::process::exit(130);
        }
    });
}

/// The recovery hint of a failure code for this run: where it says to
/// resume, with the run's id (and `--memory`), and for a run that kept no
/// journal (`--memory :memory:`), which cannot be resumed, without it.
fn run_hint(code: &str, resumable: Option<(&str, String)>) -> String {
    let hint = ais_vm::error::hint_for(code);
    match resumable {
        Some((id, memory)) => {
            let resume = format!("`aisc resume {id}{memory}`");
            hint.replace("`aisc resume RUN_ID`", &resume)
                .replace("`aisc resume` the run", &resume)
        }
        None if code.starts_with("budget.") => "run it again with a higher limit \
            (--token-budget/--llm-call-budget/--deadline/--cost-budget); this run kept no journal \
            (--memory :memory:), so it cannot be resumed"
            .to_string(),
        None => hint.replace(
            "and `aisc resume` the run",
            "and run it again (this run kept no journal, --memory :memory:, so it cannot be resumed)",
        ),
    }
}

fn render_run_error(
    out: &mut Output,
    loaded: &Loaded,
    e: &ais_vm::RunError,
    resumable: Option<(&str, String)>,
) {
    let d = match e {
        ais_vm::RunError::OpFailed {
            span,
            code,
            payload,
            ..
        } => {
            let label = if code.starts_with("budget.")
                || code == "WATCHDOG_LOOP"
                || ais_vm::scheduler::limits::is_fatal(code)
            {
                format!("the run stopped here: `{code}` (not catchable)")
            } else {
                format!("this `{code}` failure was not caught")
            };
            let mut d = Diagnostic::error(e.code(), format!("run failed: {e}"), *span)
                .with_label(label)
                .with_help(run_hint(code, resumable));
            if !payload.is_null() {
                d = d.with_note(format!("payload: {payload}"));
            }
            d
        }
        other => Diagnostic::error(
            other.code(),
            format!("run failed: {other}"),
            ais_ir::Span::DUMMY,
        ),
    };
    match &loaded.source {
        Some((name, source)) if !d.primary.span.is_dummy() => {
            out.diagnostics_map(&program_sources(name, source), &[d]);
        }
        _ => out.report(None, &d),
    }
}

/// The files of the program compiled from the entry file `name`: the entry
/// alone unless it imports others, which are then read again (only when a
/// run error must be shown, so a run keeps no copy of them).
fn program_sources(name: &str, source: &str) -> ais_ir::SourceMap {
    let parsed = ais_compiler::syntax::parse(source);
    if parsed.file.imports.is_empty() {
        return ais_ir::SourceMap::single(name, source);
    }
    let path = Path::new(name);
    ais_compiler::program::parse_program(name, Some(path), source, &ais_compiler::program::FsLoader)
        .sources
}

/// The policy on top of the tool catalogue's declarations under `aam`
/// (`ais_vm::catalogue`): MCP servers and remote agents untrusted unless
/// their entry or `[policy] trusted` says otherwise.
pub(crate) fn with_remote_agents(
    policy: ais_ir::ifc::FlowPolicy,
    aam: &ais_vm::aam::config::AamConfig,
) -> ais_ir::ifc::FlowPolicy {
    ais_vm::catalogue::attach(policy, aam.declarations())
}

/// The files among `files` that another of them imports and that mark no
/// `@entry` flow: libraries, not served as programs of their own (they are
/// served as part of the programs that import them).
pub(crate) fn imported_libraries(files: &[PathBuf]) -> std::collections::HashSet<PathBuf> {
    use ais_compiler::syntax::ast::Member;
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut imported = std::collections::HashSet::new();
    let mut has_entry = std::collections::HashSet::new();
    for path in files {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let file = ais_compiler::syntax::parse(&text).file;
        let dir = path.parent().unwrap_or(Path::new(""));
        for i in &file.imports {
            imported.insert(canonical(&dir.join(&i.path)));
        }
        let entry = file.agents.iter().any(|a| {
            a.members
                .iter()
                .any(|m| matches!(m, Member::Flow(f) if f.is_entry()))
        });
        if entry {
            has_entry.insert(canonical(path));
        }
    }
    files
        .iter()
        .filter(|p| {
            let c = canonical(p);
            imported.contains(&c) && !has_entry.contains(&c)
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod imported_libraries_tests {
    #[test]
    fn a_served_file_imported_by_another_without_an_entry_is_a_library() {
        let dir = tempfile::tempdir().expect("temp dir");
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).expect("write");
            p
        };
        let main = write(
            "main.ais",
            "import \"lib.ais\"\nimport \"tool.ais\"\nagent M {\n    @entry flow main() -> str {\n        return L.f()\n    }\n}\n",
        );
        let lib = write(
            "lib.ais",
            "agent L {\n    flow f() -> str {\n        return \"x\"\n    }\n}\n",
        );
        // Imported, but with an entry of its own: still served.
        let tool = write(
            "tool.ais",
            "agent T {\n    @entry flow main() -> str {\n        return \"t\"\n    }\n}\n",
        );
        let libs = super::imported_libraries(&[main.clone(), lib.clone(), tool.clone()]);
        assert_eq!(libs.into_iter().collect::<Vec<_>>(), vec![lib]);
    }
}

#[cfg(test)]
mod positional_tests {
    use super::positional_params;
    use serde_json::json;

    #[test]
    fn required_first_then_the_servers_order_then_by_name() {
        let schema: serde_json::Value = serde_json::from_str(
            r#"{"properties": {"z_opt": {}, "m_req": {}, "a_opt": {}, "b_extra": {}}, "required": ["m_req"]}"#,
        )
        .unwrap_or_default();
        // The server wrote z_opt before a_opt; b_extra is not in the order.
        let order = json!(["z_opt", "m_req", "a_opt", "gone"]);
        assert_eq!(
            positional_params(&schema, &order),
            ["m_req", "z_opt", "a_opt", "b_extra"]
        );
        // Without an order the rest go by name.
        assert_eq!(
            positional_params(&schema, &serde_json::Value::Null),
            ["m_req", "a_opt", "b_extra", "z_opt"]
        );
    }
}
