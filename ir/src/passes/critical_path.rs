//! `critical-path` (analysis): the estimated makespan of each flow if every
//! op starts as soon as its operands (data and ordering tokens) are ready,
//! with unlimited parallelism.
//!
//! Op costs come from the latency classes of the op table
//! ([`crate::Latency::nominal_ms`]: ask 1000 ms, think 3000, reason 10000,
//! tool 500, mem 1, others 0). Besides:
//! - `flow.call` costs the callee's critical path (a recursive call costs 0
//!   and is reported in [`FlowEstimate::recursive`]);
//! - `if` / `switch` / `try_catch` cost the longest of their regions (the
//!   `catch` region is counted as an alternative, like a branch);
//! - `loop` costs its body times the iteration count: the length of a
//!   constant `list` operand, else `max_iters`, else
//!   [`DEFAULT_LOOP_ITERATIONS`] — capped by `max_iters` when both are
//!   known. Iterations are assumed sequential.
//!
//! Ops inside a region start no earlier than the region does, and wait for
//! any value they capture from outside.

use crate::entity::{AgentId, FlowId};
use crate::entity::{EntityRef, Op, Region, Value};
use crate::module::{Attr, FlowData, Module};
use crate::ops::{ExecClass, Opcode, RegionSpec};
use crate::printer::value_names;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::fmt::Write;

/// Iterations assumed for a loop with neither a constant list nor `max_iters`.
pub const DEFAULT_LOOP_ITERATIONS: u64 = 5;

/// The analysis result for a module.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    /// One entry per flow, in module order.
    pub flows: Vec<FlowEstimate>,
}

/// The estimate for one flow.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowEstimate {
    pub agent: String,
    pub flow: String,
    pub entry: bool,
    /// Estimated makespan (the critical path length).
    pub makespan_ms: u64,
    /// Total cost if every op ran one after the other.
    pub sequential_ms: u64,
    /// LLM ops in the flow (static call sites, nested regions included).
    pub llm_calls: usize,
    /// The critical path through the flow body, first op first.
    pub path: Vec<PathStep>,
    /// Callees skipped because the call is recursive.
    pub recursive: Vec<String>,
    /// Set to [`MAX_REGION_DEPTH`] when regions nested deeper than that were
    /// counted as 0 ms (said in the rendering, never silent).
    pub deeper_than: Option<usize>,
    /// Ops with a cost grouped by the time they would start: each phase is
    /// work that can run at once.
    pub phases: Vec<Phase>,
}

/// Ops that would start together.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    pub start_ms: u64,
    /// The ops' opcodes, in program order (one entry per op).
    pub ops: Vec<Opcode>,
}

/// One op of a critical path.
#[derive(Clone, Debug, PartialEq)]
pub struct PathStep {
    pub op: Op,
    pub opcode: Opcode,
    /// `%3 = ask`, `%5 = flow.call @B.f`.
    pub label: String,
    pub start_ms: u64,
    pub cost_ms: u64,
}

impl Estimate {
    pub fn flow(&self, agent: &str, flow: &str) -> Option<&FlowEstimate> {
        self.flows
            .iter()
            .find(|f| f.agent == agent && f.flow == flow)
    }

    /// The first entry flow, if any.
    pub fn entry(&self) -> Option<&FlowEstimate> {
        self.flows.iter().find(|f| f.entry)
    }

    /// A human-readable report, every line a `//` comment (so it can follow
    /// textual IR and still parse).
    pub fn render(&self) -> String {
        let mut out = String::from("// ----- critical path ----- //\n");
        for f in &self.flows {
            let _ = writeln!(
                out,
                "// @{}.{}{}: {} ms estimated, {} ms sequential, {} LLM call site{}",
                f.agent,
                f.flow,
                if f.entry { " (entry)" } else { "" },
                f.makespan_ms,
                f.sequential_ms,
                f.llm_calls,
                if f.llm_calls == 1 { "" } else { "s" }
            );
            for s in &f.path {
                let _ = writeln!(
                    out,
                    "//   at {:>6} ms  {:>7} ms  {}",
                    s.start_ms,
                    format!("+{}", s.cost_ms),
                    s.label
                );
            }
            for r in &f.recursive {
                let _ = writeln!(out, "//   note: recursive call to @{r} counted as 0 ms");
            }
            if let Some(d) = f.deeper_than {
                let _ = writeln!(
                    out,
                    "//   note: regions nested deeper than {d} levels counted as 0 ms"
                );
            }
        }
        out
    }
}

