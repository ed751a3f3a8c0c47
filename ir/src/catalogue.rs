//! The tool catalogue's declarations, as the checker and the
//! information-flow policy read them: for each tool, its aliases, effect
//! class, whether its results are trusted, which of its arguments leave
//! the machine and how it uses the workspace.
//!
//! Stated once where each tool is defined or configured: the built-in
//! table of `ais_stdlib` ([`Declarations::builtin`]); `[[mcp_servers]]`,
//! `[[tools.subprocess]]` and `[[remote_agents]]` add theirs
//! (`ais_vm::catalogue::declarations`, attached to the `[policy]` when the
//! configuration is resolved). `[policy] trusted` / `untrusted` /
//! `[policy.sinks.*]` are overrides on top (`crate::ifc::FlowPolicy`).
//! No decision depends on the shape of a tool's name: an MCP server's tools
//! are declared by the namespace the configuration gives them (`prefix`).

use serde::Serialize;
use std::sync::OnceLock;

pub use ais_stdlib::{Effect, WorkspaceUse};

/// One tool (or every tool of a namespace) as declared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolDecl {
    /// The tool's name, or `prefix*`: every tool an MCP server registers
    /// under its configured prefix.
    pub name: String,
    /// Who provides it: `builtin`, `aam`, `mcp:SERVER`, `subprocess`,
    /// `remote agent`.
    pub provider: String,
    /// Other names that call the same tool (`write` for `write_file`).
    pub aliases: Vec<String>,
    pub effect: Effect,
    /// Are its results trusted?
    pub trusted: bool,
    /// Arguments that leave the machine: sinks even when it only reads.
    pub leaves: Vec<String>,
    pub workspace: WorkspaceUse,
    /// Keeps what it is given on the machine: private data may reach it.
    pub local: bool,
}

impl ToolDecl {
    fn of(name: &str, provider: &str, f: ais_stdlib::Facts) -> ToolDecl {
        ToolDecl {
            name: name.to_string(),
            provider: provider.to_string(),
            aliases: Vec::new(),
            effect: f.effect,
            trusted: f.trusted,
            leaves: f.leaves.iter().map(|s| s.to_string()).collect(),
            workspace: f.workspace,
            local: f.local,
        }
    }

    /// Is a call of it a sink (`crate::ifc`)? Whatever changes the world,
    /// and whatever sends an argument off the machine.
    pub fn is_sink(&self) -> bool {
        self.effect != Effect::ReadOnly || !self.leaves.is_empty()
    }

    /// The arguments a read-only tool sends away (`None`: every argument
    /// of a side-effecting tool is checked).
    pub fn checked_args(&self) -> Option<&[String]> {
        (self.effect == Effect::ReadOnly).then_some(self.leaves.as_slice())
    }
}

/// Every declared tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Declarations {
    tools: Vec<ToolDecl>,
    /// Trust of a tool no one declared: one the embedding program
    /// registered in process (trusted), unless an MCP server exposes its
    /// tools with no namespace, so any undeclared name may be one of them.
    pub unknown_trusted: bool,
}

impl Default for Declarations {
    fn default() -> Self {
        Declarations::builtin().clone()
    }
}

impl Declarations {
    /// The built-in and host tools, from `ais_stdlib`'s tables.
    pub fn builtin() -> &'static Declarations {
        static B: OnceLock<Declarations> = OnceLock::new();
        B.get_or_init(|| {
            let mut d = Declarations {
                tools: Vec::new(),
                unknown_trusted: true,
            };
            for b in ais_stdlib::builtins() {
                if let Some(&(alias, of)) = ais_stdlib::ALIASES.iter().find(|a| a.0 == b.name) {
                    if let Some(t) = d.tools.iter_mut().find(|t| t.name == of) {
                        t.aliases.push(alias.to_string());
                    }
                    continue;
                }
                d.tools.push(ToolDecl::of(b.name, "builtin", b.facts));
            }
            for h in ais_stdlib::HOST_TOOLS {
                d.tools.push(ToolDecl::of(h.name, "aam", h.facts));
            }
            d
        })
    }

    /// Adds (or replaces) a declaration; a later one wins.
    pub fn declare(&mut self, decl: ToolDecl) {
        self.tools.retain(|t| t.name != decl.name);
        self.tools.push(decl);
    }

    /// The declaration of tool `name`: by name or alias, else the longest
    /// namespace (`prefix*`) that holds it.
    pub fn get(&self, name: &str) -> Option<&ToolDecl> {
        self.tools
            .iter()
            .find(|t| t.name == name || t.aliases.iter().any(|a| a == name))
            .or_else(|| {
                self.tools
                    .iter()
                    .filter_map(|t| Some((t, t.name.strip_suffix('*')?)))
                    .filter(|(_, p)| name.starts_with(p))
                    .max_by_key(|(_, p)| p.len())
                    .map(|(t, _)| t)
            })
    }

    /// The tool an alias names (itself when it is no alias).
    pub fn canonical<'a>(&'a self, name: &'a str) -> &'a str {
        match self.get(name) {
            Some(t) if !t.name.ends_with('*') => &t.name,
            _ => name,
        }
    }

    /// Are the results of `tool` trusted, by its declaration?
    pub fn trusted(&self, tool: &str) -> bool {
        self.get(tool).map_or(self.unknown_trusted, |t| t.trusted)
    }

    pub fn iter(&self) -> impl Iterator<Item = &ToolDecl> {
        self.tools.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_aliases_and_namespaces() {
        let mut d = Declarations::default();
        assert_eq!(d.canonical("write"), "write_file");
        assert!(d
            .get("write")
            .is_some_and(|t| t.effect == Effect::SideEffecting));
        assert!(!d.trusted("http_get") && !d.trusted("search_web") && d.trusted("read"));
        assert_eq!(
            d.get("http_get").and_then(|t| t.checked_args()),
            Some(&["url".to_string(), "headers".to_string()][..])
        );
        // An MCP server's namespace: its tools are its, whatever they are called.
        let mut gh = ToolDecl::of("gh_*", "mcp:github", ais_stdlib::Facts::LOCAL);
        gh.trusted = false;
        d.declare(gh);
        assert!(!d.trusted("gh_list_issues"));
        assert!(d.trusted("mail.read"), "no name shape decides trust");
    }
}
