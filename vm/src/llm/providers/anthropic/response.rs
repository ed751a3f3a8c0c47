//! A Messages reply: text and `tool_use` blocks, usage, errors.

use crate::llm::providers::{ErrorDetail, Reply};
use crate::llm::{ToolCall, Usage};
use serde_json::Value;

/// The tokens a reply reports (see [`Usage::from_reply`]).
/// `input_tokens` counts only the input after the last cache breakpoint:
/// the prompt's tokens are it plus `cache_read_input_tokens` and
/// `cache_creation_input_tokens`.
pub(crate) fn usage(v: &Value) -> Usage {
    let mut u = Usage::from_reply(v, "input_tokens", "output_tokens");
    let count = |k: &str| {
        v.get("usage")
            .and_then(|u| u.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    u.cache_read_tokens = count("cache_read_input_tokens");
    u.cache_write_tokens = count("cache_creation_input_tokens");
    u.prompt_tokens += u.cache_read_tokens + u.cache_write_tokens;
    u
}

pub(crate) fn parse(v: &Value) -> Result<Reply, String> {
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
        tool_calls: content
            .iter()
            .enumerate()
            .filter(|(_, b)| b.get("type").and_then(Value::as_str) == Some("tool_use"))
            .filter_map(|(i, b)| {
                let name = b.get("name").and_then(Value::as_str)?.to_string();
                let id = b
                    .get("id")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("toolu_{i}"), str::to_string);
                let arguments = b.get("input").map_or_else(|| "{}".into(), Value::to_string);
                Some(ToolCall {
                    id,
                    name,
                    arguments,
                })
            })
            .collect(),
    })
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
