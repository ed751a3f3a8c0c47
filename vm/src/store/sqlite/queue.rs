//! Named work queues (`enqueue` and `claim`, the reference's coordination
//! op): jobs in the memory database, taken first in, first out. A claim is
//! one transaction, so two runs sharing a memory directory never take the
//! same job. The PostgreSQL twin (docs/scale-out.md) shares them across a
//! fleet (`store::postgres::ltm`).

use super::memory::{db_err, SqliteLtm};
use crate::host::HostError;
use crate::store::agent::{labels_of, labels_text};
use rusqlite::{params, OptionalExtension};
use serde_json::{json, Value as Json};

fn now_ms() -> i64 {
    i64::try_from(ais_stdlib::time::unix_ms()).unwrap_or(i64::MAX)
}

impl SqliteLtm {
    /// Appends `job` to `queue`; `{queue, id, pending}` (jobs not claimed yet).
    pub fn enqueue(
        &self,
        queue: &str,
        job: &Json,
        by: &str,
        labels: &[String],
    ) -> Result<Json, HostError> {
        let text = serde_json::to_string(job)
            .map_err(|e| HostError::new("memory.encode", e.to_string()))?;
        let mut c = self.conn();
        let tx = c
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| db_err("enqueue", e))?;
        tx.execute(
            "INSERT INTO queue_jobs (queue, job, enqueued_by, enqueued_ms, labels)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![queue, text, by, now_ms(), labels_text(labels)],
        )
        .map_err(|e| db_err("enqueue", e))?;
        let id = tx.last_insert_rowid();
        let pending: i64 = tx
            .query_row(
                "SELECT COUNT(*) FROM queue_jobs WHERE queue = ?1 AND claimed_by IS NULL",
                params![queue],
                |r| r.get(0),
            )
            .map_err(|e| db_err("enqueue", e))?;
        tx.commit().map_err(|e| db_err("enqueue", e))?;
        Ok(json!({"queue": queue, "id": id, "pending": pending}))
    }

    /// Takes the oldest job of `queue` that is unclaimed or whose lease ran
    /// out, for `by`, leased for `lease_ms` (none: for good): `{queue, id,
    /// job}` and the job's labels, or `null` when there is none.
    pub fn claim(
        &self,
        queue: &str,
        by: &str,
        lease_ms: Option<u64>,
    ) -> Result<(Json, Vec<String>), HostError> {
        let now = now_ms();
        let until = lease_ms.map(|l| now.saturating_add(i64::try_from(l).unwrap_or(i64::MAX)));
        let mut c = self.conn();
        let tx = c
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| db_err("claim", e))?;
        let next: Option<(i64, String, String)> = tx
            .query_row(
                "SELECT id, job, labels FROM queue_jobs WHERE queue = ?1
                 AND (claimed_by IS NULL OR lease_until_ms <= ?2)
                 ORDER BY id LIMIT 1",
                params![queue, now],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(|e| db_err("claim", e))?;
        let Some((id, job, labels)) = next else {
            return Ok((Json::Null, Vec::new()));
        };
        tx.execute(
            "UPDATE queue_jobs SET claimed_by = ?1, claimed_ms = ?2, lease_until_ms = ?3
             WHERE id = ?4",
            params![by, now, until, id],
        )
        .map_err(|e| db_err("claim", e))?;
        tx.commit().map_err(|e| db_err("claim", e))?;
        let job = serde_json::from_str(&job).unwrap_or(Json::String(job));
        Ok((
            json!({"queue": queue, "id": id, "job": job}),
            labels_of(&labels),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_claimed_once_in_order() {
        let ltm = SqliteLtm::open(None).expect("open");
        assert_eq!(ltm.claim("q", "r1", None).expect("claim").0, Json::Null);
        let page = vec!["fetch".to_string()];
        ltm.enqueue("q", &json!("a"), "r0", &page).expect("enqueue");
        let second = ltm
            .enqueue("q", &json!({"n": 2}), "r0", &[])
            .expect("enqueue");
        assert_eq!(second["pending"], 2);
        ltm.enqueue("other", &json!("x"), "r0", &[])
            .expect("enqueue");
        // Each job comes back with its own labels.
        let (first, labels) = ltm.claim("q", "r1", None).expect("claim");
        assert_eq!((first["job"].clone(), labels), (json!("a"), page));
        let (second, labels) = ltm.claim("q", "r2", None).expect("claim");
        assert_eq!((second["job"].clone(), labels), (json!({"n": 2}), vec![]));
        assert_eq!(ltm.claim("q", "r3", None).expect("claim").0, Json::Null);
        assert_eq!(ltm.claim("other", "r3", None).expect("claim").0["job"], "x");
    }

    #[test]
    fn a_lease_that_ran_out_lets_another_claimer_take_the_job() {
        let ltm = SqliteLtm::open(None).expect("open");
        ltm.enqueue("q", &json!("a"), "r0", &[]).expect("enqueue");
        ltm.enqueue("q", &json!("b"), "r0", &[]).expect("enqueue");
        // Leased for 0 ms: runs out at once, so the next claim takes it again.
        let first = ltm.claim("q", "r1", Some(0)).expect("claim").0;
        assert_eq!(first["job"], "a");
        let again = ltm.claim("q", "r2", Some(600_000)).expect("claim").0;
        assert_eq!(again["job"], "a");
        // Leased for ten minutes: not taken again; the next job is.
        assert_eq!(ltm.claim("q", "r3", None).expect("claim").0["job"], "b");
        assert_eq!(ltm.claim("q", "r4", None).expect("claim").0, Json::Null);
    }
}
