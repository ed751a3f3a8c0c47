//! The LLM backend contract between the VM and the providers.
//!
//! The VM's I/O executor calls [`LlmBackend::complete`] on a blocking I/O
//! thread (never on a scheduler worker). Providers (`sim`, `openai`,
//! `anthropic`, `ollama`) implement the trait in sibling modules: the HTTP
//! backend (`http`, shared transport and retry policy) speaks one of the
//! wire protocols registered in `providers` (one folder each).

pub mod attained;
pub mod cache;
pub mod http;
pub mod jsonschema;
pub mod kinds;
pub mod prompt;
pub mod providers;
pub mod record;
pub mod resilience;
pub mod route;
pub mod schema;
pub mod secret;
pub mod sim;
pub mod stream;
pub mod tools;
pub mod wire;

pub use providers::{anthropic, ollama, openai};

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Which AIS operation issued the request; selects system prompt, model and
/// latency class. Defined by the op table (`ais_ir::LlmKind`).
pub use ais_ir::LlmKind as LlmOpKind;

/// A labelled context block appended to the prompt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextBlock {
    pub label: String,
    pub text: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlmRequest {
    pub kind: LlmOpKind,
    /// Agent that issued the call (for policies, budgets, telemetry).
    pub agent: String,
    pub system: Option<String>,
    pub prompt: String,
    pub context: Vec<ContextBlock>,
    /// Explicit model override (op attribute); otherwise the backend picks
    /// its model for `kind`.
    pub model: Option<String>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    /// When set, the reply must be JSON valid against this schema.
    pub json_schema: Option<serde_json::Value>,
    /// Completion (or, for models that think, thinking) token budget from
    /// the op's `budget:` argument; each provider honours it its own way.
    #[serde(default)]
    pub budget_tokens: Option<u32>,
    /// A configured backend by name (the op's `backend:`); `None`: the
    /// run's backend. Routed by [`route::Router`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// Tools the model may call (the op's `tools:`), provider-neutral; the
    /// backend sends them in its protocol's native form.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// The exchange so far when the model has called tools: its earlier
    /// turns and the results, in order, after the prompt and context.
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// Prompt-cache hints (the op's `cache_key:` / `cache_points:`).
    #[serde(default, skip_serializing_if = "CacheHints::is_empty")]
    pub cache: CacheHints,
    /// Receives the reply's text as it streams in (never serialised).
    #[serde(skip)]
    pub on_text: Option<TextSink>,
    /// Set by the scheduler when the op lies on the run's estimated
    /// critical path (no slack in its region, nor in the regions it runs
    /// in): only such calls are hedged (`llm::resilience`). Not part of
    /// what is asked, so never serialised (record keys ignore it).
    #[serde(skip)]
    pub critical: bool,
    /// The attained service of the call's run, for admission by least
    /// attained service (`attained`); never serialised.
    #[serde(skip)]
    pub attained: attained::Attained,
}

/// A tool offered to the model: its name as the program knows it (backends
/// map it to what their protocol allows and back), what it does, and a
/// JSON Schema of its arguments (an object).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

/// One tool call the model asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id (made up by the backend when it has none),
    /// echoed back with the result.
    pub id: String,
    /// The tool's name as in [`ToolSpec::name`] (already mapped back).
    pub name: String,
    /// The arguments as the model wrote them: JSON text, not yet checked
    /// (it may be invalid; the VM validates it and tells the model).
    pub arguments: String,
}

/// One earlier step of a tool-calling exchange.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "turn", rename_all = "snake_case")]
pub enum Turn {
    /// The model's reply that asked for tools (its text may be empty).
    Assistant { text: String, calls: Vec<ToolCall> },
    /// The outcome of one call: the tool's value as JSON text, or a
    /// message saying why the call was refused or failed.
    ToolResult {
        call_id: String,
        name: String,
        content: String,
        is_error: bool,
    },
}

/// Text of a streamed reply, as it arrives.
#[derive(Clone, Debug, PartialEq)]
pub enum TextEvent {
    /// More text of attempt `attempt` (1-based).
    Delta { attempt: u32, text: String },
    /// Attempt `attempt` was cut off and will be retried: forget its text.
    Reset { attempt: u32 },
}

/// Where streamed text goes; shared by clones of a request.
#[derive(Clone)]
pub struct TextSink(pub Arc<dyn Fn(&TextEvent) + Send + Sync>);

