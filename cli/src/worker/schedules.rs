//! A worker's part in schedules (`ais_vm::store::schedule`): every worker
//! looks for due ticks and queues their runs; the store makes each tick
//! one run however many workers look, so no worker is special and any
//! of them dying loses nothing.

use ais_vm::store::Store;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often a worker looks for due ticks at the most.
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// Fires due schedules until `stop` or `done`; prints a line per run queued
/// unless `quiet`. A store error is printed and the next look tries again.
pub(super) fn fire_loop(store: &dyn Store, stop: &AtomicBool, done: &AtomicBool, quiet: bool) {
    while !stop.load(Ordering::SeqCst) && !done.load(Ordering::SeqCst) {
        match store.fire_schedules() {
            Ok(queued) => {
                if !quiet {
                    for id in queued {
                        eprintln!("schedule: queued run {id}");
                    }
                }
            }
            Err(e) => eprintln!("error: schedules: {e}"),
        }
        std::thread::sleep(LOOK_EVERY);
    }
}
