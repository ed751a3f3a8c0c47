//! Server-Sent Events (<https://html.spec.whatwg.org/multipage/server-sent-events.html>):
//! framing for a server ([`event`], [`data`], [`KEEP_ALIVE`]) and an
//! incremental decoder for a client ([`Decoder`]).
//!
//! The decoder is fed bytes as they arrive, in chunks of any size (a line
//! or a UTF-8 sequence may be split across chunks), and holds at most one
//! line and one event: a line longer than [`Limits::max_line`] or an event
//! whose data exceeds [`Limits::max_event`] is an error, not a growing
//! buffer.

use serde_json::Value as Json;

/// The media type of an event stream.
pub const CONTENT_TYPE: &str = "text/event-stream";

/// A comment that keeps an idle stream (and its proxies) open.
pub const KEEP_ALIVE: &str = ": keep-alive\n\n";

/// An event with an id (for `Last-Event-ID`) and a type. `data` is
/// serialised as one line of JSON, so no field needs splitting.
pub fn event(id: u64, kind: &str, data: &Json) -> String {
    format!("id: {id}\nevent: {kind}\ndata: {data}\n\n")
}

/// An unnamed event carrying only data (A2A's JSON-RPC responses).
pub fn data(data: &Json) -> String {
    format!("data: {data}\n\n")
}

/// One decoded event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Event {
    /// The `event:` field (`None`: the default type, `message`).
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The last event id seen on the stream so far (`id:` persists).
    pub id: Option<String>,
    /// A `retry:` reconnection time in milliseconds given with this event.
    pub retry: Option<u64>,
}

/// Bounds on what a decoder holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest line, in bytes, without its line ending.
    pub max_line: usize,
    /// Most data one event may carry, in bytes.
    pub max_event: usize,
}

impl Default for Limits {
    /// 1 MiB lines, 16 MiB events: far above any model's stream chunk.
    fn default() -> Limits {
        Limits {
            max_line: 1 << 20,
            max_event: 16 << 20,
        }
    }
}

/// Why a stream cannot be decoded further.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("an event-stream line is longer than {limit} bytes")]
    LineTooLong { limit: usize },
    #[error("an event's data is larger than {limit} bytes")]
    EventTooLarge { limit: usize },
}

impl SseError {
    /// A stable code for the error (`sse.*`).
    pub fn code(&self) -> &'static str {
        match self {
            SseError::LineTooLong { .. } => "sse.line_too_long",
            SseError::EventTooLarge { .. } => "sse.event_too_large",
        }
    }
}

/// The incremental decoder. Feed it chunks with [`Decoder::feed`]; it
/// returns the events each chunk completes.
#[derive(Debug, Default)]
pub struct Decoder {
    limits: Limits,
    /// The current, unfinished line.
    line: Vec<u8>,
    /// The previous chunk ended in `\r`: a `\n` starting the next one
    /// belongs to that line ending.
    after_cr: bool,
    /// Nothing has been decoded yet (a leading byte-order mark is dropped).
    started: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    retry: Option<u64>,
    last_id: Option<String>,
    failed: Option<SseError>,
}

impl Decoder {
    pub fn new(limits: Limits) -> Decoder {
        Decoder {
            limits,
            ..Decoder::default()
        }
    }