impl TextSink {
    pub fn new(f: impl Fn(&TextEvent) + Send + Sync + 'static) -> TextSink {
        TextSink(Arc::new(f))
    }

    pub fn send(&self, event: &TextEvent) {
        (self.0)(event)
    }
}

impl std::fmt::Debug for TextSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TextSink")
    }
}

/// A sink does not change what a request asks, so requests that differ
/// only in where their text streams are equal.
impl PartialEq for TextSink {
    fn eq(&self, _: &TextSink) -> bool {
        true
    }
}

/// The tokens of a call. `prompt_tokens` counts every input token, the
/// cached ones included (as OpenAI and Gemini report it; Anthropic's three
/// input counts are added up), so the two cache counts are parts of it, as
/// OpenTelemetry's `gen_ai.usage.cache_*.input_tokens` are of
/// `gen_ai.usage.input_tokens`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Input tokens served from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache (Anthropic).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Prompt-cache hints of a request, set from the op's attributes
/// (`cache_key:`, `cache_points:`; a compiler pass may fill them). Each
/// protocol uses what it has: Anthropic puts `cache_control` breakpoints
/// where `points` say (at most 4, in render order tools → system →
/// messages), OpenAI sends `key` as `prompt_cache_key`, Gemini caches
/// implicitly. Empty hints change nothing in a request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheHints {
    /// Requests with the same key share a cached prefix (OpenAI routes
    /// them to the same cache).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Where stable prefixes end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub points: Vec<CachePoint>,
    /// Context blocks (0-based) rendered before the prompt, in this order
    /// (the op's `cache_prefix:`), so that calls sharing them share a
    /// prefix byte for byte. The prompt and the labelled blocks are the
    /// same; only their order in the user message changes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefix: Vec<usize>,
}

impl CacheHints {
    pub fn is_empty(&self) -> bool {
        self.key.is_none() && self.points.is_empty() && self.prefix.is_empty()
    }
}

/// The end of a stable prefix segment of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CachePoint {
    /// After the tool definitions.
    Tools,
    /// After the system prompt.
    System,
    /// After the first `n` context blocks of the user message in render
    /// order, and after the prompt when it comes first (no `prefix`, or
    /// `n` past the prefix); `n` = 0 without a prefix: after the prompt.
    Context(usize),
}

impl CachePoint {
    /// `tools`, `system`, `context`, `context:N` (the spelling of the
    /// `cache_points:` attribute).
    pub fn parse(s: &str) -> Option<CachePoint> {
        match s.trim() {
            "tools" => Some(CachePoint::Tools),
            "system" => Some(CachePoint::System),
            "context" => Some(CachePoint::Context(usize::MAX)),
            other => other
                .strip_prefix("context:")
                .and_then(|n| n.trim().parse().ok())
                .map(CachePoint::Context),
        }
    }
}

impl Usage {
    /// The two counts of a reply's `usage` object (named per protocol);
    /// 0 when absent. Read also from rejected replies: they were spent.
    pub(crate) fn from_reply(v: &serde_json::Value, prompt: &str, completion: &str) -> Usage {
        let count = |k: &str| {
            v.get("usage")
                .and_then(|u| u.get(k))
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0)
        };
        Usage {
            prompt_tokens: count(prompt),
            completion_tokens: count(completion),
            ..Usage::default()
        }
    }

    /// The sum of two counts, field by field.
    pub fn plus(&self, other: &Usage) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens + other.prompt_tokens,
            completion_tokens: self.completion_tokens + other.completion_tokens,
            cache_read_tokens: self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens: self.cache_write_tokens + other.cache_write_tokens,
        }
    }

    /// Input tokens priced as input: `prompt_tokens`, with cache reads at
    /// `read` and cache writes at `write` times the input price.
    pub fn priced_input(&self, read: f64, write: f64) -> f64 {
        let cached = self.cache_read_tokens + self.cache_write_tokens;
        let plain = self.prompt_tokens.saturating_sub(cached);
        plain as f64 + self.cache_read_tokens as f64 * read + self.cache_write_tokens as f64 * write
    }

    /// Counts reported later in a stream (Anthropic's `message_delta`)
    /// replace earlier ones where they are given.
    pub(crate) fn merge_later(&mut self, later: &Usage) {
        if later.completion_tokens > 0 {
            self.completion_tokens = later.completion_tokens;
        }
        if later.prompt_tokens > 0 {
            self.prompt_tokens = later.prompt_tokens;
        }
        if later.cache_read_tokens > 0 {
            self.cache_read_tokens = later.cache_read_tokens;
        }
        if later.cache_write_tokens > 0 {
            self.cache_write_tokens = later.cache_write_tokens;
        }
    }

    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlmResponse {
    pub text: String,
    /// Parsed and schema-validated JSON when the request had a schema.
    pub json: Option<serde_json::Value>,
    pub usage: Usage,
    pub finish_reason: String,
    pub model: String,
    pub latency: Duration,
    /// True for the offline simulator; shown in output and telemetry.
    pub simulated: bool,
    /// Tools the model asked to call instead of (or before) answering;
    /// empty for a final answer.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
}

