//! Run configuration: LLM backends, system prompts, token budget,
//! record/replay.
//!
//! Sources, highest priority first: command-line [`Flags`], environment
//! variables ([`Env`]), the config file. The file is `--config PATH`, else
//! `$APXM_CONFIG`, else `.apxm/config.toml` in the working directory, else
//! `~/.apxm/config.toml`. With no file, the `openai` backend is used when
//! `OPENAI_API_KEY` is set (at `OPENAI_BASE_URL` if set), else the offline
//! `sim` backend, with a one-line notice. The file format is documented in
//! `docs/backends.md`.
//!
//! Keys never live in the file: a backend names the environment variable
//! that holds its key (`api_key_env`), and the value is only read when the
//! backend is built, into a masked [`Secret`].

use crate::llm::budget::{BudgetedBackend, TokenBudget};
use crate::llm::http::{
    HttpBackend, HttpOptions, HttpTransport, Protocol, RetryPolicy, StructuredMode,
};
use crate::llm::prompt::{Instructions, Models};
use crate::llm::record::{RecordingBackend, ReplayBackend};
use crate::llm::secret::{redact_url, redact_url_in, Secret};
use crate::llm::sim::{SimBackend, DEFAULT_DELAY_SCALE};
use crate::llm::{CancelToken, ContextBlock, LlmBackend, LlmOpKind, LlmRequest, Usage};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use toml::Spanned;

/// Directory of the config file, in the project and in the home directory.
pub const CONFIG_DIR: &str = ".apxm";
pub const CONFIG_FILE: &str = "config.toml";

// ---------------------------------------------------------------------------
// Inputs: flags and environment
// ---------------------------------------------------------------------------

/// Command-line settings (`aisc run`, `aisc config show`, `aisc doctor`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Flags {
    /// `--config PATH`
    pub config: Option<PathBuf>,
    /// `--backend NAME`
    pub backend: Option<String>,
    /// `--token-budget N`
    pub token_budget: Option<u64>,
    /// `--record DIR`
    pub record: Option<PathBuf>,
    /// `--replay DIR`
    pub replay: Option<PathBuf>,
    /// `--sim-delay-scale F` (0 = no simulated latency)
    pub sim_delay_scale: Option<f64>,
}

/// The environment the configuration is resolved in: variables, working
/// directory and home directory. Tests build one by hand; the CLI uses
/// [`Env::from_process`]. `Debug` lists variable names only.
#[derive(Clone, Default)]
pub struct Env {
    vars: BTreeMap<String, String>,
    pub cwd: PathBuf,
    pub home: Option<PathBuf>,
}

impl fmt::Debug for Env {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Env")
            .field("vars", &self.vars.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .field("home", &self.home)
            .finish()
    }
}

impl Env {
    /// The process environment, working directory and `$HOME`.
    pub fn from_process() -> Env {
        let vars: BTreeMap<String, String> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        let home = vars
            .get("HOME")
            .or_else(|| vars.get("USERPROFILE"))
            .map(PathBuf::from);
        Env {
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            home,
            vars,
        }
    }

    /// No variables, no home, the given working directory.
    pub fn empty(cwd: impl Into<PathBuf>) -> Env {
        Env {
            vars: BTreeMap::new(),
            cwd: cwd.into(),
            home: None,
        }
    }

    pub fn with_var(mut self, name: &str, value: &str) -> Env {
        self.vars.insert(name.to_string(), value.to_string());
        self
    }

    pub fn with_home(mut self, home: impl Into<PathBuf>) -> Env {
        self.home = Some(home.into());
        self
    }

    /// A non-empty variable.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.trim().is_empty())
    }
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// A configuration problem, pointing at the file position when there is one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub message: String,
    pub hint: Option<String>,
    pub location: Option<Box<Location>>,
}

/// Where in which file a [`ConfigError`] is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub path: PathBuf,
    /// 1-based line and column (characters), when known.
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// The offending source line (values of secret-looking keys masked).
    pub snippet: Option<String>,
}

impl ConfigError {
    fn plain(message: impl Into<String>, hint: Option<String>) -> ConfigError {
        ConfigError {
            message: message.into(),
            hint,
            location: None,
        }
    }

    fn in_file(path: &Path, message: impl Into<String>, hint: Option<String>) -> ConfigError {
        ConfigError {
            message: message.into(),
            hint,
            location: Some(Box::new(Location {
                path: path.to_path_buf(),
                line: None,
                column: None,
                snippet: None,
            })),
        }
    }

