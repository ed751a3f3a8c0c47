//! `ais-bench`: the A-PXM paper's workloads on the AIS VM, side by side with
//! LangGraph (see `docs/benchmarks.md`, section "Workloads vs LangGraph").
//!
//! ```text
//! ais-bench workloads [--quick] [--runs 10] [--warmup 3]
//!                     [--ask-ms 100 --think-ms 300 --reason-ms 1000 --tool-ms 50]
//!                     [--only 1,4d,9] [--no-langgraph] [--no-docs] ...
//! ais-bench exec FILE --config PATH [--arg name=value]... [--tool-ms N] [--report-json PATH]
//! ```

use ais_bench::env::{self, Latencies};
use ais_bench::ours::{self, CompileFailure, InFlight};
use ais_bench::plot::{self, Panel};
use ais_bench::report::{self, Lg, Ours, Results, TvCase, WorkloadResult};
use ais_bench::stats::Stats;
use ais_bench::steal;
use ais_bench::workloads::{
    self, Workload, TYPE_VERIFICATION, TYPE_VERIFICATION_PYTHON, WORKLOADS,
};
use ais_ir::OptLevel;
use ais_testkit::mock::MockServer;
use ais_vm::llm::LlmBackend;
use clap::{Parser, Subcommand};
use serde_json::Value as Json;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(name = "ais-bench", about = "AIS workload benchmarks vs LangGraph")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the paper's workloads on our VM and on LangGraph against a mock LLM server.
    Workloads(Opts),
    /// Compile and run one program against a config (the whole-process
    /// runner for workloads that need the benchmark's tools).
    Exec(ExecOpts),
    /// Re-render workloads.{md,svg} (and docs/benchmarks.md) from a saved
    /// workloads.json, recomputing the critical paths from the sources.
    Render(RenderOpts),
    /// The LLMCompiler shapes: tool calls one per turn (ReAct), parallel
    /// in one turn, and an inner plan, in process with fixed latencies.
    Plans(PlansOpts),
    /// Runs per second and latency of a trivial program through `aisc
    /// serve`'s `POST /v1/runs?wait=true` (or of any server given by
    /// --url) at several numbers of concurrent clients.
    ServeLoad(ServeLoadOpts),
    /// The run store on PostgreSQL: journal writes/s, runs/s with 1, 2, 4
    /// `aisc worker` processes against SQLite in one process, and the
    /// time a takeover takes (docs/bench/scale-out.md).
    Store(StoreOpts),
    /// Writes a generated program of one shape (lets, plus, flows, deep,
    /// agents, branchy) and about a number of IR ops to stdout, for
    /// compile-time scaling (`bench/compile-scale.sh`).
    Shape(ShapeOpts),
}

#[derive(clap::Args)]
struct ShapeOpts {
    /// lets | plus | flows | deep | agents | branchy
    name: String,
    /// About this many IR ops after lowering.
    ops: usize,
}

#[derive(clap::Args)]
struct StoreOpts {
    /// Queued runs per setup.
    #[arg(long, default_value_t = 200)]
    runs: usize,
    /// Dependent LLM calls per run.
    #[arg(long, default_value_t = 4)]
    calls: usize,
    /// Mock latency per call.
    #[arg(long, default_value_t = 5)]
    latency_ms: u64,
    /// Worker processes, per setup.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    workers: Vec<usize>,
    /// Runs at once per process.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    #[arg(long, default_value_t = 2.0)]
    lease_secs: f64,
    /// The `aisc` binary (default: next to this binary).
    #[arg(long)]
    aisc: Option<PathBuf>,
    /// Also write the report here (e.g. docs/bench/scale-out.md).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(clap::Args)]
struct ServeLoadOpts {
    /// Concurrent clients (one keep-alive connection each), per level.
    #[arg(long, value_delimiter = ',', default_value = "1,16,128")]
    clients: Vec<usize>,
    /// Measured seconds per level.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Unmeasured seconds before each level.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Load this server instead of starting `aisc serve` (`http://host:port`).
    #[arg(long)]
    url: Option<String>,
    /// The request path.
    #[arg(long, default_value = "/v1/runs?wait=true")]
    path: String,
    /// The request body (JSON).
    #[arg(
        long,
        default_value = r#"{"program":"trivial.ais","args":{"topic":"x"}}"#
    )]
    body: String,
    /// The status of a successful response.
    #[arg(long, default_value_t = 201)]
    status: u16,
    /// Text a successful response contains.
    #[arg(long, default_value = "\"succeeded\"")]
    contains: String,
    /// The `aisc` binary (default: next to this binary).
    #[arg(long)]
    aisc: Option<PathBuf>,
    /// Extra arguments of `aisc serve` (repeat: `--serve-arg=--memory --serve-arg=:memory:`).
    #[arg(long = "serve-arg", allow_hyphen_values = true)]
    serve_args: Vec<String>,
    /// A label for the table rows.
    #[arg(long, default_value = "aisc serve")]
    label: String,
}

