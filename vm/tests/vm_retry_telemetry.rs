//! Every attempt of an LLM call — retries included — reaches the run's
//! telemetry: the op's event lists the attempts and the summary counts them.

use ais_testkit::llm::*;
use ais_testkit::mock::MockReply;
use ais_testkit::MemoryHost;
use ais_vm::RunOptions;
use std::sync::Arc;

#[test]
fn retries_are_in_the_events_and_the_summary() {
    let server = mock();
    server.push(MockReply::rate_limited_ms(5));
    let backend = Arc::new(backend(&server, ais_vm::llm::http::Protocol::OpenAi));
    let m = ais_ir::parse_module(
        "agent @A {\n  flow @main(%q: str) -> str entry {\n    %0 = ask %q : str\n    return %0\n  }\n}\n",
    )
    .expect("valid IR");
    let program = ais_ir::bytecode::compile(&m).expect("codegen");
    let options = RunOptions {
        args: vec![("q".into(), serde_json::json!("hello"))],
        ..RunOptions::default()
    };
    let report = ais_vm::run(&program, &options, backend, Arc::new(MemoryHost::new()));
    assert!(report.outcome.is_ok(), "{:?}", report.outcome);
    assert_eq!(report.summary.llm_calls, 1);
    assert_eq!(report.summary.llm_attempts, 2);
    let llm = report
        .events
        .iter()
        .find_map(|e| e.llm.as_ref())
        .expect("an LLM event");
    assert_eq!(llm.attempts.len(), 2);
    assert_eq!(llm.attempts[0].status, Some(429));
    assert_eq!(llm.attempts[0].error.as_deref(), Some("rate_limited"));
    assert!(llm.attempts[0].retry_in_ms.is_some());
    assert_eq!(llm.attempts[1].error, None);
    assert_eq!(server.request_count(), 2);
}
