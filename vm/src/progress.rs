//! Live progress of a run, for whoever shows it (the CLI draws a spinner).
//! The VM only samples its counters; it never writes to the terminal.

use std::sync::Arc;

/// A snapshot of a run under way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Ops finished so far (an op in a loop counts once per iteration).
    pub ops_done: u64,
    /// Ops in the program.
    pub ops_total: usize,
    /// LLM calls in flight and waiting for a slot.
    pub llm_busy: usize,
    pub llm_queued: usize,
    /// Tool calls in flight.
    pub tools_busy: usize,
}

/// Receives [`Progress`] about every 100 ms on a thread of its own while
/// the run lasts, then [`ProgressObserver::finish`] once.
pub trait ProgressObserver: Send + Sync {
    fn update(&self, progress: &Progress);
    fn finish(&self);
}

/// The observer a run reports to ([`crate::RunOptions::progress`]).
#[derive(Clone)]
pub struct ProgressSink(pub Arc<dyn ProgressObserver>);

impl std::fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressSink")
    }
}
