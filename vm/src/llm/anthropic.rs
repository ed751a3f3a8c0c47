//! Anthropic Messages API (`POST {base_url}/v1/messages`). Structured ops
//! ask for JSON in the system prompt; the reply is validated locally.

use super::http::{ErrorDetail, Incomplete, Reply};
use super::prompt::Prepared;
use super::secret::Secret;
use super::{program_tool_name, wire_tool_name, ToolCall, ToolSpec, Turn, Usage};
use serde_json::{json, Map, Value};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub const API_VERSION: &str = "2023-06-01";
/// The API requires `max_tokens`; used when neither the op nor the backend
/// sets one.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

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

pub(crate) fn body(p: &Prepared) -> Value {
    // The prompt, the exchange of a tool-calling op (the assistant's
    // `tool_use` blocks, then one user message with every `tool_result`),
    // then a JSON repair's turns.
    let (first, rest) = p.messages.split_at(p.messages.len().min(1));
    let mut messages: Vec<Value> = first
        .iter()
        .map(|(role, text)| json!({"role": role, "content": text}))
        .collect();
    let mut results: Vec<Value> = Vec::new();
    for t in &p.turns {
        match t {
            Turn::Assistant { text, calls } => {
                if !results.is_empty() {
                    messages.push(json!({"role": "user", "content": std::mem::take(&mut results)}));
                }
                let mut content = Vec::new();
                if !text.is_empty() {
                    content.push(json!({"type": "text", "text": text}));
                }
                for c in calls {
                    // `input` is an object; arguments that were not one
                    // were refused by the VM, so send what can be sent.
                    let input = serde_json::from_str::<Value>(&c.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    content.push(json!({"type": "tool_use", "id": c.id, "name": wire_tool_name(&c.name), "input": input}));
                }
                messages.push(json!({"role": "assistant", "content": content}));
            }
            Turn::ToolResult {
                call_id,
                content,
                is_error,
                ..
            } => results.push(json!({
                "type": "tool_result",
                "tool_use_id": call_id,
                "content": content,
                "is_error": is_error,
            })),
        }
    }
    if !results.is_empty() {
        messages.push(json!({"role": "user", "content": results}));
    }
    messages.extend(
        rest.iter()
            .map(|(role, text)| json!({"role": role, "content": text})),
    );
    let mut b = Map::new();
    b.insert("model".into(), json!(p.model));
    b.insert("system".into(), json!(p.system));
    b.insert("messages".into(), Value::Array(messages));
    b.insert(
        "max_tokens".into(),
        json!(p.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    if let Some(t) = p.temperature {
        b.insert("temperature".into(), json!(t));
    }
    if !p.tools.is_empty() {
        let tools: Vec<Value> = p
            .tools
            .iter()
            .map(|t| json!({"name": wire_tool_name(&t.name), "description": t.description, "input_schema": t.parameters}))
            .collect();
        b.insert("tools".into(), Value::Array(tools));
    }
    Value::Object(b)
}

/// The tokens a reply reports (see [`Usage::from_reply`]).
pub(crate) fn usage(v: &Value) -> Usage {
    Usage::from_reply(v, "input_tokens", "output_tokens")
}

pub(crate) fn parse(v: &Value, tools: &[ToolSpec]) -> Result<Reply, String> {
    let content = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or("reply has no `content` array")?;
    let text: String = content
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("");
    Ok(Reply {
        text,
        usage: usage(v),
        finish_reason: v
            .get("stop_reason")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string(),
        model: v.get("model").and_then(Value::as_str).map(str::to_string),
        // Calls are read only when tools were offered: a `tool_use` block
        // in a reply to a request without tools is not an answer's part.
        tool_calls: content
            .iter()
            .filter(|_| !tools.is_empty())
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
            .enumerate()
            .map(|(i, b)| ToolCall {
                id: b
                    .get("id")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("toolu_{i}"), str::to_string),
                name: program_tool_name(
                    tools,
                    b.get("name").and_then(Value::as_str).unwrap_or_default(),
                ),
                arguments: b.get("input").map(Value::to_string).unwrap_or_default(),
            })
            .collect(),
    })
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

/// `{"type": "error", "error": {"type": "overloaded_error", "message": ...}}`.
pub(crate) fn error_detail(body: &str) -> ErrorDetail {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return ErrorDetail::plain(body);
    };
    let e = v.get("error").unwrap_or(&v);
    ErrorDetail {
        message: e
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string()),
        code: e.get("type").and_then(Value::as_str).map(str::to_string),
    }
}
