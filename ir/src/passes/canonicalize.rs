//! `canonicalize`: local simplifications, applied until nothing changes.
//!
//! - `template`: constant string operands (without braces) and operands that
//!   are themselves simple templates are folded into the template text;
//!   placeholders are renumbered and duplicate operands shared; a template
//!   with no operand left becomes a `const`; `template "{0}"` of a `str` is
//!   that value. Templates containing braces other than `{N}` placeholders
//!   are left alone (their escaping is not assumed).
//! - `concat`: nested concats are flattened, adjacent constant strings
//!   joined, empty strings dropped; an all-constant concat becomes a
//!   `const`, a concat of one `str` is that value.
//! - `merge` and `to_str` of a single `str` are that value.
//! - `not`/`and`/`or` of constant bools, `eq`/`ne` of two constants of the
//!   same kind (string, number, bool) are folded.
//! - `if` with a constant condition, and `switch` on a constant string that
//!   exactly matches a case (or, when no case could match loosely — no case,
//!   lower-cased, occurs in the lower-cased string — has a `default`), are
//!   replaced by the ops of the taken region.
//! - A `switch`/`if` whose regions all just `yield` the same values (e.g. a
//!   single real case duplicated by its default) is replaced by those values
//!   (a `switch` only with a `default`: without one it fails when no case
//!   matches).
//!
//! Only ops whose result type is exactly the canonical one (`str`, `bool`)
//! are folded, so no value ever changes type. No rewrite changes which ops
//! fail: the folded ops cannot fail on constant operands, an op left unused
//! by a rewrite is erased only if it cannot fail (`failure.rs`), and an
//! `if`/`switch` is dropped only if its own check cannot fail.

use super::util::{
    const_attr, const_bool, const_str, def_op, erase_op, simple_template, template_safe, FlowFacts,
    TemplatePiece,
};
use super::{Changed, Pass};
use crate::entity::{Op, Region, Value};
use crate::module::{Attr, Dfg, FlowData, Module};
use crate::ops::Opcode;
use crate::types::Type;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::borrow::Cow;

#[derive(Debug, Default)]
pub struct Canonicalize {
    folded: u64,
    regions_inlined: u64,
}

/// Rewrites before recomputing the walk; guards against pathological inputs.
const MAX_ROUNDS: usize = 10_000;

impl Pass for Canonicalize {
    fn name(&self) -> &'static str {
        "canonicalize"
    }

    fn run(&mut self, m: &mut Module) -> Changed {
        *self = Canonicalize::default();
        let mut changed = Changed::No;
        for (_, agent) in m.agents.iter_mut() {
            for (_, flow) in agent.flows.iter_mut() {
                changed |= self.flow(flow);
            }
        }
        changed
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("folded", self.folded),
            ("regions inlined", self.regions_inlined),
        ]
    }
}

/// What one rewrite did.
enum Rewrite {
    None,
    /// Local change: the walk can go on.
    Local,
    /// Ops moved between regions: recompute the walk.
    Structural,
}

impl Canonicalize {
    fn flow(&mut self, flow: &mut FlowData) -> Changed {
        let mut changed = Changed::No;
        let mut candidates: Vec<Op> = Vec::new();
        for _ in 0..MAX_ROUNDS {
            let facts = FlowFacts::new(flow);
            let mut p = Pending::default();
            let mut again = false;
            for &op in &facts.order {
                let Some(region) = facts.region(op) else {
                    continue;
                };
                // Ops replaced earlier in this round are skipped.
                if p.dead.contains(&op) {
                    continue;
                }
                let inputs = if may_rewrite(&flow.dfg, op) {
                    operand_defs(&flow.dfg, op)
                } else {
                    Vec::new()
                };
                let r = self.rewrite(&mut flow.dfg, &mut p, &facts, region, op);
                if !matches!(r, Rewrite::None) {
                    candidates.extend(inputs);
                }
                match r {
                    Rewrite::None => {}
                    Rewrite::Local => {
                        changed = Changed::Yes;
                        again = true;
                    }
                    Rewrite::Structural => {
                        changed = Changed::Yes;
                        again = true;
                        break;
                    }
                }
            }
            p.apply(flow);
            // Now, not after the last round: ops a consumer has absorbed
            // would otherwise be folded on their own in the next round.
            super::util::erase_dead(flow, std::mem::take(&mut candidates));
            if !again {
                break;
            }
        }
        changed
    }

