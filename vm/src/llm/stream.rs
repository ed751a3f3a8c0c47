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
//! A stream is complete only once its terminal event arrived (`[DONE]` or
//! a `finish_reason`; `message_stop`; `done: true`): anything else — the
//! connection closing early, an undecodable event, an `error` event — is
//! an error of the attempt, never a shorter reply.

use super::http::{Protocol, Reply};
use super::{ollama, ToolCall, Usage};
use serde_json::Value;

/// Largest streamed reply accepted (bytes received).
const MAX_STREAM: usize = 16 << 20;

/// Decodes one streamed reply.
pub struct StreamDecoder {
    protocol: Protocol,
    /// Bytes of an unfinished line.
    line: Vec<u8>,
    received: usize,
    /// SSE: the current event's `data:` lines.
    data: String,
    has_data: bool,
    text: String,
    refusal: String,
    /// Tool calls in order: id, name, argument text.
    calls: Vec<ToolCall>,
    /// OpenAI: call position per `index`; Anthropic: per content block.
    call_slots: Vec<(u64, usize)>,
    finish_reason: Option<String>,
    model: Option<String>,
    usage: Usage,
    /// The reply is whole.
    done: bool,
    /// The terminal event arrived; later events are ignored.
    ended: bool,
}

impl StreamDecoder {
    pub fn new(protocol: Protocol) -> StreamDecoder {
        StreamDecoder {
            protocol,
            line: Vec::new(),
            received: 0,
            data: String::new(),
            has_data: false,
            text: String::new(),
            refusal: String::new(),
            calls: Vec::new(),
            call_slots: Vec::new(),
            finish_reason: None,
            model: None,
            usage: Usage::default(),
            done: false,
            ended: false,
        }
    }

    /// Tokens reported so far (kept on an attempt that fails later).
    pub fn usage(&self) -> Usage {
        self.usage
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
        if !self.done {
            return Err("the stream ended before its final event (cut off)".into());
        }
        let mut finish_reason = self.finish_reason.unwrap_or_else(|| "unknown".to_string());
        let mut text = self.text;
        // As in a non-streamed reply: a refusal without text is named so
        // it is not taken for an answer.
        if text.is_empty() && !self.refusal.is_empty() {
            text = self.refusal;
            finish_reason = "refusal".into();
        }
        // As a whole reply with `content: null` and no tool calls: a
        // stream that brought no text is not an answer (cut-off or
        // filtered replies are judged by their finish reason instead).
        if self.protocol == Protocol::OpenAi
            && text.is_empty()
            && self.calls.is_empty()
            && super::openai::incomplete(&finish_reason).is_none()
        {
            return Err("the streamed reply has no text and no tool calls".into());
        }
        Ok(Reply {
            text,
            usage: self.usage,
            finish_reason,
            model: self.model,
            tool_calls: self.calls,
        })
    }

