//! The options of `aisc run` and its entry-flow arguments (`--arg
//! NAME=VALUE`), parsed and checked against the program before a run is
//! journaled.

use super::output::Output;
use ais_ir::bytecode::Program;
use ais_ir::Diagnostic;
use std::path::PathBuf;

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
    /// Never speculate branch arms, whatever the configuration's
    /// `speculate` budget (docs/runtime.md, "Speculation").
    #[arg(long)]
    pub no_speculate: bool,
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
    pub budget: super::journal::BudgetArgs,
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
    /// Queue the run in the `--store` for a worker (`aisc worker`) and
    /// print its id, instead of running it here.
    #[arg(long, alias = "enqueue")]
    pub detach: bool,
    /// Make the run on thread ID (created on first use): its
    /// `thread_history()` and `thread_state()` see the thread's earlier
    /// runs and state (docs/language.md, "Threads").
    #[arg(long, value_name = "ID", conflicts_with_all = ["detach", "schedule"])]
    pub thread: Option<String>,
    /// Store a schedule in the `--store` instead of running: the run is
    /// queued for the workers at every tick of this cron expression (five
    /// fields, or six with seconds first); prints the schedule's id.
    #[arg(long, value_name = "CRON", conflicts_with = "detach")]
    pub schedule: Option<String>,
    /// The time zone `--schedule` ticks in (an IANA name).
    #[arg(
        long,
        value_name = "ZONE",
        default_value = "UTC",
        requires = "schedule"
    )]
    pub tz: String,

    #[command(flatten)]
    pub queue: QueueArgs,
    #[command(flatten)]
    pub webhooks: super::webhooks::WebhookArgs,
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

pub fn render_arg_error(out: &mut Output, e: &ArgError) {
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

/// Where a queued run stands in the queue (`aisc run --detach`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct QueueArgs {
    /// With --detach: workers take queued runs of higher priority first
    /// (then the oldest); default 0, negative runs after the default.
    #[arg(
        long,
        default_value_t = 0,
        allow_negative_numbers = true,
        requires = "detach"
    )]
    pub priority: i32,
    /// With --detach: a key (a tenant, a user) shared by runs of which at
    /// most --key-limit run at once across the fleet.
    #[arg(long, value_name = "KEY", requires = "detach")]
    pub concurrency_key: Option<String>,
    /// At most this many runs of --concurrency-key at once.
    #[arg(long, value_name = "N", requires = "concurrency_key",
          value_parser = clap::value_parser!(i32).range(1..))]
    pub key_limit: Option<i32>,
    /// With --detach: a run that fails is queued again up to N more times
    /// (its journal kept: completed calls are replayed, not repeated);
    /// after the last attempt it is dead (`aisc runs --dead`).
    #[arg(long, value_name = "N", requires = "detach",
          value_parser = clap::value_parser!(i32).range(0..=100))]
    pub retries: Option<i32>,
    /// Wait before the first retry, doubled for each next one.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 1.0,
        requires = "retries"
    )]
    pub retry_backoff: f64,
    /// Retry only failures of these error classes (codes or their dotted
    /// prefixes, comma-separated: `llm,tool.timeout`); default: any failure
    /// but a cancel.
    #[arg(long, value_name = "CLASSES", requires = "retries")]
    pub retry_on: Option<String>,
}

impl QueueArgs {
    pub fn options(&self) -> ais_vm::store::priority::QueueOptions {
        ais_vm::store::priority::QueueOptions {
            priority: self.priority,
            key: self.concurrency_key.clone(),
            key_limit: self.key_limit,
            retry: self.retries.map(|n| ais_vm::store::retry::RetryPolicy {
                attempts: n + 1,
                backoff_ms: (self.retry_backoff.clamp(0.0, 3600.0) * 1000.0) as i64,
                on: self
                    .retry_on
                    .as_deref()
                    .unwrap_or_default()
                    .split(',')
                    .map(|c| c.trim().to_string())
                    .filter(|c| !c.is_empty())
                    .collect(),
            }),
        }
    }
}