    fn rewrite(
        &mut self,
        dfg: &mut Dfg,
        p: &mut Pending,
        facts: &FlowFacts,
        region: Region,
        op: Op,
    ) -> Rewrite {
        let Some(od) = dfg.ops.get(op) else {
            return Rewrite::None;
        };
        let r = match od.opcode {
            Opcode::Template => self.template(dfg, p, facts, op),
            Opcode::Concat => self.concat(dfg, p, facts, op),
            Opcode::Merge | Opcode::ToStr => identity_of_single_str(dfg, p, op),
            Opcode::Not | Opcode::And | Opcode::Or | Opcode::Eq | Opcode::Ne => {
                fold_bool(dfg, p, op)
            }
            Opcode::If | Opcode::Switch => {
                if let Some(r) = trivial_regions(dfg, p, region, op) {
                    r
                } else if let Some(taken) = taken_region(dfg, op) {
                    inline_region(dfg, p, region, op, taken)
                } else {
                    Rewrite::None
                }
            }
            _ => Rewrite::None,
        };
        match r {
            Rewrite::Local => self.folded += 1,
            Rewrite::Structural => self.regions_inlined += 1,
            Rewrite::None => {}
        }
        r
    }

    fn template(&mut self, dfg: &mut Dfg, p: &mut Pending, facts: &FlowFacts, op: Op) -> Rewrite {
        let Some(od) = dfg.ops.get(op) else {
            return Rewrite::None;
        };
        if od.results.len() != 1 || dfg.value_type(od.results[0]) != &Type::Str {
            return Rewrite::None;
        }
        // Its only user, a template too, will take its pieces in: folding
        // it first would rebuild every link of a long chain (quadratic).
        if absorbed_by(dfg, facts, od.results[0], Opcode::Template) {
            return Rewrite::None;
        }
        let Some(text) = od.attrs.get("template").and_then(Attr::as_str) else {
            return Rewrite::None;
        };
        let Some(pieces) = simple_template(text) else {
            return Rewrite::None;
        };
        let operands = od.operands.to_vec();
        // Expand holes: constants and nested simple templates are inlined.
        let mut expanded: Vec<Piece> = Vec::new();
        for piece in pieces {
            match piece {
                TemplatePiece::Text(t) => expanded.push(Piece::Text(t.into())),
                TemplatePiece::Hole(n) => {
                    let Some(&v) = operands.get(n) else {
                        return Rewrite::None;
                    };
                    expand_value(dfg, p, facts, v, &mut expanded);
                }
            }
        }
        let (new_text, new_operands) = assemble(&expanded);
        let old_text = text.to_string();
        if new_operands.is_empty() {
            return replace_with_const(dfg, p, op, Attr::Str(new_text), Type::Str);
        }
        if new_text == "{0}" && dfg.value_type(new_operands[0]) == &Type::Str {
            return replace_with_value(dfg, p, op, new_operands[0]);
        }
        if new_text == old_text && new_operands == operands {
            return Rewrite::None;
        }
        if let Some(d) = dfg.ops.get_mut(op) {
            d.attrs.set("template", Attr::Str(new_text));
            d.operands = new_operands.into_iter().collect();
        }
        Rewrite::Local
    }

    fn concat(&mut self, dfg: &mut Dfg, p: &mut Pending, facts: &FlowFacts, op: Op) -> Rewrite {
        let Some(od) = dfg.ops.get(op) else {
            return Rewrite::None;
        };
        if od.results.len() != 1 || dfg.value_type(od.results[0]) != &Type::Str {
            return Rewrite::None;
        }
        // As for templates: the consumer concat flattens this one.
        if absorbed_by(dfg, facts, od.results[0], Opcode::Concat) {
            return Rewrite::None;
        }
        let fold = plan_concat(dfg, p, facts, &od.operands);
        let joined = match fold {
            ConcatFold::Const(t) => return replace_with_const(dfg, p, op, Attr::Str(t), Type::Str),
            ConcatFold::Value(v) => return replace_with_value(dfg, p, op, v),
            ConcatFold::Keep => return Rewrite::None,
            ConcatFold::Operands(joined) => joined,
        };
        let span = dfg.span(op);
        let mut new_operands = Vec::new();
        for piece in joined {
            match piece {
                Piece::Value(v) => new_operands.push(v),
                Piece::Text(t) => {
                    let c = make_const(dfg, p, op, Attr::Str(t.into_owned()), Type::Str, span);
                    new_operands.push(c);
                }
            }
        }
        if let Some(d) = dfg.ops.get_mut(op) {
            d.operands = new_operands.into_iter().collect();
        }
        Rewrite::Local
    }
}

