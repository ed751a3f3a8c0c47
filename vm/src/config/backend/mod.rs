//! One `[[llm_backends]]` entry checked and given its defaults: a
//! [`BackendConfig`]. Building the backend itself is `super::factory`.

pub(super) mod resilience;

use super::env::is_env_name;
use super::error::{line_col, ConfigError, Source};
use super::schema::{BackendKind, FileBackend, Prices};
use crate::llm::http::{HttpTransport, Protocol, RetryPolicy};
use crate::llm::prompt::Models;
use crate::llm::providers::StructuredMode;
use crate::llm::sim::DEFAULT_DELAY_SCALE;
use std::ops::Range;
use std::time::Duration;
use toml::Spanned;

/// Where a backend definition came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Line of its `name` in the config file.
    File { line: usize },
    /// Built in (`sim`, or `openai` from `OPENAI_API_KEY`).
    Builtin,
}

/// A backend's limits across the fleet: every process on one run store
/// shares them (`crate::store::limits`); `None`: no such limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FleetLimits {
    /// Calls in flight at once (`fleet_concurrency`).
    pub concurrency: Option<u64>,
    pub requests_per_minute: Option<u64>,
    pub tokens_per_minute: Option<u64>,
}

impl FleetLimits {
    pub fn any(&self) -> bool {
        self.concurrency.is_some()
            || self.requests_per_minute.is_some()
            || self.tokens_per_minute.is_some()
    }
}

/// One backend, resolved (defaults filled in).
#[derive(Clone, Debug, PartialEq)]
pub struct BackendConfig {
    pub name: String,
    pub kind: BackendKind,
    pub base_url: String,
    /// Name of the variable holding the key.
    pub api_key_env: Option<String>,
    pub concurrency: usize,
    /// Calls in flight, requests and tokens per minute across every process
    /// on the run store (`fleet_concurrency`, `requests_per_minute`,
    /// `tokens_per_minute`; `crate::store::limits`, docs/scale-out.md).
    pub fleet: FleetLimits,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub retry: RetryPolicy,
    pub structured: StructuredMode,
    /// How calls reach the server (HTTP backends).
    pub transport: HttpTransport,
    /// Truncated or filtered replies become values instead of
    /// `llm.truncated` / `llm.content_filter` errors (`accept_incomplete`).
    /// Extra request headers (`headers = { name = "value" }`); a value
    /// `"$VAR"` is read from that environment variable when the backend is
    /// built, and is a secret like the API key.
    pub headers: Vec<(String, HeaderValue)>,
    pub accept_incomplete: bool,
    /// OpenAI protocol: reasoning-model parameters on (`true`), off
    /// (`false`), or by model name (absent) (`reasoning_model`).
    pub reasoning_model: Option<bool>,
    /// Ask HTTP backends for streamed replies (`stream`, default true).
    pub stream: bool,
    /// Fan-out warm-up of the provider's prompt cache (`cache_warmup`,
    /// default auto; `scheduler/warmup.rs`).
    pub cache_warmup: crate::llm::cache::WarmupMode,
    /// Read the server's limits before the first call (`probe`; default:
    /// on for plain `http://` servers, which are local or self-hosted).
    pub probe: bool,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    /// Simulator delay factor (sim only).
    pub delay_scale: f64,
    pub models: Models,
    pub prices: Option<Prices>,
    /// Hedged requests (`hedge`; docs/backends.md).
    pub hedge: Option<crate::llm::resilience::HedgeConfig>,
    /// Backends that answer when this one cannot (`fallback`), in order.
    pub fallback: Vec<String>,
    pub(crate) fallback_span: Option<Range<usize>>,
    pub origin: Origin,
    pub(crate) api_key_env_span: Option<Range<usize>>,
}

impl BackendConfig {
    fn new(name: &str, kind: BackendKind) -> BackendConfig {
        let base_url = kind
            .http()
            .map(|p| p.default_base_url().to_string())
            .unwrap_or_default();
        BackendConfig {
            name: name.to_string(),
            kind,
            base_url,
            api_key_env: None,
            concurrency: if kind == BackendKind::Sim { 64 } else { 16 },
            fleet: FleetLimits::default(),
            timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            structured: StructuredMode::default(),
            transport: HttpTransport::default(),
            accept_incomplete: false,
            reasoning_model: None,
            stream: true,
            cache_warmup: crate::llm::cache::WarmupMode::Auto,
            probe: false,
            headers: Vec::new(),
            temperature: None,
            max_tokens: None,
            delay_scale: DEFAULT_DELAY_SCALE,
            models: Models::default(),
            prices: None,
            hedge: None,
            fallback: Vec::new(),
            fallback_span: None,
            origin: Origin::Builtin,
            api_key_env_span: None,
        }
    }

    /// The built-in `sim`.
    pub fn builtin_sim() -> BackendConfig {
        BackendConfig::new("sim", BackendKind::Sim)
    }

