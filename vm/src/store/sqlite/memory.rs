//! Long-term memory in SQLite (rusqlite, bundled): WAL journal, one
//! transaction per write, a versioned schema (`PRAGMA user_version`) and an
//! FTS5 index for keyword search. The PostgreSQL twin is
//! `crate::store::postgres::ltm` (PostgreSQL text search).
//!
//! One table holds every agent's entries, in namespaces: `ltm` for the LTM
//! tier, `stm:<session>` for STM entries swapped out by LRU-K eviction (they
//! belong to one process and are deleted when it ends).

use crate::host::HostError;
use crate::store::agent::{labels_of, labels_text, text_of, words, LtmEntry};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value as Json;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 5;

/// The named work queues' table (`super::queue` reads and writes it),
/// created here with the rest of the memory database (by the migration to
/// schema version 3).
const QUEUE_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS queue_jobs (
        id INTEGER PRIMARY KEY,
        queue TEXT NOT NULL,
        job TEXT NOT NULL,
        enqueued_by TEXT NOT NULL,
        enqueued_ms INTEGER NOT NULL,
        claimed_by TEXT,
        claimed_ms INTEGER
    );
    CREATE INDEX IF NOT EXISTS queue_jobs_open ON queue_jobs (queue, claimed_by, id);";

/// The entries and work queues of one memory database.
pub struct SqliteLtm {
    conn: Mutex<Connection>,
}

pub(crate) fn db_err(what: &str, e: rusqlite::Error) -> HostError {
    HostError::new("memory.ltm", format!("long-term memory: {what}: {e}"))
}

/// An FTS5 query requiring every word (`"a" AND "b"`), or `None` without words.
fn fts_all(query: &str) -> Option<String> {
    let ws = words(query);
    (!ws.is_empty()).then(|| {
        ws.iter()
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(" AND ")
    })
}

fn fts_any(query: &str) -> Option<String> {
    let ws = words(query);
    (!ws.is_empty()).then(|| {
        ws.iter()
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(" OR ")
    })
}

fn now_ms() -> i64 {
    i64::try_from(ais_stdlib::time::unix_ms()).unwrap_or(i64::MAX)
}

