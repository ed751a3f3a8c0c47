//! Schedules in PostgreSQL (`store/schedule.rs`): stored once, fired by
//! whichever worker looks first. A due schedule's row is locked with
//! `FOR UPDATE SKIP LOCKED`, its ticks' runs inserted with `ON CONFLICT DO
//! NOTHING` on their ids, and its next tick moved on, in one transaction:
//! a worker killed half-way commits none of it, and no tick gets two runs.

use super::{PgStore, NOW_MS};
use crate::store::rows::JournalError;
use crate::store::schedule::{plan_ticks, tick_run_id, CronSchedule, NewSchedule, ScheduleInfo};
use sha2::{Digest, Sha256};

/// Schedules looked at per call, so one look stays short.
const DUE_PER_LOOK: i64 = 16;

impl PgStore {
    pub(super) fn add_schedule_pg(&self, s: &NewSchedule<'_>) -> Result<(), JournalError> {
        let sha = crate::store::hex(&Sha256::digest(s.run.artifact));
        self.with(|c| {
            c.execute(
                &format!(
                    "INSERT INTO schedules (id, cron, tz, program, artifact, artifact_sha256,
                     entry, args, next_ms, created_ms)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, {NOW_MS})"
                ),
                &[
                    &s.id,
                    &s.cron,
                    &s.tz,
                    &s.run.program,
                    &s.run.artifact,
                    &sha,
                    &s.run.entry,
                    &s.run.args,
                    &s.next_ms,
                ],
            )
        })?;
        Ok(())
    }

    pub(super) fn schedules_pg(&self) -> Result<Vec<ScheduleInfo>, JournalError> {
        let rows = self.with(|c| {
            c.query(
                "SELECT id, cron, tz, program, entry, next_ms, fired, skipped, last_run, created_ms
                 FROM schedules ORDER BY created_ms, id",
                &[],
            )
        })?;
        Ok(rows
            .iter()
            .map(|r| ScheduleInfo {
                id: r.get(0),
                cron: r.get(1),
                tz: r.get(2),
                program: r.get(3),
                entry: r.get(4),
                next_ms: r.get(5),
                fired: r.get(6),
                skipped: r.get(7),
                last_run: r.get(8),
                created_ms: r.get(9),
            })
            .collect())
    }

    pub(super) fn remove_schedule_pg(&self, id: &str) -> Result<bool, JournalError> {
        let n = self.with(|c| {
            let mut tx = c.transaction()?;
            let n = tx.execute("DELETE FROM schedules WHERE id = $1", &[&id])?;
            tx.execute("DELETE FROM run_webhooks WHERE run = $1", &[&id])?;
            tx.commit()?;
            Ok(n)
        })?;
        Ok(n > 0)
    }

    pub(super) fn fire_schedules_pg(&self) -> Result<Vec<String>, JournalError> {
        self.with(|c| {
            // Workers look four times a second and nothing is due almost
            // every time: one indexed round trip says so, without the
            // transaction's three (begin, lock, commit).
            let due_sql = format!("SELECT 1 FROM schedules WHERE next_ms <= {NOW_MS} LIMIT 1");
            if c.query_opt(&due_sql, &[])?.is_none() {
                return Ok(Vec::new());
            }
            let mut tx = c.transaction()?;
            let now: i64 = tx.query_one(&format!("SELECT {NOW_MS}"), &[])?.get(0);
            let due = tx.query(
                "SELECT id, cron, tz, next_ms, program, artifact, artifact_sha256, entry, args
                 FROM schedules WHERE next_ms <= $1
                 ORDER BY next_ms LIMIT $2 FOR UPDATE SKIP LOCKED",
                &[&now, &DUE_PER_LOOK],
            )?;
            let mut queued = Vec::new();
            for row in &due {
                let id: String = row.get(0);
                let next_ms: i64 = row.get(3);
                // A stored expression this binary cannot read (a newer
                // aisc wrote it) is left for one that can.
                let Ok(cron) = CronSchedule::parse(row.get(1), row.get(2)) else {
                    continue;
                };
                let plan = plan_ticks(&cron, next_ms, now);
                let mut last = None;
                for tick in &plan.fire {
                    let run = tick_run_id(&id, *tick);
                    let n = tx.execute(
                        "INSERT INTO runs (id, status, queued_ms, started_ms, program, artifact,
                         artifact_sha256, entry, args)
                         VALUES ($1, 'queued', $2, $2, $3, $4, $5, $6, $7)
                         ON CONFLICT (id) DO NOTHING",
                        &[
                            &run,
                            &now,
                            &row.get::<_, String>(4),
                            &row.get::<_, Vec<u8>>(5),
                            &row.get::<_, String>(6),
                            &row.get::<_, Option<String>>(7),
                            &row.get::<_, String>(8),
                        ],
                    )?;
                    if n > 0 {
                        super::webhook::copy_hooks(&mut tx, &id, &run)?;
                        queued.push(run.clone());
                    }
                    last = Some(run);
                }
                tx.execute(
                    "UPDATE schedules SET next_ms = $2, fired = fired + $3,
                     skipped = skipped + $4, last_run = COALESCE($5, last_run) WHERE id = $1",
                    &[
                        &id,
                        &plan.next_ms,
                        &i64::try_from(plan.fire.len()).unwrap_or(i64::MAX),
                        &plan.skipped,
                        &last,
                    ],
                )?;
            }
            tx.commit()?;
            Ok(queued)
        })
    }
}
