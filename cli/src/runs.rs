//! `aisc runs` and `aisc resume RUN_ID`: the run journal
//! (`ais_vm::journal`), budgets, and resuming killed or failed runs.

use super::aam::MemoryArgs;
use super::args::RunArgs;
use super::journal::{idempotent_tools, BudgetArgs};
use super::load::Loaded;
use super::output::Output;
use super::steps::{steps_line, steps_summary_json};
use super::BackendArgs;
use ais_vm::journal::{self, Journal, RunInfo};
use std::sync::Arc;

fn time(ms: i64) -> String {
    let t = ais_stdlib::time::rfc3339(u64::try_from(ms).unwrap_or(0));
    t.chars().take(19).collect::<String>().replace('T', " ")
}

fn info_json(r: &RunInfo) -> serde_json::Value {
    serde_json::json!({
        "id": r.id, "status": r.status.name(), "started_ms": r.started_ms,
        "ended_ms": r.ended_ms, "program": r.program, "entry": r.entry,
        "journaled_ops": r.entries, "in_doubt": r.in_doubt, "resumes": r.resumes,
        "error": r.error,
    })
}

/// `aisc runs`: every journaled run with its status; on a shared store,
/// queued and running runs' priority and concurrency key, and each key's
/// load.
pub fn runs(mem: &MemoryArgs, json: bool) -> i32 {
    let (list, view, place) = match mem.store_url() {
        Some(url) => {
            let store = ais_vm::store::open(&url);
            (
                store
                    .as_ref()
                    .map_err(Clone::clone)
                    .and_then(|s| s.list_runs()),
                store.and_then(|s| s.queue_view()).unwrap_or_default(),
                ais_vm::store::postgres::redact(&url),
            )
        }
        None => {
            let Some(dir) = journal::dir_of(&mem.storage()) else {
                eprintln!("error: `--memory :memory:` keeps no run journal");
                return 2;
            };
            (
                journal::list_runs(&dir),
                Default::default(),
                dir.display().to_string(),
            )
        }
    };
    let list = match list {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    if json {
        for r in &list {
            let mut j = info_json(r);
            if let Some((priority, key)) = view.runs.get(&r.id) {
                j["priority"] = (*priority).into();
                j["concurrency_key"] = key.clone().into();
            }
            println!("{j}");
        }
        return 0;
    }
    if list.is_empty() {
        println!("no runs journaled in {place}");
        return 0;
    }
    println!(
        "{:<22} {:<12} {:<19} {:>6} {:>8}  program",
        "run", "status", "started", "ops", "resumes"
    );
    for r in &list {
        let doubt = if r.in_doubt > 0 {
            format!(" ({} in doubt)", r.in_doubt)
        } else {
            String::new()
        };
        let queue = match view.runs.get(&r.id) {
            Some((p, Some(k))) => format!(" [priority {p}, key {k}]"),
            Some((p, None)) => format!(" [priority {p}]"),
            None => String::new(),
        };
        println!(
            "{:<22} {:<12} {:<19} {:>6} {:>8}  {}{doubt}{queue}{}",
            r.id,
            r.status.name(),
            time(r.started_ms),
            r.entries,
            r.resumes,
            r.program,
            r.error
                .as_deref()
                .map(|e| format!("\n{:>24}{e}", ""))
                .unwrap_or_default(),
        );
    }
    for (key, k) in &view.keys {
        let limit = k
            .limit
            .map_or_else(|| "no limit".to_string(), |l| format!("limit {l}"));
        println!(
            "key {key}: {} running ({limit}), {} queued",
            k.running, k.queued
        );
    }
    0
}

/// Options of `aisc resume`.
#[derive(clap::Args, Debug, Clone)]
pub struct ResumeArgs {
    /// The answer to the `pause` a paused run waits at (JSON, else text):
    /// the `pause` op's value when the run goes on.
    #[arg(long, value_name = "VALUE")]
    pub input: Option<String>,
    /// What to do with the side effects an interruption left in doubt
    /// (started, never recorded as completed): `retry` calls them again
    /// (with the same idempotency key), `skip` takes them as done with a
    /// `null` result, `fail` fails their ops (`journal.in_doubt_failed`).
    /// The decision is journaled.
    #[arg(long = "in-doubt", value_name = "retry|skip|fail", value_parser = ["retry", "skip", "fail"])]
    pub in_doubt: Option<String>,
    /// With `--in-doubt`: only the op whose journal key starts with this
    /// (the `idempotency_key` the `journal.in_doubt` error names).
    #[arg(long = "op", value_name = "KEY", requires = "in_doubt")]
    pub op: Option<String>,
    /// No run summary, progress or simulator note on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Allow tools marked destructive without asking.
    #[arg(long)]
    pub yes: bool,
    /// Scheduler worker threads (default: one per core).
    #[arg(long)]
    pub workers: Option<usize>,
    #[command(flatten)]
    pub budget: BudgetArgs,
    #[command(flatten)]
    pub memory: MemoryArgs,
}

/// `aisc resume RUN_ID`: the same program and arguments, completed ops
/// replayed from the journal.
pub fn resume(out: &mut Output, run_id: &str, r: &ResumeArgs, backend: &BackendArgs) -> i32 {
    let store = match journal_store(&r.memory) {
        Ok(s) => s,
        Err(code) => return code,
    };
    match resume_in(out, store, run_id, r, backend) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

/// The store runs are journaled in (`--store`, else the memory
/// directory's `runs.db`); the exit code after saying why not.
pub(crate) fn journal_store(mem: &MemoryArgs) -> Result<Arc<dyn ais_vm::store::Store>, i32> {
    match mem.store_url() {
        Some(url) => ais_vm::store::open(&url).map_err(|e| {
            eprintln!("error: {e}");
            1
        }),
        None => {
            let Some(dir) = journal::dir_of(&mem.storage()) else {
                eprintln!("error: `--memory :memory:` keeps no run journal");
                return Err(2);
            };
            if !dir.join(journal::DB_FILE).exists() {
                eprintln!(
                    "error: journal.missing: no run journal in `{}`",
                    dir.display()
                );
                return Err(1);
            }
            ais_vm::store::open(&dir.display().to_string()).map_err(|e| {
                eprintln!("error: {e}");
                1
            })
        }
    }
}

fn resume_in(
    out: &mut Output,
    store: Arc<dyn ais_vm::store::Store>,
    run_id: &str,
    r: &ResumeArgs,
    backend: &BackendArgs,
) -> Result<i32, String> {
    let stored = journal::load_run_in(&*store, run_id).map_err(|e| e.to_string())?;
    let program = ais_ir::bytecode::decode(&stored.artifact).map_err(|e| {
        format!(
            "the program stored for run `{}` is not a valid artifact: {e}",
            stored.info.id
        )
    })?;
    // A paused run needs its answer, and only a paused run takes one:
    // checked before the journal is reopened (which marks the run running).
    let paused = stored.info.status == journal::Status::Paused;
    let input = match (&r.input, paused) {
        (None, true) => {
            return Err(format!(
            "run `{}` is paused, waiting for an answer to: {}\nhelp: aisc resume {} --input VALUE",
            stored.info.id,
            stored
                .info
                .error
                .as_deref()
                .unwrap_or("")
                .trim_start_matches("waiting for input: "),
            stored.info.id
        ))
        }
        (Some(_), false) => {
            return Err(format!(
                "run `{}` is {}, not paused: it waits for no input",
                stored.info.id,
                stored.info.status.name()
            ))
        }
        (Some(text), true) => Some(
            serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.clone())),
        ),
        (None, false) => None,
    };
    let mut j = Journal::resume_in(store, &stored.info.id).map_err(|e| {
        if e.code == "journal.completed" {
            // Its result is on disk even if the process died before printing it.
            format!(
                "{e}\nhelp: `aisc runs show {}` prints its result",
                stored.info.id
            )
        } else {
            e.to_string()
        }
    })?;
    j.set_idempotent_tools(idempotent_tools());
    if let Some(value) = &input {
        j.answer(value).map_err(|e| e.to_string())?;
    }
    if let Some(d) = r.in_doubt.as_deref().and_then(journal::Resolution::parse) {
        let keys = j.resolve(d, r.op.as_deref()).map_err(|e| e.to_string())?;
        if !r.quiet {
            eprintln!("in doubt: {} op(s) resolved as `{}`", keys.len(), d.name());
        }
    }
    if !r.quiet {
        eprintln!(
            "resuming run {} ({}, {} ops journaled)",
            stored.info.id,
            stored.info.status.name(),
            stored.info.entries
        );
    }
    let loaded = Loaded {
        program,
        source: None,
    };
    let run = RunArgs {
        args: Vec::new(),
        entry: stored.info.entry.clone(),
        workers: r.workers,
        policy: "fifo".into(),
        concurrency: None,
        no_speculate: false,
        events: None,
        trace: None,
        report_json: None,
        emit_plans: None,
        stream: false,
        quiet: r.quiet,
        memory: r.memory.clone(),
        yes: r.yes,
        budget: r.budget.clone(),
        telemetry: Default::default(),
        detach: false,
        thread: None,
        schedule: None,
        tz: "UTC".into(),

        queue: Default::default(),
        webhooks: Default::default(),
    };
    Ok(super::run::run_loaded(
        out,
        loaded,
        stored.args,
        &run,
        backend,
        Some(Arc::new(j)),
    ))
}

