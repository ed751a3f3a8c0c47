//! Where a program written for the reference would change meaning here,
//! made explicit (issue 37):
//!
//! - `E0128`: a `communicate` whose value is used, to an agent of the
//!   program that has no reply flow. Here the message is delivered and the
//!   value is `null`; the reference fails (a local agent) or waits for a
//!   reply over HTTP. Either way the value the program reads is not an
//!   answer, so it is an error naming the agent. Fire-and-forget is written
//!   as a statement (the value unused), which stays a message.
//! - `W0011`: a used `communicate(..., protocol: "broadcast")`: one
//!   message to its recipient here; the reference's value is the list of
//!   every agent's reply.
//! - `W0010`: a `merge(...)` result used as a list (iterated by `loop`, or
//!   indexed). `merge` joins texts here; the reference's `MERGE` is a list
//!   of its inputs. The list is written `[a, b]` (or `wait_all(a, b)`).
//!
//! Both read the syntax tree after the reference's named arguments were
//! rewritten into ours (`syntax::refargs`), so `target_agent:` is
//! `recipient:` here.

use super::builtins::{self, BuiltinKind};
use super::errors::SemaError;
use super::index::ProgramIndex;
use crate::syntax::ast::*;
use ais_ir::Span;
use std::collections::HashMap;

pub fn check(file: &File, index: &ProgramIndex) -> Vec<SemaError> {
    let mut w = Walk {
        index,
        agent: "",
        merged: HashMap::new(),
        out: Vec::new(),
    };
    for a in &file.agents {
        w.agent = &a.name.name;
        for m in &a.members {
            match m {
                Member::Flow(f) => {
                    w.merged.clear();
                    w.block(&f.body);
                }
                Member::Handler(h) => {
                    w.merged.clear();
                    if let Some(g) = &h.guard {
                        w.expr(g, true);
                    }
                    w.block(&h.body);
                }
                _ => {}
            }
        }
    }
    w.out
}

struct Walk<'a> {
    index: &'a ProgramIndex,
    agent: &'a str,
    /// Variables bound to a `merge(...)` result, with that call's span.
    merged: HashMap<String, Span>,
    out: Vec<SemaError>,
}

