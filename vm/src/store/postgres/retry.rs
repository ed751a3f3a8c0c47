//! Retries of failed runs and dead letters in PostgreSQL
//! (`crate::store::retry`; columns `attempt`, `max_attempts`,
//! `backoff_ms`, `retry_on`, `not_before_ms`, `dead`, `requeued_as` of
//! `runs`, schema version 7). Each change is one transaction on the run's
//! row, fenced: the failure of one attempt requeues the run once.

use super::{PgStore, NOW_MS};
use crate::store::retry::{AfterFailure, DeadRun, RetryPolicy};
use crate::store::JournalError;

/// The longest wait between attempts (a policy's doubling stops there).
const MAX_BACKOFF_MS: i64 = 3_600_000;

impl PgStore {
    pub(super) fn retry_after_failure(
        &self,
        id: &str,
        fence: i64,
        class: &str,
    ) -> Result<AfterFailure, JournalError> {
        self.with(|c| {
            let mut tx = c.transaction()?;
            let Some(row) = tx.query_opt(
                "SELECT attempt, max_attempts, COALESCE(backoff_ms, 0), COALESCE(retry_on, '')
                 FROM runs WHERE id = $1 AND fence = $2 AND status = 'failed' AND NOT dead
                 FOR UPDATE",
                &[&id, &fence],
            )?
            else {
                tx.commit()?;
                return Ok(AfterFailure::Stays);
            };
            let (attempt, max, backoff, on): (i32, Option<i32>, i64, String) =
                (row.get(0), row.get(1), row.get(2), row.get(3));
            let Some(max) = max else {
                tx.commit()?;
                return Ok(AfterFailure::Stays);
            };
            if attempt >= max || !RetryPolicy::retries(&on, class) {
                tx.execute("UPDATE runs SET dead = true WHERE id = $1", &[&id])?;
                tx.commit()?;
                return Ok(AfterFailure::Dead { attempts: attempt });
            }
            let shift = u32::try_from(attempt - 1).unwrap_or(0).min(30);
            let wait = backoff.saturating_mul(1 << shift).min(MAX_BACKOFF_MS);
            // The fence moves on, as for a hand-back: the next attempt
            // replays the journal (completed calls are not repeated).
            tx.execute(
                &format!(
                    "UPDATE runs SET status = 'queued', owner = NULL, lease_until = NULL,
                     fence = fence + 1, attempt = attempt + 1, ended_ms = NULL,
                     not_before_ms = {NOW_MS} + $2 WHERE id = $1"
                ),
                &[&id, &wait],
            )?;
            tx.commit()?;
            Ok(AfterFailure::Requeued {
                attempt: attempt + 1,
                of: max,
                in_ms: wait,
            })
        })
    }

    pub(super) fn dead(&self) -> Result<Vec<DeadRun>, JournalError> {
        self.with(|c| {
            let rows = c.query(
                "SELECT id, program, attempt, COALESCE(error, ''), ended_ms, concurrency_key
                 FROM runs WHERE dead AND status = 'failed' ORDER BY ended_ms, id",
                &[],
            )?;
            Ok(rows
                .iter()
                .map(|r| DeadRun {
                    id: r.get(0),
                    program: r.get(1),
                    attempts: r.get(2),
                    reason: r.get(3),
                    ended_ms: r.get(4),
                    key: r.get(5),
                })
                .collect())
        })
    }

    pub(super) fn requeue_dead(
        &self,
        id: &str,
        args: Option<&str>,
        new_id: &str,
    ) -> Result<bool, JournalError> {
        self.with(|c| {
            let mut tx = c.transaction()?;
            let dead = tx
                .query_opt(
                    "SELECT 1 FROM runs WHERE id = $1 AND dead AND status = 'failed' FOR UPDATE",
                    &[&id],
                )?
                .is_some();
            if !dead {
                tx.commit()?;
                return Ok(false);
            }
            match args {
                // The run itself, journal kept, with its attempts anew.
                None => {
                    tx.execute(
                        "UPDATE runs SET status = 'queued', dead = false, attempt = 1,
                         not_before_ms = NULL, owner = NULL, lease_until = NULL,
                         fence = fence + 1, ended_ms = NULL WHERE id = $1",
                        &[&id],
                    )?;
                }
                // A new run with the edited inputs and the same program,
                // queue options and policy; the dead one names it.
                Some(args) => {
                    tx.execute(
                        &format!(
                            "INSERT INTO runs (id, status, owner, queued_ms, started_ms, program,
                             artifact, artifact_sha256, entry, args, priority, concurrency_key,
                             key_limit, max_attempts, backoff_ms, retry_on)
                             SELECT $2, 'queued', NULL, {NOW_MS}, {NOW_MS}, program, artifact,
                             artifact_sha256, entry, $3, priority, concurrency_key, key_limit,
                             max_attempts, backoff_ms, retry_on FROM runs WHERE id = $1"
                        ),
                        &[&id, &new_id, &args],
                    )?;
                    // Its webhooks too.
                    super::webhook::copy_hooks(&mut tx, id, new_id)?;
                    tx.execute(
                        "UPDATE runs SET dead = false, requeued_as = $2 WHERE id = $1",
                        &[&id, &new_id],
                    )?;
                }
            }
            tx.commit()?;
            Ok(true)
        })
    }
}
