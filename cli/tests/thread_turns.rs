//! A thread's runs take turns across processes (docs/serve.md, "Concurrent
//! runs on one thread"): the store numbers a thread's runs as they are
//! linked, and a run starts only when every run linked before it has
//! ended, wherever it runs. Runs posted at once to two servers on one
//! PostgreSQL store (each running runs itself, or both handing them to
//! two workers) never interleave their reads and writes of the thread,
//! and a waiting run is `queued`. On SQLite, a waiting run holds no
//! executor, and `aisc run --thread` waits for the server's runs.

#![allow(clippy::unwrap_used)]

mod serve_support;

use serde_json::{json, Value as Json};
use serve_support::{aisc, request, write, Server};
use std::collections::HashMap;

/// Reads the history and the state's `trail`, waits on a slow LLM call
/// (`reason`: 10 s times `--sim-delay-scale`),
/// then appends its message to the trail: two runs of one thread that
/// overlapped would lose one's mark (read-modify-write).
const TURN: &str = "agent Turn {
    @entry flow main(msg: str) -> str {
        let past = thread_history()
        let before = thread_state(key: \"trail\")
        let said = reason(\"Say \" + msg)
        thread_set(key: \"trail\", value: \"{before}+{msg}\")
        return \"{msg} after {past}\"
    }
}
";

/// A quick run on another thread.
const QUICK: &str = "agent Quick {
    @entry flow main(msg: str) -> str {
        let said = ask(\"Say \" + msg)
        return msg
    }
}
";

fn send(s: &Server, method: &str, path: &str, body: Json) -> (u16, Json) {
    let text = body.to_string();
    let r = request(
        s.addr,
        method,
        path,
        &[("Content-Type", "application/json")],
        Some(text.as_bytes()),
    );
    (
        r.status,
        serde_json::from_str(r.body.trim()).unwrap_or(Json::Null),
    )
}

/// Posts `n` runs on thread `thread` at once, alternating between the
/// servers; returns each run's id with the index of its server.
fn post_at_once(servers: &[&Server], thread: &str, n: usize) -> Vec<(usize, String)> {
    std::thread::scope(|sc| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let s = servers[i % servers.len()];
                sc.spawn(move || {
                    let (st, j) = send(
                        s,
                        "POST",
                        &format!("/v1/threads/{thread}/runs"),
                        json!({"program": "turn.ais", "args": {"msg": format!("m{i}")}}),
                    );
                    assert_eq!(st, 201, "{j}");
                    (i % servers.len(), j["id"].as_str().unwrap().to_string())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// The thread's runs in the store's order (seq 1 first).
fn order(s: &Server, thread: &str) -> Vec<String> {
    let h = s.get(&format!("/v1/threads/{thread}/history")).json();
    h["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_string())
        .collect()
}

/// Watches the runs until all have ended: whenever the run at place k is
/// seen running, every run two or more places after it must be seen
/// queued (the one right after may start as k ends, on another server).
/// Returns how many such looks there were.
fn watch_turns(servers: &[&Server], runs: &[(usize, String)], seq: &[String]) -> usize {
    let server_of: HashMap<&str, usize> = runs.iter().map(|(s, id)| (id.as_str(), *s)).collect();
    let mut looks = 0;
    let mut last = Vec::new();
    for _ in 0..3000 {
        let status: Vec<String> = seq
            .iter()
            .map(|id| {
                let s = servers[server_of[id.as_str()]];
                s.get(&format!("/v1/runs/{id}")).json()["status"]
                    .as_str()
                    .unwrap_or("?")
                    .to_string()
            })
            .collect();
        if status
            .iter()
            .all(|s| !matches!(s.as_str(), "queued" | "running"))
        {
            return looks;
        }
        last.clone_from(&status);
        if let Some(k) = status.iter().position(|s| s == "running") {
            for (later, st) in status.iter().enumerate().skip(k + 2) {
                assert_eq!(
                    st,
                    "queued",
                    "run {} (place {}) is {st} while the run at place {} runs: {status:?}",
                    seq[later],
                    later + 1,
                    k + 1
                );
            }
            if k + 2 < status.len() {
                looks += 1;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the thread's runs did not end: {last:?}");
}

/// Every run succeeded and saw every run before it completed; returns
/// their messages in the store's order.
fn check_in_turn(servers: &[&Server], runs: &[(usize, String)], seq: &[String]) -> Vec<String> {
    let server_of: HashMap<&str, usize> = runs.iter().map(|(s, id)| (id.as_str(), *s)).collect();
    let mut msgs = Vec::new();
    for (k, id) in seq.iter().enumerate() {
        let j = servers[server_of[id.as_str()]].wait_final(id);
        assert_eq!(j["status"], "succeeded", "{j}");
        let text = j["result"].as_str().unwrap();
        assert_eq!(
            text.matches(r#""status":"completed""#).count(),
            k,
            "the run at place {} saw: {text}",
            k + 1
        );
        assert!(!text.contains(r#""status":"running""#), "{text}");
        assert!(!text.contains(r#""status":"queued""#), "{text}");
        msgs.push(text.split(' ').next().unwrap().to_string());
    }
    msgs
}

/// The trail has every run's mark, in the store's order: none was lost
/// to an overlapping run.
fn check_trail(s: &Server, thread: &str, msgs: &[String]) {
    let state = s.get(&format!("/v1/threads/{thread}/state")).json();
    assert_eq!(
        state["values"]["trail"],
        format!("null+{}", msgs.join("+")),
        "{state}"
    );
    assert_eq!(state["version"], msgs.len());
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn two_servers_on_one_postgresql_store_run_a_threads_runs_in_turn() {
    let pg = ais_testkit::pg::PgServer::start();
    let url = pg.database("thread_turns");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let p = write(dir, "turn.ais", TURN);
    // Several executors each: only the thread keeps the runs apart.
    let args = [
        "--store",
        url.as_str(),
        "--memory",
        ":memory:",
        "--sim-delay-scale",
        "0.03",
        "--max-concurrent-runs",
        "4",
    ];
    let a = Server::start(dir, &[&p], &args, &[]);
    let b = Server::start(dir, &[&p], &args, &[]);
    let (st, _) = send(&a, "POST", "/v1/threads", json!({"thread_id": "two"}));
    assert_eq!(st, 201);
    let servers = [&a, &b];
    let runs = post_at_once(&servers, "two", 6);
    let seq = order(&b, "two");
    assert_eq!(seq.len(), 6);
    let looks = watch_turns(&servers, &runs, &seq);
    assert!(looks > 0, "never saw a run wait");
    let msgs = check_in_turn(&servers, &runs, &seq);
    check_trail(&a, "two", &msgs);
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn runs_of_a_thread_queued_by_two_servers_are_claimed_in_turn_by_two_workers() {
    let pg = ais_testkit::pg::PgServer::start();
    let url = pg.database("thread_turns_fleet");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let p = write(dir, "turn.ais", TURN);
    let args = [
        "--store",
        url.as_str(),
        "--memory",
        ":memory:",
        "--enqueue",
        "--max-concurrent-runs",
        "8",
    ];
    let a = Server::start(dir, &[&p], &args, &[]);
    let b = Server::start(dir, &[&p], &args, &[]);
    let worker_args = [
        "--store",
        url.as_str(),
        "--memory",
        ":memory:",
        "--poll-ms",
        "50",
        "--concurrency",
        "4",
        "--sim-delay-scale",
        "0.03",
    ];
    let mut workers: Vec<_> = (0..2)
        .map(|_| serve_support::worker(dir, &worker_args, &[]))
        .collect();
    let (st, _) = send(&a, "POST", "/v1/threads", json!({"thread_id": "fleet"}));
    assert_eq!(st, 201);
    let servers = [&a, &b];
    let runs = post_at_once(&servers, "fleet", 6);
    let seq = order(&a, "fleet");
    assert_eq!(seq.len(), 6);
    // In the store too, a run waiting for its turn is queued.
    let o = aisc(dir, &["runs", "--store", &url, "--json"]);
    let listed = String::from_utf8_lossy(&o.stdout).to_string();
    let last = listed
        .lines()
        .filter_map(|l| serde_json::from_str::<Json>(l).ok())
        .find(|r| r["id"] == seq[5].as_str())
        .unwrap_or_else(|| panic!("{} not listed: {listed}", seq[5]));
    assert_eq!(last["status"], "queued", "{last}");
    let looks = watch_turns(&servers, &runs, &seq);
    assert!(looks > 0, "never saw a run wait");
    let msgs = check_in_turn(&servers, &runs, &seq);
    check_trail(&b, "fleet", &msgs);
    for w in &mut workers {
        let _ = w.kill();
        let _ = w.wait();
    }
}

#[test]
fn a_run_waiting_for_its_turn_holds_no_executor_and_aisc_run_waits_too() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let p = write(dir, "turn.ais", TURN);
    let quick = write(dir, "quick.ais", QUICK);
    // Two executors: the thread's second run waits off them, so a run of
    // another thread takes the second at once.
    let s = Server::start(
        dir,
        &[&p, &quick],
        &["--sim-delay-scale", "0.3", "--max-concurrent-runs", "2"],
        &[],
    );
    for t in ["q", "r"] {
        let (st, _) = send(&s, "POST", "/v1/threads", json!({"thread_id": t}));
        assert_eq!(st, 201);
    }
    let runs = post_at_once(&[&s], "q", 2);
    let seq = order(&s, "q");
    let first = &seq[0];
    s.wait_status(first, "running");
    let (st, other) = send(
        &s,
        "POST",
        "/v1/threads/r/runs?wait=true",
        json!({"program": "quick.ais", "args": {"msg": "other"}}),
    );
    assert_eq!(st, 201, "{other}");
    assert_eq!(other["status"], "succeeded", "{other}");
    assert_eq!(
        s.get(&format!("/v1/runs/{first}")).json()["status"],
        "running",
        "the other thread's run waited for this thread's first"
    );
    let second = s.get(&format!("/v1/runs/{}", seq[1])).json();
    assert_eq!(second["status"], "queued", "{second}");
    // `aisc run --thread` on the same memory directory waits for both.
    let o = aisc(
        dir,
        &[
            "run",
            "turn.ais",
            "--thread",
            "q",
            "--sim-delay-scale",
            "0",
            "--arg",
            "msg=cli",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(text.matches(r#""status":"completed""#).count(), 2, "{text}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("waiting for run"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut msgs = check_in_turn(&[&s], &runs, &seq);
    // Its events say what it waited for (read once it ended: the stream
    // lasts as long as the run).
    let events = s.get(&format!("/v1/runs/{}/events", seq[1]));
    assert!(
        events.body.contains(&format!(r#""waiting_for":"{first}""#)),
        "{}",
        events.body
    );
    msgs.push("cli".into());
    check_trail(&s, "q", &msgs);
}
