//! The tool side of the AAM: tool descriptions, per-tool concurrency
//! limits and subprocess tools.

use super::mcp::McpClient;
use crate::catalogue::provider::ToolProvider;
use crate::host::HostError;
use crate::llm::CancelToken;
use serde_json::{json, Value as Json};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

pub use crate::catalogue::process::{
    idempotency_key, run_process, with_idempotency_key, Finished, IDEMPOTENCY_ENV,
};
pub use crate::catalogue::subprocess::run_subprocess;

/// Where a tool comes from; drives the default access policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A built-in tool that only reads (allowed by default).
    BuiltinReadOnly,
    /// A built-in tool that writes files (needs an allow).
    BuiltinWrite,
    /// A built-in tool that uses the network (needs an allow).
    BuiltinNetwork,
    /// Goals, inbox: the agent's own AAM state (always allowed).
    Aam,
    /// The `bash` tool (needs an allow).
    Shell,
    /// Declared in `[[tools.subprocess]]` (needs an allow).
    Subprocess,
    /// Imported from an MCP server (needs an allow).
    Mcp,
    /// Registered in process by the embedding program (trusted: allowed).
    Embedded,
    /// A remote agent the configuration names (`[[remote_agents]]`):
    /// allowed, since configuring it is the consent.
    Remote,
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Origin::BuiltinReadOnly => "builtin (read-only)",
            Origin::BuiltinWrite => "builtin (write)",
            Origin::BuiltinNetwork => "builtin (network)",
            Origin::Aam => "aam",
            Origin::Shell => "builtin (shell)",
            Origin::Subprocess => "subprocess",
            Origin::Mcp => "mcp",
            Origin::Embedded => "embedded",
            Origin::Remote => "remote agent",
        }
    }

    /// Allowed without an `[access]` entry (when `readonly_default` is on).
    pub fn allowed_by_default(self) -> bool {
        matches!(self, Origin::BuiltinReadOnly | Origin::Embedded)
    }
}

/// How a call of a tool runs: the AAM's own tools, which need the
/// agent's state, are arms of `AamHost::call`; every other tool comes from
/// a [`ToolProvider`] (`crate::catalogue`: built-in, subprocess, `bash`,
/// in process; MCP servers and remote agents below).
#[derive(Clone)]
pub enum Kind {
    MemorySearch,
    /// `store_fact`: a tagged fact into LTM.
    StoreFact,
    Goals(&'static str),
    /// `enqueue` / `claim` on a named work queue (`super::queue`).
    Queue(&'static str),
    Inbox,
    /// `thread_history` / `thread_state` / `thread_set` (`super::thread`).
    Thread(&'static str),
    /// Any other tool: its provider runs it.
    Provided(Arc<dyn ToolProvider>),
}

/// An MCP server's tool (`super::mcp`).
pub struct McpTool {
    pub client: Arc<McpClient>,
    /// Its name on the server (without the prefix).
    pub remote: String,
    /// The input schema's properties as the server ordered them.
    pub param_order: Vec<String>,
}

impl ToolProvider for McpTool {
    fn kind(&self) -> &'static str {
        "mcp"
    }

    fn call(&self, _tool: &str, args: &Json, cancel: &CancelToken) -> Result<Json, HostError> {
        self.client.call_tool(&self.remote, args, cancel)
    }

    fn describe(&self, d: &mut Json) {
        // The server's property order, which the parsed schema has lost
        // (`key_order`): the order positional arguments bind in.
        if !self.param_order.is_empty() {
            d["param_order"] = json!(self.param_order);
        }
    }
}

/// A remote agent over A2A (`super::remote`): a message to it is a call.
pub struct RemoteTool(pub Arc<super::remote::RemoteAgent>);

impl ToolProvider for RemoteTool {
    fn kind(&self) -> &'static str {
        "remote agent"
    }

    fn call(&self, _tool: &str, args: &Json, cancel: &CancelToken) -> Result<Json, HostError> {
        self.0.call(args, cancel)
    }
}

/// A tool in the capability registry.
#[derive(Clone)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub origin: Origin,
    pub kind: Kind,
    pub input_schema: Option<Json>,
    pub output_schema: Option<Json>,
    pub destructive: bool,
    pub limit: Option<Arc<Limiter>>,
}

impl ToolSpec {
    pub fn describe(&self) -> Json {
        let mut d = json!({
            "name": self.name,
            "description": self.description,
            "origin": self.origin.name(),
            "destructive": self.destructive,
            "concurrency": self.limit.as_ref().map(|l| l.max),
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
        });
        if let Kind::Provided(p) = &self.kind {
            p.describe(&mut d);
        }
        d
    }
}

/// A counting semaphore: at most `max` concurrent calls of one tool.
pub struct Limiter {
    pub max: usize,
    used: Mutex<usize>,
    cv: Condvar,
}

pub struct Permit<'a>(&'a Limiter);

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut u = self.0.used.lock().unwrap_or_else(|e| e.into_inner());
        *u = u.saturating_sub(1);
        self.0.cv.notify_one();
    }
}

impl Limiter {
    pub fn new(max: usize) -> Limiter {
        Limiter {
            max: max.max(1),
            used: Mutex::new(0),
            cv: Condvar::new(),
        }
    }

    /// Waits for a free slot (or cancellation).
    pub fn acquire(&self, cancel: &CancelToken) -> Result<Permit<'_>, HostError> {
        let mut u = self.used.lock().unwrap_or_else(|e| e.into_inner());
        while *u >= self.max {
            if cancel.is_cancelled() {
                return Err(HostError::new("cancelled", "the run was cancelled"));
            }
            u = self
                .cv
                .wait_timeout(u, Duration::from_millis(50))
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        *u += 1;
        Ok(Permit(self))
    }

    pub fn in_use(&self) -> usize {
        *self.used.lock().unwrap_or_else(|e| e.into_inner())
    }
}
