//! Run journal, resume, budgets: in-process fault tests (an LLM backend that
//! "dies" after N calls stands in for a crash; the process-level kill tests
//! with the fault switch are in `cli/tests/reliability_cli.rs`).
#![allow(clippy::unwrap_used)]

use ais_ir::bytecode::{self, Program};
use ais_testkit::fake::FakeBackend;
use ais_testkit::MemoryHost;
use ais_vm::journal::{self, Budget, Journal, Status};
use ais_vm::{RunError, RunOptions};
use serde_json::{json, Value as Json};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

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
    let m = ais_ir::parse_module(PROGRAM).unwrap_or_else(|e| panic!("parse: {e:?}"));
    bytecode::compile(&m).unwrap()
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

fn begin(dir: &Path, id: &str, p: &Program) -> Arc<Journal> {
    let bytes = bytecode::encode(p).unwrap();
    Arc::new(Journal::begin(Some(dir), id, "test", &bytes, None, &args()).unwrap())
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

#[test]
fn resume_after_failure_at_every_call_replays_and_never_repeats_a_call() {
    let p = program();
    let clean = counting(None);
    let (want, host) = run(&p, None, clean.clone(), Budget::default());
    let want = want.unwrap();
    let total = clean.calls() as usize;
    assert_eq!(total, 7, "3 asks, 3 callee asks, 1 think");
    let mut want_prompts = answered_prompts(&clean);
    want_prompts.sort();
    for live in 0..total {
        let dir = tempfile::tempdir().unwrap();
        let first = counting(Some(live));
        let (r, _) = run(
            &p,
            Some(begin(dir.path(), "r1", &p)),
            first.clone(),
            Budget::default(),
        );
        assert!(r.is_err(), "attempt 1 with {live} live calls must fail");
        let runs = journal::list_runs(dir.path()).unwrap();
        assert_eq!(runs[0].status, Status::Failed);
        let j = Arc::new(Journal::resume(dir.path(), "r1").unwrap());
        let second = counting(None);
        let (r, host2) = run(&p, Some(j.clone()), second.clone(), Budget::default());
        assert_eq!(r.unwrap(), want, "resumed after {live} calls");
        assert_eq!(host2.printed(), host.printed());
        // Every successful call of attempt 1 was replayed, not repeated.
        let mut prompts = answered_prompts(&first);
        prompts.extend(answered_prompts(&second));
        prompts.sort();
        assert_eq!(prompts, want_prompts, "no duplicate and no missing call");
        assert_eq!(j.replayed() as usize, answered_prompts(&first).len());
        let runs = journal::list_runs(dir.path()).unwrap();
        assert_eq!(runs[0].status, Status::Completed);
        assert_eq!(runs[0].resumes, 1);
    }
}

#[test]
fn llm_call_budget_stops_the_run_and_a_higher_limit_resumes_it() {
    let p = program();
    let (want, _) = run(&p, None, counting(None), Budget::default());
    let dir = tempfile::tempdir().unwrap();
    let b1 = counting(None);
    let budget = Budget {
        llm_calls: Some(2),
        ..Budget::default()
    };
    let (r, _) = run(&p, Some(begin(dir.path(), "b", &p)), b1.clone(), budget);
    match r.unwrap_err() {
        RunError::OpFailed { code, payload, .. } => {
            assert_eq!(code, "budget.llm_calls");
            assert_eq!(payload["limit"], 2);
            assert_eq!(payload["used"], 2);
        }
        other => panic!("expected a budget error, got {other:?}"),
    }
    // Admitted calls not yet started when the run stopped are dropped.
    assert!(b1.calls() as usize <= 2);
    let j = Arc::new(Journal::resume(dir.path(), "b").unwrap());
    // Calls still in flight when the run stopped were cancelled, so at
    // most the two admitted calls are journaled.
    let prior = j.prior_usage().0 as usize;
    assert!(prior <= 2);
    let b2 = counting(None);
    let budget = Budget {
        llm_calls: Some(7),
        ..Budget::default()
    };
    let (r, _) = run(&p, Some(j), b2.clone(), budget);
    assert_eq!(r.unwrap(), want.unwrap());
    assert_eq!(b2.calls() as usize, 7 - prior);
}

#[test]
fn token_budget_stops_before_the_next_call() {
    let p = program();
    let dir = tempfile::tempdir().unwrap();
    let budget = Budget {
        tokens: Some(1),
        ..Budget::default()
    };
    let b = counting(None);
    let (r, _) = run(&p, Some(begin(dir.path(), "t", &p)), b.clone(), budget);
    match r.unwrap_err() {
        RunError::OpFailed { code, payload, .. } => {
            assert_eq!(code, "budget.tokens");
            assert_eq!(payload["limit"], 1);
            assert!(payload["used"].as_u64().unwrap() >= 1);
        }
        other => panic!("expected a budget error, got {other:?}"),
    }
    // The calls already in flight when the limit was reached are journaled.
    let runs = journal::list_runs(dir.path()).unwrap();
    assert_eq!(runs[0].status, Status::Failed);
    assert!(runs[0].entries as usize >= 1);
}

#[test]
fn in_doubt_tool_is_reported_not_repeated() {
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
    let dir = tempfile::tempdir().unwrap();
    let sends = Arc::new(AtomicUsize::new(0));
    let host = Arc::new(MemoryHost::new());
    let s = sends.clone();
    host.register_tool("send", move |_| {
        s.fetch_add(1, Ordering::SeqCst);
        Ok(json!({"sent": true}))
    });
    // Attempt 1 "crashes" between intent and completion: we write the
    // intent ourselves by running the tool in a journal whose completion
    // write is lost. Simulate: run once, then delete the completion row.
    let j = begin(dir.path(), "d", &p);
    let o = RunOptions {
        journal: Some(j),
        ..RunOptions::default()
    };
    let r = ais_vm::run(&p, &o, counting(None), host.clone()).outcome;
    assert_eq!(r.unwrap(), json!({"sent": true}));
    assert_eq!(sends.load(Ordering::SeqCst), 1);
    let conn = rusqlite::Connection::open(dir.path().join(journal::DB_FILE)).unwrap();
    conn.execute(
        "UPDATE entries SET kind = 'intent', value = NULL WHERE op = 'inv'",
        [],
    )
    .unwrap();
    conn.execute(
        "UPDATE runs SET status = 'running', pid = 0, owner = NULL, lease_until = NULL",
        [],
    )
    .unwrap();
    drop(conn);
    assert_eq!(
        journal::list_runs(dir.path()).unwrap()[0].status,
        Status::Interrupted
    );
    let j = Arc::new(Journal::resume(dir.path(), "d").unwrap());
    let o = RunOptions {
        journal: Some(j),
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
    // Declared idempotent, it is run again.
    let mut j = Journal::resume(dir.path(), "d").unwrap();
    j.set_idempotent_tools(["send".to_string()]);
    let o = RunOptions {
        journal: Some(Arc::new(j)),
        ..RunOptions::default()
    };
    let r = ais_vm::run(&p, &o, counting(None), host).outcome;
    assert_eq!(r.unwrap(), json!({"sent": true}));
    assert_eq!(sends.load(Ordering::SeqCst), 2);
}

#[test]
fn corrupted_or_truncated_journal_is_a_clear_error() {
    let p = program();
    let dir = tempfile::tempdir().unwrap();
    let (r, _) = run(
        &p,
        Some(begin(dir.path(), "c", &p)),
        counting(None),
        Budget::default(),
    );
    assert!(r.is_ok());
    let db = dir.path().join(journal::DB_FILE);
    // Checkpoint the WAL into the main file, then damage it.
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .unwrap();
    }
    let bytes = std::fs::read(&db).unwrap();
    for cut in [0usize, 10, 100, bytes.len() / 2] {
        std::fs::write(&db, &bytes[..cut]).unwrap();
        let _ = std::fs::remove_file(dir.path().join("runs.db-wal"));
        let _ = std::fs::remove_file(dir.path().join("runs.db-shm"));
        // No panic; either an error or (empty file) an empty journal.
        match journal::list_runs(dir.path()) {
            Ok(runs) => assert!(cut == 0 && runs.is_empty(), "cut {cut}: {runs:?}"),
            Err(e) => assert!(e.to_string().contains("journal"), "{e}"),
        }
        assert!(journal::load_run(dir.path(), "c").is_err());
    }
    let mut garbage = bytes.clone();
    for b in garbage.iter_mut().skip(100).step_by(7) {
        *b ^= 0x5a;
    }
    std::fs::write(&db, &garbage).unwrap();
    assert!(journal::load_run(dir.path(), "c").is_err() || journal::list_runs(dir.path()).is_ok());
    // A tampered artifact is refused by its checksum.
    std::fs::write(&db, &bytes).unwrap();
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute("UPDATE runs SET artifact = X'00'", [])
            .unwrap();
    }
    let e = journal::load_run(dir.path(), "c").unwrap_err();
    assert_eq!(e.code, "journal.corrupt");
}