    fn at(
        src: &Source,
        span: Range<usize>,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> ConfigError {
        let (line, column) = line_col(&src.text, span.start);
        let snippet = src.text.lines().nth(line - 1).map(mask_line);
        ConfigError {
            message: message.into(),
            hint,
            location: Some(Box::new(Location {
                path: src.path.clone(),
                line: Some(line),
                column: Some(column),
                snippet,
            })),
        }
    }

    /// 1-based line and column in the config file, when known.
    pub fn position(&self) -> Option<(usize, usize)> {
        let l = self.location.as_ref()?;
        Some((l.line?, l.column?))
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.location.as_deref() {
            Some(Location {
                path,
                line: Some(l),
                column: Some(c),
                ..
            }) => write!(f, "{}:{l}:{c}: {}", path.display(), self.message)?,
            Some(loc) => write!(f, "{}: {}", loc.path.display(), self.message)?,
            None => write!(f, "{}", self.message)?,
        }
        if let Some(Location {
            line: Some(l),
            column: Some(c),
            snippet: Some(s),
            ..
        }) = self.location.as_deref()
        {
            let gutter = l.to_string().len();
            write!(
                f,
                "\n{:gutter$} |\n{l} | {s}\n{:gutter$} | {:>c$}",
                "", "", "^"
            )?;
        }
        if let Some(h) = &self.hint {
            write!(f, "\n  = hint: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// 1-based line and column (in characters) of byte `offset`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = (0..=offset.min(text.len()))
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    (line, text[start..offset].chars().count() + 1)
}

/// Hides the value on lines whose key looks secret (`api_key = "sk-..."`),
/// and on `*_env` lines whose value is not a variable name (a pasted key).
fn mask_line(line: &str) -> String {
    let Some((key, value)) = line.split_once('=') else {
        return line.to_string();
    };
    let k = key.trim().to_ascii_lowercase();
    let secretish = ["key", "token", "secret", "password"]
        .iter()
        .any(|w| k.contains(w));
    let v = value.trim().trim_matches(|c| c == '"' || c == '\'');
    let harmless = k.ends_with("_env") && is_env_name(v);
    if secretish && !harmless {
        format!("{key}= \"****\"")
    } else {
        line.to_string()
    }
}

// ---------------------------------------------------------------------------
// File format
// ---------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    default_backend: Option<Spanned<String>>,
    token_budget: Option<Spanned<i64>>,
    #[serde(default)]
    llm_backends: Vec<FileBackend>,
    #[serde(default)]
    instruction: FileInstructions,
    #[serde(default)]
    limits: FileLimits,
    // Sections read by the Agent Abstract Machine (`crate::aam::config`).
    #[serde(default, rename = "memory")]
    _memory: Option<toml::Value>,
    #[serde(default, rename = "tools")]
    _tools: Option<toml::Value>,
    #[serde(default, rename = "mcp_servers")]
    _mcp_servers: Option<toml::Value>,
    #[serde(default, rename = "access")]
    _access: Option<toml::Value>,
}

/// `[limits]`: per-run resource limits (see `scheduler::limits`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLimits {
    max_live_frames: Option<Spanned<i64>>,
    max_call_depth: Option<Spanned<i64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileInstructions {
    ask: Option<String>,
    think: Option<String>,
    reason: Option<String>,
    llm: Option<String>,
    plan: Option<String>,
    reflect: Option<String>,
    verify: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileBackend {
    name: Spanned<String>,
    protocol: Spanned<BackendKind>,
    base_url: Option<Spanned<String>>,
    api_key_env: Option<Spanned<String>>,
    concurrency: Option<Spanned<i64>>,
    timeout_s: Option<Spanned<f64>>,
    connect_timeout_s: Option<Spanned<f64>>,
    retries: Option<Spanned<i64>>,
    backoff_ms: Option<Spanned<i64>>,
    max_backoff_ms: Option<Spanned<i64>>,
    max_retry_after_s: Option<Spanned<f64>>,
    structured_output: Option<StructuredMode>,
    transport: Option<HttpTransport>,
    accept_incomplete: Option<bool>,
    reasoning_model: Option<bool>,
    headers: Option<BTreeMap<String, Spanned<String>>>,
    temperature: Option<Spanned<f64>>,
    max_tokens: Option<Spanned<i64>>,
    delay_scale: Option<Spanned<f64>>,
    #[serde(default)]
    models: Models,
    prices: Option<Prices>,
}

/// The protocol a backend speaks (`protocol = "..."`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    #[serde(rename = "openai")]
    OpenAi,
    Anthropic,
    Ollama,
    Sim,
}

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::OpenAi => "openai",
            BackendKind::Anthropic => "anthropic",
            BackendKind::Ollama => "ollama",
            BackendKind::Sim => "sim",
        }
    }

    pub fn http(self) -> Option<Protocol> {
        match self {
            BackendKind::OpenAi => Some(Protocol::OpenAi),
            BackendKind::Anthropic => Some(Protocol::Anthropic),
            BackendKind::Ollama => Some(Protocol::Ollama),
            BackendKind::Sim => None,
        }
    }
}

