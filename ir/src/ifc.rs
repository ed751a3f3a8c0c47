//! Information-flow policy: which sources are trusted and which sink
//! arguments refuse untrusted data (issue 19, `docs/security.md`).
//!
//! Shared by the static check (`ais_compiler::flows`) and the VM's run-time
//! enforcement (`ais_vm::ifc`) so both decide with the same rules; the
//! `[policy]` section of `.apxm/config.toml` deserializes into [`FlowPolicy`].
//!
//! Source names: a tool by its name (`http_get`, `search`, `mail.read`),
//! and `@args` (entry arguments), `@llm` (model output with no untrusted
//! input), `@message` (messages from other agents), `@plan` (inner plans),
//! `@memory.stm` / `@memory.ltm` / `@memory.episodic` (memory read with no
//! label recorded in this run), `@belief`, `@input` (a `pause` answer),
//! `@bash` (`exec` output).
//!
//! Sink names: a tool by its name, `communicate`, `bash` (`exec`),
//! `memory.ltm` / `memory.episodic` / `memory.stm` (writes), `belief`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the runtime does with a denied flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Fail the op with `policy.denied` (or ask on a TTY).
    #[default]
    Enforce,
    /// Let the flow happen; the static check still reports it.
    Warn,
    /// No labels checked at sinks.
    Off,
}

/// `[policy]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowPolicy {
    #[serde(default)]
    pub mode: Mode,
    /// Sources trusted in addition to (or overriding) the defaults;
    /// patterns: `name`, `prefix*`.
    #[serde(default)]
    pub trusted: Vec<String>,
    /// Sources untrusted in addition to the defaults.
    #[serde(default)]
    pub untrusted: Vec<String>,
    /// Per-sink rules (`[policy.sinks.send_email]`).
    #[serde(default)]
    pub sinks: BTreeMap<String, SinkRule>,
    /// `[policy.quarantine]`.
    #[serde(default)]
    pub quarantine: Quarantine,
}

/// `[policy.sinks.NAME]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkRule {
    /// `false`: not a sink at all (a read-only tool); default: a sink.
    pub sink: Option<bool>,
    /// Arguments that must be trusted; empty: every argument not in
    /// `allow_untrusted`.
    #[serde(default)]
    pub require_trusted: Vec<String>,
    /// Arguments that may carry untrusted data (`"*"`: all).
    #[serde(default)]
    pub allow_untrusted: Vec<String>,
}

/// `[policy.quarantine]`: CaMeL's quarantined LLM.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quarantine {
    /// A `cast` to `number` or `bool` yields a trusted value: such a
    /// value cannot carry an instruction (it can still be a number an
    /// attacker chose; see `docs/security.md`).
    #[serde(default)]
    pub scalars: bool,
}

/// Sources untrusted unless the policy says otherwise.
pub const DEFAULT_UNTRUSTED: &[&str] = &["http_get", "search", "search_web", "@message"];

/// Built-in tools that are side-effecting sinks by default; any tool not
/// in [`READ_ONLY_TOOLS`] is one too.
pub const READ_ONLY_TOOLS: &[&str] = &[
    "http_get",
    "read_file",
    "read",
    "json_query",
    "calculator",
    "now",
    "echo",
    "memory_search",
    "goals_list",
    "goals_next",
    "inbox",
    "search",
    "search_web",
];

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

impl FlowPolicy {
    pub fn enforced(&self) -> bool {
        self.mode == Mode::Enforce
    }

    /// Is data from `source` trusted? Explicit `trusted` wins over
    /// `untrusted`, which wins over the defaults; MCP tools (registered as
    /// `server.tool`) are untrusted by default.
    pub fn trusted(&self, source: &str) -> bool {
        if self.trusted.iter().any(|p| matches(p, source)) {
            return true;
        }
        if self.untrusted.iter().any(|p| matches(p, source)) {
            return false;
        }
        let mcp = !source.starts_with('@') && source.contains('.');
        !(mcp || DEFAULT_UNTRUSTED.contains(&source))
    }

