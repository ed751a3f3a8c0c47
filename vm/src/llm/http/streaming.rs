//! Streamed exchanges (`stream = true`), on the thread transport.
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
use crate::llm::stream::StreamDecoder;
use crate::llm::{CancelToken, LlmError, LlmErrorKind, TextEvent, TextSink};
use crossbeam::channel::{Receiver, RecvTimeoutError, Sender};
use std::io::Read;
use std::time::{Duration, Instant};

/// The reading thread's own bound on a whole stream, in request timeouts
/// (the caller's idle timeout normally ends it much earlier).
pub(super) const STREAM_CAP: u32 = 30;

/// What the reading thread passes on.
enum Piece {
    Head {
        status: u16,
        retry_after: Option<Duration>,
        /// An event stream or NDJSON body, decoded as it comes.
        streamed: bool,
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

impl HttpCore {
    /// One streamed exchange; attempt `attempt` names the sink's deltas.
    pub(super) fn exchange_streamed(
        &self,
        headers: &[(String, String)],
        body: String,
        cancel: &CancelToken,
        sink: Option<&TextSink>,
        attempt: u32,
    ) -> Result<Streamed, LlmError> {
        let (tx, rx) = crossbeam::channel::bounded::<Piece>(64);
        let (agent, url, headers) = (self.agent.clone(), self.endpoint.clone(), headers.to_vec());
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
        self.receive(&rx, cancel, sink, attempt)
    }

    fn receive(
        &self,
        rx: &Receiver<Piece>,
        cancel: &CancelToken,
        sink: Option<&TextSink>,
        attempt: u32,
    ) -> Result<Streamed, LlmError> {
        let started = Instant::now();
        let idle = self.opts.timeout;
        let mut last = started;
        let mut head: Option<(u16, Option<Duration>, bool)> = None;
        let mut decoder = StreamDecoder::new(self.opts.protocol);
        let mut whole: Vec<u8> = Vec::new();
        let mut deltas: Vec<String> = Vec::new();
        let mut first_token = None;
        let mut sent_text = false;
        let done = |exchange: Exchange, first_token, sent_text| {
            Ok(Streamed {
                exchange,
                first_token,
                sent_text,
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
                    if last.elapsed() >= idle {
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
                        return done(exchange, first_token, sent_text);
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let exchange = Exchange::Transport {
                        kind: LlmErrorKind::Connect,
                        message: "HTTP thread ended without a result".into(),
                    };
                    return done(exchange, first_token, sent_text);
                }
            };
            last = Instant::now();
            match piece {
                Piece::Head {
                    status,
                    retry_after,
                    streamed,
                } => head = Some((status, retry_after, streamed)),
                Piece::Bytes(bytes) => match head {
                    Some((_, _, true)) => {
                        let fed = decoder.feed(&bytes, &mut deltas);
                        // Text before a bad event did arrive: it goes out,
                        // and the retry's `Reset` takes it back.
                        for text in deltas.drain(..) {
                            first_token.get_or_insert_with(|| started.elapsed());
                            if let Some(sink) = sink {
                                sink.send(&TextEvent::Delta { attempt, text });
                                sent_text = true;
                            }
                        }
                        if let Err(message) = fed {
                            let exchange = Exchange::Transport {
                                kind: LlmErrorKind::InvalidResponse,
                                message,
                            };
                            return done(exchange, first_token, sent_text);
                        }
                    }
                    _ => whole.extend_from_slice(&bytes),
                },
                Piece::End(Some((kind, message))) => {
                    let exchange = Exchange::Transport { kind, message };
                    return done(exchange, first_token, sent_text);
                }
                Piece::End(None) => {
                    let Some((status, retry_after, streamed)) = head else {
                        let exchange = Exchange::Transport {
                            kind: LlmErrorKind::Connect,
                            message: "the reply ended before its head".into(),
                        };
                        return done(exchange, first_token, sent_text);
                    };
                    if !streamed {
                        let exchange = Exchange::Status {
                            status,
                            retry_after,
                            body: String::from_utf8_lossy(&whole).into_owned(),
                        };
                        return done(exchange, first_token, sent_text);
                    }
                    let exchange = match decoder.finish(&mut deltas) {
                        Ok(reply) => {
                            for text in deltas.drain(..) {
                                first_token.get_or_insert_with(|| started.elapsed());
                                if let Some(sink) = sink {
                                    sink.send(&TextEvent::Delta { attempt, text });
                                    sent_text = true;
                                }
                            }
                            Exchange::Streamed { status, reply }
                        }
                        Err(message) => Exchange::Transport {
                            kind: LlmErrorKind::InvalidResponse,
                            message,
                        },
                    };
                    return done(exchange, first_token, sent_text);
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
    let kind = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let streamed =
        (200..300).contains(&status) && (kind.contains("event-stream") || kind.contains("ndjson"));
    let head = Piece::Head {
        status,
        retry_after,
        streamed,
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
