//! Inner plans (`solve`, `scheduler::inner_plan`): the model's plan is
//! checked by the front end before anything of it runs, repaired from its
//! diagnostics, linked and run with the program's parallelism, and replayed
//! on resume. Counts of planner calls and of calls reaching each tool are
//! the assertions.
#![allow(clippy::unwrap_used)]

mod ir_support;
mod planner_support;
mod tools_support;
use ais_testkit::fake::FakeBackend;
use ir_support::program;
use planner_support::{
    answer, failing_planner, planner_model, planning_requests, prompts_of, rounds_of, text,
};

use ais_ir::bytecode::{self, Program};
use ais_testkit::{FrontEndPlanner, MemoryHost};
use ais_vm::journal::Journal;
use ais_vm::llm::{LlmBackend, LlmOpKind};
use ais_vm::{RunError, RunOptions};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

const TOOLS: &str = r#"[{"name":"lookup","description":"Look up a fact by key","parameters":{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}},{"name":"add","description":"Add two numbers","parameters":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}}]"#;

/// `solve` over `lookup` and `add`, its failure caught as its code.
fn solve_program(caught: bool) -> Program {
    let solve = format!(r#"solve %q {{tools = json {TOOLS}}} : str"#);
    let src = if caught {
        format!(
            r#"agent @A {{
  flow @main(%q: str) -> str entry {{
    %0 = try_catch : str {{
      try {{
        %1 = {solve}
        yield %1
      }}
      catch(%2: json) {{
        %3 = member %2 {{field = "code"}} : json
        %4 = to_str %3 : str
        yield %4
      }}
    }}
    return %0
  }}
}}"#
        )
    } else {
        format!(
            r#"agent @A {{
  flow @main(%q: str) -> str entry {{
    %0 = {solve}
    return %0
  }}
}}"#
        )
    };
    program(&src)
}

fn host() -> (Arc<MemoryHost>, Arc<AtomicUsize>) {
    tools_support::lookup_add_host()
}

fn options(journal: Option<Arc<Journal>>) -> RunOptions {
    RunOptions {
        args: vec![("q".into(), json!("What is the capital, and 2 + 3?"))],
        workers: Some(2),
        journal,
        planner: Some(Arc::new(FrontEndPlanner::default())),
        ..RunOptions::default()
    }
}

const GOOD: &str = "Here is the plan:\n```ais\nlet city = lookup(\"capital\")\nlet sum = add(2, 3)\nlet answer = ask(\"Combine\", city, sum)\nreturn answer\n```";

#[test]
fn a_valid_plan_runs_its_tools_and_returns_its_answer() {
    let planner = planner_model(&[GOOD]);
    let (host, n) = host();
    let r = ais_vm::run(&solve_program(true), &options(None), planner.clone(), host);
    assert_eq!(r.outcome.unwrap(), json!("answer: Combine | Paris, 5"));
    assert_eq!(rounds_of(&planner), 1);
    assert_eq!(n.load(Ordering::SeqCst), 2);
    // The planner was told the tools' signatures.
    let prompt = prompts_of(&planner)[0].clone();
    assert!(prompt.contains("lookup(key: str) -> json"), "{prompt}");
    assert!(prompt.contains("Goal: What is the capital"), "{prompt}");
    // The plan is in the report, and its ops in telemetry under its flow.
    assert_eq!(r.plans.len(), 1);
    assert!(r.plans[0]
        .source
        .contains("capability add(a: number, b: number) -> json;"));
    assert!(r.plans[0].ir.contains("tool = \"lookup\""));
    let plan_flow = r.plans[0].flow_id;
    let in_plan: Vec<_> = r.events.iter().filter(|e| e.flow == plan_flow).collect();
    assert!(in_plan.iter().any(|e| e.opcode == ais_ir::Opcode::Inv));
    assert!(in_plan.iter().any(|e| e.opcode == ais_ir::Opcode::Ask));
    assert_eq!(r.summary.linked_flows.len(), 1);
}

