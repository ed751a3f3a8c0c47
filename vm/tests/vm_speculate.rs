//! Speculation of `switch` arms (issue 36): a classifier's reply decides
//! which of three arms runs; with a budget, the arms' LLM calls start
//! with the classifier's, the taken arm adopts its reply, the others are
//! discarded. Results, side effects and the journal are as without it.
#![allow(clippy::unwrap_used)]

mod ir_support;
use ir_support::program;

use ais_ir::bytecode::{self, Program};
use ais_testkit::fake::{server_error, text_reply, FakeBackend};
use ais_testkit::MemoryHost;
use ais_vm::journal::{self, Budget, Journal};
use ais_vm::llm::LlmRequest;
use ais_vm::{RunOptions, RunReport, Speculate};
use serde_json::{json, Value as Json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Each arm asks a model, then sends its answer with `notify` (a side
/// effect the host counts).
const ROUTER: &str = r#"
agent @Router {
  flow @main(%ticket: str) -> str entry {
    %0 = template %ticket {template = "Classify this ticket: {0}"} : str
    %1 = ask %0 : str
    %2 = switch %1 : str {
      case "billing" {
        %3 = template %ticket {template = "Billing answer for {0}"} : str
        %4 = ask %3 : str
        %5 = inv %4 {tool = "notify"} : json
        yield %4
      }
      case "technical" {
        %6 = template %ticket {template = "Technical answer for {0}"} : str
        %7 = ask %6 : str
        %8 = inv %7 {tool = "notify"} : json
        yield %7
      }
      default {
        %9 = template %ticket {template = "Escalation for {0}"} : str
        %10 = ask %9 : str
        %11 = inv %10 {tool = "notify"} : json
        yield %10
      }
    }
    return %2
  }
}
"#;

fn args() -> Vec<(String, Json)> {
    vec![("ticket".into(), json!("my printer is on fire"))]
}

/// The classifier answers `label`; the other calls get the fake's reply.
fn backend(label: &'static str, latency: Duration) -> Arc<FakeBackend> {
    Arc::new(
        FakeBackend::new()
            .with_concurrency(16)
            .with_latency(latency)
            .with_script(move |r: &LlmRequest, _| {
                r.prompt
                    .starts_with("Classify")
                    .then(|| Ok(text_reply(label)))
            }),
    )
}

/// A host whose `notify` tool counts its calls and keeps their arguments.
fn host() -> (Arc<MemoryHost>, Arc<Mutex<Vec<Json>>>) {
    let host = Arc::new(MemoryHost::new());
    let sent = Arc::new(Mutex::new(Vec::new()));
    let s = sent.clone();
    host.register_tool("notify", move |a| {
        s.lock().unwrap().push(a.clone());
        Ok(json!({"sent": true}))
    });
    (host, sent)
}

fn options(workers: usize, speculate: Option<Speculate>) -> RunOptions {
    RunOptions {
        args: args(),
        workers: Some(workers),
        speculate,
        budget: Budget {
            prices: vec![("*".into(), 1.0, 2.0)],
            ..Budget::default()
        },
        ..RunOptions::default()
    }
}

fn budget(calls: u32) -> Option<Speculate> {
    Some(Speculate {
        max_extra_calls: calls,
        max_extra_cost_usd: 1.0,
    })
}

fn run(p: &Program, o: &RunOptions, b: &Arc<FakeBackend>) -> (RunReport, Arc<Mutex<Vec<Json>>>) {
    let (h, sent) = host();
    (ais_vm::run(p, o, b.clone(), h), sent)
}

fn prompts(b: &FakeBackend) -> Vec<String> {
    b.requests().into_iter().map(|r| r.prompt).collect()
}

#[test]
fn the_taken_arm_adopts_its_speculated_call_and_the_others_have_no_effect() {
    let p = program(ROUTER);
    for label in ["billing", "technical", "something else"] {
        let plain = backend(label, Duration::from_millis(150));
        let (want, want_sent) = run(&p, &options(2, None), &plain);
        let want_out = want.outcome.unwrap();
        assert_eq!(plain.calls(), 2, "classifier + one arm");
        assert!(want.summary.speculation.is_none());

        let spec = backend(label, Duration::from_millis(150));
        let (got, sent) = run(&p, &options(2, budget(4)), &spec);
        assert_eq!(got.outcome.unwrap(), want_out, "{label}: same result");
        // Every arm's call was made once, at the classifier's time; the
        // taken arm did not call again.
        assert_eq!(spec.calls(), 4, "{label}: {:?}", prompts(&spec));
        let s = got.summary.speculation.clone().unwrap();
        assert_eq!((s.speculated, s.adopted, s.discarded), (3, 1, 2), "{label}");
        // Side effects: exactly the taken arm's, with the same argument.
        assert_eq!(*sent.lock().unwrap(), *want_sent.lock().unwrap(), "{label}");
        assert_eq!(sent.lock().unwrap().len(), 1);
        // The discarded calls are paid for and counted in the run's cost.
        assert!(s.extra_cost_usd > 0.0, "{s:?}");
        assert!(s.extra_cost_usd <= s.max_extra_cost_usd);
        assert!(got.summary.cost_usd > want.summary.cost_usd);
        let extra = got.summary.cost_usd - want.summary.cost_usd;
        assert!((extra - s.extra_cost_usd).abs() < 1e-9, "{extra} vs {s:?}");
        assert_eq!(
            got.summary.llm_attempts,
            want.summary.llm_attempts + 2,
            "every request counts"
        );
        // The arm's call ran alongside the classifier's: most of it was
        // behind it when the arm started, and the run was shorter.
        assert!(s.saved_ms >= 100.0, "{s:?}");
        assert!(
            got.summary.makespan_ms < want.summary.makespan_ms,
            "{} vs {}",
            got.summary.makespan_ms,
            want.summary.makespan_ms
        );
    }
}

#[test]
fn a_zero_budget_speculates_nothing() {
    let p = program(ROUTER);
    for b in [
        budget(0),
        Some(Speculate {
            max_extra_calls: 4,
            max_extra_cost_usd: 0.0,
        }),
    ] {
        let fake = backend("technical", Duration::from_millis(20));
        let (r, sent) = run(&p, &options(2, b), &fake);
        r.outcome.unwrap();
        assert_eq!(fake.calls(), 2);
        assert!(r.summary.speculation.is_none());
        assert_eq!(sent.lock().unwrap().len(), 1);
    }
}

#[test]
fn extra_calls_stay_within_max_extra_calls() {
    let p = program(ROUTER);
    // Three arms covering every outcome: all three cost at most 2 extra.
    // With room for 1, only the first arm is speculated (and counted
    // extra, as it may not be taken).
    for (max, label, speculated) in [
        (1, "technical", 1),
        (1, "billing", 1),
        (2, "technical", 3),
        (3, "billing", 3),
    ] {
        let fake = backend(label, Duration::from_millis(20));
        let (r, sent) = run(&p, &options(3, budget(max)), &fake);
        r.outcome.unwrap();
        let s = r.summary.speculation.unwrap();
        assert_eq!(s.speculated, speculated, "max {max}, {label}");
        assert!(s.discarded <= u64::from(max), "max {max}: {s:?}");
        // Requests beyond the unspeculated run's two.
        assert!(fake.calls() - 2 <= u64::from(max), "max {max}");
        assert_eq!(fake.calls() - 2, s.discarded, "max {max}: {s:?}");
        assert_eq!(sent.lock().unwrap().len(), 1);
    }
}

#[test]
fn results_agree_with_the_interpreter_at_every_worker_count() {
    let p = program(ROUTER);
    for label in ["billing", "technical", "other"] {
        let b = backend(label, Duration::ZERO);
        let (h, _) = host();
        let want = ais_vm::interp::run(&p, None, &args(), b.as_ref(), h.as_ref()).unwrap();
        for workers in [1, 2, 4] {
            let b = backend(label, Duration::from_millis(5));
            let (r, sent) = run(&p, &options(workers, budget(8)), &b);
            assert_eq!(r.outcome.unwrap(), want, "{label}, {workers} workers");
            assert_eq!(sent.lock().unwrap().len(), 1);
        }
    }
}

fn done_asks(dir: &std::path::Path, id: &str) -> usize {
    journal::load_record(dir, id)
        .unwrap()
        .steps
        .iter()
        .filter(|s| s.kind == "done" && s.op == "ask")
        .count()
}

#[test]
fn a_speculated_reply_is_journaled_only_when_adopted() {
    let p = program(ROUTER);
    let dir = tempfile::tempdir().unwrap();
    let bytes = bytecode::encode(&p).unwrap();
    let j =
        Arc::new(Journal::begin(Some(dir.path()), "r1", "test", &bytes, None, &args()).unwrap());
    // Attempt 1: the arms' calls start and answer, the classifier fails
    // after them: the run stops before the branch is decided.
    let classified = Arc::new(AtomicUsize::new(0));
    let c = classified.clone();
    let failing = Arc::new(
        FakeBackend::new()
            .with_latency(Duration::from_millis(60))
            .with_kind_latency(ais_vm::llm::LlmOpKind::Ask, Duration::from_millis(60))
            .with_script(move |r: &LlmRequest, _| {
                r.prompt.starts_with("Classify").then(|| {
                    c.fetch_add(1, Ordering::SeqCst);
                    Err(server_error("classifier down"))
                })
            }),
    );
    let mut o = options(2, budget(4));
    o.journal = Some(j);
    let (r, sent) = run(&p, &o, &failing);
    assert!(r.outcome.is_err());
    assert_eq!(classified.load(Ordering::SeqCst), 1);
    let s = r.summary.speculation.unwrap();
    assert_eq!((s.speculated, s.adopted, s.discarded), (3, 0, 3));
    assert!(sent.lock().unwrap().is_empty(), "no arm ran");
    assert_eq!(done_asks(dir.path(), "r1"), 0, "no held reply journaled");

    // Attempt 2 (resume): the classifier answers; the taken arm's reply
    // and its one side effect are journaled, nothing of the others.
    let j = Arc::new(Journal::resume(dir.path(), "r1").unwrap());
    let ok = backend("billing", Duration::from_millis(20));
    let mut o = options(2, budget(4));
    o.journal = Some(j);
    let (r, sent) = run(&p, &o, &ok);
    let out = r.outcome.unwrap();
    assert!(out.as_str().unwrap().contains("Billing answer"), "{out}");
    assert_eq!(done_asks(dir.path(), "r1"), 2, "classifier + the taken arm");
    assert_eq!(sent.lock().unwrap().len(), 1);
}

/// The classifier is an `ask`, the arms `think`s: over HTTP (the loopback
/// mock provider), the arms' requests are sent with the classifier's; the
/// mock's replies match no case, so `default` is taken and the other two
/// are cancelled in flight, long before the mock would answer them.
const ROUTER_HTTP: &str = r#"
agent @Router {
  flow @main(%ticket: str) -> str entry {
    %0 = template %ticket {template = "Classify this ticket: {0}"} : str
    %1 = ask %0 : str
    %2 = switch %1 : str {
      case "billing" {
        %3 = template %ticket {template = "Billing answer for {0}"} : str
        %4 = think %3 : str
        %5 = inv %4 {tool = "notify"} : json
        yield %4
      }
      case "technical" {
        %6 = template %ticket {template = "Technical answer for {0}"} : str
        %7 = think %6 : str
        %8 = inv %7 {tool = "notify"} : json
        yield %7
      }
      default {
        %9 = template %ticket {template = "Escalation for {0}"} : str
        %10 = think %9 : str
        %11 = inv %10 {tool = "notify"} : json
        yield %10
      }
    }
    return %2
  }
}
"#;

#[test]
fn over_http_the_losers_are_cancelled_in_flight_and_every_request_is_counted() {
    use ais_testkit::llm::{mock, options as http_options};
    use ais_vm::llm::http::{HttpBackend, Protocol};
    let p = program(ROUTER_HTTP);
    let run_http = |speculate: Option<Speculate>| {
        let server = mock();
        server.set_kind_latency("ask", Duration::from_millis(100));
        server.set_kind_latency("think", Duration::from_millis(1500));
        let backend = Arc::new(HttpBackend::new(http_options(&server, Protocol::OpenAi)));
        let (h, sent) = host();
        let r = ais_vm::run(&p, &options(2, speculate), backend, h);
        (r, sent, server.request_count())
    };
    let (want, want_sent, want_requests) = run_http(None);
    let want_out = want.outcome.unwrap();
    assert_eq!(want_requests, 2);
    let (got, sent, requests) = run_http(budget(2));
    assert_eq!(got.outcome.unwrap(), want_out);
    assert_eq!(*sent.lock().unwrap(), *want_sent.lock().unwrap());
    assert_eq!(sent.lock().unwrap().len(), 1);
    // The classifier, and each arm's call once (the taken arm's adopted).
    assert_eq!(requests, 4);
    let s = got.summary.speculation.unwrap();
    assert_eq!((s.speculated, s.adopted, s.discarded), (3, 1, 2));
    // Cancelled before the mock answered: nothing used, nothing billed to
    // the client; their requests still count.
    assert_eq!(s.extra_output_tokens, 0, "{s:?}");
    assert_eq!(got.summary.llm_attempts, want.summary.llm_attempts + 2);
    assert!(s.saved_ms >= 50.0, "{s:?}");
}

#[test]
fn the_budget_is_read_from_the_configuration() {
    use ais_vm::config::Config;
    let path = std::path::Path::new("config.toml");
    let c = Config::parse(
        "speculate = { max_extra_calls = 2, max_extra_cost = 0.01 }\n",
        path,
    )
    .unwrap();
    assert_eq!(
        c.speculate,
        Some(Speculate {
            max_extra_calls: 2,
            max_extra_cost_usd: 0.01
        })
    );
    assert_eq!(Config::parse("", path).unwrap().speculate, None);
    for bad in [
        "speculate = { max_extra_calls = -1, max_extra_cost = 0.01 }",
        "speculate = { max_extra_calls = 2, max_extra_cost = -0.5 }",
        "speculate = { max_extra_calls = 2 }",
        "speculate = { max_extra_calls = 2, max_extra_cost = 0.01, arms = 3 }",
    ] {
        let e = Config::parse(bad, path).unwrap_err();
        assert!(
            e.to_string().contains("speculate") || e.to_string().contains("max_extra"),
            "{bad}: {e}"
        );
    }
}
