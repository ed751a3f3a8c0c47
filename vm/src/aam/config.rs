//! The AAM's part of `.apxm/config.toml`: `[memory]`, `[tools]`,
//! `[[tools.subprocess]]`, `[[mcp_servers]]` and `[access]`. The backend
//! sections of the same file are read by `crate::config`; each side ignores
//! the other's keys. See `docs/runtime.md`, "Agent Abstract Machine".
//!
//! ```toml
//! [memory]
//! stm_capacity = 256          # STM entries per agent before LRU-K eviction
//! lru_k = 2
//!
//! [tools]
//! workspace = "."             # root of read_file / write_file
//! http_timeout_s = 30
//! destructive = ["write_file"] # need --yes or an interactive confirmation
//! concurrency = { http_get = 4 }
//!
//! [[tools.subprocess]]
//! name = "word_count"
//! command = ["python3", "tools/wc.py"]
//! timeout_s = 10
//! input_schema = { type = "object", required = ["text"] }
//!
//! [[mcp_servers]]
//! name = "fs"
//! command = ["npx", "@modelcontextprotocol/server-filesystem", "/data"]
//!
//! [access]
//! allow = { "*" = ["http_get"], Writer = ["write_file", "fs.*"] }
//! deny = { Writer = ["calculator"] }
//! ```

use serde::Deserialize;
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A problem in the AAM sections of the config file.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct AamConfigError {
    pub path: String,
    pub message: String,
    /// Byte range in the file of the offending key or value, when the TOML
    /// parser knows it (unknown keys, wrong types), so the CLI can point at
    /// it with a caret.
    pub span: Option<std::ops::Range<usize>>,
}

#[derive(Debug, Default, Deserialize)]
struct FileAam {
    #[serde(default)]
    memory: Option<MemoryConfig>,
    #[serde(default)]
    tools: Option<FileTools>,
    #[serde(default)]
    mcp_servers: Vec<McpServerConfig>,
    #[serde(default)]
    access: Option<AccessConfig>,
}

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

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTools {
    workspace: Option<PathBuf>,
    http_timeout_s: Option<f64>,
    #[serde(default)]
    destructive: Vec<String>,
    #[serde(default)]
    concurrency: BTreeMap<String, usize>,
    #[serde(default)]
    subprocess: Vec<SubprocessConfig>,
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
}

fn default_timeout_s() -> f64 {
    30.0
}

/// `[[mcp_servers]]`: an MCP server spoken to over stdio, started on the
/// first call of one of its tools (`super::mcp::McpServer`).
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
}

impl McpServerConfig {
    pub fn prefix(&self) -> String {
        self.prefix
            .clone()
            .unwrap_or_else(|| format!("{}.", self.name))
    }
}

/// `[access]`: which agent may call which tool.
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

/// Does `pattern` (`name`, `prefix*`, `*`) match `tool`?
pub fn pattern_matches(pattern: &str, tool: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => tool.starts_with(prefix),
        None => pattern == tool,
    }
}

impl AccessConfig {
    fn listed(map: &BTreeMap<String, Vec<String>>, agent: &str, tool: &str) -> bool {
        [agent, "*"].iter().any(|a| {
            map.get(*a)
                .is_some_and(|ps| ps.iter().any(|p| pattern_matches(p, tool)))
        })
    }

    pub fn denied(&self, agent: &str, tool: &str) -> bool {
        Self::listed(&self.deny, agent, tool)
    }

    pub fn allowed(&self, agent: &str, tool: &str) -> bool {
        Self::listed(&self.allow, agent, tool)
    }
}

/// The AAM configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct AamConfig {
    /// The file it came from (relative paths resolve against its project
    /// directory, the parent of `.apxm/`).
    pub path: Option<PathBuf>,
    pub memory: MemoryConfig,
    pub workspace: PathBuf,
    pub http_timeout: Duration,
    pub destructive: Vec<String>,
    pub concurrency: BTreeMap<String, usize>,
    pub subprocess: Vec<SubprocessConfig>,
    pub mcp_servers: Vec<McpServerConfig>,
    pub access: AccessConfig,
}

