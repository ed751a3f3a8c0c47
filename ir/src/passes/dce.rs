//! `dce`: dead-code elimination.
//!
//! 1. Op DCE, per flow: removes ops without effects whose results are all
//!    unused and that cannot fail: pure ops, and control ops (`if`,
//!    `switch`, `loop`, `try_catch`) whose regions contain only pure ops.
//!    Works inside nested regions too. Never removes an effectful op (LLM,
//!    tool, memory, io, call), a terminator, a control op containing one,
//!    or an op that may fail (`1 / n`, `xs[i]`, a cast, a `switch` without
//!    `default`, ... — see `failure.rs`): its failure is observable.
//! 2. Symbol DCE: removes flows, and agents, unreachable from any entry.
//!    Entries are `entry` and `discoverable` flows, event-handler flows and
//!    belief-initialiser flows; reachability follows `flow.call` callees. An agent named by a
//!    constant `communicate` recipient is kept (with its reachable flows).
//!    A module without any entry is a library: symbol DCE leaves it alone.

use super::failure::FailingOps;
use super::util::{erase_ops, Effects, FlowFacts};
use super::{Changed, Pass};
use crate::entity::{AgentId, Arena, FlowId};
use crate::module::{Attr, BeliefInit, FlowData, Module};
use crate::ops::Opcode;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::collections::BTreeSet;

#[derive(Debug, Default)]
pub struct Dce {
    ops_removed: u64,
    flows_removed: u64,
    agents_removed: u64,
}

impl Pass for Dce {
    fn name(&self) -> &'static str {
        "dce"
    }

    fn run(&mut self, m: &mut Module) -> Changed {
        *self = Dce::default();
        let mut changed = Changed::No;
        for (_, agent) in m.agents.iter_mut() {
            for (_, flow) in agent.flows.iter_mut() {
                let n = dce_flow(flow);
                self.ops_removed += n;
                changed |= Changed::from(n > 0);
            }
        }
        changed |= self.symbol_dce(m);
        changed
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("dead ops", self.ops_removed),
            ("dead flows", self.flows_removed),
            ("dead agents", self.agents_removed),
        ]
    }
}

/// Removes dead effect-free ops; returns how many.
pub(crate) fn dce_flow(flow: &mut FlowData) -> u64 {
    let mut removed = 0;
    loop {
        let facts = FlowFacts::new(flow);
        let effects = Effects::new(&flow.dfg, &facts);
        // Removing an op that may fail would turn a failing run (or `try`
        // body) into one that succeeds. Computed once per round: an op that
        // may fail is never dead, so nothing in the set is removed.
        let failing = FailingOps::new(&flow.dfg, &facts.order);
        let mut counts = facts.use_counts();
        let mut dead = Vec::new();
        let mut dead_set: HashSet<crate::entity::Op> = HashSet::default();
        for &op in facts.order.iter().rev() {
            let Some(od) = flow.dfg.ops.get(op) else {
                continue;
            };
            if od.opcode.is_terminator() || effects.has(op) || failing.contains(op) {
                continue;
            }
            if od.results.iter().any(|&r| counts.get(r) > 0) {
                continue;
            }
            // Removing the op (and its regions) removes their uses. Ops
            // found dead earlier in this round are still listed in their
            // regions: their uses (and their regions' uses) were already
            // taken off, so the walk does not enter them again (re-walking
            // nested dead regions was O(ops × depth)).
            let mut todo = vec![op];
            while let Some(g) = todo.pop() {
                crate::work::add(1);
                if !dead_set.insert(g) {
                    continue;
                }
                let Some(gd) = flow.dfg.ops.get(g) else {
                    continue;
                };
                for &v in &gd.operands {
                    counts.remove_use(v);
                }
                for &r in &gd.regions {
                    if let Some(rd) = flow.dfg.regions.get(r) {
                        todo.extend(rd.ops.iter().rev());
                    }
                }
            }
            if let Some(region) = facts.region(op) {
                dead.push((region, op));
            }
        }
        // All at once: one at a time scans the region per op (quadratic).
        erase_ops(&mut flow.dfg, &dead);
        let round = dead.len() as u64;
        removed += round;
        if round == 0 {
            return removed;
        }
    }
}

