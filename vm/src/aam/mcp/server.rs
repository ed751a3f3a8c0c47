//! A configured server, started lazily on first use.

use super::{McpClient, McpTool};
use crate::aam::config::McpServerConfig;
use crate::host::HostError;
use crate::llm::CancelToken;
use crate::sync::lock;
use serde_json::{json, Value as Json};
use std::sync::{Arc, Mutex};

/// Where a configured server is in its life.
enum State {
    NotStarted,
    Running(Arc<McpClient>),
    /// Start-up failed; every later use gets the same error (no retry
    /// storm against a broken command).
    Failed(HostError),
}

/// A configured server, started on first use (see `docs/runtime.md`).
pub struct McpServer {
    pub config: McpServerConfig,
    state: Mutex<State>,
}

impl McpServer {
    pub fn new(config: McpServerConfig) -> McpServer {
        McpServer {
            config,
            state: Mutex::new(State::NotStarted),
        }
    }

    /// Could this server provide `tool` (a registered, prefixed name)?
    pub fn may_provide(&self, tool: &str) -> bool {
        tool.starts_with(&self.config.prefix())
    }

    /// Starts the server unless it ran or failed already; `register` gets
    /// the tools of a fresh start (under the lock, so no caller sees the
    /// server running before its tools are registered). A cancelled start
    /// is not remembered as a failure.
    pub fn ensure_started(
        &self,
        cancel: &CancelToken,
        register: impl FnOnce(&Arc<McpClient>, Vec<McpTool>),
    ) -> Result<Arc<McpClient>, HostError> {
        let mut st = lock(&self.state);
        match &*st {
            State::Running(c) => return Ok(c.clone()),
            State::Failed(e) => return Err(e.clone()),
            State::NotStarted => {}
        }
        match McpClient::start(&self.config, cancel) {
            Ok((client, tools)) => {
                register(&client, tools);
                *st = State::Running(client.clone());
                Ok(client)
            }
            Err(e) if e.code == "cancelled" => Err(e),
            Err(e) => {
                *st = State::Failed(e.clone());
                Err(e)
            }
        }
    }

    /// `{name, state, protocol_version?, server_info?, error?}`.
    pub fn status(&self) -> Json {
        let name = &self.config.name;
        match &*lock(&self.state) {
            State::NotStarted => json!({"name": name, "state": "not started"}),
            State::Running(c) => json!({
                "name": name,
                "state": if c.is_alive() { "running" } else { "exited" },
                "protocol_version": c.protocol_version(),
                "server_info": c.server_info.get(),
            }),
            State::Failed(e) => json!({
                "name": name,
                "state": "failed",
                "error": {"code": e.code, "message": e.message},
            }),
        }
    }
}
