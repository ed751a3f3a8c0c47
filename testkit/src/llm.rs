//! Fixtures of the provider tests: requests, and HTTP backends pointed at
//! a [`MockServer`] with fast retries.

use crate::mock::MockServer;
use ais_vm::llm::http::{HttpBackend, HttpOptions, Protocol, RetryPolicy};
use ais_vm::llm::prompt::Models;
use ais_vm::llm::secret::Secret;
use ais_vm::llm::{ContextBlock, LlmOpKind, LlmRequest};
use std::time::Duration;

pub const KEY: &str = "sk-test-SECRETKEY-0123456789abcdef";

pub fn request(kind: LlmOpKind, prompt: &str) -> LlmRequest {
    LlmRequest {
        cache: Default::default(),
        kind,
        agent: "Tester".into(),
        system: None,
        prompt: prompt.into(),
        context: Vec::new(),
        model: None,
        temperature: None,
        max_tokens: None,
        json_schema: ais_vm::llm::schema::schema_for(kind),
        budget_tokens: None,
        backend: None,
        tools: Vec::new(),
        turns: Vec::new(),
        on_text: None,
        critical: false,
        attained: Default::default(),
    }
}

pub fn with_context(mut r: LlmRequest, label: &str, text: &str) -> LlmRequest {
    r.context.push(ContextBlock {
        label: label.into(),
        text: text.into(),
    });
    r
}

/// Options with fast retries, so tests do not wait.
pub fn options(server: &MockServer, protocol: Protocol) -> HttpOptions {
    let base = match protocol {
        Protocol::OpenAi => server.openai_url(),
        _ => server.url(),
    };
    let mut o = HttpOptions::new("mock", protocol, &base);
    o.api_key = Some(Secret::new(KEY));
    o.models = Models {
        ask: Some("m-ask".into()),
        think: Some("m-think".into()),
        reason: Some("m-reason".into()),
    };
    o.timeout = Duration::from_secs(5);
    o.connect_timeout = Duration::from_secs(2);
    o.retry = RetryPolicy {
        max_retries: 3,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(4),
        max_retry_after: Duration::from_millis(40),
    };
    o
}

pub fn backend(server: &MockServer, protocol: Protocol) -> HttpBackend {
    HttpBackend::new(options(server, protocol))
}

pub fn mock() -> MockServer {
    match MockServer::start() {
        Ok(s) => s,
        Err(e) => panic!("cannot start the mock server: {e}"),
    }
}
