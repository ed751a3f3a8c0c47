//! The reference's `resume(checkpoint: "c")` op: the answer given to the
//! `pause` whose `checkpoint_id` (or `checkpoint`) is `"c"`. Here a paused
//! run waits for `aisc resume RUN --input VALUE` and the `pause` call's value
//! is that answer, so `resume(checkpoint: "c")` is rewritten (before the
//! reference's named arguments are, which drop `checkpoint_id`) into that
//! value: the variable the `pause` is bound to, or, for a `pause` written
//! as a statement, a variable it is now bound to (`_checkpoint_c`, so no
//! unused-variable warning). A `resume` naming no `pause` of its flow stays
//! as written and is an unknown operation (`E0114`). In graph JSON,
//! `RESUME` is read the same way (`graph_json::refonly`).

use super::ast::*;
use std::collections::HashMap;

/// Rewrites the `resume(checkpoint: ...)` calls of every flow and handler.
pub fn rewrite(file: &mut File) {
    for a in &mut file.agents {
        let own: Vec<String> = a
            .members
            .iter()
            .filter_map(|m| match m {
                Member::Flow(f) => Some(f.name.name.clone()),
                _ => None,
            })
            .collect();
        // A flow named `resume` or `pause` is called, not rewritten.
        if own.iter().any(|n| n == "resume" || n == "pause") {
            continue;
        }
        for m in &mut a.members {
            let body = match m {
                Member::Flow(f) => &mut f.body,
                Member::Handler(h) => &mut h.body,
                _ => continue,
            };
            let mut wanted = Vec::new();
            resumes(body, &mut wanted);
            if wanted.is_empty() {
                continue;
            }
            let mut bound = HashMap::new();
            bind_pauses(body, &wanted, &mut bound);
            replace(body, &bound);
        }
    }
}

/// The checkpoint a call `name(...)` names by `key:` as a plain string.
fn checkpoint_of(e: &Expr, name: &str, keys: &[&str]) -> Option<String> {
    let ExprKind::Call { callee, args } = &e.kind else {
        return None;
    };
    let ExprKind::Var(id) = &callee.kind else {
        return None;
    };
    if id.name != name {
        return None;
    }
    args.iter().find_map(|a| match &a.kind {
        ExprKind::Named(k, v) if keys.contains(&k.name.as_str()) => match &v.kind {
            ExprKind::Str(s) if !s.has_holes() => Some(s.text()),
            _ => None,
        },
        _ => None,
    })
}

fn resume_of(e: &Expr) -> Option<String> {
    checkpoint_of(e, "resume", &["checkpoint", "checkpoint_id"])
}

fn pause_of(e: &Expr) -> Option<String> {
    checkpoint_of(e, "pause", &["checkpoint_id", "checkpoint"])
}

/// Every statement's expressions, mutably, with nested blocks.
fn each_expr(b: &mut Block, f: &mut dyn FnMut(&mut Expr)) {
    for s in &mut b.stmts {
        match &mut s.kind {
            StmtKind::Let { value, .. } | StmtKind::Bind { value, .. } => f(value),
            StmtKind::Return(Some(e)) | StmtKind::Expr(e) => f(e),
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                f(cond);
                each_expr(then, f);
                if let Some(o) = otherwise {
                    each_expr(o, f);
                }
            }
            StmtKind::Parallel(b) => each_expr(b, f),
            StmtKind::Loop { iter, body, .. } => {
                f(iter);
                each_expr(body, f);
            }
            StmtKind::Try { body, handler, .. } => {
                each_expr(body, f);
                each_expr(handler, f);
            }
            StmtKind::Return(None) | StmtKind::Error(_) => {}
        }
    }
}

/// Sub-expressions, outermost first (an explicit stack: a binary chain is
/// as deep as it is long).
fn walk(e: &mut Expr, f: &mut dyn FnMut(&mut Expr) -> bool) {
    let mut stack: Vec<&mut Expr> = vec![e];
    while let Some(e) = stack.pop() {
        if !f(e) {
            continue;
        }
        match &mut e.kind {
            ExprKind::List(xs) => stack.extend(xs.iter_mut()),
            ExprKind::Index(a, b) | ExprKind::Assign(a, b) | ExprKind::Binary(_, a, b) => {
                stack.push(a);
                stack.push(b);
            }
            ExprKind::Member(a, _) | ExprKind::Unary(_, a) | ExprKind::Named(_, a) => stack.push(a),
            ExprKind::Call { callee, args } => {
                stack.push(callee);
                stack.extend(args.iter_mut());
            }
            ExprKind::Switch(s) => {
                stack.push(&mut s.scrutinee);
                for c in &mut s.cases {
                    if let Some(p) = &mut c.pattern {
                        stack.push(p);
                    }
                    match &mut c.body {
                        CaseBody::Expr(x) => stack.push(x),
                        CaseBody::Block(b) => each_expr(b, &mut |x| walk(x, f)),
                    }
                }
            }
            _ => {}
        }
    }
}

fn resumes(b: &mut Block, out: &mut Vec<String>) {
    each_expr(b, &mut |e| {
        walk(e, &mut |x| {
            if let Some(c) = resume_of(x) {
                out.push(c);
            }
            true
        })
    });
}

/// Binds each `pause` with a wanted checkpoint to a variable: its own, or
/// `_checkpoint_ID` for a statement.
fn bind_pauses(b: &mut Block, wanted: &[String], bound: &mut HashMap<String, String>) {
    for s in &mut b.stmts {
        match &mut s.kind {
            StmtKind::Let { name, value, .. } | StmtKind::Bind { name, value } => {
                if let Some(c) = pause_of(value).filter(|c| wanted.contains(c)) {
                    bound.insert(c, name.name.clone());
                }
            }
            StmtKind::Expr(e) => {
                if let Some(c) = pause_of(e).filter(|c| wanted.contains(c)) {
                    let var: String = c
                        .chars()
                        .map(|ch| if ch.is_ascii_alphanumeric() { ch } else { '_' })
                        .collect();
                    let name = Ident {
                        name: format!("_checkpoint_{var}"),
                        span: e.span,
                    };
                    bound.insert(c, name.name.clone());
                    let value = std::mem::replace(
                        e,
                        Expr {
                            kind: ExprKind::Null,
                            span: e.span,
                        },
                    );
                    s.kind = StmtKind::Let {
                        name,
                        ty: None,
                        value,
                    };
                }
            }
            StmtKind::If {
                then, otherwise, ..
            } => {
                bind_pauses(then, wanted, bound);
                if let Some(o) = otherwise {
                    bind_pauses(o, wanted, bound);
                }
            }
            StmtKind::Parallel(b) => bind_pauses(b, wanted, bound),
            StmtKind::Loop { body, .. } => bind_pauses(body, wanted, bound),
            StmtKind::Try { body, handler, .. } => {
                bind_pauses(body, wanted, bound);
                bind_pauses(handler, wanted, bound);
            }
            StmtKind::Return(_) | StmtKind::Error(_) => {}
        }
    }
}

fn replace(b: &mut Block, bound: &HashMap<String, String>) {
    each_expr(b, &mut |e| {
        walk(e, &mut |x| {
            let Some(var) = resume_of(x).and_then(|c| bound.get(&c)) else {
                return true;
            };
            x.kind = ExprKind::Var(Ident {
                name: var.clone(),
                span: x.span,
            });
            false
        })
    });
}
