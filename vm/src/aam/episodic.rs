//! The episodic log: append-only, persisted as a framed file.
//!
//! File layout: the 8-byte magic `APXMEPI1`, then records, each
//! `[u32 LE payload length][u32 LE CRC-32 of the payload][payload]`, the
//! payload one JSON object. Every record is written with a single
//! `write` on a file opened for appending.
//!
//! On open the whole file is checked. A torn tail (a partial length/CRC
//! header, a payload shorter than its length, a CRC mismatch or a payload
//! that is not a JSON object) ends the valid prefix: the file is truncated
//! there, the dropped bytes are kept next to it in
//! `episodic.log.dropped-<ms>`, and a warning says so. A file that does not
//! start with the magic is refused (it is not ours to truncate).

use crate::host::HostError;
use serde_json::Value as Json;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

pub const MAGIC: &[u8; 8] = b"APXMEPI1";
/// Records larger than this are treated as corruption.
pub const MAX_RECORD: u32 = 64 * 1024 * 1024;

struct State {
    file: Option<File>,
    records: Vec<Arc<Json>>,
}

pub struct Episodic {
    path: Option<PathBuf>,
    state: Mutex<State>,
}

fn io_err(what: &str, path: &Path, e: std::io::Error) -> HostError {
    HostError::new(
        "memory.episodic",
        format!("episodic log `{}`: {what}: {e}", path.display()),
    )
}

/// The result of scanning a log: the records of the valid prefix, its
/// length in bytes, and a description of what follows it (if anything).
pub struct Scan {
    pub records: Vec<Json>,
    pub valid_len: u64,
    pub problem: Option<String>,
}

/// Checks `bytes` (a whole log file).
pub fn scan(bytes: &[u8]) -> Result<Scan, String> {
    if bytes.is_empty() {
        return Ok(Scan {
            records: Vec::new(),
            valid_len: 0,
            problem: None,
        });
    }
    if bytes.len() < MAGIC.len() {
        if MAGIC.starts_with(bytes) {
            return Ok(Scan {
                records: Vec::new(),
                valid_len: 0,
                problem: Some("a partial file header".into()),
            });
        }
        return Err("not an episodic log (bad magic)".into());
    }
    if &bytes[..MAGIC.len()] != MAGIC {
        return Err("not an episodic log (bad magic)".into());
    }
    let mut at = MAGIC.len();
    let mut records = Vec::new();
    let mut problem = None;
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.len() < 8 {
            problem = Some(format!("a partial record header at byte {at}"));
            break;
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        if len > MAX_RECORD {
            problem = Some(format!("an implausible record length {len} at byte {at}"));
            break;
        }
        let len = len as usize;
        if rest.len() < 8 + len {
            problem = Some(format!(
                "a partial record at byte {at} ({} of {len} payload bytes)",
                rest.len() - 8
            ));
            break;
        }
        let payload = &rest[8..8 + len];
        if crc32fast::hash(payload) != crc {
            problem = Some(format!("a checksum mismatch at byte {at}"));
            break;
        }
        match serde_json::from_slice::<Json>(payload) {
            Ok(v @ Json::Object(_)) => records.push(v),
            _ => {
                problem = Some(format!("a record that is not a JSON object at byte {at}"));
                break;
            }
        }
        at += 8 + len;
    }
    Ok(Scan {
        records,
        valid_len: at as u64,
        problem,
    })
}

/// Encodes one record frame.
pub fn frame(record: &Json) -> Result<Vec<u8>, HostError> {
    let payload = serde_json::to_vec(record)
        .map_err(|e| HostError::new("memory.episodic", format!("cannot encode a record: {e}")))?;
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|l| *l <= MAX_RECORD)
        .ok_or_else(|| HostError::new("memory.episodic", "an episodic record is too large"))?;
    let mut out = Vec::with_capacity(8 + payload.len());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    Ok(out)
}

/// Reads a log without modifying it (for `aisc trace`): records of the
/// valid prefix, and a warning if there is a damaged tail.
pub fn read(path: &Path) -> Result<(Vec<Json>, Option<String>), HostError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), None)),
        Err(e) => return Err(io_err("cannot read", path, e)),
    };
    let s = scan(&bytes)
        .map_err(|m| HostError::new("memory.episodic", format!("`{}`: {m}", path.display())))?;
    let warn = s.problem.map(|p| {
        format!(
            "episodic log `{}` ends with {p}; the {} bytes after byte {} are ignored",
            path.display(),
            bytes.len() as u64 - s.valid_len,
            s.valid_len
        )
    });
    Ok((s.records, warn))
}

