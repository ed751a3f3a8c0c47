//! The conformance corpus `tests/reference-style/`: programs written in the
//! reference implementation's documented style. Each must check with no
//! error and run on the offline simulator with the output its `// EXPECT:`
//! block holds (`// | ` lines, at the end of the file). `// ARGS: NAME=VALUE`
//! lines give entry arguments. `AIS_BLESS=1` rewrites the expected blocks
//! from the actual output (read the diff before committing it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const EXPECT: &str = "// EXPECT:";

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

fn corpus() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/reference-style");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/reference-style")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "ais"))
        .collect();
    files.sort();
    files
}

/// The program's text before its expected block, and the block's lines.
fn split_expectation(text: &str) -> (&str, Option<String>) {
    match text.find(EXPECT) {
        Some(at) => {
            let block: Vec<&str> = text[at + EXPECT.len()..]
                .lines()
                .skip(1)
                .map(|l| {
                    l.strip_prefix("// | ")
                        .or(l.strip_prefix("// |"))
                        .unwrap_or(l)
                })
                .collect();
            (&text[..at], Some(block.join("\n")))
        }
        None => (text, None),
    }
}

#[test]
fn every_reference_style_program_checks_and_runs_as_expected() {
    let bless = std::env::var_os("AIS_BLESS").is_some();
    let files = corpus();
    assert!(files.len() >= 12, "the corpus has {} programs", files.len());
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut failures = Vec::new();
    for file in &files {
        let name = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let text = std::fs::read_to_string(file).expect("read");
        let path = file.display().to_string();
        let check = aisc(tmp.path(), &["check", &path]);
        if check.status.code() != Some(0) {
            failures.push(format!(
                "{name}: aisc check failed:\n{}",
                String::from_utf8_lossy(&check.stderr)
            ));
            continue;
        }
        let mut args = vec![
            "run",
            &path,
            "-q",
            "--memory",
            ":memory:",
            "--sim-delay-scale",
            "0",
        ];
        let arg_lines: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("// ARGS: "))
            .collect();
        for a in &arg_lines {
            args.push("--arg");
            args.push(a);
        }
        let run = aisc(tmp.path(), &args);
        let stdout = String::from_utf8_lossy(&run.stdout).trim_end().to_string();
        if run.status.code() != Some(0) {
            failures.push(format!(
                "{name}: aisc run exited {:?}:\n{}",
                run.status.code(),
                String::from_utf8_lossy(&run.stderr)
            ));
            continue;
        }
        let (program, expected) = split_expectation(&text);
        if bless {
            let block: String = stdout.lines().map(|l| format!("// | {l}\n")).collect();
            let updated = format!(
                "{}{EXPECT}\n{block}",
                program.trim_end_matches('\n').to_string() + "\n\n"
            );
            std::fs::write(file, updated).expect("bless");
            continue;
        }
        match expected {
            None => failures.push(format!(
                "{name}: no `{EXPECT}` block (bless with AIS_BLESS=1)"
            )),
            Some(e) if e.trim_end() != stdout => failures.push(format!(
                "{name}: output differs\n--- expected\n{e}\n--- actual\n{stdout}"
            )),
            Some(_) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