#[test]
fn values_round_trip_through_the_journal_encoding() {
    use ais_vm::Val;
    let vs = vec![
        Val::Null,
        Val::Bool(true),
        Val::Num(2.5),
        Val::str("x"),
        Val::List(vec![Val::str("a"), Val::Ord].into()),
        Val::Json(Arc::new(json!({"k": [1, 2]}))),
        Val::Ord,
    ];
    let j = journal::encode_vals(&vs);
    assert_eq!(journal::decode_vals(&j).unwrap(), vs);
    assert!(journal::decode_vals(&json!([{"nope": 1}])).is_none());
    assert!(journal::decode_vals(&json!("x")).is_none());
}

#[test]
fn watchdog_stops_a_loop_that_repeats_the_same_call() {
    let src = r#"
agent @A {
  flow @main(%items: list<str>) -> str entry {
    %0 = const {value = ""} : str
    %1 = loop %items, %0 : str {
      body(%2: str, %3: number, %4: str) {
        %5 = const {value = "same question"} : str
        %6 = ask %5 : str
        yield %6
      }
    }
    return %1
  }
}
"#;
    let p = bytecode::compile(&ais_ir::parse_module(src).unwrap()).unwrap();
    let o = RunOptions {
        args: vec![("items".into(), json!(["a", "b", "c", "d", "e"]))],
        watchdog: Some(3),
        ..RunOptions::default()
    };
    let b = counting(None);
    match ais_vm::run(&p, &o, b.clone(), Arc::new(MemoryHost::new())).outcome {
        Err(RunError::OpFailed { code, payload, .. }) => {
            assert_eq!(code, "WATCHDOG_LOOP");
            assert_eq!(payload["repeats"], 3);
        }
        other => panic!("expected WATCHDOG_LOOP, got {other:?}"),
    }
    assert!(b.calls() as usize <= 2);
    // Off, or with progress (the item in the prompt), the loop completes.
    let off = RunOptions {
        watchdog: None,
        ..o.clone()
    };
    assert!(
        ais_vm::run(&p, &off, counting(None), Arc::new(MemoryHost::new()))
            .outcome
            .is_ok()
    );
    let progress = src.replace(
        "%5 = const {value = \"same question\"} : str\n        %6 = ask %5 : str",
        "%6 = ask %2 : str",
    );
    let p = bytecode::compile(&ais_ir::parse_module(&progress).unwrap()).unwrap();
    assert!(
        ais_vm::run(&p, &o, counting(None), Arc::new(MemoryHost::new()))
            .outcome
            .is_ok()
    );
}

