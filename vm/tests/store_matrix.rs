//! The journal's resume/budget/in-doubt scenarios against both stores
//! (SQLite and a private PostgreSQL started by the test), plus what only
//! the PostgreSQL store does: schema version refusal, claims racing for
//! one run, fencing of a worker whose lease was taken over, group commit.
//!
//! The PostgreSQL test is ignored by plain `cargo test` ("needs
//! PostgreSQL: run ./test"); run without PostgreSQL it fails, naming the fix.
//!
//! One file over 600 lines on purpose: every PostgreSQL scenario runs in
//! one test against one private server (a database each), so the suite
//! pays one `initdb` rather than one per scenario.
#![allow(clippy::unwrap_used)]

use ais_ir::bytecode::{self, Program};
use ais_testkit::fake::FakeBackend;
use ais_testkit::pg::PgServer;
use ais_testkit::MemoryHost;
use ais_vm::journal::{self, Budget, Journal, Status};
use ais_vm::store::postgres::PgStore;
use ais_vm::store::sqlite::SqliteStore;
use ais_vm::store::{Entry, NewRun, Store, FENCED};
use ais_vm::{RunError, RunOptions};
use serde_json::{json, Value as Json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

const PROGRAM: &str = r#"
agent @Researcher {
  flow @research(%q: str) -> str {
    %0 = template %q {template = "Findings on {0}"} : str
    %1 = ask %0 : str
    return %1
  }
}
agent @A {
  flow @main(%items: list<str>) -> str entry {
    %0 = const {value = ""} : str
    %1 = loop %items, %0 : str {
      body(%2: str, %3: number, %4: str) {
        %5 = ask %2 : str
        %6 = flow.call %5 {callee = @Researcher.research} : str
        %7 = concat %4, %6 : str
        yield %7
      }
    }
    %8 = think %1 : str
    %9 = print %8 : ord
    return %8
  }
}
"#;

fn program() -> Program {
    bytecode::compile(&ais_ir::parse_module(PROGRAM).unwrap()).unwrap()
}

/// Counts calls and keeps the answered prompts; with `live`, every call
/// from that one on fails (a provider that goes down mid-run). Blocking:
/// only calls that returned count, so a call cancelled because the run had
/// already failed returned nothing and resuming repeats it.
fn counting(live: Option<usize>) -> Arc<FakeBackend> {
    let b = FakeBackend::new().named("counting").blocking();
    Arc::new(match live {
        Some(l) => b.failing_from_call(l as u64),
        None => b,
    })
}

fn answered_prompts(b: &FakeBackend) -> Vec<String> {
    b.answered().into_iter().map(|r| r.prompt).collect()
}

fn args() -> Vec<(String, Json)> {
    vec![("items".into(), json!(["a", "b", "c"]))]
}

/// A fresh, empty store of one backend per call.
trait Fixture {
    fn fresh(&self) -> Arc<dyn Store>;
    /// Makes `id` look like a run whose process died while running.
    fn interrupt(&self, store: &Arc<dyn Store>, id: &str);
    /// Turns the completed `inv` entries into intents (a crash between a
    /// tool's start and its completion record).
    fn lose_completion(&self, store: &Arc<dyn Store>, id: &str) {
        let es: Vec<Entry> = store
            .entries(id)
            .unwrap()
            .into_iter()
            .filter(|e| e.op == "inv")
            .map(|e| Entry {
                kind: "intent".into(),
                value: None,
                ..e
            })
            .collect();
        assert!(!es.is_empty());
        let fence = FENCE.with(|f| *f.borrow());
        store.write(id, fence, &es).unwrap();
    }
}

thread_local! {
    /// The fence of the journal last opened by [`begin`] or [`resume`]
    /// (reopening a run bumps it).
    static FENCE: std::cell::RefCell<i64> = const { std::cell::RefCell::new(0) };
}

struct Sqlite {
    dirs: Mutex<Vec<tempfile::TempDir>>,
}

impl Fixture for Sqlite {
    fn fresh(&self) -> Arc<dyn Store> {
        let d = tempfile::tempdir().unwrap();
        let s = Arc::new(SqliteStore::open(Some(d.path())).unwrap());
        self.dirs.lock().unwrap().push(d);
        s
    }
    fn interrupt(&self, store: &Arc<dyn Store>, _id: &str) {
        let c = rusqlite::Connection::open(store.location()).unwrap();
        c.execute(
            "UPDATE runs SET status = 'running', pid = 0, owner = NULL, lease_until = NULL",
            [],
        )
        .unwrap();
    }
}

struct Pg {
    server: PgServer,
    n: AtomicUsize,
    urls: Mutex<Vec<String>>,
}

impl Pg {
    fn url_of(&self, store: &Arc<dyn Store>) -> String {
        let urls = self.urls.lock().unwrap();
        urls.iter()
            .find(|u| ais_vm::store::postgres::redact(u) == store.location())
            .cloned()
            .unwrap()
    }
}

impl Fixture for Pg {
    fn fresh(&self) -> Arc<dyn Store> {
        let n = self.n.fetch_add(1, Ordering::SeqCst);
        let url = self.server.database(&format!("m{n}"));
        self.urls.lock().unwrap().push(url.clone());
        Arc::new(PgStore::connect(&url).unwrap())
    }
    fn interrupt(&self, store: &Arc<dyn Store>, id: &str) {
        // Its worker's lease ran out long ago.
        let url = self.url_of(store);
        self.server.psql(
            &url,
            &format!(
                "UPDATE runs SET status = 'running', owner = 'gone:1', lease_until = 1 WHERE id = '{id}'"
            ),
        );
    }
}

fn begin(store: &Arc<dyn Store>, id: &str, p: &Program) -> Arc<Journal> {
    let bytes = bytecode::encode(p).unwrap();
    let j = Journal::begin_in(store.clone(), id, "test", &bytes, None, &args()).unwrap();
    FENCE.with(|f| *f.borrow_mut() = j.fence());
    Arc::new(j)
}

fn resume(store: &Arc<dyn Store>, id: &str) -> Journal {
    let j = Journal::resume_in(store.clone(), id).unwrap();
    FENCE.with(|f| *f.borrow_mut() = j.fence());
    j
}

fn run(
    p: &Program,
    j: Option<Arc<Journal>>,
    b: Arc<FakeBackend>,
    budget: Budget,
) -> (Result<Json, RunError>, Arc<MemoryHost>) {
    let host = Arc::new(MemoryHost::new());
    let o = RunOptions {
        args: args(),
        workers: Some(2),
        journal: j,
        budget,
        ..RunOptions::default()
    };
    (ais_vm::run(p, &o, b, host.clone()).outcome, host)
}

fn resume_at_every_call(fx: &dyn Fixture) {
    let p = program();
    let clean = counting(None);
    let (want, host) = run(&p, None, clean.clone(), Budget::default());
    let want = want.unwrap();
    let total = clean.calls() as usize;
    assert_eq!(total, 7);
    let mut want_prompts = answered_prompts(&clean);
    want_prompts.sort();
    for live in 0..total {
        let store = fx.fresh();
        let first = counting(Some(live));
        let (r, _) = run(
            &p,
            Some(begin(&store, "r1", &p)),
            first.clone(),
            Budget::default(),
        );
        assert!(r.is_err(), "attempt 1 with {live} live calls must fail");
        assert_eq!(store.list_runs().unwrap()[0].status, Status::Failed);
        let j = Arc::new(resume(&store, "r1"));
        let second = counting(None);
        let (r, host2) = run(&p, Some(j.clone()), second.clone(), Budget::default());
        assert_eq!(r.unwrap(), want, "resumed after {live} calls");
        assert_eq!(host2.printed(), host.printed());
        let mut prompts = answered_prompts(&first);
        prompts.extend(answered_prompts(&second));
        prompts.sort();
        assert_eq!(prompts, want_prompts, "no duplicate and no missing call");
        assert_eq!(j.replayed() as usize, answered_prompts(&first).len());
        let runs = store.list_runs().unwrap();
        assert_eq!(runs[0].status, Status::Completed);
        assert_eq!(runs[0].resumes, 1);
        let rec = journal::load_record_in(&*store, "last").unwrap();
        assert_eq!(rec.result, Some(want.clone()));
    }
}

fn call_budget_then_resume(fx: &dyn Fixture) {
    let p = program();
    let (want, _) = run(&p, None, counting(None), Budget::default());
    let store = fx.fresh();
    let budget = Budget {
        llm_calls: Some(2),
        ..Budget::default()
    };
    let (r, _) = run(&p, Some(begin(&store, "b", &p)), counting(None), budget);
    match r.unwrap_err() {
        RunError::OpFailed { code, .. } => assert_eq!(code, "budget.llm_calls"),
        other => panic!("expected a budget error, got {other:?}"),
    }
    let j = resume(&store, "b");
    let prior = j.prior_usage().0 as usize;
    assert!(prior <= 2);
    let b2 = counting(None);
    let budget = Budget {
        llm_calls: Some(7),
        ..Budget::default()
    };
    let (r, _) = run(&p, Some(Arc::new(j)), b2.clone(), budget);
    assert_eq!(r.unwrap(), want.unwrap());
    assert_eq!(b2.calls() as usize, 7 - prior);
}

fn token_budget(fx: &dyn Fixture) {
    let p = program();
    let store = fx.fresh();
    let budget = Budget {
        tokens: Some(1),
        ..Budget::default()
    };
    let (r, _) = run(&p, Some(begin(&store, "t", &p)), counting(None), budget);
    match r.unwrap_err() {
        RunError::OpFailed { code, .. } => assert_eq!(code, "budget.tokens"),
        other => panic!("expected a budget error, got {other:?}"),
    }
    let runs = store.list_runs().unwrap();
    assert_eq!(runs[0].status, Status::Failed);
    assert!(runs[0].entries >= 1);
}

fn in_doubt_tool(fx: &dyn Fixture) {
    let src = r#"
agent @A {
  flow @main() -> json entry {
    %0 = const {value = "{}"} : str
    %1 = inv %0 {tool = "send"} : json
    return %1
  }
}
"#;
    let p = bytecode::compile(&ais_ir::parse_module(src).unwrap()).unwrap();
    let store = fx.fresh();
    let sends = Arc::new(AtomicUsize::new(0));
    let host = Arc::new(MemoryHost::new());
    let s = sends.clone();
    host.register_tool("send", move |_| {
        s.fetch_add(1, Ordering::SeqCst);
        Ok(json!({"sent": true}))
    });
    let o = RunOptions {
        journal: Some(begin(&store, "d", &p)),
        ..RunOptions::default()
    };
    let r = ais_vm::run(&p, &o, counting(None), host.clone()).outcome;
    assert_eq!(r.unwrap(), json!({"sent": true}));
    fx.lose_completion(&store, "d");
    fx.interrupt(&store, "d");
    assert_eq!(store.list_runs().unwrap()[0].status, Status::Interrupted);
    let o = RunOptions {
        journal: Some(Arc::new(resume(&store, "d"))),
        ..RunOptions::default()
    };
    match ais_vm::run(&p, &o, counting(None), host.clone()).outcome {
        Err(RunError::OpFailed { code, payload, .. }) => {
            assert_eq!(code, "journal.in_doubt");
            assert_eq!(payload["tool"], "send");
        }
        other => panic!("expected in-doubt, got {other:?}"),
    }
    assert_eq!(sends.load(Ordering::SeqCst), 1, "not silently repeated");
    let mut j = resume(&store, "d");
    j.set_idempotent_tools(["send".to_string()]);
    let o = RunOptions {
        journal: Some(Arc::new(j)),
        ..RunOptions::default()
    };
    let r = ais_vm::run(&p, &o, counting(None), host).outcome;
    assert_eq!(r.unwrap(), json!({"sent": true}));
    assert_eq!(sends.load(Ordering::SeqCst), 2);
}

fn matrix(fx: &dyn Fixture) {
    resume_at_every_call(fx);
    call_budget_then_resume(fx);
    token_budget(fx);
    in_doubt_tool(fx);
}

#[test]
fn journal_matrix_on_sqlite() {
    matrix(&Sqlite {
        dirs: Mutex::new(Vec::new()),
    });
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn journal_matrix_on_postgres() {
    let server = PgServer::start();
    let fx = Pg {
        server,
        n: AtomicUsize::new(0),
        urls: Mutex::new(Vec::new()),
    };
    matrix(&fx);
    schema_newer_than_the_binary_is_refused(&fx);
    two_claims_race_for_one_run_and_the_loser_is_fenced(&fx);
    group_commit_batches_concurrent_writes(&fx);
    ltm_in_postgres_with_text_search(&fx);
    work_queues_are_shared_by_the_fleet(&fx);
    a_direct_run_whose_process_died_is_interrupted(&fx);
    fan_out_of_64_calls_shares_commits(&fx);
    a_cancelled_run_is_taken_by_no_worker_and_its_owner_is_fenced(&fx);
}

/// Issue 32, defect 8: a cancel (from `aisc serve --enqueue`) reaches the
/// store: a queued run is taken by no worker; the worker running one can
/// neither write, nor finish, nor renew its lease.
fn a_cancelled_run_is_taken_by_no_worker_and_its_owner_is_fenced(fx: &Pg) {
    let store = fx.fresh();
    queued(&store, "c1");
    assert!(store.cancel("c1", "cancelled").unwrap());
    assert_eq!(store.claim("w1", 60_000).unwrap(), None);
    let rec = journal::load_record_in(&*store, "c1").unwrap();
    assert_eq!(rec.info.status, Status::Failed);
    assert_eq!(rec.info.error.as_deref(), Some("cancelled"));
    queued(&store, "c2");
    let owner = store.claim("w1", 60_000).unwrap().unwrap();
    store.write("c2", owner.fence, &[entry("k1")]).unwrap();
    assert!(store.cancel("c2", "cancelled").unwrap());
    assert_eq!(
        store
            .write("c2", owner.fence, &[entry("k2")])
            .unwrap_err()
            .code,
        FENCED
    );
    assert!(!store.renew("c2", owner.fence, 60_000).unwrap());
    let old = Journal::claimed(store.clone(), &owner).unwrap();
    assert_eq!(old.finish(Ok(&json!("late"))).unwrap_err().code, FENCED);
    assert_eq!(store.claim("w2", 60_000).unwrap(), None);
    assert_eq!(
        journal::load_record_in(&*store, "c2").unwrap().info.status,
        Status::Failed
    );
    // An ended run is not cancelled again.
    assert!(!store.cancel("c2", "again").unwrap());
}

/// A 64-way fan-out journals its 64 results in fewer than 64 commits.
fn fan_out_of_64_calls_shares_commits(fx: &Pg) {
    let store = fx.fresh();
    let url = fx.url_of(&store);
    let pg = Arc::new(PgStore::connect(&url).unwrap());
    let src = r#"
agent @A {
  flow @main(%items: list<str>) -> str entry {
    %0 = const {value = ""} : str
    %1 = loop %items, %0 : str {
      body(%2: str, %3: number, %4: str) {
        %5 = ask %2 : str
        %6 = concat %4, %5 : str
        yield %6
      }
    }
    return %1
  }
}
"#;
    let p = bytecode::compile(&ais_ir::parse_module(src).unwrap()).unwrap();
    let bytes = bytecode::encode(&p).unwrap();
    let items: Vec<String> = (0..64).map(|i| format!("item {i}")).collect();
    let args = vec![("items".to_string(), json!(items))];
    let j = Journal::begin_in(pg.clone(), "fan", "fan", &bytes, None, &args).unwrap();
    let o = RunOptions {
        args,
        workers: Some(4),
        journal: Some(Arc::new(j)),
        ..RunOptions::default()
    };
    let b = counting(None);
    let r = ais_vm::run(&p, &o, b.clone(), Arc::new(MemoryHost::new())).outcome;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(b.calls() as usize, 64);
    let (commits, writes) = pg.commit_stats();
    assert_eq!(writes, 64);
    eprintln!("64-way fan-out: {commits} commits for {writes} journal writes");
    assert!(commits < 64, "{commits} commits for 64 writes");
}

fn a_direct_run_whose_process_died_is_interrupted(fx: &Pg) {
    let store = fx.fresh();
    let url = fx.url_of(&store);
    let j = begin(&store, "direct", &program());
    assert_eq!(store.list_runs().unwrap()[0].status, Status::Running);
    // Another process could not resume it while its owner runs: here the
    // owner is process 1 (alive, with its own start time)...
    let me = ais_vm::store::postgres::owner_id();
    let host = me.rsplitn(3, ':').nth(2).unwrap();
    let init = ais_vm::store::lease::start_ticks(1).expect("/proc/1/stat");
    fx.server.psql(
        &url,
        &format!("UPDATE runs SET owner = '{host}:1:{init}' WHERE id = 'direct'"),
    );
    let e = Journal::resume_in(store.clone(), "direct").unwrap_err();
    assert_eq!(e.code, "journal.busy");
    // ...but a pid alive under another start time is another process (the
    // kernel reused the pid): the run's own process is gone, so it is
    // interrupted (a pid check alone called it running).
    fx.server.psql(
        &url,
        &format!(
            "UPDATE runs SET owner = '{host}:1:{}' WHERE id = 'direct'",
            init + 1
        ),
    );
    assert_eq!(store.list_runs().unwrap()[0].status, Status::Interrupted);
    let again = Journal::resume_in(store.clone(), "direct").unwrap();
    assert!(again.fence() > j.fence());
    // The old holder is fenced out.
    assert_eq!(j.finish(Ok(&json!(1))).unwrap_err().code, FENCED);
}

/// `enqueue`/`claim` with the PostgreSQL store: one queue for every
/// process, each job claimed once even by concurrent claimers.
fn work_queues_are_shared_by_the_fleet(fx: &Pg) {
    use ais_vm::aam::ltm::Ltm;
    let store = fx.fresh();
    let url = fx.url_of(&store);
    let producer = Ltm::postgres(&url).unwrap();
    for n in 0..40 {
        producer
            .enqueue("jobs", &json!({"n": n}), "p", &[])
            .unwrap();
    }
    let claimed = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for w in 0..4 {
            let url = url.clone();
            let claimed = &claimed;
            s.spawn(move || {
                let worker = Ltm::postgres(&url).unwrap();
                loop {
                    let (j, _) = worker.claim("jobs", &format!("w{w}"), None).unwrap();
                    let Some(n) = j["job"]["n"].as_i64() else {
                        break;
                    };
                    claimed.lock().unwrap().push(n);
                }
            });
        }
    });
    let mut got = claimed.into_inner().unwrap();
    got.sort();
    assert_eq!(got, (0..40).collect::<Vec<i64>>());
    assert_eq!(producer.claim("jobs", "late", None).unwrap().0, json!(null));
    // A job keeps its labels until it is claimed.
    let page = vec!["fetch_page".to_string()];
    producer
        .enqueue("labelled", &json!("x"), "p", &page)
        .unwrap();
    let (job, labels) = producer.claim("labelled", "w", None).unwrap();
    assert_eq!((job["job"].clone(), labels), (json!("x"), page));
    // A lease that ran out (0 ms) lets another worker take the job again;
    // a running one does not.
    producer.enqueue("leased", &json!("y"), "p", &[]).unwrap();
    assert_eq!(
        producer.claim("leased", "a", Some(0)).unwrap().0["job"],
        "y"
    );
    assert_eq!(
        producer.claim("leased", "b", Some(600_000)).unwrap().0["job"],
        "y"
    );
    assert_eq!(producer.claim("leased", "c", None).unwrap().0, json!(null));
}

