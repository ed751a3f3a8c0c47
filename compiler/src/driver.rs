//! The front-end pipeline as one call: source text in, AST + index +
//! diagnostics out. Used by the CLI and by tests.

use crate::lower;
use crate::program::{self, Loader, ParsedProgram};
use crate::sema::{self, ProgramIndex};
use crate::syntax::ast;
use ais_ir::{Diagnostic, Severity, SourceMap};
use std::path::Path;

pub struct FrontEnd {
    /// Every file of the program; spans index into it.
    pub sources: SourceMap,
    /// The agents of every file, joined (the entry file's first).
    pub file: ast::File,
    pub index: ProgramIndex,
    /// Syntax, then semantic diagnostics, each group in source order.
    pub diagnostics: Vec<Diagnostic>,
}

impl FrontEnd {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    pub fn count(&self, severity: Severity) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == severity)
            .count()
    }
}

/// Parses and checks one source file. Semantic analysis runs even when there
/// are syntax errors (on the recovered tree), so a single run reports as much
/// as possible.
///
/// The checker (and the tree's destructor) recurse over expression nesting;
/// callers handling untrusted input run this inside [`with_deep_stack`], as
/// the CLI does.
pub fn check_source(source: &str) -> FrontEnd {
    check_source_here(source, &sema::Environment::default())
}

/// [`check_source`] against an environment (the configuration's tools).
pub fn check_source_in(source: &str, env: &sema::Environment) -> FrontEnd {
    check_source_here(source, env)
}

