//! A run's flow calls (the entry flow, each `flow.call`, `on` handler and
//! inner plan) with their extents: what one span per call is drawn from.
//! The scheduler records them from its frames while the run goes
//! (`crate::scheduler`, for an observer that asks); [`fold_flow_calls`]
//! finds them in a run's events instead (a report read afterwards, and
//! the calls a failure or pause left open).

use crate::telemetry::{Invocation, OpEvent, Status};
use std::collections::BTreeMap;

/// One flow call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowCall {
    /// `Invocation::id` of the call's ops, and the call that made it
    /// (`None` for the entry flow).
    pub id: u64,
    pub caller: Option<u64>,
    /// The same call's identity in every attempt of the run, and its
    /// caller's ([`Invocation::key`]): its span's id.
    pub key: u64,
    pub caller_key: Option<u64>,
    /// The flow's telemetry id and its agent, as in its ops' events.
    pub flow: u32,
    pub agent: u32,
    /// Run-clock extent: from the call's first op becoming ready to its
    /// frame's completion (folded from events: to its last op's end).
    pub start_ns: u64,
    pub end_ns: u64,
    /// An op of the call failed (a pause is not a failure).
    pub failed: bool,
}

/// Whether an event is an op's failure (a pause is not one).
pub(crate) fn is_failure(e: &OpEvent) -> bool {
    e.status == Status::Failed && !is_pause(e)
}

/// Whether a failed event is a pause (the run stops to ask someone).
pub(crate) fn is_pause(e: &OpEvent) -> bool {
    e.detail
        .as_ref()
        .and_then(|d| d.error.as_deref())
        .is_some_and(|c| c == crate::exec::PAUSED)
}

/// The flow calls of a run's events, by id: each from its ops' earliest
/// `ready_ns` (or start) to their latest end. One pass; consecutive events
/// of one call (a worker's run of ops) are folded before they are merged.
pub fn fold_flow_calls(events: &[OpEvent]) -> Vec<FlowCall> {
    let mut calls: BTreeMap<u64, FlowCall> = BTreeMap::new();
    let mut run: Option<FlowCall> = None;
    let mut merge = |s: FlowCall| {
        calls
            .entry(s.id)
            .and_modify(|c| {
                c.start_ns = c.start_ns.min(s.start_ns);
                c.end_ns = c.end_ns.max(s.end_ns);
                c.failed |= s.failed;
            })
            .or_insert(s);
    };
    for e in events {
        let Invocation {
            id,
            caller,
            key,
            caller_key,
        } = e.invocation;
        let start = e.ready_ns.min(e.start_ns);
        let failed = is_failure(e);
        match &mut run {
            Some(s) if s.id == id => {
                s.start_ns = s.start_ns.min(start);
                s.end_ns = s.end_ns.max(e.end_ns);
                s.failed |= failed;
            }
            _ => {
                let next = FlowCall {
                    id,
                    caller,
                    key,
                    caller_key,
                    flow: e.flow,
                    agent: e.agent,
                    start_ns: start,
                    end_ns: e.end_ns,
                    failed,
                };
                if let Some(s) = run.replace(next) {
                    merge(s);
                }
            }
        }
    }
    if let Some(s) = run {
        merge(s);
    }
    calls.into_values().collect()
}