/// Whether [`Canonicalize::rewrite`] may change `op`: only then are its
/// inputs (for a control op, the inputs of its whole subtree) collected,
/// which for every op at every depth was O(ops × depth).
fn may_rewrite(dfg: &Dfg, op: Op) -> bool {
    let Some(od) = dfg.ops.get(op) else {
        return false;
    };
    match od.opcode {
        Opcode::Template
        | Opcode::Concat
        | Opcode::Merge
        | Opcode::ToStr
        | Opcode::Not
        | Opcode::And
        | Opcode::Or
        | Opcode::Eq
        | Opcode::Ne => true,
        // `trivial_regions` needs every region to hold only its `yield`;
        // `taken_region` a constant condition.
        Opcode::If | Opcode::Switch => {
            od.regions
                .iter()
                .all(|&r| dfg.regions.get(r).is_some_and(|rd| rd.ops.len() == 1))
                || od
                    .operands
                    .first()
                    .is_some_and(|&c| const_attr(dfg, c).is_some())
        }
        _ => false,
    }
}

/// Defining ops of the operands of `op` and of the ops in its regions.
fn operand_defs(dfg: &Dfg, op: Op) -> Vec<Op> {
    let mut ops = vec![op];
    if let Some(od) = dfg.ops.get(op) {
        for &r in &od.regions {
            ops.extend(dfg.walk_region(r));
        }
    }
    crate::work::add(ops.len());
    ops.iter()
        .filter_map(|&o| dfg.ops.get(o))
        .flat_map(|d| d.operands.iter().filter_map(|&v| def_op(dfg, v)))
        .collect()
}

/// A piece of a string being folded: literal text or a value's text. The
/// text is borrowed from the constant it comes from until it must change
/// (copying every constant's text on every round was an allocation per op).
#[derive(Clone, Debug, PartialEq)]
enum Piece<'a> {
    Text(Cow<'a, str>),
    Value(Value),
}

impl Piece<'_> {
    fn into_owned(self) -> Piece<'static> {
        match self {
            Piece::Text(t) => Piece::Text(Cow::Owned(t.into_owned())),
            Piece::Value(v) => Piece::Value(v),
        }
    }
}

/// What a `str` concat becomes, decided on borrowed texts: most concats
/// stay as they are after the first round.
enum ConcatFold {
    Const(String),
    Value(Value),
    Keep,
    /// New operands (texts become constants).
    Operands(Vec<Piece<'static>>),
}

fn plan_concat(dfg: &Dfg, p: &Pending, facts: &FlowFacts, operands: &[Value]) -> ConcatFold {
    let mut parts: Vec<Piece> = Vec::new();
    flatten_concat(dfg, p, facts, operands, &mut parts);
    // Join adjacent texts, drop empty ones.
    let mut joined: Vec<Piece> = Vec::new();
    for piece in parts {
        match (joined.last_mut(), piece) {
            (_, Piece::Text(t)) if t.is_empty() => {}
            (Some(Piece::Text(prev)), Piece::Text(t)) => prev.to_mut().push_str(&t),
            (_, piece) => joined.push(piece),
        }
    }
    match joined.as_slice() {
        [] => return ConcatFold::Const(String::new()),
        [Piece::Text(t)] => return ConcatFold::Const(t.to_string()),
        [Piece::Value(v)] if dfg.value_type(*v) == &Type::Str => return ConcatFold::Value(*v),
        _ => {}
    }
    // Rebuild the operand list only if it differs.
    let same = joined.len() == operands.len()
        && joined.iter().zip(operands).all(|(piece, &v)| match piece {
            Piece::Value(x) => *x == v,
            Piece::Text(t) => const_str(dfg, v) == Some(&**t),
        });
    if same {
        return ConcatFold::Keep;
    }
    ConcatFold::Operands(joined.into_iter().map(Piece::into_owned).collect())
}

/// Appends the pieces of `v` as a template operand: a brace-free constant
/// string is text, a simple template is expanded (a single-use one all the
/// way down, a shared one by one level per round), anything else stays a
/// value. An explicit stack, not recursion: chains can be as long as the
/// program.
fn expand_value<'a>(
    dfg: &'a Dfg,
    p: &Pending,
    facts: &FlowFacts,
    v: Value,
    out: &mut Vec<Piece<'a>>,
) {
    // Pieces still to emit, last first; `true` marks a value to expand.
    let mut todo: Vec<(Piece, bool)> = vec![(Piece::Value(v), true)];
    while let Some((piece, expand)) = todo.pop() {
        let v = match piece {
            Piece::Value(v) if expand => p.resolve(v),
            other => {
                out.push(other);
                continue;
            }
        };
        if let Some(s) = const_str(dfg, v) {
            if template_safe(s) {
                out.push(Piece::Text(Cow::Borrowed(s)));
                continue;
            }
        }
        match inner_template(dfg, v) {
            Some((pieces, operands)) => {
                let deep = single_use(facts, v);
                for p in pieces.into_iter().rev() {
                    todo.push(match p {
                        TemplatePiece::Text(t) => (Piece::Text(t.into()), false),
                        TemplatePiece::Hole(n) => (Piece::Value(operands[n]), deep),
                    });
                }
            }
            None => out.push(Piece::Value(v)),
        }
    }
}

