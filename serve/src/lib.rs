//! Serving AIS programs: `aisc serve` (an HTTP/1.1 run API with live
//! Server-Sent Events, Prometheus metrics, an A2A server and an MCP
//! endpoint) and `aisc mcp` (the MCP server over stdio). See
//! `docs/serve.md`.
//!
//! This crate is part of the edge: it owns the listener, the run registry
//! and the protocols. How a run is built (configuration, backend, AAM host,
//! journal) is the command line's business, handed in as an [`Engine`], so
//! that a served run is set up by the same code as `aisc run`.
//!
//! - `engine`: the [`Engine`] trait the command line implements, and the
//!   [`Served`] programs;
//! - `run`: one run's status, state and entry (events, cancel switch);
//! - `registry`: runs by id, the queue and the executor threads, statuses,
//!   runs known only to the journal (an earlier server's);
//! - `events`: each run's numbered event log (op events, streamed text,
//!   printed lines, status changes), kept in memory and appended to a file;
//! - `cancel`: cancelling a run from outside (wrappers of its backend and
//!   host);
//! - `fair`: fair admission of the runs' LLM calls to the shared backend
//!   (least attained service first);
//! - `http`: the server (hyper on a tokio runtime of its own): limits,
//!   timeouts, authentication and the Host/Origin checks, routing, SSE
//!   streams;
//! - `wire`: JSON-RPC 2.0 envelopes and SSE framing, for MCP, A2A and the
//!   event streams;
//! - `metrics`: the Prometheus text;
//! - `a2a`: the A2A JSON-RPC server (agent cards, tasks as runs);
//! - `mcp`: the MCP JSON-RPC server (tools from entry flows, `check`, `build`);
//! - `schema`: JSON Schemas of flow parameters and results;
//! - `console`: the live console page (`GET /console`) and the questions
//!   of destructive tools answered over HTTP.

pub mod a2a;
pub mod cancel;
mod console;
mod engine;
mod error;
mod events;
pub mod fair;
mod http;
pub mod mcp;
mod metrics;
mod registry;
mod run;
pub mod schema;

pub use cancel::Cancel;
pub use engine::{BudgetSpec, Engine, Finished, Prepared, Resumed, RunEdge, RunSpec, Served};
pub use error::ApiError;
pub use http::{serve, ServeConfig, ServeError};
/// The shared store's series, for `aisc worker --listen`'s `/metrics`.
pub use metrics::{render_queue, render_store};
pub use registry::{Registry, RegistryConfig};
pub use run::{RunEntry, Status};

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
