//! The reference's named arguments of the built-in operations, rewritten
//! into ours before checking (docs/language.md, "The reference's
//! spellings"): `verify(claim:, evidence:)`, `plan(goal:, constraints:)`,
//! `reflect(trace_query:, reflection_prompt:)`, `reason(structured:)`,
//! `umem(key:, value:, memory_tier:)`, `qmem(query:, memory_tier:)`,
//! `inv(capability:, parameters:)`, `exc(code:, sandbox_config:)`,
//! `print(message:)`, `wait_all(tokens:)`, `merge(tokens:)`,
//! `fence(ordering:)`, `communicate(target_agent:)`, `pause(message:,
//! checkpoint_id:, timeout_ms:, ...)` and `guard(value, condition:,
//! on_fail:, error_message:)` with the reference's condition language.
//! A call of a flow or capability that has the built-in's name is left
//! alone. The formatter never sees the rewrite: it runs on the parse.

use super::ast::*;
use super::lexer::{StrLit, StrPart};
use crate::guard_cond::{self, Cond, Rhs};
use crate::sema::builtins::{self, BuiltinKind as K};
use ais_ir::Span;

/// Rewrites every agent's calls of built-ins written the reference's way.
pub fn rewrite(file: &mut File) {
    for a in &mut file.agents {
        // A set: a list searched per call made many flows quadratic
        // (125k flows: two thirds of `aisc build`, issue 40).
        let shadowed: Shadowed = a
            .members
            .iter()
            .filter_map(|m| match m {
                Member::Flow(f) => Some(f.name.name.clone()),
                Member::Capability(c) => Some(c.name.name.clone()),
                _ => None,
            })
            .collect();
        for m in &mut a.members {
            match m {
                Member::Flow(f) => block(&shadowed, &mut f.body),
                Member::Handler(h) => {
                    if let Some(g) = &mut h.guard {
                        expr(&shadowed, g);
                    }
                    block(&shadowed, &mut h.body);
                }
                Member::Beliefs(bs, _) => {
                    for b in bs {
                        expr(&shadowed, &mut b.value);
                    }
                }
                _ => {}
            }
        }
    }
}

/// The agent's flow and capability names (they shadow built-ins).
type Shadowed = rustc_hash::FxHashSet<String>;

fn block(sh: &Shadowed, b: &mut Block) {
    for s in &mut b.stmts {
        match &mut s.kind {
            StmtKind::Let { value, .. } | StmtKind::Bind { value, .. } => expr(sh, value),
            StmtKind::Return(Some(e)) | StmtKind::Expr(e) => expr(sh, e),
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                expr(sh, cond);
                block(sh, then);
                if let Some(o) = otherwise {
                    block(sh, o);
                }
            }
            StmtKind::Parallel(b) => block(sh, b),
            StmtKind::Loop { iter, body, .. } => {
                expr(sh, iter);
                block(sh, body);
            }
            StmtKind::Try { body, handler, .. } => {
                block(sh, body);
                block(sh, handler);
            }
            StmtKind::Return(None) | StmtKind::Error(_) => {}
        }
    }
}

fn expr(sh: &Shadowed, e: &mut Expr) {
    // A binary chain is as deep as it is long (`a + b + c` nests to the
    // left): walk along it instead of recursing into the left operand.
    // (`matches!` first: a `while let` on `&mut e.kind` would keep the
    // borrow alive past the loop.)
    let mut e = e;
    while matches!(e.kind, ExprKind::Binary(..)) {
        let ExprKind::Binary(_, a, b) = &mut e.kind else {
            unreachable!("checked by the loop condition")
        };
        expr(sh, b);
        e = a;
    }
    match &mut e.kind {
        ExprKind::List(xs) => xs.iter_mut().for_each(|x| expr(sh, x)),
        ExprKind::Index(a, b) | ExprKind::Assign(a, b) => {
            expr(sh, a);
            expr(sh, b);
        }
        ExprKind::Member(a, _) | ExprKind::Unary(_, a) | ExprKind::Named(_, a) => expr(sh, a),
        ExprKind::Switch(s) => {
            expr(sh, &mut s.scrutinee);
            for c in &mut s.cases {
                if let Some(p) = &mut c.pattern {
                    expr(sh, p);
                }
                match &mut c.body {
                    CaseBody::Expr(x) => expr(sh, x),
                    CaseBody::Block(b) => block(sh, b),
                }
            }
        }
        ExprKind::Call { callee, args } => {
            expr(sh, callee);
            args.iter_mut().for_each(|x| expr(sh, x));
            let ExprKind::Var(id) = &callee.kind else {
                return;
            };
            if sh.contains(&id.name) {
                return;
            }
            if id.name == "claim" {
                // The AAM tool `claim`; the reference's server address is
                // its own (the queue here is the run's store).
                take(args, "server_url");
                return;
            }
            let Some(b) = builtins::lookup(&id.name) else {
                return;
            };
            if let Some(replacement) = call(b.kind, args, e.span) {
                *e = replacement;
            }
        }
        _ => {}
    }
}

