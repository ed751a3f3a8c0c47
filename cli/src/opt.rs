//! `ais-opt`: runs IR passes on textual IR (`.aisir`) or on `.ais` source,
//! like `mlir-opt`. See `docs/passes.md`.
//!
//! ```text
//! ais-opt FILE [--passes=canonicalize,fuse-ask{max-depth=3},cse,dce | -O0|-O1|-O2]
//!              [-o OUT] [--verify-each] [--print-ir-before=P] [--print-ir-after=P]
//!              [--print-ir-before-all] [--print-ir-after-all] [--print-ir-after-change]
//!              [--pass-stats[=counts]] [--analyze=critical-path|prompt-cache] [--list-passes]
//! ```
//!
//! The IR goes to stdout (or `-o`); IR dumps, statistics and human
//! diagnostics go to stderr; an analysis report follows the IR on stdout as
//! `//` comment lines (so the output still parses). With no passes the
//! input is printed back in canonical form.
//!
//! [`run`] does all the work without touching the process's streams (the
//! golden tests call it); [`main_with_args`] prints its [`Outcome`].

use ais_compiler::diagnostics::{hidden_json, hidden_note, limit, render_human, render_json};
use ais_ir::passes::{
    critical_path, pass_names, OptLevel, PassManager, Pipeline, PrintOptions, PASSES,
};
use ais_ir::{Diagnostic, IntoDiagnostic};
use clap::{Parser, ValueEnum};
use std::ffi::OsString;
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "ais-opt",
    version,
    about = "Run AIS IR passes on textual IR (.aisir) or AIS source (.ais)"
)]
pub struct OptCli {
    /// Input file (`.aisir` or `.ais`); `-` or nothing reads `.aisir` from stdin.
    pub file: Option<PathBuf>,
    /// Pipeline, e.g. `canonicalize,fuse-ask{max-depth=3},cse,dce`.
    #[arg(long, conflicts_with = "opt_level")]
    pub passes: Option<String>,
    /// Optimization preset: `-O0` (none), `-O1` (canonicalize,fuse-ask,cse,dce,cache-layout), `-O2` (-O1 with a second canonicalize,cse,dce round before cache-layout).
    #[arg(short = 'O', value_name = "LEVEL", value_parser = parse_level)]
    pub opt_level: Option<OptLevel>,
    /// Write the IR here instead of stdout.
    #[arg(short = 'o', value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// Verify the module after every pass.
    #[arg(long)]
    pub verify_each: bool,
    /// Print the IR before every run of these passes (comma-separated names).
    #[arg(long, value_delimiter = ',', value_name = "PASS")]
    pub print_ir_before: Vec<String>,
    /// Print the IR after every run of these passes (comma-separated names).
    #[arg(long, value_delimiter = ',', value_name = "PASS")]
    pub print_ir_after: Vec<String>,
    #[arg(long)]
    pub print_ir_before_all: bool,
    #[arg(long)]
    pub print_ir_after_all: bool,
    /// Print the IR after each pass that changed it.
    #[arg(long)]
    pub print_ir_after_change: bool,
    /// Per-pass statistics on stderr (`counts`: without timings, deterministic).
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "full", value_name = "WHAT")]
    pub pass_stats: Option<StatsFormat>,
    /// Print an analysis after the IR.
    #[arg(long, value_enum, value_name = "ANALYSIS")]
    pub analyze: Vec<Analysis>,
    /// How to read the input (default: by extension, `.ais` is source).
    #[arg(long, value_enum, default_value_t = InputFormat::Auto)]
    pub input_format: InputFormat,
    /// List the registered passes and exit.
    #[arg(long)]
    pub list_passes: bool,
    /// How diagnostics are printed.
    #[arg(long, value_enum, default_value_t = ErrorFormat::Human)]
    pub error_format: ErrorFormat,
    /// Colour in human-readable diagnostics.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

