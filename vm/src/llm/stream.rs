//! Streamed replies: bytes in, text deltas out as they arrive, and at the
//! end the same [`Reply`] a non-streamed call would have parsed.
//!
//! - OpenAI Chat Completions: Server-Sent Events, each `data:` a
//!   `chat.completion.chunk` (`choices[0].delta.content`, `.refusal`,
//!   `.tool_calls[index]` pieces to join, `finish_reason`, a last chunk with
//!   `usage` when `stream_options.include_usage`), then `data: [DONE]`.
//! - Anthropic Messages: `message_start`, `content_block_start` /
//!   `content_block_delta` (`text_delta`, `input_json_delta`, thinking
//!   deltas, which are not text) / `content_block_stop`, `message_delta`
//!   (`stop_reason`, output usage), `message_stop`; `ping`; `error`.
//! - Ollama: one JSON object per line, the last with `done: true` and the
//!   counts; `{"error": …}` on failure.
//!
//! The framing (SSE or JSON lines) and the limits are shared, as is the
//! reply being built ([`StreamState`], in `super::providers`); each protocol reads its own events
//! (`providers/<name>/stream.rs`).
//!
//! A stream is complete only once its terminal event arrived (`[DONE]` or
//! a `finish_reason`; `message_stop`; `done: true`): anything else — the
//! connection closing early, an undecodable event, an `error` event — is
//! an error of the attempt, never a shorter reply.

use super::providers::{Framing, Reply, StreamState, WireProtocol};
use super::Usage;
use serde_json::Value;

/// Largest streamed reply accepted (bytes received).
const MAX_STREAM: usize = 16 << 20;

/// Decodes one streamed reply.
pub struct StreamDecoder {
    wire: &'static dyn WireProtocol,
    /// Bytes of an unfinished line.
    line: Vec<u8>,
    received: usize,
    /// SSE: the current event's `data:` lines.
    data: String,
    has_data: bool,
    state: StreamState,
}

impl StreamDecoder {
    pub fn new(wire: &'static dyn WireProtocol) -> StreamDecoder {
        StreamDecoder {
            wire,
            line: Vec::new(),
            received: 0,
            data: String::new(),
            has_data: false,
            state: StreamState::default(),
        }
    }

    /// Tokens reported so far (kept on an attempt that fails later).
    pub fn usage(&self) -> Usage {
        self.state.usage
    }

