//! Tool calling over the OpenAI protocol, against the mock server: the
//! request offers the tools in the protocol's form, the reply's
//! `tool_calls` reach the VM's exchange (names mapped back), and the next
//! request carries the assistant turn and each `role: tool` result; the
//! same over the Anthropic protocol (`tool_use` / `tool_result` blocks)
//! and Ollama's native chat API.
#![allow(clippy::unwrap_used)]

mod ir_support;
use ir_support::program;

use ais_testkit::{MemoryHost, MockReply};
use ais_vm::llm::http::Protocol;
use ais_vm::llm::LlmBackend;
use ais_vm::RunOptions;
use serde_json::json;
use std::sync::Arc;

fn tool_program() -> ais_ir::bytecode::Program {
    program(
        r#"agent @A {
  flow @main(%q: str) -> str entry {
    %0 = ask %q {tools = json [{"name":"fs.lookup","description":"Look up a key","parameters":{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}}]} : str
    return %0
  }
}"#,
    )
}

fn options() -> RunOptions {
    RunOptions {
        args: vec![("q".into(), json!("what is the capital?"))],
        // The in-process `fs.lookup` is the test's own tool: trusted, though
        // its name looks like an MCP server's (untrusted by default), so
        // the model may call it with what it read (docs/security.md).
        flow_policy: ais_ir::ifc::FlowPolicy {
            trusted: vec!["fs.*".into()],
            ..Default::default()
        },
        ..RunOptions::default()
    }
}

#[test]
fn an_openai_tool_call_round_trip() {
    let server = ais_testkit::llm::mock();
    server.push(MockReply::json(json!({
        "model": "m",
        "choices": [{"finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "fs__lookup", "arguments": "{\"key\": \"capital\"}"}},
                {"id": "call_b", "type": "function", "function": {"name": "fs__lookup", "arguments": "{\"key\": \"moon\"}"}}
            ]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5}
    })));
    server.push(MockReply::json(json!({
        "model": "m",
        "choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": "Paris"}}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 2}
    })));
    let host = Arc::new(MemoryHost::new());
    host.register_tool("fs.lookup", |args| match args["key"].as_str() {
        Some("capital") => Ok(json!("Paris")),
        _ => Err(ais_vm::host::HostError::new(
            "lookup.missing",
            "no such key",
        )),
    });
    let backend: Arc<dyn LlmBackend> =
        Arc::new(ais_testkit::llm::backend(&server, Protocol::OpenAi));
    let r = ais_vm::run(&tool_program(), &options(), backend, host);
    assert_eq!(r.outcome.unwrap(), json!("Paris"));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    // The tools in the protocol's form, the dot mapped to `__`.
    let tools = &reqs[0].body["tools"];
    assert_eq!(tools[0]["type"], "function");
    assert_eq!(tools[0]["function"]["name"], "fs__lookup");
    assert_eq!(tools[0]["function"]["parameters"]["required"][0], "key");
    // The second request: the prompt, the assistant's calls, each result.
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "tool"]);
    assert_eq!(msgs[2]["tool_calls"][1]["id"], "call_b");
    assert_eq!(msgs[2]["tool_calls"][0]["function"]["name"], "fs__lookup");
    assert_eq!(msgs[3]["tool_call_id"], "call_a");
    assert_eq!(msgs[3]["content"], "Paris");
    assert_eq!(msgs[4]["tool_call_id"], "call_b");
    assert!(msgs[4]["content"]
        .as_str()
        .unwrap()
        .contains("lookup.missing"));
    // Both turns' tokens count.
    assert_eq!(r.summary.input_tokens, 40);
}

