//! The schema of `.apxm/config.toml`: one serde struct per section, every
//! one `deny_unknown_fields`, so a misspelt key anywhere is an error that
//! names the key and lists the accepted ones. The backend sections are
//! checked and given their defaults by `super::resolve`; the AAM's sections
//! (`[memory]`, `[tools]`, `[[tools.subprocess]]`, `[[mcp_servers]]`,
//! `[access]`) by `super::resolve::check_aam`, and turned into the AAM's
//! runtime settings by `crate::aam::config`. The file format is documented
//! in `docs/backends.md` and `docs/runtime.md`.

use crate::llm::http::{HttpTransport, Protocol};
use crate::llm::prompt::Models;
use crate::llm::providers::StructuredMode;
use crate::llm::Usage;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use toml::Spanned;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileConfig {
    pub(crate) default_backend: Option<Spanned<String>>,
    pub(crate) token_budget: Option<Spanned<i64>>,
    /// The run store (`postgres://...`; docs/scale-out.md).
    pub(crate) store: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) llm_backends: Vec<FileBackend>,
    #[serde(default)]
    pub(crate) instruction: FileInstructions,
    /// `[max_tokens]`: completion limit per op kind.
    #[serde(default)]
    pub(crate) max_tokens: FileMaxTokens,
    #[serde(default)]
    pub(crate) limits: FileLimits,
    /// `speculate = { max_extra_calls, max_extra_cost }`: the run's budget
    /// for speculated branch arms (`crate::scheduler` `speculate`).
    pub(crate) speculate: Option<Spanned<FileSpeculate>>,
    #[serde(default)]
    pub(crate) telemetry: FileTelemetry,
    // The Agent Abstract Machine's sections.
    #[serde(default)]
    pub(crate) memory: Option<MemoryConfig>,
    #[serde(default)]
    pub(crate) tools: Option<ToolsSection>,
    #[serde(default)]
    pub(crate) mcp_servers: Vec<McpServerConfig>,
    #[serde(default)]
    pub(crate) access: Option<AccessConfig>,
    #[serde(default)]
    pub(crate) remote_agents: Vec<RemoteAgentConfig>,
    /// `[policy]` (see `ais_ir::ifc`, `docs/security.md`).
    #[serde(default)]
    pub(crate) policy: Option<ais_ir::ifc::FlowPolicy>,
    /// `[webhooks]` (`super::webhooks`).
    #[serde(default)]
    pub(crate) webhooks: super::webhooks::WebhooksSection,
}

/// `[limits]`: per-run resource limits (see `scheduler::limits`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileLimits {
    pub(crate) max_live_frames: Option<Spanned<i64>>,
    pub(crate) max_call_depth: Option<Spanned<i64>>,
    pub(crate) max_value_bytes: Option<Spanned<i64>>,
}

/// `speculate = { ... }`: both limits are required (speculation spends
/// money on arms that are not taken; no default amount is assumed).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileSpeculate {
    pub(crate) max_extra_calls: i64,
    /// USD.
    pub(crate) max_extra_cost: f64,
}

/// `[telemetry]`: what run events keep of prompts, replies and tool
/// arguments (see `crate::telemetry::TextPolicy`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileTelemetry {
    pub(crate) text_limit: Option<Spanned<i64>>,
    pub(crate) redact: Option<bool>,
    pub(crate) otlp: Option<super::telemetry::OtlpSection>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileInstructions {
    pub(crate) ask: Option<String>,
    pub(crate) think: Option<String>,
    pub(crate) reason: Option<String>,
    pub(crate) llm: Option<String>,
    pub(crate) plan: Option<String>,
    pub(crate) reflect: Option<String>,
    pub(crate) verify: Option<String>,
    pub(crate) solve: Option<String>,
}

