//! Long-term memory in the shared PostgreSQL store: the same entries as
//! the SQLite LTM (`crate::store::sqlite`), searched with PostgreSQL's own text
//! search (a stored `tsvector` with a GIN index, `simple` configuration:
//! lower-cased words, no stemming, like FTS5's default tokenizer), ranked
//! with `ts_rank`.

use super::pool::Pool;
use crate::host::HostError;
use crate::store::agent::{labels_of, labels_text, text_of, LtmEntry};
use postgres::Row;
use serde_json::Value as Json;

pub(super) fn db_err(what: &str, e: postgres::Error) -> HostError {
    HostError::new(
        "memory.ltm",
        format!(
            "long-term memory (PostgreSQL): {what}: {}",
            super::describe(&e)
        ),
    )
}

pub struct PgLtm {
    pub(super) pool: Pool,
}

impl std::fmt::Debug for PgLtm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PgLtm")
    }
}

/// A `tsquery` of the words (letters and digits only, so no quoting
/// issue), joined by `op` (`&` or `|`); `None` without words.
fn tsquery(query: &str, op: &str) -> Option<String> {
    let ws = crate::store::agent::words(query);
    (!ws.is_empty()).then(|| ws.join(&format!(" {op} ")))
}

fn entry(r: &Row) -> LtmEntry {
    let value: String = r.get(2);
    LtmEntry {
        agent: r.get(0),
        key: r.get(1),
        // A value that is not JSON (written by hand) reads as text.
        value: serde_json::from_str(&value).unwrap_or(Json::String(value)),
        seq: r.get(3),
        updated_ms: r.get(4),
        labels: labels_of(&r.get::<_, String>(5)),
    }
}

const COLS: &str = "agent, key, value, seq, updated_ms, labels";

impl PgLtm {
    /// The process's `PgLtm` for `url` (connected and migrated once).
    pub fn shared(url: &str) -> Result<std::sync::Arc<PgLtm>, HostError> {
        type Cache = std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<PgLtm>>>;
        static CACHE: std::sync::OnceLock<Cache> = std::sync::OnceLock::new();
        let cache = CACHE.get_or_init(Cache::default);
        let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = map.get(url) {
            return Ok(p.clone());
        }
        let p = std::sync::Arc::new(PgLtm::connect(url)?);
        map.insert(url.to_string(), p.clone());
        Ok(p)
    }

    /// Connects (migrating the schema) to the store at `url`.
    pub fn connect(url: &str) -> Result<PgLtm, HostError> {
        let (config, location) =
            super::config(url).map_err(|e| HostError::new("memory.ltm", e.to_string()))?;
        let pool = Pool::new(config, 8);
        let mut c = pool
            .get()
            .map_err(|e| db_err(&format!("cannot connect to `{location}`"), e))?;
        super::schema::migrate(&mut c, &location)
            .map_err(|e| HostError::new("memory.schema", e.to_string()))?;
        drop(c);
        Ok(PgLtm { pool })
    }