/// Removes the named argument `name` (its first occurrence).
fn take(args: &mut Vec<Expr>, name: &str) -> Option<Expr> {
    let i = args
        .iter()
        .position(|a| matches!(&a.kind, ExprKind::Named(n, _) if n.name == name))?;
    // `Expr` has a `Drop` (iterative, for deep trees): take its kind out.
    let mut arg = args.remove(i);
    match std::mem::replace(&mut arg.kind, ExprKind::Error) {
        ExprKind::Named(_, v) => Some(*v),
        _ => None,
    }
}

fn first_of(args: &mut Vec<Expr>, names: &[&str]) -> Option<Expr> {
    let mut out = None;
    for n in names {
        if let Some(v) = take(args, n) {
            out.get_or_insert(v);
        }
    }
    out
}

/// The reference code generator's names of LLM options that are ours
/// under another name (`system_prompt`, `token_budget`, `output_schema`:
/// the graph-JSON reader's table).
fn rename_llm(args: &mut [Expr]) {
    for a in args.iter_mut() {
        if let ExprKind::Named(n, _) = &mut a.kind {
            let ours = crate::graph_json::reference_name(&n.name);
            if ours != n.name {
                n.name = ours.to_string();
            }
        }
    }
}

/// Where the positional arguments end.
fn positional_end(args: &[Expr]) -> usize {
    args.iter()
        .position(|a| matches!(a.kind, ExprKind::Named(..)))
        .unwrap_or(args.len())
}

fn lit(text: &str, span: Span) -> Expr {
    Expr {
        kind: ExprKind::Str(StrLit {
            parts: vec![StrPart::Text(text.to_string())],
            span,
        }),
        span,
    }
}

fn named(name: &str, value: Expr, span: Span) -> Expr {
    Expr {
        kind: ExprKind::Named(
            Ident {
                name: name.to_string(),
                span,
            },
            Box::new(value),
        ),
        span,
    }
}