/// Regions nested deeper than this are counted as 0 ms (and the estimate
/// says so): the walk recurses once per level.
pub const MAX_REGION_DEPTH: usize = 256;

/// Estimates every flow of the module.
pub fn critical_path(m: &Module) -> Estimate {
    let mut cx = Analysis {
        m,
        index: m.agent_index(),
        memo: HashMap::default(),
        active: HashSet::default(),
    };
    let mut flows = Vec::new();
    for (aid, a) in m.agents.iter() {
        for (fid, f) in a.flows.iter() {
            cx.callees_first((aid, fid));
            let r = cx.flow(&a.name, f);
            flows.push(FlowEstimate {
                agent: a.name.clone(),
                flow: f.name.clone(),
                entry: f.entry,
                makespan_ms: r.makespan,
                sequential_ms: r.sequential,
                llm_calls: f
                    .walk()
                    .iter()
                    .filter(|&&o| {
                        f.dfg
                            .ops
                            .get(o)
                            .is_some_and(|d| d.opcode.effect() == crate::Effect::Llm)
                    })
                    .count(),
                path: r.path,
                recursive: r.recursive,
                deeper_than: r.cut.then_some(MAX_REGION_DEPTH),
                phases: r.phases,
            });
        }
    }
    Estimate { flows }
}

#[derive(Clone)]
struct FlowResult {
    makespan: u64,
    sequential: u64,
    path: Vec<PathStep>,
    recursive: Vec<String>,
    phases: Vec<Phase>,
    cut: bool,
}

struct Analysis<'m> {
    m: &'m Module,
    index: crate::module::AgentIndex<'m>,
    memo: HashMap<(String, String), FlowResult>,
    /// Flows being analysed (recursion guard; a set: a call chain can be
    /// as long as the program).
    active: HashSet<(String, String)>,
}

/// Per-flow state while walking.
struct Walk {
    finish: HashMap<Value, u64>,
    /// For each op: its start, cost and the op it waited for.
    info: HashMap<Op, (u64, u64, Option<Op>)>,
    recursive: Vec<String>,
    /// A region deeper than [`MAX_REGION_DEPTH`] was left out.
    cut: bool,
}

