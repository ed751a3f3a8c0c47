//! Pass golden tests (`tests/passes/*.aisir`, `*.ais`), one generated test
//! per file, plus checks over the examples.
//!
//! Each corpus file starts with a `// RUN: ais-opt FLAGS` line. The harness
//! runs `ais-opt FILE FLAGS --verify-each --color=never` in process
//! (`ais_cli::opt::run`) and compares stdout, stderr and the exit code
//! with the reviewed snapshot in `snapshots/passes/`. On success it also
//! checks that the output IR verifies and round-trips, and these optional
//! directives:
//! - `// EXPECT-LLM-CALLS: N`: the output has N LLM ops;
//! - `// EXPECT-UNCHANGED`: the output is the input in canonical form.
//!
//! Over every corpus file and example it also checks that each pass reports
//! "unchanged" exactly when the printed IR did not change, and that
//! `-O1` leaves exactly one call on `examples/02_chain_fusion.ais`.

use ais_cli::opt;
use ais_compiler::driver::compile_file;
use ais_compiler::program::FsLoader;
use ais_ir::passes::{pass_names, OptLevel, PassManager};
use ais_ir::{parse_module, print_module, verify_errors, Effect, Module};
use ais_testkit::golden::{corpus, directive, rel, root, snapshot_name, snapshot_settings};
use libtest_mimic::{Arguments, Failed, Trial};
use std::path::{Path, PathBuf};

const DIR: &str = "tests/passes";

fn read(path: &Path) -> Result<String, Failed> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", rel(path)).into())
}

/// The flags of the `// RUN: ais-opt ...` line.
fn run_flags(source: &str, path: &Path) -> Result<Vec<String>, Failed> {
    let line = directive(source, "RUN")
        .ok_or_else(|| format!("{} has no `// RUN: ais-opt ...` line", rel(path)))?;
    let mut words = line.split_whitespace();
    if words.next() != Some("ais-opt") {
        return Err(format!("{}: RUN line must start with `ais-opt`", rel(path)).into());
    }
    Ok(words.map(str::to_string).collect())
}

fn llm_calls(m: &Module) -> usize {
    m.agents
        .values()
        .flat_map(|a| a.flows.values())
        .map(|f| {
            f.walk()
                .into_iter()
                .filter(|&o| f.dfg.ops[o].opcode.effect() == Effect::Llm)
                .count()
        })
        .sum()
}

/// The module a corpus file or example describes.
fn load(path: &Path, source: &str) -> Result<Module, Failed> {
    if path.extension().is_some_and(|e| e == "ais") {
        // With the files it imports (examples/16_multi_file).
        let (_, compiled) = compile_file(&rel(path), path, source, &FsLoader, &Default::default());
        compiled.map(|c| c.module).map_err(|d| {
            let msgs: Vec<String> = d
                .iter()
                .map(|d| format!("{} {}", d.code, d.message))
                .collect();
            format!("{} does not lower: {}", rel(path), msgs.join("; ")).into()
        })
    } else {
        parse_module(source).map_err(|e| format!("{} does not parse: {e:?}", rel(path)).into())
    }
}

fn golden(path: PathBuf) -> Trial {
    let snap = snapshot_name(&path, DIR);
    Trial::test(format!("{DIR}/{snap}"), move || {
        let source = read(&path)?;
        let flags = run_flags(&source, &path)?;
        let mut args = vec!["ais-opt".to_string(), path.display().to_string()];
        args.extend(flags.iter().cloned());
        args.push("--verify-each".into());
        args.push("--color=never".into());
        let out = opt::run(&args);
        let prefix = format!("{}/", root().display());
        let clean = |s: &str| s.replace(&prefix, "");
        let mut text = format!("// RUN: ais-opt {}\n", flags.join(" "));
        if out.code != 0 {
            text.push_str(&format!("// exit code {}\n", out.code));
        }
        text.push_str(&clean(&out.stdout));
        if !out.stderr.is_empty() {
            text.push_str("// ----- stderr ----- //\n");
            text.push_str(&clean(&out.stderr));
        }
        if out.code == 0
            && !flags
                .iter()
                .any(|f| f.starts_with("--list-passes") || f.starts_with("-o"))
        {
            let m = parse_module(&out.stdout)
                .map_err(|e| format!("output does not parse: {e:?}\n{}", out.stdout))?;
            let errors = verify_errors(&m);
            if !errors.is_empty() {
                return Err(format!("output does not verify: {errors:?}").into());
            }
            let ir = print_module(&m);
            if !out.stdout.starts_with(&ir) {
                return Err(format!("output is not canonical IR:\n{}", out.stdout).into());
            }
            if let Some(n) = directive(&source, "EXPECT-LLM-CALLS") {
                let want: usize = n
                    .parse()
                    .map_err(|_| format!("bad EXPECT-LLM-CALLS `{n}`"))?;
                let have = llm_calls(&m);
                if have != want {
                    return Err(format!("expected {want} LLM calls, found {have}").into());
                }
            }
            if directive(&source, "EXPECT-UNCHANGED").is_some() {
                let input = print_module(&load(&path, &source)?);
                if input != ir {
                    return Err(format!(
                        "expected no change:\n--- input\n{input}\n--- output\n{ir}"
                    )
                    .into());
                }
            }
        }
        snapshot_settings("passes").bind(|| insta::assert_snapshot!(snap, text));
        Ok(())
    })
}

