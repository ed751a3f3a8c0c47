//! The body checker: scopes, name resolution, types, and the per-construct
//! rules. It never stops at the first problem: every error is collected and
//! an erroneous expression gets type `Unknown` so it is reported only once.

use super::arguments;
use super::builtins::{self, canonical_tier, ArgRole, Builtin, BuiltinKind};
use super::errors::SemaError;
use super::index::{AgentInfo, ParamSig, ProgramIndex};
use super::types::Ty;
use crate::syntax::ast::*;
use crate::syntax::lexer::StrPart;
use ais_ir::Span;
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;
use std::rc::Rc;

struct Var {
    /// Shared with the by-name index (one allocation per binding, not two).
    name: Rc<str>,
    ty: Ty,
    span: Span,
    used: bool,
    /// Report W0001 if never read.
    warn_unused: bool,
}

struct FlowCtx {
    name: String,
    ret: Ty,
    ret_span: Option<Span>,
}

/// What a block did: whether control can fall off its end, and its value
/// (the last expression statement), used for `case` blocks.
struct BlockInfo {
    falls_through: bool,
    value: Ty,
}

/// Where each variable is defined and used, as the checker resolved it
/// (for editor support: hover, go to definition, references).
#[derive(Clone, Debug, Default)]
pub struct Resolutions {
    /// Each definition (parameter, handler field, `let`, `-> x`, loop
    /// variable, `catch (e)`): the span of its name and its type.
    pub defs: Vec<(Span, Ty)>,
    /// Each read or assignment of a variable or belief: the span of the use
    /// and the span of the name it resolved to.
    pub uses: Vec<(Span, Span)>,
}

pub(super) struct Checker<'a> {
    index: &'a ProgramIndex,
    resolutions: Resolutions,
    agent: &'a AgentInfo,
    errors: &'a mut Vec<SemaError>,
    scopes: Vec<Vec<Var>>,
    /// Name → (scope, index) of each visible variable with that name,
    /// innermost last; kept in step with `scopes`. Fx-hashed with the
    /// stack inline: SipHash and a `Vec` per name were a growing share of
    /// a long flow's check (issue 40).
    by_name: HashMap<Rc<str>, SmallVec<[(usize, usize); 1]>>,
    flow: Option<FlowCtx>,
    /// The body being checked contains a statement that failed to parse: name
    /// errors there are likely consequences of it, so they are not reported.
    lenient: bool,
}