#[test]
fn an_ollama_tool_call_round_trip() {
    let server = ais_testkit::llm::mock();
    server.push(MockReply::json(json!({
        "model": "llama",
        "done": true,
        "done_reason": "stop",
        "message": {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "fs__lookup", "arguments": {"key": "capital"}}}
        ]},
        "prompt_eval_count": 10,
        "eval_count": 5
    })));
    server.push(MockReply::json(json!({
        "model": "llama",
        "done": true,
        "done_reason": "stop",
        "message": {"role": "assistant", "content": "Paris"},
        "prompt_eval_count": 20,
        "eval_count": 1
    })));
    let host = Arc::new(MemoryHost::new());
    host.register_tool("fs.lookup", |args| {
        Ok(json!(format!("found {}", args["key"])))
    });
    let backend: Arc<dyn LlmBackend> =
        Arc::new(ais_testkit::llm::backend(&server, Protocol::Ollama));
    let r = ais_vm::run(&tool_program(), &options(), backend, host);
    assert_eq!(r.outcome.unwrap(), json!("Paris"));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body["tools"][0]["function"]["name"], "fs__lookup");
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool"]);
    assert_eq!(
        msgs[2]["tool_calls"][0]["function"]["arguments"]["key"],
        "capital"
    );
    assert_eq!(msgs[3]["tool_name"], "fs__lookup");
    assert_eq!(msgs[3]["content"], "found \"capital\"");
}

#[test]
fn an_anthropic_tool_use_round_trip() {
    let server = ais_testkit::llm::mock();
    server.push(MockReply::json(json!({
        "model": "claude",
        "stop_reason": "tool_use",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "fs__lookup", "input": {"key": "capital"}}
        ],
        "usage": {"input_tokens": 10, "output_tokens": 5}
    })));
    server.push(MockReply::json(json!({
        "model": "claude",
        "stop_reason": "end_turn",
        "content": [{"type": "text", "text": "Paris"}],
        "usage": {"input_tokens": 20, "output_tokens": 1}
    })));
    let host = Arc::new(MemoryHost::new());
    host.register_tool("fs.lookup", |_| Ok(json!("Paris")));
    let backend: Arc<dyn LlmBackend> =
        Arc::new(ais_testkit::llm::backend(&server, Protocol::Anthropic));
    let r = ais_vm::run(&tool_program(), &options(), backend, host);
    assert_eq!(r.outcome.unwrap(), json!("Paris"));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body["tools"][0]["name"], "fs__lookup");
    assert_eq!(
        reqs[0].body["tools"][0]["input_schema"]["required"][0],
        "key"
    );
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(msgs[1]["content"][0]["text"], "Let me look.");
    assert_eq!(msgs[1]["content"][1]["type"], "tool_use");
    assert_eq!(msgs[1]["content"][1]["input"]["key"], "capital");
    assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
    assert_eq!(msgs[2]["content"][0]["tool_use_id"], "toolu_1");
    assert_eq!(msgs[2]["content"][0]["content"], "Paris");
    assert_eq!(msgs[2]["content"][0]["is_error"], false);
}

/// Over each protocol (streamed and not), a turn of malformed calls: a tool
/// that was not offered, arguments failing the schema, arguments that are
/// not JSON. None reaches the tool; each is told to the model in the next
/// request, which then answers.
#[test]
fn malformed_calls_are_told_to_the_model_over_every_protocol() {
    for protocol in [Protocol::OpenAi, Protocol::Anthropic, Protocol::Ollama] {
        for stream in [false, true] {
            let server = ais_testkit::llm::mock();
            server.push(MockReply::tool_calls(&[
                ("web_search", r#"{"q": "x"}"#),
                ("fs__lookup", r#"{"key": 5}"#),
                ("fs__lookup", "{key: capital"),
            ]));
            server.push(MockReply::Content("done".into()));
            let host = Arc::new(MemoryHost::new());
            let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let n = calls.clone();
            host.register_tool("fs.lookup", move |_| {
                n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(json!("Paris"))
            });
            let mut o = ais_testkit::llm::options(&server, protocol);
            o.stream = stream;
            let backend: Arc<dyn LlmBackend> = Arc::new(ais_vm::llm::http::HttpBackend::new(o));
            let r = ais_vm::run(&tool_program(), &options(), backend, host);
            let case = format!("{protocol:?}, stream {stream}");
            assert_eq!(r.outcome.unwrap(), json!("done"), "{case}");
            assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0, "{case}");
            let reqs = server.requests();
            assert_eq!(reqs.len(), 2, "{case}");
            let second = reqs[1].body.to_string();
            assert!(second.contains("tool.not_offered"), "{case}: {second}");
            assert_eq!(
                second.matches("tool.invalid_arguments").count(),
                2,
                "{case}: {second}"
            );
            // Where the protocol carries arguments as an object, text that
            // is not JSON arrives as a string.
            assert!(
                second.contains("not valid JSON") || second.contains("must be a JSON object"),
                "{case}: {second}"
            );
        }
    }
}