/// The pieces and operands of the simple `str` template defining `v`.
fn inner_template(dfg: &Dfg, v: Value) -> Option<(Vec<TemplatePiece>, Vec<Value>)> {
    let inner = def_op(dfg, v).and_then(|o| dfg.ops.get(o))?;
    if inner.opcode != Opcode::Template || dfg.value_type(v) != &Type::Str {
        return None;
    }
    let pieces = simple_template(inner.attrs.get("template").and_then(Attr::as_str)?)?;
    let ok = pieces.iter().all(|p| match p {
        TemplatePiece::Hole(n) => *n < inner.operands.len(),
        TemplatePiece::Text(_) => true,
    });
    ok.then(|| (pieces, inner.operands.to_vec()))
}

/// `v` has exactly one use (as of the start of the round).
fn single_use(facts: &FlowFacts, v: Value) -> bool {
    facts.uses(v).len() == 1
}

/// `v`'s only user is an op of `opcode` producing a `str` (which folds `v`'s
/// op into itself, so `v`'s op need not be folded on its own).
fn absorbed_by(dfg: &Dfg, facts: &FlowFacts, v: Value, opcode: Opcode) -> bool {
    let [(user, _)] = facts.uses(v) else {
        return false;
    };
    dfg.ops.get(*user).is_some_and(|u| {
        u.opcode == opcode
            && u.results.len() == 1
            && dfg.value_type(u.results[0]) == &Type::Str
            && (opcode != Opcode::Template
                || u.attrs
                    .get("template")
                    .and_then(Attr::as_str)
                    .and_then(simple_template)
                    .is_some())
    })
}

/// Builds template text and operands from pieces, sharing holes between
/// equal operands.
fn assemble(pieces: &[Piece]) -> (String, Vec<Value>) {
    let mut text = String::new();
    let mut operands: Vec<Value> = Vec::new();
    for p in pieces {
        match p {
            Piece::Text(t) => text.push_str(t),
            Piece::Value(v) => {
                let i = match operands.iter().position(|o| o == v) {
                    Some(i) => i,
                    None => {
                        operands.push(*v);
                        operands.len() - 1
                    }
                };
                text.push_str(&format!("{{{i}}}"));
            }
        }
    }
    (text, operands)
}

/// The pieces of a concat of `operands`: constant strings are text, inner
/// `str` concats used only here are flattened (all the way down), anything
/// else stays a value.
fn flatten_concat<'a>(
    dfg: &'a Dfg,
    p: &Pending,
    facts: &FlowFacts,
    operands: &[Value],
    out: &mut Vec<Piece<'a>>,
) {
    let mut todo: Vec<Value> = operands.iter().rev().copied().collect();
    while let Some(v) = todo.pop() {
        let v = p.resolve(v);
        if let Some(s) = const_str(dfg, v) {
            out.push(Piece::Text(Cow::Borrowed(s)));
            continue;
        }
        let inner = def_op(dfg, v).and_then(|o| dfg.ops.get(o));
        match inner {
            Some(inner)
                if inner.opcode == Opcode::Concat
                    && dfg.value_type(v) == &Type::Str
                    && single_use(facts, v) =>
            {
                todo.extend(inner.operands.iter().rev());
            }
            _ => out.push(Piece::Value(v)),
        }
    }
}