    pub(super) fn rows(
        &self,
        sql: &str,
        p: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<Row>, HostError> {
        let mut c = self.pool.get().map_err(|e| db_err("connect", e))?;
        c.query(sql, p).map_err(|e| db_err("read", e))
    }

    pub(super) fn exec(
        &self,
        sql: &str,
        p: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<u64, HostError> {
        let mut c = self.pool.get().map_err(|e| db_err("connect", e))?;
        c.execute(sql, p).map_err(|e| db_err("write", e))
    }

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
        let mut c = self.pool.get().map_err(|e| db_err("connect", e))?;
        let mut tx = c.transaction().map_err(|e| db_err("begin", e))?;
        // One writer per (agent, namespace) at a time across the fleet, so
        // sequence numbers stay in write order.
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext($1 || '/' || $2))",
            &[&agent, &ns],
        )
        .map_err(|e| db_err("lock", e))?;
        let seq: i64 = match seq {
            Some(s) => s,
            None => tx
                .query_one(
                    "SELECT COALESCE(MAX(seq), 0) + 1 FROM ltm_entries WHERE agent = $1 AND ns = $2",
                    &[&agent, &ns],
                )
                .map_err(|e| db_err("write", e))?
                .get(0),
        };
        tx.execute(
            &format!(
                "INSERT INTO ltm_entries (agent, ns, key, value, body, seq, created_ms, updated_ms, labels)
                 VALUES ($1, $2, $3, $4, $5, $6, {now}, {now}, $7)
                 ON CONFLICT (agent, ns, key) DO UPDATE SET value = EXCLUDED.value,
                    body = EXCLUDED.body, seq = EXCLUDED.seq, updated_ms = EXCLUDED.updated_ms,
                    labels = EXCLUDED.labels",
                now = super::NOW_MS
            ),
            &[&agent, &ns, &key, &text, &body, &seq, &labels_text(labels)],
        )
        .map_err(|e| db_err("write", e))?;
        tx.commit().map_err(|e| db_err("commit", e))
    }

    pub fn get(&self, agent: &str, ns: &str, key: &str) -> Result<Option<LtmEntry>, HostError> {
        Ok(self
            .rows(
                &format!(
                    "SELECT {COLS} FROM ltm_entries WHERE agent = $1 AND ns = $2 AND key = $3"
                ),
                &[&agent, &ns, &key],
            )?
            .first()
            .map(entry))
    }

    pub fn all(&self, agent: &str, ns: &str) -> Result<Vec<LtmEntry>, HostError> {
        Ok(self
            .rows(
                &format!(
                    "SELECT {COLS} FROM ltm_entries WHERE agent = $1 AND ns = $2 ORDER BY seq"
                ),
                &[&agent, &ns],
            )?
            .iter()
            .map(entry)
            .collect())
    }

    pub fn prefix(&self, agent: &str, ns: &str, prefix: &str) -> Result<Vec<LtmEntry>, HostError> {
        Ok(self
            .rows(
                &format!(
                    "SELECT {COLS} FROM ltm_entries WHERE agent = $1 AND ns = $2
                     AND left(key, length($3)) = $3 ORDER BY seq"
                ),
                &[&agent, &ns, &prefix],
            )?
            .iter()
            .map(entry)
            .collect())
    }

    pub fn search_all(
        &self,
        agent: &str,
        ns: &str,
        query: &str,
    ) -> Result<Vec<LtmEntry>, HostError> {
        let Some(q) = tsquery(query, "&") else {
            return Ok(Vec::new());
        };
        Ok(self
            .rows(
                &format!(
                    "SELECT {COLS} FROM ltm_entries WHERE tsv @@ to_tsquery('simple', $1)
                     AND agent = $2 AND ns = $3 ORDER BY seq"
                ),
                &[&q, &agent, &ns],
            )?
            .iter()
            .map(entry)
            .collect())
    }

    pub fn search_ranked(
        &self,
        agent: Option<&str>,
        ns: &str,
        query: &str,
        limit: usize,
    ) -> Result<Vec<(LtmEntry, f64)>, HostError> {
        let Some(q) = tsquery(query, "|") else {
            return Ok(Vec::new());
        };
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Ok(self
            .rows(
                &format!(
                    "SELECT {COLS}, ts_rank(tsv, to_tsquery('simple', $1))::float8 AS score
                     FROM ltm_entries WHERE tsv @@ to_tsquery('simple', $1)
                     AND ($2::text IS NULL OR agent = $2) AND ns = $3
                     ORDER BY score DESC, seq LIMIT $4"
                ),
                &[&q, &agent, &ns, &limit],
            )?
            .iter()
            .map(|r| (entry(r), r.get::<_, f64>(6)))
            .collect())
    }

    pub fn remove(&self, agent: &str, ns: &str, key: &str) -> Result<bool, HostError> {
        Ok(self.exec(
            "DELETE FROM ltm_entries WHERE agent = $1 AND ns = $2 AND key = $3",
            &[&agent, &ns, &key],
        )? > 0)
    }

    pub fn clear(&self, agent: Option<&str>, ns: &str) -> Result<usize, HostError> {
        let n = self.exec(
            "DELETE FROM ltm_entries WHERE ($1::text IS NULL OR agent = $1) AND ns = $2",
            &[&agent, &ns],
        )?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    pub fn clear_ns_prefix(&self, prefix: &str) -> Result<usize, HostError> {
        let n = self.exec(
            "DELETE FROM ltm_entries WHERE left(ns, length($1)) = $1",
            &[&prefix],
        )?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    pub fn agents(&self, ns: &str) -> Result<Vec<(String, i64)>, HostError> {
        Ok(self
            .rows(
                "SELECT agent, COUNT(*) FROM ltm_entries WHERE ns = $1 GROUP BY agent ORDER BY agent",
                &[&ns],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
    }

    pub fn schema_version(&self) -> Result<i64, HostError> {
        let mut c = self.pool.get().map_err(|e| db_err("connect", e))?;
        super::schema::version(&mut c, "store")
            .map_err(|e| HostError::new("memory.ltm", e.to_string()))
    }
}

/// Named work queues in the shared store (`crate::store::sqlite::queue` is the
/// SQLite twin): a claim takes the oldest open job with `FOR UPDATE SKIP
/// LOCKED`, so workers of a fleet never take the same one.
impl PgLtm {
    pub fn enqueue(
        &self,
        queue: &str,
        job: &Json,
        by: &str,
        labels: &[String],
    ) -> Result<Json, HostError> {
        let text = serde_json::to_string(job)
            .map_err(|e| HostError::new("memory.encode", e.to_string()))?;
        let mut c = self.pool.get().map_err(|e| db_err("connect", e))?;
        let mut tx = c.transaction().map_err(|e| db_err("begin", e))?;
        let id: i64 = tx
            .query_one(
                &format!(
                    "INSERT INTO queue_jobs (queue, job, enqueued_by, enqueued_ms, labels)
                     VALUES ($1, $2, $3, {}, $4) RETURNING id",
                    super::NOW_MS
                ),
                &[&queue, &text, &by, &labels_text(labels)],
            )
            .map_err(|e| db_err("enqueue", e))?
            .get(0);
        let pending: i64 = tx
            .query_one(
                "SELECT COUNT(*) FROM queue_jobs WHERE queue = $1 AND claimed_by IS NULL",
                &[&queue],
            )
            .map_err(|e| db_err("enqueue", e))?
            .get(0);
        tx.commit().map_err(|e| db_err("commit", e))?;
        Ok(serde_json::json!({"queue": queue, "id": id, "pending": pending}))
    }

    /// Takes the oldest job of `queue` that is unclaimed or whose lease ran
    /// out, leased for `lease_ms` (none: for good).
    pub fn claim(
        &self,
        queue: &str,
        by: &str,
        lease_ms: Option<u64>,
    ) -> Result<(Json, Vec<String>), HostError> {
        let lease: Option<i64> = lease_ms.map(|l| i64::try_from(l).unwrap_or(i64::MAX));
        let row = self.rows(
            &format!(
                "UPDATE queue_jobs SET claimed_by = $2, claimed_ms = {now},
                        lease_until_ms = {now} + $3
                 WHERE id = (SELECT id FROM queue_jobs WHERE queue = $1
                             AND (claimed_by IS NULL OR lease_until_ms <= {now})
                             ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
                 RETURNING id, job, labels",
                now = super::NOW_MS
            ),
            &[&queue, &by, &lease],
        )?;
        let Some(r) = row.first() else {
            return Ok((Json::Null, Vec::new()));
        };
        let id: i64 = r.get(0);
        let job: String = r.get(1);
        let job = serde_json::from_str(&job).unwrap_or(Json::String(job));
        Ok((
            serde_json::json!({"queue": queue, "id": id, "job": job}),
            labels_of(&r.get::<_, String>(2)),
        ))
    }
}
