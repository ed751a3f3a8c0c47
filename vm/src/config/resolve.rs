//! The checked configuration of one file ([`Config`]): the schema's
//! sections with their values checked and their defaults filled in. Errors
//! point at the offending key or value.

use super::backend::{positive, resolve_backend, BackendConfig};
use super::env::Env;
use super::error::{ConfigError, Source};
use super::schema::{AamSections, FileConfig, ToolsSection};
use crate::llm::prompt::{Instructions, OpLimits};
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

/// The contents of a config file (or the built-in defaults without one).
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    source: Option<Source>,
    /// Backends in file order, then the built-ins not shadowed by the file.
    pub backends: Vec<BackendConfig>,
    pub default_backend: Option<String>,
    pub token_budget: Option<u64>,
    /// `store`: where runs are journaled and queued (`--store` and
    /// `AIS_STORE` win).
    pub store: Option<String>,
    pub instructions: Instructions,
    /// `[max_tokens]`: completion limits per op kind.
    pub max_tokens: OpLimits,
    /// `[limits]`; `None`: the `RunOptions` default (or the `aisc run` flag).
    pub limits: Limits,
    /// `[telemetry]`: text kept in run events (secrets are the edge's to add).
    pub telemetry: super::TextPolicy,
    /// `[telemetry.otlp]`: trace export (`super::telemetry`).
    pub otlp: Option<super::telemetry::OtlpSection>,
    /// The AAM's sections (`crate::aam::config::AamConfig::from_config`).
    pub aam: AamSections,
    /// `[policy]`: the information-flow policy (`crate::ifc`).
    pub policy: ais_ir::ifc::FlowPolicy,
    /// `speculate`: the run's budget for speculated branch arms (`None`:
    /// no speculation).
    pub speculate: Option<crate::speculation::Speculate>,
    /// `[webhooks]`: signing and sending (`crate::webhook::Settings`).
    pub webhooks: super::webhooks::WebhooksSection,
}

