//! The run journal: run ids, durable op results, resume.
//!
//! The rows live in a [`crate::store::Store`]: by default one SQLite
//! database per memory directory (`runs.db`, WAL mode), or a PostgreSQL
//! database shared by a fleet of workers (`--store postgres://...`). A run
//! row holds the artifact bytes, entry and arguments, status and pid; an
//! entry row holds the outcome of one completed *effect* op (LLM call, tool
//! call, memory/belief op, print, communicate) keyed by the op's dynamic
//! identity (see [`op_key`]) and a hash of its inputs. Pure ops, calls and
//! control ops are not journaled: on resume they are recomputed from the
//! replayed effects. See `docs/reliability.md`.
//!
//! Durability: every entry is committed before the op's consumers fire
//! (SQLite: group commit within a process; PostgreSQL: group commit,
//! fence-checked). A side-effecting tool call writes an `intent` row
//! first. What is *shown* or is a side effect (an intent, a print, a
//! memory write, a run's outcome) is durable (fsynced) before the write
//! returns; an LLM call's answer and the row of a run nobody was given
//! the id of ([`Journal::begin_unshown_in`]) only survive the process
//! until the next durable write of the process covers them (a lost answer
//! is asked again on resume). See `docs/reliability.md`.
//!
//! Fault injection: a [`WriteObserver`] installed with
//! [`set_write_observer`] sees every journal write as it commits. The
//! product installs none; `ais-testkit` installs one that aborts the process
//! after the N-th write (its test-only `aisc-fault` binary).

mod budget;
mod fork;
mod load;
pub mod record;

pub use budget::{AgentLimit, Budget};
pub use load::{
    list_runs, load_record, load_record_in, load_run, load_run_in, RunRecord, StoredRun,
};

pub use fork::{fork_cost, fork_in, fork_steps, ForkAt, ForkCost, ForkStep, Forked};

pub use crate::store::rows::{llm_op_names, JournalError, RunInfo, Status, Step, DB_FILE};

pub use record::{decode_vals, encode_vals, Record, Resolution};

use crate::store::sqlite::SqliteStore;
use crate::store::{Claim, Entry, NewRun, Store, FENCED};
use crate::value::Val;
use serde_json::Value as Json;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

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

/// The result of looking an op up in the journal.
#[derive(Debug, Clone, PartialEq)]
pub enum Replay {
    /// Not journaled (or journaled with other inputs): execute it.
    Miss,
    /// Completed before: deliver this outcome, do not execute.
    Done(Record),
    /// A side-effecting call was started and never recorded as completed.
    InDoubt,
    /// It was in doubt and a person decided what to do with it.
    Resolved(Resolution),
}

/// The source a `pause` answer carries (`crate::ifc`).
const INPUT_SOURCE: &str = "@input";

/// Source names as stored in an entry's `labels` column.
fn encode_labels(names: &[String]) -> String {
    Json::from(names.to_vec()).to_string()
}

/// A hash of an op's inputs (hex SHA-256 of their tagged JSON).
pub fn input_hash(args: &[Val]) -> String {
    let mut h = Sha256::new();
    h.update(encode_vals(args).to_string().as_bytes());
    hex(&h.finalize()[..16])
}

use crate::store::sqlite::hex;

/// The entry kind of a person's decision about an op in doubt.
const RESOLVED: &str = "resolved";

fn unreadable(key: &str, why: &str) -> JournalError {
    JournalError::new(
        record::UNREADABLE,
        format!("the journal entry of op `{key}` cannot be read ({why}); it is not repeated"),
    )
}

fn decode_record(key: &str, value: Option<&str>) -> Result<Record, JournalError> {
    let text = value.ok_or_else(|| unreadable(key, "no value"))?;
    Record::decode(text).map_err(|e| unreadable(key, &e))
}

struct Rec {
    hash: String,
    kind: String,
    op: String,
    seq: i64,
    value: Option<String>,
    /// Source names of the value's label (`None`: not recorded).
    labels: Option<String>,
}

