//! `aisc build -o`, `aisc run` and `aisc inspect`: from source (or an
//! artifact) to a validated program, then onto the VM.

use super::output::Output;
use super::{BackendArgs, OptArgs};
use crate::driver;
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
    let name = path.display().to_string();
    if is_artifact(path) {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("error: cannot read `{name}`: {e}");
                return None;
            }
        };
        return match bytecode::decode(&bytes) {
            Ok(program) => Some(Loaded {
                program,
                source: None,
            }),
            Err(e) => {
                eprintln!("error: `{name}` is not a valid artifact: {e}");
                None
            }
        };
    }
    let source = out.read_source(path)?;
    let mut compiled = match driver::compile_source(&source) {
        Ok(c) => c,
        Err(diags) => {
            out.diagnostics(&name, &source, &diags);
            return None;
        }
    };
    out.diagnostics(&name, &source, &compiled.diagnostics);
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

/// Writes `bytes` to `path` atomically: a failed write never leaves a
/// partial artifact behind.
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
            out.summary(&format!(
                "wrote {} ({} bytes)",
                output.display(),
                bytes.len()
            ));
            0
        }
        Err(e) => {
            eprintln!("error: cannot write `{}`: {e}", output.display());
            1
        }
    }
}

pub fn inspect(path: &Path) -> i32 {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: cannot read `{}`: {e}", path.display());
            return 1;
        }
    };
    match bytecode::decode(&bytes) {
        Ok(p) => {
            print!("{}", bytecode::inspect(&p));
            0
        }
        Err(e) => {
            eprintln!("error: `{}` is not a valid artifact: {e}", path.display());
            1
        }
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
    /// Do not print the run summary.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub memory: super::aam::MemoryArgs,
    /// Allow tools marked destructive without asking.
    #[arg(long)]
    pub yes: bool,
    #[command(flatten)]
    pub budget: super::runs::BudgetArgs,
}

pub fn run(
    out: &mut Output,
    file: &Path,
    run: &RunArgs,
    opt: &OptArgs,
    backend: &BackendArgs,
) -> i32 {
    let mut args = Vec::new();
    for a in &run.args {
        match a.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => args.push((
                k.trim().to_string(),
                serde_json::Value::String(v.to_string()),
            )),
            _ => {
                eprintln!("error: --arg expects NAME=VALUE, got `{a}`");
                return 2;
            }
        }
    }
    let Some(loaded) = load(out, file, opt) else {
        return 1;
    };
    run_loaded(out, loaded, args, run, backend, None)
}

/// Runs a loaded program on the AAM host with a run journal: a new run, or
/// (`resume`) an earlier run whose completed ops are replayed.
pub fn run_loaded(
    out: &mut Output,
    loaded: Loaded,
    args: Vec<(String, serde_json::Value)>,
    run: &RunArgs,
    backend: &BackendArgs,
    resume: Option<Arc<ais_vm::journal::Journal>>,
) -> i32 {
    let settings = match backend.settings() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let llm = match settings.build_run() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    if let Some(n) = &llm.notice {
        eprintln!("{n}");
    }
    let journal_args = args.clone();
    let budget = match super::runs::budget(&run.budget, &settings) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let mut options = RunOptions {
        entry: run.entry.clone(),
        args,
        workers: run.workers,
        policy: run.policy.parse::<Policy>().unwrap_or_default(),
        concurrency: run.concurrency,
        events_path: run.events.clone(),
        trace_path: run.trace.clone(),
        progress: !run.quiet,
        budget,
        watchdog: Some(run.budget.watchdog),
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
        ..RunOptions::default()
    };
    let host = match super::aam::open_host(&run.memory, backend.config.as_deref(), run.yes) {
        Ok(h) => Arc::new(h),
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    host.load_program(&loaded.program);
    let name = loaded
        .source
        .as_ref()
        .map_or_else(|| "(artifact)".to_string(), |(n, _)| n.clone());
    options.journal = match resume {
        Some(j) => Some(j),
        None => match super::runs::begin(
            &run.memory,
            host.run_id(),
            &name,
            &loaded,
            run.entry.as_deref(),
            &journal_args,
        ) {
            Ok(j) => Some(j),
            Err(e) => {
                eprintln!("error: {e}");
                return 2;
            }
        },
    };
    let report = ais_vm::run(&loaded.program, &options, llm.backend.clone(), host.clone());
    let s = &report.summary;
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
            0
        }
        Err(e) => {
            render_run_error(out, &loaded, e);
            1
        }
    };
    if !run.quiet {
        let sim = if llm.simulated { " (simulated)" } else { "" };
        eprintln!(
            "run: {:.1} ms makespan (critical path estimate {} ms), {} ops, {} LLM calls{sim}, {} tool calls, {} tokens, parallelism avg {:.2} / peak {}, scheduler {:.2} µs/op",
            s.makespan_ms,
            s.critical_path_estimate_ms,
            s.ops,
            s.llm_calls,
            s.tool_calls,
            s.input_tokens + s.output_tokens,
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
            "error": report.outcome.as_ref().err().map(|e| e.to_string()),
            "simulated": llm.simulated,
            "summary": serde_json::to_value(s).unwrap_or_default(),
        });
        if let Err(e) = write_atomic(path, format!("{json:#}\n").as_bytes()) {
            eprintln!("error: cannot write `{}`: {e}", path.display());
        }
    }
    code
}

fn render_run_error(out: &mut Output, loaded: &Loaded, e: &ais_vm::RunError) {
    match (e, &loaded.source) {
        (ais_vm::RunError::OpFailed { span, code, .. }, Some((name, source)))
            if !span.is_dummy() =>
        {
            let d = Diagnostic::error("R0001", format!("run failed: {e}"), *span)
                .with_label(
                    if code.starts_with("budget.")
                        || code == "WATCHDOG_LOOP"
                        || ais_vm::scheduler::limits::is_fatal(code)
                    {
                        format!("the run stopped here: `{code}` (not catchable)")
                    } else {
                        format!("this `{code}` failure was not caught")
                    },
                )
                .with_help(ais_vm::error::hint_for(code));
            out.diagnostics(name, source, &[d]);
        }
        (ais_vm::RunError::OpFailed { code, payload, .. }, _) => {
            eprintln!("error: run failed: {e}");
            if !payload.is_null() {
                eprintln!("  payload: {payload}");
            }
            eprintln!("  hint: {}", ais_vm::error::hint_for(code));
        }
        _ => eprintln!("error: run failed: {e}"),
    }
}