/// Per-run resource limits from the config file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Limits {
    /// `max_live_frames`: frames alive at once before `LIMIT_FRAMES`.
    pub max_live_frames: Option<usize>,
    /// `max_call_depth`: nested `flow.call`s before `call.depth`.
    pub max_call_depth: Option<u32>,
    /// `max_value_bytes`: size of one value before `LIMIT_VALUE_BYTES`.
    pub max_value_bytes: Option<usize>,
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
        let file: FileConfig =
            toml::from_str(text).map_err(|e| ConfigError::from_toml(&src, &e))?;
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
        super::backend::resilience::check_chains(&src, &backends)?;
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
            max_value_bytes: match &file.limits.max_value_bytes {
                Some(n) => Some(
                    usize::try_from(positive(&src, n, "max_value_bytes")?).unwrap_or(usize::MAX),
                ),
                None => None,
            },
        };
        let speculate = match &file.speculate {
            Some(s) => {
                let v = s.get_ref();
                let calls = u32::try_from(v.max_extra_calls).ok();
                let cost = Some(v.max_extra_cost).filter(|c| c.is_finite() && *c >= 0.0);
                match (calls, cost) {
                    (Some(max_extra_calls), Some(max_extra_cost_usd)) => {
                        Some(crate::speculation::Speculate {
                            max_extra_calls,
                            max_extra_cost_usd,
                        })
                    }
                    _ => {
                        return Err(ConfigError::at(
                            &src,
                            s.span(),
                            "speculate: max_extra_calls must be a non-negative integer and max_extra_cost a non-negative number of USD",
                            Some("e.g. speculate = { max_extra_calls = 4, max_extra_cost = 0.05 }; 0 turns speculation off".into()),
                        ))
                    }
                }
            }
            None => None,
        };
        let mut telemetry = super::TextPolicy::default();
        if let Some(n) = &file.telemetry.text_limit {
            if *n.get_ref() < 0 {
                return Err(ConfigError::at(
                    &src,
                    n.span(),
                    "text_limit must be 0 or more (bytes kept of each text)".to_string(),
                    None,
                ));
            }
            telemetry.limit = usize::try_from(*n.get_ref()).unwrap_or(usize::MAX);
        }
        telemetry.redact = file.telemetry.redact.unwrap_or(false);
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
            ("solve", fi.solve),
        ] {
            if let Some(v) = v {
                overrides.insert(k.to_string(), v);
            }
        }
        let fm = file.max_tokens;
        let mut max_tokens = OpLimits::default();
        for (k, v) in [
            ("ask", fm.ask),
            ("think", fm.think),
            ("reason", fm.reason),
            ("llm", fm.llm),
            ("plan", fm.plan),
            ("reflect", fm.reflect),
            ("verify", fm.verify),
            ("solve", fm.solve),
        ] {
            if let Some(v) = v {
                let n = positive(&src, &v, &format!("[max_tokens] {k}"))?;
                max_tokens
                    .overrides
                    .insert(k.to_string(), u32::try_from(n).unwrap_or(u32::MAX));
            }
        }
        let aam = AamSections {
            memory: file.memory.unwrap_or_default(),
            tools: file.tools,
            mcp_servers: file.mcp_servers,
            access: file.access.unwrap_or_default(),
            remote_agents: file.remote_agents,
        };
        check_aam(&src.path, &aam)?;
        let config = Config {
            source: Some(src),
            backends,
            default_backend,
            token_budget,
            store: file.store.map(toml::Spanned::into_inner),
            instructions: Instructions { overrides },
            max_tokens,
            limits,
            telemetry,
            otlp: file.telemetry.otlp,
            aam,
            policy: file.policy.unwrap_or_default(),
            speculate,
            webhooks: file.webhooks,
        };
        Ok(config)
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
            store: None,
            instructions: Instructions::default(),
            max_tokens: OpLimits::default(),
            limits: Limits::default(),
            telemetry: super::TextPolicy::default(),
            otlp: None,
            aam: AamSections::default(),
            policy: ais_ir::ifc::FlowPolicy::default(),
            speculate: None,
            webhooks: Default::default(),
        }
    }

    pub(crate) fn error_at(
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

pub(crate) fn list(backends: &[BackendConfig]) -> String {
    backends
        .iter()
        .map(|b| b.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks the AAM's sections. Their messages have no position: the
/// sections are plain serde structs, shared with the AAM.
fn check_aam(path: &Path, aam: &AamSections) -> Result<(), ConfigError> {
    let err = |message: String| ConfigError::in_file(path, message, None);
    if aam.memory.stm_capacity == 0 {
        return Err(err("memory.stm_capacity must be at least 1".into()));
    }
    if aam.memory.lru_k == 0 || aam.memory.lru_k > 16 {
        return Err(err("memory.lru_k must be between 1 and 16".into()));
    }
    if let Some(t) = &aam.tools {
        check_tools(t).map_err(err)?;
    }
    let mut servers: Vec<&str> = Vec::new();
    for m in &aam.mcp_servers {
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
        if servers.contains(&m.name.as_str()) {
            return Err(err(format!("MCP server `{}` is defined twice", m.name)));
        }
        servers.push(&m.name);
    }
    let mut remote: Vec<&str> = Vec::new();
    for r in &aam.remote_agents {
        let ident = r
            .name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && r.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ident {
            return Err(err(format!(
                "remote agent name `{}` must be an identifier (it is written in programs)",
                r.name
            )));
        }
        if r.protocol != "a2a" {
            return Err(err(format!(
                "remote agent `{}`: protocol `{}` is not supported (only \"a2a\")",
                r.name, r.protocol
            )));
        }
        if !(r.url.starts_with("http://") || r.url.starts_with("https://")) {
            return Err(err(format!(
                "remote agent `{}`: url must be http:// or https://",
                r.name
            )));
        }
        if r.timeout_s.is_some_and(|t| secs(t).is_none()) {
            return Err(err(format!(
                "remote agent `{}`: timeout_s must be a positive number",
                r.name
            )));
        }
        if r.concurrency == Some(0) {
            return Err(err(format!(
                "remote agent `{}`: concurrency must be at least 1",
                r.name
            )));
        }
        if remote.contains(&r.name.as_str()) {
            return Err(err(format!("remote agent `{}` is defined twice", r.name)));
        }
        remote.push(&r.name);
    }
    Ok(())
}

fn check_tools(t: &ToolsSection) -> Result<(), String> {
    let mut names: Vec<&str> = Vec::new();
    if let Some(s) = t.http_timeout_s {
        if secs(s).is_none() {
            return Err(format!(
                "tools.http_timeout_s must be a positive number, got {s}"
            ));
        }
    }
    for (k, v) in &t.concurrency {
        if *v == 0 {
            return Err(format!("tools.concurrency.{k} must be at least 1"));
        }
    }
    if let Some(m) = t
        .sandbox
        .as_deref()
        .filter(|m| !matches!(*m, "bwrap" | "none"))
    {
        return Err(format!(
            "tools.sandbox must be \"bwrap\" or \"none\", got \"{m}\""
        ));
    }
    for s in &t.subprocess {
        if s.name.trim().is_empty() {
            return Err("a [[tools.subprocess]] entry has an empty name".into());
        }
        if s.command.is_empty() || s.command[0].trim().is_empty() {
            return Err(format!("subprocess tool `{}` has an empty command", s.name));
        }
        if secs(s.timeout_s).is_none() {
            return Err(format!(
                "subprocess tool `{}`: timeout_s must be a positive number",
                s.name
            ));
        }
        if s.concurrency == Some(0) {
            return Err(format!(
                "subprocess tool `{}`: concurrency must be at least 1",
                s.name
            ));
        }
        if names.contains(&s.name.as_str()) {
            return Err(format!("tool `{}` is defined twice", s.name));
        }
        names.push(&s.name);
    }
    Ok(())
}

/// A positive, finite number of seconds below about 30 years.
pub(crate) fn secs(s: f64) -> Option<Duration> {
    (s.is_finite() && s > 0.0 && s < 1.0e9).then(|| Duration::from_secs_f64(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> ConfigError {
        match Config::parse(text, Path::new("c.toml")) {
            Ok(c) => panic!("expected an error, got {c:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn one_parse_checks_the_aam_sections_too() {
        let e =
            err("[[llm_backends]]\nname = \"x\"\nprotocol = \"sim\"\n[tools]\nworkspcae = \".\"\n");
        assert_eq!(e.position(), Some((5, 1)));
        assert_eq!(e.span(), Some(53..62));
        assert!(e
            .message()
            .starts_with("unknown field `workspcae`, expected one of `workspace`"));
        assert_eq!(e.hint(), Some("see docs/runtime.md for the accepted keys"));
        let e = err("[memory]\nstm_capacity = 0\n");
        assert_eq!(
            e.to_string(),
            "c.toml: memory.stm_capacity must be at least 1"
        );
        assert_eq!(e.span(), None);
    }

    #[test]
    fn the_aam_sections_are_kept_for_the_aam() {
        let c = Config::parse(
            "[memory]\nlru_k = 3\n[[mcp_servers]]\nname = \"fs\"\ncommand = [\"x\"]\n",
            Path::new("c.toml"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.aam.memory.lru_k, 3);
        assert_eq!(c.aam.memory.stm_capacity, 256);
        assert_eq!(c.aam.mcp_servers[0].prefix(), "fs.");
        assert!(c.aam.tools.is_none());
    }
}
