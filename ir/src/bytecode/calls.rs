//! How many LLM calls a run of a flow is sure to make, known before it
//! starts: the LLM ops of its body (not of branch arms, loop bodies or
//! handlers, which may not run) and, for each flow it calls there, that
//! flow's own count. A lower bound: what a loop, a branch or a plan adds is
//! not counted. Admission uses it as a run's starting service
//! (`ais_serve::fair`), so a run known to be long does not start level
//! with a one-call run.

use super::{Imm, Program};

impl Program {
    /// The LLM calls every run of flow `flow` makes (see the module docs);
    /// a flow that calls itself, directly or not, counts that call as 0.
    pub fn sure_llm_calls(&self, flow: u32) -> u64 {
        // Post-order over the call graph with an explicit stack (call
        // chains may be as deep as the program is long).
        const ON_STACK: u64 = u64::MAX;
        let mut memo: Vec<Option<u64>> = vec![None; self.flows.len()];
        let mut stack: Vec<(u32, bool)> = vec![(flow, false)];
        while let Some((f, callees_done)) = stack.pop() {
            let Some(code) = self.flows.get(f as usize) else {
                continue;
            };
            let body = code.regions.first().map_or(&[][..], |r| &r.ops[..]);
            let callees = body.iter().filter_map(|op| match op.imm {
                Imm::Callee(c) => Some(c),
                _ => None,
            });
            if callees_done {
                let own = body
                    .iter()
                    .filter(|op| op.opcode.effect() == crate::ops::Effect::Llm)
                    .count() as u64;
                let called: u64 = callees
                    .map(|c| match memo.get(c as usize).copied().flatten() {
                        Some(ON_STACK) | None => 0,
                        Some(n) => n,
                    })
                    .fold(0, u64::saturating_add);
                memo[f as usize] = Some(own.saturating_add(called));
                continue;
            }
            if memo[f as usize].is_some() {
                continue;
            }
            memo[f as usize] = Some(ON_STACK);
            stack.push((f, true));
            for c in callees {
                if memo.get(c as usize).is_some_and(Option::is_none) {
                    stack.push((c, false));
                }
            }
        }
        match memo.get(flow as usize).copied().flatten() {
            Some(ON_STACK) | None => 0,
            Some(n) => n,
        }
    }

    /// [`Program::sure_llm_calls`] of the entry flow `name` picks (0 when
    /// it picks none: the run fails before any call).
    pub fn entry_sure_llm_calls(&self, name: Option<&str>) -> u64 {
        self.find_entry(name).map_or(0, |e| self.sure_llm_calls(e))
    }
}
