//! Progress reports while a run is in flight, for the edge to show (the
//! CLI draws a spinner line); the VM itself prints nothing.

use super::Run;
use crate::sync::lock;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// A snapshot of a run in flight.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Ops executed so far.
    pub ops: u64,
    /// Ops in the program (an op in a loop or a called flow runs many times).
    pub program_ops: usize,
    pub llm_in_flight: usize,
    pub llm_queued: usize,
    pub tools_in_flight: usize,
}

/// Receives a [`Progress`] about every 100 ms while a run is in flight,
/// and a last one (`done = true`) when it ends; called from a thread of
/// the run.
#[derive(Clone)]
pub struct ProgressObserver(pub Arc<dyn Fn(Progress, bool) + Send + Sync>);

impl std::fmt::Debug for ProgressObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressObserver")
    }
}

/// Reports to `observe` until the run is done.
pub(super) fn progress_loop(run: &Run<'_>, observe: &ProgressObserver) {
    let snapshot = || Progress {
        ops: run.done_ops.iter().map(|c| c.load(Ordering::Relaxed)).sum(),
        program_ops: run.program.op_count(),
        llm_in_flight: run.llm.busy.load(Ordering::Relaxed),
        llm_queued: run.llm.queued(),
        tools_in_flight: run.tool.busy.load(Ordering::Relaxed),
    };
    loop {
        (observe.0)(snapshot(), false);
        let (m, cv) = &run.done;
        let g = lock(m);
        if *g {
            break;
        }
        let (g, _) = cv
            .wait_timeout(g, Duration::from_millis(100))
            .unwrap_or_else(|e| e.into_inner());
        if *g {
            break;
        }
    }
    (observe.0)(snapshot(), true);
}
