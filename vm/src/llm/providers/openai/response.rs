//! A Chat Completions reply: text, refusal, tool calls, usage, errors.

use crate::llm::providers::{ErrorDetail, Reply};
use crate::llm::{ToolCall, Usage};
use serde_json::Value;

/// The tokens a reply reports (see [`Usage::from_reply`]).
/// Cached input: `usage.prompt_tokens_details.cached_tokens` (OpenAI,
/// vLLM, llama.cpp), else llama.cpp's `timings.cache_n`.
pub(crate) fn usage(v: &Value) -> Usage {
    let mut u = Usage::from_reply(v, "prompt_tokens", "completion_tokens");
    u.cache_read_tokens = v
        .pointer("/usage/prompt_tokens_details/cached_tokens")
        .or_else(|| v.pointer("/timings/cache_n"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
        .min(u.prompt_tokens.max(1));
    if u.prompt_tokens == 0 {
        u.cache_read_tokens = 0;
    }
    u
}

pub(crate) fn parse(v: &Value) -> Result<Reply, String> {
    let choice = v
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or("reply has no `choices[0]`")?;
    let message = choice
        .get("message")
        .ok_or("reply has no `choices[0].message`")?;
    let mut finish_reason = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_string();
    let text = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => match message.get("refusal").and_then(Value::as_str) {
            // OpenAI reports a refusal with `finish_reason: "stop"`; name it
            // so the caller does not take the refusal text for an answer.
            Some(r) => {
                finish_reason = "refusal".into();
                r.to_string()
            }
            // Tool calls without text are a different reply (handled with
            // tool use); anything else with no text is not an answer.
            None if has_tool_calls(message) => String::new(),
            None => return Err("`choices[0].message.content` is null".into()),
        },
        Some(other) => return Err(format!("`choices[0].message.content` is {other}, not text")),
    };
    Ok(Reply {
        text,
        usage: usage(v),
        finish_reason,
        model: v.get("model").and_then(Value::as_str).map(str::to_string),
        tool_calls: tool_calls(message),
    })
}

/// `message.tool_calls[*]`: `{id, type: "function", function: {name,
/// arguments}}`, arguments being JSON text as the model wrote it. Entries
/// without a function name are skipped (nothing could run them); a
/// missing id is made up from the position.
pub(crate) fn tool_calls(message: &Value) -> Vec<ToolCall> {
    function_calls(message, 0, "")
}

/// The `tool_calls[*].function` entries of a reply message, in OpenAI's
/// shape (also Ollama's): arguments kept as text (an object, as some
/// servers and Ollama send, serialised; `absent` when there are none); a
/// call without an id gets `call_<offset + position>`.
pub(crate) fn function_calls(message: &Value, offset: usize, absent: &str) -> Vec<ToolCall> {
    let Some(calls) = message.get("tool_calls").and_then(Value::as_array) else {
        return Vec::new();
    };
    calls
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let f = c.get("function")?;
            let name = f.get("name").and_then(Value::as_str)?.to_string();
            let arguments = match f.get("arguments") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => absent.to_string(),
                Some(other) => other.to_string(),
            };
            let id = c
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map_or_else(|| format!("call_{}", offset + i), str::to_string);
            Some(ToolCall {
                id,
                name,
                arguments,
            })
        })
        .collect()
}

fn has_tool_calls(message: &Value) -> bool {
    message
        .get("tool_calls")
        .and_then(Value::as_array)
        .is_some_and(|c| !c.is_empty())
}

/// `{"error": {"message", "type", "code"}}`; some servers send a bare
/// string or `{"detail": ...}`.
pub(crate) fn error_detail(body: &str) -> ErrorDetail {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return ErrorDetail::plain(body);
    };
    let e = v.get("error").unwrap_or(&v);
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| e.as_str())
        .or_else(|| v.get("detail").and_then(Value::as_str))
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string());
    let code = e
        .get("code")
        .and_then(Value::as_str)
        .or_else(|| e.get("type").and_then(Value::as_str))
        .map(str::to_string);
    ErrorDetail { message, code }
}
