//! Information-flow labels across journal and resume (issue 19): every
//! journaled result records its label as source names, and a resumed run
//! restores it. An untrusted tool result that reaches a sink after a
//! `pause` (or after a crash) is still denied when the run resumes; a
//! trusted one is still allowed. On SQLite and on PostgreSQL (a private
//! server; that half is ignored by plain `cargo test`: "needs PostgreSQL: run ./test").
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/ifc_policy.rs"]
mod ifc_policy;

use ais_ir::ifc::FlowPolicy;
use ais_testkit::fake::FakeBackend;
use ais_testkit::pg::PgServer;
use ais_testkit::MemoryHost;
use ais_vm::journal::{Journal, Status};
use ais_vm::llm::LlmBackend;
use ais_vm::store::postgres::PgStore;
use ais_vm::store::sqlite::SqliteStore;
use ais_vm::store::{Entry, Store};
use ais_vm::{Host, RunError, RunOptions};
use serde_json::{json, Value as Json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// `source` is `fetch_page` (untrusted) or `read_note` (trusted).
fn program(source: &str, step: &str) -> ais_ir::bytecode::Program {
    let src = format!(
        r#"agent A {{
    capability fetch_page(url: str) -> str;
    capability read_note(name: str) -> str;
    capability send(to: str, note: str) -> json;

    @entry flow main(who: str) -> str {{
        let doc = {source}(who)
        {step}
        send(to, "scheduled")
        return "done"
    }}
}}
"#
    );
    let m = ais_compiler::driver::lower_source(&src).unwrap_or_else(|d| panic!("{d:?}"));
    ais_ir::bytecode::compile(&m).unwrap()
}

/// Waits for a person, then sends to the fetched address.
const AFTER_PAUSE: &str =
    "let ok = pause(\"Send it to \" + doc + \"?\")\n        let to = doc + ok";
/// A model extracts the address; a second call fails in the first attempt.
const AFTER_CRASH: &str = "let x = ask(\"Extract the address.\", doc)\n        let c = ask(\"Confirm.\", x)\n        let to = x + c";

fn policy() -> FlowPolicy {
    ifc_policy::mail_policy()
}

/// A fake model that goes down after `live` calls (`None`: never).
fn flaky(live: Option<u64>) -> Arc<FakeBackend> {
    let fake = FakeBackend::new().named("flaky").blocking();
    Arc::new(match live {
        Some(n) => fake.failing_from_call(n),
        None => fake,
    })
}

struct Tools {
    host: Arc<MemoryHost>,
    sends: Arc<Mutex<Vec<Json>>>,
}

fn tools() -> Tools {
    let host = Arc::new(MemoryHost::new());
    host.register_tool("fetch_page", |_| Ok(json!("evil@attacker.example")));
    host.register_tool("read_note", |_| Ok(json!("bob@example.com")));
    let sends = Arc::new(Mutex::new(Vec::new()));
    let s = sends.clone();
    host.register_tool("send", move |a| {
        s.lock().unwrap().push(a.clone());
        Ok(json!({"ok": true}))
    });
    Tools { host, sends }
}

fn run(
    p: &ais_ir::bytecode::Program,
    j: Arc<Journal>,
    llm: Arc<dyn LlmBackend>,
    t: &Tools,
) -> Result<Json, RunError> {
    let o = RunOptions {
        args: vec![("who".into(), json!("bob"))],
        workers: Some(2),
        journal: Some(j),
        flow_policy: policy(),
        ..RunOptions::default()
    };
    ais_vm::run(p, &o, llm, t.host.clone() as Arc<dyn Host>).outcome
}

fn begin(store: &Arc<dyn Store>, id: &str, p: &ais_ir::bytecode::Program) -> Arc<Journal> {
    let bytes = ais_ir::bytecode::encode(p).unwrap();
    let args = [("who".to_string(), json!("bob"))];
    Arc::new(Journal::begin_in(store.clone(), id, "t", &bytes, None, &args).unwrap())
}

fn denied_code(r: &Result<Json, RunError>) -> Option<(String, Json)> {
    match r {
        Err(RunError::OpFailed { code, payload, .. }) => Some((code.clone(), (**payload).clone())),
        _ => None,
    }
}

/// The entry of the journaled op `op` (the first one).
fn entry_of(store: &Arc<dyn Store>, id: &str, op: &str) -> Entry {
    let mut es = store.entries(id).unwrap();
    es.sort_by_key(|e| e.seq);
    es.iter()
        .find(|e| e.op == op && e.kind == "done")
        .cloned()
        .unwrap_or_else(|| panic!("no {op} in {es:?}"))
}

fn labels_of(e: &Entry) -> Vec<String> {
    serde_json::from_str(e.labels.as_deref().expect("labels recorded")).unwrap()
}

/// Paused, answered, resumed: the untrusted address is still denied at
/// `send`; the trusted one is sent. The journal holds the labels by name.
fn after_pause(store_of: &dyn Fn() -> Arc<dyn Store>) {
    for (source, denied) in [("fetch_page", true), ("read_note", false)] {
        let store = store_of();
        let p = program(source, AFTER_PAUSE);
        let t = tools();
        let r = run(&p, begin(&store, "r", &p), Arc::new(FakeBackend::new()), &t);
        assert!(r.is_err(), "stops at the pause");
        assert_eq!(store.list_runs().unwrap()[0].status, Status::Paused);
        let inv = entry_of(&store, "r", "inv");
        assert!(labels_of(&inv).contains(&source.to_string()), "{inv:?}");
        let mut j = Journal::resume_in(store.clone(), "r").unwrap();
        assert!(j.answer(&json!(" ok")).unwrap().is_some());
        let r = run(&p, Arc::new(j), Arc::new(FakeBackend::new()), &t);
        if denied {
            let (code, payload) = denied_code(&r).expect("denied after resume");
            assert_eq!(code, "policy.denied");
            assert_eq!(payload["sink"], "send");
            assert_eq!(payload["argument"], "to");
            assert_eq!(payload["sources"], json!(["fetch_page"]));
            assert!(t.sends.lock().unwrap().is_empty(), "never reached");
        } else {
            assert_eq!(r.unwrap(), json!("done"));
            let sent = t.sends.lock().unwrap().clone();
            assert_eq!(
                sent,
                vec![json!({"to": "bob@example.com ok", "note": "scheduled"})]
            );
        }
        // The answer is recorded as a person's input.
        assert_eq!(labels_of(&entry_of(&store, "r", "pause")), vec!["@input"]);
    }
}