/// `[max_tokens]`: the completion limit per op kind when neither the op
/// nor the backend sets one (defaults: `crate::llm::kinds`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileMaxTokens {
    pub(crate) ask: Option<Spanned<i64>>,
    pub(crate) think: Option<Spanned<i64>>,
    pub(crate) reason: Option<Spanned<i64>>,
    pub(crate) llm: Option<Spanned<i64>>,
    pub(crate) plan: Option<Spanned<i64>>,
    pub(crate) reflect: Option<Spanned<i64>>,
    pub(crate) verify: Option<Spanned<i64>>,
    pub(crate) solve: Option<Spanned<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileBackend {
    pub(crate) name: Spanned<String>,
    pub(crate) protocol: Spanned<BackendKind>,
    pub(crate) base_url: Option<Spanned<String>>,
    pub(crate) api_key_env: Option<Spanned<String>>,
    pub(crate) concurrency: Option<Spanned<i64>>,
    /// Limits shared by every process on one store (`crate::store::limits`).
    pub(crate) fleet_concurrency: Option<Spanned<i64>>,
    pub(crate) requests_per_minute: Option<Spanned<i64>>,
    pub(crate) tokens_per_minute: Option<Spanned<i64>>,
    pub(crate) timeout_s: Option<Spanned<f64>>,
    pub(crate) connect_timeout_s: Option<Spanned<f64>>,
    pub(crate) retries: Option<Spanned<i64>>,
    pub(crate) backoff_ms: Option<Spanned<i64>>,
    pub(crate) max_backoff_ms: Option<Spanned<i64>>,
    pub(crate) max_retry_after_s: Option<Spanned<f64>>,
    pub(crate) structured_output: Option<StructuredMode>,
    pub(crate) transport: Option<HttpTransport>,
    pub(crate) accept_incomplete: Option<bool>,
    pub(crate) reasoning_model: Option<bool>,
    pub(crate) stream: Option<bool>,
    pub(crate) cache_warmup: Option<crate::llm::cache::WarmupMode>,
    pub(crate) probe: Option<bool>,
    pub(crate) headers: Option<BTreeMap<String, Spanned<String>>>,
    pub(crate) temperature: Option<Spanned<f64>>,
    pub(crate) max_tokens: Option<Spanned<i64>>,
    pub(crate) delay_scale: Option<Spanned<f64>>,
    #[serde(default)]
    pub(crate) models: Models,
    pub(crate) prices: Option<Prices>,
    /// `hedge = { after = "p95", max_extra = 0.1 }` (`llm::resilience`).
    pub(crate) hedge: Option<Spanned<FileHedge>>,
    /// `fallback = ["b2", "b3"]`: backends that answer when this one cannot.
    pub(crate) fallback: Option<Spanned<Vec<Spanned<String>>>>,
}

/// A backend's `hedge` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileHedge {
    pub(crate) after: Option<Spanned<String>>,
    pub(crate) max_extra: Option<Spanned<f64>>,
}

/// What a backend is (`protocol = "..."`): the built-in simulator, or an
/// HTTP backend speaking a registered wire protocol
/// (`crate::llm::providers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    Sim,
    Http(Protocol),
}

// Named like the variants they replaced, so existing matches read the same.
#[allow(non_upper_case_globals)]
impl BackendKind {
    pub const OpenAi: BackendKind = BackendKind::Http(Protocol::OpenAi);
    pub const Anthropic: BackendKind = BackendKind::Http(Protocol::Anthropic);
    pub const Ollama: BackendKind = BackendKind::Http(Protocol::Ollama);
}

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Sim => "sim",
            BackendKind::Http(p) => p.name(),
        }
    }

    pub fn http(self) -> Option<Protocol> {
        match self {
            BackendKind::Http(p) => Some(p),
            BackendKind::Sim => None,
        }
    }

    /// Every accepted `protocol` value, in the order messages list them.
    pub fn names() -> Vec<&'static str> {
        let mut names: Vec<&'static str> = Protocol::all().iter().map(|p| p.name()).collect();
        names.push("sim");
        names
    }
}

