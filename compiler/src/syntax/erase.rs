//! Span rewriting. Erasure sets every span to [`Span::DUMMY`], so that two
//! parses of differently laid-out text compare equal exactly when they mean
//! the same program (the formatter's guarantee); shifting places a file in
//! a program's global offset space.

use super::ast::*;
use super::lexer::{StrLit, StrPart};
use ais_ir::Span;

/// The file with every span (of nodes, names, literals and template holes)
/// replaced by [`Span::DUMMY`].
pub fn erase_spans(file: &File) -> File {
    let mut f = file.clone();
    file_(&|_| Span::DUMMY, &mut f);
    f
}

/// Moves every span of the tree by `by` bytes: a file parsed on its own is
/// placed at its base offset in a program's [`ais_ir::SourceMap`].
pub fn shift_spans(file: &mut File, by: u32) {
    if by != 0 {
        let shift = |s: Span| Span {
            start: s.start.saturating_add(by),
            end: s.end.saturating_add(by),
        };
        file_(&shift, file);
    }
}

/// What happens to each span.
type Map<'a> = &'a dyn Fn(Span) -> Span;

fn file_(sm: Map<'_>, f: &mut File) {
    f.span = sm(f.span);
    for i in &mut f.imports {
        i.path_span = sm(i.path_span);
        i.span = sm(i.span);
    }
    for a in &mut f.agents {
        ident(sm, &mut a.name);
        a.span = sm(a.span);
        for m in &mut a.members {
            member(sm, m);
        }
    }
}

fn ident(sm: Map<'_>, i: &mut Ident) {
    i.span = sm(i.span);
}

fn member(sm: Map<'_>, m: &mut Member) {
    match m {
        Member::Memory(decls, s) => {
            *s = sm(*s);
            for d in decls {
                ident(sm, &mut d.name);
                ident(sm, &mut d.tier);
                d.span = sm(d.span);
            }
        }
        Member::Beliefs(bs, s) => {
            *s = sm(*s);
            for b in bs {
                ident(sm, &mut b.name);
                expr(sm, &mut b.value);
                b.span = sm(b.span);
            }
        }
        Member::Goals(gs, s) => {
            *s = sm(*s);
            for g in gs {
                ident(sm, &mut g.name);
                if let Some(d) = &mut g.description {
                    strlit(sm, d);
                }
                if let Some((_, s)) = &mut g.priority {
                    *s = sm(*s);
                }
                g.span = sm(g.span);
            }
        }
        Member::Capability(c) => {
            decorators(sm, &mut c.decorators);
            ident(sm, &mut c.name);
            params(sm, &mut c.params);
            if let Some(t) = &mut c.ret {
                ty(sm, t);
            }
            c.span = sm(c.span);
        }
        Member::Flow(f) => {
            decorators(sm, &mut f.decorators);
            ident(sm, &mut f.name);
            params(sm, &mut f.params);
            if let Some(t) = &mut f.ret {
                ty(sm, t);
            }
            block(sm, &mut f.body);
            f.span = sm(f.span);
        }
        Member::Handler(h) => {
            h.event.iter_mut().for_each(|i| ident(sm, i));
            params(sm, &mut h.fields);
            if let Some(g) = &mut h.guard {
                expr(sm, g);
            }
            block(sm, &mut h.body);
            h.span = sm(h.span);
        }
        Member::Tools(names, s) | Member::Discoverable(names, s) => {
            names.iter_mut().for_each(|i| ident(sm, i));
            *s = sm(*s);
        }
        Member::Context(lit, s) => {
            strlit(sm, lit);
            *s = sm(*s);
        }
        Member::Error(s) => *s = sm(*s),
    }
}

fn decorators(sm: Map<'_>, ds: &mut [Decorator]) {
    for d in ds {
        ident(sm, &mut d.name);
        d.span = sm(d.span);
    }
}

fn params(sm: Map<'_>, ps: &mut [Param]) {
    for p in ps {
        ident(sm, &mut p.name);
        if let Some(t) = &mut p.ty {
            ty(sm, t);
        }
        p.span = sm(p.span);
    }
}

