//! Native tool calling of the three HTTP protocols against the mock
//! server, streamed and not: tools and earlier turns in each provider's
//! request form, tool calls (single, parallel, malformed) in the response,
//! tool-name mapping both ways, and the token budget's mapping.

use ais_testkit::llm::*;
use ais_testkit::mock::{MockCall, MockReply, MockServer};
use ais_vm::llm::http::{HttpBackend, Protocol};
use ais_vm::llm::{
    CancelToken, LlmBackend, LlmOpKind, LlmRequest, LlmResponse, ToolCall, ToolSpec, Turn,
};
use serde_json::{json, Value};

const PROTOCOLS: [Protocol; 3] = [Protocol::OpenAi, Protocol::Anthropic, Protocol::Ollama];

fn backend_for(server: &MockServer, protocol: Protocol, stream: bool) -> HttpBackend {
    let mut o = options(server, protocol);
    o.stream = stream;
    HttpBackend::new(o)
}

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "fs.read".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        },
        ToolSpec {
            name: "clock".into(),
            description: "The time".into(),
            parameters: json!({"type": "object", "properties": {}}),
        },
    ]
}

fn tool_request() -> LlmRequest {
    let mut r = request(LlmOpKind::Ask, "What is in notes.txt?");
    r.json_schema = None;
    r.tools = tools();
    r
}

fn call(server: &MockServer, protocol: Protocol, stream: bool, r: &LlmRequest) -> LlmResponse {
    backend_for(server, protocol, stream)
        .complete(r, &CancelToken::new())
        .unwrap_or_else(|e| panic!("{protocol:?} stream={stream}: {e}"))
}

fn each_way(mut f: impl FnMut(Protocol, bool)) {
    for protocol in PROTOCOLS {
        for stream in [false, true] {
            f(protocol, stream)
        }
    }
}

#[test]
fn tools_are_offered_in_each_providers_form() {
    each_way(|protocol, stream| {
        let server = mock();
        call(&server, protocol, stream, &tool_request());
        let body = server.last_request().expect("request").body;
        let tools = &body["tools"];
        match protocol {
            Protocol::OpenAi | Protocol::Ollama => {
                assert_eq!(tools[0]["type"], "function");
                assert_eq!(tools[0]["function"]["name"], "fs__read");
                assert_eq!(tools[0]["function"]["description"], "Read a file");
                assert_eq!(
                    tools[0]["function"]["parameters"]["required"],
                    json!(["path"])
                );
                assert_eq!(tools[1]["function"]["name"], "clock");
            }
            Protocol::Anthropic => {
                assert_eq!(tools[0]["name"], "fs__read");
                assert_eq!(tools[0]["description"], "Read a file");
                assert_eq!(tools[0]["input_schema"]["required"], json!(["path"]));
                assert_eq!(tools[1]["name"], "clock");
            }
            other => panic!("no expectation for protocol {other:?}"),
        }
    });
}

#[test]
fn a_single_tool_call_is_parsed_and_its_name_mapped_back() {
    each_way(|protocol, stream| {
        let server = mock();
        server.push(MockReply::tool_calls(&[(
            "fs__read",
            "{\"path\": \"notes.txt\"}",
        )]));
        let resp = call(&server, protocol, stream, &tool_request());
        let label = format!("{protocol:?} stream={stream}");
        assert_eq!(resp.tool_calls.len(), 1, "{label}");
        let c = &resp.tool_calls[0];
        assert_eq!(c.name, "fs.read", "{label}");
        assert!(!c.id.is_empty());
        let args: Value = serde_json::from_str(&c.arguments).expect("JSON arguments");
        assert_eq!(args, json!({"path": "notes.txt"}), "{label}");
        // A reply that calls tools is complete, not cut off.
        let expected = match protocol {
            Protocol::OpenAi => "tool_calls",
            Protocol::Anthropic => "tool_use",
            Protocol::Ollama => "stop",
            other => panic!("no expectation for protocol {other:?}"),
        };
        assert_eq!(resp.finish_reason, expected, "{label}");
    });
}

