//! Model Context Protocol (<https://modelcontextprotocol.io>): the
//! protocol revisions each side speaks, the `_meta` keys of the stateless
//! revision, tool annotations and `tools/call` results. The transports
//! (stdio lines, streamable HTTP) stay with the client and the server.

use serde_json::{json, Value as Json};

/// The stateless revision (per-request `_meta`, `server/discover`).
pub const MODERN_VERSION: &str = "2026-07-28";

/// Handshake (`initialize`) revisions, newest first: what the server
/// answers and what the client accepts from a legacy server.
pub const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Every revision the client speaks, newest first.
pub const CLIENT_VERSIONS: &[&str] = &[
    MODERN_VERSION,
    LEGACY_VERSIONS[0],
    LEGACY_VERSIONS[1],
    LEGACY_VERSIONS[2],
    LEGACY_VERSIONS[3],
];

/// Every revision the server speaks, newest first (it has no stateless
/// mode yet: a client that asks for another gets the newest).
pub const SERVER_VERSIONS: &[&str] = LEGACY_VERSIONS;

/// The version a server answers `initialize` with: the one asked for when
/// it speaks it, else its newest.
pub fn negotiate(asked: Option<&str>) -> &'static str {
    asked
        .and_then(|a| SERVER_VERSIONS.iter().find(|v| **v == a))
        .copied()
        .unwrap_or(SERVER_VERSIONS[0])
}

/// `_meta` keys of the stateless revision.
pub mod meta {
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
}

/// Method names both sides use.
pub mod method {
    pub const INITIALIZE: &str = "initialize";
    pub const INITIALIZED: &str = "notifications/initialized";
    pub const CANCELLED: &str = "notifications/cancelled";
    pub const DISCOVER: &str = "server/discover";
    pub const PING: &str = "ping";
    pub const TOOLS_LIST: &str = "tools/list";
    pub const TOOLS_CALL: &str = "tools/call";
}

/// What a tool's `annotations` say about its effects. MCP's defaults: a
/// tool is destructive unless it is read-only or says
/// `destructiveHint: false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hints {
    pub read_only: bool,
    pub destructive: bool,
}

impl Hints {
    /// The hints of one tool description (a `tools/list` entry).
    pub fn of(tool: &Json) -> Hints {
        let ann = tool.get("annotations");
        let hint = |k: &str| ann.and_then(|a| a.get(k)).and_then(Json::as_bool);
        let read_only = hint("readOnlyHint") == Some(true);
        Hints {
            read_only,
            destructive: !read_only && hint("destructiveHint").unwrap_or(true),
        }
    }
}

/// A `content` list of one text item.
pub fn text_content(text: &str) -> Json {
    json!([{"type": "text", "text": text}])
}

/// A `tools/call` result that reports the tool failed (`isError`).
pub fn tool_error(text: &str) -> Json {
    json!({"content": text_content(text), "isError": true})
}

/// A `tools/call` result with text and structured content.
pub fn tool_result(text: &str, structured: Json, is_error: bool) -> Json {
    json!({"content": text_content(text), "structuredContent": structured, "isError": is_error})
}

/// A `tools/call` result whose `isError` is set.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolFailed {
    /// The text items of its content, joined with newlines.
    pub text: String,
    /// Its `content` list as sent.
    pub content: Json,
}

/// The value of a `tools/call` result, as a client reads it: the
/// structured content if any, else the text of a single text item, else
/// the content list.
pub fn call_value(result: &Json) -> Result<Json, ToolFailed> {
    let content = result
        .get("content")
        .cloned()
        .unwrap_or(Json::Array(Vec::new()));
    if result.get("isError").and_then(Json::as_bool) == Some(true) {
        let text = content
            .as_array()
            .map(|xs| {
                xs.iter()
                    .filter_map(|x| x.get("text").and_then(Json::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        return Err(ToolFailed { text, content });
    }
    if let Some(s) = result.get("structuredContent").filter(|s| !s.is_null()) {
        return Ok(s.clone());
    }
    match content.as_array().map(Vec::as_slice) {
        Some([one]) if one.get("type").and_then(Json::as_str) == Some("text") => {
            Ok(one.get("text").cloned().unwrap_or(Json::Null))
        }
        _ => Ok(content),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(CLIENT_VERSIONS.len(), LEGACY_VERSIONS.len() + 1);
        assert_eq!(&CLIENT_VERSIONS[1..], LEGACY_VERSIONS);
        assert_eq!(negotiate(Some("2025-03-26")), "2025-03-26");
        assert_eq!(negotiate(Some("1999-01-01")), "2025-11-25");
        assert_eq!(negotiate(None), "2025-11-25");
    }

    #[test]
    fn hints_default_to_destructive() {
        let h = |t: Json| Hints::of(&t);
        assert_eq!(
            h(json!({"name": "x"})),
            Hints {
                read_only: false,
                destructive: true
            }
        );
        assert_eq!(
            h(json!({"annotations": {"readOnlyHint": true}})),
            Hints {
                read_only: true,
                destructive: false
            }
        );
        assert_eq!(
            h(json!({"annotations": {"destructiveHint": false}})),
            Hints {
                read_only: false,
                destructive: false
            }
        );
    }

    #[test]
    fn call_values() {
        assert_eq!(
            call_value(&tool_result("t", json!({"a": 1}), false)),
            Ok(json!({"a": 1}))
        );
        assert_eq!(
            call_value(&json!({"content": text_content("hi")})),
            Ok(json!("hi"))
        );
        let two = json!([{"type": "text", "text": "a"}, {"type": "image"}]);
        assert_eq!(call_value(&json!({"content": two})), Ok(two.clone()));
        assert_eq!(call_value(&json!({})), Ok(json!([])));
        let e = call_value(&tool_error("boom")).expect_err("an error");
        assert_eq!(e.text, "boom");
        assert_eq!(e.content, text_content("boom"));
    }
}