/// `merge %x` / `to_str %x` / (single-operand) of a `str` `%x` is `%x`.
fn identity_of_single_str(dfg: &mut Dfg, p: &mut Pending, op: Op) -> Rewrite {
    let Some(od) = dfg.ops.get(op) else {
        return Rewrite::None;
    };
    match (od.operands.as_slice(), od.results.as_slice()) {
        ([x], [r]) if dfg.value_type(*x) == &Type::Str && dfg.value_type(*r) == &Type::Str => {
            let x = *x;
            replace_with_value(dfg, p, op, x)
        }
        _ => Rewrite::None,
    }
}

fn fold_bool(dfg: &mut Dfg, p: &mut Pending, op: Op) -> Rewrite {
    let Some(od) = dfg.ops.get(op) else {
        return Rewrite::None;
    };
    if od.results.len() != 1 || dfg.value_type(od.results[0]) != &Type::Bool {
        return Rewrite::None;
    }
    let ops = od.operands.to_vec();
    let b = |i: usize| ops.get(i).and_then(|&v| const_bool(dfg, v));
    let value = match od.opcode {
        Opcode::Not => b(0).map(|x| !x),
        Opcode::And => b(0).zip(b(1)).map(|(x, y)| x && y),
        Opcode::Or => b(0).zip(b(1)).map(|(x, y)| x || y),
        Opcode::Eq | Opcode::Ne => {
            let lit = |i: usize| ops.get(i).and_then(|&v| const_attr(dfg, v));
            let eq = match (lit(0), lit(1)) {
                (Some(Attr::Str(x)), Some(Attr::Str(y))) => Some(x == y),
                (Some(Attr::Bool(x)), Some(Attr::Bool(y))) => Some(x == y),
                (Some(Attr::Number(x)), Some(Attr::Number(y))) => Some(x == y),
                _ => None,
            };
            eq.map(|e| if od.opcode == Opcode::Eq { e } else { !e })
        }
        _ => None,
    };
    match value {
        Some(v) => replace_with_const(dfg, p, op, Attr::Bool(v), Type::Bool),
        None => Rewrite::None,
    }
}

/// The region an `if`/`switch` with a constant condition certainly takes.
fn taken_region(dfg: &Dfg, op: Op) -> Option<Region> {
    let od = dfg.ops.get(op)?;
    let cond = *od.operands.first()?;
    match od.opcode {
        Opcode::If => {
            let b = const_bool(dfg, cond)?;
            let label = if b { "then" } else { "else" };
            od.regions
                .iter()
                .copied()
                .find(|&r| dfg.regions.get(r).is_some_and(|rd| rd.label == label))
        }
        Opcode::Switch => {
            let s = const_str(dfg, cond)?;
            let regions: Vec<(Region, &crate::module::RegionData)> = od
                .regions
                .iter()
                .filter_map(|&r| dfg.regions.get(r).map(|d| (r, d)))
                .collect();
            if let Some((r, _)) = regions
                .iter()
                .find(|(_, d)| d.label == "case" && d.key.as_deref() == Some(s))
            {
                return Some(*r);
            }
            // Take the default only if no case could match loosely. The
            // runtime ignores case, decoration (quotes, emphasis,
            // punctuation) and text after the case, so every loose match
            // contains the case, lower-cased; anything that does is kept.
            let lower = s.to_lowercase();
            let near = regions.iter().any(|(_, d)| {
                d.label == "case"
                    && d.key
                        .as_deref()
                        .is_some_and(|k| lower.contains(k.trim().to_lowercase().as_str()))
            });
            if near {
                return None;
            }
            regions
                .iter()
                .find(|(_, d)| d.label == "default")
                .map(|(r, _)| *r)
        }
        _ => None,
    }
}

