//! What the runtime must know about a tool to decide access and
//! information flow, stated once next to the tool's definition (the
//! built-in table in `lib.rs`, [`crate::HOST_TOOLS`]) or its configuration
//! (`ais_vm::catalogue` reads `[[mcp_servers]]`, `[[tools.subprocess]]`
//! and `[[remote_agents]]` into the same facts). `ais_ir::catalogue`
//! carries them to the checker and the information-flow policy.

use serde::{Deserialize, Serialize};

/// What a call does to the world.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Effect {
    /// Reads only: calling it twice changes nothing.
    ReadOnly,
    /// Changes the world, but a repeated call with the same arguments
    /// changes nothing more (a file overwritten with the same text).
    Idempotent,
    /// Changes the world with every call (the safe default).
    #[default]
    SideEffecting,
}

impl Effect {
    pub fn name(self) -> &'static str {
        match self {
            Effect::ReadOnly => "read-only",
            Effect::Idempotent => "idempotent",
            Effect::SideEffecting => "side-effecting",
        }
    }
}

/// How a tool uses the workspace directory: a write keeps the labels of
/// what was written (the workspace's label sidecar), a read carries them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkspaceUse {
    #[default]
    None,
    Reads,
    Writes,
    /// `bash`: may read and write any file of the workspace.
    ReadsWrites,
}

impl WorkspaceUse {
    pub fn reads(self) -> bool {
        matches!(self, WorkspaceUse::Reads | WorkspaceUse::ReadsWrites)
    }
    pub fn writes(self) -> bool {
        matches!(self, WorkspaceUse::Writes | WorkspaceUse::ReadsWrites)
    }
}

/// The declared facts of one built-in or host tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Facts {
    pub effect: Effect,
    /// Are its results trusted (written by no one an attacker controls)?
    pub trusted: bool,
    /// Arguments that leave the machine (a URL, a query, a recipient, a
    /// body): sinks even when the tool only reads.
    pub leaves: &'static [&'static str],
    pub workspace: WorkspaceUse,
    /// Does it keep what it is given on the machine (a file, the agent's
    /// memory or goals)? Private data may reach it (`[policy] private`).
    pub local: bool,
}

impl Facts {
    /// Local, read-only, trusted: `calculator`, `now`.
    pub const LOCAL: Facts = Facts {
        effect: Effect::ReadOnly,
        trusted: true,
        leaves: &[],
        workspace: WorkspaceUse::None,
        local: true,
    };

    /// Changes the agent's own state (goals, queues): trusted results.
    pub const STATE: Facts = Facts {
        effect: Effect::SideEffecting,
        ..Facts::LOCAL
    };
}
