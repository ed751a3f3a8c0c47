//! The reference interpreter: a plain sequential evaluator of the same
//! bytecode, with the same host and backend interfaces and the same op
//! semantics (`exec`). Ops run in region order (a topological order), control
//! ops recurse, loops iterate one after another. It is the oracle of the
//! VM's property tests and runs belief initialisers.

use crate::error::RunError;
use crate::exec::{self, Class, OpError, Results};
use crate::host::Host;
use crate::llm::{CancelToken, LlmBackend};
use crate::tx::{Parent, Tx};
use crate::value::Val;
use ais_ir::bytecode::{BeliefInitCode, Imm, Program};
use ais_ir::RegionSpec;
use serde_json::Value as Json;
use smallvec::smallvec;

/// Calls nested deeper than this fail with `call.depth` (the interpreter
/// recurses on the native stack).
pub const MAX_DEPTH: u32 = 64;

struct Failure {
    err: OpError,
    flow: u32,
    region: u32,
    op: u32,
    value: Val,
}

struct Interp<'r> {
    program: &'r Program,
    backend: &'r dyn LlmBackend,
    host: &'r dyn Host,
    cancel: CancelToken,
    planner: Option<&'r dyn crate::plan::PlanCompiler>,
}

/// Runs the entry flow (`entry` as in `RunOptions::entry`) to completion.
/// A `solve` op fails with `plan.unavailable` (see [`run_with_planner`]).
pub fn run(
    program: &Program,
    entry: Option<&str>,
    args: &[(String, Json)],
    backend: &dyn LlmBackend,
    host: &dyn Host,
) -> Result<Json, RunError> {
    run_with_planner(program, entry, args, backend, host, None)
}

/// [`run`], with a plan compiler for `solve` ops: the plan is asked for,
/// checked and repaired like in the VM, then interpreted.
pub fn run_with_planner(
    program: &Program,
    entry: Option<&str>,
    args: &[(String, Json)],
    backend: &dyn LlmBackend,
    host: &dyn Host,
    planner: Option<&dyn crate::plan::PlanCompiler>,
) -> Result<Json, RunError> {
    let flow = program.find_entry(entry)?;
    let args = exec::entry_args(program, flow, args)?;
    init_beliefs(program, backend, host)?;
    let it = Interp {
        program,
        backend,
        host,
        cancel: CancelToken::new(),
        planner,
    };
    it.call(flow, args, 0)
        .map(|v| v.map_or(Json::Null, |v| v.to_json()))
        .map_err(|f| it.located(f))
}

/// Sets every agent's initial beliefs: constants directly, flow
/// initialisers by running the flow (no arguments).
pub fn init_beliefs(
    program: &Program,
    backend: &dyn LlmBackend,
    host: &dyn Host,
) -> Result<(), RunError> {
    let it = Interp {
        program,
        backend,
        host,
        cancel: CancelToken::new(),
        planner: None,
    };
    for a in &program.agents {
        for b in &a.beliefs {
            let v = match b.init {
                BeliefInitCode::Const(c) => program
                    .consts
                    .get(c as usize)
                    .and_then(|c| c.to_json())
                    .unwrap_or(Json::Null),
                BeliefInitCode::Flow(f) => it
                    .call(f, Vec::new(), 0)
                    .map(|v| v.map_or(Json::Null, |v| v.to_json()))
                    .map_err(|f| it.located(f))?,
            };
            host.belief_init(&a.name, &b.name, &v)
                .map_err(|e| RunError::Argument(format!("belief `{}`: {e}", b.name)))?;
        }
    }
    Ok(())
}

