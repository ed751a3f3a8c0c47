//! Priorities and concurrency keys of queued runs in PostgreSQL
//! (`crate::store::priority`; columns `priority`, `concurrency_key`,
//! `key_limit` of `runs`, schema version 7). The claim's order and key
//! check are in [`super::PgStore`]'s `claim`; here the queueing and the
//! view.

use super::{PgStore, NOW_MS};
use crate::store::priority::{KeyLoad, QueueOptions, QueueView};
use crate::store::{JournalError, NewRun};
use sha2::{Digest, Sha256};

/// The claim's condition on a queued run: its key has fewer than its
/// limit running (checked again under the key's lock, see [`key_full`]).
pub(super) const UNDER_KEY_LIMIT: &str = "(runs.key_limit IS NULL OR runs.concurrency_key IS NULL
    OR (SELECT COUNT(*) FROM runs k WHERE k.concurrency_key = runs.concurrency_key
        AND k.status = 'running') < runs.key_limit)";

/// Whether key `key` has `limit` runs running, counted under a
/// transaction lock of the key: two workers claiming runs of one key
/// count one after the other, so the limit holds across the fleet.
pub(super) fn key_full(
    tx: &mut postgres::Transaction<'_>,
    key: &str,
    limit: i32,
) -> Result<bool, postgres::Error> {
    tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&key])?;
    let running: i64 = tx
        .query_one(
            "SELECT COUNT(*) FROM runs WHERE concurrency_key = $1 AND status = 'running'",
            &[&key],
        )?
        .get(0);
    Ok(running >= i64::from(limit))
}

/// Inserts `run` as queued with its priority and key in one statement (a
/// worker never sees it without them); on `c`, so a caller can put it in
/// a transaction (`threads.rs`).
pub(super) fn insert_queued(
    c: &mut impl postgres::GenericClient,
    run: &NewRun<'_>,
    q: &QueueOptions,
) -> Result<u64, postgres::Error> {
    let sha = crate::store::hex(&Sha256::digest(run.artifact));
    c.execute(
        &format!(
            "INSERT INTO runs (id, status, owner, queued_ms, started_ms, program, artifact,
             artifact_sha256, entry, args, priority, concurrency_key, key_limit,
             max_attempts, backoff_ms, retry_on)
             VALUES ($1, 'queued', NULL, {NOW_MS}, {NOW_MS}, $2, $3, $4, $5, $6, $7, $8, $9,
             $10, $11, $12)"
        ),
        &[
            &run.id,
            &run.program,
            &run.artifact,
            &sha,
            &run.entry,
            &run.args,
            &q.priority,
            &q.key,
            &q.key_limit,
            &q.retry.as_ref().map(|r| r.attempts),
            &q.retry.as_ref().map(|r| r.backoff_ms),
            &q.retry.as_ref().map(|r| r.on.join(",")),
        ],
    )
}

impl PgStore {
    /// Queues `run` with its priority and key.
    pub(super) fn enqueue_keyed(
        &self,
        run: &NewRun<'_>,
        q: &QueueOptions,
    ) -> Result<(), JournalError> {
        self.with(|c| insert_queued(c, run, q))?;
        Ok(())
    }

    pub(super) fn view(&self) -> Result<QueueView, JournalError> {
        self.with(|c| {
            let mut v = QueueView::default();
            for r in c.query(
                "SELECT id, priority, concurrency_key FROM runs
                 WHERE status IN ('queued', 'running')
                 AND (priority <> 0 OR concurrency_key IS NOT NULL)",
                &[],
            )? {
                v.runs.insert(r.get(0), (r.get(1), r.get(2)));
            }
            for r in c.query(
                "SELECT concurrency_key, COUNT(*) FILTER (WHERE status = 'queued'),
                 COUNT(*) FILTER (WHERE status = 'running'), MIN(key_limit)::bigint FROM runs
                 WHERE concurrency_key IS NOT NULL AND status IN ('queued', 'running')
                 GROUP BY concurrency_key",
                &[],
            )? {
                v.keys.insert(
                    r.get(0),
                    KeyLoad {
                        queued: r.get(1),
                        running: r.get(2),
                        limit: r.get(3),
                    },
                );
            }
            Ok(v)
        })
    }
}
