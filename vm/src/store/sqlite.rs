//! The embedded store: one SQLite database per memory directory
//! (`runs.db`, WAL, `synchronous = FULL`), versioned with `PRAGMA
//! user_version`. One process owns a run (checked by pid); fences are
//! accepted and ignored.

use super::{Entry, NewRun, RunRow, RunState, Store, StoreStatus};
use crate::journal::{JournalError, RunInfo, Status, Step, DB_FILE};
use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Mutex;

/// The schema version this binary writes and reads.
pub const SCHEMA_VERSION: i64 = 1;

#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
    path: String,
}

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

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn pid_alive(pid: i64) -> bool {
    if pid <= 0 {
        return false;
    }
    if pid == i64::from(std::process::id()) {
        return true;
    }
    let proc = Path::new("/proc");
    if !proc.exists() {
        // No way to tell: assume it still runs.
        return true;
    }
    proc.join(pid.to_string()).exists()
}

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
    // Added after schema 1 shipped: a nullable column, so a journal
    // written before it reads as "labels unknown".
    let has_labels: bool = conn.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info('entries') WHERE name = 'labels'",
        [],
        |r| r.get(0),
    )?;
    if !has_labels {
        conn.execute_batch("ALTER TABLE entries ADD COLUMN labels TEXT")?;
    }
    let v: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if v == 0 {
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    }
    Ok(())
}

const INFO_SQL: &str =
    "SELECT id, status, pid, started_ms, ended_ms, entry, program, error, resumes,
    (SELECT COUNT(*) FROM entries e WHERE e.run = runs.id AND e.kind = 'done') AS n_entries,
    (SELECT COUNT(*) FROM entries e WHERE e.run = runs.id AND e.kind = 'intent') AS n_doubt
    FROM runs";

fn info_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunInfo> {
    let status: String = r.get("status")?;
    let pid: i64 = r.get("pid")?;
    let status = match status.as_str() {
        "completed" => Status::Completed,
        "failed" => Status::Failed,
        "paused" => Status::Paused,
        _ if !pid_alive(pid) => Status::Interrupted,
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
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            path,
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> JournalError + '_ {
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
        self.conn().execute(
            "INSERT INTO runs (id, status, pid, started_ms, program, artifact, artifact_sha256, entry, args)
             VALUES (?1, 'running', ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                run.id,
                i64::from(std::process::id()),
                now_ms(),
                run.program,
                run.artifact,
                hex(&Sha256::digest(run.artifact)),
                run.entry,
                run.args
            ],
        )
        .map_err(self.err())?;
        Ok(0)
    }

    fn run_state(&self, id: &str) -> Result<Option<RunState>, JournalError> {
        let row: Option<(String, i64)> = self
            .conn()
            .query_row("SELECT status, pid FROM runs WHERE id = ?1", [id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
            .map_err(self.err())?;
        Ok(row.map(|(status, pid)| RunState {
            owned_elsewhere: (status == "running"
                && pid_alive(pid)
                && pid != i64::from(std::process::id()))
            .then(|| format!("pid {pid}")),
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
        self.conn()
            .execute(
                "UPDATE runs SET status = 'running', pid = ?2, ended_ms = NULL, error = NULL,
                 resumes = resumes + 1 WHERE id = ?1",
                params![id, i64::from(std::process::id())],
            )
            .map_err(self.err())?;
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
        let conn = self.conn();
        for e in entries {
            conn.execute(
                "INSERT OR REPLACE INTO entries (run, key, seq, kind, op, input_hash, value, tokens, labels)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![id, e.key, e.seq, e.kind, e.op, e.hash, e.value, e.tokens, e.labels],
            )
            .map_err(|e| {
                JournalError::new(
                    "journal.write",
                    format!("cannot write the run journal `{}`: {e}", self.path),
                )
            })?;
        }
        Ok(())
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
        self.conn()
            .execute(
                "UPDATE runs SET status = ?2, ended_ms = ?3, result = ?4, error = ?5 WHERE id = ?1",
                params![id, status, now_ms(), result, error],
            )
            .map_err(self.err())?;
        Ok(())
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
        })
    }
}
