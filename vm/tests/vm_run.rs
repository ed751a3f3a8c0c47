//! End-to-end behaviour of the dataflow VM on textual IR programs.
#![allow(clippy::unwrap_used)]

mod ir_support;
use ir_support::program;

use ais_ir::bytecode::{self, Program};
use ais_testkit::fake::FakeBackend;
use ais_testkit::MemoryHost;
use ais_vm::llm::{LlmBackend, LlmError, LlmErrorKind};
use ais_vm::{interp, Policy, RunError, RunOptions};
use serde_json::{json, Value as Json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

fn opts(workers: usize) -> RunOptions {
    RunOptions {
        workers: Some(workers),
        ..RunOptions::default()
    }
}

fn run_with(
    p: &Program,
    o: &RunOptions,
    b: Arc<dyn LlmBackend>,
) -> (Result<Json, RunError>, Arc<MemoryHost>) {
    let host = Arc::new(MemoryHost::new());
    let r = ais_vm::run(p, o, b, host.clone());
    (r.outcome, host)
}

fn interp_result(
    p: &Program,
    args: &[(String, Json)],
    b: &dyn LlmBackend,
) -> Result<Json, RunError> {
    interp::run(p, None, args, b, &MemoryHost::new())
}

/// A fake model whose calls numbered `first..first + n` (in the order they
/// arrive) must all be in flight at once: each waits for the others, so a
/// run that does not overlap them fails with a timeout error instead of
/// passing. The other calls go straight through.
fn rendezvous(first: u64, n: usize) -> Arc<FakeBackend> {
    let gate = Arc::new((Mutex::new(0usize), Condvar::new()));
    let fake = FakeBackend::new()
        .named("rendezvous")
        .with_concurrency(64)
        .blocking()
        .with_script(move |_, k| {
            if k < first || k >= first + n as u64 {
                return None;
            }
            let (arrived, cv) = &*gate;
            let mut g = arrived.lock().unwrap();
            *g += 1;
            cv.notify_all();
            let (g, t) = cv
                .wait_timeout_while(g, Duration::from_secs(20), |k| *k < n)
                .unwrap();
            drop(g);
            t.timed_out().then(|| {
                Err(LlmError::new(
                    "rendezvous",
                    LlmErrorKind::Timeout,
                    "calls did not overlap",
                ))
            })
        });
    Arc::new(fake)
}

const PARALLEL: &str = r#"
agent @Researcher {
  flow @research(%q: str) -> str {
    %0 = template %q {template = "Findings on {0}"} : str
    %1 = ask %0 : str
    return %1
  }
}
agent @Critic {
  flow @critique(%q: str) -> str {
    %0 = template %q {template = "Objections to {0}"} : str
    %1 = ask %0 : str
    return %1
  }
}
agent @Coordinator {
  flow @main(%topic: str) -> str entry {
    %0 = template %topic {template = "Sharpen: {0}"} : str
    %1 = ask %0 : str
    %2 = flow.call %1 {callee = @Researcher.research} : str
    %3 = flow.call %1 {callee = @Critic.critique} : str
    %4 = think %1 : str
    %5 = wait_all %2, %3, %4 : json
    %6 = ask %1, %2, %3, %4 : str
    return %6
  }
}
"#;

#[test]
fn cross_agent_calls_run_in_parallel_and_match_the_interpreter() {
    let p = program(PARALLEL);
    let args = vec![("topic".to_string(), json!("batteries"))];
    let want = interp_result(&p, &args, &FakeBackend::new()).unwrap();
    // The two callee asks and the caller's think must be in flight together.
    // (after the first call, which goes alone).
    let rv = rendezvous(1, 3);
    let o = RunOptions {
        args: args.clone(),
        ..opts(2)
    };
    let host = Arc::new(MemoryHost::new());
    let report = ais_vm::run(&p, &o, rv.clone(), host);
    assert_eq!(report.outcome.unwrap(), want);
    assert_eq!(report.summary.llm_calls, 5);
    assert!(report.summary.peak_parallelism >= 3);
    assert!(want.as_str().unwrap().starts_with("ask#"));
}

const ROUTING: &str = r#"
agent @Router {
  flow @main(%kind: str) -> str entry {
    %0 = switch %kind : str {
      case "short" {
        %1 = ask %kind : str
        yield %1
      }
      case "long" {
        %2 = reason %kind : str
        %3 = think %2 : str
        yield %3
      }
      default {
        %4 = const {value = "none"} : str
        yield %4
      }
    }
    %5 = const {value = true} : bool
    %6 = if %5 : str {
      then {
        %7 = concat %0, %kind : str
        yield %7
      }
      else {
        %8 = ask %0 : str
        yield %8
      }
    }
    return %6
  }
}
"#;

#[test]
fn only_the_taken_branch_runs() {
    let p = program(ROUTING);
    for (kind, calls) in [("short", 1), ("long", 2), ("other", 0)] {
        let fake = Arc::new(FakeBackend::new());
        let o = RunOptions {
            args: vec![("kind".into(), json!(kind))],
            ..opts(2)
        };
        let (r, _) = run_with(&p, &o, fake.clone());
        let want = interp_result(&p, &o.args, &FakeBackend::new()).unwrap();
        assert_eq!(r.unwrap(), want);
        assert_eq!(fake.calls(), calls, "{kind}");
    }
}

const TRY: &str = r#"
agent @A {
  flow @main(%x: str) -> str entry {
    %0, %1 = try_catch : str, json {
      try {
        %2 = ask %x : str
        %3 = concat %2, %x : str
        %4 = const {value = json {"ok":true}} : json
        yield %3, %4
      }
      catch(%5: json) {
        %6 = member %5 {field = "code"} : str
        %7 = template %6 {template = "recovered from {0}"} : str
        yield %7, %5
      }
    }
    %8 = print %0 : ord
    return %0
  }
}
"#;

#[test]
fn try_catch_catches_failures_with_a_structured_error() {
    let p = program(TRY);
    let b = Arc::new(FakeBackend::new().failing_on("BOOM"));
    let o = RunOptions {
        args: vec![("x".into(), json!("a BOOM b"))],
        ..opts(2)
    };
    let host = Arc::new(MemoryHost::new());
    let r = ais_vm::run(&p, &o, b.clone(), host.clone());
    assert_eq!(r.outcome.unwrap(), json!("recovered from llm.server"));
    assert_eq!(host.printed(), ["recovered from llm.server"]);
    assert_eq!(
        interp_result(&p, &o.args, b.as_ref()).unwrap(),
        json!("recovered from llm.server")
    );
    // The error value handed to `catch`.
    let m = ais_ir::parse_module(&TRY.replace(
        "%6 = member %5 {field = \"code\"} : str",
        "%6 = to_str %5 : str",
    ))
    .unwrap();
    let p2 = bytecode::compile(&m).unwrap();
    let v = interp_result(&p2, &o.args, b.as_ref()).unwrap();
    let text = v.as_str().unwrap().trim_start_matches("recovered from ");
    let err: Json = serde_json::from_str(text).unwrap();
    assert_eq!(err["code"], "llm.server");
    assert_eq!(err["op"], "ask");
    assert_eq!(err["flow"], "A.main");
    assert!(err["span"]["start"].is_number());
    assert_eq!(err["payload"]["status"], 500);
    let (vm, _) = run_with(&p2, &o, b);
    assert_eq!(vm.unwrap(), v);
    // Without a failure the try region's values flow out.
    let o = RunOptions {
        args: vec![("x".into(), json!("fine"))],
        ..opts(1)
    };
    let (r, _) = run_with(&p, &o, Arc::new(FakeBackend::new().failing_on("BOOM")));
    assert!(r.unwrap().as_str().unwrap().ends_with("fine"));
}

#[test]
fn an_uncaught_failure_fails_the_run_naming_op_span_and_cause() {
    let src = r#"
agent @A {
  flow @main(%x: str) -> str entry {
    %0 = ask %x : str
    %1 = reason %x : str
    %2 = concat %0, %1 : str
    return %2
  }
}
"#;
    let m = ais_ir::parse_module(src).unwrap();
    let p = bytecode::compile(&m).unwrap();
    // `ask` fails at once; `reason` would take an hour unless cancelled.
    let b = Arc::new(
        FakeBackend::new()
            .failing_on("BOOM")
            .with_kind_latency(ais_vm::llm::LlmOpKind::Reason, Duration::from_secs(3600)),
    );
    let o = RunOptions {
        args: vec![("x".into(), json!("BOOM"))],
        ..opts(2)
    };
    let report = ais_vm::run(&p, &o, b.clone(), Arc::new(MemoryHost::new()));
    match report.outcome {
        Err(RunError::OpFailed {
            flow,
            opcode,
            code,
            span,
            message,
            ..
        }) => {
            assert_eq!(flow, "A.main");
            assert_eq!(opcode, "ask");
            assert_eq!(code, "llm.server");
            assert!(message.contains("injected failure"));
            let at = &src[span.range()];
            assert!(at.contains("ask %x"), "span points at {at:?}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    // Reaching this point means the hour-long `reason` call, if it had
    // started, was cancelled.
    let diag = ais_ir::IntoDiagnostic::into_diagnostic(
        ais_vm::run(
            &p,
            &o,
            Arc::new(FakeBackend::new().failing_on("BOOM")),
            Arc::new(MemoryHost::new()),
        )
        .outcome
        .unwrap_err(),
    );
    assert_eq!(diag.code, "R0003");
}

const LOOPS: &str = r#"
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
    loop %items {max_iters = 3} {
      body(%8: str, %9: number) {
        %10 = think %8 : str
        %11 = print %10 : ord
        yield
      }
    }
    return %1
  }
}
"#;

#[test]
fn loops_chain_carried_values_and_overlap_independent_iterations() {
    let p = program(LOOPS);
    let args = vec![("items".to_string(), json!(["a", "b", "c", "d"]))];
    let want = interp_result(&p, &args, &FakeBackend::new()).unwrap();
    let o = RunOptions {
        args: args.clone(),
        ..opts(2)
    };
    for w in [1, 2, 8] {
        let (r, host) = run_with(
            &p,
            &RunOptions {
                workers: Some(w),
                ..o.clone()
            },
            Arc::new(FakeBackend::new()),
        );
        assert_eq!(r.unwrap(), want);
        assert_eq!(host.printed().len(), 3, "max_iters bounds the second loop");
    }
    // The asks of the first loop do not depend on the carried value, so all
    // four (plus the three thinks) can be in flight together.
    let rv = rendezvous(0, 7);
    let (r, _) = run_with(&p, &o, rv);
    assert_eq!(r.unwrap(), want);
}

#[test]
fn concurrency_limit_bounds_calls_in_flight() {
    let mut ops = String::new();
    let mut names = Vec::new();
    for i in 0..8 {
        ops.push_str(&format!("    %a{i} = ask %x : str\n"));
        names.push(format!("%a{i}"));
    }
    let src = format!(
        "agent @A {{\n  flow @main(%x: str) -> json entry {{\n{ops}    %w = wait_all {} : json\n    return %w\n  }}\n}}\n",
        names.join(", ")
    );
    let p = program(&src);
    for policy in Policy::ALL {
        let b = Arc::new(FakeBackend::new().with_latency(Duration::from_millis(5)));
        let o = RunOptions {
            args: vec![("x".into(), json!("q"))],
            concurrency: Some(2),
            policy,
            ..opts(2)
        };
        let (r, _) = run_with(&p, &o, b.clone());
        assert_eq!(r.unwrap().as_array().unwrap().len(), 8);
        assert_eq!(b.calls(), 8);
        assert!(b.peak_in_flight() <= 2, "{policy}: {}", b.peak_in_flight());
    }
}

#[test]
fn memory_beliefs_tools_and_effect_order() {
    let src = r#"
agent @A {
  belief @mood = json "calm"
  flow @main(%x: str) -> json entry {
    %0 = umem %x {tier = "stm"} : ord
    %1 = const {value = "k"} : str
    %2 = umem %x, %1, %0 {tier = "ltm"} : ord
    %3, %4 = qmem %1, %2 {tier = "ltm"} : json, ord
    %5, %6 = belief.get {name = "mood"} : json, ord
    %7 = belief.set %x, %6 {name = "mood"} : ord
    %8, %9 = belief.get %7 {name = "mood"} : json, ord
    %10 = print %3 : ord
    %11 = print %5, %8, %10 : ord
    %12 = const {value = json {"a":1}} : json
    %13 = inv %12 {tool = "echo"} : json
    %14 = communicate %1, %13, %1, %11 : ord
    %15 = wait_all %3, %5, %8, %13 : json
    return %15
  }
}
"#;
    let p = program(src);
    let o = RunOptions {
        args: vec![("x".into(), json!("hello"))],
        ..opts(2)
    };
    let (r, host) = run_with(&p, &o, Arc::new(FakeBackend::new()));
    assert_eq!(r.unwrap(), json!(["hello", "calm", "hello", {"a": 1}]));
    assert_eq!(host.printed(), ["hello", "calm hello"]);
    assert_eq!(host.outbox().len(), 1);
    assert_eq!(host.entries("A", ais_ir::Tier::Stm).len(), 1);
}

#[test]
fn artifacts_round_trip_and_run() {
    let p = program(PARALLEL);
    let bytes = bytecode::encode(&p).unwrap();
    let back = bytecode::decode(&bytes).unwrap();
    assert_eq!(back, p);
    let o = RunOptions {
        args: vec![("topic".into(), json!("t"))],
        ..opts(2)
    };
    let (a, _) = run_with(&back, &o, Arc::new(FakeBackend::new()));
    let (b, _) = run_with(&p, &o, Arc::new(FakeBackend::new()));
    assert_eq!(a.unwrap(), b.unwrap());
    let dump = bytecode::inspect(&back);
    assert!(
        dump.contains("flow #2 @Coordinator.main(topic: str) -> str entry"),
        "{dump}"
    );
}

#[test]
fn argument_and_entry_errors_are_reported() {
    let p = program(PARALLEL);
    let b: Arc<dyn LlmBackend> = Arc::new(FakeBackend::new());
    let r = ais_vm::run(&p, &opts(1), b.clone(), Arc::new(MemoryHost::new()));
    assert!(
        matches!(r.outcome, Err(RunError::Argument(ref m)) if m.contains("missing argument `topic"))
    );
    let o = RunOptions {
        args: vec![("topic".into(), json!("t")), ("nope".into(), json!(1))],
        ..opts(1)
    };
    let r = ais_vm::run(&p, &o, b.clone(), Arc::new(MemoryHost::new()));
    assert!(
        matches!(r.outcome, Err(RunError::Argument(ref m)) if m.contains("no parameter `nope`"))
    );
    let o = RunOptions {
        entry: Some("Nobody.main".into()),
        ..opts(1)
    };
    let r = ais_vm::run(&p, &o, b.clone(), Arc::new(MemoryHost::new()));
    assert!(matches!(r.outcome, Err(RunError::Entry(_))));
    // A non-entry flow can be run by name.
    let o = RunOptions {
        entry: Some("Critic.critique".into()),
        args: vec![("q".into(), json!("x"))],
        ..opts(1)
    };
    let r = ais_vm::run(&p, &o, b, Arc::new(MemoryHost::new()));
    assert!(r.outcome.unwrap().as_str().unwrap().starts_with("ask#"));
}

#[test]
fn telemetry_events_summary_and_exports() {
    let p = program(PARALLEL);
    let o = RunOptions {
        args: vec![("topic".into(), json!("t"))],
        ..opts(2)
    };
    let report = ais_vm::run(
        &p,
        &o,
        Arc::new(FakeBackend::new()),
        Arc::new(MemoryHost::new()),
    );
    assert!(report.outcome.is_ok());
    let s = &report.summary;
    assert_eq!(s.ops as usize, report.events.len());
    // 8 ops in main + 3 in each callee.
    assert_eq!(s.ops, 14);
    assert_eq!(s.frames, 3);
    assert_eq!(s.llm_calls, 5);
    assert!(s.input_tokens > 0 && s.output_tokens > 0);
    assert!(s.critical_path_estimate_ms >= 3000);
    let mut jsonl = Vec::new();
    ais_vm::telemetry::write_jsonl(&mut jsonl, &p, &report.events, s).unwrap();
    let lines = String::from_utf8(jsonl).unwrap();
    let parsed: Vec<Json> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(parsed.len(), 15);
    assert_eq!(parsed[14]["type"], "summary");
    let asks: Vec<&Json> = parsed.iter().filter(|e| e["opcode"] == "ask").collect();
    assert_eq!(asks.len(), 4);
    assert!(asks
        .iter()
        .all(|e| e["gen_ai.usage.input_tokens"].is_number()
            && e["track"].as_str().unwrap().starts_with("llm:")));
    let mut trace = Vec::new();
    ais_vm::telemetry::write_chrome_trace(&mut trace, &p, &report.events, s).unwrap();
    let trace: Json = serde_json::from_slice(&trace).unwrap();
    let evs = trace["traceEvents"].as_array().unwrap();
    assert_eq!(evs.iter().filter(|e| e["ph"] == "b").count(), 5);
    assert_eq!(evs.iter().filter(|e| e["ph"] == "e").count(), 5);
    assert_eq!(evs.iter().filter(|e| e["ph"] == "X").count(), 9);
    assert!(evs
        .iter()
        .any(|e| e["ph"] == "M" && e["args"]["name"] == "worker 1"));
}

/// Keeps every snapshot and counts `finish` calls.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<ais_vm::progress::Progress>>,
    finished: AtomicUsize,
}

impl ais_vm::progress::ProgressObserver for Recorder {
    fn update(&self, p: &ais_vm::progress::Progress) {
        self.seen.lock().unwrap().push(*p);
    }
    fn finish(&self) {
        self.finished.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn progress_goes_to_the_observer_the_edge_provides() {
    let p = program(PARALLEL);
    let rec = Arc::new(Recorder::default());
    let o = RunOptions {
        args: vec![("topic".into(), json!("t"))],
        progress: Some(ais_vm::progress::ProgressSink(rec.clone())),
        ..opts(2)
    };
    let report = ais_vm::run(
        &p,
        &o,
        Arc::new(FakeBackend::new()),
        Arc::new(MemoryHost::new()),
    );
    assert!(report.outcome.is_ok());
    assert_eq!(rec.finished.load(Ordering::SeqCst), 1);
    let seen = rec.seen.lock().unwrap();
    // At least the first sample, each against the whole program.
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|s| s.ops_total == p.op_count()));
    assert!(seen.windows(2).all(|w| w[0].ops_done <= w[1].ops_done));
}

#[test]
fn structured_ops_get_their_schema_and_json_results() {
    let src = r#"
agent @A {
  flow @main(%g: str) -> json entry {
    %0 = plan %g : json
    %1 = member %0 {field = "steps"} : json
    %2 = verify %g, %1 : json
    %3 = member %2 {field = "verdict"} : bool
    %4 = reflect %g : json
    %5 = wait_all %1, %3, %4 : json
    return %5
  }
}
"#;
    let p = program(src);
    let o = RunOptions {
        args: vec![("g".into(), json!("ship it"))],
        ..opts(2)
    };
    let (r, _) = run_with(&p, &o, Arc::new(FakeBackend::new()));
    let v = r.unwrap();
    assert_eq!(v[0].as_array().unwrap().len(), 3);
    assert!(v[1].is_boolean());
    assert!(v[2]["suggestions"].is_array());
    assert_eq!(v, interp_result(&p, &o.args, &FakeBackend::new()).unwrap());
}

#[test]
fn recursion_is_bounded_by_the_call_depth() {
    let src = r#"
agent @A {
  flow @f(%n: number) -> number {
    %0 = const {value = 0} : number
    %1 = le %n, %0 : bool
    %2 = if %1 : number {
      then {
        yield %n
      }
      else {
        %3 = const {value = 1} : number
        %4 = sub %n, %3 : number
        %5 = flow.call %4 {callee = @A.f} : number
        %6 = add %5, %3 : number
        yield %6
      }
    }
    return %2
  }
}
"#;
    let p = program(src);
    let run = |n: u64, depth: u32| {
        let o = RunOptions {
            entry: Some("A.f".into()),
            args: vec![("n".into(), json!(n))],
            max_call_depth: depth,
            ..opts(2)
        };
        run_with(&p, &o, Arc::new(FakeBackend::new())).0
    };
    assert_eq!(run(200, 512).unwrap(), json!(200));
    match run(200, 50) {
        Err(RunError::OpFailed { code, .. }) => assert_eq!(code, "call.depth"),
        other => panic!("{other:?}"),
    }
}
