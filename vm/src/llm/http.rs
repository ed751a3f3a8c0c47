//! The HTTP backends (`openai`, `anthropic`, `ollama`) and their shared
//! reliability layer: timeouts, retries with exponential backoff and jitter,
//! `Retry-After`, cancellation, attempt telemetry, local schema validation
//! with one repair round, and key redaction.
//!
//! Retry policy (see `docs/backends.md`): connection errors, timeouts,
//! malformed or truncated bodies, 408, 409, 429 and 5xx are retried up to
//! `max_retries` times; 400/401/403/404 (and other 4xx) and spend-limit
//! errors (`insufficient_quota`, billing) are not. A server delay
//! (`retry-after-ms`, `Retry-After` in seconds or as an HTTP date) is
//! honoured up to `max_retry_after`; otherwise the delay is
//! `base_delay * 2^(n-1)` capped at `max_delay`, with equal jitter.
//!
//! Over the usual size: the backend's core (preparing a call, the attempt
//! loop that judges every outcome, and the three ways a call runs —
//! blocking, on an HTTP thread, started on the event transport and carried
//! on on a thread) shares the `Via` / `Stop` / `Made` states that make each
//! call's outcome arrive exactly once, and reads best in one place. The
//! settings and reply types are in `http/options.rs`, the threads in
//! `http/pool.rs`, streamed exchanges in `http/streaming.rs`, the event
//! transport in `http/events.rs` and `http/framing.rs`.

mod events;
mod framing;
mod limits;
mod options;
mod pool;
mod probe;
mod streaming;

pub use probe::ServerInfo;

pub use options::{
    ErrorDetail, HttpOptions, HttpTransport, Incomplete, Protocol, Reply, RetryPolicy,
    StructuredMode,
};

use pool::{HttpThreads, IdleMark, PoolJob};

use super::jsonschema;
use super::prompt::{self, Prepared};
use super::providers::{BodyOptions, WireProtocol};
use super::secret::{self, Masker};
use super::{
    Attempt, AttemptLog, AttemptObserver, CancelToken, LlmBackend, LlmError, LlmErrorKind,
    LlmRequest, LlmResponse, NoObserver, OnDone, TextEvent, Usage,
};
use crate::sync::lock;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Largest response body read (bytes).
const MAX_BODY: u64 = 16 << 20;

/// An `openai`, `anthropic` or `ollama` backend.
///
/// Calls run on the backend's own HTTP threads (kept between calls): a
/// blocking [`complete`](LlmBackend::complete) waits for one while watching
/// its cancel token, and [`start`](LlmBackend::start) hands the whole call
/// (retries included) to one and returns at once.
pub struct HttpBackend {
    core: Arc<HttpCore>,
}

/// The backend's state, shared with the HTTP threads running its calls.
struct HttpCore {
    opts: HttpOptions,
    /// The protocol's implementation (from the registry).
    wire: &'static dyn WireProtocol,
    /// The endpoint, without `base_url`'s user-info (sent, if at all, as
    /// an explicit `authorization: Basic` header: see `protocol_headers`).
    endpoint: String,
    /// Every configured secret, masked in every output of the backend.
    masker: Arc<Masker>,
    agent: ureq::Agent,
    /// Local endpoints: the event transport (see `events.rs`).
    events: Option<events::EventTransport>,
    threads: HttpThreads,
    observer: Arc<dyn AttemptObserver>,
    jitter: AtomicU64,
    /// What the server said about each model (`limits.rs`).
    servers: std::sync::Mutex<std::collections::HashMap<String, ServerInfo>>,
}

impl std::fmt::Debug for HttpBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpBackend")
            .field("opts", &self.core.opts)
            .field("endpoint", &self.core.endpoint)
            .finish()
    }
}

/// Whether an HTTP exchange runs on the calling thread or on a pool thread.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    /// The caller is a pool thread already (a started call).
    ThisThread,
    /// The caller waits for a pool thread, watching its cancel token.
    Pool,
    /// The caller must not wait (the event transport's I/O thread, with a
    /// reply in hand): anything that needs another exchange or a pause
    /// stops with [`Stop::NeedsThread`].
    NoWait,
}

/// Why a call did not produce a response.
enum Stop {
    Failed(LlmError),
    /// Continuing needs a thread that may wait ([`Via::NoWait`] only).
    NeedsThread,
}

impl Stop {
    /// The error of a call that may wait (only [`Via::NoWait`] stops for a
    /// thread, so that arm reports an internal mistake).
    fn into_error(self, provider: &str) -> LlmError {
        match self {
            Stop::Failed(e) => e,
            Stop::NeedsThread => LlmError::new(
                provider,
                LlmErrorKind::Connect,
                "internal: a waiting call stopped for a thread",
            ),
        }
    }
}

impl From<LlmError> for Stop {
    fn from(e: LlmError) -> Stop {
        Stop::Failed(e)
    }
}

/// A first exchange made before the call's logic ran (by the event
/// transport).
type First = Option<Made>;

/// An exchange made, how long it took, and for a streamed one when its
/// first token came and whether text went to the sink.
#[derive(Clone)]
struct Made {
    exchange: Exchange,
    took: Duration,
    first_token: Option<Duration>,
    sent_text: bool,
}

/// What one HTTP exchange produced.
#[derive(Clone)]
enum Exchange {
    Status {
        status: u16,
        retry_after: Option<Duration>,
        body: String,
    },
    Transport {
        kind: LlmErrorKind,
        message: String,
    },
    /// A streamed 2xx reply, decoded as it came.
    Streamed {
        status: u16,
        reply: Reply,
    },
}

