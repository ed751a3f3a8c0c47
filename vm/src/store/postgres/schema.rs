//! The PostgreSQL schema, as numbered migrations recorded in
//! `schema_version`. A database whose version is newer than this binary's
//! is refused (an older binary must not write tables it does not know).

use crate::store::rows::JournalError;
use postgres::Client;

/// Migration `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: the run journal and the run queue.
    "CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        status TEXT NOT NULL,
        owner TEXT,
        lease_until BIGINT,
        fence BIGINT NOT NULL DEFAULT 0,
        queued_ms BIGINT NOT NULL,
        started_ms BIGINT NOT NULL,
        ended_ms BIGINT,
        program TEXT NOT NULL,
        artifact BYTEA NOT NULL,
        artifact_sha256 TEXT NOT NULL,
        entry TEXT,
        args TEXT NOT NULL,
        result TEXT,
        error TEXT,
        resumes BIGINT NOT NULL DEFAULT 0,
        takeovers BIGINT NOT NULL DEFAULT 0
     );
     CREATE INDEX runs_claimable ON runs (started_ms, id)
        WHERE status IN ('queued', 'running');
     CREATE TABLE entries (
        run TEXT NOT NULL,
        key TEXT NOT NULL,
        seq BIGINT NOT NULL,
        kind TEXT NOT NULL,
        op TEXT NOT NULL,
        input_hash TEXT NOT NULL,
        value TEXT,
        tokens BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (run, key)
     );",
    // 2: long-term memory with PostgreSQL text search.
    "CREATE TABLE ltm_entries (
        id BIGSERIAL PRIMARY KEY,
        agent TEXT NOT NULL,
        ns TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        body TEXT NOT NULL,
        seq BIGINT NOT NULL,
        created_ms BIGINT NOT NULL,
        updated_ms BIGINT NOT NULL,
        tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', key || ' ' || body)) STORED,
        UNIQUE (agent, ns, key)
     );
     CREATE INDEX ltm_entries_tsv ON ltm_entries USING GIN (tsv);
     CREATE INDEX ltm_entries_by_seq ON ltm_entries (agent, ns, seq);",
    // 3: named work queues (`enqueue`/`claim`), shared by the fleet.
    "CREATE TABLE queue_jobs (
        id BIGSERIAL PRIMARY KEY,
        queue TEXT NOT NULL,
        job TEXT NOT NULL,
        enqueued_by TEXT NOT NULL,
        enqueued_ms BIGINT NOT NULL,
        claimed_by TEXT,
        claimed_ms BIGINT
     );
     CREATE INDEX queue_jobs_open ON queue_jobs (queue, id) WHERE claimed_by IS NULL;",
    // 4: the rest of the agents' state (mailboxes, goals, beliefs, the
    // episodic log) and the workers' counters for metrics.
    "CREATE TABLE aam_messages (
        id BIGSERIAL PRIMARY KEY,
        agent TEXT NOT NULL,
        sender TEXT NOT NULL,
        protocol TEXT NOT NULL,
        body TEXT NOT NULL,
        sent_ms BIGINT NOT NULL
     );
     CREATE INDEX aam_messages_by_agent ON aam_messages (agent, id);
     CREATE TABLE aam_goals (
        agent TEXT PRIMARY KEY,
        goals TEXT NOT NULL
     );
     CREATE TABLE aam_beliefs (
        agent TEXT NOT NULL,
        name TEXT NOT NULL,
        value TEXT NOT NULL,
        updated_ms BIGINT NOT NULL,
        PRIMARY KEY (agent, name)
     );
     CREATE TABLE episodic (
        seq BIGSERIAL PRIMARY KEY,
        run TEXT,
        agent TEXT,
        op TEXT,
        record TEXT NOT NULL
     );
     CREATE INDEX episodic_by_agent ON episodic (agent, op, seq);
     CREATE INDEX episodic_by_run ON episodic (run, seq);
     CREATE TABLE worker_stats (
        worker TEXT PRIMARY KEY,
        runs_taken BIGINT NOT NULL DEFAULT 0,
        takeovers BIGINT NOT NULL DEFAULT 0,
        fenced BIGINT NOT NULL DEFAULT 0,
        handed_back BIGINT NOT NULL DEFAULT 0,
        seen_ms BIGINT NOT NULL
     );",
    // 5: each journal entry's information-flow label (source names, JSON);
    // NULL in entries written before: recomputed on resume.
    "ALTER TABLE entries ADD COLUMN IF NOT EXISTS labels TEXT;",
    // 6: each stored value's information-flow labels (source names, JSON):
    // memory entries, queued jobs, messages (docs/security.md).
    "ALTER TABLE ltm_entries ADD COLUMN IF NOT EXISTS labels TEXT NOT NULL DEFAULT '[]';
     ALTER TABLE queue_jobs ADD COLUMN IF NOT EXISTS labels TEXT NOT NULL DEFAULT '[]';
     ALTER TABLE aam_messages ADD COLUMN IF NOT EXISTS labels TEXT NOT NULL DEFAULT '[]';",
    // 7: limits across the fleet (`store::limits`): calls in flight to a
    // backend (one row per call, expiring unless its process renews it),
    // the backend's pause (`Retry-After`) and its per-minute window; and
    // queued runs' priority and concurrency key (at most `key_limit` runs
    // of one key at once); retry policies of failed runs and dead letters
    // (`store::retry`).
    "CREATE TABLE backend_calls (
        token TEXT PRIMARY KEY,
        backend TEXT NOT NULL,
        owner TEXT NOT NULL,
        until_ms BIGINT NOT NULL
     );
     CREATE INDEX backend_calls_by_backend ON backend_calls (backend, until_ms);
     CREATE INDEX backend_calls_by_owner ON backend_calls (owner);
     CREATE TABLE backend_limits (
        backend TEXT PRIMARY KEY,
        paused_until_ms BIGINT NOT NULL DEFAULT 0,
        window_ms BIGINT NOT NULL DEFAULT 0,
        requests BIGINT NOT NULL DEFAULT 0,
        tokens BIGINT NOT NULL DEFAULT 0,
        peak BIGINT NOT NULL DEFAULT 0,
        waits BIGINT NOT NULL DEFAULT 0
     );
     ALTER TABLE runs ADD COLUMN IF NOT EXISTS priority INT NOT NULL DEFAULT 0;
     ALTER TABLE runs ADD COLUMN IF NOT EXISTS concurrency_key TEXT;
     ALTER TABLE runs ADD COLUMN IF NOT EXISTS key_limit INT;
     CREATE INDEX runs_by_key ON runs (concurrency_key, status);
     ALTER TABLE runs ADD COLUMN IF NOT EXISTS attempt INT NOT NULL DEFAULT 1;
     ALTER TABLE runs ADD COLUMN IF NOT EXISTS max_attempts INT;
     ALTER TABLE runs ADD COLUMN IF NOT EXISTS backoff_ms BIGINT;
     ALTER TABLE runs ADD COLUMN IF NOT EXISTS retry_on TEXT;
     ALTER TABLE runs ADD COLUMN IF NOT EXISTS not_before_ms BIGINT;
     ALTER TABLE runs ADD COLUMN IF NOT EXISTS dead BOOLEAN NOT NULL DEFAULT false;
     ALTER TABLE runs ADD COLUMN IF NOT EXISTS requeued_as TEXT;",
    // 8: schedules (store/schedule.rs): a run queued at every cron tick.
    "CREATE TABLE schedules (
        id TEXT PRIMARY KEY,
        cron TEXT NOT NULL,
        tz TEXT NOT NULL,
        program TEXT NOT NULL,
        artifact BYTEA NOT NULL,
        artifact_sha256 TEXT NOT NULL,
        entry TEXT,
        args TEXT NOT NULL,
        next_ms BIGINT,
        fired BIGINT NOT NULL DEFAULT 0,
        skipped BIGINT NOT NULL DEFAULT 0,
        last_run TEXT,
        created_ms BIGINT NOT NULL
     );
     CREATE INDEX schedules_due ON schedules (next_ms) WHERE next_ms IS NOT NULL;",
    // 9: a claim's lease (`claim(queue:, lease_ms:)`): when it runs out the
    // job can be claimed again; NULL: claimed for good.
    "ALTER TABLE queue_jobs ADD COLUMN IF NOT EXISTS lease_until_ms BIGINT;",
    // 10: webhooks (store/webhook.rs): a run's (or a schedule's)
    // subscriptions, the outbox of deliveries (one row per event, written
    // with the run's state) and each delivery's attempts.
    "CREATE TABLE run_webhooks (
        run TEXT NOT NULL,
        url TEXT NOT NULL,
        events TEXT NOT NULL,
        PRIMARY KEY (run, url)
     );
     CREATE TABLE webhook_deliveries (
        id TEXT PRIMARY KEY,
        run TEXT NOT NULL,
        url TEXT NOT NULL,
        event TEXT NOT NULL,
        body TEXT NOT NULL,
        status TEXT NOT NULL,
        attempts INT NOT NULL DEFAULT 0,
        next_ms BIGINT NOT NULL,
        owner TEXT,
        lease_until_ms BIGINT,
        created_ms BIGINT NOT NULL,
        ended_ms BIGINT,
        last_error TEXT
     );
     CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_ms) WHERE status = 'pending';
     CREATE INDEX webhook_deliveries_by_run ON webhook_deliveries (run);
     CREATE TABLE webhook_attempts (
        delivery TEXT NOT NULL,
        n INT NOT NULL,
        at_ms BIGINT NOT NULL,
        duration_ms BIGINT NOT NULL,
        http_status INT,
        error TEXT,
        PRIMARY KEY (delivery, n)
     );",
    // 11: threads (store/thread.rs): a conversation's state and its runs
    // in order.
    "CREATE TABLE IF NOT EXISTS threads (
        id TEXT PRIMARY KEY,
        created_ms BIGINT NOT NULL,
        updated_ms BIGINT NOT NULL,
        metadata TEXT NOT NULL,
        state TEXT NOT NULL,
        labels TEXT NOT NULL,
        version BIGINT NOT NULL DEFAULT 0,
        n_runs BIGINT NOT NULL DEFAULT 0
     );
     CREATE TABLE IF NOT EXISTS thread_runs (
        thread TEXT NOT NULL,
        seq BIGINT NOT NULL,
        run TEXT NOT NULL UNIQUE,
        PRIMARY KEY (thread, seq)
     );",
    // 12: ended webhook deliveries by age, for their retention
    // (webhook::Deliverer::prune deletes them in bounded batches).
    "CREATE INDEX IF NOT EXISTS webhook_deliveries_ended ON webhook_deliveries (ended_ms)
        WHERE status <> 'pending';",
    // 13: processes waiting for a fleet slot, with the attained service of
    // their next call's run (store/limits/postgres.rs: least attained
    // service across the fleet).
    "CREATE TABLE IF NOT EXISTS backend_waiters (
        backend TEXT NOT NULL,
        owner TEXT NOT NULL,
        service BIGINT NOT NULL,
        until_ms BIGINT NOT NULL,
        PRIMARY KEY (backend, owner)
     );",
];

