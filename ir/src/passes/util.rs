//! Small IR helpers shared by the passes.

use crate::entity::{EntityRef, Op, Region, Value};
use crate::module::{Attr, Dfg, FlowData, ValueDef};
use crate::ops::{Effect, Opcode};
use crate::types::Type;
use rustc_hash::FxHashSet as HashSet;

/// Facts about the live ops of one flow, computed in one walk. Passes rebuild
/// it after they mutate the flow.
///
/// Indexed by the dense op and value numbers rather than hashed: the maps
/// this replaced allocated a `Vec` per used value and hashed every op three
/// times per pass round (issue 40: the allocator was a third of `build`).
pub(crate) struct FlowFacts {
    /// Live ops in pre-order (an op before the ops of its regions).
    pub order: Vec<Op>,
    /// The region listing each live op, by op number.
    region: Vec<Option<Region>>,
    /// `uses[use_start[v]..use_start[v + 1]]` are the uses of value `v`.
    use_start: Vec<u32>,
    /// Every use of a value by a live op: `(user, operand index)`, grouped
    /// by value, each group in pre-order.
    uses: Vec<(Op, u32)>,
}

impl FlowFacts {
    pub fn new(flow: &FlowData) -> FlowFacts {
        let dfg = &flow.dfg;
        // Sized once (at most every op is live), not grown by doubling.
        let mut order = Vec::with_capacity(dfg.ops.len());
        let mut region = vec![None; dfg.ops.len()];
        let mut seen = vec![false; dfg.regions.len()];
        // An explicit stack of (region, next op index): the walk's depth
        // follows the input's nesting.
        let mut stack: Vec<(Region, usize)> = Vec::with_capacity(8);
        if let Some(s) = seen.get_mut(flow.body.index()) {
            *s = true;
            stack.push((flow.body, 0));
        }
        while let Some(top) = stack.last_mut() {
            let (r, i) = *top;
            let Some(&op) = dfg.regions.get(r).and_then(|rd| rd.ops.get(i)) else {
                stack.pop();
                continue;
            };
            top.1 += 1;
            let Some(od) = dfg.ops.get(op) else { continue };
            order.push(op);
            if let Some(slot) = region.get_mut(op.index()) {
                *slot = Some(r);
            }
            // Last region pushed first: the first is walked first.
            for &child in od.regions.iter().rev() {
                if let Some(s) = seen.get_mut(child.index()).filter(|s| !**s) {
                    *s = true;
                    stack.push((child, 0));
                }
            }
        }
        // Uses grouped by value: count, prefix sums, then fill in pre-order.
        let mut use_start = vec![0u32; dfg.values.len() + 1];
        for &op in &order {
            for v in &dfg.ops[op].operands {
                if let Some(c) = use_start.get_mut(v.index() + 1) {
                    *c += 1;
                }
            }
        }
        for i in 1..use_start.len() {
            use_start[i] += use_start[i - 1];
        }
        let mut next: Vec<u32> = use_start.clone();
        let mut uses = vec![(Op::from_u32(0), 0u32); use_start.last().map_or(0, |&n| n as usize)];
        for &op in &order {
            for (i, v) in dfg.ops[op].operands.iter().enumerate() {
                if let Some(n) = next.get_mut(v.index()) {
                    uses[*n as usize] = (op, u32::try_from(i).unwrap_or(u32::MAX));
                    *n += 1;
                }
            }
        }
        crate::work::add(order.len());
        FlowFacts {
            order,
            region,
            use_start,
            uses,
        }
    }

    /// The region listing `op`, if `op` was live when the facts were taken.
    pub fn region(&self, op: Op) -> Option<Region> {
        self.region.get(op.index()).copied().flatten()
    }

    /// The uses of `v` by live ops: `(user, operand index)`, in pre-order
    /// (none for a value made after the facts were taken).
    pub fn uses(&self, v: Value) -> &[(Op, u32)] {
        let (Some(&a), Some(&b)) = (
            self.use_start.get(v.index()),
            self.use_start.get(v.index() + 1),
        ) else {
            return &[];
        };
        self.uses.get(a as usize..b as usize).unwrap_or(&[])
    }

