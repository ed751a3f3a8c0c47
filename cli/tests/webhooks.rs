//! Webhooks (issue 39, deliverable 3b): a run's completion, failure or
//! pause POSTed to a URL, signed (Standard Webhooks), retried, journaled.
//!
//! The receiver is an HTTP server in the test (a thread per connection)
//! that checks every signature with the secret, counts deliveries by id and
//! answers as each test scripts it (500, 503 with `Retry-After`, a hang).
//! The SQLite tests run `aisc run` and `aisc serve` on a memory directory;
//! the PostgreSQL ones (`#[ignore = "needs PostgreSQL: run ./test"]`) run
//! `aisc worker`s, and kill them (-9) between a run's end and its delivery
//! and in the middle of a delivery. No wall-clock upper bound is asserted.
#![allow(clippy::unwrap_used)]

mod serve_support;
mod webhook_support;

use ais_testkit::pg::PgServer;
use serve_support::{write, Server};
use std::collections::BTreeSet;
use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use webhook_support::{
    aisc, deliveries, run_ids, text, wait_for, Answer, Got, Receiver, FAILS, OK, PAUSES, SECRET,
};

/// The environment of every `aisc` here: the secret, loopback allowed,
/// short backoffs.
fn env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("AIS_WEBHOOK_SECRET", SECRET),
        ("AIS_WEBHOOK_ALLOW_PRIVATE", "1"),
        ("AIS_WEBHOOK_BACKOFF_MS", "100"),
        ("AIS_WEBHOOK_MAX_BACKOFF_MS", "1000"),
    ]
}