fn ltm_in_postgres_with_text_search(fx: &Pg) {
    use ais_vm::aam::ltm::Ltm;
    let store = fx.fresh();
    let url = fx.url_of(&store);
    assert_eq!(
        store.status().unwrap().schema_version,
        ais_vm::store::postgres::schema::SCHEMA_VERSION
    );
    let a = Ltm::postgres(&url).unwrap();
    // Another process of the fleet sees the same entries.
    let b = Ltm::postgres(&url).unwrap();
    a.put(
        "Ann",
        "ltm",
        "fact:1",
        &json!("Paris is the capital of France"),
        None,
        &["fetch_page".to_string()],
    )
    .unwrap();
    a.put(
        "Ann",
        "ltm",
        "fact:2",
        &json!("Berlin is the capital of Germany"),
        None,
        &[],
    )
    .unwrap();
    a.put(
        "Ann",
        "ltm",
        "note",
        &json!({"city": "Lyon", "river": "Rhone"}),
        None,
        &[],
    )
    .unwrap();
    a.put(
        "Bob",
        "ltm",
        "fact:1",
        &json!("Rome is in Italy"),
        None,
        &[],
    )
    .unwrap();
    let e = b.get("Ann", "ltm", "fact:1").unwrap().unwrap();
    assert_eq!(e.value, json!("Paris is the capital of France"));
    // Each entry keeps its own labels (docs/security.md).
    assert_eq!(e.labels, ["fetch_page"]);
    assert_eq!(e.seq, 1);
    let all: Vec<String> = b
        .all("Ann", "ltm")
        .unwrap()
        .into_iter()
        .map(|e| e.key)
        .collect();
    assert_eq!(all, ["fact:1", "fact:2", "note"]);
    let facts = b.prefix("Ann", "ltm", "fact:").unwrap();
    assert_eq!(facts.len(), 2);
    // Every word (AND), case-insensitive, whole words.
    let hits = b.search_all("Ann", "ltm", "CAPITAL france").unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].key, "fact:1");
    assert!(b.search_all("Ann", "ltm", "capit").unwrap().is_empty());
    // JSON values are searched by their text.
    assert_eq!(b.search_all("Ann", "ltm", "rhone").unwrap()[0].key, "note");
    // Any word, best first: two matching words rank above one.
    let ranked = b.search_ranked(None, "ltm", "capital germany", 10).unwrap();
    assert_eq!(ranked[0].0.key, "fact:2");
    assert!(ranked[0].0.labels.is_empty());
    assert_eq!(ranked[1].0.labels, ["fetch_page"]);
    assert_eq!(ranked.len(), 2);
    assert!(ranked[0].1 > ranked[1].1);
    let everyone = b.search_ranked(None, "ltm", "italy paris", 10).unwrap();
    assert_eq!(everyone.len(), 2);
    assert_eq!(
        b.agents("ltm").unwrap(),
        vec![("Ann".to_string(), 3), ("Bob".to_string(), 1)]
    );
    // Updating keeps one row; removing and clearing delete.
    a.put("Ann", "ltm", "fact:1", &json!("Paris, France"), None, &[])
        .unwrap();
    let e = b.get("Ann", "ltm", "fact:1").unwrap().unwrap();
    assert_eq!(e.value, json!("Paris, France"));
    // A new value comes with its own labels.
    assert!(e.labels.is_empty());
    assert!(b.remove("Ann", "ltm", "fact:2").unwrap());
    assert!(!b.remove("Ann", "ltm", "fact:2").unwrap());
    assert_eq!(b.clear(Some("Ann"), "ltm").unwrap(), 2);
    assert_eq!(b.agents("ltm").unwrap().len(), 1);
    assert_eq!(
        a.schema_version().unwrap(),
        ais_vm::store::postgres::schema::SCHEMA_VERSION
    );
}

