//! Lowering golden tests, one generated test per file:
//! - `tests/ir/*.ais`: one construct per file; the lowered IR matches its
//!   reviewed snapshot in `snapshots/ir/`, verifies, and round-trips through
//!   the textual form;
//! - `examples/`, `tests/parse/`: every valid program lowers to IR that
//!   verifies with no error and round-trips.

use ais_compiler::driver::compile_file;
use ais_compiler::program::FsLoader;
use ais_ir::{parse_module, print_module};
use ais_testkit::golden::{corpus, rel, snapshot_name, snapshot_settings};
use libtest_mimic::{Arguments, Failed, Trial};
use std::path::PathBuf;

/// Compiles, then checks print(parse(print(ir))) == print(ir).
fn lowered_text(path: &PathBuf) -> Result<String, Failed> {
    let source = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", rel(path)))?;
    // With the files it imports (examples/16_multi_file).
    let (_, compiled) = compile_file(&rel(path), path, &source, &FsLoader, &Default::default());
    let compiled = compiled.map_err(|diags| {
        diags
            .iter()
            .map(|d| format!("{} {}\n", d.code, d.message))
            .collect::<String>()
    })?;
    let text = print_module(&compiled.module);
    let reparsed = parse_module(&text).map_err(|errs| {
        format!(
            "printed IR does not parse back: {}\n{text}",
            errs.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        )
    })?;
    let again = print_module(&reparsed);
    if again != text {
        return Err(format!(
            "IR does not round-trip:\n--- printed\n{text}\n--- reprinted\n{again}"
        )
        .into());
    }
    Ok(text)
}

fn golden(path: PathBuf) -> Trial {
    let name = format!("tests/ir/{}", snapshot_name(&path, "tests/ir"));
    Trial::test(name, move || {
        let text = lowered_text(&path)?;
        let snap = snapshot_name(&path, "tests/ir");
        snapshot_settings("ir").bind(|| insta::assert_snapshot!(snap, text));
        Ok(())
    })
}

fn lowers(path: PathBuf, dir: &'static str) -> Trial {
    let name = format!("{dir}/{} lowers and verifies", snapshot_name(&path, dir));
    Trial::test(name, move || lowered_text(&path).map(|_| ()))
}

fn main() {
    ais_testkit::golden::init();
    let args = Arguments::from_args();
    let mut trials: Vec<Trial> = corpus("tests/ir", "ais").into_iter().map(golden).collect();
    for dir in ["examples", "tests/parse"] {
        trials.extend(corpus(dir, "ais").into_iter().map(|p| lowers(p, dir)));
    }
    libtest_mimic::run(&args, trials).exit();
}
