//! OpenAI Chat Completions (`POST {base_url}/chat/completions`), as spoken by
//! OpenAI, vLLM, llama.cpp server, Ollama's `/v1`, LM Studio and OpenRouter.
//! Construct it with [`HttpBackend`](super::http::HttpBackend) and
//! [`Protocol::OpenAi`](super::http::Protocol::OpenAi).

use super::http::{ErrorDetail, Incomplete, Reply, StructuredMode};
use super::prompt::Prepared;
use super::secret::Secret;
use super::{ToolCall, Turn, Usage};
use serde_json::{json, Map, Value};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

pub(crate) fn endpoint(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/chat/completions") {
        base.to_string()
    } else {
        format!("{base}/chat/completions")
    }
}

pub(crate) fn headers(key: Option<&Secret>) -> Vec<(&'static str, String)> {
    match key {
        Some(k) if !k.is_empty() => vec![("authorization", format!("Bearer {}", k.expose()))],
        _ => Vec::new(),
    }
}

/// True for OpenAI's reasoning-model families (`o1`, `o3`, `o4-mini`,
/// `gpt-5`, …, also behind a gateway prefix such as `openai/o3`). They
/// reject `max_tokens` (wanting `max_completion_tokens`, which also covers
/// hidden reasoning) and sampling parameters such as `temperature`. The
/// backend key `reasoning_model` overrides this rule.
pub fn is_reasoning_model(model: &str) -> bool {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    let family = |f: &str| {
        name.strip_prefix(f)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
    };
    family("o1") || family("o3") || family("o4") || name.starts_with("gpt-5")
}

/// `reasoning`: send `max_completion_tokens` and no sampling parameters.
/// `stream`: ask for Server-Sent Events with a final usage chunk.
pub(crate) fn body(p: &Prepared, mode: StructuredMode, reasoning: bool, stream: bool) -> Value {
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

/// The tokens a reply reports (see [`Usage::from_reply`]).
pub(crate) fn usage(v: &Value) -> Usage {
    Usage::from_reply(v, "prompt_tokens", "completion_tokens")
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

/// The error a finish reason stands for, when the reply is not a complete
/// answer.
pub(crate) fn incomplete(finish_reason: &str) -> Option<Incomplete> {
    match finish_reason {
        "length" => Some(Incomplete::Truncated),
        "content_filter" => Some(Incomplete::ContentFilter),
        "refusal" => Some(Incomplete::Refusal),
        _ => None,
    }
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