    fn line_in(&mut self, line: &str, deltas: &mut Vec<String>) -> Result<(), String> {
        if self.protocol == Protocol::Ollama {
            if line.trim().is_empty() {
                return Ok(());
            }
            let v: Value = serde_json::from_str(line)
                .map_err(|e| format!("malformed line in the stream: {e}"))?;
            return self.ollama(&v, deltas);
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
        if self.ended {
            return Ok(());
        }
        if self.protocol == Protocol::OpenAi && data.trim() == "[DONE]" {
            self.done = true;
            self.ended = true;
            return Ok(());
        }
        let v: Value = serde_json::from_str(&data)
            .map_err(|e| format!("malformed event in the stream: {e}"))?;
        match self.protocol {
            Protocol::OpenAi => self.openai(&v, deltas),
            Protocol::Anthropic => self.anthropic(&v, deltas),
            Protocol::Ollama => self.ollama(&v, deltas),
        }
    }

    fn openai(&mut self, v: &Value, deltas: &mut Vec<String>) -> Result<(), String> {
        if let Some(e) = v.get("error") {
            return Err(format!("the stream reported an error: {}", error_text(e)));
        }
        if let Some(m) = v.get("model").and_then(Value::as_str) {
            self.model = Some(m.to_string());
        }
        if v.get("usage").is_some_and(Value::is_object) {
            self.usage = super::openai::usage(v);
        }
        let Some(choice) = v.get("choices").and_then(|c| c.get(0)) else {
            return Ok(());
        };
        if let Some(delta) = choice.get("delta") {
            if let Some(t) = delta.get("content").and_then(Value::as_str) {
                if !t.is_empty() {
                    self.text.push_str(t);
                    deltas.push(t.to_string());
                }
            }
            if let Some(r) = delta.get("refusal").and_then(Value::as_str) {
                self.refusal.push_str(r);
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
                let at = self.call_at(index, "call");
                let call = &mut self.calls[at];
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
            self.finish_reason = Some(r.to_string());
            // The reply is whole (servers that end without `[DONE]` are
            // not cut); the usage chunk and `[DONE]` are read if they come.
            self.done = true;
        }
        Ok(())
    }

    fn anthropic(&mut self, v: &Value, deltas: &mut Vec<String>) -> Result<(), String> {
        let block = |v: &Value| v.get("index").and_then(Value::as_u64).unwrap_or(0);
        match v.get("type").and_then(Value::as_str).unwrap_or("") {
            "message_start" => {
                let m = v.get("message").unwrap_or(&Value::Null);
                if let Some(model) = m.get("model").and_then(Value::as_str) {
                    self.model = Some(model.to_string());
                }
                self.usage = super::anthropic::usage(m);
            }
            "content_block_start" => {
                let b = v.get("content_block").unwrap_or(&Value::Null);
                match b.get("type").and_then(Value::as_str) {
                    Some("tool_use") => {
                        let at = self.call_at(block(v), "toolu");
                        let call = &mut self.calls[at];
                        if let Some(id) = b.get("id").and_then(Value::as_str) {
                            call.id = id.to_string();
                        }
                        if let Some(name) = b.get("name").and_then(Value::as_str) {
                            call.name = name.to_string();
                        }
                    }
                    Some("text") => {
                        if let Some(t) = b.get("text").and_then(Value::as_str) {
                            if !t.is_empty() {
                                self.text.push_str(t);
                                deltas.push(t.to_string());
                            }
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
                            self.text.push_str(t);
                            deltas.push(t.to_string());
                        }
                    }
                    Some("input_json_delta") => {
                        let at = self.call_at(block(v), "toolu");
                        if let Some(j) = d.get("partial_json").and_then(Value::as_str) {
                            self.calls[at].arguments.push_str(j);
                            // A structured reply given through the reply
                            // tool streams to the op like text.
                            if self.calls[at].name == super::anthropic::REPLY_TOOL {
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
                    self.finish_reason = Some(r.to_string());
                }
                // Output tokens are cumulative; input tokens come with
                // `message_start` (and again here on newer servers).
                let later = super::anthropic::usage(v);
                if later.completion_tokens > 0 {
                    self.usage.completion_tokens = later.completion_tokens;
                }
                if later.prompt_tokens > 0 {
                    self.usage.prompt_tokens = later.prompt_tokens;
                }
            }
            "message_stop" => {
                self.done = true;
                self.ended = true;
                // A tool call with no argument text took no arguments.
                for c in &mut self.calls {
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

    fn ollama(&mut self, v: &Value, deltas: &mut Vec<String>) -> Result<(), String> {
        if self.ended {
            return Ok(());
        }
        if let Some(e) = v.get("error") {
            return Err(format!("the stream reported an error: {}", error_text(e)));
        }
        if let Some(m) = v.get("model").and_then(Value::as_str) {
            self.model = Some(m.to_string());
        }
        if let Some(message) = v.get("message") {
            if let Some(t) = message.get("content").and_then(Value::as_str) {
                if !t.is_empty() {
                    self.text.push_str(t);
                    deltas.push(t.to_string());
                }
            }
            let more = ollama::tool_calls(message, self.calls.len());
            self.calls.extend(more);
        }
        if v.get("done") == Some(&Value::Bool(true)) {
            self.done = true;
            self.ended = true;
            self.usage = ollama::usage(v);
            self.finish_reason = Some(
                v.get("done_reason")
                    .and_then(Value::as_str)
                    .unwrap_or("stop")
                    .to_string(),
            );
        }
        Ok(())
    }

    /// The position in `calls` of the call streamed under `key` (an OpenAI
    /// `index`, an Anthropic block index), added when new.
    fn call_at(&mut self, key: u64, id_prefix: &str) -> usize {
        if let Some(&(_, at)) = self.call_slots.iter().find(|(k, _)| *k == key) {
            return at;
        }
        let at = self.calls.len();
        self.calls.push(ToolCall {
            id: format!("{id_prefix}_{at}"),
            name: String::new(),
            arguments: String::new(),
        });
        self.call_slots.push((key, at));
        at
    }
}

/// `{"message", "type"}` of an error event, or its text.
fn error_text(e: &Value) -> String {
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| e.as_str())
        .map_or_else(|| e.to_string(), str::to_string);
    match e.get("type").and_then(Value::as_str) {
        Some(t) => format!("{t}: {message}"),
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        protocol: Protocol,
        body: &str,
        cut_every: usize,
    ) -> (Vec<String>, Result<Reply, String>) {
        let mut d = StreamDecoder::new(protocol);
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
