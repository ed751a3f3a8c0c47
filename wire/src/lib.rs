//! The wire protocols AIS speaks, in one place, for both sides: the
//! runtime's clients (the MCP client and the A2A remote-agent client in
//! `ais-vm`) and the servers (`ais-serve`: the run API's event stream, the
//! MCP server, the A2A server).
//!
//! - [`rpc`]: JSON-RPC 2.0 envelopes, ids, error codes, and the
//!   classification of a received message (as a server and as a client);
//! - [`sse`]: Server-Sent Events framing, and an incremental decoder whose
//!   line and event sizes are bounded (for any client reading a stream);
//! - [`mcp`]: Model Context Protocol versions, `_meta` keys, tool
//!   annotations and `tools/call` results;
//! - [`a2a`]: Agent2Agent version, task states (both eras' spellings) and
//!   message parts;
//! - [`time`]: RFC 3339 timestamps and HTTP dates (`Retry-After`).
//!
//! This crate depends on no other workspace crate and does no I/O:
//! transports (stdio pipes, HTTP) stay with their users.

pub mod a2a;
pub mod mcp;
pub mod rpc;
pub mod sse;
pub mod time;
