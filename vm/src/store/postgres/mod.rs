//! The PostgreSQL store: one database shared by a fleet of workers.
//!
//! Client: the synchronous `postgres` crate (rust-postgres). It runs a
//! small tokio runtime inside each connection; none of it leaks into the
//! VM, which stays free of an async runtime. Connections come from a small
//! pool ([`pool`]); every session gets `statement_timeout` (30 s, or
//! `AIS_STORE_STATEMENT_TIMEOUT_MS`); transactions that fail with a
//! serialization failure (40001) or a deadlock (40P01) are retried a
//! bounded number of times. Journal writes go through one writer thread
//! per process ([`group`]): group commit.
//!
//! Leases use the database's clock (`clock_timestamp()`), so workers'
//! clocks need not agree.

mod agent;
mod group;
pub mod ltm;
pub(crate) mod pool;
mod priority;
mod retry;
mod schedule;
pub mod schema;
mod state;
mod threads;
mod webhook;

use super::{Claim, Entry, NewRun, RunRow, RunState, Store, StoreStatus, WorkerStats};
use crate::store::rows::{JournalError, RunInfo, Status, Step};
use postgres::error::SqlState;
use postgres::{Client, Row};
use sha2::{Digest, Sha256};
use std::str::FromStr;

/// The database's clock in milliseconds since the epoch (SQL).
pub(crate) const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// Attempts of one transaction on serialization failures and deadlocks.
const ATTEMPTS: u32 = 5;

/// Lease takeovers of one run before a worker fails it instead.
pub const MAX_TAKEOVERS: i64 = 10;

pub(crate) fn is_retryable(e: &postgres::Error) -> bool {
    matches!(
        e.code(),
        Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
    )
}

/// A PostgreSQL error with the server's message (`Display` alone says
/// only "db error").
pub(crate) fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => format!("{} (SQLSTATE {})", d.message(), d.code().code()),
        None => e.to_string(),
    }
}

/// This process as a lease owner: `host:pid:start` (`super::lease`), so
/// a pid the kernel reused later names another process.
pub fn owner_id() -> String {
    super::lease::this_process()
}

/// Whether the process an owner names is alive: `None` when it runs on
/// another host, or the owner is a worker slot (`OWNER/SLOT`, which holds
/// a lease) or was written by a build without start times.
fn owner_alive(owner: &str) -> Option<bool> {
    super::lease::owner_alive(owner)
}

/// `url` without its password, for messages.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.split_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

/// The connection settings of `url` (every session: statement timeout,
/// application name, connect timeout) and the URL without its password.
pub(crate) fn config(url: &str) -> Result<(postgres::Config, String), JournalError> {
    let location = redact(url);
    let mut config = postgres::Config::from_str(url)
        .map_err(|e| JournalError::new("store.url", format!("bad store URL `{location}`: {e}")))?;
    let timeout_ms = std::env::var("AIS_STORE_STATEMENT_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(30_000);
    config.options(&format!("-c statement_timeout={timeout_ms}"));
    config.application_name("aisc");
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(std::time::Duration::from_secs(10));
    }
    Ok((config, location))
}

#[derive(Debug)]
pub struct PgStore {
    pool: pool::Pool,
    location: String,
    group: group::GroupCommit,
    owner: String,
}

const INFO_SQL: &str =
    "SELECT id, status, owner, lease_until, started_ms, ended_ms, entry, program,
    error, resumes,
    (SELECT COUNT(*) FROM entries e WHERE e.run = runs.id AND e.kind = 'done') AS n_entries,
    (SELECT COUNT(*) FROM entries e WHERE e.run = runs.id AND e.kind = 'intent') AS n_doubt,
    (extract(epoch from clock_timestamp()) * 1000)::bigint AS now_ms
    FROM runs";

