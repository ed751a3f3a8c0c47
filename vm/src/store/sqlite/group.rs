//! Group commit of the run journal's writes, and when they are durable.
//!
//! A writer queues its statements, and whoever holds the connection next
//! commits everything queued in one transaction, so concurrent runs (a
//! server) and concurrent ops (a fan-out) share one transaction.
//!
//! Durability is a second step, outside the connection's lock: a group is
//! committed with `synchronous = NORMAL` (appended to the WAL: it survives
//! this process, not yet a power loss), and a writer whose write is
//! *shown* (see `docs/reliability.md`, "What is durable when") then waits
//! for an fsync of the WAL that covers its commit ([`Group::sync`]). One
//! fsync covers every commit before it, so the writers waiting meanwhile
//! share it, and a write nobody depends on yet (the row of a run whose id
//! no one was given, an LLM call's answer) does not wait for one at all: it
//! becomes durable with the next shown write.

use crate::store::rows::JournalError;
use crate::sync::lock;
use rusqlite::Connection;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The writes of one store's connection waiting to be committed, and
/// what has been committed and made durable.
#[derive(Debug)]
pub(super) struct Group {
    /// Writes waiting for the next group commit.
    pub(super) pending: Mutex<Vec<Pending>>,
    /// Journal transactions committed (writes / commits: the batching);
    /// also the sequence number [`Group::sync`] covers up to.
    pub(super) commits: AtomicU64,
    /// The WAL file, when the database is on disk in WAL mode: grouped
    /// commits append to it without an fsync, and `sync` fsyncs it.
    /// `None` (in memory, or WAL refused): every commit is as configured.
    pub(super) wal: Option<PathBuf>,
    /// The commits (by `commits`) a WAL fsync has covered. Held during
    /// the fsync, so writers arriving meanwhile wait and share the next.
    pub(super) synced: Mutex<u64>,
    /// WAL fsyncs done (for tests: the fsyncs per shown write).
    pub(super) fsyncs: AtomicU64,
    /// Checkpoints of the WAL, made off the writers' path (`wal` only).
    pub(super) checkpoint: Option<super::checkpoint::Checkpointer>,
}

/// A write waiting for the next group commit (its statements, run in a
/// savepoint of the group's transaction so one failing write fails only
/// itself), and where its outcome goes.
pub(super) struct Pending {
    job: Job,
    /// `journal.write` for entries, `journal.db` for run rows.
    code: &'static str,
    done: Arc<Mutex<Option<Result<(), JournalError>>>>,
}

/// The statements of one grouped write.
type Job = Box<dyn FnOnce(&Connection) -> rusqlite::Result<()> + Send>;

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("code", &self.code)
            .finish_non_exhaustive()
    }
}

impl Group {
    /// `wal`: the database's WAL file when it is on disk in WAL mode.
    pub(super) fn new(wal: Option<PathBuf>) -> Group {
        // SQLite names the WAL and its index after the database:
        // `NAME-wal`, `NAME-shm`.
        let checkpoint = wal.as_ref().and_then(|w| {
            let db = w.file_name()?.to_str()?.strip_suffix("-wal")?;
            Some(super::checkpoint::Checkpointer::new(
                w.with_file_name(db),
                w.with_file_name(format!("{db}-shm")),
            ))
        });
        Group {
            checkpoint,
            pending: Mutex::new(Vec::new()),
            commits: AtomicU64::new(0),
            wal,
            synced: Mutex::new(0),
            fsyncs: AtomicU64::new(0),
        }
    }

    /// Runs `job` in the next group commit on `conn` (the database at
    /// `path`); returns once that commit is durable (`shown`), or once it
    /// survives this process (not `shown`: the next shown write makes it
    /// durable too). Whoever gets the connection commits everything queued
    /// by then.
    pub(super) fn run(
        &self,
        conn: &Mutex<Connection>,
        path: &str,
        code: &'static str,
        shown: bool,
        job: impl FnOnce(&Connection) -> rusqlite::Result<()> + Send + 'static,
    ) -> Result<(), JournalError> {
        self.committed(conn, path, code, job)?;
        if shown {
            self.sync(path, code)?;
        }
        Ok(())
    }