#[test]
fn catch_receives_a_structured_error_with_a_hint() {
    let src = r#"
agent @A {
  flow @main(%x: str) -> json entry {
    %0 = try_catch : json {
      try {
        %1 = inv %x {tool = "no_such_tool"} : json
        yield %1
      }
      catch(%2: json) {
        yield %2
      }
    }
    return %0
  }
}
"#;
    let p = bytecode::compile(&ais_ir::parse_module(src).unwrap()).unwrap();
    let o = RunOptions {
        args: vec![("x".into(), json!("{}"))],
        ..RunOptions::default()
    };
    let e = ais_vm::run(&p, &o, counting(None), Arc::new(MemoryHost::new()))
        .outcome
        .unwrap();
    assert_eq!(e["code"], "tool.unknown");
    assert_eq!(e["op"], "inv");
    assert!(e["span"]["start"].is_number());
    assert_eq!(e["hint"], ais_vm::error::hint_for("tool.unknown"));
    assert!(ais_vm::error::hint_for("budget.tokens").contains("aisc resume"));
}

#[test]
fn many_iterations_with_thousands_of_calls_in_flight_complete() {
    // Scaled down from the load probe (`vm/examples/reliability_load.rs`):
    // 3,000 iterations (~30k ops), 2,000 concurrent calls, journaled.
    let src = r#"
agent @A {
  flow @main(%items: list<str>) -> str entry {
    %0 = const {value = "done"} : str
    loop %items {
      body(%1: str, %2: number) {
        %3 = template %1 {template = "Q {0}"} : str
        %4 = ask %3 : str
        %5 = concat %4, %1 : str
        %6 = concat %5, %3 : str
        yield
      }
    }
    return %0
  }
}
"#;
    let p = bytecode::compile(&ais_ir::parse_module(src).unwrap()).unwrap();
    let items: Vec<String> = (0..3000).map(|i| format!("i{i}")).collect();
    let j = Arc::new(Journal::begin(None, "load", "load", &[], None, &[]).unwrap());
    let o = RunOptions {
        args: vec![("items".into(), json!(items))],
        concurrency: Some(2000),
        record_events: false,
        journal: Some(j),
        ..RunOptions::default()
    };
    let b = counting(None);
    let r = ais_vm::run(&p, &o, b.clone(), Arc::new(MemoryHost::new()));
    assert_eq!(r.outcome.unwrap(), json!("done"));
    assert_eq!(b.calls() as usize, 3000);
}

