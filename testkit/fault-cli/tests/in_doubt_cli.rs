//! Side effects in doubt can be finished (issue 32, defect 2): `aisc` is
//! killed with SIGKILL while a side-effecting subprocess tool runs; the
//! resume stops with `journal.in_doubt` until a person decides with
//! `aisc resume RUN --in-doubt retry|skip|fail`, and each decision finishes
//! the run. A retried call carries the same idempotency key as the call it
//! repeats, and a killed `aisc` leaves no tool process behind (its process
//! group is ended). `aisc` is the test-only `aisc-fault` with no fault set:
//! the product's command line.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

const PROGRAM: &str =
    "agent A {\n  @entry flow main() -> json {\n    return inv(\"slow\", \"{{}}\")\n  }\n}\n";

/// A sim backend and the `slow` tool: it notes its idempotency key (and
/// that it started), sleeps, then answers.
fn setup(dir: &Path) {
    let d = dir.display();
    setup_with(
        dir,
        &format!(
            "cat >/dev/null; echo \\\"$AIS_IDEMPOTENCY_KEY\\\" >> {d}/keys.txt; sleep 1; echo '{{\\\"ok\\\": true}}'"
        ),
    );
}

fn setup_with(dir: &Path, script: &str) {
    std::fs::write(dir.join("p.ais"), PROGRAM).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "default_backend = \"sim\"\n[[llm_backends]]\nname = \"sim\"\nprotocol = \"sim\"\n[[tools.subprocess]]\nname = \"slow\"\ncommand = [\"sh\", \"-c\", \"{script}\"]\n[access.allow]\nA = [\"slow\"]\n"
        ),
    )
    .unwrap();
}

fn aisc(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_aisc-fault"));
    c.current_dir(dir)
        .args(args)
        .args(["--config", "config.toml", "-q"])
        .env_remove(ais_testkit::fault::FAULT_ENV);
    c
}

fn output(dir: &Path, args: &[&str]) -> Output {
    aisc(dir, args).output().unwrap()
}

fn keys(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("keys.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The pids the orphan test's tool noted: its shell's and its `sleep`'s.
fn pids(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("pids"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Is process `pid` alive (running, not a zombie)?
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with(|c| c != 'Z'))
        })
        .unwrap_or(false)
}

/// Starts the run; returns it once its tool call is under way.
fn start_until_tool_runs(dir: &Path, started: impl Fn() -> bool) -> Child {
    let mut child = aisc(dir, &["run", "p.ais"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    while !started() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended before its tool started: {status}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

/// A run killed (SIGKILL) while its side-effecting tool runs: resuming it
/// stops with `journal.in_doubt`.
fn in_doubt_run(dir: &Path) {
    setup(dir);
    let mut child = start_until_tool_runs(dir, || !keys(dir).is_empty());
    child.kill().unwrap();
    assert_eq!(child.wait().unwrap().code(), None, "killed by a signal");
    let o = output(dir, &["resume", "last"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("journal.in_doubt") && err.contains("--in-doubt"),
        "{err}"
    );
}

#[test]
fn retry_calls_the_tool_again_with_the_same_idempotency_key() {
    let dir = tempfile::tempdir().unwrap();
    in_doubt_run(dir.path());
    let o = output(dir.path(), &["resume", "last", "--in-doubt", "retry"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("\"ok\""));
    let k = keys(dir.path());
    assert_eq!(k.len(), 2, "{k:?}");
    assert!(k[0].starts_with("ais-") && k[0].len() > 10, "{k:?}");
    assert_eq!(k[0], k[1], "a retry carries the key of the call it repeats");
    // The decision was journaled and the retried call completed: the run
    // is done, nothing is in doubt.
    let o = output(dir.path(), &["resume", "last"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("journal.completed"));
}

#[test]
fn skip_takes_the_call_as_done_with_a_null_result() {
    let dir = tempfile::tempdir().unwrap();
    in_doubt_run(dir.path());
    let o = output(dir.path(), &["resume", "last", "--in-doubt", "skip"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A null result prints nothing.
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "");
    assert_eq!(keys(dir.path()).len(), 1, "not called again");
    let runs = Command::new(env!("CARGO_BIN_EXE_aisc-fault"))
        .current_dir(dir.path())
        .arg("runs")
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&runs.stdout);
    assert!(listed.contains("completed"), "{listed}");
}

#[test]
fn fail_fails_the_op_and_finishes_the_run() {
    let dir = tempfile::tempdir().unwrap();
    in_doubt_run(dir.path());
    let o = output(dir.path(), &["resume", "last", "--in-doubt", "fail"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("journal.in_doubt_failed"), "{err}");
    assert_eq!(keys(dir.path()).len(), 1, "not called again");
    let runs = Command::new(env!("CARGO_BIN_EXE_aisc-fault"))
        .current_dir(dir.path())
        .arg("runs")
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&runs.stdout);
    assert!(listed.contains("failed"), "{listed}");
    assert!(!listed.contains("in doubt)"), "{listed}");
    // Nothing left to decide.
    let o = output(dir.path(), &["resume", "last", "--in-doubt", "retry"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("journal.not_in_doubt"));
}

#[test]
#[cfg(target_os = "linux")]
fn a_killed_aisc_leaves_no_tool_process_behind_after_40_kills() {
    let dirs: Vec<tempfile::TempDir> = (0..40).map(|_| tempfile::tempdir().unwrap()).collect();
    for batch in dirs.chunks(10) {
        let mut killed = Vec::new();
        for d in batch {
            let p = d.path();
            // A tool that starts a child and would run for a minute.
            setup_with(
                p,
                &format!(
                    "cat >/dev/null; sleep 60 & echo $$ $! >> {}/pids; wait; echo '{{}}'",
                    p.display()
                ),
            );
            killed.push(start_until_tool_runs(p, || pids(p).len() == 2));
        }
        for c in &mut killed {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }
    // The guardians act at once; a moment for the kernel to reap.
    std::thread::sleep(Duration::from_secs(2));
    let all: Vec<u32> = dirs.iter().flat_map(|d| pids(d.path())).collect();
    assert_eq!(all.len(), 80);
    let orphans: Vec<u32> = all.into_iter().filter(|&p| alive(p)).collect();
    assert!(
        orphans.is_empty(),
        "tool processes still running after their aisc was killed: {orphans:?}"
    );
}
