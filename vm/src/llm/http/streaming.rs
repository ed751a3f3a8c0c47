//! Streamed exchanges (`stream = true`): the decoding shared by both
//! transports ([`StreamFeed`]) and the thread transport's exchange.
//!
//! An HTTP thread sends the request with ureq and passes the reply's bytes
//! on as they arrive (ureq reads chunked and read-until-close bodies); the
//! caller decodes them ([`StreamDecoder`]), hands text deltas to the
//! request's sink, and watches its cancel token and the idle timeout: a
//! stream is given up when no bytes came for `timeout` (the request
//! timeout), however long it has run. The thread ends when it is given up
//! (its next hand-over fails) or at the latest at [`STREAM_CAP`] × timeout.
//!
//! A reply that is not a stream (an error status, a server that ignored
//! `stream`) is read whole and judged as in a non-streamed exchange.

use super::{retry_after, transport_error, Exchange, HttpCore, IdleMark, PoolJob, MAX_BODY};
use crate::llm::http::Protocol;
use crate::llm::secret::Masker;
use crate::llm::stream::StreamDecoder;
use crate::llm::{CancelToken, LlmError, LlmErrorKind, TextEvent, TextSink};
use crossbeam::channel::{Receiver, RecvTimeoutError, Sender};
use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The reading thread's own bound on a whole stream, in request timeouts
/// (the caller's idle timeout normally ends it much earlier).
pub(super) const STREAM_CAP: u32 = 30;

/// What the reading thread passes on.
enum Piece {
    Head {
        status: u16,
        retry_after: Option<Duration>,
        content_type: String,
    },
    Bytes(Vec<u8>),
    /// The body ended: cleanly, or with a transport error.
    End(Option<(LlmErrorKind, String)>),
}

/// What a streamed exchange produced, with the time to its first token.
pub(super) struct Streamed {
    pub exchange: Exchange,
    pub first_token: Option<Duration>,
    /// Text went to the sink (a retry must reset it).
    pub sent_text: bool,
}

/// True for a reply whose body is a stream to decode as it comes.
pub(super) fn is_stream(status: u16, content_type: &str) -> bool {
    let kind = content_type.to_ascii_lowercase();
    (200..300).contains(&status) && (kind.contains("event-stream") || kind.contains("ndjson"))
}

/// One attempt's streamed reply on its way in: decodes body bytes, sends
/// text to the sink, and turns the finished exchange into the decoded
/// reply. Shared by both transports (on the event transport it is fed on
/// the I/O thread).
pub(super) struct StreamFeed {
    protocol: Protocol,
    /// Masks configured secrets in the text before it goes to the sink.
    masker: Arc<Masker>,
    sink: Option<TextSink>,
    attempt: u32,
    started: Instant,
    headed: bool,
    /// Set once the head said the body is a stream.
    decoder: Option<StreamDecoder>,
    /// The first decoding error; the attempt fails with it.
    error: Option<String>,
    deltas: Vec<String>,
    /// When bytes last came.
    pub last: Instant,
    pub first_token: Option<Duration>,
    /// Text went to the sink (a retry must reset it).
    pub sent_text: bool,
}

impl StreamFeed {
    pub fn new(
        protocol: Protocol,
        masker: &Arc<Masker>,
        sink: Option<TextSink>,
        attempt: u32,
        started: Instant,
    ) -> StreamFeed {
        StreamFeed {
            protocol,
            masker: Arc::clone(masker),
            sink,
            attempt,
            started,
            headed: false,
            decoder: None,
            error: None,
            deltas: Vec::new(),
            last: started,
            first_token: None,
            sent_text: false,
        }
    }

    /// The reply's head (only the first call counts).
    pub fn head(&mut self, status: u16, content_type: &str) {
        if !self.headed {
            self.headed = true;
            if is_stream(status, content_type) {
                self.decoder = Some(StreamDecoder::new(self.protocol.wire()));
            }
        }
    }

    pub fn is_streamed(&self) -> bool {
        self.decoder.is_some()
    }

    /// The decoding error so far, if any.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// More body bytes of a streamed reply (ignored for other replies).
    pub fn bytes(&mut self, bytes: &[u8]) {
        self.last = Instant::now();
        if self.error.is_some() {
            return;
        }
        let Some(d) = self.decoder.as_mut() else {
            return;
        };
        let fed = d.feed(bytes, &mut self.deltas);
        // Text before a bad event did arrive: it goes out, and the
        // retry's `Reset` takes it back.
        self.flush();
        if let Err(e) = fed {
            self.error = Some(e);
        }
    }

    fn flush(&mut self) {
        for text in self.deltas.drain(..) {
            self.first_token
                .get_or_insert_with(|| self.started.elapsed());
            if let Some(sink) = &self.sink {
                let text = if self.masker.is_empty() {
                    text
                } else {
                    self.masker.mask_configured(&text)
                };
                sink.send(&TextEvent::Delta {
                    attempt: self.attempt,
                    text,
                });
                self.sent_text = true;
            }
        }
    }

    /// The exchange as judged: a streamed 2xx reply becomes the decoded
    /// reply, or the error of a stream that broke or ended early; anything
    /// else stays as it is.
    pub fn finish(&mut self, exchange: Exchange) -> Exchange {
        let Some(decoder) = self.decoder.take() else {
            return exchange;
        };
        let status = match exchange {
            Exchange::Status { status, .. } if (200..300).contains(&status) => status,
            other => return other,
        };
        if let Some(message) = self.error.take() {
            return Exchange::Transport {
                kind: LlmErrorKind::InvalidResponse,
                message,
            };
        }
        let finished = decoder.finish(&mut self.deltas);
        self.flush();
        match finished {
            Ok(reply) => Exchange::Streamed { status, reply },
            Err(message) => Exchange::Transport {
                kind: LlmErrorKind::InvalidResponse,
                message,
            },
        }
    }
}

