//! The agents' state besides LTM in the shared PostgreSQL store (schema
//! version 4): mailboxes of `communicate`, goals, beliefs and the episodic
//! log. The SQLite twins are in `crate::store::sqlite::agent`; the host is
//! given one store when it is built (`AamHost::use_store`).

use super::ltm::{db_err, PgLtm};
use super::NOW_MS;
use crate::host::HostError;
use crate::store::agent::{labels_of, labels_text, Filter, Received};
use serde_json::Value as Json;

fn encode(v: &Json) -> Result<String, HostError> {
    serde_json::to_string(v).map_err(|e| HostError::new("memory.encode", e.to_string()))
}

/// Text stored by this module is JSON; text written by hand reads as a string.
fn decode(text: String) -> Json {
    serde_json::from_str(&text).unwrap_or(Json::String(text))
}

fn received(r: &postgres::Row) -> Received {
    Received {
        from: r.get(1),
        protocol: r.get(2),
        body: decode(r.get(3)),
        time_ms: u64::try_from(r.get::<_, i64>(4)).unwrap_or(0),
        labels: labels_of(&r.get::<_, String>(5)),
    }
}

/// Mailboxes: one row per message, addressed to an agent by name.
impl PgLtm {
    pub fn send(&self, to: &str, m: &Received) -> Result<(), HostError> {
        let body = encode(&m.body)?;
        let ms = i64::try_from(m.time_ms).unwrap_or(i64::MAX);
        self.exec(
            "INSERT INTO aam_messages (agent, sender, protocol, body, sent_ms, labels)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &to,
                &m.from,
                &m.protocol,
                &body,
                &ms,
                &labels_text(&m.labels),
            ],
        )
        .map(|_| ())
    }

    /// The messages of `agent`, oldest first; `take` removes them in the
    /// same statement, so two hosts emptying one inbox each get a message
    /// at most once.
    pub fn inbox(&self, agent: &str, take: bool) -> Result<Vec<Received>, HostError> {
        let sql = if take {
            "DELETE FROM aam_messages WHERE agent = $1
             RETURNING id, sender, protocol, body, sent_ms, labels"
        } else {
            "SELECT id, sender, protocol, body, sent_ms, labels FROM aam_messages
             WHERE agent = $1 ORDER BY id"
        };
        let mut rows = self.rows(sql, &[&agent])?;
        // DELETE … RETURNING promises no order.
        rows.sort_by_key(|r| r.get::<_, i64>(0));
        Ok(rows.iter().map(received).collect())
    }
}

/// Goals: the list of one agent as one JSON row, changed under its row lock
/// (the host applies the same rules to it as to its in-process list).
impl PgLtm {
    pub fn goals(&self, agent: &str) -> Result<Json, HostError> {
        Ok(self
            .rows("SELECT goals FROM aam_goals WHERE agent = $1", &[&agent])?
            .first()
            .map_or(Json::Array(Vec::new()), |r| decode(r.get(0))))
    }

    /// Runs `f` on the agent's goal list (a JSON array) in one transaction
    /// holding the agent's row; stores what `f` leaves when it succeeds.
    pub fn update_goals<T>(
        &self,
        agent: &str,
        f: impl FnOnce(&mut Json) -> Result<T, HostError>,
    ) -> Result<T, HostError> {
        let mut c = self.pool.get().map_err(|e| db_err("connect", e))?;
        let mut tx = c.transaction().map_err(|e| db_err("begin", e))?;
        tx.execute(
            "INSERT INTO aam_goals (agent, goals) VALUES ($1, '[]') ON CONFLICT DO NOTHING",
            &[&agent],
        )
        .map_err(|e| db_err("goals", e))?;
        let text: String = tx
            .query_one(
                "SELECT goals FROM aam_goals WHERE agent = $1 FOR UPDATE",
                &[&agent],
            )
            .map_err(|e| db_err("goals", e))?
            .get(0);
        let mut goals = decode(text);
        if !goals.is_array() {
            goals = Json::Array(Vec::new());
        }
        let out = f(&mut goals)?;
        tx.execute(
            "UPDATE aam_goals SET goals = $2 WHERE agent = $1",
            &[&agent, &encode(&goals)?],
        )
        .map_err(|e| db_err("goals", e))?;
        tx.commit().map_err(|e| db_err("commit", e))?;
        Ok(out)
    }
}

/// Beliefs: one row per agent and belief.
impl PgLtm {
    pub fn belief(&self, agent: &str, name: &str) -> Result<Option<Json>, HostError> {
        Ok(self
            .rows(
                "SELECT value FROM aam_beliefs WHERE agent = $1 AND name = $2",
                &[&agent, &name],
            )?
            .first()
            .map(|r| decode(r.get(0))))
    }