/// Prices in currency units per million tokens, for cost estimates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prices {
    #[serde(default)]
    pub input_per_mtok: f64,
    #[serde(default)]
    pub output_per_mtok: f64,
}

impl Prices {
    pub fn cost(&self, usage: Usage) -> f64 {
        (usage.prompt_tokens as f64 * self.input_per_mtok
            + usage.completion_tokens as f64 * self.output_per_mtok)
            / 1e6
    }
}

// ---------------------------------------------------------------------------
// Resolved configuration
// ---------------------------------------------------------------------------

/// Where a backend definition came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Line of its `name` in the config file.
    File { line: usize },
    /// Built in (`sim`, or `openai` from `OPENAI_API_KEY`).
    Builtin,
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
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    /// Simulator delay factor (sim only).
    pub delay_scale: f64,
    pub models: Models,
    pub prices: Option<Prices>,
    pub origin: Origin,
    api_key_env_span: Option<Range<usize>>,
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
            timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            structured: StructuredMode::default(),
            transport: HttpTransport::default(),
            accept_incomplete: false,
            reasoning_model: None,
            headers: Vec::new(),
            temperature: None,
            max_tokens: None,
            delay_scale: DEFAULT_DELAY_SCALE,
            models: Models::default(),
            prices: None,
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
        let mut b = BackendConfig::new("openai", BackendKind::OpenAi);
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

#[derive(Clone, PartialEq, Eq)]
struct Source {
    path: PathBuf,
    text: String,
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Source")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// The contents of a config file (or the built-in defaults without one).
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    source: Option<Source>,
    /// Backends in file order, then the built-ins not shadowed by the file.
    pub backends: Vec<BackendConfig>,
    pub default_backend: Option<String>,
    pub token_budget: Option<u64>,
    pub instructions: Instructions,
    /// `[limits]`; `None`: the `RunOptions` default (or the `aisc run` flag).
    pub limits: Limits,
}

/// Per-run resource limits from the config file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Limits {
    /// `max_live_frames`: frames alive at once before `LIMIT_FRAMES`.
    pub max_live_frames: Option<usize>,
    /// `max_call_depth`: nested `flow.call`s before `call.depth`.
    pub max_call_depth: Option<u32>,
}

impl Config {
    /// The file this came from, if any.
    pub fn path(&self) -> Option<&Path> {
        self.source.as_ref().map(|s| s.path.as_path())
    }

    pub fn backend(&self, name: &str) -> Option<&BackendConfig> {
        self.backends.iter().find(|b| b.name == name)
    }

    /// Parses config text; `path` is used in error messages only.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let src = Source {
            path: path.to_path_buf(),
            text: text.to_string(),
        };
        let file: FileConfig = toml::from_str(text).map_err(|e| {
            let message = e.message().trim().to_string();
            let hint = hint_for(&message);
            match e.span() {
                Some(span) => ConfigError::at(&src, span, message, hint),
                None => ConfigError::in_file(&src.path, message, hint),
            }
        })?;
        let mut backends: Vec<BackendConfig> = Vec::new();
        for fb in file.llm_backends {
            if backends.iter().any(|b| b.name == fb.name.get_ref().trim()) {
                return Err(ConfigError::at(
                    &src,
                    fb.name.span(),
                    format!("backend `{}` is defined twice", fb.name.get_ref().trim()),
                    Some("backend names must be unique".into()),
                ));
            }
            let b = resolve_backend(&src, fb)?;
            backends.push(b);
        }
        let names: Vec<String> = backends.iter().map(|b| b.name.clone()).collect();
        if !names.iter().any(|n| n == "sim") {
            backends.push(BackendConfig::builtin_sim());
        }
        let default_backend = match file.default_backend {
            Some(d) => {
                if !backends.iter().any(|b| &b.name == d.get_ref()) {
                    return Err(ConfigError::at(
                        &src,
                        d.span(),
                        format!("default_backend `{}` is not defined", d.get_ref()),
                        Some(format!("defined backends: {}", list(&backends))),
                    ));
                }
                Some(d.into_inner())
            }
            None => None,
        };
        let token_budget = match file.token_budget {
            Some(t) => Some(positive(&src, &t, "token_budget")?),
            None => None,
        };
        let limits = Limits {
            max_live_frames: match &file.limits.max_live_frames {
                Some(n) => Some(
                    usize::try_from(positive(&src, n, "max_live_frames")?).unwrap_or(usize::MAX),
                ),
                None => None,
            },
            max_call_depth: match &file.limits.max_call_depth {
                Some(n) => {
                    Some(u32::try_from(positive(&src, n, "max_call_depth")?).unwrap_or(u32::MAX))
                }
                None => None,
            },
        };
        let fi = file.instruction;
        let mut overrides = BTreeMap::new();
        for (k, v) in [
            ("ask", fi.ask),
            ("think", fi.think),
            ("reason", fi.reason),
            ("llm", fi.llm),
            ("plan", fi.plan),
            ("reflect", fi.reflect),
            ("verify", fi.verify),
        ] {
            if let Some(v) = v {
                overrides.insert(k.to_string(), v);
            }
        }
        Ok(Config {
            source: Some(src),
            backends,
            default_backend,
            token_budget,
            instructions: Instructions { overrides },
            limits,
        })
    }

    /// The configuration without any file.
    pub fn builtin(env: &Env) -> Config {
        let mut backends = Vec::new();
        if env.var("OPENAI_API_KEY").is_some() {
            backends.push(BackendConfig::builtin_openai(env.var("OPENAI_BASE_URL")));
        }
        backends.push(BackendConfig::builtin_sim());
        Config {
            source: None,
            backends,
            default_backend: None,
            token_budget: None,
            instructions: Instructions::default(),
            limits: Limits::default(),
        }
    }

    /// Reads and parses the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::in_file(path, format!("cannot read the config file: {e}"), None)
        })?;
        Config::parse(&text, path)
    }

    fn error_at(
        &self,
        span: Option<Range<usize>>,
        message: String,
        hint: Option<String>,
    ) -> ConfigError {
        match (&self.source, span) {
            (Some(src), Some(span)) => ConfigError::at(src, span, message, hint),
            (Some(src), None) => ConfigError::in_file(&src.path, message, hint),
            _ => ConfigError::plain(message, hint),
        }
    }
}