fn info_of(r: &Row) -> Result<RunInfo, postgres::Error> {
    let status: String = r.try_get("status")?;
    let lease: Option<i64> = r.try_get("lease_until")?;
    let now: i64 = r.try_get("now_ms")?;
    let owner: Option<String> = r.try_get("owner")?;
    let status = match status.as_str() {
        "completed" => Status::Completed,
        "failed" => Status::Failed,
        "paused" => Status::Paused,
        "queued" => Status::Queued,
        _ if lease.is_some_and(|l| l < now) => Status::Interrupted,
        _ if lease.is_none() && owner.as_deref().and_then(owner_alive) == Some(false) => {
            Status::Interrupted
        }
        _ => Status::Running,
    };
    Ok(RunInfo {
        id: r.try_get("id")?,
        status,
        started_ms: r.try_get("started_ms")?,
        ended_ms: r.try_get("ended_ms")?,
        entry: r.try_get("entry")?,
        program: r.try_get("program")?,
        entries: r.try_get("n_entries")?,
        in_doubt: r.try_get("n_doubt")?,
        error: r.try_get("error")?,
        resumes: r.try_get("resumes")?,
    })
}

impl PgStore {
    /// Connects to `url`, applies missing migrations, refuses a newer schema.
    pub fn connect(url: &str) -> Result<PgStore, JournalError> {
        let (config, location) = config(url)?;
        let pool = pool::Pool::new(config.clone(), 8);
        let mut c = pool.get().map_err(|e| {
            JournalError::new(
                "store.connect",
                format!("cannot connect to `{location}`: {}", describe(&e)),
            )
        })?;
        schema::migrate(&mut c, &location)?;
        drop(c);
        Ok(PgStore {
            group: group::GroupCommit::start(config, location.clone()),
            pool,
            location,
            owner: owner_id(),
        })
    }

    /// Journal write transactions committed by this process, and the
    /// writes they carried (group commit batches many writes into one).
    pub fn commit_stats(&self) -> (u64, u64) {
        let s = self.group.stats();
        (
            s.commits.load(std::sync::atomic::Ordering::Relaxed),
            s.writes.load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// Reads the schema version without migrating.
    pub fn version(&self) -> Result<i64, JournalError> {
        let mut c = self.conn()?;
        schema::version(&mut c, &self.location)
    }

    fn conn(&self) -> Result<pool::Conn<'_>, JournalError> {
        self.pool.get().map_err(|e| {
            JournalError::new(
                "store.connect",
                format!("cannot connect to `{}`: {}", self.location, describe(&e)),
            )
        })
    }

    fn err(&self) -> impl Fn(postgres::Error) -> JournalError + '_ {
        move |e| {
            JournalError::new(
                "journal.db",
                format!("run store `{}`: {}", self.location, describe(&e)),
            )
        }
    }

    /// Runs `f` on a pooled client, again (bounded) on a serialization
    /// failure, a deadlock or a broken connection.
    fn with<T>(
        &self,
        mut f: impl FnMut(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, JournalError> {
        let mut last = None;
        for _ in 0..ATTEMPTS {
            let mut c = self.conn()?;
            match f(&mut c) {
                Ok(v) => return Ok(v),
                Err(e) => {
                    let retry = is_retryable(&e) || c.is_closed();
                    last = Some(e);
                    if !retry {
                        break;
                    }
                }
            }
        }
        match last {
            Some(e) => Err(self.err()(e)),
            None => Err(JournalError::new("journal.db", "no attempt was made")),
        }
    }

    fn insert(&self, run: &NewRun<'_>, status: &str) -> Result<(), JournalError> {
        let sha = super::hex(&Sha256::digest(run.artifact));
        let owner = (status == "running").then(|| self.owner.clone());
        self.with(|c| {
            c.execute(
                &format!(
                    "INSERT INTO runs (id, status, owner, queued_ms, started_ms, program, artifact,
                     artifact_sha256, entry, args) VALUES ($1, $2, $3, {NOW_MS}, {NOW_MS}, $4, $5, $6, $7, $8)"
                ),
                &[&run.id, &status, &owner, &run.program, &run.artifact, &sha, &run.entry, &run.args],
            )
        })?;
        Ok(())
    }
}

impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn location(&self) -> &str {
        &self.location
    }

    fn begin_run(&self, run: &NewRun<'_>) -> Result<i64, JournalError> {
        self.insert(run, "running")?;
        Ok(0)
    }

