//! Durable state behind a trait: the run journal (runs, op results,
//! intents of side effects, pauses and their answers, budgets' usage) and
//! the run queue of a fleet of workers.
//!
//! Two implementations: [`sqlite::SqliteStore`] (one `runs.db` per memory
//! directory; the embedded default, unchanged) and
//! [`postgres::PgStore`] (one PostgreSQL database shared by many worker
//! processes on many machines), selected by [`open`] from `--store`. See
//! `docs/scale-out.md`.
//!
//! Fencing: every run carries a fencing token (`fence`), incremented each
//! time a worker acquires it. Journal writes name the token they were
//! issued under; a write under a stale token is refused with
//! [`FENCED`] (the PostgreSQL store checks it in the same transaction, with
//! the run row share-locked). SQLite has one process per run directory and
//! ignores the token.

pub mod agent;
pub mod lease;
pub mod limits;
pub mod open_once;
pub mod postgres;
pub mod priority;
pub mod query;
pub mod retry;
pub mod rows;
pub mod schedule;
pub mod sqlite;
pub mod storage;
pub mod thread;
pub mod webhook;

pub use agent::AgentStore;
pub use query::MemQuery;
pub use rows::{JournalError, RunInfo, Status, Step};
use serde_json::Value as Json;
use std::path::Path;
use std::sync::Arc;
pub use storage::Storage;

/// The code of a journal write refused because another worker acquired the
/// run since (its lease expired): the writer must stop without effects.
pub const FENCED: &str = "journal.fenced";

/// A run to journal (or to queue).
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    pub id: &'a str,
    pub program: &'a str,
    pub artifact: &'a [u8],
    pub entry: Option<&'a str>,
    /// The arguments as JSON text (`[[name, value], ...]`).
    pub args: &'a str,
}

/// One journal entry to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub seq: i64,
    /// `done`, `intent`, `failed` or `waiting`.
    pub kind: String,
    pub op: String,
    pub hash: String,
    pub value: Option<String>,
    pub tokens: i64,
    /// The information-flow label of `value`: a JSON list of source names
    /// (`crate::ifc`). `None` in journals written before labels were
    /// recorded (or with the policy off): labels are recomputed.
    pub labels: Option<String>,
}

/// A run row as stored, for `load_run`/`load_record`.
#[derive(Debug, Clone)]
pub struct RunRow {
    /// Status already derived (`interrupted` for a dead owner).
    pub info: RunInfo,
    pub artifact: Vec<u8>,
    pub artifact_sha256: String,
    pub args: String,
    pub result: Option<String>,
}

/// Where a run stands, for resuming it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunState {
    pub status: String,
    /// Some other live process owns it (a resume must refuse).
    pub owned_elsewhere: Option<String>,
}

/// A run a worker acquired from the queue (or took over).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub id: String,
    /// The fencing token of this acquisition.
    pub fence: i64,
    /// The run was running under another worker whose lease expired.
    pub takeover: bool,
}

/// What `aisc store status` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreStatus {
    pub backend: &'static str,
    pub location: String,
    pub schema_version: i64,
    pub known_version: i64,
    /// Runs by stored status.
    pub runs: Vec<(String, i64)>,
    /// Queued runs plus running runs whose lease expired.
    pub queue_depth: i64,
    /// Lease takeovers since the store was created.
    pub takeovers: i64,
    /// Per worker process (`host:pid`): what it took, took over, lost.
    pub workers: Vec<WorkerStats>,
    /// Named work queues (`enqueue`/`claim`): jobs not claimed yet.
    pub work_queues: Vec<(String, i64)>,
}

/// The counters of one worker process, kept in the store (any process
/// reports them).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkerStats {
    pub worker: String,
    /// Runs it acquired (queued ones and takeovers).
    pub runs_taken: i64,
    /// Of those, runs whose previous worker's lease had expired.
    pub takeovers: i64,
    /// Runs it stopped because a write was refused under a stale fence.
    pub fenced: i64,
    /// Runs it handed back to the queue when stopped (SIGTERM).
    pub handed_back: i64,
}