impl Episodic {
    /// An episodic log kept in memory only.
    pub fn ephemeral() -> Episodic {
        Episodic {
            path: None,
            state: Mutex::new(State {
                file: None,
                records: Vec::new(),
            }),
        }
    }

    /// Opens (creating) the log at `path`, dropping a torn tail. Returns
    /// the log and a warning when something was dropped.
    pub fn open(path: &Path) -> Result<(Episodic, Option<String>), HostError> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| io_err("cannot open", path, e))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| io_err("cannot read", path, e))?;
        let s = scan(&bytes).map_err(|m| {
            HostError::new(
                "memory.episodic",
                format!(
                    "`{}`: {m}; refusing to use it (move it away or pass another --memory directory)",
                    path.display()
                ),
            )
        })?;
        let mut warning = None;
        if let Some(problem) = &s.problem {
            let dropped = &bytes[usize::try_from(s.valid_len).unwrap_or(bytes.len())..];
            let side = PathBuf::from(format!(
                "{}.dropped-{}",
                path.display(),
                ais_stdlib::time::unix_ms()
            ));
            let kept = std::fs::write(&side, dropped).is_ok();
            file.set_len(s.valid_len)
                .map_err(|e| io_err("cannot truncate the damaged tail of", path, e))?;
            warning = Some(format!(
                "warning: episodic log `{}` ended with {problem}; dropped {} bytes after the last intact record{}",
                path.display(),
                dropped.len(),
                if kept {
                    format!(" (saved in `{}`)", side.display())
                } else {
                    String::new()
                }
            ));
        }
        if s.valid_len == 0 {
            file.set_len(0)
                .map_err(|e| io_err("cannot reset", path, e))?;
            file.write_all(MAGIC)
                .map_err(|e| io_err("cannot write", path, e))?;
        }
        file.seek(SeekFrom::End(0))
            .map_err(|e| io_err("cannot seek", path, e))?;
        Ok((
            Episodic {
                path: Some(path.to_path_buf()),
                state: Mutex::new(State {
                    file: Some(file),
                    records: s.records.into_iter().map(Arc::new).collect(),
                }),
            },
            warning,
        ))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Appends one record (persisted before this returns).
    pub fn append(&self, record: Json) -> Result<(), HostError> {
        let bytes = frame(&record)?;
        let mut st = self.state();
        if let (Some(f), Some(p)) = (st.file.as_mut(), self.path.as_deref()) {
            f.write_all(&bytes)
                .map_err(|e| io_err("cannot append to", p, e))?;
        }
        st.records.push(Arc::new(record));
        Ok(())
    }

    /// A snapshot of every record, oldest first.
    pub fn records(&self) -> Vec<Arc<Json>> {
        self.state().records.clone()
    }

    /// Forces the file to disk.
    pub fn sync(&self) -> Result<(), HostError> {
        let st = self.state();
        if let (Some(f), Some(p)) = (st.file.as_ref(), self.path.as_deref()) {
            f.sync_data().map_err(|e| io_err("cannot sync", p, e))?;
        }
        Ok(())
    }

    /// Removes every record (the file keeps only its header).
    pub fn clear(&self) -> Result<usize, HostError> {
        let mut st = self.state();
        let n = st.records.len();
        if let (Some(f), Some(p)) = (st.file.as_mut(), self.path.as_deref()) {
            f.set_len(0).map_err(|e| io_err("cannot clear", p, e))?;
            f.write_all(MAGIC)
                .map_err(|e| io_err("cannot clear", p, e))?;
        }
        st.records.clear();
        Ok(n)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn torn_tails_are_dropped() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("episodic.log");
        {
            let (e, w) = Episodic::open(&p).unwrap();
            assert!(w.is_none());
            e.append(json!({"n": 1})).unwrap();
            e.append(json!({"n": 2})).unwrap();
        }
        let full = std::fs::read(&p).unwrap();
        for cut in 1..frame(&json!({"n": 2})).unwrap().len() {
            std::fs::write(&p, &full[..full.len() - cut]).unwrap();
            let (e, w) = Episodic::open(&p).unwrap();
            assert!(w.is_some(), "cut {cut}");
            assert_eq!(e.records().len(), 1);
            e.append(json!({"n": 3})).unwrap();
            drop(e);
            let (e, w) = Episodic::open(&p).unwrap();
            assert!(w.is_none());
            let ns: Vec<Json> = e.records().iter().map(|r| r["n"].clone()).collect();
            assert_eq!(ns, [json!(1), json!(3)]);
        }
        std::fs::write(&p, b"hello world").unwrap();
        assert!(Episodic::open(&p).is_err());
    }
}
