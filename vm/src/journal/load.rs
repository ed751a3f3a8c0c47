//! Reading a run back: what resuming needs, and a run's stored outcome
//! and steps (read only, for `aisc runs`, `show` and reports).

use crate::store::rows::{JournalError, RunInfo, Step, DB_FILE};
use crate::store::sqlite::{hex, SqliteStore};
use crate::store::{RunRow, Store};
use serde_json::Value as Json;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;

/// What a run needs to be resumed.
#[derive(Debug, Clone)]
pub struct StoredRun {
    pub info: RunInfo,
    pub artifact: Vec<u8>,
    pub args: Vec<(String, Json)>,
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

/// The journal of `dir` to read: its own connection, so what it reads is
/// the file as it is now (the runs writing it share
/// [`SqliteStore::shared`]).
fn sqlite_dir(dir: &Path) -> Result<Arc<dyn Store>, JournalError> {
    Ok(Arc::new(SqliteStore::open(Some(dir))?))
}

/// Every run journaled in `dir`, oldest first.
pub fn list_runs(dir: &Path) -> Result<Vec<RunInfo>, JournalError> {
    if !dir.join(DB_FILE).exists() {
        return Ok(Vec::new());
    }
    sqlite_dir(dir)?.list_runs()
}

/// The run `id` (or the most recent one for `last`) with what resuming needs.
pub fn load_run(dir: &Path, id: &str) -> Result<StoredRun, JournalError> {
    if !dir.join(DB_FILE).exists() {
        return Err(JournalError::new(
            "journal.missing",
            format!("no run journal in `{}`", dir.display()),
        ));
    }
    load_run_in(&*sqlite_dir(dir)?, id)
}

fn row_of(store: &dyn Store, id: &str) -> Result<RunRow, JournalError> {
    let id = if id == "last" {
        store
            .latest()?
            .ok_or_else(|| JournalError::new("journal.no_run", "no run in the journal"))?
    } else {
        id.to_string()
    };
    store.run_row(&id)?.ok_or_else(|| {
        JournalError::new(
            "journal.no_run",
            format!("no run `{id}` in `{}`", store.location()),
        )
    })
}

/// [`load_run`] from any store.
pub fn load_run_in(store: &dyn Store, id: &str) -> Result<StoredRun, JournalError> {
    let row = row_of(store, id)?;
    stored_of(row).map(|(s, _)| s)
}

fn stored_of(row: RunRow) -> Result<(StoredRun, Option<String>), JournalError> {
    let id = row.info.id.clone();
    if hex(&Sha256::digest(&row.artifact)) != row.artifact_sha256 {
        return Err(JournalError::new(
            "journal.corrupt",
            format!("the program stored for run `{id}` does not match its SHA-256"),
        ));
    }
    let args: Vec<(String, Json)> = serde_json::from_str(&row.args).map_err(|e| {
        JournalError::new(
            "journal.corrupt",
            format!("the arguments stored for run `{id}` are malformed: {e}"),
        )
    })?;
    Ok((
        StoredRun {
            info: row.info,
            artifact: row.artifact,
            args,
        },
        row.result,
    ))
}

/// The run `id` (or `last`) with its result and journaled steps (read only).
pub fn load_record(dir: &Path, id: &str) -> Result<RunRecord, JournalError> {
    if !dir.join(DB_FILE).exists() {
        return Err(JournalError::new(
            "journal.missing",
            format!("no run journal in `{}`", dir.display()),
        ));
    }
    load_record_in(&*sqlite_dir(dir)?, id)
}

/// [`load_record`] from any store.
pub fn load_record_in(store: &dyn Store, id: &str) -> Result<RunRecord, JournalError> {
    let (stored, result) = stored_of(row_of(store, id)?)?;
    let id = stored.info.id.clone();
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
    let steps = store.steps(&id)?;
    Ok(RunRecord {
        info: stored.info,
        args: stored.args,
        result,
        steps,
    })
}
