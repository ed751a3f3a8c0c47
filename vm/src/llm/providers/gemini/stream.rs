//! A streamed reply (`streamGenerateContent?alt=sse`): each event's data is
//! a whole `GenerateContentResponse` holding the next parts (text pieces,
//! whole `functionCall`s); the chunk with a `finishReason` ends it, and
//! `usageMetadata` (cumulative) comes with the chunks. An `error` object
//! fails the attempt.

use crate::llm::providers::{error_text, StreamState};
use serde_json::Value;

pub(super) fn event(s: &mut StreamState, v: &Value, deltas: &mut Vec<String>) -> Result<(), String> {
    let v = v.get(0).unwrap_or(v);
    if let Some(e) = v.get("error") {
        return Err(format!("the stream reported an error: {}", error_text(e)));
    }
    if let Some(m) = v.get("modelVersion").and_then(Value::as_str) {
        s.model = Some(m.to_string());
    }
    if v.get("usageMetadata").is_some_and(Value::is_object) {
        s.usage = super::response::usage(v);
    }
    let Some(candidate) = v.get("candidates").and_then(|c| c.get(0)) else {
        if let Some(r) = v.pointer("/promptFeedback/blockReason").and_then(Value::as_str) {
            s.finish_reason = Some(r.to_string());
            s.done = true;
        }
        return Ok(());
    };
    if let Some(parts) = candidate.pointer("/content/parts").and_then(Value::as_array) {
        let mut text = String::new();
        super::response::read_parts(parts, &mut text, &mut s.calls);
        s.push_text(&text, deltas);
    }
    if let Some(r) = candidate.get("finishReason").and_then(Value::as_str) {
        if r == "MALFORMED_FUNCTION_CALL" {
            return Err("the model wrote a malformed function call".into());
        }
        s.finish_reason = Some(r.to_string());
        // Whole; a later chunk with the final usage is still read.
        s.done = true;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::llm::http::Protocol;
    use crate::llm::stream::StreamDecoder;

    #[test]
    fn chunks_join_with_calls_and_usage() {
        let body = concat!(
            "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Hel\"}]}}],\"modelVersion\":\"g\"}\r\n\r\n",
            "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"thinking\",\"thought\":true},{\"text\":\"lo\"}]}}]}\n\n",
            "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{\"a\":1}}}]},\"finishReason\":\"STOP\"}],",
            "\"usageMetadata\":{\"promptTokenCount\":9,\"candidatesTokenCount\":4,\"thoughtsTokenCount\":2}}\n\n",
        );
        for cut in [1, 5, 1000] {
            let Some(p) = Protocol::named("gemini") else {
                panic!("gemini is registered");
            };
            let mut d = StreamDecoder::new(p.wire());
            let mut deltas = Vec::new();
            for piece in body.as_bytes().chunks(cut) {
                d.feed(piece, &mut deltas).expect("decodes");
            }
            let r = d.finish(&mut deltas).expect("complete");
            assert_eq!(deltas, ["Hel", "lo"]);
            assert_eq!(r.text, "Hello");
            assert_eq!(r.finish_reason, "STOP");
            assert_eq!(r.model.as_deref(), Some("g"));
            assert_eq!((r.usage.prompt_tokens, r.usage.completion_tokens), (9, 6));
            assert_eq!(r.tool_calls.len(), 1);
            assert_eq!(r.tool_calls[0].arguments, "{\"a\":1}");
        }
        let Some(p) = Protocol::named("gemini") else {
            panic!("gemini is registered");
        };
        let mut d = StreamDecoder::new(p.wire());
        let mut deltas = Vec::new();
        d.feed(&body.as_bytes()[..60], &mut deltas).ok();
        assert!(d.finish(&mut deltas).is_err(), "cut off before finishReason");
    }
}