#[test]
fn parallel_calls_keep_their_order_ids_and_arguments() {
    each_way(|protocol, stream| {
        let server = mock();
        server.push(MockReply::ToolCalls {
            text: "Let me look.".into(),
            calls: vec![
                MockCall {
                    id: Some("id-a".into()),
                    ..MockCall::new("fs__read", "{\"path\": \"a\"}")
                },
                MockCall {
                    id: Some("id-b".into()),
                    ..MockCall::new("fs__read", "{\"path\": \"b\"}")
                },
                MockCall {
                    id: Some("id-c".into()),
                    ..MockCall::new("clock", "{}")
                },
            ],
        });
        let resp = call(&server, protocol, stream, &tool_request());
        let label = format!("{protocol:?} stream={stream}");
        let names: Vec<&str> = resp.tool_calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["fs.read", "fs.read", "clock"], "{label}");
        let args: Vec<Value> = resp
            .tool_calls
            .iter()
            .map(|c| serde_json::from_str(&c.arguments).unwrap_or(Value::Null))
            .collect();
        assert_eq!(
            args,
            [json!({"path": "a"}), json!({"path": "b"}), json!({})],
            "{label}"
        );
        assert_eq!(resp.text, "Let me look.", "{label}");
        let ids: Vec<&str> = resp.tool_calls.iter().map(|c| c.id.as_str()).collect();
        match protocol {
            // Ollama sends no ids: made up, distinct.
            Protocol::Ollama => assert_eq!(ids, ["call_0", "call_1", "call_2"]),
            _ => assert_eq!(ids, ["id-a", "id-b", "id-c"], "{label}"),
        }
    });
}

#[test]
fn malformed_calls_pass_through_unchanged() {
    each_way(|protocol, stream| {
        let server = mock();
        server.push(MockReply::tool_calls(&[
            ("no_such_tool", "{\"x\": 1}"),
            ("fs__read", "{\"path\": "),
            ("fs__read", "{\"path\": 42}"),
        ]));
        let resp = call(&server, protocol, stream, &tool_request());
        let label = format!("{protocol:?} stream={stream}");
        assert_eq!(resp.tool_calls.len(), 3, "{label}");
        // An unknown name stays as the model sent it.
        assert_eq!(resp.tool_calls[0].name, "no_such_tool", "{label}");
        // Schema-failing arguments are not checked here.
        let args: Value = serde_json::from_str(&resp.tool_calls[2].arguments).expect("json");
        assert_eq!(args, json!({"path": 42}), "{label}");
        // Invalid JSON: Anthropic's whole replies always carry an object,
        // so only the other forms can bring it; it arrives as written.
        if protocol != Protocol::Anthropic || stream {
            assert_eq!(resp.tool_calls[1].arguments, "{\"path\": ", "{label}");
        }
    });
}

#[test]
fn a_structured_op_that_calls_tools_is_not_schema_checked() {
    each_way(|protocol, stream| {
        let server = mock();
        server.push(MockReply::tool_calls(&[("clock", "{}")]));
        let mut r = tool_request();
        r.kind = LlmOpKind::Plan;
        r.json_schema = ais_vm::llm::schema::schema_for(LlmOpKind::Plan);
        let resp = call(&server, protocol, stream, &r);
        assert_eq!(resp.json, None);
        assert_eq!(resp.tool_calls.len(), 1);
        assert_eq!(server.request_count(), 1, "{protocol:?}: no repair round");
    });
}

fn with_turns() -> LlmRequest {
    let mut r = tool_request();
    r.turns = vec![
        Turn::Assistant {
            text: String::new(),
            calls: vec![
                ToolCall {
                    id: "c1".into(),
                    name: "fs.read".into(),
                    arguments: "{\"path\":\"notes.txt\"}".into(),
                },
                ToolCall {
                    id: "c2".into(),
                    name: "ghost".into(),
                    arguments: "{".into(),
                },
            ],
        },
        Turn::ToolResult {
            call_id: "c1".into(),
            name: "fs.read".into(),
            content: "\"buy milk\"".into(),
            is_error: false,
        },
        Turn::ToolResult {
            call_id: "c2".into(),
            name: "ghost".into(),
            content: "unknown tool `ghost`".into(),
            is_error: true,
        },
    ];
    r
}

