//! The run journal: run ids, durable op results, resume.
//!
//! One SQLite database per memory directory (`runs.db`, WAL mode). A run
//! row holds the artifact bytes, entry and arguments, status and pid; an
//! entry row holds the outcome of one completed *effect* op (LLM call, tool
//! call, memory/belief op, print, communicate) keyed by the op's dynamic
//! identity (see [`op_key`]) and a hash of its inputs. Pure ops, calls and
//! control ops are not journaled: on resume they are recomputed from the
//! replayed effects. See `docs/reliability.md`.
//!
//! Durability: every entry is written in its own transaction with
//! `synchronous = FULL`, so it is on disk (WAL fsynced) before the op's
//! consumers fire. A side-effecting tool call writes an `intent` row first.
//!
//! Fault injection: a [`WriteObserver`] installed with
//! [`set_write_observer`] sees every journal write as it commits. The
//! product installs none; `ais-testkit` installs one that aborts the process
//! after the N-th write (its test-only `aisc-fault` binary).

pub(crate) mod watchdog;

use crate::value::Val;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value as Json};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The journal database file in a memory directory.
pub const DB_FILE: &str = "runs.db";
const SCHEMA_VERSION: i64 = 1;

/// Sees each journal write right after it committed: the seam for fault
/// injection (a test kills the process at every point of a run and checks
/// that resuming gives the uninterrupted result).
pub trait WriteObserver: Send + Sync {
    /// The `n`-th write (1-based) of one journal is durable.
    fn after_write(&self, n: u64);
}

static WRITE_OBSERVER: OnceLock<Arc<dyn WriteObserver>> = OnceLock::new();

/// Installs the process's write observer, for journals opened from now on.
/// Process-wide (like a panic hook), so a test binary can install it before
/// the command-line code opens its journal. Returns `false` (and changes
/// nothing) when one was already installed.
pub fn set_write_observer(observer: Arc<dyn WriteObserver>) -> bool {
    WRITE_OBSERVER.set(observer).is_ok()
}

/// A journal failure (opening, reading, writing, a corrupted database).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct JournalError {
    pub code: &'static str,
    pub message: String,
}

impl JournalError {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        JournalError {
            code,
            message: message.into(),
        }
    }
}

fn db_err(path: &str) -> impl Fn(rusqlite::Error) -> JournalError + '_ {
    move |e| {
        JournalError::new(
            "journal.db",
            format!("run journal `{path}` is unreadable or corrupted: {e}"),
        )
    }
}

/// Status of a run as stored (plus `interrupted`, derived).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Running,
    Completed,
    Failed,
    /// Stored as `running` but its process is gone.
    Interrupted,
    /// Stopped at a `pause`, waiting for a person's input.
    Paused,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Interrupted => "interrupted",
            Status::Paused => "paused",
        }
    }
}

/// One row of `aisc runs`.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub id: String,
    pub status: Status,
    pub started_ms: i64,
    pub ended_ms: Option<i64>,
    pub entry: Option<String>,
    pub program: String,
    pub entries: i64,
    pub in_doubt: i64,
    pub error: Option<String>,
    pub resumes: i64,
}

/// What a run needs to be resumed.
#[derive(Debug, Clone)]
pub struct StoredRun {
    pub info: RunInfo,
    pub artifact: Vec<u8>,
    pub args: Vec<(String, Json)>,
}

