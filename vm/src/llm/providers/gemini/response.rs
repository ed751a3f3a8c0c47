//! A `generateContent` reply: the first candidate's parts (text,
//! `functionCall`), `finishReason`, `usageMetadata`, errors.

use crate::llm::providers::{ErrorDetail, Reply};
use crate::llm::{ToolCall, Usage};
use serde_json::Value;

/// `usageMetadata`: the prompt's tokens and the reply's, thinking
/// included (billed as output); 0 when absent.
pub(crate) fn usage(v: &Value) -> Usage {
    let count = |k: &str| {
        v.get("usageMetadata")
            .and_then(|u| u.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    Usage {
        prompt_tokens: count("promptTokenCount"),
        completion_tokens: count("candidatesTokenCount") + count("thoughtsTokenCount"),
        // Part of the prompt's count (implicit or explicit caching).
        cache_read_tokens: count("cachedContentTokenCount"),
        cache_write_tokens: 0,
    }
}

pub(crate) fn parse(v: &Value) -> Result<Reply, String> {
    let model = v
        .get("modelVersion")
        .and_then(Value::as_str)
        .map(str::to_string);
    let Some(candidate) = v.get("candidates").and_then(|c| c.get(0)) else {
        // The prompt itself was blocked: no candidate, a reason.
        return match v.pointer("/promptFeedback/blockReason").and_then(Value::as_str) {
            Some(reason) => Ok(Reply {
                text: String::new(),
                usage: usage(v),
                finish_reason: reason.to_string(),
                model,
                tool_calls: Vec::new(),
            }),
            None => Err("reply has no `candidates[0]`".into()),
        };
    };
    let finish_reason = candidate
        .get("finishReason")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_string();
    if finish_reason == "MALFORMED_FUNCTION_CALL" {
        return Err("the model wrote a malformed function call".into());
    }
    let parts = candidate
        .pointer("/content/parts")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    read_parts(parts, &mut text, &mut tool_calls);
    Ok(Reply {
        text,
        usage: usage(v),
        finish_reason,
        model,
        tool_calls,
    })
}

/// Appends the parts' answer text (not thoughts) to `text` and their
/// `functionCall`s to `calls`; a call without an id gets `call_<n>`.
pub(super) fn read_parts(parts: &[Value], text: &mut String, calls: &mut Vec<ToolCall>) {
    for part in parts {
        if let Some(t) = part.get("text").and_then(Value::as_str) {
            if part.get("thought") != Some(&Value::Bool(true)) {
                text.push_str(t);
            }
        }
        let Some(f) = part.get("functionCall") else {
            continue;
        };
        let Some(name) = f.get("name").and_then(Value::as_str) else {
            continue;
        };
        let id = f
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map_or_else(|| format!("call_{}", calls.len()), str::to_string);
        calls.push(ToolCall {
            id,
            name: name.to_string(),
            arguments: f
                .get("args")
                .map_or_else(|| "{}".to_string(), Value::to_string),
        });
    }
}

/// `{"error": {"code": 429, "message": …, "status": "RESOURCE_EXHAUSTED"}}`
/// (also as a one-element array, as some proxies send it).
pub(crate) fn error_detail(body: &str) -> ErrorDetail {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return ErrorDetail::plain(body);
    };
    let v = v.get(0).unwrap_or(&v);
    let e = v.get("error").unwrap_or(v);
    ErrorDetail {
        message: e
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string()),
        code: e.get("status").and_then(Value::as_str).map(str::to_string),
    }
}
