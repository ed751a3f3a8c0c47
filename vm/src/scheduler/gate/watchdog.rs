//! The loop watchdog: an LLM or tool call inside a loop iteration that runs again
//! with the same inputs at the same place (agent, flow, region, op) makes no
//! progress; the N-th repetition (default 3) stops the run with
//! `WATCHDOG_LOOP`. Ops outside loops are not watched (a flow called twice
//! with the same arguments is ordinary dataflow), nor are the AAM's tools
//! whose answers change between identical calls (`claim`, `inbox`,
//! `goals_next`, ...; see `scheduler::admission`).

use crate::frame::{Frame, Role};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;

pub(crate) struct Watchdog {
    limit: u32,
    seen: Mutex<HashMap<[u8; 16], u32>>,
}

impl Watchdog {
    pub(crate) fn new(limit: u32) -> Watchdog {
        Watchdog {
            limit,
            seen: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn limit(&self) -> u32 {
        self.limit
    }

    /// Counts one execution; `Some(n)` when it reaches the limit: `n` is
    /// the limit for the execution that reached it, more for concurrent
    /// iterations that got there after it (they must not run either, but
    /// only the first reports: see `Run::watchdog_tripped`).
    pub(crate) fn observe(&self, frame: &Frame<'_>, op: u32, input_hash: &str) -> Option<u32> {
        let mut in_loop = false;
        let mut f = frame;
        while let Some(o) = &f.owner {
            if matches!(o.role, Role::Iter { .. }) {
                in_loop = true;
                break;
            }
            f = &o.frame;
        }
        if !in_loop {
            return None;
        }
        let mut h = Sha256::new();
        h.update(frame.agent.to_le_bytes());
        h.update(frame.flow.to_le_bytes());
        h.update(frame.region.to_le_bytes());
        h.update(op.to_le_bytes());
        h.update(input_hash.as_bytes());
        let mut key = [0u8; 16];
        key.copy_from_slice(&h.finalize()[..16]);
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let n = seen.entry(key).or_insert(0);
        *n += 1;
        (*n >= self.limit).then_some(*n)
    }
}
