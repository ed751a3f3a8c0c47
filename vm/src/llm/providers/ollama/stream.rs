//! A streamed `/api/chat` reply: one JSON object per line, the last with
//! `done: true` and the counts; `{"error": …}` on failure.

use crate::llm::providers::{error_text, StreamState};
use serde_json::Value;

pub(super) fn event(s: &mut StreamState, v: &Value, deltas: &mut Vec<String>) -> Result<(), String> {
    if let Some(e) = v.get("error") {
        return Err(format!("the stream reported an error: {}", error_text(e)));
    }
    if let Some(m) = v.get("model").and_then(Value::as_str) {
        s.model = Some(m.to_string());
    }
    if let Some(message) = v.get("message") {
        if let Some(t) = message.get("content").and_then(Value::as_str) {
            s.push_text(t, deltas);
        }
        let more = super::tool_calls(message, s.calls.len());
        s.calls.extend(more);
    }
    if v.get("done") == Some(&Value::Bool(true)) {
        s.done = true;
        s.ended = true;
        s.usage = super::usage(v);
        s.finish_reason = Some(
            v.get("done_reason")
                .and_then(Value::as_str)
                .unwrap_or("stop")
                .to_string(),
        );
    }
    Ok(())
}
