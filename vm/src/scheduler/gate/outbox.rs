//! Printed lines, exactly once across kill -9 + resume.
//!
//! A line is journaled *before* it is shown (a `printed` record with its
//! place `n` in the run's output), so a line that was shown is always in
//! the journal and a replayed `print` op shows nothing. What a kill can
//! leave behind is a line journaled and not yet shown: the resumed run
//! shows those first, in order. To know which ones, `aisc` keeps *marks*
//! next to the journal (`<memory dir>/shown/<run id>`, one small record
//! rewritten in place with one `pwrite`): before writing line `n` it notes
//! "about to show `n`" (with the position stdout will be at, when stdout
//! is a regular file), after the write "shown up to `n + 1`".
//!
//! What "shown" means: the line's `write(2)` to stdout completed.
//! - A kill before the "about" mark or after the "shown" mark is exact.
//! - A kill between them (the write itself): when stdout is a regular
//!   file, the resumed run reads that file at the noted position and shows
//!   the line again only if it is not there; exact. When stdout is a pipe
//!   or a terminal nothing can be read back: the line is shown again (at
//!   least once; the window is one `write` call).
//!
//! The marks are not `fsync`ed: they survive the process being killed
//! (the kernel has them), not the machine losing power. Without marks
//! (a run that is not printing to stdout, `aisc serve`), a replayed line is
//! never shown again (at most once), as before.

use super::{EffectId, Run};
use crate::exec::{OpError, Results};
use crate::frame::Frame;
use crate::journal::Record;
use crate::sync::lock;
use crate::value::Val;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Bytes of the marks record (rewritten whole, in place).
const SLOT: usize = 1024;

/// Where stdout was when a line was about to be written to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct OutPos {
    path: String,
    dev: u64,
    ino: u64,
    offset: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct MarkState {
    /// Lines `0..shown` were shown.
    shown: u64,
    /// Line `shown` was about to be written, stdout then at `out`.
    about: Option<u64>,
    out: Option<OutPos>,
}

struct Marks {
    file: File,
}

impl Marks {
    /// Opens (creating) the marks at `path`; the state it held, `None`
    /// when it did not exist or cannot be read.
    fn open(path: &Path) -> std::io::Result<(Marks, Option<MarkState>)> {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d)?;
        }
        let text = std::fs::read(path).ok();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let state = text.and_then(|t| serde_json::from_slice::<MarkState>(t.trim_ascii()).ok());
        Ok((Marks { file }, state))
    }

    fn write(&self, s: &MarkState) -> std::io::Result<()> {
        let mut buf = serde_json::to_vec(s).unwrap_or_default();
        if buf.len() >= SLOT {
            // A path too long to note: no read-back for this line.
            let short = MarkState {
                out: None,
                ..s.clone()
            };
            buf = serde_json::to_vec(&short).unwrap_or_default();
        }
        buf.resize(SLOT - 1, b' ');
        buf.push(b'\n');
        write_at(&self.file, &buf)
    }
}

#[cfg(unix)]
fn write_at(f: &File, buf: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    f.write_all_at(buf, 0)
}

#[cfg(not(unix))]
fn write_at(mut f: &File, buf: &[u8]) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    f.seek(SeekFrom::Start(0))?;
    f.write_all(buf)
}

/// Stdout's file and position, when stdout is a regular file.
#[cfg(target_os = "linux")]
fn stdout_pos() -> Option<OutPos> {
    use std::os::unix::fs::MetadataExt;
    let fd = Path::new("/proc/self/fd/1");
    let meta = std::fs::metadata(fd).ok()?;
    if !meta.is_file() {
        return None;
    }
    let path = std::fs::read_link(fd).ok()?;
    Some(OutPos {
        path: path.to_str()?.to_string(),
        dev: meta.dev(),
        ino: meta.ino(),
        offset: meta.len(),
    })
}

#[cfg(not(target_os = "linux"))]
fn stdout_pos() -> Option<OutPos> {
    None
}

/// Is `line` (and its newline) in the file `pos` noted, where it noted?
/// `None` when that cannot be known.
#[cfg(target_os = "linux")]
fn written_at(pos: &OutPos, line: &str) -> Option<bool> {
    use std::os::unix::fs::{FileExt, MetadataExt};
    let f = File::open(&pos.path).ok()?;
    let meta = f.metadata().ok()?;
    if meta.dev() != pos.dev || meta.ino() != pos.ino {
        return None;
    }
    let want = format!("{line}\n");
    let mut got = vec![0u8; want.len()];
    Some(f.read_exact_at(&mut got, pos.offset).is_ok() && got == want.as_bytes())
}

