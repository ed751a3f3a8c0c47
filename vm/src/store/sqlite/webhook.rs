//! The webhook outbox in SQLite (`crate::store::webhook`; the same three
//! tables as PostgreSQL, in `runs.db` from schema version 2, created when
//! a run first subscribes). [`outbox`] runs inside the group commit that
//! records a run's state.

use crate::store::rows::llm_op_names;
use crate::store::webhook::{
    plan, Attempt, AttemptInfo, Counts, DeliveryInfo, Due, Hook, Outcome, RunFacts,
};
use rusqlite::{params, Connection, OptionalExtension};

/// The tables (idempotent).
pub(super) const TABLES: &str = "CREATE TABLE IF NOT EXISTS run_webhooks (
        run TEXT NOT NULL,
        url TEXT NOT NULL,
        events TEXT NOT NULL,
        PRIMARY KEY (run, url)
     );
     CREATE TABLE IF NOT EXISTS webhook_deliveries (
        id TEXT PRIMARY KEY,
        run TEXT NOT NULL,
        url TEXT NOT NULL,
        event TEXT NOT NULL,
        body TEXT NOT NULL,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_ms INTEGER NOT NULL,
        owner TEXT,
        lease_until_ms INTEGER,
        created_ms INTEGER NOT NULL,
        ended_ms INTEGER,
        last_error TEXT
     );
     CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (status, next_ms);
     CREATE INDEX IF NOT EXISTS webhook_deliveries_by_run ON webhook_deliveries (run);
     CREATE TABLE IF NOT EXISTS webhook_attempts (
        delivery TEXT NOT NULL,
        n INTEGER NOT NULL,
        at_ms INTEGER NOT NULL,
        duration_ms INTEGER NOT NULL,
        http_status INTEGER,
        error TEXT,
        PRIMARY KEY (delivery, n)
     );";

/// Whether the tables exist (a journal where no run ever subscribed has
/// none: its layout and version stay as an older aisc wrote them).
fn present(c: &Connection) -> rusqlite::Result<bool> {
    c.query_row(
        "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'run_webhooks'",
        [],
        |r| r.get(0),
    )
}

/// The journal's schema version with these tables (`runs.rs` writes and
/// reads this version).
pub(super) const SCHEMA_VERSION: i64 = 2;

/// Creates the tables and stamps schema version 2 (idempotent).
fn ensure(c: &Connection) -> rusqlite::Result<()> {
    c.execute_batch(TABLES)?;
    c.pragma_update(None, "user_version", SCHEMA_VERSION)
}