fn list(backends: &[BackendConfig]) -> String {
    backends
        .iter()
        .map(|b| b.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn hint_for(message: &str) -> Option<String> {
    if message.contains("unknown field `api_key`") {
        return Some(
            "keys never live in the config file: set `api_key_env = \"VAR\"` and export VAR in the environment".into(),
        );
    }
    if message.contains("unknown variant") && message.contains("openai") {
        return Some("protocol is one of openai, anthropic, ollama, sim".into());
    }
    if message.contains("unknown field") {
        return Some("see docs/backends.md for the accepted keys".into());
    }
    if message.contains("missing field `name`") || message.contains("missing field `protocol`") {
        return Some("every [[llm_backends]] entry needs `name` and `protocol`".into());
    }
    None
}

fn positive(src: &Source, v: &Spanned<i64>, what: &str) -> Result<u64, ConfigError> {
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

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn resolve_backend(src: &Source, fb: FileBackend) -> Result<BackendConfig, ConfigError> {
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
        b.concurrency = usize::try_from(positive(src, c, "concurrency")?)
            .unwrap_or(usize::MAX)
            .min(4096);
    }
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
    b.prices = fb.prices;
    Ok(b)
}

// ---------------------------------------------------------------------------
// Effective settings
// ---------------------------------------------------------------------------

/// The configuration a command runs with: file + env + flags.
#[derive(Clone, Debug)]
pub struct Settings {
    pub config: Config,
    /// Name of the selected backend.
    pub backend: String,
    /// Why it was selected (`--backend`, `APXM_BACKEND`, `default_backend`…).
    pub backend_from: &'static str,
    pub token_budget: Option<u64>,
    pub token_budget_from: &'static str,
    pub record: Option<PathBuf>,
    pub replay: Option<PathBuf>,
    /// Simulator delay factor override (flag or `APXM_SIM_DELAY_SCALE`).
    pub sim_delay_scale: Option<f64>,
    env: Env,
}

/// The backend a run uses, wrapped for replay/record and the token budget.
pub struct RunBackend {
    pub backend: Arc<dyn LlmBackend>,
    /// Counts the run's usage; enforces `--token-budget` when set.
    pub budget: Arc<TokenBudget>,
    /// One line for the CLI to print (e.g. that replies are simulated).
    pub notice: Option<String>,
    pub simulated: bool,
}

impl fmt::Debug for RunBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunBackend")
            .field("backend", &self.backend.name())
            .field("budget", &self.budget)
            .field("notice", &self.notice)
            .field("simulated", &self.simulated)
            .finish()
    }
}

/// Finds the config file: flag, `$APXM_CONFIG`, project, home.
pub fn find_config_file(flags: &Flags, env: &Env) -> Option<PathBuf> {
    if let Some(p) = &flags.config {
        return Some(p.clone());
    }
    if let Some(p) = env.var("APXM_CONFIG") {
        return Some(PathBuf::from(p));
    }
    let project = env.cwd.join(CONFIG_DIR).join(CONFIG_FILE);
    if project.is_file() {
        return Some(project);
    }
    let home = env.home.as_ref()?.join(CONFIG_DIR).join(CONFIG_FILE);
    home.is_file().then_some(home)
}

