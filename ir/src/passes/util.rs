//! Small IR helpers shared by the passes.

use crate::entity::{Op, Region, Value};
use crate::module::{Attr, Dfg, FlowData, ValueDef};
use crate::ops::{Effect, Opcode};
use crate::types::Type;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// Facts about the live ops of one flow, computed in one walk. Passes rebuild
/// it after they mutate the flow.
pub(crate) struct FlowFacts {
    /// Live ops in pre-order (an op before the ops of its regions).
    pub order: Vec<Op>,
    /// The region listing each live op.
    pub region: HashMap<Op, Region>,
    /// Position of each live op in pre-order.
    pub position: HashMap<Op, usize>,
    /// Every use of a value by a live op: `(user, operand index)`, in pre-order.
    pub uses: HashMap<Value, Vec<(Op, usize)>>,
}

impl FlowFacts {
    pub fn new(flow: &FlowData) -> FlowFacts {
        let mut facts = FlowFacts {
            order: Vec::new(),
            region: HashMap::default(),
            position: HashMap::default(),
            uses: HashMap::default(),
        };
        let mut seen = HashSet::default();
        facts.walk(&flow.dfg, flow.body, &mut seen);
        crate::work::add(facts.order.len());
        facts
    }

    fn walk(&mut self, dfg: &Dfg, region: Region, seen: &mut HashSet<Region>) {
        if !seen.insert(region) {
            return;
        }
        let Some(rd) = dfg.regions.get(region) else {
            return;
        };
        for &op in &rd.ops {
            let Some(od) = dfg.ops.get(op) else { continue };
            self.position.insert(op, self.order.len());
            self.order.push(op);
            self.region.insert(op, region);
            for (i, &v) in od.operands.iter().enumerate() {
                self.uses.entry(v).or_default().push((op, i));
            }
            for &r in &od.regions {
                self.walk(dfg, r, seen);
            }
        }
    }
}

/// The op defining `v`, if `v` is an op result.
pub(crate) fn def_op(dfg: &Dfg, v: Value) -> Option<Op> {
    match dfg.values.get(v)?.def {
        ValueDef::Result(op, _) => Some(op),
        _ => None,
    }
}

/// The text of a `const` string value (`const {value = "..."} : str`).
pub(crate) fn const_str(dfg: &Dfg, v: Value) -> Option<&str> {
    let op = def_op(dfg, v)?;
    let od = dfg.ops.get(op)?;
    if od.opcode != Opcode::Const || dfg.values.get(v)?.ty != Type::Str {
        return None;
    }
    match od.attrs.get("value")? {
        Attr::Str(s) => Some(s),
        _ => None,
    }
}

/// The boolean of a `const` bool value.
pub(crate) fn const_bool(dfg: &Dfg, v: Value) -> Option<bool> {
    let op = def_op(dfg, v)?;
    let od = dfg.ops.get(op)?;
    if od.opcode != Opcode::Const {
        return None;
    }
    match od.attrs.get("value")? {
        Attr::Bool(b) => Some(*b),
        _ => None,
    }
}

/// The literal attribute of a `const` value.
pub(crate) fn const_attr(dfg: &Dfg, v: Value) -> Option<&Attr> {
    let op = def_op(dfg, v)?;
    let od = dfg.ops.get(op)?;
    if od.opcode != Opcode::Const {
        return None;
    }
    od.attrs.get("value")
}

/// Detaches `op` from `region` and, recursively, empties the op lists of the
/// regions it owns, so no detached region still lists ops (which would
/// confuse `Dfg::region_of`).
pub(crate) fn erase_op(dfg: &mut Dfg, region: Region, op: Op) {
    if let Some(rd) = dfg.regions.get_mut(region) {
        rd.ops.retain(|&o| o != op);
    }
    clear_regions(dfg, op);
}

/// [`erase_op`] for many ops at once: one pass over each region involved
/// instead of one per op (which made erasing most of a flow quadratic).
pub(crate) fn erase_ops(dfg: &mut Dfg, ops: &[(Region, Op)]) {
    let mut by_region: HashMap<Region, HashSet<Op>> = HashMap::default();
    for &(r, op) in ops {
        by_region.entry(r).or_default().insert(op);
        clear_regions(dfg, op);
    }
    for (r, gone) in by_region {
        if let Some(rd) = dfg.regions.get_mut(r) {
            rd.ops.retain(|o| !gone.contains(o));
        }
    }
}

/// Empties every region `op` owns, and theirs, through a worklist: the
/// recursion this replaced followed the input's nesting and stopped silently
/// at 4096 levels, leaving deeper regions listing detached ops.
fn clear_regions(dfg: &mut Dfg, op: Op) {
    let mut work = vec![op];
    while let Some(op) = work.pop() {
        let regions: Vec<Region> = dfg
            .ops
            .get(op)
            .map(|od| od.regions.to_vec())
            .unwrap_or_default();
        for r in regions {
            if let Some(rd) = dfg.regions.get_mut(r) {
                work.append(&mut rd.ops);
            }
        }
    }
}

/// Which live ops have an effect, themselves or anywhere in their regions
/// (anything but pure ops, `yield`, and control ops whose regions are
/// effect-free). Computed once per flow, bottom-up over the pre-order walk:
/// asking op by op re-walked every nested region (O(ops × depth)).
pub(crate) struct Effects {
    effectful: HashSet<Op>,
}

