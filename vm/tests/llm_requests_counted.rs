//! Issue 32 #4, "attempts are under-counted": 16 parallel calls all
//! failing with HTTP 500 sent 17–18 requests while the summary said 3
//! attempts. The run fails with the first call that gives up; the calls
//! still in flight are cancelled, and the requests they had sent were lost
//! from the counts. Every request that reached the server must be counted:
//! per call (its event's attempts) and in the run's summary.

use ais_testkit::llm::*;
use ais_testkit::mock::MockReply;
use ais_testkit::MemoryHost;
use ais_vm::telemetry::Status;
use ais_vm::RunOptions;
use std::sync::Arc;

/// `n` independent asks, joined.
fn fan_out(n: usize) -> ais_ir::bytecode::Program {
    let mut body = String::new();
    let mut names = Vec::new();
    for i in 0..n {
        body.push_str(&format!(
            "    %p{i} = template %q {{template = \"{{0}} {i}\"}} : str\n    %a{i} = ask %p{i} : str\n"
        ));
        names.push(format!("%a{i}"));
    }
    let text = format!(
        "agent @A {{\n  flow @main(%q: str) -> json entry {{\n{body}    %w = wait_all {} : json\n    return %w\n  }}\n}}\n",
        names.join(", ")
    );
    let m = ais_ir::parse_module(&text).expect("valid IR");
    ais_ir::bytecode::compile(&m).expect("codegen")
}

fn run_failing_fan_out(protocol: ais_vm::llm::http::Protocol, stream: bool) {
    let server = mock();
    // Every request fails with 500 (more than 16 calls × 4 attempts).
    server.push_n(MockReply::error(500, "internal error"), 200);
    let mut o = options(&server, protocol);
    o.stream = stream;
    let backend = Arc::new(ais_vm::llm::http::HttpBackend::new(o));
    let opts = RunOptions {
        args: vec![("q".into(), serde_json::json!("topic"))],
        workers: Some(2),
        ..RunOptions::default()
    };
    let report = ais_vm::run(&fan_out(16), &opts, backend, Arc::new(MemoryHost::new()));
    assert!(report.outcome.is_err(), "every call fails");
    let sent = server.request_count() as u64;
    // One call gave up after its retries, so more requests went out than
    // one call's worth: the other calls were in flight.
    assert!(sent > 4, "only {sent} requests reached the server");
    assert_eq!(
        report.summary.llm_attempts, sent,
        "the summary counts every request the server received"
    );
    let per_call: u64 = report
        .events
        .iter()
        .filter_map(|e| e.llm.as_ref())
        .map(|l| l.attempts.len() as u64)
        .sum();
    assert_eq!(per_call, sent, "the calls' events list every request");
    // The calls the run's end cancelled still show what they sent.
    let cancelled_with_requests = report
        .events
        .iter()
        .filter(|e| e.status == Status::Cancelled)
        .filter(|e| e.llm.as_ref().is_some_and(|l| !l.attempts.is_empty()))
        .count();
    let failed = report
        .events
        .iter()
        .filter(|e| e.status == Status::Failed && e.llm.is_some())
        .count();
    assert!(failed >= 1, "the call that gave up failed the run");
    assert!(
        cancelled_with_requests + failed >= 2,
        "requests of cancelled calls are kept on their events"
    );
}

#[test]
fn attempts_are_under_counted_16_parallel_500s_count_every_request() {
    run_failing_fan_out(ais_vm::llm::http::Protocol::OpenAi, false);
}

#[test]
fn attempts_are_under_counted_16_parallel_500s_streamed() {
    run_failing_fan_out(ais_vm::llm::http::Protocol::OpenAi, true);
}