impl<'a> Checker<'a> {
    pub(super) fn new(
        index: &'a ProgramIndex,
        agent: &'a AgentInfo,
        errors: &'a mut Vec<SemaError>,
    ) -> Checker<'a> {
        Checker {
            index,
            agent,
            errors,
            resolutions: Resolutions::default(),
            scopes: Vec::new(),
            by_name: HashMap::default(),
            flow: None,
            lenient: false,
        }
    }

    /// The definitions and uses recorded so far.
    pub(super) fn take_resolutions(&mut self) -> Resolutions {
        std::mem::take(&mut self.resolutions)
    }

    /// Records a problem, unless it is a likely consequence of a syntax error.
    fn report(&mut self, e: SemaError) {
        let cascade = matches!(
            e,
            SemaError::UndefinedVariable { .. }
                | SemaError::TemplateHole { .. }
                | SemaError::UnusedVariable { .. }
                | SemaError::Unreachable { .. }
                | SemaError::MissingReturn { .. }
        );
        if !(self.lenient && cascade) {
            self.errors.push(e);
        }
    }

    // ------------------------------------------------------------ entry points

    /// A belief initializer: evaluated with no local variables.
    pub(super) fn check_belief(&mut self, value: &Expr) -> Ty {
        self.push_scope(Vec::new());
        let ty = self.check_value(value);
        self.pop_scope();
        ty
    }

    pub(super) fn check_flow(&mut self, flow: &Flow, params: &[ParamSig], ret: Ty) {
        self.lenient = block_has_errors(&flow.body);
        self.flow = Some(FlowCtx {
            name: flow.name.name.clone(),
            ret: ret.clone(),
            ret_span: flow.ret.as_ref().map(TypeExpr::span),
        });
        self.push_scope(
            params
                .iter()
                .map(|p| Var {
                    name: Rc::from(p.name.as_str()),
                    ty: p.ty.clone(),
                    span: p.span,
                    used: false,
                    warn_unused: false,
                })
                .collect(),
        );
        self.reserve(flow.body.stmts.len());
        let info = self.check_stmts(&flow.body.stmts);
        self.pop_scope();
        if info.falls_through && !ret.is_void() {
            let end = flow.body.span.end as usize;
            self.report(SemaError::MissingReturn {
                flow: flow.name.name.clone(),
                expected: ret,
                span: flow.ret.as_ref().map_or(flow.name.span, TypeExpr::span),
                end: Span::new(end.saturating_sub(1), end),
            });
        }
        self.flow = None;
    }

    pub(super) fn check_handler(&mut self, handler: &Handler) {
        self.lenient = block_has_errors(&handler.body);
        self.flow = Some(FlowCtx {
            name: format!("on {}", handler.event_name()),
            ret: Ty::Void,
            ret_span: None,
        });
        let mut fields: Vec<Var> = Vec::new();
        for f in &handler.fields {
            if let Some(first) = fields.iter().find(|v| *v.name == *f.name.name) {
                self.report(SemaError::Duplicate {
                    kind: "field",
                    name: f.name.name.clone(),
                    span: f.name.span,
                    first: first.span,
                });
                continue;
            }
            fields.push(Var {
                name: Rc::from(f.name.name.as_str()),
                ty: f.ty.as_ref().map_or(Ty::Str, Ty::from_ast),
                span: f.name.span,
                used: false,
                warn_unused: false,
            });
        }
        self.push_scope(fields);
        if let Some(guard) = &handler.guard {
            self.check_value(guard);
        }
        self.check_stmts(&handler.body.stmts);
        self.pop_scope();
        self.flow = None;
    }

    // ------------------------------------------------------------ scopes

    /// Sizes the name index, the innermost scope and the resolution lists
    /// for a body of `stmts` top-level statements (most bind a name or use
    /// one), so a long flow allocates them once instead of rehashing and
    /// copying them as they double (issue 40).
    fn reserve(&mut self, stmts: usize) {
        self.by_name.reserve(stmts);
        if let Some(scope) = self.scopes.last_mut() {
            scope.reserve(stmts);
        }
        self.resolutions.defs.reserve(stmts);
        self.resolutions.uses.reserve(stmts);
    }

    fn push_scope(&mut self, vars: Vec<Var>) {
        let depth = self.scopes.len();
        self.resolutions
            .defs
            .extend(vars.iter().map(|v| (v.span, v.ty.clone())));
        for (i, v) in vars.iter().enumerate() {
            self.by_name
                .entry(v.name.clone())
                .or_default()
                .push((depth, i));
        }
        self.scopes.push(vars);
    }

    fn pop_scope(&mut self) {
        if let Some(scope) = self.scopes.pop() {
            for v in &scope {
                if let Some(stack) = self.by_name.get_mut(&v.name) {
                    stack.pop();
                }
            }
            for v in scope {
                if v.warn_unused && !v.used && !v.name.starts_with('_') {
                    self.report(SemaError::UnusedVariable {
                        name: v.name.to_string(),
                        span: v.span,
                    });
                }
            }
        }
    }

    fn define(&mut self, name: &Ident, ty: Ty, warn_unused: bool) {
        let depth = self.scopes.len().saturating_sub(1);
        self.resolutions.defs.push((name.span, ty.clone()));
        if let Some(scope) = self.scopes.last_mut() {
            let shared: Rc<str> = Rc::from(name.name.as_str());
            match self.by_name.get_mut(&*shared) {
                Some(stack) => stack.push((depth, scope.len())),
                None => {
                    let mut stack = SmallVec::new();
                    stack.push((depth, scope.len()));
                    self.by_name.insert(shared.clone(), stack);
                }
            }
            scope.push(Var {
                name: shared,
                ty,
                span: name.span,
                used: false,
                warn_unused,
            });
        }
    }

    /// The innermost visible variable named `name` (through the name
    /// index: scanning the scopes made long flows quadratic).
    fn lookup(&mut self, name: &str) -> Option<&mut Var> {
        let &(s, i) = self.by_name.get(name)?.last()?;
        self.scopes.get_mut(s)?.get_mut(i)
    }

    /// Where `name` is bound in an enclosing block, when a `let` of it in
    /// this construct's block would shadow that binding.
    fn shadowed_outer(&self, name: &str) -> Option<Span> {
        let inner = self.scopes.len().checked_sub(1)?;
        let &(s, i) = self.by_name.get(name)?.last()?;
        if inner == 0 || s >= inner {
            return None;
        }
        self.scopes.get(s)?.get(i).map(|v| v.span)
    }

    /// Inside a construct's block (not the flow's own scope), the type and
    /// declaration of `name` when it is bound in an enclosing block and not
    /// in this one. The variable counts as used.
    fn outer_binding(&mut self, name: &Ident) -> Option<(Ty, Span)> {
        let inner = self.scopes.len().checked_sub(1)?;
        let &(s, _) = self.by_name.get(name.name.as_str())?.last()?;
        if inner == 0 || s >= inner {
            return None;
        }
        let v = self.lookup(&name.name)?;
        v.used = true;
        let found = (v.ty.clone(), v.span);
        self.resolutions.uses.push((name.span, found.1));
        Some(found)
    }

    /// A variable or belief read by name at `at`.
    fn read_var(&mut self, name: &str, at: Span) -> Option<Ty> {
        if let Some(v) = self.lookup(name) {
            v.used = true;
            let found = (v.ty.clone(), v.span);
            self.resolutions.uses.push((at, found.1));
            return Some(found.0);
        }
        let b = self.agent.beliefs.get(name)?;
        self.resolutions.uses.push((at, b.span));
        Some(b.ty.clone())
    }

    fn visible_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .scopes
            .iter()
            .flat_map(|s| s.iter().map(|v| v.name.to_string()))
            .collect();
        names.extend(self.agent.beliefs.keys().cloned());
        names
    }

    // ------------------------------------------------------------ statements

    fn check_block(&mut self, block: &Block) -> BlockInfo {
        self.push_scope(Vec::new());
        let info = self.check_stmts(&block.stmts);
        self.pop_scope();
        info
    }

    fn check_stmts(&mut self, stmts: &[Stmt]) -> BlockInfo {
        let mut falls_through = true;
        let mut returned_at: Option<Span> = None;
        let mut reported_unreachable = false;
        let mut value = Ty::Void;
        for stmt in stmts {
            if let (Some(after), false) = (returned_at, reported_unreachable) {
                if !matches!(stmt.kind, StmtKind::Error(_)) {
                    self.report(SemaError::Unreachable {
                        span: stmt.span,
                        after,
                    });
                    reported_unreachable = true;
                }
            }
            let (ft, v) = self.check_stmt(stmt);
            value = v;
            if !ft && falls_through {
                falls_through = false;
                returned_at = Some(stmt.span);
            }
        }
        BlockInfo {
            falls_through,
            value,
        }
    }

    /// Returns (falls through, value of the statement for block values).
    fn check_stmt(&mut self, stmt: &Stmt) -> (bool, Ty) {
        match &stmt.kind {
            StmtKind::Let { name, ty, value } => {
                let found = self.check_value(value);
                let var_ty = match ty {
                    Some(t) => {
                        let declared = Ty::from_ast(t);
                        if !declared.accepts(&found) {
                            self.report(SemaError::TypeMismatch {
                                expected: declared.clone(),
                                found,
                                span: value.span,
                                context: format!("`{}` is declared `{declared}`", name.name),
                                decl: Some(t.span()),
                            });
                        }
                        declared
                    }
                    None => found,
                };
                if let Some(outer) = self.shadowed_outer(&name.name) {
                    self.report(SemaError::ShadowsOuter {
                        name: name.name.clone(),
                        span: name.span,
                        outer,
                    });
                }
                self.define(name, var_ty, true);
                (true, Ty::Void)
            }
            StmtKind::Bind { value, name } => {
                let found = self.check_value(value);
                match self.outer_binding(name) {
                    // Inside a construct's block, `-> v` rebinds the `v`
                    // bound outside it (see `lower::flow::bind_arrow`).
                    Some((declared, decl)) => {
                        if !declared.accepts(&found) {
                            self.report(SemaError::TypeMismatch {
                                expected: declared,
                                found: found.clone(),
                                span: value.span,
                                context: format!(
                                    "`-> {}` rebinds the `{}` bound outside this block, which has this type",
                                    name.name, name.name
                                ),
                                decl: Some(decl),
                            });
                        }
                    }
                    None => self.define(name, found.clone(), true),
                }
                (true, found)
            }
            StmtKind::Return(value) => {
                self.check_return(value.as_ref(), stmt.span);
                (false, Ty::Void)
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                self.check_value(cond);
                let t = self.check_block(then);
                let e = otherwise.as_ref().map(|b| self.check_block(b));
                let ft = t.falls_through || e.as_ref().is_none_or(|e| e.falls_through);
                (ft, Ty::Void)
            }
            StmtKind::Parallel(block) => {
                // Not a scope: what the branches bind is used after the block.
                let info = self.check_stmts(&block.stmts);
                (info.falls_through, Ty::Void)
            }
            StmtKind::Loop { var, iter, body } => {
                let iter_ty = self.check_value(iter);
                let item = match iter_ty {
                    Ty::List(t) => *t,
                    // A JSON array held in the string, else its lines.
                    Ty::Str => Ty::Json,
                    t if t.is_dynamic() => Ty::Json,
                    other => {
                        self.report(SemaError::TypeMismatch {
                            expected: Ty::List(Box::new(Ty::Json)),
                            found: other,
                            span: iter.span,
                            context: "a loop iterates over a list or a string".into(),
                            decl: None,
                        });
                        Ty::Unknown
                    }
                };
                self.push_scope(Vec::new());
                self.define(var, item, false);
                self.check_stmts(&body.stmts);
                self.pop_scope();
                (true, Ty::Void)
            }
            StmtKind::Try { body, err, handler } => {
                let b = self.check_block(body);
                self.push_scope(Vec::new());
                if let Some(e) = err {
                    self.define(e, Ty::Json, false);
                }
                let h = self.check_stmts(&handler.stmts);
                self.pop_scope();
                (b.falls_through || h.falls_through, Ty::Void)
            }
            StmtKind::Expr(e) => (true, self.check_expr(e)),
            StmtKind::Error(bound) => {
                if let Broken::Binds(name) = bound {
                    self.define(name, Ty::Unknown, false);
                }
                (true, Ty::Unknown)
            }
        }
    }

    fn check_return(&mut self, value: Option<&Expr>, span: Span) {
        let Some(ctx) = self.flow.as_ref() else {
            return;
        };
        let (flow, expected, decl) = (ctx.name.clone(), ctx.ret.clone(), ctx.ret_span);
        match value {
            Some(v) => {
                let found = self.check_expr(v);
                if found.is_void() && !expected.is_void() {
                    self.report(SemaError::VoidUse {
                        what: call_name(v),
                        span: v.span,
                    });
                } else if !expected.accepts(&found) || (expected.is_void() && !found.is_void()) {
                    self.report(SemaError::ReturnMismatch {
                        flow,
                        expected,
                        found,
                        span: v.span,
                        decl,
                    });
                }
            }
            None if !expected.is_void() => self.report(SemaError::ReturnMismatch {
                flow,
                expected,
                found: Ty::Void,
                span,
                decl,
            }),
            None => {}
        }
    }

    // ------------------------------------------------------------ expressions

    /// An expression whose value is used: `void` is an error here.
    fn check_value(&mut self, e: &Expr) -> Ty {
        let ty = self.check_expr(e);
        if ty.is_void() {
            self.report(SemaError::VoidUse {
                what: call_name(e),
                span: e.span,
            });
            return Ty::Unknown;
        }
        ty
    }

    fn check_expr(&mut self, e: &Expr) -> Ty {
        match &e.kind {
            ExprKind::Str(lit) => {
                for part in &lit.parts {
                    if let StrPart::Interp(hole, span) = part {
                        let (name, _) = crate::syntax::lexer::hole_path(hole);
                        let at = Span::new(span.start as usize, span.start as usize + name.len());
                        if self.read_var(name, at).is_none() {
                            self.report(SemaError::TemplateHole {
                                name: hole.clone(),
                                span: *span,
                            });
                        }
                    }
                }
                Ty::Str
            }
            ExprKind::Number(_) => Ty::Number,
            ExprKind::Bool(_) => Ty::Bool,
            ExprKind::Null => Ty::Null,
            ExprKind::List(items) => {
                let tys: Vec<Ty> = items.iter().map(|i| self.check_value(i)).collect();
                let elem = match tys.split_first() {
                    None => Ty::Json,
                    Some((first, rest)) if rest.iter().all(|t| t == first) => first.clone(),
                    Some(_) => Ty::Json,
                };
                Ty::List(Box::new(elem))
            }
            ExprKind::Var(id) => match self.read_var(&id.name, id.span) {
                Some(ty) => ty,
                None => {
                    let suggestion = closest(&id.name, self.visible_names().iter());
                    self.report(SemaError::UndefinedVariable {
                        name: id.name.clone(),
                        span: id.span,
                        suggestion,
                    });
                    Ty::Unknown
                }
            },
            ExprKind::Index(x, i) => {
                let tx = self.check_value(x);
                let ti = self.check_value(i);
                if !(ti == Ty::Number || ti == Ty::Str || ti.is_dynamic()) {
                    self.report(SemaError::TypeMismatch {
                        expected: Ty::Number,
                        found: ti,
                        span: i.span,
                        context: "an index is a number (or a key for JSON)".into(),
                        decl: None,
                    });
                }
                match tx {
                    Ty::List(t) => *t,
                    Ty::Str => Ty::Str,
                    t if t.is_dynamic() => Ty::Json,
                    other => {
                        self.report(SemaError::TypeMismatch {
                            expected: Ty::List(Box::new(Ty::Json)),
                            found: other,
                            span: x.span,
                            context: "only lists, text and JSON can be indexed".into(),
                            decl: None,
                        });
                        Ty::Unknown
                    }
                }
            }
            ExprKind::Member(x, _field) => {
                let tx = self.check_value(x);
                if !(tx.is_dynamic() || matches!(tx, Ty::List(_))) {
                    self.report(SemaError::TypeMismatch {
                        expected: Ty::Json,
                        found: tx,
                        span: x.span,
                        context: "fields are read from JSON values".into(),
                        decl: None,
                    });
                }
                Ty::Json
            }
            ExprKind::Call { callee, args } => self.check_call(callee, args, e.span),
            ExprKind::Unary(op, x) => {
                let t = self.check_value(x);
                match op {
                    UnaryOp::Neg => {
                        if !(t == Ty::Number || t.is_dynamic()) {
                            self.report(SemaError::TypeMismatch {
                                expected: Ty::Number,
                                found: t,
                                span: x.span,
                                context: "`-` negates a number".into(),
                                decl: None,
                            });
                        }
                        Ty::Number
                    }
                    UnaryOp::Not => Ty::Bool,
                }
            }
            // Along the chain, not down it (see `Expr::binary_chain`).
            ExprKind::Binary(..) => {
                let (first, steps) = e.binary_chain();
                let mut ta = self.check_value(first);
                for (op, b, node) in steps {
                    let tb = self.check_value(b);
                    ta = self.binary(op, ta, tb, node.span);
                }
                ta
            }
            ExprKind::Assign(target, value) => {
                let found = self.check_value(value);
                match &target.kind {
                    ExprKind::Var(id) => {
                        if let Some(var) = self.lookup(&id.name) {
                            let declared = var.ty.clone();
                            let decl = var.span;
                            self.resolutions.uses.push((id.span, decl));
                            if !declared.accepts(&found) {
                                self.report(SemaError::TypeMismatch {
                                    expected: declared,
                                    found,
                                    span: value.span,
                                    context: format!("`{}` has this type", id.name),
                                    decl: Some(decl),
                                });
                            }
                        } else if !self.agent.beliefs.contains_key(&id.name) {
                            let suggestion = closest(&id.name, self.visible_names().iter());
                            self.report(SemaError::UndefinedVariable {
                                name: id.name.clone(),
                                span: id.span,
                                suggestion,
                            });
                        }
                    }
                    _ => self.report(SemaError::InvalidAssignTarget { span: target.span }),
                }
                Ty::Void
            }
            ExprKind::Switch(s) => self.check_switch(s),
            ExprKind::Error => Ty::Unknown,
            // Only LLM operations take named arguments (`check_call`).
            ExprKind::Named(name, v) => {
                self.report(SemaError::UnknownNamedArgument {
                    callee: "this".into(),
                    name: name.name.clone(),
                    accepted: Vec::new(),
                    suggestion: None,
                    span: name.span,
                });
                self.check_expr(v)
            }
        }
    }

    fn binary(&mut self, op: BinaryOp, ta: Ty, tb: Ty, span: Span) -> Ty {
        let numeric = |t: &Ty| *t == Ty::Number || t.is_dynamic();
        let bad = |this: &mut Self| {
            this.report(SemaError::BadOperands {
                op: op.symbol(),
                lhs: ta.clone(),
                rhs: tb.clone(),
                span,
            });
            Ty::Unknown
        };
        match op {
            BinaryOp::Add => {
                if ta.is_text() || tb.is_text() {
                    Ty::Str
                } else if ta == Ty::Number && tb == Ty::Number {
                    Ty::Number
                } else if (ta.is_dynamic() || ta == Ty::Number)
                    && (tb.is_dynamic() || tb == Ty::Number)
                {
                    Ty::Json
                } else if let (Ty::List(x), Ty::List(y)) = (&ta, &tb) {
                    Ty::List(Box::new(if x == y { (**x).clone() } else { Ty::Json }))
                } else {
                    bad(self)
                }
            }
            BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => {
                if numeric(&ta) && numeric(&tb) {
                    Ty::Number
                } else {
                    bad(self)
                }
            }
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => {
                let text = |t: &Ty| t.is_text() || t.is_dynamic();
                if (numeric(&ta) && numeric(&tb)) || (text(&ta) && text(&tb)) {
                    Ty::Bool
                } else {
                    bad(self)
                }
            }
            BinaryOp::Eq | BinaryOp::Ne | BinaryOp::And | BinaryOp::Or => Ty::Bool,
        }
    }

    fn check_switch(&mut self, s: &Switch) -> Ty {
        self.check_value(&s.scrutinee);
        if !s.cases.iter().any(|c| c.pattern.is_some()) {
            self.report(SemaError::SwitchWithoutCases { span: s.span });
        }
        let mut seen: Vec<(String, Span)> = Vec::new();
        let mut result: Option<Ty> = None;
        for case in &s.cases {
            if let Some(p) = &case.pattern {
                match literal_key(p) {
                    Some(key) => {
                        if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
                            self.report(SemaError::DuplicateCase {
                                pattern: key.clone(),
                                span: p.span,
                                first: *first,
                            });
                        } else {
                            seen.push((key, p.span));
                        }
                    }
                    None => {
                        self.check_expr(p);
                        self.report(SemaError::NonLiteralPattern { span: p.span });
                    }
                }
            }
            let ty = match &case.body {
                CaseBody::Expr(e) => self.check_expr(e),
                CaseBody::Block(b) => self.check_block(b).value,
            };
            result = Some(match result {
                None => ty,
                Some(prev) if prev == ty || ty == Ty::Unknown => prev,
                Some(Ty::Unknown) => ty,
                Some(_) => Ty::Json,
            });
        }
        // With no arms at all (already reported) the type is unknown, not void.
        result.unwrap_or(Ty::Unknown)
    }

    // ------------------------------------------------------------ calls

    fn check_call(&mut self, callee: &Expr, all_args: &[Expr], span: Span) -> Ty {
        // Reports duplicate names and positional arguments after named ones.
        let _ = self.split_named(all_args);
        let (positional, named) = arguments::split(all_args);
        // Issue 32, defect 7: in an agent with a reply flow named
        // `communicate`, `communicate(...)` called that flow (a reply flow
        // forwarding a message called itself until the call depth ran out).
        // Both readings are plausible, so neither is chosen silently; the
        // arguments are checked as values only (no follow-on errors).
        if let ExprKind::Var(id) = &callee.kind {
            if let Some(flow) = self
                .agent
                .flows
                .get(&id.name)
                .filter(|_| id.name == "communicate")
            {
                self.report(SemaError::CommunicateShadowed {
                    agent: self.agent.name.clone(),
                    span: id.span,
                    flow: flow.span,
                });
                for v in positional
                    .iter()
                    .copied()
                    .chain(named.iter().map(|(_, v)| *v))
                {
                    self.check_value(v);
                }
                return Ty::Json;
            }
        }
        // `Remote.flow(...)` on a configured remote agent: its signature is
        // the remote card's, so arguments go by name (or one message).
        if let ExprKind::Member(target, flow) = &callee.kind {
            if let ExprKind::Var(a) = &target.kind {
                if self.lookup(&a.name).is_none()
                    && !self.index.agents.contains_key(&a.name)
                    && self.index.remote_agents.contains(&a.name)
                {
                    for v in positional
                        .iter()
                        .copied()
                        .chain(named.iter().map(|(_, v)| *v))
                    {
                        self.check_value(v);
                    }
                    if positional.len() > 1 || (!positional.is_empty() && !named.is_empty()) {
                        self.report(SemaError::ArgumentCount {
                            callee: format!("{}.{}", a.name, flow.name),
                            expected: "arguments by name, or one message".into(),
                            found: positional.len(),
                            span,
                            decl: None,
                        });
                    }
                    return Ty::Json;
                }
            }
        }
        // Arguments in the order the callee takes them, named ones placed
        // by name (`sema::arguments`); what does not fit is reported.
        let params_of =
            |sig: &[ParamSig]| -> Vec<String> { sig.iter().map(|p| p.name.clone()).collect() };
        let arranged: Option<(String, Vec<String>)> = match &callee.kind {
            ExprKind::Var(id) => {
                if let Some(sig) = self.agent.flows.get(&id.name) {
                    Some((id.name.clone(), params_of(&sig.params)))
                } else if let Some(c) = self.agent.capabilities.get(&id.name) {
                    Some((id.name.clone(), params_of(&c.params)))
                } else if let Some(b) = builtins::lookup(&id.name) {
                    builtins::param_names(b.kind)
                        .map(|ps| (id.name.clone(), ps.iter().map(|p| p.to_string()).collect()))
                } else {
                    // A tool called by name (the reference's style).
                    self.index
                        .tool_params(&id.name)
                        .map(|ps| (id.name.clone(), ps))
                }
            }
            ExprKind::Member(target, flow) => match &target.kind {
                ExprKind::Var(a) if self.lookup(&a.name).is_none() => self
                    .index
                    .agents
                    .get(&a.name)
                    .and_then(|ag| ag.flows.get(&flow.name))
                    .map(|sig| (format!("{}.{}", a.name, flow.name), params_of(&sig.params))),
                _ => None,
            },
            _ => None,
        };
        let llm_builtin = match &callee.kind {
            ExprKind::Var(id) => builtins::lookup(&id.name)
                .filter(|b| named_arguments(b.name).is_some())
                .filter(|_| arranged.is_none()),
            _ => None,
        };
        // After a misfit the count is off; it is not reported again.
        let mut misfit = false;
        // An LLM op given `schema:` has the reply's JSON as its value.
        let mut replies_json = false;
        let args: Vec<Expr> = if let Some((name, params)) = &arranged {
            let ps: Vec<&str> = params.iter().map(String::as_str).collect();
            let (ordered, mut misfits) = arguments::by_parameter(&ps, &positional, &named);
            // A built-in tool with an open schema takes other names too.
            if let ExprKind::Var(id) = &callee.kind {
                let open = builtins::lookup(&id.name).is_none()
                    && !self.agent.flows.contains_key(&id.name)
                    && !self.agent.capabilities.contains_key(&id.name)
                    && builtins::builtin_tool_schema(&id.name).is_some_and(|(_, open)| open);
                if open {
                    misfits.retain(|m| !matches!(m, arguments::Misfit::Unknown(_)));
                }
            }
            misfit = !misfits.is_empty();
            self.report_misfits(name, params, misfits);
            ordered.into_iter().cloned().collect()
        } else if let (Some(b), ExprKind::Var(id)) = (llm_builtin, &callee.kind) {
            let (operands, options, misfits) = arguments::llm_operands(&positional, &named);
            replies_json = options.iter().any(|(n, _)| n.name == "schema");
            self.report_misfits(&id.name, &[], misfits);
            self.check_named(b.name, &id.name, &options);
            operands.into_iter().cloned().collect()
        } else {
            for (n, v) in &named {
                let callee_name = match &callee.kind {
                    ExprKind::Var(id) => id.name.clone(),
                    _ => "this".into(),
                };
                self.report(SemaError::UnknownNamedArgument {
                    callee: callee_name,
                    name: n.name.clone(),
                    accepted: Vec::new(),
                    suggestion: None,
                    span: n.span,
                });
                self.check_expr(v);
            }
            positional.into_iter().cloned().collect()
        };
        let args = &args[..];
        match &callee.kind {
            ExprKind::Var(id) => {
                let agent = self.agent;
                if let Some(sig) = agent.flows.get(&id.name) {
                    let sig = sig.clone();
                    self.check_args(&id.name, &sig.params, args, span, Some(sig.span), misfit);
                    return sig.ret;
                }
                if let Some(cap) = agent.capabilities.get(&id.name) {
                    let cap = cap.clone();
                    self.check_args(&id.name, &cap.params, args, span, Some(cap.span), misfit);
                    return cap.ret;
                }
                if let Some(b) = builtins::lookup(&id.name) {
                    let ty = self.check_builtin(b, &id.name, args, span);
                    if b.kind == builtins::BuiltinKind::Communicate {
                        // Request and reply: the recipient's reply flow's
                        // answer (a remote agent's is dynamic).
                        let replied = match args.first().map(|a| &a.kind) {
                            Some(ExprKind::Str(s)) if !s.has_holes() => {
                                super::reply::reply_flow(self.index, &self.agent.name, &s.text())
                                    .map(|(sig, _)| sig.ret.clone())
                                    .filter(|t| !t.is_void())
                            }
                            _ => None,
                        };
                        return replied.unwrap_or(ty);
                    }
                    return if replies_json { Ty::Json } else { ty };
                }
                if let Some((_, params)) = &arranged {
                    // A built-in tool: its arguments by its schema's
                    // parameters; at most one per parameter.
                    if args.len() > params.len() && !misfit {
                        self.report(SemaError::ArgumentCount {
                            callee: id.name.clone(),
                            expected: format!("at most {}", params.len()),
                            found: args.len(),
                            span,
                            decl: None,
                        });
                    }
                    for a in args {
                        self.check_value(a);
                    }
                    // Names an open schema takes beyond its parameters.
                    for (n, v) in &named {
                        if !params.contains(&n.name) {
                            self.check_value(v);
                        }
                    }
                    return Ty::Json;
                }
                for a in args {
                    self.check_expr(a);
                }
                let mut candidates: Vec<String> = builtins::BUILTINS
                    .iter()
                    .map(|b| b.name.to_string())
                    .collect();
                candidates.extend(agent.flows.keys().cloned());
                candidates.extend(agent.capabilities.keys().cloned());
                candidates.extend(ais_stdlib::builtins().iter().map(|b| b.name.to_string()));
                candidates.extend(ais_stdlib::HOST_TOOLS.iter().map(|h| h.name.to_string()));
                candidates.extend(self.index.configured_tools.keys().cloned());
                self.report(SemaError::UnknownOperation {
                    name: id.name.clone(),
                    span: id.span,
                    suggestion: closest(&id.name, candidates.iter()),
                });
                Ty::Unknown
            }
            ExprKind::Member(target, flow_name) => {
                let ExprKind::Var(agent_name) = &target.kind else {
                    return self.unknown_callee(callee, args);
                };
                if self.lookup(&agent_name.name).is_some() {
                    return self.unknown_callee(callee, args);
                }
                let index = self.index;
                let Some(agent) = index.agents.get(&agent_name.name) else {
                    for a in args {
                        self.check_expr(a);
                    }
                    self.report(SemaError::UnknownAgent {
                        name: agent_name.name.clone(),
                        span: agent_name.span,
                        suggestion: closest(&agent_name.name, index.agents.keys()),
                    });
                    return Ty::Unknown;
                };
                let Some(sig) = agent.flows.get(&flow_name.name) else {
                    for a in args {
                        self.check_expr(a);
                    }
                    self.report(SemaError::UnknownFlow {
                        agent: agent.name.clone(),
                        flow: flow_name.name.clone(),
                        span: flow_name.span,
                        suggestion: closest(&flow_name.name, agent.flows.keys()),
                    });
                    return Ty::Unknown;
                };
                // Another agent's flow: only what it makes discoverable.
                if let Some(listed) = &agent.discoverable {
                    if agent.name != self.agent.name && !listed.contains(&sig.name) {
                        self.report(SemaError::NotDiscoverable {
                            agent: agent.name.clone(),
                            flow: sig.name.clone(),
                            listed: listed.clone(),
                            span: flow_name.span,
                        });
                    }
                }
                let name = format!("{}.{}", agent.name, sig.name);
                self.check_args(&name, &sig.params, args, span, Some(sig.span), misfit);
                sig.ret.clone()
            }
            _ => self.unknown_callee(callee, args),
        }
    }

    fn unknown_callee(&mut self, callee: &Expr, args: &[Expr]) -> Ty {
        for a in args {
            self.check_expr(a);
        }
        let name = match &callee.kind {
            ExprKind::Member(t, f) => match &t.kind {
                ExprKind::Var(v) => format!("{}.{}", v.name, f.name),
                _ => format!("….{}", f.name),
            },
            _ => "(expression)".to_string(),
        };
        self.report(SemaError::UnknownOperation {
            name,
            span: callee.span,
            suggestion: None,
        });
        Ty::Unknown
    }

    fn check_args(
        &mut self,
        callee: &str,
        params: &[ParamSig],
        args: &[Expr],
        span: Span,
        decl: Option<Span>,
        misfit: bool,
    ) {
        let count_ok = args.len() == params.len();
        if !count_ok && !misfit {
            self.report(SemaError::ArgumentCount {
                callee: callee.to_string(),
                expected: params.len().to_string(),
                found: args.len(),
                span,
                decl,
            });
        }
        for (i, arg) in args.iter().enumerate() {
            let found = self.check_value(arg);
            // With the wrong count, positions do not line up: report the count only.
            if let (true, Some(p)) = (count_ok, params.get(i)) {
                if !p.ty.accepts(&found) {
                    self.report(SemaError::TypeMismatch {
                        expected: p.ty.clone(),
                        found,
                        span: arg.span,
                        context: format!("argument `{}` of `{callee}`", p.name),
                        decl: Some(p.span),
                    });
                }
            }
        }
    }

    /// Named arguments that do not fit the callee's parameters.
    fn report_misfits(
        &mut self,
        callee: &str,
        params: &[String],
        misfits: Vec<arguments::Misfit<'_>>,
    ) {
        for m in misfits {
            match m {
                arguments::Misfit::Unknown(n) => self.report(SemaError::UnknownNamedArgument {
                    callee: callee.to_string(),
                    name: n.name.clone(),
                    accepted: params.to_vec(),
                    suggestion: closest(&n.name, params.iter()),
                    span: n.span,
                }),
                arguments::Misfit::Twice { name, first } => {
                    self.report(SemaError::DuplicateNamedArgument {
                        name: name.name.clone(),
                        span: name.span,
                        first,
                    })
                }
            }
        }
    }

    /// The positional arguments, and the named ones (reporting a
    /// positional one after a named one, and duplicates).
    fn split_named<'e>(&mut self, args: &'e [Expr]) -> (Vec<Expr>, Vec<(&'e Ident, &'e Expr)>) {
        let mut positional = Vec::new();
        let mut named: Vec<(&Ident, &Expr)> = Vec::new();
        for a in args {
            match &a.kind {
                ExprKind::Named(n, v) => {
                    if let Some((first, _)) = named.iter().find(|(f, _)| f.name == n.name) {
                        self.report(SemaError::DuplicateNamedArgument {
                            name: n.name.clone(),
                            span: n.span,
                            first: first.span,
                        });
                    }
                    named.push((n, v));
                }
                _ => {
                    if let Some((n, _)) = named.first() {
                        self.report(SemaError::PositionalAfterNamed {
                            span: a.span,
                            named: n.span,
                        });
                    }
                    positional.push(a.clone());
                }
            }
        }
        (positional, named)
    }

    /// The named arguments of an LLM operation.
    fn check_named(&mut self, op: &str, written: &str, named: &[(&Ident, &Expr)]) {
        let Some(accepted) = named_arguments(op) else {
            return;
        };
        for (n, v) in named {
            let bad = |expected: &str, suggestion: Option<String>| SemaError::BadNamedArgument {
                name: n.name.clone(),
                expected: expected.into(),
                suggestion,
                span: v.span,
            };
            let name = if accepted.contains(&n.name.as_str()) {
                n.name.as_str()
            } else {
                // Reported below as unknown to this op.
                ""
            };
            match name {
                "model" | "system" | "backend" => {
                    if !matches!(&v.kind, ExprKind::Str(s) if !s.has_holes() && !s.text().trim().is_empty())
                    {
                        self.report(bad("takes a non-empty string literal", None));
                    }
                }
                "schema" => {
                    let parsed = match &v.kind {
                        ExprKind::Str(s) if !s.has_holes() => {
                            serde_json::from_str::<serde_json::Value>(&s.text()).ok()
                        }
                        _ => None,
                    };
                    if !parsed.as_ref().is_some_and(serde_json::Value::is_object) {
                        self.report(bad(
                            "takes a JSON Schema object written as a string literal, e.g. `schema: '{\"type\": \"object\", \"required\": [\"city\"]}'`",
                            None,
                        ));
                    }
                }
                "temperature" => {
                    if !matches!(v.kind, ExprKind::Number(x) if (0.0..=2.0).contains(&x)) {
                        self.report(bad("takes a number literal from 0 to 2", None));
                    }
                }
                "max_tokens" | "max_steps" | "budget" | "budget_tokens" => {
                    if !matches!(v.kind, ExprKind::Number(x) if x >= 1.0 && x.fract() == 0.0) {
                        self.report(bad("takes a whole number literal, at least 1", None));
                    }
                }
                "repairs" => {
                    if !matches!(v.kind, ExprKind::Number(x) if (0.0..=16.0).contains(&x) && x.fract() == 0.0)
                    {
                        self.report(bad("takes a whole number literal from 0 to 16", None));
                    }
                }
                "tools" => match &v.kind {
                    ExprKind::List(items) => {
                        for item in items {
                            match &item.kind {
                                ExprKind::Var(t)
                                    if self.agent.capabilities.contains_key(&t.name)
                                        || builtins::is_builtin_tool(&t.name) => {}
                                ExprKind::Var(t) => {
                                    let names: Vec<String> =
                                        self.agent.capabilities.keys().cloned().collect();
                                    self.report(SemaError::BadNamedArgument {
                                        name: "tools".into(),
                                        expected: format!(
                                            "lists capabilities of the agent or built-in tools, and `{}` is neither",
                                            t.name
                                        ),
                                        suggestion: closest(&t.name, names.iter()),
                                        span: t.span,
                                    });
                                }
                                _ => self.report(bad(
                                    "takes a list of capability names, e.g. `tools: [search, calculator]`",
                                    None,
                                )),
                            }
                        }
                    }
                    _ => self.report(bad(
                        "takes a list of capability names, e.g. `tools: [search, calculator]`",
                        None,
                    )),
                },
                _ => {
                    let other = n.name.as_str();
                    let names: Vec<String> = accepted.iter().map(|s| s.to_string()).collect();
                    self.report(SemaError::UnknownNamedArgument {
                        callee: written.to_string(),
                        name: other.to_string(),
                        suggestion: closest(other, names.iter()),
                        accepted: names,
                        span: n.span,
                    });
                }
            }
        }
    }

    fn check_builtin(&mut self, b: &Builtin, written: &str, args: &[Expr], span: Span) -> Ty {
        let n = args.len();
        if n < b.min_args || b.max_args.is_some_and(|m| n > m) {
            self.report(SemaError::ArgumentCount {
                callee: written.to_string(),
                expected: b.arity_text(),
                found: n,
                span,
                decl: None,
            });
        }
        let mut result = (b.result)();
        if let (BuiltinKind::Guard, Some(ExprKind::Str(s))) = (b.kind, args.get(1).map(|a| &a.kind))
        {
            if !s.has_holes() && crate::guard_cond::looks_like_condition(&s.text()) {
                self.report(SemaError::GuardTextCondition {
                    text: s.text(),
                    span: args[1].span,
                });
            }
        }
        for (i, arg) in args.iter().enumerate() {
            match b.role(i) {
                ArgRole::Prompt => {
                    if let ExprKind::Str(s) = &arg.kind {
                        if s.is_blank() {
                            self.report(SemaError::EmptyPrompt {
                                op: written.to_string(),
                                span: arg.span,
                            });
                        }
                    }
                    self.check_value(arg);
                }
                ArgRole::ToolName => match &arg.kind {
                    ExprKind::Str(s) if !s.has_holes() => {
                        let name = s.text();
                        if name.trim().is_empty() {
                            self.report(SemaError::EmptyToolName {
                                op: written.to_string(),
                                span: arg.span,
                            });
                        } else if let Some(cap) = self.agent.capabilities.get(&name) {
                            result = cap.ret.clone();
                        } else if b.kind == BuiltinKind::Inv && !builtins::is_builtin_tool(&name) {
                            self.report(SemaError::UndeclaredTool {
                                tool: name,
                                agent: self.agent.name.clone(),
                                span: arg.span,
                            });
                        }
                    }
                    _ => {
                        self.check_expr(arg);
                        self.report(SemaError::ToolNameNotLiteral { span: arg.span });
                    }
                },
                ArgRole::Tier => self.check_tier(arg),
                ArgRole::Limit => {
                    if !matches!(arg.kind, ExprKind::Number(n) if n >= 1.0 && n.fract() == 0.0) {
                        self.check_expr(arg);
                        self.report(SemaError::InvalidLimit { span: arg.span });
                    }
                }
                ArgRole::Value => {
                    self.check_value(arg);
                }
            }
        }
        result
    }

    fn check_tier(&mut self, arg: &Expr) {
        match &arg.kind {
            ExprKind::Str(s) if !s.has_holes() => {
                let text = s.text();
                if canonical_tier(&text).is_none() && !self.agent.memories.contains_key(&text) {
                    self.report(SemaError::InvalidTier {
                        found: format!("\"{text}\""),
                        span: arg.span,
                    });
                }
            }
            ExprKind::Var(id) if self.agent.memories.contains_key(&id.name) => {}
            _ => {
                self.check_expr(arg);
                self.report(SemaError::InvalidTier {
                    found: "a run-time value".into(),
                    span: arg.span,
                });
            }
        }
    }
}