/// The result of looking an op up in the journal.
#[derive(Debug, Clone, PartialEq)]
pub enum Replay {
    /// Not journaled (or journaled with other inputs): execute it.
    Miss,
    /// Completed before: deliver these results, do not execute.
    Done(Vec<Val>),
    /// A side-effecting call was started and never recorded as completed.
    InDoubt,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn pid_alive(pid: i64) -> bool {
    if pid <= 0 {
        return false;
    }
    if pid == i64::from(std::process::id()) {
        return true;
    }
    let proc = Path::new("/proc");
    if !proc.exists() {
        // No way to tell: assume it still runs.
        return true;
    }
    proc.join(pid.to_string()).exists()
}

/// Encodes an op's results (tagged, so lists and tokens round-trip).
pub fn encode_vals(vs: &[Val]) -> Json {
    fn enc(v: &Val) -> Json {
        match v {
            Val::Ord => json!({"ord": true}),
            Val::List(xs) => json!({"list": xs.iter().map(enc).collect::<Vec<_>>()}),
            other => json!({"v": other.to_json()}),
        }
    }
    Json::Array(vs.iter().map(enc).collect())
}

/// Decodes [`encode_vals`]; `None` on anything malformed.
pub fn decode_vals(j: &Json) -> Option<Vec<Val>> {
    fn dec(j: &Json) -> Option<Val> {
        let o = j.as_object()?;
        if o.contains_key("ord") {
            return Some(Val::Ord);
        }
        if let Some(xs) = o.get("list") {
            let xs: Option<Vec<Val>> = xs.as_array()?.iter().map(dec).collect();
            return Some(Val::List(xs?.into()));
        }
        o.get("v").cloned().map(Val::from_json)
    }
    j.as_array()?.iter().map(dec).collect()
}

/// A hash of an op's inputs (hex SHA-256 of their tagged JSON).
pub fn input_hash(args: &[Val]) -> String {
    let mut h = Sha256::new();
    h.update(encode_vals(args).to_string().as_bytes());
    hex(&h.finalize()[..16])
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The dynamic identity of op `op` in `frame`: the path of (flow, region,
/// owner op, loop index) from the entry frame down. It is the same in every
/// execution of the same program with the same inputs, whatever the
/// scheduling order, because frames are started by ops, not by time.
pub(crate) fn op_key(frame: &crate::frame::Frame<'_>, op: u32) -> String {
    use crate::frame::Role;
    let mut h = Sha256::new();
    h.update(op.to_le_bytes());
    let mut f = frame;
    loop {
        h.update(f.flow.to_le_bytes());
        h.update(f.region.to_le_bytes());
        let Some(o) = &f.owner else { break };
        h.update(o.op.to_le_bytes());
        let (tag, idx): (u8, u64) = match &o.role {
            Role::Call => (1, 0),
            Role::Branch => (2, 0),
            Role::Try => (3, 0),
            Role::Catch => (4, 0),
            Role::Iter { index, .. } => (5, *index as u64),
            Role::Handler => (6, 0),
            Role::Plan => (7, 0),
        };
        h.update([tag]);
        h.update(idx.to_le_bytes());
        f = &o.frame;
    }
    hex(&h.finalize()[..16])
}

struct Rec {
    hash: String,
    kind: String,
    value: Option<String>,
}

/// The journal of one run (shared by the run's threads).
pub struct Journal {
    conn: Mutex<Connection>,
    path: String,
    run_id: String,
    /// Entries of earlier attempts of this run (resume), by key.
    replay: HashMap<String, Rec>,
    writes: AtomicU64,
    observer: Option<Arc<dyn WriteObserver>>,
    idempotent: HashSet<String>,
    pub(crate) replayed: AtomicU64,
    /// LLM calls and tokens recorded by earlier attempts (budgets are per run).
    prior: (u64, u64),
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("path", &self.path)
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

fn open_db(dir: Option<&Path>) -> Result<(Connection, String), JournalError> {
    let (conn, path) = match dir {
        None => (Connection::open_in_memory(), ":memory:".to_string()),
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| {
                JournalError::new(
                    "journal.dir",
                    format!("cannot create `{}`: {e}", d.display()),
                )
            })?;
            let p = d.join(DB_FILE);
            (Connection::open(&p), p.display().to_string())
        }
    };
    let conn = conn.map_err(db_err(&path))?;
    init(&conn).map_err(db_err(&path))?;
    let v: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(db_err(&path))?;
    if v > SCHEMA_VERSION {
        return Err(JournalError::new(
            "journal.schema",
            format!(
                "run journal `{path}` has schema version {v}; this aisc reads {SCHEMA_VERSION}"
            ),
        ));
    }
    Ok((conn, path))
}

fn init(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS runs (
            id TEXT PRIMARY KEY,
            status TEXT NOT NULL,
            pid INTEGER NOT NULL,
            started_ms INTEGER NOT NULL,
            ended_ms INTEGER,
            program TEXT NOT NULL,
            artifact BLOB NOT NULL,
            artifact_sha256 TEXT NOT NULL,
            entry TEXT,
            args TEXT NOT NULL,
            result TEXT,
            error TEXT,
            resumes INTEGER NOT NULL DEFAULT 0
         );
         CREATE TABLE IF NOT EXISTS entries (
            run TEXT NOT NULL,
            key TEXT NOT NULL,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            op TEXT NOT NULL,
            input_hash TEXT NOT NULL,
            value TEXT,
            tokens INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (run, key)
         );",
    )?;
    let v: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if v == 0 {
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    }
    Ok(())
}

fn info_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<(RunInfo, i64)> {
    let status: String = r.get("status")?;
    let pid: i64 = r.get("pid")?;
    let status = match status.as_str() {
        "completed" => Status::Completed,
        "failed" => Status::Failed,
        "paused" => Status::Paused,
        _ => Status::Running,
    };
    Ok((
        RunInfo {
            id: r.get("id")?,
            status,
            started_ms: r.get("started_ms")?,
            ended_ms: r.get("ended_ms")?,
            entry: r.get("entry")?,
            program: r.get("program")?,
            entries: r.get("n_entries")?,
            in_doubt: r.get("n_doubt")?,
            error: r.get("error")?,
            resumes: r.get("resumes")?,
        },
        pid,
    ))
}

const INFO_SQL: &str =
    "SELECT id, status, pid, started_ms, ended_ms, entry, program, error, resumes,
    (SELECT COUNT(*) FROM entries e WHERE e.run = runs.id AND e.kind = 'done') AS n_entries,
    (SELECT COUNT(*) FROM entries e WHERE e.run = runs.id AND e.kind = 'intent') AS n_doubt
    FROM runs";

fn fix_status((mut info, pid): (RunInfo, i64)) -> RunInfo {
    if info.status == Status::Running && !pid_alive(pid) {
        info.status = Status::Interrupted;
    }
    info
}

/// Every run journaled in `dir`, oldest first.
pub fn list_runs(dir: &Path) -> Result<Vec<RunInfo>, JournalError> {
    if !dir.join(DB_FILE).exists() {
        return Ok(Vec::new());
    }
    let (conn, path) = open_db(Some(dir))?;
    let mut st = conn
        .prepare(&format!("{INFO_SQL} ORDER BY started_ms, id"))
        .map_err(db_err(&path))?;
    let rows = st.query_map([], info_of).map_err(db_err(&path))?;
    let mut out = Vec::new();
    for r in rows {
        out.push(fix_status(r.map_err(db_err(&path))?));
    }
    Ok(out)
}

/// The run `id` (or the most recent one for `last`) with what resuming needs.
pub fn load_run(dir: &Path, id: &str) -> Result<StoredRun, JournalError> {
    if !dir.join(DB_FILE).exists() {
        return Err(JournalError::new(
            "journal.missing",
            format!("no run journal in `{}`", dir.display()),
        ));
    }
    let (conn, path) = open_db(Some(dir))?;
    let id = if id == "last" {
        conn.query_row(
            "SELECT id FROM runs ORDER BY started_ms DESC, id DESC LIMIT 1",
            [],
            |r| r.get::<_, String>(0),
        )
        .optional()
        .map_err(db_err(&path))?
        .ok_or_else(|| JournalError::new("journal.no_run", "no run in the journal"))?
    } else {
        id.to_string()
    };
    let info = conn
        .query_row(&format!("{INFO_SQL} WHERE id = ?1"), [&id], info_of)
        .optional()
        .map_err(db_err(&path))?
        .map(fix_status)
        .ok_or_else(|| JournalError::new("journal.no_run", format!("no run `{id}` in `{path}`")))?;
    let (artifact, sha, args): (Vec<u8>, String, String) = conn
        .query_row(
            "SELECT artifact, artifact_sha256, args FROM runs WHERE id = ?1",
            [&id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .map_err(db_err(&path))?;
    if hex(&Sha256::digest(&artifact)) != sha {
        return Err(JournalError::new(
            "journal.corrupt",
            format!("the program stored for run `{id}` does not match its SHA-256"),
        ));
    }
    let args: Vec<(String, Json)> = serde_json::from_str(&args).map_err(|e| {
        JournalError::new(
            "journal.corrupt",
            format!("the arguments stored for run `{id}` are malformed: {e}"),
        )
    })?;
    Ok(StoredRun {
        info,
        artifact,
        args,
    })
}

/// One journaled step of a run (an effect op: LLM call, tool call, memory
/// write, ...), as `aisc trace` and `aisc runs show` list them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub seq: i64,
    /// `done`, `intent` (started, never completed: in doubt) or `failed`.
    pub kind: String,
    pub op: String,
    pub tokens: i64,
}

/// A run's stored outcome and steps: what a run killed after its
/// "completed" write but before printing its result still has on disk.
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub info: RunInfo,
    pub args: Vec<(String, Json)>,
    /// The entry flow's result, for a completed run.
    pub result: Option<Json>,
    pub steps: Vec<Step>,
}

/// The run `id` (or `last`) with its result and journaled steps (read only).
pub fn load_record(dir: &Path, id: &str) -> Result<RunRecord, JournalError> {
    let stored = load_run(dir, id)?;
    let (conn, path) = open_db(Some(dir))?;
    let id = stored.info.id.clone();
    let result: Option<String> = conn
        .query_row("SELECT result FROM runs WHERE id = ?1", [&id], |r| r.get(0))
        .map_err(db_err(&path))?;
    let result = result
        .map(|t| {
            serde_json::from_str(&t).map_err(|e| {
                JournalError::new(
                    "journal.corrupt",
                    format!("the result stored for run `{id}` is malformed: {e}"),
                )
            })
        })
        .transpose()?;
    let mut stmt = conn
        .prepare("SELECT seq, kind, op, tokens FROM entries WHERE run = ?1 ORDER BY seq, key")
        .map_err(db_err(&path))?;
    let steps = stmt
        .query_map([&id], |r| {
            Ok(Step {
                seq: r.get(0)?,
                kind: r.get(1)?,
                op: r.get(2)?,
                tokens: r.get(3)?,
            })
        })
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(db_err(&path))?;
    Ok(RunRecord {
        info: stored.info,
        args: stored.args,
        result,
        steps,
    })
}

impl Journal {
    /// Starts journaling a new run `run_id` in `dir` (`None`: in memory).
    pub fn begin(
        dir: Option<&Path>,
        run_id: &str,
        program: &str,
        artifact: &[u8],
        entry: Option<&str>,
        args: &[(String, Json)],
    ) -> Result<Journal, JournalError> {
        let (conn, path) = open_db(dir)?;
        let args_text = serde_json::to_string(args).unwrap_or_else(|_| "[]".into());
        conn.execute(
            "INSERT INTO runs (id, status, pid, started_ms, program, artifact, artifact_sha256, entry, args)
             VALUES (?1, 'running', ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                run_id,
                i64::from(std::process::id()),
                now_ms(),
                program,
                artifact,
                hex(&Sha256::digest(artifact)),
                entry,
                args_text
            ],
        )
        .map_err(db_err(&path))?;
        Ok(Journal::with(conn, path, run_id, HashMap::new()))
    }