impl Dce {
    fn symbol_dce(&mut self, m: &mut Module) -> Changed {
        // Roots.
        let mut work: Vec<(AgentId, FlowId)> = Vec::new();
        for (aid, a) in m.agents.iter() {
            for (fid, f) in a.flows.iter() {
                // Discoverable flows are called from outside the program.
                if f.entry || f.discoverable {
                    work.push((aid, fid));
                }
            }
            for h in &a.handlers {
                work.push((aid, h.flow));
            }
            for b in &a.beliefs {
                if let BeliefInit::Flow(f) = b.init {
                    work.push((aid, f));
                }
            }
        }
        if work.is_empty() {
            return Changed::No;
        }
        let index = m.agent_index();
        let mut reachable: HashSet<(AgentId, FlowId)> = HashSet::default();
        let mut kept_agents: BTreeSet<AgentId> = BTreeSet::new();
        while let Some((aid, fid)) = work.pop() {
            if !reachable.insert((aid, fid)) {
                continue;
            }
            kept_agents.insert(aid);
            let Some(flow) = m.agents.get(aid).and_then(|a| a.flows.get(fid)) else {
                continue;
            };
            for op in flow.walk() {
                let Some(od) = flow.dfg.ops.get(op) else {
                    continue;
                };
                match od.opcode {
                    Opcode::FlowCall => {
                        if let Some(Attr::Symbol {
                            agent,
                            flow: callee,
                        }) = od.attrs.get("callee")
                        {
                            if let Some(target) = index.resolve(agent, callee) {
                                work.push(target);
                            }
                        }
                    }
                    Opcode::Communicate => {
                        let recipient = od
                            .operands
                            .first()
                            .and_then(|&v| super::util::const_str(&flow.dfg, v));
                        if let Some(aid) = recipient.and_then(|r| index.agent(r)) {
                            kept_agents.insert(aid);
                        }
                    }
                    _ => {}
                }
            }
        }
        let total_flows: usize = m.agents.values().map(|a| a.flows.len()).sum();
        if reachable.len() == total_flows && kept_agents.len() == m.agents.len() {
            return Changed::No;
        }
        let old = std::mem::take(&mut m.agents);
        let mut agents = Arena::new();
        for (aid, mut a) in drain(old, crate::module::AgentData::default) {
            if !kept_agents.contains(&aid) {
                self.agents_removed += 1;
                self.flows_removed += a.flows.len() as u64;
                continue;
            }
            let flows = std::mem::take(&mut a.flows);
            let mut remap: HashMap<FlowId, FlowId> = HashMap::default();
            for (fid, f) in drain(flows, || FlowData::new("", crate::types::Type::Void)) {
                if reachable.contains(&(aid, fid)) {
                    remap.insert(fid, a.flows.push(f));
                } else {
                    self.flows_removed += 1;
                }
            }
            // Handlers and belief initialisers are roots, so always remapped.
            for h in &mut a.handlers {
                if let Some(&n) = remap.get(&h.flow) {
                    h.flow = n;
                }
            }
            for b in &mut a.beliefs {
                if let BeliefInit::Flow(f) = &mut b.init {
                    if let Some(&n) = remap.get(f) {
                        *f = n;
                    }
                }
            }
            agents.push(a);
        }
        m.agents = agents;
        Changed::Yes
    }
}

/// Moves every entry out of an arena, in key order (the arena only grows,
/// so entries are swapped for placeholders).
fn drain<K: crate::entity::EntityRef, V>(
    mut arena: Arena<K, V>,
    placeholder: impl Fn() -> V,
) -> Vec<(K, V)> {
    let keys: Vec<K> = arena.keys().collect();
    keys.into_iter()
        .map(|k| (k, std::mem::replace(&mut arena[k], placeholder())))
        .collect()
}
