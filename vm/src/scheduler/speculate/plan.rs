//! What may be speculated, read off the bytecode: which LLM ops decide an
//! `if` / `switch` (its condition is computed from their reply, directly or
//! through pure ops), and, once such an op has started, the leading calls
//! of each arm whose inputs are already known.
//!
//! Two kinds of call are ever speculated: LLM calls without tools (their
//! effect class in the op table is `Llm`: no side effect, nothing journaled
//! until their op runs) and `inv` calls of tools the catalogue declares
//! read-only that would run unasked (see [`ToolGate`]). Pure ops are
//! evaluated here to know the calls' inputs; every other tool, memory,
//! messages, prints, approvals and nested regions never are, so no
//! speculated work can change the world.

use crate::exec::{self, Class};
use crate::frame::Frame;
use crate::ifc::Labels;
use crate::llm::LlmRequest;
use crate::value::Val;
use ais_ir::bytecode::{Imm, Program, RegionCode, RegionKind};
use ais_ir::{Opcode, RegionSpec};
use serde_json::Value as Json;
use std::collections::HashMap;

/// Ops followed back from a condition through pure ops, at most: a
/// condition is normally the reply itself or a `trim` / `lower` of it.
const MAX_TRACE: usize = 16;

/// For each LLM op `(flow, region, op)` of the program, the `if` /
/// `switch` ops of the same region whose condition depends on its reply.
#[derive(Default)]
pub(super) struct Triggers {
    by_op: HashMap<(u32, u32, u32), Vec<u32>>,
    /// `inv` ops at the top of the arms of those branches: the most tool
    /// calls one round of speculation may start.
    tool_ops: usize,
}

impl Triggers {
    pub(super) fn of(program: &Program) -> Triggers {
        let mut by_op: HashMap<(u32, u32, u32), Vec<u32>> = HashMap::new();
        let mut tool_ops = 0;
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
                    let deciding = deciding_llms(code, &producer, cond);
                    if !deciding.is_empty() {
                        tool_ops += instr
                            .regions
                            .iter()
                            .filter_map(|&a| flow.regions.get(a as usize))
                            .flat_map(|a| a.ops.iter())
                            .filter(|o| o.opcode == Opcode::Inv)
                            .count();
                    }
                    for llm in deciding {
                        by_op
                            .entry((f as u32, r as u32, llm))
                            .or_default()
                            .push(c as u32);
                    }
                }
            }
        }
        Triggers { by_op, tool_ops }
    }

    pub(super) fn tool_ops(&self) -> usize {
        self.tool_ops
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
    pub call: Call,
}

pub(super) enum Call {
    Llm(Box<LlmRequest>),
    /// An `inv` of a read-only tool with its argument.
    Tool {
        tool: String,
        args: Json,
    },
}

/// Which arm tool calls may start before their branch is decided.
pub(super) struct ToolGate<'a> {
    /// The catalogue declares the tool read-only, and the host would run
    /// it for the agent unasked (its access policy allows it, it needs no
    /// confirmation).
    pub may_call: &'a dyn Fn(&str) -> bool,
    /// Provenance, when the run tracks it: `Some((labels, pc))` with the
    /// arm's control context `pc` (the parent's and the condition's
    /// label, see [`condition_label`]); a call whose inputs would be
    /// checked at its sink (untrusted or private data) is never started
    /// early, so no speculated call can be one the information-flow
    /// policy refuses or a person must approve. `None` with labels on:
    /// the condition's label is not known yet, no tool call starts.
    pub labels: Option<(&'a Labels, u64)>,
    /// Labels are off: no provenance to respect.
    pub labels_off: bool,
}

/// The control context an arm of control op `control` will have (its
/// condition's label, see `Run::context_label`), known before the
/// condition is: the parent's context and the labels of what the condition
/// is computed from, through pure ops, back to values already there or to
/// the reply of `deciding` (whose label was set when it was admitted).
/// `None` when it depends on anything else (another call still to come).
pub(super) fn condition_label(
    program: &Program,
    labels: &Labels,
    frame: &Frame<'_>,
    control: u32,
    deciding: u32,
) -> Option<u64> {
    let code = frame.code;
    let instr = code.ops.get(control as usize)?;
    let cond = *code.data(instr).first()?;
    let producer = producers(code);
    let mut label = frame.pc;
    let mut todo = vec![cond];
    let mut seen = 0;
    while let Some(s) = todo.pop() {
        seen += 1;
        if seen > MAX_TRACE {
            return None;
        }
        if frame.slot(s).is_some() {
            label |= frame.label(s);
            continue;
        }
        let op = *producer.get(&s)?;
        let p = code.ops.get(op as usize)?;
        if op == deciding {
            label |= frame.label(s);
            continue;
        }
        if exec::class(p.opcode) != Class::Pure {
            return None;
        }
        label |= labels.result_label(program, p, 0, frame.pc);
        todo.extend_from_slice(code.data(p));
    }
    Some(label)
}