impl Serialize for BackendKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for BackendKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<BackendKind, D::Error> {
        let name = String::deserialize(d)?;
        if name == "sim" {
            return Ok(BackendKind::Sim);
        }
        Protocol::named(&name)
            .map(BackendKind::Http)
            .ok_or_else(|| {
                let expected: Vec<String> = BackendKind::names()
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect();
                serde::de::Error::custom(format!(
                    "unknown variant `{name}`, expected one of {}",
                    expected.join(", ")
                ))
            })
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
    /// Price of input read from the provider's prompt cache, as a multiple
    /// of `input_per_mtok` (default: the protocol's, e.g. 0.1 Anthropic,
    /// 0.5 OpenAI, 0.25 Gemini).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_multiplier: Option<f64>,
    /// Price of input written to the prompt cache, as a multiple of
    /// `input_per_mtok` (default: the protocol's, 1.25 Anthropic, else 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_multiplier: Option<f64>,
}

impl Prices {
    /// The cost of `usage`, cached input at its multipliers.
    pub fn cost(&self, usage: Usage) -> f64 {
        let (read, write) = self.cache_multipliers();
        (usage.priced_input(read, write) * self.input_per_mtok
            + usage.completion_tokens as f64 * self.output_per_mtok)
            / 1e6
    }

    /// (cache reads, cache writes) price multipliers; 1× where unset.
    pub fn cache_multipliers(&self) -> (f64, f64) {
        (
            self.cache_read_multiplier.unwrap_or(1.0),
            self.cache_write_multiplier.unwrap_or(1.0),
        )
    }
}

// ---------------------------------------------------------------------------
// The Agent Abstract Machine's sections
// ---------------------------------------------------------------------------

/// `[memory]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// STM entries kept in memory per agent; beyond it LRU-K evicts to LTM.
    #[serde(default = "default_stm_capacity")]
    pub stm_capacity: usize,
    /// The K of LRU-K.
    #[serde(default = "default_lru_k")]
    pub lru_k: usize,
}

fn default_stm_capacity() -> usize {
    256
}
fn default_lru_k() -> usize {
    2
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            stm_capacity: default_stm_capacity(),
            lru_k: default_lru_k(),
        }
    }
}

/// `[tools]`, as written (relative paths not yet resolved).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ToolsSection {
    /// Root of `read_file` / `write_file`.
    pub workspace: Option<PathBuf>,
    pub http_timeout_s: Option<f64>,
    /// Tools that need `--yes` or an interactive confirmation.
    #[serde(default)]
    pub destructive: Vec<String>,
    /// Per-tool concurrent calls.
    #[serde(default)]
    pub concurrency: BTreeMap<String, usize>,
    #[serde(default)]
    pub subprocess: Vec<SubprocessConfig>,
    /// The web-search provider of `search` / `search_web`.
    pub search: Option<SearchConfig>,
    /// Private destinations `http_get` may reach (loopback, link-local,
    /// private ranges are refused otherwise): `"host"`, `"host:port"`,
    /// `"*"` (`ais_stdlib::http`).
    #[serde(default)]
    pub allow_private_network: Vec<String>,
    /// How `bash` is confined: `"bwrap"` (the default: bubblewrap, refused
    /// when it is missing) or `"none"` (an explicit opt-out).
    pub sandbox: Option<String>,
}

/// A tool's declared facts, overriding its provider's defaults
/// (`[mcp_servers.tools.NAME]`, and the same keys on a subprocess tool).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ToolFacts {
    /// Are its results trusted?
    pub trusted: Option<bool>,
    /// `read-only`, `idempotent` or `side-effecting`.
    pub effect: Option<ais_stdlib::Effect>,
    /// Arguments that leave the machine (sinks even when it only reads).
    pub leaves: Option<Vec<String>>,
}

/// `[tools.search]`: a SearXNG-compatible JSON API (`GET {url}/search?q=…&format=json`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    pub url: String,
    /// Environment variable holding a key, sent as `Authorization: Bearer`.
    pub api_key_env: Option<String>,
    pub timeout_s: Option<f64>,
}