    /// The built-in `openai`, used without a config file when
    /// `OPENAI_API_KEY` is set.
    pub fn builtin_openai(base_url: Option<&str>) -> BackendConfig {
        let mut b = BackendConfig::new("openai", BackendKind::Http(Protocol::OpenAi));
        if let Some(u) = base_url {
            b.base_url = u.to_string();
        }
        b.api_key_env = Some("OPENAI_API_KEY".into());
        b.models = Models {
            ask: Some("gpt-4o-mini".into()),
            think: Some("gpt-4o-mini".into()),
            reason: Some("gpt-4o".into()),
        };
        b
    }
}

pub(crate) fn positive(src: &Source, v: &Spanned<i64>, what: &str) -> Result<u64, ConfigError> {
    match u64::try_from(*v.get_ref()) {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(ConfigError::at(
            src,
            v.span(),
            format!("{what} must be a positive integer"),
            None,
        )),
    }
}

/// A configured header's value: written in the file, or read from an
/// environment variable (`"$VAR"`) when the backend is built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderValue {
    Literal(String),
    Env { var: String, span: Range<usize> },
}

/// Checks one `headers` entry: a header name (token characters) and a
/// value without line breaks, which would split the request. Messages name
/// the header, never the value.
fn header_value(
    src: &Source,
    name: &str,
    value: &Spanned<String>,
) -> Result<(String, HeaderValue), ConfigError> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        return Err(ConfigError::at(
            src,
            value.span(),
            format!("`{}` is not a valid header name", name.escape_debug()),
            None,
        ));
    }
    let v = value.get_ref();
    if let Some(var) = v.strip_prefix('$') {
        if !is_env_name(var) {
            return Err(ConfigError::at(
                src,
                value.span(),
                format!(
                    "the value of header `{name}` must be `$` and an environment variable name"
                ),
                Some("for example \"$AZURE_OPENAI_KEY\"".into()),
            ));
        }
        let env = HeaderValue::Env {
            var: var.to_string(),
            span: value.span(),
        };
        return Ok((name.to_string(), env));
    }
    if v.contains(['\r', '\n']) {
        return Err(ConfigError::at(
            src,
            value.span(),
            format!("the value of header `{name}` contains a line break"),
            None,
        ));
    }
    Ok((name.to_string(), HeaderValue::Literal(v.clone())))
}

/// The largest `retries` a backend may ask for.
pub const MAX_RETRIES: u32 = 20;

/// The largest `concurrency` (calls in flight) a backend may ask for.
pub const MAX_CONCURRENCY: usize = 4096;

fn non_negative(src: &Source, v: &Spanned<i64>, what: &str) -> Result<u64, ConfigError> {
    u64::try_from(*v.get_ref())
        .map_err(|_| ConfigError::at(src, v.span(), format!("{what} must not be negative"), None))
}

fn seconds(
    src: &Source,
    v: &Spanned<f64>,
    what: &str,
    allow_zero: bool,
) -> Result<Duration, ConfigError> {
    let s = *v.get_ref();
    let ok = s.is_finite() && (s > 0.0 || (allow_zero && s == 0.0)) && s < 1e7;
    if !ok {
        let want = if allow_zero {
            "zero or more seconds"
        } else {
            "a positive number of seconds"
        };
        return Err(ConfigError::at(
            src,
            v.span(),
            format!("{what} must be {want}"),
            None,
        ));
    }
    Ok(Duration::from_secs_f64(s))
}

