//! `{name}` against `{{name}}`: aisc interpolates both, the reference only
//! the doubled one. A file that writes any `{{name}}` hole was likely
//! written for the reference, so each single-brace hole in it (which the
//! reference would send literally) is a warning (`W0008`). The spelling is
//! only in the source text, so this reads it through the source map.

use super::errors::SemaError;
use crate::syntax::ast::*;
use crate::syntax::lexer::{StrLit, StrPart};
use ais_ir::SourceMap;

pub fn single_brace_holes(file: &File, sources: &SourceMap) -> Vec<SemaError> {
    let mut lits: Vec<&StrLit> = Vec::new();
    for a in &file.agents {
        for m in &a.members {
            match m {
                Member::Flow(f) => block(&f.body, &mut lits),
                Member::Handler(h) => {
                    if let Some(g) = &h.guard {
                        expr(g, &mut lits);
                    }
                    block(&h.body, &mut lits);
                }
                Member::Beliefs(bs, _) => bs.iter().for_each(|b| expr(&b.value, &mut lits)),
                Member::Context(l, _) => lits.push(l),
                _ => {}
            }
        }
    }
    // Per file: whether it writes a doubled hole, and its single ones.
    let mut doubled: Vec<u32> = Vec::new();
    let mut single: Vec<(u32, String, ais_ir::Span)> = Vec::new();
    for l in lits {
        for p in &l.parts {
            let StrPart::Interp(name, span) = p else {
                continue;
            };
            let Some(f) = sources.file_of(*span) else {
                continue;
            };
            let r = f.local(*span);
            let before = f.text.get(..r.start).unwrap_or("");
            if before.ends_with("{{") {
                doubled.push(f.base);
            } else {
                single.push((f.base, name.clone(), *span));
            }
        }
    }
    single
        .into_iter()
        .filter(|(file, _, _)| doubled.contains(file))
        .map(|(_, name, span)| SemaError::SingleBraceHole { name, span })
        .collect()
}

fn block<'a>(b: &'a Block, out: &mut Vec<&'a StrLit>) {
    for s in &b.stmts {
        match &s.kind {
            StmtKind::Let { value, .. } | StmtKind::Bind { value, .. } => expr(value, out),
            StmtKind::Return(Some(e)) | StmtKind::Expr(e) => expr(e, out),
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                expr(cond, out);
                block(then, out);
                if let Some(o) = otherwise {
                    block(o, out);
                }
            }
            StmtKind::Parallel(b) => block(b, out),
            StmtKind::Loop { iter, body, .. } => {
                expr(iter, out);
                block(body, out);
            }
            StmtKind::Try { body, handler, .. } => {
                block(body, out);
                block(handler, out);
            }
            StmtKind::Return(None) | StmtKind::Error(_) => {}
        }
    }
}

fn expr<'a>(e: &'a Expr, out: &mut Vec<&'a StrLit>) {
    match &e.kind {
        ExprKind::Str(l) => out.push(l),
        ExprKind::List(xs) => xs.iter().for_each(|x| expr(x, out)),
        // Walked along, in source order: a chain is as deep as it is long.
        ExprKind::Binary(..) => {
            let (first, steps) = e.binary_chain();
            expr(first, out);
            for (_, right, _) in steps {
                expr(right, out);
            }
        }
        ExprKind::Index(a, b) | ExprKind::Assign(a, b) => {
            expr(a, out);
            expr(b, out);
        }
        ExprKind::Member(a, _) | ExprKind::Unary(_, a) | ExprKind::Named(_, a) => expr(a, out),
        ExprKind::Call { callee, args } => {
            expr(callee, out);
            args.iter().for_each(|x| expr(x, out));
        }
        ExprKind::Switch(s) => {
            expr(&s.scrutinee, out);
            for c in &s.cases {
                if let Some(p) = &c.pattern {
                    expr(p, out);
                }
                match &c.body {
                    CaseBody::Expr(x) => expr(x, out),
                    CaseBody::Block(b) => block(b, out),
                }
            }
        }
        _ => {}
    }
}
