//! Scale-out on PostgreSQL (issue 20), end to end with real processes: a
//! private PostgreSQL server, the mock LLM server, `aisc run --detach`
//! queueing runs and `aisc worker` processes taking them.
//!
//! - fleet: 3 workers, queued multi-call runs, a worker killed (-9) and
//!   restarted a bounded number of times: every run completes once with
//!   the single-machine result, and no LLM call is repeated except calls
//!   that were in flight when their worker was killed;
//! - split brain: a worker stopped (SIGSTOP) past its lease, another takes
//!   the run over and completes it; the first, continued (SIGCONT),
//!   commits nothing.
//!
//! Ignored by plain `cargo test` ("needs PostgreSQL: run ./test"); run
//! without PostgreSQL they fail, naming the fix.
#![allow(clippy::unwrap_used)]

mod fleet_support;

use ais_testkit::mock::MockServer;
use ais_testkit::pg::PgServer;
use ais_vm::journal::{self, Status};
use ais_vm::store::postgres::PgStore;
use ais_vm::store::Store;
use fleet_support::{aisc, wait_until};
use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

/// Four dependent LLM calls; every prompt starts with the run's tag.
const CHAIN: &str = r#"agent A {
    @entry flow main(n: str) -> str {
        ask("{n} step 1") -> a
        ask("{n} step 2", a) -> b
        ask("{n} step 3", b) -> c
        ask("{n} step 4", c) -> d
        return d
    }
}
"#;

fn setup(dir: &Path, mock: &MockServer) -> (String, String) {
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "default_backend = \"m\"\n[[llm_backends]]\nname = \"m\"\nprotocol = \"openai\"\nbase_url = \"{}\"\n",
            mock.openai_url()
        ),
    )
    .unwrap();
    let prog = dir.join("chain.ais");
    std::fs::write(&prog, CHAIN).unwrap();
    (config.display().to_string(), prog.display().to_string())
}

fn tag(i: usize) -> String {
    format!("r{i:03}")
}

