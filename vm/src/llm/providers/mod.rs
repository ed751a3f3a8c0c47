//! The wire protocols of the HTTP backends, one folder each, behind one
//! trait ([`WireProtocol`]): how a request is written, how a reply, a
//! stream, tool calls, usage and finish reasons are read. Everything else
//! a call needs — connections, timeouts, retries, `Retry-After`, repair
//! rounds, cancellation, attempt telemetry, secret redaction — is shared
//! and lives in `super::http`, which knows no protocol by name.
//!
//! The vocabulary they share with that layer is here too: the reply types
//! (`reply.rs`), [`StructuredMode`], [`ServerInfo`]; `prelude.rs` is what
//! a protocol's `mod.rs` imports.
//!
//! Adding a provider: a folder here implementing [`WireProtocol`] and one
//! line in [`registry!`] below (see "How to add a provider" in
//! docs/architecture.md). The configuration's `protocol = "…"` accepts
//! every name registered here.

pub(crate) mod prelude;
mod reply;

pub use reply::{error_text, ErrorDetail, Incomplete, Reply, StreamState};

use super::prompt::Prepared;
use super::secret::Secret;
use super::Usage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a protocol's streamed reply is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Server-Sent Events; each event's `data:` is handed over.
    Sse,
    /// One JSON object per line (Ollama).
    JsonLines,
}

/// How a structured op asks for JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StructuredMode {
    /// `response_format: json_schema` (OpenAI) / `format: <schema>` (Ollama).
    #[default]
    JsonSchema,
    /// `response_format: json_object` / `format: "json"`, for servers
    /// without schema support.
    JsonObject,
    /// Only the instruction in the system prompt.
    Prompt,
}

/// Backend settings a request body depends on.
#[derive(Clone, Copy, Debug)]
pub struct BodyOptions {
    pub structured: StructuredMode,
    pub stream: bool,
    /// The backend's `reasoning_model` setting (OpenAI protocol).
    pub reasoning_model: Option<bool>,
}

/// What the server says about itself, asked over the backend's own
/// connection (see `super::http::probe`).
pub trait Prober {
    /// The server's root (`base_url` without the protocol's path).
    fn root(&self) -> &str;
    fn get_json(&self, url: &str) -> Option<Value>;
    fn post_json(&self, url: &str, body: String) -> Option<Value>;
}

/// A server's own statement of its limits; `None` fields were not stated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerInfo {
    /// Tokens one request may use, prompt and completion together.
    pub context: Option<u32>,
    /// Whether the server renders tool definitions for the model.
    pub tools: Option<bool>,
    /// Where the facts were read, for messages (`llama.cpp /props`).
    pub source: Option<String>,
}

impl ServerInfo {
    pub fn is_known(&self) -> bool {
        self.context.is_some() || self.tools.is_some()
    }
}

