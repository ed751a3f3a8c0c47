//! Span erasure: the tree with every span set to [`Span::DUMMY`], so that two
//! parses of differently laid-out text compare equal exactly when they mean
//! the same program (the formatter's guarantee).

use super::ast::*;
use super::lexer::{StrLit, StrPart};
use ais_ir::Span;

/// The file with every span (of nodes, names, literals and template holes)
/// replaced by [`Span::DUMMY`].
pub fn erase_spans(file: &File) -> File {
    let mut f = file.clone();
    file_(&mut f);
    f
}

fn file_(f: &mut File) {
    f.span = Span::DUMMY;
    for a in &mut f.agents {
        ident(&mut a.name);
        a.span = Span::DUMMY;
        for m in &mut a.members {
            member(m);
        }
    }
}

fn ident(i: &mut Ident) {
    i.span = Span::DUMMY;
}

fn member(m: &mut Member) {
    match m {
        Member::Memory(decls, s) => {
            *s = Span::DUMMY;
            for d in decls {
                ident(&mut d.name);
                ident(&mut d.tier);
                d.span = Span::DUMMY;
            }
        }
        Member::Beliefs(bs, s) => {
            *s = Span::DUMMY;
            for b in bs {
                ident(&mut b.name);
                expr(&mut b.value);
                b.span = Span::DUMMY;
            }
        }
        Member::Goals(gs, s) => {
            *s = Span::DUMMY;
            for g in gs {
                ident(&mut g.name);
                if let Some(d) = &mut g.description {
                    strlit(d);
                }
                if let Some((_, s)) = &mut g.priority {
                    *s = Span::DUMMY;
                }
                g.span = Span::DUMMY;
            }
        }
        Member::Capability(c) => {
            decorators(&mut c.decorators);
            ident(&mut c.name);
            params(&mut c.params);
            if let Some(t) = &mut c.ret {
                ty(t);
            }
            c.span = Span::DUMMY;
        }
        Member::Flow(f) => {
            decorators(&mut f.decorators);
            ident(&mut f.name);
            params(&mut f.params);
            if let Some(t) = &mut f.ret {
                ty(t);
            }
            block(&mut f.body);
            f.span = Span::DUMMY;
        }
        Member::Handler(h) => {
            h.event.iter_mut().for_each(ident);
            params(&mut h.fields);
            if let Some(g) = &mut h.guard {
                expr(g);
            }
            block(&mut h.body);
            h.span = Span::DUMMY;
        }
        Member::Tools(names, s) | Member::Discoverable(names, s) => {
            names.iter_mut().for_each(ident);
            *s = Span::DUMMY;
        }
        Member::Context(lit, s) => {
            strlit(lit);
            *s = Span::DUMMY;
        }
        Member::Error(s) => *s = Span::DUMMY,
    }
}

fn decorators(ds: &mut [Decorator]) {
    for d in ds {
        ident(&mut d.name);
        d.span = Span::DUMMY;
    }
}

fn params(ps: &mut [Param]) {
    for p in ps {
        ident(&mut p.name);
        if let Some(t) = &mut p.ty {
            ty(t);
        }
        p.span = Span::DUMMY;
    }
}

fn ty(t: &mut TypeExpr) {
    match t {
        TypeExpr::Named(i) => ident(i),
        TypeExpr::List(inner, s) => {
            ty(inner);
            *s = Span::DUMMY;
        }
    }
}

fn block(b: &mut Block) {
    b.span = Span::DUMMY;
    for s in &mut b.stmts {
        stmt(s);
    }
}

fn stmt(s: &mut Stmt) {
    s.span = Span::DUMMY;
    match &mut s.kind {
        StmtKind::Let { name, ty: t, value } => {
            ident(name);
            if let Some(t) = t {
                ty(t);
            }
            expr(value);
        }
        StmtKind::Bind { value, name } => {
            expr(value);
            ident(name);
        }
        StmtKind::Return(e) => {
            if let Some(e) = e {
                expr(e);
            }
        }
        StmtKind::If {
            cond,
            then,
            otherwise,
        } => {
            expr(cond);
            block(then);
            if let Some(o) = otherwise {
                block(o);
            }
        }
        StmtKind::Parallel(b) => block(b),
        StmtKind::Loop { var, iter, body } => {
            ident(var);
            expr(iter);
            block(body);
        }
        StmtKind::Try { body, err, handler } => {
            block(body);
            if let Some(e) = err {
                ident(e);
            }
            block(handler);
        }
        StmtKind::Expr(e) => expr(e),
        StmtKind::Error(Broken::Binds(i)) => ident(i),
        StmtKind::Error(_) => {}
    }
}

fn strlit(s: &mut StrLit) {
    s.span = Span::DUMMY;
    for p in &mut s.parts {
        if let StrPart::Interp(_, span) = p {
            *span = Span::DUMMY;
        }
    }
}

fn expr(e: &mut Expr) {
    e.span = Span::DUMMY;
    match &mut e.kind {
        ExprKind::Str(s) => strlit(s),
        ExprKind::Number(_) | ExprKind::Bool(_) | ExprKind::Null | ExprKind::Error => {}
        ExprKind::List(items) => items.iter_mut().for_each(expr),
        ExprKind::Var(i) => ident(i),
        ExprKind::Index(a, b) => {
            expr(a);
            expr(b);
        }
        ExprKind::Member(a, i) => {
            expr(a);
            ident(i);
        }
        ExprKind::Call { callee, args } => {
            expr(callee);
            args.iter_mut().for_each(expr);
        }
        ExprKind::Named(i, v) => {
            ident(i);
            expr(v);
        }
        ExprKind::Unary(_, a) => expr(a),
        ExprKind::Binary(_, a, b) | ExprKind::Assign(a, b) => {
            expr(a);
            expr(b);
        }
        ExprKind::Switch(sw) => {
            sw.span = Span::DUMMY;
            expr(&mut sw.scrutinee);
            for c in &mut sw.cases {
                c.span = Span::DUMMY;
                if let Some(p) = &mut c.pattern {
                    expr(p);
                }
                match &mut c.body {
                    CaseBody::Expr(e) => expr(e),
                    CaseBody::Block(b) => block(b),
                }
            }
        }
    }
}