#[derive(clap::Args)]
struct PlansOpts {
    /// Runs per cell.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    #[arg(long, default_value_t = 200)]
    turn_ms: u64,
    #[arg(long, default_value_t = 400)]
    planner_ms: u64,
    #[arg(long, default_value_t = 100)]
    tool_ms: u64,
    /// Also write the report here (e.g. docs/bench/plans.md).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Call the scripted model server at this OpenAI-compatible URL
    /// (bench/langgraph/model_server.py) instead of the in-process model.
    #[arg(long, value_name = "URL")]
    model_url: Option<String>,
    /// LangGraph's figures on the same server (bench/langgraph/plans.py
    /// writes them), shown side by side.
    #[arg(long, value_name = "JSON")]
    baseline: Option<PathBuf>,
}

#[derive(clap::Args)]
struct RenderOpts {
    /// The saved results (default: docs/bench/workloads.json).
    json: Option<PathBuf>,
    /// Do not update docs/benchmarks.md.
    #[arg(long)]
    no_docs: bool,
}

#[derive(clap::Args, Clone)]
struct Opts {
    /// 1 warm-up + 3 measured runs; results go to target/ais-bench-quick, not docs/.
    #[arg(long)]
    quick: bool,
    /// Measured runs per cell.
    #[arg(long)]
    runs: Option<usize>,
    /// Warm-up runs per cell.
    #[arg(long)]
    warmup: Option<usize>,
    #[arg(long, default_value_t = 100)]
    ask_ms: u64,
    #[arg(long, default_value_t = 300)]
    think_ms: u64,
    #[arg(long, default_value_t = 1000)]
    reason_ms: u64,
    #[arg(long, default_value_t = 50)]
    tool_ms: u64,
    /// Only these workload ids (comma-separated: 1,2,3,4a,4b,4c,4d,5,…,10).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Skip the LangGraph baselines.
    #[arg(long)]
    no_langgraph: bool,
    /// Skip whole-process runs of our side.
    #[arg(long)]
    no_whole_process: bool,
    /// Do not update docs/benchmarks.md.
    #[arg(long)]
    no_docs: bool,
    /// Python of the LangGraph venv (default: bench/langgraph/.venv/bin/python).
    #[arg(long)]
    python: Option<PathBuf>,
    /// The `aisc` binary (default: next to this binary).
    #[arg(long)]
    aisc: Option<PathBuf>,
    /// Scheduler workers for in-process runs (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// Where to write workloads.{json,svg,md} (default: docs/bench, or
    /// target/ais-bench-quick with --quick).
    #[arg(long)]
    out_dir: Option<PathBuf>,
}

#[derive(clap::Args)]
struct ExecOpts {
    file: PathBuf,
    #[arg(long)]
    config: PathBuf,
    #[arg(long = "arg", value_name = "NAME=VALUE")]
    args: Vec<String>,
    #[arg(long, default_value_t = 50)]
    tool_ms: u64,
    #[arg(long)]
    report_json: Option<PathBuf>,
}

fn store_bench(o: &StoreOpts) -> Result<(), String> {
    let aisc = match &o.aisc {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| e.to_string())?
            .with_file_name("aisc"),
    };
    let dir = std::env::temp_dir().join(format!("ais-bench-store-{}", std::process::id()));
    let opts = ais_bench::store_load::StoreOpts {
        runs: o.runs,
        calls: o.calls,
        latency_ms: o.latency_ms,
        workers: o.workers.clone(),
        concurrency: o.concurrency,
        lease_secs: o.lease_secs,
        aisc,
        dir: dir.clone(),
    };
    let md = ais_bench::store_load::run(&opts);
    let _ = std::fs::remove_dir_all(&dir);
    let md = md?;
    print!("{md}");
    if let Some(out) = &o.out {
        let cmd = format!(
            "cargo build -p ais-cli && cargo run -p ais-bench -- store --runs {} --calls {} --latency-ms {} --concurrency {} --lease-secs {}",
            o.runs, o.calls, o.latency_ms, o.concurrency, o.lease_secs
        );
        let text = format!("# Scale-out on PostgreSQL: measurements\n\nWritten by `{cmd}` (see docs/scale-out.md). One PostgreSQL 15 server and the mock LLM server on this machine (2 cores, shared).\n\n{md}");
        std::fs::write(out, text).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Cmd::Workloads(o) => match run_workloads(&o) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        },
        Cmd::Exec(o) => exec(&o),
        Cmd::Render(o) => match render(&o) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        },
        Cmd::Plans(o) => plans(&o),
        Cmd::Shape(o) => shape(&o),
        Cmd::Store(o) => match store_bench(&o) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        },
        Cmd::ServeLoad(o) => match serve_load(&o) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        },
    };
    ExitCode::from(code)
}

// ---------------------------------------------------------------------------
// serve-load

/// The program `serve-load` serves: one flow, no LLM call.
const TRIVIAL: &str = "agent Trivial {\n    @entry flow main(topic: str) -> str {\n        return \"about \" + topic\n    }\n}\n";

