//! Process-level fault tests of the run journal: `aisc run` is killed (the
//! fault switch aborts the process after the N-th journal write) at every
//! point, then `aisc resume` must give the result of an uninterrupted run
//! without repeating a completed LLM call (counted by the mock server).
//! `aisc` here is the test-only `aisc-fault`: the product's command line
//! with the fault switch, which the shipped binary does not read.
#![allow(clippy::unwrap_used)]

use ais_testkit::mock::MockServer;
use std::path::Path;
use std::process::{Command, Output};

const PROGRAM: &str = r#"
agent A {
    @entry flow main(topic: str) -> str {
        let a = ask("First about {topic}")
        let b = think("Second about {a}")
        umem(b, "ltm", "answer")
        let c = think("Third about {b}")
        print("done: {c}")
        return c
    }
}
"#;

fn setup(dir: &Path, server: &MockServer) {
    std::fs::write(dir.join("p.ais"), PROGRAM).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "default_backend = \"mock\"\n[[llm_backends]]\nname = \"mock\"\nprotocol = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"AIS_RELIABILITY_TEST_KEY\"\nretries = 0\n",
            server.openai_url()
        ),
    )
    .unwrap();
}

fn aisc(dir: &Path, args: &[&str], fault: Option<usize>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_aisc-fault"));
    c.current_dir(dir)
        .args(args)
        .args(if matches!(args.first(), Some(&"run") | Some(&"resume")) {
            &["--config", "config.toml", "-q"][..]
        } else {
            &[][..]
        })
        .env("AIS_RELIABILITY_TEST_KEY", "sk-test")
        .env_remove(ais_testkit::fault::FAULT_ENV);
    if let Some(n) = fault {
        c.env(ais_testkit::fault::FAULT_ENV, n.to_string());
    }
    c.output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn run_args() -> Vec<&'static str> {
    vec!["run", "p.ais", "--arg", "topic=wal"]
}

#[test]
fn kill_at_every_journal_write_then_resume_gives_the_same_result_without_duplicate_calls() {
    let clean_dir = tempfile::tempdir().unwrap();
    let server = MockServer::start().unwrap();
    setup(clean_dir.path(), &server);
    let clean = aisc(clean_dir.path(), &run_args(), None);
    assert!(
        clean.status.success(),
        "{}",
        String::from_utf8_lossy(&clean.stderr)
    );
    let calls = server.request_count();
    assert_eq!(calls, 3);
    let want = stdout(&clean);
    assert!(want.contains("done: mock reply to: Third about"), "{want}");
    // 3 LLM calls + umem + print = 5 journal writes.
    for n in 1..=5 {
        let dir = tempfile::tempdir().unwrap();
        let server = MockServer::start().unwrap();
        setup(dir.path(), &server);
        let killed = aisc(dir.path(), &run_args(), Some(n));
        assert!(
            !killed.status.success(),
            "write {n}: the process must abort"
        );
        let runs = aisc(dir.path(), &["runs"], None);
        let listing = stdout(&runs);
        assert!(listing.contains("interrupted"), "write {n}: {listing}");
        let resumed = aisc(dir.path(), &["resume", "last"], None);
        assert!(
            resumed.status.success(),
            "write {n}: {}",
            String::from_utf8_lossy(&resumed.stderr)
        );
        let out = stdout(&resumed);
        // The final value is the same; lines printed before the kill are
        // not printed again.
        let value = want.lines().last().unwrap_or_default();
        assert_eq!(
            out.lines().last(),
            Some(value),
            "write {n}: {out:?} vs {want:?}"
        );
        assert_eq!(
            server.request_count(),
            calls,
            "write {n}: a completed call was repeated"
        );
        let listing = stdout(&aisc(dir.path(), &["runs"], None));
        assert!(listing.contains("completed"), "write {n}: {listing}");
        assert!(
            aisc(dir.path(), &["resume", "last"], None)
                .status
                .code()
                .is_some_and(|c| c != 0),
            "a completed run is not resumed again"
        );
    }
}

#[test]
fn a_side_effect_killed_in_flight_is_reported_in_doubt() {
    let dir = tempfile::tempdir().unwrap();
    let server = MockServer::start().unwrap();
    setup(dir.path(), &server);
    std::fs::write(
        dir.path().join("p.ais"),
        "agent A {\n  @entry flow main() -> json {\n    return inv(\"enqueue\", \"{{\\\"queue\\\": \\\"q\\\", \\\"job\\\": \\\"g\\\"}}\")\n  }\n}\n",
    )
    .unwrap();
    // `enqueue` appends a job: not idempotent (the catalogue), so a call
    // cut off is in doubt. Write 1 is the tool's intent: the process dies
    // before the call.
    let killed = aisc(dir.path(), &["run", "p.ais"], Some(1));
    assert!(!killed.status.success());
    let resumed = aisc(dir.path(), &["resume", "last"], None);
    assert!(!resumed.status.success());
    let err = String::from_utf8_lossy(&resumed.stderr);
    assert!(err.contains("journal.in_doubt"), "{err}");
    assert!(err.contains("enqueue"), "{err}");
}

