//! The VM's locking helpers, as the test doubles need them (the VM keeps
//! its own private: they are not part of its API). Same behaviour, so the
//! mock server's reply timing, which the benchmarks measure, is unchanged.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// Takes the lock, also after a panic elsewhere poisoned it (the guarded
/// collections cannot be left half-updated). A busy lock is retried,
/// spinning then yielding, before the thread sleeps on it: on a virtual
/// machine a thread woken from a futex often waits for the releasing
/// thread's time slice to end.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    for i in 0..LOCK_TRIES {
        match m.try_lock() {
            Ok(g) => return g,
            Err(std::sync::TryLockError::Poisoned(e)) => return e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) if i < LOCK_SPINS => {
                std::hint::spin_loop();
            }
            Err(std::sync::TryLockError::WouldBlock) => std::thread::yield_now(),
        }
    }
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Attempts of [`lock`] before sleeping: the first spin, the rest yield.
const LOCK_TRIES: u32 = 256;
const LOCK_SPINS: u32 = 64;

/// How long before a due moment a wait stops sleeping and starts yielding
/// (timed sleeps overshoot by 0.15–0.5 ms typically, rarely more than 1 ms).
pub(crate) const SPIN: Duration = Duration::from_millis(1);