/// A provider failure, structured so `try/catch` regions can inspect it.
#[derive(Clone, Debug, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[error("{provider}: {message}{}", .status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
pub struct LlmError {
    pub provider: String,
    pub status: Option<u16>,
    pub message: String,
    pub attempts: u32,
    pub kind: LlmErrorKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LlmErrorKind {
    Connect,
    Timeout,
    RateLimited,
    Server,
    Client,
    Auth,
    InvalidResponse,
    /// The reply stopped at the token limit (`llm.truncated`).
    Truncated,
    /// The provider's filter withheld the reply, or the model refused
    /// (`llm.content_filter`).
    ContentFilter,
    /// The server cannot do what the call needs (render the offered
    /// tools), by its own statement; checked before sending
    /// (`llm.unsupported`).
    Unsupported,
    /// The completion limit leaves the prompt no room in the server's
    /// stated context; checked before sending (`llm.context_overflow`).
    ContextOverflow,
    Cancelled,
    Replay,
}

/// The tokens a call spent: every attempt's, including attempts whose
/// reply was rejected (cut off, invalid, repaired) and calls that failed.
/// Backends that report no per-attempt usage (the simulator, replays) are
/// counted by their reply; taking the larger of the two per field counts
/// each token once either way, since a reply's usage is part of its
/// attempts' when both are known.
pub fn call_usage(reply: Option<&LlmResponse>, attempts: &[Attempt]) -> Usage {
    let spent = attempts
        .iter()
        .fold(Usage::default(), |sum, a| sum.plus(&a.usage));
    let replied = reply.map(|r| r.usage).unwrap_or_default();
    Usage {
        prompt_tokens: spent.prompt_tokens.max(replied.prompt_tokens),
        completion_tokens: spent.completion_tokens.max(replied.completion_tokens),
        cache_read_tokens: spent.cache_read_tokens.max(replied.cache_read_tokens),
        cache_write_tokens: spent.cache_write_tokens.max(replied.cache_write_tokens),
    }
}

/// Set when the run fails or is interrupted; backends check it between
/// attempts and while waiting, so in-flight work stops promptly.
///
/// A [`child`](CancelToken::child) is cancelled with its parent and can
/// also be cancelled alone (a hedged request's losing leg).
#[derive(Clone, Debug, Default)]
pub struct CancelToken {
    own: Arc<AtomicBool>,
    /// The flags of the tokens this one was derived from.
    ancestors: Arc<[Arc<AtomicBool>]>,
}

impl CancelToken {
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// A token cancelled when this one is, or by its own `cancel`, which
    /// leaves this one alone.
    pub fn child(&self) -> CancelToken {
        let mut ancestors: Vec<Arc<AtomicBool>> = self.ancestors.to_vec();
        ancestors.push(Arc::clone(&self.own));
        CancelToken {
            own: Arc::default(),
            ancestors: ancestors.into(),
        }
    }

