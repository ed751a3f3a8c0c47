//! Anthropic Messages API (`POST {base_url}/v1/messages`). Structured ops
//! are sent a tool whose input schema is the reply's schema, and the model
//! is made to call it (`tool_choice`): the API's way to constrain a reply
//! to a schema. Its input is the reply; it is validated locally.

use super::http::{ErrorDetail, Incomplete, Reply, StructuredMode};
use super::prompt::Prepared;
use super::secret::Secret;
use super::{ToolCall, Turn, Usage};
use serde_json::{json, Map, Value};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub const API_VERSION: &str = "2023-06-01";
/// The API requires `max_tokens`; used when neither the op nor the backend
/// sets one.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

pub(crate) fn endpoint(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/messages") {
        base.to_string()
    } else if base.ends_with("/v1") {
        format!("{base}/messages")
    } else {
        format!("{base}/v1/messages")
    }
}

pub(crate) fn headers(key: Option<&Secret>) -> Vec<(&'static str, String)> {
    let mut h = vec![("anthropic-version", API_VERSION.to_string())];
    if let Some(k) = key.filter(|k| !k.is_empty()) {
        h.push(("x-api-key", k.expose().to_string()));
    }
    h
}

/// The smallest thinking budget the API accepts.
pub const MIN_THINKING_BUDGET: u32 = 1024;

/// The tool a structured reply is given through (never offered with the
/// op's own tools, which the model may need to call first).
pub const REPLY_TOOL: &str = "ais_reply";

/// How a structured op's reply is asked for: through [`REPLY_TOOL`]
/// (`wrapped`: the schema is not an object, which a tool's input must be,
/// so the reply is the input's `value`), or only by the system prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReplyVia {
    Prompt,
    Tool { wrapped: bool },
}

/// Whether `p`'s reply goes through [`REPLY_TOOL`]: a schema, `json_schema`
/// mode, no tools of the op's own, and no extended thinking (the API does
/// not allow a forced tool with it).
pub(crate) fn reply_via(p: &Prepared, mode: StructuredMode) -> ReplyVia {
    match &p.schema {
        Some(s)
            if mode == StructuredMode::JsonSchema
                && p.tools.is_empty()
                && p.budget_tokens.is_none() =>
        {
            ReplyVia::Tool {
                wrapped: s.get("type").and_then(Value::as_str) != Some("object"),
            }
        }
        _ => ReplyVia::Prompt,
    }
}

/// A structured reply given through [`REPLY_TOOL`] becomes the reply's
/// text (the JSON the schema check reads); other replies are unchanged.
pub(crate) fn take_tool_reply(reply: &mut Reply, via: ReplyVia) {
    let ReplyVia::Tool { wrapped } = via else {
        return;
    };
    let Some(i) = reply.tool_calls.iter().position(|c| c.name == REPLY_TOOL) else {
        return;
    };
    let call = reply.tool_calls.remove(i);
    reply.text = match (wrapped, serde_json::from_str::<Value>(&call.arguments)) {
        (true, Ok(v)) => v.get("value").map_or(call.arguments, Value::to_string),
        _ => call.arguments,
    };
}

/// `stream`: ask for the Messages event stream.
pub(crate) fn body(p: &Prepared, stream: bool, mode: StructuredMode) -> Value {
    let mut messages: Vec<Value> = Vec::new();
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
    b.insert("system".into(), json!(p.system));
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
    Value::Object(b)
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

/// The tokens a reply reports (see [`Usage::from_reply`]).
pub(crate) fn usage(v: &Value) -> Usage {
    Usage::from_reply(v, "input_tokens", "output_tokens")
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

/// The error a `stop_reason` stands for, when the reply is not a complete
/// answer.
pub(crate) fn incomplete(stop_reason: &str) -> Option<Incomplete> {
    match stop_reason {
        "max_tokens" => Some(Incomplete::Truncated),
        "refusal" => Some(Incomplete::Refusal),
        _ => None,
    }
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
