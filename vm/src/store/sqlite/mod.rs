//! The embedded stores, on SQLite (rusqlite, bundled): the run store
//! ([`runs::SqliteStore`], a memory directory's `runs.db`) and the agent
//! store ([`agent::SqliteAgentStore`], its `memory.db`: long-term memory,
//! work queues, the episodic log).

pub mod agent;
mod checkpoint;
pub mod episodic;
mod group;
mod memory;
mod queue;
mod retention;
pub mod runs;
mod threads;
mod webhook;

pub use agent::SqliteAgentStore;
pub(crate) use runs::hex;
pub use runs::{SqliteStore, SCHEMA_VERSION};