#[test]
fn a_type_error_is_repaired_from_its_diagnostics() {
    let broken = "let city = lookup(\"capital\")\nlet sum = add(2, 3) - city_name\nreturn sum";
    let planner = planner_model(&[broken, GOOD]);
    let (host, n) = host();
    let r = ais_vm::run(&solve_program(true), &options(None), planner.clone(), host);
    assert_eq!(r.outcome.unwrap(), json!("answer: Combine | Paris, 5"));
    assert_eq!(rounds_of(&planner), 2);
    // The rejected plan made no call; the repaired one made two.
    assert_eq!(n.load(Ordering::SeqCst), 2);
    let second = prompts_of(&planner)[1].clone();
    assert!(second.contains("city_name"), "{second}");
    assert!(second.contains("line 2"), "{second}");
}

#[test]
fn a_tool_that_was_not_offered_never_runs() {
    let sneaky = "let x = inv(\"send_email\", \"{}\")\nreturn \"sent\"";
    let planner = planner_model(&[sneaky]);
    let (host, n) = host();
    let sent = Arc::new(AtomicUsize::new(0));
    let s = sent.clone();
    host.register_tool("send_email", move |_| {
        s.fetch_add(1, Ordering::SeqCst);
        Ok(json!("sent"))
    });
    let r = ais_vm::run(&solve_program(true), &options(None), planner.clone(), host);
    assert_eq!(r.outcome.unwrap(), json!("plan.invalid"));
    // The default: two repair rounds, three plans, all refused.
    assert_eq!(rounds_of(&planner), 3);
    assert_eq!(sent.load(Ordering::SeqCst), 0);
    assert_eq!(n.load(Ordering::SeqCst), 0);
}