impl SqliteLtm {
    /// Opens (creating or migrating) the database at `path`; `None`: an
    /// in-memory database (ephemeral).
    pub fn open(path: Option<&Path>) -> Result<SqliteLtm, HostError> {
        let conn = match path {
            Some(p) => Connection::open(p)
                .map_err(|e| db_err(&format!("cannot open `{}`", p.display()), e))?,
            None => Connection::open_in_memory().map_err(|e| db_err("cannot open", e))?,
        };
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| db_err("busy_timeout", e))?;
        if path.is_some() {
            let mode: String = conn
                .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
                .map_err(|e| db_err("cannot enable WAL", e))?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(HostError::new(
                    "memory.ltm",
                    format!("long-term memory: WAL journal not available (got `{mode}`)"),
                ));
            }
            conn.execute_batch("PRAGMA synchronous=NORMAL;")
                .map_err(|e| db_err("pragma", e))?;
        }
        let ltm = SqliteLtm {
            conn: Mutex::new(conn),
        };
        ltm.migrate()?;
        Ok(ltm)
    }

    pub(super) fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn migrate(&self) -> Result<(), HostError> {
        let mut c = self.conn();
        let tx = c
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| db_err("migration", e))?;
        let v: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| db_err("reading the schema version", e))?;
        if v > SCHEMA_VERSION {
            return Err(HostError::new(
                "memory.schema",
                format!(
                    "the memory database has schema version {v}; this build understands up to {SCHEMA_VERSION} (upgrade aisc, or use another --memory directory)"
                ),
            ));
        }
        if v < 1 {
            tx.execute_batch(
                "CREATE TABLE IF NOT EXISTS entries (
                    id INTEGER PRIMARY KEY,
                    agent TEXT NOT NULL,
                    ns TEXT NOT NULL,
                    key TEXT NOT NULL,
                    value TEXT NOT NULL,
                    body TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    created_ms INTEGER NOT NULL,
                    updated_ms INTEGER NOT NULL,
                    UNIQUE (agent, ns, key)
                );
                CREATE INDEX IF NOT EXISTS entries_by_seq ON entries (agent, ns, seq);
                CREATE VIRTUAL TABLE IF NOT EXISTS entries_fts USING fts5 (
                    key, body, content = 'entries', content_rowid = 'id'
                );
                CREATE TRIGGER IF NOT EXISTS entries_ai AFTER INSERT ON entries BEGIN
                    INSERT INTO entries_fts (rowid, key, body) VALUES (new.id, new.key, new.body);
                END;
                CREATE TRIGGER IF NOT EXISTS entries_ad AFTER DELETE ON entries BEGIN
                    INSERT INTO entries_fts (entries_fts, rowid, key, body)
                        VALUES ('delete', old.id, old.key, old.body);
                END;
                CREATE TRIGGER IF NOT EXISTS entries_au AFTER UPDATE ON entries BEGIN
                    INSERT INTO entries_fts (entries_fts, rowid, key, body)
                        VALUES ('delete', old.id, old.key, old.body);
                    INSERT INTO entries_fts (rowid, key, body) VALUES (new.id, new.key, new.body);
                END;
                PRAGMA user_version = 1;",
            )
            .map_err(|e| db_err("creating the schema", e))?;
        }
        if v < 2 {
            // The episodic log (`super::episodic`), in the same store.
            tx.execute_batch(super::episodic::SCHEMA)
                .map_err(|e| db_err("migration", e))?;
            tx.execute_batch("PRAGMA user_version = 2;")
                .map_err(|e| db_err("migration", e))?;
        }
        if v < 3 {
            // Named work queues (`super::queue`), in the same store.
            tx.execute_batch(QUEUE_SCHEMA)
                .map_err(|e| db_err("migration", e))?;
            tx.execute_batch("PRAGMA user_version = 3;")
                .map_err(|e| db_err("migration", e))?;
        }
        if v < 4 {
            // Each entry and queued job keeps its information-flow labels
            // (docs/security.md, "Labels across runs").
            tx.execute_batch(
                "ALTER TABLE entries ADD COLUMN labels TEXT NOT NULL DEFAULT '[]';
                 ALTER TABLE queue_jobs ADD COLUMN labels TEXT NOT NULL DEFAULT '[]';
                 PRAGMA user_version = 4;",
            )
            .map_err(|e| db_err("migration", e))?;
        }
        if v < 5 {
            // A claim's lease (`claim(queue:, lease_ms:)`): when it runs
            // out the job can be claimed again; NULL: claimed for good.
            tx.execute_batch(
                "ALTER TABLE queue_jobs ADD COLUMN lease_until_ms INTEGER;
                 PRAGMA user_version = 5;",
            )
            .map_err(|e| db_err("migration", e))?;
        }
        tx.commit().map_err(|e| db_err("migration commit", e))
    }

    /// Inserts or replaces `(agent, ns, key)`; `seq`: keep this sequence
    /// number (swap-out), else the next one of the namespace.
    pub fn put(
        &self,
        agent: &str,
        ns: &str,
        key: &str,
        value: &Json,
        seq: Option<i64>,
        labels: &[String],
    ) -> Result<(), HostError> {
        let text = serde_json::to_string(value)
            .map_err(|e| HostError::new("memory.encode", e.to_string()))?;
        let body = text_of(value);
        let mut c = self.conn();
        let tx = c
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| db_err("begin", e))?;
        let seq = match seq {
            Some(s) => s,
            None => tx
                .query_row(
                    "SELECT COALESCE(MAX(seq), 0) + 1 FROM entries WHERE agent = ?1 AND ns = ?2",
                    params![agent, ns],
                    |r| r.get(0),
                )
                .map_err(|e| db_err("write", e))?,
        };
        let now = now_ms();
        tx.execute(
            "INSERT INTO entries (agent, ns, key, value, body, seq, created_ms, updated_ms, labels)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8)
             ON CONFLICT (agent, ns, key) DO UPDATE SET
                value = excluded.value, body = excluded.body,
                seq = excluded.seq, updated_ms = excluded.updated_ms,
                labels = excluded.labels",
            params![agent, ns, key, text, body, seq, now, labels_text(labels)],
        )
        .map_err(|e| db_err("write", e))?;
        tx.commit().map_err(|e| db_err("commit", e))
    }

    fn rows(&self, sql: &str, p: &[&dyn rusqlite::ToSql]) -> Result<Vec<LtmEntry>, HostError> {
        let c = self.conn();
        let mut st = c.prepare_cached(sql).map_err(|e| db_err("read", e))?;
        let rows = st
            .query_map(p, |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, String>(5)?,
                ))
            })
            .map_err(|e| db_err("read", e))?;
        let mut out = Vec::new();
        for row in rows {
            let (agent, key, value, seq, updated_ms, labels) =
                row.map_err(|e| db_err("read", e))?;
            // A value that is not JSON (written by hand) reads as text.
            let value = serde_json::from_str(&value).unwrap_or(Json::String(value));
            out.push(LtmEntry {
                agent,
                key,
                value,
                seq,
                updated_ms,
                labels: labels_of(&labels),
            });
        }
        Ok(out)
    }

    pub fn get(&self, agent: &str, ns: &str, key: &str) -> Result<Option<LtmEntry>, HostError> {
        Ok(self
            .rows(
                "SELECT agent, key, value, seq, updated_ms, labels FROM entries
                 WHERE agent = ?1 AND ns = ?2 AND key = ?3",
                &[&agent, &ns, &key],
            )?
            .pop())
    }

    /// Every entry of the namespace, oldest write first.
    pub fn all(&self, agent: &str, ns: &str) -> Result<Vec<LtmEntry>, HostError> {
        self.rows(
            "SELECT agent, key, value, seq, updated_ms, labels FROM entries
             WHERE agent = ?1 AND ns = ?2 ORDER BY seq",
            &[&agent, &ns],
        )
    }

    /// Entries whose key starts with `prefix`, oldest write first.
    pub fn prefix(&self, agent: &str, ns: &str, prefix: &str) -> Result<Vec<LtmEntry>, HostError> {
        self.rows(
            "SELECT agent, key, value, seq, updated_ms, labels FROM entries
             WHERE agent = ?1 AND ns = ?2 AND substr(key, 1, length(?3)) = ?3 ORDER BY seq",
            &[&agent, &ns, &prefix],
        )
    }

    /// Entries containing every word of `query` (FTS5), oldest write first.
    pub fn search_all(
        &self,
        agent: &str,
        ns: &str,
        query: &str,
    ) -> Result<Vec<LtmEntry>, HostError> {
        let Some(q) = fts_all(query) else {
            return Ok(Vec::new());
        };
        self.rows(
            "SELECT e.agent, e.key, e.value, e.seq, e.updated_ms, e.labels FROM entries_fts f
             JOIN entries e ON e.id = f.rowid
             WHERE entries_fts MATCH ?1 AND e.agent = ?2 AND e.ns = ?3 ORDER BY e.seq",
            &[&q, &agent, &ns],
        )
    }

    /// Entries containing any word of `query`, best (BM25) first, with scores.
    /// `agent = None`: every agent.
    pub fn search_ranked(
        &self,
        agent: Option<&str>,
        ns: &str,
        query: &str,
        limit: usize,
    ) -> Result<Vec<(LtmEntry, f64)>, HostError> {
        let Some(q) = fts_any(query) else {
            return Ok(Vec::new());
        };
        let c = self.conn();
        let mut st = c
            .prepare_cached(
                "SELECT e.agent, e.key, e.value, e.seq, e.updated_ms, bm25(entries_fts) AS score,
                        e.labels
                 FROM entries_fts f JOIN entries e ON e.id = f.rowid
                 WHERE entries_fts MATCH ?1 AND (?2 IS NULL OR e.agent = ?2) AND e.ns = ?3
                 ORDER BY score LIMIT ?4",
            )
            .map_err(|e| db_err("search", e))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = st
            .query_map(params![q, agent, ns, limit], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, f64>(5)?,
                    r.get::<_, String>(6)?,
                ))
            })
            .map_err(|e| db_err("search", e))?;
        let mut out = Vec::new();
        for row in rows {
            let (agent, key, value, seq, updated_ms, score, labels) =
                row.map_err(|e| db_err("search", e))?;
            let value = serde_json::from_str(&value).unwrap_or(Json::String(value));
            out.push((
                LtmEntry {
                    agent,
                    key,
                    value,
                    seq,
                    updated_ms,
                    labels: labels_of(&labels),
                },
                // bm25 is lower-is-better and negative; report higher-is-better.
                -score,
            ));
        }
        Ok(out)
    }

    pub fn remove(&self, agent: &str, ns: &str, key: &str) -> Result<bool, HostError> {
        let n = self
            .conn()
            .execute(
                "DELETE FROM entries WHERE agent = ?1 AND ns = ?2 AND key = ?3",
                params![agent, ns, key],
            )
            .map_err(|e| db_err("delete", e))?;
        Ok(n > 0)
    }

    /// Deletes a namespace (of one agent, or of all); returns the count.
    pub fn clear(&self, agent: Option<&str>, ns: &str) -> Result<usize, HostError> {
        self.conn()
            .execute(
                "DELETE FROM entries WHERE (?1 IS NULL OR agent = ?1) AND ns = ?2",
                params![agent, ns],
            )
            .map_err(|e| db_err("clear", e))
    }

    /// Deletes every namespace starting with `prefix` (swap spaces).
    pub fn clear_ns_prefix(&self, prefix: &str) -> Result<usize, HostError> {
        self.conn()
            .execute(
                "DELETE FROM entries WHERE substr(ns, 1, length(?1)) = ?1",
                params![prefix],
            )
            .map_err(|e| db_err("clear", e))
    }

    /// Agents with entries in `ns`, and their counts.
    pub fn agents(&self, ns: &str) -> Result<Vec<(String, i64)>, HostError> {
        let c = self.conn();
        let mut st = c
            .prepare_cached(
                "SELECT agent, COUNT(*) FROM entries WHERE ns = ?1 GROUP BY agent ORDER BY agent",
            )
            .map_err(|e| db_err("read", e))?;
        let rows = st
            .query_map(params![ns], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| db_err("read", e))?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(|e| db_err("read", e))
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<i64, HostError> {
        self.conn()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .optional()
            .map_err(|e| db_err("read", e))
            .map(|v| v.unwrap_or(0))
    }
}
