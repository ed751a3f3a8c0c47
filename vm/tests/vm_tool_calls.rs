//! Model-driven tool calls (`scheduler::tool_loop`): an LLM op that offers
//! tools runs the model's calls through the host, in parallel per turn,
//! tells the model about mistakes, stops at its step bound and at the
//! watchdog, and replays completed turns and calls on resume.
#![allow(clippy::unwrap_used)]

mod ir_support;
mod tools_support;
use ir_support::program;

use ais_ir::bytecode::{self, Program};
use ais_testkit::fake::FakeBackend;
use ais_testkit::MemoryHost;
use ais_vm::journal::Journal;
use ais_vm::llm::{
    LlmBackend, LlmError, LlmErrorKind, LlmRequest, LlmResponse, ToolCall, Turn, Usage,
};
use ais_vm::{RunError, RunOptions};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// `ask` offered `lookup(key)` and `add(a, b)`, at most `max_steps` turns,
/// inside a `try` whose catch returns the failure's code.
fn tool_program(max_steps: u32) -> Program {
    program(&format!(
        r#"agent @A {{
  flow @main(%q: str) -> str entry {{
    %0 = try_catch : str {{
      try {{
        %1 = ask %q {{tools = json [{{"name":"lookup","description":"Look up a fact by key","parameters":{{"type":"object","properties":{{"key":{{"type":"string"}}}},"required":["key"]}}}},{{"name":"add","description":"Add two numbers","parameters":{{"type":"object","properties":{{"a":{{"type":"number"}},"b":{{"type":"number"}}}},"required":["a","b"]}}}}], max_steps = {max_steps}}} : str
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
    ))
}

/// The same `ask` without the `try`: a failure fails the run.
fn uncaught_tool_program() -> Program {
    program(
        r#"agent @A {
  flow @main(%q: str) -> str entry {
    %0 = ask %q {tools = json [{"name":"lookup","parameters":{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}},{"name":"add","parameters":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}}]} : str
    return %0
  }
}"#,
    )
}

/// A model scripted per turn: turn `n` (the number of assistant turns in
/// the request plus one) gets `script(n, request)`.
/// A model that answers with `f(turn, request)`, `turn` counting from 1
/// (one more than the assistant turns the request already holds): the
/// scriptable fake backend, called as a remote provider is (blocking).
/// Its `answered()` requests are the ones `f` answered.
fn scripted(
    f: impl Fn(usize, &LlmRequest) -> Result<LlmResponse, LlmError> + Send + Sync + 'static,
) -> Arc<FakeBackend> {
    Arc::new(
        FakeBackend::new()
            .named("scripted")
            .blocking()
            .with_script(move |r, _| {
                let turn = 1 + r
                    .turns
                    .iter()
                    .filter(|t| matches!(t, Turn::Assistant { .. }))
                    .count();
                Some(f(turn, r))
            }),
    )
}

fn reply(text: &str, calls: Vec<ToolCall>) -> LlmResponse {
    LlmResponse {
        text: text.into(),
        json: None,
        usage: Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
            ..Default::default()
        },
        finish_reason: if calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
        .into(),
        model: "scripted-1".into(),
        latency: Duration::ZERO,
        simulated: false,
        tool_calls: calls,
    }
}

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
    }
}

/// The tool results the model was sent in its last request, by call id.
fn results(r: &LlmRequest) -> Vec<(String, String, bool)> {
    r.turns
        .iter()
        .filter_map(|t| match t {
            Turn::ToolResult {
                call_id,
                content,
                is_error,
                ..
            } => Some((call_id.clone(), content.clone(), *is_error)),
            Turn::Assistant { .. } => None,
        })
        .collect()
}

fn host() -> (Arc<MemoryHost>, Arc<AtomicUsize>) {
    tools_support::lookup_add_host()
}

fn run(
    p: &Program,
    b: Arc<dyn LlmBackend>,
    host: Arc<MemoryHost>,
    journal: Option<Arc<Journal>>,
) -> ais_vm::RunReport {
    let o = RunOptions {
        args: vec![("q".into(), json!("What is the capital, and 2 + 3?"))],
        workers: Some(2),
        watchdog: Some(3),
        journal,
        ..RunOptions::default()
    };
    ais_vm::run(p, &o, b, host)
}

#[test]
fn the_models_calls_run_and_their_results_come_back_in_order() {
    let model = scripted(|turn, r| match turn {
        1 => Ok(reply(
            "checking",
            vec![
                call("c1", "lookup", r#"{"key": "capital"}"#),
                call("c2", "add", r#"{"a": 2, "b": 3}"#),
            ],
        )),
        _ => {
            let rs = results(r);
            Ok(reply(&format!("{} and {}", rs[0].1, rs[1].1), vec![]))
        }
    });
    let (host, n) = host();
    let r = run(&tool_program(8), model.clone(), host, None);
    assert_eq!(r.outcome.unwrap(), json!("Paris and 5"));
    assert_eq!(n.load(Ordering::SeqCst), 2);
    let reqs = model.answered();
    assert_eq!(reqs.len(), 2);
    // Both turns offered both tools; the second carries the exchange.
    assert!(reqs.iter().all(|q| q.tools.len() == 2));
    assert_eq!(reqs[0].tools[0].name, "lookup");
    assert!(reqs[0].turns.is_empty());
    match &reqs[1].turns[0] {
        Turn::Assistant { text, calls } => {
            assert_eq!(text, "checking");
            assert_eq!(calls.len(), 2);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        results(&reqs[1]),
        vec![
            ("c1".into(), "Paris".into(), false),
            ("c2".into(), "5".into(), false)
        ]
    );
    // Telemetry: one LLM op with two turns' attempts and two tool calls;
    // the summary counts the model's tool calls and every turn's tokens.
    let ev: Vec<_> = r.events.iter().filter(|e| e.llm.is_some()).collect();
    assert_eq!(ev.len(), 1);
    let info = ev[0].llm.as_ref().unwrap();
    assert_eq!(info.attempts.len(), 2);
    assert_eq!(info.attempts[1].turn, Some(2));
    assert_eq!(info.tool_calls.len(), 2);
    assert!(info
        .tool_calls
        .iter()
        .all(|c| c.status == "ok" && c.turn == 1));
    assert_eq!(r.summary.tool_calls, 2);
    assert_eq!(r.summary.llm_calls, 1);
    assert_eq!(r.summary.input_tokens, 20);
}

#[test]
fn calls_of_one_turn_run_in_parallel() {
    // Each call waits until both are running: run one after the other,
    // the first would time out and report it.
    let model = scripted(|turn, r| match turn {
        1 => Ok(reply(
            "",
            vec![
                call("a", "meet", "{}"),
                call("b", "meet", "{}"),
                call("c", "meet", "{}"),
            ],
        )),
        _ => Ok(reply(
            &results(r)
                .iter()
                .map(|x| x.1.clone())
                .collect::<Vec<_>>()
                .join(","),
            vec![],
        )),
    });
    let p = program(
        r#"agent @A {
  flow @main(%q: str) -> str entry {
    %0 = ask %q {tools = json [{"name":"meet","parameters":{"type":"object"}}]} : str
    return %0
  }
}"#,
    );
    let host = Arc::new(MemoryHost::new());
    let state = Arc::new((Mutex::new(0usize), Condvar::new()));
    host.register_tool("meet", move |_| {
        let (m, cv) = &*state;
        let mut g = m.lock().unwrap();
        *g += 1;
        cv.notify_all();
        let (g, t) = cv
            .wait_timeout_while(g, Duration::from_secs(20), |n| *n < 3)
            .unwrap();
        Ok(json!(if t.timed_out() {
            format!("alone:{}", *g)
        } else {
            "met".into()
        }))
    });
    let r = run(&p, model, host, None);
    assert_eq!(r.outcome.unwrap(), json!("met,met,met"));
}

#[test]
fn mistakes_are_told_to_the_model_and_the_tool_does_not_run() {
    let model = scripted(|turn, r| match turn {
        1 => Ok(reply(
            "",
            vec![
                call("u", "delete_everything", "{}"),
                call("j", "lookup", r#"{"key": "#),
                call("s", "add", r#"{"a": "two", "b": 3}"#),
                call("o", "lookup", r#"["capital"]"#),
                call("f", "lookup", r#"{"key": "moon"}"#),
            ],
        )),
        _ => {
            let rs = results(r);
            Ok(reply(&serde_json::to_string(&rs).unwrap(), vec![]))
        }
    });
    let (host, n) = host();
    let r = run(&tool_program(8), model, host, None);
    let rs: Vec<(String, String, bool)> =
        serde_json::from_str(r.outcome.unwrap().as_str().unwrap()).unwrap();
    assert!(rs.iter().all(|x| x.2), "{rs:?}");
    assert!(rs[0].1.contains("tool.not_offered") && rs[0].1.contains("lookup, add"));
    assert!(rs[1].1.contains("not valid JSON"));
    assert!(rs[2].1.contains("schema"));
    assert!(rs[3].1.contains("JSON object"));
    // The one well-formed call ran and its failure was reported.
    assert!(rs[4].1.contains("lookup.missing"));
    assert_eq!(n.load(Ordering::SeqCst), 1);
    let info = r.events.iter().find_map(|e| e.llm.as_ref()).unwrap();
    let statuses: Vec<_> = info.tool_calls.iter().map(|c| c.status).collect();
    assert_eq!(
        statuses,
        ["refused", "refused", "refused", "refused", "error"]
    );
}

#[test]
fn the_step_bound_fails_the_op_catchably() {
    // A model that never stops calling (different arguments each time, so
    // the watchdog does not fire first).
    let model = scripted(|turn, _| {
        Ok(reply(
            "",
            vec![call("x", "add", &format!(r#"{{"a": {turn}, "b": 1}}"#))],
        ))
    });
    let (host, n) = host();
    let r = run(&tool_program(3), model.clone(), host, None);
    assert_eq!(r.outcome.unwrap(), json!("llm.max_steps"));
    // Three turns; the calls of the first two ran, the third's did not.
    assert_eq!(model.answered().len(), 3);
    assert_eq!(n.load(Ordering::SeqCst), 2);
}

#[test]
fn the_watchdog_stops_a_model_repeating_the_same_call() {
    let model = scripted(|_, _| {
        Ok(reply(
            "",
            vec![call("x", "lookup", r#"{"key": "capital"}"#)],
        ))
    });
    let (host, n) = host();
    let r = run(&tool_program(8), model, host, None);
    match r.outcome {
        Err(RunError::OpFailed { code, payload, .. }) => {
            assert_eq!(code, "WATCHDOG_LOOP");
            assert_eq!(payload["tool"], "lookup");
        }
        other => panic!("{other:?}"),
    }
    // The third identical call did not run.
    assert_eq!(n.load(Ordering::SeqCst), 2);
}

#[test]
fn a_provider_failure_mid_exchange_is_the_ops_failure() {
    let model = scripted(|turn, _| match turn {
        1 => Ok(reply("", vec![call("x", "add", r#"{"a": 1, "b": 1}"#)])),
        _ => Err(LlmError::new("scripted", LlmErrorKind::Server, "down")),
    });
    let (host, _) = host();
    let r = run(&tool_program(8), model, host, None);
    assert_eq!(r.outcome.unwrap(), json!("llm.server"));
}

#[test]
fn a_resumed_run_replays_completed_turns_and_calls() {
    let p = uncaught_tool_program();
    let dir = tempfile::tempdir().unwrap();
    let bytes = bytecode::encode(&p).unwrap();
    let args = vec![("q".to_string(), json!("What is the capital, and 2 + 3?"))];
    let j = Arc::new(Journal::begin(Some(dir.path()), "r", "test", &bytes, None, &args).unwrap());
    let script = |fail_at: usize| {
        scripted(move |turn, r| {
            if turn == fail_at {
                return Err(LlmError::new("scripted", LlmErrorKind::Auth, "key revoked"));
            }
            match turn {
                1 => Ok(reply(
                    "",
                    vec![call("c1", "lookup", r#"{"key": "capital"}"#)],
                )),
                2 => Ok(reply("", vec![call("c2", "add", r#"{"a": 2, "b": 3}"#)])),
                _ => {
                    let rs = results(r);
                    Ok(reply(&format!("{} {}", rs[0].1, rs[1].1), vec![]))
                }
            }
        })
    };
    // Attempt 1 fails at the third turn, after both tools ran (`Auth` is
    // not retried), and so does the run.
    let first = script(3);
    let (host1, n1) = host();
    let r1 = run(&p, first.clone(), host1, Some(j));
    assert!(
        matches!(&r1.outcome, Err(RunError::OpFailed { code, .. }) if code == "llm.auth"),
        "{:?}",
        r1.outcome
    );
    assert_eq!(n1.load(Ordering::SeqCst), 2);
    assert_eq!(first.answered().len(), 2);
    let j2 = Arc::new(Journal::resume(dir.path(), "r").unwrap());
    let second = script(0);
    let (host2, n2) = host();
    let r2 = run(&p, second.clone(), host2, Some(j2));
    assert_eq!(r2.outcome.unwrap(), json!("Paris 5"));
    // Turns 1 and 2 and both tool calls were replayed: only turn 3 was asked.
    assert_eq!(n2.load(Ordering::SeqCst), 0);
    let asked = second.answered();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].turns.len(), 4);
}

#[test]
fn the_simulator_calls_each_offered_tool_and_answers_with_the_results() {
    let (host, n) = host();
    let sim: Arc<dyn LlmBackend> =
        Arc::new(ais_vm::llm::sim::SimBackend::new().with_delay_scale(0.0));
    let r = run(&tool_program(8), sim, host, None);
    let text = r.outcome.unwrap();
    let text = text.as_str().unwrap();
    assert!(text.starts_with("[simulated ask"), "{text}");
    assert!(text.contains("simulated tool results: lookup"), "{text}");
    assert!(text.contains("add → "), "{text}");
    assert_eq!(n.load(Ordering::SeqCst), 2);
}

#[test]
fn a_denied_side_effect_is_refused_and_the_model_is_told() {
    let d = tempfile::tempdir().unwrap();
    let host = tools_support::aam_host(d.path());
    let p = program(
        r#"agent @A {
  flow @main(%q: str) -> str entry {
    %0 = ask %q {tools = json [{"name":"write_file","parameters":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}}]} : str
    return %0
  }
}"#,
    );
    let model = scripted(|turn, r| match turn {
        1 => Ok(reply(
            "",
            vec![call(
                "w",
                "write_file",
                r#"{"path": "exfil.txt", "content": "secret"}"#,
            )],
        )),
        _ => Ok(reply(&results(r)[0].1, vec![])),
    });
    let o = RunOptions {
        args: vec![("q".into(), json!("save it"))],
        ..RunOptions::default()
    };
    let r = ais_vm::run(&p, &o, model, host);
    let told = r.outcome.unwrap();
    assert!(told.as_str().unwrap().contains("tool.denied"), "{told}");
    assert!(!d.path().join("exfil.txt").exists());
    let info = r.events.iter().find_map(|e| e.llm.as_ref()).unwrap();
    assert_eq!(info.tool_calls[0].status, "refused");
    assert_eq!(info.tool_calls[0].code.as_deref(), Some("tool.denied"));
}

#[test]
fn a_slow_model_turn_is_not_taken_for_a_stall() {
    // Workers all park while the only op is in its exchange on the agent
    // lane: the run must wait for it, not report a stall.
    let model = scripted(|turn, r| {
        std::thread::sleep(Duration::from_millis(300));
        match turn {
            1 => Ok(reply("", vec![call("c", "add", r#"{"a": 1, "b": 2}"#)])),
            _ => Ok(reply(&results(r)[0].1, vec![])),
        }
    });
    let (host, n) = host();
    for workers in [1, 2] {
        let o = RunOptions {
            args: vec![("q".into(), json!("1 + 2?"))],
            workers: Some(workers),
            ..RunOptions::default()
        };
        let r = ais_vm::run(&tool_program(8), &o, model.clone(), host.clone());
        assert_eq!(r.outcome.unwrap(), json!("3"), "{workers} workers");
    }
    assert_eq!(n.load(Ordering::SeqCst), 2);
}