fn block_has_errors(b: &Block) -> bool {
    b.stmts.iter().any(stmt_has_errors)
}

fn stmt_has_errors(s: &Stmt) -> bool {
    match &s.kind {
        // A broken statement whose binding was recovered does not hide names.
        StmtKind::Error(bound) => *bound == Broken::Unknown,
        StmtKind::Let { value, .. } | StmtKind::Bind { value, .. } | StmtKind::Expr(value) => {
            expr_has_errors(value)
        }
        StmtKind::Return(v) => v.as_ref().is_some_and(expr_has_errors),
        StmtKind::If {
            cond,
            then,
            otherwise,
        } => {
            expr_has_errors(cond)
                || block_has_errors(then)
                || otherwise.as_ref().is_some_and(block_has_errors)
        }
        StmtKind::Parallel(b) => block_has_errors(b),
        StmtKind::Loop { iter, body, .. } => expr_has_errors(iter) || block_has_errors(body),
        StmtKind::Try { body, handler, .. } => block_has_errors(body) || block_has_errors(handler),
    }
}

fn expr_has_errors(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Error => true,
        ExprKind::Str(_)
        | ExprKind::Number(_)
        | ExprKind::Bool(_)
        | ExprKind::Null
        | ExprKind::Var(_) => false,
        ExprKind::List(items) => items.iter().any(expr_has_errors),
        ExprKind::Binary(..) => {
            let (first, steps) = e.binary_chain();
            expr_has_errors(first) || steps.iter().any(|(_, b, _)| expr_has_errors(b))
        }
        ExprKind::Index(a, b) | ExprKind::Assign(a, b) => expr_has_errors(a) || expr_has_errors(b),
        ExprKind::Member(a, _) | ExprKind::Unary(_, a) | ExprKind::Named(_, a) => {
            expr_has_errors(a)
        }
        ExprKind::Call { callee, args } => {
            expr_has_errors(callee) || args.iter().any(expr_has_errors)
        }
        ExprKind::Switch(s) => {
            expr_has_errors(&s.scrutinee)
                || s.cases.iter().any(|c| match &c.body {
                    CaseBody::Expr(e) => expr_has_errors(e),
                    CaseBody::Block(b) => block_has_errors(b),
                })
        }
    }
}