    /// Reopens run `run_id` for resuming: its entries are replayed. A
    /// running run whose process is alive cannot be resumed.
    pub fn resume(dir: &Path, run_id: &str) -> Result<Journal, JournalError> {
        let (conn, path) = open_db(Some(dir))?;
        let (status, pid): (String, i64) = conn
            .query_row(
                "SELECT status, pid FROM runs WHERE id = ?1",
                [run_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(db_err(&path))?
            .ok_or_else(|| {
                JournalError::new("journal.no_run", format!("no run `{run_id}` in `{path}`"))
            })?;
        if status == "running" && pid_alive(pid) && pid != i64::from(std::process::id()) {
            return Err(JournalError::new(
                "journal.busy",
                format!("run `{run_id}` is still running (pid {pid})"),
            ));
        }
        if status == "completed" {
            return Err(JournalError::new(
                "journal.completed",
                format!("run `{run_id}` has already completed"),
            ));
        }
        let mut replay = HashMap::new();
        {
            let mut st = conn
                .prepare("SELECT key, kind, input_hash, value FROM entries WHERE run = ?1")
                .map_err(db_err(&path))?;
            let rows = st
                .query_map([run_id], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        Rec {
                            kind: r.get(1)?,
                            hash: r.get(2)?,
                            value: r.get(3)?,
                        },
                    ))
                })
                .map_err(db_err(&path))?;
            for r in rows {
                let (k, rec) = r.map_err(db_err(&path))?;
                replay.insert(k, rec);
            }
        }
        conn.execute(
            "UPDATE runs SET status = 'running', pid = ?2, ended_ms = NULL, error = NULL,
             resumes = resumes + 1 WHERE id = ?1",
            params![run_id, i64::from(std::process::id())],
        )
        .map_err(db_err(&path))?;
        let prior: (i64, i64) = conn
            .query_row(
                &format!(
                    "SELECT COUNT(*), COALESCE(SUM(tokens), 0) FROM entries
                     WHERE run = ?1 AND kind = 'done' AND op IN ({})",
                    llm_op_names_sql()
                ),
                [run_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(db_err(&path))?;
        let mut j = Journal::with(conn, path, run_id, replay);
        j.prior = (
            u64::try_from(prior.0).unwrap_or(0),
            u64::try_from(prior.1).unwrap_or(0),
        );
        Ok(j)
    }

    /// `(LLM calls, tokens)` recorded by earlier attempts of this run.
    pub fn prior_usage(&self) -> (u64, u64) {
        self.prior
    }

    fn with(conn: Connection, path: String, run_id: &str, replay: HashMap<String, Rec>) -> Journal {
        Journal {
            conn: Mutex::new(conn),
            path,
            run_id: run_id.to_string(),
            replay,
            writes: AtomicU64::new(0),
            observer: WRITE_OBSERVER.get().cloned(),
            idempotent: HashSet::new(),
            replayed: AtomicU64::new(0),
            prior: (0, 0),
        }
    }

    /// Tools that may be re-run when their completion is in doubt.
    pub fn set_idempotent_tools(&mut self, names: impl IntoIterator<Item = String>) {
        self.idempotent.extend(names);
    }

    pub fn is_idempotent(&self, tool: &str) -> bool {
        self.idempotent.contains(tool)
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Ops replayed from earlier attempts in this process.
    pub fn replayed(&self) -> u64 {
        self.replayed.load(Ordering::Relaxed)
    }

    /// Looks up an op of an earlier attempt.
    pub fn lookup(&self, key: &str, hash: &str) -> Replay {
        match self.replay.get(key) {
            Some(r) if r.hash == hash && r.kind == "done" => {
                match r
                    .value
                    .as_deref()
                    .and_then(|v| serde_json::from_str::<Json>(v).ok())
                    .and_then(|j| decode_vals(&j))
                {
                    Some(vs) => {
                        self.replayed.fetch_add(1, Ordering::Relaxed);
                        Replay::Done(vs)
                    }
                    None => Replay::Miss,
                }
            }
            Some(r) if r.hash == hash && r.kind == "intent" => Replay::InDoubt,
            _ => Replay::Miss,
        }
    }

    fn write(
        &self,
        key: &str,
        kind: &str,
        op: &str,
        hash: &str,
        value: Option<String>,
        tokens: u64,
    ) -> Result<(), JournalError> {
        {
            let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
            let seq = self.writes.load(Ordering::Relaxed);
            conn.execute(
                "INSERT OR REPLACE INTO entries (run, key, seq, kind, op, input_hash, value, tokens)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    self.run_id,
                    key,
                    i64::try_from(seq).unwrap_or(i64::MAX),
                    kind,
                    op,
                    hash,
                    value,
                    i64::try_from(tokens).unwrap_or(i64::MAX)
                ],
            )
            .map_err(|e| JournalError::new("journal.write", format!("cannot write the run journal `{}`: {e}", self.path)))?;
        }
        self.count_write();
        Ok(())
    }

    fn count_write(&self) {
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(o) = &self.observer {
            o.after_write(n);
        }
    }

    /// Records that a side-effecting call is about to start.
    pub fn intent(&self, key: &str, op: &str, hash: &str) -> Result<(), JournalError> {
        self.write(key, "intent", op, hash, None, 0)
    }

    /// Records that a side-effecting call failed (it completed: an error is
    /// an answer), so a resume runs it again rather than reporting it in doubt.
    pub fn failed(&self, key: &str, op: &str, hash: &str) -> Result<(), JournalError> {
        self.write(key, "failed", op, hash, None, 0)
    }

    /// Records an op's results (and the tokens an LLM call used); returns
    /// once they are durable.
    pub fn record(
        &self,
        key: &str,
        op: &str,
        hash: &str,
        results: &[Val],
        tokens: u64,
    ) -> Result<(), JournalError> {
        let v = encode_vals(results).to_string();
        self.write(key, "done", op, hash, Some(v), tokens)
    }

    /// Records that the run stops at a `pause` (`key`) until a person
    /// answers `message`; the run is then `paused`, not failed.
    pub fn waiting(&self, key: &str, hash: &str, message: &str) -> Result<(), JournalError> {
        self.write(
            key,
            "waiting",
            "pause",
            hash,
            Some(Json::from(message).to_string()),
            0,
        )
    }

    /// Answers the `pause` a paused run waits at with `input` (its value
    /// when the run resumes). `Ok(None)` when the run waits for nothing;
    /// else the message that was answered.
    pub fn answer(&mut self, input: &Json) -> Result<Option<String>, JournalError> {
        let waiting: Option<(String, String, Option<String>)> = {
            let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
            conn.query_row(
                "SELECT key, input_hash, value FROM entries WHERE run = ?1 AND kind = 'waiting'",
                [&self.run_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(db_err(&self.path))?
        };
        let Some((key, hash, message)) = waiting else {
            return Ok(None);
        };
        let message = message
            .and_then(|m| serde_json::from_str::<Json>(&m).ok())
            .and_then(|m| m.as_str().map(str::to_string))
            .unwrap_or_default();
        let results = [Val::from_json(input.clone()), Val::Ord];
        self.record(&key, "pause", &hash, &results, 0)?;
        self.replay.insert(
            key,
            Rec {
                hash,
                kind: "done".into(),
                value: Some(encode_vals(&results).to_string()),
            },
        );
        Ok(Some(message))
    }

    /// Marks the run completed or failed (or paused, when it stopped at a
    /// `pause` that is waiting).
    pub fn finish(&self, outcome: Result<&Json, &str>) -> Result<(), JournalError> {
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let waiting: Option<String> = conn
            .query_row(
                "SELECT value FROM entries WHERE run = ?1 AND kind = 'waiting'",
                [&self.run_id],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err(&self.path))?;
        let (status, result, error) = match (outcome, waiting) {
            (Ok(v), _) => ("completed", Some(v.to_string()), None),
            // What it waits for, as `aisc runs` shows it.
            (Err(_), Some(m)) => {
                let m = serde_json::from_str::<Json>(&m)
                    .ok()
                    .and_then(|m| m.as_str().map(str::to_string))
                    .unwrap_or(m);
                ("paused", None, Some(format!("waiting for input: {m}")))
            }
            (Err(e), None) => ("failed", None, Some(e.to_string())),
        };
        conn.execute(
            "UPDATE runs SET status = ?2, ended_ms = ?3, result = ?4, error = ?5 WHERE id = ?1",
            params![self.run_id, status, now_ms(), result, error],
        )
        .map_err(db_err(&self.path))?;
        drop(conn);
        Ok(())
    }
}

/// The mnemonics of the LLM ops, as a SQL list (`'ask', 'think', ...`),
/// from the op table: entries record an op by its mnemonic.
pub fn llm_op_names_sql() -> String {
    ais_ir::Opcode::ALL
        .iter()
        .filter(|op| op.info().llm.is_some())
        .map(|op| format!("'{}'", op.mnemonic()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The journal directory for a memory directory argument (`None`: ephemeral).
pub fn dir_of(storage: &crate::aam::Storage) -> Option<PathBuf> {
    match storage {
        crate::aam::Storage::Dir(d) => Some(d.clone()),
        crate::aam::Storage::Ephemeral => None,
    }
}

/// Limits of one run. Exceeding one stops the run (not catchable by `try`)
/// with code `budget.<what>` and payload `{limit, used}`; the journal keeps
/// every completed op, so the run can be resumed with a higher limit.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Budget {
    /// Input + output tokens of all LLM calls of the run (every attempt).
    pub tokens: Option<u64>,
    /// LLM calls of the run (every attempt; replayed calls are not repeated).
    pub llm_calls: Option<u64>,
    /// Wall-clock limit of this attempt, in milliseconds.
    pub deadline_ms: Option<u64>,
    /// Cost in USD of this run's LLM calls, priced by `prices`.
    pub cost_usd: Option<f64>,
    /// Model name (or `*`) -> (USD per 1M input tokens, USD per 1M output tokens).
    pub prices: Vec<(String, f64, f64)>,
    /// Per-agent limits (this attempt); agent `*` applies to every agent
    /// without its own entry.
    pub agents: Vec<AgentLimit>,
}

/// The limits of one agent's LLM use within a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentLimit {
    pub agent: String,
    pub tokens: Option<u64>,
    pub llm_calls: Option<u64>,
}

impl Budget {
    pub fn is_empty(&self) -> bool {
        self.tokens.is_none()
            && self.llm_calls.is_none()
            && self.deadline_ms.is_none()
            && self.cost_usd.is_none()
            && self.agents.is_empty()
    }

    /// The limits of `agent` (its own entry, else `*`).
    pub fn agent(&self, agent: &str) -> Option<&AgentLimit> {
        self.agents
            .iter()
            .find(|a| a.agent == agent)
            .or_else(|| self.agents.iter().find(|a| a.agent == "*"))
    }

    /// Cost in micro-dollars of one call.
    pub fn cost_micro_usd(&self, model: &str, input: u64, output: u64) -> u64 {
        let Some((_, pi, po)) = self
            .prices
            .iter()
            .find(|(m, _, _)| m == model)
            .or_else(|| self.prices.iter().find(|(m, _, _)| m == "*"))
        else {
            return 0;
        };
        (input as f64 * pi + output as f64 * po).round().max(0.0) as u64
    }
}
