//! Per-run resource limits.
//!
//! The call-depth limit bounds how deep calls nest, not how many frames are
//! alive at once: a flow that calls itself twice doubles its frames at every
//! level and, on a dataflow VM that starts every ready call, exhausts the
//! process's memory long before the depth limit. The live-frame limit
//! bounds that: every frame (call, branch, loop iteration, `try`/`catch`,
//! handler) counts while it exists. Its slots hold the frame's values, so
//! the limit also bounds the values a run keeps. Exceeding it stops the run
//! with [`FRAMES_CODE`]: not catchable by `try` (catching it would let the
//! program keep growing), and resumable like any failed run (the journal
//! keeps what completed; resume with a higher limit).

use std::sync::atomic::{AtomicUsize, Ordering};

/// The failure code of the live-frame limit.
pub const FRAMES_CODE: &str = "LIMIT_FRAMES";

/// Default for `RunOptions::max_live_frames`: far more than any program
/// without runaway recursion needs, far less than what exhausts memory
/// (a frame takes a few hundred bytes plus its values).
pub const DEFAULT_MAX_LIVE_FRAMES: usize = 200_000;

/// Failures that end the run instead of being caught by a `try`.
pub fn is_fatal(code: &str) -> bool {
    code == FRAMES_CODE
}

/// Counts live frames against a limit.
pub(crate) struct FrameCount {
    pub live: AtomicUsize,
    pub max: usize,
}

impl FrameCount {
    pub fn new(max: usize) -> FrameCount {
        FrameCount {
            live: AtomicUsize::new(0),
            max,
        }
    }

    /// Claims a frame; `false` (claiming nothing) when at the limit.
    pub fn claim(&self) -> bool {
        let n = self.live.fetch_add(1, Ordering::Relaxed);
        if n >= self.max {
            self.live.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// A frame was dropped.
    pub fn release(&self) {
        self.live.fetch_sub(1, Ordering::Relaxed);
    }
}