/// The named arguments an operation accepts (`None`: it takes none). LLM
/// operations take the options of their call; `solve` also `repairs`.
pub fn named_arguments(op: &str) -> Option<&'static [&'static str]> {
    const LLM: &[&str] = &[
        "prompt",
        "context",
        "tools",
        "max_steps",
        "model",
        "temperature",
        "max_tokens",
        "budget",
        "budget_tokens",
        "system",
        "backend",
        "schema",
    ];
    const SOLVE: &[&str] = &[
        "prompt",
        "context",
        "tools",
        "repairs",
        "model",
        "temperature",
        "max_tokens",
        "budget",
        "budget_tokens",
        "system",
        "backend",
    ];
    // `plan`, `reflect` and `verify` reply in their own schema: the LLM
    // list without its last entry, `schema`.
    const STRUCTURED: &[&str] = LLM.split_at(LLM.len() - 1).0;
    let op = ais_ir::Opcode::from_mnemonic(op)?;
    match op.info().llm? {
        ais_ir::LlmKind::Solve => Some(SOLVE),
        ais_ir::LlmKind::Plan | ais_ir::LlmKind::Reflect | ais_ir::LlmKind::Verify => {
            Some(STRUCTURED)
        }
        _ => Some(LLM),
    }
}

/// The tier a memory op addresses, resolved exactly as the checker accepts it.
pub fn resolve_tier(agent: &AgentInfo, arg: &Expr) -> Option<&'static str> {
    match &arg.kind {
        ExprKind::Str(s) if !s.has_holes() => {
            let text = s.text();
            canonical_tier(&text).or_else(|| agent.memories.get(&text).map(|m| m.tier))
        }
        ExprKind::Var(id) => agent.memories.get(&id.name).map(|m| m.tier),
        _ => None,
    }
}

