//! The conformance corpus `tests/reference-style/`: programs written in the
//! reference implementation's documented style. Each must check with no
//! error and run on the offline simulator with the output its `// EXPECT:`
//! block holds (`// | ` lines, at the end of the file). `// ARGS: NAME=VALUE`
//! lines give entry arguments. `// RESUME: VALUE` lines make it a
//! human-in-the-loop program: the run must stop at a `pause` (exit code 3),
//! then each `aisc resume last --input VALUE`, in the same directory, goes
//! on, pausing again (3) until the last one completes (0); its expected
//! block holds every step's output, each pause as `[paused: MESSAGE]`.
//! `AIS_BLESS=1` rewrites the expected blocks from the actual output (read
//! the diff before committing it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const EXPECT: &str = "// EXPECT:";
/// `aisc run`'s exit code for a run stopped at `pause`.
const PAUSED: i32 = 3;

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

/// The lines of `text` that start with `prefix`, without it.
fn directives<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .collect()
}

/// One step's stdout, plus `[paused: MESSAGE]` when it stopped at a pause
/// (exit code 3); any other exit code than `want` is an error.
fn step_output(what: &str, out: &Output, want: i32) -> Result<String, String> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() != Some(want) {
        return Err(format!(
            "{what} exited {:?}, expected {want}:\n{stderr}",
            out.status.code()
        ));
    }
    let mut text = String::from_utf8_lossy(&out.stdout).trim_end().to_string();
    if want == PAUSED {
        let message = stderr
            .lines()
            .find_map(|l| l.strip_prefix("paused: "))
            .ok_or_else(|| format!("{what} paused without a message:\n{stderr}"))?;
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&format!("[paused: {message}]"));
    }
    Ok(text)
}

/// Runs one program (and its resumes) in `dir`: the combined output.
fn run_program(dir: &Path, path: &str, text: &str) -> Result<String, String> {
    let resumes = directives(text, "// RESUME: ");
    // A paused run must outlive its process, so a program that pauses
    // keeps its journal and memory in `dir/.apxm` instead of `:memory:`.
    let memory = if resumes.is_empty() {
        ":memory:"
    } else {
        ".apxm"
    };
    let mut args = vec![
        "run",
        path,
        "-q",
        "--memory",
        memory,
        "--sim-delay-scale",
        "0",
    ];
    for a in directives(text, "// ARGS: ") {
        args.push("--arg");
        args.push(a);
    }
    let want = if resumes.is_empty() { 0 } else { PAUSED };
    let mut steps = vec![step_output("aisc run", &aisc(dir, &args), want)?];
    for (i, input) in resumes.iter().enumerate() {
        let want = if i + 1 == resumes.len() { 0 } else { PAUSED };
        let resume = aisc(
            dir,
            &[
                "resume",
                "last",
                "--input",
                input,
                "-q",
                "--memory",
                memory,
                "--sim-delay-scale",
                "0",
            ],
        );
        steps.push(step_output(
            &format!("aisc resume last --input {input}"),
            &resume,
            want,
        )?);
    }
    steps.retain(|s| !s.is_empty());
    Ok(steps.join("\n"))
}

#[test]
fn every_reference_style_program_checks_and_runs_as_expected() {
    let bless = std::env::var_os("AIS_BLESS").is_some();
    let files = corpus();
    assert!(files.len() >= 40, "the corpus has {} programs", files.len());
    let mut failures = Vec::new();
    for file in &files {
        let name = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let text = std::fs::read_to_string(file).expect("read");
        let path = file.display().to_string();
        // Each program in its own directory: paused runs and `resume last`
        // must not see another program's runs.
        let tmp = tempfile::tempdir().expect("tempdir");
        let check = aisc(tmp.path(), &["check", &path]);
        if check.status.code() != Some(0) {
            failures.push(format!(
                "{name}: aisc check failed:\n{}",
                String::from_utf8_lossy(&check.stderr)
            ));
            continue;
        }
        let stdout = match run_program(tmp.path(), &path, &text) {
            Ok(out) => out,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
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
