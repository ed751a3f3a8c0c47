//! The SQLite agent store: long-term memory, work queues and the episodic
//! log in a memory directory's `memory.db` (or in memory, `:memory:`);
//! mailboxes, goals and beliefs in this value, so they live as long as the
//! host that opened it (one run, or one embedding's host kept across runs).
//!
//! A process opens each directory's database once ([`SqliteAgentStore::open`]
//! shares it): opening and migrating SQLite per run was most of a served
//! trivial run's cost (`crate::store::open_once`). Each host gets its own
//! value (its own mailboxes, goals and beliefs) over the shared database.

use super::episodic::{SqliteEpisodic, LEGACY_FILE};
use super::memory::SqliteLtm;
use crate::host::HostError;
use crate::store::agent::{AgentStore, BeliefCheck, Filter, GoalsUpdate, LtmEntry, Received};
use crate::sync::lock;
use serde_json::Value as Json;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

/// The database file inside a memory directory.
pub const MEMORY_DB: &str = "memory.db";

/// The schema version of `memory.db` this build writes.
pub const MEMORY_SCHEMA_VERSION: i64 = super::memory::SCHEMA_VERSION;

pub struct SqliteAgentStore {
    ltm: Part<SqliteLtm>,
    log: Part<SqliteEpisodic>,
    inbox: Mutex<HashMap<String, Vec<Received>>>,
    goals: Mutex<HashMap<String, Json>>,
    beliefs: Mutex<HashMap<(String, String), Json>>,
}

/// A database made on its first use (in memory: a run that touches no
/// memory makes none), or given opened.
struct Part<T> {
    cell: OnceLock<Arc<T>>,
    open: fn() -> Result<T, HostError>,
}

impl<T> Part<T> {
    fn ready(v: Arc<T>) -> Self {
        let cell = OnceLock::new();
        let _ = cell.set(v);
        Part {
            cell,
            open: || {
                Err(HostError::new(
                    "internal.store",
                    "the store was given, not opened",
                ))
            },
        }
    }

    fn lazy(open: fn() -> Result<T, HostError>) -> Self {
        Part {
            cell: OnceLock::new(),
            open,
        }
    }

    fn get(&self) -> Result<&T, HostError> {
        if let Some(v) = self.cell.get() {
            return Ok(v);
        }
        let v = Arc::new((self.open)()?);
        Ok(self.cell.get_or_init(|| v))
    }

    /// The database, if it was made.
    fn opened(&self) -> Option<&T> {
        self.cell.get().map(|v| &**v)
    }
}

impl SqliteAgentStore {
    fn over(ltm: Part<SqliteLtm>, log: Part<SqliteEpisodic>) -> SqliteAgentStore {
        SqliteAgentStore {
            ltm,
            log,
            inbox: Mutex::default(),
            goals: Mutex::default(),
            beliefs: Mutex::default(),
        }
    }

    /// A store that lives only as long as this value (nothing on disk).
    pub fn in_memory() -> Result<SqliteAgentStore, HostError> {
        Ok(SqliteAgentStore::over(
            Part::lazy(|| SqliteLtm::open(None)),
            Part::lazy(SqliteEpisodic::ephemeral),
        ))
    }

    /// The store of the memory database `db` (created or migrated), its
    /// database shared with every other user in this process. The
    /// warning says what importing a legacy episodic log did.
    pub fn open(db: &Path) -> Result<(SqliteAgentStore, Option<String>), HostError> {
        static OPEN: crate::store::open_once::OpenOnce<(Arc<SqliteLtm>, Arc<SqliteEpisodic>)> =
            crate::store::open_once::OpenOnce::new();
        let key = std::fs::canonicalize(db.parent().unwrap_or(db))
            .map(|d| d.join(MEMORY_DB))
            .unwrap_or_else(|_| db.to_path_buf());
        // An old framed log to import: opened afresh so the import runs (and
        // says what it did) whatever this process had open.
        if db.with_file_name(LEGACY_FILE).exists() {
            let ltm = Arc::new(SqliteLtm::open(Some(db))?);
            let (log, w) = SqliteEpisodic::open(db)?;
            return Ok((
                SqliteAgentStore::over(Part::ready(ltm), Part::ready(Arc::new(log))),
                w,
            ));
        }
        let mut warning = None;
        let (ltm, log) = OPEN.get(&key, || -> Result<_, HostError> {
            let ltm = Arc::new(SqliteLtm::open(Some(db))?);
            let (log, w) = SqliteEpisodic::open(db)?;
            warning = w;
            Ok((ltm, Arc::new(log)))
        })?;
        Ok((
            SqliteAgentStore::over(Part::ready(ltm), Part::ready(log)),
            warning,
        ))
    }

    /// The database file, if any.
    pub fn path(&self) -> Option<&Path> {
        self.log.opened().and_then(SqliteEpisodic::path)
    }
}