#[test]
fn corrupted_journal_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".apxm")).unwrap();
    std::fs::write(dir.path().join(".apxm/runs.db"), b"this is not a database").unwrap();
    let o = aisc(dir.path(), &["runs"], None);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("journal.db"), "{err}");
    let o = aisc(dir.path(), &["resume", "nope"], None);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn provider_failures_fail_the_run_and_resume_repeats_only_the_failed_call() {
    use ais_testkit::mock::MockReply;
    let clean_dir = tempfile::tempdir().unwrap();
    let server = MockServer::start().unwrap();
    setup(clean_dir.path(), &server);
    let want = stdout(&aisc(clean_dir.path(), &run_args(), None));
    let value = want.lines().last().unwrap_or_default().to_string();
    let faults = [
        ("500", MockReply::error(500, "boom")),
        ("429", MockReply::rate_limited("0")),
        ("malformed", MockReply::Malformed),
        ("truncated", MockReply::Truncated),
        ("hangup", MockReply::Hangup),
    ];
    for (name, fault) in faults {
        let dir = tempfile::tempdir().unwrap();
        let server = MockServer::start().unwrap();
        setup(dir.path(), &server);
        server.push(MockReply::Normal).push(fault);
        let failed = aisc(dir.path(), &run_args(), None);
        assert!(!failed.status.success(), "{name}: the run must fail");
        assert_eq!(server.request_count(), 2, "{name}");
        let listing = stdout(&aisc(dir.path(), &["runs"], None));
        assert!(listing.contains("failed"), "{name}: {listing}");
        let resumed = aisc(dir.path(), &["resume", "last"], None);
        assert!(
            resumed.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&resumed.stderr)
        );
        assert_eq!(
            stdout(&resumed).lines().last(),
            Some(value.as_str()),
            "{name}"
        );
        // Call 1 is replayed; the failed call 2 and call 3 are sent.
        assert_eq!(server.request_count(), 4, "{name}");
    }
}

const SOLVE_PROGRAM: &str = r#"
agent A {
    @entry flow main(topic: str) -> str {
        let a = solve("Research {topic}")
        print("done: {a}")
        return a
    }
}
"#;

// A chain, so exactly one call is in flight at any kill (an `ask` chain
// would be fused into one call; `reason` is not fused).
const PLAN: &str =
    "```ais\nlet x = ask(\"First step\")\nlet y = reason(\"Second step after {x}\")\nreturn y\n```";

#[test]
fn kill_during_an_inner_plan_then_resume_repeats_no_planner_or_plan_call() {
    let setup_solve = |dir: &Path, server: &MockServer| {
        setup(dir, server);
        std::fs::write(dir.join("p.ais"), SOLVE_PROGRAM).unwrap();
        // The planner's reply; every later call gets the mock's default.
        server.push(ais_testkit::MockReply::Content(PLAN.into()));
    };
    let clean_dir = tempfile::tempdir().unwrap();
    let server = MockServer::start().unwrap();
    setup_solve(clean_dir.path(), &server);
    let clean = aisc(clean_dir.path(), &run_args(), None);
    assert!(
        clean.status.success(),
        "{}",
        String::from_utf8_lossy(&clean.stderr)
    );
    // The planner, then the plan's two calls.
    assert_eq!(server.request_count(), 3);
    let want = stdout(&clean);
    assert!(want.contains("mock reply to: Second step after"), "{want}");
    // The planner's reply, the plan's two calls and `print` = 4 journal
    // writes.
    for n in 1..=4 {
        let dir = tempfile::tempdir().unwrap();
        let server = MockServer::start().unwrap();
        setup_solve(dir.path(), &server);
        let killed = aisc(dir.path(), &run_args(), Some(n));
        assert!(
            !killed.status.success(),
            "write {n}: the process must abort"
        );
        let resumed = aisc(dir.path(), &["resume", "last"], None);
        assert!(
            resumed.status.success(),
            "write {n}: {}",
            String::from_utf8_lossy(&resumed.stderr)
        );
        assert_eq!(
            stdout(&resumed).lines().last(),
            want.lines().last(),
            "write {n}"
        );
        assert_eq!(
            server.request_count(),
            3,
            "write {n}: a completed planner or plan call was repeated"
        );
    }
}