    pub fn cancel(&self) {
        self.own.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.own.load(Ordering::SeqCst) || self.ancestors.iter().any(|a| a.load(Ordering::SeqCst))
    }
}

/// Receives the outcome of a call begun with [`LlmBackend::start`], with
/// every attempt it took. Called exactly once, from any thread.
pub type OnDone = Box<dyn FnOnce(Result<LlmResponse, LlmError>, Vec<Attempt>) + Send>;

/// An LLM provider. Implementations must be cheap to share across threads.
///
/// Three ways in, so calls in flight need no VM thread each where the
/// backend allows it:
/// - [`complete`](LlmBackend::complete) blocks the calling thread until the
///   reply (every backend);
/// - [`start`](LlmBackend::start) returns at once and reports later, when
///   the backend [`starts_without_waiting`](LlmBackend::starts_without_waiting)
///   (HTTP backends, on their own threads);
/// - [`scheduled_reply`](LlmBackend::scheduled_reply) gives the reply and
///   when it is due, for backends that know it at once (the simulator, the
///   fake): the VM keeps the call as a timer entry.
pub trait LlmBackend: Send + Sync {
    /// Name from the configuration (e.g. "sim", "local").
    fn name(&self) -> &str;
    /// Maximum concurrent requests the VM should send to this backend.
    fn concurrency(&self) -> usize {
        16
    }
    /// True for backends that do not call a real model.
    fn is_simulated(&self) -> bool {
        false
    }
    fn complete(&self, request: &LlmRequest, cancel: &CancelToken)
        -> Result<LlmResponse, LlmError>;

    /// Like [`complete`](LlmBackend::complete), reporting every attempt
    /// (including retries) to `observer` as it finishes. The VM calls this
    /// with a per-op observer to put retries in telemetry. The default runs
    /// `complete` and reports it as a single attempt.
    fn complete_observed(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
        observer: &dyn AttemptObserver,
    ) -> Result<LlmResponse, LlmError> {
        let started = std::time::Instant::now();
        let result = self.complete(request, cancel);
        observer.on_attempt(&Attempt::single(self.name(), &result, started.elapsed()));
        result
    }

    /// The outcome of `request` and the delay after which it is due, when
    /// the backend knows it at once and its latency is only a wait (the
    /// simulator, the fake). Calling it counts as making the call. `None`
    /// (the default): the call must be made with `start` or `complete`.
    fn scheduled_reply(
        &self,
        request: &LlmRequest,
    ) -> Option<(Duration, Result<LlmResponse, LlmError>)> {
        let _ = request;
        None
    }

    /// True when calls need no thread of the caller while in flight:
    /// [`scheduled_reply`](LlmBackend::scheduled_reply) answers, or else
    /// [`start`](LlmBackend::start) returns without waiting for the reply
    /// (the default `start` waits).
    fn starts_without_waiting(&self) -> bool {
        false
    }

    /// Begins a call and reports its outcome to `done`. Backends that can,
    /// return at once and call `done` from a thread of their own (an HTTP
    /// thread, a timer); when `cancel` is set meanwhile the outcome may
    /// still arrive, and the caller ignores it. The default runs
    /// [`complete_observed`](LlmBackend::complete_observed) on the calling
    /// thread.
    fn start(&self, request: LlmRequest, cancel: CancelToken, done: OnDone) {
        let log = AttemptLog::new();
        let result = self.complete_observed(&request, &cancel, &log);
        done(result, log.attempts());
    }

    /// What the server says about itself (context size, tool support),
    /// asked now if not yet known; `None` for backends that have no server
    /// to ask. `aisc doctor` reports it.
    fn server_info(&self) -> Option<providers::ServerInfo> {
        None
    }

    /// What `request` shares with other requests through the provider's
    /// prompt cache, and the backend's `cache_warmup` setting: the
    /// scheduler may hold calls behind one that writes it
    /// (`scheduler/warmup.rs`). `None` (the default): the backend caches
    /// nothing.
    fn shared_prefix(&self, request: &LlmRequest) -> Option<cache::SharedPrefix> {
        let _ = request;
        None
    }

