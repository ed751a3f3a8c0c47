//! LLM calls that hold no VM thread while in flight: HTTP backends start
//! them on their own threads (`start_many`), the simulator and the fake
//! hand over replies due later (`scheduled_reply`). The VM's completion
//! thread settles them.
#![allow(clippy::unwrap_used)]

mod ir_support;
use ir_support::program;

use ais_ir::bytecode::Program;
use ais_testkit::fake::FakeBackend;
use ais_testkit::mock::MockReply;
use ais_testkit::MemoryHost;
use ais_vm::llm::http::{HttpBackend, Protocol};
use ais_vm::llm::sim::SimBackend;
use ais_vm::llm::{CancelToken, LlmBackend, LlmOpKind, OnDone};
use ais_vm::telemetry::{OpEvent, Track};
use ais_vm::{Policy, RunOptions};
use serde_json::json;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// `n` asks on distinct prompts, joined by `wait_all`.
fn fan_out(n: usize) -> Program {
    let mut ops = String::new();
    let mut names = Vec::new();
    for i in 0..n {
        ops.push_str(&format!(
            "    %p{i} = template %x {{template = \"{{0}} #{i}\"}} : str\n"
        ));
        ops.push_str(&format!("    %a{i} = ask %p{i} : str\n"));
        names.push(format!("%a{i}"));
    }
    program(&format!(
        "agent @A {{\n  flow @main(%x: str) -> json entry {{\n{ops}    %w = wait_all {} : json\n    return %w\n  }}\n}}\n",
        names.join(", ")
    ))
}

/// The most LLM ops whose [start, end) intervals overlap.
fn peak_llm_overlap(events: &[OpEvent]) -> usize {
    let mut edges: Vec<(u64, i32)> = events
        .iter()
        .filter(|e| matches!(e.track, Track::Llm(_)))
        .flat_map(|e| [(e.start_ns, 1), (e.end_ns, -1)])
        .collect();
    edges.sort_by_key(|&(t, d)| (t, d));
    let (mut cur, mut peak) = (0i32, 0i32);
    for (_, d) in edges {
        cur += d;
        peak = peak.max(cur);
    }
    peak as usize
}

#[test]
fn http_calls_run_concurrently_within_the_limit() {
    let server = ais_testkit::llm::mock();
    server.set_latency(Duration::from_millis(60));
    let mut o = ais_testkit::llm::options(&server, Protocol::OpenAi);
    o.concurrency = 4;
    let backend: Arc<dyn LlmBackend> = Arc::new(HttpBackend::new(o));
    assert!(backend.starts_without_waiting());
    let p = fan_out(12);
    for policy in [Policy::Fifo, Policy::CriticalPath] {
        let before = server.request_count();
        let opts = RunOptions {
            args: vec![("x".into(), json!("topic"))],
            workers: Some(2),
            policy,
            ..RunOptions::default()
        };
        let t = Instant::now();
        let r = ais_vm::run(&p, &opts, backend.clone(), Arc::new(MemoryHost::new()));
        let elapsed = t.elapsed();
        let out = r.outcome.unwrap();
        let answers = out.as_array().unwrap();
        assert_eq!(answers.len(), 12);
        for (i, a) in answers.iter().enumerate() {
            assert!(
                a.as_str().unwrap().contains(&format!("#{i}")),
                "answer {i} belongs to its own prompt: {a}"
            );
        }
        assert_eq!(server.request_count() - before, 12);
        assert_eq!(r.summary.llm_calls, 12);
        // Three waves of four: never more than the limit, and overlapped.
        let peak = peak_llm_overlap(&r.events);
        assert!(peak <= 4, "{policy}: {peak} calls in flight, limit 4");
        assert!(peak >= 2, "{policy}: calls were not overlapped");
        // Three waves of 60 ms at least (a lower bound: load only adds).
        assert!(elapsed >= Duration::from_millis(180), "{elapsed:?}");
    }
}

