//! Flow-call extents for an observer that draws one span per call (the
//! OpenTelemetry exporter's `invoke_agent` spans): recorded as the frames
//! of calls start and complete, so that nobody filters every op or folds
//! a run's events to find them (issue 38, the export's cost).
//!
//! A call opens when its frame starts (the time its roots become ready:
//! the earliest `ready_ns` of its ops) and closes when that frame
//! completes (after every op of the call, in its branches and loops too,
//! has ended). A frame is a call's when it carries its own invocation:
//! the entry flow, a `flow.call`, an `on` handler, an inner plan. Only
//! calls that never complete (the run failed or paused inside them, or a
//! `try` abandoned them) are settled from the run's events at its end.

use super::Run;
use crate::frame::Frame;
use crate::observe::{fold_flow_calls, FlowCall};
use crate::sync::lock;
use crate::telemetry::OpEvent;
use std::collections::HashMap;
use std::sync::Mutex;

/// The calls of one run: open ones, and those whose frame completed.
#[derive(Debug, Default)]
pub(super) struct FlowCallLog {
    calls: Mutex<HashMap<u64, Entry>>,
}

#[derive(Debug)]
struct Entry {
    call: FlowCall,
    closed: bool,
}

impl FlowCallLog {
    fn opened(&self, frame: &Frame<'_>, now: u64) {
        let inv = frame.invocation;
        lock(&self.calls).insert(
            inv.id,
            Entry {
                call: FlowCall {
                    id: inv.id,
                    caller: inv.caller,
                    key: inv.key,
                    caller_key: inv.caller_key,
                    flow: frame.flow_id(),
                    agent: frame.agent,
                    start_ns: now,
                    end_ns: now,
                    failed: false,
                },
                closed: false,
            },
        );
    }

    fn closed(&self, id: u64, now: u64) {
        if let Some(e) = lock(&self.calls).get_mut(&id) {
            e.call.end_ns = e.call.end_ns.max(now);
            e.closed = true;
        }
    }

    fn failed(&self, id: u64) {
        if let Some(e) = lock(&self.calls).get_mut(&id) {
            e.call.failed = true;
        }
    }

    /// The run's calls by id, on the events' clock (`t0`: the run clock
    /// at the events' 0). A call left open takes its extent and failure
    /// from its events, as if folded from them.
    pub(super) fn finish(&self, events: &[OpEvent], t0: u64) -> Vec<FlowCall> {
        let calls = std::mem::take(&mut *lock(&self.calls));
        let open = calls.values().any(|e| !e.closed);
        let folded = if open {
            fold_flow_calls(events)
        } else {
            Vec::new()
        };
        let mut out: Vec<FlowCall> = calls
            .into_values()
            .map(|e| {
                let mut c = e.call;
                c.start_ns = c.start_ns.saturating_sub(t0);
                c.end_ns = c.end_ns.saturating_sub(t0);
                if !e.closed {
                    if let Ok(k) = folded.binary_search_by_key(&c.id, |f| f.id) {
                        let f = &folded[k];
                        c.start_ns = c.start_ns.min(f.start_ns);
                        c.end_ns = c.end_ns.max(f.end_ns);
                        c.failed |= f.failed;
                    }
                }
                c
            })
            .collect();
        out.sort_unstable_by_key(|c| c.id);
        out
    }
}

impl<'r> Run<'r> {
    /// `frame` starts at `now`: opens its call when it is one.
    pub(super) fn call_opened(&self, frame: &Frame<'r>, now: u64) {
        if let Some(log) = &self.flow_calls {
            if frame.invocation.id == frame.id {
                log.opened(frame, now);
            }
        }
    }

    /// `frame` completed: closes its call when it is one.
    pub(super) fn call_closed(&self, frame: &Frame<'r>) {
        if let Some(log) = &self.flow_calls {
            if frame.invocation.id == frame.id {
                log.closed(frame.id, self.now());
            }
        }
    }

    /// An op of call `id` failed (not a pause: see `observe_op`).
    pub(super) fn call_failed(&self, id: u64) {
        if let Some(log) = &self.flow_calls {
            log.failed(id);
        }
    }
}