pub(crate) fn resolve_backend(src: &Source, fb: FileBackend) -> Result<BackendConfig, ConfigError> {
    let name = fb.name.get_ref().trim().to_string();
    if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ConfigError::at(
            src,
            fb.name.span(),
            "backend name must be a non-empty word",
            Some("names are used with `--backend NAME`".into()),
        ));
    }
    let kind = *fb.protocol.get_ref();
    let mut b = BackendConfig::new(&name, kind);
    b.origin = Origin::File {
        line: line_col(&src.text, fb.name.span().start).0,
    };
    if let Some(u) = &fb.base_url {
        let url = u.get_ref().trim();
        if !(url.starts_with("http://") || url.starts_with("https://"))
            || url.len() <= "https://".len()
        {
            return Err(ConfigError::at(
                src,
                u.span(),
                "base_url must be an http:// or https:// URL",
                Some("for example \"http://127.0.0.1:8000/v1\"".into()),
            ));
        }
        b.base_url = url.to_string();
    }
    // Hosted APIs (https) publish their limits elsewhere; a plain-http
    // server is a local or self-hosted one (llama.cpp, vLLM, Ollama, LM
    // Studio), which says its context size and whether it renders tools.
    b.probe = b.kind.http().is_some() && b.base_url.starts_with("http://");
    if let Some(p) = fb.probe {
        b.probe = p;
    }
    if let Some(k) = &fb.api_key_env {
        if !is_env_name(k.get_ref()) {
            // Never echo the value: it may be the key itself.
            return Err(ConfigError::at(
                src,
                k.span(),
                "api_key_env must be the name of an environment variable (letters, digits, `_`)",
                Some("put the key in the environment, e.g. `export OPENAI_API_KEY=...`, and write `api_key_env = \"OPENAI_API_KEY\"`".into()),
            ));
        }
        b.api_key_env = Some(k.get_ref().clone());
        b.api_key_env_span = Some(k.span());
    }
    if let Some(c) = &fb.concurrency {
        let n = positive(src, c, "concurrency")?;
        b.concurrency = match usize::try_from(n) {
            Ok(n) if n <= MAX_CONCURRENCY => n,
            // Rejected rather than clamped (it was lowered to the limit
            // without a word): whoever asked for more must know.
            _ => {
                return Err(ConfigError::at(
                    src,
                    c.span(),
                    format!("concurrency must be at most {MAX_CONCURRENCY} (found {n})"),
                    Some(format!("calls in flight per backend; use {MAX_CONCURRENCY}, or spread the load over several backends")),
                ))
            }
        };
    }
    let limit =
        |v: &Option<Spanned<i64>>, what| v.as_ref().map(|v| positive(src, v, what)).transpose();
    b.fleet = FleetLimits {
        concurrency: limit(&fb.fleet_concurrency, "fleet_concurrency")?,
        requests_per_minute: limit(&fb.requests_per_minute, "requests_per_minute")?,
        tokens_per_minute: limit(&fb.tokens_per_minute, "tokens_per_minute")?,
    };
    if let Some(t) = &fb.timeout_s {
        b.timeout = seconds(src, t, "timeout_s", false)?;
    }
    if let Some(t) = &fb.connect_timeout_s {
        b.connect_timeout = seconds(src, t, "connect_timeout_s", false)?;
    }
    if let Some(r) = &fb.retries {
        let n = non_negative(src, r, "retries")?;
        b.retry.max_retries = match u32::try_from(n) {
            Ok(n) if n <= MAX_RETRIES => n,
            // Rejected rather than clamped: a silently lowered bound
            // surprises whoever asked for more.
            _ => {
                return Err(ConfigError::at(
                    src,
                    r.span(),
                    format!("retries must be at most {MAX_RETRIES}"),
                    Some("each retry repeats the whole request; raise timeout_s or max_backoff_ms to wait longer".into()),
                ))
            }
        };
    }
    if let Some(ms) = &fb.backoff_ms {
        b.retry.base_delay = Duration::from_millis(non_negative(src, ms, "backoff_ms")?);
    }
    if let Some(ms) = &fb.max_backoff_ms {
        b.retry.max_delay = Duration::from_millis(non_negative(src, ms, "max_backoff_ms")?);
    }
    if let Some(s) = &fb.max_retry_after_s {
        b.retry.max_retry_after = seconds(src, s, "max_retry_after_s", true)?;
    }
    if let Some(m) = fb.structured_output {
        b.structured = m;
    }
    if let Some(t) = fb.transport {
        b.transport = t;
    }
    if let Some(a) = fb.accept_incomplete {
        b.accept_incomplete = a;
    }
    if let Some(r) = fb.reasoning_model {
        b.reasoning_model = Some(r);
    }
    if let Some(mode) = fb.cache_warmup {
        b.cache_warmup = mode;
    }
    if let Some(on) = fb.stream {
        b.stream = on;
    }
    for (name, value) in fb.headers.iter().flatten() {
        b.headers.push(header_value(src, name, value)?);
    }
    if let Some(t) = &fb.temperature {
        let v = *t.get_ref();
        if !(0.0..=2.0).contains(&v) {
            return Err(ConfigError::at(
                src,
                t.span(),
                "temperature must be between 0 and 2",
                None,
            ));
        }
        b.temperature = Some(v);
    }
    if let Some(m) = &fb.max_tokens {
        b.max_tokens = Some(u32::try_from(positive(src, m, "max_tokens")?).unwrap_or(u32::MAX));
    }
    if let Some(d) = &fb.delay_scale {
        let v = *d.get_ref();
        if !(v.is_finite() && v >= 0.0) {
            return Err(ConfigError::at(
                src,
                d.span(),
                "delay_scale must be zero or more",
                None,
            ));
        }
        b.delay_scale = v;
    }
    b.models = fb.models;
    // Cached input is priced by the protocol's multipliers unless the
    // table sets its own.
    b.prices = fb.prices.map(|mut p| {
        let (read, write) = b
            .kind
            .http()
            .map_or((1.0, 1.0), |proto| proto.wire().cache_multipliers());
        p.cache_read_multiplier.get_or_insert(read);
        p.cache_write_multiplier.get_or_insert(write);
        p
    });
    resilience::resolve(src, &mut b, fb.hedge, fb.fallback)?;
    Ok(b)
}
