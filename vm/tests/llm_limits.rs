//! Issue 34: every call sends a completion limit; the server's stated
//! limits (llama.cpp `/props`, vLLM `/v1/models`, Ollama `/api/show`) are
//! read before the first call, so a tool offer the server cannot render
//! and a limit that leaves the prompt no room fail before anything is
//! sent; a cut-off reply names the limit that was sent; a cut-off
//! structured reply is `llm.truncated`, never a repair round.

use ais_testkit::llm::*;
use ais_testkit::mock::{MockReply, MockServer};
use ais_vm::config::{Config, Env, Flags, Settings};
use ais_vm::llm::http::{HttpBackend, HttpTransport, Protocol};
use ais_vm::llm::{
    AttemptLog, CancelToken, LlmBackend, LlmErrorKind, LlmOpKind, LlmRequest, ToolSpec,
};
use serde_json::json;
use std::path::Path;

fn settings(text: &str) -> (Settings, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = Config::parse(text, Path::new("cfg.toml")).expect("valid config");
    let s = Settings::resolve(c, &Flags::default(), &Env::empty(dir.path())).expect("settings");
    (s, dir)
}

fn local(server: &MockServer, extra: &str) -> String {
    format!(
        "[[llm_backends]]\nname = \"local\"\nprotocol = \"openai\"\nbase_url = \"{}\"\n{extra}",
        server.openai_url()
    )
}

fn one_tool(mut r: LlmRequest) -> LlmRequest {
    r.tools = vec![ToolSpec {
        name: "weather".into(),
        description: "the weather in a city".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    }];
    r
}

#[test]
fn every_call_sends_the_ops_default_limit_unless_configured() {
    let server = mock();
    let b = backend(&server, Protocol::OpenAi);
    for (kind, want) in [
        (LlmOpKind::Ask, 1024),
        (LlmOpKind::Reason, 4096),
        (LlmOpKind::Verify, 512),
    ] {
        b.complete(&request(kind, "x"), &CancelToken::new())
            .expect("reply");
        let body = server.last_request().expect("request").body;
        assert_eq!(body["max_tokens"], want, "{kind:?}: {body}");
    }
    // `[max_tokens]` per kind, the backend's `max_tokens` for all, the
    // op's own above both.
    let (s, _d) = settings(&format!(
        "{}\n[max_tokens]\nask = 100\n",
        local(&server, "probe = false\n")
    ));
    let b = s.build_backend("local").expect("backend");
    b.complete(&request(LlmOpKind::Ask, "x"), &CancelToken::new())
        .expect("reply");
    assert_eq!(server.last_request().expect("r").body["max_tokens"], 100);
    b.complete(&request(LlmOpKind::Think, "x"), &CancelToken::new())
        .expect("reply");
    assert_eq!(server.last_request().expect("r").body["max_tokens"], 2048);
    let (s, _d) = settings(&local(&server, "max_tokens = 77\n"));
    let b = s.build_backend("local").expect("backend");
    let mut r = request(LlmOpKind::Think, "x");
    b.complete(&r, &CancelToken::new()).expect("reply");
    assert_eq!(server.last_request().expect("r").body["max_tokens"], 77);
    r.max_tokens = Some(5);
    b.complete(&r, &CancelToken::new()).expect("reply");
    assert_eq!(server.last_request().expect("r").body["max_tokens"], 5);
    assert!(s.show().contains("[max_tokens]\nask = 1024  # default"));
}

#[test]
fn a_cut_off_reply_names_the_limit_that_was_sent() {
    let server = mock();
    server.push(MockReply::openai_finish("length"));
    let e = backend(&server, Protocol::OpenAi)
        .complete(&request(LlmOpKind::Ask, "x"), &CancelToken::new())
        .expect_err("cut off");
    assert_eq!(e.kind, LlmErrorKind::Truncated);
    assert!(
        e.message.contains("max_tokens 1024") && e.message.contains("built-in default for `ask`"),
        "{}",
        e.message
    );
}

#[test]
fn tools_the_servers_template_cannot_render_fail_before_the_call() {
    for transport in ["auto", "threads"] {
        let server = mock();
        server.set_route(
            "/props",
            json!({"default_generation_settings": {"n_ctx": 8192},
                   "chat_template_caps": {"supports_tools": false}}),
        );
        let (s, _d) = settings(&local(&server, &format!("transport = \"{transport}\"\n")));
        let b = s.build_backend("local").expect("backend");
        let log = AttemptLog::new();
        let e = b
            .complete_observed(
                &one_tool(request(LlmOpKind::Ask, "weather?")),
                &CancelToken::new(),
                &log,
            )
            .expect_err("no tools");
        assert_eq!(e.kind, LlmErrorKind::Unsupported, "{}", e.message);
        assert!(
            e.message.contains("llama.cpp /props") && e.message.contains("weather"),
            "{}",
            e.message
        );
        assert_eq!(server.request_count(), 0, "nothing was sent");
        // The same server answers a call without tools; asked once.
        b.complete(&request(LlmOpKind::Ask, "x"), &CancelToken::new())
            .expect("reply");
        assert_eq!(server.request_count(), 1);
        let probes: Vec<String> = server.probes().into_iter().map(|p| p.path).collect();
        assert_eq!(probes, ["/props"], "{transport}");
    }
}

