//! Replies that are not complete answers (cut off, filtered, refused, or
//! with no text) are structured errors, not successes; their finish reason
//! and tokens stay on the attempt.

use ais_testkit::llm::*;
use ais_testkit::mock::MockReply;
use ais_vm::llm::http::{HttpBackend, HttpTransport, Protocol};
use ais_vm::llm::{AttemptLog, CancelToken, LlmBackend, LlmError, LlmErrorKind, LlmOpKind};
use serde_json::json;

/// One `ask` against `server`, with its attempts.
fn ask(
    server: &ais_testkit::mock::MockServer,
    protocol: Protocol,
    transport: HttpTransport,
    accept_incomplete: bool,
) -> (
    Result<ais_vm::llm::LlmResponse, LlmError>,
    Vec<ais_vm::llm::Attempt>,
) {
    let mut o = options(server, protocol);
    o.transport = transport;
    o.accept_incomplete = accept_incomplete;
    let log = AttemptLog::new();
    let r = HttpBackend::new(o).complete_observed(
        &request(LlmOpKind::Ask, "x"),
        &CancelToken::new(),
        &log,
    );
    (r, log.attempts())
}

const TRANSPORTS: [HttpTransport; 2] = [HttpTransport::Auto, HttpTransport::Threads];

#[test]
fn openai_finish_reason_length_is_llm_truncated() {
    for transport in TRANSPORTS {
        let server = mock();
        server.push(MockReply::openai_finish("length"));
        let (r, attempts) = ask(&server, Protocol::OpenAi, transport, false);
        let err = r.expect_err("a cut-off reply is not an answer");
        assert_eq!(err.kind, LlmErrorKind::Truncated, "{transport:?}");
        assert!(err.message.contains("`length`"), "{}", err.message);
        // Deterministic: not retried.
        assert_eq!(server.request_count(), 1, "{transport:?}");
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0].finish_reason.as_deref(), Some("length"));
        assert_eq!(
            attempts[0].usage.total(),
            15,
            "tokens of the failed attempt"
        );
    }
}

#[test]
fn content_filter_is_not_retried() {
    let server = mock();
    server.push_n(MockReply::openai_finish("content_filter"), 4);
    let (r, attempts) = ask(&server, Protocol::OpenAi, HttpTransport::Auto, false);
    let err = r.expect_err("filtered");
    assert_eq!(err.kind, LlmErrorKind::ContentFilter);
    assert_eq!(server.request_count(), 1);
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].error, Some(LlmErrorKind::ContentFilter));
    assert_eq!(attempts[0].retry_in, None);
}

#[test]
fn openai_refusal_is_content_filter_and_not_retried() {
    let server = mock();
    server.push_n(
        MockReply::json(
            json!({"choices": [{"message": {"content": null, "refusal": "I can't help"}, "finish_reason": "stop"}]}),
        ),
        4,
    );
    let (r, attempts) = ask(&server, Protocol::OpenAi, HttpTransport::Auto, false);
    let err = r.expect_err("refused");
    assert_eq!(err.kind, LlmErrorKind::ContentFilter);
    assert!(err.message.contains("I can't help"), "{}", err.message);
    assert_eq!(server.request_count(), 1);
    assert_eq!(attempts[0].finish_reason.as_deref(), Some("refusal"));
}

#[test]
fn anthropic_max_tokens_is_llm_truncated() {
    let server = mock();
    server.push(MockReply::anthropic_stop("max_tokens"));
    let (r, attempts) = ask(&server, Protocol::Anthropic, HttpTransport::Auto, false);
    let err = r.expect_err("cut off");
    assert_eq!(err.kind, LlmErrorKind::Truncated);
    assert!(err.message.contains("`max_tokens`"), "{}", err.message);
    assert_eq!(server.request_count(), 1);
    assert_eq!(attempts[0].finish_reason.as_deref(), Some("max_tokens"));
}

#[test]
fn anthropic_refusal_is_content_filter() {
    let server = mock();
    server.push_n(MockReply::anthropic_stop("refusal"), 4);
    let (r, _) = ask(&server, Protocol::Anthropic, HttpTransport::Threads, false);
    assert_eq!(r.expect_err("refused").kind, LlmErrorKind::ContentFilter);
    assert_eq!(server.request_count(), 1);
}

#[test]
fn ollama_done_reason_length_is_llm_truncated() {
    let server = mock();
    server.push(MockReply::ollama_done("length"));
    let (r, _) = ask(&server, Protocol::Ollama, HttpTransport::Auto, false);
    assert_eq!(r.expect_err("cut off").kind, LlmErrorKind::Truncated);
    assert_eq!(server.request_count(), 1);
}

#[test]
fn complete_finish_reasons_are_answers() {
    for (protocol, reply) in [
        (Protocol::OpenAi, MockReply::openai_finish("stop")),
        (Protocol::Anthropic, MockReply::anthropic_stop("end_turn")),
        (Protocol::Ollama, MockReply::ollama_done("stop")),
    ] {
        let server = mock();
        server.push(reply);
        let (r, attempts) = ask(&server, protocol, HttpTransport::Auto, false);
        let resp = r.expect("a complete reply");
        assert_eq!(resp.text, "partial answ");
        assert_eq!(attempts[0].usage.total(), 15);
    }
}