fn parse_env_number<T: std::str::FromStr>(env: &Env, name: &str) -> Result<Option<T>, ConfigError> {
    match env.var(name) {
        None => Ok(None),
        Some(v) => v.trim().parse::<T>().map(Some).map_err(|_| {
            ConfigError::plain(
                format!(
                    "environment variable {name} is not a valid number: `{}`",
                    v.trim()
                ),
                None,
            )
        }),
    }
}

impl Settings {
    /// Resolves flags over env over file. Errors point at the file position.
    pub fn load(flags: &Flags, env: &Env) -> Result<Settings, ConfigError> {
        let config = match find_config_file(flags, env) {
            Some(path) => Config::load(&path)?,
            None => Config::builtin(env),
        };
        Settings::resolve(config, flags, env)
    }

    /// Resolves flags and env over an already loaded config.
    pub fn resolve(config: Config, flags: &Flags, env: &Env) -> Result<Settings, ConfigError> {
        let (backend, backend_from) = if let Some(b) = &flags.backend {
            (b.clone(), "--backend")
        } else if let Some(b) = env.var("APXM_BACKEND") {
            (b.trim().to_string(), "APXM_BACKEND")
        } else if let Some(b) = &config.default_backend {
            (b.clone(), "default_backend")
        } else if config.path().is_some() {
            (
                config
                    .backends
                    .first()
                    .map(|b| b.name.clone())
                    .unwrap_or_else(|| "sim".into()),
                "first backend in the file",
            )
        } else if config.backend("openai").is_some() {
            ("openai".into(), "OPENAI_API_KEY is set")
        } else {
            ("sim".into(), "no configuration")
        };
        if config.backend(&backend).is_none() {
            return Err(ConfigError::plain(
                format!("unknown backend `{backend}` (from {backend_from})"),
                Some(format!("defined backends: {}", list(&config.backends))),
            ));
        }
        let env_budget: Option<u64> = parse_env_number(env, "APXM_TOKEN_BUDGET")?;
        let (token_budget, token_budget_from) = if let Some(t) = flags.token_budget {
            (Some(t), "--token-budget")
        } else if let Some(t) = env_budget {
            (Some(t), "APXM_TOKEN_BUDGET")
        } else if let Some(t) = config.token_budget {
            (Some(t), "config file")
        } else {
            (None, "unset")
        };
        if token_budget == Some(0) {
            return Err(ConfigError::plain(
                format!("the token budget (from {token_budget_from}) must be positive"),
                None,
            ));
        }
        let record = flags
            .record
            .clone()
            .or_else(|| env.var("APXM_RECORD").map(PathBuf::from));
        let replay = flags
            .replay
            .clone()
            .or_else(|| env.var("APXM_REPLAY").map(PathBuf::from));
        if record.is_some() && replay.is_some() {
            return Err(ConfigError::plain(
                "--record and --replay cannot be used together",
                Some("record a run first, then replay it".into()),
            ));
        }
        let sim_delay_scale = match flags.sim_delay_scale {
            Some(s) => Some(s),
            None => parse_env_number(env, "APXM_SIM_DELAY_SCALE")?,
        };
        if let Some(s) = sim_delay_scale {
            if !(s.is_finite() && s >= 0.0) {
                return Err(ConfigError::plain(
                    "the simulator delay scale must be zero or more",
                    None,
                ));
            }
        }
        Ok(Settings {
            config,
            backend,
            backend_from,
            token_budget,
            token_budget_from,
            record,
            replay,
            sim_delay_scale,
            env: env.clone(),
        })
    }

    /// The selected backend's configuration.
    pub fn selected(&self) -> &BackendConfig {
        // `resolve` checked that it exists.
        self.config
            .backend(&self.backend)
            .unwrap_or(&self.config.backends[0])
    }

    /// The line to print when the run's replies will be simulated.
    pub fn notice(&self) -> Option<String> {
        if self.replay.is_some() || self.selected().kind != BackendKind::Sim {
            return None;
        }
        if self.backend_from == "no configuration" {
            Some("note: no LLM backend configured (no .apxm/config.toml, OPENAI_API_KEY unset): using the offline simulator `sim`; replies are simulated".into())
        } else {
            Some(format!(
                "note: backend `{}` is the offline simulator; replies are simulated",
                self.backend
            ))
        }
    }