/// The arms of control op `control` of `frame`: per arm (in the op's
/// region order), the calls whose inputs are known now: constants, values
/// the arm captures that `frame` already holds, and pure ops of those. LLM
/// calls without tools, and the tool calls `gate` lets through. Also
/// whether the arms cover every outcome (an `if`, or a `switch` with a
/// `default`): then exactly one of them is taken.
pub(super) fn arms(
    program: &Program,
    frame: &Frame<'_>,
    control: u32,
    agent: &str,
    gate: &ToolGate<'_>,
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
        out.push(arm_calls(program, frame, r, code, agent, gate));
    }
    (out, exhaustive)
}

fn arm_calls(
    program: &Program,
    parent: &Frame<'_>,
    region: u32,
    code: &RegionCode,
    agent: &str,
    gate: &ToolGate<'_>,
) -> Vec<Candidate> {
    let mut known: Vec<Option<Val>> = vec![None; code.n_slots()];
    // Each known slot's label (as the arm's frame would have it).
    let mut lab: Vec<u64> = vec![0; code.n_slots()];
    let pc = gate.labels.map_or(0, |(_, pc)| pc);
    for (k, &ps) in code.captures.iter().enumerate() {
        let s = code.n_args as usize + k;
        if let (Some(slot), Some(v)) = (known.get_mut(s), parent.slot(ps)) {
            *slot = Some(v.clone());
            if let Some(l) = lab.get_mut(s) {
                *l = parent.label(ps) | pc;
            }
        }
    }
    let mut calls = Vec::new();
    for (i, instr) in code.ops.iter().enumerate() {
        let data = code.data(instr);
        let args: Option<Vec<Val>> = data
            .iter()
            .map(|&s| known.get(s as usize).cloned().flatten())
            .collect();
        let Some(args) = args else { continue };
        let label = data
            .iter()
            .fold(pc, |l, &s| l | lab.get(s as usize).copied().unwrap_or(0));
        match exec::class(instr.opcode) {
            Class::Pure if instr.n_results == 1 => {
                if let Ok(v) = exec::eval_pure(program, instr, &args) {
                    if let Some(slot) = known.get_mut(instr.result as usize) {
                        *slot = Some(v);
                    }
                    if let (Some(l), Some((labels, _))) =
                        (lab.get_mut(instr.result as usize), gate.labels)
                    {
                        *l = labels.result_label(program, instr, label, pc);
                    }
                }
            }
            Class::Llm if !exec::on_agent_lane(instr) => {
                if let Ok(req) = exec::llm_request(agent, instr, &args) {
                    calls.push(Candidate {
                        region,
                        op: i as u32,
                        call: Call::Llm(Box::new(req)),
                    });
                }
            }
            Class::Tool => {
                if let Some(call) = tool_call(code, instr, &args, &known, label, gate) {
                    calls.push(Candidate {
                        region,
                        op: i as u32,
                        call,
                    });
                }
            }
            _ => {}
        }
    }
    calls
}

/// An arm's `inv` op as a call to start early, when `gate` lets it: a
/// read-only tool the host runs unasked, every input known (its ordering
/// tokens too: an effect before it in the arm has not happened yet), and
/// nothing its sink would check.
fn tool_call(
    code: &RegionCode,
    instr: &ais_ir::bytecode::Instr,
    args: &[Val],
    known: &[Option<Val>],
    label: u64,
    gate: &ToolGate<'_>,
) -> Option<Call> {
    let (Opcode::Inv, Imm::Tool(tool)) = (instr.opcode, &instr.imm) else {
        return None;
    };
    let ordered = code
        .tokens(instr)
        .iter()
        .all(|&s| known.get(s as usize).is_some_and(Option::is_some));
    let clean = match gate.labels {
        _ if gate.labels_off => true,
        Some((labels, _)) => !labels.needs_check(label),
        None => false,
    };
    if !ordered || !clean || !(gate.may_call)(tool) {
        return None;
    }
    Some(Call::Tool {
        tool: tool.clone(),
        args: args.first()?.to_json(),
    })
}