impl Default for AamConfig {
    fn default() -> Self {
        AamConfig {
            path: None,
            memory: MemoryConfig::default(),
            workspace: PathBuf::from("."),
            http_timeout: Duration::from_secs(30),
            destructive: Vec::new(),
            concurrency: BTreeMap::new(),
            subprocess: Vec::new(),
            mcp_servers: Vec::new(),
            access: AccessConfig::default(),
        }
    }
}

pub(crate) fn toml_to_json(v: &toml::Value) -> Json {
    match v {
        toml::Value::String(s) => Json::String(s.clone()),
        toml::Value::Integer(i) => Json::from(*i),
        toml::Value::Float(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
        toml::Value::Boolean(b) => Json::Bool(*b),
        toml::Value::Datetime(d) => Json::String(d.to_string()),
        toml::Value::Array(a) => Json::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => Json::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), toml_to_json(v)))
                .collect(),
        ),
    }
}

impl AamConfig {
    /// Reads the AAM sections of `path`.
    pub fn load(path: &Path) -> Result<AamConfig, AamConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| AamConfigError {
            path: path.display().to_string(),
            message: format!("cannot read: {e}"),
            span: None,
        })?;
        AamConfig::parse(&text, Some(path))
    }

    /// Reads the config file the backend settings use (`--config`,
    /// `$APXM_CONFIG`, `./.apxm/config.toml`, `~/.apxm/config.toml`), or the
    /// defaults when there is none.
    pub fn find(explicit: Option<&Path>) -> Result<AamConfig, AamConfigError> {
        let flags = crate::config::Flags {
            config: explicit.map(Path::to_path_buf),
            ..crate::config::Flags::default()
        };
        match crate::config::find_config_file(&flags, &crate::config::Env::from_process()) {
            Some(p) => AamConfig::load(&p),
            None => Ok(AamConfig::default()),
        }
    }

    pub fn parse(text: &str, path: Option<&Path>) -> Result<AamConfig, AamConfigError> {
        let shown = path.map_or("config".to_string(), |p| p.display().to_string());
        let err = |message: String| AamConfigError {
            path: shown.clone(),
            message,
            span: None,
        };
        let file: FileAam = toml::from_str(text).map_err(|e| {
            let at = e
                .span()
                .map(|s| {
                    let line = text[..s.start.min(text.len())].matches('\n').count() + 1;
                    format!(" (line {line})")
                })
                .unwrap_or_default();
            AamConfigError {
                span: e.span(),
                ..err(format!("{}{at}", e.message().trim()))
            }
        })?;
        // Relative paths resolve against the project directory.
        let base = path
            .and_then(Path::parent)
            .map(|d| {
                if d.file_name()
                    .is_some_and(|n| n == crate::config::CONFIG_DIR)
                {
                    d.parent().unwrap_or(d).to_path_buf()
                } else {
                    d.to_path_buf()
                }
            })
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("."));
        let resolve = |p: &Path| {
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                base.join(p)
            }
        };
        let mut cfg = AamConfig {
            path: path.map(Path::to_path_buf),
            memory: file.memory.unwrap_or_default(),
            access: file.access.unwrap_or_default(),
            ..AamConfig::default()
        };
        if cfg.memory.stm_capacity == 0 {
            return Err(err("memory.stm_capacity must be at least 1".into()));
        }
        if cfg.memory.lru_k == 0 || cfg.memory.lru_k > 16 {
            return Err(err("memory.lru_k must be between 1 and 16".into()));
        }
        let mut names: Vec<String> = Vec::new();
        if let Some(t) = file.tools {
            if let Some(w) = &t.workspace {
                cfg.workspace = resolve(w);
            } else if path.is_some() {
                cfg.workspace = base.clone();
            }
            if let Some(s) = t.http_timeout_s {
                cfg.http_timeout = secs(s).ok_or_else(|| {
                    err(format!(
                        "tools.http_timeout_s must be a positive number, got {s}"
                    ))
                })?;
            }
            cfg.destructive = t.destructive;
            for (k, v) in &t.concurrency {
                if *v == 0 {
                    return Err(err(format!("tools.concurrency.{k} must be at least 1")));
                }
            }
            cfg.concurrency = t.concurrency;
            for mut s in t.subprocess {
                if s.name.trim().is_empty() {
                    return Err(err("a [[tools.subprocess]] entry has an empty name".into()));
                }
                if s.command.is_empty() || s.command[0].trim().is_empty() {
                    return Err(err(format!(
                        "subprocess tool `{}` has an empty command",
                        s.name
                    )));
                }
                if secs(s.timeout_s).is_none() {
                    return Err(err(format!(
                        "subprocess tool `{}`: timeout_s must be a positive number",
                        s.name
                    )));
                }
                if s.concurrency == Some(0) {
                    return Err(err(format!(
                        "subprocess tool `{}`: concurrency must be at least 1",
                        s.name
                    )));
                }
                if names.contains(&s.name) {
                    return Err(err(format!("tool `{}` is defined twice", s.name)));
                }
                names.push(s.name.clone());
                s.cwd = s.cwd.as_deref().map(resolve);
                cfg.subprocess.push(s);
            }
        } else if path.is_some() {
            cfg.workspace = base.clone();
        }
        let mut servers: Vec<String> = Vec::new();
        for mut m in file.mcp_servers {
            if m.name.trim().is_empty() {
                return Err(err("an [[mcp_servers]] entry has an empty name".into()));
            }
            if m.command.is_empty() || m.command[0].trim().is_empty() {
                return Err(err(format!("MCP server `{}` has an empty command", m.name)));
            }
            if secs(m.timeout_s).is_none() {
                return Err(err(format!(
                    "MCP server `{}`: timeout_s must be a positive number",
                    m.name
                )));
            }
            if m.concurrency == Some(0) {
                return Err(err(format!(
                    "MCP server `{}`: concurrency must be at least 1",
                    m.name
                )));
            }
            if servers.contains(&m.name) {
                return Err(err(format!("MCP server `{}` is defined twice", m.name)));
            }
            servers.push(m.name.clone());
            m.cwd = m.cwd.as_deref().map(resolve);
            cfg.mcp_servers.push(m);
        }
        Ok(cfg)
    }
}

