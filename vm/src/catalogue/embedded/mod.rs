//! Tools the embedding program registers in process
//! (`AamHost::register_tool`): a Rust closure.

use super::provider::ToolProvider;
use crate::host::{HostError, ToolFn};
use crate::llm::CancelToken;
use serde_json::Value as Json;

/// One in-process tool.
pub struct Embedded(pub ToolFn);

impl ToolProvider for Embedded {
    fn kind(&self) -> &'static str {
        "embedded"
    }

    fn call(&self, _tool: &str, args: &Json, _cancel: &CancelToken) -> Result<Json, HostError> {
        (self.0)(args)
    }
}