impl AgentStore for SqliteAgentStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    fn put(
        &self,
        agent: &str,
        ns: &str,
        key: &str,
        value: &Json,
        seq: Option<i64>,
        labels: &[String],
    ) -> Result<(), HostError> {
        self.ltm.get()?.put(agent, ns, key, value, seq, labels)
    }

    fn get(&self, agent: &str, ns: &str, key: &str) -> Result<Option<LtmEntry>, HostError> {
        self.ltm.get()?.get(agent, ns, key)
    }

    fn all(&self, agent: &str, ns: &str) -> Result<Vec<LtmEntry>, HostError> {
        self.ltm.get()?.all(agent, ns)
    }

    fn prefix(&self, agent: &str, ns: &str, prefix: &str) -> Result<Vec<LtmEntry>, HostError> {
        self.ltm.get()?.prefix(agent, ns, prefix)
    }

    fn search_all(&self, agent: &str, ns: &str, query: &str) -> Result<Vec<LtmEntry>, HostError> {
        self.ltm.get()?.search_all(agent, ns, query)
    }

    fn search_ranked(
        &self,
        agent: Option<&str>,
        ns: &str,
        query: &str,
        limit: usize,
    ) -> Result<Vec<(LtmEntry, f64)>, HostError> {
        self.ltm.get()?.search_ranked(agent, ns, query, limit)
    }

    fn remove(&self, agent: &str, ns: &str, key: &str) -> Result<bool, HostError> {
        self.ltm.get()?.remove(agent, ns, key)
    }

    fn clear(&self, agent: Option<&str>, ns: &str) -> Result<usize, HostError> {
        self.ltm.get()?.clear(agent, ns)
    }

    fn clear_ns_prefix(&self, prefix: &str) -> Result<usize, HostError> {
        // A database never made holds nothing to clear.
        self.ltm
            .opened()
            .map_or(Ok(0), |l| l.clear_ns_prefix(prefix))
    }

    fn agents(&self, ns: &str) -> Result<Vec<(String, i64)>, HostError> {
        self.ltm.get()?.agents(ns)
    }

    fn schema_version(&self) -> Result<i64, HostError> {
        self.ltm.get()?.schema_version()
    }

    fn enqueue(
        &self,
        queue: &str,
        job: &Json,
        by: &str,
        labels: &[String],
    ) -> Result<Json, HostError> {
        self.ltm.get()?.enqueue(queue, job, by, labels)
    }

    fn claim(
        &self,
        queue: &str,
        by: &str,
        lease_ms: Option<u64>,
    ) -> Result<(Json, Vec<String>), HostError> {
        self.ltm.get()?.claim(queue, by, lease_ms)
    }

    fn episodic_append(&self, record: &Json) -> Result<(), HostError> {
        self.log.get()?.append(record)
    }

    fn episodic_select(&self, f: &Filter<'_>) -> Result<Vec<Json>, HostError> {
        self.log.get()?.select(f)
    }

    fn episodic_runs(&self) -> Result<Vec<String>, HostError> {
        self.log.get()?.runs()
    }

    fn episodic_clear(&self) -> Result<usize, HostError> {
        self.log.get()?.clear()
    }

    fn agent_state_outlives_run(&self) -> bool {
        false
    }

    fn send(&self, to: &str, m: &Received) -> Result<(), HostError> {
        lock(&self.inbox)
            .entry(to.to_string())
            .or_default()
            .push(m.clone());
        Ok(())
    }

    fn inbox(&self, agent: &str, take: bool) -> Result<Vec<Received>, HostError> {
        let mut ib = lock(&self.inbox);
        Ok(match ib.get_mut(agent) {
            Some(list) if take => std::mem::take(list),
            Some(list) => list.clone(),
            None => Vec::new(),
        })
    }

    fn goals(&self, agent: &str) -> Result<Json, HostError> {
        Ok(lock(&self.goals)
            .get(agent)
            .cloned()
            .unwrap_or_else(|| Json::Array(Vec::new())))
    }

    fn update_goals(&self, agent: &str, f: GoalsUpdate<'_>) -> Result<(), HostError> {
        let mut all = lock(&self.goals);
        let mut rows = all
            .get(agent)
            .cloned()
            .unwrap_or_else(|| Json::Array(Vec::new()));
        f(&mut rows)?;
        all.insert(agent.to_string(), rows);
        Ok(())
    }

    fn belief(&self, agent: &str, name: &str) -> Result<Option<Json>, HostError> {
        Ok(lock(&self.beliefs)
            .get(&(agent.to_string(), name.to_string()))
            .cloned())
    }

    fn set_belief(
        &self,
        agent: &str,
        name: &str,
        value: &Json,
        check: BeliefCheck<'_>,
    ) -> Result<(), HostError> {
        let mut b = lock(&self.beliefs);
        let k = (agent.to_string(), name.to_string());
        check(b.get(&k))?;
        b.insert(k, value.clone());
        Ok(())
    }

    fn init_belief(
        &self,
        agent: &str,
        name: &str,
        value: &Json,
        check: BeliefCheck<'_>,
    ) -> Result<Json, HostError> {
        // Beliefs end with the host: the program's initial value is set.
        self.set_belief(agent, name, value, check)?;
        Ok(value.clone())
    }
}