impl HttpBackend {
    pub fn new(opts: HttpOptions) -> HttpBackend {
        HttpBackend {
            core: Arc::new(HttpCore::new(opts)),
        }
    }

    /// The observer `complete` reports to (`complete_observed` takes its
    /// own). Set it before the first call.
    pub fn with_observer(mut self, observer: Arc<dyn AttemptObserver>) -> HttpBackend {
        if let Some(core) = Arc::get_mut(&mut self.core) {
            core.observer = observer;
        }
        self
    }

    pub fn options(&self) -> &HttpOptions {
        &self.core.opts
    }

    pub fn endpoint(&self) -> &str {
        &self.core.endpoint
    }

    /// Resolves the request against this backend's models and prompts.
    pub fn prepare(&self, request: &LlmRequest) -> Prepared {
        self.core.prepare(request)
    }

    /// The JSON body sent for `p`.
    pub fn body(&self, p: &Prepared) -> Value {
        self.core.body(p)
    }
}

impl HttpCore {
    fn new(opts: HttpOptions) -> HttpCore {
        let endpoint = opts
            .protocol
            .endpoint(&secret::strip_credentials(&opts.base_url));
        let mut masker = Masker::new();
        if let Some(k) = &opts.api_key {
            masker.add(k.expose());
        }
        for (_, v) in &opts.headers {
            masker.add(v.expose());
        }
        masker.add_url(&opts.base_url);
        if let Some((user, password)) = secret::url_credentials(&opts.base_url) {
            masker.add(&format!("{user}:{password}"));
        }
        let mut builder = ureq::Agent::config_builder();
        if is_loopback_url(&endpoint) {
            // A proxy from the environment must not capture local servers.
            builder = builder.proxy(None);
        }
        let config = builder
            .http_status_as_error(false)
            // Like the event transport: a redirect is the server's answer
            // (a `client` error), never followed, since following would
            // send the request, key included, wherever it points.
            .max_redirects(0)
            // Keep a connection per allowed concurrent call, so a fan-out
            // reuses its connections instead of reconnecting every round.
            .max_idle_connections_per_host(opts.concurrency.max(1))
            .max_idle_connections(opts.concurrency.max(1).max(10))
            // Replies are small; ureq's 128 KiB default per direction and
            // connection costs page faults on every fresh connection.
            .input_buffer_size(16 * 1024)
            .output_buffer_size(16 * 1024)
            .timeout_connect(Some(opts.connect_timeout))
            // Per-phase limits rather than a global one: with a global or
            // per-call timeout ureq resolves every request's host on a new
            // thread. The whole attempt is bounded in `exchange`.
            .timeout_send_request(Some(opts.timeout))
            .timeout_send_body(Some(opts.timeout))
            .timeout_recv_response(Some(opts.timeout))
            .timeout_recv_body(Some(opts.timeout))
            .user_agent(concat!("apxm-ais/", env!("CARGO_PKG_VERSION")))
            .build();
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(7)
            ^ (opts.name.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        HttpCore {
            // Only ureq's supported API: the write-coalescing connector
            // built on `ureq::unversioned` is gone (local servers, where
            // the extra segment showed, use the event transport).
            agent: ureq::Agent::new_with_config(config),
            threads: HttpThreads::new(),
            events: match opts.transport {
                HttpTransport::Auto => events::Target::of(&endpoint).and_then(|t| {
                    // Idle connections: one per allowed concurrent call.
                    events::EventTransport::new(t, opts.connect_timeout, opts.concurrency).ok()
                }),
                HttpTransport::Threads => None,
            },
            wire: opts.protocol.wire(),
            endpoint,
            masker: Arc::new(masker),
            observer: Arc::new(NoObserver),
            jitter: AtomicU64::new(seed | 1),
            servers: Default::default(),
            opts,
        }
    }

    fn prepare(&self, request: &LlmRequest) -> Prepared {
        prompt::prepare(
            request,
            &self.opts.instructions,
            &self.opts.models,
            "default",
            self.opts.temperature,
            self.opts.max_tokens,
            Some(&self.opts.op_max_tokens),
        )
    }

    fn body(&self, p: &Prepared) -> Value {
        let o = BodyOptions {
            structured: self.opts.structured,
            stream: self.opts.stream,
            reasoning_model: self.opts.reasoning_model,
        };
        self.wire.body(p, &o)
    }

    /// The URL of a call of `p` (the endpoint, unless the protocol names
    /// the model or the streaming mode in it).
    fn url(&self, p: &Prepared) -> String {
        self.wire
            .request_url(&self.endpoint, &p.model, self.opts.stream)
    }

    fn headers(&self, p: &Prepared) -> Vec<(String, String)> {
        let mut h = self.protocol_headers();
        h.push(("x-apxm-op".into(), p.kind.name().to_string()));
        h
    }

    /// The protocol's headers (key, version) and the configured ones.
    fn protocol_headers(&self) -> Vec<(String, String)> {
        let protocol = self.wire.headers(self.opts.api_key.as_ref());
        let mut h: Vec<(String, String)> = protocol
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        // Configured headers (Azure `api-key`, OpenAI organization, a
        // gateway's) replace a protocol header of the same name.
        for (name, value) in &self.opts.headers {
            h.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
            h.push((name.clone(), value.expose().to_string()));
        }
        // `user:password@` in `base_url` (a gateway's credentials) is sent
        // only as `Basic` authorization, and only when no other header
        // authorizes the call; the URL itself never carries it.
        let authorized = h
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
        if let (Some((user, password)), false) =
            (secret::url_credentials(&self.opts.base_url), authorized)
        {
            let credential = secret::basic_credential(&user, &password);
            h.push(("authorization".into(), format!("Basic {credential}")));
        }
        h
    }

    fn parse(&self, v: &Value) -> Result<Reply, String> {
        self.wire.parse(v)
    }

    fn usage(&self, v: &Value) -> Usage {
        self.wire.usage(v)
    }

    /// Why `reply` is not a complete answer, if it is not.
    fn incomplete(&self, reply: &Reply) -> Option<Incomplete> {
        self.wire.incomplete(&reply.finish_reason)
    }

    fn error_detail(&self, body: &str) -> ErrorDetail {
        self.wire.error_detail(body)
    }

    /// A message (error, attempt) with every configured secret masked, in
    /// every encoding, and key-shaped words too.
    fn redact(&self, text: &str) -> String {
        self.masker
            .mask(&secret::redact_url_in(text, &self.opts.base_url))
    }

    /// A reply with every configured secret masked (a server that echoes
    /// the request's headers must not put a key into the program's data).
    fn mask_reply(&self, reply: &mut Reply) {
        if self.masker.is_empty() {
            return;
        }
        reply.text = self.masker.mask_configured(&reply.text);
        for c in &mut reply.tool_calls {
            c.arguments = self.masker.mask_configured(&c.arguments);
        }
    }

    /// One HTTP exchange. Through the pool, so a cancelled run does not
    /// wait for the network (the thread ends the exchange at the attempt
    /// timeout and then serves the next call).
    fn exchange(
        &self,
        url: &str,
        headers: &[(String, String)],
        body: String,
        cancel: &CancelToken,
        via: Via,
    ) -> Result<Exchange, LlmError> {
        if let Some(ev) = &self.events {
            return self.exchange_evented(ev, url, headers, &body, cancel, None);
        }
        if via == Via::ThisThread {
            return Ok(send(&self.agent, url, headers, body));
        }
        let (tx, rx) = crossbeam::channel::bounded(1);
        let (agent, url, headers) = (self.agent.clone(), url.to_string(), headers.to_vec());
        let job: PoolJob = Box::new(move |idle: &IdleMark| {
            let result = send(&agent, &url, &headers, body);
            idle.set();
            let _ = tx.send(result);
        });
        if let Err(e) = self.threads.submit(job) {
            return Err(LlmError::new(
                &self.opts.name,
                LlmErrorKind::Connect,
                format!("cannot start HTTP thread: {e}"),
            ));
        }
        let deadline = Instant::now() + self.opts.timeout;
        loop {
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(x) => return Ok(x),
                Err(crossbeam::channel::RecvTimeoutError::Timeout) => {
                    if Instant::now() >= deadline {
                        return Ok(self.timed_out());
                    }
                    if cancel.is_cancelled() {
                        return Err(LlmError::new(
                            &self.opts.name,
                            LlmErrorKind::Cancelled,
                            "cancelled",
                        ));
                    }
                }
                Err(crossbeam::channel::RecvTimeoutError::Disconnected) => {
                    return Ok(Exchange::Transport {
                        kind: LlmErrorKind::Connect,
                        message: "HTTP thread ended without a result".into(),
                    })
                }
            }
        }
    }