/// A rewritten call, or `None` to keep the arguments as rewritten in place.
fn call(kind: K, args: &mut Vec<Expr>, span: Span) -> Option<Expr> {
    let insert_front = |args: &mut Vec<Expr>, v: Expr| args.insert(0, v);
    let push_positional = |args: &mut Vec<Expr>, v: Expr| {
        let at = positional_end(args);
        args.insert(at, v);
    };
    match kind {
        K::Verify => {
            if let Some(t) = take(args, "template_str") {
                insert_front(args, t);
            }
            let claim = take(args, "claim");
            let evidence = take(args, "evidence");
            if let Some(ev) = evidence {
                insert_front(args, ev);
            }
            if let Some(c) = claim {
                insert_front(args, c);
            }
        }
        K::Plan => {
            rename_llm(args);
            if let Some(c) = take(args, "constraints") {
                push_positional(args, c);
            }
            if let Some(g) = take(args, "goal") {
                insert_front(args, g);
            }
        }
        K::Reflect => {
            if let Some(t) = first_of(args, &["trace_query", "trace_id", "trace"]) {
                insert_front(args, t);
            }
            if let Some(p) = take(args, "reflection_prompt") {
                insert_front(args, p);
            }
        }
        K::Reason | K::Ask | K::Think | K::Llm => {
            rename_llm(args);
            if let Some(s) = take(args, "structured") {
                if matches!(s.kind, ExprKind::Bool(true)) {
                    let schema = lit(r#"{"type": "object"}"#, s.span);
                    args.push(named("schema", schema, s.span));
                }
            }
            if let Some(t) = take(args, "template_str") {
                insert_front(args, t);
            }
        }
        K::Umem => {
            let key = take(args, "key");
            let value = take(args, "value");
            let tier = first_of(args, &["memory_tier", "space"]);
            if key.is_some() || value.is_some() || tier.is_some() {
                let mut pos: Vec<Expr> = args.drain(..positional_end(args)).collect();
                if let Some(v) = value {
                    pos.insert(0, v);
                }
                if pos.len() < 2 {
                    pos.push(tier.unwrap_or_else(|| lit("stm", span)));
                }
                if let Some(k) = key {
                    pos.push(k);
                }
                args.splice(0..0, pos);
            }
        }
        K::Qmem => {
            let query = take(args, "query");
            let tier = first_of(args, &["memory_tier", "space"]);
            let limit = take(args, "limit");
            if query.is_some() || tier.is_some() || limit.is_some() {
                let mut pos: Vec<Expr> = args.drain(..positional_end(args)).collect();
                if let Some(q) = query {
                    pos.insert(0, q);
                }
                if pos.len() < 2 {
                    pos.push(tier.unwrap_or_else(|| lit("stm", span)));
                }
                if let Some(l) = limit {
                    pos.push(l);
                }
                args.splice(0..0, pos);
            }
        }
        K::Inv => {
            // Per tool in the configuration here (`[tools.NAME] timeout_s`).
            take(args, "timeout_ms");
            if let Some(p) = first_of(args, &["parameters", "params_json"]) {
                push_positional(args, p);
            }
            if let Some(c) = take(args, "capability") {
                insert_front(args, c);
            }
        }
        K::Exec => {
            take(args, "sandbox_config");
            if let Some(c) = take(args, "code") {
                // The reference's `EXC` runs code in its sandbox: here the
                // confined `bash` tool (denied unless allowed), with the
                // code as its command. Ours, `exec(name, ...)`, calls a
                // tool by name.
                let callee = Expr {
                    kind: ExprKind::Var(Ident {
                        name: "bash".to_string(),
                        span,
                    }),
                    span,
                };
                return Some(Expr {
                    kind: ExprKind::Call {
                        callee: Box::new(callee),
                        args: vec![c],
                    },
                    span,
                });
            }
        }
        K::Print => {
            if let Some(m) = take(args, "message") {
                insert_front(args, m);
            }
        }
        K::WaitAll | K::Merge => {
            let strategy = if kind == K::Merge {
                take(args, "strategy")
            } else {
                None
            };
            if let Some(mut t) = take(args, "tokens") {
                match std::mem::replace(&mut t.kind, ExprKind::Error) {
                    ExprKind::List(items) => {
                        for i in items {
                            push_positional(args, i);
                        }
                    }
                    kind => push_positional(args, Expr { kind, span: t.span }),
                }
            }
            if let Some(st) = strategy {
                return merge_strategy(st, args, span);
            }
        }
        K::Fence => {
            // Ours orders everything: the strongest ordering there is.
            take(args, "ordering");
        }
        K::Communicate => {
            if let Some(t) = first_of(args, &["target_agent", "target"]) {
                args.push(named("recipient", t, span));
            }
        }
        K::Pause => {
            for k in [
                "checkpoint_id",
                "timeout_ms",
                "poll_interval_ms",
                "notification_url",
                "server_url",
            ] {
                take(args, k);
            }
        }
        K::Guard => return guard(args, span),
        K::Solve | K::ToNum => {}
    }
    None
}

/// `merge(..., strategy:)` (the graph format's `MERGE` strategies):
/// `array` the list of the inputs, `concat` their texts joined, `sum`
/// their total (both `+` over the inputs), `join` ours (texts joined by
/// blank lines). Another strategy stays a named argument, refused by the
/// checker (`E0121`, as before).
fn merge_strategy(st: Expr, args: &mut Vec<Expr>, span: Span) -> Option<Expr> {
    let name = match &st.kind {
        ExprKind::Str(s) if !s.has_holes() => s.text().to_ascii_lowercase(),
        _ => {
            args.push(named("strategy", st, span));
            return None;
        }
    };
    let inputs =
        |args: &mut Vec<Expr>| -> Vec<Expr> { args.drain(..positional_end(args)).collect() };
    match name.as_str() {
        "join" => None,
        "array" => Some(Expr {
            kind: ExprKind::List(inputs(args)),
            span,
        }),
        "concat" | "sum" => {
            let mut items = inputs(args).into_iter();
            let first = items.next().unwrap_or_else(|| {
                if name == "sum" {
                    Expr {
                        kind: ExprKind::Number(0.0),
                        span,
                    }
                } else {
                    lit("", span)
                }
            });
            Some(items.fold(first, |acc, x| Expr {
                kind: ExprKind::Binary(BinaryOp::Add, Box::new(acc), Box::new(x)),
                span,
            }))
        }
        _ => {
            args.push(named("strategy", st, span));
            None
        }
    }
}

/// `guard(value, condition: "...", on_fail:, error_message:)`: the
/// condition over the value as an expression; `halt` (default) is our
/// guard of it, `skip` the condition's value alone (the reference's
/// `false` instead of failing).
fn guard(args: &mut Vec<Expr>, span: Span) -> Option<Expr> {
    let cond_at = args
        .iter()
        .position(|a| matches!(&a.kind, ExprKind::Named(n, _) if n.name == "condition"))?;
    let text = match &args[cond_at].kind {
        ExprKind::Named(_, v) => match &v.kind {
            ExprKind::Str(s) if s.parts.iter().all(|p| matches!(p, StrPart::Text(_))) => s.text(),
            _ => return None,
        },
        _ => return None,
    };
    take(args, "condition");
    let on_fail = take(args, "on_fail");
    let message = take(args, "error_message")
        .or_else(|| take(args, "message"))
        .unwrap_or_else(|| lit(&format!("GUARD condition failed: '{text}'"), span));
    let value = if positional_end(args) > 0 {
        args.remove(0)
    } else {
        Expr {
            kind: ExprKind::Null,
            span,
        }
    };
    let cond = condition(&text, value, span);
    let skip = match on_fail.as_ref().map(|e| &e.kind) {
        Some(ExprKind::Str(s)) => s.text().eq_ignore_ascii_case("skip"),
        _ => false,
    };
    if skip {
        return Some(cond);
    }
    args.splice(0..0, [cond, message]);
    None
}

fn condition(text: &str, x: Expr, span: Span) -> Expr {
    let bin = |op: BinaryOp, a: Expr, b: Expr| Expr {
        kind: ExprKind::Binary(op, Box::new(a), Box::new(b)),
        span,
    };
    let k = |kind: ExprKind| Expr { kind, span };
    match guard_cond::parse(text) {
        Cond::NotNull => bin(BinaryOp::Ne, x, k(ExprKind::Null)),
        Cond::IsNull => bin(BinaryOp::Eq, x, k(ExprKind::Null)),
        Cond::Is(b) => bin(BinaryOp::Eq, x, k(ExprKind::Bool(b))),
        Cond::Empty(want_empty) => {
            let not_null = bin(BinaryOp::Ne, x.clone(), k(ExprKind::Null));
            let not_blank = bin(BinaryOp::Ne, x.clone(), lit("", span));
            let not_list = bin(BinaryOp::Ne, x, k(ExprKind::List(Vec::new())));
            let full = bin(
                BinaryOp::And,
                bin(BinaryOp::And, not_null, not_blank),
                not_list,
            );
            if want_empty {
                k(ExprKind::Unary(UnaryOp::Not, Box::new(full)))
            } else {
                full
            }
        }
        // An ordering reads text as a number (an LLM reply "0.93"), as the
        // reference's guard does; text that is not one fails naming the
        // guard (`to_num`).
        Cond::Compare(op @ (">" | ">=" | "<" | "<="), Rhs::Number(n)) => {
            let x = match x.kind {
                ExprKind::Number(_) => x,
                _ => k(ExprKind::Call {
                    callee: Box::new(k(ExprKind::Var(Ident {
                        name: "to_num".into(),
                        span,
                    }))),
                    args: vec![x, lit(&format!("guard `{text}`"), span)],
                }),
            };
            bin(binary(op), x, k(ExprKind::Number(n)))
        }
        Cond::Compare(op, Rhs::Number(n)) => bin(binary(op), x, k(ExprKind::Number(n))),
        Cond::Compare(op @ ("==" | "!="), Rhs::Text(t)) => bin(binary(op), x, lit(&t, span)),
        // An ordering against text never holds (as in the reference).
        Cond::Compare(_, Rhs::Text(_)) => k(ExprKind::Bool(false)),
    }
}

fn binary(op: &str) -> BinaryOp {
    match op {
        ">" => BinaryOp::Gt,
        ">=" => BinaryOp::Ge,
        "<" => BinaryOp::Lt,
        "<=" => BinaryOp::Le,
        "==" => BinaryOp::Eq,
        _ => BinaryOp::Ne,
    }
}