    fn run_state(&self, id: &str) -> Result<Option<RunState>, JournalError> {
        let row = self.with(|c| {
            c.query_opt(
                &format!("SELECT status, owner, lease_until, {NOW_MS} FROM runs WHERE id = $1"),
                &[&id],
            )
        })?;
        let Some(row) = row else { return Ok(None) };
        let status: String = row.get(0);
        let owner: Option<String> = row.get(1);
        let lease: Option<i64> = row.get(2);
        let now: i64 = row.get(3);
        let live = match lease {
            Some(l) => l >= now,
            // A run started by `aisc run --store` holds no lease: it is
            // live while its process is (known on its own host only; a
            // resume elsewhere fences it out).
            None => owner
                .as_deref()
                .is_some_and(|o| o != owner_id() && owner_alive(o) == Some(true)),
        };
        Ok(Some(RunState {
            owned_elsewhere: (status == "running" && live).then(|| owner.unwrap_or_default()),
            status,
        }))
    }

    fn entries(&self, id: &str) -> Result<Vec<Entry>, JournalError> {
        let rows = self.with(|c| {
            c.query(
                "SELECT key, seq, kind, op, input_hash, value, tokens, labels FROM entries WHERE run = $1",
                &[&id],
            )
        })?;
        Ok(rows
            .iter()
            .map(|r| Entry {
                key: r.get(0),
                seq: r.get(1),
                kind: r.get(2),
                op: r.get(3),
                hash: r.get(4),
                value: r.get(5),
                tokens: r.get(6),
                labels: r.get(7),
            })
            .collect())
    }

    fn mark_resumed(&self, id: &str) -> Result<i64, JournalError> {
        let owner = &self.owner;
        let row = self.with(|c| {
            c.query_opt(
                "UPDATE runs SET status = 'running', owner = $2, lease_until = NULL,
                 ended_ms = NULL, error = NULL, resumes = resumes + 1, fence = fence + 1
                 WHERE id = $1 RETURNING fence",
                &[&id, owner],
            )
        })?;
        row.map(|r| r.get(0)).ok_or_else(|| {
            JournalError::new(
                "journal.no_run",
                format!("no run `{id}` in `{}`", self.location),
            )
        })
    }

    fn usage(&self, id: &str, ops: &[&str]) -> Result<(i64, i64), JournalError> {
        let ops: Vec<&str> = ops.to_vec();
        let row = self.with(|c| {
            c.query_one(
                "SELECT COUNT(*), COALESCE(SUM(tokens), 0)::bigint FROM entries
                 WHERE run = $1 AND kind = 'done' AND op = ANY($2)",
                &[&id, &ops],
            )
        })?;
        Ok((row.get(0), row.get(1)))
    }

    fn write(&self, id: &str, fence: i64, entries: &[Entry]) -> Result<(), JournalError> {
        self.group.write(id, fence, entries)
    }

    fn waiting(&self, id: &str) -> Result<Option<(String, String, Option<String>)>, JournalError> {
        let row = self.with(|c| {
            c.query_opt(
                "SELECT key, input_hash, value FROM entries WHERE run = $1 AND kind = 'waiting'",
                &[&id],
            )
        })?;
        Ok(row.map(|r| (r.get(0), r.get(1), r.get(2))))
    }

    fn finish(
        &self,
        id: &str,
        fence: i64,
        status: &str,
        result: Option<&str>,
        error: Option<&str>,
    ) -> Result<(), JournalError> {
        // The run's state and its webhook deliveries in one transaction.
        let n = self.with(|c| {
            let mut tx = c.transaction()?;
            let n = tx.execute(
                &format!(
                    "UPDATE runs SET status = $3, ended_ms = {NOW_MS}, result = $4, error = $5,
                     lease_until = NULL WHERE id = $1 AND fence = $2"
                ),
                &[&id, &fence, &status, &result, &error],
            )?;
            if n == 1 {
                webhook::outbox(&mut tx, id)?;
            }
            tx.commit()?;
            Ok(n)
        })?;
        if n == 0 {
            return Err(super::fenced(id, fence));
        }
        Ok(())
    }

