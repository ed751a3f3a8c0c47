//! The reference's graph format, every op and attribute: the documents in
//! `tests/reference/graphs/` (ours, written after the reference's op
//! definitions) check and run on the simulator with the output in their
//! `.stdout` golden (`AIS_BLESS=1` rewrites them); the documents in
//! `tests/reference/invalid/` are rejected with the code their name starts
//! with, for the reason the reference gives; the programs in
//! `tests/reference/source/` (the reference's ops as named arguments) run
//! with the output in their `.stdout` golden.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn aisc(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aisc"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env("NO_COLOR", "1")
        .current_dir(dir)
        .output()
        .expect("aisc runs")
}

fn corpus(dir: &str) -> Vec<PathBuf> {
    corpus_of(dir, "json")
}

fn corpus_of(dir: &str, ext: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/reference")
        .join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("corpus")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    files.sort();
    files
}

#[test]
fn reference_graphs_run_with_their_expected_output() {
    let bless = std::env::var_os("AIS_BLESS").is_some();
    let files = corpus("graphs");
    assert!(files.len() >= 5, "only {} graphs", files.len());
    let tmp = tempfile::tempdir().expect("tempdir");
    for f in files {
        let path = f.to_string_lossy().into_owned();
        let out = aisc(
            tmp.path(),
            &[
                "run",
                &path,
                "--backend",
                "sim",
                "--sim-delay-scale",
                "0",
                "--memory",
                ":memory:",
            ],
        );
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("Error:") && !stderr.contains("error["),
            "{path}: {stderr}"
        );
        let golden = f.with_extension("stdout");
        if bless {
            std::fs::write(&golden, &stdout).expect("bless");
        } else {
            let want = std::fs::read_to_string(&golden)
                .unwrap_or_else(|e| panic!("{}: {e} (bless with AIS_BLESS=1)", golden.display()));
            assert_eq!(stdout, want, "{path}");
        }
    }
}

#[test]
fn invalid_reference_graphs_are_rejected_with_their_code() {
    let files = corpus("invalid");
    assert!(files.len() >= 10, "only {} graphs", files.len());
    let tmp = tempfile::tempdir().expect("tempdir");
    for f in files {
        let name = f.file_name().expect("name").to_string_lossy().into_owned();
        let code = &name[..5];
        let out = aisc(tmp.path(), &["check", &f.to_string_lossy()]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("[{code}]")), "{name}: {err}");
    }
}

#[test]
fn reference_style_source_runs_with_its_expected_output() {
    let bless = std::env::var_os("AIS_BLESS").is_some();
    let files = corpus_of("source", "ais");
    assert!(!files.is_empty());
    let tmp = tempfile::tempdir().expect("tempdir");
    for f in files {
        let path = f.to_string_lossy().into_owned();
        let source = std::fs::read_to_string(&f).expect("source");
        let mut args: Vec<String> = [
            "run",
            &path,
            "--backend",
            "sim",
            "--sim-delay-scale",
            "0",
            "--memory",
            ":memory:",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for l in source.lines() {
            if let Some(a) = l.strip_prefix("// ARGS:") {
                for kv in a.split_whitespace() {
                    args.extend(["--arg".to_string(), kv.to_string()]);
                }
            }
        }
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = aisc(tmp.path(), &a);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{path}: {stderr}");
        assert!(!stderr.contains("Warning"), "{path}: {stderr}");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let golden = f.with_extension("stdout");
        if bless {
            std::fs::write(&golden, &stdout).expect("bless");
        } else {
            let want = std::fs::read_to_string(&golden)
                .unwrap_or_else(|e| panic!("{}: {e} (bless with AIS_BLESS=1)", golden.display()));
            assert_eq!(stdout, want, "{path}");
        }
    }
}

/// The structurizer's result survives the trip: a flat graph read, written
/// as graph JSON (our nested form) and read again gives the same IR.
#[test]
fn structured_flat_graphs_round_trip_to_the_same_ir() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let flat: Vec<PathBuf> = corpus("graphs")
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("flat_")))
        .collect();
    assert!(flat.len() >= 4, "only {} flat graphs", flat.len());
    for f in flat {
        let path = f.to_string_lossy().into_owned();
        let ir = aisc(tmp.path(), &["build", &path, "--emit", "ir", "-O0"]);
        assert!(ir.status.success(), "{path}: {}", String::from_utf8_lossy(&ir.stderr));
        let ir = String::from_utf8_lossy(&ir.stdout).into_owned();
        assert!(
            ["if ", "switch ", "try_catch"].iter().any(|k| ir.contains(k)),
            "{path}: not structured:\n{ir}"
        );
        let json = aisc(tmp.path(), &["build", &path, "--emit", "graph-json", "-O0"]);
        assert!(json.status.success(), "{path}: {}", String::from_utf8_lossy(&json.stderr));
        let written = tmp.path().join("written.json");
        std::fs::write(&written, &json.stdout).expect("write");
        let back = aisc(
            tmp.path(),
            &["build", &written.to_string_lossy(), "--emit", "ir", "-O0"],
        );
        assert!(back.status.success(), "{path}: {}", String::from_utf8_lossy(&back.stderr));
        assert_eq!(String::from_utf8_lossy(&back.stdout), ir, "{path}");
    }
}