    /// Starts several calls at once (a fan-out), so a backend can hand them
    /// to its threads together. The default starts them one by one.
    fn start_many(&self, calls: Vec<(LlmRequest, CancelToken, OnDone)>) {
        for (request, cancel, done) in calls {
            self.start(request, cancel, done);
        }
    }
}

/// One try of one request against a provider, reported to an
/// [`AttemptObserver`] when it ends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// Backend name (from the configuration).
    pub provider: String,
    /// 1-based attempt number within the request.
    pub number: u32,
    /// HTTP status, when the server answered.
    pub status: Option<u16>,
    /// `None` when the attempt produced a usable reply.
    pub error: Option<LlmErrorKind>,
    /// Short description of the failure (never contains keys).
    pub message: Option<String>,
    /// Time spent on this attempt.
    pub latency: Duration,
    /// The delay before the next attempt when the backend will retry;
    /// `None` when this attempt is the last.
    pub retry_in: Option<Duration>,
    /// True when the delay came from the server (`Retry-After`).
    pub server_delay: bool,
    /// The provider's finish/stop reason, when it sent a well-formed reply.
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Tokens the provider reported for this attempt (zero when it reported
    /// none), also for attempts whose reply was not accepted.
    #[serde(default)]
    pub usage: Usage,
    /// Time from sending the request to the first streamed token, for
    /// streamed attempts that received one.
    #[serde(default)]
    pub first_token: Option<Duration>,
}

impl Attempt {
    /// The attempt record of a call that was not retried.
    pub fn single(
        provider: &str,
        result: &Result<LlmResponse, LlmError>,
        latency: Duration,
    ) -> Attempt {
        let (status, error, message, finish_reason, usage) = match result {
            Ok(r) => (None, None, None, Some(r.finish_reason.clone()), r.usage),
            Err(e) => (
                e.status,
                Some(e.kind),
                Some(e.message.clone()),
                None,
                Usage::default(),
            ),
        };
        Attempt {
            provider: provider.to_string(),
            number: 1,
            status,
            error,
            message,
            latency,
            retry_in: None,
            server_delay: false,
            finish_reason,
            usage,
            first_token: None,
        }
    }

    pub fn is_ok(&self) -> bool {
        self.error.is_none()
    }
}

/// Receives each [`Attempt`] as it finishes (from the calling I/O thread).
pub trait AttemptObserver: Send + Sync {
    fn on_attempt(&self, attempt: &Attempt);
}

/// A blocking call of a wrapper whose calls all go through its `start`:
/// waits for the one outcome, then hands its attempts to `observer`.
/// `call` names the call when no outcome ever arrives ("the hedged call").
pub fn complete_through_start<B: LlmBackend + ?Sized>(
    backend: &B,
    request: &LlmRequest,
    cancel: &CancelToken,
    observer: &dyn AttemptObserver,
    call: &str,
) -> Result<LlmResponse, LlmError> {
    let (tx, rx) = std::sync::mpsc::channel();
    backend.start(
        request.clone(),
        cancel.clone(),
        Box::new(move |r, a| {
            let _ = tx.send((r, a));
        }),
    );
    match rx.recv() {
        Ok((result, attempts)) => {
            for a in &attempts {
                observer.on_attempt(a);
            }
            result
        }
        Err(_) => Err(LlmError::new(
            backend.name(),
            LlmErrorKind::Cancelled,
            format!("{call} ended without an outcome"),
        )),
    }
}

/// Discards attempts.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoObserver;

impl AttemptObserver for NoObserver {
    fn on_attempt(&self, _attempt: &Attempt) {}
}

/// Collects attempts in memory (tests, run summaries).
#[derive(Debug, Default)]
pub struct AttemptLog(std::sync::Mutex<Vec<Attempt>>);

impl AttemptLog {
    pub fn new() -> AttemptLog {
        AttemptLog::default()
    }

    pub fn attempts(&self) -> Vec<Attempt> {
        match self.0.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

impl AttemptObserver for AttemptLog {
    fn on_attempt(&self, attempt: &Attempt) {
        match self.0.lock() {
            Ok(mut g) => g.push(attempt.clone()),
            Err(p) => p.into_inner().push(attempt.clone()),
        }
    }
}

impl<F: Fn(&Attempt) + Send + Sync> AttemptObserver for F {
    fn on_attempt(&self, attempt: &Attempt) {
        self(attempt)
    }
}

impl LlmError {
    /// An error that happened before or without any provider attempt.
    pub fn new(provider: &str, kind: LlmErrorKind, message: impl Into<String>) -> LlmError {
        LlmError {
            provider: provider.to_string(),
            status: None,
            message: message.into(),
            attempts: 0,
            kind,
        }
    }
}

/// Whether a finish/stop reason, of any registered protocol, marks a
/// reply that is not a complete answer (cut off, filtered, refused): such a
/// reply is an error unless the backend sets `accept_incomplete`.
pub fn is_incomplete_reason(reason: &str) -> bool {
    providers::is_incomplete_reason(reason)
}