/// A started `aisc serve`, killed when dropped.
struct Served {
    child: std::process::Child,
    dir: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start_aisc(o: &ServeLoadOpts) -> Result<(Served, std::net::SocketAddr), String> {
    use std::io::BufRead;
    let aisc = match &o.aisc {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| e.to_string())?
            .with_file_name("aisc"),
    };
    let dir = std::env::temp_dir().join(format!("ais-serve-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::write(dir.join("trivial.ais"), TRIVIAL).map_err(|e| e.to_string())?;
    let mut child = Command::new(&aisc)
        .args([
            "serve",
            "trivial.ais",
            "--listen",
            "127.0.0.1:0",
            "--sim-delay-scale",
            "0",
        ])
        .args(&o.serve_args)
        .current_dir(&dir)
        .env("HOME", &dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("AIS_SERVE_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", aisc.display()))?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let served = Served { child, dir };
    let mut seen = Vec::new();
    let mut lines = std::io::BufReader::new(stderr).lines();
    let addr = loop {
        let Some(Ok(line)) = lines.next() else {
            return Err(format!("aisc serve did not start: {}", seen.join("\n")));
        };
        if let Some(rest) = line.split("listening on http://").nth(1) {
            let a = rest.split_whitespace().next().unwrap_or("");
            break a.parse().map_err(|e| format!("address {a}: {e}"))?;
        }
        seen.push(line);
    };
    // Keep draining its stderr so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Ok((served, addr))
}

fn serve_load(o: &ServeLoadOpts) -> Result<(), String> {
    let (_served, addr) = match &o.url {
        Some(u) => {
            let hostport = u
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .to_string();
            let addr = std::net::ToSocketAddrs::to_socket_addrs(&hostport)
                .map_err(|e| format!("--url {u}: {e}"))?
                .next()
                .ok_or_else(|| format!("--url {u}: no address"))?;
            (None, addr)
        }
        None => {
            let (s, a) = start_aisc(o)?;
            (Some(s), a)
        }
    };
    eprintln!("loading http://{addr}{} ({})", o.path, o.label);
    println!("| server | clients | runs/s | p50 ms | p99 ms | max ms | errors |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for &clients in &o.clients {
        let r = ais_bench::serve_load::run(&ais_bench::serve_load::Load {
            addr,
            path: o.path.clone(),
            body: o.body.clone(),
            status: o.status,
            contains: o.contains.clone(),
            clients: clients.max(1),
            warmup: Duration::from_secs_f64(o.warmup),
            measure: Duration::from_secs_f64(o.seconds),
        });
        println!(
            "| {} | {} | {:.0} | {:.2} | {:.2} | {:.1} | {} |",
            o.label, r.clients, r.per_second, r.p50_ms, r.p99_ms, r.max_ms, r.errors
        );
        if let Some(e) = &r.first_error {
            eprintln!("first error at {clients} clients: {e}");
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// plans

fn plans(o: &PlansOpts) -> u8 {
    let latency = ais_bench::plans::Latency {
        turn: Duration::from_millis(o.turn_ms),
        planner: Duration::from_millis(o.planner_ms),
        tool: Duration::from_millis(o.tool_ms),
    };
    let at = match &o.model_url {
        Some(url) => ais_bench::plans::ModelAt::Server(url.clone()),
        None => ais_bench::plans::ModelAt::InProcess,
    };
    let baseline = match &o.baseline {
        Some(path) => match std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        {
            Ok(b) => Some(b),
            Err(e) => {
                eprintln!("error: cannot read `{}`: {e}", path.display());
                return 1;
            }
        },
        None => None,
    };
    match ais_bench::plans::report(latency, o.runs.max(1), &at, baseline.as_ref()) {
        Ok(text) => {
            print!("{text}");
            if let Some(path) = &o.out {
                let cmd = match &o.model_url {
                    None => format!(
                        "cargo run --release -p ais-bench -- plans --runs {} --turn-ms {} --planner-ms {} --tool-ms {}",
                        o.runs, o.turn_ms, o.planner_ms, o.tool_ms
                    ),
                    Some(_) => format!(
                        "bench/langgraph/run.sh {} {} {} {}",
                        o.runs, o.turn_ms, o.planner_ms, o.tool_ms
                    ),
                };
                let title = if o.model_url.is_some() {
                    "LLMCompiler shapes: ours and LangGraph against one model server"
                } else {
                    "LLMCompiler shapes on our runtime"
                };
                let doc = format!("# {title}\n\n```sh\n{cmd}\n```\n\n{text}");
                if let Err(e) = std::fs::write(path, doc) {
                    eprintln!("error: cannot write `{}`: {e}", path.display());
                    return 1;
                }
            }
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

// ---------------------------------------------------------------------------
// exec
// ---------------------------------------------------------------------------

fn exec(o: &ExecOpts) -> u8 {
    let mut args = Vec::new();
    for a in &o.args {
        match a.split_once('=') {
            Some((k, v)) => args.push((k.trim().to_string(), v.to_string())),
            None => {
                eprintln!("error: --arg expects NAME=VALUE, got `{a}`");
                return 2;
            }
        }
    }
    let backend = match env::backend(&o.config) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let program = match ours::compile_file(&o.file, OptLevel::O1) {
        Ok((p, _)) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    let refs: Vec<(&str, &str)> = args.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let run = ours::run_program(&program, &refs, backend, env::host(o.tool_ms), None);
    if let Some(path) = &o.report_json {
        let json = serde_json::json!({
            "ok": run.ok,
            "result": run.result,
            "error": run.error,
            "summary": serde_json::to_value(&run.summary).unwrap_or_default(),
        });
        if let Err(e) = std::fs::write(path, format!("{json:#}\n")) {
            eprintln!("error: cannot write `{}`: {e}", path.display());
        }
    }
    match &run.error {
        None => {
            println!("{}", text(&run.result));
            0
        }
        Some(e) => {
            eprintln!("error: run failed: {e}");
            1
        }
    }
}

fn text(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

// ---------------------------------------------------------------------------
// Child processes
// ---------------------------------------------------------------------------

struct Child {
    ok: bool,
    stdout: String,
    stderr: String,
    wall_ms: f64,
}

const CHILD_TIMEOUT: Duration = Duration::from_secs(600);

/// Runs `cmd` to completion (bounded by [`CHILD_TIMEOUT`]), timing it from
/// spawn to exit.
fn run_child(cmd: &mut Command) -> Result<Child, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_string(&mut s);
        }
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_string(&mut s);
        }
        s
    });
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if start.elapsed() > CHILD_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_micros(200)),
            Err(e) => return Err(format!("waiting for {cmd:?}: {e}")),
        }
    };
    let wall_ms = start.elapsed().as_secs_f64() * 1e3;
    let stdout = t_out.join().unwrap_or_default();
    let stderr = t_err.join().unwrap_or_default();
    let Some(status) = status else {
        return Err(format!("{cmd:?} timed out after {CHILD_TIMEOUT:?}"));
    };
    Ok(Child {
        ok: status.success(),
        stdout,
        stderr,
        wall_ms,
    })
}

fn last_json_line(s: &str) -> Option<Json> {
    s.lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
}

fn first_line(s: &str) -> String {
    s.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .chars()
        .take(300)
        .collect()
}

// ---------------------------------------------------------------------------
// The benchmark
// ---------------------------------------------------------------------------

struct Ctx<'a> {
    o: &'a Opts,
    root: PathBuf,
    lat: Latencies,
    runs: usize,
    warmup: usize,
    server: MockServer,
    config: PathBuf,
    work: PathBuf,
    backend: Arc<InFlight>,
    aisc: Option<PathBuf>,
    /// `--memory :memory:` when this `aisc` persists memory by default
    /// (every run starts from empty memory, like the LangGraph scripts).
    aisc_memory: Vec<String>,
    python: Option<PathBuf>,
}

impl Ctx<'_> {
    fn calls(&self) -> u64 {
        self.server.request_count() as u64
    }

