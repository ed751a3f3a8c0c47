//! A run stopping at a `pause` keeps what was already paid for.
//!
//! When a `pause` op stops the run (nobody answers it now), LLM and tool
//! calls may be in flight. Ending the run at once would cancel them: their
//! tokens spent, their replies lost, and the resumed run would send them
//! again. Instead the run is *pausing*: no new effect is admitted (calls
//! admitted and not yet started are dropped: nothing was paid), calls in
//! flight finish and are journaled through the gate as usual, and when
//! none is left the run ends paused.

use super::Run;
use crate::error::RunError;
use crate::sync::lock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The pause a run is waiting to end at.
#[derive(Default)]
pub(in crate::scheduler) struct Pausing {
    on: AtomicBool,
    outcome: Mutex<Option<RunError>>,
}

impl<'r> Run<'r> {
    /// The run stopped at a `pause` and waits for its calls in flight.
    pub(in crate::scheduler) fn pausing(&self) -> bool {
        self.gate.pausing.on.load(Ordering::Acquire)
    }

    /// Ends the run at a `pause` (`outcome`) once no call is in flight.
    pub(in crate::scheduler) fn begin_pause(&self, outcome: RunError) {
        {
            let mut o = lock(&self.gate.pausing.outcome);
            if o.is_none() {
                *o = Some(outcome);
            }
        }
        self.gate.pausing.on.store(true, Ordering::Release);
        self.pause_if_idle();
    }

    /// Ends a pausing run once its lanes are idle (checked after each call
    /// that finishes: [`Run::call_finished`]).
    pub(in crate::scheduler) fn pause_if_idle(&self) {
        if !self.pausing() {
            return;
        }
        let idle = [&self.llm, &self.tool, &self.agent]
            .iter()
            .all(|l| l.busy.load(Ordering::SeqCst) == 0 && l.queued() == 0);
        if !idle {
            return;
        }
        if let Some(e) = lock(&self.gate.pausing.outcome).take() {
            self.finish(Err(e));
        }
    }
}