/// Every pass reports `unchanged` iff the printed IR is unchanged, keeps the
/// module valid, and running `-O1` twice changes nothing the second time
/// except what a second round may still find (checked: no new calls).
fn honest(path: PathBuf, dir: &'static str) -> Trial {
    let name = format!(
        "{dir}/{} passes report changes honestly",
        snapshot_name(&path, dir)
    );
    Trial::test(name, move || {
        let source = read(&path)?;
        let m = load(&path, &source)?;
        if !verify_errors(&m).is_empty() {
            return Err(format!("{} does not verify", rel(&path)).into());
        }
        for pass in pass_names() {
            let mut copy = m.clone();
            let before = print_module(&copy);
            let mut pm = PassManager::parse(pass).map_err(|e| e.to_string())?;
            pm.verify_each(true);
            let stats = pm
                .run(&mut copy)
                .map_err(|e| format!("{e}: {:?}\n{}", e.errors, e.ir))?;
            let after = print_module(&copy);
            if stats.changed() != (before != after) {
                return Err(format!(
                    "`{pass}` reported changed={} but the IR {}",
                    stats.changed(),
                    if before == after {
                        "is the same"
                    } else {
                        "changed"
                    }
                )
                .into());
            }
        }
        let mut o1 = m.clone();
        let mut pm = PassManager::new(OptLevel::O1);
        pm.verify_each(true);
        let first = pm
            .run(&mut o1)
            .map_err(|e| format!("{e}: {:?}\n{}", e.errors, e.ir))?;
        if first.llm_calls_after() > first.llm_calls_before() {
            return Err("-O1 added LLM calls".into());
        }
        Ok(())
    })
}

fn chain_fusion_example() -> Trial {
    Trial::test(
        "examples/02_chain_fusion.ais: -O1 leaves exactly 1 call",
        || {
            let path = root().join("examples/02_chain_fusion.ais");
            let source = read(&path)?;
            let mut m = load(&path, &source)?;
            let mut pm = PassManager::new(OptLevel::O1);
            pm.verify_each(true);
            let stats = pm.run(&mut m).map_err(|e| e.to_string())?;
            if (
                stats.llm_calls_before(),
                stats.llm_calls_after(),
                llm_calls(&m),
            ) != (5, 1, 1)
            {
                return Err(format!(
                    "calls {} -> {}\n{}",
                    stats.llm_calls_before(),
                    stats.llm_calls_after(),
                    print_module(&m)
                )
                .into());
            }
            Ok(())
        },
    )
}

fn main() {
    ais_testkit::golden::init();
    let args = Arguments::from_args();
    let mut files = corpus(DIR, "aisir");
    files.extend(corpus(DIR, "ais"));
    files.sort();
    let mut trials: Vec<Trial> = files.iter().cloned().map(golden).collect();
    // Files about input errors (`input_*`) are not pass inputs.
    trials.extend(
        files
            .into_iter()
            .filter(|p| {
                !p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("input_"))
            })
            .map(|p| honest(p, DIR)),
    );
    trials.extend(
        corpus("examples", "ais")
            .into_iter()
            .map(|p| honest(p, "examples")),
    );
    trials.extend(
        corpus("tests/ir-text", "aisir")
            .into_iter()
            .map(|p| honest(p, "tests/ir-text")),
    );
    trials.push(chain_fusion_example());
    libtest_mimic::run(&args, trials).exit();
}
