//! Threads in the memory directory's `runs.db` (`store/thread.rs`). A state
//! change is a read-modify-write in one `BEGIN IMMEDIATE` transaction, so
//! two processes on the same directory (a server and `aisc run`) cannot
//! lose each other's writes. The tables are made by the first thread, so
//! the journal of a directory that never had one keeps its layout.

use super::runs::{now_ms, SqliteStore};
use crate::store::rows::JournalError;
use crate::store::thread::{
    labels_of, labels_text, not_found, object_of, NewState, ThreadInfo, EXISTS,
};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde_json::Value as Json;

/// Makes the tables if missing (by whatever makes a thread).
fn init(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS threads (
            id TEXT PRIMARY KEY,
            created_ms INTEGER NOT NULL,
            updated_ms INTEGER NOT NULL,
            metadata TEXT NOT NULL,
            state TEXT NOT NULL,
            labels TEXT NOT NULL,
            version INTEGER NOT NULL DEFAULT 0,
            n_runs INTEGER NOT NULL DEFAULT 0
         );
         CREATE TABLE IF NOT EXISTS thread_runs (
            thread TEXT NOT NULL,
            seq INTEGER NOT NULL,
            run TEXT NOT NULL UNIQUE,
            PRIMARY KEY (thread, seq)
         );",
    )
}

/// Has a thread ever been made here? (Reads of a journal without the
/// tables find nothing.)
fn has_tables(c: &Connection) -> rusqlite::Result<bool> {
    c.query_row(
        "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'thread_runs'",
        [],
        |r| r.get(0),
    )
}

const COLUMNS: &str = "id, created_ms, updated_ms, metadata, state, labels, version, n_runs";

fn info_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<ThreadInfo> {
    let metadata: String = r.get(3)?;
    let state: String = r.get(4)?;
    let labels: String = r.get(5)?;
    Ok(ThreadInfo {
        id: r.get(0)?,
        created_ms: r.get(1)?,
        updated_ms: r.get(2)?,
        metadata: Json::Object(object_of(&metadata)),
        state: object_of(&state),
        labels: labels_of(&labels),
        version: r.get(6)?,
        runs: r.get(7)?,
    })
}

fn get(c: &Connection, id: &str) -> rusqlite::Result<Option<ThreadInfo>> {
    if !has_tables(c)? {
        return Ok(None);
    }
    c.query_row(
        &format!("SELECT {COLUMNS} FROM threads WHERE id = ?1"),
        [id],
        info_of,
    )
    .optional()
}

fn insert(c: &Connection, id: &str, metadata: &Json) -> rusqlite::Result<usize> {
    let now = now_ms();
    c.execute(
        "INSERT INTO threads (id, created_ms, updated_ms, metadata, state, labels)
         VALUES (?1, ?2, ?2, ?3, '{}', '{}') ON CONFLICT (id) DO NOTHING",
        params![id, now, metadata.to_string()],
    )
}

impl SqliteStore {
    pub(crate) fn create_thread_sqlite(
        &self,
        id: &str,
        metadata: &Json,
    ) -> Result<ThreadInfo, JournalError> {
        let conn = self.conn();
        init(&conn).map_err(self.err())?;
        let n = insert(&conn, id, metadata).map_err(self.err())?;
        if n == 0 {
            return Err(JournalError::new(
                EXISTS,
                format!("thread `{id}` exists already"),
            ));
        }
        get(&conn, id)
            .map_err(self.err())?
            .ok_or_else(|| not_found(id))
    }

    pub(crate) fn thread_sqlite(&self, id: &str) -> Result<Option<ThreadInfo>, JournalError> {
        get(&self.conn(), id).map_err(self.err())
    }

    pub(crate) fn threads_sqlite(&self, limit: usize) -> Result<Vec<ThreadInfo>, JournalError> {
        let conn = self.conn();
        if !has_tables(&conn).map_err(self.err())? {
            return Ok(Vec::new());
        }
        let mut st = conn
            .prepare(&format!(
                "SELECT {COLUMNS} FROM threads ORDER BY created_ms DESC, id DESC LIMIT ?1"
            ))
            .map_err(self.err())?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = st
            .query_map([limit], info_of)
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(self.err())?;
        Ok(rows)
    }

