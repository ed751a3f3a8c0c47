//! `aisc check`, `aisc build` (without `-o`) and `aisc explain`: the
//! compiler's findings and outputs, rendered at the edge.

use super::load::{self, compile_input};
use super::output::Output;
use super::{BackendArgs, Emit, OptArgs};
use ais_compiler::diagnostics::explain;
use ais_compiler::driver;
use ais_compiler::graph_json;
use ais_compiler::syntax::lexer;
use std::path::PathBuf;

/// The `[policy]` of the config `aisc run` would use (the default policy
/// without one).
pub(crate) fn flow_policy(config: Option<PathBuf>) -> Result<ais_ir::ifc::FlowPolicy, String> {
    let flags = ais_vm::config::Flags {
        config,
        ..Default::default()
    };
    let env = ais_vm::config::Env::from_process();
    match ais_vm::config::find_config_file(&flags, &env) {
        Some(p) => ais_vm::config::Config::load(&p)
            .map(|c| c.policy)
            .map_err(|e| e.to_string()),
        None => Ok(ais_ir::ifc::FlowPolicy::default()),
    }
}

pub(crate) fn check(
    out: &mut Output,
    files: &[PathBuf],
    deny_warnings: bool,
    flows_only: bool,
    policy: &ais_ir::ifc::FlowPolicy,
    backend: &BackendArgs,
) -> i32 {
    let mut failed = false;
    for path in files {
        let Some(source) = out.read_source(path) else {
            failed = true;
            continue;
        };
        let name = path.display().to_string();
        if graph_json::is_graph_json(path, &source) {
            failed |= check_graph(out, &name, &source);
            continue;
        }
        let remote = load::remote_agents(backend);
        let plain = ais_compiler::sema::Environment {
            remote_agents: remote.clone(),
            ..Default::default()
        };
        let mut env = plain;
        let fs = ais_compiler::program::FsLoader;
        let check = |env: &ais_compiler::sema::Environment| {
            driver::with_deep_stack(|| driver::check_file(&name, path, &source, &fs, env))
        };
        let mut fe = check(&env);
        // A name nothing in the language provides may be a configured tool.
        if fe.diagnostics.iter().any(|d| d.code == "E0114") {
            let mut configured = load::configured_tools(backend);
            if !configured.tools.is_empty() {
                configured.remote_agents = remote;
                env = configured;
                fe = check(&env);
            }
        }
        if !fe.has_errors() {
            let found = flow_findings(&mut fe, policy);
            if flows_only {
                fe.diagnostics = found;
            } else {
                fe.diagnostics.extend(found);
            }
        }
        out.diagnostics_map(&fe.sources, &fe.diagnostics);
        let errors = fe.count(ais_ir::Severity::Error);
        let warnings = fe.count(ais_ir::Severity::Warning);
        if errors > 0 || ((deny_warnings || flows_only) && warnings > 0) {
            failed = true;
        }
        let flows: usize = fe.index.agents.values().map(|a| a.flows.len()).sum();
        let agents = fe.index.agents.len();
        // The process ends right after checking: freeing the tree node by node
        // would only cost time (about a tenth of a large check).
        std::mem::forget(fe);
        out.summary(
            &format!(
                "{name}: {agents} agent{}, {flows} flow{}; {errors} error{}, {warnings} warning{}",
                plural(agents),
                plural(flows),
                plural(errors),
                plural(warnings),
            ),
            serde_json::json!({"file": name, "agents": agents, "flows": flows, "errors": errors, "warnings": warnings}),
        );
    }
    i32::from(failed)
}

/// The flow warnings of a checked program under `policy` (none if it does
/// not compile: the other diagnostics say why). Lowers the tree already
/// checked: parsing and checking again held a second copy of it.
///
/// The tree is freed once lowered, as `aisc build` does: kept (the check
/// report needs only the diagnostics and the index), it made `check` use
/// more memory per op than `build`.
fn flow_findings(
    fe: &mut driver::FrontEnd,
    policy: &ais_ir::ifc::FlowPolicy,
) -> Vec<ais_ir::Diagnostic> {
    let compiled = driver::with_deep_stack(|| {
        let module = driver::lower_checked(fe);
        let span = fe.file.span;
        let file = std::mem::replace(
            &mut fe.file,
            ais_compiler::syntax::ast::File {
                imports: Vec::new(),
                agents: Vec::new(),
                span,
            },
        );
        drop(file);
        module
    });
    match compiled.map(ais_ir::bytecode::compile_owned) {
        Ok(Ok(p)) => ais_compiler::flows::check(&p, policy)
            .iter()
            .map(ais_compiler::flows::Finding::to_diagnostic)
            .collect(),
        _ => Vec::new(),
    }
}

