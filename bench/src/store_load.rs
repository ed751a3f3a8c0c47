//! `ais-bench store`: the run store under load (issue 20).
//!
//! - journal writes/s: 1 and 64 threads writing fence-checked entries
//!   through one PostgreSQL store (group commit), and the same through the
//!   SQLite store (one commit per write);
//! - runs/s and journal writes/s with 1, 2, 4 `aisc worker` processes on
//!   one PostgreSQL, against SQLite in one process (the same runs, the same
//!   number of runs at once per process);
//! - takeover: time from a worker's `kill -9` to its runs progressing
//!   again under another worker, against the lease period.
//!
//! A private PostgreSQL (`ais_testkit::pg`) and the mock LLM server are
//! started here; nothing is needed but PostgreSQL's binaries.

use crate::env;
use ais_testkit::mock::MockServer;
use ais_testkit::pg::PgServer;
use ais_testkit::MemoryHost;
use ais_vm::journal::{Journal, Status};
use ais_vm::store::postgres::PgStore;
use ais_vm::store::sqlite::SqliteStore;
use ais_vm::store::{Entry, NewRun, Store};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

pub struct StoreOpts {
    pub runs: usize,
    pub calls: usize,
    pub latency_ms: u64,
    pub workers: Vec<usize>,
    pub concurrency: usize,
    pub lease_secs: f64,
    pub aisc: PathBuf,
    pub dir: PathBuf,
}

fn chain(calls: usize) -> String {
    let mut s = String::from(
        "agent A {\n    @entry flow main(n: str) -> str {\n        ask(\"{n} step 1\") -> a1\n",
    );
    for i in 2..=calls {
        s.push_str(&format!(
            "        ask(\"{{n}} step {i}\", a{}) -> a{i}\n",
            i - 1
        ));
    }
    s.push_str(&format!("        return a{calls}\n    }}\n}}\n"));
    s
}

fn compile(calls: usize) -> Result<ais_ir::bytecode::Program, String> {
    crate::ours::compile_source(&chain(calls), ais_ir::passes::OptLevel::O0)
        .map_err(|e| e.to_string())
}

/// Writes per second of `threads` threads each writing `per` entries.
fn writes_per_s(store: &Arc<dyn Store>, run: &str, fence: i64, threads: usize, per: usize) -> f64 {
    let barrier = Arc::new(Barrier::new(threads + 1));
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let (s, b, run) = (store.clone(), barrier.clone(), run.to_string());
            std::thread::spawn(move || {
                b.wait();
                for i in 0..per {
                    let e = Entry {
                        key: format!("{t}-{i}"),
                        seq: i as i64,
                        kind: "done".into(),
                        op: "ask".into(),
                        hash: "h".into(),
                        value: Some("[{\"v\":\"reply\"}]".into()),
                        tokens: 10,
                        labels: None,
                    };
                    if let Err(e) = s.write(&run, fence, &[e]) {
                        eprintln!("write failed: {e}");
                    }
                }
            })
        })
        .collect();
    barrier.wait();
    let t = Instant::now();
    for h in hs {
        let _ = h.join();
    }
    (threads * per) as f64 / t.elapsed().as_secs_f64()
}

fn aisc_worker(
    o: &StoreOpts,
    url: &str,
    config: &Path,
    concurrency: usize,
    until_idle: bool,
) -> Result<Child, String> {
    let mut c = Command::new(&o.aisc);
    c.args([
        "worker",
        "-q",
        "--store",
        url,
        "--memory",
        ":memory:",
        "--poll-ms",
        "20",
    ])
    .arg("--config")
    .arg(config)
    .args(["--concurrency", &concurrency.to_string()])
    .args(["--lease-secs", &o.lease_secs.to_string()])
    .env_remove("AIS_STORE")
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    if until_idle {
        c.arg("--until-idle");
    }
    c.spawn()
        .map_err(|e| format!("cannot start {}: {e}", o.aisc.display()))
}

fn enqueue(
    store: &dyn Store,
    artifact: &[u8],
    n: usize,
    prefix: &str,
) -> Result<Vec<String>, String> {
    (0..n)
        .map(|i| {
            let id = format!("{prefix}{i:05}");
            let args = serde_json::json!([["n", format!("r{i}")]]).to_string();
            store
                .enqueue(&NewRun {
                    id: &id,
                    program: "chain",
                    artifact,
                    entry: None,
                    args: &args,
                })
                .map(|()| id)
                .map_err(|e| e.to_string())
        })
        .collect()
}

