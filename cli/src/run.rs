//! `aisc run`: a loaded program onto the VM (its setup, journal,
//! telemetry, exports and errors); `aisc resume` and the servers run
//! through the same [`prepare_run`].

use super::args::{check_args, parse_args, render_arg_error, RunArgs, TelemetryArgs};
use super::load::{load_in, with_remote_agents, write_atomic, Loaded};
use super::output::Output;
use super::{BackendArgs, OptArgs};
use ais_ir::bytecode::Program;
use ais_ir::Diagnostic;
use ais_vm::{Policy, RunOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    if run.detach || run.schedule.is_some() {
        // Its `[webhooks]` (allowed addresses) check the run's webhooks.
        if let Ok((settings, _)) = super::config::load_all(backend) {
            ais_vm::webhook::configure(&settings.config.webhooks);
        }
    }
    if run.detach {
        return super::queue::detach(file, &loaded, &args, run);
    }
    if let Some(cron) = &run.schedule {
        return super::queue::schedule(file, &loaded, &args, run, cron);
    }
    run_loaded(out, loaded, args, run, backend, None)
}

/// The configuration the runs of one process share: the settings (flags
/// over environment over file), the AAM's settings and the LLM backend
/// built from them. `aisc run` and `aisc resume` build one per run; `aisc
/// serve` and `aisc mcp` build one at start and share it between runs.
pub struct RunSetup {
    pub settings: ais_vm::config::Settings,
    pub aam: ais_vm::aam::config::AamConfig,
    pub llm: ais_vm::config::RunBackend,
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
        ais_vm::webhook::configure(&settings.config.webhooks);
        // A `[[webhooks]]` entry that would be refused for every run stops
        // the process at start.
        ais_vm::webhook::configured_hooks()
            .map_err(|e| SetupError::Other(format!("[[webhooks]] in the configuration: {e}")))?;
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
    /// Nobody is given the run's id before its end (`aisc serve`'s
    /// `?wait=true`): its journal row is not waited for on disk.
    pub unshown: bool,
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

/// After a run: keeps the latencies its hedged backends observed for the
/// next process (`llm::resilience::history`); a failure is a warning.
pub fn keep_latency_history() {
    if let Some(w) = ais_vm::llm::resilience::save_history() {
        eprintln!("warning: {w}");
    }
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
    // Checked before anything is journaled: a refused URL starts no run.
    let hooks = run
        .webhooks
        .checked()
        .map_err(|e| SetupError::Other(e.to_string()))?;
    let budget = super::journal::budget(&run.budget, settings).map_err(SetupError::Other)?;
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
        speculate: settings.config.speculate.filter(|_| !run.no_speculate),
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
    // Hedges start from the latencies earlier processes observed.
    if let Some(dir) = ais_vm::journal::dir_of(&run.memory.storage()) {
        if let Some(w) = ais_vm::llm::resilience::attach_history(&dir) {
            notes.push(format!("warning: {w}"));
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
            super::journal::begin(
                edge.unshown,
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
    // A run made on a thread finds it through its journal's store.
    if let Some(j) = &options.journal {
        host.bind_threads(j.store().clone());
    }
    if let (false, Some(j)) = (hooks.is_empty(), &options.journal) {
        // Stored before the run starts, so its end finds them.
        j.store()
            .add_webhooks(j.run_id(), &hooks)
            .map_err(|e| SetupError::Other(format!("cannot store the webhooks: {e}")))?;
    }
    let telemetry = super::report::otlp::with_trace(
        keep_telemetry(&run.memory, &mut options, !resumed),
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
    fresh: bool,
) -> Option<Arc<super::report::keep::Keeper>> {
    use super::report::keep::{Both, Keeper};
    let dir = ais_vm::journal::dir_of(&memory.storage())?;
    let id = options.journal.as_ref()?.run_id().to_string();
    let keeper = match Keeper::start(&dir, &id, fresh) {
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
        unshown: false,
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
    if let Some(t) = &run.thread {
        if let Err(e) = link_thread(t, kept, options.journal.as_deref()) {
            eprintln!("error: {e}");
            return 2;
        }
    }
    let memory_flag = super::aam::memory_flag(host.storage());
    stop_on_interrupt(resumable_id.clone(), memory_flag.clone());
    if let (Some(t), Some(j)) = (&run.thread, &options.journal) {
        if let Err(e) = wait_for_turn(t, j, run.quiet) {
            eprintln!("error: cannot tell whether thread {t}'s earlier runs ended: {e}");
            return 2;
        }
    }
    // Printed lines go to this process's stdout (`TtyConsole`): the marks
    // of which reached it make them exactly-once across kill + resume.
    if let (Some(dir), Some(j)) = (
        ais_vm::journal::dir_of(&run.memory.storage()),
        &options.journal,
    ) {
        options.stdout_marks = Some(ais_vm::journal::marks_path(&dir, j.run_id()));
    }
    let report = ais_vm::run(&loaded.program, &options, llm_backend, host.clone());
    keep_latency_history();
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
    if let Some(j) = &options.journal {
        super::webhooks::flush_run(j.store(), j.run_id(), run.quiet);
    }
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
        if let Some(sp) = &s.speculation {
            eprintln!(
                "speculation: {} calls started before their branch was decided ({} of them tool calls), {} adopted, {} discarded; {:.1} ms saved; extra cost ${:.6} (budget {} calls, ${:.4}; in the cost above)",
                sp.speculated,
                sp.tool_speculated,
                sp.adopted,
                sp.discarded,
                sp.saved_ms,
                sp.extra_cost_usd,
                sp.max_extra_calls,
                sp.max_extra_cost_usd,
            );
        }
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

/// How often `aisc run --thread` asks whether its turn came.
const TURN_LOOK: std::time::Duration = std::time::Duration::from_millis(100);

/// `aisc run --thread ID`: waits until no run of the thread linked before
/// this one (by a server, a worker, another `aisc run`) is queued or
/// running, so the run sees every earlier run's answer and state writes.
/// Ctrl-C stops the wait as it stops a run.
fn wait_for_turn(
    thread: &str,
    j: &ais_vm::journal::Journal,
    quiet: bool,
) -> Result<(), ais_vm::store::JournalError> {
    let mut said = false;
    // A store error ends the wait (the store retries what it can):
    // starting out of turn would let two runs write the thread at once.
    while let Some(first) = j.store().thread_waits_for(j.run_id())? {
        if !said && !quiet {
            eprintln!("waiting for run {first} of thread {thread} to end");
            said = true;
        }
        std::thread::sleep(TURN_LOOK);
    }
    Ok(())
}

/// `aisc run --thread ID`: records the run as the thread's next one
/// (creating the thread on first use) before it starts, so its
/// `thread_*` tools find it.
fn link_thread(
    thread: &str,
    kept: bool,
    journal: Option<&ais_vm::journal::Journal>,
) -> Result<(), String> {
    if !ais_vm::store::thread::valid_id(thread) {
        return Err(format!(
            "`{thread}` is not a thread id (1 to 128 characters of A-Z a-z 0-9 . _ : -)"
        ));
    }
    let Some(j) = journal.filter(|_| kept) else {
        return Err(
            "--thread keeps the thread in the run journal, and `--memory :memory:` keeps none"
                .into(),
        );
    };
    j.store()
        .link_thread_run(thread, j.run_id(), true)
        .map(|_| ())
        .map_err(|e| e.to_string())
}