#[test]
fn earlier_turns_go_out_in_the_openai_form() {
    let server = mock();
    call(&server, Protocol::OpenAi, true, &with_turns());
    let m = server.last_request().expect("request").body["messages"].clone();
    assert_eq!(m[0]["role"], "system");
    assert_eq!(m[1]["role"], "user");
    assert_eq!(
        m[2],
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "fs__read", "arguments": "{\"path\":\"notes.txt\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "ghost", "arguments": "{"}}
        ]})
    );
    assert_eq!(
        m[3],
        json!({"role": "tool", "tool_call_id": "c1", "content": "\"buy milk\""})
    );
    assert_eq!(
        m[4],
        json!({"role": "tool", "tool_call_id": "c2", "content": "unknown tool `ghost`"})
    );
    assert_eq!(m.as_array().map(Vec::len), Some(5));
}

#[test]
fn earlier_turns_go_out_in_the_anthropic_form() {
    let server = mock();
    call(&server, Protocol::Anthropic, false, &with_turns());
    let m = server.last_request().expect("request").body["messages"].clone();
    assert_eq!(m[0]["role"], "user");
    assert_eq!(
        m[1],
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "c1", "name": "fs__read", "input": {"path": "notes.txt"}},
            {"type": "tool_use", "id": "c2", "name": "ghost", "input": {}}
        ]})
    );
    // Both results in one user message.
    assert_eq!(
        m[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "\"buy milk\"", "is_error": false},
            {"type": "tool_result", "tool_use_id": "c2", "content": "unknown tool `ghost`", "is_error": true}
        ]})
    );
    assert_eq!(m.as_array().map(Vec::len), Some(3));
}

#[test]
fn earlier_turns_go_out_in_the_ollama_form() {
    let server = mock();
    call(&server, Protocol::Ollama, true, &with_turns());
    let m = server.last_request().expect("request").body["messages"].clone();
    assert_eq!(
        m[2],
        json!({"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "fs__read", "arguments": {"path": "notes.txt"}}},
            {"function": {"name": "ghost", "arguments": {}}}
        ]})
    );
    assert_eq!(
        m[3],
        json!({"role": "tool", "content": "\"buy milk\"", "tool_name": "fs__read"})
    );
    assert_eq!(m[4]["role"], "tool");
    assert_eq!(m[4]["tool_name"], "ghost");
}

#[test]
fn the_budget_maps_to_each_providers_limit() {
    let mut r = tool_request();
    r.budget_tokens = Some(300);
    r.temperature = Some(0.5);
    // OpenAI: the completion cap, reasoning included.
    let server = mock();
    call(&server, Protocol::OpenAi, false, &r);
    let b = server.last_request().expect("request").body;
    assert_eq!(b["max_completion_tokens"], 300);
    assert!(b.get("max_tokens").is_none());
    // Anthropic: extended thinking, at least 1024, below max_tokens, and
    // no temperature beside it.
    let server = mock();
    call(&server, Protocol::Anthropic, false, &r);
    let b = server.last_request().expect("request").body;
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 1024})
    );
    // The op's default limit, raised above the budget.
    assert!(b["max_tokens"].as_u64().unwrap_or(0) > 1024, "{b}");
    assert!(b.get("temperature").is_none());
    r.budget_tokens = Some(8000);
    call(&server, Protocol::Anthropic, false, &r);
    let b = server.last_request().expect("request").body;
    assert_eq!(b["thinking"]["budget_tokens"], 8000);
    assert!(b["max_tokens"].as_u64().unwrap_or(0) > 8000);
    // Ollama: `num_predict`, the smaller of budget and max_tokens.
    r.max_tokens = Some(500);
    let server = mock();
    call(&server, Protocol::Ollama, false, &r);
    let b = server.last_request().expect("request").body;
    assert_eq!(b["options"]["num_predict"], 500);
}