    pub(crate) fn update_thread_state_sqlite(
        &self,
        id: &str,
        change: &mut dyn FnMut(&ThreadInfo) -> Result<NewState, JournalError>,
    ) -> Result<Option<ThreadInfo>, JournalError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.err())?;
        let Some(cur) = get(&tx, id).map_err(self.err())? else {
            return Ok(None);
        };
        // An error of `change` drops `tx`: rolled back, nothing written.
        let new: NewState = change(&cur)?;
        tx.execute(
            "UPDATE threads SET state = ?2, labels = ?3, version = version + 1, updated_ms = ?4
             WHERE id = ?1",
            params![
                id,
                Json::Object(new.state).to_string(),
                labels_text(&new.labels),
                now_ms()
            ],
        )
        .map_err(self.err())?;
        let after = get(&tx, id).map_err(self.err())?;
        tx.commit().map_err(self.err())?;
        Ok(after)
    }

    pub(crate) fn delete_thread_sqlite(&self, id: &str) -> Result<bool, JournalError> {
        let mut conn = self.conn();
        if !has_tables(&conn).map_err(self.err())? {
            return Ok(false);
        }
        let tx = conn.transaction().map_err(self.err())?;
        tx.execute("DELETE FROM thread_runs WHERE thread = ?1", [id])
            .map_err(self.err())?;
        let n = tx
            .execute("DELETE FROM threads WHERE id = ?1", [id])
            .map_err(self.err())?;
        tx.commit().map_err(self.err())?;
        Ok(n > 0)
    }

    pub(crate) fn link_thread_run_sqlite(
        &self,
        thread: &str,
        run: &str,
        create: bool,
    ) -> Result<i64, JournalError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.err())?;
        init(&tx).map_err(self.err())?;
        if create {
            insert(&tx, thread, &Json::Object(Default::default())).map_err(self.err())?;
        }
        let n = tx
            .execute(
                "UPDATE threads SET n_runs = n_runs + 1, updated_ms = ?2 WHERE id = ?1",
                params![thread, now_ms()],
            )
            .map_err(self.err())?;
        if n == 0 {
            return Err(not_found(thread));
        }
        let seq: i64 = tx
            .query_row("SELECT n_runs FROM threads WHERE id = ?1", [thread], |r| {
                r.get(0)
            })
            .map_err(self.err())?;
        tx.execute(
            "INSERT INTO thread_runs (thread, seq, run) VALUES (?1, ?2, ?3)",
            params![thread, seq, run],
        )
        .map_err(self.err())?;
        tx.commit().map_err(self.err())?;
        Ok(seq)
    }

    pub(crate) fn thread_runs_sqlite(
        &self,
        thread: &str,
    ) -> Result<Vec<(i64, String)>, JournalError> {
        let conn = self.conn();
        if !has_tables(&conn).map_err(self.err())? {
            return Ok(Vec::new());
        }
        let mut st = conn
            .prepare("SELECT seq, run FROM thread_runs WHERE thread = ?1 ORDER BY seq")
            .map_err(self.err())?;
        let rows = st
            .query_map([thread], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(self.err())?;
        Ok(rows)
    }

    /// The first run of `run`'s thread linked before it that is still
    /// queued or running, by the run rows' derived status (a run whose
    /// process is gone is `interrupted`: it no longer holds the thread).
    pub(crate) fn thread_waits_for_sqlite(
        &self,
        run: &str,
    ) -> Result<Option<String>, JournalError> {
        let earlier: Vec<String> = {
            let conn = self.conn();
            if !has_tables(&conn).map_err(self.err())? {
                return Ok(None);
            }
            let mut st = conn
                .prepare(
                    "SELECT p.id FROM thread_runs me
                     JOIN thread_runs e ON e.thread = me.thread AND e.seq < me.seq
                     JOIN runs p ON p.id = e.run
                     WHERE me.run = ?1 AND p.status IN ('queued', 'running')
                     ORDER BY e.seq",
                )
                .map_err(self.err())?;
            let rows = st
                .query_map([run], |r| r.get(0))
                .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                .map_err(self.err())?;
            rows
        };
        for id in earlier {
            let row = crate::store::Store::run_row(self, &id)?;
            if row.is_some_and(|r| {
                matches!(
                    r.info.status,
                    crate::store::Status::Queued | crate::store::Status::Running
                )
            }) {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    pub(crate) fn thread_of_run_sqlite(
        &self,
        run: &str,
    ) -> Result<Option<(String, i64)>, JournalError> {
        let conn = self.conn();
        if !has_tables(&conn).map_err(self.err())? {
            return Ok(None);
        }
        conn.query_row(
            "SELECT thread, seq FROM thread_runs WHERE run = ?1",
            [run],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(self.err())
    }
}