#[test]
fn garbage_fails_with_the_diagnostics_and_makes_no_call() {
    let planner = planner_model(&["I would search for the capital and then add the numbers."]);
    let (host, n) = host();
    let r = ais_vm::run(&solve_program(false), &options(None), planner.clone(), host);
    match r.outcome {
        Err(RunError::OpFailed { code, payload, .. }) => {
            assert_eq!(code, "plan.invalid");
            assert_eq!(payload["rounds"], 3);
            let ds = payload["diagnostics"].as_array().unwrap();
            assert!(!ds.is_empty());
            assert!(ds.iter().all(|d| d.as_str().unwrap().contains("error[")));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(n.load(Ordering::SeqCst), 0);
}

#[test]
fn without_a_plan_compiler_solve_fails_clearly() {
    let planner = planner_model(&[GOOD]);
    let (host, n) = host();
    let o = RunOptions {
        planner: None,
        ..options(None)
    };
    let r = ais_vm::run(&solve_program(true), &o, planner.clone(), host);
    assert_eq!(r.outcome.unwrap(), json!("plan.unavailable"));
    assert_eq!(rounds_of(&planner), 0);
    assert_eq!(n.load(Ordering::SeqCst), 0);
}

#[test]
fn independent_steps_of_a_plan_run_in_parallel() {
    // Both calls wait for each other: run one after the other, the first
    // would time out and say so.
    let plan = "let a = meet(\"x\")\nlet b = meet(\"y\")\nreturn \"{a} {b}\"";
    let planner = planner_model(&[plan]);
    let host = Arc::new(MemoryHost::new());
    let state = Arc::new((Mutex::new(0usize), Condvar::new()));
    host.register_tool("meet", move |_| {
        let (m, cv) = &*state;
        let mut g = m.lock().unwrap();
        *g += 1;
        cv.notify_all();
        let (_g, t) = cv
            .wait_timeout_while(g, Duration::from_secs(20), |n| *n < 2)
            .unwrap();
        Ok(json!(if t.timed_out() { "alone" } else { "met" }))
    });
    let p = program(
        r#"agent @A {
  flow @main(%q: str) -> str entry {
    %0 = solve %q {tools = json [{"name":"meet","read_only":true,"parameters":{"type":"object","properties":{"who":{"type":"string"}},"required":["who"]}}]} : str
    return %0
  }
}"#,
    );
    let r = ais_vm::run(&p, &options(None), planner, host);
    assert_eq!(r.outcome.unwrap(), json!("met met"));
}

#[test]
fn a_resumed_run_reads_the_same_plan_and_repeats_no_call() {
    let p = solve_program(false);
    let dir = tempfile::tempdir().unwrap();
    let bytes = bytecode::encode(&p).unwrap();
    let args = vec![("q".to_string(), json!("What is the capital, and 2 + 3?"))];
    let j = Arc::new(Journal::begin(Some(dir.path()), "r", "test", &bytes, None, &args).unwrap());
    // Attempt 1: the plan checks, both tools run, its `ask` fails.
    let first = failing_planner(&[GOOD]);
    let (host1, n1) = host();
    let r1 = ais_vm::run(&p, &options(Some(j)), first.clone(), host1);
    assert!(
        matches!(&r1.outcome, Err(RunError::OpFailed { code, .. }) if code == "llm.auth"),
        "{:?}",
        r1.outcome
    );
    assert_eq!(n1.load(Ordering::SeqCst), 2);
    // Attempt 2: the planner is not asked again and no tool runs again.
    let j2 = Arc::new(Journal::resume(dir.path(), "r").unwrap());
    let second = planner_model(&["return \"a different plan\""]);
    let (host2, n2) = host();
    let r2 = ais_vm::run(&p, &options(Some(j2)), second.clone(), host2);
    assert_eq!(r2.outcome.unwrap(), json!("answer: Combine | Paris, 5"));
    assert_eq!(rounds_of(&second), 0);
    assert_eq!(n2.load(Ordering::SeqCst), 0);
}

#[test]
fn the_simulator_writes_a_plan_that_checks_and_calls_every_tool() {
    let sim: Arc<dyn LlmBackend> =
        Arc::new(ais_vm::llm::sim::SimBackend::new().with_delay_scale(0.0));
    let (host, n) = host();
    // The simulated plan looks the goal itself up: know it.
    let c = n.clone();
    host.register_tool("lookup", move |args| {
        c.fetch_add(1, Ordering::SeqCst);
        Ok(json!(format!("fact about {}", args["key"])))
    });
    let r = ais_vm::run(&solve_program(false), &options(None), sim, host);
    let out = r.outcome.unwrap();
    let out = out.as_str().unwrap();
    assert!(out.starts_with("[simulated ask"), "{out}");
    assert!(out.contains("[simulated plan]"), "{out}");
    assert_eq!(r.plans.len(), 1);
    assert!(r.plans[0].body.contains("lookup("), "{}", r.plans[0].body);
    assert!(r.plans[0].body.contains("add(1, 1)"), "{}", r.plans[0].body);
    assert_eq!(n.load(Ordering::SeqCst), 2);
}

/// A random valid plan over `lookup` and `add`: tool calls, LLM calls on
/// earlier values, string templates, a branch; returns its last value.
fn random_plan(c: &mut ais_testkit::choices::Choices) -> String {
    let n = 1 + c.below(6);
    let mut lines = Vec::new();
    for i in 0..n {
        let earlier = |c: &mut ais_testkit::choices::Choices| format!("v{}", c.below(i.max(1)));
        let line = match (c.below(5), i) {
            (0, _) => format!("let v{i} = lookup(\"capital\")"),
            (1, _) => format!("let v{i} = add({}, {})", c.below(10), c.below(10)),
            (2, 1..) => format!("let v{i} = ask(\"step {i}\", {})", earlier(c)),
            (3, 1..) => {
                let (a, b) = (earlier(c), earlier(c));
                format!("let v{i} = \"{{{a}}} and {{{b}}}\"")
            }
            (4, 1..) => {
                let a = earlier(c);
                format!(
                    "let v{i} = \"none\"\nif (\"{{{a}}}\" == \"Paris\") {{\n    v{i} = ask(\"city\", {a})\n}} else {{\n    v{i} = \"other {{{a}}}\"\n}}"
                )
            }
            _ => format!("let v{i} = \"start {i}\""),
        };
        lines.push(line);
    }
    lines.push(format!("return \"{{v{}}}\"", n - 1));
    lines.join("\n")
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Random plans give the same result linked into the VM (2 workers)
    /// as interpreted by the reference interpreter.
    #[test]
    fn linked_plans_agree_with_the_interpreter(mut tape in ais_testkit::choices::tape()) {
        let plan = random_plan(&mut tape);
        let p = solve_program(false);
        let planner = planner_model(&[&plan]);
        let (h, _) = host();
        let vm = ais_vm::run(&p, &options(None), planner, h).outcome;
        let planner = planner_model(&[&plan]);
        let (h, _) = host();
        let fe = FrontEndPlanner::default();
        let it = ais_vm::interp::run_with_planner(
            &p,
            None,
            &options(None).args,
            planner.as_ref(),
            h.as_ref(),
            Some(&fe),
        );
        // Every generated plan is valid: both must have run it.
        proptest::prop_assert!(vm.is_ok(), "{:?}\nplan:\n{}", vm, plan);
        proptest::prop_assert_eq!(vm.ok(), it.ok(), "plan:\n{}", plan);
    }
}

use tools_support::aam_host;

#[test]
fn a_plan_whose_side_effect_is_denied_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let plan = "let page = read_file(\"in.txt\")\nlet w = write_file(\"out.txt\", \"copied: {page}\")\nreturn \"wrote {w}\"";
    let planner = planner_model(&[plan]);
    std::fs::write(d.path().join("in.txt"), "hello").unwrap();
    let p = program(
        r#"agent @A {
  flow @main(%q: str) -> str entry {
    %0 = try_catch : str {
      try {
        %1 = solve %q {tools = json [{"name":"read_file","read_only":true,"parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}},{"name":"write_file","parameters":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}}]} : str
        yield %1
      }
      catch(%2: json) {
        %3 = member %2 {field = "code"} : json
        %4 = to_str %3 : str
        yield %4
      }
    }
    return %0
  }
}"#,
    );
    let r = ais_vm::run(&p, &options(None), planner.clone(), aam_host(d.path()));
    // The plan checked (its tools were listed) and ran; the host refused
    // the write: the op fails with the denial, and nothing was written.
    assert_eq!(r.outcome.unwrap(), json!("tool.denied"));
    assert_eq!(rounds_of(&planner), 1);
    assert!(!d.path().join("out.txt").exists());
}

#[test]
fn an_uncaught_failure_inside_a_plan_is_reported_at_the_solve_op() {
    let planner = planner_model(&["let m = lookup(\"moon\")\nreturn \"{m}\""]);
    let (host, n) = host();
    let p = solve_program(false);
    let r = ais_vm::run(&p, &options(None), planner, host);
    match r.outcome {
        Err(RunError::OpFailed {
            opcode,
            code,
            message,
            span,
            flow,
            ..
        }) => {
            assert_eq!(code, "lookup.missing");
            // Where the program can show it: the `solve` op of `A.main`.
            assert_eq!(opcode, "solve");
            assert_eq!(flow, "A.main");
            let solve = &p.flows[0].regions[0].ops[0];
            assert_eq!(span, solve.span);
            assert!(
                message.starts_with("in the inner plan (A.plan op"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

/// A planner that streams its plan through the request's text sink: the
/// first part, then (when `wait_for_call`) it waits until a tool has been
/// called before writing the rest; `calls` gets `planner done` when it
/// returns. Other ops get [`answer`].
fn streaming_planner(
    first: &str,
    rest: &str,
    wait_for_call: bool,
    calls: Arc<(Mutex<Vec<String>>, Condvar)>,
) -> Arc<FakeBackend> {
    let (first, rest) = (first.to_string(), rest.to_string());
    Arc::new(
        FakeBackend::new()
            .named("streaming-planner")
            .blocking()
            .with_script(move |r, _| {
                if r.kind != LlmOpKind::Solve {
                    return Some(Ok(answer(r)));
                }
                let send = |t: &str| {
                    if let Some(sink) = &r.on_text {
                        sink.send(&ais_vm::llm::TextEvent::Delta {
                            attempt: 1,
                            text: t.into(),
                        });
                    }
                };
                send(&first);
                if wait_for_call {
                    // A guard against a hang, not a bound that is asserted on.
                    let (m, cv) = &*calls;
                    let g = m.lock().unwrap();
                    let _g = cv
                        .wait_timeout_while(g, Duration::from_secs(60), |log| log.is_empty())
                        .unwrap();
                }
                send(&rest);
                calls.0.lock().unwrap().push("planner done".into());
                Some(Ok(text(&format!("{first}{rest}"))))
            }),
    )
}

fn streaming_run(read_only: bool, first: &str, rest: &str) -> (ais_vm::RunReport, Vec<String>) {
    let calls: Arc<(Mutex<Vec<String>>, Condvar)> = Arc::default();
    let host = Arc::new(MemoryHost::new());
    let log = calls.clone();
    host.register_tool("lookup", move |args| {
        let key = args["key"].as_str().unwrap_or("?").to_string();
        let (m, cv) = &*log;
        m.lock().unwrap().push(format!("lookup {key}"));
        cv.notify_all();
        Ok(json!(format!("fact about {key}")))
    });
    let planner = streaming_planner(first, rest, read_only, calls.clone());
    let p = program(&format!(
        r#"agent @A {{
  flow @main(%q: str) -> str entry {{
    %0 = solve %q {{tools = json [{{"name":"lookup","read_only":{read_only},"parameters":{{"type":"object","properties":{{"key":{{"type":"string"}}}},"required":["key"]}}}}]}} : str
    return %0
  }}
}}"#
    ));
    let r = ais_vm::run(&p, &options(None), planner, host);
    let log = calls.0.lock().unwrap().clone();
    (r, log)
}

#[test]
fn a_streaming_plan_starts_read_only_calls_before_the_planner_has_finished() {
    let (r, log) = streaming_run(
        true,
        "```ais\nlet a = lookup(\"one\")\nlet k = \"tw",
        "o\"\nlet b = lookup(k)\nreturn ask(\"Combine\", a, b)\n```",
    );
    assert_eq!(
        r.outcome.unwrap(),
        json!("answer: Combine | fact about one, fact about two")
    );
    // `lookup one` ran while the planner was still writing; the plan's own
    // op took its result (two calls in all, not three).
    assert_eq!(log[0], "lookup one", "{log:?}");
    assert_eq!(
        log.iter().filter(|l| l.starts_with("lookup")).count(),
        2,
        "{log:?}"
    );
    assert!(log.contains(&"lookup two".to_string()), "{log:?}");
    // The solve op's telemetry lists the early call.
    let solve = r
        .events
        .iter()
        .find(|e| e.opcode == ais_ir::Opcode::Solve)
        .unwrap();
    let early = &solve.llm.as_ref().unwrap().tool_calls;
    assert_eq!(early.len(), 1, "{early:?}");
    assert_eq!(early[0].tool, "lookup");
    assert_eq!(early[0].status, "ok");
}

#[test]
fn a_side_effecting_call_never_starts_before_the_whole_plan_checks() {
    let (r, log) = streaming_run(
        false,
        "```ais\nlet a = lookup(\"one\")\n",
        "return ask(\"Combine\", a)\n```",
    );
    assert_eq!(
        r.outcome.unwrap(),
        json!("answer: Combine | fact about one")
    );
    assert_eq!(log, vec!["planner done".to_string(), "lookup one".into()]);
}

#[test]
fn repair_rounds_never_send_the_same_request() {
    // Issue 34: at temperature 0 rounds 2 and 3 were byte-identical, and
    // so were the plans they got back.
    let same = "let x = search(\"q\")\nreturn x";
    let rec = planner_model(&[same]);
    let (host, n) = host();
    let r = ais_vm::run(&solve_program(true), &options(None), rec.clone(), host);
    assert_eq!(r.outcome.unwrap(), json!("plan.invalid"));
    assert_eq!(n.load(Ordering::SeqCst), 0);
    // The planner's requests, temperature beside each prompt.
    let asked: Vec<(String, Option<f64>)> = planning_requests(&rec)
        .into_iter()
        .map(|r| (r.prompt, r.temperature))
        .collect();
    assert_eq!(asked.len(), 3);
    for i in 0..asked.len() {
        for j in i + 1..asked.len() {
            assert_ne!(asked[i], asked[j], "rounds {} and {}", i + 1, j + 1);
        }
    }
    // A repair carries the rejected plan and every problem so far, each
    // round at a higher temperature.
    let third = &asked[2].0;
    assert!(third.contains(same), "{third}");
    assert!(
        third.contains("- attempt 1:") && third.contains("- attempt 2:"),
        "{third}"
    );
    let temps: Vec<f64> = asked.iter().map(|a| a.1.unwrap_or(0.0)).collect();
    assert!(temps[0] < temps[1] && temps[1] < temps[2], "{temps:?}");
}
