//! The hedges' latency history across processes: `latency.json` in the
//! memory directory (`.apxm/`). A fresh `aisc run` has seen no answers, so
//! without it a hedge waits for most of a fan-out before it knows what
//! "late" means; with it, a process starts from the last [`WINDOW`]
//! latencies per backend and op kind that earlier processes observed.
//!
//! This module only reads, merges and writes the file; which file the
//! process uses, and the seeding of the hedges from it, are the parent's
//! (`super::attach_history`, `super::save_history`). The file is only a
//! hint: a missing one is empty, an unreadable or corrupt one is ignored
//! with a warning, and a failed write costs the history, never the run.

use super::hedge::{Fresh, Seed};
use super::sketch::WINDOW;
use crate::llm::LlmOpKind;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file's name in the memory directory.
pub const FILE: &str = "latency.json";
/// The file format this code writes; any other is ignored.
const VERSION: u32 = 1;
/// Backends kept in the file (a configuration names far fewer).
const MAX_BACKENDS: usize = 64;
/// A file larger than this is not read (it cannot be one this code wrote:
/// 64 backends × 8 kinds × 256 latencies fit well below).
const MAX_BYTES: u64 = 8 << 20;

/// Latencies in microseconds, oldest first, by backend and op kind name.
type Latencies = BTreeMap<String, BTreeMap<String, Vec<u64>>>;

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct HistoryFile {
    version: u32,
    backends: Latencies,
    /// Unspent hedge credit by backend, in millionths of a request (absent
    /// in files written before it was kept).
    #[serde(default)]
    credit: BTreeMap<String, u64>,
}

/// Credit kept per backend at most: a thousand calls' worth at the
/// largest `max_extra` (each process caps it again at its own).
const MAX_CREDIT: u64 = 1000 * 1_000_000;

/// Why the history could not be used or kept. Never fatal: the edge shows
/// it as a warning and the run goes on.
#[derive(Debug, thiserror::Error)]
pub enum HistoryWarning {
    #[error("latency history {path}: cannot read it ({reason}); hedges start without history")]
    Unreadable { path: PathBuf, reason: String },
    #[error("latency history {path}: not a latency history file ({reason}); it is ignored and will be replaced")]
    Corrupt { path: PathBuf, reason: String },
    #[error(
        "latency history {path}: cannot write it ({reason}); this process's latencies are not kept"
    )]
    Unwritable { path: PathBuf, reason: String },
}

impl HistoryWarning {
    /// A stable code for logs and tests.
    pub fn code(&self) -> &'static str {
        match self {
            HistoryWarning::Unreadable { .. } => "H001",
            HistoryWarning::Corrupt { .. } => "H002",
            HistoryWarning::Unwritable { .. } => "H003",
        }
    }
}

/// The latencies of a history file, ready to seed hedges from.
#[derive(Clone, Debug, Default)]
pub(super) struct Loaded {
    backends: Latencies,
    credit: BTreeMap<String, u64>,
}

/// Reads `path` (a missing file is an empty history; an unreadable or
/// corrupt one is empty too, with its warning).
pub(super) fn load(path: &Path) -> (Loaded, Option<HistoryWarning>) {
    match read(path) {
        Ok(f) => (
            Loaded {
                backends: f.backends,
                credit: f.credit,
            },
            None,
        ),
        Err(w) => (Loaded::default(), Some(w)),
    }
}

impl Loaded {
    /// Seeds backend `name` with what the file holds for it: its
    /// latencies, and the hedge credit earlier processes left unspent.
    pub(super) fn seed(&self, name: &str, seed: Seed<'_>) {
        if let Some(c) = self.credit.get(name) {
            *seed.credit = seed.credit.saturating_add((*c).min(MAX_CREDIT));
        }
        let Some(kinds) = self.backends.get(name) else {
            return;
        };
        for (kind, micros) in kinds {
            let Some(kind) = kind_named(kind) else {
                continue;
            };
            let older: Vec<Duration> = micros.iter().map(|&m| Duration::from_micros(m)).collect();
            seed.sketches.entry(kind).or_default().seed(&older);
        }
    }
}