#[test]
fn completion_failure_and_pause_are_each_delivered_once_signed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let rx = Receiver::start(Vec::new());
    let url = rx.url();
    let mem = ["--memory", "mem"];
    let mut outputs = Vec::new();
    for (file, program, code) in [
        ("ok.ais", OK, 0),
        ("fails.ais", FAILS, 1),
        ("pauses.ais", PAUSES, 3),
    ] {
        let p = write(dir, file, program);
        let o = aisc(
            dir,
            &[
                "run",
                &p,
                "--arg",
                "n=7",
                "-q",
                "--webhook",
                &url,
                "--memory",
                "mem",
            ],
            &env(),
        );
        assert_eq!(o.status.code(), Some(code), "{file}: {}", text(&o));
        outputs.push(text(&o));
    }
    let ids = run_ids(dir, &mem);
    assert_eq!(ids.len(), 3, "{ids:?}");
    // The paused run, answered, completes: a fourth event of its own.
    let o = aisc(
        dir,
        &["resume", &ids[2], "--input", "yes", "-q", "--memory", "mem"],
        &env(),
    );
    assert!(o.status.success(), "{}", text(&o));
    outputs.push(text(&o));

    let got = rx.got();
    assert_eq!(got.len(), 4, "{got:#?}");
    assert!(
        got.iter().all(|g| g.signed),
        "every signature checks: {got:#?}"
    );
    let types: Vec<&str> = got
        .iter()
        .map(|g| g.body["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["run.completed", "run.failed", "run.paused", "run.completed"]
    );
    let runs: Vec<&str> = got
        .iter()
        .map(|g| g.body["data"]["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(runs, [&ids[0], &ids[1], &ids[2], &ids[2]]);
    assert_eq!(rx.delivered().len(), 4, "each event its own id");
    assert!(got.iter().all(|g| g.body["id"] == g.id.as_str()));
    assert_eq!(got[0].body["data"]["result"], "done 7");
    assert_eq!(got[1].body["data"]["error"]["code"], "arith.div_by_zero");
    assert_eq!(got[2].body["data"]["waiting_for"], "Approve 7?");
    assert_eq!(got[3].body["data"]["result"], "answer yes");
    assert!(got[0].body["data"]["cost"]["tokens"].is_i64());

    // Journaled: the paused run lists both deliveries, one attempt each.
    let d = deliveries(dir, &ids[2], &mem);
    assert_eq!(d.len(), 2, "{d:#?}");
    for (d, event) in d.iter().zip(["paused", "completed"]) {
        assert_eq!(d["event"], event);
        assert_eq!(d["status"], "delivered");
        assert_eq!(d["attempts"].as_array().unwrap().len(), 1);
        assert_eq!(d["attempts"][0]["http_status"], 200);
    }
    let shown = aisc(dir, &["runs", "show", &ids[0], "--memory", "mem"], &[]);
    assert!(
        text(&shown).contains("run.completed  delivered"),
        "{}",
        text(&shown)
    );
    for o in &outputs {
        assert!(!o.contains("MfKQ9r8"), "the secret never prints: {o}");
    }
}

#[test]
fn failing_answers_are_retried_with_backoff_then_delivered_or_failed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let p = write(dir, "ok.ais", OK);
    let rx = Receiver::start(vec![
        Answer::Status(500, None),
        Answer::Status(503, Some("1")),
        Answer::Status(200, None),
    ]);
    let o = aisc(
        dir,
        &[
            "run",
            &p,
            "--arg",
            "n=1",
            "-q",
            "--webhook",
            &rx.url(),
            "--memory",
            "mem",
        ],
        &env(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let id = &run_ids(dir, &["--memory", "mem"])[0];
    let d = deliveries(dir, id, &["--memory", "mem"]);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["status"], "delivered");
    let attempts = d[0]["attempts"].as_array().unwrap();
    let statuses: Vec<i64> = attempts
        .iter()
        .map(|a| a["http_status"].as_i64().unwrap())
        .collect();
    assert_eq!(statuses, [500, 503, 200]);
    // Retry-After: 1 was honoured (a lower bound only).
    let gap = attempts[2]["at_ms"].as_i64().unwrap() - attempts[1]["at_ms"].as_i64().unwrap();
    assert!(gap >= 1000, "waited {gap} ms after Retry-After: 1");
    let got = rx.got();
    assert_eq!(got.len(), 3);
    assert!(
        got.iter().all(|g| g.signed && g.id == got[0].id),
        "one id, every attempt signed"
    );

    // Bounded attempts: a receiver that keeps failing ends `failed`, visible.
    let rx = Receiver::start(vec![Answer::Status(500, None); 5]);
    let mut env3 = env();
    env3.push(("AIS_WEBHOOK_MAX_ATTEMPTS", "3"));
    let o = aisc(
        dir,
        &[
            "run",
            &p,
            "--arg",
            "n=2",
            "--webhook",
            &rx.url(),
            "--memory",
            "mem",
        ],
        &env3,
    );
    assert!(o.status.success(), "the run itself completed: {}", text(&o));
    assert!(text(&o).contains("failed for good"), "{}", text(&o));
    let id = &run_ids(dir, &["--memory", "mem"])[1];
    let d = deliveries(dir, id, &["--memory", "mem"]);
    assert_eq!(d[0]["status"], "failed");
    assert_eq!(d[0]["attempts"].as_array().unwrap().len(), 3);
    assert_eq!(rx.got().len(), 3);

    // A 404 is not retried.
    let rx = Receiver::start(vec![Answer::Status(404, None)]);
    let o = aisc(
        dir,
        &[
            "run",
            &p,
            "--arg",
            "n=3",
            "-q",
            "--webhook",
            &rx.url(),
            "--memory",
            "mem",
        ],
        &env(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let id = &run_ids(dir, &["--memory", "mem"])[2];
    let d = deliveries(dir, id, &["--memory", "mem"]);
    assert_eq!(d[0]["status"], "failed");
    assert_eq!(d[0]["attempts"].as_array().unwrap().len(), 1);
}

#[test]
fn a_receiver_that_is_down_gets_the_delivery_when_it_comes_up() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let p = write(dir, "ok.ais", OK);
    // A port nobody listens on yet: connections are refused.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/hooks/ais");
    let up: Arc<Mutex<Option<Receiver>>> = Arc::default();
    let later = up.clone();
    let starter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
        *later.lock().unwrap() = Some(Receiver::on(l, Vec::new()));
    });
    let o = aisc(
        dir,
        &[
            "run",
            &p,
            "--arg",
            "n=1",
            "-q",
            "--webhook",
            &url,
            "--memory",
            "mem",
        ],
        &env(),
    );
    assert!(o.status.success(), "{}", text(&o));
    starter.join().unwrap();
    let id = &run_ids(dir, &["--memory", "mem"])[0];
    let d = deliveries(dir, id, &["--memory", "mem"]);
    assert_eq!(d[0]["status"], "delivered", "{d:#?}");
    let attempts = d[0]["attempts"].as_array().unwrap();
    assert!(attempts.len() >= 2, "{attempts:#?}");
    assert!(
        attempts[0]["http_status"].is_null(),
        "the first found no receiver"
    );
    let guard = up.lock().unwrap();
    let rx = guard.as_ref().unwrap();
    assert_eq!(rx.delivered().len(), 1);
    assert!(rx.got().iter().all(|g| g.signed));
}

#[test]
fn the_configuration_names_the_secret_variable_and_allows_private_addresses() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let p = write(dir, "ok.ais", OK);
    let config = write(
        dir,
        "config.toml",
        "[webhooks]\nsecret_env = \"HOOK_KEY\"\nallow_private = true\nbackoff_ms = 100\n",
    );
    let rx = Receiver::start(vec![Answer::Status(502, None)]);
    // No AIS_WEBHOOK_* variable: the file says where the secret is and
    // that loopback is allowed.
    let o = aisc(
        dir,
        &[
            "run",
            &p,
            "--config",
            &config,
            "--arg",
            "n=1",
            "-q",
            "--webhook",
            &rx.url(),
            "--memory",
            "mem",
        ],
        &[("HOOK_KEY", SECRET)],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("MfKQ9r8"), "{}", text(&o));
    let got = rx.got();
    assert_eq!(got.len(), 2, "one 502, then delivered: {got:#?}");
    assert!(got.iter().all(|g| g.signed));
    assert_eq!(rx.delivered().len(), 1);
    // An unknown key is an error that names it.
    let bad = write(dir, "bad.toml", "[webhooks]\nsecret = \"inline\"\n");
    let o = aisc(
        dir,
        &[
            "run", &p, "--config", &bad, "--arg", "n=1", "--memory", "mem",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("secret"), "{}", text(&o));
}

#[test]
fn private_addresses_are_refused_before_any_run_unless_allowed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let p = write(dir, "ok.ais", OK);
    for url in [
        "http://127.0.0.1:9/x",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/x",
    ] {
        let o = aisc(
            dir,
            &[
                "run",
                &p,
                "--arg",
                "n=1",
                "--webhook",
                url,
                "--memory",
                "mem",
            ],
            &[("AIS_WEBHOOK_SECRET", SECRET)],
        );
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("webhook.private"), "{}", text(&o));
    }
    let o = aisc(
        dir,
        &[
            "run",
            &p,
            "--arg",
            "n=1",
            "--webhook",
            "https://example.com/x",
            "--webhook-events",
            "done",
            "--memory",
            "mem",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("webhook.events"), "{}", text(&o));
    assert!(
        run_ids(dir, &["--memory", "mem"]).is_empty(),
        "no run was journaled"
    );
}

