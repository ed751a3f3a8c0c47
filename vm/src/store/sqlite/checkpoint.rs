//! Checkpoints of the run journal's WAL, off the writers' path.
//!
//! Left to itself, SQLite checkpoints a WAL database once the WAL holds
//! 1000 pages, in the connection whose commit took it there: inside that
//! commit, with the store's connection held, it copies the pages into the
//! database and fsyncs both files. In a fresh `aisc run` that commit is
//! one of a fan-out's LLM answers (every few runs, as the WAL fills), and
//! every other answer of the fan-out waits behind it for two fsyncs that
//! no write asked for: an answer is not a shown write (`super::group`).
//! On a disk busy with other writers an fsync takes tens to hundreds of
//! milliseconds, and the run's makespan grows by that much.
//!
//! So the journal's connection never checkpoints (`wal_autocheckpoint =
//! 0`). After a commit that leaves [`PAGES`] frames or more in the WAL
//! not yet checkpointed, a thread of the store checkpoints it on a
//! connection of its own, `PASSIVE`ly: it blocks neither writers nor
//! readers, and what it does not finish (a process that exits meanwhile)
//! the next one does. Durability is unchanged: a shown write still waits
//! for its WAL fsync (`Group::sync`); a checkpoint only moves committed
//! frames into the database. The WAL file is reused as SQLite always
//! does (not truncated: an fsync of a file that grew would also write its
//! size).
//!
//! How many frames wait: the WAL index (`runs.db-shm`, whose layout
//! SQLite documents, <https://sqlite.org/walformat.html>) holds the last
//! frame committed (`mxFrame`, header offset 16) and the last one copied
//! into the database (`nBackfill`, offset 96), both 32-bit in the
//! machine's byte order. It is read after each commit, under the store's
//! connection lock (one read of 100 bytes); a value torn by another
//! process writing meanwhile only moves one checkpoint a commit earlier
//! or later.

use crate::sync::{lock, wait_until};
use rusqlite::Connection;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

/// Frames in the WAL, not yet checkpointed, that start a checkpoint:
/// SQLite's own default.
pub(super) const PAGES: u32 = 1000;

/// Where the WAL index header keeps `mxFrame` and the checkpoint info
/// `nBackfill` (walformat.html, "The WAL-Index Header").
const MX_FRAME: usize = 16;
const N_BACKFILL: usize = 96;

/// Hands the checkpoints of `conn` (the store's connection to a WAL
/// database) to a [`Checkpointer`].
pub(super) fn hand_over(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "wal_autocheckpoint", 0)
}

/// Asks for checkpoints of one WAL database and makes them on a thread
/// started with the first (told to stop when the store is dropped; one
/// under way is left to finish, or to the process's exit).
#[derive(Debug)]
pub(super) struct Checkpointer {
    db: PathBuf,
    shm: PathBuf,
    /// The WAL index, opened at the first commit (`None`: it cannot be
    /// read, and SQLite's frames go uncheckpointed until the store is
    /// reopened; readers still find them in the WAL).
    index: OnceLock<Option<std::fs::File>>,
    shared: Arc<Shared>,
    started: Mutex<bool>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    /// Checkpoints made (tests: that they happen, and where).
    done: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    asked: bool,
    stop: bool,
}

impl Checkpointer {
    pub(super) fn new(db: PathBuf, shm: PathBuf) -> Checkpointer {
        Checkpointer {
            db,
            shm,
            index: OnceLock::new(),
            shared: Arc::default(),
            started: Mutex::new(false),
        }
    }

    /// After a commit: asks for a checkpoint when [`PAGES`] frames or
    /// more wait in the WAL.
    pub(super) fn committed(&self) {
        if self.waiting_frames().is_some_and(|n| n >= PAGES) {
            self.ask();
        }
    }

    /// Frames committed to the WAL and not yet copied into the database.
    pub(super) fn waiting_frames(&self) -> Option<u32> {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = self
            .index
            .get_or_init(|| std::fs::File::open(&self.shm).ok())
            .as_ref()?;
        let mut head = [0u8; N_BACKFILL + 4];
        f.seek(SeekFrom::Start(0)).ok()?;
        f.read_exact(&mut head).ok()?;
        let word = |at: usize| {
            let mut w = [0u8; 4];
            w.copy_from_slice(&head[at..at + 4]);
            u32::from_ne_bytes(w)
        };
        Some(word(MX_FRAME).saturating_sub(word(N_BACKFILL)))
    }

    fn ask(&self) {
        let mut started = lock(&self.started);
        if !*started {
            let shared = Arc::clone(&self.shared);
            let db = self.db.clone();
            // No thread, no checkpoint now: the next one asked for
            // tries again, and the WAL is only longer meanwhile.
            *started = std::thread::Builder::new()
                .name("ais-journal-checkpoint".into())
                .spawn(move || checkpoints(&db, &shared))
                .is_ok();
        }
        drop(started);
        let mut st = lock(&self.shared.state);
        if !st.asked {
            st.asked = true;
            self.shared.wake.notify_one();
        }
    }

    /// Checkpoints made so far.
    #[cfg(test)]
    pub(super) fn done(&self) -> u64 {
        self.shared.done.load(Ordering::SeqCst)
    }

    /// Waits until `n` checkpoints were made, or a minute passed (tests:
    /// a checkpoint that never comes fails the test, not hangs it).
    #[cfg(test)]
    pub(super) fn wait_for(&self, n: u64) {
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut st = lock(&self.shared.state);
        while self.done() < n && std::time::Instant::now() < give_up {
            st = wait_until(&self.shared.state, &self.shared.wake, st, Some(give_up));
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        lock(&self.shared.state).stop = true;
        self.shared.wake.notify_all();
    }
}

/// The thread: one `PASSIVE` checkpoint per request (requests made while
/// one runs are served by the next).
fn checkpoints(db: &std::path::Path, shared: &Shared) {
    let Ok(conn) = Connection::open(db) else {
        return;
    };
    let _ = conn.busy_timeout(std::time::Duration::from_secs(10));
    let mut st = lock(&shared.state);
    loop {
        if st.stop {
            return;
        }
        if !st.asked {
            st = wait_until(&shared.state, &shared.wake, st, None);
            continue;
        }
        st.asked = false;
        drop(st);
        // A failed checkpoint (the database busy past the timeout) leaves
        // the frames in the WAL, where readers find them; the next
        // request tries again.
        let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        shared.done.fetch_add(1, Ordering::SeqCst);
        st = lock(&shared.state);
        shared.wake.notify_all();
    }
}