struct Row {
    setup: String,
    runs_s: f64,
    writes_s: f64,
    secs: f64,
}

/// Runs `o.runs` queued runs with `w` worker processes; (runs/s, writes/s).
fn fleet(
    o: &StoreOpts,
    pg: &PgServer,
    config: &Path,
    artifact: &[u8],
    w: usize,
) -> Result<Row, String> {
    let url = pg.database(&format!("fleet{w}"));
    let store = PgStore::connect(&url).map_err(|e| e.to_string())?;
    let ids = enqueue(&store, artifact, o.runs, "f")?;
    let t = Instant::now();
    let mut children = Vec::new();
    for _ in 0..w {
        children.push(aisc_worker(o, &url, config, o.concurrency, true)?);
    }
    for mut c in children {
        let _ = c.wait();
    }
    let secs = t.elapsed().as_secs_f64();
    let runs = store.list_runs().map_err(|e| e.to_string())?;
    let done = runs
        .iter()
        .filter(|r| r.status == Status::Completed)
        .count();
    if done != ids.len() {
        return Err(format!(
            "{w} workers: {done} of {} runs completed",
            ids.len()
        ));
    }
    let writes: i64 = runs.iter().map(|r| r.entries + r.in_doubt).sum();
    Ok(Row {
        setup: format!(
            "PostgreSQL, {w} worker process{} × {} runs at once",
            if w == 1 { "" } else { "es" },
            o.concurrency
        ),
        runs_s: o.runs as f64 / secs,
        writes_s: writes as f64 / secs,
        secs,
    })
}

/// The same runs in this process on the SQLite store, `concurrency` at once.
fn sqlite_single(
    o: &StoreOpts,
    config: &Path,
    program: &ais_ir::bytecode::Program,
    artifact: &[u8],
) -> Result<Row, String> {
    let dir = o.dir.join("sqlite");
    let _ = std::fs::remove_dir_all(&dir);
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(Some(&dir)).map_err(|e| e.to_string())?);
    let backend = env::backend(config)?;
    let next = AtomicUsize::new(0);
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..o.concurrency {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= o.runs {
                    return;
                }
                let args = vec![("n".to_string(), serde_json::json!(format!("r{i}")))];
                let Ok(j) = Journal::begin_in(
                    store.clone(),
                    &format!("s{i:05}"),
                    "chain",
                    artifact,
                    None,
                    &args,
                ) else {
                    return;
                };
                let opts = ais_vm::RunOptions {
                    args,
                    workers: Some(2),
                    journal: Some(Arc::new(j)),
                    ..ais_vm::RunOptions::default()
                };
                let _ = ais_vm::run(program, &opts, backend.clone(), Arc::new(MemoryHost::new()));
            });
        }
    });
    let secs = t.elapsed().as_secs_f64();
    let runs = store.list_runs().map_err(|e| e.to_string())?;
    let done = runs
        .iter()
        .filter(|r| r.status == Status::Completed)
        .count();
    if done != o.runs {
        return Err(format!("SQLite: {done} of {} runs completed", o.runs));
    }
    let writes: i64 = runs.iter().map(|r| r.entries + r.in_doubt).sum();
    Ok(Row {
        setup: format!("SQLite, 1 process × {} runs at once", o.concurrency),
        runs_s: o.runs as f64 / secs,
        writes_s: writes as f64 / secs,
        secs,
    })
}