fn schema_newer_than_the_binary_is_refused(fx: &Pg) {
    let store = fx.fresh();
    let url = fx.url_of(&store);
    assert_eq!(
        store.status().unwrap().schema_version,
        ais_vm::store::postgres::schema::SCHEMA_VERSION
    );
    let v = ais_vm::store::postgres::schema::SCHEMA_VERSION;
    assert_eq!(PgStore::connect(&url).unwrap().migrate().unwrap(), (v, v));
    fx.server.psql(
        &url,
        "INSERT INTO schema_version (version, applied_ms) VALUES (99, 0)",
    );
    let e = PgStore::connect(&url).unwrap_err();
    assert_eq!(e.code, "store.schema");
    assert!(e.message.contains("schema version 99"), "{}", e.message);
}

fn queued(store: &Arc<dyn Store>, id: &str) {
    let bytes = bytecode::encode(&program()).unwrap();
    store
        .enqueue(&NewRun {
            id,
            program: "test",
            artifact: &bytes,
            entry: None,
            args: "[]",
        })
        .unwrap();
}

fn entry(key: &str) -> Entry {
    Entry {
        key: key.into(),
        seq: 0,
        kind: "done".into(),
        op: "ask".into(),
        hash: "h".into(),
        value: Some("[]".into()),
        tokens: 1,
        labels: None,
    }
}

