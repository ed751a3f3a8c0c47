//! The command-line edge of the AIS toolchain: the `aisc` command line
//! (argument parsing with clap, the subcommands) and the `ais-opt` driver
//! ([`opt`]). Each subcommand returns an exit code; diagnostics are rendered
//! here, at the edge, and nowhere else. Terminal interaction the libraries
//! ask for (the `[y/N]` confirmation of destructive tools, the progress bar)
//! is implemented here too and handed to the VM as callbacks.

mod aam;
mod analyze;
mod args;
mod check;
mod config;
mod dead;
mod fmt;
mod fork;
mod journal;
mod load;
mod new;
pub mod ops;
pub mod opt;
mod output;
mod queue;
pub use output::exit_quietly_when_stdout_closes;
pub mod report;
mod run;
mod runs;
mod serve;
mod steps;
mod stream;
mod threads;
mod tools;
mod tools_config;
mod tty;
mod webhooks;
mod worker;

use clap::{Parser, Subcommand, ValueEnum};
use output::Output;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "aisc",
    version,
    about = "The AIS compiler: check, build and run agent workflows"
)]
pub struct Cli {
    /// How diagnostics are printed.
    #[arg(long, value_enum, default_value_t = ErrorFormat::Human, global = true)]
    pub error_format: ErrorFormat,
    /// Colour in human-readable output (auto: only on a terminal, never with NO_COLOR set).
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, global = true)]
    pub color: ColorChoice,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum ErrorFormat {
    Human,
    Json,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Emit {
    /// The token stream, one token per line with its position.
    Tokens,
    /// The syntax tree with spans.
    Ast,
    /// The AIS IR in its textual form.
    Ir,
    /// Each flow's dataflow graph in Graphviz DOT.
    Dot,
    /// Each flow's dataflow graph as a Mermaid flowchart.
    Mermaid,
    /// The reference's JSON graph format (docs/graph-json.md); read back by
    /// `aisc check|build|run FILE.json`.
    GraphJson,
}

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant)] // parsed once per process
pub enum Command {
    /// Parse and type-check programs; report every error and warning.
    Check {
        /// `.ais` source files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Treat warnings as errors.
        #[arg(long)]
        deny_warnings: bool,
        /// Report only information flows the `[policy]` denies (untrusted
        /// source to sink, W0020); fails if there is any.
        #[arg(long)]
        flows: bool,
        /// Config file with the `[policy]` (default: as `aisc run` finds it).
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
    /// Compile a program: print an intermediate form (--emit) or write an
    /// executable artifact (-o FILE.apxmobj).
    Build {
        /// The `.ais` source file.
        file: PathBuf,
        /// What to print.
        #[arg(long, value_enum, required_unless_present = "output")]
        emit: Option<Emit>,
        /// Write the executable artifact here.
        #[arg(short, long, value_name = "FILE.apxmobj", conflicts_with = "emit")]
        output: Option<PathBuf>,
        /// Print pass statistics and the critical-path estimate.
        #[arg(long)]
        stats: bool,
        #[command(flatten)]
        opt: OptArgs,
    },
    /// Compile (or load) and run a program on the dataflow VM.
    Run {
        /// `.ais` source or `.apxmobj` artifact.
        file: PathBuf,
        #[command(flatten)]
        run: args::RunArgs,
        #[command(flatten)]
        opt: OptArgs,
        #[command(flatten)]
        backend: BackendArgs,
    },
    /// Serve programs over HTTP: a run API (start, watch live with
    /// Server-Sent Events, cancel, resume), /health, /metrics and an MCP
    /// endpoint at /mcp (docs/serve.md). Listens on 127.0.0.1:8080 by
    /// default.
    Serve {
        /// `.ais` sources or `.apxmobj` artifacts to serve.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        listen: serve::ListenArgs,
        #[command(flatten)]
        runs: serve::ServedRunArgs,
        #[command(flatten)]
        opt: OptArgs,
        #[command(flatten)]
        backend: BackendArgs,
    },
    /// Serve programs as MCP tools over stdin/stdout (each agent's entry
    /// flow is a tool; plus `check` and `build`).
    Mcp {
        /// `.ais` sources or `.apxmobj` artifacts to serve.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        runs: serve::ServedRunArgs,
        #[command(flatten)]
        opt: OptArgs,
        #[command(flatten)]
        backend: BackendArgs,
    },
    /// The op table: every op's operands, results, attributes, effect and
    /// latency class (or one op's, by name).
    Ops {
        /// One op's mnemonic (`ask`, `inv`, `flow.call`, ...).
        name: Option<String>,
        /// One JSON object per op.
        #[arg(long)]
        json: bool,
    },
    /// Estimate what the dataflow engine gains on a program before running
    /// it: per flow, the critical path, the phases of parallel work and the
    /// speed-up over sequential execution.
    Analyze {
        /// The `.ais` source file.
        file: PathBuf,
        /// One JSON object per flow.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        opt: OptArgs,
    },
    /// Print a readable dump of an artifact.
    Inspect {
        /// The `.apxmobj` artifact.
        file: PathBuf,
    },
    /// Show or check the LLM backend configuration.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
        #[command(flatten)]
        backend: BackendArgs,
    },
    /// Check that every configured LLM backend answers.
    Doctor {
        #[command(flatten)]
        backend: BackendArgs,
    },
    /// Inspect or clear agent memory (long-term entries, episodic log).
    Memory {
        #[command(subcommand)]
        action: aam::MemoryAction,
        #[command(flatten)]
        memory: aam::MemoryArgs,
    },
    /// List journaled runs with their status (running, completed, failed,
    /// interrupted), or show one (`aisc runs show RUN_ID`).
    Runs {
        #[command(subcommand)]
        action: Option<RunsAction>,
        #[command(flatten)]
        memory: aam::MemoryArgs,
        /// JSON output (for the list: one object per line).
        #[arg(long, global = true)]
        json: bool,
        /// Only dead runs (their last attempt failed under a retry
        /// policy), with the reason; `aisc runs requeue ID` puts one back.
        #[arg(long)]
        dead: bool,
    },
    /// List the threads (`aisc run --thread ID` and `POST /v1/threads` make
    /// them), or show one with its state and runs (`aisc threads show ID`).
    Threads {
        #[command(subcommand)]
        action: Option<ThreadsAction>,
        #[command(flatten)]
        memory: aam::MemoryArgs,
        /// JSON output (for the list: one object per line).
        #[arg(long, global = true)]
        json: bool,
    },
    /// List the store's schedules (`aisc run --schedule CRON` adds one), or
    /// remove one (`aisc schedules remove ID`).
    Schedules {
        #[command(subcommand)]
        action: Option<SchedulesAction>,
        #[command(flatten)]
        memory: aam::MemoryArgs,
        /// JSON output, one object per line.
        #[arg(long, global = true)]
        json: bool,
    },
    /// Continue a killed or failed run: completed ops are replayed from the
    /// journal, not executed again (`last` for the most recent run).
    Resume {
        /// A run id from `aisc runs`, or `last`.
        run_id: String,
        #[command(flatten)]
        resume: runs::ResumeArgs,
        #[command(flatten)]
        backend: BackendArgs,
    },
    /// Fork a journaled run at one of its steps: a new run that replays the
    /// journal, takes the step's edited value (`--set`) and executes only
    /// the ops that depend on it. Without `--at`, lists the steps.
    Fork {
        /// A run id from `aisc runs`.
        run_id: String,
        #[command(flatten)]
        fork: fork::ForkArgs,
        #[command(flatten)]
        backend: BackendArgs,
    },
    /// Take queued runs from a shared store and run them (`aisc run
    /// --detach` queues them); a run whose worker died is taken over and
    /// resumed from its journal (docs/scale-out.md).
    Worker {
        #[command(flatten)]
        worker: worker::WorkerArgs,
        #[command(flatten)]
        backend: BackendArgs,
    },
    /// Migrate the run store's schema, or show its status.
    Store {
        #[command(subcommand)]
        action: worker::StoreAction,
        #[command(flatten)]
        memory: aam::MemoryArgs,
    },
    /// Print the episodic log of one run (`last` for the most recent).
    Trace {
        /// A run id from `aisc runs` or the run footer, or `last`.
        run_id: String,
        #[command(flatten)]
        memory: aam::MemoryArgs,
        /// One JSON record per line.
        #[arg(long)]
        json: bool,
    },
    /// Write one self-contained HTML report of a run (`last` for the most
    /// recent): its dataflow graph as it ran, a timeline with the critical
    /// path, each op's prompt, reply and tool arguments, and totals.
    Report {
        /// A run id from `aisc runs`, or `last`.
        run_id: String,
        /// The HTML file to write.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
        #[command(flatten)]
        memory: aam::MemoryArgs,
    },
    /// Draw a program's dataflow graph (calls linked to callees, regions to
    /// their control ops) as SVG, or as an HTML page for a `.html` output.
    Graph {
        /// The `.ais` source file (or an `.apxmobj` artifact).
        file: PathBuf,
        /// The `.svg` or `.html` file to write.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: PathBuf,
        #[command(flatten)]
        opt: OptArgs,
    },
    /// Rewrite `.ais` files in the canonical layout (comments kept), or
    /// check that they are in it (`--check`).
    Fmt(fmt::FmtArgs),
    /// Create a project: an example agent, a configuration (offline
    /// simulator; commented OpenAI-compatible, Anthropic and Ollama
    /// backends), a test script, a README and a .gitignore.
    New(new::NewArgs),
    /// Print a shell completion script for aisc.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Run the language server on stdin/stdout (for editors; see docs/editor.md).
    Lsp,
    /// List every tool a run would have (built-in, AAM, subprocess, MCP,
    /// remote agents) with its origin, argument schema and whether an agent
    /// may call it under the configuration's [access].
    Tools {
        /// The agent whose access is shown (`*`: an agent no rule names).
        #[arg(long, default_value = "*")]
        agent: String,
        /// One JSON object per tool.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        backend: BackendArgs,
    },
    /// Print the long explanation of a diagnostic code (e.g. `aisc explain E0100`).
    Explain {
        /// The code (e.g. `E0100`); without one, every code is listed.
        code: Option<String>,
        /// List every code with its title.
        #[arg(long)]
        list: bool,
    },
}

