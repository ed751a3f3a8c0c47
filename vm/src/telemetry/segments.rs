//! Append-only files shared by the runs of one process: a served run's
//! events and kept telemetry are lines of the process's current segment,
//! not a file of their own.
//!
//! Creating a file per run cost about a millisecond of kernel CPU each
//! (ext4's inode allocator scans for recently freed inodes), which decided
//! `aisc serve`'s on-disk rate (docs/bench/serve.md). A directory holds:
//!
//! - segments `<unix ms>-<pid>-<n>.seg`, each written by one process only
//!   (a new one when the current passes `ROLL_BYTES`, or per process). A
//!   line is `KEY<TAB>LINE`: the key (a run id, or a run's attempt) says
//!   whose line it is, so that runs' lines may interleave.
//! - `index`, shared by every process (appended with `O_APPEND`, one
//!   `write` per line): `KEY<TAB>SEGMENT<TAB>OFFSET` for the first line of
//!   a key in a segment, written before that line (an index line may name
//!   a line a killed process never wrote, never the reverse).
//!
//! Nothing is fsynced: like the per-run files before, these survive the
//! process, not the machine; the journal is the durable record. A line cut
//! off by a killed process is dropped by the reader.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// A segment is closed after this many bytes (so that pruning can remove
/// old ones and a reader seeks into a bounded file).
pub const ROLL_BYTES: u64 = 64 << 20;

const INDEX: &str = "index";
const EXT: &str = "seg";

struct Current {
    name: String,
    file: std::fs::File,
    len: u64,
    /// Keys with a line in this segment (indexed).
    keys: HashSet<String>,
}

#[derive(Default)]
struct State {
    current: Option<Current>,
    index: Option<std::fs::File>,
    /// Segments this process made, so that it never names two alike.
    made: u32,
}

/// The segments of one directory written by this process.
pub struct Segments {
    dir: PathBuf,
    roll: u64,
    state: Mutex<State>,
}

/// A key is one field of a line: no tab, no line break.
pub fn safe_key(key: &str) -> String {
    key.chars()
        .map(|c| {
            if c == '\t' || c == '\n' || c == '\r' {
                '_'
            } else {
                c
            }
        })
        .collect()
}

fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

impl Segments {
    /// This process's segments in `dir`: one writer per directory per
    /// process, shared by its runs.
    pub fn shared(dir: &Path) -> Arc<Segments> {
        static ALL: OnceLock<Mutex<HashMap<PathBuf, Arc<Segments>>>> = OnceLock::new();
        let mut all = ALL
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        all.entry(dir.to_path_buf())
            .or_insert_with(|| Arc::new(Segments::new(dir, ROLL_BYTES)))
            .clone()
    }

