//! The trait every source of tools implements.

use crate::host::HostError;
use crate::llm::CancelToken;
use serde_json::Value as Json;

/// One source of tools: how a call of one of its tools runs. What the tool
/// *is* (trust, effect, sinks, aliases) is its declaration
/// (`ais_ir::catalogue::ToolDecl`, built in `super::declarations`); access,
/// validation, confirmation, concurrency limits and logging are the AAM's
/// (`crate::aam`), the same for every provider.
pub trait ToolProvider: Send + Sync {
    /// What kind of provider it is, for messages (`builtin`, `subprocess`,
    /// `shell`, `mcp`, `remote agent`, `embedded`).
    fn kind(&self) -> &'static str;

    /// Runs `tool` (the name it was called by) with `args`, already
    /// checked against its schema.
    fn call(&self, tool: &str, args: &Json, cancel: &CancelToken) -> Result<Json, HostError>;

    /// Adds what only this provider knows to the tool's description
    /// (`aisc tools`): an MCP tool's parameter order.
    fn describe(&self, _description: &mut Json) {}
}
