//! The flow calls the scheduler records for an observer that asks
//! (`RunObserver::flow_calls`, what OpenTelemetry's `invoke_agent` spans
//! are drawn from): the same calls, callers, flows, agents, starts and
//! failures as folding the run's events finds, each ending when its frame
//! completed (after its last op), for fan-outs, nested calls in branches,
//! loops, a caught failure and a failed run.
#![allow(clippy::unwrap_used)]

mod ir_support;
use ir_support::program;

use ais_testkit::fake::FakeBackend;
use ais_testkit::MemoryHost;
use ais_vm::observe::{fold_flow_calls, FlowCall, Observer, OpUpdate, RunObserver};
use ais_vm::RunOptions;
use serde_json::json;
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Calls {
    handed: Mutex<Vec<Vec<FlowCall>>>,
    /// Events seen by `call`: LLM and tool calls and failures only.
    calls_seen: Mutex<Vec<(u32, bool)>>,
    ops_seen: Mutex<usize>,
}

impl RunObserver for Calls {
    fn wants_flow_calls(&self) -> bool {
        true
    }
    fn flow_calls(&self, calls: &[FlowCall]) {
        self.handed.lock().unwrap().push(calls.to_vec());
    }
    fn op(&self, _u: &OpUpdate<'_>) {
        *self.ops_seen.lock().unwrap() += 1;
    }
    fn call(&self, u: &OpUpdate<'_>) {
        let pure = matches!(u.event.track, ais_vm::telemetry::Track::Worker(_));
        self.calls_seen.lock().unwrap().push((u.event.op, pure));
    }
}

/// Runs `src` with a recording observer: the report and what it was handed.
fn run(src: &str, args: serde_json::Value) -> (ais_vm::RunReport, Arc<Calls>) {
    let p = program(src);
    let seen = Arc::new(Calls::default());
    let o = RunOptions {
        workers: Some(2),
        args: args
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        observer: Some(Observer(seen.clone())),
        ..RunOptions::default()
    };
    let report = ais_vm::run(
        &p,
        &o,
        Arc::new(FakeBackend::new()),
        Arc::new(MemoryHost::new()),
    );
    (report, seen)
}

/// The recorded calls agree with the fold of the events; returns them.
fn check(report: &ais_vm::RunReport, seen: &Calls) -> Vec<FlowCall> {
    let handed = seen.handed.lock().unwrap().clone();
    assert_eq!(handed.len(), 1, "handed once, at the run's end");
    let recorded = handed.into_iter().next().unwrap();
    let folded = fold_flow_calls(&report.events);
    let key = |c: &FlowCall| (c.id, c.caller, c.flow, c.agent, c.start_ns, c.failed);
    assert_eq!(
        recorded.iter().map(key).collect::<Vec<_>>(),
        folded.iter().map(key).collect::<Vec<_>>(),
        "recorded {recorded:#?}\nfolded {folded:#?}"
    );
    let makespan_ns = report.summary.makespan_ms * 1e6;
    for (r, f) in recorded.iter().zip(&folded) {
        // Its frame completes after its last op ends, before the run ends.
        assert!(r.end_ns >= f.end_ns, "{r:?} ends before its ops {f:?}");
        assert!(r.end_ns as f64 <= makespan_ns + 1.0, "{r:?} after the run");
    }
    // Every event of a call or a failure reached `call`, no other did.
    let wanted = report
        .events
        .iter()
        .filter(|e| {
            !matches!(e.track, ais_vm::telemetry::Track::Worker(_))
                || e.status == ais_vm::telemetry::Status::Failed
        })
        .count();
    assert_eq!(seen.calls_seen.lock().unwrap().len(), wanted);
    assert_eq!(*seen.ops_seen.lock().unwrap(), report.events.len());
    recorded
}

const FAN_OUT: &str = r#"
agent @Researcher {
  flow @research(%q: str) -> str {
    %0 = template %q {template = "Findings on {0}"} : str
    %1 = ask %0 : str
    return %1
  }
}
agent @Critic {
  flow @critique(%q: str) -> str {
    %0 = const {value = true} : bool
    %1 = if %0 : str {
      then {
        %2 = flow.call %q {callee = @Researcher.research} : str
        yield %2
      }
      else {
        yield %q
      }
    }
    return %1
  }
}
agent @Coordinator {
  flow @main(%topic: str) -> json entry {
    %0 = template %topic {template = "Sharpen: {0}"} : str
    %1 = ask %0 : str
    %2 = flow.call %1 {callee = @Researcher.research} : str
    %3 = flow.call %1 {callee = @Critic.critique} : str
    %4 = const {value = json {"a":1}} : json
    %5 = inv %4 {tool = "echo"} : json
    %6 = wait_all %2, %3, %5 : json
    return %6
  }
}
"#;