    /// An attempt that got no whole reply within the attempt timeout.
    fn timed_out(&self) -> Exchange {
        Exchange::Transport {
            kind: LlmErrorKind::Timeout,
            message: format!(
                "timed out (no complete reply within {} ms)",
                self.opts.timeout.as_millis()
            ),
        }
    }

    /// One exchange through the event transport, waiting for its outcome
    /// (the I/O thread watches the deadline and the cancel token). With a
    /// `feed`, the reply's body goes to it as it arrives and the deadline
    /// is an idle timeout.
    fn exchange_evented(
        &self,
        ev: &events::EventTransport,
        url: &str,
        headers: &[(String, String)],
        body: &str,
        cancel: &CancelToken,
        feed: Option<&Arc<std::sync::Mutex<streaming::StreamFeed>>>,
    ) -> Result<Exchange, LlmError> {
        let bytes = match request_bytes(ev.target(), url, headers, body) {
            Ok(b) => b,
            Err(message) => {
                return Ok(Exchange::Transport {
                    kind: LlmErrorKind::Client,
                    message,
                })
            }
        };
        let (tx, rx) = crossbeam::channel::bounded(1);
        ev.submit(vec![events::Call {
            bytes,
            deadline: Instant::now() + self.opts.timeout,
            cancel: cancel.clone(),
            on_outcome: Box::new(move |o| {
                let _ = tx.send(o);
            }),
            stream: feed.map(|f| self.watch(f)),
        }]);
        // The I/O thread ends the call at its deadline (for a stream, once
        // it is idle that long); the margin only guards against that
        // thread being gone.
        let margin = self.opts.timeout + Duration::from_secs(5);
        let outcome = loop {
            match rx.recv_timeout(margin) {
                Err(crossbeam::channel::RecvTimeoutError::Timeout)
                    if feed.is_some_and(|f| lock(f).last.elapsed() < margin) => {}
                other => break other,
            }
        };
        match outcome {
            Ok(events::Outcome::Done(x, _)) => Ok(x),
            Ok(events::Outcome::Cancelled) => Err(LlmError::new(
                &self.opts.name,
                LlmErrorKind::Cancelled,
                "cancelled",
            )),
            Err(crossbeam::channel::RecvTimeoutError::Timeout) => Ok(self.timed_out()),
            Err(crossbeam::channel::RecvTimeoutError::Disconnected) => Ok(Exchange::Transport {
                kind: LlmErrorKind::Connect,
                message: "the I/O thread ended without a result".into(),
            }),
        }
    }

