//! The tool catalogue: what each tool is, stated once where it is defined
//! or configured, read by every consumer (access control in `crate::aam`,
//! the information-flow policy and the static check through
//! `ais_ir::ifc::FlowPolicy::catalogue`, `aisc tools`).
//!
//! | provider | declared in | results | sinks |
//! |---|---|---|---|
//! | built-in (`ais_stdlib`) | the built-in table (`Facts`) | trusted, except `http_get`, `search` | side-effecting tools; `http_get`'s `url`/`headers`, `search`'s `query` |
//! | AAM (goals, queues, memory, `inbox`, `bash`) | `ais_stdlib::HOST_TOOLS` | trusted, except `inbox` (other agents wrote it) | side-effecting tools |
//! | `[[mcp_servers]]` | the server's entry: `trusted` (default false), `[mcp_servers.tools.NAME]` | untrusted | every tool (side-effecting unless declared) |
//! | `[[tools.subprocess]]` | the tool's entry: `trusted` (default true), `effect`, `leaves` | trusted | side-effecting unless declared |
//! | `[[remote_agents]]` | the agent's entry: `trusted` (default false) | untrusted | a message to it |
//!
//! An MCP server's tools are declared by the namespace the configuration
//! gives them (`prefix`, default `NAME.`); a server with an empty prefix
//! makes every undeclared tool untrusted, since any name may be one of its.
//! `[policy] trusted` / `untrusted` / `[policy.sinks.*]` override all this.

pub mod builtin;
pub mod embedded;
pub mod labels;
pub mod process;
pub mod provider;
pub mod shell;
pub mod subprocess;

use crate::config::schema::{McpServerConfig, RemoteAgentConfig, SubprocessConfig, ToolFacts};
use ais_ir::catalogue::{Declarations, Effect, ToolDecl, WorkspaceUse};
use ais_ir::ifc::FlowPolicy;
use std::sync::Arc;

fn decl(name: String, provider: String, trusted: bool, facts: Option<&ToolFacts>) -> ToolDecl {
    let mut d = ToolDecl {
        name,
        provider,
        aliases: Vec::new(),
        effect: Effect::SideEffecting,
        trusted,
        leaves: Vec::new(),
        workspace: WorkspaceUse::None,
        // A configured provider's tool may send what it gets anywhere.
        local: false,
    };
    if let Some(f) = facts {
        override_with(&mut d, f);
    }
    d
}

fn override_with(d: &mut ToolDecl, f: &ToolFacts) {
    if let Some(t) = f.trusted {
        d.trusted = t;
    }
    if let Some(e) = f.effect {
        d.effect = e;
    }
    if let Some(l) = &f.leaves {
        d.leaves = l.clone();
    }
}

/// The configured tool providers (`crate::aam::config::AamConfig`'s).
#[derive(Clone, Copy, Debug)]
pub struct Configured<'a> {
    pub subprocess: &'a [SubprocessConfig],
    pub mcp_servers: &'a [McpServerConfig],
    pub remote_agents: &'a [RemoteAgentConfig],
}

/// Every tool's declaration: the built-in table, then the configured
/// providers.
pub fn declarations(cfg: Configured<'_>) -> Declarations {
    let mut d = Declarations::builtin().clone();
    for s in cfg.subprocess {
        let facts = ToolFacts {
            trusted: s.trusted,
            effect: s.effect,
            leaves: s.leaves.clone(),
        };
        d.declare(decl(
            s.name.clone(),
            "subprocess".into(),
            true,
            Some(&facts),
        ));
    }
    for m in cfg.mcp_servers {
        let prefix = m.prefix();
        let provider = format!("mcp:{}", m.name);
        if prefix.is_empty() {
            d.unknown_trusted = d.unknown_trusted && m.trusted;
        } else {
            d.declare(decl(
                format!("{prefix}*"),
                provider.clone(),
                m.trusted,
                None,
            ));
        }
        for (tool, facts) in &m.tools {
            d.declare(decl(
                format!("{prefix}{tool}"),
                provider.clone(),
                m.trusted,
                Some(facts),
            ));
        }
    }
    for r in cfg.remote_agents {
        d.declare(decl(r.name.clone(), "remote agent".into(), r.trusted, None));
    }
    d
}

/// `policy` on top of the catalogue's declarations `decls`
/// (`AamConfig::declarations`): what the run and the static check use.
pub fn attach(mut policy: FlowPolicy, decls: Declarations) -> FlowPolicy {
    policy.catalogue = Arc::new(decls);
    policy
}
