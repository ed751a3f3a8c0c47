//! Streamed replies of the mock: Server-Sent Events for the OpenAI and
//! Anthropic paths, newline-delimited JSON for Ollama, sent with chunked
//! transfer encoding (or framed by closing the connection), made from the
//! reply the mock would have sent whole.

use super::server::Pending;
use super::{MockRequest, Proto};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// One scripted tool call: the name and the argument text exactly as the
/// "model" writes them (the text may be invalid JSON).
#[derive(Clone, Debug, PartialEq)]
pub struct MockCall {
    /// The call id; `call_<n>` (by position) when `None`.
    pub id: Option<String>,
    pub name: String,
    pub arguments: String,
}

impl MockCall {
    pub fn new(name: &str, arguments: &str) -> MockCall {
        MockCall {
            id: None,
            name: name.to_string(),
            arguments: arguments.to_string(),
        }
    }

    pub(super) fn id(&self, position: usize) -> String {
        self.id
            .clone()
            .unwrap_or_else(|| format!("call_{position}"))
    }

    /// The arguments as a JSON value for protocols that send an object
    /// (Anthropic `input`, Ollama `arguments`): the parsed text, or the
    /// text itself as a string when it is not JSON.
    pub(super) fn input(&self) -> Value {
        serde_json::from_str(&self.arguments).unwrap_or_else(|_| json!(self.arguments))
    }
}

/// How a streamed reply ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cut {
    /// Whole, chunked.
    None,
    /// The connection closes after the first text event.
    Close,
    /// An event that is not JSON follows the first text event.
    Malformed,
    /// Whole, framed by closing the connection.
    UntilClose,
}

/// True when the request asks for a streamed reply.
pub(super) fn wants_stream(req: &MockRequest) -> bool {
    req.body.get("stream") == Some(&Value::Bool(true)) || super::gemini::wants_stream(req)
}

/// Text in pieces of up to 8 characters, so every reply streams as
/// several deltas.
fn pieces_of(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(8).map(|c| c.iter().collect()).collect()
}