fn ty(sm: Map<'_>, t: &mut TypeExpr) {
    match t {
        TypeExpr::Named(i) => ident(sm, i),
        TypeExpr::List(inner, s) => {
            ty(sm, inner);
            *s = sm(*s);
        }
    }
}

fn block(sm: Map<'_>, b: &mut Block) {
    b.span = sm(b.span);
    for s in &mut b.stmts {
        stmt(sm, s);
    }
}

fn stmt(sm: Map<'_>, s: &mut Stmt) {
    s.span = sm(s.span);
    match &mut s.kind {
        StmtKind::Let { name, ty: t, value } => {
            ident(sm, name);
            if let Some(t) = t {
                ty(sm, t);
            }
            expr(sm, value);
        }
        StmtKind::Bind { value, name } => {
            expr(sm, value);
            ident(sm, name);
        }
        StmtKind::Return(e) => {
            if let Some(e) = e {
                expr(sm, e);
            }
        }
        StmtKind::If {
            cond,
            then,
            otherwise,
        } => {
            expr(sm, cond);
            block(sm, then);
            if let Some(o) = otherwise {
                block(sm, o);
            }
        }
        StmtKind::Parallel(b) => block(sm, b),
        StmtKind::Loop { var, iter, body } => {
            ident(sm, var);
            expr(sm, iter);
            block(sm, body);
        }
        StmtKind::Try { body, err, handler } => {
            block(sm, body);
            if let Some(e) = err {
                ident(sm, e);
            }
            block(sm, handler);
        }
        StmtKind::Expr(e) => expr(sm, e),
        StmtKind::Error(Broken::Binds(i)) => ident(sm, i),
        StmtKind::Error(_) => {}
    }
}

fn strlit(sm: Map<'_>, s: &mut StrLit) {
    s.span = sm(s.span);
    for p in &mut s.parts {
        if let StrPart::Interp(_, span) = p {
            *span = sm(*span);
        }
    }
}

fn expr(sm: Map<'_>, e: &mut Expr) {
    e.span = sm(e.span);
    match &mut e.kind {
        ExprKind::Str(s) => strlit(sm, s),
        ExprKind::Number(_) | ExprKind::Bool(_) | ExprKind::Null | ExprKind::Error => {}
        ExprKind::List(items) => items.iter_mut().for_each(|e| expr(sm, e)),
        ExprKind::Var(i) => ident(sm, i),
        ExprKind::Index(a, b) => {
            expr(sm, a);
            expr(sm, b);
        }
        ExprKind::Member(a, i) => {
            expr(sm, a);
            ident(sm, i);
        }
        ExprKind::Call { callee, args } => {
            expr(sm, callee);
            args.iter_mut().for_each(|e| expr(sm, e));
        }
        ExprKind::Named(i, v) => {
            ident(sm, i);
            expr(sm, v);
        }
        ExprKind::Unary(_, a) => expr(sm, a),
        // Along a binary chain, not down it (see `Expr::binary_chain`).
        ExprKind::Binary(_, a, b) => {
            expr(sm, b);
            let mut cur: &mut Expr = a;
            loop {
                if !matches!(cur.kind, ExprKind::Binary(..)) {
                    expr(sm, cur);
                    break;
                }
                cur.span = sm(cur.span);
                let ExprKind::Binary(_, a, b) = &mut cur.kind else {
                    break;
                };
                expr(sm, b);
                cur = a;
            }
        }
        ExprKind::Assign(a, b) => {
            expr(sm, a);
            expr(sm, b);
        }
        ExprKind::Switch(sw) => {
            sw.span = sm(sw.span);
            expr(sm, &mut sw.scrutinee);
            for c in &mut sw.cases {
                c.span = sm(c.span);
                if let Some(p) = &mut c.pattern {
                    expr(sm, p);
                }
                match &mut c.body {
                    CaseBody::Expr(e) => expr(sm, e),
                    CaseBody::Block(b) => block(sm, b),
                }
            }
        }
    }
}