/// The key used to compare case patterns, for literal patterns only.
pub fn literal_key(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Str(s) if !s.has_holes() => Some(format!("\"{}\"", s.text())),
        ExprKind::Number(n) => Some(format!("{n}")),
        ExprKind::Bool(b) => Some(format!("{b}")),
        _ => None,
    }
}

fn call_name(e: &Expr) -> Option<String> {
    let ExprKind::Call { callee, .. } = &e.kind else {
        return None;
    };
    match &callee.kind {
        ExprKind::Var(v) => Some(v.name.clone()),
        ExprKind::Member(t, f) => match &t.kind {
            ExprKind::Var(v) => Some(format!("{}.{}", v.name, f.name)),
            _ => None,
        },
        _ => None,
    }
}

/// The candidate closest to `name` by edit distance, if close enough to be a typo.
pub fn closest<'s>(name: &str, candidates: impl Iterator<Item = &'s String>) -> Option<String> {
    let limit = (name.chars().count() / 3).clamp(1, 3);
    candidates
        .filter(|c| c.as_str() != name)
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.clone())
}

/// Edits between `a` and `b`, a swap of two neighbouring characters
/// counting as one (`aks` is one edit from `ask`: the commonest typo).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Rows i-2, i-1 and i of the table.
    let mut before: Vec<usize> = Vec::new();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
            if i > 0 && j > 0 && *ca == b[j - 1] && a[i - 1] == *cb {
                cur[j + 1] = cur[j + 1].min(before[j - 1] + 1);
            }
        }
        before = std::mem::replace(&mut prev, cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_only_for_near_misses() {
        let names = ["topic".to_string(), "summary".to_string()];
        assert_eq!(closest("topc", names.iter()), Some("topic".into()));
        assert_eq!(closest("xyz", names.iter()), None);
    }

    #[test]
    fn a_swap_of_neighbours_is_one_edit() {
        assert_eq!(edit_distance("aks", "ask"), 1);
        assert_eq!(edit_distance("ask", "ask"), 0);
        assert_eq!(edit_distance("tihnk", "think"), 1);
        assert_eq!(edit_distance("abc", "cba"), 2);
        assert_eq!(edit_distance("", "ask"), 3);
        let ops = ["ask".to_string(), "think".to_string(), "inv".to_string()];
        assert_eq!(closest("aks", ops.iter()), Some("ask".into()));
    }
}
