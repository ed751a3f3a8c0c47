//! What may be speculated, read off the bytecode: which LLM ops decide an
//! `if` / `switch` (its condition is computed from their reply, directly or
//! through pure ops), and, once such an op has started, the leading LLM
//! calls of each arm whose inputs are already known.
//!
//! Only LLM calls without tools are ever speculated: their effect class in
//! the op table is `Llm` (no side effect, nothing journaled until their op
//! runs). Pure ops are evaluated here to know the calls' inputs; tools,
//! memory, messages, prints, approvals and nested regions never are, so no
//! speculated work can have a side effect.

use crate::exec::{self, Class};
use crate::frame::Frame;
use crate::llm::LlmRequest;
use crate::value::Val;
use ais_ir::bytecode::{Program, RegionCode, RegionKind};
use ais_ir::{Opcode, RegionSpec};
use std::collections::HashMap;

/// Ops followed back from a condition through pure ops, at most: a
/// condition is normally the reply itself or a `trim` / `lower` of it.
const MAX_TRACE: usize = 16;

/// For each LLM op `(flow, region, op)` of the program, the `if` /
/// `switch` ops of the same region whose condition depends on its reply.
#[derive(Default)]
pub(super) struct Triggers {
    by_op: HashMap<(u32, u32, u32), Vec<u32>>,
}

impl Triggers {
    pub(super) fn of(program: &Program) -> Triggers {
        let mut by_op: HashMap<(u32, u32, u32), Vec<u32>> = HashMap::new();
        for (f, flow) in program.flows.iter().enumerate() {
            for (r, code) in flow.regions.iter().enumerate() {
                let producer = producers(code);
                for (c, instr) in code.ops.iter().enumerate() {
                    if !matches!(
                        instr.opcode.info().regions,
                        RegionSpec::IfElse | RegionSpec::Switch
                    ) {
                        continue;
                    }
                    let Some(&cond) = code.data(instr).first() else {
                        continue;
                    };
                    for llm in deciding_llms(code, &producer, cond) {
                        by_op
                            .entry((f as u32, r as u32, llm))
                            .or_default()
                            .push(c as u32);
                    }
                }
            }
        }
        Triggers { by_op }
    }

    pub(super) fn get(&self, flow: u32, region: u32, op: u32) -> &[u32] {
        self.by_op
            .get(&(flow, region, op))
            .map_or(&[], |v| v.as_slice())
    }

    pub(super) fn is_empty(&self) -> bool {
        self.by_op.is_empty()
    }
}

/// The op computing each slot of a region.
fn producers(code: &RegionCode) -> HashMap<u32, u32> {
    let mut m = HashMap::new();
    for (i, instr) in code.ops.iter().enumerate() {
        for k in 0..instr.n_results {
            m.insert(instr.result.saturating_add(k), i as u32);
        }
    }
    m
}

/// The LLM ops (without tools) whose reply `slot` is computed from.
fn deciding_llms(code: &RegionCode, producer: &HashMap<u32, u32>, slot: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![slot];
    let mut seen = 0;
    while let Some(s) = todo.pop() {
        seen += 1;
        if seen > MAX_TRACE {
            break;
        }
        let Some(&op) = producer.get(&s) else {
            continue;
        };
        let Some(instr) = code.ops.get(op as usize) else {
            continue;
        };
        match exec::class(instr.opcode) {
            Class::Llm if !exec::on_agent_lane(instr) && !out.contains(&op) => out.push(op),
            Class::Pure => todo.extend_from_slice(code.data(instr)),
            _ => {}
        }
    }
    out
}

/// One call an arm would make, known before the branch is decided.
pub(super) struct Candidate {
    pub region: u32,
    pub op: u32,
    pub req: LlmRequest,
}

/// The arms of control op `control` of `frame`: per arm (in the op's
/// region order), the LLM calls (without tools) whose inputs are known now:
/// constants, values the arm captures that `frame` already holds, and pure
/// ops of those. Also whether the arms cover every outcome (an `if`, or a
/// `switch` with a `default`): then exactly one of them is taken.
pub(super) fn arms(
    program: &Program,
    frame: &Frame<'_>,
    control: u32,
    agent: &str,
) -> (Vec<Vec<Candidate>>, bool) {
    let Some(flow) = program.flows.get(frame.flow as usize) else {
        return (Vec::new(), false);
    };
    let Some(instr) = frame.code.ops.get(control as usize) else {
        return (Vec::new(), false);
    };
    let mut exhaustive = instr.opcode == Opcode::If;
    let mut out = Vec::with_capacity(instr.regions.len());
    for &r in &instr.regions {
        let Some(code) = flow.regions.get(r as usize) else {
            out.push(Vec::new());
            continue;
        };
        if matches!(code.kind, RegionKind::Default) {
            exhaustive = true;
        }
        out.push(arm_calls(program, frame, r, code, agent));
    }
    (out, exhaustive)
}

fn arm_calls(
    program: &Program,
    parent: &Frame<'_>,
    region: u32,
    code: &RegionCode,
    agent: &str,
) -> Vec<Candidate> {
    let mut known: Vec<Option<Val>> = vec![None; code.n_slots()];
    for (k, &ps) in code.captures.iter().enumerate() {
        let s = code.n_args as usize + k;
        if let (Some(slot), Some(v)) = (known.get_mut(s), parent.slot(ps)) {
            *slot = Some(v.clone());
        }
    }
    let mut calls = Vec::new();
    for (i, instr) in code.ops.iter().enumerate() {
        let args: Option<Vec<Val>> = code
            .data(instr)
            .iter()
            .map(|&s| known.get(s as usize).cloned().flatten())
            .collect();
        let Some(args) = args else { continue };
        match exec::class(instr.opcode) {
            Class::Pure if instr.n_results == 1 => {
                if let Ok(v) = exec::eval_pure(program, instr, &args) {
                    if let Some(slot) = known.get_mut(instr.result as usize) {
                        *slot = Some(v);
                    }
                }
            }
            Class::Llm if !exec::on_agent_lane(instr) => {
                if let Ok(req) = exec::llm_request(agent, instr, &args) {
                    calls.push(Candidate {
                        region,
                        op: i as u32,
                        req,
                    });
                }
            }
            _ => {}
        }
    }
    calls
}
