//! Threads in PostgreSQL (`store/thread.rs`, migration 11): the thread row
//! is locked (`FOR UPDATE`) for a state change and for numbering a new
//! run, so servers and workers of a fleet write one thread in turn.
//!
//! Turns across the fleet: a queued run on a thread is claimed by a worker
//! only when no run linked before it is queued or running
//! ([`TURN_CLAIMABLE`], part of the claim in `mod.rs`); a run executed by
//! a server itself waits for [`PgStore::thread_waits_for_pg`] to say none.

use super::{PgStore, NOW_MS};
use crate::store::priority::QueueOptions;
use crate::store::rows::JournalError;
use crate::store::thread::{
    labels_of, labels_text, not_found, object_of, NewState, ThreadInfo, EXISTS,
};
use crate::store::NewRun;
use postgres::GenericClient;
use serde_json::Value as Json;

/// The claim's condition on a queued run (`runs`): no run of its thread
/// linked before it is queued or running. Raw statuses: a running run
/// whose lease ran out is about to be taken over, so it still holds its
/// turn. Both lookups use `thread_runs`' keys (`run` unique, `(thread,
/// seq)` primary).
pub(super) const TURN_CLAIMABLE: &str = "NOT EXISTS (SELECT 1 FROM thread_runs me
    JOIN thread_runs e ON e.thread = me.thread AND e.seq < me.seq
    JOIN runs p ON p.id = e.run
    WHERE me.run = runs.id AND p.status IN ('queued', 'running'))";

const COLUMNS: &str = "id, created_ms, updated_ms, metadata, state, labels, version, n_runs";

fn info_of(r: &postgres::Row) -> ThreadInfo {
    ThreadInfo {
        id: r.get(0),
        created_ms: r.get(1),
        updated_ms: r.get(2),
        metadata: Json::Object(object_of(r.get(3))),
        state: object_of(r.get(4)),
        labels: labels_of(r.get(5)),
        version: r.get(6),
        runs: r.get(7),
    }
}

fn get(
    c: &mut impl GenericClient,
    id: &str,
    lock: bool,
) -> Result<Option<ThreadInfo>, postgres::Error> {
    let sql = format!(
        "SELECT {COLUMNS} FROM threads WHERE id = $1{}",
        if lock { " FOR UPDATE" } else { "" }
    );
    Ok(c.query_opt(&sql, &[&id])?.as_ref().map(info_of))
}

fn insert(c: &mut impl GenericClient, id: &str, metadata: &Json) -> Result<u64, postgres::Error> {
    c.execute(
        &format!(
            "INSERT INTO threads (id, created_ms, updated_ms, metadata, state, labels)
             VALUES ($1, {NOW_MS}, {NOW_MS}, $2, '{{}}', '{{}}') ON CONFLICT (id) DO NOTHING"
        ),
        &[&id, &metadata.to_string()],
    )
}

impl PgStore {
    pub(super) fn create_thread_pg(
        &self,
        id: &str,
        metadata: &Json,
    ) -> Result<ThreadInfo, JournalError> {
        let (n, info) = self.with(|c| {
            let n = insert(c, id, metadata)?;
            Ok((n, get(c, id, false)?))
        })?;
        if n == 0 {
            return Err(JournalError::new(
                EXISTS,
                format!("thread `{id}` exists already"),
            ));
        }
        info.ok_or_else(|| not_found(id))
    }

    pub(super) fn thread_pg(&self, id: &str) -> Result<Option<ThreadInfo>, JournalError> {
        self.with(|c| get(c, id, false))
    }

