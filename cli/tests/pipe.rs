//! Every subcommand that prints survives a reader that has gone
//! (`aisc runs | head -1`): no panic, no message, its usual status or 141
//! (128 + SIGPIPE, as a filter that SIGPIPE ended). The reader here is a
//! socket whose other end is closed before aisc starts, so the very first
//! write fails with EPIPE, every time (a real `head -1` races with the
//! writer). Each command is first run with a real reader, to show it does
//! print.

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const PROGRAM: &str = r#"agent Writer {
    @entry flow main(topic: str) -> str {
        let notes = ask("List three facts about {topic}.")
        return think("Write a paragraph on {topic}.", notes)
    }
}
"#;

const BROKEN: &str = r#"agent Writer {
    @entry flow main(topic: str) -> str {
        return Writer.draf(topic)
    }
}
"#;

fn aisc(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_aisc"));
    c.args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("NO_COLOR", "1")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("AIS_STORE");
    c
}

fn with_stdin(mut c: Command, input: Option<&str>) -> Output {
    c.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stderr(Stdio::piped());
    let mut child = c.spawn().expect("aisc starts");
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        use std::io::Write;
        stdin.write_all(text.as_bytes()).expect("write stdin");
    }
    child.wait_with_output().expect("aisc ends")
}

/// A project with one completed run, its artifact and a broken program.
fn project() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("p.ais"), PROGRAM).expect("write");
    std::fs::write(dir.path().join("bad.ais"), BROKEN).expect("write");
    let o = aisc(
        dir.path(),
        &[
            "run",
            "p.ais",
            "--arg",
            "topic=tides",
            "--sim-delay-scale",
            "0",
        ],
    )
    .output()
    .expect("aisc runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = aisc(dir.path(), &["build", "p.ais", "-o", "p.apxmobj"])
        .output()
        .expect("aisc runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = aisc(dir.path(), &["runs", "--json"])
        .output()
        .expect("aisc runs");
    let first = String::from_utf8_lossy(&o.stdout)
        .lines()
        .next()
        .map(str::to_string)
        .expect("one run listed");
    let run: serde_json::Value = serde_json::from_str(&first).expect("a JSON line");
    let id = run["run_id"]
        .as_str()
        .or_else(|| run["id"].as_str())
        .unwrap_or_else(|| panic!("a run id in {run}"))
        .to_string();
    (dir, id)
}

#[test]
fn every_printing_subcommand_ends_quietly_when_its_reader_has_gone() {
    let (dir, id) = project();
    let fmt_input = std::fs::read_to_string(dir.path().join("p.ais")).expect("read");
    let cases: Vec<(Vec<&str>, Option<&str>)> = vec![
        (vec!["runs"], None),
        (vec!["runs", "--json"], None),
        (vec!["runs", "show", &id], None),
        (vec!["runs", "show", "last", "--json"], None),
        (vec!["trace", &id], None),
        (vec!["trace", "last", "--json"], None),
        (vec!["explain", "--list"], None),
        (vec!["explain"], None),
        (vec!["explain", "E0107"], None),
        (vec!["completions", "bash"], None),
        (vec!["completions", "zsh"], None),
        (vec!["config", "show"], None),
        (vec!["ops"], None),
        (vec!["ops", "--json"], None),
        (vec!["ops", "ask"], None),
        (vec!["tools"], None),
        (vec!["tools", "--json"], None),
        (vec!["build", "p.ais", "--emit", "ir"], None),
        (vec!["build", "p.ais", "--emit", "ir", "--stats"], None),
        (vec!["build", "p.ais", "--emit", "dot"], None),
        (vec!["build", "p.ais", "--emit", "mermaid"], None),
        (vec!["build", "p.ais", "--emit", "tokens"], None),
        (vec!["build", "p.ais", "--emit", "ast"], None),
        (vec!["inspect", "p.apxmobj"], None),
        (vec!["analyze", "p.ais"], None),
        (vec!["analyze", "p.ais", "--json"], None),
        (vec!["check", "bad.ais", "--error-format=json"], None),
        (vec!["memory", "show"], None),
        (vec!["memory", "show", "--json"], None),
        (vec!["store", "status"], None),
        (vec!["fmt", "-"], Some(fmt_input.as_str())),
        (
            vec![
                "run",
                "p.ais",
                "--arg",
                "topic=tides",
                "--sim-delay-scale",
                "0",
            ],
            None,
        ),
        (
            vec![
                "run",
                "p.ais",
                "--arg",
                "topic=tides",
                "--sim-delay-scale",
                "0",
                "--stream",
            ],
            None,
        ),
    ];
    let mut failures = Vec::new();
    for (args, input) in &cases {
        // With a reader: it prints something, with its usual status.
        let mut c = aisc(dir.path(), args);
        c.stdout(Stdio::piped());
        let normal = with_stdin(c, *input);
        assert!(
            !normal.stdout.is_empty(),
            "`aisc {}` printed nothing: {}",
            args.join(" "),
            String::from_utf8_lossy(&normal.stderr)
        );
        // Without one.
        let (ours, reader) = UnixStream::pair().expect("socket pair");
        drop(reader);
        let mut c = aisc(dir.path(), args);
        c.stdout(Stdio::from(OwnedFd::from(ours)));
        let gone = with_stdin(c, *input);
        let stderr = String::from_utf8_lossy(&gone.stderr);
        let code = gone.status.code();
        if stderr.contains("panicked")
            || stderr.contains("Broken pipe")
            || !(code == normal.status.code() || code == Some(141))
        {
            failures.push(format!(
                "`aisc {}`: status {code:?} (with a reader {:?}); stderr: {stderr}",
                args.join(" "),
                normal.status.code()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