impl<'a> Walk<'a> {
    fn block(&mut self, b: &Block) {
        for s in &b.stmts {
            match &s.kind {
                StmtKind::Let { name, value, .. } => {
                    self.expr(value, true);
                    self.bind(&name.name, value);
                }
                StmtKind::Bind { value, name } => {
                    self.expr(value, true);
                    self.bind(&name.name, value);
                }
                StmtKind::Return(Some(e)) => self.expr(e, true),
                // A call whose value is dropped: a message, fire-and-forget.
                StmtKind::Expr(e) => match &e.kind {
                    ExprKind::Call { callee, args } => {
                        self.expr(callee, true);
                        args.iter().for_each(|a| self.expr(a, true));
                    }
                    ExprKind::Assign(target, value) => {
                        self.expr(value, true);
                        if let ExprKind::Var(v) = &target.kind {
                            self.bind(&v.name, value);
                        }
                    }
                    _ => self.expr(e, true),
                },
                StmtKind::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    self.expr(cond, true);
                    self.block(then);
                    if let Some(o) = otherwise {
                        self.block(o);
                    }
                }
                StmtKind::Parallel(b) => self.block(b),
                StmtKind::Loop { iter, body, .. } => {
                    self.expr(iter, true);
                    self.listed(iter, "iterated by `loop`");
                    self.block(body);
                }
                StmtKind::Try { body, handler, .. } => {
                    self.block(body);
                    self.block(handler);
                }
                StmtKind::Return(None) | StmtKind::Error(_) => {}
            }
        }
    }

    /// Whether `name` called here is the built-in `kind` (not a flow of
    /// the agent by that name).
    fn builtin(&self, name: &str, kind: BuiltinKind) -> bool {
        let own_flow = self
            .index
            .agents
            .get(self.agent)
            .is_some_and(|a| a.flows.contains_key(name));
        !own_flow && builtins::lookup(name).map(|b| b.kind) == Some(kind)
    }

    /// The span of `e` if it is a call of the built-in `merge`.
    fn merge_call(&self, e: &Expr) -> Option<Span> {
        let ExprKind::Call { callee, .. } = &e.kind else {
            return None;
        };
        let ExprKind::Var(id) = &callee.kind else {
            return None;
        };
        self.builtin(&id.name, BuiltinKind::Merge).then_some(e.span)
    }

    fn bind(&mut self, name: &str, value: &Expr) {
        match self.merge_call(value) {
            Some(span) => self.merged.insert(name.to_string(), span),
            None => self.merged.remove(name),
        };
    }

    /// `e` is used as a list: warn if it is a `merge(...)` result.
    fn listed(&mut self, e: &Expr, how: &'static str) {
        let merge = match &e.kind {
            ExprKind::Var(v) => self.merged.get(&v.name).copied(),
            _ => self.merge_call(e),
        };
        if let Some(merge) = merge {
            self.out.push(SemaError::MergeUsedAsList {
                how,
                span: e.span,
                merge,
            });
        }
    }

    /// `used`: whether the expression's value is read.
    fn expr(&mut self, e: &Expr, used: bool) {
        match &e.kind {
            ExprKind::List(xs) => xs.iter().for_each(|x| self.expr(x, true)),
            // Walked along: a chain is as deep as it is long.
            ExprKind::Binary(..) => {
                let (first, steps) = e.binary_chain();
                self.expr(first, true);
                for (_, right, _) in steps {
                    self.expr(right, true);
                }
            }
            ExprKind::Index(a, b) => {
                self.expr(a, true);
                self.expr(b, true);
                self.listed(a, "indexed");
            }
            ExprKind::Assign(a, b) => {
                self.expr(a, true);
                self.expr(b, true);
            }
            ExprKind::Member(a, _) | ExprKind::Unary(_, a) | ExprKind::Named(_, a) => {
                self.expr(a, true)
            }
            ExprKind::Call { callee, args } => {
                if used {
                    self.communicate(callee, args, e.span);
                }
                self.expr(callee, true);
                args.iter().for_each(|x| self.expr(x, true));
            }
            ExprKind::Switch(s) => {
                self.expr(&s.scrutinee, true);
                for c in &s.cases {
                    if let Some(p) = &c.pattern {
                        self.expr(p, true);
                    }
                    match &c.body {
                        CaseBody::Expr(x) => self.expr(x, true),
                        CaseBody::Block(b) => self.block(b),
                    }
                }
            }
            _ => {}
        }
    }

    /// `E0128` for a used `communicate("Agent", ...)` to an agent of the
    /// program without a reply flow.
    fn communicate(&mut self, callee: &Expr, args: &[Expr], span: Span) {
        let ExprKind::Var(id) = &callee.kind else {
            return;
        };
        if !self.builtin(&id.name, BuiltinKind::Communicate) {
            return;
        }
        let protocol = args
            .iter()
            .find_map(|a| match &a.kind {
                ExprKind::Named(n, v) if n.name == "protocol" => Some(&**v),
                _ => None,
            })
            .or_else(|| {
                args.get(2)
                    .filter(|a| !matches!(a.kind, ExprKind::Named(..)))
            });
        if let Some(Expr {
            kind: ExprKind::Str(p),
            ..
        }) = protocol
        {
            if !p.has_holes() && p.text().eq_ignore_ascii_case("broadcast") {
                self.out.push(SemaError::BroadcastValueUsed { span });
                return;
            }
        }
        let recipient = args
            .iter()
            .find_map(|a| match &a.kind {
                ExprKind::Named(n, v) if n.name == "recipient" => Some(&**v),
                _ => None,
            })
            .or_else(|| {
                args.first()
                    .filter(|a| !matches!(a.kind, ExprKind::Named(..)))
            });
        let Some(Expr {
            kind: ExprKind::Str(to),
            span: to_span,
        }) = recipient
        else {
            return;
        };
        if to.has_holes() {
            return;
        }
        let name = to.text();
        // The sender itself (its own handlers), names outside the program
        // (remote agents, an inbox): messages, as documented.
        if name == self.agent || !self.index.agents.contains_key(&name) {
            return;
        }
        if super::reply::reply_flow(self.index, self.agent, &name).is_none() {
            self.out.push(SemaError::NoReplyFlow {
                agent: name,
                span,
                recipient: *to_span,
            });
        }
    }
}
