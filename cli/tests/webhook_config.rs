//! Webhooks from the configuration (docs/scale-out.md, "Webhooks"):
//! `[[webhooks]]` entries reach every run of `aisc run`, `aisc serve` and
//! `aisc worker` (besides a run's own), signed with their entry's
//! `secret_env`; each attempt shows in `aisc report`'s page (number, HTTP
//! status, error, never the secret); ended deliveries past their
//! retention are deleted by the delivery loop.

#![allow(clippy::unwrap_used)]

mod serve_support;
mod webhook_support;

use ais_testkit::pg::PgServer;
use serve_support::{write, Server};
use std::path::Path;
use std::process::Command;
use webhook_support::{
    aisc, deliveries, run_ids, text, wait_for, Answer, Receiver, FAILS, OK, PAUSES, SECRET,
};

/// Loopback allowed, short backoffs, and the entry's secret in `HOOK_A`:
/// no `AIS_WEBHOOK_SECRET`, so only the entry's secret can sign.
fn env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("HOOK_A", SECRET),
        ("AIS_WEBHOOK_ALLOW_PRIVATE", "1"),
        ("AIS_WEBHOOK_BACKOFF_MS", "100"),
        ("AIS_WEBHOOK_MAX_BACKOFF_MS", "1000"),
    ]
}

/// `[[webhooks]]` with one entry for `url`: completed and failed only.
fn config(dir: &Path, url: &str) -> String {
    write(
        dir,
        "config.toml",
        &format!(
            "[[webhooks]]\nurl = \"{url}\"\nevents = [\"completed\", \"failed\"]\nsecret_env = \"HOOK_A\"\n"
        ),
    )
}

#[test]
fn configured_webhooks_reach_every_run_show_in_the_report_and_are_pruned() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // The first attempt of the first delivery fails: the report shows two.
    let rx = Receiver::start(vec![Answer::Status(503, None)]);
    let cfg = config(dir, &rx.url());
    let mut ids = Vec::new();
    for (file, program) in [("ok.ais", OK), ("fails.ais", FAILS), ("pauses.ais", PAUSES)] {
        let p = write(dir, file, program);
        let o = aisc(
            dir,
            &[
                "run", &p, "--config", &cfg, "--arg", "n=1", "--memory", "mem",
            ],
            &env(),
        );
        assert!(!text(&o).contains("MfKQ9r8"), "{}", text(&o));
        let new: Vec<String> = run_ids(dir, &["--memory", "mem"])
            .into_iter()
            .filter(|i| !ids.contains(i))
            .collect();
        assert_eq!(new.len(), 1, "{new:?}: {}", text(&o));
        ids.push(new[0].clone());
    }
    // Completed and failed, each once, signed with HOOK_A's secret (the
    // process has no other); the pause is not among the entry's events.
    assert_eq!(rx.delivered().len(), 2, "{:#?}", rx.got());
    let got = rx.got();
    assert!(got.iter().all(|g| g.signed), "{got:#?}");
    let mut kinds: Vec<(String, String)> = got
        .iter()
        .filter(|g| g.answered == 200)
        .map(|g| {
            (
                g.body["data"]["run_id"].as_str().unwrap().to_string(),
                g.body["type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    kinds.sort();
    let mut want = vec![
        (ids[0].clone(), "run.completed".to_string()),
        (ids[1].clone(), "run.failed".to_string()),
    ];
    want.sort();
    assert_eq!(kinds, want);
    assert!(deliveries(dir, &ids[2], &["--memory", "mem"]).is_empty());

    // The report of the first run lists both attempts.
    let page = dir.join("report.html");
    let o = aisc(
        dir,
        &[
            "report",
            &ids[0],
            "-o",
            page.to_str().unwrap(),
            "--memory",
            "mem",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    let section = html
        .split("<h2>Webhooks</h2>")
        .nth(1)
        .unwrap_or_else(|| panic!("no webhooks section"));
    assert!(section.contains("run.completed"), "{section}");
    assert!(
        section.contains("<td>1</td><td>503</td><td>HTTP 503</td>"),
        "{section}"
    );
    assert!(
        section.contains("<td>2</td><td>200</td><td></td>"),
        "{section}"
    );
    assert!(section.contains("delivered"), "{section}");
    assert!(!html.contains("MfKQ9r8"), "the secret never shows");

    // A server with the same configuration adds the entry to a run posted
    // without webhooks; with a retention of 0 days its delivery loop
    // deletes the ended deliveries of the runs before.
    let mut senv = env();
    senv.push(("AIS_WEBHOOK_RETENTION_DAYS", "0"));
    let server = Server::start(
        dir,
        &["ok.ais"],
        &["--memory", "mem", "--config", &cfg],
        &senv,
    );
    let r = server.post("/v1/runs", r#"{"program": "ok.ais", "args": {"n": "7"}}"#);
    assert_eq!(r.status, 201, "{}", r.body);
    let served = r.json()["id"].as_str().unwrap().to_string();
    server.wait_final(&served);
    wait_for("the served run's delivery", || rx.delivered().len() == 3);
    assert!(rx
        .got()
        .iter()
        .any(|g| g.body["data"]["run_id"] == served.as_str() && g.signed));
    wait_for("the older deliveries pruned", || {
        deliveries(dir, &ids[0], &["--memory", "mem"]).is_empty()
            && deliveries(dir, &ids[1], &["--memory", "mem"]).is_empty()
    });

    // A bad entry stops the process at start, naming it.
    let bad = write(
        dir,
        "bad.toml",
        "[[webhooks]]\nurl = \"ftp://example.com/x\"\n",
    );
    let o = aisc(
        dir,
        &[
            "run", "ok.ais", "--config", &bad, "--arg", "n=1", "--memory", "mem",
        ],
        &env(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("webhook.url"), "{}", text(&o));
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn a_worker_adds_its_configured_webhooks_to_the_runs_it_takes() {
    let pg = PgServer::start();
    let url = pg.database("webhook_config");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let rx = Receiver::start(Vec::new());
    let cfg = config(dir, &rx.url());
    let p = write(dir, "ok.ais", OK);
    // Queued by a process without the configuration.
    let o = aisc(
        dir,
        &["run", "--detach", "--store", &url, &p, "--arg", "n=2"],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let mut w = Command::new(env!("CARGO_BIN_EXE_aisc"));
    w.args([
        "worker",
        "--store",
        &url,
        "--config",
        &cfg,
        "--memory",
        ":memory:",
        "--poll-ms",
        "50",
        "-q",
    ])
    .current_dir(dir)
    .env("HOME", dir)
    .env_remove("OPENAI_API_KEY")
    .env_remove("AIS_STORE")
    .env_remove("AIS_WEBHOOK_SECRET")
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null());
    for (k, v) in env() {
        w.env(k, v);
    }
    let mut worker = w.spawn().unwrap();
    wait_for("the worker's delivery", || rx.delivered().len() == 1);
    let _ = worker.kill();
    let _ = worker.wait();
    let got = rx.got();
    assert!(got[0].signed);
    assert_eq!(got[0].body["data"]["run_id"], id.as_str());
    assert_eq!(got[0].body["type"], "run.completed");
    let d = deliveries(dir, &id, &["--store", &url]);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0]["status"], "delivered");
}
