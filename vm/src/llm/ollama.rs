//! Ollama's native chat API (`POST {base_url}/api/chat`).
//! Structured ops pass the schema as `format`.

use super::http::{ErrorDetail, Incomplete, Reply, StructuredMode};
use super::prompt::Prepared;
use super::{ToolCall, Turn, Usage};
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

/// `stream`: newline-delimited JSON objects, the last with `done: true`.
pub(crate) fn body(p: &Prepared, mode: StructuredMode, stream: bool) -> Value {
    let mut messages = vec![json!({"role": "system", "content": p.system})];
    let mut rest = p.messages.iter();
    if let Some((role, text)) = rest.next() {
        messages.push(json!({"role": role, "content": text}));
    }
    for turn in &p.turns {
        messages.push(match turn {
            Turn::Assistant { text, calls } => {
                let calls: Vec<Value> = calls
                    .iter()
                    .map(|c| {
                        // Ollama wants the arguments as an object.
                        let args = serde_json::from_str::<Value>(&c.arguments)
                            .ok()
                            .filter(Value::is_object)
                            .unwrap_or_else(|| json!({}));
                        json!({"function": {"name": p.tool_names.to_wire(&c.name), "arguments": args}})
                    })
                    .collect();
                json!({"role": "assistant", "content": text, "tool_calls": calls})
            }
            Turn::ToolResult { name, content, .. } => json!({
                "role": "tool",
                "content": content,
                "tool_name": p.tool_names.to_wire(name),
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
    let cap = match (p.max_tokens, p.budget_tokens) {
        (Some(m), Some(b)) => Some(m.min(b)),
        (m, b) => m.or(b),
    };
    if let Some(m) = cap {
        options.insert("num_predict".into(), json!(m));
    }
    let mut b = Map::new();
    b.insert("model".into(), json!(p.model));
    b.insert("messages".into(), Value::Array(messages));
    b.insert("stream".into(), json!(stream));
    if !p.tools.is_empty() {
        b.insert("tools".into(), super::openai::function_tools(p));
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

/// `message.tool_calls[*].function`: `{name, arguments}` with arguments an
/// object (serialised to text here). Ollama has no call ids: they are made
/// up from the position (`offset` counts calls seen earlier in a stream).
pub(crate) fn tool_calls(message: &Value, offset: usize) -> Vec<ToolCall> {
    super::openai::function_calls(message, offset, "{}")
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