    /// How the event transport hands a streamed reply's body to `feed`.
    fn watch(
        &self,
        feed: &Arc<std::sync::Mutex<streaming::StreamFeed>>,
    ) -> Box<events::StreamWatch> {
        let feed = Arc::clone(feed);
        Box::new(events::StreamWatch {
            on_body: Arc::new(move |status, headers, bytes| {
                let mut f = lock(&feed);
                f.head(
                    status,
                    super::wire::header(headers, "content-type").unwrap_or(""),
                );
                f.bytes(bytes);
            }),
            idle: self.opts.timeout,
        })
    }

    fn next_jitter(&self) -> u64 {
        // xorshift64*; races only mix the state further.
        let mut x = self.jitter.load(Ordering::Relaxed);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.jitter.store(x, Ordering::Relaxed);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Backoff before retry number `n` (1-based) without a server delay.
    fn backoff(&self, n: u32) -> Duration {
        let r = &self.opts.retry;
        let exp = r.base_delay.saturating_mul(
            1u32.checked_shl(n.saturating_sub(1).min(20))
                .unwrap_or(u32::MAX),
        );
        let d = exp.min(r.max_delay);
        let half = d / 2;
        let span = half.as_micros() as u64;
        let extra = if span == 0 {
            0
        } else {
            self.next_jitter() % (span + 1)
        };
        half + Duration::from_micros(extra)
    }

    /// Sends `p` until it succeeds, fails for good, or retries run out.
    /// `number` counts attempts across the whole call (repairs included).
    /// `first`, when given, is the outcome of the first exchange, made
    /// already.
    fn call(
        &self,
        p: &Prepared,
        cancel: &CancelToken,
        observer: &dyn AttemptObserver,
        number: &mut u32,
        via: Via,
        first: &mut First,
    ) -> Result<Reply, Stop> {
        let sink = p.on_text.as_ref();
        let headers = self.headers(p);
        // Checked here so both transports refuse alike, before sending; a
        // line break would split the request. The header is named, its
        // value never shown.
        if let Some((name, _)) = headers.iter().find(|(_, v)| v.contains(['\r', '\n'])) {
            return Err(self
                .fail(
                    LlmErrorKind::Client,
                    None,
                    format!("the `{name}` header value contains a line break; check the backend's settings"),
                    *number,
                )
                .into());
        }
        let body = self.body(p).to_string();
        let url = self.url(p);
        let mut retries = 0u32;
        loop {
            if cancel.is_cancelled() {
                return Err(self
                    .fail(LlmErrorKind::Cancelled, None, "cancelled".into(), *number)
                    .into());
            }
            let made = first.take();
            if made.is_none() && via == Via::NoWait {
                return Err(Stop::NeedsThread);
            }
            *number += 1;
            let (outcome, latency, first_token, sent_text) = match made {
                Some(m) => (m.exchange, m.took, m.first_token, m.sent_text),
                None => {
                    let started = Instant::now();
                    let made = match (&self.events, self.opts.stream) {
                        (Some(ev), true) => {
                            let feed = streaming::StreamFeed::new(
                                self.opts.protocol,
                                &self.masker,
                                sink.cloned(),
                                *number,
                                started,
                            );
                            let feed = Arc::new(std::sync::Mutex::new(feed));
                            self.exchange_evented(ev, &url, &headers, &body, cancel, Some(&feed))
                                .map(|x| {
                                    let mut f = lock(&feed);
                                    let x = f.finish(x);
                                    (x, f.first_token, f.sent_text)
                                })
                        }
                        (None, true) => self
                            .exchange_streamed(&url, &headers, body.clone(), cancel, sink, *number)
                            .map(|s| (s.exchange, s.first_token, s.sent_text)),
                        (_, false) => self
                            .exchange(&url, &headers, body.clone(), cancel, via)
                            .map(|x| (x, None, false)),
                    };
                    match made {
                        Ok((x, first_token, sent)) => (x, started.elapsed(), first_token, sent),
                        Err(mut e) => {
                            // The request went out (or was going out) when
                            // the call was cancelled: it is an attempt.
                            observer.on_attempt(&self.unanswered(*number, &e, started.elapsed()));
                            e.attempts = *number;
                            return Err(e.into());
                        }
                    }
                }
            };
            // Known when the server sent a well-formed reply (kept on the
            // attempt even when the reply is not accepted).
            let mut finish_reason = None;
            let mut usage = Usage::default();
            // (kind, status, message, retryable, server delay)
            // A 2xx reply, parsed (from its body, or decoded from its stream).
            let (outcome, replied) = match outcome {
                Exchange::Status { status, body, .. } if (200..300).contains(&status) => {
                    let parsed = serde_json::from_str::<Value>(&body)
                        .map_err(|e| format!("malformed JSON body: {e}"))
                        .and_then(|v| {
                            usage = self.usage(&v);
                            self.parse(&v)
                        });
                    (None, Some((status, parsed)))
                }
                Exchange::Streamed { status, reply } => {
                    usage = reply.usage;
                    (None, Some((status, Ok(reply))))
                }
                other => (Some(other), None),
            };
            let failure: (LlmErrorKind, Option<u16>, String, bool, Option<Duration>) = match (
                outcome, replied,
            ) {
                (_, Some((status, Ok(reply)))) => {
                    finish_reason = Some(reply.finish_reason.clone());
                    match self.incomplete(&reply) {
                        Some(Incomplete::Truncated) if !self.opts.accept_incomplete => (
                            LlmErrorKind::Truncated,
                            Some(status),
                            self.truncated_message(p, &reply),
                            false,
                            None,
                        ),
                        Some(why) if !self.opts.accept_incomplete => {
                            (why.kind(), Some(status), why.message(&reply), false, None)
                        }
                        _ => {
                            observer.on_attempt(&Attempt {
                                provider: self.opts.name.clone(),
                                number: *number,
                                status: Some(status),
                                error: None,
                                message: None,
                                latency,
                                retry_in: None,
                                server_delay: false,
                                finish_reason,
                                usage,
                                first_token,
                            });
                            return Ok(reply);
                        }
                    }
                }
                (_, Some((status, Err(m)))) => {
                    (LlmErrorKind::InvalidResponse, Some(status), m, true, None)
                }
                (Some(Exchange::Transport { kind, message }), None) => {
                    (kind, None, message, true, None)
                }
                (Some(Exchange::Streamed { status, .. }), None) => (
                    LlmErrorKind::InvalidResponse,
                    Some(status),
                    "internal: a reply was judged twice".into(),
                    false,
                    None,
                ),
                (None, None) => (
                    LlmErrorKind::InvalidResponse,
                    None,
                    "internal: no exchange outcome".into(),
                    false,
                    None,
                ),
                (
                    Some(Exchange::Status {
                        status,
                        retry_after,
                        body,
                    }),
                    None,
                ) => {
                    let detail = self.error_detail(&body);
                    let spend = detail.is_spend_limit();
                    let (kind, retryable) = match status {
                        401 | 403 => (LlmErrorKind::Auth, false),
                        408 => (LlmErrorKind::Timeout, true),
                        409 => (LlmErrorKind::Client, true),
                        429 if spend => (LlmErrorKind::Client, false),
                        429 => (LlmErrorKind::RateLimited, true),
                        500..=599 => (LlmErrorKind::Server, !spend),
                        _ => (LlmErrorKind::Client, false),
                    };
                    let mut message = detail.message;
                    if (300..400).contains(&status) {
                        message = format!(
                            "the server redirected the request (HTTP {status}), which is not followed; set base_url to the final address"
                        );
                    }
                    if spend {
                        message = format!("spend limit or quota exhausted, not retried: {message}");
                    }
                    (kind, Some(status), message, retryable, retry_after)
                }
            };
            let (kind, status, message, retryable, server) = failure;
            let message = self.redact(&message);
            let again = retryable && retries < self.opts.retry.max_retries;
            if again && via == Via::NoWait {
                return Err(Stop::NeedsThread);
            }
            let delay = if again {
                retries += 1;
                Some(match server {
                    Some(d) => d.min(self.opts.retry.max_retry_after),
                    None => self.backoff(retries),
                })
            } else {
                None
            };
            observer.on_attempt(&Attempt {
                provider: self.opts.name.clone(),
                number: *number,
                status,
                error: Some(kind),
                message: Some(message.clone()),
                latency,
                retry_in: delay,
                server_delay: again && server.is_some(),
                finish_reason,
                usage,
                first_token,
            });
            // The sink has text of an attempt that will be retried.
            if let (Some(sink), true, Some(_)) = (sink, sent_text, delay) {
                sink.send(&TextEvent::Reset { attempt: *number });
            }
            match delay {
                Some(d) => {
                    if !sleep_cancellable(d, cancel) {
                        return Err(self
                            .fail(
                                LlmErrorKind::Cancelled,
                                status,
                                "cancelled while waiting to retry".into(),
                                *number,
                            )
                            .into());
                    }
                }
                None => {
                    let message = if *number > 1 {
                        format!("{message} (after {} attempts)", *number)
                    } else {
                        message
                    };
                    return Err(self.fail(kind, status, message, *number).into());
                }
            }
        }
    }

    /// The attempt record of request `number`, sent but never answered
    /// (the call was cancelled meanwhile): every request sent is counted.
    fn unanswered(&self, number: u32, e: &LlmError, latency: Duration) -> Attempt {
        Attempt {
            provider: self.opts.name.clone(),
            number,
            status: None,
            error: Some(e.kind),
            message: Some(e.message.clone()),
            latency,
            retry_in: None,
            server_delay: false,
            finish_reason: None,
            usage: Usage::default(),
            first_token: None,
        }
    }

    fn fail(
        &self,
        kind: LlmErrorKind,
        status: Option<u16>,
        message: String,
        attempts: u32,
    ) -> LlmError {
        LlmError {
            provider: self.opts.name.clone(),
            status,
            message: self.redact(&message),
            attempts,
            kind,
        }
    }
}

/// True for `http://127.0.0.1…`, `http://localhost…`, `http://[::1]…`.
fn is_loopback_url(url: &str) -> bool {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let authority = rest.split('/').next().unwrap_or("");
    let host = authority
        .rsplit_once('@')
        .map(|(_, h)| h)
        .unwrap_or(authority);
    host.starts_with("127.") || host.starts_with("localhost") || host.starts_with("[::1]")
}

/// Sleeps `d` in short slices; false when cancelled meanwhile.
pub(crate) fn sleep_cancellable(d: Duration, cancel: &CancelToken) -> bool {
    let end = Instant::now() + d;
    loop {
        if cancel.is_cancelled() {
            return false;
        }
        let now = Instant::now();
        if now >= end {
            return true;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(10)));
    }
}

