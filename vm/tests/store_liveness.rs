//! A run's liveness is its lease, renewed by its owner's heartbeat, and
//! the identity of its owner process (pid *and* start time), never a pid
//! alone: a dead run whose recorded pid now belongs to an unrelated live
//! process is resumable; a run whose owner is alive and renewing is not
//! (`journal.busy`). SQLite run store (`vm/src/store/sqlite/runs.rs`,
//! `vm/src/store/lease.rs`).

#![allow(clippy::unwrap_used)]

use ais_vm::journal::{self, Journal, Status};
use ais_vm::store::lease;
use std::path::Path;
use std::process::{Child, Command};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap()
}

/// An unrelated live process (stopped when the guard drops).
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Sleeper {
        Sleeper(Command::new("sleep").arg("300").spawn().unwrap())
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts run `id` in `dir` (owned by this process), then rewrites its row
/// as if process `owner` (pid `pid`) owned it with lease `lease_until`.
fn run_owned_by(dir: &Path, id: &str, pid: u32, owner: &str, lease_until: i64) {
    let j = Journal::begin(Some(dir), id, "p.ais", b"artifact", None, &[]).unwrap();
    drop(j);
    let c = rusqlite::Connection::open(dir.join(journal::DB_FILE)).unwrap();
    c.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    let n = c
        .execute(
            "UPDATE runs SET pid = ?2, owner = ?3, lease_until = ?4 WHERE id = ?1",
            rusqlite::params![id, i64::from(pid), owner, lease_until],
        )
        .unwrap();
    assert_eq!(n, 1);
}

fn status_of(dir: &Path, id: &str) -> Status {
    journal::list_runs(dir)
        .unwrap()
        .into_iter()
        .find(|r| r.id == id)
        .unwrap()
        .status
}

#[test]
fn a_dead_run_whose_pid_was_reused_is_resumable() {
    let d = tempfile::tempdir().unwrap();
    let other = Sleeper::start();
    let start = lease::start_ticks(other.pid()).unwrap();
    // The run's process died; the kernel gave its pid to `sleep`, which
    // started at another time. Its lease has not even expired yet.
    let owner = format!("{}:{}:{}", lease::host_name(), other.pid(), start + 7);
    run_owned_by(d.path(), "reused", other.pid(), &owner, now_ms() + 60_000);
    assert!(Path::new(&format!("/proc/{}", other.pid())).exists());
    assert_eq!(status_of(d.path(), "reused"), Status::Interrupted);
    let j = Journal::resume(d.path(), "reused").unwrap();
    assert_eq!(j.run_id(), "reused");
    // Resumed here: this process owns it now.
    assert_eq!(status_of(d.path(), "reused"), Status::Running);
}

#[test]
fn a_live_run_renewing_its_lease_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let other = Sleeper::start();
    let start = lease::start_ticks(other.pid()).unwrap();
    // The owner is that very process (same pid, same start time) and its
    // lease is fresh: it is running.
    let owner = format!("{}:{}:{start}", lease::host_name(), other.pid());
    run_owned_by(d.path(), "live", other.pid(), &owner, now_ms() + 60_000);
    assert_eq!(status_of(d.path(), "live"), Status::Running);
    let e = Journal::resume(d.path(), "live").unwrap_err();
    assert_eq!(e.code, "journal.busy");
    // Once its lease runs out (the process hangs, or stopped renewing), it
    // is interrupted and can be resumed.
    run_owned_by(d.path(), "stale", other.pid(), &owner, now_ms() - 1);
    assert_eq!(status_of(d.path(), "stale"), Status::Interrupted);
    Journal::resume(d.path(), "stale").unwrap();
}

#[test]
fn an_owner_on_another_host_is_live_while_its_lease_is() {
    let d = tempfile::tempdir().unwrap();
    let far = "worker-7.example:4242:123456";
    run_owned_by(d.path(), "far", 4242, far, now_ms() + 60_000);
    assert_eq!(
        Journal::resume(d.path(), "far").unwrap_err().code,
        "journal.busy"
    );
    run_owned_by(d.path(), "gone", 4242, far, now_ms() - 1);
    Journal::resume(d.path(), "gone").unwrap();
    // A row written before leases existed has no owner: nothing renews it.
    run_owned_by(d.path(), "old", 4242, "", now_ms() + 60_000);
    let c = rusqlite::Connection::open(d.path().join(journal::DB_FILE)).unwrap();
    c.execute(
        "UPDATE runs SET owner = NULL, lease_until = NULL WHERE id = 'old'",
        [],
    )
    .unwrap();
    assert_eq!(status_of(d.path(), "old"), Status::Interrupted);
    Journal::resume(d.path(), "old").unwrap();
}

#[test]
fn the_owner_renews_its_lease() {
    let d = tempfile::tempdir().unwrap();
    let _j = Journal::begin(Some(d.path()), "beat", "p.ais", b"a", None, &[]).unwrap();
    let c = rusqlite::Connection::open(d.path().join(journal::DB_FILE)).unwrap();
    c.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    // Nearly expired: the next heartbeat pushes it a lease ahead.
    let low = now_ms() + 100;
    c.execute(
        "UPDATE runs SET lease_until = ?1 WHERE id = 'beat'",
        rusqlite::params![low],
    )
    .unwrap();
    let mut renewed = low;
    // Bounded wait for a heartbeat (several periods), so a broken
    // heartbeat fails instead of hanging.
    for _ in 0..(10 * lease::HEARTBEAT_MS / 50) {
        renewed = c
            .query_row("SELECT lease_until FROM runs WHERE id = 'beat'", [], |r| {
                r.get(0)
            })
            .unwrap();
        if renewed > low {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(renewed > low + lease::HEARTBEAT_MS, "lease not renewed");
    let owner: String = c
        .query_row("SELECT owner FROM runs WHERE id = 'beat'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(owner, lease::this_process());
}