/// One provider protocol. Implementations are stateless statics.
pub trait WireProtocol: Send + Sync {
    /// The name in `protocol = "…"`.
    fn name(&self) -> &'static str;
    fn default_base_url(&self) -> &'static str;
    /// The request URL from a configured base URL without its query.
    fn endpoint(&self, base: &str) -> String;
    /// The URL one request goes to, from [`endpoint`](Self::endpoint)
    /// (query included). Protocols whose URL names the model or the
    /// streaming mode override it; the default sends every call to the
    /// endpoint.
    fn request_url(&self, endpoint: &str, model: &str, stream: bool) -> String {
        let _ = (model, stream);
        endpoint.to_string()
    }
    /// The protocol's headers (key, version). Keys go in headers only:
    /// URLs end up in logs.
    fn headers(&self, key: Option<&Secret>) -> Vec<(&'static str, String)>;
    /// The JSON body of a call.
    fn body(&self, p: &Prepared, o: &BodyOptions) -> Value;
    /// A whole (non-streamed) 2xx reply.
    fn parse(&self, v: &Value) -> Result<Reply, String>;
    /// The tokens a reply reports; read also from replies that are
    /// rejected, since they were spent.
    fn usage(&self, v: &Value) -> Usage;
    /// The shortest prefix (tokens) the provider caches for prepared
    /// request `p`, when `p` can write or read a cached prefix at all;
    /// `None` (the default): the protocol has no prompt cache the VM can
    /// count on (`llm::cache`, fan-out warm-up).
    fn cache_min_tokens(&self, p: &Prepared) -> Option<u64> {
        let _ = p;
        None
    }
    /// Adjusts a reply before it is judged (Anthropic's reply tool).
    fn finish_reply(&self, reply: &mut Reply, p: &Prepared, mode: StructuredMode) {
        let _ = (reply, p, mode);
    }
    /// Why a finish reason marks a reply that is not a complete answer.
    fn incomplete(&self, reason: &str) -> Option<Incomplete>;
    /// A provider error body, reduced to message and code.
    fn error_detail(&self, body: &str) -> ErrorDetail;
    fn framing(&self) -> Framing {
        Framing::Sse
    }
    /// One event's data (an SSE `data:` or a JSON line). The default reads
    /// it as JSON and hands it to [`stream_event`](Self::stream_event).
    fn stream_data(
        &self,
        s: &mut StreamState,
        data: &str,
        deltas: &mut Vec<String>,
    ) -> Result<(), String> {
        let v: Value = serde_json::from_str(data)
            .map_err(|e| format!("malformed event in the stream: {e}"))?;
        self.stream_event(s, &v, deltas)
    }
    /// One decoded stream event: text goes to `deltas` and `s`.
    fn stream_event(
        &self,
        s: &mut StreamState,
        v: &Value,
        deltas: &mut Vec<String>,
    ) -> Result<(), String>;
    /// A last check of a whole streamed reply.
    fn stream_check(&self, reply: &Reply) -> Result<(), String> {
        let _ = reply;
        Ok(())
    }
    /// The default price multipliers of cached input, relative to the
    /// input price: (cache reads, cache writes). A backend's `prices`
    /// table may set its own.
    fn cache_multipliers(&self) -> (f64, f64) {
        (1.0, 1.0)
    }
    /// What the server states about `model` (context size, tool support);
    /// the default asks nothing.
    fn probe(&self, server: &dyn Prober, model: &str) -> ServerInfo {
        let _ = (server, model);
        ServerInfo::default()
    }
}

/// Declares the provider modules and lists them, one line each.
macro_rules! registry {
    ($($module:ident),* $(,)?) => {
        $(pub mod $module;)*
        /// Every registered protocol, in the order `protocol = "…"` lists
        /// them.
        pub static PROTOCOLS: &[&dyn WireProtocol] = &[$(&$module::PROTOCOL),*];
    };
}

registry! {
    openai,
    anthropic,
    ollama,
    gemini,
}

/// The registered protocol named `name`.
pub fn find(name: &str) -> Option<&'static dyn WireProtocol> {
    PROTOCOLS.iter().copied().find(|p| p.name() == name)
}

/// The names of the registered protocols, for messages.
pub fn names() -> Vec<&'static str> {
    PROTOCOLS.iter().map(|p| p.name()).collect()
}

/// Whether a finish/stop reason of any protocol marks a reply that is not a
/// complete answer (cut off, filtered, refused).
pub fn is_incomplete_reason(reason: &str) -> bool {
    PROTOCOLS.iter().any(|p| p.incomplete(reason).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::http::Protocol;

    #[test]
    fn every_protocol_constant_is_registered() {
        for p in [Protocol::OpenAi, Protocol::Anthropic, Protocol::Ollama] {
            let w = find(p.name()).map(|w| w.name());
            assert_eq!(w, Some(p.name()));
            assert_eq!(Protocol::named(p.name()), Some(p));
        }
        assert_eq!(Protocol::named("nope"), None);
        let mut seen = names();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), PROTOCOLS.len(), "names are unique");
    }
}
