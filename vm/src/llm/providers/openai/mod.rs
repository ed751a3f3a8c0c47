//! OpenAI Chat Completions (`POST {base_url}/chat/completions`), as spoken by
//! OpenAI, vLLM, llama.cpp server, Ollama's `/v1`, LM Studio and OpenRouter.
//! Construct it with [`HttpBackend`](crate::llm::http::HttpBackend) and
//! [`Protocol::OpenAi`](crate::llm::http::Protocol::OpenAi).
//!
//! `request.rs` writes the body (messages, tools, limits, structured
//! output), `response.rs` reads a reply (text, tool calls, usage, errors),
//! `stream.rs` the Server-Sent Events of a streamed one, `probe.rs` what
//! llama.cpp and vLLM state about themselves.

mod probe;
mod request;
mod response;
mod stream;

pub(crate) use request::function_tools;
pub(crate) use response::function_calls;
pub(crate) use response::{error_detail, parse, usage};

use super::prelude::*;
use super::{Prober, ServerInfo};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The protocol, as registered.
pub static PROTOCOL: OpenAi = OpenAi;

/// OpenAI Chat Completions.
pub struct OpenAi;

impl WireProtocol for OpenAi {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn default_base_url(&self) -> &'static str {
        DEFAULT_BASE_URL
    }

    fn endpoint(&self, base: &str) -> String {
        endpoint(base)
    }

    /// Automatic prefix caching from 1024 tokens, for every model.
    fn cache_min_tokens(&self, _p: &Prepared) -> Option<u64> {
        Some(1024)
    }

    fn headers(&self, key: Option<&Secret>) -> Vec<(&'static str, String)> {
        headers(key)
    }

    fn body(&self, p: &Prepared, o: &BodyOptions) -> Value {
        let reasoning = o
            .reasoning_model
            .unwrap_or_else(|| is_reasoning_model(&p.model));
        request::body(p, o.structured, reasoning, o.stream)
    }

    fn parse(&self, v: &Value) -> Result<Reply, String> {
        parse(v)
    }

    fn usage(&self, v: &Value) -> Usage {
        usage(v)
    }

    fn incomplete(&self, reason: &str) -> Option<Incomplete> {
        incomplete(reason)
    }

    /// OpenAI bills cached input at half the input price or less (newer models less; set `cache_read_multiplier`), and writes cost nothing extra.
    fn cache_multipliers(&self) -> (f64, f64) {
        (0.5, 1.0)
    }

    fn error_detail(&self, body: &str) -> ErrorDetail {
        error_detail(body)
    }

    fn stream_data(
        &self,
        s: &mut StreamState,
        data: &str,
        deltas: &mut Vec<String>,
    ) -> Result<(), String> {
        stream::data(s, data, deltas)
    }

    fn stream_event(
        &self,
        s: &mut StreamState,
        v: &Value,
        deltas: &mut Vec<String>,
    ) -> Result<(), String> {
        stream::event(s, v, deltas)
    }

    fn stream_check(&self, reply: &Reply) -> Result<(), String> {
        stream::check(reply)
    }

    fn probe(&self, server: &dyn Prober, model: &str) -> ServerInfo {
        probe::probe(server, model)
    }
}

pub(crate) fn endpoint(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/chat/completions") {
        base.to_string()
    } else {
        format!("{base}/chat/completions")
    }
}

/// `Authorization: Bearer <key>` (also sent by Ollama's native protocol,
/// for servers behind a gateway).
pub(crate) fn headers(key: Option<&Secret>) -> Vec<(&'static str, String)> {
    match key {
        Some(k) if !k.is_empty() => vec![("authorization", format!("Bearer {}", k.expose()))],
        _ => Vec::new(),
    }
}

/// True for OpenAI's reasoning-model families (`o1`, `o3`, `o4-mini`,
/// `gpt-5`, …, also behind a gateway prefix such as `openai/o3`). They
/// reject `max_tokens` (wanting `max_completion_tokens`, which also covers
/// hidden reasoning) and sampling parameters such as `temperature`. The
/// backend key `reasoning_model` overrides this rule.
pub fn is_reasoning_model(model: &str) -> bool {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    let family = |f: &str| {
        name.strip_prefix(f)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
    };
    family("o1") || family("o3") || family("o4") || name.starts_with("gpt-5")
}

/// The error a finish reason stands for, when the reply is not a complete
/// answer.
pub(crate) fn incomplete(finish_reason: &str) -> Option<Incomplete> {
    match finish_reason {
        "length" => Some(Incomplete::Truncated),
        "content_filter" => Some(Incomplete::ContentFilter),
        "refusal" => Some(Incomplete::Refusal),
        _ => None,
    }
}

