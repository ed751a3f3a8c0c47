//! The Messages request body: system, messages with tool turns, thinking,
//! tools and the reply tool.

use super::{reply_via, ReplyVia, DEFAULT_MAX_TOKENS, MIN_THINKING_BUDGET, REPLY_TOOL};
use crate::llm::providers::StructuredMode;
use crate::llm::prompt::Prepared;
use crate::llm::CachePoint;
use crate::llm::Turn;
use serde_json::{json, Map, Value};

/// `stream`: ask for the Messages event stream.
pub(super) fn body(p: &Prepared, stream: bool, mode: StructuredMode) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    let mut rest = p.messages.iter();
    if let Some((role, text)) = rest.next() {
        messages.push(json!({"role": role, "content": first_content(p, text)}));
    }
    messages.extend(turn_messages(p));
    for (role, text) in rest {
        messages.push(json!({"role": role, "content": text}));
    }
    let mut b = Map::new();
    b.insert("model".into(), json!(p.model));
    if p.cache_at(CachePoint::System) {
        b.insert(
            "system".into(),
            json!([{"type": "text", "text": p.system, "cache_control": ephemeral()}]),
        );
    } else {
        b.insert("system".into(), json!(p.system));
    }
    b.insert("messages".into(), Value::Array(messages));
    let mut max_tokens = p.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    match p.budget_tokens {
        // Extended thinking: the budget has a floor, `max_tokens` must
        // exceed it (the answer's room stays what it was), and sampling
        // parameters are not allowed with it.
        Some(budget) => {
            let budget = budget.max(MIN_THINKING_BUDGET);
            if max_tokens <= budget {
                max_tokens = budget.saturating_add(max_tokens);
            }
            b.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
        None => {
            if let Some(t) = p.temperature {
                b.insert("temperature".into(), json!(t));
            }
        }
    }
    b.insert("max_tokens".into(), json!(max_tokens));
    if !p.tools.is_empty() {
        let tools: Vec<Value> = p
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": p.tool_names.to_wire(&t.name),
                    "description": t.description,
                    "input_schema": t.parameters,
                })
            })
            .collect();
        b.insert("tools".into(), Value::Array(tools));
    }
    if let (ReplyVia::Tool { wrapped }, Some(schema)) = (reply_via(p, mode), &p.schema) {
        let input_schema = if wrapped {
            json!({"type": "object", "properties": {"value": schema}, "required": ["value"]})
        } else {
            schema.clone()
        };
        b.insert(
            "tools".into(),
            json!([{
                "name": REPLY_TOOL,
                "description": format!("Give the {} reply. Its input is the whole reply.", p.kind.name()),
                "input_schema": input_schema,
            }]),
        );
        b.insert(
            "tool_choice".into(),
            json!({"type": "tool", "name": REPLY_TOOL}),
        );
    }
    if stream {
        b.insert("stream".into(), json!(true));
    }
    if p.cache_at(CachePoint::Tools) {
        if let Some(last) = b
            .get_mut("tools")
            .and_then(Value::as_array_mut)
            .and_then(|t| t.last_mut())
        {
            last["cache_control"] = ephemeral();
        }
    }
    limit_breakpoints(&mut b);
    Value::Object(b)
}

/// A cache breakpoint: the prefix up to here is cached (for 5 minutes).
fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// The API takes at most four breakpoints: the first four in render order
/// (tools → system → messages) stay.
const MAX_BREAKPOINTS: usize = 4;

/// The first user message: plain text, or, with context cache points,
/// text blocks split where they fall, each ending at a point marked.
fn first_content(p: &Prepared, text: &str) -> Value {
    if p.cache_cuts.is_empty() {
        return json!(text);
    }
    let mut blocks = Vec::new();
    let mut from = 0;
    for &cut in &p.cache_cuts {
        if cut <= from || cut > text.len() || !text.is_char_boundary(cut) {
            continue;
        }
        blocks.push(json!({"type": "text", "text": &text[from..cut], "cache_control": ephemeral()}));
        from = cut;
    }
    if from < text.len() {
        blocks.push(json!({"type": "text", "text": &text[from..]}));
    }
    Value::Array(blocks)
}

/// Drops `cache_control` marks past the fourth, in render order.
fn limit_breakpoints(b: &mut Map<String, Value>) {
    let mut seen = 0usize;
    let mut mark = |v: &mut Value| {
        let Some(o) = v.as_object_mut() else {
            return;
        };
        if o.contains_key("cache_control") {
            seen += 1;
            if seen > MAX_BREAKPOINTS {
                o.remove("cache_control");
            }
        }
    };
    for key in ["tools", "system"] {
        if let Some(items) = b.get_mut(key).and_then(Value::as_array_mut) {
            items.iter_mut().for_each(&mut mark);
        }
    }
    if let Some(messages) = b.get_mut("messages").and_then(Value::as_array_mut) {
        for m in messages {
            if let Some(blocks) = m.get_mut("content").and_then(Value::as_array_mut) {
                blocks.iter_mut().for_each(&mut mark);
            }
        }
    }
}

/// Earlier turns: an assistant message of text and `tool_use` blocks, and
/// the results that follow it as `tool_result` blocks of one user message
/// (the API wants all results of a turn together).
fn turn_messages(p: &Prepared) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut results: Vec<Value> = Vec::new();
    for turn in &p.turns {
        match turn {
            Turn::Assistant { text, calls } => {
                if !results.is_empty() {
                    out.push(json!({"role": "user", "content": std::mem::take(&mut results)}));
                }
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for c in calls {
                    // `input` must be an object: arguments that are not
                    // one (the model wrote bad JSON) go back as `{}`; the
                    // tool result says what was wrong with them.
                    let input = serde_json::from_str::<Value>(&c.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": c.id,
                        "name": p.tool_names.to_wire(&c.name),
                        "input": input,
                    }));
                }
                out.push(json!({"role": "assistant", "content": blocks}));
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
        out.push(json!({"role": "user", "content": results}));
    }
    out
}

