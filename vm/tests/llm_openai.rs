//! The `openai` backend against the mock: request shape, reply parsing,
//! structured output with local validation and repair.

use ais_testkit::llm::*;
use ais_testkit::mock::MockReply;
use ais_vm::llm::http::{HttpBackend, Protocol};
use ais_vm::llm::providers::StructuredMode;
use ais_vm::llm::{AttemptLog, CancelToken, LlmBackend, LlmErrorKind, LlmOpKind};
use serde_json::json;

#[test]
fn sends_chat_completions_with_system_prompt_context_and_model_per_class() {
    let server = mock();
    let b = backend(&server, Protocol::OpenAi);
    let mut r = with_context(
        request(LlmOpKind::Think, "Summarise the report"),
        "report",
        "Sales grew 5%.",
    );
    r.temperature = Some(0.2);
    r.max_tokens = Some(99);
    let resp = b.complete(&r, &CancelToken::new()).expect("reply");
    assert!(!resp.simulated);
    assert_eq!(resp.model, "m-think");
    assert_eq!(resp.finish_reason, "stop");
    assert!(
        resp.text.starts_with("mock reply to: Summarise the report"),
        "{}",
        resp.text
    );

    let got = server.last_request().expect("request");
    assert_eq!(got.method, "POST");
    assert_eq!(got.path, "/v1/chat/completions");
    assert_eq!(
        got.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(got.header("x-apxm-op"), Some("think"));
    assert_eq!(got.header("content-type"), Some("application/json"));
    let body = &got.body;
    assert_eq!(body["model"], "m-think");
    assert_eq!(body["temperature"], 0.2);
    assert_eq!(body["max_tokens"], 99);
    assert!(body.get("response_format").is_none());
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(body["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.contains("careful analyst")));
    assert_eq!(body["messages"][1]["role"], "user");
    assert_eq!(
        body["messages"][1]["content"],
        "Summarise the report\n\n### report\n```\nSales grew 5%.\n```"
    );
}

#[test]
fn explicit_model_and_system_override_the_defaults() {
    let server = mock();
    let b = backend(&server, Protocol::OpenAi);
    let mut r = request(LlmOpKind::Ask, "hi");
    r.model = Some("special".into());
    r.system = Some("Be terse.".into());
    b.complete(&r, &CancelToken::new()).expect("reply");
    let body = server.last_request().expect("request").body;
    assert_eq!(body["model"], "special");
    assert_eq!(body["messages"][0]["content"], "Be terse.");
}

#[test]
fn parses_usage_and_finish_reason() {
    let server = mock();
    server.push(MockReply::json(json!({
        "model": "served-model",
        "choices": [{"message": {"role": "assistant", "content": "done"}, "finish_reason": "tool_free_stop"}],
        "usage": {"prompt_tokens": 17, "completion_tokens": 5, "total_tokens": 22}
    })));
    let resp = backend(&server, Protocol::OpenAi)
        .complete(&request(LlmOpKind::Ask, "hi"), &CancelToken::new())
        .expect("reply");
    assert_eq!(
        (
            resp.text.as_str(),
            resp.finish_reason.as_str(),
            resp.model.as_str()
        ),
        ("done", "tool_free_stop", "served-model")
    );
    assert_eq!(
        (
            resp.usage.prompt_tokens,
            resp.usage.completion_tokens,
            resp.usage.total()
        ),
        (17, 5, 22)
    );
}

#[test]
fn missing_usage_counts_zero() {
    let server = mock();
    server.push(MockReply::json(
        json!({"choices": [{"message": {"content": "x"}}]}),
    ));
    let resp = backend(&server, Protocol::OpenAi)
        .complete(&request(LlmOpKind::Ask, "hi"), &CancelToken::new())
        .expect("reply");
    assert_eq!(resp.usage.total(), 0);
    assert_eq!(resp.finish_reason, "unknown");
    assert_eq!(resp.model, "m-ask");
}

#[test]
fn structured_ops_send_json_schema_and_return_validated_json() {
    let server = mock();
    let b = backend(&server, Protocol::OpenAi);
    let resp = b
        .complete(
            &request(LlmOpKind::Plan, "Write a report"),
            &CancelToken::new(),
        )
        .expect("reply");
    let v = resp.json.expect("json");
    assert_eq!(
        ais_vm::llm::jsonschema::validate(&ais_vm::llm::schema::plan(), &v),
        Ok(())
    );
    let body = server.last_request().expect("request").body;
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["name"], "plan_reply");
    assert_eq!(
        body["response_format"]["json_schema"]["schema"],
        ais_vm::llm::schema::plan()
    );
    assert!(body["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.contains("```json")));
}

#[test]
fn json_object_and_prompt_modes() {
    let server = mock();
    let mut o = options(&server, Protocol::OpenAi);
    o.structured = StructuredMode::JsonObject;
    HttpBackend::new(o.clone())
        .complete(&request(LlmOpKind::Verify, "2+2=4"), &CancelToken::new())
        .expect("reply");
    assert_eq!(
        server.last_request().expect("request").body["response_format"],
        json!({"type": "json_object"})
    );
    o.structured = StructuredMode::Prompt;
    let resp = HttpBackend::new(o)
        .complete(&request(LlmOpKind::Verify, "2+2=4"), &CancelToken::new())
        .expect("reply");
    assert!(server
        .last_request()
        .expect("request")
        .body
        .get("response_format")
        .is_none());
    assert_eq!(resp.json.expect("json")["verdict"], true);
}

#[test]
fn fenced_json_is_accepted() {
    let server = mock();
    server.push(MockReply::Content(
        "Here:\n```json\n{\"verdict\": false, \"reason\": \"no\"}\n```".into(),
    ));
    let resp = backend(&server, Protocol::OpenAi)
        .complete(&request(LlmOpKind::Verify, "claim"), &CancelToken::new())
        .expect("reply");
    assert_eq!(resp.json, Some(json!({"verdict": false, "reason": "no"})));
    assert_eq!(server.request_count(), 1);
}

#[test]
fn invalid_json_gets_one_repair_request() {
    let server = mock();
    server.push(MockReply::Content("I think it is true".into()));
    let log = AttemptLog::new();
    let resp = backend(&server, Protocol::OpenAi)
        .complete_observed(
            &request(LlmOpKind::Verify, "claim"),
            &CancelToken::new(),
            &log,
        )
        .expect("repaired reply");
    assert!(resp.json.is_some());
    assert_eq!(server.request_count(), 2);
    let repair = server.last_request().expect("request").body;
    let msgs = repair["messages"].as_array().expect("messages");
    assert_eq!(msgs.len(), 4);
    assert_eq!(
        msgs[2],
        json!({"role": "assistant", "content": "I think it is true"})
    );
    assert!(msgs[3]["content"]
        .as_str()
        .is_some_and(|s| s.contains("not valid")));
    let kinds: Vec<_> = log.attempts().iter().map(|a| a.error).collect();
    assert_eq!(kinds, vec![None, Some(LlmErrorKind::InvalidResponse), None]);
}

#[test]
fn schema_mismatch_twice_is_an_invalid_response_error() {
    let server = mock();
    server.push_n(
        MockReply::Content("{\"verdict\": \"yes\", \"reason\": \"r\"}".into()),
        2,
    );
    let err = backend(&server, Protocol::OpenAi)
        .complete(&request(LlmOpKind::Verify, "claim"), &CancelToken::new())
        .expect_err("still invalid");
    assert_eq!(err.kind, LlmErrorKind::InvalidResponse);
    assert_eq!(err.attempts, 2);
    assert!(
        err.message
            .contains("$.verdict: \"yes\" is not of type \"boolean\""),
        "{}",
        err.message
    );
    assert_eq!(server.request_count(), 2);
}

#[test]
fn no_key_sends_no_authorization() {
    let server = mock();
    let mut o = options(&server, Protocol::OpenAi);
    o.api_key = None;
    HttpBackend::new(o)
        .complete(&request(LlmOpKind::Ask, "x"), &CancelToken::new())
        .expect("reply");
    assert_eq!(
        server
            .last_request()
            .expect("request")
            .header("authorization"),
        None
    );
}

#[test]
fn reasoning_models_get_max_completion_tokens() {
    use ais_vm::llm::openai::is_reasoning_model;
    for m in [
        "o1",
        "o3-mini",
        "o4-mini-2025-04-16",
        "gpt-5",
        "gpt-5-mini",
        "openai/o3",
    ] {
        assert!(is_reasoning_model(m), "{m}");
    }
    for m in ["gpt-4o", "gpt-4.1-mini", "o10x", "qwen2.5-7b", "llama-o3"] {
        assert!(!is_reasoning_model(m), "{m}");
    }
    let server = mock();
    let send = |model: &str, setting: Option<bool>| {
        let mut o = options(&server, Protocol::OpenAi);
        o.reasoning_model = setting;
        let mut r = request(LlmOpKind::Ask, "x");
        r.model = Some(model.into());
        r.temperature = Some(0.3);
        r.max_tokens = Some(50);
        HttpBackend::new(o)
            .complete(&r, &CancelToken::new())
            .expect("reply");
        server.last_request().expect("request").body
    };
    let body = send("o3-mini", None);
    assert_eq!(body["max_completion_tokens"], 50);
    assert!(body.get("max_tokens").is_none(), "{body}");
    assert!(body.get("temperature").is_none(), "{body}");
    let body = send("gpt-4o", None);
    assert_eq!(body["max_tokens"], 50);
    assert_eq!(body["temperature"], 0.3);
    assert!(body.get("max_completion_tokens").is_none(), "{body}");
    // The backend key overrides the name rule both ways.
    let body = send("my-deployment", Some(true));
    assert_eq!(body["max_completion_tokens"], 50);
    assert!(body.get("temperature").is_none(), "{body}");
    let body = send("o3-mini", Some(false));
    assert_eq!(body["max_tokens"], 50);
}
