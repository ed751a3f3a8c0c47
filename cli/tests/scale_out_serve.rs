//! `aisc serve` on the shared PostgreSQL store (issue 20): served runs
//! journaled in the store and visible from any process; `--enqueue`
//! handing runs to `aisc worker` processes; the fleet's metrics on
//! `/metrics` and in `aisc store status`.
//!
//! Ignored by plain `cargo test` ("needs PostgreSQL: run ./test"); run
//! without PostgreSQL they fail, naming the fix.
#![allow(clippy::unwrap_used)]

mod serve_support;

use ais_testkit::mock::MockServer;
use ais_testkit::pg::PgServer;
use serde_json::{json, Value as Json};
use serve_support::{aisc, mock_config, write, Server};
use std::process::{Child, Command};

const TWO: &str = "agent Two {\n    @entry flow main(topic: str) -> str {\n        ask(\"First \" + topic) -> a\n        print(\"topic\", topic)\n        return ask(\"Then \" + topic, a)\n    }\n}\n";

fn worker(dir: &std::path::Path, url: &str, config: &str) -> Child {
    let args = ["--store", url, "--config", config, "--memory", ":memory:"];
    serve_support::worker(
        dir,
        &[&args[..], &["--poll-ms", "50", "--lease-secs", "5"]].concat(),
        &[],
    )
}

