//! The progress line shown while a run is in flight.

use super::Run;
use crate::sync::lock;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub(super) fn progress_loop(run: &Run<'_>) {
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {elapsed} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    loop {
        let ops: u64 = run.done_ops.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        let total = run.program.op_count();
        bar.set_message(format!(
            "ops {ops} (program has {total}) · LLM calls in flight {} (queued {}) · tools {}",
            run.llm.busy.load(Ordering::Relaxed),
            run.llm.queued(),
            run.tool.busy.load(Ordering::Relaxed),
        ));
        bar.tick();
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
    bar.finish_and_clear();
}