fn two_claims_race_for_one_run_and_the_loser_is_fenced(fx: &Pg) {
    let store = fx.fresh();
    let url = fx.url_of(&store);
    queued(&store, "q1");
    assert_eq!(store.list_runs().unwrap()[0].status, Status::Queued);
    assert_eq!(store.status().unwrap().queue_depth, 1);
    // Two workers (two stores, two connections) race for the one run.
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let racers: Vec<_> = (0..2)
        .map(|i| {
            let (url, barrier) = (url.clone(), barrier.clone());
            std::thread::spawn(move || {
                let s = PgStore::connect(&url).unwrap();
                barrier.wait();
                s.claim(&format!("w{i}"), 60_000).unwrap()
            })
        })
        .collect();
    let claims: Vec<_> = racers.into_iter().map(|t| t.join().unwrap()).collect();
    let won: Vec<_> = claims.iter().flatten().collect();
    assert_eq!(won.len(), 1, "exactly one worker owns the run: {claims:?}");
    let first = won[0].clone();
    assert!(!first.takeover);
    // Nothing else to take while the lease holds.
    assert_eq!(store.claim("w3", 60_000).unwrap(), None);
    assert!(store.renew("q1", first.fence, 60_000).unwrap());
    // The lease runs out: another worker takes the run over.
    fx.server
        .psql(&url, "UPDATE runs SET lease_until = 1 WHERE id = 'q1'");
    let second = store.claim("w3", 60_000).unwrap().unwrap();
    assert!(second.takeover);
    assert_eq!(second.fence, first.fence + 1);
    // The first worker comes back: it can neither write nor finish nor renew.
    let e = store.write("q1", first.fence, &[entry("k1")]).unwrap_err();
    assert_eq!(e.code, FENCED);
    let old = Journal::claimed(store.clone(), &first).unwrap();
    let e = old.finish(Ok(&json!("late"))).unwrap_err();
    assert_eq!(e.code, FENCED);
    assert!(!store.renew("q1", first.fence, 60_000).unwrap());
    assert!(
        store.entries("q1").unwrap().is_empty(),
        "the loser committed nothing"
    );
    // The new owner writes and finishes.
    store.write("q1", second.fence, &[entry("k2")]).unwrap();
    let new = Journal::claimed(store.clone(), &second).unwrap();
    new.finish(Ok(&json!("done"))).unwrap();
    let rec = journal::load_record_in(&*store, "q1").unwrap();
    assert_eq!(rec.result, Some(json!("done")));
    assert_eq!(rec.info.resumes, 1);
    assert_eq!(store.status().unwrap().takeovers, 1);
    // A run whose workers keep dying is failed, not taken over forever.
    queued(&store, "q2");
    let c = store.claim("w4", 60_000).unwrap().unwrap();
    assert_eq!(c.id, "q2");
    fx.server.psql(
        &url,
        &format!(
            "UPDATE runs SET lease_until = 1, takeovers = {} WHERE id = 'q2'",
            ais_vm::store::postgres::MAX_TAKEOVERS
        ),
    );
    assert_eq!(store.claim("w5", 60_000).unwrap(), None);
    let rec = journal::load_record_in(&*store, "q2").unwrap();
    assert_eq!(rec.info.status, Status::Failed);
    assert!(rec.info.error.unwrap().contains("taken over 10 times"));
    assert_eq!(
        store.write("q2", c.fence, &[entry("k")]).unwrap_err().code,
        FENCED
    );
}

fn group_commit_batches_concurrent_writes(fx: &Pg) {
    let store = fx.fresh();
    let url = fx.url_of(&store);
    queued(&store, "g");
    let claim = store.claim("w", 60_000).unwrap().unwrap();
    let pg = Arc::new(PgStore::connect(&url).unwrap());
    let barrier = Arc::new(std::sync::Barrier::new(64));
    let threads: Vec<_> = (0..64)
        .map(|t| {
            let (pg, barrier, fence) = (pg.clone(), barrier.clone(), claim.fence);
            std::thread::spawn(move || {
                barrier.wait();
                for i in 0..10 {
                    pg.write("g", fence, &[entry(&format!("{t}-{i}"))]).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(store.entries("g").unwrap().len(), 640);
    let (commits, writes) = pg.commit_stats();
    assert_eq!(writes, 640);
    assert!(
        commits < writes,
        "64 concurrent writers share commits: {commits} commits for {writes} writes"
    );
}
