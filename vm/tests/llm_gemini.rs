//! The Gemini protocol against the mock server, as the other three are
//! tested: the request's URL, key header and body; text, structured and
//! streamed replies; tool calls both ways; finish reasons; errors and
//! retries; and `protocol = "gemini"` in the configuration.

use ais_testkit::llm::*;
use ais_testkit::mock::{MockReply, MockServer};
use ais_vm::config::Config;
use ais_vm::llm::http::{HttpBackend, Protocol};
use ais_vm::llm::{CancelToken, LlmBackend, LlmErrorKind, LlmOpKind, ToolCall, ToolSpec, Turn};
use serde_json::json;
use std::path::Path;

fn gemini() -> Protocol {
    match Protocol::named("gemini") {
        Some(p) => p,
        None => panic!("gemini is registered"),
    }
}

fn backend_for(server: &MockServer, stream: bool) -> HttpBackend {
    let mut o = options(server, gemini());
    o.stream = stream;
    HttpBackend::new(o)
}

#[test]
fn a_call_names_the_model_in_the_url_and_the_key_in_a_header() {
    let server = mock();
    let mut r = request(LlmOpKind::Ask, "hello gemini");
    r.temperature = Some(0.5);
    r.max_tokens = Some(77);
    let resp = backend_for(&server, false)
        .complete(&r, &CancelToken::new())
        .expect("reply");
    assert_eq!(resp.text, "mock reply to: hello gemini");
    assert_eq!(resp.finish_reason, "STOP");
    assert_eq!(resp.model, "m-ask");
    assert!(resp.usage.prompt_tokens > 0 && resp.usage.completion_tokens > 0);
    let req = server.last_request().expect("a request");
    assert_eq!(req.path, "/models/m-ask:generateContent");
    assert!(!req.path.contains(KEY), "the key never goes in the URL");
    assert_eq!(req.header("x-goog-api-key"), Some(KEY));
    assert_eq!(req.header("authorization"), None);
    let b = &req.body;
    assert!(b["systemInstruction"]["parts"][0]["text"].is_string());
    assert_eq!(b["contents"][0]["role"], "user");
    assert_eq!(b["contents"][0]["parts"][0]["text"], "hello gemini");
    assert_eq!(b["generationConfig"]["temperature"], 0.5);
    assert_eq!(b["generationConfig"]["maxOutputTokens"], 77);
}

#[test]
fn a_structured_op_asks_for_json_against_its_schema() {
    let server = mock();
    for stream in [false, true] {
        let r = request(LlmOpKind::Plan, "plan it");
        let resp = backend_for(&server, stream)
            .complete(&r, &CancelToken::new())
            .expect("reply");
        let req = server.last_request().expect("a request");
        let cfg = &req.body["generationConfig"];
        assert_eq!(cfg["responseMimeType"], "application/json");
        assert_eq!(
            Some(&cfg["responseJsonSchema"]),
            r.json_schema.as_ref(),
            "stream={stream}"
        );
        assert!(resp.json.is_some(), "validated JSON, stream={stream}");
    }
}

#[test]
fn a_streamed_reply_arrives_in_pieces_with_usage() {
    let server = mock();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink_seen = seen.clone();
    let mut r = request(LlmOpKind::Ask, "a somewhat longer prompt to stream back");
    r.on_text = Some(ais_vm::llm::TextSink::new(move |e| {
        if let ais_vm::llm::TextEvent::Delta { text, .. } = e {
            if let Ok(mut g) = sink_seen.lock() {
                g.push(text.clone());
            }
        }
    }));
    let resp = backend_for(&server, true)
        .complete(&r, &CancelToken::new())
        .expect("reply");
    let req = server.last_request().expect("a request");
    assert_eq!(req.path, "/models/m-ask:streamGenerateContent?alt=sse");
    let pieces = seen.lock().map(|g| g.clone()).unwrap_or_default();
    assert!(pieces.len() > 1, "{pieces:?}");
    assert_eq!(pieces.concat(), resp.text);
    assert_eq!(resp.finish_reason, "STOP");
    assert!(resp.usage.prompt_tokens > 0 && resp.usage.completion_tokens > 0);
}

fn tool_request() -> ais_vm::llm::LlmRequest {
    let mut r = request(LlmOpKind::Ask, "What is in notes.txt?");
    r.json_schema = None;
    r.tools = vec![ToolSpec {
        name: "fs.read".into(),
        description: "Read a file".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    }];
    r
}