/// The schema version this binary writes and reads.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Serialises concurrent migrations of a fleet starting at once.
const LOCK_ID: i64 = 0x4149_535f_5354_4f52; // "AIS_STOR"

fn pg_err(location: &str) -> impl Fn(postgres::Error) -> JournalError + '_ {
    move |e| {
        JournalError::new(
            "store.migrate",
            format!("cannot migrate `{location}`: {}", super::describe(&e)),
        )
    }
}

fn newer(location: &str, v: i64) -> JournalError {
    JournalError::new(
        "store.schema",
        format!(
            "the store `{location}` has schema version {v}, newer than this aisc knows ({SCHEMA_VERSION}): upgrade aisc on this machine"
        ),
    )
}

/// The schema version of the database (0: empty).
pub(crate) fn version(client: &mut Client, location: &str) -> Result<i64, JournalError> {
    let exists: bool = client
        .query_one("SELECT to_regclass('schema_version') IS NOT NULL", &[])
        .map_err(pg_err(location))?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let v: Option<i64> = client
        .query_one("SELECT MAX(version) FROM schema_version", &[])
        .map_err(pg_err(location))?
        .get(0);
    Ok(v.unwrap_or(0))
}

/// Refuses a newer schema; applies the missing migrations (under an
/// advisory lock); returns `(from, to)`.
pub(crate) fn migrate(client: &mut Client, location: &str) -> Result<(i64, i64), JournalError> {
    let v = version(client, location)?;
    if v > SCHEMA_VERSION {
        return Err(newer(location, v));
    }
    if v == SCHEMA_VERSION {
        return Ok((v, v));
    }
    let mut tx = client.transaction().map_err(pg_err(location))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_ID])
        .map_err(pg_err(location))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_version (
            version BIGINT PRIMARY KEY,
            applied_ms BIGINT NOT NULL
         )",
    )
    .map_err(pg_err(location))?;
    // Read again under the lock: another process may have migrated.
    let from: i64 = tx
        .query_one("SELECT COALESCE(MAX(version), 0) FROM schema_version", &[])
        .map_err(pg_err(location))?
        .get(0);
    if from > SCHEMA_VERSION {
        return Err(newer(location, from));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(from as usize) {
        tx.batch_execute(sql).map_err(pg_err(location))?;
        tx.execute(
            &format!(
                "INSERT INTO schema_version (version, applied_ms) VALUES ($1, {})",
                super::NOW_MS
            ),
            &[&(i as i64 + 1)],
        )
        .map_err(pg_err(location))?;
    }
    tx.commit().map_err(pg_err(location))?;
    Ok((v, SCHEMA_VERSION))
}