/// The journal of one run (shared by the run's threads).
pub struct Journal {
    store: Arc<dyn Store>,
    run_id: String,
    /// The fencing token this process writes under (see `crate::store`).
    fence: i64,
    /// Entries of earlier attempts of this run (resume), by key.
    replay: HashMap<String, Rec>,
    writes: AtomicU64,
    observer: Option<Arc<dyn WriteObserver>>,
    idempotent: HashSet<String>,
    pub(crate) replayed: AtomicU64,
    /// LLM calls and tokens recorded by earlier attempts (budgets are per run).
    prior: (u64, u64),
    /// Set once a write was refused as fenced: later writes fail at once.
    fenced: AtomicBool,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("store", &self.store.location())
            .field("run_id", &self.run_id)
            .field("fence", &self.fence)
            .finish_non_exhaustive()
    }
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
        let store: Arc<dyn Store> = match dir {
            Some(d) => SqliteStore::shared(d)?,
            None => Arc::new(SqliteStore::open(None)?),
        };
        Journal::begin_in(store, run_id, program, artifact, entry, args)
    }

    /// [`Journal::begin`] in any store.
    pub fn begin_in(
        store: Arc<dyn Store>,
        run_id: &str,
        program: &str,
        artifact: &[u8],
        entry: Option<&str>,
        args: &[(String, Json)],
    ) -> Result<Journal, JournalError> {
        Journal::begin_row(store, run_id, program, artifact, entry, args, false)
    }

    /// [`Journal::begin_in`] for a run whose id nobody is given before
    /// its end (`aisc serve`'s `POST /v1/runs?wait=true`): the run row is
    /// not waited for on disk ([`Store::begin_run_unshown`]); the run's
    /// outcome, durable before it is returned, makes it durable with it.
    pub fn begin_unshown_in(
        store: Arc<dyn Store>,
        run_id: &str,
        program: &str,
        artifact: &[u8],
        entry: Option<&str>,
        args: &[(String, Json)],
    ) -> Result<Journal, JournalError> {
        Journal::begin_row(store, run_id, program, artifact, entry, args, true)
    }

    fn begin_row(
        store: Arc<dyn Store>,
        run_id: &str,
        program: &str,
        artifact: &[u8],
        entry: Option<&str>,
        args: &[(String, Json)],
        unshown: bool,
    ) -> Result<Journal, JournalError> {
        let args_text = serde_json::to_string(args).unwrap_or_else(|_| "[]".into());
        let run = NewRun {
            id: run_id,
            program,
            artifact,
            entry,
            args: &args_text,
        };
        let fence = if unshown {
            store.begin_run_unshown(&run)?
        } else {
            store.begin_run(&run)?
        };
        Ok(Journal::with(store, run_id, fence, HashMap::new()))
    }

    /// Reopens run `run_id` for resuming: its entries are replayed. A
    /// running run whose process is alive cannot be resumed.
    pub fn resume(dir: &Path, run_id: &str) -> Result<Journal, JournalError> {
        Journal::resume_in(SqliteStore::shared(dir)?, run_id)
    }

    /// [`Journal::resume`] in any store.
    pub fn resume_in(store: Arc<dyn Store>, run_id: &str) -> Result<Journal, JournalError> {
        let state = store.run_state(run_id)?.ok_or_else(|| {
            JournalError::new(
                "journal.no_run",
                format!("no run `{run_id}` in `{}`", store.location()),
            )
        })?;
        if let Some(owner) = &state.owned_elsewhere {
            return Err(JournalError::new(
                "journal.busy",
                format!("run `{run_id}` is still running ({owner})"),
            ));
        }
        if state.status == "completed" {
            return Err(JournalError::new(
                "journal.completed",
                format!("run `{run_id}` has already completed"),
            ));
        }
        let replay = replay_of(&*store, run_id)?;
        let fence = store.mark_resumed(run_id)?;
        Journal::reopened(store, run_id, fence, replay)
    }

    /// The journal of a run a worker acquired from the queue (`claim`):
    /// entries of earlier attempts replayed, writes under the claim's fence.
    pub fn claimed(store: Arc<dyn Store>, claim: &Claim) -> Result<Journal, JournalError> {
        let replay = replay_of(&*store, &claim.id)?;
        Journal::reopened(store, &claim.id, claim.fence, replay)
    }

    fn reopened(
        store: Arc<dyn Store>,
        run_id: &str,
        fence: i64,
        replay: HashMap<String, Rec>,
    ) -> Result<Journal, JournalError> {
        let llm: Vec<&str> = llm_op_names();
        let prior = store.usage(run_id, &llm)?;
        let mut j = Journal::with(store, run_id, fence, replay);
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

    fn with(
        store: Arc<dyn Store>,
        run_id: &str,
        fence: i64,
        replay: HashMap<String, Rec>,
    ) -> Journal {
        Journal {
            store,
            run_id: run_id.to_string(),
            fence,
            replay,
            writes: AtomicU64::new(0),
            observer: WRITE_OBSERVER.get().cloned(),
            idempotent: HashSet::new(),
            replayed: AtomicU64::new(0),
            prior: (0, 0),
            fenced: AtomicBool::new(false),
        }
    }

    /// The store this journal writes to.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The fencing token this journal writes under.
    pub fn fence(&self) -> i64 {
        self.fence
    }

    /// A write was refused because another worker owns the run now.
    pub fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::SeqCst)
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

    /// Looks up an op of an earlier attempt. A record that cannot be
    /// read is an error (`journal.unreadable`), never a miss: a miss
    /// would repeat a call that was paid for or had side effects.
    pub fn lookup(&self, key: &str, hash: &str) -> Result<Replay, JournalError> {
        let Some(r) = self.replay.get(key).filter(|r| r.hash == hash) else {
            return Ok(Replay::Miss);
        };
        match r.kind.as_str() {
            "done" => {
                let record = decode_record(key, r.value.as_deref())?;
                self.replayed.fetch_add(1, Ordering::Relaxed);
                Ok(Replay::Done(record))
            }
            "intent" => Ok(Replay::InDoubt),
            RESOLVED => match decode_record(key, r.value.as_deref())? {
                Record::Resolved { decision } => Ok(Replay::Resolved(decision)),
                other => Err(unreadable(key, &format!("a {} record", other.kind()))),
            },
            _ => Ok(Replay::Miss),
        }
    }

    /// The key a tool that deduplicates is given for op `key`: the same in
    /// every attempt of this run (a retry after a kill carries it again),
    /// different in every other run.
    pub fn idempotency_key(&self, key: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.run_id.as_bytes());
        h.update([0]);
        h.update(key.as_bytes());
        format!("ais-{}", hex(&h.finalize()[..16]))
    }

    /// The side effects in doubt (started by an earlier attempt, never
    /// recorded as completed): `(key, op)`, in journal order.
    pub fn in_doubt(&self) -> Vec<(String, String)> {
        let mut v: Vec<(i64, String, String)> = self
            .replay
            .iter()
            .filter(|(_, r)| r.kind == "intent")
            .map(|(k, r)| (r.seq, k.clone(), r.op.clone()))
            .collect();
        v.sort();
        v.into_iter().map(|(_, k, o)| (k, o)).collect()
    }

    /// Journals a person's `decision` for the side effects in doubt (all
    /// of them, or the one whose key starts with `op`); returns the keys
    /// resolved. `journal.not_in_doubt` when none matches.
    pub fn resolve(
        &mut self,
        decision: Resolution,
        op: Option<&str>,
    ) -> Result<Vec<String>, JournalError> {
        let chosen: Vec<(String, String)> = self
            .in_doubt()
            .into_iter()
            .filter(|(k, _)| op.is_none_or(|o| k.starts_with(o)))
            .collect();
        if chosen.is_empty() || (op.is_some() && chosen.len() > 1) {
            let what = match op {
                Some(o) if !chosen.is_empty() => format!(
                    "`{o}` names {} ops in doubt; give more of the key",
                    chosen.len()
                ),
                Some(o) => format!("no op in doubt has a key starting with `{o}`"),
                None => "the run has no op in doubt".to_string(),
            };
            return Err(JournalError::new("journal.not_in_doubt", what));
        }
        let record = Record::Resolved { decision };
        for (key, op) in &chosen {
            let Some(hash) = self.replay.get(key).map(|r| r.hash.clone()) else {
                continue;
            };
            self.write(key, RESOLVED, op, &hash, Some(record.encode()), 0, None)?;
            if let Some(r) = self.replay.get_mut(key) {
                r.kind = RESOLVED.into();
                r.value = Some(record.encode());
            }
        }
        Ok(chosen.into_iter().map(|(k, _)| k).collect())
    }

    /// The lines journaled as printed by earlier attempts, by their place
    /// in the run's output.
    pub fn printed(&self) -> Result<Vec<(u64, String, String)>, JournalError> {
        let mut v = Vec::new();
        for (k, r) in &self.replay {
            if r.kind == "done" && r.op == "print" {
                if let Record::Printed { n, agent, line } = decode_record(k, r.value.as_deref())? {
                    v.push((n, agent, line));
                }
            }
        }
        v.sort();
        Ok(v)
    }

    fn check_fence(&self, r: Result<(), JournalError>) -> Result<(), JournalError> {
        if let Err(e) = &r {
            if e.code == FENCED {
                self.fenced.store(true, Ordering::SeqCst);
            }
        }
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        key: &str,
        kind: &str,
        op: &str,
        hash: &str,
        value: Option<String>,
        tokens: u64,
        labels: Option<String>,
    ) -> Result<(), JournalError> {
        if self.is_fenced() {
            return Err(crate::store::fenced(&self.run_id, self.fence));
        }
        let seq = self.writes.load(Ordering::Relaxed);
        let entry = Entry {
            key: key.to_string(),
            seq: i64::try_from(seq).unwrap_or(i64::MAX),
            kind: kind.to_string(),
            op: op.to_string(),
            hash: hash.to_string(),
            value,
            tokens: i64::try_from(tokens).unwrap_or(i64::MAX),
            labels,
        };
        let entries = [entry];
        let written = if kind == "done" && is_llm_op(op) {
            self.store.write_unshown(&self.run_id, self.fence, &entries)
        } else {
            self.store.write(&self.run_id, self.fence, &entries)
        };
        self.check_fence(written)?;
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
        self.write(key, "intent", op, hash, None, 0, None)
    }

    /// Records that a side-effecting call failed (it completed: an error is
    /// an answer), so a resume runs it again rather than reporting it in doubt.
    pub fn failed(&self, key: &str, op: &str, hash: &str) -> Result<(), JournalError> {
        self.write(key, "failed", op, hash, None, 0, None)
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
        self.record_labeled(key, op, hash, results, tokens, None)
    }

    /// [`Journal::record`] with the results' information-flow label as
    /// source names (`None`: not tracked, recomputed on resume).
    pub fn record_labeled(
        &self,
        key: &str,
        op: &str,
        hash: &str,
        results: &[Val],
        tokens: u64,
        labels: Option<&[String]>,
    ) -> Result<(), JournalError> {
        self.record_entry(key, op, hash, &Record::values(results), tokens, labels)
    }

    /// Durably records an op's outcome as `record`.
    pub fn record_entry(
        &self,
        key: &str,
        op: &str,
        hash: &str,
        record: &Record,
        tokens: u64,
        labels: Option<&[String]>,
    ) -> Result<(), JournalError> {
        let l = labels.map(encode_labels);
        self.write(key, "done", op, hash, Some(record.encode()), tokens, l)
    }

    /// The source names an earlier attempt recorded with op `key`'s
    /// results; `None` when it recorded none (an older journal, the
    /// policy off) or the entry is malformed.
    pub fn recorded_labels(&self, key: &str) -> Option<Vec<String>> {
        let text = self.replay.get(key)?.labels.as_deref()?;
        serde_json::from_str::<Vec<String>>(text).ok()
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
            None,
        )
    }

    /// Answers the `pause` a paused run waits at with `input` (its value
    /// when the run resumes). `Ok(None)` when the run waits for nothing;
    /// else the message that was answered.
    pub fn answer(&mut self, input: &Json) -> Result<Option<String>, JournalError> {
        let Some((key, hash, message)) = self.store.waiting(&self.run_id)? else {
            return Ok(None);
        };
        let message = message
            .and_then(|m| serde_json::from_str::<Json>(&m).ok())
            .and_then(|m| m.as_str().map(str::to_string))
            .unwrap_or_default();
        let results = [Val::from_json(input.clone()), Val::Ord];
        let labels = [INPUT_SOURCE.to_string()];
        self.record_labeled(&key, "pause", &hash, &results, 0, Some(&labels))?;
        self.replay.insert(
            key,
            Rec {
                hash,
                kind: "done".into(),
                op: "pause".into(),
                seq: 0,
                value: Some(Record::values(&results).encode()),
                labels: Some(encode_labels(&[INPUT_SOURCE.to_string()])),
            },
        );
        Ok(Some(message))
    }

    /// Marks the run completed or failed (or paused, when it stopped at a
    /// `pause` that is waiting).
    pub fn finish(&self, outcome: Result<&Json, &str>) -> Result<(), JournalError> {
        if self.is_fenced() {
            return Err(crate::store::fenced(&self.run_id, self.fence));
        }
        let waiting = self.store.waiting(&self.run_id)?.and_then(|(_, _, m)| m);
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
        let r = self.store.finish(
            &self.run_id,
            self.fence,
            status,
            result.as_deref(),
            error.as_deref(),
        );
        self.check_fence(r)
    }
}