impl HttpCore {
    /// One streamed exchange on the thread transport; attempt `attempt`
    /// names the sink's deltas.
    pub(super) fn exchange_streamed(
        &self,
        url: &str,
        headers: &[(String, String)],
        body: String,
        cancel: &CancelToken,
        sink: Option<&TextSink>,
        attempt: u32,
    ) -> Result<Streamed, LlmError> {
        let (tx, rx) = crossbeam::channel::bounded::<Piece>(64);
        let (agent, url, headers) = (self.agent.clone(), url.to_string(), headers.to_vec());
        let cap = self.opts.timeout.saturating_mul(STREAM_CAP);
        let job: PoolJob = Box::new(move |idle: &IdleMark| {
            read_stream(&agent, &url, &headers, body, cap, &tx);
            idle.set();
        });
        if let Err(e) = self.threads.submit(job) {
            return Err(LlmError::new(
                &self.opts.name,
                LlmErrorKind::Connect,
                format!("cannot start HTTP thread: {e}"),
            ));
        }
        let feed = StreamFeed::new(
            self.opts.protocol,
            &self.masker,
            sink.cloned(),
            attempt,
            Instant::now(),
        );
        self.receive(&rx, cancel, feed)
    }

    fn receive(
        &self,
        rx: &Receiver<Piece>,
        cancel: &CancelToken,
        mut feed: StreamFeed,
    ) -> Result<Streamed, LlmError> {
        let idle = self.opts.timeout;
        let mut head: Option<(u16, Option<Duration>)> = None;
        let mut whole: Vec<u8> = Vec::new();
        let done = |exchange: Exchange, feed: &StreamFeed| {
            Ok(Streamed {
                exchange,
                first_token: feed.first_token,
                sent_text: feed.sent_text,
            })
        };
        loop {
            let piece = match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(p) => p,
                Err(RecvTimeoutError::Timeout) => {
                    if cancel.is_cancelled() {
                        return Err(LlmError::new(
                            &self.opts.name,
                            LlmErrorKind::Cancelled,
                            "cancelled",
                        ));
                    }
                    if feed.last.elapsed() >= idle {
                        let what = if head.is_some() {
                            "the stream was idle"
                        } else {
                            "no reply"
                        };
                        let message = format!("timed out ({what} for {} ms)", idle.as_millis());
                        let exchange = Exchange::Transport {
                            kind: LlmErrorKind::Timeout,
                            message,
                        };
                        return done(exchange, &feed);
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let exchange = Exchange::Transport {
                        kind: LlmErrorKind::Connect,
                        message: "HTTP thread ended without a result".into(),
                    };
                    return done(exchange, &feed);
                }
            };
            feed.last = Instant::now();
            match piece {
                Piece::Head {
                    status,
                    retry_after,
                    content_type,
                } => {
                    feed.head(status, &content_type);
                    head = Some((status, retry_after));
                }
                Piece::Bytes(bytes) if feed.is_streamed() => {
                    feed.bytes(&bytes);
                    if let Some(message) = feed.error() {
                        // Given up at once: the rest would not decode.
                        let exchange = Exchange::Transport {
                            kind: LlmErrorKind::InvalidResponse,
                            message: message.to_string(),
                        };
                        return done(exchange, &feed);
                    }
                }
                Piece::Bytes(bytes) => whole.extend_from_slice(&bytes),
                Piece::End(Some((kind, message))) => {
                    let exchange = Exchange::Transport { kind, message };
                    return done(exchange, &feed);
                }
                Piece::End(None) => {
                    let Some((status, retry_after)) = head else {
                        let exchange = Exchange::Transport {
                            kind: LlmErrorKind::Connect,
                            message: "the reply ended before its head".into(),
                        };
                        return done(exchange, &feed);
                    };
                    let exchange = feed.finish(Exchange::Status {
                        status,
                        retry_after,
                        body: String::from_utf8_lossy(&whole).into_owned(),
                    });
                    return done(exchange, &feed);
                }
            }
        }
    }
}

/// Sends the request and passes the reply on piece by piece; stops when
/// the receiver is gone (the caller gave up).
fn read_stream(
    agent: &ureq::Agent,
    url: &str,
    headers: &[(String, String)],
    body: String,
    cap: Duration,
    tx: &Sender<Piece>,
) {
    let mut req = agent
        .post(url)
        .config()
        .timeout_recv_body(Some(cap))
        .build()
        .content_type("application/json");
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let mut resp = match req.send(body) {
        Ok(r) => r,
        Err(e) => {
            let _ = tx.send(Piece::End(Some(transport_error(&e))));
            return;
        }
    };
    let status = resp.status().as_u16();
    let headers = resp.headers();
    let retry_after = retry_after(|k| headers.get(k).and_then(|v| v.to_str().ok()));
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let head = Piece::Head {
        status,
        retry_after,
        content_type,
    };
    if tx.send(head).is_err() {
        return;
    }
    let mut reader = resp.body_mut().with_config().limit(MAX_BODY).reader();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => {
                let _ = tx.send(Piece::End(None));
                return;
            }
            Ok(n) => {
                if tx.send(Piece::Bytes(buf[..n].to_vec())).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                let (kind, message) = match e.kind() {
                    std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                        (LlmErrorKind::Timeout, format!("timed out: {e}"))
                    }
                    _ => (LlmErrorKind::Connect, e.to_string()),
                };
                let message = format!("reading the reply body: {message}");
                let _ = tx.send(Piece::End(Some((kind, message))));
                return;
            }
        }
    }
}