fn send(agent: &ureq::Agent, url: &str, headers: &[(String, String)], body: String) -> Exchange {
    let mut req = agent.post(url).content_type("application/json");
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    match req.send(body) {
        Ok(mut resp) => {
            let status = resp.status().as_u16();
            let headers = resp.headers();
            let retry_after = retry_after(|k| headers.get(k).and_then(|v| v.to_str().ok()));
            match resp
                .body_mut()
                .with_config()
                .limit(MAX_BODY)
                .read_to_string()
            {
                Ok(body) => Exchange::Status {
                    status,
                    retry_after,
                    body,
                },
                Err(e) => {
                    let (kind, message) = transport_error(&e);
                    Exchange::Transport {
                        kind,
                        message: format!("reading the reply body: {message}"),
                    }
                }
            }
        }
        Err(e) => {
            let (kind, message) = transport_error(&e);
            Exchange::Transport { kind, message }
        }
    }
}

fn transport_error(e: &ureq::Error) -> (LlmErrorKind, String) {
    match e {
        ureq::Error::Timeout(t) => (LlmErrorKind::Timeout, format!("timed out ({t})")),
        ureq::Error::Io(io)
            if matches!(
                io.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ) =>
        {
            (LlmErrorKind::Timeout, format!("timed out: {io}"))
        }
        // What the server sent is not a valid HTTP reply (status line,
        // headers, framing, text): named as the event transport names it.
        ureq::Error::Protocol(p) => (
            LlmErrorKind::InvalidResponse,
            format!("malformed HTTP reply: {p}"),
        ),
        ureq::Error::Http(h) => (
            LlmErrorKind::InvalidResponse,
            format!("malformed HTTP reply: {h}"),
        ),
        ureq::Error::LargeResponseHeader(..) | ureq::Error::Decompress(..) => (
            LlmErrorKind::InvalidResponse,
            format!("malformed HTTP reply: {e}"),
        ),
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::InvalidData => (
            LlmErrorKind::InvalidResponse,
            format!("malformed HTTP reply: {io}"),
        ),
        ureq::Error::HostNotFound => (LlmErrorKind::Connect, "host not found".into()),
        ureq::Error::ConnectionFailed => (LlmErrorKind::Connect, "connection failed".into()),
        other => (LlmErrorKind::Connect, format!("connection error: {other}")),
    }
}

