//! The embedded run store: one SQLite database per memory directory
//! (`runs.db`, WAL), versioned with `PRAGMA user_version`. One process
//! owns a run: its lease, kept fresh by a heartbeat, says so
//! (`crate::store::lease`; the recorded pid is only shown); fences are
//! accepted and ignored.
//!
//! A process opens each directory's database once while it is in use
//! ([`SqliteStore::shared`]); its journal writes are group-committed, and
//! durable when shown (`super::group`).

use crate::store::lease;
use crate::store::rows::{JournalError, RunInfo, Status, Step, DB_FILE};
use crate::store::{Entry, NewRun, RunRow, RunState, Store, StoreStatus};
use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The schema version this binary writes and reads (2: webhooks, the
/// tables of `super::webhook`, created with a run's first subscription).
pub const SCHEMA_VERSION: i64 = super::webhook::SCHEMA_VERSION;

#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
    path: String,
    /// The group commit of journal writes, and their fsyncs.
    pub(super) group: super::group::Group,
    /// The heartbeat of this process's runs, started with its first run
    /// (a database on disk only); it stops when the store is dropped.
    heartbeat: std::sync::OnceLock<Arc<()>>,
}

/// The stores this process has open, by database file.
static OPEN: crate::store::open_once::OpenOnce<Arc<SqliteStore>> =
    crate::store::open_once::OpenOnce::new();

fn db_err(path: &str) -> impl Fn(rusqlite::Error) -> JournalError + '_ {
    move |e| {
        JournalError::new(
            "journal.db",
            format!("run journal `{path}` is unreadable or corrupted: {e}"),
        )
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

pub(crate) use crate::store::hex;

fn init(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS runs (
            id TEXT PRIMARY KEY,
            status TEXT NOT NULL,
            pid INTEGER NOT NULL,
            started_ms INTEGER NOT NULL,
            ended_ms INTEGER,
            program TEXT NOT NULL,
            artifact BLOB NOT NULL,
            artifact_sha256 TEXT NOT NULL,
            entry TEXT,
            args TEXT NOT NULL,
            result TEXT,
            error TEXT,
            resumes INTEGER NOT NULL DEFAULT 0
         );
         CREATE TABLE IF NOT EXISTS entries (
            run TEXT NOT NULL,
            key TEXT NOT NULL,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            op TEXT NOT NULL,
            input_hash TEXT NOT NULL,
            value TEXT,
            tokens INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (run, key)
         );",
    )?;
    // Columns added after schema 1 shipped, nullable so an older journal
    // reads as "unknown": `entries.labels` (labels unknown), and the
    // lease (`crate::store::lease`: a run written before has no owner, so
    // nothing renews it and it is not live). Added in one transaction and
    // each only when missing, so a process killed half-way, or two
    // processes opening the journal at once, leave it whole.
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let added = (|| {
        for (table, column, ty) in [
            ("entries", "labels", "TEXT"),
            ("runs", "owner", "TEXT"),
            ("runs", "lease_until", "INTEGER"),
        ] {
            let has: bool = conn.query_row(
                &format!("SELECT COUNT(*) > 0 FROM pragma_table_info('{table}') WHERE name = ?1"),
                [column],
                |r| r.get(0),
            )?;
            if !has {
                conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {ty}"))?;
            }
        }
        Ok::<(), rusqlite::Error>(())
    })();
    match added {
        Ok(()) => conn.execute_batch("COMMIT")?,
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(e);
        }
    }
    let v: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if v == 0 {
        // Version 2 (webhooks) is stamped when a run first subscribes
        // (`super::webhook::ensure`): a journal without webhooks stays
        // readable by an older aisc.
        conn.pragma_update(None, "user_version", 1)?;
    }
    Ok(())
}

const INFO_SQL: &str =
    "SELECT id, status, owner, lease_until, started_ms, ended_ms, entry, program, error, resumes,
    (SELECT COUNT(*) FROM entries e WHERE e.run = runs.id AND e.kind = 'done') AS n_entries,
    (SELECT COUNT(*) FROM entries e WHERE e.run = runs.id AND e.kind = 'intent') AS n_doubt
    FROM runs";

