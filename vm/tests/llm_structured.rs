//! Schema-constrained replies (issue 34, defect 5): the Anthropic protocol
//! asks for a structured reply through a forced tool whose input schema is
//! the reply's schema; the reply is the tool's input, checked locally.

use ais_testkit::llm::*;
use ais_vm::llm::anthropic::REPLY_TOOL;
use ais_vm::llm::http::{HttpBackend, Protocol};
use ais_vm::llm::providers::StructuredMode;
use ais_vm::llm::{CancelToken, LlmBackend, LlmOpKind};
use serde_json::json;

#[test]
fn anthropic_structured_ops_force_the_reply_tool() {
    for stream in [false, true] {
        let server = mock();
        let mut o = options(&server, Protocol::Anthropic);
        o.stream = stream;
        let r = HttpBackend::new(o)
            .complete(&request(LlmOpKind::Reflect, "review"), &CancelToken::new())
            .expect("structured reply");
        let v = r.json.expect("validated JSON");
        assert!(v.get("critique").is_some(), "{v}");
        assert!(r.tool_calls.is_empty(), "the reply tool is not a tool call");
        let body = server.last_request().expect("request").body;
        assert_eq!(
            body["tool_choice"],
            json!({"type": "tool", "name": REPLY_TOOL})
        );
        assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
        assert_eq!(server.request_count(), 1, "stream {stream}");
    }
}

#[test]
fn a_schema_that_is_not_an_object_is_wrapped_and_unwrapped() {
    let server = mock();
    let mut req = request(LlmOpKind::Ask, "list");
    req.json_schema = Some(json!({"type": "array", "items": {"type": "string"}, "minItems": 1}));
    let r = backend(&server, Protocol::Anthropic)
        .complete(&req, &CancelToken::new())
        .expect("structured reply");
    assert!(r.json.expect("json").is_array());
    let body = server.last_request().expect("request").body;
    assert_eq!(
        body["tools"][0]["input_schema"]["properties"]["value"]["type"],
        "array"
    );
}

#[test]
fn prompt_mode_and_offered_tools_send_no_reply_tool() {
    let server = mock();
    let mut o = options(&server, Protocol::Anthropic);
    o.structured = StructuredMode::Prompt;
    HttpBackend::new(o)
        .complete(&request(LlmOpKind::Verify, "claim"), &CancelToken::new())
        .expect("reply");
    let body = server.last_request().expect("request").body;
    assert!(body.get("tool_choice").is_none(), "{body}");
}