/// `retry-after-ms` (OpenAI), else `Retry-After` as seconds or HTTP date.
fn retry_after<'a>(header: impl Fn(&str) -> Option<&'a str>) -> Option<Duration> {
    let get = |k: &str| header(k).map(str::trim);
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let v = get("retry-after")?;
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e6)));
    }
    let at = parse_http_date(v)?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(at.saturating_sub(now)))
}

/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) to Unix seconds.
pub fn parse_http_date(s: &str) -> Option<u64> {
    let parts: Vec<&str> = s.split_whitespace().collect();
    let [_, day, mon, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let day: u64 = day.parse().ok()?;
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mon = months.iter().position(|m| m == mon)? as u64 + 1;
    let year: u64 = year.parse().ok()?;
    let hms: Vec<u64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, sec] = hms.as_slice() else {
        return None;
    };
    if !(1..=31).contains(&day) || year < 1970 || *h > 23 || *m > 59 || *sec > 60 {
        return None;
    }
    // Days from civil (Howard Hinnant).
    let (y, mo) = if mon <= 2 {
        (year - 1, mon + 9)
    } else {
        (year, mon - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    Some(days * 86_400 + h * 3600 + m * 60 + sec)
}

impl LlmBackend for HttpBackend {
    fn name(&self) -> &str {
        &self.core.opts.name
    }

    fn concurrency(&self) -> usize {
        self.core.opts.concurrency.max(1)
    }

    fn complete(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
    ) -> Result<LlmResponse, LlmError> {
        let observer = Arc::clone(&self.core.observer);
        self.core
            .complete_here(request, cancel, observer.as_ref(), Via::Pool)
    }

    fn complete_observed(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
        observer: &dyn AttemptObserver,
    ) -> Result<LlmResponse, LlmError> {
        self.core
            .complete_here(request, cancel, observer, Via::Pool)
    }

    fn starts_without_waiting(&self) -> bool {
        true
    }

    fn server_info(&self) -> Option<ServerInfo> {
        let o = &self.core.opts;
        let model = o
            .models
            .for_class(prompt::ModelClass::Ask)
            .unwrap_or("default");
        Some(self.core.probe_now(model))
    }

    fn start(&self, request: LlmRequest, cancel: CancelToken, done: OnDone) {
        self.start_many(vec![(request, cancel, done)]);
    }

    fn start_many(&self, calls: Vec<(LlmRequest, CancelToken, OnDone)>) {
        if let Some(ev) = &self.core.events {
            return HttpCore::start_evented(&self.core, ev, calls);
        }
        let calls = calls
            .into_iter()
            .map(|(request, cancel, done)| {
                let run: ThreadCall = Box::new(move |core: &HttpCore, log: &AttemptLog| {
                    core.complete_here(&request, &cancel, log, Via::ThisThread)
                });
                (run, done)
            })
            .collect();
        HttpCore::run_on_threads(&self.core, calls);
    }
}

/// A call's work for an HTTP thread: everything up to its result, with its
/// attempts reported to the log.
type ThreadCall = Box<dyn FnOnce(&HttpCore, &AttemptLog) -> Result<LlmResponse, LlmError> + Send>;

impl HttpCore {
    /// A whole call on this thread (the caller may wait).
    fn complete_here(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
        observer: &dyn AttemptObserver,
        via: Via,
    ) -> Result<LlmResponse, LlmError> {
        self.complete(request, cancel, observer, via, None, Instant::now())
            .map_err(|stop| stop.into_error(&self.opts.name))
    }

    /// A call: prepare, exchange (retrying), validate the reply against
    /// the op's schema with one repair round. `first` is the outcome of
    /// the first exchange when it was made already; `started` is when the
    /// call began.
    fn complete(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
        observer: &dyn AttemptObserver,
        via: Via,
        mut first: First,
        started: Instant,
    ) -> Result<LlmResponse, Stop> {
        let mut p = self.prepare(request);
        self.fit(&mut p)?;
        let mut number = 0u32;
        let mut usage = Usage::default();
        let mut repaired = false;
        loop {
            let mut reply = self.call(&p, cancel, observer, &mut number, via, &mut first)?;
            self.wire.finish_reply(&mut reply, &p, self.opts.structured);
            self.mask_reply(&mut reply);
            // Calls are read only when tools were offered: a `tool_use`
            // block or `tool_calls` entry in a reply to a request without
            // tools is not part of an answer.
            if p.tools.is_empty() {
                reply.tool_calls.clear();
            }
            for call in &mut reply.tool_calls {
                call.name = p.tool_names.from_wire(&call.name).to_string();
            }
            usage = usage.plus(&reply.usage);
            let model = reply.model.clone().unwrap_or_else(|| p.model.clone());
            // A reply that calls tools is not the answer the schema is
            // for; the VM runs the tools and asks again.
            let schema = p.schema.as_ref().filter(|_| reply.tool_calls.is_empty());
            // A structured reply cut off at the limit (taken as a value
            // with `accept_incomplete`) is not JSON the model got wrong: a
            // repair round would be cut off the same way.
            if schema.is_some() && self.incomplete(&reply) == Some(Incomplete::Truncated) {
                let message = format!(
                    "{}; a structured ({}) reply that is cut off is not repaired",
                    self.truncated_message(&p, &reply),
                    p.kind.name()
                );
                return Err(self
                    .fail(LlmErrorKind::Truncated, None, message, number)
                    .into());
            }
            let Some(schema) = schema else {
                return Ok(LlmResponse {
                    text: reply.text,
                    json: None,
                    usage,
                    finish_reason: reply.finish_reason,
                    model,
                    latency: started.elapsed(),
                    simulated: false,
                    tool_calls: reply.tool_calls,
                });
            };
            let checked = jsonschema::extract_json(&reply.text)
                .map_err(|e| format!("the reply is not JSON ({e})"))
                .and_then(|v| match jsonschema::validate(schema, &v) {
                    Ok(()) => Ok(v),
                    Err(e) => Err(format!(
                        "the reply does not match the {} schema at {e}",
                        p.kind.name()
                    )),
                });
            match checked {
                Ok(v) => {
                    return Ok(LlmResponse {
                        text: reply.text,
                        json: Some(v),
                        usage,
                        finish_reason: reply.finish_reason,
                        model,
                        latency: started.elapsed(),
                        simulated: false,
                        tool_calls: Vec::new(),
                    })
                }
                Err(problem) if !repaired => {
                    repaired = true;
                    observer.on_attempt(&Attempt {
                        provider: self.opts.name.clone(),
                        number,
                        status: None,
                        error: Some(LlmErrorKind::InvalidResponse),
                        message: Some(format!("{problem}; asking the model to repair it")),
                        latency: Duration::ZERO,
                        retry_in: Some(Duration::ZERO),
                        server_delay: false,
                        finish_reason: None,
                        usage: Usage::default(),
                        first_token: None,
                    });
                    // Not from the I/O thread: a call that stops there for a
                    // thread judges this reply again on that thread.
                    if let (Some(sink), true, false) =
                        (&p.on_text, self.opts.stream, via == Via::NoWait)
                    {
                        sink.send(&TextEvent::Reset { attempt: number });
                    }
                    p.messages.push(("assistant", reply.text));
                    p.messages.push(("user", prompt::repair_message(&problem)));
                }
                Err(problem) => {
                    return Err(self
                        .fail(
                            LlmErrorKind::InvalidResponse,
                            None,
                            format!("{problem}, still after one repair request"),
                            number,
                        )
                        .into())
                }
            }
        }
    }
}

impl HttpCore {
    /// Runs each call on one of the backend's HTTP threads and hands its
    /// outcome to its `done`, exactly once: on the thread, or here when no
    /// thread can be started.
    fn run_on_threads(core: &Arc<HttpCore>, calls: Vec<(ThreadCall, OnDone)>) {
        type Slot = Arc<std::sync::Mutex<Option<OnDone>>>;
        let mut slots: Vec<Slot> = Vec::with_capacity(calls.len());
        let mut jobs: Vec<PoolJob> = Vec::with_capacity(calls.len());
        for (run, done) in calls {
            let slot: Slot = Arc::new(std::sync::Mutex::new(Some(done)));
            let on_thread = Arc::clone(&slot);
            let core = Arc::clone(core);
            jobs.push(Box::new(move |idle: &IdleMark| {
                let log = AttemptLog::new();
                let result = run(&core, &log);
                idle.set();
                if let Some(done) = lock(&on_thread).take() {
                    done(result, log.attempts());
                }
            }));
            slots.push(slot);
        }
        if let Err(e) = core.threads.submit_all(jobs) {
            for slot in &slots {
                if let Some(done) = lock(slot).take() {
                    let err = LlmError::new(
                        &core.opts.name,
                        LlmErrorKind::Connect,
                        format!("cannot start HTTP thread: {e}"),
                    );
                    done(Err(err), Vec::new());
                }
            }
        }
    }

    /// Starts `calls` on the event transport: each request is written from
    /// this thread; each reply is judged on the I/O thread, and a call that
    /// needs more (a retry, a repair round) goes on on an HTTP thread.
    fn start_evented(
        core: &Arc<HttpCore>,
        ev: &events::EventTransport,
        calls: Vec<(LlmRequest, CancelToken, OnDone)>,
    ) {
        let mut sends = Vec::with_capacity(calls.len());
        for (request, cancel, done) in calls {
            let started = Instant::now();
            let mut p = core.prepare(&request);
            if let Err(e) = core.fit(&mut p) {
                done(Err(e), Vec::new());
                continue;
            }
            let body = core.body(&p).to_string();
            let bytes = request_bytes(ev.target(), &core.url(&p), &core.headers(&p), &body);
            let watched = cancel.clone();
            let on = Arc::clone(core);
            let feed = core.opts.stream.then(|| {
                let feed = streaming::StreamFeed::new(
                    core.opts.protocol,
                    &core.masker,
                    p.on_text.clone(),
                    1,
                    started,
                );
                Arc::new(std::sync::Mutex::new(feed))
            });
            let stream = feed.as_ref().map(|f| core.watch(f));
            let on_outcome: events::OnOutcome = Box::new(move |outcome| {
                on.finish_started(request, cancel, started, outcome, done, feed)
            });
            match bytes {
                Ok(bytes) => sends.push(events::Call {
                    bytes,
                    deadline: started + core.opts.timeout,
                    cancel: watched,
                    on_outcome,
                    stream,
                }),
                Err(message) => on_outcome(events::Outcome::Done(
                    Exchange::Transport {
                        kind: LlmErrorKind::Client,
                        message,
                    },
                    Duration::ZERO,
                )),
            }
        }
        ev.submit(sends);
    }

    /// The rest of a started call once its first exchange is over: judged
    /// here when that settles it (a reply, or a failure not retried),
    /// otherwise carried on on an HTTP thread from the same outcome.
    fn finish_started(
        self: &Arc<HttpCore>,
        request: LlmRequest,
        cancel: CancelToken,
        started: Instant,
        outcome: events::Outcome,
        done: OnDone,
        feed: Option<Arc<std::sync::Mutex<streaming::StreamFeed>>>,
    ) {
        let first = match outcome {
            events::Outcome::Done(exchange, took) => match feed {
                Some(feed) => {
                    let mut f = lock(&feed);
                    Made {
                        exchange: f.finish(exchange),
                        took,
                        first_token: f.first_token,
                        sent_text: f.sent_text,
                    }
                }
                None => Made {
                    exchange,
                    took,
                    first_token: None,
                    sent_text: false,
                },
            },
            events::Outcome::Cancelled => {
                let mut e = LlmError::new(&self.opts.name, LlmErrorKind::Cancelled, "cancelled");
                e.attempts = 1;
                let attempt = self.unanswered(1, &e, started.elapsed());
                return done(Err(e), vec![attempt]);
            }
        };
        let log = AttemptLog::new();
        let again = first.clone();
        match self.complete(&request, &cancel, &log, Via::NoWait, Some(first), started) {
            Ok(r) => return done(Ok(r), log.attempts()),
            Err(Stop::Failed(e)) => return done(Err(e), log.attempts()),
            Err(Stop::NeedsThread) => {}
        }
        let run: ThreadCall = Box::new(move |core: &HttpCore, log: &AttemptLog| {
            core.complete(
                &request,
                &cancel,
                log,
                Via::ThisThread,
                Some(again),
                started,
            )
            .map_err(|stop| stop.into_error(&core.opts.name))
        });
        HttpCore::run_on_threads(self, vec![(run, done)]);
    }
}

/// The bytes of a POST of `body` to `target` for the event transport
/// (framed by `ureq-proto`, see `http/framing.rs`).
fn request_bytes(
    target: &events::Target,
    url: &str,
    headers: &[(String, String)],
    body: &str,
) -> Result<Vec<u8>, String> {
    // The call's own path when its URL is on the target (protocols that
    // name the model in the path); the endpoint's otherwise.
    let path = url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_prefix(target.authority.as_str()))
        .filter(|p| p.starts_with('/') || p.starts_with('?'))
        .unwrap_or(&target.path);
    framing::request_bytes(&target.authority, path, headers, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates() {
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(parse_http_date("soon"), None);
    }
}
