//! The `generateContent` request body.

use crate::llm::providers::StructuredMode;
use crate::llm::prompt::Prepared;
use crate::llm::Turn;
use serde_json::{json, Map, Value};

pub(super) fn body(p: &Prepared, mode: StructuredMode) -> Value {
    let mut contents: Vec<Value> = Vec::new();
    let mut rest = p.messages.iter();
    if let Some((role, text)) = rest.next() {
        contents.push(text_content(role, text));
    }
    contents.extend(turn_contents(p));
    for (role, text) in rest {
        contents.push(text_content(role, text));
    }
    let mut b = Map::new();
    b.insert(
        "systemInstruction".into(),
        json!({"parts": [{"text": p.system}]}),
    );
    b.insert("contents".into(), Value::Array(contents));
    if !p.tools.is_empty() {
        let decls: Vec<Value> = p
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": p.tool_names.to_wire(&t.name),
                    "description": t.description,
                    // JSON Schema as written (`parameters` takes only the
                    // OpenAPI subset).
                    "parametersJsonSchema": t.parameters,
                })
            })
            .collect();
        b.insert("tools".into(), json!([{"functionDeclarations": decls}]));
    }
    let mut config = Map::new();
    if let Some(t) = p.temperature {
        config.insert("temperature".into(), json!(t));
    }
    if let Some(m) = p.max_tokens {
        config.insert("maxOutputTokens".into(), json!(m));
    }
    // A budget is the model's thinking budget (Gemini 2.5).
    if let Some(budget) = p.budget_tokens {
        config.insert("thinkingConfig".into(), json!({"thinkingBudget": budget}));
    }
    // A reply that calls tools is not the structured answer: with tools
    // offered the schema is asked for in the prompt only.
    if let (Some(schema), true) = (&p.schema, p.tools.is_empty()) {
        match mode {
            StructuredMode::JsonSchema => {
                config.insert("responseMimeType".into(), json!("application/json"));
                config.insert("responseJsonSchema".into(), schema.clone());
            }
            StructuredMode::JsonObject => {
                config.insert("responseMimeType".into(), json!("application/json"));
            }
            StructuredMode::Prompt => {}
        }
    }
    if !config.is_empty() {
        b.insert("generationConfig".into(), Value::Object(config));
    }
    Value::Object(b)
}

/// `user` stays, `assistant` is the API's `model`.
fn role(r: &str) -> &'static str {
    if r == "assistant" {
        "model"
    } else {
        "user"
    }
}

fn text_content(r: &str, text: &str) -> Value {
    json!({"role": role(r), "parts": [{"text": text}]})
}

/// Earlier turns: a `model` content of text and `functionCall` parts, and
/// the results that follow it as `functionResponse` parts of one `user`
/// content. A response must be an object: a result that is not one is
/// wrapped as `{"result": …}` (an error as `{"error": …}`).
fn turn_contents(p: &Prepared) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut results: Vec<Value> = Vec::new();
    for turn in &p.turns {
        match turn {
            Turn::Assistant { text, calls } => {
                if !results.is_empty() {
                    out.push(json!({"role": "user", "parts": std::mem::take(&mut results)}));
                }
                let mut parts = Vec::new();
                if !text.is_empty() {
                    parts.push(json!({"text": text}));
                }
                for c in calls {
                    let args = serde_json::from_str::<Value>(&c.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    parts.push(json!({"functionCall": {
                        "name": p.tool_names.to_wire(&c.name),
                        "args": args,
                    }}));
                }
                out.push(json!({"role": "model", "parts": parts}));
            }
            Turn::ToolResult {
                name,
                content,
                is_error,
                ..
            } => {
                let value = serde_json::from_str::<Value>(content)
                    .unwrap_or_else(|_| Value::String(content.clone()));
                let response = match (is_error, value) {
                    (true, v) => json!({"error": v}),
                    (false, v @ Value::Object(_)) => v,
                    (false, v) => json!({"result": v}),
                };
                results.push(json!({"functionResponse": {
                    "name": p.tool_names.to_wire(name),
                    "response": response,
                }}));
            }
        }
    }
    if !results.is_empty() {
        out.push(json!({"role": "user", "parts": results}));
    }
    out
}
