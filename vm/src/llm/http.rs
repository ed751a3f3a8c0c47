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
//! Here: the backend, its shared state and the `Via` / `Stop` / `Made`
//! states that make each call's outcome arrive exactly once; one exchange
//! on either transport. The attempt loop that judges every outcome
//! (retries, backoff) is in `http/attempt.rs`, the three ways a call runs
//! (blocking, on an HTTP thread, started on the event transport) in
//! `http/calls.rs`, plain HTTP (send, transport errors, `Retry-After`) in
//! `http/transport.rs`, the settings and reply types in `http/options.rs`,
//! the threads in `http/pool.rs`, streamed exchanges in
//! `http/streaming.rs`, the event transport in `http/events.rs` and
//! `http/framing.rs`. No protocol is named: each is a
//! [`WireProtocol`](super::providers::WireProtocol).

mod attempt;
mod calls;
mod events;
mod framing;
mod limits;
mod options;
mod pool;
mod probe;
mod streaming;
mod transport;

pub use options::{HttpOptions, HttpTransport, Protocol, RetryPolicy};

use calls::{request_bytes, ThreadCall};
use pool::{HttpThreads, IdleMark, PoolJob};
pub use transport::parse_http_date;
pub(crate) use transport::sleep_cancellable;
use transport::{is_loopback_url, retry_after, send, transport_error, MAX_BODY};

use super::jsonschema;
use super::prompt::{self, Prepared};
use super::providers::{BodyOptions, ErrorDetail, Incomplete, Reply, ServerInfo, WireProtocol};
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

    fn shared_prefix(&self, request: &LlmRequest) -> Option<crate::llm::cache::SharedPrefix> {
        // Nothing but the system text to share: no class (see
        // `cache::shared_prefix`), and no request to render.
        if request.cache.key.is_none()
            && request.cache.prefix.is_empty()
            && request.tools.is_empty()
        {
            return None;
        }
        let o = &self.core.opts;
        let p = self.core.prepare(request);
        let min = self.core.wire.cache_min_tokens(&p)?;
        let blocks: Vec<_> = request
            .cache
            .prefix
            .iter()
            .filter_map(|&i| request.context.get(i))
            .collect();
        crate::llm::cache::shared_prefix(&o.name, &p, &blocks, min, o.cache_warmup)
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