/// Merges `fresh` (latencies by backend name and op kind, oldest first)
/// into the file at `path` as it is now (other processes may have written
/// it since it was loaded; a corrupt file is replaced) and replaces it
/// atomically. The caller serialises saves of one process.
pub(super) fn merge_into(path: &Path, fresh: Vec<Fresh>) -> Option<HistoryWarning> {
    if fresh.is_empty() {
        return None;
    }
    let mut file = read(path).unwrap_or_default();
    file.version = VERSION;
    let mut touched = Vec::new();
    for f in fresh {
        for (kind, latencies) in f.latencies {
            let list = file
                .backends
                .entry(f.name.clone())
                .or_default()
                .entry(kind.name().to_string())
                .or_default();
            list.extend(latencies.iter().map(|d| micros(*d)));
            let excess = list.len().saturating_sub(WINDOW);
            list.drain(..excess);
        }
        // The balance: what this process earned minus what it spent,
        // added to what the file holds now (other processes' too).
        let credit = file.credit.entry(f.name.clone()).or_default();
        *credit = if f.credit_change >= 0 {
            credit.saturating_add(f.credit_change.unsigned_abs())
        } else {
            credit.saturating_sub(f.credit_change.unsigned_abs())
        }
        .min(MAX_CREDIT);
        touched.push(f.name);
    }
    // Bounded: backends this save did not touch go first.
    while file.backends.len() > MAX_BACKENDS {
        let Some(old) = file
            .backends
            .keys()
            .find(|k| !touched.contains(k))
            .or_else(|| file.backends.keys().next())
            .cloned()
        else {
            break;
        };
        file.backends.remove(&old);
    }
    let backends = &file.backends;
    file.credit
        .retain(|k, _| backends.contains_key(k) || touched.contains(k));
    write(path, &file).err()
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn kind_named(name: &str) -> Option<LlmOpKind> {
    LlmOpKind::ALL.iter().copied().find(|k| k.name() == name)
}

fn read(path: &Path) -> Result<HistoryFile, HistoryWarning> {
    let unreadable = |reason: String| HistoryWarning::Unreadable {
        path: path.to_path_buf(),
        reason,
    };
    let corrupt = |reason: String| HistoryWarning::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HistoryFile::default()),
        Err(e) => return Err(unreadable(e.to_string())),
    };
    if meta.len() > MAX_BYTES {
        return Err(corrupt(format!(
            "{} bytes, more than {MAX_BYTES}",
            meta.len()
        )));
    }
    let text = std::fs::read(path).map_err(|e| unreadable(e.to_string()))?;
    let file: HistoryFile = serde_json::from_slice(&text).map_err(|e| corrupt(e.to_string()))?;
    if file.version != VERSION {
        return Err(corrupt(format!(
            "version {}, this build reads {VERSION}",
            file.version
        )));
    }
    Ok(file)
}

/// Writes `file` beside `path` and renames it over `path`, so a reader
/// sees the old file or the new one, never half of one.
fn write(path: &Path, file: &HistoryFile) -> Result<(), HistoryWarning> {
    let fail = |reason: String| HistoryWarning::Unwritable {
        path: path.to_path_buf(),
        reason,
    };
    let text = serde_json::to_vec(file).map_err(|e| fail(e.to_string()))?;
    let tmp = path.with_file_name(format!("{FILE}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, &text).map_err(|e| fail(e.to_string()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(e.to_string())
    })
}

/// A history file's latencies for one backend and op kind (tests, `aisc`
/// diagnostics): oldest first.
pub fn stored(dir: &Path, backend: &str, kind: LlmOpKind) -> Result<Vec<Duration>, HistoryWarning> {
    let file = read(&dir.join(FILE))?;
    Ok(file
        .backends
        .get(backend)
        .and_then(|k| k.get(kind.name()))
        .map(|m| m.iter().map(|&u| Duration::from_micros(u)).collect())
        .unwrap_or_default())
}

/// A history file's unspent hedge credit for one backend, in requests
/// (tests, `aisc` diagnostics).
pub fn stored_credit(dir: &Path, backend: &str) -> Result<f64, HistoryWarning> {
    let file = read(&dir.join(FILE))?;
    Ok(file.credit.get(backend).copied().unwrap_or(0) as f64 / 1e6)
}
