//! A `try` body is all-or-nothing on the AAM host: the memory (STM, LTM,
//! episodic), beliefs and output of a failed body are not visible after it;
//! those of a successful body are; inside the body its own writes are read.
#![allow(clippy::unwrap_used)]

mod ir_support;
use ir_support::program;

use ais_ir::Tier;
use ais_testkit::fake::FakeBackend;
use ais_vm::aam::AamHost;
use ais_vm::{Host, RunOptions};
use serde_json::json;
use std::sync::Arc;

/// Lowered from a body that prints, writes every tier and a belief, reads
/// its own writes, then calls `TOOL` (which fails when it does not exist).
const SRC: &str = r#"
agent @A {
  belief @status = json "idle"
  flow @main(%tool: str) -> str entry {
    %0, %1, %2, %3, %4, %5, %6, %7 = try_catch : str, ord, ord, ord, ord, ord, ord, ord {
      try {
        %8 = const {value = "in body"} : str
        %9 = print %8 : ord
        %10 = const {value = "draft"} : str
        %11 = const {value = "k"} : str
        %12 = umem %10, %11 {tier = "stm"} : ord
        %13 = const {value = "fact"} : str
        %14 = const {value = "f"} : str
        %15 = umem %13, %14 {tier = "ltm"} : ord
        %16 = const {value = "event"} : str
        %17 = umem %16 {tier = "episodic"} : ord
        %18 = const {value = "busy"} : str
        %19 = belief.set %18 {name = "status"} : ord
        %20, %21 = qmem %11, %12 {tier = "stm"} : json, ord
        %22 = const {value = "seen"} : str
        %23, %24 = belief.get %19 {name = "status"} : json, ord
        %25 = cast %23 : str
        %26 = print %22, %20, %25, %9 : ord
        %27 = const {value = "{}"} : str
        %28, %29 = inv %27 {tool = "no_such_tool"} : json, ord
        %30 = const {value = "completed"} : str
        %31 = fence %12, %21 : ord
        %32 = fence %19, %24 : ord
        yield %30, %31, %15, %17, %32, %26, %29, %29
      }
      catch(%33: json) {
        %34 = const {value = "caught"} : str
        %35 = fence : ord
        %36 = fence : ord
        %37 = fence : ord
        %38 = fence : ord
        %39 = fence : ord
        %40 = fence : ord
        %41 = fence : ord
        yield %34, %35, %36, %37, %38, %39, %40, %41
      }
    }
    return %0
  }
}
"#;

fn run(tool: &str, workers: usize) -> (serde_json::Value, Arc<AamHost>) {
    let p = program(&SRC.replace("no_such_tool", tool));
    let host = Arc::new(AamHost::ephemeral());
    let o = RunOptions {
        workers: Some(workers),
        args: vec![("tool".into(), json!(tool))],
        ..RunOptions::default()
    };
    let r = ais_vm::run(&p, &o, Arc::new(FakeBackend::new()), host.clone());
    (r.outcome.unwrap(), host)
}

fn episodic_mentions(h: &AamHost, text: &str) -> bool {
    h.episodic_records()
        .iter()
        .any(|r| r.to_string().contains(text))
}

#[test]
fn failing_try_body_effects_are_discarded() {
    for workers in [1, 2, 8] {
        for _ in 0..10 {
            let (r, h) = run("no_such_tool", workers);
            assert_eq!(r, json!("caught"));
            assert!(h.printed().is_empty(), "{:?}", h.printed());
            assert_eq!(h.mem_query("A", Tier::Stm, &json!("k")).unwrap(), json!([]));
            assert_eq!(h.mem_query("A", Tier::Ltm, &json!("f")).unwrap(), json!([]));
            assert!(!episodic_mentions(&h, "\"event\""));
            assert_eq!(h.belief_get("A", "status").unwrap(), json!("idle"));

            let (r, h) = run("now", workers);
            assert_eq!(r, json!("completed"));
            assert_eq!(h.printed(), ["in body", "seen draft busy"]);
            assert_eq!(
                h.mem_query("A", Tier::Stm, &json!("k")).unwrap(),
                json!("draft")
            );
            assert_eq!(
                h.mem_query("A", Tier::Ltm, &json!("f")).unwrap(),
                json!("fact")
            );
            assert!(episodic_mentions(&h, "\"event\""));
            assert_eq!(h.belief_get("A", "status").unwrap(), json!("busy"));
        }
    }
}

/// A body whose first `ask` feeds a `print`, then asks again.
const STOPPED: &str = r#"
agent @A {
  flow @main(%q: str) -> str entry {
    %0, %1 = try_catch : str, ord {
      try {
        %2 = ask %q : str
        %3 = print %2 : ord
        %4 = ask %2 : str
        yield %4, %3
      }
      catch(%5: json) {
        %6 = const {value = "caught"} : str
        %7 = fence : ord
        yield %6, %7
      }
    }
    return %0
  }
}
"#;

/// A run stopped (uncatchably, by its LLM call budget) inside a `try` body
/// never applied the body's `print`, so the journal must not say it did:
/// the resumed run prints it when the body completes. (Journaling the
/// buffered op when it ran would make the resume replay it and skip the
/// output for good.)
#[test]
fn a_try_body_stopped_before_it_commits_is_redone_on_resume() {
    use ais_vm::journal::{Budget, Journal};
    let p = program(STOPPED);
    let dir = tempfile::tempdir().unwrap();
    let args = vec![("q".to_string(), json!("topic"))];
    let bytes = ais_ir::bytecode::encode(&p).unwrap();
    let j = Journal::begin(Some(dir.path()), "r", "test", &bytes, None, &args).unwrap();
    let run = |j: Journal, calls: u64| {
        let host = Arc::new(ais_testkit::MemoryHost::new());
        let o = RunOptions {
            args: args.clone(),
            workers: Some(2),
            journal: Some(Arc::new(j)),
            budget: Budget {
                llm_calls: Some(calls),
                ..Budget::default()
            },
            ..RunOptions::default()
        };
        let r = ais_vm::run(&p, &o, Arc::new(FakeBackend::new()), host.clone());
        (r.outcome, host)
    };
    let (r, host) = run(j, 1);
    match r.unwrap_err() {
        ais_vm::RunError::OpFailed { code, .. } => assert_eq!(code, "budget.llm_calls"),
        other => panic!("{other:?}"),
    }
    assert!(host.printed().is_empty(), "{:?}", host.printed());
    let (r, host) = run(Journal::resume(dir.path(), "r").unwrap(), 5);
    let v = r.unwrap();
    assert_ne!(v, json!("caught"));
    assert_eq!(host.printed().len(), 1, "{:?}", host.printed());
}
