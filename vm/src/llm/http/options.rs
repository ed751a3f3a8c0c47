//! The settings of the HTTP backends (the reply types are the protocols'
//! vocabulary, in `super::super::providers`).

use super::super::prompt::{Instructions, Models, OpLimits};
use super::super::providers::{self, StructuredMode, WireProtocol};
use super::super::secret::Secret;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The wire protocol of an HTTP backend: a name in the provider registry
/// (`crate::llm::providers`), where its implementation is.
///
/// A name rather than the implementation, so the constants below can be
/// matched in patterns; every value names a registered protocol (made by
/// a constant, which a test checks against the registry, or by
/// [`Protocol::named`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Protocol(&'static str);

// The constants are named like the enum variants they replace, so code
// that matched on them reads the same.
#[allow(non_upper_case_globals)]
impl Protocol {
    pub const OpenAi: Protocol = Protocol("openai");
    pub const Anthropic: Protocol = Protocol("anthropic");
    pub const Ollama: Protocol = Protocol("ollama");

    /// The registered protocol called `name` (`protocol = "…"`).
    pub fn named(name: &str) -> Option<Protocol> {
        providers::find(name).map(|w| Protocol(w.name()))
    }

    /// Every registered protocol.
    pub fn all() -> Vec<Protocol> {
        providers::PROTOCOLS
            .iter()
            .map(|w| Protocol(w.name()))
            .collect()
    }

    pub fn name(self) -> &'static str {
        self.0
    }

    /// The implementation.
    pub fn wire(self) -> &'static dyn WireProtocol {
        // Every value is made from a registered name (see above); the
        // fallback is never taken.
        providers::find(self.0).unwrap_or(&providers::openai::PROTOCOL)
    }

    pub fn default_base_url(self) -> &'static str {
        self.wire().default_base_url()
    }

    /// The URL requests go to, from a configured base URL.
    /// A query in the base URL (Azure's `?api-version=…`) stays at the end.
    pub fn endpoint(self, base_url: &str) -> String {
        let (base, query) = match base_url.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (base_url, None),
        };
        let url = self.wire().endpoint(base);
        match query {
            Some(q) => format!("{url}?{q}"),
            None => url,
        }
    }
}

impl std::fmt::Debug for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl Serialize for Protocol {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for Protocol {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Protocol, D::Error> {
        let name = String::deserialize(d)?;
        Protocol::named(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown variant `{name}`, expected one of {}",
                providers::names()
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
    }
}

/// How an HTTP backend's calls reach the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HttpTransport {
    /// Plain-HTTP loopback endpoints (local servers) get the event
    /// transport: one I/O thread per backend, the request written by the
    /// thread that starts the call. Everything else gets threads.
    #[default]
    Auto,
    /// A thread per call in flight (ureq), whatever the endpoint.
    Threads,
}

/// When and how long to retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// Upper bound on a server-requested delay.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

/// Settings of an HTTP backend (see `config.rs` for the file form).
#[derive(Clone, Debug)]
pub struct HttpOptions {
    pub name: String,
    pub protocol: Protocol,
    pub base_url: String,
    pub api_key: Option<Secret>,
    pub models: Models,
    pub instructions: Instructions,
    pub temperature: Option<f64>,
    /// The backend's completion limit for every op (config `max_tokens`).
    pub max_tokens: Option<u32>,
    /// Completion limits per op kind when neither the op nor the backend
    /// sets one (config `[max_tokens]`, else the built-in defaults): every
    /// call sends a limit.
    pub op_max_tokens: OpLimits,
    /// Ask the server for its limits (context size, tool support) before
    /// the first call (config `probe`; see `http/probe.rs`).
    pub probe: bool,
    pub concurrency: usize,
    pub connect_timeout: Duration,
    /// Whole-attempt timeout (connect, send, wait, read).
    pub timeout: Duration,
    pub retry: RetryPolicy,
    pub structured: StructuredMode,
    pub transport: HttpTransport,
    /// Return truncated or filtered replies as values (their finish reason
    /// stays on the attempt) instead of failing with `llm.truncated` /
    /// `llm.content_filter`. Config key `accept_incomplete`.
    pub accept_incomplete: bool,
    /// Send `max_completion_tokens` and no `temperature` (OpenAI protocol).
    /// `None`: decided per model by
    /// [`is_reasoning_model`](crate::llm::openai::is_reasoning_model). Config
    /// key `reasoning_model`.
    pub reasoning_model: Option<bool>,
    /// Extra request headers (config key `headers`); values are secrets,
    /// since they may come from the environment (`api-key`).
    pub headers: Vec<(String, Secret)>,
    /// Ask for streamed replies (config key `stream`, on by default in
    /// configuration files; off for options built here, which keep the
    /// event transport for loopback servers). Streamed calls run on the
    /// thread transport and time out when idle for `timeout`.
    pub stream: bool,
    /// Hold calls of a fan-out behind the one that writes their shared
    /// prefix to the provider's cache (config key `cache_warmup`;
    /// `scheduler/warmup.rs`).
    pub cache_warmup: crate::llm::cache::WarmupMode,
}

impl HttpOptions {
    pub fn new(name: &str, protocol: Protocol, base_url: &str) -> HttpOptions {
        HttpOptions {
            name: name.to_string(),
            protocol,
            base_url: base_url.to_string(),
            api_key: None,
            models: Models::default(),
            instructions: Instructions::default(),
            temperature: None,
            max_tokens: None,
            op_max_tokens: OpLimits::default(),
            probe: false,
            concurrency: 16,
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(120),
            retry: RetryPolicy::default(),
            structured: StructuredMode::default(),
            transport: HttpTransport::default(),
            accept_incomplete: false,
            reasoning_model: None,
            headers: Vec::new(),
            cache_warmup: crate::llm::cache::WarmupMode::Auto,
            stream: false,
        }
    }
}
