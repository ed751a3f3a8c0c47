//! Which LLM calls lie on the run's estimated critical path, for
//! backends that treat them differently (hedged requests,
//! `llm::resilience`): an op with no slack in its region's schedule (its
//! earliest start from the latency classes plus its remaining path is the
//! region's longest path), inside a frame whose own op in its parent
//! region has no slack either, up to the entry flow.

use super::Run;
use crate::frame::Frame;
use crate::sync::lock;
use ais_ir::bytecode::RegionCode;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Enclosing frames looked at: deeper nesting counts as critical (the
/// estimate is not worth a long walk per call).
const MAX_WALK: usize = 64;

/// Each region's slack-free ops, computed the first time a call in the
/// region asks (regions are addressed by their code, which lives as long
/// as the run).
#[derive(Default)]
pub(super) struct CriticalOps {
    by_region: Mutex<HashMap<usize, Arc<[bool]>>>,
}

impl CriticalOps {
    fn of(&self, code: &RegionCode) -> Arc<[bool]> {
        let key = code as *const RegionCode as usize;
        if let Some(c) = lock(&self.by_region).get(&key) {
            return Arc::clone(c);
        }
        let c: Arc<[bool]> = slack_free(code).into();
        lock(&self.by_region).insert(key, Arc::clone(&c));
        c
    }
}

/// Ops are in dependency order (codegen's estimate walks them backwards
/// for the remaining path): a forward pass gives each op's earliest start.
fn slack_free(code: &RegionCode) -> Vec<bool> {
    let n = code.ops.len();
    let mut start = vec![0u64; n];
    for (i, op) in code.ops.iter().enumerate() {
        let end = start[i].saturating_add(op.est_ms);
        for s in op.results() {
            for &c in code.consumers_of(s) {
                if let Some(st) = start.get_mut(c as usize) {
                    *st = (*st).max(end);
                }
            }
        }
    }
    let longest = code.ops.iter().map(|o| o.rem_ms).max().unwrap_or(0);
    code.ops
        .iter()
        .zip(&start)
        .map(|(op, &s)| s.saturating_add(op.rem_ms) >= longest)
        .collect()
}

impl<'r> Run<'r> {
    /// Whether op `op` of `frame` is on the critical path (see the module
    /// documentation).
    pub(super) fn on_critical_path(&self, frame: &Frame<'r>, op: u32) -> bool {
        let (mut f, mut op) = (frame, op);
        for _ in 0..MAX_WALK {
            if !self
                .critical
                .of(f.code)
                .get(op as usize)
                .copied()
                .unwrap_or(true)
            {
                return false;
            }
            match &f.owner {
                None => return true,
                Some(o) => {
                    op = o.op;
                    f = &o.frame;
                }
            }
        }
        true
    }
}