    fn list_runs(&self) -> Result<Vec<RunInfo>, JournalError> {
        let rows = self.with(|c| c.query(&format!("{INFO_SQL} ORDER BY started_ms, id"), &[]))?;
        rows.iter()
            .map(info_of)
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.err())
    }

    fn latest(&self) -> Result<Option<String>, JournalError> {
        let row = self.with(|c| {
            c.query_opt(
                "SELECT id FROM runs ORDER BY started_ms DESC, id DESC LIMIT 1",
                &[],
            )
        })?;
        Ok(row.map(|r| r.get(0)))
    }

    fn run_row(&self, id: &str) -> Result<Option<RunRow>, JournalError> {
        let row = self.with(|c| {
            c.query_opt(
                &format!(
                    "SELECT * FROM ({INFO_SQL}) i JOIN (SELECT id AS rid, artifact, artifact_sha256, args, result
                     FROM runs) r ON r.rid = i.id WHERE i.id = $1"
                ),
                &[&id],
            )
        })?;
        let Some(r) = row else { return Ok(None) };
        let info = info_of(&r).map_err(self.err())?;
        Ok(Some(RunRow {
            info,
            artifact: r.get("artifact"),
            artifact_sha256: r.get("artifact_sha256"),
            args: r.get("args"),
            result: r.get("result"),
        }))
    }

    fn steps(&self, id: &str) -> Result<Vec<Step>, JournalError> {
        let rows = self.with(|c| {
            c.query(
                "SELECT seq, kind, op, tokens FROM entries WHERE run = $1 ORDER BY seq, key",
                &[&id],
            )
        })?;
        Ok(rows
            .iter()
            .map(|r| Step {
                seq: r.get(0),
                kind: r.get(1),
                op: r.get(2),
                tokens: r.get(3),
            })
            .collect())
    }

    fn enqueue(&self, run: &NewRun<'_>) -> Result<(), JournalError> {
        self.insert(run, "queued")
    }

    fn enqueue_with(
        &self,
        run: &NewRun<'_>,
        q: &crate::store::priority::QueueOptions,
    ) -> Result<(), JournalError> {
        self.enqueue_keyed(run, q)
    }

    fn queue_view(&self) -> Result<crate::store::priority::QueueView, JournalError> {
        self.view()
    }

    fn after_failure(
        &self,
        id: &str,
        fence: i64,
        class: &str,
    ) -> Result<crate::store::retry::AfterFailure, JournalError> {
        self.retry_after_failure(id, fence, class)
    }

    fn dead_runs(&self) -> Result<Vec<crate::store::retry::DeadRun>, JournalError> {
        self.dead()
    }

    fn requeue(&self, id: &str, args: Option<&str>, new_id: &str) -> Result<bool, JournalError> {
        self.requeue_dead(id, args, new_id)
    }

    fn claim(&self, worker: &str, lease_ms: i64) -> Result<Option<Claim>, JournalError> {
        self.with(|c| {
            let mut tx = c.transaction()?;
            // A run whose workers keep dying (a program that crashes
            // them, say) is failed rather than taken over forever.
            let given_up = tx.query(
                &format!(
                    "UPDATE runs SET status = 'failed', ended_ms = {NOW_MS}, lease_until = NULL,
                     fence = fence + 1,
                     error = 'taken over ' || takeovers || ' times: its workers keep dying; `aisc resume` retries it'
                     WHERE status = 'running' AND lease_until < {NOW_MS} AND takeovers >= $1
                     RETURNING id"
                ),
                &[&MAX_TAKEOVERS],
            )?;
            for r in &given_up {
                webhook::outbox(&mut tx, r.get(0))?;
            }
            // Highest priority first, then oldest; a queued run only while
            // its concurrency key is under its limit (`priority`) and its
            // thread's earlier runs have ended (`threads`).
            let Some(row) = tx.query_opt(
                &format!(
                    "SELECT id, status, concurrency_key, key_limit FROM runs
                     WHERE (status = 'queued' AND {} AND {}
                            AND (not_before_ms IS NULL OR not_before_ms <= {NOW_MS}))
                     OR (status = 'running' AND lease_until < {NOW_MS})
                     ORDER BY priority DESC, started_ms, id LIMIT 1 FOR UPDATE SKIP LOCKED",
                    priority::UNDER_KEY_LIMIT,
                    threads::TURN_CLAIMABLE
                ),
                &[],
            )?
            else {
                tx.commit()?;
                return Ok(None);
            };
            let id: String = row.get(0);
            let takeover = row.get::<_, String>(1) == "running";
            if let (false, Some(key), Some(limit)) =
                (takeover, row.get::<_, Option<String>>(2), row.get::<_, Option<i32>>(3))
            {
                // Another worker took a run of this key meanwhile.
                if priority::key_full(&mut tx, &key, limit)? {
                    tx.commit()?;
                    return Ok(None);
                }
            }
            let fence: i64 = tx
                .query_one(
                    &format!(
                        "UPDATE runs SET status = 'running', owner = $2, fence = fence + 1,
                         lease_until = {NOW_MS} + $3,
                         resumes = resumes + CASE WHEN $4 THEN 1 ELSE 0 END,
                         takeovers = takeovers + CASE WHEN $4 THEN 1 ELSE 0 END
                         WHERE id = $1 RETURNING fence"
                    ),
                    &[&id, &worker, &lease_ms, &takeover],
                )?
                .get(0);
            state::count(&mut tx, worker, 1, i64::from(takeover), 0, 0)?;
            tx.commit()?;
            Ok(Some(Claim {
                id,
                fence,
                takeover,
            }))
        })
    }

    fn renew(&self, id: &str, fence: i64, lease_ms: i64) -> Result<bool, JournalError> {
        let n = self.with(|c| {
            c.execute(
                &format!(
                    "UPDATE runs SET lease_until = {NOW_MS} + $3
                     WHERE id = $1 AND fence = $2 AND status = 'running'"
                ),
                &[&id, &fence, &lease_ms],
            )
        })?;
        Ok(n == 1)
    }

    fn release(&self, id: &str, fence: i64) -> Result<bool, JournalError> {
        // The fence moves on: a write of the old owner still in flight is
        // refused; the next claim replays the journal as it stands.
        let n = self.with(|c| {
            c.execute(
                "UPDATE runs SET status = 'queued', owner = NULL, lease_until = NULL,
                 fence = fence + 1 WHERE id = $1 AND fence = $2 AND status = 'running'",
                &[&id, &fence],
            )
        })?;
        Ok(n == 1)
    }

    fn cancel(&self, id: &str, error: &str) -> Result<bool, JournalError> {
        let n = self.with(|c| {
            let mut tx = c.transaction()?;
            let n = tx.execute(
                &format!(
                    "UPDATE runs SET status = 'failed', ended_ms = {NOW_MS}, owner = NULL,
                     lease_until = NULL, fence = fence + 1, error = $2
                     WHERE id = $1 AND status IN ('queued', 'running')"
                ),
                &[&id, &error],
            )?;
            if n == 1 {
                webhook::outbox(&mut tx, id)?;
            }
            tx.commit()?;
            Ok(n)
        })?;
        Ok(n == 1)
    }

    fn note_worker(&self, owner: &str, fenced: i64, handed_back: i64) -> Result<(), JournalError> {
        self.with(|c| {
            let mut tx = c.transaction()?;
            state::count(&mut tx, owner, 0, 0, fenced, handed_back)?;
            tx.commit()
        })
    }

    fn add_schedule(
        &self,
        schedule: &crate::store::schedule::NewSchedule<'_>,
    ) -> Result<(), JournalError> {
        self.add_schedule_pg(schedule)
    }

    fn schedules(&self) -> Result<Vec<crate::store::schedule::ScheduleInfo>, JournalError> {
        self.schedules_pg()
    }

    fn remove_schedule(&self, id: &str) -> Result<bool, JournalError> {
        self.remove_schedule_pg(id)
    }

    fn fire_schedules(&self) -> Result<Vec<String>, JournalError> {
        self.fire_schedules_pg()
    }

    fn create_thread(
        &self,
        id: &str,
        metadata: &serde_json::Value,
    ) -> Result<crate::store::thread::ThreadInfo, JournalError> {
        self.create_thread_pg(id, metadata)
    }

    fn thread(&self, id: &str) -> Result<Option<crate::store::thread::ThreadInfo>, JournalError> {
        self.thread_pg(id)
    }

    fn threads(&self, limit: usize) -> Result<Vec<crate::store::thread::ThreadInfo>, JournalError> {
        self.threads_pg(limit)
    }

    fn update_thread_state(
        &self,
        id: &str,
        change: &mut dyn FnMut(
            &crate::store::thread::ThreadInfo,
        ) -> Result<crate::store::thread::NewState, JournalError>,
    ) -> Result<Option<crate::store::thread::ThreadInfo>, JournalError> {
        self.update_thread_state_pg(id, change)
    }

    fn delete_thread(&self, id: &str) -> Result<bool, JournalError> {
        self.delete_thread_pg(id)
    }

    fn link_thread_run(&self, thread: &str, run: &str, create: bool) -> Result<i64, JournalError> {
        self.link_thread_run_pg(thread, run, create)
    }

    fn thread_runs(&self, thread: &str) -> Result<Vec<(i64, String)>, JournalError> {
        self.thread_runs_pg(thread)
    }

    fn thread_of_run(&self, run: &str) -> Result<Option<(String, i64)>, JournalError> {
        self.thread_of_run_pg(run)
    }

    fn thread_waits_for(&self, run: &str) -> Result<Option<String>, JournalError> {
        self.thread_waits_for_pg(run)
    }

    fn enqueue_on_thread(
        &self,
        run: &NewRun<'_>,
        q: &crate::store::priority::QueueOptions,
        thread: &str,
        create: bool,
    ) -> Result<i64, JournalError> {
        self.enqueue_on_thread_pg(run, q, thread, create)
    }

    fn add_webhooks(
        &self,
        subject: &str,
        hooks: &[crate::store::webhook::Hook],
    ) -> Result<(), JournalError> {
        self.add_webhooks_pg(subject, hooks)
    }

    fn claim_deliveries(
        &self,
        owner: &str,
        lease_ms: i64,
        limit: i64,
    ) -> Result<Vec<crate::store::webhook::Due>, JournalError> {
        self.claim_deliveries_pg(owner, lease_ms, limit)
    }

    fn record_attempt(
        &self,
        owner: &str,
        attempt: &crate::store::webhook::Attempt,
    ) -> Result<bool, JournalError> {
        self.record_attempt_pg(owner, attempt)
    }

    fn deliveries(
        &self,
        run: &str,
    ) -> Result<Vec<crate::store::webhook::DeliveryInfo>, JournalError> {
        self.deliveries_pg(run)
    }

    fn delivery_counts(&self) -> Result<crate::store::webhook::Counts, JournalError> {
        self.delivery_counts_pg()
    }

    fn prune_deliveries(&self, ended_before_ms: i64, limit: i64) -> Result<i64, JournalError> {
        self.prune_deliveries_pg(ended_before_ms, limit)
    }

    fn migrate(&self) -> Result<(i64, i64), JournalError> {
        let mut c = self.conn()?;
        schema::migrate(&mut c, &self.location)
    }

    fn status(&self) -> Result<StoreStatus, JournalError> {
        let v = self.version()?;
        let (runs, depth, takeovers, workers, work_queues) = self.with(|c| {
            let runs = c
                .query(
                    "SELECT status, COUNT(*) FROM runs GROUP BY status ORDER BY status",
                    &[],
                )?
                .iter()
                .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
                .collect::<Vec<_>>();
            let depth: i64 = c
                .query_one(
                    &format!(
                        "SELECT COUNT(*) FROM runs WHERE status = 'queued'
                         OR (status = 'running' AND lease_until < {NOW_MS})"
                    ),
                    &[],
                )?
                .get(0);
            let takeovers: i64 = c
                .query_one("SELECT COALESCE(SUM(takeovers), 0)::bigint FROM runs", &[])?
                .get(0);
            let workers = c
                .query(
                    "SELECT worker, runs_taken, takeovers, fenced, handed_back
                     FROM worker_stats ORDER BY worker",
                    &[],
                )?
                .iter()
                .map(|r| WorkerStats {
                    worker: r.get(0),
                    runs_taken: r.get(1),
                    takeovers: r.get(2),
                    fenced: r.get(3),
                    handed_back: r.get(4),
                })
                .collect::<Vec<_>>();
            let queues = c
                .query(
                    "SELECT queue, COUNT(*) FROM queue_jobs WHERE claimed_by IS NULL
                     GROUP BY queue ORDER BY queue",
                    &[],
                )?
                .iter()
                .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
                .collect::<Vec<_>>();
            Ok((runs, depth, takeovers, workers, queues))
        })?;
        Ok(StoreStatus {
            backend: "postgres",
            location: self.location.clone(),
            schema_version: v,
            known_version: schema::SCHEMA_VERSION,
            runs,
            queue_depth: depth,
            takeovers,
            workers,
            work_queues,
        })
    }
}