#[test]
fn a_limit_that_leaves_the_prompt_no_room_fails_before_the_call() {
    let server = mock();
    server.set_route(
        "/props",
        json!({"default_generation_settings": {"n_ctx": 2048}}),
    );
    let (s, _d) = settings(&local(&server, "max_tokens = 4096\n"));
    let b = s.build_backend("local").expect("backend");
    let e = b
        .complete(&request(LlmOpKind::Ask, "x"), &CancelToken::new())
        .expect_err("no room");
    assert_eq!(e.kind, LlmErrorKind::ContextOverflow);
    assert!(
        e.message.contains("max_tokens 4096") && e.message.contains("2048 tokens"),
        "{}",
        e.message
    );
    assert_eq!(server.request_count(), 0);
    // A default that does not fit is lowered to the room left instead.
    let (s, _d) = settings(&local(&server, ""));
    let b = s.build_backend("local").expect("backend");
    b.complete(&request(LlmOpKind::Reason, "x"), &CancelToken::new())
        .expect("reply");
    let sent = server.last_request().expect("r").body["max_tokens"]
        .as_u64()
        .unwrap_or(0);
    assert!(sent > 0 && sent < 2048, "{sent}");
}

#[test]
fn vllm_and_ollama_state_their_context() {
    let server = mock();
    server.set_route(
        "/v1/models",
        json!({"data": [{"id": "m", "max_model_len": 1000}]}),
    );
    server.set_route(
        "/api/show",
        json!({"parameters": "num_ctx 1000", "capabilities": ["completion"]}),
    );
    let (s, _d) = settings(&format!(
        "{}\n[[llm_backends]]\nname = \"ol\"\nprotocol = \"ollama\"\nbase_url = \"{}\"\nmax_tokens = 1000\n[llm_backends.models]\nask = \"m\"\n",
        local(&server, "max_tokens = 1000\n[llm_backends.models]\nask = \"m\"\n"),
        server.url()
    ));
    for name in ["local", "ol"] {
        let e = s
            .build_backend(name)
            .expect("backend")
            .complete(&request(LlmOpKind::Ask, "x"), &CancelToken::new())
            .expect_err("no room");
        assert_eq!(e.kind, LlmErrorKind::ContextOverflow, "{name}");
    }
    // Ollama says the model has no `tools` capability.
    let mut o = options(&server, Protocol::Ollama);
    o.probe = true;
    let e = HttpBackend::new(o)
        .complete(&one_tool(request(LlmOpKind::Ask, "x")), &CancelToken::new())
        .expect_err("no tools");
    assert!(e.message.contains("Ollama /api/show"), "{}", e.message);
    assert_eq!(server.request_count(), 0);
}

#[test]
fn a_cut_off_structured_reply_is_truncated_not_repaired() {
    for transport in [HttpTransport::Auto, HttpTransport::Threads] {
        let server = mock();
        server.push(MockReply::openai_finish("length"));
        let mut o = options(&server, Protocol::OpenAi);
        o.accept_incomplete = true;
        o.transport = transport;
        let e = HttpBackend::new(o)
            .complete(&request(LlmOpKind::Reflect, "x"), &CancelToken::new())
            .expect_err("cut off");
        assert_eq!(e.kind, LlmErrorKind::Truncated, "{}", e.message);
        assert!(e.message.contains("max_tokens 1024"), "{}", e.message);
        assert_eq!(server.request_count(), 1, "no repair round");
    }
}

#[test]
fn doctor_reports_what_the_server_states() {
    let server = mock();
    server.set_route(
        "/props",
        json!({"default_generation_settings": {"n_ctx": 4096},
               "chat_template_caps": {"supports_tools": false}}),
    );
    let (s, _d) = settings(&local(&server, ""));
    let report = s.doctor();
    let line = &report.entries[0];
    assert!(line.ok, "{report}");
    assert!(
        line.detail
            .contains("llama.cpp /props: context 4096 tokens per request")
            && line.detail.contains("tools: NOT supported"),
        "{report}"
    );
}