fn replay_of(store: &dyn Store, run_id: &str) -> Result<HashMap<String, Rec>, JournalError> {
    Ok(store
        .entries(run_id)?
        .into_iter()
        .map(|e| {
            (
                e.key,
                Rec {
                    kind: e.kind,
                    op: e.op,
                    seq: e.seq,
                    hash: e.hash,
                    value: e.value,
                    labels: e.labels,
                },
            )
        })
        .collect())
}

/// Whether `op` (a mnemonic) is an LLM op: its answer is not a side
/// effect, so its entry need not be durable before the run goes on
/// ([`Store::write_unshown`]).
fn is_llm_op(op: &str) -> bool {
    static NAMES: OnceLock<HashSet<&'static str>> = OnceLock::new();
    NAMES
        .get_or_init(|| llm_op_names().into_iter().collect())
        .contains(op)
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

/// Where `aisc` notes which of run `run_id`'s printed lines reached its
/// stdout (see the scheduler's `gate/outbox.rs`).
pub fn marks_path(dir: &Path, run_id: &str) -> PathBuf {
    let safe: String = run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    dir.join("shown").join(safe)
}

/// The journal directory for a memory directory argument (`None`: ephemeral).
pub fn dir_of(storage: &crate::store::Storage) -> Option<PathBuf> {
    match storage {
        crate::store::Storage::Dir(d) => Some(d.clone()),
        crate::store::Storage::Ephemeral => None,
    }
}
