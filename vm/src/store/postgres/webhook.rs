//! The webhook outbox in PostgreSQL (`crate::store::webhook`; tables
//! `run_webhooks`, `webhook_deliveries`, `webhook_attempts`, schema
//! version 10). [`outbox`] runs inside the transaction that records a
//! run's state; deliveries are claimed with `FOR UPDATE SKIP LOCKED` under
//! a lease, so any process on the store can deliver and none sends a row
//! another holds.

use super::{PgStore, NOW_MS};
use crate::store::rows::{llm_op_names, JournalError};
use crate::store::webhook::{
    plan, Attempt, AttemptInfo, Counts, DeliveryInfo, Due, Hook, Outcome, RunFacts,
};
use postgres::Transaction;

/// Writes, in transaction `tx` that just recorded run `run`'s state, one
/// delivery per subscription that wants that state. Nothing when the run
/// has no subscription (one indexed read).
pub(super) fn outbox(tx: &mut Transaction<'_>, run: &str) -> Result<(), postgres::Error> {
    let hooks: Vec<Hook> = tx
        .query(
            "SELECT url, events FROM run_webhooks WHERE run = $1 ORDER BY url",
            &[&run],
        )?
        .iter()
        .map(|r| Hook {
            url: r.get(0),
            events: r.get(1),
        })
        .collect();
    if hooks.is_empty() {
        return Ok(());
    }
    let Some(row) = tx.query_opt(
        &format!(
            "SELECT status, program, entry, result, error, attempt,
             COALESCE(ended_ms, {NOW_MS}) FROM runs WHERE id = $1"
        ),
        &[&run],
    )?
    else {
        return Ok(());
    };
    let (status, program, entry): (String, String, Option<String>) =
        (row.get(0), row.get(1), row.get(2));
    let (result, error): (Option<String>, Option<String>) = (row.get(3), row.get(4));
    if !hooks.iter().any(|h| h.wants(&status)) {
        return Ok(());
    }
    let ops = llm_op_names();
    let cost = tx.query_one(
        "SELECT COUNT(*) FILTER (WHERE op = ANY($2)), COALESCE(SUM(tokens), 0)::bigint
         FROM entries WHERE run = $1 AND kind = 'done'",
        &[&run, &ops],
    )?;
    let mut seqs = std::collections::HashMap::new();
    for r in tx.query(
        "SELECT url, COUNT(*) FROM webhook_deliveries WHERE run = $1 GROUP BY url",
        &[&run],
    )? {
        seqs.insert(r.get::<_, String>(0), r.get::<_, i64>(1));
    }
    let facts = RunFacts {
        run,
        program: &program,
        entry: entry.as_deref(),
        status: &status,
        result: result.as_deref(),
        error: error.as_deref(),
        llm_calls: cost.get(0),
        tokens: cost.get(1),
        attempt: row.get(5),
        ended_ms: row.get(6),
    };
    for d in plan(&hooks, &facts, |url| seqs.get(url).copied().unwrap_or(0)) {
        tx.execute(
            &format!(
                "INSERT INTO webhook_deliveries (id, run, url, event, body, status, next_ms, created_ms)
                 VALUES ($1, $2, $3, $4, $5, 'pending', {NOW_MS}, {NOW_MS})
                 ON CONFLICT (id) DO NOTHING"
            ),
            &[&d.id, &run, &d.url, &d.event, &d.body],
        )?;
    }
    Ok(())
}

/// Copies the subscriptions of `from` (a schedule, or a dead run requeued
/// with new inputs) to run `to`, in the transaction that queues it.
pub(super) fn copy_hooks(
    tx: &mut Transaction<'_>,
    from: &str,
    to: &str,
) -> Result<(), postgres::Error> {
    tx.execute(
        "INSERT INTO run_webhooks (run, url, events)
         SELECT $2, url, events FROM run_webhooks WHERE run = $1
         ON CONFLICT (run, url) DO NOTHING",
        &[&from, &to],
    )?;
    Ok(())
}

impl PgStore {
    pub(super) fn add_webhooks_pg(
        &self,
        subject: &str,
        hooks: &[Hook],
    ) -> Result<(), JournalError> {
        self.with(|c| {
            let mut tx = c.transaction()?;
            for h in hooks {
                tx.execute(
                    "INSERT INTO run_webhooks (run, url, events) VALUES ($1, $2, $3)
                     ON CONFLICT (run, url) DO UPDATE SET events = EXCLUDED.events",
                    &[&subject, &h.url, &h.events],
                )?;
            }
            tx.commit()
        })
    }

