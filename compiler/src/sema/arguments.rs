//! Named arguments arranged into the operands a call takes: shared by the
//! checker, which reports what does not fit, and lowering, which relies on
//! the checker having done so.
//!
//! - LLM operations: `prompt:` is the first operand (when no prompt is
//!   given by position), `context:` adds context blocks after the
//!   positional ones (a list literal, one block per item); the other named
//!   arguments are the op's options.
//! - Flows and capabilities: arguments by parameter name, after the
//!   positional ones, in parameter order.

use crate::syntax::ast::{Expr, ExprKind, Ident};
use ais_ir::Span;

/// A named argument that does not fit.
#[derive(Debug)]
pub(crate) enum Misfit<'e> {
    /// No parameter has this name.
    Unknown(&'e Ident),
    /// The parameter was given already (by position, or by name).
    Twice { name: &'e Ident, first: Span },
}

/// The positional arguments and the named ones (name, value) of a call.
pub(crate) fn split(args: &[Expr]) -> (Vec<&Expr>, Vec<(&Ident, &Expr)>) {
    let mut positional = Vec::new();
    let mut named = Vec::new();
    for a in args {
        match &a.kind {
            ExprKind::Named(n, v) => named.push((n, &**v)),
            _ => positional.push(a),
        }
    }
    (positional, named)
}

/// An LLM operation's operands (prompt, then context) and its options.
pub(crate) fn llm_operands<'e>(
    positional: &[&'e Expr],
    named: &[(&'e Ident, &'e Expr)],
) -> (Vec<&'e Expr>, Vec<(&'e Ident, &'e Expr)>, Vec<Misfit<'e>>) {
    let mut operands: Vec<&Expr> = positional.to_vec();
    let mut options = Vec::new();
    let mut misfits = Vec::new();
    for (k, &(n, v)) in named.iter().enumerate() {
        if named[..k].iter().any(|(m, _)| m.name == n.name) {
            continue;
        }
        match n.name.as_str() {
            "prompt" => match positional.first() {
                Some(first) => misfits.push(Misfit::Twice {
                    name: n,
                    first: first.span,
                }),
                None => operands.insert(0, v),
            },
            "context" => match &v.kind {
                ExprKind::List(items) => operands.extend(items.iter()),
                _ => operands.push(v),
            },
            _ => options.push((n, v)),
        }
    }
    (operands, options, misfits)
}

/// A flow's or capability's arguments in parameter order: the positional
/// ones, then each named one at its parameter's place. Parameters given
/// neither way are left out (the checker reports the count).
pub(crate) fn by_parameter<'e>(
    params: &[&str],
    positional: &[&'e Expr],
    named: &[(&'e Ident, &'e Expr)],
) -> (Vec<&'e Expr>, Vec<Misfit<'e>>) {
    if named.is_empty() {
        return (positional.to_vec(), Vec::new());
    }
    let mut slots: Vec<Option<&Expr>> = vec![None; params.len().max(positional.len())];
    for (i, a) in positional.iter().enumerate() {
        slots[i] = Some(a);
    }
    let mut misfits = Vec::new();
    for (k, &(n, v)) in named.iter().enumerate() {
        // A name given twice is the checker's `split_named` report.
        if named[..k].iter().any(|(m, _)| m.name == n.name) {
            continue;
        }
        match params.iter().position(|p| *p == n.name) {
            None => misfits.push(Misfit::Unknown(n)),
            Some(i) => match slots[i] {
                Some(first) => misfits.push(Misfit::Twice {
                    name: n,
                    first: first.span,
                }),
                None => slots[i] = Some(v),
            },
        }
    }
    (slots.into_iter().flatten().collect(), misfits)
}
