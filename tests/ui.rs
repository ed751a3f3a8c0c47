//! Front-end golden tests, one generated test per file:
//! - `tests/ui/`, `tests/type-verification/`: diagnostics match the inline
//!   `//~` expectations exactly, and the rendered report matches its
//!   reviewed snapshot in `snapshots/ui/`;
//! - `examples/`, `tests/parse/`: programs check with no diagnostic at all;
//! - `docs/diagnostics.md` is what `aisc explain` knows, and every code the
//!   corpus produces has an explanation.

use ais_compiler::diagnostics::{explain, render_human, render_human_map};
use ais_compiler::driver::{check_file, check_source};
use ais_compiler::program::FsLoader;
use ais_testkit::golden::{
    blessing, compare, corpus, expectations, rel, root, snapshot_name, snapshot_settings, BLESS_ENV,
};
use libtest_mimic::{Arguments, Failed, Trial};
use std::path::PathBuf;

fn read(path: &PathBuf) -> Result<String, Failed> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", rel(path)).into())
}

fn ui_case(path: PathBuf, corpus_dir: &'static str) -> Trial {
    let name = format!("{corpus_dir}/{}", snapshot_name(&path, corpus_dir));
    Trial::test(name, move || {
        let source = read(&path)?;
        let fe = check_source(&source);
        let expected = expectations(&source)?;
        if expected.is_empty() {
            return Err(format!("{} has no `//~` expectation", rel(&path)).into());
        }
        compare(&source, &fe.diagnostics, &expected)?;
        for d in &fe.diagnostics {
            if explain::explain(d.code).is_none() {
                return Err(format!("code {} has no explanation", d.code).into());
            }
        }
        let file = rel(&path);
        let rendered: String = fe
            .diagnostics
            .iter()
            .map(|d| render_human(d, &file, &source, false))
            .collect();
        let snap = snapshot_name(&path, corpus_dir);
        snapshot_settings(corpus_dir.trim_start_matches("tests/"))
            .bind(|| insta::assert_snapshot!(snap, rendered));
        Ok(())
    })
}

fn clean_case(path: PathBuf, corpus_dir: &'static str) -> Trial {
    let name = format!("{corpus_dir}/{}", snapshot_name(&path, corpus_dir));
    Trial::test(name, move || {
        let source = read(&path)?;
        // With the files it imports (examples/16_multi_file).
        let file = rel(&path);
        let fe = check_file(&file, &path, &source, &FsLoader, &Default::default());
        if fe.diagnostics.is_empty() {
            Ok(())
        } else {
            Err(fe
                .diagnostics
                .iter()
                .map(|d| render_human_map(d, &fe.sources, false))
                .collect::<String>()
                .into())
        }
    })
}

fn docs_case() -> Trial {
    Trial::test(
        "docs/diagnostics.md is generated from the explanations",
        || {
            let path = root().join("docs/diagnostics.md");
            let want = explain::markdown();
            if blessing() {
                std::fs::write(&path, &want).map_err(|e| e.to_string())?;
            }
            let have = std::fs::read_to_string(&path).unwrap_or_default();
            if have == want {
                Ok(())
            } else {
                Err(format!("docs/diagnostics.md is stale: run `{BLESS_ENV}=1 cargo test -p ais-tests --test ui`").into())
            }
        },
    )
}

fn main() {
    ais_testkit::golden::init();
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    for dir in ["tests/ui", "tests/type-verification"] {
        trials.extend(corpus(dir, "ais").into_iter().map(|p| ui_case(p, dir)));
    }
    for dir in ["examples", "tests/parse"] {
        trials.extend(corpus(dir, "ais").into_iter().map(|p| clean_case(p, dir)));
    }
    trials.push(docs_case());
    libtest_mimic::run(&args, trials).exit();
}