#[test]
fn per_agent_call_budget_names_the_agent() {
    let p = program();
    let budget = Budget {
        agents: vec![journal::AgentLimit {
            agent: "Researcher".into(),
            llm_calls: Some(1),
            tokens: None,
        }],
        ..Budget::default()
    };
    let (r, _) = run(&p, None, counting(None), budget);
    match r.unwrap_err() {
        RunError::OpFailed { code, payload, .. } => {
            assert_eq!(code, "budget.agent_llm_calls");
            assert_eq!(payload["agent"], "Researcher");
            assert_eq!(payload["limit"], 1);
        }
        other => panic!("expected a budget error, got {other:?}"),
    }
    // A limit on another agent only: the run completes.
    let budget = Budget {
        agents: vec![journal::AgentLimit {
            agent: "Nobody".into(),
            llm_calls: Some(0),
            tokens: None,
        }],
        ..Budget::default()
    };
    assert!(run(&p, None, counting(None), budget).0.is_ok());
}

#[test]
fn deadline_stops_the_run_before_the_next_call() {
    let p = program();
    // Every call takes at least 2 ms and the second call depends on the
    // first, so the deadline of 1 ms has passed when the second one starts.
    let b = Arc::new(
        FakeBackend::new()
            .blocking()
            .with_latency(std::time::Duration::from_millis(2)),
    );
    let budget = Budget {
        deadline_ms: Some(1),
        ..Budget::default()
    };
    match run(&p, None, b, budget).0.unwrap_err() {
        RunError::OpFailed { code, payload, .. } => {
            assert_eq!(code, "budget.deadline_ms");
            assert_eq!(payload["limit"], 1);
        }
        other => panic!("expected a budget error, got {other:?}"),
    }
}
