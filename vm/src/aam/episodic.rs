//! The episodic log as the AAM and the inspection commands see it:
//! append-only records of what every agent did (tool calls, messages,
//! memory writes, notes), kept by an agent store
//! ([`crate::store::AgentStore`]): a memory directory's `memory.db`
//! (table `episodic`, where an old `episodic.log` file is imported once;
//! `crate::store::sqlite::episodic`), or a fleet's PostgreSQL store.

use crate::host::HostError;
use crate::store::agent::AgentStore;
pub use crate::store::agent::Filter;
pub use crate::store::sqlite::episodic::{read, scan, Scan, LEGACY_FILE, MAGIC, MAX_RECORD};
use serde_json::Value as Json;
use std::path::Path;
use std::sync::Arc;

/// The episodic log of an agent store.
#[derive(Clone)]
pub struct Episodic(Arc<dyn AgentStore>);

impl Episodic {
    /// A log that lives only as long as this value (no directory).
    pub fn ephemeral() -> Result<Episodic, HostError> {
        Ok(Episodic(crate::store::open_agent_sqlite(None)?.0))
    }

    /// The log in the SQLite memory database `db` (created or migrated),
    /// importing a legacy `episodic.log` next to it; the warning says what
    /// an import did.
    pub fn open(db: &Path) -> Result<(Episodic, Option<String>), HostError> {
        let (store, warning) = crate::store::open_agent_sqlite(Some(db))?;
        Ok((Episodic(store), warning))
    }

    /// The log in the shared PostgreSQL store at `url`.
    pub fn postgres(url: &str) -> Result<Episodic, HostError> {
        Ok(Episodic(crate::store::open_agent_postgres(url)?))
    }

    /// A view of `store`.
    pub fn of(store: Arc<dyn AgentStore>) -> Episodic {
        Episodic(store)
    }

    /// Appends one record (a JSON object with `run`, `agent`, `op`, ...),
    /// durably.
    pub fn append(&self, record: Json) -> Result<(), HostError> {
        self.0.episodic_append(&record)
    }

    /// The records matching `f`, oldest first.
    pub fn select(&self, f: &Filter<'_>) -> Result<Vec<Json>, HostError> {
        self.0.episodic_select(f)
    }

    /// The run ids in the log, oldest first.
    pub fn runs(&self) -> Result<Vec<String>, HostError> {
        self.0.episodic_runs()
    }

    /// Deletes every record; returns how many there were.
    pub fn clear(&self) -> Result<usize, HostError> {
        self.0.episodic_clear()
    }
}

impl super::AamHost {
    /// The episodic records of this host (all runs in the log), oldest first.
    pub fn episodic_records(&self) -> Vec<Json> {
        self.episodic.select(&Filter::default()).unwrap_or_default()
    }

    /// Appends the record of one AAM transition.
    pub(super) fn log(
        &self,
        agent: &str,
        op: &str,
        inputs: Json,
        out: Result<&Json, &HostError>,
        t0: std::time::Instant,
    ) {
        let ms = ais_stdlib::time::unix_ms();
        let mut rec = serde_json::json!({
            "run": self.run_id,
            "seq": self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1,
            "time": ais_stdlib::time::rfc3339(ms),
            "agent": agent,
            "op": op,
            "inputs": inputs,
            "dur_us": u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX),
        });
        match out {
            Ok(v) => rec["outputs"] = v.clone(),
            Err(e) => {
                rec["error"] =
                    serde_json::json!({"code": e.code, "message": e.message, "payload": e.payload})
            }
        }
        if let Err(e) = self.episodic.append(rec) {
            // The run goes on; the edge shows the failure once per call.
            self.warn(&e.to_string());
        }
    }
}
