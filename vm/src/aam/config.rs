//! The AAM's runtime settings, built from its sections of
//! `.apxm/config.toml`: `[memory]`, `[tools]`, `[[tools.subprocess]]`,
//! `[[mcp_servers]]` and `[access]`. The file is parsed and checked once,
//! with the rest of the configuration, by `crate::config` (schema in
//! `crate::config::schema`); here relative paths are resolved against the
//! project directory. See `docs/runtime.md`, "Agent Abstract Machine".
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

use crate::config::schema::AamSections;
use crate::config::{Config, ConfigError};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::config::schema::{
    AccessConfig, McpServerConfig, MemoryConfig, RemoteAgentConfig, SearchConfig, SubprocessConfig,
};
pub(crate) use crate::config::secs;

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
    /// `[tools.search]`.
    pub search: Option<SearchConfig>,
    /// `[[remote_agents]]`.
    pub remote_agents: Vec<RemoteAgentConfig>,
    /// No provider configured and the run's backend is the simulator:
    /// `search` answers with labelled simulated results (set by the edge).
    pub simulate_search: bool,
    /// `[tools] allow_private_network`: private destinations `http_get`
    /// may reach.
    pub allow_private_network: Vec<String>,
    /// `[tools] sandbox`: how `bash` is confined (`super::shell`).
    pub sandbox: crate::catalogue::shell::Sandbox,
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
            search: None,
            remote_agents: Vec::new(),
            simulate_search: false,
            allow_private_network: Vec::new(),
            sandbox: crate::catalogue::shell::Sandbox::default(),
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
    /// The tool catalogue's declarations under this configuration
    /// (`crate::catalogue`).
    pub fn declarations(&self) -> ais_ir::catalogue::Declarations {
        crate::catalogue::declarations(crate::catalogue::Configured {
            subprocess: &self.subprocess,
            mcp_servers: &self.mcp_servers,
            remote_agents: &self.remote_agents,
        })
    }

    /// The AAM's settings of a checked configuration (the defaults when
    /// it has no file).
    pub fn from_config(config: &Config) -> AamConfig {
        AamConfig::build(&config.aam, config.path())
    }

    /// Parses config text and builds the AAM's settings (tests, tools);
    /// `path` locates relative paths and names the file in errors.
    pub fn parse(text: &str, path: Option<&Path>) -> Result<AamConfig, ConfigError> {
        let config = Config::parse(text, path.unwrap_or(Path::new("config")))?;
        Ok(AamConfig::build(&config.aam, path))
    }

    fn build(sections: &AamSections, path: Option<&Path>) -> AamConfig {
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
            memory: sections.memory.clone(),
            access: sections.access.clone(),
            remote_agents: sections.remote_agents.clone(),
            ..AamConfig::default()
        };
        if path.is_some() {
            cfg.workspace = base.clone();
        }
        if let Some(t) = &sections.tools {
            if let Some(w) = &t.workspace {
                cfg.workspace = resolve(w);
            }
            if let Some(d) = t.http_timeout_s.and_then(secs) {
                cfg.http_timeout = d;
            }
            cfg.destructive = t.destructive.clone();
            cfg.search = t.search.clone();
            cfg.concurrency = t.concurrency.clone();
            cfg.allow_private_network = t.allow_private_network.clone();
            if t.sandbox.as_deref() == Some("none") {
                cfg.sandbox = crate::catalogue::shell::Sandbox::None;
            }
            for s in &t.subprocess {
                let mut s = s.clone();
                s.cwd = s.cwd.as_deref().map(resolve);
                cfg.subprocess.push(s);
            }
        }
        for m in &sections.mcp_servers {
            let mut m = m.clone();
            m.cwd = m.cwd.as_deref().map(resolve);
            cfg.mcp_servers.push(m);
        }
        cfg
    }
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