thread_local! {
    /// Set on a thread [`with_deep_stack`] started.
    static ON_DEEP_STACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` on a thread with a large stack. The parser is table driven, but
/// the checker and the tree's destructor recurse over nesting, and a
/// pathological (or generated) input must not overflow a small default stack.
///
/// Called again on such a thread (`aisc` runs its whole command on one, and
/// the commands call this around each phase), `f` runs right there. Besides
/// sparing a thread, this keeps a whole compilation on one thread, and so in
/// one glibc malloc arena: a new thread gets an arena of its own, where
/// the memory the front end freed (the syntax tree, each flow's graph once
/// compiled) could not serve the later phases on the calling thread. That
/// split made `aisc build` peak 40 % higher and `aisc check` 55 % higher
/// (`agents`, 100k ops; docs/bench/compile-scale.md).
pub fn with_deep_stack<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    const STACK: usize = 512 << 20; // reserved address space; only touched pages cost memory
    if ON_DEEP_STACK.with(|d| d.get()) {
        return f();
    }
    std::thread::scope(|scope| {
        match std::thread::Builder::new()
            .stack_size(STACK)
            .spawn_scoped(scope, || {
                ON_DEEP_STACK.with(|d| d.set(true));
                f()
            }) {
            Ok(handle) => match handle.join() {
                Ok(v) => v,
                Err(panic) => std::panic::resume_unwind(panic),
            },
            // No thread available: run here rather than fail.
            Err(_) => unreachable_thread_fallback(),
        }
    })
}

#[cold]
fn unreachable_thread_fallback<T>() -> T {
    // Spawning failed (resource exhaustion); there is no sensible way to go on.
    eprintln!("error: could not start the compiler thread (out of resources)");
    std::process::exit(101)
}

/// Source given without a path imports only the bundled library: text
/// from elsewhere (an MCP client, a model) must not read this machine's
/// files through `import` (E0010 for any other path).
fn check_source_here(source: &str, env: &sema::Environment) -> FrontEnd {
    check_program(
        program::parse_program("input.ais", None, source, &program::NoFiles),
        env,
    )
}

/// Reads, parses and checks the program whose entry file is `path` (named
/// `name` in diagnostics, its text `source`), with every file it imports.
pub fn check_file(
    name: &str,
    path: &Path,
    source: &str,
    loader: &dyn Loader,
    env: &sema::Environment,
) -> FrontEnd {
    check_program(
        program::parse_program(name, Some(path), source, loader),
        env,
    )
}

/// Checks a parsed program (all of its files as one).
pub fn check_program(mut parsed: ParsedProgram, env: &sema::Environment) -> FrontEnd {
    // The reference's `resume(checkpoint:)` as its pause's answer, then
    // its named arguments of built-ins as ours.
    crate::syntax::resume::rewrite(&mut parsed.file);
    crate::syntax::refargs::rewrite(&mut parsed.file);
    let checked = sema::check_in(&parsed.file, env);
    let several_files = parsed.sources.files().len() > 1;
    let mut diagnostics = parsed.diagnostics;
    let holes = sema::holes::single_brace_holes(&parsed.file, &parsed.sources);
    let meanings = sema::meanings::check(&parsed.file, &checked.index);
    diagnostics.extend(
        checked
            .errors
            .into_iter()
            .chain(holes)
            .chain(meanings)
            .map(ais_ir::IntoDiagnostic::into_diagnostic)
            // A file that imports others and marks no `@entry` is a library
            // (docs/language.md, "Multi-file programs"): `aisc run` still
            // asks for `--entry`, but checking it is no reason to warn.
            .filter(|d| !(several_files && d.code == "W0005")),
    );
    let mut fe = FrontEnd {
        sources: parsed.sources,
        file: parsed.file,
        index: checked.index,
        diagnostics,
    };
    if !fe.has_errors() && lower::has_computed_beliefs(&fe.file) {
        let found = belief_effect_errors(&fe);
        fe.diagnostics.extend(found);
    }
    fe
}

/// E0126: a belief initialiser that reaches an effect. Checked on the
/// lowered program, because a called flow's effects count too; the rule is
/// `ais_ir::effects`, shared with the verifier and the artifact loader.
fn belief_effect_errors(fe: &FrontEnd) -> Vec<Diagnostic> {
    let module = lower::lower(&fe.file, &fe.index);
    ais_ir::effects::belief_effects(&module)
        .into_iter()
        .map(|e| {
            let kind = match e.opcode.effect() {
                ais_ir::Effect::Llm => "an LLM call",
                ais_ir::Effect::Tool => "a tool call",
                ais_ir::Effect::MemRead => "a memory or belief read",
                ais_ir::Effect::MemWrite => "a memory or belief write",
                _ => "I/O",
            };
            let what = match &e.via {
                Some(flow) => format!("{kind}, `{}`, in flow `{flow}`, which it calls", e.opcode),
                None => format!("{kind}, `{}`", e.opcode),
            };
            Diagnostic::error(
                "E0126",
                format!("belief `{}` is initialised with a side effect ({what})", e.belief),
                e.span,
            )
            .with_label("an effect in a belief initialiser")
            .with_secondary(e.belief_span, format!("`{}` is initialised here", e.belief))
            .with_note("belief initialisers run before the run starts, outside the journal, the flow policy and the budget, and again on every resume")
            .with_help(format!(
                "initialise `{}` with a value and assign it in a flow: `{} = ...`",
                e.belief, e.belief
            ))
        })
        .collect()
}

/// A program compiled to IR, with the front end's warnings.
pub struct Compiled {
    pub module: ais_ir::Module,
    /// Warnings (there are no errors when compilation succeeds).
    pub diagnostics: Vec<Diagnostic>,
}

/// Checks and lowers a source file to verified IR. On errors returns every
/// diagnostic (errors and warnings).
///
/// Lowered IR always verifies; if it does not, that is a compiler bug and is
/// reported as an internal error (E9999) naming the verifier's complaint.
pub fn compile_source(source: &str) -> Result<Compiled, Vec<Diagnostic>> {
    compile_source_in(source, &sema::Environment::default())
}

/// [`compile_source`] against an environment (the configuration's tools).
pub fn compile_source_in(
    source: &str,
    env: &sema::Environment,
) -> Result<Compiled, Vec<Diagnostic>> {
    compile_checked(check_source_here(source, env))
}

/// [`compile_source`] for a program of several files ([`check_file`]);
/// the source map is returned either way, to render the diagnostics.
pub fn compile_file(
    name: &str,
    path: &Path,
    source: &str,
    loader: &dyn Loader,
    env: &sema::Environment,
) -> (SourceMap, Result<Compiled, Vec<Diagnostic>>) {
    let mut fe = check_file(name, path, source, loader, env);
    let sources = std::mem::take(&mut fe.sources);
    (sources, compile_checked(fe))
}

fn compile_checked(fe: FrontEnd) -> Result<Compiled, Vec<Diagnostic>> {
    match lower_checked(&fe) {
        Ok(module) => Ok(Compiled {
            module,
            diagnostics: fe.diagnostics,
        }),
        Err(problems) => {
            let mut all = fe.diagnostics;
            all.extend(problems);
            Err(all)
        }
    }
}

/// Lowers a checked program to verified IR without consuming it (`aisc
/// check` keeps the front end for its report and lowers the same tree for
/// the flow warnings, instead of parsing and checking the file again).
/// Errors: the front end's errors, or the verifier's as internal errors
/// (E9999); the front end's own diagnostics are not repeated.
pub fn lower_checked(fe: &FrontEnd) -> Result<ais_ir::Module, Vec<Diagnostic>> {
    if fe.has_errors() {
        return Err(Vec::new());
    }
    let module = lower::lower(&fe.file, &fe.index);
    let problems: Vec<Diagnostic> = ais_ir::verify_diagnostics(&module)
        .into_iter()
        .filter(Diagnostic::is_error)
        .map(|d| {
            Diagnostic::error(
                "E9999",
                format!(
                    "internal compiler error: lowered IR does not verify: {}",
                    d.message
                ),
                d.primary.span,
            )
            .with_note("this is a bug in aisc; please report it with the program")
        })
        .collect();
    if !problems.is_empty() {
        // Debugging aid for compiler developers: show the IR that failed.
        if std::env::var_os("AISC_DUMP_UNVERIFIED_IR").is_some() {
            eprintln!("{}", ais_ir::print_module(&module));
        }
        return Err(problems);
    }
    Ok(module)
}

/// [`compile_source`] without the warnings, for tools that only want IR.
pub fn lower_source(source: &str) -> Result<ais_ir::Module, Vec<Diagnostic>> {
    compile_source(source).map(|c| c.module)
}

/// How to optimize: a preset level or an explicit pipeline string.
#[derive(Clone, Debug, Default)]
pub struct OptOptions {
    pub level: ais_ir::passes::OptLevel,
    /// `--passes=...` overrides the level.
    pub pipeline: Option<String>,
    /// Verify after every pass (always on in tests).
    pub verify_each: bool,
}

/// Runs the optimization pipeline over verified IR. A failure is either a
/// bad pipeline string (the user's) or a pass producing invalid IR (ours).
pub fn optimize(
    module: &mut ais_ir::Module,
    opts: &OptOptions,
) -> Result<ais_ir::passes::Stats, String> {
    use ais_ir::passes::PassManager;
    let mut pm = match &opts.pipeline {
        Some(p) => PassManager::parse(p).map_err(|e| format!("invalid --passes: {e}"))?,
        None => PassManager::new(opts.level),
    };
    pm.verify_each(opts.verify_each);
    pm.run(module).map_err(pass_failure)
}

/// [`optimize`] without the per-pass statistics (for a caller that does
/// not show them: they cost a walk of every flow after every pass).
pub fn optimize_unmeasured(module: &mut ais_ir::Module, opts: &OptOptions) -> Result<(), String> {
    use ais_ir::passes::PassManager;
    let mut pm = match &opts.pipeline {
        Some(p) => PassManager::parse(p).map_err(|e| format!("invalid --passes: {e}"))?,
        None => PassManager::new(opts.level),
    };
    pm.verify_each(opts.verify_each);
    pm.run_unmeasured(module).map_err(pass_failure)
}

fn pass_failure(f: ais_ir::passes::VerifyFailure) -> String {
    format!(
        "internal compiler error: pass `{}` produced invalid IR: {}",
        f.pass,
        f.errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::with_deep_stack;

    /// A nested call stays on the deep thread (one thread, so one malloc
    /// arena, for a whole compilation), and a call from elsewhere gets one.
    #[test]
    fn nested_deep_stack_runs_on_the_same_thread() {
        let here = std::thread::current().id();
        let (outer, inner) = with_deep_stack(|| {
            let outer = std::thread::current().id();
            (outer, with_deep_stack(|| std::thread::current().id()))
        });
        assert_ne!(outer, here);
        assert_eq!(inner, outer);
        // The flag belongs to the deep thread: this one still spawns.
        assert_ne!(with_deep_stack(|| std::thread::current().id()), here);
    }
}
