//! Fault injection: kill the process at a chosen point of a run.
//!
//! The product only exposes the seam ([`ais_vm::journal::WriteObserver`]);
//! the switch below is read by the test-only `aisc-fault` binary, never by
//! the shipped `aisc`.

use ais_vm::journal::{set_write_observer, WriteObserver};
use std::sync::Arc;

/// `N`: abort right after the N-th journal write has committed.
pub const FAULT_ENV: &str = "AIS_FAULT_ABORT_AFTER_JOURNAL_WRITES";

/// Aborts the process (no unwinding, no destructors, like SIGKILL) once a
/// journal has made this many writes.
#[derive(Debug, Clone, Copy)]
pub struct AbortAfterWrites(pub u64);

impl WriteObserver for AbortAfterWrites {
    fn after_write(&self, n: u64) {
        if n >= self.0 {
            eprintln!("{FAULT_ENV}: aborting after journal write {n}");
            std::process::abort();
        }
    }
}

/// Installs [`AbortAfterWrites`] when [`FAULT_ENV`] holds a number; returns
/// whether it did.
pub fn install_from_env() -> bool {
    let Some(n) = std::env::var(FAULT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    else {
        return false;
    };
    set_write_observer(Arc::new(AbortAfterWrites(n)))
}