/// The model dies after its first call; on resume that call (which read
/// the untrusted page) is replayed and its reply still cannot reach `to`.
fn after_crash(store_of: &dyn Fn() -> Arc<dyn Store>) {
    for (source, denied) in [("fetch_page", true), ("read_note", false)] {
        let store = store_of();
        let p = program(source, AFTER_CRASH);
        let t = tools();
        let r = run(&p, begin(&store, "c", &p), flaky(Some(1)), &t);
        assert!(r.is_err());
        let ask = entry_of(&store, "c", "ask");
        let names = labels_of(&ask);
        assert!(names.contains(&"@llm".to_string()), "{names:?}");
        assert_eq!(names.contains(&"fetch_page".to_string()), denied);
        let j = Arc::new(Journal::resume_in(store.clone(), "c").unwrap());
        let r = run(&p, j.clone(), flaky(None), &t);
        assert!(j.replayed() >= 2, "the tool and the first ask replayed");
        if denied {
            assert_eq!(denied_code(&r).unwrap().0, "policy.denied");
            assert!(t.sends.lock().unwrap().is_empty());
        } else {
            assert_eq!(r.unwrap(), json!("done"));
            assert_eq!(t.sends.lock().unwrap().len(), 1);
        }
    }
}

/// A recorded label is restored even where recomputing would not find it
/// (here: the entry of a trusted tool rewritten to name an untrusted
/// source, standing for provenance only the first attempt saw), and an
/// entry without labels (a journal from before) is recomputed as before.
fn recorded_labels_are_restored(store_of: &dyn Fn() -> Arc<dyn Store>) {
    for (labels, denied) in [
        (
            Some(json!(["read_note", "@args", "http_get"]).to_string()),
            true,
        ),
        (None, false),
    ] {
        let store = store_of();
        let p = program("read_note", AFTER_PAUSE);
        let t = tools();
        let r = run(&p, begin(&store, "x", &p), Arc::new(FakeBackend::new()), &t);
        assert!(r.is_err());
        let mut inv = entry_of(&store, "x", "inv");
        inv.labels = labels;
        let mut j = Journal::resume_in(store.clone(), "x").unwrap();
        store.write("x", j.fence(), &[inv]).unwrap();
        // Reopened so the rewritten entry is what it replays.
        drop(j);
        j = Journal::resume_in(store.clone(), "x").unwrap();
        j.answer(&json!(" ok")).unwrap();
        let r = run(&p, Arc::new(j), Arc::new(FakeBackend::new()), &t);
        if denied {
            let (code, payload) = denied_code(&r).expect("denied");
            assert_eq!(code, "policy.denied");
            assert_eq!(payload["sources"], json!(["http_get"]));
        } else {
            assert_eq!(r.unwrap(), json!("done"));
        }
        assert_eq!(t.sends.lock().unwrap().len(), usize::from(!denied));
    }
}

fn all(store_of: &dyn Fn() -> Arc<dyn Store>) {
    after_pause(store_of);
    after_crash(store_of);
    recorded_labels_are_restored(store_of);
}

#[test]
fn labels_survive_resume_on_sqlite() {
    let dirs = Mutex::new(Vec::new());
    all(&|| {
        let d = tempfile::tempdir().unwrap();
        let s: Arc<dyn Store> = Arc::new(SqliteStore::open(Some(d.path())).unwrap());
        dirs.lock().unwrap().push(d);
        s
    });
}

/// A journal written before the `labels` column existed: its entries read
/// as "labels unknown" (recomputed: the untrusted page is still denied)
/// and the column is added when the store opens it.
#[test]
fn a_journal_from_before_labels_still_resumes() {
    let d = tempfile::tempdir().unwrap();
    let p = program("fetch_page", AFTER_PAUSE);
    let t = tools();
    {
        let s: Arc<dyn Store> = Arc::new(SqliteStore::open(Some(d.path())).unwrap());
        assert!(run(&p, begin(&s, "o", &p), Arc::new(FakeBackend::new()), &t).is_err());
    }
    let db = d.path().join(ais_vm::journal::DB_FILE);
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch("ALTER TABLE entries DROP COLUMN labels")
        .unwrap();
    drop(c);
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(Some(d.path())).unwrap());
    assert_eq!(entry_of(&store, "o", "inv").labels, None);
    let mut j = Journal::resume_in(store.clone(), "o").unwrap();
    j.answer(&json!(" ok")).unwrap();
    let r = run(&p, Arc::new(j), Arc::new(FakeBackend::new()), &t);
    assert_eq!(denied_code(&r).unwrap().0, "policy.denied");
    assert!(t.sends.lock().unwrap().is_empty());
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn labels_survive_resume_on_postgres() {
    let server = PgServer::start();
    let n = AtomicUsize::new(0);
    all(&|| {
        let i = n.fetch_add(1, Ordering::SeqCst);
        let url = server.database(&format!("ifc{i}"));
        Arc::new(PgStore::connect(&url).unwrap()) as Arc<dyn Store>
    });
}