    pub(super) fn claim_deliveries_pg(
        &self,
        owner: &str,
        lease_ms: i64,
        limit: i64,
    ) -> Result<Vec<Due>, JournalError> {
        let rows = self.with(|c| {
            c.query(
                &format!(
                    "UPDATE webhook_deliveries SET owner = $1, lease_until_ms = {NOW_MS} + $2
                     WHERE id IN (SELECT id FROM webhook_deliveries
                        WHERE status = 'pending' AND next_ms <= {NOW_MS}
                        AND (lease_until_ms IS NULL OR lease_until_ms < {NOW_MS})
                        ORDER BY next_ms, id LIMIT $3 FOR UPDATE SKIP LOCKED)
                     RETURNING id, run, url, event, body, attempts"
                ),
                &[&owner, &lease_ms, &limit],
            )
        })?;
        Ok(rows
            .iter()
            .map(|r| Due {
                id: r.get(0),
                run: r.get(1),
                url: r.get(2),
                event: r.get(3),
                body: r.get(4),
                attempts: r.get(5),
            })
            .collect())
    }

    pub(super) fn record_attempt_pg(&self, owner: &str, a: &Attempt) -> Result<bool, JournalError> {
        let next = match a.outcome {
            Outcome::Retry { next_ms } => Some(next_ms),
            _ => None,
        };
        let status = a.outcome.status();
        self.with(|c| {
            let mut tx = c.transaction()?;
            // Under this process's claim only: when its lease ran out and
            // another process took the row, this attempt is not recorded
            // (the receiver may see the id twice; it dedupes on it).
            let n = tx.execute(
                &format!(
                    "UPDATE webhook_deliveries SET attempts = $3, status = $4,
                     next_ms = COALESCE($5, next_ms), owner = NULL, lease_until_ms = NULL,
                     ended_ms = CASE WHEN $4 = 'pending' THEN NULL ELSE {NOW_MS} END,
                     last_error = $6
                     WHERE id = $1 AND owner = $2 AND status = 'pending' AND attempts = $3 - 1"
                ),
                &[&a.delivery, &owner, &a.n, &status, &next, &a.error],
            )?;
            if n == 1 {
                tx.execute(
                    "INSERT INTO webhook_attempts (delivery, n, at_ms, duration_ms, http_status, error)
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
                    &[&a.delivery, &a.n, &a.at_ms, &a.duration_ms, &a.http_status, &a.error],
                )?;
            }
            tx.commit()?;
            Ok(n == 1)
        })
    }

    pub(super) fn deliveries_pg(&self, run: &str) -> Result<Vec<DeliveryInfo>, JournalError> {
        self.with(|c| {
            let rows = c.query(
                "SELECT id, url, event, status, created_ms, next_ms, ended_ms
                 FROM webhook_deliveries WHERE run = $1 ORDER BY created_ms, id",
                &[&run],
            )?;
            let mut out = Vec::with_capacity(rows.len());
            for r in &rows {
                let id: String = r.get(0);
                let attempts = c
                    .query(
                        "SELECT n, at_ms, duration_ms, http_status, error FROM webhook_attempts
                         WHERE delivery = $1 ORDER BY n",
                        &[&id],
                    )?
                    .iter()
                    .map(|a| AttemptInfo {
                        n: a.get(0),
                        at_ms: a.get(1),
                        duration_ms: a.get(2),
                        http_status: a.get(3),
                        error: a.get(4),
                    })
                    .collect();
                out.push(DeliveryInfo {
                    id,
                    url: r.get(1),
                    event: r.get(2),
                    status: r.get(3),
                    created_ms: r.get(4),
                    next_ms: r.get(5),
                    ended_ms: r.get(6),
                    attempts,
                });
            }
            Ok(out)
        })
    }

    pub(super) fn prune_deliveries_pg(
        &self,
        ended_before_ms: i64,
        limit: i64,
    ) -> Result<i64, JournalError> {
        self.with(|c| {
            let mut tx = c.transaction()?;
            let ids: Vec<String> = tx
                .query(
                    "DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries
                        WHERE status <> 'pending' AND ended_ms < $1 LIMIT $2)
                     RETURNING id",
                    &[&ended_before_ms, &limit],
                )?
                .iter()
                .map(|r| r.get(0))
                .collect();
            tx.execute(
                "DELETE FROM webhook_attempts WHERE delivery = ANY($1)",
                &[&ids],
            )?;
            tx.commit()?;
            Ok(i64::try_from(ids.len()).unwrap_or(i64::MAX))
        })
    }

    pub(super) fn delivery_counts_pg(&self) -> Result<Counts, JournalError> {
        self.with(|c| {
            let mut counts = Counts::default();
            for r in c.query(
                "SELECT status, COUNT(*), COALESCE(SUM(attempts), 0)::bigint
                 FROM webhook_deliveries GROUP BY status",
                &[],
            )? {
                counts.add(&r.get::<_, String>(0), r.get(1));
                counts.attempts += r.get::<_, i64>(2);
            }
            Ok(counts)
        })
    }
}
