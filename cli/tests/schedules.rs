//! Schedules (issue 39, deliverable 3): `aisc run --schedule CRON` stores
//! a schedule, and the workers queue one run per tick, exactly once per
//! tick across the fleet, while workers are killed (-9) and restarted.
//!
//! No wall-clock bound is asserted: the test counts ticks and runs (every
//! tick from the first to the last has exactly one run, and each ran).
//!
//! Ignored by plain `cargo test` ("needs PostgreSQL: run ./test").
#![allow(clippy::unwrap_used)]

mod serve_support;

use ais_testkit::mock::MockServer;
use ais_testkit::pg::PgServer;
use serde_json::Value as Json;
use serve_support::{aisc, mock_config, write};
use std::time::Duration;

const TICK: &str =
    "agent T {\n    @entry flow main(n: str) -> str {\n        return \"tick \" + n\n    }\n}\n";

/// Ticks the test watches (one a second).
const TICKS: usize = 60;

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn a_schedule_fires_exactly_once_per_tick_while_workers_are_killed_and_restarted() {
    let pg = PgServer::start();
    let url = pg.database("schedules");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mock = MockServer::start().unwrap();
    let config = mock_config(dir, &mock.openai_url());
    let p = write(dir, "tick.ais", TICK);
    let out = aisc(
        dir,
        &[
            "run",
            "--schedule",
            "* * * * * *",
            "--tz",
            "Europe/Oslo",
            "--store",
            &url,
            &p,
            "--config",
            &config,
            "--arg",
            "n=x",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(id.starts_with('s'), "{id}");

    let args = [
        "--store",
        &url,
        "--config",
        &config,
        "--memory",
        ":memory:",
        "--poll-ms",
        "50",
        "-q",
    ];
    let start = || serve_support::worker(dir, &args, &[]);
    let mut workers = vec![start(), start()];
    let ticks = |where_: &str| -> Vec<i64> {
        let prefix = format!("{id}-t");
        pg.psql(
            &url,
            &format!("SELECT id FROM runs WHERE id LIKE '{prefix}%' {where_} ORDER BY id"),
        )
        .lines()
        .map(|l| l.trim().strip_prefix(&prefix).unwrap().parse().unwrap())
        .collect()
    };
    // Kill one worker (-9) every 3 s and start another; now and then both,
    // so some ticks pass with no worker up at all.
    let mut round = 0;
    while ticks("").len() < TICKS {
        std::thread::sleep(Duration::from_millis(3000));
        round += 1;
        let victims = if round % 4 == 0 { 2 } else { 1 };
        for w in workers.iter_mut().take(victims) {
            w.kill().unwrap();
            w.wait().unwrap();
        }
        if victims == 2 {
            std::thread::sleep(Duration::from_millis(1500));
        }
        for w in workers.iter_mut().take(victims) {
            *w = start();
        }
        assert!(round < 200, "the schedule stopped firing: {:?}", ticks(""));
    }
    let out = aisc(dir, &["schedules", "remove", &id, "--store", &url]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Let the queued runs finish.
    for _ in 0..1200 {
        if pg.psql(
            &url,
            "SELECT count(*) FROM runs WHERE status IN ('queued', 'running')",
        ) == "0"
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for w in &mut workers {
        w.kill().unwrap();
        w.wait().unwrap();
    }

    // Every tick from the first to the last has one run (the ids are the
    // table's key, so none has two), one second apart: no tick lost.
    let all = ticks("");
    assert!(all.len() >= TICKS, "{}", all.len());
    for pair in all.windows(2) {
        assert_eq!(
            pair[1] - pair[0],
            1000,
            "a tick lost or extra between {pair:?}"
        );
    }
    // Each ran once, to its result.
    assert_eq!(ticks("AND status = 'completed'"), all);
    let results = pg.psql(
        &url,
        &format!("SELECT DISTINCT result FROM runs WHERE id LIKE '{id}-t%'"),
    );
    assert_eq!(results, "\"tick x\"");
    // The schedule is gone; what it fired is what it counted.
    let out = aisc(dir, &["schedules", "--json", "--store", &url]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).trim().is_empty());
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn schedules_are_listed_and_a_bad_one_is_refused_with_the_reason() {
    let pg = PgServer::start();
    let url = pg.database("schedules_list");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let p = write(dir, "tick.ais", TICK);
    let out = aisc(
        dir,
        &[
            "run",
            "--schedule",
            "0 9 * * MON-FRI",
            "--tz",
            "Europe/Oslo",
            "--store",
            &url,
            &p,
            "--arg",
            "n=y",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let out = aisc(dir, &["schedules", "--json", "--store", &url]);
    let listed: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed["id"], id.as_str());
    assert_eq!(listed["cron"], "0 9 * * MON-FRI");
    assert_eq!(listed["tz"], "Europe/Oslo");
    assert_eq!(listed["fired"], 0);
    // The next tick is 09:00 in Oslo: 07:00 or 08:00 UTC.
    let next = listed["next_ms"].as_i64().unwrap();
    let hour = next / 3_600_000 % 24;
    assert!(hour == 7 || hour == 8, "{hour}");
    assert_eq!(next % 3_600_000, 0);

    for (cron, tz, code) in [
        ("61 * * * *", "UTC", "schedule.cron"),
        ("* * * * *", "Mars/Olympus", "schedule.tz"),
    ] {
        let out = aisc(
            dir,
            &[
                "run",
                "--schedule",
                cron,
                "--tz",
                tz,
                "--store",
                &url,
                &p,
                "--arg",
                "n=y",
            ],
        );
        assert_eq!(out.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(code),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Without a shared store there is nowhere to keep it.
    let out = aisc(
        dir,
        &[
            "run",
            "--schedule",
            "* * * * *",
            "--store",
            "",
            &p,
            "--arg",
            "n=y",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("shared store"));
    let out = aisc(dir, &["schedules", "remove", "nope", "--store", &url]);
    assert_eq!(out.status.code(), Some(1));
}