    /// Builds one backend by name, without wrappers. Reads its key from the
    /// environment; a missing key is an error pointing at `api_key_env`.
    pub fn build_backend(&self, name: &str) -> Result<Arc<dyn LlmBackend>, ConfigError> {
        let b = self.config.backend(name).ok_or_else(|| {
            ConfigError::plain(
                format!("unknown backend `{name}`"),
                Some(format!("defined backends: {}", list(&self.config.backends))),
            )
        })?;
        let Some(protocol) = b.kind.http() else {
            let scale = self.sim_delay_scale.unwrap_or(b.delay_scale);
            return Ok(Arc::new(
                SimBackend::named(&b.name)
                    .with_delay_scale(scale)
                    .with_concurrency(b.concurrency)
                    .with_models(b.models.clone())
                    .with_instructions(self.config.instructions.clone()),
            ));
        };
        let api_key = match &b.api_key_env {
            Some(var) => match self.env.var(var) {
                Some(v) => Some(Secret::new(v.trim())),
                None => {
                    return Err(self.config.error_at(
                        b.api_key_env_span.clone(),
                        format!(
                            "environment variable {var} (api_key_env of backend `{}`) is not set",
                            b.name
                        ),
                        Some(format!(
                        "export {var}=... before running, or pick another backend with --backend"
                    )),
                    ))
                }
            },
            None => None,
        };
        let mut headers = Vec::with_capacity(b.headers.len());
        for (name, value) in &b.headers {
            let v = match value {
                HeaderValue::Literal(v) => v.clone(),
                HeaderValue::Env { var, span } => match self.env.var(var) {
                    Some(v) if !v.trim().contains(['\r', '\n']) => v.trim().to_string(),
                    Some(_) => {
                        return Err(self.config.error_at(
                            Some(span.clone()),
                            format!("the value of header `{name}` (from {var}) contains a line break"),
                            None,
                        ))
                    }
                    None => {
                        return Err(self.config.error_at(
                            Some(span.clone()),
                            format!("environment variable {var} (header `{name}` of backend `{}`) is not set", b.name),
                            Some(format!("export {var}=... before running")),
                        ))
                    }
                },
            };
            headers.push((name.clone(), Secret::new(v)));
        }
        let opts = HttpOptions {
            name: b.name.clone(),
            protocol,
            base_url: b.base_url.clone(),
            api_key,
            models: b.models.clone(),
            instructions: self.config.instructions.clone(),
            temperature: b.temperature,
            max_tokens: b.max_tokens,
            concurrency: b.concurrency,
            connect_timeout: b.connect_timeout,
            timeout: b.timeout,
            retry: b.retry,
            structured: b.structured,
            transport: b.transport,
            accept_incomplete: b.accept_incomplete,
            reasoning_model: b.reasoning_model,
            headers,
        };
        Ok(Arc::new(HttpBackend::new(opts)))
    }

    /// The backend for a run: the selected one (or the replay directory),
    /// recording if asked, counting tokens against the budget.
    pub fn build_run(&self) -> Result<RunBackend, ConfigError> {
        let (inner, simulated, notice): (Arc<dyn LlmBackend>, bool, Option<String>) =
            match &self.replay {
                Some(dir) => {
                    let r = ReplayBackend::new(dir).map_err(|e| {
                        ConfigError::plain(
                            format!("cannot replay from {}: {e}", dir.display()),
                            Some("pass the directory written by --record".into()),
                        )
                    })?;
                    (
                        Arc::new(r),
                        false,
                        Some(format!(
                            "note: replaying recorded LLM replies from {}",
                            dir.display()
                        )),
                    )
                }
                None => {
                    let b = self.build_backend(&self.backend)?;
                    let sim = b.is_simulated();
                    (b, sim, self.notice())
                }
            };
        let inner: Arc<dyn LlmBackend> = match &self.record {
            Some(dir) => Arc::new(RecordingBackend::new(inner, dir).map_err(|e| {
                ConfigError::plain(format!("cannot record to {}: {e}", dir.display()), None)
            })?),
            None => inner,
        };
        let budget = Arc::new(TokenBudget::new(self.token_budget));
        let backend: Arc<dyn LlmBackend> =
            Arc::new(BudgetedBackend::new(inner, Arc::clone(&budget)));
        Ok(RunBackend {
            backend,
            budget,
            notice,
            simulated,
        })
    }