/// `aisc check` on a graph-JSON file; true when it failed.
fn check_graph(out: &mut Output, name: &str, source: &str) -> bool {
    // Region nesting is recursive: deep stack, as for source.
    match driver::with_deep_stack(|| graph_json::compile_with_warnings(source)) {
        Ok((m, warnings)) => {
            out.diagnostics(name, source, &warnings);
            let agents = m.agents.len();
            let flows: usize = m.agents.iter().map(|(_, a)| a.flows.len()).sum();
            let w = warnings.len();
            out.summary(
                &format!(
                    "{name}: {agents} agent{}, {flows} flow{}; 0 errors, {w} warning{}",
                    plural(agents),
                    plural(flows),
                    plural(w),
                ),
                serde_json::json!({"file": name, "agents": agents, "flows": flows, "errors": 0, "warnings": w}),
            );
            false
        }
        Err(diags) => {
            out.diagnostics(name, source, &diags);
            let errors = diags.iter().filter(|d| d.is_error()).count();
            out.summary(
                &format!("{name}: {errors} error{}", plural(errors)),
                serde_json::json!({"file": name, "errors": errors, "warnings": 0}),
            );
            true
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

pub(crate) fn build(
    out: &mut Output,
    path: &std::path::Path,
    emit: Emit,
    opt: &OptArgs,
    stats: bool,
) -> i32 {
    let Some(source) = out.read_source(path) else {
        return 1;
    };
    let name = path.display().to_string();
    if graph_json::is_graph_json(path, &source) && matches!(emit, Emit::Tokens | Emit::Ast) {
        eprintln!(
            "error: `--emit tokens` and `--emit ast` need `.ais` source; `{name}` is graph JSON"
        );
        return 2;
    }
    match emit {
        Emit::Tokens => {
            let (tokens, _) = lexer::lex(&source);
            let mut text = String::new();
            for (l, tok, r) in tokens {
                let (line, col) = ais_ir::diag::line_col(&source, l);
                text.push_str(&format!("{line}:{col}\t{l}..{r}\t{tok:?}\n"));
            }
            out.stdout(&text);
            // Lexical errors are reported like any other.
            let fe = ais_compiler::syntax::parse(&source);
            let diags: Vec<_> = fe
                .errors
                .into_iter()
                .map(ais_ir::IntoDiagnostic::into_diagnostic)
                .collect();
            out.diagnostics(&name, &source, &diags);
            i32::from(!diags.is_empty())
        }
        Emit::Ast => {
            let fs = ais_compiler::program::FsLoader;
            let env = Default::default();
            let fe =
                driver::with_deep_stack(|| driver::check_file(&name, path, &source, &fs, &env));
            out.diagnostics_map(&fe.sources, &fe.diagnostics);
            // Not `{:#?}`: its output grows with depth × size (see `dump`).
            out.stdout(&ais_compiler::syntax::dump::dump(&fe.file));
            i32::from(fe.has_errors())
        }
        Emit::Ir | Emit::Dot | Emit::Mermaid | Emit::GraphJson => {
            let (sources, compiled) = compile_input(path, &source, &Default::default());
            match compiled {
                Ok(mut compiled) => {
                    out.diagnostics_map(&sources, &compiled.diagnostics);
                    match driver::optimize(&mut compiled.module, &opt.options()) {
                        Ok(s) if stats => {
                            eprint!("{}", s.render(true));
                            eprint!(
                                "{}",
                                ais_ir::passes::critical_path(&compiled.module).render()
                            );
                        }
                        Ok(_) => {}
                        Err(e) => {
                            eprintln!("error: {e}");
                            return 1;
                        }
                    }
                    let m = &compiled.module;
                    out.stdout(&match emit {
                        Emit::GraphJson => match graph_json::emit(m) {
                            Ok(text) => text + "\n",
                            Err(e) => {
                                out.diagnostics(
                                    &name,
                                    &source,
                                    &[ais_ir::IntoDiagnostic::into_diagnostic(e)],
                                );
                                return 1;
                            }
                        },
                        Emit::Dot => ais_ir::to_dot(m),
                        Emit::Mermaid => ais_ir::to_mermaid(m),
                        _ => ais_ir::print_module(m),
                    });
                    0
                }
                Err(diags) => {
                    out.diagnostics_map(&sources, &diags);
                    1
                }
            }
        }
    }
}

pub(crate) fn explain_cmd(code: Option<String>, list: bool) -> i32 {
    if list || code.is_none() {
        for e in explain::EXPLANATIONS {
            println!("{}  {}", e.code, e.title);
        }
        return 0;
    }
    let code = code.unwrap_or_default();
    match explain::lookup(&code) {
        Some(e) => {
            println!("{}: {}\n\n{}", e.code, e.title, e.text);
            0
        }
        None => {
            eprintln!("error: no diagnostic has the code `{code}`");
            eprintln!("help: `aisc explain --list` shows every code");
            1
        }
    }
}
