//! A count of the compiler's units of work on this thread: ops created by
//! lowering, state entries a branch copies or undoes, ops each pass and the
//! verifier visit. Tests double a generated program and check that the
//! count at most doubles (plus a margin): a superlinear phase shows up as
//! a count, without timing anything. One thread-local add per unit.

use std::cell::Cell;

thread_local! {
    static WORK: Cell<u64> = const { Cell::new(0) };
}

/// Records `n` units of work.
#[inline]
pub fn add(n: usize) {
    WORK.with(|w| w.set(w.get().wrapping_add(n as u64)));
}

/// The units recorded on this thread since the last call, and resets.
pub fn take() -> u64 {
    WORK.with(|w| w.replace(0))
}