    /// How many uses each value has, by value number (see [`UseCounts`]).
    pub fn use_counts(&self) -> UseCounts {
        UseCounts(self.use_start.windows(2).map(|w| w[1] - w[0]).collect())
    }
}

/// Use counts by value number, decremented as ops are removed.
pub(crate) struct UseCounts(Vec<u32>);

impl UseCounts {
    pub fn get(&self, v: Value) -> u32 {
        self.0.get(v.index()).copied().unwrap_or(0)
    }

    pub fn remove_use(&mut self, v: Value) {
        if let Some(c) = self.0.get_mut(v.index()) {
            *c = c.saturating_sub(1);
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
    if ops.is_empty() {
        return;
    }
    // Marks by op number and a list of the regions involved, not a map of
    // sets (one allocation per region touched).
    let mut gone = vec![false; dfg.ops.len()];
    let mut regions: Vec<Region> = Vec::new();
    for &(r, op) in ops {
        if let Some(g) = gone.get_mut(op.index()) {
            *g = true;
        }
        regions.push(r);
        clear_regions(dfg, op);
    }
    regions.sort_unstable();
    regions.dedup();
    for r in regions {
        if let Some(rd) = dfg.regions.get_mut(r) {
            rd.ops
                .retain(|o| !gone.get(o.index()).copied().unwrap_or(false));
        }
    }
}

/// Empties every region `op` owns, and theirs, through a worklist: the
/// recursion this replaced followed the input's nesting and stopped silently
/// at 4096 levels, leaving deeper regions listing detached ops.
fn clear_regions(dfg: &mut Dfg, op: Op) {
    // Most ops own no region: no worklist for them.
    if dfg.ops.get(op).is_none_or(|od| od.regions.is_empty()) {
        return;
    }
    let mut work = vec![op];
    while let Some(op) = work.pop() {
        let regions = dfg
            .ops
            .get(op)
            .map(|od| od.regions.clone())
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
    /// By op number.
    effectful: Vec<bool>,
}

impl Effects {
    pub fn new(dfg: &Dfg, facts: &FlowFacts) -> Effects {
        let mut effectful = vec![false; dfg.ops.len()];
        let mark = |effectful: &mut Vec<bool>, op: Op| {
            if let Some(e) = effectful.get_mut(op.index()) {
                *e = true;
            }
        };
        crate::work::add(facts.order.len());
        // Reverse pre-order: every op's region ops come before the op.
        for &op in facts.order.iter().rev() {
            let Some(od) = dfg.ops.get(op) else {
                mark(&mut effectful, op);
                continue;
            };
            let has = match od.opcode {
                Opcode::Yield => false,
                Opcode::Return => true,
                o if o.is_pure() => false,
                o if o.effect() == Effect::Control => od.regions.iter().any(|&r| {
                    dfg.regions.get(r).is_none_or(|rd| {
                        rd.ops
                            .iter()
                            .any(|inner| effectful.get(inner.index()).copied().unwrap_or(true))
                    })
                }),
                _ => true,
            };
            if has {
                mark(&mut effectful, op);
            }
        }
        Effects { effectful }
    }

    /// True if `op` (a live op of the flow) or anything in its regions has
    /// an effect.
    pub fn has(&self, op: Op) -> bool {
        // An op made after the summary is not known to be pure.
        self.effectful.get(op.index()).copied().unwrap_or(true)
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

/// Erases the pure, region-free ops among `candidates` that the rewrites
/// left without uses and that cannot fail, and then their inputs in turn. Ops that were unused
/// before canonicalize are left to `dce`.
pub(crate) fn erase_dead(flow: &mut FlowData, mut candidates: Vec<Op>) {
    if candidates.is_empty() {
        return;
    }
    let facts = FlowFacts::new(flow);
    let mut counts = facts.use_counts();
    let mut erased = HashSet::default();
    let mut detach = Vec::new();
    while let Some(op) = candidates.pop() {
        let Some(region) = facts.region(op) else {
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
                .any(|&r| counts.get(r) > 0)
        {
            continue;
        }
        let operands = od.operands.clone();
        // Detached from their regions below, all at once.
        erased.insert(op);
        detach.push((region, op));
        for v in operands {
            counts.remove_use(v);
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