#[test]
fn a_failed_run_does_not_wait_for_a_hung_call() {
    let server = ais_testkit::llm::mock();
    // Whichever request comes first hangs; the other gets a final 400.
    // An hour: a run that waited for it would hang the suite, not pass.
    server.push(MockReply::Stall(Duration::from_secs(3600)));
    server.push(MockReply::Status {
        status: 400,
        headers: Vec::new(),
        body: r#"{"error": {"message": "bad request", "type": "invalid_request_error"}}"#.into(),
    });
    let backend: Arc<dyn LlmBackend> =
        Arc::new(ais_testkit::llm::backend(&server, Protocol::OpenAi));
    let p = fan_out(2);
    let opts = RunOptions {
        args: vec![("x".into(), json!("topic"))],
        ..RunOptions::default()
    };
    let r = ais_vm::run(&p, &opts, backend, Arc::new(MemoryHost::new()));
    let err = r.outcome.unwrap_err().to_string();
    assert!(err.contains("400"), "{err}");
    // Order, not speed: both calls were sent (the 400 went to the second)
    // and the run ended with the failed one finished and the hung one
    // cancelled (its event, if it reported within the grace, says so and
    // keeps the request it sent): it did not wait for the hung call's reply.
    use ais_vm::telemetry::Status;
    assert_eq!(server.request_count(), 2);
    let mut statuses: Vec<_> = r
        .events
        .iter()
        .filter(|e| e.llm.is_some())
        .map(|e| e.status)
        .collect();
    statuses.retain(|s| *s != Status::Cancelled);
    assert_eq!(statuses, [Status::Failed]);
}

#[test]
fn start_many_reports_every_call_exactly_once() {
    let server = ais_testkit::llm::mock();
    server.set_latency(Duration::from_millis(20));
    let backend = ais_testkit::llm::backend(&server, Protocol::OpenAi);
    let (tx, rx) = mpsc::channel();
    let calls = (0..24)
        .map(|i| {
            let tx = tx.clone();
            let done: OnDone = Box::new(move |result, attempts| {
                tx.send((i, result.map(|r| r.text), attempts.len()))
                    .unwrap();
            });
            (
                ais_testkit::llm::request(LlmOpKind::Ask, &format!("prompt {i}")),
                CancelToken::new(),
                done,
            )
        })
        .collect();
    backend.start_many(calls);
    drop(tx);
    let mut seen: Vec<usize> = Vec::new();
    while let Ok((i, text, attempts)) = rx.recv_timeout(Duration::from_secs(10)) {
        assert!(text.unwrap().contains(&format!("prompt {i}")));
        assert_eq!(attempts, 1);
        seen.push(i);
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..24).collect::<Vec<_>>());
    assert_eq!(server.request_count(), 24);
}

#[test]
fn scheduled_replies_take_their_latency_in_parallel() {
    // The simulator at 1/100 of its nominal delays: asks take 10 ms.
    let sim: Arc<dyn LlmBackend> = Arc::new(SimBackend::new().with_delay_scale(0.01));
    let fake: Arc<dyn LlmBackend> =
        Arc::new(FakeBackend::new().with_latency(Duration::from_millis(10)));
    let p = fan_out(32);
    for backend in [sim, fake] {
        assert!(backend.starts_without_waiting());
        let opts = RunOptions {
            args: vec![("x".into(), json!("topic"))],
            workers: Some(2),
            concurrency: Some(64),
            ..RunOptions::default()
        };
        let r = ais_vm::run(&p, &opts, backend.clone(), Arc::new(MemoryHost::new()));
        assert_eq!(r.outcome.unwrap().as_array().unwrap().len(), 32);
        let ms = r.summary.makespan_ms;
        assert!(
            ms >= 10.0,
            "{}: replies came early ({ms} ms)",
            backend.name()
        );
        let peak = peak_llm_overlap(&r.events);
        assert!(
            peak >= 2,
            "{}: calls ran one at a time (peak overlap {peak})",
            backend.name()
        );
        for e in r.events.iter().filter(|e| matches!(e.track, Track::Llm(_))) {
            assert!(
                e.end_ns - e.start_ns >= 10_000_000,
                "{}: a reply was settled before it was due",
                backend.name()
            );
        }
    }
}