#[test]
fn fan_out_and_a_call_inside_a_branch_are_recorded_as_their_events_show() {
    let (report, seen) = run(FAN_OUT, json!({"topic": "batteries"}));
    assert!(report.outcome.is_ok(), "{:?}", report.outcome);
    let calls = check(&report, &seen);
    // Entry, Researcher twice, Critic once.
    assert_eq!(calls.len(), 4);
    let entry = calls.iter().find(|c| c.caller.is_none()).unwrap();
    let critic = calls
        .iter()
        .find(|c| c.caller == Some(entry.id) && calls.iter().any(|d| d.caller == Some(c.id)))
        .expect("Critic calls Researcher from its branch");
    let nested = calls.iter().find(|c| c.caller == Some(critic.id)).unwrap();
    assert_eq!(
        calls.iter().filter(|c| c.caller == Some(entry.id)).count(),
        2
    );
    // A caller's frame completes after its callee's.
    assert!(critic.end_ns >= nested.end_ns && entry.end_ns >= critic.end_ns);
    assert!(calls.iter().all(|c| !c.failed));
}

const LOOP_AND_CATCH: &str = r#"
agent @Worker {
  flow @step(%x: str) -> json {
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
agent @Main {
  flow @main(%items: list<str>) -> str entry {
    %0 = const {value = "done"} : str
    loop %items {
      body(%i: str, %n: number) {
        %1 = flow.call %i {callee = @Worker.step} : json
        yield
      }
    }
    return %0
  }
}
"#;

#[test]
fn calls_in_a_loop_and_a_caught_failure_are_recorded() {
    let (report, seen) = run(LOOP_AND_CATCH, json!({"items": ["a", "b", "c"]}));
    assert!(report.outcome.is_ok(), "{:?}", report.outcome);
    let calls = check(&report, &seen);
    // The entry and one call per item; each callee caught its tool's
    // failure: its call failed, the entry did not.
    assert_eq!(calls.len(), 4);
    let callees: Vec<&FlowCall> = calls.iter().filter(|c| c.caller.is_some()).collect();
    assert_eq!(callees.len(), 3);
    assert!(callees.iter().all(|c| c.failed));
    assert!(calls
        .iter()
        .filter(|c| c.caller.is_none())
        .all(|c| !c.failed));
    // The failed tool ops reached `call` (they are failures).
    assert!(seen.calls_seen.lock().unwrap().len() >= 3);
}

const FAILING: &str = r#"
agent @Deep {
  flow @work(%x: str) -> json {
    %0 = inv %x {tool = "no_such_tool"} : json
    return %0
  }
}
agent @Mid {
  flow @relay(%x: str) -> json {
    %0 = flow.call %x {callee = @Deep.work} : json
    return %0
  }
}
agent @Main {
  flow @main(%x: str) -> json entry {
    %0 = flow.call %x {callee = @Mid.relay} : json
    return %0
  }
}
"#;

#[test]
fn calls_a_failure_left_open_are_settled_from_their_events() {
    let (report, seen) = run(FAILING, json!({"x": "{}"}));
    assert!(report.outcome.is_err(), "the run fails");
    // No frame completed: all three calls come from the events' fold,
    // the innermost one failed.
    let calls = check(&report, &seen);
    assert_eq!(calls.len(), 3);
    let deep = calls
        .iter()
        .find(|c| !calls.iter().any(|d| d.caller == Some(c.id)))
        .unwrap();
    assert!(deep.failed);
    assert_eq!(calls.iter().filter(|c| c.failed).count(), 1);
}

#[test]
fn an_observer_that_does_not_ask_gets_no_flow_calls() {
    #[derive(Default)]
    struct Quiet(Mutex<usize>);
    impl RunObserver for Quiet {
        fn flow_calls(&self, _calls: &[FlowCall]) {
            *self.0.lock().unwrap() += 1;
        }
    }
    let q = Arc::new(Quiet::default());
    let o = RunOptions {
        args: vec![("topic".into(), json!("x"))],
        observer: Some(Observer(q.clone())),
        ..RunOptions::default()
    };
    let r = ais_vm::run(
        &program(FAN_OUT),
        &o,
        Arc::new(FakeBackend::new()),
        Arc::new(MemoryHost::new()),
    );
    assert!(r.outcome.is_ok());
    assert_eq!(*q.0.lock().unwrap(), 0);
}
