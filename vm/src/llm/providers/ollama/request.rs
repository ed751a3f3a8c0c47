//! The `/api/chat` request body.

use crate::llm::providers::StructuredMode;
use crate::llm::prompt::Prepared;
use crate::llm::Turn;
use serde_json::{json, Map, Value};

/// `stream`: newline-delimited JSON objects, the last with `done: true`.
pub(super) fn body(p: &Prepared, mode: StructuredMode, stream: bool) -> Value {
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
        b.insert("tools".into(), crate::llm::providers::openai::function_tools(p));
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