    fn prime(&self, w: &Workload) {
        if let Some(r) = w.first_reply {
            self.server
                .push(ais_testkit::mock::MockReply::Content(r.to_string()));
        }
    }

    fn total(&self) -> usize {
        self.warmup + self.runs
    }
}

fn run_workloads(o: &Opts) -> Result<(), String> {
    let root = workloads::repo_root();
    let (runs, warmup) = match o.quick {
        true => (o.runs.unwrap_or(3), o.warmup.unwrap_or(1)),
        false => (o.runs.unwrap_or(10), o.warmup.unwrap_or(3)),
    };
    if runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    let lat = Latencies {
        ask_ms: o.ask_ms,
        think_ms: o.think_ms,
        reason_ms: o.reason_ms,
        tool_ms: o.tool_ms,
    };
    let server = env::start_mock(&lat).map_err(|e| format!("cannot start the mock server: {e}"))?;
    let work = std::env::temp_dir().join(format!("ais-bench-{}", std::process::id()));
    let config = env::write_config(&work, &server.openai_url())
        .map_err(|e| format!("cannot write the config: {e}"))?;
    let backend = Arc::new(InFlight::new(env::backend(&config)?));
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    let aisc = match &o.aisc {
        Some(p) => Some(p.clone()),
        None => exe_dir
            .as_ref()
            .map(|d| d.join("aisc"))
            .filter(|p| p.is_file()),
    };
    if aisc.is_none() && !o.no_whole_process {
        eprintln!("note: no `aisc` next to this binary (cargo build --release -p ais-cli --bin aisc); whole-process runs use `ais-bench exec`");
    }
    let python = if o.no_langgraph {
        None
    } else {
        let p = o
            .python
            .clone()
            .unwrap_or_else(|| root.join("bench/langgraph/.venv/bin/python"));
        if p.is_file() {
            Some(p)
        } else {
            eprintln!(
                "note: {} not found (run bench/langgraph/setup.sh); skipping LangGraph",
                p.display()
            );
            None
        }
    };
    let aisc_memory = match &aisc {
        Some(a) => aisc_has_memory_flag(a),
        None => Vec::new(),
    };
    let cx = Ctx {
        o,
        root,
        lat,
        runs,
        warmup,
        server,
        config,
        work,
        backend,
        aisc,
        aisc_memory,
        python,
    };
    let result = bench_all(&cx);
    let _ = std::fs::remove_dir_all(&cx.work);
    result
}

