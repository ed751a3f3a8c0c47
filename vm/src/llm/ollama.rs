//! Ollama's native chat API (`POST {base_url}/api/chat`, `stream: false`).
//! Structured ops pass the schema as `format`.

use super::http::{ErrorDetail, Incomplete, Reply, StructuredMode};
use super::prompt::Prepared;
use super::{program_tool_name, wire_tool_name, ToolCall, ToolSpec, Turn, Usage};
use serde_json::{json, Map, Value};

pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:11434";

pub(crate) fn endpoint(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/api/chat") {
        base.to_string()
    } else {
        format!("{}/api/chat", base.trim_end_matches("/api"))
    }
}

pub(crate) fn body(p: &Prepared, mode: StructuredMode) -> Value {
    let mut messages = vec![json!({"role": "system", "content": p.system})];
    // The prompt, the exchange of a tool-calling op, then a repair's turns.
    let (first, rest) = p.messages.split_at(p.messages.len().min(1));
    for (role, text) in first {
        messages.push(json!({"role": role, "content": text}));
    }
    for t in &p.turns {
        messages.push(match t {
            Turn::Assistant { text, calls } => json!({
                "role": "assistant",
                "content": text,
                // Ollama's `arguments` is an object.
                "tool_calls": calls.iter().map(|c| json!({"function": {
                    "name": wire_tool_name(&c.name),
                    "arguments": serde_json::from_str::<Value>(&c.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({})),
                }})).collect::<Vec<_>>(),
            }),
            Turn::ToolResult {
                name,
                content,
                is_error,
                ..
            } => json!({
                "role": "tool",
                "tool_name": wire_tool_name(name),
                "content": if *is_error { format!("ERROR: {content}") } else { content.clone() },
            }),
        });
    }
    for (role, text) in rest {
        messages.push(json!({"role": role, "content": text}));
    }
    let mut options = Map::new();
    if let Some(t) = p.temperature {
        options.insert("temperature".into(), json!(t));
    }
    if let Some(m) = p.max_tokens {
        options.insert("num_predict".into(), json!(m));
    }
    let mut b = Map::new();
    b.insert("model".into(), json!(p.model));
    b.insert("messages".into(), Value::Array(messages));
    b.insert("stream".into(), json!(false));
    if !p.tools.is_empty() {
        // Ollama takes the OpenAI form.
        b.insert("tools".into(), super::openai::function_tools(&p.tools));
    }
    if !options.is_empty() {
        b.insert("options".into(), Value::Object(options));
    }
    if let Some(schema) = &p.schema {
        match mode {
            StructuredMode::JsonSchema => {
                b.insert("format".into(), schema.clone());
            }
            StructuredMode::JsonObject => {
                b.insert("format".into(), json!("json"));
            }
            StructuredMode::Prompt => {}
        }
    }
    Value::Object(b)
}

/// The tokens a reply reports (0 when absent); read also from replies
/// that are rejected, since they were spent.
pub(crate) fn usage(v: &Value) -> Usage {
    let count = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        prompt_tokens: count("prompt_eval_count"),
        completion_tokens: count("eval_count"),
    }
}

pub(crate) fn parse(v: &Value, tools: &[ToolSpec]) -> Result<Reply, String> {
    let text = v
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_str)
        .ok_or("reply has no `message.content`")?
        .to_string();
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
        tool_calls: message_tool_calls(v, tools),
    })
}

/// `message.tool_calls` (read only when tools were offered): Ollama sends
/// no ids, so a call's id is its position.
fn message_tool_calls(v: &Value, tools: &[ToolSpec]) -> Vec<ToolCall> {
    if tools.is_empty() {
        return Vec::new();
    }
    let calls = v
        .get("message")
        .and_then(|m| m.get("tool_calls"))
        .and_then(Value::as_array);
    calls
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            let f = c.get("function");
            ToolCall {
                id: c
                    .get("id")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("call_{i}"), str::to_string),
                name: program_tool_name(
                    tools,
                    f.and_then(|f| f.get("name"))
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                ),
                arguments: match f.and_then(|f| f.get("arguments")) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                },
            }
        })
        .collect()
}

/// The error a `done_reason` stands for, when the reply is not a complete
/// answer.
pub(crate) fn incomplete(done_reason: &str) -> Option<Incomplete> {
    (done_reason == "length").then_some(Incomplete::Truncated)
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
