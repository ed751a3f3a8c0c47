//! Anthropic Messages API (`POST {base_url}/v1/messages`). Structured ops
//! are sent a tool whose input schema is the reply's schema, and the model
//! is made to call it (`tool_choice`): the API's way to constrain a reply
//! to a schema. Its input is the reply; it is validated locally.
//!
//! `request.rs` writes the body, `response.rs` reads a reply, `stream.rs`
//! the Messages event stream; the reply tool is here.

mod request;
mod response;
mod stream;

pub(crate) use response::{error_detail, parse, usage};

use super::prelude::*;
use super::StructuredMode;

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub const API_VERSION: &str = "2023-06-01";
/// The API requires `max_tokens`; used when neither the op nor the backend
/// sets one.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The protocol, as registered.
pub static PROTOCOL: Anthropic = Anthropic;

/// The Anthropic Messages API.
pub struct Anthropic;

impl WireProtocol for Anthropic {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn default_base_url(&self) -> &'static str {
        DEFAULT_BASE_URL
    }

    fn endpoint(&self, base: &str) -> String {
        endpoint(base)
    }

    /// Only requests with a `cache_control` breakpoint write or read the
    /// cache; the minimum is per model (Anthropic's prompt-caching page).
    fn cache_min_tokens(&self, p: &Prepared) -> Option<u64> {
        if p.cache.points.is_empty() {
            return None;
        }
        Some(min_cacheable_tokens(&p.model))
    }

    fn headers(&self, key: Option<&Secret>) -> Vec<(&'static str, String)> {
        headers(key)
    }

    fn body(&self, p: &Prepared, o: &BodyOptions) -> Value {
        request::body(p, o.stream, o.structured)
    }

    fn parse(&self, v: &Value) -> Result<Reply, String> {
        parse(v)
    }

    fn usage(&self, v: &Value) -> Usage {
        usage(v)
    }

    fn finish_reply(&self, reply: &mut Reply, p: &Prepared, mode: StructuredMode) {
        take_tool_reply(reply, reply_via(p, mode));
    }

    fn incomplete(&self, reason: &str) -> Option<Incomplete> {
        incomplete(reason)
    }

    /// Anthropic: cache reads cost 0.1×, 5-minute cache writes 1.25× the input price.
    fn cache_multipliers(&self) -> (f64, f64) {
        (0.1, 1.25)
    }

    fn error_detail(&self, body: &str) -> ErrorDetail {
        error_detail(body)
    }

    fn stream_event(
        &self,
        s: &mut StreamState,
        v: &Value,
        deltas: &mut Vec<String>,
    ) -> Result<(), String> {
        stream::event(s, v, deltas)
    }
}

pub(crate) fn endpoint(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/messages") {
        base.to_string()
    } else if base.ends_with("/v1") {
        format!("{base}/messages")
    } else {
        format!("{base}/v1/messages")
    }
}

pub(crate) fn headers(key: Option<&Secret>) -> Vec<(&'static str, String)> {
    let mut h = vec![("anthropic-version", API_VERSION.to_string())];
    if let Some(k) = key.filter(|k| !k.is_empty()) {
        h.push(("x-api-key", k.expose().to_string()));
    }
    h
}

/// The smallest thinking budget the API accepts.
pub const MIN_THINKING_BUDGET: u32 = 1024;

/// The tool a structured reply is given through (never offered with the
/// op's own tools, which the model may need to call first).
pub const REPLY_TOOL: &str = "ais_reply";

/// How a structured op's reply is asked for: through [`REPLY_TOOL`]
/// (`wrapped`: the schema is not an object, which a tool's input must be,
/// so the reply is the input's `value`), or only by the system prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReplyVia {
    Prompt,
    Tool { wrapped: bool },
}

/// Whether `p`'s reply goes through [`REPLY_TOOL`]: a schema, `json_schema`
/// mode, no tools of the op's own, and no extended thinking (the API does
/// not allow a forced tool with it).
pub(crate) fn reply_via(p: &Prepared, mode: StructuredMode) -> ReplyVia {
    match &p.schema {
        Some(s)
            if mode == StructuredMode::JsonSchema
                && p.tools.is_empty()
                && p.budget_tokens.is_none() =>
        {
            ReplyVia::Tool {
                wrapped: s.get("type").and_then(Value::as_str) != Some("object"),
            }
        }
        _ => ReplyVia::Prompt,
    }
}

/// A structured reply given through [`REPLY_TOOL`] becomes the reply's
/// text (the JSON the schema check reads); other replies are unchanged.
pub(crate) fn take_tool_reply(reply: &mut Reply, via: ReplyVia) {
    let ReplyVia::Tool { wrapped } = via else {
        return;
    };
    let Some(i) = reply.tool_calls.iter().position(|c| c.name == REPLY_TOOL) else {
        return;
    };
    let call = reply.tool_calls.remove(i);
    reply.text = match (wrapped, serde_json::from_str::<Value>(&call.arguments)) {
        (true, Ok(v)) => v.get("value").map_or(call.arguments, Value::to_string),
        _ => call.arguments,
    };
}

/// The error a `stop_reason` stands for, when the reply is not a complete
/// answer.
pub(crate) fn incomplete(stop_reason: &str) -> Option<Incomplete> {
    match stop_reason {
        "max_tokens" => Some(Incomplete::Truncated),
        "refusal" => Some(Incomplete::Refusal),
        _ => None,
    }
}


/// The shortest prompt prefix Anthropic caches for `model`: 4096 tokens
/// for Claude Opus 4.5 and Haiku 4.5, 2048 for the Haiku 3 models, 1024
/// for the others (Sonnet, Opus 4/4.1, and names it does not know).
pub fn min_cacheable_tokens(model: &str) -> u64 {
    let m = model.to_ascii_lowercase();
    let has = |a: &str, b: &str| m.contains(a) && (m.contains(b) || m.contains(&b.replace('-', ".")));
    if has("haiku", "4-5") || has("opus", "4-5") {
        4096
    } else if m.contains("haiku") {
        2048
    } else {
        1024
    }
}

#[cfg(test)]
mod cache_minimum_tests {
    use super::min_cacheable_tokens;

    #[test]
    fn minimum_is_per_model() {
        assert_eq!(min_cacheable_tokens("claude-sonnet-4-20250514"), 1024);
        assert_eq!(min_cacheable_tokens("claude-haiku-4-5"), 4096);
        assert_eq!(min_cacheable_tokens("claude-opus-4.5"), 4096);
        assert_eq!(min_cacheable_tokens("claude-3-5-haiku-latest"), 2048);
        assert_eq!(min_cacheable_tokens("claude-opus-4-1"), 1024);
        assert_eq!(min_cacheable_tokens("bench"), 1024);
    }
}