impl Interp<'_> {
    fn located(&self, f: Failure) -> RunError {
        let instr = self
            .program
            .flows
            .get(f.flow as usize)
            .and_then(|fl| fl.regions.get(f.region as usize))
            .and_then(|r| r.ops.get(f.op as usize));
        RunError::OpFailed {
            flow: self.program.flow_name(f.flow),
            opcode: instr.map_or("?", |i| i.opcode.mnemonic()),
            region: f.region,
            op: f.op,
            span: instr.map(|i| i.span).unwrap_or_default(),
            code: f.err.code,
            message: f.err.message,
            payload: Box::new(f.err.payload),
        }
    }

    /// A `solve` op: planner rounds until a plan checks, then the plan,
    /// interpreted as a flow of its own program.
    fn solve(
        &self,
        agent: &str,
        instr: &ais_ir::bytecode::Instr,
        mut req: crate::llm::LlmRequest,
        depth: u32,
    ) -> Result<Val, OpError> {
        let planner = self.planner.ok_or_else(crate::plan::unavailable)?;
        let spec = crate::plan::PlanSpec::of(agent, instr, &mut req);
        let guide = planner.guide(&spec);
        let rounds = exec::repairs(instr).saturating_add(1);
        let mut asks = crate::plan::PlannerRounds::new(&mut req, guide, rounds);
        for round in 1..=rounds {
            asks.prepare(round, &mut req);
            let reply = self.backend.complete(&req, &self.cancel)?;
            match planner.check(&spec, &reply.text) {
                Ok(plan) => {
                    let flow = plan
                        .program
                        .find_entry(None)
                        .map_err(|e| OpError::new("internal.plan", e.to_string()))?;
                    let inner = Interp {
                        program: &plan.program,
                        backend: self.backend,
                        host: self.host,
                        cancel: self.cancel.clone(),
                        planner: self.planner,
                    };
                    return match inner.call(flow, Vec::new(), depth + 1) {
                        Ok(v) => Ok(v.unwrap_or(Val::Null)),
                        Err(f) => Err(f.err),
                    };
                }
                Err(r) => asks.reject(r),
            }
        }
        Err(crate::plan::invalid(rounds, asks.last()))
    }

    fn call(&self, flow: u32, args: Vec<Val>, depth: u32) -> Result<Option<Val>, Failure> {
        let ys = self.region(flow, 0, args, Vec::new(), depth)?;
        Ok(ys.into_iter().next())
    }

    fn internal(flow: u32, region: u32, op: u32, m: &str) -> Failure {
        Failure {
            err: OpError::new("internal", m),
            flow,
            region,
            op,
            value: Val::Null,
        }
    }

    /// Runs one region instance; returns what it yields / returns.
    fn region(
        &self,
        flow: u32,
        region: u32,
        args: Vec<Val>,
        captures: Vec<Val>,
        depth: u32,
    ) -> Result<Results, Failure> {
        let p = self.program;
        let fc = p
            .flows
            .get(flow as usize)
            .ok_or_else(|| Self::internal(flow, region, 0, "bad flow"))?;
        let code = fc
            .regions
            .get(region as usize)
            .ok_or_else(|| Self::internal(flow, region, 0, "bad region"))?;
        let agent = p
            .agents
            .get(fc.agent as usize)
            .map_or("?", |a| a.name.as_str());
        let mut slots: Vec<Option<Val>> = vec![None; code.n_slots()];
        for (i, v) in args.into_iter().chain(captures).enumerate() {
            if let Some(s) = slots.get_mut(i) {
                *s = Some(v);
            }
        }
        for (oi, instr) in code.ops.iter().enumerate() {
            let op = oi as u32;
            let fail = |err: OpError| Failure {
                value: err.to_value(p, flow, instr),
                err,
                flow,
                region,
                op,
            };
            let get = |s: u32| slots.get(s as usize).cloned().flatten();
            let mut data = Vec::with_capacity(instr.n_data as usize);
            for &s in code.data(instr) {
                data.push(
                    get(s).ok_or_else(|| Self::internal(flow, region, op, "operand not set"))?,
                );
            }
            let results: Results = match exec::class(instr.opcode) {
                Class::Pure => smallvec![exec::eval_pure(p, instr, &data).map_err(fail)?],
                Class::Inline => exec::exec_inline(self.host, agent, instr, &data).map_err(fail)?,
                Class::Llm if exec::plans(instr) => {
                    let req = exec::llm_request(agent, instr, &data).map_err(fail)?;
                    smallvec![self.solve(agent, instr, req, depth).map_err(fail)?]
                }
                Class::Llm => {
                    let req = exec::llm_request(agent, instr, &data).map_err(fail)?;
                    let resp = self
                        .backend
                        .complete(&req, &self.cancel)
                        .map_err(|e| fail(e.into()))?;
                    smallvec![exec::llm_value(&req, &resp).map_err(fail)?]
                }
                Class::Tool => exec::tool_results(
                    instr,
                    exec::exec_tool(self.host, agent, instr, &data, &self.cancel, None)
                        .map_err(fail)?,
                ),
                Class::Call => {
                    let Imm::Callee(c) = instr.imm else {
                        return Err(Self::internal(flow, region, op, "no callee"));
                    };
                    if depth + 1 > MAX_DEPTH {
                        return Err(fail(OpError::new(
                            "call.depth",
                            format!(
                                "call depth limit ({MAX_DEPTH}) exceeded calling @{}",
                                p.flow_name(c)
                            ),
                        )));
                    }
                    let r = self.call(c, data, depth + 1)?;
                    exec::call_results(instr, r)
                }
                Class::Control => {
                    let caps_of = |r: u32| -> Vec<Val> {
                        fc.regions
                            .get(r as usize)
                            .map(|rc| rc.captures.iter().filter_map(|&s| get(s)).collect())
                            .unwrap_or_default()
                    };
                    // The op table's region shape says how it runs its regions.
                    match instr.opcode.info().regions {
                        RegionSpec::IfElse | RegionSpec::Switch => {
                            let cond = data
                                .first()
                                .ok_or_else(|| Self::internal(flow, region, op, "no condition"))?;
                            let r = exec::select_branch(fc, instr, cond).map_err(fail)?;
                            self.region(flow, r, Vec::new(), caps_of(r), depth)?
                        }
                        RegionSpec::TryCatch => {
                            let (t, c) = match instr.regions.as_slice() {
                                [t, c] => (*t, *c),
                                _ => return Err(Self::internal(flow, region, op, "bad try")),
                            };
                            // The body's own effects are buffered and reach
                            // this level only if it completes (`crate::tx`).
                            let tx = Tx::new(Parent::Host(self.host));
                            let body = Interp {
                                program: self.program,
                                backend: self.backend,
                                host: &tx,
                                cancel: self.cancel.clone(),
                                planner: self.planner,
                            };
                            match body.region(flow, t, Vec::new(), caps_of(t), depth) {
                                Ok(ys) => {
                                    tx.commit().map_err(|e| fail(e.into()))?;
                                    ys
                                }
                                Err(f) => {
                                    tx.discard();
                                    self.region(flow, c, vec![f.value], caps_of(c), depth)?
                                }
                            }
                        }
                        RegionSpec::Loop => {
                            let list = data
                                .first()
                                .ok_or_else(|| Self::internal(flow, region, op, "no list"))?;
                            let items = exec::loop_items(instr, list).map_err(fail)?;
                            let body = instr
                                .regions
                                .first()
                                .copied()
                                .ok_or_else(|| Self::internal(flow, region, op, "no body"))?;
                            let mut carried: Results = data.iter().skip(1).cloned().collect();
                            for (i, item) in items.into_iter().enumerate() {
                                let mut a = vec![item, Val::Num(i as f64)];
                                a.extend(carried.iter().cloned());
                                carried = self.region(flow, body, a, caps_of(body), depth)?;
                            }
                            carried
                        }
                        RegionSpec::None => {
                            return Err(Self::internal(flow, region, op, "not control"))
                        }
                    }
                }
                Class::Terminator => return Ok(data.into_iter().collect()),
            };
            for (i, v) in results
                .into_iter()
                .enumerate()
                .take(instr.n_results as usize)
            {
                if let Some(s) = slots.get_mut(instr.result as usize + i) {
                    *s = Some(v);
                }
            }
        }
        Err(Self::internal(flow, region, 0, "region without terminator"))
    }
}