/// Writes, in the transaction that just recorded run `run`'s state, one
/// delivery per subscription that wants that state.
pub(super) fn outbox(c: &Connection, run: &str, now: i64) -> rusqlite::Result<()> {
    if !present(c)? {
        return Ok(());
    }
    let hooks: Vec<Hook> = c
        .prepare_cached("SELECT url, events FROM run_webhooks WHERE run = ?1 ORDER BY url")?
        .query_map([run], |r| {
            Ok(Hook {
                url: r.get(0)?,
                events: r.get(1)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    if hooks.is_empty() {
        return Ok(());
    }
    type Row = (
        String,
        String,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<i64>,
    );
    let row: Option<Row> = c
        .query_row(
            "SELECT status, program, entry, result, error, ended_ms FROM runs WHERE id = ?1",
            [run],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            },
        )
        .optional()?;
    let Some((status, program, entry, result, error, ended)) = row else {
        return Ok(());
    };
    if !hooks.iter().any(|h| h.wants(&status)) {
        return Ok(());
    }
    let list = llm_op_names()
        .iter()
        .map(|o| format!("'{o}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let (calls, tokens): (i64, i64) = c.query_row(
        &format!(
            "SELECT COALESCE(SUM(op IN ({list})), 0), COALESCE(SUM(tokens), 0)
             FROM entries WHERE run = ?1 AND kind = 'done'"
        ),
        [run],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let mut seqs = std::collections::HashMap::new();
    {
        let mut st =
            c.prepare("SELECT url, COUNT(*) FROM webhook_deliveries WHERE run = ?1 GROUP BY url")?;
        for r in st.query_map([run], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))? {
            let (url, n) = r?;
            seqs.insert(url, n);
        }
    }
    let facts = RunFacts {
        run,
        program: &program,
        entry: entry.as_deref(),
        status: &status,
        result: result.as_deref(),
        error: error.as_deref(),
        llm_calls: calls,
        tokens,
        attempt: None,
        ended_ms: ended.unwrap_or(now),
    };
    for d in plan(&hooks, &facts, |url| seqs.get(url).copied().unwrap_or(0)) {
        c.execute(
            "INSERT OR IGNORE INTO webhook_deliveries (id, run, url, event, body, status, next_ms, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?6)",
            params![d.id, run, d.url, d.event, d.body, now],
        )?;
    }
    Ok(())
}

pub(super) fn add_webhooks(c: &Connection, subject: &str, hooks: &[Hook]) -> rusqlite::Result<()> {
    ensure(c)?;
    for h in hooks {
        c.execute(
            "INSERT INTO run_webhooks (run, url, events) VALUES (?1, ?2, ?3)
             ON CONFLICT (run, url) DO UPDATE SET events = excluded.events",
            params![subject, h.url, h.events],
        )?;
    }
    Ok(())
}

/// Claims due rows (the caller holds an immediate transaction).
pub(super) fn claim(
    c: &Connection,
    owner: &str,
    lease_ms: i64,
    limit: i64,
    now: i64,
) -> rusqlite::Result<Vec<Due>> {
    if !present(c)? {
        return Ok(Vec::new());
    }
    let due: Vec<Due> = c
        .prepare(
            "SELECT id, run, url, event, body, attempts FROM webhook_deliveries
             WHERE status = 'pending' AND next_ms <= ?1
             AND (lease_until_ms IS NULL OR lease_until_ms < ?1)
             ORDER BY next_ms, id LIMIT ?2",
        )?
        .query_map(params![now, limit], |r| {
            Ok(Due {
                id: r.get(0)?,
                run: r.get(1)?,
                url: r.get(2)?,
                event: r.get(3)?,
                body: r.get(4)?,
                attempts: r.get(5)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    for d in &due {
        c.execute(
            "UPDATE webhook_deliveries SET owner = ?2, lease_until_ms = ?3 WHERE id = ?1",
            params![d.id, owner, now + lease_ms],
        )?;
    }
    Ok(due)
}

/// Records an attempt under `owner`'s claim; `false` when the claim was lost.
pub(super) fn record(c: &Connection, owner: &str, a: &Attempt, now: i64) -> rusqlite::Result<bool> {
    if !present(c)? {
        return Ok(false);
    }
    let next = match a.outcome {
        Outcome::Retry { next_ms } => Some(next_ms),
        _ => None,
    };
    let status = a.outcome.status();
    let ended = (status != "pending").then_some(now);
    let n = c.execute(
        "UPDATE webhook_deliveries SET attempts = ?3, status = ?4, next_ms = COALESCE(?5, next_ms),
         owner = NULL, lease_until_ms = NULL, ended_ms = ?6, last_error = ?7
         WHERE id = ?1 AND owner = ?2 AND status = 'pending' AND attempts = ?3 - 1",
        params![a.delivery, owner, a.n, status, next, ended, a.error],
    )?;
    if n == 1 {
        c.execute(
            "INSERT OR IGNORE INTO webhook_attempts (delivery, n, at_ms, duration_ms, http_status, error)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![a.delivery, a.n, a.at_ms, a.duration_ms, a.http_status, a.error],
        )?;
    }
    Ok(n == 1)
}

pub(super) fn deliveries(c: &Connection, run: &str) -> rusqlite::Result<Vec<DeliveryInfo>> {
    if !present(c)? {
        return Ok(Vec::new());
    }
    let mut out: Vec<DeliveryInfo> = c
        .prepare(
            "SELECT id, url, event, status, created_ms, next_ms, ended_ms
             FROM webhook_deliveries WHERE run = ?1 ORDER BY created_ms, id",
        )?
        .query_map([run], |r| {
            Ok(DeliveryInfo {
                id: r.get(0)?,
                url: r.get(1)?,
                event: r.get(2)?,
                status: r.get(3)?,
                created_ms: r.get(4)?,
                next_ms: r.get(5)?,
                ended_ms: r.get(6)?,
                attempts: Vec::new(),
            })
        })?
        .collect::<Result<_, _>>()?;
    let mut st = c.prepare(
        "SELECT n, at_ms, duration_ms, http_status, error FROM webhook_attempts
         WHERE delivery = ?1 ORDER BY n",
    )?;
    for d in &mut out {
        d.attempts = st
            .query_map([&d.id], |a| {
                Ok(AttemptInfo {
                    n: a.get(0)?,
                    at_ms: a.get(1)?,
                    duration_ms: a.get(2)?,
                    http_status: a.get(3)?,
                    error: a.get(4)?,
                })
            })?
            .collect::<Result<_, _>>()?;
    }
    Ok(out)
}

/// Deletes at most `limit` ended deliveries (delivered or failed) that
/// ended before `ended_before_ms`, with their attempts; returns how many.
pub(super) fn prune(c: &Connection, ended_before_ms: i64, limit: i64) -> rusqlite::Result<i64> {
    if !present(c)? {
        return Ok(0);
    }
    // The same ordered set twice, in one transaction (the caller's).
    const SET: &str = "SELECT id FROM webhook_deliveries WHERE status <> 'pending'
        AND ended_ms < ?1 ORDER BY ended_ms, id LIMIT ?2";
    c.execute(
        &format!("DELETE FROM webhook_attempts WHERE delivery IN ({SET})"),
        params![ended_before_ms, limit],
    )?;
    let n = c.execute(
        &format!("DELETE FROM webhook_deliveries WHERE id IN ({SET})"),
        params![ended_before_ms, limit],
    )?;
    Ok(i64::try_from(n).unwrap_or(i64::MAX))
}

pub(super) fn counts(c: &Connection) -> rusqlite::Result<Counts> {
    if !present(c)? {
        return Ok(Counts::default());
    }
    let mut counts = Counts::default();
    let mut st = c.prepare(
        "SELECT status, COUNT(*), COALESCE(SUM(attempts), 0) FROM webhook_deliveries GROUP BY status",
    )?;
    for r in st.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
        ))
    })? {
        let (status, n, attempts) = r?;
        counts.add(&status, n);
        counts.attempts += attempts;
    }
    Ok(counts)
}
