//! Checkpoints of the run journal's WAL, off the writers' path.
//!
//! Left to itself, SQLite checkpoints a WAL database once the WAL passes
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
//! 0`). After a commit that grew the WAL by [`WAL_LIMIT`] bytes since the
//! last checkpoint was asked for, a thread of the store checkpoints it on
//! a connection of its own, `PASSIVE`ly: it blocks neither writers nor
//! readers, and what it does not finish (a process that exits meanwhile)
//! the next one does. Durability is unchanged: a shown write still waits
//! for its WAL fsync (`Group::sync`); a checkpoint only moves committed
//! frames into the database. SQLite restarts the WAL from its start once
//! a checkpoint has copied all of it, and truncates the file then
//! (`journal_size_limit = 0`), so the file's length is what was written
//! since.

use crate::sync::{lock, wait_until};
use rusqlite::Connection;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// WAL growth (bytes) between checkpoints: SQLite's own threshold of
/// 1000 pages of 4 KiB.
pub(super) const WAL_LIMIT: u64 = 1000 * 4096;

/// Hands the checkpoints of `conn` (the store's connection to a WAL
/// database) to a [`Checkpointer`].
pub(super) fn hand_over(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    conn.pragma_update(None, "journal_size_limit", 0)
}

/// Asks for checkpoints of one WAL database and makes them on a thread
/// started with the first (told to stop when the store is dropped; one
/// under way is left to finish, or to the process's exit).
#[derive(Debug)]
pub(super) struct Checkpointer {
    db: PathBuf,
    wal: PathBuf,
    /// The WAL's length when the last checkpoint was asked for.
    mark: AtomicU64,
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
    pub(super) fn new(db: PathBuf, wal: PathBuf) -> Checkpointer {
        Checkpointer {
            db,
            wal,
            mark: AtomicU64::new(0),
            shared: Arc::default(),
            started: Mutex::new(false),
        }
    }

    /// After a commit: asks for a checkpoint when the WAL grew by
    /// [`WAL_LIMIT`] since the last one was asked for (one `stat`).
    pub(super) fn committed(&self) {
        let Ok(len) = std::fs::metadata(&self.wal).map(|m| m.len()) else {
            return;
        };
        let mark = self.mark.load(Ordering::Relaxed);
        // Shorter than at the mark: SQLite restarted the WAL.
        let base = if len < mark { 0 } else { mark };
        if len < base + WAL_LIMIT {
            if base != mark {
                self.mark.store(base, Ordering::Relaxed);
            }
            return;
        }
        self.mark.store(len, Ordering::Relaxed);
        self.ask();
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
        lock(&self.shared.state).asked = true;
        self.shared.wake.notify_one();
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
