//! Which ops may fail at run time, for the passes that remove or fold ops.
//!
//! A failure is observable: it fails the run, or sends the enclosing `try`
//! to its `catch` (whose body's prints and writes are then discarded). So
//! an op that may fail is never dead, however unused its results, and no
//! rewrite may make it disappear (issue 32, defect 1: `let _z = 1 / 0` in
//! a `try` body failed at -O0 and "succeeded" at -O1).
//!
//! The op table says which ops can fail at all ([`Failure`]); this file
//! proves, from the operands at hand, that a particular one cannot. The
//! proofs are deliberately cheap and local (constants and the kind of value
//! an operand's defining op always produces); anything else may fail.
//!
//! Not covered: resource limits (`LIMIT_VALUE_BYTES`, frames, budgets).
//! They stop the run rather than fail an op, are not catchable, and an
//! optimized program may stay under a limit the unoptimized one reaches.

use super::util::def_op;
use crate::entity::{Op, Value};
use crate::module::{Attr, Dfg};
use crate::ops::{Canon, Failure, Opcode, ResultRule};
use crate::types::Type;
use rustc_hash::FxHashSet as HashSet;

/// The kind of value a `Val` holds at run time, as far as the IR proves it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Num,
    Bool,
    Str,
    List,
}

/// Whether `op` itself may fail, given its operands. For control ops only
/// their own check counts (the branch condition, the `switch` default, the
/// `loop` list); their regions are [`FailingOps`]'s business.
pub(crate) fn op_may_fail(dfg: &Dfg, op: Op) -> bool {
    let Some(od) = dfg.ops.get(op) else {
        return true;
    };
    let operand = |i: usize| od.operands.get(i).copied();
    let is = |i: usize, k: Kind| operand(i).is_some_and(|v| kind_of(dfg, v) == Some(k));
    let all = |k: Kind| od.operands.iter().all(|&v| kind_of(dfg, v) == Some(k));
    match od.opcode.info().fails {
        Failure::Never => false,
        Failure::Effect => true,
        Failure::OnValues => !match od.opcode {
            Opcode::Add | Opcode::Sub | Opcode::Mul | Opcode::Neg => all(Kind::Num),
            // A finite dividend (NaN and infinities are numbers too) and a
            // non-zero constant divisor.
            Opcode::Div | Opcode::Mod => {
                is(0, Kind::Num)
                    && operand(1)
                        .and_then(|v| const_number(dfg, v))
                        .is_some_and(|d| d != 0.0)
            }
            Opcode::And | Opcode::Or | Opcode::Not => all(Kind::Bool),
            // Two constant numbers (never NaN), or two texts.
            Opcode::Lt | Opcode::Le | Opcode::Gt | Opcode::Ge => {
                od.operands.iter().all(|&v| const_number(dfg, v).is_some()) || all(Kind::Str)
            }
            Opcode::Index => match (operand(0), operand(1)) {
                (Some(list), Some(i)) => {
                    let len = list_len(dfg, list);
                    let i = const_number(dfg, i);
                    matches!((len, i), (Some(len), Some(i))
                        if i >= 0.0 && i.fract() == 0.0 && (i as usize) < len)
                }
                _ => false,
            },
            // Every member of an object exists (a missing one is `null`).
            Opcode::Member => operand(0)
                .and_then(|v| def_op(dfg, v))
                .and_then(|d| dfg.ops.get(d))
                .is_some_and(|d| d.opcode == Opcode::Object),
            Opcode::Cast => match od.results.first().map(|&r| dfg.value_type(r)) {
                Some(Type::Json) => true,
                Some(Type::Str) => is(0, Kind::Str),
                Some(Type::Number) => is(0, Kind::Num),
                Some(Type::Bool) => is(0, Kind::Bool),
                _ => false,
            },
            _ => false,
        },
        Failure::Control => match od.opcode {
            Opcode::If => !is(0, Kind::Bool),
            Opcode::Switch => !od
                .regions
                .iter()
                .any(|&r| dfg.regions.get(r).is_some_and(|rd| rd.label == "default")),
            // A list, or a text (iterated as its JSON array or its lines).
            Opcode::Loop => !(is(0, Kind::List) || is(0, Kind::Str)),
            Opcode::TryCatch => false,
            _ => true,
        },
    }
}

/// The ops of a flow that may fail, their regions included: a control op
/// may fail if its own check may, or an op in one of its regions may (for
/// `try_catch`, only its `catch` region: the `try` region's failures are
/// caught).
pub(crate) struct FailingOps(HashSet<Op>);

impl FailingOps {
    /// `order`: the flow's live ops in pre-order (an op before the ops of its
    /// regions), so walking it backwards sees inner ops first.
    pub(crate) fn new(dfg: &Dfg, order: &[Op]) -> FailingOps {
        let mut set = HashSet::default();
        for &op in order.iter().rev() {
            let Some(od) = dfg.ops.get(op) else { continue };
            let inner = || {
                od.regions.iter().any(|&r| {
                    dfg.regions.get(r).is_some_and(|rd| {
                        (od.opcode != Opcode::TryCatch || rd.label == "catch")
                            && rd.ops.iter().any(|o| set.contains(o))
                    })
                })
            };
            if op_may_fail(dfg, op) || inner() {
                set.insert(op);
            }
        }
        FailingOps(set)
    }

    pub(crate) fn contains(&self, op: Op) -> bool {
        self.0.contains(&op)
    }
}

/// The kind of `v` when it succeeds: a constant's, or the one its defining
/// pure op always produces (`add` a number, `lt` a bool, `concat` a text,
/// `list` a list). A parameter or a `json` value may hold anything,
/// `null` included.
fn kind_of(dfg: &Dfg, v: Value) -> Option<Kind> {
    let od = dfg.ops.get(def_op(dfg, v)?)?;
    if od.opcode == Opcode::Const {
        return match od.attrs.get("value")? {
            Attr::Number(_) => Some(Kind::Num),
            Attr::Bool(_) => Some(Kind::Bool),
            Attr::Str(_) => Some(Kind::Str),
            _ => None,
        };
    }
    if !od.opcode.is_pure() {
        return None;
    }
    match od.opcode.info().result_rule {
        ResultRule::ListOf => Some(Kind::List),
        ResultRule::Fixed(&[Canon::Number]) => Some(Kind::Num),
        ResultRule::Fixed(&[Canon::Bool]) => Some(Kind::Bool),
        ResultRule::Fixed(&[Canon::Str]) => Some(Kind::Str),
        _ if od.opcode == Opcode::WaitAll => Some(Kind::List),
        _ => None,
    }
}

/// A constant, finite number.
fn const_number(dfg: &Dfg, v: Value) -> Option<f64> {
    let od = dfg.ops.get(def_op(dfg, v)?)?;
    match (od.opcode, od.attrs.get("value")?) {
        (Opcode::Const, Attr::Number(n)) if n.is_finite() => Some(*n),
        _ => None,
    }
}

/// The length of a list built by `list` or `wait_all`.
fn list_len(dfg: &Dfg, v: Value) -> Option<usize> {
    let od = dfg.ops.get(def_op(dfg, v)?)?;
    matches!(od.opcode, Opcode::List | Opcode::WaitAll).then_some(od.operands.len())
}