/// Optimization flags (shared by `build` and `run`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct OptArgs {
    /// Optimization level: -O0 none; -O1 canonicalize, fuse ask chains, CSE,
    /// DCE (the default); -O2 -O1 and a second clean-up round.
    #[arg(short = 'O', value_name = "LEVEL", value_parser = ["0", "1", "2"], conflicts_with = "passes")]
    pub level: Option<String>,
    /// An explicit pipeline, e.g. `canonicalize,fuse-ask{max-depth=3},dce`.
    #[arg(long, value_name = "PIPELINE")]
    pub passes: Option<String>,
    /// Verify the IR after every pass.
    #[arg(long)]
    pub verify_each: bool,
}

impl OptArgs {
    /// Checks `--passes` before anything is compiled: a bad pipeline is a
    /// usage error (exit 2) reported as its `O` diagnostic, with a caret
    /// in the pipeline text.
    pub fn check(&self, out: &mut Output) -> bool {
        let Some(p) = &self.passes else {
            return true;
        };
        match ais_ir::passes::Pipeline::parse(p) {
            Ok(_) => true,
            Err(e) => {
                let d = ais_ir::IntoDiagnostic::into_diagnostic(e);
                out.diagnostics("--passes", p, &[d]);
                false
            }
        }
    }

    pub fn options(&self) -> ais_compiler::driver::OptOptions {
        use ais_ir::passes::OptLevel;
        ais_compiler::driver::OptOptions {
            level: match self.level.as_deref() {
                Some("0") => OptLevel::O0,
                Some("2") => OptLevel::O2,
                _ => OptLevel::O1,
            },
            pipeline: self.passes.clone(),
            verify_each: self.verify_each,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum RunsAction {
    /// Show one run: status, arguments, result or error, and a summary of its
    /// journaled steps (`last` for the most recent run).
    Show {
        /// A run id from `aisc runs`, or `last`.
        run_id: String,
    },
    /// Put a dead run back in the queue: itself with its journal (completed
    /// calls replayed), or, with `--set`, a new run with edited inputs.
    Requeue {
        /// A run id from `aisc runs --dead`.
        run_id: String,
        /// Change an input of the run: NAME=VALUE (JSON, else text);
        /// repeatable. The edited run is queued as a new run.
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum ThreadsAction {
    /// A thread: its metadata, state (with version) and runs in order.
    Show {
        /// A thread id from `aisc threads`.
        id: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum SchedulesAction {
    /// Delete a schedule; the runs it already queued stay.
    Remove {
        /// A schedule id from `aisc schedules`.
        id: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum ConfigAction {
    /// Print the effective configuration (flags over environment over file), keys masked.
    Show,
}

/// Which LLM backend to use and how (shared by `run`, `config`, `doctor`,
/// `resume`). Global, so they are accepted after a nested subcommand too
/// (`aisc config show --config F`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct BackendArgs {
    /// Configuration file (default: ./.apxm/config.toml, then ~/.apxm/config.toml).
    #[arg(long, value_name = "PATH", global = true)]
    pub config: Option<PathBuf>,
    /// Backend name from the configuration (`sim` is always available).
    #[arg(long, value_name = "NAME", global = true)]
    pub backend: Option<String>,
    /// Stop the run when it has used this many tokens.
    #[arg(long, value_name = "N", global = true)]
    pub token_budget: Option<u64>,
    /// Store every LLM request/response in DIR.
    #[arg(long, value_name = "DIR", global = true)]
    pub record: Option<PathBuf>,
    /// Serve LLM replies from DIR only (no network; a missing entry is an error).
    #[arg(long, value_name = "DIR", conflicts_with = "record", global = true)]
    pub replay: Option<PathBuf>,
    /// Scale the simulator's per-latency-class delays (0 = instant).
    #[arg(long, value_name = "F", global = true)]
    pub sim_delay_scale: Option<f64>,
}

impl BackendArgs {
    pub fn settings(&self) -> Result<ais_vm::config::Settings, ais_vm::config::ConfigError> {
        let flags = ais_vm::config::Flags {
            config: self.config.clone(),
            backend: self.backend.clone(),
            token_budget: self.token_budget,
            record: self.record.clone(),
            replay: self.replay.clone(),
            sim_delay_scale: self.sim_delay_scale,
        };
        ais_vm::config::Settings::load(&flags, &ais_vm::config::Env::from_process())
    }
}

/// Runs the CLI and returns the process exit code.
pub fn main_with_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let mut cli = cli;
    match &mut cli.command {
        Command::Run {
            file, run, backend, ..
        } => config::adopt_project(file, &mut backend.config, Some(&mut run.memory)),
        Command::Check { files, config, .. } => {
            if let Some(first) = files.first() {
                config::adopt_project(&first.clone(), config, None);
            }
        }
        _ => {}
    }
    let mut out = Output::new(cli.error_format, cli.color);
    aam::set_config_path(match &cli.command {
        Command::Run { backend, .. }
        | Command::Serve { backend, .. }
        | Command::Mcp { backend, .. }
        | Command::Resume { backend, .. }
        | Command::Fork { backend, .. }
        | Command::Worker { backend, .. }
        | Command::Config { backend, .. }
        | Command::Doctor { backend } => backend.config.clone(),
        _ => None,
    });
    match cli.command {
        Command::Check {
            files,
            deny_warnings,
            flows,
            config,
        } => match check::flow_policy(config.clone()) {
            Ok(policy) => {
                let backend = BackendArgs {
                    config,
                    ..BackendArgs::default()
                };
                let policy = match config::load_all(&backend) {
                    Ok((_, aam)) => load::with_remote_agents(policy, &aam),
                    Err(_) => policy,
                };
                check::check(&mut out, &files, deny_warnings, flows, &policy, &backend)
            }
            Err(e) => {
                eprintln!("error: {e}");
                2
            }
        },
        Command::Build { opt, .. } if !opt.check(&mut out) => 2,
        Command::Build {
            file,
            emit,
            output,
            stats,
            opt,
        } => match (emit, output) {
            (_, Some(output)) => load::build_artifact(&mut out, &file, &output, &opt),
            (Some(emit), None) => check::build(&mut out, &file, emit, &opt, stats),
            (None, None) => 2,
        },
        Command::Run { opt, .. } if !opt.check(&mut out) => 2,
        Command::Run {
            file,
            run,
            opt,
            backend,
        } => run::run(&mut out, &file, &run, &opt, &backend),
        Command::Serve { opt, .. } | Command::Mcp { opt, .. } if !opt.check(&mut out) => 2,
        Command::Serve {
            files,
            listen,
            runs,
            opt,
            backend,
        } => serve::serve(&mut out, &files, &listen, &runs, &opt, &backend),
        Command::Mcp {
            files,
            runs,
            opt,
            backend,
        } => serve::mcp(&mut out, &files, &runs, &opt, &backend),
        Command::Inspect { file } => load::inspect(&mut out, &file),
        Command::Ops { name, json } => ops::ops(&mut out, name.as_deref(), json),
        Command::Analyze { opt, .. } if !opt.check(&mut out) => 2,
        Command::Analyze { file, json, opt } => analyze::analyze(&mut out, &file, &opt, json),
        Command::Explain { code, list } => check::explain_cmd(code, list),
        Command::Tools {
            agent,
            json,
            backend,
        } => tools::tools(&backend, &agent, json),
        Command::Fmt(args) => fmt::fmt(&mut out, &args),
        Command::New(args) => new::new(&args),
        Command::Completions { shell } => new::completions(shell),
        Command::Lsp => match ais_lsp::run_stdio() {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error: aisc lsp: {e}");
                1
            }
        },
        Command::Memory { action, memory } => aam::memory(&action, &memory),
        Command::Runs {
            action: None,
            memory,
            json,
            dead: true,
        } => dead::dead(&memory, json),
        Command::Runs {
            action: None,
            memory,
            json,
            dead: false,
        } => runs::runs(&memory, json),
        Command::Runs {
            action: Some(RunsAction::Show { run_id }),
            memory,
            json,
            ..
        } => runs::show(&memory, &run_id, json),
        Command::Threads {
            action,
            memory,
            json,
        } => {
            let show = action
                .as_ref()
                .map(|ThreadsAction::Show { id }| id.as_str());
            threads::threads(show, &memory, json)
        }
        Command::Schedules {
            action,
            memory,
            json,
        } => {
            let remove = action
                .as_ref()
                .map(|SchedulesAction::Remove { id }| id.as_str());
            queue::schedules(remove, &memory, json)
        }

        Command::Runs {
            action: Some(RunsAction::Requeue { run_id, set }),
            memory,
            ..
        } => dead::requeue(&memory, &run_id, &set),
        Command::Resume {
            run_id,
            resume,
            backend,
        } => runs::resume(&mut out, &run_id, &resume, &backend),
        Command::Fork {
            run_id,
            fork,
            backend,
        } => fork::fork(&mut out, &run_id, &fork, &backend),
        Command::Trace {
            run_id,
            memory,
            json,
        } => aam::trace(&run_id, &memory, json),
        Command::Report {
            run_id,
            output,
            memory,
        } => report::report(&run_id, &memory, &output),
        Command::Graph { file, output, opt } => report::graph(&mut out, &file, &opt, &output),
        Command::Worker { worker, backend } => worker::worker(&worker, &backend),
        Command::Store { action, memory } => worker::store(&action, &memory),
        Command::Config {
            action: ConfigAction::Show,
            backend,
        } => match config::load_all(&backend) {
            Ok((settings, aam)) => {
                print!("{}", settings.show());
                print!("{}", tools_config::show(&settings, &aam));
                0
            }
            Err(e) => config::report(&mut out, &e),
        },
        Command::Doctor { backend } => match config::load_all(&backend) {
            Ok((settings, aam)) => {
                let report = settings.doctor();
                print!("{report}");
                let (tools, tools_ok) = tools_config::doctor(&aam);
                if !tools.is_empty() {
                    print!("\n{tools}");
                }
                i32::from(!report.all_ok() || !tools_ok)
            }
            Err(e) => config::report(&mut out, &e),
        },
    }
}