#[test]
fn serve_delivers_the_webhooks_of_post_v1_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(dir, "ok.ais", OK);
    write(dir, "fails.ais", FAILS);
    let rx = Receiver::start(Vec::new());
    let server = Server::start(dir, &["ok.ais", "fails.ais"], &["--memory", "mem"], &env());
    let mut ids = Vec::new();
    for program in ["ok.ais", "fails.ais"] {
        let body = serde_json::json!({
            "program": program,
            "args": {"n": "5"},
            "webhooks": [{"url": rx.url(), "events": ["completed", "failed"]}],
        });
        let r = server.post("/v1/runs", &body.to_string());
        assert_eq!(r.status, 201, "{}", r.body);
        let id = r.json()["id"].as_str().unwrap().to_string();
        server.wait_final(&id);
        ids.push(id);
    }
    wait_for("two deliveries", || rx.delivered().len() == 2);
    let got = rx.got();
    assert!(got.iter().all(|g| g.signed));
    let mut seen: Vec<(String, String)> = got
        .iter()
        .map(|g| {
            (
                g.body["data"]["run_id"].as_str().unwrap().to_string(),
                g.body["type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    seen.sort();
    let mut want = vec![
        (ids[0].clone(), "run.completed".to_string()),
        (ids[1].clone(), "run.failed".to_string()),
    ];
    want.sort();
    assert_eq!(seen, want);
    // A refused webhook is a 400 with its code; no run starts.
    let r = server.post(
        "/v1/runs",
        &serde_json::json!({"program": "ok.ais", "args": {"n": "1"},
            "webhooks": [{"url": "ftp://example.com/x"}]})
        .to_string(),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("webhook.url"), "{}", r.body);
}

/// `aisc` arguments for a PostgreSQL store.
fn pg_args(url: &str) -> [&str; 2] {
    ["--store", url]
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn workers_deliver_queued_and_scheduled_runs_events_and_count_them() {
    let pg = PgServer::start();
    let url = pg.database("webhooks_fleet");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let rx = Receiver::start(Vec::new());
    let mut queued = Vec::new();
    for (file, program) in [("ok.ais", OK), ("fails.ais", FAILS), ("pauses.ais", PAUSES)] {
        let p = write(dir, file, program);
        let o = aisc(
            dir,
            &[
                "run",
                "--detach",
                "--store",
                &url,
                &p,
                "--arg",
                "n=1",
                "--webhook",
                &rx.url(),
            ],
            &env(),
        );
        assert!(o.status.success(), "{}", text(&o));
        queued.push(String::from_utf8_lossy(&o.stdout).trim().to_string());
    }
    let p = write(dir, "tick.ais", OK);
    let o = aisc(
        dir,
        &[
            "run",
            "--schedule",
            "* * * * * *",
            "--store",
            &url,
            &p,
            "--arg",
            "n=t",
            "--webhook",
            &rx.url(),
            "--webhook-events",
            "completed",
        ],
        &env(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let schedule = String::from_utf8_lossy(&o.stdout).trim().to_string();

    let mut w = serve_support::worker(
        dir,
        &[
            "--store",
            &url,
            "--memory",
            ":memory:",
            "--poll-ms",
            "50",
            "--listen",
            "127.0.0.1:0",
        ],
        &env(),
    );
    let probes = serve_support::probes_address(&mut w);
    wait_for("the queued runs' events and a tick's", || {
        let got = rx.got();
        queued
            .iter()
            .all(|id| got.iter().any(|g| g.body["data"]["run_id"] == id.as_str()))
            && got.iter().any(|g| {
                g.body["data"]["run_id"]
                    .as_str()
                    .is_some_and(|r| r.starts_with(&format!("{schedule}-t")))
            })
    });
    let o = aisc(
        dir,
        &["schedules", "remove", &schedule, "--store", &url],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let got = rx.got();
    assert!(got.iter().all(|g| g.signed));
    for (id, t) in queued
        .iter()
        .zip(["run.completed", "run.failed", "run.paused"])
    {
        let of: Vec<&Got> = got
            .iter()
            .filter(|g| g.body["data"]["run_id"] == id.as_str())
            .collect();
        assert_eq!(of.len(), 1, "one delivery for {id}: {of:#?}");
        assert_eq!(of[0].body["type"], t);
    }
    // Each delivery row is one event; the metrics count them.
    let rows = pg.psql(
        &url,
        "SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'delivered'",
    );
    let delivered: i64 = rows.trim().parse().unwrap();
    assert!(delivered >= 4, "{delivered}");
    let metrics = serve_support::request(probes, "GET", "/metrics", &[], None).body;
    assert!(
        metrics.contains("ais_webhook_deliveries{status=\"delivered\"}"),
        "{metrics}"
    );
    let shown = deliveries(dir, &queued[1], &pg_args(&url));
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0]["status"], "delivered");
    w.kill().unwrap();
    w.wait().unwrap();
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn kill_9_between_completion_and_delivery_and_mid_delivery_loses_no_event() {
    let pg = PgServer::start();
    let url = pg.database("webhooks_kill");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // The first request hangs: its worker is killed while it is in flight.
    let rx = Receiver::start(vec![Answer::Hang(Duration::from_secs(3))]);
    let p = write(dir, "ok.ais", OK);
    let mut runs = Vec::new();
    for i in 0..6 {
        let o = aisc(
            dir,
            &[
                "run",
                "--detach",
                "--store",
                &url,
                &p,
                "--arg",
                &format!("n={i}"),
                "--webhook",
                &rx.url(),
            ],
            &env(),
        );
        assert!(o.status.success(), "{}", text(&o));
        runs.push(String::from_utf8_lossy(&o.stdout).trim().to_string());
    }
    let args = [
        "--store",
        &url,
        "--memory",
        ":memory:",
        "--poll-ms",
        "50",
        "-q",
    ];
    // Worker A has no secret: it completes the runs and sends nothing;
    // killed -9 with every event in the outbox.
    let mut no_secret = env();
    no_secret.retain(|(k, _)| *k != "AIS_WEBHOOK_SECRET");
    let mut a = serve_support::worker(dir, &args, &no_secret);
    let count = |sql: &str| -> i64 { pg.psql(&url, sql).trim().parse().unwrap() };
    wait_for("six completed runs", || {
        count("SELECT COUNT(*) FROM runs WHERE status = 'completed'") == 6
    });
    a.kill().unwrap();
    a.wait().unwrap();
    assert!(rx.got().is_empty(), "nothing sent without the secret");
    assert_eq!(
        count("SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'"),
        6
    );
    assert_eq!(
        count("SELECT COUNT(DISTINCT (run, event)) FROM webhook_deliveries"),
        6,
        "exactly one row per event"
    );
    // Worker B sends; killed -9 while the first request hangs.
    let mut short = env();
    short.push(("AIS_WEBHOOK_TIMEOUT_MS", "1000"));
    let mut b = serve_support::worker(dir, &args, &short);
    wait_for("a delivery in flight", || rx.hanging.load(Ordering::SeqCst));
    b.kill().unwrap();
    b.wait().unwrap();
    // Worker C takes the killed claim over once its lease runs out.
    let mut c = serve_support::worker(dir, &args, &short);
    wait_for("every delivery recorded", || {
        count("SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'delivered'") == 6
    });
    c.kill().unwrap();
    c.wait().unwrap();
    let ids: BTreeSet<String> = pg
        .psql(&url, "SELECT id FROM webhook_deliveries ORDER BY id")
        .lines()
        .map(|l| l.trim().to_string())
        .collect();
    assert_eq!(ids.len(), 6);
    // Every event delivered at least once, none invented.
    assert_eq!(rx.delivered(), ids);
    let got = rx.got();
    // The delivery in flight when B died was sent again by C (B never
    // recorded it): the receiver sees that id at least twice. (B may have
    // sent others it had no time to record: they come again too.)
    let most = ids
        .iter()
        .map(|id| got.iter().filter(|g| &g.id == id).count())
        .max()
        .unwrap_or(0);
    assert!(most >= 2 && got.len() >= 7, "{got:#?}");
    assert!(got.iter().all(|g| g.signed));
    assert!(got.iter().all(|g| ids.contains(&g.id)));
    assert!(got
        .iter()
        .all(|g| runs.iter().any(|r| g.body["data"]["run_id"] == r.as_str())));
    let mut seen: Vec<&str> = got
        .iter()
        .map(|g| g.body["data"]["run_id"].as_str().unwrap())
        .collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), 6);
}