impl Analysis<'_> {
    /// Analyses the flows `root` calls, transitively, callees first, so that
    /// each call below finds its callee in the memo: analysing a callee when
    /// its call was reached nested one call chain per stack frame, and a
    /// chain of flows each calling the next is as long as the program.
    /// The DFS path stands in `active` as the recursion did, so a recursive
    /// call is noted exactly where it was before.
    fn callees_first(&mut self, root: (AgentId, FlowId)) {
        let m = self.m;
        let key_of = |(a, f): (AgentId, FlowId)| {
            (m.agents[a].name.clone(), m.agents[a].flows[f].name.clone())
        };
        let root_key = key_of(root);
        if self.memo.contains_key(&root_key) || self.active.contains(&root_key) {
            return;
        }
        self.active.insert(root_key);
        let mut stack = vec![(root, self.callees(root), 0usize)];
        while let Some((node, callees, next)) = stack.last_mut() {
            if let Some(&c) = callees.get(*next) {
                *next += 1;
                let k = key_of(c);
                if self.memo.contains_key(&k) || self.active.contains(&k) {
                    continue;
                }
                self.active.insert(k);
                let cs = self.callees(c);
                stack.push((c, cs, 0));
                continue;
            }
            let node = *node;
            stack.pop();
            self.active.remove(&key_of(node));
            if stack.is_empty() {
                // The root itself is analysed by the caller.
                break;
            }
            let a = &m.agents[node.0];
            self.flow(&a.name, &a.flows[node.1]);
        }
    }

    /// The flows `flow` calls, in the order its walk reaches them.
    fn callees(&self, (a, f): (AgentId, FlowId)) -> Vec<(AgentId, FlowId)> {
        let fd = &self.m.agents[a].flows[f];
        fd.walk()
            .into_iter()
            .filter_map(|op| {
                let od = fd.dfg.ops.get(op)?;
                if od.opcode.info().exec != ExecClass::Call {
                    return None;
                }
                match od.attrs.get("callee") {
                    Some(Attr::Symbol { agent, flow }) => self.index.resolve(agent, flow),
                    _ => None,
                }
            })
            .collect()
    }

    fn flow(&mut self, agent: &str, f: &FlowData) -> FlowResult {
        let key = (agent.to_string(), f.name.clone());
        if let Some(r) = self.memo.get(&key) {
            return r.clone();
        }
        self.active.insert(key.clone());
        let mut w = Walk {
            finish: HashMap::default(),
            info: HashMap::default(),
            recursive: Vec::new(),
            cut: false,
        };
        let (end, sequential) = self.region(f, f.body, 0, &mut w, 0);
        self.active.remove(&key);
        // Path: from the body op that finishes last, back through waits.
        let names = value_names(f);
        let body_ops: Vec<Op> = f
            .dfg
            .regions
            .get(f.body)
            .map(|r| r.ops.clone())
            .unwrap_or_default();
        let mut last: Option<Op> = None;
        let mut best = 0;
        for &op in &body_ops {
            if let Some(&(s, c, _)) = w.info.get(&op) {
                if s + c > best {
                    best = s + c;
                    last = Some(op);
                }
            }
        }
        let mut path = Vec::new();
        let mut cur = last;
        let mut guard = 0;
        while let Some(op) = cur {
            guard += 1;
            if guard > 100_000 {
                break;
            }
            let Some(&(start, cost, pred)) = w.info.get(&op) else {
                break;
            };
            if cost > 0 {
                path.push(PathStep {
                    op,
                    opcode: f.dfg.ops[op].opcode,
                    label: label(f, op, &names),
                    start_ms: start,
                    cost_ms: cost,
                });
            }
            cur = pred;
        }
        path.reverse();
        let mut costly: Vec<(u64, Op)> = w
            .info
            .iter()
            .filter(|(_, &(_, cost, _))| cost > 0)
            .map(|(&op, &(start, _, _))| (start, op))
            .collect();
        costly.sort_by_key(|&(start, op)| (start, op.index()));
        let mut phases: Vec<Phase> = Vec::new();
        for (start, op) in costly {
            let opcode = f.dfg.ops[op].opcode;
            match phases.last_mut() {
                Some(p) if p.start_ms == start => p.ops.push(opcode),
                _ => phases.push(Phase {
                    start_ms: start,
                    ops: vec![opcode],
                }),
            }
        }
        let r = FlowResult {
            makespan: end,
            sequential,
            path,
            recursive: w.recursive,
            phases,
            cut: w.cut,
        };
        self.memo.insert(key, r.clone());
        r
    }

    /// Walks a region starting at `start`; returns (end, sequential cost).
    fn region(
        &mut self,
        f: &FlowData,
        region: Region,
        start: u64,
        w: &mut Walk,
        depth: usize,
    ) -> (u64, u64) {
        let Some(rd) = f.dfg.regions.get(region) else {
            return (start, 0);
        };
        if depth > MAX_REGION_DEPTH {
            w.cut = true;
            return (start, 0);
        }
        for &a in &rd.args {
            w.finish.insert(a, start);
        }
        let mut end = start;
        let mut sequential = 0u64;
        for &op in &rd.ops {
            let Some(od) = f.dfg.ops.get(op) else {
                continue;
            };
            // Ready when every operand (and every captured value) is.
            let mut inputs: Vec<Value> = od.operands.to_vec();
            for &r in &od.regions {
                for inner in f.dfg.walk_region(r) {
                    if let Some(d) = f.dfg.ops.get(inner) {
                        inputs.extend(d.operands.iter().copied());
                    }
                }
            }
            let mut ready = start;
            let mut pred = None;
            for v in inputs {
                if let Some(&t) = w.finish.get(&v) {
                    if t > ready {
                        ready = t;
                        pred = super::util::def_op(&f.dfg, v)
                            .filter(|p| w.info.contains_key(p) && rd.ops.contains(p));
                    }
                }
            }
            let info = od.opcode.info();
            let (cost, seq) = match (info.exec, info.regions) {
                (ExecClass::Call, _) => self.call_cost(od.attrs.get("callee"), w),
                (_, RegionSpec::IfElse | RegionSpec::Switch | RegionSpec::TryCatch) => {
                    let mut cost = 0;
                    let mut seq = 0;
                    for &r in &od.regions {
                        let (e, s) = self.region(f, r, ready, w, depth + 1);
                        cost = cost.max(e - ready);
                        seq = seq.max(s);
                    }
                    (cost, seq)
                }
                (_, RegionSpec::Loop) => {
                    let iters = loop_iterations(f, op);
                    let mut cost = 0;
                    let mut seq = 0;
                    for &r in &od.regions {
                        let (e, s) = self.region(f, r, ready, w, depth + 1);
                        cost = cost.max(e - ready);
                        seq = seq.max(s);
                    }
                    (cost.saturating_mul(iters), seq.saturating_mul(iters))
                }
                (_, RegionSpec::None) => {
                    let c = info.latency.nominal_ms();
                    (c, c)
                }
            };
            let done = ready.saturating_add(cost);
            for &r in &od.results {
                w.finish.insert(r, done);
            }
            w.info.insert(op, (ready, cost, pred));
            end = end.max(done);
            sequential = sequential.saturating_add(seq);
        }
        (end, sequential)
    }

    fn call_cost(&mut self, callee: Option<&Attr>, w: &mut Walk) -> (u64, u64) {
        let Some(Attr::Symbol { agent, flow }) = callee else {
            return (0, 0);
        };
        let key = (agent.clone(), flow.clone());
        if self.active.contains(&key) {
            let name = format!("{agent}.{flow}");
            if !w.recursive.contains(&name) {
                w.recursive.push(name);
            }
            return (0, 0);
        }
        let m = self.m;
        let Some((aid, fid)) = self.index.resolve(agent, flow) else {
            return (0, 0);
        };
        let r = self.flow(agent, &m.agents[aid].flows[fid]);
        (r.makespan, r.sequential)
    }
}

