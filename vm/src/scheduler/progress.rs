//! Samples a run's counters for the progress observer the edge provides
//! (`crate::progress`); the VM itself never writes to the terminal.

use super::Run;
use crate::progress::{Progress, ProgressObserver};
use crate::sync::lock;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Reports to `observer` about every 100 ms until the run is done, then
/// finishes it.
pub(super) fn progress_loop(run: &Run<'_>, observer: &dyn ProgressObserver) {
    loop {
        observer.update(&Progress {
            ops_done: run.done_ops.iter().map(|c| c.load(Ordering::Relaxed)).sum(),
            ops_total: run.program.op_count(),
            // Exchanges on the agent lane are LLM work too.
            llm_busy: run.llm.busy.load(Ordering::Relaxed) + run.agent.busy.load(Ordering::Relaxed),
            llm_queued: run.llm.queued() + run.agent.queued(),
            tools_busy: run.tool.busy.load(Ordering::Relaxed),
        });
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
    observer.finish();
}