    pub(super) fn threads_pg(&self, limit: usize) -> Result<Vec<ThreadInfo>, JournalError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.with(|c| {
            c.query(
                &format!(
                    "SELECT {COLUMNS} FROM threads ORDER BY created_ms DESC, id DESC LIMIT $1"
                ),
                &[&limit],
            )
        })?;
        Ok(rows.iter().map(info_of).collect())
    }

    pub(super) fn update_thread_state_pg(
        &self,
        id: &str,
        change: &mut dyn FnMut(&ThreadInfo) -> Result<NewState, JournalError>,
    ) -> Result<Option<ThreadInfo>, JournalError> {
        let mut refused = None;
        let after = self.with(|c| {
            let mut tx = c.transaction()?;
            let Some(cur) = get(&mut tx, id, true)? else {
                return Ok(None);
            };
            let new = match change(&cur) {
                Ok(n) => n,
                Err(e) => {
                    // Dropping `tx` rolls back: nothing written.
                    refused = Some(e);
                    return Ok(None);
                }
            };
            tx.execute(
                &format!(
                    "UPDATE threads SET state = $2, labels = $3, version = version + 1,
                     updated_ms = {NOW_MS} WHERE id = $1"
                ),
                &[
                    &id,
                    &Json::Object(new.state).to_string(),
                    &labels_text(&new.labels),
                ],
            )?;
            let after = get(&mut tx, id, false)?;
            tx.commit()?;
            Ok(after)
        })?;
        match refused {
            Some(e) => Err(e),
            None => Ok(after),
        }
    }

    pub(super) fn delete_thread_pg(&self, id: &str) -> Result<bool, JournalError> {
        self.with(|c| {
            let mut tx = c.transaction()?;
            tx.execute("DELETE FROM thread_runs WHERE thread = $1", &[&id])?;
            let n = tx.execute("DELETE FROM threads WHERE id = $1", &[&id])?;
            tx.commit()?;
            Ok(n > 0)
        })
    }

    pub(super) fn link_thread_run_pg(
        &self,
        thread: &str,
        run: &str,
        create: bool,
    ) -> Result<i64, JournalError> {
        self.link_on_thread(thread, run, create, None)
    }

    pub(super) fn enqueue_on_thread_pg(
        &self,
        run: &NewRun<'_>,
        q: &QueueOptions,
        thread: &str,
        create: bool,
    ) -> Result<i64, JournalError> {
        self.link_on_thread(thread, run.id, create, Some((run, q)))
    }

    /// Gives `run` the thread's next number (creating the thread first
    /// when `create`), in one transaction with its queued row when
    /// `queued`.
    fn link_on_thread(
        &self,
        thread: &str,
        run: &str,
        create: bool,
        queued: Option<(&NewRun<'_>, &QueueOptions)>,
    ) -> Result<i64, JournalError> {
        let seq = self.with(|c| {
            let mut tx = c.transaction()?;
            if create {
                insert(&mut tx, thread, &Json::Object(Default::default()))?;
            }
            // The thread row's lock (taken by the update) orders the links.
            let row = tx.query_opt(
                &format!(
                    "UPDATE threads SET n_runs = n_runs + 1, updated_ms = {NOW_MS}
                     WHERE id = $1 RETURNING n_runs"
                ),
                &[&thread],
            )?;
            let Some(row) = row else {
                return Ok(None);
            };
            let seq: i64 = row.get(0);
            if let Some((new, q)) = queued {
                super::priority::insert_queued(&mut tx, new, q)?;
            }
            tx.execute(
                "INSERT INTO thread_runs (thread, seq, run) VALUES ($1, $2, $3)",
                &[&thread, &seq, &run],
            )?;
            tx.commit()?;
            Ok(Some(seq))
        })?;
        seq.ok_or_else(|| not_found(thread))
    }

    pub(super) fn thread_waits_for_pg(&self, run: &str) -> Result<Option<String>, JournalError> {
        let rows = self.with(|c| {
            c.query(
                "SELECT p.id, p.status, p.owner, p.lease_until FROM thread_runs me
                 JOIN thread_runs e ON e.thread = me.thread AND e.seq < me.seq
                 JOIN runs p ON p.id = e.run
                 WHERE me.run = $1 AND p.status IN ('queued', 'running')
                 ORDER BY e.seq",
                &[&run],
            )
        })?;
        Ok(rows.iter().find_map(|r| {
            let status: &str = r.get(1);
            let owner: Option<&str> = r.get(2);
            let lease: Option<i64> = r.get(3);
            // A run executed without a lease by a process of this host
            // that is gone (a killed `aisc serve` or `aisc run`) will not
            // end by itself: it no longer holds the thread (resuming it is
            // the operator's call). One under a lease is taken over.
            let dead = status == "running"
                && lease.is_none()
                && owner.and_then(super::owner_alive) == Some(false);
            (!dead).then(|| r.get::<_, String>(0))
        }))
    }

    pub(super) fn thread_runs_pg(&self, thread: &str) -> Result<Vec<(i64, String)>, JournalError> {
        let rows = self.with(|c| {
            c.query(
                "SELECT seq, run FROM thread_runs WHERE thread = $1 ORDER BY seq",
                &[&thread],
            )
        })?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    pub(super) fn thread_of_run_pg(
        &self,
        run: &str,
    ) -> Result<Option<(String, i64)>, JournalError> {
        let row = self.with(|c| {
            c.query_opt(
                "SELECT thread, seq FROM thread_runs WHERE run = $1",
                &[&run],
            )
        })?;
        Ok(row.map(|r| (r.get(0), r.get(1))))
    }
}
