//! Limits across the fleet (issue 39): four `aisc worker` processes share
//! a backend limited to 8 calls in flight (`fleet_concurrency = 8`) through
//! the PostgreSQL store; the provider — the independent benchmark server
//! `bench/server/server.py`, which counts requests in flight — never sees
//! more than 8 at once, also while a worker is killed (-9) and restarted.
//! A `Retry-After` from the provider pauses every worker's calls.
//!
//! Ignored by plain `cargo test` ("needs PostgreSQL and python3: run ./test").
#![allow(clippy::unwrap_used)]

mod fleet_support;

use ais_testkit::pg::PgServer;
use ais_vm::journal::Status;
use ais_vm::store::postgres::PgStore;
use ais_vm::store::Store;
use fleet_support::{aisc, wait_until};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Four independent calls (a fan-out) per run.
const FAN: &str = r#"agent A {
    @entry flow main(n: str) -> str {
        ask("{n} part 1") -> a
        ask("{n} part 2") -> b
        ask("{n} part 3") -> c
        ask("{n} part 4") -> d
        return a
    }
}
"#;

/// The benchmark server, stopped on drop.
struct Provider {
    child: Child,
    port: u16,
}

impl Provider {
    fn start(extra: &[&str]) -> Provider {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/server/server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args(["--port", "0", "--p50-ms", "60", "--slow-frac", "0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs bench/server/server.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("ready ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("server.py said {line:?}"));
        Provider { child, port }
    }

    fn counters(&self) -> serde_json::Value {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "GET /admin/counters HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let body = text.split_once("\r\n\r\n").map(|x| x.1).unwrap_or_default();
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {text}"))
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn setup(dir: &Path, port: u16, limits: &str) -> (String, String) {
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "default_backend = \"m\"\n[[llm_backends]]\nname = \"m\"\nprotocol = \"openai\"\n\
             base_url = \"http://127.0.0.1:{port}/v1\"\nretries = 3\n{limits}\n"
        ),
    )
    .unwrap();
    let prog = dir.join("fan.ais");
    std::fs::write(&prog, FAN).unwrap();
    (config.display().to_string(), prog.display().to_string())
}

fn enqueue(dir: &Path, url: &str, config: &str, prog: &str, n: usize) {
    for i in 0..n {
        enqueue_one(dir, url, config, prog, &format!("r{i:03}"), &[]);
    }
}

/// Queues one run (`extra`: queue options); its id.
fn enqueue_one(
    dir: &Path,
    url: &str,
    config: &str,
    prog: &str,
    tag: &str,
    extra: &[&str],
) -> String {
    let out = aisc(dir)
        .args(["run", "--enqueue", "-O0", "-q", "--store", url, prog])
        .args(["--config", config, "--arg", &format!("n={tag}")])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn worker(dir: &Path, url: &str, config: &str, log: &str) -> Child {
    worker_n(dir, url, config, log, "4")
}

fn worker_n(dir: &Path, url: &str, config: &str, log: &str, slots: &str) -> Child {
    fleet_support::worker(dir, url, config, log, &["--concurrency", slots])
}

fn completed(store: &PgStore) -> usize {
    store
        .list_runs()
        .unwrap()
        .iter()
        .filter(|r| r.status == Status::Completed)
        .count()
}

#[test]
#[ignore = "needs PostgreSQL and python3: run ./test"]
fn four_workers_never_exceed_the_fleet_concurrency_at_the_provider() {
    // The benchmark: AIS_FLEET_BENCH_RUNS=300 (a kill every 50 runs).
    let runs: usize = std::env::var("AIS_FLEET_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48);
    let pg = PgServer::start();
    let url = pg.url();
    let provider = Provider::start(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (config, prog) = setup(dir, provider.port, "fleet_concurrency = 8");
    let template = enqueue_one(dir, &url, &config, &prog, "t", &[]);
    let store = PgStore::connect(&url).unwrap();
    clone_runs(&store, &template, "r", runs - 1, &Default::default());
    let mut workers: Vec<Child> = (0..4)
        .map(|i| worker(dir, &url, &config, &format!("w{i}.log")))
        .collect();
    // Kill a worker with calls in flight, then start it again: once per
    // 50 runs (at least once).
    let mut kills = 0;
    while kills == 0 || (kills + 1) * 50 <= runs {
        let at = (kills * 50 + 8).min(runs - 1);
        wait_until(dir, "runs before a kill", || completed(&store) >= at);
        let k = kills % 4;
        workers[k].kill().unwrap();
        workers[k].wait().unwrap();
        workers[k] = worker(dir, &url, &config, &format!("w{k}-{kills}.log"));
        kills += 1;
    }
    wait_until(dir, "every run", || completed(&store) == runs);
    for w in &mut workers {
        let _ = w.kill();
        let _ = w.wait();
    }
    // A worker's /metrics reports the fleet's calls from the store.
    let log = std::fs::File::create(dir.join("probe.log")).unwrap();
    let mut probe = aisc(dir)
        .args(["worker", "--store", &url, "--config", &config])
        .args(["--memory", ":memory:", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut addr = String::new();
    wait_until(dir, "the probe address", || {
        let text = std::fs::read_to_string(dir.join("probe.log")).unwrap_or_default();
        addr = text
            .lines()
            .find_map(|l| l.strip_prefix("worker probes on http://"))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_default()
            .to_string();
        !addr.is_empty()
    });
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut metrics = String::new();
    s.read_to_string(&mut metrics).unwrap();
    let _ = probe.kill();
    let _ = probe.wait();
    let store_peak: i64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("ais_fleet_backend_in_flight_peak{backend=\"m\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no fleet peak in /metrics: {metrics}"));
    assert!((1..=8).contains(&store_peak), "store peak {store_peak}");
    let c = provider.counters();
    let peak = c["in_flight_peak"].as_i64().unwrap();
    eprintln!("fleet limits: {runs} runs on 4 workers, {kills} kill -9, provider peak in flight {peak}, requests {}", c["requests"]);
    assert!(
        peak <= 8,
        "the provider saw {peak} requests in flight at once: {c}"
    );
    // 16 runs of 4 parallel calls wanted 64 slots: the limit was reached.
    assert!(
        peak >= 5,
        "peak {peak}: the calls were not running in parallel"
    );
    assert!(c["requests"].as_i64().unwrap() >= (runs * 4) as i64, "{c}");
}

/// One call after another.
const CHAIN: &str = r#"agent A {
    @entry flow main(n: str) -> str {
        ask("{n} step 1") -> a
        ask("{n} step 2", a) -> b
        return b
    }
}
"#;

#[test]
#[ignore = "needs PostgreSQL and python3: run ./test"]
fn a_retry_after_told_one_worker_pauses_the_others() {
    let pg = PgServer::start();
    let url = pg.url();
    // For its first 5 s the provider answers 429 with `Retry-After: 6`.
    let provider = Provider::start(&[
        "--burst-period-s",
        "1000",
        "--burst-length-s",
        "5",
        "--retry-after-s",
        "6",
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (config, _) = setup(dir, provider.port, "fleet_concurrency = 16");
    let prog = dir.join("chain.ais");
    std::fs::write(&prog, CHAIN).unwrap();
    let prog = prog.display().to_string();
    enqueue(dir, &url, &config, &prog, 8);
    let store = PgStore::connect(&url).unwrap();
    // Worker A takes 4 runs; their first calls meet the burst.
    let mut a = worker(dir, &url, &config, "a.log");
    wait_until(dir, "the first 429", || {
        provider.counters()["status"]["429"].as_i64().unwrap_or(0) >= 1
    });
    // Worker B starts within the burst, with the pause in the store: it
    // sends nothing until the pause ends (then the burst is over).
    let mut b = worker(dir, &url, &config, "b.log");
    wait_until(dir, "every run", || completed(&store) == 8);
    for w in [&mut a, &mut b] {
        let _ = w.kill();
        let _ = w.wait();
    }
    let c = provider.counters();
    let limited = c["status"]["429"].as_i64().unwrap_or(0);
    eprintln!("retry-after: {limited} answers 429, {c}");
    // A's four first calls at most; without a fleet-wide pause B's four
    // first calls would meet the burst too.
    assert!(
        (1..=4).contains(&limited),
        "{limited} calls met the burst: {c}"
    );
    let b_log = std::fs::read_to_string(dir.join("b.log")).unwrap();
    assert!(
        b_log.contains(": completed"),
        "worker B ran no run: {b_log}"
    );
}

/// When each run of `ids` ended (all must have completed).
fn ended(store: &PgStore, ids: &[String]) -> Vec<i64> {
    let runs = store.list_runs().unwrap();
    ids.iter()
        .map(|id| {
            let r = runs.iter().find(|r| r.id == *id).unwrap();
            assert_eq!(r.status, Status::Completed, "{id}: {:?}", r.error);
            r.ended_ms.unwrap()
        })
        .collect()
}

/// Mean time from queueing to completion of `ids`, in ms.
fn latency(store: &PgStore, ids: &[String]) -> f64 {
    let runs = store.list_runs().unwrap();
    let total: i64 = ids
        .iter()
        .map(|id| {
            let r = runs.iter().find(|r| r.id == *id).unwrap();
            r.ended_ms.unwrap() - r.started_ms
        })
        .sum();
    total as f64 / ids.len() as f64
}

/// Queues `n` copies of queued run `template` (its program and
/// arguments) at once, under `q`; their ids.
fn clone_runs(
    store: &PgStore,
    template: &str,
    prefix: &str,
    n: usize,
    q: &ais_vm::store::priority::QueueOptions,
) -> Vec<String> {
    let row = store.run_row(template).unwrap().unwrap();
    (0..n)
        .map(|i| {
            let id = format!("{prefix}{i:03}");
            store
                .enqueue_with(
                    &ais_vm::store::NewRun {
                        id: &id,
                        program: &row.info.program,
                        artifact: &row.artifact,
                        entry: row.info.entry.as_deref(),
                        args: &row.args,
                    },
                    q,
                )
                .unwrap();
            id
        })
        .collect()
}

#[test]
#[ignore = "needs PostgreSQL and python3: run ./test"]
fn a_flooding_tenant_holds_at_most_its_key_limit_and_the_other_goes_first() {
    let flood: usize = std::env::var("AIS_FLEET_BENCH_FLOOD")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let pg = PgServer::start();
    let url = pg.url();
    let provider = Provider::start(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (config, _) = setup(dir, provider.port, "");
    let prog = dir.join("chain.ais");
    std::fs::write(&prog, CHAIN).unwrap();
    let prog = prog.display().to_string();
    let store = PgStore::connect(&url).unwrap();
    let key = |k: &str| ais_vm::store::priority::QueueOptions {
        key: Some(k.to_string()),
        key_limit: Some(2),
        ..Default::default()
    };
    let template = enqueue_one(dir, &url, &config, &prog, "t", &["--priority", "9"]);
    let mut w = worker_n(dir, &url, &config, "w.log", "4");
    wait_until(dir, "the template run", || completed(&store) == 1);
    // Solo: tenant b's four runs on an idle fleet.
    let solo = clone_runs(&store, &template, "s", 4, &key("b"));
    wait_until(dir, "the solo runs", || completed(&store) == 5);
    // Tenant a floods the queue, then b queues four runs.
    let flooded = clone_runs(&store, &template, "a", flood, &key("a"));
    let other = clone_runs(&store, &template, "b", 4, &key("b"));
    let mut peak_a = 0;
    let mut peak_b = 0;
    wait_until(dir, "every run", || {
        let v = store.queue_view().unwrap();
        peak_a = peak_a.max(v.keys.get("a").map_or(0, |k| k.running));
        peak_b = peak_b.max(v.keys.get("b").map_or(0, |k| k.running));
        completed(&store) == 5 + flood + 4
    });
    let _ = w.kill();
    let _ = w.wait();
    let (a_end, b_end) = (ended(&store, &flooded), ended(&store, &other));
    let b_last = *b_end.iter().max().unwrap();
    let a_before_b = a_end.iter().filter(|t| **t < b_last).count();
    let (solo_ms, flood_ms) = (latency(&store, &solo), latency(&store, &other));
    eprintln!(
        "tenants: b's mean latency solo {solo_ms:.0} ms, under a's flood of {flood} {flood_ms:.0} ms ({:.2}x); {a_before_b} of a's runs ended before b's last; peak running a {peak_a}, b {peak_b}",
        flood_ms / solo_ms
    );
    assert!(peak_a <= 2 && peak_b <= 2, "a {peak_a}, b {peak_b}");
    // Arrival order would finish all of a's runs first; with a held to 2
    // slots of 4, b's runs take the other two at once (4 of 24 measured).
    assert!(
        a_before_b < flood / 2,
        "{a_before_b} of a's {flood} runs ended before b's last run"
    );
}

#[test]
#[ignore = "needs PostgreSQL and python3: run ./test"]
fn a_worker_takes_higher_priority_runs_first() {
    let pg = PgServer::start();
    let url = pg.url();
    let provider = Provider::start(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (config, _) = setup(dir, provider.port, "");
    let prog = dir.join("chain.ais");
    std::fs::write(&prog, CHAIN).unwrap();
    let prog = prog.display().to_string();
    let low: Vec<String> = (0..4)
        .map(|i| enqueue_one(dir, &url, &config, &prog, &format!("l{i}"), &[]))
        .collect();
    let high: Vec<String> = (0..2)
        .map(|i| {
            enqueue_one(
                dir,
                &url,
                &config,
                &prog,
                &format!("h{i}"),
                &["--priority", "5"],
            )
        })
        .collect();
    let out = aisc(dir).args(["runs", "--store", &url]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines().filter(|l| l.contains("[priority 5]")).count() == 2,
        "{text}"
    );
    let store = PgStore::connect(&url).unwrap();
    let mut w = worker_n(dir, &url, &config, "w.log", "1");
    wait_until(dir, "every run", || completed(&store) == 6);
    let _ = w.kill();
    let _ = w.wait();
    let (low, high) = (ended(&store, &low), ended(&store, &high));
    let first_low = *low.iter().min().unwrap();
    assert!(
        high.iter().all(|h| *h < first_low),
        "priority 5 ended at {high:?}, the first priority 0 at {first_low}"
    );
}

fn aisc_ok(dir: &Path, args: &[&str]) -> String {
    let out = aisc(dir).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "aisc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
#[ignore = "needs PostgreSQL and python3: run ./test"]
fn failed_runs_are_retried_by_policy_then_dead_and_requeued() {
    let pg = PgServer::start();
    let url = pg.url();
    // The provider is down (503) for its first 4 s; the backend does not
    // retry calls itself, so each attempt of a run fails.
    let provider = Provider::start(&["--outage-start-s", "0", "--outage-end-s", "4"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (config, _) = setup(dir, provider.port, "");
    let config_text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, config_text.replace("retries = 3", "retries = 0")).unwrap();
    let prog = dir.join("chain.ais");
    std::fs::write(&prog, CHAIN).unwrap();
    let prog = prog.display().to_string();
    // Retried: 4 attempts over 1 + 2 + 4 s of backoff outlast the outage.
    let retried = enqueue_one(
        dir,
        &url,
        &config,
        &prog,
        "retried",
        &["--retries", "3", "--retry-backoff", "1"],
    );
    // Its policy retries tool failures only: an LLM failure makes it dead.
    let dead = enqueue_one(
        dir,
        &url,
        &config,
        &prog,
        "dead",
        &["--retries", "3", "--retry-on", "tool"],
    );
    let store = PgStore::connect(&url).unwrap();
    let mut w = worker_n(dir, &url, &config, "w.log", "2");
    // Completed in the store, and said so by the worker (its line comes
    // after the store's commit).
    let said = format!("run {retried}: completed");
    wait_until(dir, "the retried run", || {
        store
            .list_runs()
            .unwrap()
            .iter()
            .any(|r| r.id == retried && r.status == Status::Completed)
            && std::fs::read_to_string(dir.join("w.log")).is_ok_and(|l| l.contains(&said))
    });
    let log = std::fs::read_to_string(dir.join("w.log")).unwrap();
    assert!(
        log.contains(&format!("run {retried}: failed:"))
            && log.contains("queued again for attempt 2 of 4"),
        "{log}"
    );
    let listed = aisc_ok(dir, &["runs", "--dead", "--store", &url]);
    assert!(listed.contains(&dead), "{listed}");
    assert!(!listed.contains(&retried), "{listed}");
    assert_eq!(store.dead_runs().unwrap().len(), 1);
    assert_eq!(store.dead_runs().unwrap()[0].attempts, 1);
    // Put back with an edited input: a new run, which completes; the dead
    // one leaves the list and cannot be requeued twice.
    let edited = aisc_ok(
        dir,
        &[
            "runs", "requeue", &dead, "--set", "n=edited", "--store", &url,
        ],
    );
    let edited = edited.trim().to_string();
    assert_ne!(edited, dead);
    let again = aisc(dir)
        .args(["runs", "requeue", &dead, "--store", &url])
        .output()
        .unwrap();
    assert!(!again.status.success(), "requeued twice");
    wait_until(dir, "the edited run", || {
        store
            .list_runs()
            .unwrap()
            .iter()
            .any(|r| r.id == edited && r.status == Status::Completed)
    });
    let _ = w.kill();
    let _ = w.wait();
    assert!(store.dead_runs().unwrap().is_empty());
    let row = store.run_row(&edited).unwrap().unwrap();
    assert!(row.args.contains("edited"), "{}", row.args);
}

/// Sixteen independent calls: a long run.
const WIDE: &str = r#"agent A {
    @entry flow main(n: str) -> str {
        ask("{n} 1") -> a1
        ask("{n} 2") -> a2
        ask("{n} 3") -> a3
        ask("{n} 4") -> a4
        ask("{n} 5") -> a5
        ask("{n} 6") -> a6
        ask("{n} 7") -> a7
        ask("{n} 8") -> a8
        ask("{n} 9") -> a9
        ask("{n} 10") -> a10
        ask("{n} 11") -> a11
        ask("{n} 12") -> a12
        ask("{n} 13") -> a13
        ask("{n} 14") -> a14
        ask("{n} 15") -> a15
        ask("{n} 16") -> a16
        return a16
    }
}
"#;

/// One call: a short run.
const ONE: &str = r#"agent A {
    @entry flow main(n: str) -> str {
        ask("{n} only") -> a
        return a
    }
}
"#;

/// Least attained service across the fleet (issue 36), end to end: two
/// slots for the whole fleet, held by workers A and C, each running a
/// sixteen-call run; worker B's one-call run ends before either, every
/// call is made once and the fleet never has more than two in flight.
/// (That a free slot waits for the least served process is asserted step
/// by step in `vm/tests/fleet_limits.rs`; here the order of polls decides
/// too much to count requests.)
#[test]
#[ignore = "needs PostgreSQL and python3: run ./test"]
fn a_short_run_on_one_worker_goes_before_long_runs_on_others() {
    let pg = PgServer::start();
    let url = pg.url();
    let provider = Provider::start(&["--p50-ms", "150"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (config, _) = setup(dir, provider.port, "fleet_concurrency = 2");
    let (wide, one) = (dir.join("wide.ais"), dir.join("one.ais"));
    std::fs::write(&wide, WIDE).unwrap();
    std::fs::write(&one, ONE).unwrap();
    let (wide, one) = (wide.display().to_string(), one.display().to_string());
    let store = PgStore::connect(&url).unwrap();
    let requests = || provider.counters()["requests"].as_i64().unwrap();
    let status = |id: &str| {
        let runs = store.list_runs().unwrap();
        runs.iter().find(|r| r.id == id).map(|r| r.status)
    };
    let long_a = enqueue_one(dir, &url, &config, &wide, "long a", &[]);
    let mut a = worker_n(dir, &url, &config, "a.log", "1");
    wait_until(dir, "A's claim", || status(&long_a) != Some(Status::Queued));
    let long_c = enqueue_one(dir, &url, &config, &wide, "long c", &[]);
    let mut c = worker_n(dir, &url, &config, "c.log", "1");
    wait_until(dir, "the long runs' first calls", || requests() >= 4);
    let short = enqueue_one(dir, &url, &config, &one, "short", &[]);
    let mut b = worker_n(dir, &url, &config, "b.log", "1");
    let mut claimed_at = 0;
    wait_until(dir, "B's claim", || {
        claimed_at = requests();
        status(&short) != Some(Status::Queued)
    });
    let mut done_at = 0;
    wait_until(dir, "the short run", || {
        done_at = requests();
        status(&short) == Some(Status::Completed)
    });
    wait_until(dir, "the long runs", || completed(&store) == 3);
    for w in [&mut a, &mut b, &mut c] {
        let _ = w.kill();
        let _ = w.wait();
    }
    let ends = ended(&store, &[short, long_a, long_c]);
    let counters = provider.counters();
    eprintln!(
        "fleet LAS: B claimed at request {claimed_at}, its run done by request {done_at}; {counters}"
    );
    assert_eq!(counters["requests"].as_i64(), Some(33), "{counters}");
    assert_eq!(counters["in_flight_peak"].as_i64(), Some(2), "{counters}");
    assert!(ends[0] < ends[1] && ends[0] < ends[2], "ends {ends:?}");
}