/// The worker process of a lease owner `host:pid/slot`: `host:pid`.
pub fn worker_of(owner: &str) -> &str {
    owner.rsplit_once('/').map_or(owner, |(w, _)| w)
}

/// The durable state of runs. Every method is one short transaction.
pub trait Store: Send + Sync + std::fmt::Debug {
    /// `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;
    /// A path or a URL without its password, for messages.
    fn location(&self) -> &str;

    /// Records a new run as running in this process; returns its fence.
    fn begin_run(&self, run: &NewRun<'_>) -> Result<i64, JournalError>;
    /// [`Store::begin_run`] for a run whose id nobody is given before it
    /// ends (`aisc serve`'s `?wait=true`): the row need not be durable
    /// yet, only survive this process; the run's result, which is durable
    /// before anyone sees it, makes it durable too. Default: durable.
    fn begin_run_unshown(&self, run: &NewRun<'_>) -> Result<i64, JournalError> {
        self.begin_run(run)
    }
    fn run_state(&self, id: &str) -> Result<Option<RunState>, JournalError>;
    /// Every entry of run `id`.
    fn entries(&self, id: &str) -> Result<Vec<Entry>, JournalError>;
    /// Marks run `id` running again in this process (a resume); returns its
    /// new fence.
    fn mark_resumed(&self, id: &str) -> Result<i64, JournalError>;
    /// `(LLM calls, tokens)` of the completed entries whose op is one of `ops`.
    fn usage(&self, id: &str, ops: &[&str]) -> Result<(i64, i64), JournalError>;
    /// Writes (or replaces, by key) entries of run `id` under `fence`;
    /// returns once they are durable.
    fn write(&self, id: &str, fence: i64, entries: &[Entry]) -> Result<(), JournalError>;
    /// [`Store::write`] of entries nothing shown depends on yet (an LLM
    /// call's answer: lost, it is asked again on resume): returns once
    /// they survive this process; durable with the run's next durable
    /// write. Default: durable.
    fn write_unshown(&self, id: &str, fence: i64, entries: &[Entry]) -> Result<(), JournalError> {
        self.write(id, fence, entries)
    }
    /// The entry a paused run waits at: `(key, input hash, message JSON)`.
    fn waiting(&self, id: &str) -> Result<Option<(String, String, Option<String>)>, JournalError>;
    /// Stores a run's outcome (`completed`, `failed`, `paused`) under `fence`.
    fn finish(
        &self,
        id: &str,
        fence: i64,
        status: &str,
        result: Option<&str>,
        error: Option<&str>,
    ) -> Result<(), JournalError>;
    /// Every run, oldest first.
    fn list_runs(&self) -> Result<Vec<RunInfo>, JournalError>;
    /// The most recent run's id.
    fn latest(&self) -> Result<Option<String>, JournalError>;
    fn run_row(&self, id: &str) -> Result<Option<RunRow>, JournalError>;
    fn steps(&self, id: &str) -> Result<Vec<Step>, JournalError>;

    /// Queues a run for the workers.
    fn enqueue(&self, run: &NewRun<'_>) -> Result<(), JournalError> {
        let _ = run;
        Err(no_queue(self.backend()))
    }
    /// Queues a run with a priority and a concurrency key
    /// ([`priority::QueueOptions`]); plain [`Store::enqueue`] when `q` is
    /// the default.
    fn enqueue_with(
        &self,
        run: &NewRun<'_>,
        q: &priority::QueueOptions,
    ) -> Result<(), JournalError> {
        if q.is_default() {
            return self.enqueue(run);
        }
        Err(no_queue(self.backend()))
    }
    /// Each queued or running run's priority and concurrency key, and the
    /// load of every key ([`priority::KeyLoad`]): for `aisc runs` and
    /// `/metrics`. Empty for a store without a queue.
    fn queue_view(&self) -> Result<priority::QueueView, JournalError> {
        Ok(priority::QueueView::default())
    }
    /// After run `id` failed under `fence` with an error of class `class`
    /// (its code): queued again when its retry policy allows another
    /// attempt, else dead when it had a policy ([`retry::AfterFailure`]).
    /// Fenced: one failure moves the run once.
    fn after_failure(
        &self,
        id: &str,
        fence: i64,
        class: &str,
    ) -> Result<retry::AfterFailure, JournalError> {
        let _ = (id, fence, class);
        Ok(retry::AfterFailure::Stays)
    }
    /// Runs whose last attempt failed (dead letters), oldest first.
    fn dead_runs(&self) -> Result<Vec<retry::DeadRun>, JournalError> {
        Err(no_queue(self.backend()))
    }
    /// Puts dead run `id` back in the queue: itself, journal kept, when
    /// `args` is `None`; else a new run `new_id` with these arguments (the
    /// dead one then names it). `false` when `id` is not dead (any more).
    fn requeue(&self, id: &str, args: Option<&str>, new_id: &str) -> Result<bool, JournalError> {
        let _ = (id, args, new_id);
        Err(no_queue(self.backend()))
    }
    /// Acquires the queued run of highest priority, oldest first, whose
    /// concurrency key is under its limit, or a running one whose lease
    /// expired, for `lease_ms`; `None` when there is none.
    fn claim(&self, worker: &str, lease_ms: i64) -> Result<Option<Claim>, JournalError> {
        let _ = (worker, lease_ms);
        Err(no_queue(self.backend()))
    }
    /// Extends the lease of run `id`; `false` when `fence` is no longer its
    /// token (another worker took it over).
    fn renew(&self, id: &str, fence: i64, lease_ms: i64) -> Result<bool, JournalError> {
        let _ = (id, fence, lease_ms);
        Err(no_queue(self.backend()))
    }
    /// Gives run `id` back to the queue (its journal kept) if `fence` is
    /// still its token; `false` when another worker has it now.
    fn release(&self, id: &str, fence: i64) -> Result<bool, JournalError> {
        let _ = (id, fence);
        Err(no_queue(self.backend()))
    }
    /// Ends queued or running run `id` for good (a cancel from a server that
    /// handed it to the fleet): `failed` with `error`, its fence moved on, so
    /// no worker takes it and its owner's next write, result and lease
    /// renewal are refused (it commits nothing more and stops). `false`
    /// when it had already ended.
    fn cancel(&self, id: &str, error: &str) -> Result<bool, JournalError> {
        let _ = (id, error);
        Err(no_queue(self.backend()))
    }
    /// Counts, for the worker process of `owner`, runs stopped by fencing
    /// and runs handed back (metrics; a store without workers ignores it).
    fn note_worker(&self, owner: &str, fenced: i64, handed_back: i64) -> Result<(), JournalError> {
        let _ = (owner, fenced, handed_back);
        Ok(())
    }
    /// Stores a schedule (`schedule.rs`): its run is queued at every tick.
    fn add_schedule(&self, schedule: &schedule::NewSchedule<'_>) -> Result<(), JournalError> {
        let _ = schedule;
        Err(schedule::no_schedules(self.backend()))
    }
    /// Every schedule, oldest first.
    fn schedules(&self) -> Result<Vec<schedule::ScheduleInfo>, JournalError> {
        Err(schedule::no_schedules(self.backend()))
    }
    /// Deletes schedule `id` (runs already queued stay); `false` if none.
    fn remove_schedule(&self, id: &str) -> Result<bool, JournalError> {
        let _ = id;
        Err(schedule::no_schedules(self.backend()))
    }
    /// Queues the run of every due tick of every schedule not being fired
    /// by another worker right now, exactly once per tick; returns the run
    /// ids queued.
    fn fire_schedules(&self) -> Result<Vec<String>, JournalError> {
        Err(schedule::no_schedules(self.backend()))
    }
    /// Creates thread `id` (`thread.rs`) with `metadata` (a JSON object)
    /// and an empty state; [`thread::EXISTS`] when the id is taken.
    fn create_thread(&self, id: &str, metadata: &Json) -> Result<thread::ThreadInfo, JournalError> {
        let _ = (id, metadata);
        Err(thread::no_threads(self.backend()))
    }
    /// Thread `id`, or `None`.
    fn thread(&self, id: &str) -> Result<Option<thread::ThreadInfo>, JournalError> {
        let _ = id;
        Err(thread::no_threads(self.backend()))
    }
    /// Every thread, newest first, at most `limit`.
    fn threads(&self, limit: usize) -> Result<Vec<thread::ThreadInfo>, JournalError> {
        let _ = limit;
        Err(thread::no_threads(self.backend()))
    }
    /// Replaces the state of thread `id` with what `change` makes of the
    /// current one, in one transaction with the thread row locked, and
    /// bumps its version; `change` may refuse (its error is returned, and
    /// nothing is written). `None` when there is no such thread.
    fn update_thread_state(
        &self,
        id: &str,
        change: &mut dyn FnMut(&thread::ThreadInfo) -> Result<thread::NewState, JournalError>,
    ) -> Result<Option<thread::ThreadInfo>, JournalError> {
        let _ = (id, change);
        Err(thread::no_threads(self.backend()))
    }
    /// Deletes thread `id` and its links to runs (the runs stay); `false`
    /// if none.
    fn delete_thread(&self, id: &str) -> Result<bool, JournalError> {
        let _ = id;
        Err(thread::no_threads(self.backend()))
    }
    /// Records run `run` as thread `thread`'s next run; returns its place
    /// (1 for the first). When the thread does not exist it is created if
    /// `create`, else [`thread::NOT_FOUND`].
    fn link_thread_run(&self, thread: &str, run: &str, create: bool) -> Result<i64, JournalError> {
        let _ = (thread, run, create);
        Err(thread::no_threads(self.backend()))
    }
    /// The runs of thread `thread`: `(seq, run id)`, oldest first.
    fn thread_runs(&self, thread: &str) -> Result<Vec<(i64, String)>, JournalError> {
        let _ = thread;
        Err(thread::no_threads(self.backend()))
    }
    /// The thread run `run` was made on, with its place: `(thread, seq)`.
    fn thread_of_run(&self, run: &str) -> Result<Option<(String, i64)>, JournalError> {
        let _ = run;
        Ok(None)
    }
    /// The run that run `run` waits for before it may start: the first run
    /// of its thread linked before it (a lower seq, the order the store
    /// gave at linking) that is still queued or running; `None` when it
    /// may start (or is on no thread). `thread.rs`, "Turns".
    fn thread_waits_for(&self, run: &str) -> Result<Option<String>, JournalError> {
        let _ = run;
        Ok(None)
    }
    /// Queues `run` (as [`Store::enqueue_with`]) and links it to `thread`
    /// as its next run (as [`Store::link_thread_run`]) in one transaction:
    /// no worker sees it queued and unlinked, and no link stays without
    /// its run. Returns its place.
    fn enqueue_on_thread(
        &self,
        run: &NewRun<'_>,
        q: &priority::QueueOptions,
        thread: &str,
        create: bool,
    ) -> Result<i64, JournalError> {
        let _ = (run, q, thread, create);
        Err(no_queue(self.backend()))
    }

    /// Subscribes `subject` (a run, or a schedule whose runs inherit it)
    /// to webhooks (`webhook.rs`). Written before the run is queued or
    /// started, so its state change finds it.
    fn add_webhooks(&self, subject: &str, hooks: &[webhook::Hook]) -> Result<(), JournalError> {
        let _ = (subject, hooks);
        Err(JournalError::new(
            "store.unsupported",
            format!("the {} store keeps no webhooks", self.backend()),
        ))
    }
    /// Claims up to `limit` due webhook deliveries for `owner` for
    /// `lease_ms` (rows another process holds are skipped).
    fn claim_deliveries(
        &self,
        owner: &str,
        lease_ms: i64,
        limit: i64,
    ) -> Result<Vec<webhook::Due>, JournalError> {
        let _ = (owner, lease_ms, limit);
        Ok(Vec::new())
    }
    /// Records an attempt of a delivery `owner` claimed, and its outcome;
    /// `false` when the claim was lost (another process has the row now).
    fn record_attempt(
        &self,
        owner: &str,
        attempt: &webhook::Attempt,
    ) -> Result<bool, JournalError> {
        let _ = (owner, attempt);
        Ok(false)
    }
    /// Run `run`'s webhook deliveries with their attempts, oldest first.
    fn deliveries(&self, run: &str) -> Result<Vec<webhook::DeliveryInfo>, JournalError> {
        let _ = run;
        Ok(Vec::new())
    }
    /// Webhook deliveries by status (`/metrics`).
    fn delivery_counts(&self) -> Result<webhook::Counts, JournalError> {
        Ok(webhook::Counts::default())
    }
    /// Deletes at most `limit` ended deliveries (delivered or failed)
    /// whose end is before `ended_before_ms`, with their attempts (their
    /// retention, `webhook::deliver`); returns how many.
    fn prune_deliveries(&self, ended_before_ms: i64, limit: i64) -> Result<i64, JournalError> {
        let _ = (ended_before_ms, limit);
        Ok(0)
    }
    /// Applies the schema migrations this binary knows; `(from, to)`.
    fn migrate(&self) -> Result<(i64, i64), JournalError>;
    fn status(&self) -> Result<StoreStatus, JournalError>;
}

/// The refusal of a write under a stale fence.
pub(crate) fn fenced(run: &str, fence: i64) -> JournalError {
    JournalError::new(
        FENCED,
        format!("run `{run}` was taken over by another worker (its lease under fence {fence} expired): this worker stops without committing"),
    )
}

fn no_queue(backend: &str) -> JournalError {
    JournalError::new(
        "store.unsupported",
        format!("the {backend} store has no run queue: queued runs and workers need `--store postgres://...`"),
    )
}

/// Bytes as lower-case hex.
pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// True for a `--store` value that names a PostgreSQL database.
pub fn is_postgres_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// The agent store of the SQLite memory database `db` (created or
/// migrated; shared with this process's other users of it), or an
/// in-memory one; with the warning of a legacy episodic log's import.
pub fn open_agent_sqlite(
    db: Option<&Path>,
) -> Result<(Arc<dyn AgentStore>, Option<String>), crate::host::HostError> {
    match db {
        None => Ok((Arc::new(sqlite::SqliteAgentStore::in_memory()?), None)),
        Some(db) => {
            let (s, w) = sqlite::SqliteAgentStore::open(db)?;
            Ok((Arc::new(s), w))
        }
    }
}

/// The agent store of a fleet: the PostgreSQL database at `url` (one
/// connection pool per store and process, shared by its runs).
pub fn open_agent_postgres(url: &str) -> Result<Arc<dyn AgentStore>, crate::host::HostError> {
    Ok(postgres::ltm::PgLtm::shared(url)?)
}

/// Opens the store `spec` names: a `postgres://` URL, else a memory
/// directory (its `runs.db`).
pub fn open(spec: &str) -> Result<Arc<dyn Store>, JournalError> {
    if is_postgres_url(spec) {
        Ok(Arc::new(postgres::PgStore::connect(spec)?))
    } else {
        Ok(sqlite::SqliteStore::shared(Path::new(spec))?)
    }
}