    /// Takes the next bytes; pushes each piece of reply text to `deltas`.
    /// An error ends the attempt.
    pub fn feed(&mut self, bytes: &[u8], deltas: &mut Vec<String>) -> Result<(), String> {
        self.received += bytes.len();
        if self.received > MAX_STREAM {
            return Err(format!("the streamed reply exceeds {MAX_STREAM} bytes"));
        }
        let mut rest = bytes;
        while let Some(n) = rest.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&rest[..n]);
            rest = &rest[n + 1..];
            let line = std::mem::take(&mut self.line);
            let mut text = std::str::from_utf8(&line)
                .map_err(|_| "the stream has a line that is not UTF-8".to_string())?;
            text = text.strip_suffix('\r').unwrap_or(text);
            self.line_in(text, deltas)?;
        }
        self.line.extend_from_slice(rest);
        Ok(())
    }

    /// The reply, once the stream has ended (the connection closed or the
    /// body's framing ended).
    pub fn finish(mut self, deltas: &mut Vec<String>) -> Result<Reply, String> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            let text = String::from_utf8(line)
                .map_err(|_| "the stream has a line that is not UTF-8".to_string())?;
            self.line_in(text.trim_end_matches('\r'), deltas)?;
        }
        if self.has_data {
            self.dispatch(deltas)?;
        }
        let s = self.state;
        if !s.done {
            return Err("the stream ended before its final event (cut off)".into());
        }
        let mut finish_reason = s.finish_reason.unwrap_or_else(|| "unknown".to_string());
        let mut text = s.text;
        // As in a non-streamed reply: a refusal without text is named so
        // it is not taken for an answer.
        if text.is_empty() && !s.refusal.is_empty() {
            text = s.refusal;
            finish_reason = "refusal".into();
        }
        let reply = Reply {
            text,
            usage: s.usage,
            finish_reason,
            model: s.model,
            tool_calls: s.calls,
        };
        self.wire.stream_check(&reply)?;
        Ok(reply)
    }

    fn line_in(&mut self, line: &str, deltas: &mut Vec<String>) -> Result<(), String> {
        if self.wire.framing() == Framing::JsonLines {
            if line.trim().is_empty() || self.state.ended {
                return Ok(());
            }
            let v: Value = serde_json::from_str(line)
                .map_err(|e| format!("malformed line in the stream: {e}"))?;
            return self.wire.stream_event(&mut self.state, &v, deltas);
        }
        // Server-Sent Events: `field: value` lines, an empty line ends an
        // event; `event:` names are repeated in the JSON `type`, so only
        // `data:` matters.
        if line.is_empty() {
            if self.has_data {
                self.dispatch(deltas)?;
            }
            return Ok(());
        }
        if let Some(value) = line.strip_prefix("data:") {
            let value = value.strip_prefix(' ').unwrap_or(value);
            if self.has_data {
                self.data.push('\n');
            }
            self.data.push_str(value);
            self.has_data = true;
        }
        Ok(())
    }

    fn dispatch(&mut self, deltas: &mut Vec<String>) -> Result<(), String> {
        let data = std::mem::take(&mut self.data);
        self.has_data = false;
        if self.state.ended {
            return Ok(());
        }
        self.wire.stream_data(&mut self.state, &data, deltas)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::http::Protocol;

    fn run(
        protocol: Protocol,
        body: &str,
        cut_every: usize,
    ) -> (Vec<String>, Result<Reply, String>) {
        let mut d = StreamDecoder::new(protocol.wire());
        let mut deltas = Vec::new();
        for piece in body.as_bytes().chunks(cut_every) {
            if let Err(e) = d.feed(piece, &mut deltas) {
                return (deltas, Err(e));
            }
        }
        let r = d.finish(&mut deltas);
        (deltas, r)
    }

    const OPENAI: &str = concat!(
        "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hé\"}}]}\n\n",
        ": keep-alive comment\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"llo\"}}]}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"a\\\":\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"c2\",\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"1}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3}}\n\n",
        "data: [DONE]\n\n",
    );

    #[test]
    fn openai_chunks_join_at_any_cut() {
        for cut in [1, 2, 7, 1000] {
            let (deltas, r) = run(Protocol::OpenAi, OPENAI, cut);
            assert_eq!(deltas, ["Hé", "llo"], "cut {cut}");
            let r = r.expect("complete");
            assert_eq!(r.text, "Héllo");
            assert_eq!(r.finish_reason, "tool_calls");
            assert_eq!(r.model.as_deref(), Some("m"));
            assert_eq!(r.usage.prompt_tokens, 7);
            assert_eq!(r.usage.completion_tokens, 3);
            let calls: Vec<(&str, &str, &str)> = r
                .tool_calls
                .iter()
                .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
                .collect();
            assert_eq!(calls, [("c1", "f", "{\"a\":1}"), ("c2", "g", "{}")]);
        }
    }

    #[test]
    fn a_stream_without_its_final_event_is_an_error() {
        let cut = &OPENAI[..OPENAI.find("finish_reason").unwrap_or(0)];
        let (_, r) = run(Protocol::OpenAi, cut, 5);
        assert!(r.is_err());
        let (_, r) = run(Protocol::OpenAi, "data: {not json\n\n", 3);
        assert!(r.expect_err("an error").contains("malformed"));
        let (_, r) = run(
            Protocol::Anthropic,
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n",
            4,
        );
        assert!(r.is_err());
    }

    #[test]
    fn anthropic_events_give_text_tool_use_and_usage() {
        let body = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude\",\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n",
            "event: ping\ndata: {\"type\":\"ping\"}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi \"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"there\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_9\",\"name\":\"get\",\"input\":{}}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"q\\\": \"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"2}\"}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":3,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_10\",\"name\":\"now\",\"input\":{}}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":20}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        );
        for cut in [1, 3, 64, 10_000] {
            let (deltas, r) = run(Protocol::Anthropic, body, cut);
            assert_eq!(deltas, ["Hi ", "there"]);
            let r = r.expect("complete");
            assert_eq!(r.text, "Hi there");
            assert_eq!(r.finish_reason, "tool_use");
            assert_eq!((r.usage.prompt_tokens, r.usage.completion_tokens), (12, 20));
            assert_eq!(r.tool_calls.len(), 2);
            assert_eq!(r.tool_calls[0].id, "toolu_9");
            assert_eq!(r.tool_calls[0].arguments, "{\"q\": 2}");
            assert_eq!(r.tool_calls[1].arguments, "{}");
        }
    }

    #[test]
    fn an_error_event_fails_the_attempt() {
        let body = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        let (_, r) = run(Protocol::Anthropic, body, 9);
        assert!(r
            .expect_err("an error")
            .contains("overloaded_error: Overloaded"));
        let (_, r) = run(Protocol::Ollama, "{\"error\":\"boom\"}\n", 9);
        assert!(r.expect_err("an error").contains("boom"));
    }

    #[test]
    fn ollama_lines_join_with_tool_calls_and_counts() {
        let body = concat!(
            "{\"model\":\"llama\",\"message\":{\"role\":\"assistant\",\"content\":\"a\"},\"done\":false}\n",
            "{\"model\":\"llama\",\"message\":{\"role\":\"assistant\",\"content\":\"b\"},\"done\":false}\n",
            "{\"model\":\"llama\",\"message\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{\"x\":1}}}]},\"done\":false}\n",
            "{\"model\":\"llama\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,\"done_reason\":\"stop\",\"prompt_eval_count\":5,\"eval_count\":2}",
        );
        let (deltas, r) = run(Protocol::Ollama, body, 4);
        assert_eq!(deltas, ["a", "b"]);
        let r = r.expect("complete");
        assert_eq!(r.text, "ab");
        assert_eq!((r.usage.prompt_tokens, r.usage.completion_tokens), (5, 2));
        assert_eq!(r.tool_calls[0].arguments, "{\"x\":1}");
        assert_eq!(r.tool_calls[0].id, "call_0");
        let (_, r) = run(Protocol::Ollama, &body[..body.len() - 120], 4);
        assert!(r.is_err());
    }
}
