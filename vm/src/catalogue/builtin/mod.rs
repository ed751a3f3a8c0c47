//! The built-in tools of `ais_stdlib` (`http_get`, `read_file`,
//! `write_file`, `search`, `json_query`, `calculator`, `now`, `echo`, and
//! their aliases), run with the configured settings (workspace, timeouts,
//! search provider, private destinations `http_get` may reach).

use super::provider::ToolProvider;
use crate::host::HostError;
use crate::llm::CancelToken;
use serde_json::Value as Json;
use std::sync::Arc;

/// Every built-in tool, sharing one set of settings.
pub struct Builtin(pub Arc<ais_stdlib::Settings>);

impl ToolProvider for Builtin {
    fn kind(&self) -> &'static str {
        "builtin"
    }

    fn call(&self, tool: &str, args: &Json, _cancel: &CancelToken) -> Result<Json, HostError> {
        ais_stdlib::call(tool, args, &self.0)
            .unwrap_or_else(|| {
                Err(ais_stdlib::ToolError::new(
                    "tool.unknown",
                    format!("no built-in tool `{tool}`"),
                ))
            })
            .map_err(|e| HostError {
                code: e.code,
                message: e.message,
                payload: e.payload,
            })
    }
}