    /// The last event id seen (for a reconnection's `Last-Event-ID`).
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// Decodes `chunk`, appending completed events to `out`. After an
    /// error every further call returns the same error.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<Event>) -> Result<(), SseError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let mut rest = chunk;
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if let Some(r) = rest.strip_prefix(b"\n") {
                rest = r;
            }
        }
        while !rest.is_empty() {
            match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(i) => {
                    self.extend_line(&rest[..i])?;
                    if rest[i] == b'\r' {
                        match rest.get(i + 1) {
                            Some(b'\n') => rest = &rest[i + 2..],
                            Some(_) => rest = &rest[i + 1..],
                            None => {
                                self.after_cr = true;
                                rest = &[];
                            }
                        }
                    } else {
                        rest = &rest[i + 1..];
                    }
                    let line = std::mem::take(&mut self.line);
                    if let Err(e) = self.line_done(&line, out) {
                        self.failed = Some(e.clone());
                        return Err(e);
                    }
                }
                None => {
                    self.extend_line(rest)?;
                    rest = &[];
                }
            }
        }
        Ok(())
    }

    /// The end of the stream: the event it ended in the middle of, if any
    /// (the spec discards it; a lenient client may take it). An
    /// unterminated last line counts as a line.
    pub fn finish(mut self) -> Result<Option<Event>, SseError> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            let mut out = Vec::new();
            self.line_done(&line, &mut out)?;
            if let Some(e) = out.pop() {
                return Ok(Some(e));
            }
        }
        Ok(self.has_data.then(|| self.take_event()))
    }

    fn extend_line(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + bytes.len() > self.limits.max_line {
            let e = SseError::LineTooLong {
                limit: self.limits.max_line,
            };
            self.failed = Some(e.clone());
            self.line.clear();
            return Err(e);
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<Event>) -> Result<(), SseError> {
        let mut line = String::from_utf8_lossy(line);
        if !self.started {
            self.started = true;
            if let Some(l) = line.strip_prefix('\u{feff}') {
                line = l.to_string().into();
            }
        }
        if line.is_empty() {
            if self.has_data {
                out.push(self.take_event());
            } else {
                // An event with no data is not dispatched; its type resets.
                self.event = None;
                self.retry = None;
            }
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(()); // a comment
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_ref(), ""),
        };
        match field {
            "data" => {
                let grown = self.data.len() + value.len() + usize::from(self.has_data);
                if grown > self.limits.max_event {
                    return Err(SseError::EventTooLarge {
                        limit: self.limits.max_event,
                    });
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_string()),
            "id" if !value.contains('\0') => self.last_id = Some(value.to_string()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = value.parse().ok();
            }
            _ => {} // unknown fields are ignored
        }
        Ok(())
    }

    fn take_event(&mut self) -> Event {
        self.has_data = false;
        Event {
            event: self.event.take(),
            data: std::mem::take(&mut self.data),
            id: self.last_id.clone(),
            retry: self.retry.take(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode_all(chunks: &[&[u8]]) -> Vec<Event> {
        let mut d = Decoder::new(Limits::default());
        let mut out = Vec::new();
        for c in chunks {
            d.feed(c, &mut out).expect("decodes");
        }
        out
    }

    #[test]
    fn frames_end_with_a_blank_line() {
        assert_eq!(
            event(3, "op", &json!({"a": 1})),
            "id: 3\nevent: op\ndata: {\"a\":1}\n\n"
        );
        assert_eq!(data(&json!("x")), "data: \"x\"\n\n");
    }

    #[test]
    fn what_is_encoded_decodes() {
        let text = format!(
            "{}{KEEP_ALIVE}{}",
            event(7, "op", &json!({"a": [1, 2]})),
            data(&json!("x"))
        );
        let got = decode_all(&[text.as_bytes()]);
        assert_eq!(
            got,
            vec![
                Event {
                    event: Some("op".into()),
                    data: r#"{"a":[1,2]}"#.into(),
                    id: Some("7".into()),
                    retry: None
                },
                Event {
                    event: None,
                    data: "\"x\"".into(),
                    id: Some("7".into()),
                    retry: None
                },
            ]
        );
    }

    #[test]
    fn any_split_of_the_bytes_decodes_the_same() {
        let text = "\u{feff}event: a\r\ndata: é1\rdata:2\n\n: c\r\n\r\ndata\nid: 5\nretry: 30\n\n";
        let whole = decode_all(&[text.as_bytes()]);
        assert_eq!(whole.len(), 2);
        assert_eq!(whole[0].event.as_deref(), Some("a"));
        assert_eq!(whole[0].data, "é1\n2");
        assert_eq!(whole[1].data, "");
        assert_eq!(whole[1].id.as_deref(), Some("5"));
        assert_eq!(whole[1].retry, Some(30));
        let bytes = text.as_bytes();
        for i in 0..=bytes.len() {
            for j in i..=bytes.len() {
                let got = decode_all(&[&bytes[..i], &bytes[i..j], &bytes[j..]]);
                assert_eq!(got, whole, "split at {i}, {j}");
            }
        }
    }

    #[test]
    fn events_without_data_are_not_dispatched() {
        assert!(decode_all(&[b"event: x\n\nid: 1\n\n"]).is_empty());
        let got = decode_all(&[b"event: x\n\ndata: d\n\n"]);
        assert_eq!(got[0].event, None, "the type resets with the empty event");
    }

    #[test]
    fn lines_and_events_are_bounded() {
        let limits = Limits {
            max_line: 16,
            max_event: 20,
        };
        let mut d = Decoder::new(limits);
        let mut out = Vec::new();
        // A long line fails even when it never ends.
        let e = d.feed(&[b'a'; 17], &mut out).expect_err("too long");
        assert_eq!(e, SseError::LineTooLong { limit: 16 });
        assert_eq!(e.code(), "sse.line_too_long");
        assert_eq!(d.feed(b"\n\n", &mut out), Err(e), "the failure sticks");

        let mut d = Decoder::new(limits);
        d.feed(b"data: 0123456789\n", &mut out).expect("fits");
        let e = d
            .feed(b"data: 0123456789\n", &mut out)
            .expect_err("too big");
        assert_eq!(e, SseError::EventTooLarge { limit: 20 });
        assert!(out.is_empty());
    }

    #[test]
    fn the_end_of_the_stream_hands_back_an_unfinished_event() {
        let mut d = Decoder::new(Limits::default());
        let mut out = Vec::new();
        d.feed(b"data: a\n\ndata: b", &mut out).expect("decodes");
        assert_eq!(out.len(), 1);
        let last = d.finish().expect("no error").expect("an event");
        assert_eq!(last.data, "b");
        let d = Decoder::new(Limits::default());
        assert_eq!(d.finish(), Ok(None));
    }
}
