//! The Messages event stream: `message_start`, `content_block_start` /
//! `content_block_delta` (`text_delta`, `input_json_delta`, thinking
//! deltas, which are not text) / `content_block_stop`, `message_delta`
//! (`stop_reason`, output usage), `message_stop`; `ping`; `error`.

use crate::llm::providers::{error_text, StreamState};
use serde_json::Value;

pub(super) fn event(s: &mut StreamState, v: &Value, deltas: &mut Vec<String>) -> Result<(), String> {
    let block = |v: &Value| v.get("index").and_then(Value::as_u64).unwrap_or(0);
    match v.get("type").and_then(Value::as_str).unwrap_or("") {
        "message_start" => {
            let m = v.get("message").unwrap_or(&Value::Null);
            if let Some(model) = m.get("model").and_then(Value::as_str) {
                s.model = Some(model.to_string());
            }
            s.usage = super::usage(m);
        }
        "content_block_start" => {
            let b = v.get("content_block").unwrap_or(&Value::Null);
            match b.get("type").and_then(Value::as_str) {
                Some("tool_use") => {
                    let at = s.call_at(block(v), "toolu");
                    let call = &mut s.calls[at];
                    if let Some(id) = b.get("id").and_then(Value::as_str) {
                        call.id = id.to_string();
                    }
                    if let Some(name) = b.get("name").and_then(Value::as_str) {
                        call.name = name.to_string();
                    }
                }
                Some("text") => {
                    if let Some(t) = b.get("text").and_then(Value::as_str) {
                        s.push_text(t, deltas);
                    }
                }
                _ => {}
            }
        }
        "content_block_delta" => {
            let d = v.get("delta").unwrap_or(&Value::Null);
            match d.get("type").and_then(Value::as_str) {
                Some("text_delta") => {
                    if let Some(t) = d.get("text").and_then(Value::as_str) {
                        s.text.push_str(t);
                        deltas.push(t.to_string());
                    }
                }
                Some("input_json_delta") => {
                    let at = s.call_at(block(v), "toolu");
                    if let Some(j) = d.get("partial_json").and_then(Value::as_str) {
                        s.calls[at].arguments.push_str(j);
                        // A structured reply given through the reply
                        // tool streams to the op like text.
                        if s.calls[at].name == super::REPLY_TOOL {
                            deltas.push(j.to_string());
                        }
                    }
                }
                // thinking_delta, signature_delta: not reply text.
                _ => {}
            }
        }
        "message_delta" => {
            if let Some(r) = v
                .get("delta")
                .and_then(|d| d.get("stop_reason"))
                .and_then(Value::as_str)
            {
                s.finish_reason = Some(r.to_string());
            }
            // Output tokens are cumulative; input tokens come with
            // `message_start` (and again here on newer servers).
            let later = super::usage(v);
            s.usage.merge_later(&later);
        }
        "message_stop" => {
            s.done = true;
            s.ended = true;
            // A tool call with no argument text took no arguments.
            for c in &mut s.calls {
                if c.arguments.is_empty() {
                    c.arguments = "{}".into();
                }
            }
        }
        "error" => {
            let e = v.get("error").unwrap_or(v);
            return Err(format!("the stream reported an error: {}", error_text(e)));
        }
        // ping, content_block_stop, and event types added later.
        _ => {}
    }
    Ok(())
}
