//! A streamed Chat Completions reply: Server-Sent Events, each `data:` a
//! `chat.completion.chunk` (`choices[0].delta.content`, `.refusal`,
//! `.tool_calls[index]` pieces to join, `finish_reason`, a last chunk with
//! `usage` when `stream_options.include_usage`), then `data: [DONE]`.

use crate::llm::providers::Reply;
use crate::llm::providers::{error_text, StreamState};
use serde_json::Value;

/// One event's data: `[DONE]` ends the stream, anything else is a chunk.
pub(super) fn data(s: &mut StreamState, data: &str, deltas: &mut Vec<String>) -> Result<(), String> {
    if data.trim() == "[DONE]" {
        s.done = true;
        s.ended = true;
        return Ok(());
    }
    let v: Value = serde_json::from_str(data)
        .map_err(|e| format!("malformed event in the stream: {e}"))?;
    event(s, &v, deltas)
}

pub(super) fn event(s: &mut StreamState, v: &Value, deltas: &mut Vec<String>) -> Result<(), String> {
    if let Some(e) = v.get("error") {
        return Err(format!("the stream reported an error: {}", error_text(e)));
    }
    if let Some(m) = v.get("model").and_then(Value::as_str) {
        s.model = Some(m.to_string());
    }
    if v.get("usage").is_some_and(Value::is_object) {
        s.usage = super::usage(v);
    }
    let Some(choice) = v.get("choices").and_then(|c| c.get(0)) else {
        return Ok(());
    };
    if let Some(delta) = choice.get("delta") {
        if let Some(t) = delta.get("content").and_then(Value::as_str) {
            s.push_text(t, deltas);
        }
        if let Some(r) = delta.get("refusal").and_then(Value::as_str) {
            s.refusal.push_str(r);
        }
        for (n, piece) in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let index = piece
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(n as u64);
            let at = s.call_at(index, "call");
            let call = &mut s.calls[at];
            if let Some(id) = piece.get("id").and_then(Value::as_str) {
                if !id.is_empty() {
                    call.id = id.to_string();
                }
            }
            if let Some(f) = piece.get("function") {
                if let Some(name) = f.get("name").and_then(Value::as_str) {
                    call.name.push_str(name);
                }
                if let Some(a) = f.get("arguments").and_then(Value::as_str) {
                    call.arguments.push_str(a);
                }
            }
        }
    }
    if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
        s.finish_reason = Some(r.to_string());
        // The reply is whole (servers that end without `[DONE]` are
        // not cut); the usage chunk and `[DONE]` are read if they come.
        s.done = true;
    }
    Ok(())
}

/// As a whole reply with `content: null` and no tool calls: a stream that
/// brought no text is not an answer (cut-off or filtered replies are
/// judged by their finish reason instead).
pub(super) fn check(reply: &Reply) -> Result<(), String> {
    if reply.text.is_empty()
        && reply.tool_calls.is_empty()
        && super::incomplete(&reply.finish_reason).is_none()
    {
        return Err("the streamed reply has no text and no tool calls".into());
    }
    Ok(())
}