    /// Waits until every commit made so far is durable: the WAL is fsynced
    /// once for all the writers waiting (a writer that arrives while an
    /// fsync runs waits for it, then usually finds its commit covered by
    /// the next one, which it does for everyone queued behind it).
    pub(super) fn sync(&self, path: &str, code: &'static str) -> Result<(), JournalError> {
        let Some(wal) = &self.wal else {
            return Ok(());
        };
        let target = self.commits.load(Ordering::SeqCst);
        // Held for an fsync (milliseconds): waiters sleep on it rather
        // than spin and yield as `crate::sync::lock` does.
        let mut synced = self.synced.lock().unwrap_or_else(|e| e.into_inner());
        if *synced >= target {
            return Ok(());
        }
        // Every commit counted by now has its frames in the WAL file.
        let upto = self.commits.load(Ordering::SeqCst);
        // Opened by name each time: the file is SQLite's (it may be
        // recreated when every connection closed; ours stays open, but a
        // descriptor kept here would then name a deleted file).
        // No WAL file: SQLite checkpointed it into the database (syncing
        // both) and removed it, so what it held is durable already.
        std::fs::File::open(wal)
            .and_then(|f| f.sync_data())
            .or_else(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Ok(()),
                _ => Err(e),
            })
            .map_err(|e| {
                JournalError::new(
                    code,
                    format!("cannot make the run journal `{path}` durable: {e}"),
                )
            })?;
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        *synced = upto;
        Ok(())
    }

    /// Runs `job` in the next group commit (see [`Group::run`]) and
    /// returns once it is committed.
    fn committed(
        &self,
        conn: &Mutex<Connection>,
        path: &str,
        code: &'static str,
        job: impl FnOnce(&Connection) -> rusqlite::Result<()> + Send + 'static,
    ) -> Result<(), JournalError> {
        let done = Arc::new(Mutex::new(None));
        lock(&self.pending).push(Pending {
            job: Box::new(job),
            code,
            done: done.clone(),
        });
        let mut conn = conn.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = lock(&done).take() {
            return r;
        }
        self.commit_pending(&mut conn, path);
        let r = lock(&done).take();
        r.unwrap_or_else(|| {
            Err(JournalError::new(
                code,
                "the journal write was lost before its commit (internal)",
            ))
        })
    }

    /// Commits every queued write in one transaction (the caller holds
    /// the connection), and tells each writer how it went.
    fn commit_pending(&self, conn: &mut Connection, path: &str) {
        let batch = std::mem::take(&mut *lock(&self.pending));
        if batch.is_empty() {
            return;
        }
        let fail = |code: &'static str, e: rusqlite::Error| {
            JournalError::new(code, format!("cannot write the run journal `{path}`: {e}"))
        };
        let (dones, jobs): (Vec<_>, Vec<_>) =
            batch.into_iter().map(|p| (p.done, (p.code, p.job))).unzip();
        let mut each = Vec::with_capacity(jobs.len());
        // Appended without an fsync (see the module docs); the connection
        // is back to `FULL` for everything else that commits on it.
        let relaxed =
            self.wal.is_some() && conn.execute_batch("PRAGMA synchronous = NORMAL").is_ok();
        let whole = (|| {
            let mut tx = conn.transaction()?;
            for (code, job) in jobs {
                let r = (|| {
                    let sp = tx.savepoint()?;
                    job(&sp)?;
                    sp.commit()
                })();
                each.push(r.map_err(|e| fail(code, e)));
            }
            tx.commit()
        })()
        .map_err(|e| fail("journal.write", e));
        if whole.is_ok() {
            self.commits.fetch_add(1, Ordering::SeqCst);
            if let Some(c) = &self.checkpoint {
                c.committed();
            }
        }
        // A connection left at `NORMAL` would commit everything else
        // without an fsync: the writers hear of it (their rows are
        // committed; a resume replays them).
        let whole = match relaxed {
            true => whole.and(
                conn.execute_batch("PRAGMA synchronous = FULL")
                    .map_err(|e| fail("journal.write", e)),
            ),
            false => whole,
        };
        for (done, r) in dones
            .into_iter()
            .zip(each.into_iter().map(Some).chain(std::iter::repeat(None)))
        {
            *lock(&done) = Some(whole.clone().and(r.unwrap_or(Ok(()))));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::runs::tests::entry;
    use super::super::SqliteStore;
    use crate::store::{Entry, NewRun, Store};
    use crate::sync::lock;
    use std::sync::Arc;

    fn fsyncs(store: &SqliteStore) -> u64 {
        store.group.fsyncs.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A run row and LLM answers nobody was shown wait for no fsync (and
    /// are read back at once); the run's outcome waits for one, which
    /// covers them; shown writes waiting together share one fsync; the
    /// connection is back to `synchronous = FULL` for its other users.
    #[test]
    fn unshown_writes_wait_for_no_fsync_and_a_shown_one_covers_them() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Arc::new(SqliteStore::open(Some(dir.path())).expect("open"));
        assert!(
            store.group.wal.is_some(),
            "a journal on disk is in WAL mode"
        );
        let run = |id| NewRun {
            id,
            program: "p",
            artifact: b"a",
            entry: None,
            args: "[]",
        };
        store.begin_run_unshown(&run("r1")).expect("begin");
        for i in 0..10 {
            store.write_unshown("r1", 0, &[entry(i)]).expect("write");
        }
        assert_eq!(fsyncs(&store), 0);
        assert_eq!(store.entries("r1").expect("entries").len(), 10);
        store
            .finish("r1", 0, "completed", Some("\"x\""), None)
            .expect("finish");
        assert_eq!(fsyncs(&store), 1);
        // Nothing committed since: nothing to sync.
        store.sync("journal.write").expect("sync");
        assert_eq!(fsyncs(&store), 1);
        let mode: i64 = store
            .conn()
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .expect("pragma");
        assert_eq!(mode, 2, "FULL");

        // 16 shown writes committed while an fsync is under way share the next.
        store.begin_run(&run("r2")).expect("begin");
        let before = fsyncs(&store);
        let held = lock(&store.group.synced);
        let writers: Vec<_> = (0..16)
            .map(|i| {
                let s = store.clone();
                std::thread::spawn(move || s.write("r2", 0, &[entry(100 + i)]))
            })
            .collect();
        // All 16 committed: each waits for the fsync held here.
        while store.entries("r2").map(|e| e.len()).unwrap_or(0) < 16 {
            std::thread::yield_now();
        }
        drop(held);
        for w in writers {
            assert_eq!(w.join().expect("writer"), Ok(()));
        }
        assert_eq!(fsyncs(&store) - before, 1);

        // Another connection (a restarted process) reads them all.
        drop(store);
        let again = SqliteStore::open(Some(dir.path())).expect("reopen");
        let r1 = again.run_row("r1").expect("read").expect("r1");
        assert_eq!(r1.result.as_deref(), Some("\"x\""));
        assert_eq!(again.entries("r1").expect("entries").len(), 10);
        assert_eq!(again.entries("r2").expect("entries").len(), 16);
    }

    /// A fan-out's answers never wait for a checkpoint: the journal's
    /// connection makes none; the store's thread makes one once `PAGES`
    /// frames wait in the WAL, and the WAL starts over after it.
    #[test]
    fn the_wal_is_checkpointed_off_the_writers_path() {
        use super::super::checkpoint::PAGES;
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SqliteStore::open(Some(dir.path())).expect("open");
        let auto: i64 = store
            .conn()
            .query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))
            .expect("pragma");
        assert_eq!(auto, 0, "the journal's connection does not checkpoint");
        let cp = store
            .group
            .checkpoint
            .as_ref()
            .expect("a WAL database has a checkpointer");
        let run = NewRun {
            id: "r1",
            program: "p",
            artifact: b"a",
            entry: None,
            args: "[]",
        };
        store.begin_run_unshown(&run).expect("begin");
        assert_eq!(cp.done(), 0);
        let big = |i: usize| Entry {
            value: Some(format!("\"{}\"", "x".repeat(16 * 1024))),
            ..entry(i)
        };
        // Each write appends its pages to the WAL and none checkpoints
        // them, until the commit that leaves `PAGES` waiting asks for it.
        let mut n = 0;
        while cp.waiting_frames().expect("WAL index") < PAGES && n < 4096 {
            store.write_unshown("r1", 0, &[big(n)]).expect("write");
            n += 1;
        }
        assert!(n < 4096, "{n} writes never filled the WAL");
        cp.wait_for(1);
        assert!(cp.done() >= 1, "the store's thread checkpointed");
        assert_eq!(
            cp.waiting_frames(),
            Some(0),
            "it copied every frame committed before it was asked"
        );
        assert_eq!(fsyncs(&store), 0, "no write waited for an fsync");
        let db = std::fs::metadata(dir.path().join(crate::store::rows::DB_FILE))
            .expect("db")
            .len();
        assert!(
            db >= u64::from(PAGES) * 4096 / 2,
            "the frames moved into the database ({db} bytes)"
        );
        // The next commit starts the WAL over.
        store.write_unshown("r1", 0, &[entry(n)]).expect("write");
        let left = cp.waiting_frames().expect("WAL index");
        assert!(left < 16, "the WAL started over ({left} frames wait)");
        assert_eq!(store.entries("r1").expect("entries").len(), n + 1);
    }
}