/// The single-machine result for run tag `r000` (local SQLite journal).
fn reference(dir: &Path, config: &str, prog: &str) -> String {
    let out = aisc(dir)
        .args([
            "run", "-O0", "-q", prog, "--arg", "n=r000", "--config", config,
        ])
        .args(["--memory", &dir.join("local").display().to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

fn enqueue(dir: &Path, url: &str, config: &str, prog: &str, n: &str) -> String {
    let out = aisc(dir)
        .args([
            "run", "--detach", "-O0", "-q", "--store", url, prog, "--config", config,
        ])
        .args(["--arg", &format!("n={n}")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn worker(dir: &Path, url: &str, config: &str, lease: &str, log: &str) -> Child {
    worker_with(dir, url, config, lease, log, &[])
}

fn worker_with(
    dir: &Path,
    url: &str,
    config: &str,
    lease: &str,
    log: &str,
    extra: &[&str],
) -> Child {
    let args = ["--concurrency", "4", "--lease-secs", lease];
    fleet_support::worker(dir, url, config, log, &[&args[..], extra].concat())
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig}");
}

/// The prompt of an LLM request (its last user message).
fn prompt(r: &ais_testkit::mock::MockRequest) -> String {
    r.body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn fleet_of_three_workers_survives_kills_without_repeating_completed_calls() {
    let pg = PgServer::start();
    let url = pg.database("fleet");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mock = MockServer::start().unwrap();
    mock.set_latency(Duration::from_millis(40));
    let (config, prog) = setup(dir, &mock);
    let want = reference(dir, &config, &prog);
    assert!(want.contains("r000"), "{want}");
    let before = mock.request_count();
    assert_eq!(before, 4, "the chain makes 4 calls");
    const RUNS: usize = 120;
    let ids: Vec<(String, String)> = (0..RUNS)
        .map(|i| (enqueue(dir, &url, &config, &prog, &tag(i)), tag(i)))
        .collect();
    let store = PgStore::connect(&url).unwrap();
    assert_eq!(store.status().unwrap().queue_depth, RUNS as i64);
    // A 2 s lease: long enough that a busy machine's late heartbeat does
    // not hand a live worker's run over (its call would then repeat with
    // no kill to explain it), short enough to keep the test quick.
    let mut workers: Vec<Child> = (0..3)
        .map(|i| worker(dir, &url, &config, "2", &format!("w{i}.log")))
        .collect();
    // Kill a worker (round robin: deterministic, yet each one dies once)
    // every ~0.5 s while runs remain, at most 3 times; note how many
    // requests the mock had received by then.
    let mut kills: Vec<usize> = Vec::new();
    let completed = |s: &PgStore| {
        s.list_runs()
            .unwrap()
            .iter()
            .filter(|r| r.status == Status::Completed)
            .count()
    };
    let mut restarts = 0;
    while kills.len() < 3 && completed(&store) < RUNS * 2 / 3 {
        std::thread::sleep(Duration::from_millis(500));
        let k = kills.len() % workers.len();
        signal(&workers[k], "-9");
        let _ = workers[k].wait();
        // Let the mock read what the dead worker had sent.
        std::thread::sleep(Duration::from_millis(100));
        kills.push(mock.request_count());
        workers[k] = worker(dir, &url, &config, "2", &format!("w{k}-{restarts}.log"));
        restarts += 1;
    }
    wait_until(dir, "every run completed", || completed(&store) == RUNS);
    for w in &mut workers {
        let _ = w.kill();
        let _ = w.wait();
    }
    assert!(!kills.is_empty(), "at least one worker was killed");
    // Every run completed once, with the single-machine result.
    for (id, t) in &ids {
        let rec = journal::load_record_in(&store, id).unwrap();
        assert_eq!(rec.info.status, Status::Completed);
        assert_eq!(
            rec.result,
            Some(serde_json::Value::String(want.replace("r000", t))),
            "run {id} ({t})"
        );
        let asks = rec
            .steps
            .iter()
            .filter(|s| s.op == "ask" && s.kind == "done");
        assert_eq!(asks.count(), 4, "run {id}: each call journaled once");
    }
    // No completed call repeated: a prompt asked twice is allowed only
    // when a kill fell between the two requests (cut off in flight).
    let reqs = mock.requests();
    let mut by_prompt: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, r) in reqs.iter().enumerate().skip(before) {
        by_prompt.entry(prompt(r)).or_default().push(i);
    }
    let mut in_flight_repeats = 0;
    for (p, at) in &by_prompt {
        for w in at.windows(2) {
            let cut = kills.iter().any(|&k| w[0] < k && k <= w[1]);
            assert!(cut, "prompt {p:?} was asked again with no kill between: requests {at:?}, kills {kills:?}");
            in_flight_repeats += 1;
        }
    }
    assert_eq!(by_prompt.len(), RUNS * 4, "every call made");
    assert_eq!(reqs.len() - before, RUNS * 4 + in_flight_repeats);
    let status = store.status().unwrap();
    assert_eq!(status.queue_depth, 0);
    eprintln!(
        "fleet: {RUNS} runs, {} kills, {} takeovers, {in_flight_repeats} calls repeated after being cut off in flight",
        kills.len(),
        status.takeovers
    );
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn a_worker_stopped_past_its_lease_commits_nothing_after_the_takeover() {
    let pg = PgServer::start();
    let url = pg.database("split");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mock = MockServer::start().unwrap();
    mock.set_latency(Duration::from_millis(400));
    let (config, prog) = setup(dir, &mock);
    let id = enqueue(dir, &url, &config, &prog, "r777");
    let store = PgStore::connect(&url).unwrap();
    let mut a = worker(dir, &url, &config, "1", "a.log");
    // A holds the run and has journaled its first call.
    wait_until(dir, "worker A's first journaled call", || {
        store.entries(&id).unwrap().iter().any(|e| e.kind == "done")
    });
    signal(&a, "-STOP");
    let held = store.entries(&id).unwrap().len();
    let mut b = worker(dir, &url, &config, "1", "b.log");
    wait_until(dir, "worker B completing the run", || {
        journal::load_record_in(&store, &id).unwrap().info.status == Status::Completed
    });
    let after_b = journal::load_record_in(&store, &id).unwrap();
    let entries_b = store.entries(&id).unwrap();
    assert!(entries_b.len() >= held);
    assert_eq!(after_b.info.resumes, 1, "taken over once");
    assert_eq!(store.status().unwrap().takeovers, 1);
    let requests_b = mock.request_count();
    // A wakes up: its lease is gone, its writes are fenced.
    signal(&a, "-CONT");
    wait_until(dir, "worker A noticing its lost lease", || {
        std::fs::read_to_string(dir.join("a.log"))
            .unwrap_or_default()
            .contains("lease lost")
    });
    let after_a = journal::load_record_in(&store, &id).unwrap();
    assert_eq!(
        store.entries(&id).unwrap(),
        entries_b,
        "A committed no entry"
    );
    assert_eq!(
        after_a.result, after_b.result,
        "A did not overwrite the result"
    );
    assert_eq!(after_a.info.status, Status::Completed);
    assert_eq!(
        after_a.info.ended_ms, after_b.info.ended_ms,
        "A did not finish it"
    );
    // At most A's one in-flight call reached the mock after the takeover.
    assert!(mock.request_count() <= requests_b + 1);
    // The store counts A's fenced run (metrics: `aisc store status`).
    let fenced: i64 = store
        .status()
        .unwrap()
        .workers
        .iter()
        .map(|w| w.fenced)
        .sum();
    assert_eq!(fenced, 1);
    for w in [&mut a, &mut b] {
        let _ = w.kill();
        let _ = w.wait();
    }
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn a_paused_run_waits_in_the_store_and_resumes_with_its_answer_anywhere() {
    let pg = PgServer::start();
    let url = pg.database("pause");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mock = MockServer::start().unwrap();
    let (config, _) = setup(dir, &mock);
    let prog = dir.join("approve.ais");
    std::fs::write(
        &prog,
        "agent Approve {\n    @entry flow main(topic: str) -> str {\n        let s = ask(\"Summarise \" + topic)\n        let ok = pause(\"Approve? {s}\")\n        return \"{ok}: {s}\"\n    }\n}\n",
    )
    .unwrap();
    let prog = prog.display().to_string();
    let out = aisc(dir)
        .args([
            "run", "--detach", "-q", "--store", &url, &prog, "--config", &config,
        ])
        .args(["--arg", "topic=refund"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let out = aisc(dir)
        .args([
            "worker",
            "--until-idle",
            "--store",
            &url,
            "--config",
            &config,
        ])
        .args(["--memory", ":memory:"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("run {id}: paused")));
    let store = PgStore::connect(&url).unwrap();
    let rec = journal::load_record_in(&store, &id).unwrap();
    assert_eq!(rec.info.status, Status::Paused);
    assert_eq!(mock.request_count(), 1);
    // `aisc runs --store` lists it paused; resume from another directory
    // (another machine) with the answer.
    let elsewhere = tempfile::tempdir().unwrap();
    // The configuration file's `store` selects it too.
    std::fs::create_dir_all(elsewhere.path().join(".apxm")).unwrap();
    std::fs::write(
        elsewhere.path().join(".apxm/config.toml"),
        format!("store = \"{url}\"\n"),
    )
    .unwrap();
    let out = aisc(elsewhere.path()).args(["runs"]).output().unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains(&id) && listed.contains("paused"),
        "{listed}"
    );
    // `--store ''` means the memory directory, whatever the file says.
    let out = aisc(elsewhere.path())
        .args(["runs", "--store", ""])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("no runs journaled"));
    let out = aisc(elsewhere.path())
        .args(["resume", &id, "--store", &url, "--input", "yes", "-q"])
        .args(["--config", &config, "--memory", ":memory:"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(result.starts_with("yes: "), "{result}");
    assert_eq!(
        mock.request_count(),
        1,
        "the summary was replayed, not asked again"
    );
    let rec = journal::load_record_in(&store, &id).unwrap();
    assert_eq!(rec.info.status, Status::Completed);
    assert_eq!(rec.result, Some(serde_json::Value::String(result)));
    // `aisc trace --store` shows its journaled steps from anywhere.
    let out = aisc(elsewhere.path())
        .args(["trace", &id, "--store", &url, "--memory", ":memory:"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ask"), "{text}");
    // Long-term memory written by a worker's run is in the store: found
    // from another machine, by PostgreSQL text search.
    let remember = dir.join("remember.ais");
    std::fs::write(
        &remember,
        "agent A {\n    @entry flow main(fact: str) -> str {\n        umem(fact, \"ltm\")\n        return \"noted\"\n    }\n}\n",
    )
    .unwrap();
    let out = aisc(dir)
        .args([
            "run", "--detach", "-q", "--store", &url, "--config", &config,
        ])
        .arg(&remember)
        .args(["--arg", "fact=Lyon lies on the Rhone"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = aisc(dir)
        .args([
            "worker",
            "--until-idle",
            "--store",
            &url,
            "--config",
            &config,
        ])
        .args(["--memory", ":memory:"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains(": completed"));
    let out = aisc(elsewhere.path())
        .args(["memory", "search", "RHONE lyon", "--json"])
        .output()
        .unwrap();
    let hits: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(hits.as_array().map(Vec::len), Some(1), "{hits}");
    assert_eq!(hits[0]["value"], "Lyon lies on the Rhone");
    // A queued run whose stored program is corrupt is failed by the
    // worker that takes it, not passed from worker to worker.
    let out = aisc(dir)
        .args([
            "run", "--detach", "-q", "--store", &url, "--config", &config,
        ])
        .arg(&remember)
        .args(["--arg", "fact=x"])
        .output()
        .unwrap();
    let bad = String::from_utf8_lossy(&out.stdout).trim().to_string();
    pg.psql(
        &url,
        &format!("UPDATE runs SET artifact_sha256 = 'x' WHERE id = '{bad}'"),
    );
    let out = aisc(dir)
        .args([
            "worker",
            "--until-idle",
            "--store",
            &url,
            "--config",
            &config,
        ])
        .args(["--memory", ":memory:"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("run {bad}: error")));
    let info = store.list_runs().unwrap();
    let info = info.iter().find(|r| r.id == bad).unwrap();
    assert_eq!(info.status, Status::Failed);
    assert!(info
        .error
        .as_deref()
        .unwrap_or_default()
        .contains("SHA-256"));
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn a_worker_stopped_with_sigterm_hands_its_runs_back_and_exits_0() {
    let pg = PgServer::start();
    let url = pg.database("term");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mock = MockServer::start().unwrap();
    let (config, prog) = setup(dir, &mock);
    let want = reference(dir, &config, &prog);
    let before = mock.request_count();
    mock.set_latency(Duration::from_millis(300));
    let ids: Vec<(String, String)> = (100..102)
        .map(|i| (enqueue(dir, &url, &config, &prog, &tag(i)), tag(i)))
        .collect();
    let store = PgStore::connect(&url).unwrap();
    // A 60 s lease: a run seen again before it could have expired was
    // handed back, not taken over.
    let mut a = worker_with(dir, &url, &config, "60", "a.log", &["--grace-secs", "0.1"]);
    wait_until(dir, "worker A journaling a call of each run", || {
        ids.iter()
            .all(|(id, _)| store.entries(id).unwrap().iter().any(|e| e.kind == "done"))
    });
    signal(&a, "-TERM");
    let mut code = None;
    wait_until(dir, "worker A exiting", || {
        code = a.try_wait().unwrap().map(|s| s.code());
        code.is_some()
    });
    assert_eq!(code, Some(Some(0)), "exit status 0");
    std::thread::sleep(Duration::from_millis(100));
    let exit_at = mock.request_count();
    let log = std::fs::read_to_string(dir.join("a.log")).unwrap();
    assert!(log.contains("handed back"), "{log}");
    for (id, _) in &ids {
        let rec = journal::load_record_in(&store, id).unwrap();
        assert_eq!(rec.info.status, Status::Queued, "run {id} is queued again");
        assert!(
            store.entries(id).unwrap().iter().any(|e| e.kind == "done"),
            "journal kept"
        );
    }
    let s = store.status().unwrap();
    assert_eq!(s.workers.iter().map(|w| w.handed_back).sum::<i64>(), 2);
    assert_eq!(s.queue_depth, 2);

    let mut b = worker(dir, &url, &config, "60", "b.log");
    wait_until(dir, "worker B completing both runs", || {
        ids.iter().all(|(id, _)| {
            journal::load_record_in(&store, id).unwrap().info.status == Status::Completed
        })
    });
    let _ = b.kill();
    let _ = b.wait();
    for (id, t) in &ids {
        let rec = journal::load_record_in(&store, id).unwrap();
        assert_eq!(
            rec.result,
            Some(serde_json::Value::String(want.replace("r000", t)))
        );
        let asks = rec
            .steps
            .iter()
            .filter(|s| s.op == "ask" && s.kind == "done");
        assert_eq!(asks.count(), 4, "run {id}: each call journaled once");
    }
    assert_eq!(
        store.status().unwrap().takeovers,
        0,
        "handed back, not taken over"
    );
    // No completed call repeated: only calls in flight when A stopped
    // were asked again (at most one per run).
    let reqs = mock.requests();
    let mut by_prompt: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, r) in reqs.iter().enumerate().skip(before) {
        by_prompt.entry(prompt(r)).or_default().push(i);
    }
    let mut repeats = 0;
    for (p, at) in &by_prompt {
        assert!(at.len() <= 2, "{p:?} asked {} times", at.len());
        if let [first, second] = at[..] {
            assert!(
                first < exit_at && exit_at <= second,
                "{p:?} repeated outside the stop"
            );
            repeats += 1;
        }
    }
    assert!(repeats <= ids.len());
    assert_eq!(by_prompt.len(), ids.len() * 4);
}

/// Issue 32, defect 9: a worker logged `run ID: failed` with no reason.
/// Now the line names the failure and says it was recorded in the store.
#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn a_worker_logs_why_a_run_failed_and_that_the_store_has_it() {
    let pg = PgServer::start();
    let url = pg.database("failed");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mock = MockServer::start().unwrap();
    let (config, _) = setup(dir, &mock);
    let prog = dir.join("fails.ais");
    std::fs::write(
        &prog,
        "agent A {\n    @entry flow main(n: str) -> str {\n        let _z = 1 / 0\n        return n\n    }\n}\n",
    )
    .unwrap();
    let id = enqueue(dir, &url, &config, &prog.display().to_string(), "x");
    let mut w = worker_with(dir, &url, &config, "60", "w.log", &["--until-idle"]);
    let mut code = None;
    wait_until(dir, "the worker going idle", || {
        code = w.try_wait().unwrap().map(|s| s.code());
        code.is_some()
    });
    assert_eq!(code, Some(Some(0)));
    let log = std::fs::read_to_string(dir.join("w.log")).unwrap();
    let line = log
        .lines()
        .find(|l| l.starts_with(&format!("run {id}")))
        .unwrap_or_else(|| panic!("no line for {id}: {log}"));
    assert!(line.contains(": failed: "), "{line}");
    assert!(line.contains("arith.div_by_zero"), "{line}");
    assert!(line.ends_with("(recorded as failed)"), "{line}");
    let store = PgStore::connect(&url).unwrap();
    let rec = journal::load_record_in(&store, &id).unwrap();
    assert_eq!(rec.info.status, Status::Failed);
}
