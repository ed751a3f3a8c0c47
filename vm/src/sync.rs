//! Locking and waiting, in one place.
//!
//! The VM's shared state is plain collections behind mutexes; a panic while
//! one is held cannot leave them half-updated in a way later readers would
//! trip on, so a poisoned lock is taken over rather than propagated.
//!
//! Waiting until a known moment ([`wait_until`]) is precise: a timed sleep
//! on a virtual machine often ends 0.1–1 ms late (the host has to schedule
//! the halted vCPU again), and simulated LLM replies or the mock server's
//! delayed replies that are a few hundred µs late on every call of a chain
//! add up. So a wait sleeps until [`SPIN`] before the moment and then
//! yields the CPU in a loop until it is reached.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Takes the lock, also after a panic elsewhere poisoned it.
///
/// A busy lock is retried (spinning, then yielding the CPU) for a while
/// before the thread sleeps on it: the VM's locks are held for
/// microseconds, and on a virtual machine a thread that sleeps on a futex
/// is often woken onto the CPU of the thread that released it (the idle
/// vCPU looks preempted to the guest's scheduler), where it waits for that
/// thread's time slice to end, up to milliseconds, while its own CPU idles.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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

/// How long before a due moment [`wait_until`] stops sleeping and starts
/// yielding (timed sleeps here overshoot by 0.15–0.5 ms typically, rarely
/// more than 1 ms).
pub const SPIN: Duration = Duration::from_millis(1);

/// One step of waiting on `cv` (guarding `m`) for a notification or the
/// moment `at` (`None`: no moment, only notifications). Returns the guard
/// again; it may return early or spuriously, so callers loop and re-check
/// their condition. Within [`SPIN`] of `at` the lock is released and the
/// thread yields instead of sleeping.
pub fn wait_until<'a, T>(
    m: &'a Mutex<T>,
    cv: &Condvar,
    g: MutexGuard<'a, T>,
    at: Option<Instant>,
) -> MutexGuard<'a, T> {
    let Some(at) = at else {
        return cv.wait(g).unwrap_or_else(|e| e.into_inner());
    };
    let left = at.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return g;
    }
    if left > SPIN {
        return cv
            .wait_timeout(g, left - SPIN)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    drop(g);
    std::thread::yield_now();
    lock(m)
}

/// Yes/no answers a person gave, asked once per key for a run: a question
/// already answered is not asked again, and questions are asked one at a
/// time (another thread may have asked the same while this one waited).
pub struct AskOnce<K> {
    answers: Mutex<std::collections::HashMap<K, bool>>,
    asking: Mutex<()>,
}

impl<K> Default for AskOnce<K> {
    fn default() -> Self {
        AskOnce {
            answers: Mutex::new(std::collections::HashMap::new()),
            asking: Mutex::new(()),
        }
    }
}

impl<K: std::hash::Hash + Eq> AskOnce<K> {
    /// The answer for `key`, from `ask` the first time.
    pub fn answer(&self, key: K, ask: impl FnOnce() -> bool) -> bool {
        if let Some(a) = lock(&self.answers).get(&key).copied() {
            return a;
        }
        let _one = lock(&self.asking);
        let known = lock(&self.answers).get(&key).copied();
        match known {
            Some(a) => a,
            None => {
                let a = ask();
                lock(&self.answers).insert(key, a);
                a
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_until_returns_at_the_moment_and_not_before() {
        let m = Mutex::new(());
        let cv = Condvar::new();
        let at = Instant::now() + Duration::from_millis(5);
        let mut g = lock(&m);
        while Instant::now() < at {
            g = wait_until(&m, &cv, g, Some(at));
        }
        drop(g);
        // Not before the moment (the loop guarantees it), and not stuck
        // long after it: the spin phase returns within a yield.
        assert!(Instant::now() >= at);
        assert!(Instant::now() < at + Duration::from_millis(100));
    }

    #[test]
    fn wait_until_wakes_on_notify_without_a_moment() {
        let pair = std::sync::Arc::new((Mutex::new(false), Condvar::new()));
        let p2 = pair.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            *lock(&p2.0) = true;
            p2.1.notify_one();
        });
        let mut g = lock(&pair.0);
        while !*g {
            g = wait_until(&pair.0, &pair.1, g, None);
        }
        drop(g);
        assert!(t.join().is_ok());
    }
}