    /// Segments in `dir`, a new one after `roll` bytes (tests roll small).
    pub fn new(dir: &Path, roll: u64) -> Segments {
        Segments {
            dir: dir.to_path_buf(),
            roll,
            state: Mutex::default(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The segment this process writes now, if any (never pruned).
    pub fn current(&self) -> Option<String> {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.current.as_ref().map(|c| c.name.clone())
    }

    /// Appends `lines` (each ending in `\n`) as lines of `key`, in one
    /// write of the segment.
    pub fn append(&self, key: &str, lines: &[u8]) -> std::io::Result<()> {
        if lines.is_empty() {
            return Ok(());
        }
        let key = safe_key(key);
        let mut buf = Vec::with_capacity(lines.len() + key.len() + 1);
        for line in lines.split_inclusive(|b| *b == b'\n') {
            buf.extend_from_slice(key.as_bytes());
            buf.push(b'\t');
            buf.extend_from_slice(line);
        }
        if buf.last() != Some(&b'\n') {
            buf.push(b'\n');
        }
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *guard;
        if st.current.as_ref().is_none_or(|c| c.len >= self.roll) {
            st.current = None;
            st.current = Some(self.create(&mut st.made)?);
        }
        if st.index.is_none() {
            st.index = Some(open_append(&self.dir.join(INDEX))?);
        }
        let (Some(cur), Some(index)) = (st.current.as_mut(), st.index.as_mut()) else {
            return Ok(());
        };
        if !cur.keys.contains(&key) {
            // Before the line: the index never misses a written line.
            index.write_all(format!("{key}\t{}\t{}\n", cur.name, cur.len).as_bytes())?;
            cur.keys.insert(key);
        }
        let r = cur.file.write_all(&buf);
        if r.is_err() {
            // Where the file ends is unknown now: the next line starts a
            // new segment.
            cur.len = u64::MAX;
        } else {
            cur.len += buf.len() as u64;
        }
        r
    }

    /// A new segment (the directory is made when the first one needs it).
    fn create(&self, made: &mut u32) -> std::io::Result<Current> {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        loop {
            let name = format!("{ms:013}-{}-{}.{EXT}", std::process::id(), *made);
            *made += 1;
            let open = || {
                std::fs::OpenOptions::new()
                    .append(true)
                    .create_new(true)
                    .open(self.dir.join(&name))
            };
            let file = match open() {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    std::fs::create_dir_all(&self.dir).and_then(|()| open())
                }
                r => r,
            };
            match file {
                Ok(file) => {
                    return Ok(Current {
                        name,
                        file,
                        len: 0,
                        keys: HashSet::new(),
                    })
                }
                // A segment of an earlier process with the same pid.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && *made < 1_000_000 => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// One line of the index.
struct Entry {
    key: String,
    segment: String,
    offset: u64,
}

fn entries(dir: &Path) -> Vec<Entry> {
    let Ok(f) = std::fs::File::open(dir.join(INDEX)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for line in std::io::BufReader::new(f).split(b'\n') {
        let Ok(line) = line else { break };
        let Ok(line) = std::str::from_utf8(&line) else {
            continue;
        };
        let mut parts = line.split('\t');
        let (Some(key), Some(segment), Some(offset)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let Ok(offset) = offset.parse::<u64>() else {
            continue;
        };
        out.push(Entry {
            key: key.to_string(),
            segment: segment.to_string(),
            offset,
        });
    }
    out
}

/// The keys indexed in `dir` that `keep` accepts, each once, in the order
/// their first line was indexed.
pub fn keys(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<String> {
    let mut seen = HashSet::new();
    entries(dir)
        .into_iter()
        .filter(|e| keep(&e.key) && seen.insert(e.key.clone()))
        .map(|e| e.key)
        .collect()
}

/// Every whole line of `key` in `dir`'s segments, in order (segments by
/// name, that is by the time they were made), without the key; `None`
/// when the index does not name the key.
pub fn read(dir: &Path, key: &str) -> Option<Vec<u8>> {
    let key = safe_key(key);
    let mut starts: BTreeMap<String, u64> = BTreeMap::new();
    for e in entries(dir).into_iter().filter(|e| e.key == key) {
        let at = starts.entry(e.segment).or_insert(e.offset);
        *at = (*at).min(e.offset);
    }
    if starts.is_empty() {
        return None;
    }
    let mut prefix = key.into_bytes();
    prefix.push(b'\t');
    let mut out = Vec::new();
    for (segment, offset) in starts {
        let Ok(mut f) = std::fs::File::open(dir.join(&segment)) else {
            continue; // pruned
        };
        let mut bytes = Vec::new();
        if f.seek(std::io::SeekFrom::Start(offset)).is_err() || f.read_to_end(&mut bytes).is_err() {
            continue;
        }
        // A last line without its `\n` was cut off (or is being written).
        for line in bytes.split_inclusive(|b| *b == b'\n') {
            if line.ends_with(b"\n") && line.starts_with(&prefix) {
                out.extend_from_slice(&line[prefix.len()..]);
            }
        }
    }
    Some(out)
}

/// Removes the oldest segments of `dir` while the newer ones still hold
/// the lines of at least `keep` keys; never a segment named in `spare`
/// (being written) nor one holding a key in `held`. Index lines of removed
/// segments stay (a reader skips a missing segment). Returns how many
/// segments were removed.
pub fn prune(dir: &Path, keep: usize, spare: &[String], held: &HashSet<String>) -> usize {
    let Ok(read) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut segments: Vec<String> = read
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(&format!(".{EXT}")))
        .collect();
    segments.sort();
    let mut keys_of: HashMap<String, Vec<String>> = HashMap::new();
    for e in entries(dir) {
        keys_of.entry(e.segment).or_default().push(e.key);
    }
    // Newest first: the keys held by the segments kept so far.
    let mut newer: HashSet<&str> = HashSet::new();
    let mut removed = 0;
    for name in segments.iter().rev() {
        let keys = keys_of.get(name).map(Vec::as_slice).unwrap_or(&[]);
        let removable =
            newer.len() >= keep && !spare.contains(name) && !keys.iter().any(|k| held.contains(k));
        if removable && std::fs::remove_file(dir.join(name)).is_ok() {
            removed += 1;
            continue;
        }
        newer.extend(keys.iter().map(String::as_str));
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(dir: &Path, key: &str) -> String {
        String::from_utf8(read(dir, key).expect("indexed")).expect("utf-8")
    }

    #[test]
    fn interleaved_keys_read_back_in_order_across_segments() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Rolls after every append: each key spans several segments.
        let s = Segments::new(dir.path(), 1);
        s.append("r-1", b"a\n").expect("append");
        s.append("r-10", b"x\n").expect("append");
        s.append("r-1", b"b\nc\n").expect("append");
        s.append("r-10", b"y\n").expect("append");
        assert_eq!(text(dir.path(), "r-1"), "a\nb\nc\n");
        assert_eq!(text(dir.path(), "r-10"), "x\ny\n");
        assert!(read(dir.path(), "r-2").is_none());
        assert_eq!(keys(dir.path(), |_| true), ["r-1", "r-10"]);
        let files = std::fs::read_dir(dir.path()).expect("dir").count();
        assert_eq!(files, 5, "four segments and the index");
    }

    #[test]
    fn a_cut_off_line_is_dropped_and_one_segment_holds_many_keys() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Segments::new(dir.path(), ROLL_BYTES);
        for i in 0..100 {
            s.append(&format!("r{i}"), format!("{i}\n").as_bytes())
                .expect("append");
        }
        s.append("r5", b"more\n").expect("append");
        let name = s.current().expect("a segment");
        // A killed process's last write, cut off.
        let mut f = open_append(&dir.path().join(&name)).expect("open");
        f.write_all(b"r5\thalf").expect("write");
        assert_eq!(text(dir.path(), "r5"), "5\nmore\n");
        let files = std::fs::read_dir(dir.path()).expect("dir").count();
        assert_eq!(files, 2, "one segment and the index");
        // The index has one line per key, not per line.
        let index = std::fs::read_to_string(dir.path().join(INDEX)).expect("index");
        assert_eq!(index.lines().count(), 100);
    }

    #[test]
    fn pruning_keeps_the_newest_keys_the_current_segment_and_held_keys() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Segments::new(dir.path(), 1);
        for i in 0..5 {
            s.append(&format!("r{i}"), b"line\n").expect("append");
        }
        let held: HashSet<String> = ["r0".to_string()].into();
        let removed = prune(dir.path(), 2, &[], &held);
        // r4 and r3 are the two newest; r2 and r1 go; r0 is held.
        assert_eq!(removed, 2);
        for (key, kept) in [("r0", true), ("r1", false), ("r2", false), ("r3", true)] {
            assert_eq!(!text(dir.path(), key).is_empty(), kept, "{key}");
        }
        // The segment being written is never removed.
        let current = s.current().expect("current");
        assert_eq!(prune(dir.path(), 0, &[current], &HashSet::new()), 2);
        assert_eq!(text(dir.path(), "r4"), "line\n");
    }
}