fn info_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunInfo> {
    let status: String = r.get("status")?;
    let owner: Option<String> = r.get("owner")?;
    let lease: Option<i64> = r.get("lease_until")?;
    let status = match status.as_str() {
        "completed" => Status::Completed,
        "failed" => Status::Failed,
        "paused" => Status::Paused,
        _ if owner.as_deref() == Some(&lease::this_process()) => Status::Running,
        _ if !lease::held_elsewhere(owner.as_deref(), lease, now_ms()) => Status::Interrupted,
        _ => Status::Running,
    };
    Ok(RunInfo {
        id: r.get("id")?,
        status,
        started_ms: r.get("started_ms")?,
        ended_ms: r.get("ended_ms")?,
        entry: r.get("entry")?,
        program: r.get("program")?,
        entries: r.get("n_entries")?,
        in_doubt: r.get("n_doubt")?,
        error: r.get("error")?,
        resumes: r.get("resumes")?,
    })
}

impl SqliteStore {
    /// Opens (creating) `dir/runs.db`; `None`: an in-memory database.
    pub fn open(dir: Option<&Path>) -> Result<SqliteStore, JournalError> {
        let (conn, path) = match dir {
            None => (Connection::open_in_memory(), ":memory:".to_string()),
            Some(d) => {
                std::fs::create_dir_all(d).map_err(|e| {
                    JournalError::new(
                        "journal.dir",
                        format!("cannot create `{}`: {e}", d.display()),
                    )
                })?;
                let p = d.join(DB_FILE);
                (Connection::open(&p), p.display().to_string())
            }
        };
        let conn = conn.map_err(db_err(&path))?;
        init(&conn).map_err(db_err(&path))?;
        let v: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(db_err(&path))?;
        if v > SCHEMA_VERSION {
            return Err(JournalError::new(
                "journal.schema",
                format!(
                    "run journal `{path}` has schema version {v}; this aisc reads {SCHEMA_VERSION}"
                ),
            ));
        }
        // Only a database on disk in WAL mode commits groups without an
        // fsync: fsyncing the WAL then covers them (see `sync`).
        let wal = match dir {
            Some(d) => {
                let mode: String = conn
                    .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                    .map_err(db_err(&path))?;
                // SQLite names it after the database file, byte for byte.
                let mut wal = d.join(DB_FILE).into_os_string();
                wal.push("-wal");
                let wal = mode
                    .eq_ignore_ascii_case("wal")
                    .then(|| std::path::PathBuf::from(wal));
                // Checkpoints are made off the writers' path.
                if wal.is_some() {
                    super::checkpoint::hand_over(&conn).map_err(db_err(&path))?;
                }
                wal
            }
            None => None,
        };
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            path,
            group: super::group::Group::new(wal),
            heartbeat: std::sync::OnceLock::new(),
        })
    }

    /// Starts renewing the leases of this process's running runs (once
    /// per store): every [`lease::HEARTBEAT_MS`], on a connection of its
    /// own, until the store is dropped. An in-memory database is seen by
    /// no other process and needs none.
    fn start_heartbeat(&self) {
        if self.path == ":memory:" {
            return;
        }
        self.heartbeat.get_or_init(|| {
            let alive = Arc::new(());
            let weak = Arc::downgrade(&alive);
            let path = self.path.clone();
            // Without a thread, runs longer than a lease look interrupted
            // to other processes (this one still sees them as its own).
            let _ = std::thread::Builder::new()
                .name("ais-journal-heartbeat".into())
                .spawn(move || {
                    let me = lease::this_process();
                    let Ok(conn) = Connection::open(&path) else {
                        return;
                    };
                    let _ = conn.busy_timeout(std::time::Duration::from_secs(10));
                    let tick = std::time::Duration::from_millis(lease::HEARTBEAT_MS as u64);
                    loop {
                        std::thread::sleep(tick);
                        if weak.upgrade().is_none() {
                            return;
                        }
                        // A missed renewal is retried at the next tick; the
                        // lease outlasts several.
                        let _ = conn.execute(
                            "UPDATE runs SET lease_until = ?1 WHERE owner = ?2 AND status = 'running'",
                            params![now_ms() + lease::LEASE_MS, me],
                        );
                    }
                });
            alive
        });
    }

    /// The store of `dir`, shared by every user in this process (one
    /// connection: writers batch into one commit).
    pub fn shared(dir: &Path) -> Result<Arc<SqliteStore>, JournalError> {
        OPEN.get(&dir.join(DB_FILE), || {
            SqliteStore::open(Some(dir)).map(Arc::new)
        })
    }

    /// Runs `job` in the next group commit; returns once that commit is
    /// durable (`shown`), or once it survives this process (see
    /// `super::group`).
    fn grouped(
        &self,
        code: &'static str,
        shown: bool,
        job: impl FnOnce(&Connection) -> rusqlite::Result<()> + Send + 'static,
    ) -> Result<(), JournalError> {
        self.group.run(&self.conn, &self.path, code, shown, job)
    }

    /// Waits until every journal commit made so far is durable.
    pub fn sync(&self, code: &'static str) -> Result<(), JournalError> {
        self.group.sync(&self.path, code)
    }

    /// A new run's row, running in this process; durable before this
    /// returns when `shown` (see [`SqliteStore::grouped`]).
    fn insert_run(&self, run: &NewRun<'_>, shown: bool) -> Result<i64, JournalError> {
        self.start_heartbeat();
        let now = now_ms();
        let row = (
            run.id.to_string(),
            i64::from(std::process::id()),
            now,
            run.program.to_string(),
            run.artifact.to_vec(),
            hex(&Sha256::digest(run.artifact)),
            run.entry.map(str::to_string),
            run.args.to_string(),
            lease::this_process(),
            now + lease::LEASE_MS,
        );
        self.grouped("journal.db", shown, move |c| {
            c.execute(
                "INSERT INTO runs (id, status, pid, started_ms, program, artifact, artifact_sha256, entry, args,
                    owner, lease_until)
                 VALUES (?1, 'running', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8, row.9],
            )
            .map(|_| ())
        })?;
        Ok(0)
    }

    /// Entries of run `id`, durable before this returns when `shown`.
    fn write_entries(&self, id: &str, entries: &[Entry], shown: bool) -> Result<(), JournalError> {
        let (run, entries) = (id.to_string(), entries.to_vec());
        self.grouped("journal.write", shown, move |c| {
            let mut st = c.prepare_cached(
                "INSERT OR REPLACE INTO entries (run, key, seq, kind, op, input_hash, value, tokens, labels)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?;
            for e in &entries {
                st.execute(params![
                    run, e.key, e.seq, e.kind, e.op, e.hash, e.value, e.tokens, e.labels
                ])?;
            }
            Ok(())
        })
    }

    pub(super) fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn err(&self) -> impl Fn(rusqlite::Error) -> JournalError + '_ {
        db_err(&self.path)
    }
}

impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    fn location(&self) -> &str {
        &self.path
    }

    fn begin_run(&self, run: &NewRun<'_>) -> Result<i64, JournalError> {
        self.insert_run(run, true)
    }

    fn begin_run_unshown(&self, run: &NewRun<'_>) -> Result<i64, JournalError> {
        self.insert_run(run, false)
    }

    fn run_state(&self, id: &str) -> Result<Option<RunState>, JournalError> {
        let row: Option<(String, i64, Option<String>, Option<i64>)> = self
            .conn()
            .query_row(
                "SELECT status, pid, owner, lease_until FROM runs WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()
            .map_err(self.err())?;
        Ok(row.map(|(status, pid, owner, lease)| RunState {
            owned_elsewhere: (status == "running"
                && lease::held_elsewhere(owner.as_deref(), lease, now_ms()))
            .then(|| format!("pid {pid}, its lease renewed by a heartbeat")),
            status,
        }))
    }

    fn entries(&self, id: &str) -> Result<Vec<Entry>, JournalError> {
        let conn = self.conn();
        let mut st = conn
            .prepare(
                "SELECT key, seq, kind, op, input_hash, value, tokens, labels FROM entries WHERE run = ?1",
            )
            .map_err(self.err())?;
        let rows = st
            .query_map([id], |r| {
                Ok(Entry {
                    key: r.get(0)?,
                    seq: r.get(1)?,
                    kind: r.get(2)?,
                    op: r.get(3)?,
                    hash: r.get(4)?,
                    value: r.get(5)?,
                    tokens: r.get(6)?,
                    labels: r.get(7)?,
                })
            })
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(self.err())?;
        Ok(rows)
    }

    fn mark_resumed(&self, id: &str) -> Result<i64, JournalError> {
        self.start_heartbeat();
        let mut conn = self.conn();
        // Checked and taken in one transaction: of two processes resuming
        // one run, one gets it.
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(self.err())?;
        let held: Option<(String, Option<String>, Option<i64>)> = tx
            .query_row(
                "SELECT status, owner, lease_until FROM runs WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(self.err())?;
        if let Some((status, owner, lease)) = held {
            if status == "running" && lease::held_elsewhere(owner.as_deref(), lease, now_ms()) {
                return Err(JournalError::new(
                    "journal.busy",
                    format!("run `{id}` is still running (its owner renews its lease)"),
                ));
            }
        }
        tx.execute(
            "UPDATE runs SET status = 'running', pid = ?2, owner = ?3, lease_until = ?4,
             ended_ms = NULL, error = NULL, resumes = resumes + 1 WHERE id = ?1",
            params![
                id,
                i64::from(std::process::id()),
                lease::this_process(),
                now_ms() + lease::LEASE_MS
            ],
        )
        .map_err(self.err())?;
        tx.commit().map_err(self.err())?;
        Ok(0)
    }

    fn usage(&self, id: &str, ops: &[&str]) -> Result<(i64, i64), JournalError> {
        let list = ops
            .iter()
            .map(|o| format!("'{}'", o.replace('\'', "''")))
            .collect::<Vec<_>>()
            .join(", ");
        self.conn()
            .query_row(
                &format!(
                    "SELECT COUNT(*), COALESCE(SUM(tokens), 0) FROM entries
                     WHERE run = ?1 AND kind = 'done' AND op IN ({list})"
                ),
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(self.err())
    }

    fn write(&self, id: &str, _fence: i64, entries: &[Entry]) -> Result<(), JournalError> {
        self.write_entries(id, entries, true)
    }

    fn write_unshown(&self, id: &str, _fence: i64, entries: &[Entry]) -> Result<(), JournalError> {
        self.write_entries(id, entries, false)
    }

    fn waiting(&self, id: &str) -> Result<Option<(String, String, Option<String>)>, JournalError> {
        self.conn()
            .query_row(
                "SELECT key, input_hash, value FROM entries WHERE run = ?1 AND kind = 'waiting'",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(self.err())
    }

    fn finish(
        &self,
        id: &str,
        _fence: i64,
        status: &str,
        result: Option<&str>,
        error: Option<&str>,
    ) -> Result<(), JournalError> {
        let row = (
            id.to_string(),
            status.to_string(),
            now_ms(),
            result.map(str::to_string),
            error.map(str::to_string),
        );
        // The run's state and its webhook deliveries in one transaction;
        // shown (a result returned, a status listed).
        self.grouped("journal.db", true, move |c| {
            let n = c.execute(
                "UPDATE runs SET status = ?2, ended_ms = ?3, result = ?4, error = ?5,
                 lease_until = NULL WHERE id = ?1",
                params![row.0, row.1, row.2, row.3, row.4],
            )?;
            if n == 1 {
                super::webhook::outbox(c, &row.0, row.2)?;
            }
            Ok(())
        })
    }

    fn list_runs(&self) -> Result<Vec<RunInfo>, JournalError> {
        let conn = self.conn();
        let mut st = conn
            .prepare(&format!("{INFO_SQL} ORDER BY started_ms, id"))
            .map_err(self.err())?;
        let rows = st
            .query_map([], info_of)
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(self.err())?;
        Ok(rows)
    }

    fn latest(&self) -> Result<Option<String>, JournalError> {
        self.conn()
            .query_row(
                "SELECT id FROM runs ORDER BY started_ms DESC, id DESC LIMIT 1",
                [],
                |r| r.get::<_, String>(0),
            )
            .optional()
            .map_err(self.err())
    }

    fn run_row(&self, id: &str) -> Result<Option<RunRow>, JournalError> {
        let conn = self.conn();
        let Some(info) = conn
            .query_row(&format!("{INFO_SQL} WHERE id = ?1"), [id], info_of)
            .optional()
            .map_err(self.err())?
        else {
            return Ok(None);
        };
        let (artifact, artifact_sha256, args, result) = conn
            .query_row(
                "SELECT artifact, artifact_sha256, args, result FROM runs WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .map_err(self.err())?;
        Ok(Some(RunRow {
            info,
            artifact,
            artifact_sha256,
            args,
            result,
        }))
    }

    fn steps(&self, id: &str) -> Result<Vec<Step>, JournalError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare("SELECT seq, kind, op, tokens FROM entries WHERE run = ?1 ORDER BY seq, key")
            .map_err(self.err())?;
        let steps = stmt
            .query_map([id], |r| {
                Ok(Step {
                    seq: r.get(0)?,
                    kind: r.get(1)?,
                    op: r.get(2)?,
                    tokens: r.get(3)?,
                })
            })
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(self.err())?;
        Ok(steps)
    }

    fn create_thread(
        &self,
        id: &str,
        metadata: &serde_json::Value,
    ) -> Result<crate::store::thread::ThreadInfo, JournalError> {
        self.create_thread_sqlite(id, metadata)
    }

    fn thread(&self, id: &str) -> Result<Option<crate::store::thread::ThreadInfo>, JournalError> {
        self.thread_sqlite(id)
    }

    fn threads(&self, limit: usize) -> Result<Vec<crate::store::thread::ThreadInfo>, JournalError> {
        self.threads_sqlite(limit)
    }

    fn update_thread_state(
        &self,
        id: &str,
        change: &mut dyn FnMut(
            &crate::store::thread::ThreadInfo,
        ) -> Result<crate::store::thread::NewState, JournalError>,
    ) -> Result<Option<crate::store::thread::ThreadInfo>, JournalError> {
        self.update_thread_state_sqlite(id, change)
    }

    fn delete_thread(&self, id: &str) -> Result<bool, JournalError> {
        self.delete_thread_sqlite(id)
    }

    fn link_thread_run(&self, thread: &str, run: &str, create: bool) -> Result<i64, JournalError> {
        self.link_thread_run_sqlite(thread, run, create)
    }

    fn thread_runs(&self, thread: &str) -> Result<Vec<(i64, String)>, JournalError> {
        self.thread_runs_sqlite(thread)
    }

    fn thread_of_run(&self, run: &str) -> Result<Option<(String, i64)>, JournalError> {
        self.thread_of_run_sqlite(run)
    }

    fn thread_waits_for(&self, run: &str) -> Result<Option<String>, JournalError> {
        self.thread_waits_for_sqlite(run)
    }

    fn add_webhooks(
        &self,
        subject: &str,
        hooks: &[crate::store::webhook::Hook],
    ) -> Result<(), JournalError> {
        let (subject, hooks) = (subject.to_string(), hooks.to_vec());
        self.grouped("journal.db", true, move |c| {
            super::webhook::add_webhooks(c, &subject, &hooks)
        })
    }

    fn claim_deliveries(
        &self,
        owner: &str,
        lease_ms: i64,
        limit: i64,
    ) -> Result<Vec<crate::store::webhook::Due>, JournalError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(self.err())?;
        let due =
            super::webhook::claim(&tx, owner, lease_ms, limit, now_ms()).map_err(self.err())?;
        tx.commit().map_err(self.err())?;
        Ok(due)
    }

    fn record_attempt(
        &self,
        owner: &str,
        attempt: &crate::store::webhook::Attempt,
    ) -> Result<bool, JournalError> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(self.err())?;
        let ok = super::webhook::record(&tx, owner, attempt, now_ms()).map_err(self.err())?;
        tx.commit().map_err(self.err())?;
        Ok(ok)
    }

    fn deliveries(
        &self,
        run: &str,
    ) -> Result<Vec<crate::store::webhook::DeliveryInfo>, JournalError> {
        super::webhook::deliveries(&self.conn(), run).map_err(self.err())
    }

    fn delivery_counts(&self) -> Result<crate::store::webhook::Counts, JournalError> {
        super::webhook::counts(&self.conn()).map_err(self.err())
    }

    fn prune_deliveries(&self, ended_before_ms: i64, limit: i64) -> Result<i64, JournalError> {
        self.prune_deliveries_sqlite(ended_before_ms, limit)
    }

    fn migrate(&self) -> Result<(i64, i64), JournalError> {
        // `open` created the tables and stamped the version.
        Ok((SCHEMA_VERSION, SCHEMA_VERSION))
    }

    fn status(&self) -> Result<StoreStatus, JournalError> {
        let conn = self.conn();
        let v: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(self.err())?;
        let mut st = conn
            .prepare("SELECT status, COUNT(*) FROM runs GROUP BY status ORDER BY status")
            .map_err(self.err())?;
        let runs = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(self.err())?;
        Ok(StoreStatus {
            backend: "sqlite",
            location: self.path.clone(),
            schema_version: v,
            known_version: SCHEMA_VERSION,
            runs,
            queue_depth: 0,
            takeovers: 0,
            workers: Vec::new(),
            work_queues: Vec::new(),
        })
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// An LLM op's entry, numbered `i` (shared with `group`'s tests).
    pub(in crate::store::sqlite) fn entry(i: usize) -> Entry {
        Entry {
            key: format!("k{i}"),
            seq: i as i64,
            kind: "done".into(),
            op: "ask".into(),
            hash: "h".into(),
            value: Some(format!("\"v{i}\"")),
            tokens: 1,
            labels: None,
        }
    }

    /// 64 writers queued while a commit holds the connection share the next
    /// transaction; each gets its outcome and every entry is durable.
    #[test]
    fn queued_writes_share_one_commit() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SqliteStore::shared(dir.path()).expect("open");
        let again = SqliteStore::shared(dir.path()).expect("open");
        assert!(Arc::ptr_eq(&store, &again), "one store per directory");
        let run = NewRun {
            id: "r1",
            program: "p",
            artifact: b"a",
            entry: None,
            args: "[]",
        };
        store.begin_run(&run).expect("begin");
        let before = store
            .group
            .commits
            .load(std::sync::atomic::Ordering::Relaxed);
        let held = store.conn();
        let writers: Vec<_> = (0..64)
            .map(|i| {
                let s = store.clone();
                std::thread::spawn(move || s.write("r1", 0, &[entry(i)]))
            })
            .collect();
        while store.group.pending.lock().map(|p| p.len()).unwrap_or(0) < 64 {
            std::thread::yield_now();
        }
        drop(held);
        for w in writers {
            assert_eq!(w.join().expect("writer"), Ok(()));
        }
        assert_eq!(
            store
                .group
                .commits
                .load(std::sync::atomic::Ordering::Relaxed)
                - before,
            1
        );
        assert_eq!(store.entries("r1").expect("entries").len(), 64);
        // A failing write fails alone: the run row exists already.
        assert!(store.begin_run(&run).is_err());
        store.write("r1", 0, &[entry(64)]).expect("a later write");
        assert_eq!(store.entries("r1").expect("entries").len(), 65);
    }
}