    /// The effective configuration as TOML-like text, keys masked.
    pub fn show(&self) -> String {
        let mut o = String::new();
        let q = |s: &str| serde_json::Value::String(s.to_string()).to_string();
        let _ = writeln!(o, "# effective configuration (flags > environment > file)");
        match self.config.path() {
            Some(p) => {
                let _ = writeln!(o, "# file: {}", p.display());
            }
            None => {
                let _ = writeln!(o, "# file: none (built-in defaults)");
            }
        }
        let _ = writeln!(
            o,
            "# selected backend: {} ({})",
            self.backend, self.backend_from
        );
        if let Some(n) = self.notice() {
            let _ = writeln!(o, "# {n}");
        }
        let _ = writeln!(o, "default_backend = {}", q(&self.backend));
        match self.token_budget {
            Some(t) => {
                let _ = writeln!(o, "token_budget = {t}  # from {}", self.token_budget_from);
            }
            None => {
                let _ = writeln!(o, "# token_budget: unlimited");
            }
        }
        match (&self.record, &self.replay) {
            (Some(d), _) => {
                let _ = writeln!(o, "# record: {}", d.display());
            }
            (_, Some(d)) => {
                let _ = writeln!(o, "# replay: {} (no network)", d.display());
            }
            _ => {}
        }
        for b in &self.config.backends {
            let _ = writeln!(o, "\n[[llm_backends]]");
            let origin = match b.origin {
                Origin::File { line } => format!("line {line}"),
                Origin::Builtin => "built in".into(),
            };
            let _ = writeln!(o, "name = {}  # {origin}", q(&b.name));
            let _ = writeln!(o, "protocol = {}", q(b.kind.name()));
            if b.kind == BackendKind::Sim {
                let scale = self.sim_delay_scale.unwrap_or(b.delay_scale);
                let _ = writeln!(o, "delay_scale = {scale}");
            } else {
                let _ = writeln!(o, "base_url = {}", q(&redact_url(&b.base_url)));
                match &b.api_key_env {
                    Some(var) => {
                        let state = if self.env.var(var).is_some() {
                            "set, value hidden"
                        } else {
                            "NOT SET"
                        };
                        let _ = writeln!(o, "api_key_env = {}  # {state}", q(var));
                    }
                    None => {
                        let _ = writeln!(o, "# api_key_env: none (no key sent)");
                    }
                }
                let _ = writeln!(o, "timeout_s = {}", b.timeout.as_secs_f64());
                let _ = writeln!(o, "connect_timeout_s = {}", b.connect_timeout.as_secs_f64());
                let _ = writeln!(o, "retries = {}", b.retry.max_retries);
                let _ = writeln!(o, "backoff_ms = {}", b.retry.base_delay.as_millis());
                let _ = writeln!(o, "max_backoff_ms = {}", b.retry.max_delay.as_millis());
                let _ = writeln!(
                    o,
                    "max_retry_after_s = {}",
                    b.retry.max_retry_after.as_secs_f64()
                );
                let mode = match b.structured {
                    StructuredMode::JsonSchema => "json_schema",
                    StructuredMode::JsonObject => "json_object",
                    StructuredMode::Prompt => "prompt",
                };
                let _ = writeln!(o, "structured_output = {}", q(mode));
                let transport = match b.transport {
                    HttpTransport::Auto => "auto",
                    HttpTransport::Threads => "threads",
                };
                let _ = writeln!(o, "transport = {}", q(transport));
                let _ = writeln!(o, "accept_incomplete = {}", b.accept_incomplete);
                if !b.headers.is_empty() {
                    // Literal values are hidden too: they are often keys.
                    let shown: Vec<String> = b
                        .headers
                        .iter()
                        .map(|(name, value)| match value {
                            HeaderValue::Literal(_) => format!("{} = \"****\"", q(name)),
                            HeaderValue::Env { var, .. } => {
                                format!("{} = {}", q(name), q(&format!("${var}")))
                            }
                        })
                        .collect();
                    let _ = writeln!(o, "headers = {{ {} }}", shown.join(", "));
                }
                match b.reasoning_model {
                    Some(r) => {
                        let _ = writeln!(o, "reasoning_model = {r}");
                    }
                    None => {
                        let _ = writeln!(o, "# reasoning_model: by model name (o1, o3, o4, gpt-5)");
                    }
                }
            }
            let _ = writeln!(o, "concurrency = {}", b.concurrency);
            if let Some(t) = b.temperature {
                let _ = writeln!(o, "temperature = {t}");
            }
            if let Some(m) = b.max_tokens {
                let _ = writeln!(o, "max_tokens = {m}");
            }
            let m = &b.models;
            if m.ask.is_some() || m.think.is_some() || m.reason.is_some() {
                let _ = writeln!(o, "[llm_backends.models]");
                for (k, v) in [("ask", &m.ask), ("think", &m.think), ("reason", &m.reason)] {
                    if let Some(v) = v {
                        let _ = writeln!(o, "{k} = {}", q(v));
                    }
                }
            }
            if let Some(p) = &b.prices {
                let _ = writeln!(o, "[llm_backends.prices]");
                let _ = writeln!(o, "input_per_mtok = {}", p.input_per_mtok);
                let _ = writeln!(o, "output_per_mtok = {}", p.output_per_mtok);
            }
        }
        let _ = writeln!(o, "\n[instruction]");
        for kind in ALL_KINDS {
            let over = self.config.instructions.overrides.contains_key(kind.name());
            let text = self.config.instructions.system_for(kind);
            let _ = writeln!(
                o,
                "{} = {}{}",
                kind.name(),
                q(text),
                if over { "" } else { "  # default" }
            );
        }
        o
    }

    /// Checks that every backend answers a tiny request. Never panics;
    /// problems are in the report.
    pub fn doctor(&self) -> DoctorReport {
        let mut entries = Vec::new();
        for b in &self.config.backends {
            entries.push(self.check_backend(b));
        }
        DoctorReport {
            config: self.config.path().map(Path::to_path_buf),
            selected: self.backend.clone(),
            entries,
        }
    }