/// `aisc runs show RUN_ID`: a journaled run's status, arguments, result or
/// error and a summary of its steps — also for a run killed after its
/// "completed" write but before it printed its result.
pub fn show(mem: &MemoryArgs, run_id: &str, json: bool) -> i32 {
    let record = match mem.store_url() {
        Some(url) => ais_vm::store::open(&url).and_then(|s| journal::load_record_in(&*s, run_id)),
        None => {
            let Some(dir) = journal::dir_of(&mem.storage()) else {
                eprintln!("error: `--memory :memory:` keeps no run journal");
                return 2;
            };
            journal::load_record(&dir, run_id)
        }
    };
    let r = match record {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            if e.code == "journal.no_run" {
                eprintln!("help: `aisc runs` lists the journaled runs");
            }
            return 1;
        }
    };
    // The run's webhook deliveries, with their attempts.
    let deliveries = match mem.store_url() {
        Some(url) => ais_vm::store::open(&url),
        None => journal::dir_of(&mem.storage()).map_or_else(
            || {
                Err(journal::JournalError {
                    code: "journal.none",
                    message: String::new(),
                })
            },
            |d| ais_vm::store::open(&d.display().to_string()),
        ),
    }
    .and_then(|s| s.deliveries(run_id))
    .unwrap_or_default();
    if json {
        let mut j = info_json(&r.info);
        j["webhooks"] = super::webhooks::deliveries_json(&deliveries);
        j["args"] = r
            .args
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<serde_json::Map<_, _>>()
            .into();
        j["result"] = r.result.clone().unwrap_or_default();
        j["summary"] = steps_summary_json(&r.steps);
        println!("{j:#}");
        return 0;
    }
    let i = &r.info;
    println!("run      {}", i.id);
    println!("status   {}", i.status.name());
    println!(
        "program  {}{}",
        i.program,
        i.entry
            .as_deref()
            .map(|e| format!(" (entry {e})"))
            .unwrap_or_default()
    );
    let args: Vec<String> = r.args.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if !args.is_empty() {
        println!("args     {}", args.join(" "));
    }
    println!(
        "time     {}{}",
        time(i.started_ms),
        i.ended_ms
            .map(|e| format!(" – {}", time(e)))
            .unwrap_or_default()
    );
    println!(
        "steps    {}; {} in doubt; {} resume{}",
        steps_line(&r.steps),
        i.in_doubt,
        i.resumes,
        if i.resumes == 1 { "" } else { "s" }
    );
    if let Some(e) = &i.error {
        println!("error    {e}");
    }
    if let Some(v) = &r.result {
        println!("result:");
        match v {
            serde_json::Value::String(s) => println!("{s}"),
            serde_json::Value::Null => {}
            other => println!(
                "{}",
                serde_json::to_string_pretty(other).unwrap_or_default()
            ),
        }
    }
    super::webhooks::print_deliveries(&deliveries);
    0
}