#[cfg(not(target_os = "linux"))]
fn written_at(_pos: &OutPos, _line: &str) -> Option<bool> {
    None
}

struct State {
    /// The place of the next line in the run's output.
    next: u64,
    marks: Option<Marks>,
}

/// The run's printed output: lines go through it one at a time, in the
/// order of their places.
pub(in crate::scheduler) struct Outbox {
    state: Mutex<State>,
    /// Where the marks are kept (`None`: not printing to stdout).
    path: Option<PathBuf>,
}

fn marks_error(e: std::io::Error) -> OpError {
    OpError::new(
        "journal.write",
        format!("cannot note the printed lines shown: {e}"),
    )
}

impl Outbox {
    pub(in crate::scheduler) fn new(path: Option<PathBuf>) -> Outbox {
        Outbox {
            state: Mutex::new(State {
                next: 0,
                marks: None,
            }),
            path,
        }
    }
}

impl<'r> Run<'r> {
    /// A `print` op: its line is shown now, or in a `try` body when the
    /// body commits; either way journaled first.
    pub(in crate::scheduler) fn print_op(
        &self,
        frame: &Frame<'r>,
        args: &[Val],
        id: Option<&EffectId>,
    ) -> Result<Results, OpError> {
        let line = args.iter().map(Val::text).collect::<Vec<_>>().join(" ");
        let agent = self.agent_name(frame.agent);
        match &frame.tx {
            Some(tx) => {
                tx.print_journaled(agent, &line, id.map(|i| (i.key.clone(), i.hash.clone())))
            }
            None => self.show_line(id, agent, &line)?,
        }
        Ok(smallvec::smallvec![Val::Ord])
    }

    /// Shows a printed line: journaled first (`id`: the `print` op's
    /// identity), then written, with the marks around the write.
    pub(in crate::scheduler) fn show_line(
        &self,
        id: Option<&EffectId>,
        agent: &str,
        line: &str,
    ) -> Result<(), OpError> {
        let mut st = lock(&self.gate.outbox.state);
        let n = st.next;
        if let Some(id) = id {
            let record = Record::Printed {
                n,
                agent: agent.to_string(),
                line: line.to_string(),
            };
            self.gate_record(id, "print", &record, 0, None)?;
        }
        self.write_line(&st, n, agent, line)?;
        st.next = n + 1;
        Ok(())
    }

    fn write_line(&self, st: &State, n: u64, agent: &str, line: &str) -> Result<(), OpError> {
        if let Some(m) = &st.marks {
            m.write(&MarkState {
                shown: n,
                about: Some(n),
                out: stdout_pos(),
            })
            .map_err(marks_error)?;
        }
        self.host.print(agent, line);
        if let Some(m) = &st.marks {
            m.write(&MarkState {
                shown: n + 1,
                about: None,
                out: None,
            })
            .map_err(marks_error)?;
        }
        Ok(())
    }

    /// At the start of a run: shows the lines an earlier attempt
    /// journaled and did not show, in order, and continues the numbering.
    pub(in crate::scheduler) fn show_pending(&self) -> Result<(), OpError> {
        let printed = match self.gate.journal {
            Some(j) => j.printed().map_err(super::journal_error)?,
            None => Vec::new(),
        };
        let mut st = lock(&self.gate.outbox.state);
        st.next = printed.last().map_or(0, |(n, _, _)| n + 1);
        let Some(path) = &self.gate.outbox.path else {
            return Ok(());
        };
        let (marks, before) = Marks::open(path).map_err(marks_error)?;
        // No marks from before: a run that did not keep them (every
        // journaled line counts as shown, as before marks existed).
        let mut shown = before.as_ref().map_or(st.next, |b| b.shown);
        if let Some(b) = &before {
            let about = printed.iter().find(|(n, _, _)| Some(*n) == b.about);
            if let (Some((n, _, line)), Some(pos)) = (about, &b.out) {
                if written_at(pos, line) == Some(true) {
                    shown = n + 1;
                }
            }
        }
        st.marks = Some(marks);
        for (n, agent, line) in printed.iter().filter(|(n, _, _)| *n >= shown) {
            self.write_line(&st, *n, agent, line)?;
        }
        // The marks now say where this attempt starts.
        if let Some(m) = &st.marks {
            m.write(&MarkState {
                shown: st.next,
                about: None,
                out: None,
            })
            .map_err(marks_error)?;
        }
        Ok(())
    }
}
