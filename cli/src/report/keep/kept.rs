//! Where a run's attempts are kept: a new run's first attempt as lines of
//! the process's segments of `telemetry/`, any other in a file of its own
//! (`ID.jsonl`, `ID.n.jsonl`); and finding them again for the report.

use super::HEADER_TYPE;
use ais_vm::telemetry::segments::{self, Segments};
use serde_json::Value as Json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Run ids are made by the host; keep only safe characters anyway (no
/// `.`, so `ID.2.jsonl` cannot be another run's first attempt).
pub fn safe_id(run_id: &str) -> String {
    run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The file of attempt `n` (from 1) of a run.
pub fn attempt_path(dir: &Path, run_id: &str, n: u32) -> PathBuf {
    let safe = safe_id(run_id);
    let name = if n <= 1 {
        format!("{safe}.jsonl")
    } else {
        format!("{safe}.{n}.jsonl")
    };
    dir.join("telemetry").join(name)
}

/// Where an attempt's lines are kept.
#[derive(Clone, Debug, PartialEq)]
pub enum Kept {
    /// A file of its own.
    File(PathBuf),
    /// The lines of this key in the segments of `telemetry/`.
    Segment(String),
}

impl Kept {
    /// The attempt's lines, from its last header on (a segment holds a
    /// second header when the attempt was written whole again).
    pub fn read(&self, dir: &Path) -> std::io::Result<String> {
        match self {
            Kept::File(path) => std::fs::read_to_string(path),
            Kept::Segment(key) => {
                let bytes = segments::read(&dir.join("telemetry"), key).unwrap_or_default();
                let text = String::from_utf8_lossy(&bytes);
                let mut last_header = 0;
                let mut at = 0;
                for line in text.split_inclusive('\n') {
                    if line_is(line, HEADER_TYPE) {
                        last_header = at;
                    }
                    at += line.len();
                }
                Ok(text[last_header..].to_string())
            }
        }
    }

    /// How the report names it.
    pub fn name(&self) -> String {
        match self {
            Kept::File(path) => path
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            Kept::Segment(key) => format!("{key} in telemetry/*.seg"),
        }
    }
}

/// The attempts of a run that kept telemetry, in order: `(n, where)`.
pub fn attempts(dir: &Path, run_id: &str) -> Vec<(u32, Kept)> {
    let safe = safe_id(run_id);
    let mut found: Vec<(u32, Kept)> = Vec::new();
    if !segments::keys(&dir.join("telemetry"), |k| k == safe).is_empty() {
        let key = Kept::Segment(safe.clone());
        // A discarded attempt (its run never started) is not one.
        if key
            .read(dir)
            .is_ok_and(|t| !t.lines().any(|l| line_is(l, DISCARD_TYPE)))
        {
            found.push((1, key));
        }
    }
    let Ok(entries) = std::fs::read_dir(dir.join("telemetry")) else {
        return found;
    };
    found.extend(entries.filter_map(Result::ok).filter_map(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        let rest = name.strip_prefix(&safe)?.strip_suffix(".jsonl")?;
        let n = match rest {
            "" => 1,
            r => r
                .strip_prefix('.')?
                .parse::<u32>()
                .ok()
                .filter(|n| *n >= 2)?,
        };
        Some((n, Kept::File(e.path())))
    }));
    found.sort_by_key(|(n, _)| *n);
    found
}

/// The line that voids a discarded attempt kept in a segment.
pub(super) const DISCARD_TYPE: &str = "discarded";

/// Whether a kept line is of type `t` (parsed only when it may be).
fn line_is(line: &str, t: &str) -> bool {
    line.contains(t)
        && serde_json::from_str::<Json>(line).is_ok_and(|v| v["type"].as_str() == Some(t))
}

/// Where an open attempt's lines go.
pub(super) enum Out {
    File(std::fs::File),
    Segment(Arc<Segments>, String),
}

impl Out {
    pub(super) fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Out::File(f) => f.write_all(bytes),
            Out::Segment(s, key) => s.append(key, bytes),
        }
    }
}

/// Creates where the next attempt of run `run_id` in `dir` is kept: a new
/// run's first attempt in the process's segments; otherwise a file, the
/// first free number probed with `create_new` (so that two processes never
/// share a file) rather than by listing the directory, which holds every
/// run's files, after attempt 1 if the segments hold it.
pub(super) fn create_attempt(
    dir: &Path,
    run_id: &str,
    fresh: bool,
) -> std::io::Result<(u32, Kept, Out)> {
    let safe = safe_id(run_id);
    if fresh {
        let segments = Segments::shared(&dir.join("telemetry"));
        return Ok((1, Kept::Segment(safe.clone()), Out::Segment(segments, safe)));
    }
    let in_segments = !segments::keys(&dir.join("telemetry"), |k| k == safe).is_empty();
    let (n, path, file) = create_attempt_file(dir, run_id, if in_segments { 2 } else { 1 })?;
    Ok((n, Kept::File(path), Out::File(file)))
}

fn create_attempt_file(
    dir: &Path,
    run_id: &str,
    first: u32,
) -> std::io::Result<(u32, PathBuf, std::fs::File)> {
    let mut n = first;
    loop {
        let path = attempt_path(dir, run_id, n);
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path);
        match opened {
            Ok(f) => return Ok((n, path, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100_000 => n += 1,
            // The directory is made once, when the first file needs it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && n == first => {
                std::fs::create_dir_all(dir.join("telemetry"))?;
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path);
                match f {
                    Ok(f) => return Ok((n, path, f)),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
    }
}