/// Replaces `op` by the ops of `taken` (all but its final `yield`) and its
/// results by the yielded values.
fn inline_region(dfg: &mut Dfg, p: &Pending, region: Region, op: Op, taken: Region) -> Rewrite {
    let Some(rd) = dfg.regions.get(taken) else {
        return Rewrite::None;
    };
    let Some((&last, body)) = rd.ops.split_last() else {
        return Rewrite::None;
    };
    let Some(yield_data) = dfg.ops.get(last).filter(|d| d.opcode == Opcode::Yield) else {
        return Rewrite::None;
    };
    let yielded = yield_data.operands.to_vec();
    let results = dfg
        .ops
        .get(op)
        .map(|d| d.results.to_vec())
        .unwrap_or_default();
    if yielded.len() != results.len()
        || yielded
            .iter()
            .zip(&results)
            .any(|(y, r)| dfg.value_type(*y) != dfg.value_type(*r))
    {
        return Rewrite::None;
    }
    if results
        .iter()
        .zip(&yielded)
        .any(|(r, y)| empty_prompt(dfg, p, *r, *y))
    {
        return Rewrite::None;
    }
    let body = body.to_vec();
    if let Some(rd) = dfg.regions.get_mut(taken) {
        rd.ops.clear();
    }
    if let Some(parent) = dfg.regions.get_mut(region) {
        let Some(pos) = parent.ops.iter().position(|&o| o == op) else {
            return Rewrite::None;
        };
        for (i, o) in body.into_iter().enumerate() {
            parent.ops.insert(pos + i, o);
        }
    }
    for (r, y) in results.iter().zip(&yielded) {
        dfg.replace_all_uses(*r, *y);
    }
    erase_op(dfg, region, op);
    Rewrite::Structural
}

/// `if`/`switch` whose regions each consist of one `yield` of the same values.
fn trivial_regions(dfg: &mut Dfg, p: &Pending, region: Region, op: Op) -> Option<Rewrite> {
    let od = dfg.ops.get(op)?;
    // A switch without a default fails when no case matches: it is not
    // its cases' value.
    let has_default = od
        .regions
        .iter()
        .any(|&r| dfg.regions.get(r).is_some_and(|rd| rd.label == "default"));
    if od.opcode == Opcode::Switch && !has_default {
        return None;
    }
    // Likewise an `if` whose condition may not be a bool at run time
    // (`type.not_bool`): removing it would remove the failure.
    if od.opcode == Opcode::If && super::failure::op_may_fail(dfg, op) {
        return None;
    }
    let mut yielded: Option<Vec<Value>> = None;
    for &r in &od.regions {
        let rd = dfg.regions.get(r)?;
        let [only] = rd.ops.as_slice() else {
            return None;
        };
        let y = dfg.ops.get(*only).filter(|d| d.opcode == Opcode::Yield)?;
        match &yielded {
            None => yielded = Some(y.operands.to_vec()),
            Some(prev) if *prev == y.operands.to_vec() => {}
            Some(_) => return None,
        }
    }
    let yielded = yielded?;
    let results = od.results.to_vec();
    if yielded.len() != results.len()
        || yielded
            .iter()
            .zip(&results)
            .any(|(y, r)| dfg.value_type(*y) != dfg.value_type(*r))
    {
        return None;
    }
    if results
        .iter()
        .zip(&yielded)
        .any(|(r, y)| empty_prompt(dfg, p, *r, *y))
    {
        return None;
    }
    // The values are defined outside the op: each region only yields.
    for (r, y) in results.iter().zip(&yielded) {
        dfg.replace_all_uses(*r, *y);
    }
    erase_op(dfg, region, op);
    Some(Rewrite::Structural)
}

/// Edits of one round, applied together at its end ([`Pending::apply`]):
/// replacing a value or inserting an op one at a time would scan the whole
/// flow or region each time, which made the pass quadratic.
#[derive(Default)]
struct Pending {
    /// Uses of the key are to become uses of the value.
    subst: HashMap<Value, Value>,
    /// Ops replaced this round, to leave their regions.
    dead: HashSet<Op>,
    /// New ops to place just before the key op.
    before: HashMap<Op, Vec<Op>>,
}

impl Pending {
    /// What `v` stands for after this round's replacements.
    fn resolve(&self, mut v: Value) -> Value {
        // Bounded: a chain of replacements is at most as long as the
        // number of replacements.
        for _ in 0..=self.subst.len() {
            match self.subst.get(&v) {
                Some(&n) if n != v => v = n,
                _ => break,
            }
        }
        v
    }

