//! The `anthropic` and `ollama` backends against the mock server.

use ais_testkit::llm::*;
use ais_testkit::mock::MockReply;
use ais_vm::llm::http::{HttpBackend, Protocol};
use ais_vm::llm::providers::StructuredMode;
use ais_vm::llm::{CancelToken, LlmBackend, LlmErrorKind, LlmOpKind};
use serde_json::json;

#[test]
fn anthropic_messages_request_shape() {
    let server = mock();
    let b = backend(&server, Protocol::Anthropic);
    let r = with_context(request(LlmOpKind::Reason, "Why?"), "facts", "a, b");
    let resp = b.complete(&r, &CancelToken::new()).expect("reply");
    assert_eq!(resp.model, "m-reason");
    assert_eq!(resp.finish_reason, "end_turn");
    let got = server.last_request().expect("request");
    assert_eq!(got.path, "/v1/messages");
    assert_eq!(got.header("x-api-key"), Some(KEY));
    assert_eq!(got.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(got.header("authorization"), None);
    assert_eq!(got.body["model"], "m-reason");
    assert_eq!(got.body["max_tokens"], 4096);
    assert!(got.body["system"]
        .as_str()
        .is_some_and(|s| s.contains("expert reasoner")));
    assert_eq!(
        got.body["messages"],
        json!([{"role": "user", "content": "Why?\n\n### facts\n```\na, b\n```"}])
    );
}

#[test]
fn anthropic_base_url_forms() {
    assert_eq!(
        Protocol::Anthropic.endpoint("https://api.anthropic.com"),
        "https://api.anthropic.com/v1/messages"
    );
    assert_eq!(
        Protocol::Anthropic.endpoint("https://x/v1/"),
        "https://x/v1/messages"
    );
    assert_eq!(
        Protocol::OpenAi.endpoint("http://h:8000/v1"),
        "http://h:8000/v1/chat/completions"
    );
    assert_eq!(
        Protocol::Ollama.endpoint("http://h:11434/"),
        "http://h:11434/api/chat"
    );
    assert_eq!(
        Protocol::Ollama.endpoint("http://h:11434/api"),
        "http://h:11434/api/chat"
    );
}

#[test]
fn anthropic_usage_text_blocks_and_structured_reply() {
    let server = mock();
    server.push(MockReply::json(json!({
        "model": "claude-x",
        "content": [{"type": "text", "text": "{\"critique\": \"ok\", "}, {"type": "tool_use", "id": "t"}, {"type": "text", "text": "\"suggestions\": []}"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 30, "output_tokens": 9}
    })));
    let resp = backend(&server, Protocol::Anthropic)
        .complete(&request(LlmOpKind::Reflect, "essay"), &CancelToken::new())
        .expect("reply");
    assert_eq!(
        resp.json,
        Some(json!({"critique": "ok", "suggestions": []}))
    );
    assert_eq!(
        (resp.usage.prompt_tokens, resp.usage.completion_tokens),
        (30, 9)
    );
    assert_eq!(resp.model, "claude-x");
}

#[test]
fn anthropic_structured_default_reply_is_schema_valid() {
    let server = mock();
    let resp = backend(&server, Protocol::Anthropic)
        .complete(&request(LlmOpKind::Plan, "ship it"), &CancelToken::new())
        .expect("reply");
    let v = resp.json.expect("json");
    assert_eq!(
        ais_vm::llm::jsonschema::validate(&ais_vm::llm::schema::plan(), &v),
        Ok(())
    );
}

#[test]
fn anthropic_overloaded_529_is_retried_and_errors_are_parsed() {
    let server = mock();
    let overloaded =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            .to_string();
    server.push(MockReply::Status {
        status: 529,
        headers: vec![],
        body: overloaded,
    });
    let bad = json!({"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}}).to_string();
    server.push(MockReply::Status {
        status: 400,
        headers: vec![],
        body: bad,
    });
    let e = backend(&server, Protocol::Anthropic)
        .complete(&request(LlmOpKind::Ask, "x"), &CancelToken::new())
        .expect_err("400 after 529");
    assert_eq!(
        (e.kind, e.status, e.attempts),
        (LlmErrorKind::Client, Some(400), 2)
    );
    assert_eq!(e.message, "max_tokens: too large (after 2 attempts)");
}

#[test]
fn ollama_chat_request_shape() {
    let server = mock();
    let b = backend(&server, Protocol::Ollama);
    let mut r = request(LlmOpKind::Ask, "hello");
    r.temperature = Some(0.5);
    r.max_tokens = Some(12);
    let resp = b.complete(&r, &CancelToken::new()).expect("reply");
    assert_eq!(resp.finish_reason, "stop");
    let got = server.last_request().expect("request");
    assert_eq!(got.path, "/api/chat");
    assert_eq!(got.body["stream"], false);
    assert_eq!(got.body["model"], "m-ask");
    assert_eq!(
        got.body["options"],
        json!({"temperature": 0.5, "num_predict": 12})
    );
    assert_eq!(got.body["messages"][0]["role"], "system");
    assert_eq!(
        got.body["messages"][1],
        json!({"role": "user", "content": "hello"})
    );
    assert!(got.body.get("format").is_none());
}

#[test]
fn ollama_usage_and_schema_format() {
    let server = mock();
    let resp = backend(&server, Protocol::Ollama)
        .complete(
            &request(LlmOpKind::Verify, "the sky is blue"),
            &CancelToken::new(),
        )
        .expect("reply");
    assert!(resp.json.is_some());
    assert_eq!(
        server.last_request().expect("request").body["format"],
        ais_vm::llm::schema::verify()
    );
    server.push(MockReply::json(json!({
        "model": "llama", "message": {"role": "assistant", "content": "hi"}, "done": true,
        "prompt_eval_count": 26, "eval_count": 3
    })));
    let resp = backend(&server, Protocol::Ollama)
        .complete(&request(LlmOpKind::Ask, "x"), &CancelToken::new())
        .expect("reply");
    assert_eq!(
        (
            resp.usage.prompt_tokens,
            resp.usage.completion_tokens,
            resp.finish_reason.as_str()
        ),
        (26, 3, "stop")
    );
}

#[test]
fn ollama_json_mode_and_error_bodies() {
    let server = mock();
    let mut o = options(&server, Protocol::Ollama);
    o.structured = StructuredMode::JsonObject;
    o.api_key = None;
    let b = HttpBackend::new(o);
    b.complete(&request(LlmOpKind::Reflect, "x"), &CancelToken::new())
        .expect("reply");
    let got = server.last_request().expect("request");
    assert_eq!(got.body["format"], "json");
    assert_eq!(got.header("authorization"), None);
    server.push(MockReply::Status {
        status: 404,
        headers: vec![],
        body: "{\"error\": \"model 'm-ask' not found\"}".into(),
    });
    let e = b
        .complete(&request(LlmOpKind::Ask, "x"), &CancelToken::new())
        .expect_err("404");
    assert_eq!(
        (e.kind, e.status, e.message.as_str()),
        (LlmErrorKind::Client, Some(404), "model 'm-ask' not found")
    );
}

#[test]
fn mock_latency_per_model_and_kind_and_unknown_routes() {
    let server = mock();
    server.set_model_latency("m-ask", std::time::Duration::from_millis(1));
    server.set_kind_latency("plan", std::time::Duration::from_millis(1));
    let b = backend(&server, Protocol::OpenAi);
    assert!(b
        .complete(&request(LlmOpKind::Plan, "p"), &CancelToken::new())
        .is_ok());
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .into();
    let resp = agent
        .get(format!("{}/v1/models", server.url()))
        .call()
        .expect("answer");
    assert_eq!(resp.status().as_u16(), 404);
    // A request that is not a completion is kept apart, uncounted.
    assert_eq!(server.request_count(), 1);
    assert_eq!(server.probes().len(), 1);
}