fn loop_iterations(f: &FlowData, op: Op) -> u64 {
    let Some(od) = f.dfg.ops.get(op) else {
        return DEFAULT_LOOP_ITERATIONS;
    };
    let max_iters = match od.attrs.get("max_iters") {
        Some(Attr::Number(n)) if n.is_finite() && *n >= 0.0 => Some(*n as u64),
        _ => None,
    };
    let list_len = od
        .operands
        .first()
        .and_then(|&v| super::util::def_op(&f.dfg, v))
        .and_then(|d| f.dfg.ops.get(d))
        .and_then(|d| match d.opcode {
            Opcode::List => Some(d.operands.len() as u64),
            Opcode::Const => match d.attrs.get("value") {
                Some(Attr::Json(serde_json::Value::Array(a))) => Some(a.len() as u64),
                _ => None,
            },
            _ => None,
        });
    match (list_len, max_iters) {
        (Some(n), Some(m)) => n.min(m),
        (Some(n), None) => n,
        (None, Some(m)) => m,
        (None, None) => DEFAULT_LOOP_ITERATIONS,
    }
}

fn label(f: &FlowData, op: Op, names: &HashMap<Value, String>) -> String {
    let Some(od) = f.dfg.ops.get(op) else {
        return format!("{op}");
    };
    let mut s = String::new();
    if !od.results.is_empty() {
        let rs: Vec<String> = od
            .results
            .iter()
            .map(|r| names.get(r).cloned().unwrap_or_else(|| "%?".into()))
            .collect();
        let _ = write!(s, "{} = ", rs.join(", "));
    }
    s.push_str(od.opcode.mnemonic());
    match od.attrs.get("callee").or_else(|| od.attrs.get("tool")) {
        Some(Attr::Symbol { agent, flow }) => {
            let _ = write!(s, " @{agent}.{flow}");
        }
        Some(Attr::Str(t)) => {
            let _ = write!(s, " {}", crate::printer::quote(t));
        }
        _ => {}
    }
    s
}
