//! The early calls of a `solve` op (the streaming planner,
//! `crate::scheduler` `early_calls.rs`): started while the plan streams
//! in, taken by the linked plan's `inv` ops. Defined apart from the
//! scheduler so frames and plans can hold one without depending on it.

use crate::host::HostError;
use crate::telemetry::ToolCallRecord;
use serde_json::Value as Json;
use std::sync::{Condvar, Mutex};

/// The early calls of one `solve` op, shared with the plan it links.
#[derive(Default)]
pub(crate) struct Prefetch {
    slots: Mutex<Vec<Slot>>,
    ready: Condvar,
}

struct Slot {
    tool: String,
    args: Json,
    state: State,
    record: Option<ToolCallRecord>,
}

enum State {
    Running,
    Done(Result<Json, HostError>),
    Taken,
}

impl Prefetch {
    /// The result of an early call to `tool` with `args` that no op has
    /// taken yet, waiting for it while it runs; `None` when there is none.
    pub(crate) fn take(&self, tool: &str, args: &Json) -> Option<Result<Json, HostError>> {
        let mut slots = crate::sync::lock(&self.slots);
        loop {
            let i = slots.iter().position(|s| {
                !matches!(s.state, State::Taken) && s.tool == tool && &s.args == args
            })?;
            match std::mem::replace(&mut slots[i].state, State::Taken) {
                State::Done(r) => return Some(r),
                State::Running => {
                    slots[i].state = State::Running;
                    slots = self.ready.wait(slots).unwrap_or_else(|e| e.into_inner());
                }
                State::Taken => unreachable!("skipped by the search"),
            }
        }
    }

    /// How many early calls to `tool` with `args` there are.
    pub(crate) fn count(&self, tool: &str, args: &Json) -> usize {
        crate::sync::lock(&self.slots)
            .iter()
            .filter(|s| s.tool == tool && &s.args == args)
            .count()
    }

    pub(crate) fn len(&self) -> usize {
        crate::sync::lock(&self.slots).len()
    }

    pub(crate) fn start(&self, tool: &str, args: &Json) -> usize {
        let mut slots = crate::sync::lock(&self.slots);
        slots.push(Slot {
            tool: tool.to_string(),
            args: args.clone(),
            state: State::Running,
            record: None,
        });
        slots.len() - 1
    }

    pub(crate) fn finish(&self, i: usize, result: Result<Json, HostError>, record: ToolCallRecord) {
        let mut slots = crate::sync::lock(&self.slots);
        if let Some(s) = slots.get_mut(i) {
            s.state = State::Done(result);
            s.record = Some(record);
        }
        drop(slots);
        self.ready.notify_all();
    }

    /// Forgets a call that could not start (no op will wait for it).
    pub(crate) fn abandon(&self, i: usize) {
        if let Some(s) = crate::sync::lock(&self.slots).get_mut(i) {
            s.state = State::Taken;
        }
        self.ready.notify_all();
    }

    /// The telemetry of the early calls that have finished.
    pub(crate) fn records(&self) -> Vec<ToolCallRecord> {
        crate::sync::lock(&self.slots)
            .iter()
            .filter_map(|s| s.record.clone())
            .collect()
    }
}