/// `[[tools.subprocess]]`: a tool run as a child process (JSON arguments on
/// stdin, one JSON value on stdout).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SubprocessConfig {
    pub name: String,
    /// Program and arguments (no shell).
    pub command: Vec<String>,
    #[serde(default)]
    pub description: String,
    #[serde(default = "default_timeout_s")]
    pub timeout_s: f64,
    /// Working directory (default: the current directory).
    pub cwd: Option<PathBuf>,
    /// Extra environment variables (never logged).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub input_schema: Option<toml::Value>,
    pub output_schema: Option<toml::Value>,
    #[serde(default)]
    pub destructive: bool,
    pub concurrency: Option<usize>,
    /// Are its results trusted? Default true: a local program the owner
    /// wrote (say `false` when it relays data from outside).
    pub trusted: Option<bool>,
    /// `read-only`, `idempotent` or `side-effecting` (the default).
    pub effect: Option<ais_stdlib::Effect>,
    /// Arguments that leave the machine.
    pub leaves: Option<Vec<String>>,
}

fn default_timeout_s() -> f64 {
    30.0
}

/// `[[mcp_servers]]`: an MCP server spoken to over stdio, started on the
/// first call of one of its tools (`crate::aam::mcp::McpServer`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    pub name: String,
    pub command: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
    /// Registered tool names are `prefix + tool`; default `"<name>."`.
    pub prefix: Option<String>,
    /// Per-request timeout (also for `initialize`; the `server/discover`
    /// probe waits at most 10 s of it).
    #[serde(default = "default_timeout_s")]
    pub timeout_s: f64,
    /// Concurrent calls to each tool of this server.
    pub concurrency: Option<usize>,
    /// Tool names (without prefix) treated as destructive in addition to
    /// those the server annotates so.
    #[serde(default)]
    pub destructive: Vec<String>,
    /// Are its tools' results trusted? Default false: an MCP server
    /// relays data from outside (`ais_vm::catalogue`).
    #[serde(default)]
    pub trusted: bool,
    /// Per-tool declarations (tool names without the prefix).
    #[serde(default)]
    pub tools: BTreeMap<String, ToolFacts>,
}

impl McpServerConfig {
    pub fn prefix(&self) -> String {
        self.prefix
            .clone()
            .unwrap_or_else(|| format!("{}.", self.name))
    }
}

/// `[access]`: which agent may call which tool (checked by
/// `crate::aam::config`'s `allowed` / `denied`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AccessConfig {
    /// Built-in read-only tools are allowed for every agent (default true).
    #[serde(default = "yes")]
    pub readonly_default: bool,
    /// Agent name (or `"*"`) to tool patterns (`name`, `prefix*`, `*`).
    #[serde(default)]
    pub allow: BTreeMap<String, Vec<String>>,
    /// Like `allow`; a deny wins over any allow.
    #[serde(default)]
    pub deny: BTreeMap<String, Vec<String>>,
}

fn yes() -> bool {
    true
}

impl Default for AccessConfig {
    fn default() -> Self {
        AccessConfig {
            readonly_default: true,
            allow: BTreeMap::new(),
            deny: BTreeMap::new(),
        }
    }
}

/// The AAM's sections of a file, checked (`super::resolve::check_aam`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AamSections {
    pub memory: MemoryConfig,
    /// `None`: no `[tools]` section.
    pub tools: Option<ToolsSection>,
    pub mcp_servers: Vec<McpServerConfig>,
    pub access: AccessConfig,
    pub remote_agents: Vec<RemoteAgentConfig>,
}

/// `[[remote_agents]]`: an agent served elsewhere, reached over A2A
/// (`communicate("Name", m)`, `Name.flow(args)`; see `crate::aam::remote`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RemoteAgentConfig {
    pub name: String,
    /// Its A2A JSON-RPC endpoint (for `aisc serve`: `http://host:port/a2a/Name`).
    pub url: String,
    #[serde(default = "a2a")]
    pub protocol: String,
    /// Environment variable holding a bearer token for it.
    pub api_key_env: Option<String>,
    /// Seconds one exchange may take (default 300).
    pub timeout_s: Option<f64>,
    /// Messages in flight to it at once (default 8).
    pub concurrency: Option<usize>,
    /// Retries of a message that did not reach it (default 2).
    pub retries: Option<u32>,
    /// Are its answers trusted? Default false (data from outside).
    #[serde(default)]
    pub trusted: bool,
}

fn a2a() -> String {
    "a2a".into()
}