/// Seconds from `kill -9` of the worker holding the runs to every one of
/// them progressing (a new journal entry) under the other worker.
fn takeover(
    o: &StoreOpts,
    pg: &PgServer,
    config: &Path,
    artifact: &[u8],
    mock: &MockServer,
) -> Result<(f64, f64), String> {
    let url = pg.database("takeover");
    let store = PgStore::connect(&url).map_err(|e| e.to_string())?;
    let ids = enqueue(&store, artifact, 8, "t")?;
    mock.set_latency(Duration::from_millis(100));
    let mut a = aisc_worker(o, &url, config, 8, false)?;
    let wait = |what: &str, f: &dyn Fn() -> bool| -> Result<(), String> {
        for _ in 0..6000 {
            if f() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Err(format!("gave up waiting for {what}"))
    };
    wait("worker A to journal a call of each run", &|| {
        ids.iter()
            .all(|id| store.entries(id).is_ok_and(|e| !e.is_empty()))
    })?;
    let mut b = aisc_worker(o, &url, config, 8, false)?;
    std::thread::sleep(Duration::from_millis(200));
    let _ = a.kill();
    let killed = Instant::now();
    let _ = a.wait();
    let held: Vec<usize> = ids
        .iter()
        .map(|id| store.entries(id).map_or(0, |e| e.len()))
        .collect();
    let r = wait("worker B to take every run over", &|| {
        let moved = ids
            .iter()
            .zip(&held)
            .filter(|(id, n)| store.entries(id).is_ok_and(|e| e.len() > **n))
            .count();
        moved == ids.len()
    });
    let all = killed.elapsed().as_secs_f64();
    let _ = b.kill();
    let _ = b.wait();
    mock.set_latency(Duration::from_millis(o.latency_ms));
    r?;
    Ok((all, o.lease_secs))
}

pub fn run(o: &StoreOpts) -> Result<String, String> {
    std::fs::create_dir_all(&o.dir).map_err(|e| e.to_string())?;
    if !PgServer::installed() {
        return Err(
            "PostgreSQL is not installed: run ./test (or scripts/provision/apt.sh) to install it"
                .into(),
        );
    }
    let pg = PgServer::start();
    let mock = MockServer::start().map_err(|e| e.to_string())?;
    mock.set_latency(Duration::from_millis(o.latency_ms));
    let config = env::write_config(&o.dir, &mock.openai_url()).map_err(|e| e.to_string())?;
    let program = compile(o.calls)?;
    let artifact = ais_ir::bytecode::encode(&program).map_err(|e| e.to_string())?;
    let mut md = String::new();

    // Raw journal writes.
    let url = pg.database("writes");
    let pgs: Arc<dyn Store> = Arc::new(PgStore::connect(&url).map_err(|e| e.to_string())?);
    enqueue(&*pgs, &artifact, 3, "w")?;
    let mut w_rows = Vec::new();
    for (threads, per) in [(1usize, 200usize), (64, 100), (256, 40)] {
        let c = pgs
            .claim("bench", 600_000)
            .map_err(|e| e.to_string())?
            .ok_or("no run to claim")?;
        w_rows.push((
            "PostgreSQL (group commit, fenced)",
            threads,
            writes_per_s(&pgs, &c.id, c.fence, threads, per),
        ));
    }
    let sq: Arc<dyn Store> =
        Arc::new(SqliteStore::open(Some(&o.dir.join("writes"))).map_err(|e| e.to_string())?);
    let _ = sq.begin_run(&NewRun {
        id: &format!("w{}", std::process::id()),
        program: "w",
        artifact: &artifact,
        entry: None,
        args: "[]",
    });
    for (threads, per) in [(1usize, 200usize), (64, 20)] {
        w_rows.push((
            "SQLite (a commit per write)",
            threads,
            writes_per_s(&sq, &format!("w{}", std::process::id()), 0, threads, per),
        ));
    }
    md.push_str(
        "### Journal writes\n\n| store | writer threads | journal writes/s |\n|---|---:|---:|\n",
    );
    for (s, t, w) in &w_rows {
        md.push_str(&format!("| {s} | {t} | {w:.0} |\n"));
    }

    // Runs through workers.
    let mut rows = vec![sqlite_single(o, &config, &program, &artifact)?];
    for &w in &o.workers {
        rows.push(fleet(o, &pg, &config, &artifact, w)?);
    }
    md.push_str(&format!(
        "\n### Runs\n\n{} runs of {} dependent LLM calls each (mock latency {} ms per call).\n\n| setup | seconds | runs/s | journal writes/s |\n|---|---:|---:|---:|\n",
        o.runs, o.calls, o.latency_ms
    ));
    for r in &rows {
        md.push_str(&format!(
            "| {} | {:.2} | {:.1} | {:.0} |\n",
            r.setup, r.secs, r.runs_s, r.writes_s
        ));
    }

    // Runs long enough (40 calls of 100 ms) to be in flight at the kill.
    let long = ais_ir::bytecode::encode(&compile(40)?).map_err(|e| e.to_string())?;
    let (all, lease) = takeover(o, &pg, &config, &long, &mock)?;
    md.push_str(&format!(
        "\n### Takeover\n\nWorker A holds 8 runs (40 dependent calls of 100 ms each); `kill -9` A; worker B (already polling) takes them over.\n\n| lease | kill → every run progressing again | ratio to the lease |\n|---:|---:|---:|\n| {lease:.1} s | {all:.2} s | {:.2} |\n",
        all / lease
    ));
    Ok(md)
}