pub(crate) fn secs(s: f64) -> Option<Duration> {
    (s.is_finite() && s > 0.0 && s < 1.0e9).then(|| Duration::from_secs_f64(s))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_shape() {
        let text = r#"
default_backend = "sim"
[memory]
stm_capacity = 8
[tools]
workspace = "ws"
destructive = ["write_file"]
concurrency = { http_get = 2 }
[[tools.subprocess]]
name = "wc"
command = ["sh", "-c", "cat"]
timeout_s = 2
input_schema = { type = "object", required = ["text"] }
[[mcp_servers]]
name = "fs"
command = ["node", "x.js"]
[access]
allow = { "*" = ["http_get"], W = ["fs.*"] }
deny = { W = ["calculator"] }
"#;
        let c = AamConfig::parse(text, Some(Path::new("/p/.apxm/config.toml"))).unwrap();
        assert_eq!(c.memory.stm_capacity, 8);
        assert_eq!(c.workspace, PathBuf::from("/p/ws"));
        assert_eq!(c.subprocess[0].name, "wc");
        assert_eq!(c.mcp_servers[0].prefix(), "fs.");
        assert!(c.access.allowed("W", "fs.read"));
        assert!(c.access.allowed("X", "http_get"));
        assert!(!c.access.allowed("X", "fs.read"));
        assert!(c.access.denied("W", "calculator"));
    }

    #[test]
    fn bad_values_are_errors() {
        for bad in [
            "[memory]\nstm_capacity = 0",
            "[tools]\nbogus = 1",
            "[[tools.subprocess]]\nname = \"x\"\ncommand = []",
            "[[tools.subprocess]]\nname = \"x\"\ncommand = [\"a\"]\ntimeout_s = -1",
            "[[mcp_servers]]\nname = \"\"\ncommand = [\"a\"]",
            "[access]\nallow = 3",
        ] {
            assert!(AamConfig::parse(bad, None).is_err(), "{bad}");
        }
    }
}
