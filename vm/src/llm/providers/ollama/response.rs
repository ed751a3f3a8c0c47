//! An `/api/chat` reply: message text and tool calls, counts, errors.

use crate::llm::providers::{ErrorDetail, Reply};
use crate::llm::{ToolCall, Usage};
use serde_json::Value;

/// `message.tool_calls[*].function`: `{name, arguments}` with arguments an
/// object (serialised to text here). Ollama has no call ids: they are made
/// up from the position (`offset` counts calls seen earlier in a stream).
pub(crate) fn tool_calls(message: &Value, offset: usize) -> Vec<ToolCall> {
    crate::llm::providers::openai::function_calls(message, offset, "{}")
}

/// The tokens a reply reports (0 when absent); read also from replies
/// that are rejected, since they were spent.
pub(crate) fn usage(v: &Value) -> Usage {
    let count = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        prompt_tokens: count("prompt_eval_count"),
        completion_tokens: count("eval_count"),
        ..Usage::default()
    }
}

pub(crate) fn parse(v: &Value) -> Result<Reply, String> {
    let message = v.get("message").ok_or("reply has no `message`")?;
    let tool_calls = tool_calls(message, 0);
    let text = match message.get("content").and_then(Value::as_str) {
        Some(t) => t.to_string(),
        None if !tool_calls.is_empty() => String::new(),
        None => return Err("reply has no `message.content`".into()),
    };
    Ok(Reply {
        text,
        usage: usage(v),
        finish_reason: v
            .get("done_reason")
            .and_then(Value::as_str)
            .unwrap_or(if v.get("done") == Some(&Value::Bool(true)) {
                "stop"
            } else {
                "unknown"
            })
            .to_string(),
        model: v.get("model").and_then(Value::as_str).map(str::to_string),
        tool_calls,
    })
}

/// `{"error": "model 'x' not found"}`.
pub(crate) fn error_detail(body: &str) -> ErrorDetail {
    match serde_json::from_str::<Value>(body) {
        Ok(v) => ErrorDetail {
            message: v
                .get("error")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string()),
            code: None,
        },
        Err(_) => ErrorDetail::plain(body),
    }
}