impl Effects {
    pub fn new(dfg: &Dfg, facts: &FlowFacts) -> Effects {
        let mut effectful: HashSet<Op> = HashSet::default();
        crate::work::add(facts.order.len());
        // Reverse pre-order: every op's region ops come before the op.
        for &op in facts.order.iter().rev() {
            let Some(od) = dfg.ops.get(op) else {
                effectful.insert(op);
                continue;
            };
            let has = match od.opcode {
                Opcode::Yield => false,
                Opcode::Return => true,
                o if o.is_pure() => false,
                o if o.effect() == Effect::Control => od.regions.iter().any(|&r| {
                    dfg.regions
                        .get(r)
                        .is_none_or(|rd| rd.ops.iter().any(|inner| effectful.contains(inner)))
                }),
                _ => true,
            };
            if has {
                effectful.insert(op);
            }
        }
        Effects { effectful }
    }

    /// True if `op` (a live op of the flow) or anything in its regions has
    /// an effect.
    pub fn has(&self, op: Op) -> bool {
        self.effectful.contains(&op)
    }
}

/// Placeholder indices of a template that uses only `{N}` placeholders and
/// no other braces; `None` if the text has any other `{` or `}` (whose
/// meaning the passes do not assume, so they leave such templates alone).
pub(crate) fn simple_template(text: &str) -> Option<Vec<TemplatePiece>> {
    let mut out = Vec::new();
    let mut lit = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '{' => {
                let rest = &text[i + 1..];
                let close = rest.find('}')?;
                let n: usize = rest[..close].parse().ok()?;
                if rest[..close].starts_with('+') {
                    return None;
                }
                if !lit.is_empty() {
                    out.push(TemplatePiece::Text(std::mem::take(&mut lit)));
                }
                out.push(TemplatePiece::Hole(n));
                // Skip the digits and the closing brace.
                while let Some(&(j, _)) = chars.peek() {
                    if j > i + 1 + close {
                        break;
                    }
                    chars.next();
                }
            }
            '}' => return None,
            c => lit.push(c),
        }
    }
    if !lit.is_empty() {
        out.push(TemplatePiece::Text(lit));
    }
    Some(out)
}

/// A piece of a template: literal text or the operand `{N}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TemplatePiece {
    Text(String),
    Hole(usize),
}

/// Text that can be placed literally into a template (no braces).
pub(crate) fn template_safe(s: &str) -> bool {
    !s.contains('{') && !s.contains('}')
}

/// Number of live LLM calls (ops of the `llm` effect class) in a module.
pub(crate) fn llm_call_count(m: &crate::Module) -> usize {
    m.agents
        .values()
        .flat_map(|a| a.flows.values())
        .map(|f| {
            f.walk()
                .into_iter()
                .filter(|&o| {
                    f.dfg
                        .ops
                        .get(o)
                        .is_some_and(|d| d.opcode.effect() == Effect::Llm)
                })
                .count()
        })
        .sum()
}

/// Erases the pure, region-free ops among `candidates` that the rewrites
/// left without uses and that cannot fail, and then their inputs in turn. Ops that were unused
/// before canonicalize are left to `dce`.
pub(crate) fn erase_dead(flow: &mut FlowData, mut candidates: Vec<Op>) {
    if candidates.is_empty() {
        return;
    }
    let facts = FlowFacts::new(flow);
    let mut counts: HashMap<Value, usize> = facts.uses.iter().map(|(v, u)| (*v, u.len())).collect();
    let mut erased = HashSet::default();
    let mut detach = Vec::new();
    while let Some(op) = candidates.pop() {
        let Some(&region) = facts.region.get(&op) else {
            continue;
        };
        let Some(od) = flow.dfg.ops.get(op) else {
            continue;
        };
        if erased.contains(&op)
            || !od.opcode.is_pure()
            // Still observable when unused (issue 32, defect 1).
            || super::failure::op_may_fail(&flow.dfg, op)
            || !od.regions.is_empty()
            || od
                .results
                .iter()
                .any(|r| counts.get(r).copied().unwrap_or(0) > 0)
        {
            continue;
        }
        let operands = od.operands.to_vec();
        // Detached from their regions below, all at once.
        erased.insert(op);
        detach.push((region, op));
        for v in operands {
            if let Some(c) = counts.get_mut(&v) {
                *c = c.saturating_sub(1);
            }
            if let Some(d) = def_op(&flow.dfg, v) {
                candidates.push(d);
            }
        }
    }
    erase_ops(&mut flow.dfg, &detach);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_templates() {
        use TemplatePiece::*;
        assert_eq!(
            simple_template("a {0} b {12}"),
            Some(vec![
                Text("a ".into()),
                Hole(0),
                Text(" b ".into()),
                Hole(12)
            ])
        );
        assert_eq!(simple_template(""), Some(vec![]));
        assert_eq!(simple_template("{x}"), None);
        assert_eq!(simple_template("a } b"), None);
        assert_eq!(simple_template("{{0}}"), None);
        assert_eq!(simple_template("{+1}"), None);
        assert_eq!(
            simple_template("é{0}é"),
            Some(vec![Text("é".into()), Hole(0), Text("é".into())])
        );
    }
}
