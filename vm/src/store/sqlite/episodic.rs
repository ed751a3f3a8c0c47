//! The episodic log: append-only records of what every agent did (tool
//! calls, messages, memory writes, notes), in the SQLite store the LTM uses
//! (`memory.db`, table `episodic`; created by the LTM's schema migration).
//!
//! One row per record, written by one `INSERT` (SQLite's transaction is the
//! torn-write guarantee: a killed process leaves every committed record and
//! none half-written). Reads are queries filtered by agent, run and kind, so
//! nothing loads the whole history.
//!
//! Earlier versions kept the log in a framed file, `episodic.log`
//! (`APXMEPI1`, then `[u32 length][u32 CRC-32][JSON]` records). When such a
//! file is found next to the database it is imported once: the records of
//! its valid prefix go into the table in one transaction and the file is
//! renamed `episodic.log.imported-<ms>`; a damaged tail is reported as a
//! warning. A file that does not start with the magic is refused, untouched.

use crate::host::HostError;
use crate::store::agent::Filter;
use rusqlite::{params, Connection};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// The table (run by the LTM's migration, and for in-memory logs).
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS episodic (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        run TEXT,
        agent TEXT,
        op TEXT,
        record TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS episodic_by_agent ON episodic (agent, op, seq);
    CREATE INDEX IF NOT EXISTS episodic_by_run ON episodic (run, seq);";

/// The legacy log file's magic.
pub const MAGIC: &[u8; 8] = b"APXMEPI1";
/// Legacy records larger than this are treated as corruption.
pub const MAX_RECORD: u32 = 64 * 1024 * 1024;

/// The legacy log file of a memory directory.
pub const LEGACY_FILE: &str = "episodic.log";

/// The episodic log of one memory database.
pub struct SqliteEpisodic {
    conn: Mutex<Connection>,
    path: Option<PathBuf>,
}

fn db_err(what: &str, e: rusqlite::Error) -> HostError {
    HostError::new("memory.episodic", format!("episodic log: {what}: {e}"))
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

/// Reads a legacy log file without modifying it: the records of its valid
/// prefix, and a warning if there is a damaged tail.
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

impl SqliteEpisodic {
    /// A log that lives only as long as this value (no directory).
    pub fn ephemeral() -> Result<SqliteEpisodic, HostError> {
        let conn = Connection::open_in_memory().map_err(|e| db_err("cannot open", e))?;
        conn.execute_batch(SCHEMA)
            .map_err(|e| db_err("creating the table", e))?;
        Ok(SqliteEpisodic {
            conn: Mutex::new(conn),
            path: None,
        })
    }

    /// Opens the log in the database at `db` (already migrated by the LTM)
    /// and imports a legacy `episodic.log` next to it. The warning says what
    /// an import did.
    pub fn open(db: &Path) -> Result<(SqliteEpisodic, Option<String>), HostError> {
        let conn = Connection::open(db)
            .map_err(|e| db_err(&format!("cannot open `{}`", db.display()), e))?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| db_err("busy_timeout", e))?;
        conn.execute_batch(SCHEMA)
            .map_err(|e| db_err("creating the table", e))?;
        let log = SqliteEpisodic {
            conn: Mutex::new(conn),
            path: Some(db.to_path_buf()),
        };
        let legacy = db.with_file_name(LEGACY_FILE);
        let warning = if legacy.exists() {
            log.import(&legacy)?
        } else {
            None
        };
        Ok((log, warning))
    }

    /// Moves a legacy log file's records into the table, in one transaction.
    fn import(&self, file: &Path) -> Result<Option<String>, HostError> {
        let (records, damaged) = read(file)?;
        {
            let mut c = self.conn();
            let tx = c.transaction().map_err(|e| db_err("import", e))?;
            for r in &records {
                insert(&tx, r)?;
            }
            tx.commit().map_err(|e| db_err("import commit", e))?;
        }
        let ms = ais_stdlib::time::unix_ms();
        let kept = file.with_file_name(format!("{LEGACY_FILE}.imported-{ms}"));
        std::fs::rename(file, &kept).map_err(|e| io_err("cannot rename", file, e))?;
        let mut w = format!(
            "imported {} records from the old episodic log into the memory database (the file is kept as `{}`)",
            records.len(),
            kept.display()
        );
        if let Some(d) = damaged {
            w.push_str("; ");
            w.push_str(&d);
        }
        Ok(Some(w))
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The database file, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Appends one record (a JSON object with `run`, `agent`, `op`, ...),
    /// durably.
    pub fn append(&self, record: &Json) -> Result<(), HostError> {
        insert(&self.conn(), record)
    }

    /// The records matching `f`, oldest first.
    pub fn select(&self, f: &Filter<'_>) -> Result<Vec<Json>, HostError> {
        let c = self.conn();
        let mut stmt = c
            .prepare_cached(
                "SELECT record FROM episodic
                 WHERE (?1 IS NULL OR agent = ?1) AND (?2 IS NULL OR run = ?2)
                   AND (?3 IS NULL OR (op = 'note') = ?3)
                 ORDER BY seq",
            )
            .map_err(|e| db_err("query", e))?;
        let rows = stmt
            .query_map(params![f.agent, f.run, f.notes], |r| r.get::<_, String>(0))
            .map_err(|e| db_err("query", e))?;
        let mut out = Vec::new();
        for row in rows {
            let text = row.map_err(|e| db_err("query", e))?;
            out.push(serde_json::from_str(&text).unwrap_or(Json::Null));
        }
        Ok(out)
    }

    /// The run ids in the log, oldest first.
    pub fn runs(&self) -> Result<Vec<String>, HostError> {
        let c = self.conn();
        let mut stmt = c
            .prepare(
                "SELECT run FROM episodic WHERE run IS NOT NULL GROUP BY run ORDER BY MIN(seq)",
            )
            .map_err(|e| db_err("query", e))?;
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(|e| db_err("query", e))?;
        rows.map(|r| r.map_err(|e| db_err("query", e))).collect()
    }

    /// Deletes every record; returns how many there were.
    pub fn clear(&self) -> Result<usize, HostError> {
        self.conn()
            .execute("DELETE FROM episodic", [])
            .map_err(|e| db_err("clear", e))
    }
}

fn insert(c: &Connection, record: &Json) -> Result<(), HostError> {
    let field = |k: &str| record.get(k).and_then(Json::as_str).map(str::to_string);
    let text = serde_json::to_string(record)
        .map_err(|e| HostError::new("memory.episodic", format!("cannot encode a record: {e}")))?;
    c.prepare_cached("INSERT INTO episodic (run, agent, op, record) VALUES (?1, ?2, ?3, ?4)")
        .and_then(|mut s| s.execute(params![field("run"), field("agent"), field("op"), text]))
        .map(|_| ())
        .map_err(|e| db_err("cannot append", e))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn legacy_frame(record: &Json) -> Vec<u8> {
        let payload = serde_json::to_vec(record).unwrap();
        let mut out = (payload.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        out.extend_from_slice(&payload);
        out
    }

    #[test]
    fn records_are_filtered_by_agent_run_and_kind() {
        let log = SqliteEpisodic::ephemeral().unwrap();
        for (run, agent, op) in [
            ("r1", "A", "note"),
            ("r1", "B", "tool"),
            ("r2", "A", "tool"),
        ] {
            log.append(&json!({"run": run, "agent": agent, "op": op}))
                .unwrap();
        }
        let a = log
            .select(&Filter {
                agent: Some("A"),
                ..Filter::default()
            })
            .unwrap();
        assert_eq!(a.len(), 2);
        let notes = log
            .select(&Filter {
                notes: Some(true),
                ..Filter::default()
            })
            .unwrap();
        assert_eq!(
            notes,
            vec![json!({"run": "r1", "agent": "A", "op": "note"})]
        );
        let r2 = log
            .select(&Filter {
                run: Some("r2"),
                notes: Some(false),
                ..Filter::default()
            })
            .unwrap();
        assert_eq!(r2.len(), 1);
        assert_eq!(log.runs().unwrap(), vec!["r1", "r2"]);
        assert_eq!(log.clear().unwrap(), 3);
        assert!(log.select(&Filter::default()).unwrap().is_empty());
    }

    #[test]
    fn a_legacy_log_is_imported_once_without_its_torn_tail() {
        let d = tempfile::tempdir().unwrap();
        let mut bytes = MAGIC.to_vec();
        bytes.extend(legacy_frame(
            &json!({"run": "r", "agent": "A", "op": "note", "value": 1}),
        ));
        bytes.extend(legacy_frame(
            &json!({"run": "r", "agent": "A", "op": "note", "value": 2}),
        ));
        let torn = legacy_frame(&json!({"run": "r", "agent": "A", "op": "note", "value": 3}));
        bytes.extend(&torn[..torn.len() - 3]);
        std::fs::write(d.path().join(LEGACY_FILE), &bytes).unwrap();
        let db = d.path().join("memory.db");
        let (log, warning) = SqliteEpisodic::open(&db).unwrap();
        let w = warning.unwrap();
        assert!(w.contains("imported 2 records"), "{w}");
        assert!(w.contains("a partial record"), "{w}");
        assert!(!d.path().join(LEGACY_FILE).exists());
        assert_eq!(log.select(&Filter::default()).unwrap().len(), 2);
        drop(log);
        let (log, warning) = SqliteEpisodic::open(&db).unwrap();
        assert!(warning.is_none());
        assert_eq!(log.select(&Filter::default()).unwrap().len(), 2);
        // A file that is not a log is refused and left as it is.
        std::fs::write(d.path().join(LEGACY_FILE), b"not a log").unwrap();
        let e = SqliteEpisodic::open(&db).err().unwrap();
        assert_eq!(e.code, "memory.episodic");
        assert_eq!(
            std::fs::read(d.path().join(LEGACY_FILE)).unwrap(),
            b"not a log"
        );
    }
}