    /// Is `sink` a sink? Tools: unless read-only (built in or `sink =
    /// false`), remote agents included (a message to one is a call of the
    /// tool named after it); `bash` and `memory.ltm` writes (shared) unless
    /// `sink = false`; `communicate` (a message between agents of the
    /// program, whose handlers are checked in turn: labels travel with the
    /// message), `memory.stm`, `memory.episodic` and `belief` only if listed.
    pub fn is_sink(&self, sink: &str) -> bool {
        if let Some(s) = self.sinks.get(sink).and_then(|r| r.sink) {
            return s;
        }
        if self.sinks.contains_key(sink) {
            return true;
        }
        match sink {
            "bash" | "memory.ltm" => true,
            // Inside the program: the agent's own log and working memory,
            // and messages to its other agents.
            "communicate" | "memory.stm" | "memory.episodic" | "belief" => false,
            t => !READ_ONLY_TOOLS.contains(&t),
        }
    }

    /// Must argument `arg` of `sink` be trusted? (`arg` is a tool
    /// argument's field name, or an op operand's name: `to`, `body`,
    /// `value`, `command`.)
    pub fn arg_checked(&self, sink: &str, arg: &str) -> bool {
        if !self.is_sink(sink) {
            return false;
        }
        let Some(rule) = self.sinks.get(sink) else {
            return true;
        };
        if rule.allow_untrusted.iter().any(|a| a == arg || a == "*") {
            return false;
        }
        rule.require_trusted.is_empty() || rule.require_trusted.iter().any(|a| a == arg)
    }
}

/// The sink an op is, with the names of its data operands; `None`: not a
/// sink op. `tool` is the tool name of an `inv` op.
pub fn sink_of(op: crate::Opcode, tool: Option<&str>, tier: Option<&str>) -> Option<SinkOp> {
    use crate::Opcode as O;
    Some(match op {
        O::Inv => SinkOp {
            name: tool?.to_string(),
            operands: &["args"],
            fields: true,
        },
        O::Exec => SinkOp {
            name: "bash".into(),
            operands: &["command"],
            fields: false,
        },
        O::Communicate => SinkOp {
            name: "communicate".into(),
            operands: &["to", "body", "protocol"],
            fields: false,
        },
        O::Umem => SinkOp {
            name: format!("memory.{}", tier?),
            operands: &["value", "key"],
            fields: false,
        },
        O::BeliefSet => SinkOp {
            name: "belief".into(),
            operands: &["value"],
            fields: false,
        },
        _ => return None,
    })
}

/// A sink op: its policy name and how its operands are named.
#[derive(Clone, Debug, PartialEq)]
pub struct SinkOp {
    pub name: String,
    /// Names of its data operands, by position (extra operands: the last
    /// name).
    pub operands: &'static [&'static str],
    /// Operand 0 is an object whose fields are the arguments (`inv`).
    pub fields: bool,
}

impl SinkOp {
    pub fn operand_name(&self, i: usize) -> &'static str {
        self.operands
            .get(i)
            .or(self.operands.last())
            .copied()
            .unwrap_or("args")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let mut p = FlowPolicy::default();
        assert!(p.trusted("@args") && p.trusted("read_file"));
        assert!(!p.trusted("http_get") && !p.trusted("@message") && !p.trusted("mail.read"));
        assert!(p.is_sink("send_email") && !p.is_sink("read_file") && !p.is_sink("communicate"));
        assert!(p.arg_checked("send_email", "body"));
        p.sinks.insert(
            "send_email".into(),
            SinkRule {
                allow_untrusted: vec!["body".into()],
                ..SinkRule::default()
            },
        );
        assert!(!p.arg_checked("send_email", "body") && p.arg_checked("send_email", "to"));
        p.trusted.push("http_*".into());
        assert!(p.trusted("http_get"));
        p.untrusted.push("read_file".into());
        assert!(!p.trusted("read_file"));
    }
}