fn sse(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(e) => format!("event: {e}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// The events of `body` (the whole reply of `proto`'s non-streamed form),
/// and the index of the first text event.
fn events(proto: Proto, body: &Value, calls: &[super::MockCall]) -> (Vec<String>, usize) {
    let model = body.get("model").cloned().unwrap_or(Value::Null);
    match proto {
        Proto::OpenAi => {
            let choice = &body["choices"][0];
            let text = choice["message"]["content"].as_str().unwrap_or("");
            let chunk = |delta: Value, finish: Value| {
                json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "model": model,
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            };
            let mut out = vec![sse(
                None,
                &chunk(json!({"role": "assistant", "content": ""}), Value::Null),
            )];
            let first_text = out.len();
            for p in pieces_of(text) {
                out.push(sse(None, &chunk(json!({"content": p}), Value::Null)));
            }
            for (i, c) in calls.iter().enumerate() {
                let start = json!({"tool_calls": [{"index": i, "id": c.id(i), "type": "function",
                                    "function": {"name": c.name, "arguments": ""}}]});
                out.push(sse(None, &chunk(start, Value::Null)));
                for p in pieces_of(&c.arguments) {
                    let more = json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]});
                    out.push(sse(None, &chunk(more, Value::Null)));
                }
            }
            out.push(sse(
                None,
                &chunk(json!({}), choice["finish_reason"].clone()),
            ));
            out.push(sse(
                None,
                &json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "model": model,
                        "choices": [], "usage": body["usage"]}),
            ));
            out.push("data: [DONE]\n\n".to_string());
            (out, first_text)
        }
        Proto::Anthropic => {
            let usage = &body["usage"];
            let start = json!({"type": "message_start", "message": {
                "id": "msg_mock", "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null,
                "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1}}});
            let mut out = vec![
                sse(Some("message_start"), &start),
                sse(Some("ping"), &json!({"type": "ping"})),
            ];
            let mut first_text = None;
            let blocks = body["content"].as_array().cloned().unwrap_or_default();
            for (index, b) in blocks.iter().enumerate() {
                if b["type"] == "text" {
                    let open = json!({"type": "content_block_start", "index": index,
                                      "content_block": {"type": "text", "text": ""}});
                    out.push(sse(Some("content_block_start"), &open));
                    first_text.get_or_insert(out.len());
                    for p in pieces_of(b["text"].as_str().unwrap_or("")) {
                        let d = json!({"type": "content_block_delta", "index": index,
                                       "delta": {"type": "text_delta", "text": p}});
                        out.push(sse(Some("content_block_delta"), &d));
                    }
                } else {
                    let open = json!({"type": "content_block_start", "index": index,
                                      "content_block": {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}});
                    out.push(sse(Some("content_block_start"), &open));
                    // The raw text, so invalid arguments stream as written.
                    let raw = calls
                        .iter()
                        .enumerate()
                        .find(|(i, c)| json!(c.id(*i)) == b["id"])
                        .map(|(_, c)| c.arguments.clone())
                        .unwrap_or_else(|| b["input"].to_string());
                    for p in pieces_of(&raw) {
                        let d = json!({"type": "content_block_delta", "index": index,
                                       "delta": {"type": "input_json_delta", "partial_json": p}});
                        out.push(sse(Some("content_block_delta"), &d));
                    }
                }
                out.push(sse(
                    Some("content_block_stop"),
                    &json!({"type": "content_block_stop", "index": index}),
                ));
            }
            let delta = json!({"type": "message_delta",
                               "delta": {"stop_reason": body["stop_reason"], "stop_sequence": null},
                               "usage": {"output_tokens": usage["output_tokens"]}});
            out.push(sse(Some("message_delta"), &delta));
            out.push(sse(Some("message_stop"), &json!({"type": "message_stop"})));
            let first = first_text.unwrap_or(out.len() - 2);
            (out, first)
        }
        Proto::Gemini => super::gemini::events(body, pieces_of),
        Proto::Ollama => {
            let text = body["message"]["content"].as_str().unwrap_or("");
            let line = |message: Value| {
                format!(
                    "{}\n",
                    json!({"model": model, "created_at": "2026-01-01T00:00:00Z", "message": message, "done": false})
                )
            };
            let mut out = Vec::new();
            for p in pieces_of(text) {
                out.push(line(json!({"role": "assistant", "content": p})));
            }
            if let Some(tc) = body["message"].get("tool_calls") {
                out.push(line(
                    json!({"role": "assistant", "content": "", "tool_calls": tc}),
                ));
            }
            let mut last = body.clone();
            last["message"] = json!({"role": "assistant", "content": ""});
            out.push(format!("{last}\n"));
            (out, 0)
        }
    }
}

/// The pieces of a streamed reply: the head and first event due at `at`,
/// each further event `every` after the one before.
pub(super) fn pieces(
    proto: Proto,
    body: &Value,
    calls: &[super::MockCall],
    at: Instant,
    every: Duration,
    cut: Cut,
) -> Vec<Pending> {
    let content_type = match proto {
        Proto::Ollama => "application/x-ndjson",
        _ => "text/event-stream",
    };
    let (mut events, first_text) = events(proto, body, calls);
    let mut close = false;
    match cut {
        Cut::None | Cut::UntilClose => {}
        Cut::Close => {
            events.truncate(first_text + 1);
            close = true;
        }
        Cut::Malformed => {
            events.truncate(first_text + 1);
            let bad = match proto {
                Proto::Ollama => "{\"message\": {\"content\": \"cu\n".to_string(),
                _ => "data: {\"choices\": [{\"delta\": {\"content\": \"cu\n\n".to_string(),
            };
            events.push(bad);
        }
    }
    let until_close = cut == Cut::UntilClose;
    let head = if until_close {
        format!("HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\nconnection: close\r\n\r\n")
    } else {
        format!("HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n")
    };
    let mut out = vec![Pending {
        at,
        bytes: head.into_bytes(),
        close: false,
        first: None,
        last: None,
    }];
    let mut due = at;
    for (i, e) in events.into_iter().enumerate() {
        let bytes = if until_close {
            e.into_bytes()
        } else {
            format!("{:x}\r\n{e}\r\n", e.len()).into_bytes()
        };
        if i > 0 {
            due += every;
        }
        out.push(Pending {
            at: due,
            bytes,
            close: false,
            first: None,
            last: None,
        });
    }
    if until_close {
        close = true;
    } else if !close {
        out.push(Pending {
            at: due,
            bytes: b"0\r\n\r\n".to_vec(),
            close: false,
            first: None,
            last: None,
        });
    }
    if let Some(last) = out.last_mut() {
        last.close = close;
    }
    out
}
