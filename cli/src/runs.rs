//! `aisc runs` and `aisc resume RUN_ID`: the run journal
//! (`ais_vm::journal`), budgets, and resuming killed or failed runs.

use super::aam::MemoryArgs;
use super::output::Output;
use super::run::{Loaded, RunArgs};
use super::BackendArgs;
use ais_vm::journal::{self, Budget, Journal, RunInfo};
use std::sync::Arc;

/// Run limits beyond `--token-budget` (shared by `run` and `resume`).
#[derive(clap::Args, Debug, Clone)]
pub struct BudgetArgs {
    /// Stop the run after this many LLM calls (counting earlier attempts).
    #[arg(long, value_name = "N")]
    pub llm_call_budget: Option<u64>,
    /// Stop the run after this many seconds of wall-clock time (this attempt).
    #[arg(long, value_name = "SECONDS")]
    pub deadline: Option<f64>,
    /// Stop the run once its LLM calls cost this many USD (priced by the
    /// backend's `prices` in the config; this attempt).
    #[arg(long, value_name = "USD")]
    pub cost_budget: Option<f64>,
    /// Stop with WATCHDOG_LOOP when an LLM or tool call in a loop repeats
    /// with the same inputs this many times (0: off).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub watchdog: u32,
    /// Stop with LIMIT_FRAMES when more frames (calls, branches, loop
    /// iterations) are alive at once (default: `[limits] max_live_frames`
    /// in the config, else 200000).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_frames: Option<u64>,
    /// Per-agent token limit `AGENT=N` (`*=N` for every agent; repeatable).
    #[arg(long, value_name = "AGENT=N")]
    pub agent_token_budget: Vec<String>,
    /// Per-agent LLM call limit `AGENT=N` (`*=N` for every agent; repeatable).
    #[arg(long, value_name = "AGENT=N")]
    pub agent_llm_call_budget: Vec<String>,
}

fn agent_limits(b: &BudgetArgs) -> Result<Vec<journal::AgentLimit>, String> {
    let mut out: Vec<journal::AgentLimit> = Vec::new();
    for (list, tokens) in [
        (&b.agent_token_budget, true),
        (&b.agent_llm_call_budget, false),
    ] {
        for item in list {
            let (agent, n) = item
                .split_once('=')
                .and_then(|(a, n)| Some((a.trim(), n.trim().parse::<u64>().ok()?)))
                .filter(|(a, _)| !a.is_empty())
                .ok_or_else(|| format!("expected AGENT=N (N a whole number), got `{item}`"))?;
            let i = match out.iter().position(|l| l.agent == agent) {
                Some(i) => i,
                None => {
                    out.push(journal::AgentLimit {
                        agent: agent.to_string(),
                        ..journal::AgentLimit::default()
                    });
                    out.len() - 1
                }
            };
            if tokens {
                out[i].tokens = Some(n);
            } else {
                out[i].llm_calls = Some(n);
            }
        }
    }
    Ok(out)
}

/// Tools that are safe to run again when an earlier attempt's call is in doubt.
pub(crate) const IDEMPOTENT_TOOLS: &[&str] = &[
    "echo",
    "read_file",
    "json_query",
    "calculator",
    "now",
    "memory_search",
    "goals_list",
    "goals_next",
];

/// The budget of a run from the flags and the selected backend's prices.
pub fn budget(b: &BudgetArgs, settings: &ais_vm::config::Settings) -> Result<Budget, String> {
    Ok(Budget {
        tokens: settings.token_budget,
        llm_calls: b.llm_call_budget,
        deadline_ms: b.deadline.map(|s| (s.max(0.0) * 1000.0) as u64),
        cost_usd: b.cost_budget,
        prices: settings
            .selected()
            .prices
            .as_ref()
            .map(|p| vec![("*".to_string(), p.input_per_mtok, p.output_per_mtok)])
            .unwrap_or_default(),
        agents: agent_limits(b)?,
    })
}

/// Starts the journal of a new run (in memory for `--memory :memory:`).
pub fn begin(
    mem: &MemoryArgs,
    run_id: &str,
    name: &str,
    loaded: &Loaded,
    entry: Option<&str>,
    args: &[(String, serde_json::Value)],
) -> Result<Arc<Journal>, String> {
    let bytes = ais_ir::bytecode::encode(&loaded.program)
        .map_err(|e| format!("cannot encode the program for the run journal: {e}"))?;
    let mut j = match mem.store_url() {
        Some(url) => {
            let store = MemoryArgs::shared_store(&url).map_err(|e| e.to_string())?;
            Journal::begin_in(store, run_id, name, &bytes, entry, args)
        }
        None => {
            let dir = journal::dir_of(&mem.storage());
            Journal::begin(dir.as_deref(), run_id, name, &bytes, entry, args)
        }
    }
    .map_err(|e| e.to_string())?;
    j.set_idempotent_tools(IDEMPOTENT_TOOLS.iter().map(|s| s.to_string()));
    Ok(Arc::new(j))
}

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

/// `aisc runs`: every journaled run with its status.
pub fn runs(mem: &MemoryArgs, json: bool) -> i32 {
    let (list, place) = match mem.store_url() {
        Some(url) => (
            ais_vm::store::open(&url).and_then(|s| s.list_runs()),
            ais_vm::store::postgres::redact(&url),
        ),
        None => {
            let Some(dir) = journal::dir_of(&mem.storage()) else {
                eprintln!("error: `--memory :memory:` keeps no run journal");
                return 2;
            };
            (journal::list_runs(&dir), dir.display().to_string())
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
            println!("{}", info_json(r));
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
        println!(
            "{:<22} {:<12} {:<19} {:>6} {:>8}  {}{doubt}{}",
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
    j.set_idempotent_tools(IDEMPOTENT_TOOLS.iter().map(|s| s.to_string()));
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

/// Counts of journaled steps by op (`ask ×3, inv ×1`), in first-seen order.
fn steps_by_op(steps: &[journal::Step]) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for s in steps {
        match out.iter_mut().find(|(op, _)| *op == s.op) {
            Some((_, n)) => *n += 1,
            None => out.push((s.op.clone(), 1)),
        }
    }
    out
}

fn steps_summary_json(steps: &[journal::Step]) -> serde_json::Value {
    let by_op: serde_json::Map<String, serde_json::Value> = steps_by_op(steps)
        .into_iter()
        .map(|(op, n)| (op, n.into()))
        .collect();
    serde_json::json!({
        "steps": steps.len(),
        "completed": steps.iter().filter(|s| s.kind == "done").count(),
        "in_doubt": steps.iter().filter(|s| s.kind == "intent").count(),
        "failed": steps.iter().filter(|s| s.kind == "failed").count(),
        "by_op": by_op,
        "tokens": steps.iter().map(|s| s.tokens).sum::<i64>(),
    })
}

/// One line: `5 journaled steps (ask ×3, inv ×2), 812 tokens`.
pub fn steps_line(steps: &[journal::Step]) -> String {
    let ops: Vec<String> = steps_by_op(steps)
        .into_iter()
        .map(|(op, n)| format!("{op} ×{n}"))
        .collect();
    let tokens: i64 = steps.iter().map(|s| s.tokens).sum();
    format!(
        "{} journaled step{}{}, {tokens} tokens",
        steps.len(),
        if steps.len() == 1 { "" } else { "s" },
        if ops.is_empty() {
            String::new()
        } else {
            format!(" ({})", ops.join(", "))
        }
    )
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
    if json {
        let mut j = info_json(&r.info);
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
    0
}
