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
/// that it started), sleeps, then notes that it finished.
fn setup(dir: &Path) {
    std::fs::write(dir.join("p.ais"), PROGRAM).unwrap();
    let d = dir.display();
    let script = format!(
        "cat >/dev/null; echo \\\"$AIS_IDEMPOTENCY_KEY\\\" >> {d}/keys.txt; sleep 1; touch {d}/done.$$; echo '{{\\\"ok\\\": true}}'"
    );
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

fn done_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("done."))
        })
        .count()
}

/// Starts the run; returns it once its tool call is under way.
fn start_until_tool_runs(dir: &Path) -> Child {
    let mut child = aisc(dir, &["run", "p.ais"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    while keys(dir).is_empty() {
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
    let mut child = start_until_tool_runs(dir);
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
fn a_killed_aisc_leaves_no_tool_process_behind_after_40_kills() {
    let dirs: Vec<tempfile::TempDir> = (0..40).map(|_| tempfile::tempdir().unwrap()).collect();
    for batch in dirs.chunks(10) {
        let mut killed = Vec::new();
        for d in batch {
            setup(d.path());
            killed.push(start_until_tool_runs(d.path()));
        }
        for c in &mut killed {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }
    // Every tool was killed 1 s before it would have finished its side
    // effect; an orphan would have written its file by now.
    std::thread::sleep(Duration::from_secs(3));
    let orphans: usize = dirs.iter().map(|d| done_files(d.path())).sum();
    assert_eq!(orphans, 0, "tools finished after their aisc was killed");
    assert!(dirs.iter().all(|d| keys(d.path()).len() == 1));
}