    fn check_backend(&self, b: &BackendConfig) -> DoctorEntry {
        let target = if b.kind == BackendKind::Sim {
            "offline".to_string()
        } else {
            redact_url(&b.base_url)
        };
        let mut entry = DoctorEntry {
            backend: b.name.clone(),
            protocol: b.kind.name(),
            target,
            ok: false,
            detail: String::new(),
        };
        // A doctor probe does not retry and waits at most 30 s.
        let mut probe_settings = self.clone();
        if let Some(pb) = probe_settings
            .config
            .backends
            .iter_mut()
            .find(|x| x.name == b.name)
        {
            pb.retry.max_retries = 0;
            pb.timeout = pb.timeout.min(Duration::from_secs(30));
            // The probe checks that the model answers, not that a short
            // answer fits: a cut-off reply still proves it.
            pb.accept_incomplete = true;
        }
        // Reasoning models spend tokens thinking before any text: a tiny
        // cap would leave them nothing to answer with.
        let reasoning = b.kind == BackendKind::OpenAi
            && b.reasoning_model.unwrap_or_else(|| {
                b.models
                    .for_class(crate::llm::prompt::ModelClass::Ask)
                    .is_some_and(crate::llm::openai::is_reasoning_model)
            });
        probe_settings.sim_delay_scale = Some(0.0);
        let backend = match probe_settings.build_backend(&b.name) {
            Ok(x) => x,
            Err(e) => {
                entry.detail = e.message;
                if let Some(h) = e.hint {
                    entry.detail.push_str(&format!(" (hint: {h})"));
                }
                return entry;
            }
        };
        let request = LlmRequest {
            kind: LlmOpKind::Ask,
            agent: "doctor".into(),
            system: Some("You are a health check. Reply with the single word OK.".into()),
            prompt: "Reply with the single word OK.".into(),
            context: Vec::<ContextBlock>::new(),
            model: None,
            temperature: Some(0.0),
            max_tokens: if reasoning { None } else { Some(8) },
            json_schema: None,
        };
        let started = Instant::now();
        match backend.complete(&request, &CancelToken::new()) {
            Ok(r) => {
                entry.ok = true;
                entry.detail = format!(
                    "model {} answered in {} ms ({} tokens){}",
                    r.model,
                    started.elapsed().as_millis(),
                    r.usage.total(),
                    if r.simulated { ", simulated" } else { "" }
                );
            }
            Err(e) => {
                // Backends redact their errors; this also covers messages
                // built before any request (e.g. an invalid URL).
                entry.detail = redact_url_in(&e.to_string(), &b.base_url);
            }
        }
        entry
    }
}

const ALL_KINDS: [LlmOpKind; 7] = [
    LlmOpKind::Ask,
    LlmOpKind::Think,
    LlmOpKind::Reason,
    LlmOpKind::Llm,
    LlmOpKind::Plan,
    LlmOpKind::Reflect,
    LlmOpKind::Verify,
];

/// Result of `aisc doctor`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoctorReport {
    pub config: Option<PathBuf>,
    pub selected: String,
    pub entries: Vec<DoctorEntry>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoctorEntry {
    pub backend: String,
    pub protocol: &'static str,
    pub target: String,
    pub ok: bool,
    pub detail: String,
}

impl DoctorReport {
    pub fn all_ok(&self) -> bool {
        self.entries.iter().all(|e| e.ok)
    }

    /// The entry of the selected backend.
    pub fn selected_ok(&self) -> bool {
        self.entries
            .iter()
            .any(|e| e.backend == self.selected && e.ok)
    }
}

impl fmt::Display for DoctorReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.config {
            Some(p) => writeln!(f, "config: {}", p.display())?,
            None => writeln!(f, "config: none (built-in defaults)")?,
        }
        for e in &self.entries {
            let mark = if e.ok { "ok  " } else { "FAIL" };
            let sel = if e.backend == self.selected {
                " (selected)"
            } else {
                ""
            };
            writeln!(
                f,
                "{mark} {}{sel} [{} {}]: {}",
                e.backend, e.protocol, e.target, e.detail
            )?;
        }
        let failed = self.entries.iter().filter(|e| !e.ok).count();
        write!(
            f,
            "{} backend(s) checked, {failed} failed",
            self.entries.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_chars() {
        assert_eq!(line_col("a\nbé c", 5), (2, 3));
        assert_eq!(line_col("", 0), (1, 1));
    }

    #[test]
    fn masks_secret_lines() {
        assert_eq!(mask_line("api_key = \"sk-123\""), "api_key = \"****\"");
        assert_eq!(mask_line("api_key_env = \"X\""), "api_key_env = \"X\"");
    }
}