#[test]
fn tools_are_declared_and_calls_map_back_streamed_or_not() {
    for stream in [false, true] {
        let server = mock();
        server.push(MockReply::tool_calls(&[
            ("fs__read", "{\"path\":\"notes.txt\"}"),
            ("fs__read", "{\"path\":\"b.txt\"}"),
        ]));
        let resp = backend_for(&server, stream)
            .complete(&tool_request(), &CancelToken::new())
            .expect("reply");
        let req = server.last_request().expect("a request");
        let decl = &req.body["tools"][0]["functionDeclarations"][0];
        assert_eq!(decl["name"], "fs__read");
        assert_eq!(decl["parametersJsonSchema"]["required"], json!(["path"]));
        let calls: Vec<(&str, &str)> = resp
            .tool_calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            [
                ("fs.read", "{\"path\":\"notes.txt\"}"),
                ("fs.read", "{\"path\":\"b.txt\"}")
            ],
            "stream={stream}"
        );
        assert_ne!(resp.tool_calls[0].id, resp.tool_calls[1].id);
    }
}

#[test]
fn earlier_turns_go_back_as_function_call_and_response_parts() {
    let server = mock();
    let mut r = tool_request();
    r.turns = vec![
        Turn::Assistant {
            text: String::new(),
            calls: vec![ToolCall {
                id: "call_0".into(),
                name: "fs.read".into(),
                arguments: "{\"path\":\"notes.txt\"}".into(),
            }],
        },
        Turn::ToolResult {
            call_id: "call_0".into(),
            name: "fs.read".into(),
            content: "\"the notes\"".into(),
            is_error: false,
        },
    ];
    backend_for(&server, false)
        .complete(&r, &CancelToken::new())
        .expect("reply");
    let req = server.last_request().expect("a request");
    let c = &req.body["contents"];
    assert_eq!(c[1]["role"], "model");
    assert_eq!(c[1]["parts"][0]["functionCall"]["name"], "fs__read");
    assert_eq!(
        c[1]["parts"][0]["functionCall"]["args"]["path"],
        "notes.txt"
    );
    assert_eq!(c[2]["role"], "user");
    let fr = &c[2]["parts"][0]["functionResponse"];
    assert_eq!(fr["name"], "fs__read");
    assert_eq!(fr["response"], json!({"result": "the notes"}));
}

fn finish(reason: &str) -> MockReply {
    MockReply::json(json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "partial"}]}, "finishReason": reason}],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3}
    }))
}

#[test]
fn finish_reasons_map_to_the_errors_of_the_other_protocols() {
    let server = mock();
    let mut r = request(LlmOpKind::Ask, "x");
    r.json_schema = None;
    let b = backend_for(&server, false);
    server.push(finish("MAX_TOKENS"));
    let e = b.complete(&r, &CancelToken::new()).expect_err("cut off");
    assert_eq!(e.kind, LlmErrorKind::Truncated);
    server.push(finish("SAFETY"));
    let e = b.complete(&r, &CancelToken::new()).expect_err("filtered");
    assert_eq!(e.kind, LlmErrorKind::ContentFilter);
    server.push(MockReply::json(
        json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}),
    ));
    let e = b.complete(&r, &CancelToken::new()).expect_err("blocked");
    assert_eq!(e.kind, LlmErrorKind::ContentFilter);
    assert!(ais_vm::llm::is_incomplete_reason("MAX_TOKENS"));
}

#[test]
fn errors_are_read_and_rate_limits_retried() {
    let server = mock();
    let mut r = request(LlmOpKind::Ask, "x");
    r.json_schema = None;
    server.push(MockReply::rate_limited("0"));
    let resp = backend_for(&server, false)
        .complete(&r, &CancelToken::new())
        .expect("retried");
    assert!(resp.text.starts_with("mock reply"));
    assert_eq!(server.request_count(), 2);
    server.push(MockReply::Status {
        status: 400,
        headers: Vec::new(),
        body: json!({"error": {"code": 400, "message": "API key not valid", "status": "INVALID_ARGUMENT"}}).to_string(),
    });
    let e = backend_for(&server, false)
        .complete(&r, &CancelToken::new())
        .expect_err("client error");
    assert_eq!(e.kind, LlmErrorKind::Client);
    assert!(e.message.contains("API key not valid"), "{}", e.message);
}

#[test]
fn the_configuration_accepts_protocol_gemini() {
    let c = Config::parse(
        "[[llm_backends]]\nname = \"g\"\nprotocol = \"gemini\"\napi_key_env = \"GEMINI_API_KEY\"\n",
        Path::new("cfg.toml"),
    )
    .expect("parses");
    let b = c.backend("g").expect("defined");
    assert_eq!(b.kind.name(), "gemini");
    assert_eq!(
        b.base_url,
        "https://generativelanguage.googleapis.com/v1beta"
    );
}