fn aisc_has_memory_flag(aisc: &Path) -> Vec<String> {
    let help = Command::new(aisc)
        .args(["run", "--help"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    if help.contains("--memory") {
        vec!["--memory".into(), ":memory:".into()]
    } else {
        Vec::new()
    }
}

fn selected(o: &Opts, id: &str) -> bool {
    o.only.is_empty() || o.only.iter().any(|x| x == id)
}

fn bench_all(cx: &Ctx<'_>) -> Result<(), String> {
    let o = cx.o;
    let mut results = Results {
        latencies: Some(cx.lat),
        runs: cx.runs,
        warmup: cx.warmup,
        workers: o
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        commit: git_commit(&cx.root),
        command: commands(o),
        langgraph: cx.python.as_ref().and_then(|p| langgraph_versions(p)),
        ..Results::default()
    };
    {
        let backend: &dyn LlmBackend = cx.backend.as_ref();
        let ask = cx.lat.ask_ms as f64;
        let over =
            |v: Vec<f64>| -> Vec<f64> { v.iter().skip(cx.warmup).map(|ms| ms - ask).collect() };
        results.transport_floor =
            Stats::of(&over(ours::probe_backend(backend, 1, cx.warmup + 20)?));
        results.transport_floor_64 = Stats::of(&over(ours::probe_backend(
            backend,
            64,
            cx.warmup + cx.runs,
        )?));
        if let (Some(a), Some(b)) = (&results.transport_floor, &results.transport_floor_64) {
            eprintln!(
                "== transport floor: 1 call +{} ms, 64 concurrent calls +{} ms",
                a.pm(),
                b.pm()
            );
        }
    }
    if selected(o, "3") {
        eprintln!("== 3 Type Verification");
        bench_type_verification(cx, &mut results)?;
    }
    for w in WORKLOADS.iter().filter(|w| selected(o, w.id)) {
        eprintln!("== {} {}", w.id, w.name);
        let r = bench_workload(cx, w)?;
        eprintln!(
            "   ours {:.1} ms in process, {:.1} ms whole process, {} calls | LG par {:.1} / {:.1} ms | LG seq {:.1} / {:.1} ms",
            r.ours.in_process.map_or(f64::NAN, |s| s.mean),
            r.ours.whole_process.map_or(f64::NAN, |s| s.mean),
            r.ours.llm_calls.first().copied().unwrap_or(0),
            r.lg_par.as_ref().and_then(|l| l.in_process).map_or(f64::NAN, |s| s.mean),
            r.lg_par.as_ref().and_then(|l| l.whole_process).map_or(f64::NAN, |s| s.mean),
            r.lg_seq.as_ref().and_then(|l| l.in_process).map_or(f64::NAN, |s| s.mean),
            r.lg_seq.as_ref().and_then(|l| l.whole_process).map_or(f64::NAN, |s| s.mean),
        );
        results.workloads.push(r);
    }
    write_outputs(cx, &results)
}

fn git_commit(root: &Path) -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

fn langgraph_versions(python: &Path) -> Option<String> {
    let out = Command::new(python)
        .args([
            "-c",
            "import importlib.metadata as m, platform; print(f\"langgraph {m.version('langgraph')}, langchain-openai {m.version('langchain-openai')}, langchain-core {m.version('langchain-core')}, Python {platform.python_version()}\")",
        ])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn bench_workload(cx: &Ctx<'_>, w: &Workload) -> Result<WorkloadResult, String> {
    let path = cx.root.join(w.file);
    let mut ours = Ours::default();
    // Compile (also timed per run below) and the critical path.
    let (program, _) =
        ours::compile_file(&path, OptLevel::O1).map_err(|e| format!("{}: {e}", w.file))?;
    if let Some((ms, k)) = ours::critical_path(&program, &cx.lat) {
        ours.critical_path_ms = Some(ms);
        ours.critical_path_llm_calls = Some(k);
    }

    // In process.
    let (mut wall, mut make, mut comp, mut tok, mut par, mut sched, mut steal) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    for i in 0..cx.total() {
        let (program, compile_ms) =
            ours::compile_file(&path, OptLevel::O1).map_err(|e| format!("{}: {e}", w.file))?;
        cx.prime(w);
        cx.backend.reset();
        let before = cx.calls();
        let backend: Arc<dyn LlmBackend> = cx.backend.clone();
        let stolen_before = steal::steal_ticks();
        let run = ours::run_program(
            &program,
            w.args,
            backend,
            env::host(cx.lat.tool_ms),
            cx.o.workers,
        );
        let stolen = steal::steal_ticks()
            .zip(stolen_before)
            .map(|(after, before)| after.saturating_sub(before));
        let calls = cx.calls() - before;
        if !run.ok {
            ours.failures += 1;
            ours.first_error
                .get_or_insert(run.error.clone().unwrap_or_default());
            eprintln!(
                "   ours in-process run failed: {}",
                run.error.unwrap_or_default()
            );
            continue;
        }
        if i < cx.warmup {
            continue;
        }
        wall.push(run.wall_ms);
        make.push(run.summary.makespan_ms);
        comp.push(compile_ms);
        tok.push((run.summary.input_tokens + run.summary.output_tokens) as f64);
        par.push(run.summary.avg_parallelism);
        sched.push(run.summary.sched_overhead_us_per_op);
        if let Some(ticks) = stolen {
            steal.push(steal::percent(ticks, run.wall_ms, cpus));
        }
        ours.peak_parallelism = ours.peak_parallelism.max(run.summary.peak_parallelism);
        ours.max_in_flight = ours.max_in_flight.max(cx.backend.max_in_flight());
        ours.llm_calls.push(calls);
    }
    ours.in_process = Stats::of(&wall);
    ours.makespan = Stats::of(&make);
    ours.compile = Stats::of(&comp);
    ours.tokens = Stats::of(&tok);
    ours.avg_parallelism = Stats::of(&par);
    ours.sched_overhead_us = Stats::of(&sched);
    ours.host_steal_pct = Stats::of(&steal);

    if w.id == "2" {
        let (p0, _) =
            ours::compile_file(&path, OptLevel::O0).map_err(|e| format!("{}: {e}", w.file))?;
        let before = cx.calls();
        let backend: Arc<dyn LlmBackend> = cx.backend.clone();
        let run = ours::run_program(
            &p0,
            w.args,
            backend,
            env::host(cx.lat.tool_ms),
            cx.o.workers,
        );
        if run.ok {
            ours.llm_calls_o0 = Some(cx.calls() - before);
        }
    }

    // Whole process.
    if !cx.o.no_whole_process {
        let use_aisc = cx.aisc.clone().filter(|_| !w.tools);
        ours.whole_via = match use_aisc {
            Some(_) => "aisc run".into(),
            None => "ais-bench exec".into(),
        };
        let report = cx.work.join(format!("report-{}.json", w.id));
        let mut times = vec![];
        for i in 0..cx.total() {
            let mut cmd = match &use_aisc {
                Some(aisc) => {
                    let mut c = Command::new(aisc);
                    c.arg("run").arg(&path).arg("-q").args(&cx.aisc_memory);
                    c
                }
                None => {
                    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
                    let mut c = Command::new(exe);
                    c.arg("exec")
                        .arg(&path)
                        .arg("--tool-ms")
                        .arg(cx.lat.tool_ms.to_string());
                    c
                }
            };
            cmd.arg("--config")
                .arg(&cx.config)
                .arg("--report-json")
                .arg(&report);
            for (k, v) in w.args {
                cmd.arg("--arg").arg(format!("{k}={v}"));
            }
            cmd.env_remove("APXM_BACKEND")
                .env_remove("APXM_CONFIG")
                .current_dir(&cx.work);
            cx.prime(w);
            let child = run_child(&mut cmd)?;
            let ok = child.ok
                && std::fs::read_to_string(&report)
                    .ok()
                    .and_then(|t| serde_json::from_str::<Json>(&t).ok())
                    .and_then(|j| j.get("ok").and_then(Json::as_bool))
                    .unwrap_or(false);
            let _ = std::fs::remove_file(&report);
            if !ok {
                ours.failures += 1;
                ours.first_error
                    .get_or_insert_with(|| format!("whole process: {}", first_line(&child.stderr)));
                eprintln!(
                    "   ours whole-process run failed: {}",
                    first_line(&child.stderr)
                );
                continue;
            }
            if i >= cx.warmup {
                times.push(child.wall_ms);
            }
        }
        ours.whole_process = Stats::of(&times);
    }

    let (lg_seq, lg_par) = match &cx.python {
        Some(py) => (
            Some(bench_python(cx, py, w, "seq")?),
            Some(bench_python(cx, py, w, "par")?),
        ),
        None => (None, None),
    };
    Ok(WorkloadResult {
        id: w.id.into(),
        name: w.name.into(),
        file: w.file.into(),
        ours,
        lg_seq,
        lg_par,
    })
}

fn python_cmd(
    cx: &Ctx<'_>,
    py: &Path,
    script: &str,
    style: &str,
    args: &Json,
    extra: &[&str],
) -> Command {
    let dir = cx.root.join("bench/langgraph");
    let mut cmd = Command::new(py);
    cmd.arg(dir.join(script))
        .arg("--style")
        .arg(style)
        .arg("--base-url")
        .arg(cx.server.openai_url())
        .arg("--tool-ms")
        .arg(cx.lat.tool_ms.to_string())
        .arg("--args")
        .arg(args.to_string())
        .args(extra)
        .current_dir(&dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("LANGSMITH_TRACING", "false")
        .env("LANGCHAIN_TRACING_V2", "false")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost");
    cmd
}

fn bench_python(cx: &Ctx<'_>, py: &Path, w: &Workload, style: &str) -> Result<Lg, String> {
    let mut lg = Lg::default();
    let (mut inp, mut whole, mut tok) = (vec![], vec![], vec![]);
    for i in 0..cx.total() {
        let mut cmd = python_cmd(
            cx,
            py,
            w.python,
            style,
            &workloads::args_json(w),
            w.python_extra,
        );
        cx.prime(w);
        let before = cx.calls();
        let child = run_child(&mut cmd)?;
        let calls = cx.calls() - before;
        let line = last_json_line(&child.stdout);
        let ok = child.ok
            && line
                .as_ref()
                .and_then(|j| j.get("ok"))
                .and_then(Json::as_bool)
                == Some(true);
        if !ok {
            lg.failures += 1;
            let why = line
                .as_ref()
                .and_then(|j| j.get("error"))
                .and_then(Json::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| first_line(&child.stderr));
            eprintln!("   LangGraph {style} run failed: {why}");
            lg.first_error.get_or_insert(why);
            continue;
        }
        if i < cx.warmup {
            continue;
        }
        let j = line.unwrap_or_default();
        let num = |k: &str| j.get(k).and_then(Json::as_f64).unwrap_or(0.0);
        inp.push(num("in_process_ms"));
        whole.push(child.wall_ms);
        tok.push(num("input_tokens") + num("output_tokens"));
        lg.max_in_flight = lg.max_in_flight.max(num("max_in_flight") as usize);
        lg.llm_calls.push(calls);
    }
    lg.in_process = Stats::of(&inp);
    lg.whole_process = Stats::of(&whole);
    lg.tokens = Stats::of(&tok);
    Ok(lg)
}

fn bench_type_verification(cx: &Ctx<'_>, results: &mut Results) -> Result<(), String> {
    for &(file, code) in TYPE_VERIFICATION {
        let path = cx.root.join(file);
        let source = std::fs::read_to_string(&path).map_err(|e| format!("{file}: {e}"))?;
        let mut case = TvCase {
            file: file.into(),
            expected_code: code.into(),
            ..TvCase::default()
        };
        let mut detect = vec![];
        for i in 0..cx.total() {
            let t = Instant::now();
            let r = ours::compile_source(&source, OptLevel::O1);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            match r {
                Err(CompileFailure::Rejected { codes, .. }) => {
                    case.rejected = true;
                    case.codes = codes;
                }
                Err(e) => return Err(format!("{file}: {e}")),
                Ok(_) => case.rejected = false,
            }
            if i >= cx.warmup {
                detect.push(ms);
            }
        }
        case.detect_in_process = Stats::of(&detect);
        // `aisc run` against the mock: must exit non-zero with no LLM call.
        if let Some(aisc) = cx.aisc.as_ref().filter(|_| !cx.o.no_whole_process) {
            let mut times = vec![];
            let before = cx.calls();
            for i in 0..cx.total() {
                let mut cmd = Command::new(aisc);
                cmd.current_dir(&cx.work)
                    .arg("run")
                    .arg(&path)
                    .arg("-q")
                    .args(&cx.aisc_memory)
                    .arg("--config")
                    .arg(&cx.config)
                    .arg("--arg")
                    .arg("topic=x");
                let child = run_child(&mut cmd)?;
                if child.ok {
                    case.rejected = false;
                }
                if i >= cx.warmup {
                    times.push(child.wall_ms);
                }
            }
            case.llm_calls = cx.calls() - before;
            case.detect_whole_process = Stats::of(&times);
        }
        results.type_verification.push(case);
    }
    if let Some(py) = &cx.python {
        let mut whole = vec![];
        let mut per_case: Vec<Vec<f64>> = vec![vec![]; TYPE_VERIFICATION.len()];
        for i in 0..cx.total() {
            let mut cmd = python_cmd(
                cx,
                py,
                TYPE_VERIFICATION_PYTHON,
                "seq",
                &Json::Object(Default::default()),
                &[],
            );
            let child = run_child(&mut cmd)?;
            let Some(j) = last_json_line(&child.stdout) else {
                eprintln!(
                    "   LangGraph workload 3 failed: {}",
                    first_line(&child.stderr)
                );
                continue;
            };
            if i < cx.warmup {
                continue;
            }
            whole.push(child.wall_ms);
            let cases = j
                .get("cases")
                .and_then(Json::as_array)
                .cloned()
                .unwrap_or_default();
            for (k, c) in cases.iter().enumerate() {
                let (Some(tc), Some(slot)) =
                    (results.type_verification.get_mut(k), per_case.get_mut(k))
                else {
                    continue;
                };
                slot.push(c.get("detect_ms").and_then(Json::as_f64).unwrap_or(0.0));
                tc.lg_detected = c.get("detected").and_then(Json::as_bool);
                tc.lg_error = c.get("error").and_then(Json::as_str).map(str::to_string);
                tc.lg_llm_calls = c.get("llm_calls").and_then(Json::as_u64);
            }
        }
        for (tc, s) in results.type_verification.iter_mut().zip(&per_case) {
            tc.lg_detect_ms = Stats::of(s);
        }
        results.tv_lg_whole_process = Stats::of(&whole);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Outputs
// ---------------------------------------------------------------------------

fn commands(o: &Opts) -> String {
    let mut flags = String::new();
    if o.quick {
        flags.push_str(" --quick");
    }
    if let Some(r) = o.runs {
        flags.push_str(&format!(" --runs {r}"));
    }
    if let Some(w) = o.warmup {
        flags.push_str(&format!(" --warmup {w}"));
    }
    flags.push_str(&format!(
        " --ask-ms {} --think-ms {} --reason-ms {} --tool-ms {}",
        o.ask_ms, o.think_ms, o.reason_ms, o.tool_ms
    ));
    if !o.only.is_empty() {
        flags.push_str(&format!(" --only {}", o.only.join(",")));
    }
    command_block(&flags)
}

/// The commands that reproduce a run with these `flags`.
fn command_block(flags: &str) -> String {
    format!(
        "bash bench/langgraph/setup.sh                      # venv with the pinned LangGraph stack\n\
         cargo build --release -p ais-cli --bin aisc   # whole-process runs use the aisc next to ais-bench\n\
         cargo run --release -p ais-bench -- workloads{flags}"
    )
}

fn write_outputs(cx: &Ctx<'_>, r: &Results) -> Result<(), String> {
    let o = cx.o;
    let out_dir = o.out_dir.clone().unwrap_or_else(|| {
        if o.quick {
            cx.root.join("target/ais-bench-quick")
        } else {
            cx.root.join("docs/bench")
        }
    });
    let docs = !o.quick && !o.no_docs && o.only.is_empty();
    write_files(&cx.root, &out_dir, r, docs)
}

fn render(o: &RenderOpts) -> Result<(), String> {
    let root = workloads::repo_root();
    let path = o
        .json
        .clone()
        .unwrap_or_else(|| root.join("docs/bench/workloads.json"));
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut r: Results =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let lat = r.latencies.unwrap_or_default();
    for w in &mut r.workloads {
        if let Ok((p, _)) = ours::compile_file(&root.join(&w.file), OptLevel::O1) {
            if let Some((ms, k)) = ours::critical_path(&p, &lat) {
                w.ours.critical_path_ms = Some(ms);
                w.ours.critical_path_llm_calls = Some(k);
            }
        }
    }
    if r.command.is_empty() {
        r.command = default_commands();
    }
    let out_dir = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let docs = !o.no_docs && out_dir.ends_with("docs/bench");
    write_files(&root, &out_dir, &r, docs)
}

fn default_commands() -> String {
    command_block("")
}

fn write_files(root: &Path, out_dir: &Path, r: &Results, docs: bool) -> Result<(), String> {
    std::fs::create_dir_all(out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let json = serde_json::to_string_pretty(r).map_err(|e| e.to_string())?;
    let write = |name: &str, text: &str| -> Result<PathBuf, String> {
        let p = out_dir.join(name);
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(p)
    };
    write("workloads.json", &(json + "\n"))?;
    write("workloads.svg", &svg(r))?;
    let md = report::markdown(r, &r.command);
    write("workloads.md", &md)?;
    println!("{md}");
    eprintln!("wrote {}/workloads.{{json,svg,md}}", out_dir.display());
    if docs {
        let doc_path = root.join("docs/benchmarks.md");
        let doc = std::fs::read_to_string(&doc_path).unwrap_or_default();
        let generated = format!("![latency per workload](bench/workloads.svg)\n\n{md}\n(Also in `docs/bench/workloads.md` and, machine-readable, `docs/bench/workloads.json`; `ais-bench render` re-renders them.)\n");
        let spliced = report::splice(&doc, &generated, INTRO);
        std::fs::write(&doc_path, spliced).map_err(|e| format!("{}: {e}", doc_path.display()))?;
        eprintln!("updated {}", doc_path.display());
    }
    Ok(())
}

const INTRO: &str = "The A-PXM paper's workloads (§5, Tables 2–5) on our VM and on LangGraph, against the same OpenAI-compatible mock server with fixed latencies per latency class. Driver: `bench/` (`ais-bench workloads`); baselines: `bench/langgraph/`.";

fn svg(r: &Results) -> String {
    let groups: Vec<String> = r.workloads.iter().map(|w| w.id.clone()).collect();
    let bar = |s: &Option<Stats>| s.map(|s| (s.mean, s.std));
    let lg = |w: &WorkloadResult, par: bool, whole: bool| {
        let l = if par { &w.lg_par } else { &w.lg_seq };
        l.as_ref().and_then(|l| {
            bar(if whole {
                &l.whole_process
            } else {
                &l.in_process
            })
        })
    };
    let panel = |whole: bool, title: &str| Panel {
        title: title.into(),
        bars: r
            .workloads
            .iter()
            .map(|w| {
                vec![
                    bar(if whole {
                        &w.ours.whole_process
                    } else {
                        &w.ours.in_process
                    }),
                    lg(w, true, whole),
                    lg(w, false, whole),
                ]
            })
            .collect(),
    };
    plot::grouped_bars(
        "End-to-end latency per workload (mean ± std, log scale)",
        &groups,
        &[
            ("AIS (ours)", "#1f77b4"),
            ("LangGraph hand-parallel", "#ff7f0e"),
            ("LangGraph sequential", "#d62728"),
        ],
        &[
            panel(false, "In process (ais_vm::run vs graph.invoke)"),
            panel(true, "Whole process (process start + compile/import + run)"),
        ],
        "ms",
    )
}

fn shape(o: &ShapeOpts) -> u8 {
    use ais_bench::shapes::{program_of_ops, Shape};
    let Some(shape) = Shape::parse(&o.name) else {
        eprintln!("error: unknown shape `{}`", o.name);
        return 2;
    };
    match program_of_ops(shape, o.ops) {
        Some((text, units)) => {
            eprintln!("{}: {units} units", shape.name());
            print!("{text}");
            0
        }
        None => {
            eprintln!("error: the `{}` shape does not compile", shape.name());
            1
        }
    }
}
