//! Code that must be free of effects: belief initialisers.
//!
//! A belief's initial value is computed before the run starts
//! (`ais_vm::interp::init_beliefs`), outside the scheduler. There is no
//! journal, no flow policy, no telemetry and no budget there, and the code
//! runs again on every resume. So an initialiser may only compute: pure ops,
//! control flow, and calls to flows that are themselves free of effects. A
//! tool call, an LLM call, a memory or belief access, a message or a pause
//! belongs in a flow, which can then assign the belief.
//!
//! This module is the one rule. The front end reports a violation on the
//! source (E0126), the IR verifier on graph JSON and textual IR (V0029), and
//! the artifact loader on bytecode.

use crate::bytecode::{self, Imm};
use crate::module::{BeliefInit, Module};
use crate::ops::{Effect, Opcode};
use crate::{AgentId, Attr, FlowId, Span};
use rustc_hash::FxHashSet as HashSet;

/// The first op with an effect that a belief initialiser reaches.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectSite {
    /// The belief, and where it is declared.
    pub belief: String,
    pub belief_span: Span,
    pub opcode: Opcode,
    /// The op, in the flow that holds it (possibly a called flow).
    pub span: Span,
    /// The flow holding the op, when it is not the initialiser itself.
    pub via: Option<String>,
}

/// What an op means for an effect-free computation.
enum Reach {
    /// Pure, or control flow: look inside its regions.
    Free,
    /// A call: the callee must be free of effects too.
    Call,
    Effect,
}

fn reach(op: Opcode) -> Reach {
    match op.effect() {
        Effect::Pure | Effect::Control => Reach::Free,
        Effect::Call => Reach::Call,
        Effect::Llm | Effect::Tool | Effect::MemRead | Effect::MemWrite | Effect::Io => {
            Reach::Effect
        }
    }
}

/// Every belief of every agent of `m` whose initialiser reaches an effect
/// (the first such op for each).
pub fn belief_effects(m: &Module) -> Vec<EffectSite> {
    let index = m.agent_index();
    let mut out = Vec::new();
    for (aid, a) in m.agents.iter() {
        for b in &a.beliefs {
            if let BeliefInit::Flow(f) = b.init {
                let found = first_effect(m, aid, f, &|agent, flow| index.resolve(agent, flow));
                if let Some((opcode, span, holder)) = found {
                    // Name the called flow that holds the op, if it is one.
                    let via = (holder != (aid, f))
                        .then(|| m.agents.get(holder.0)?.flows.get(holder.1))
                        .flatten()
                        .map(|fl| fl.name.clone());
                    out.push(EffectSite {
                        belief: b.name.clone(),
                        belief_span: b.span,
                        opcode,
                        span,
                        via,
                    });
                }
            }
        }
    }
    out
}

type Resolve<'a> = dyn Fn(&str, &str) -> Option<(AgentId, FlowId)> + 'a;

/// The first op with an effect reachable from flow `f` of agent `a`, with
/// the flow holding it. Calls are followed once per flow (recursion ends).
fn first_effect(
    m: &Module,
    a: AgentId,
    f: FlowId,
    resolve: &Resolve<'_>,
) -> Option<(Opcode, Span, (AgentId, FlowId))> {
    let mut seen = HashSet::default();
    let mut flows = vec![(a, f)];
    while let Some((a, f)) = flows.pop() {
        if !seen.insert((a, f)) {
            continue;
        }
        let Some(fd) = m.agents.get(a).and_then(|x| x.flows.get(f)) else {
            continue;
        };
        let mut regions = vec![fd.body];
        while let Some(r) = regions.pop() {
            let Some(rd) = fd.dfg.regions.get(r) else {
                continue;
            };
            for &op in &rd.ops {
                let Some(od) = fd.dfg.ops.get(op) else {
                    continue;
                };
                match reach(od.opcode) {
                    Reach::Free => regions.extend(od.regions.iter().copied()),
                    Reach::Call => {
                        // An unknown callee is the verifier's V0019.
                        if let Some(Attr::Symbol { agent, flow }) = od.attrs.get("callee") {
                            flows.extend(resolve(agent, flow));
                        }
                    }
                    Reach::Effect => return Some((od.opcode, fd.dfg.span(op), (a, f))),
                }
            }
        }
    }
    None
}

/// [`belief_effects`] on bytecode (an artifact's program): the first op with
/// an effect each belief initialiser reaches, as (agent, belief, opcode).
/// Indices are assumed in range (the loader checks them first).
pub fn bytecode_belief_effects(p: &bytecode::Program) -> Vec<(String, String, Opcode)> {
    let mut out = Vec::new();
    for a in &p.agents {
        for b in &a.beliefs {
            let bytecode::BeliefInitCode::Flow(f) = b.init else {
                continue;
            };
            if let Some(op) = bytecode_first_effect(p, f) {
                out.push((a.name.clone(), b.name.clone(), op));
            }
        }
    }
    out
}

fn bytecode_first_effect(p: &bytecode::Program, f: u32) -> Option<Opcode> {
    let mut seen = HashSet::default();
    let mut flows = vec![f];
    while let Some(f) = flows.pop() {
        if !seen.insert(f) {
            continue;
        }
        let Some(fc) = p.flows.get(f as usize) else {
            continue;
        };
        // Every region of the flow belongs to the flow's body or to one of
        // its control ops, so all of them are reached.
        for rc in &fc.regions {
            for i in &rc.ops {
                match reach(i.opcode) {
                    Reach::Free => {}
                    Reach::Call => {
                        if let Imm::Callee(c) = i.imm {
                            flows.push(c);
                        }
                    }
                    Reach::Effect => return Some(i.opcode),
                }
            }
        }
    }
    None
}
