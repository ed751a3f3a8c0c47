//! The hedges' latency history across processes: `latency.json` in the
//! memory directory (`.apxm/`). A fresh `aisc run` has seen no answers, so
//! without it a hedge waits for most of a fan-out before it knows what
//! "late" means; with it, a process starts from the last [`WINDOW`]
//! latencies per backend and op kind that earlier processes observed.
//!
//! [`attach`] reads the file once per process (and seeds every hedged
//! backend, including those built later); [`save`] merges what this
//! process observed since the last save into the file as it is now (other
//! processes may have written it) and replaces it atomically. The file is
//! only a hint: a missing one is empty, an unreadable or corrupt one is
//! ignored with a warning, and a failed write costs the history, never
//! the run.

use super::sketch::{LatencySketch, WINDOW};
use crate::llm::LlmOpKind;
use crate::sync::lock;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
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
}

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

struct Attached {
    path: PathBuf,
    loaded: Latencies,
}

static ATTACHED: Mutex<Option<Attached>> = Mutex::new(None);
/// Held while a save reads, merges and writes, so the runs of one
/// process that end together do not overwrite each other's latencies.
static SAVING: Mutex<()> = Mutex::new(());

/// Uses `dir/latency.json` as this process's latency history: reads it
/// (once per path) and seeds every hedged backend with it. The backends of
/// the process share one history, so a second directory replaces the
/// first.
pub fn attach(dir: &Path) -> Option<HistoryWarning> {
    let path = dir.join(FILE);
    if lock(&ATTACHED).as_ref().is_some_and(|a| a.path == path) {
        return None;
    }
    let (file, warning) = match read(&path) {
        Ok(f) => (f, None),
        Err(w) => (HistoryFile::default(), Some(w)),
    };
    *lock(&ATTACHED) = Some(Attached {
        path,
        loaded: file.backends.clone(),
    });
    // Without ATTACHED held: building a hedge takes the registry's lock
    // and then ATTACHED's (`seed`).
    super::hedge::seed_all(|name, sketches| seed_from(&file.backends, name, sketches));
    warning
}

/// Seeds the sketches of backend `name` from the attached history.
pub(super) fn seed(name: &str, sketches: &mut HashMap<LlmOpKind, LatencySketch>) {
    if let Some(a) = lock(&ATTACHED).as_ref() {
        seed_from(&a.loaded, name, sketches);
    }
}

fn seed_from(from: &Latencies, name: &str, sketches: &mut HashMap<LlmOpKind, LatencySketch>) {
    let Some(kinds) = from.get(name) else {
        return;
    };
    for (kind, micros) in kinds {
        let Some(kind) = kind_named(kind) else {
            continue;
        };
        let older: Vec<Duration> = micros.iter().map(|&m| Duration::from_micros(m)).collect();
        sketches.entry(kind).or_default().seed(&older);
    }
}

/// Merges the latencies observed since the last save into the history
/// file. Nothing happens when no history is attached or nothing was
/// observed (no hedged backend answered).
pub fn save() -> Option<HistoryWarning> {
    let path = lock(&ATTACHED).as_ref()?.path.clone();
    let _saving = lock(&SAVING);
    let fresh = super::hedge::take_fresh();
    if fresh.is_empty() {
        return None;
    }
    // What other processes wrote since this one read the file counts too;
    // a corrupt file is replaced (its warning was shown when attaching).
    let mut file = read(&path).unwrap_or_default();
    file.version = VERSION;
    let mut touched = Vec::new();
    for (name, kind, latencies) in fresh {
        let list = file
            .backends
            .entry(name.clone())
            .or_default()
            .entry(kind.name().to_string())
            .or_default();
        list.extend(latencies.iter().map(|d| micros(*d)));
        let excess = list.len().saturating_sub(WINDOW);
        list.drain(..excess);
        touched.push(name);
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
    write(&path, &file).err()
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