fn parse_level(s: &str) -> Result<OptLevel, String> {
    OptLevel::parse(s).ok_or_else(|| format!("unknown optimization level `{s}` (use 0, 1 or 2)"))
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum StatsFormat {
    Full,
    Counts,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Analysis {
    CriticalPath,
    /// Expected prompt-cache hit rate per `cache_key` class.
    PromptCache,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum InputFormat {
    Auto,
    Aisir,
    Ais,
}

/// The same output choices as `aisc`.
pub use crate::{ColorChoice, ErrorFormat};

/// What a run produced: the text for stdout and stderr, and the exit code
/// (0 success, 1 errors in the input or a pass, 2 usage).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

/// Runs `ais-opt` with these arguments (the first is the program name).
/// Reads the input file (or stdin) and writes `-o`, but prints nothing.
pub fn run(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> Outcome {
    let cli = match OptCli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let text = e.render().to_string();
            return if e.use_stderr() {
                Outcome {
                    stderr: text,
                    code: 2,
                    ..Outcome::default()
                }
            } else {
                Outcome {
                    stdout: text,
                    ..Outcome::default()
                }
            };
        }
    };
    Run::new(&cli).execute(&cli)
}

/// Runs with the process arguments and streams; returns the exit code.
pub fn main_with_args(args: impl IntoIterator<Item = OsString>) -> i32 {
    let args: Vec<OsString> = args.into_iter().collect();
    let out = run(args);
    let _ = std::io::stdout().lock().write_all(out.stdout.as_bytes());
    let _ = std::io::stderr().lock().write_all(out.stderr.as_bytes());
    out.code
}

struct Run {
    out: Outcome,
    color: bool,
    json: bool,
}

impl Run {
    fn new(cli: &OptCli) -> Run {
        let color = match cli.color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                    && std::io::stderr().is_terminal()
            }
        };
        Run {
            out: Outcome::default(),
            color,
            json: cli.error_format == ErrorFormat::Json,
        }
    }

    fn diagnostics(&mut self, file: &str, source: &str, diags: &[Diagnostic]) {
        let (shown, hidden) = limit(source, diags);
        for d in shown {
            if self.json {
                self.out
                    .stdout
                    .push_str(&format!("{}\n", render_json(d, file, source)));
            } else {
                self.out
                    .stderr
                    .push_str(&render_human(d, file, source, self.color));
            }
        }
        if hidden > 0 {
            if self.json {
                self.out
                    .stdout
                    .push_str(&format!("{}\n", hidden_json(file, hidden)));
            } else {
                self.out
                    .stderr
                    .push_str(&format!("{}\n", hidden_note(file, hidden)));
            }
        }
    }

    /// A problem with no source location (I/O).
    fn plain_error(&mut self, message: &str) {
        if self.json {
            self.out.stdout.push_str(&format!(
                "{}\n",
                serde_json::json!({"$message_type": "diagnostic", "message": message, "code": null, "level": "error", "spans": [], "children": [], "rendered": format!("error: {message}\n")})
            ));
        } else {
            self.out.stderr.push_str(&format!("error: {message}\n"));
        }
    }

    fn fail(mut self) -> Outcome {
        self.out.code = 1;
        self.out
    }

    fn execute(mut self, cli: &OptCli) -> Outcome {
        if cli.list_passes {
            for (name, about) in PASSES {
                self.out.stdout.push_str(&format!("{name:<14}{about}\n"));
            }
            self.out.stdout.push_str(
                "\npresets: -O0 (none), -O1 = canonicalize,fuse-ask,cse,dce,cache-layout, -O2 = canonicalize,fuse-ask,cse,dce + canonicalize,cse,dce + cache-layout\n\
                 analyses (--analyze): critical-path, prompt-cache\n",
            );
            return self.out;
        }
        // The pipeline first: a typo should not wait for a large input.
        let pipeline = match (&cli.passes, cli.opt_level) {
            (Some(text), _) => match Pipeline::parse(text) {
                Ok(p) => p,
                Err(e) => {
                    self.diagnostics("<pipeline>", text, &[e.into_diagnostic()]);
                    return self.fail();
                }
            },
            (None, Some(level)) => level.pipeline(),
            (None, None) => Pipeline::default(),
        };
        for name in cli.print_ir_before.iter().chain(&cli.print_ir_after) {
            if !pass_names().contains(&name.as_str()) {
                self.plain_error(&format!(
                    "unknown pass `{name}` in --print-ir-before/--print-ir-after (known: {})",
                    pass_names().join(", ")
                ));
                return self.fail();
            }
        }
        // Input.
        let (file, source) = match &cli.file {
            Some(p) if p.as_os_str() != "-" => match std::fs::read(p) {
                Ok(bytes) => match String::from_utf8(bytes) {
                    Ok(s) => (p.display().to_string(), s),
                    Err(e) => {
                        self.plain_error(&format!(
                            "cannot read `{}`: file is not valid UTF-8 (byte {})",
                            p.display(),
                            e.utf8_error().valid_up_to()
                        ));
                        return self.fail();
                    }
                },
                Err(e) => {
                    self.plain_error(&format!("cannot read `{}`: {e}", p.display()));
                    return self.fail();
                }
            },
            _ => {
                let mut s = String::new();
                if let Err(e) = std::io::stdin().read_to_string(&mut s) {
                    self.plain_error(&format!("cannot read standard input: {e}"));
                    return self.fail();
                }
                ("<stdin>".to_string(), s)
            }
        };
        let is_source = match cli.input_format {
            InputFormat::Ais => true,
            InputFormat::Aisir => false,
            InputFormat::Auto => cli
                .file
                .as_ref()
                .and_then(|p| p.extension())
                .is_some_and(|e| e == "ais"),
        };
        let mut module = if is_source {
            match ais_compiler::driver::lower_source(&source) {
                Ok(m) => m,
                Err(diags) => {
                    // Warnings alone never fail lowering; errors are here.
                    self.diagnostics(&file, &source, &diags);
                    return self.fail();
                }
            }
        } else {
            match ais_ir::parse_module(&source) {
                Ok(m) => m,
                Err(errors) => {
                    let diags: Vec<Diagnostic> = errors
                        .into_iter()
                        .map(IntoDiagnostic::into_diagnostic)
                        .collect();
                    self.diagnostics(&file, &source, &diags);
                    return self.fail();
                }
            }
        };
        // Passes assume verified input.
        let errors: Vec<Diagnostic> = ais_ir::verify_errors(&module)
            .into_iter()
            .map(IntoDiagnostic::into_diagnostic)
            .collect();
        if !errors.is_empty() {
            self.diagnostics(&file, &source, &errors);
            return self.fail();
        }
        let mut pm = match PassManager::from_pipeline(&pipeline) {
            Ok(pm) => pm,
            Err(e) => {
                let text = pipeline.to_string();
                self.diagnostics("<pipeline>", &text, &[e.into_diagnostic()]);
                return self.fail();
            }
        };
        pm.verify_each(cli.verify_each);
        pm.print(PrintOptions {
            before: cli.print_ir_before.clone(),
            after: cli.print_ir_after.clone(),
            before_all: cli.print_ir_before_all,
            after_all: cli.print_ir_after_all,
            after_change: cli.print_ir_after_change,
        });
        let result = pm.run(&mut module);
        self.out.stderr.push_str(&pm.take_dumps());
        let stats = match result {
            Ok(stats) => stats,
            Err(failure) => {
                self.plain_error(&format!(
                    "{failure}; this is a bug in the pass (the IR it produced is below)"
                ));
                let diags: Vec<Diagnostic> = failure
                    .errors
                    .into_iter()
                    .map(IntoDiagnostic::into_diagnostic)
                    .collect();
                self.diagnostics(&file, &source, &diags);
                self.out.stderr.push_str(&format!(
                    "// ----- IR after {} (invalid) ----- //\n{}",
                    failure.pass, failure.ir
                ));
                return self.fail();
            }
        };
        if let Some(format) = cli.pass_stats {
            self.out
                .stderr
                .push_str(&stats.render(format == StatsFormat::Full));
        }
        let ir = ais_ir::print_module(&module);
        match &cli.output {
            Some(path) if path.as_os_str() != "-" => {
                if let Err(e) = std::fs::write(path, &ir) {
                    self.plain_error(&format!("cannot write `{}`: {e}", path.display()));
                    return self.fail();
                }
            }
            _ => self.out.stdout.push_str(&ir),
        }
        for a in &cli.analyze {
            match a {
                Analysis::CriticalPath => {
                    self.out.stdout.push_str(&critical_path(&module).render());
                }
                Analysis::PromptCache => {
                    self.out
                        .stdout
                        .push_str(&ais_ir::passes::cache_estimate(&module).render());
                }
            }
        }
        self.out
    }
}
