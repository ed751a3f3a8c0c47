//! Ollama's native chat API (`POST {base_url}/api/chat`).
//! Structured ops pass the schema as `format`. Streams are JSON lines.
//!
//! `request.rs` writes the body, `response.rs` reads a reply, `stream.rs`
//! the lines of a streamed one, `probe.rs` asks `/api/show`.

mod probe;
mod request;
mod response;
mod stream;

pub(crate) use response::{error_detail, parse, tool_calls, usage};

use super::prelude::*;
use super::{Framing, Prober, ServerInfo};

pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:11434";

/// The protocol, as registered.
pub static PROTOCOL: Ollama = Ollama;

/// Ollama's native chat API.
pub struct Ollama;

impl WireProtocol for Ollama {
    fn name(&self) -> &'static str {
        "ollama"
    }

    fn default_base_url(&self) -> &'static str {
        DEFAULT_BASE_URL
    }

    fn endpoint(&self, base: &str) -> String {
        endpoint(base)
    }

    fn headers(&self, key: Option<&Secret>) -> Vec<(&'static str, String)> {
        super::openai::headers(key)
    }

    fn body(&self, p: &Prepared, o: &BodyOptions) -> Value {
        request::body(p, o.structured, o.stream)
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

    fn error_detail(&self, body: &str) -> ErrorDetail {
        error_detail(body)
    }

    fn framing(&self) -> Framing {
        Framing::JsonLines
    }

    fn stream_event(
        &self,
        s: &mut StreamState,
        v: &Value,
        deltas: &mut Vec<String>,
    ) -> Result<(), String> {
        stream::event(s, v, deltas)
    }

    fn probe(&self, server: &dyn Prober, model: &str) -> ServerInfo {
        probe::probe(server, model)
    }
}

pub(crate) fn endpoint(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/api/chat") {
        base.to_string()
    } else {
        format!("{}/api/chat", base.trim_end_matches("/api"))
    }
}

/// The error a `done_reason` stands for, when the reply is not a complete
/// answer.
pub(crate) fn incomplete(done_reason: &str) -> Option<Incomplete> {
    (done_reason == "length").then_some(Incomplete::Truncated)
}