    /// Stores a belief's initial value unless it has one; returns the value
    /// it has now.
    pub fn init_belief(&self, agent: &str, name: &str, value: &Json) -> Result<Json, HostError> {
        let text = encode(value)?;
        let rows = self.rows(
            &format!(
                "WITH ins AS (INSERT INTO aam_beliefs (agent, name, value, updated_ms)
                    VALUES ($1, $2, $3, {NOW_MS}) ON CONFLICT (agent, name) DO NOTHING
                    RETURNING value)
                 SELECT value FROM ins
                 UNION ALL SELECT value FROM aam_beliefs WHERE agent = $1 AND name = $2
                 LIMIT 1"
            ),
            &[&agent, &name, &text],
        )?;
        Ok(rows.first().map_or(Json::Null, |r| decode(r.get(0))))
    }

    /// Sets a belief after `check` accepted its current value, both under
    /// one lock per belief across the fleet.
    pub fn set_belief(
        &self,
        agent: &str,
        name: &str,
        value: &Json,
        check: impl FnOnce(Option<&Json>) -> Result<(), HostError>,
    ) -> Result<(), HostError> {
        let text = encode(value)?;
        let mut c = self.pool.get().map_err(|e| db_err("connect", e))?;
        let mut tx = c.transaction().map_err(|e| db_err("begin", e))?;
        // A row lock cannot cover a belief not stored yet: an advisory lock can.
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext('belief/' || $1 || '/' || $2))",
            &[&agent, &name],
        )
        .map_err(|e| db_err("lock", e))?;
        let old = tx
            .query_opt(
                "SELECT value FROM aam_beliefs WHERE agent = $1 AND name = $2",
                &[&agent, &name],
            )
            .map_err(|e| db_err("belief", e))?
            .map(|r| decode(r.get(0)));
        check(old.as_ref())?;
        tx.execute(
            &format!(
                "INSERT INTO aam_beliefs (agent, name, value, updated_ms) VALUES ($1, $2, $3, {NOW_MS})
                 ON CONFLICT (agent, name) DO UPDATE SET value = EXCLUDED.value,
                    updated_ms = EXCLUDED.updated_ms"
            ),
            &[&agent, &name, &text],
        )
        .map_err(|e| db_err("belief", e))?;
        tx.commit().map_err(|e| db_err("commit", e))
    }
}

/// The episodic log: the same rows as SQLite's `episodic` table.
impl PgLtm {
    pub fn episodic_append(&self, record: &Json) -> Result<(), HostError> {
        let field = |k: &str| record.get(k).and_then(Json::as_str).map(str::to_string);
        self.exec(
            "INSERT INTO episodic (run, agent, op, record) VALUES ($1, $2, $3, $4)",
            &[
                &field("run"),
                &field("agent"),
                &field("op"),
                &encode(record)?,
            ],
        )
        .map(|_| ())
    }

    pub fn episodic_select(&self, f: &Filter<'_>) -> Result<Vec<Json>, HostError> {
        Ok(self
            .rows(
                "SELECT record FROM episodic
                 WHERE ($1::text IS NULL OR agent = $1) AND ($2::text IS NULL OR run = $2)
                   AND ($3::bool IS NULL OR (op = 'note') = $3)
                 ORDER BY seq",
                &[&f.agent, &f.run, &f.notes],
            )?
            .into_iter()
            .map(|r| decode(r.get(0)))
            .collect())
    }

    pub fn episodic_runs(&self) -> Result<Vec<String>, HostError> {
        Ok(self
            .rows(
                "SELECT run FROM episodic WHERE run IS NOT NULL GROUP BY run ORDER BY MIN(seq)",
                &[],
            )?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }

    pub fn episodic_clear(&self) -> Result<usize, HostError> {
        let n = self.exec("DELETE FROM episodic", &[])?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }
}

/// Adds to the counters of the worker process of `owner` (in `tx`).
pub(super) fn count(
    tx: &mut postgres::Transaction<'_>,
    owner: &str,
    taken: i64,
    takeovers: i64,
    fenced: i64,
    handed_back: i64,
) -> Result<(), postgres::Error> {
    tx.execute(
        &format!(
            "INSERT INTO worker_stats (worker, runs_taken, takeovers, fenced, handed_back, seen_ms)
             VALUES ($1, $2, $3, $4, $5, {NOW_MS})
             ON CONFLICT (worker) DO UPDATE SET
                runs_taken = worker_stats.runs_taken + EXCLUDED.runs_taken,
                takeovers = worker_stats.takeovers + EXCLUDED.takeovers,
                fenced = worker_stats.fenced + EXCLUDED.fenced,
                handed_back = worker_stats.handed_back + EXCLUDED.handed_back,
                seen_ms = EXCLUDED.seen_ms"
        ),
        &[
            &crate::store::worker_of(owner),
            &taken,
            &takeovers,
            &fenced,
            &handed_back,
        ],
    )
    .map(|_| ())
}
