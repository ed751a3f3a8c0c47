//! Long-term memory as the AAM and the inspection commands see it: a view
//! of an agent store ([`crate::store::AgentStore`]) — the SQLite one of a
//! memory directory (or in memory), or a fleet's PostgreSQL one. Every
//! `AgentStore` method is available on it.

use crate::host::HostError;
use crate::store::agent::AgentStore;
pub use crate::store::agent::{text_of, LtmEntry};
use std::path::Path;
use std::sync::Arc;

/// The schema version the SQLite memory database has in this build.
pub use crate::store::sqlite::agent::MEMORY_SCHEMA_VERSION as SCHEMA_VERSION;

/// Long-term memory (and the rest of the agent store behind it).
#[derive(Clone)]
pub struct Ltm(Arc<dyn AgentStore>);

impl Ltm {
    /// Opens (creating or migrating) the SQLite memory database at `path`;
    /// `None`: an in-memory database (ephemeral).
    pub fn open(path: Option<&Path>) -> Result<Ltm, HostError> {
        Ok(Ltm(crate::store::open_agent_sqlite(path)?.0))
    }

    /// Long-term memory in the shared PostgreSQL store at `url` (one
    /// connection pool per store and process, shared by its runs).
    pub fn postgres(url: &str) -> Result<Ltm, HostError> {
        Ok(Ltm(crate::store::open_agent_postgres(url)?))
    }

    /// A view of `store`.
    pub fn of(store: Arc<dyn AgentStore>) -> Ltm {
        Ltm(store)
    }

    /// The agent store behind it.
    pub fn store(&self) -> &Arc<dyn AgentStore> {
        &self.0
    }
}

impl std::ops::Deref for Ltm {
    type Target = dyn AgentStore;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl super::AamHost {
    /// Keeps every piece of agent state in `store` from now on: LTM, work
    /// queues, the episodic log, mailboxes, goals and beliefs. Call it
    /// before `load_program`.
    pub fn use_agent_store(&mut self, store: Arc<dyn AgentStore>) {
        self.ltm = Ltm::of(store.clone());
        self.episodic = super::episodic::Episodic::of(store);
    }

    /// Keeps every piece of agent state in the shared PostgreSQL store at
    /// `url` from now on (docs/scale-out.md). Call it before `load_program`.
    pub fn use_store(&mut self, url: &str) -> Result<(), HostError> {
        self.use_agent_store(crate::store::open_agent_postgres(url)?);
        Ok(())
    }

    /// The long-term memory store (for inspection).
    pub fn ltm(&self) -> Result<&Ltm, HostError> {
        Ok(&self.ltm)
    }
}