fn run_ids(dir: &std::path::Path, url: &str) -> String {
    let out = aisc(dir, &["runs", "--store", url]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn served_runs_are_journaled_in_the_store_and_can_be_handed_to_workers() {
    let pg = PgServer::start();
    let url = pg.database("served");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mock = MockServer::start().unwrap();
    let config = mock_config(dir, &mock.openai_url());
    let p = write(dir, "two.ais", TWO);
    let body = json!({"program": "two.ais", "args": {"topic": "bees"}}).to_string();

    // In-process: journaled in the store, listed by another process.
    let s = Server::start(
        dir,
        &[&p],
        &["--store", &url, "--config", &config, "--memory", ":memory:"],
        &[],
    );
    let r = s.post("/v1/runs?wait=true", &body);
    assert_eq!(r.status, 201, "{}", r.body);
    let j = r.json();
    assert_eq!(j["status"], "succeeded", "{j}");
    let id = j["id"].as_str().unwrap().to_string();
    assert!(run_ids(dir, &url).contains(&id));
    let shown = aisc(dir, &["runs", "show", &id, "--store", &url]);
    assert!(String::from_utf8_lossy(&shown.stdout).contains("completed"));
    // Its episodic log too: the print is in the store's log.
    let trace = aisc(dir, &["trace", &id, "--store", &url, "--json"]);
    let trace = String::from_utf8_lossy(&trace.stdout);
    assert!(
        trace
            .lines()
            .any(|l| l.contains("\"op\":\"print\"") && l.contains("topic bees")),
        "{trace}"
    );
    drop(s);
    // A new server on the same store answers for the run it never held.
    let s = Server::start(
        dir,
        &[&p],
        &["--store", &url, "--config", &config, "--memory", ":memory:"],
        &[],
    );
    let again = s.get(&format!("/v1/runs/{id}")).json();
    assert_eq!(again["status"], "succeeded", "{again}");
    assert_eq!(again["result"], j["result"]);
    drop(s);

    // --enqueue: a worker process runs it; the client gets the result.
    let calls_before = mock.request_count();
    let s = Server::start(
        dir,
        &[&p],
        &[
            "--store",
            &url,
            "--config",
            &config,
            "--memory",
            ":memory:",
            "--enqueue",
        ],
        &[],
    );
    let mut w = worker(dir, &url, &config);
    let r = s.post("/v1/runs?wait=true", &body);
    assert_eq!(r.status, 201, "{}", r.body);
    let q = r.json();
    assert_eq!(q["status"], "succeeded", "{q}");
    assert_eq!(q["result"], j["result"], "same program, same mock replies");
    let qid = q["id"].as_str().unwrap();
    assert_ne!(qid, id);
    // The worker made the same calls as the in-process run, once.
    assert!(calls_before >= 1);
    assert_eq!(mock.request_count(), 2 * calls_before);
    let from_store = aisc(dir, &["runs", "show", qid, "--store", &url]);
    assert!(String::from_utf8_lossy(&from_store.stdout).contains("completed"));
    let status: Json =
        serde_json::from_slice(&aisc(dir, &["store", "status", "--store", &url, "--json"]).stdout)
            .unwrap();
    assert_eq!(status["runs"]["completed"], 2, "{status}");
    let _ = w.kill();
    let _ = w.wait();

    // Without a PostgreSQL store, --enqueue is refused.
    let out = aisc(dir, &["serve", &p, "--enqueue", "--memory", ":memory:"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--store postgres://"));
}

/// The fleet's numbers after a forced takeover: worker A takes a run and
/// is killed (-9); B takes it over when A's lease runs out.
#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn metrics_count_a_forced_takeover_in_store_status_and_on_metrics() {
    let pg = PgServer::start();
    let url = pg.database("metrics");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mock = MockServer::start().unwrap();
    mock.set_latency(std::time::Duration::from_millis(300));
    let config = mock_config(dir, &mock.openai_url());
    let p = write(dir, "two.ais", TWO);
    let out = aisc(
        dir,
        &[
            "run",
            "--detach",
            "-q",
            "--store",
            &url,
            &p,
            "--config",
            &config,
            "--arg",
            "topic=ants",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let status = || -> Json {
        let out = aisc(dir, &["store", "status", "--store", &url, "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(status()["runs"]["queued"], 1);

    let lease = |w: &str| -> Child {
        let args = ["--store", &url, "--config", &config, "--memory", ":memory:"];
        serve_support::worker(
            dir,
            &[&args[..], &["--poll-ms", "50", "--lease-secs", w]].concat(),
            &[],
        )
    };
    let mut a = lease("1");
    let mut waited = 0;
    while status()["runs"]["running"] != 1 {
        waited += 1;
        assert!(waited < 600, "worker A never took the run");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = a.kill();
    let _ = a.wait();
    let mut b = lease("1");
    let mut waited = 0;
    while status()["runs"]["completed"] != 1 {
        waited += 1;
        assert!(
            waited < 1200,
            "worker B never completed the run: {}",
            status()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = b.kill();
    let _ = b.wait();

    let s = status();
    assert_eq!(s["takeovers"], 1, "{s}");
    assert_eq!(s["queue_depth"], 0, "{s}");
    let workers = s["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2, "{s}");
    let of = |pid: u32| {
        workers
            .iter()
            // A worker is named `host:pid:start` (`store::lease`).
            .find(|w| w["worker"].as_str().unwrap().contains(&format!(":{pid}:")))
            .unwrap_or_else(|| panic!("no worker {pid} in {s}"))
    };
    assert_eq!(of(a.id())["runs_taken"], 1);
    assert_eq!(of(a.id())["takeovers"], 0);
    assert_eq!(of(b.id())["runs_taken"], 1);
    assert_eq!(of(b.id())["takeovers"], 1);
    assert!(run_ids(dir, &url).contains(&id));

    // Any server on the store reports the same numbers on /metrics.
    let srv = Server::start(
        dir,
        &[&p],
        &["--store", &url, "--config", &config, "--memory", ":memory:"],
        &[],
    );
    let m = srv.get("/metrics").body;
    for line in [
        "ais_store_lease_takeovers_total 1".to_string(),
        "ais_store_queue_depth 0".to_string(),
        "ais_store_runs{status=\"completed\"} 1".to_string(),
        "ais_store_runs{status=\"queued\"} 0".to_string(),
        format!(
            "ais_store_worker_takeovers_total{{worker=\"{}\"}} 1",
            of(b.id())["worker"].as_str().unwrap()
        ),
        format!(
            "ais_store_worker_runs_taken_total{{worker=\"{}\"}} 1",
            of(a.id())["worker"].as_str().unwrap()
        ),
    ] {
        assert!(m.lines().any(|l| l == line), "no `{line}` in\n{m}");
    }
}

/// Issue 32, defect 8: cancelling a run handed to the fleet answered `202
/// cancelled` but left it queued in the store, where a worker then ran it.
/// Now the store has it failed (`cancelled`) and no worker takes it.
#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn a_run_cancelled_through_serve_enqueue_is_cancelled_in_the_store() {
    let pg = PgServer::start();
    let url = pg.database("cancel");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mock = MockServer::start().unwrap();
    let config = mock_config(dir, &mock.openai_url());
    let p = write(dir, "two.ais", TWO);
    let body = json!({"program": "two.ais", "args": {"topic": "bees"}}).to_string();
    let s = Server::start(
        dir,
        &[&p],
        &[
            "--store",
            &url,
            "--config",
            &config,
            "--memory",
            ":memory:",
            "--enqueue",
        ],
        &[],
    );
    // No worker yet: the run waits in the store's queue.
    let r = s.post("/v1/runs", &body);
    assert!(r.status == 201 || r.status == 202, "{}", r.body);
    let id = r.json()["id"].as_str().unwrap().to_string();
    let mut queued = false;
    for _ in 0..400 {
        if run_ids(dir, &url).contains(&id) {
            queued = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(queued, "the run reached the store");
    let c = s.post(&format!("/v1/runs/{id}/cancel"), "");
    assert_eq!(c.status, 202, "{}", c.body);
    let mut failed = false;
    for _ in 0..400 {
        let shown = aisc(dir, &["runs", "show", &id, "--store", &url]);
        let text = String::from_utf8_lossy(&shown.stdout).into_owned();
        if text.contains("failed") && text.contains("cancelled") {
            failed = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(failed, "the store has the run cancelled");
    // A worker finds nothing to do: the cancelled run is not run.
    let out = Command::new(env!("CARGO_BIN_EXE_aisc"))
        .args(["worker", "--store", &url, "--config", &config])
        .args(["--memory", ":memory:", "--poll-ms", "50", "--until-idle"])
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("AIS_STORE")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(mock.request_count(), 0, "no call of the cancelled run");
    let status: Json =
        serde_json::from_slice(&aisc(dir, &["store", "status", "--store", &url, "--json"]).stdout)
            .unwrap();
    assert_eq!(status["runs"]["failed"], 1, "{status}");
    assert_eq!(status["queue_depth"], 0, "{status}");
}