#[test]
fn accept_incomplete_returns_the_truncated_text_with_its_reason() {
    let server = mock();
    server.push(MockReply::openai_finish("length"));
    let (r, attempts) = ask(&server, Protocol::OpenAi, HttpTransport::Auto, true);
    let resp = r.expect("accepted by the backend's opt-in");
    assert_eq!(resp.text, "partial answ");
    assert_eq!(resp.finish_reason, "length");
    assert_eq!(attempts[0].error, None);
    assert_eq!(attempts[0].finish_reason.as_deref(), Some("length"));
}

#[test]
fn null_content_is_invalid_response() {
    for transport in TRANSPORTS {
        let server = mock();
        server.push(MockReply::json(
            json!({"choices": [{"message": {"role": "assistant", "content": null}, "finish_reason": "stop"}]}),
        ));
        // Retried like an empty `choices`: the next reply is normal.
        let (r, attempts) = ask(&server, Protocol::OpenAi, transport, false);
        let resp = r.expect("the retry answers");
        assert!(!resp.text.is_empty());
        assert_eq!(server.request_count(), 2, "{transport:?}");
        assert_eq!(attempts[0].error, Some(LlmErrorKind::InvalidResponse));
        assert!(
            attempts[0]
                .message
                .as_deref()
                .is_some_and(|m| m.contains("content` is null")),
            "{:?}",
            attempts[0].message
        );
    }
}

#[test]
fn null_content_with_tool_calls_is_not_an_invalid_response() {
    let server = mock();
    server.push(MockReply::json(json!({"choices": [{"message": {"role": "assistant", "content": null,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        "finish_reason": "tool_calls"}]})));
    let (r, _) = ask(&server, Protocol::OpenAi, HttpTransport::Auto, false);
    assert_eq!(r.expect("left to tool use").text, "");
    assert_eq!(server.request_count(), 1);
}

/// The first call is cut off (`llm.truncated`, caught); its 15 tokens
/// were spent, so they count: in the run's usage, and against the run's
/// token budget, which then stops the second call before it is sent.
const CUT_OFF_THEN_ASK: &str = r#"
agent @A {
  flow @main() -> str entry {
    %0 = const {value = "one"} : str
    %1 = try_catch : str {
      try {
        %2 = ask %0 : str
        yield %2
      }
      catch(%3: json) {
        %4 = const {value = "cut"} : str
        yield %4
      }
    }
    %5 = ask %1 : str
    return %5
  }
}
"#;

fn run_cut_off_then_ask(budget: ais_vm::journal::Budget) -> (ais_vm::RunReport, usize) {
    let program = ais_ir::parse_module(CUT_OFF_THEN_ASK)
        .ok()
        .and_then(|m| ais_ir::bytecode::compile(&m).ok())
        .expect("program");
    let server = mock();
    server.push(MockReply::openai_finish("length"));
    server.push(MockReply::Content("second".into()));
    let options = ais_vm::RunOptions {
        budget,
        ..ais_vm::RunOptions::default()
    };
    let report = ais_vm::run(
        &program,
        &options,
        std::sync::Arc::new(backend(&server, Protocol::OpenAi)),
        std::sync::Arc::new(ais_testkit::MemoryHost::new()),
    );
    (report, server.request_count())
}

#[test]
fn failed_attempts_count_their_tokens() {
    let (report, requests) = run_cut_off_then_ask(ais_vm::journal::Budget::default());
    assert_eq!(report.outcome.expect("completes"), json!("second"));
    assert_eq!(requests, 2);
    let s = &report.summary;
    assert!(
        s.input_tokens >= 10 && s.output_tokens >= 5,
        "the cut-off call's 10 + 5 tokens are in the usage: {s:?}"
    );

    let budget = ais_vm::journal::Budget {
        tokens: Some(10),
        ..ais_vm::journal::Budget::default()
    };
    let (report, requests) = run_cut_off_then_ask(budget);
    match report.outcome.expect_err("over budget") {
        ais_vm::RunError::OpFailed { code, payload, .. } => {
            assert_eq!(code, "budget.tokens");
            assert_eq!(payload["used"], 15);
            assert_eq!(payload["limit"], 10);
        }
        other => panic!("expected budget.tokens, got {other:?}"),
    }
    assert_eq!(requests, 1, "the second call is never sent");
}

#[test]
fn call_usage_sums_attempts_and_falls_back_to_the_reply() {
    use ais_vm::llm::{call_usage, Attempt, Usage};
    let u = |p, c| Usage {
        prompt_tokens: p,
        completion_tokens: c,
        ..Default::default()
    };
    let mut failed = Attempt::single(
        "b",
        &Err(LlmError::new("b", LlmErrorKind::Server, "x")),
        Default::default(),
    );
    failed.usage = u(10, 2);
    let mut ok = failed.clone();
    ok.error = None;
    ok.usage = u(10, 5);
    assert_eq!(call_usage(None, &[failed.clone(), ok.clone()]), u(20, 7));
    // A backend that reports no per-attempt usage is counted by its reply.
    let reply = ais_vm::llm::LlmResponse {
        text: String::new(),
        json: None,
        usage: u(3, 4),
        finish_reason: "stop".into(),
        model: "m".into(),
        latency: Default::default(),
        simulated: true,
        tool_calls: Vec::new(),
    };
    let mut bare = ok;
    bare.usage = Usage::default();
    assert_eq!(call_usage(Some(&reply), &[bare]), u(3, 4));
    assert_eq!(call_usage(Some(&reply), &[]), u(3, 4));
}