    /// Places new ops, drops dead ones and rewrites every operand through
    /// `subst`, in one walk of the flow.
    fn apply(mut self, flow: &mut FlowData) {
        if self.subst.is_empty() && self.dead.is_empty() && self.before.is_empty() {
            return;
        }
        let dfg = &mut flow.dfg;
        let mut stack = vec![flow.body];
        let mut seen = HashSet::default();
        let mut before = std::mem::take(&mut self.before);
        while let Some(r) = stack.pop() {
            if !seen.insert(r) {
                continue;
            }
            let Some(rd) = dfg.regions.get_mut(r) else {
                continue;
            };
            let old = std::mem::take(&mut rd.ops);
            let mut ops = Vec::with_capacity(old.len());
            for op in old {
                if let Some(new) = before.remove(&op) {
                    ops.extend(new);
                }
                if !self.dead.contains(&op) {
                    ops.push(op);
                }
            }
            for &op in &ops {
                if let Some(od) = dfg.ops.get_mut(op) {
                    for v in od.operands.iter_mut() {
                        *v = self.resolve(*v);
                    }
                    stack.extend(od.regions.iter().copied());
                }
            }
            if let Some(rd) = dfg.regions.get_mut(r) {
                rd.ops = ops;
            }
        }
    }
}

/// Creates `const` to be placed just before `anchor`; returns its value.
fn make_const(
    dfg: &mut Dfg,
    p: &mut Pending,
    anchor: Op,
    value: Attr,
    ty: Type,
    span: crate::Span,
) -> Value {
    let c = dfg.create_op(Opcode::Const, &[], &[ty]);
    if let Some(d) = dfg.ops.get_mut(c) {
        d.attrs.set("value", value);
    }
    if !span.is_dummy() {
        dfg.set_span(c, span);
    }
    p.before.entry(anchor).or_default().push(c);
    dfg.ops[c].results[0]
}

fn replace_with_const(dfg: &mut Dfg, p: &mut Pending, op: Op, value: Attr, ty: Type) -> Rewrite {
    // Blank, as the verifier counts it (V0027).
    if matches!(&value, Attr::Str(t) if t.trim().is_empty())
        && dfg
            .ops
            .get(op)
            .is_some_and(|d| d.results.first().is_some_and(|&r| prompt_use(dfg, p, r)))
    {
        return Rewrite::None;
    }
    let span = dfg.span(op);
    let c = make_const(dfg, p, op, value, ty, span);
    replace_with_value(dfg, p, op, c)
}

fn replace_with_value(dfg: &mut Dfg, p: &mut Pending, op: Op, v: Value) -> Rewrite {
    let results = dfg
        .ops
        .get(op)
        .map(|d| d.results.to_vec())
        .unwrap_or_default();
    if results.first().is_some_and(|&r| empty_prompt(dfg, p, r, v)) {
        return Rewrite::None;
    }
    if let Some(&r) = results.first() {
        p.subst.insert(r, v);
    }
    p.dead.insert(op);
    Rewrite::Local
}

/// Replacing `old` by `new` would make a constant empty LLM prompt, which
/// the verifier rejects (V0027); at run time the prompt was empty anyway,
/// but the rewrite is skipped to keep the IR valid.
fn empty_prompt(dfg: &Dfg, p: &Pending, old: Value, new: Value) -> bool {
    const_str(dfg, p.resolve(new)).is_some_and(|s| s.trim().is_empty()) && prompt_use(dfg, p, old)
}

/// `v` is the prompt (first operand) of an LLM op.
/// Operands are seen through this round's pending replacements.
fn prompt_use(dfg: &Dfg, p: &Pending, v: Value) -> bool {
    let mut aliases: HashSet<Value> = std::iter::once(v).collect();
    // Values already replaced by `v` (directly or through others).
    loop {
        let before = aliases.len();
        for (from, to) in &p.subst {
            if aliases.contains(to) {
                aliases.insert(*from);
            }
        }
        if aliases.len() == before {
            break;
        }
    }
    dfg.ops.iter().any(|(_, d)| {
        d.opcode.effect() == crate::ops::Effect::Llm
            && d.operands.first().is_some_and(|f| aliases.contains(f))
    })
}
