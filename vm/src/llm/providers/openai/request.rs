//! The Chat Completions request body.

use crate::llm::providers::StructuredMode;
use crate::llm::prompt::Prepared;
use crate::llm::Turn;
use serde_json::{json, Map, Value};

/// `reasoning`: send `max_completion_tokens` and no sampling parameters.
/// `stream`: ask for Server-Sent Events with a final usage chunk.
pub(super) fn body(p: &Prepared, mode: StructuredMode, reasoning: bool, stream: bool) -> Value {
    let mut messages = vec![json!({"role": "system", "content": p.system})];
    let mut rest = p.messages.iter();
    if let Some((role, text)) = rest.next() {
        messages.push(json!({"role": role, "content": text}));
    }
    messages.extend(turn_messages(p));
    for (role, text) in rest {
        messages.push(json!({"role": role, "content": text}));
    }
    let mut b = Map::new();
    b.insert("model".into(), json!(p.model));
    b.insert("messages".into(), Value::Array(messages));
    if let (Some(t), false) = (p.temperature, reasoning) {
        b.insert("temperature".into(), json!(t));
    }
    // A budget caps the completion, hidden reasoning included, which is
    // what `max_completion_tokens` means (`max_tokens` excludes it).
    match (p.budget_tokens, p.max_tokens) {
        (Some(budget), max) => {
            let cap = max.map_or(budget, |m| m.min(budget));
            b.insert("max_completion_tokens".into(), json!(cap));
        }
        (None, Some(m)) => {
            let key = if reasoning {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            b.insert(key.into(), json!(m));
        }
        (None, None) => {}
    }
    if !p.tools.is_empty() {
        b.insert("tools".into(), function_tools(p));
    }
    // Requests with the same key are routed to the same prompt cache.
    if let Some(key) = &p.cache.key {
        b.insert("prompt_cache_key".into(), json!(key));
    }
    if stream {
        b.insert("stream".into(), json!(true));
        b.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(schema) = &p.schema {
        match mode {
            StructuredMode::JsonSchema => {
                b.insert(
                    "response_format".into(),
                    json!({
                        "type": "json_schema",
                        "json_schema": {"name": format!("{}_reply", p.kind.name()), "schema": schema, "strict": false}
                    }),
                );
            }
            StructuredMode::JsonObject => {
                b.insert("response_format".into(), json!({"type": "json_object"}));
            }
            StructuredMode::Prompt => {}
        }
    }
    Value::Object(b)
}

/// Earlier turns: an assistant message with `tool_calls`, then a `tool`
/// message per result (OpenAI has no error flag; the content says it).
fn turn_messages(p: &Prepared) -> Vec<Value> {
    p.turns
        .iter()
        .map(|turn| match turn {
            Turn::Assistant { text, calls } => {
                let calls: Vec<Value> = calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function", "function": {
                            "name": p.tool_names.to_wire(&c.name),
                            "arguments": c.arguments,
                        }})
                    })
                    .collect();
                let content = if text.is_empty() {
                    Value::Null
                } else {
                    json!(text)
                };
                let mut m = json!({"role": "assistant", "content": content});
                if !calls.is_empty() {
                    m["tool_calls"] = Value::Array(calls);
                }
                m
            }
            Turn::ToolResult {
                call_id, content, ..
            } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
        })
        .collect()
}

/// The offered tools as `[{type: "function", function: {name, description,
/// parameters}}]`, names as the provider sees them (also Ollama's form).
pub(crate) fn function_tools(p: &Prepared) -> Value {
    Value::Array(
        p.tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": p.tool_names.to_wire(&t.name),
                    "description": t.description,
                    "parameters": t.parameters,
                }})
            })
            .collect(),
    )
}

