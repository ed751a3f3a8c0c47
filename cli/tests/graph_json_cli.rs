//! `aisc run FILE.json` on the simulator prints what the `.ais` it was
//! emitted from prints, for the reference-style corpus; `aisc check` reads
//! graph JSON and reports its coded errors.

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

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn graph_json_runs_like_its_source() {
    let dir = root().join("tests/reference-style");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("corpus")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "ais"))
        .collect();
    files.sort();
    assert!(files.len() >= 10);
    let tmp = tempfile::tempdir().expect("tempdir");
    for f in files {
        let source = std::fs::read_to_string(&f).expect("source");
        let mut args: Vec<String> = Vec::new();
        for l in source.lines() {
            if let Some(a) = l.strip_prefix("// ARGS:") {
                for kv in a.split_whitespace() {
                    args.extend(["--arg".to_string(), kv.to_string()]);
                }
            }
        }
        let f = f.to_string_lossy().into_owned();
        let emitted = aisc(tmp.path(), &["build", &f, "--emit", "graph-json"]);
        assert!(
            emitted.status.success(),
            "{f}: {}",
            String::from_utf8_lossy(&emitted.stderr)
        );
        let json = tmp.path().join("program.json");
        std::fs::write(&json, &emitted.stdout).expect("write");
        let json = json.to_string_lossy().into_owned();
        let run = |file: &str| {
            // Each run with its own memory: queues and facts persist in a
            // memory directory, and both runs must start from nothing.
            let mut a = vec![
                "run",
                file,
                "--backend",
                "sim",
                "--sim-delay-scale",
                "0",
                "--memory",
                ":memory:",
            ];
            a.extend(args.iter().map(String::as_str));
            aisc(tmp.path(), &a)
        };
        let (a, b) = (run(&f), run(&json));
        assert_eq!(a.status.code(), b.status.code(), "{f}");
        assert!(
            !a.stdout.is_empty() || !a.status.success(),
            "{f} printed nothing"
        );
        assert_eq!(
            String::from_utf8_lossy(&a.stdout),
            String::from_utf8_lossy(&b.stdout),
            "{f}"
        );
    }
}

#[test]
fn check_reports_graph_errors_with_codes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bad = root().join("tests/graph-json/errors/G0002_unknown_op.json");
    let out = aisc(tmp.path(), &["check", &bad.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("G0002") && err.contains("did you mean `ASK`"),
        "{err}"
    );
    let good = root().join("tests/graph-json/ok/reference_chain.json");
    let out = aisc(tmp.path(), &["check", &good.to_string_lossy()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
