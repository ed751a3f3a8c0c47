//! The AST as indented text, one node per line (`aisc build --emit ast`).
//!
//! Linear in the size of the tree whatever its shape: the walk keeps its
//! own stack (a `+` chain of a million terms is a million levels deep as a
//! tree, which would overflow a recursive printer), a binary chain is
//! printed flat (its operands side by side, as it was written), and the
//! indentation stops growing at [`MAX_INDENT`] levels; deeper lines carry
//! their depth as a number instead (the derived `{:#?}` output this
//! replaces re-indented every line once per level: quadratic in the depth).

use super::ast::*;
use super::lexer::{StrLit, StrPart};
use ais_ir::Span;
use std::fmt::Write;

/// Levels shown by indentation; deeper lines start with `[depth] `.
pub const MAX_INDENT: usize = 32;

/// One node still to print.
enum Node<'a> {
    File(&'a File),
    Import(&'a Import),
    Agent(&'a Agent),
    Member(&'a Member),
    Ident(&'a Ident),
    Str(&'a StrLit),
    Type(&'a TypeExpr),
    Param(&'a Param),
    Decorator(&'a Decorator),
    Memory(&'a MemoryDecl),
    Belief(&'a Belief),
    Goal(&'a Goal),
    Block(&'a Block),
    Stmt(&'a Stmt),
    Expr(&'a Expr),
    Case(&'a Case),
}

/// The tree as text: `label: Kind details @start..end`, children indented
/// under their parent.
pub fn dump(file: &File) -> String {
    let mut out = String::new();
    // (depth, field label, node); children are pushed last first.
    let mut stack: Vec<(usize, &str, Node<'_>)> = vec![(0, "", Node::File(file))];
    let mut kids: Vec<(&str, Node<'_>)> = Vec::new();
    while let Some((depth, label, node)) = stack.pop() {
        indent(&mut out, depth);
        if !label.is_empty() {
            out.push_str(label);
            out.push_str(": ");
        }
        line(&mut out, &node, &mut kids);
        out.push('\n');
        stack.extend(kids.drain(..).rev().map(|(l, n)| (depth + 1, l, n)));
    }
    out
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth.min(MAX_INDENT) {
        out.push_str("  ");
    }
    if depth > MAX_INDENT {
        let _ = write!(out, "[{depth}] ");
    }
}

fn span(out: &mut String, s: Span) {
    let _ = write!(out, " @{}..{}", s.start, s.end);
}

fn str_text(s: &StrLit) -> String {
    let mut t = String::new();
    for p in &s.parts {
        match p {
            StrPart::Text(x) => t.push_str(x),
            StrPart::Interp(n, _) => {
                t.push('{');
                t.push_str(n);
                t.push('}');
            }
        }
    }
    t
}

/// Writes `node`'s own line (without indentation) and lists its children.
fn line<'a>(out: &mut String, node: &Node<'a>, kids: &mut Vec<(&'static str, Node<'a>)>) {
    match *node {
        Node::File(f) => {
            out.push_str("File");
            span(out, f.span);
            kids.extend(f.imports.iter().map(|i| ("import", Node::Import(i))));
            kids.extend(f.agents.iter().map(|a| ("agent", Node::Agent(a))));
        }
        Node::Import(i) => {
            let _ = write!(out, "Import {:?}", i.path);
            span(out, i.span);
        }
        Node::Agent(a) => {
            let _ = write!(out, "Agent {}", a.name.name);
            span(out, a.span);
            kids.extend(a.members.iter().map(|m| ("", Node::Member(m))));
        }
        Node::Member(m) => member(out, m, kids),
        Node::Ident(i) => {
            let _ = write!(out, "Ident {}", i.name);
            span(out, i.span);
        }
        Node::Str(s) => {
            let _ = write!(out, "Str {:?}", str_text(s));
            span(out, s.span);
        }
        Node::Type(t) => {
            match t {
                TypeExpr::Named(i) => {
                    let _ = write!(out, "Type {}", i.name);
                }
                TypeExpr::List(inner, _) => {
                    out.push_str("Type list");
                    kids.push(("of", Node::Type(inner)));
                }
            }
            span(out, t.span());
        }
        Node::Param(p) => {
            let _ = write!(out, "Param {}", p.name.name);
            span(out, p.span);
            kids.extend(p.ty.as_ref().map(|t| ("type", Node::Type(t))));
        }
        Node::Decorator(d) => {
            let _ = write!(out, "Decorator @{}", d.name.name);
            span(out, d.span);
        }
        Node::Memory(d) => {
            let _ = write!(out, "Memory {} {}", d.name.name, d.tier.name);
            span(out, d.span);
        }
        Node::Belief(b) => {
            let _ = write!(out, "Belief {}", b.name.name);
            if b.from {
                out.push_str(" from");
            }
            span(out, b.span);
            kids.push(("value", Node::Expr(&b.value)));
        }
        Node::Goal(g) => {
            let _ = write!(out, "Goal {}", g.name.name);
            if let Some((p, _)) = g.priority {
                let _ = write!(out, " priority {p}");
            }
            span(out, g.span);
            kids.extend(
                g.description
                    .as_ref()
                    .map(|d| ("description", Node::Str(d))),
            );
        }
        Node::Block(b) => {
            out.push_str("Block");
            span(out, b.span);
            kids.extend(b.stmts.iter().map(|s| ("", Node::Stmt(s))));
        }
        Node::Stmt(s) => stmt(out, s, kids),
        Node::Expr(e) => expr(out, e, kids),
        Node::Case(c) => {
            out.push_str(if c.pattern.is_some() {
                "Case"
            } else {
                "Default"
            });
            span(out, c.span);
            kids.extend(c.pattern.as_ref().map(|p| ("pattern", Node::Expr(p))));
            kids.push(match &c.body {
                CaseBody::Expr(e) => ("body", Node::Expr(e)),
                CaseBody::Block(b) => ("body", Node::Block(b)),
            });
        }
    }
}

fn member<'a>(out: &mut String, m: &'a Member, kids: &mut Vec<(&'static str, Node<'a>)>) {
    match m {
        Member::Memory(ds, s) => {
            out.push_str("Memory");
            span(out, *s);
            kids.extend(ds.iter().map(|d| ("", Node::Memory(d))));
        }
        Member::Beliefs(bs, s) => {
            out.push_str("Beliefs");
            span(out, *s);
            kids.extend(bs.iter().map(|b| ("", Node::Belief(b))));
        }
        Member::Goals(gs, s) => {
            out.push_str("Goals");
            span(out, *s);
            kids.extend(gs.iter().map(|g| ("", Node::Goal(g))));
        }
        Member::Capability(c) => {
            let _ = write!(out, "Capability {}", c.name.name);
            span(out, c.span);
            kids.extend(c.decorators.iter().map(|d| ("", Node::Decorator(d))));
            kids.extend(c.params.iter().map(|p| ("", Node::Param(p))));
            kids.extend(c.ret.as_ref().map(|t| ("returns", Node::Type(t))));
        }
        Member::Flow(f) => {
            let _ = write!(out, "Flow {}", f.name.name);
            span(out, f.span);
            kids.extend(f.decorators.iter().map(|d| ("", Node::Decorator(d))));
            kids.extend(f.params.iter().map(|p| ("", Node::Param(p))));
            kids.extend(f.ret.as_ref().map(|t| ("returns", Node::Type(t))));
            kids.push(("body", Node::Block(&f.body)));
        }
        Member::Handler(h) => {
            let _ = write!(out, "Handler {}", h.event_name());
            span(out, h.span);
            kids.extend(h.fields.iter().map(|p| ("field", Node::Param(p))));
            kids.extend(h.guard.as_ref().map(|g| ("guard", Node::Expr(g))));
            kids.push(("body", Node::Block(&h.body)));
        }
        Member::Tools(ids, s) => {
            out.push_str("Tools");
            span(out, *s);
            kids.extend(ids.iter().map(|i| ("", Node::Ident(i))));
        }
        Member::Discoverable(ids, s) => {
            out.push_str("Discoverable");
            span(out, *s);
            kids.extend(ids.iter().map(|i| ("", Node::Ident(i))));
        }
        Member::Context(text, s) => {
            out.push_str("Context");
            span(out, *s);
            kids.push(("", Node::Str(text)));
        }
        Member::Error(s) => {
            out.push_str("Error");
            span(out, *s);
        }
    }
}

fn stmt<'a>(out: &mut String, s: &'a Stmt, kids: &mut Vec<(&'static str, Node<'a>)>) {
    match &s.kind {
        StmtKind::Let { name, ty, value } => {
            let _ = write!(out, "Let {}", name.name);
            kids.extend(ty.as_ref().map(|t| ("type", Node::Type(t))));
            kids.push(("value", Node::Expr(value)));
        }
        StmtKind::Bind { value, name } => {
            let _ = write!(out, "Bind -> {}", name.name);
            kids.push(("value", Node::Expr(value)));
        }
        StmtKind::Return(v) => {
            out.push_str("Return");
            kids.extend(v.as_ref().map(|e| ("value", Node::Expr(e))));
        }
        StmtKind::If {
            cond,
            then,
            otherwise,
        } => {
            out.push_str("If");
            kids.push(("cond", Node::Expr(cond)));
            kids.push(("then", Node::Block(then)));
            kids.extend(otherwise.as_ref().map(|b| ("else", Node::Block(b))));
        }
        StmtKind::Parallel(b) => {
            out.push_str("Parallel");
            kids.push(("", Node::Block(b)));
        }
        StmtKind::Loop { var, iter, body } => {
            let _ = write!(out, "Loop {}", var.name);
            kids.push(("in", Node::Expr(iter)));
            kids.push(("body", Node::Block(body)));
        }
        StmtKind::Try { body, err, handler } => {
            out.push_str("Try");
            if let Some(e) = err {
                let _ = write!(out, " catch({})", e.name);
            }
            kids.push(("body", Node::Block(body)));
            kids.push(("catch", Node::Block(handler)));
        }
        StmtKind::Expr(e) => {
            out.push_str("Expr");
            kids.push(("", Node::Expr(e)));
        }
        StmtKind::Error(b) => {
            out.push_str("Error");
            if let Broken::Binds(i) = b {
                let _ = write!(out, " binds {}", i.name);
            }
        }
    }
    span(out, s.span);
}

fn expr<'a>(out: &mut String, e: &'a Expr, kids: &mut Vec<(&'static str, Node<'a>)>) {
    match &e.kind {
        ExprKind::Str(s) => {
            let _ = write!(out, "Str {:?}", str_text(s));
        }
        ExprKind::Number(n) => {
            let _ = write!(out, "Number {n}");
        }
        ExprKind::Bool(b) => {
            let _ = write!(out, "Bool {b}");
        }
        ExprKind::Null => out.push_str("Null"),
        ExprKind::List(items) => {
            out.push_str("List");
            kids.extend(items.iter().map(|i| ("", Node::Expr(i))));
        }
        ExprKind::Var(i) => {
            let _ = write!(out, "Var {}", i.name);
        }
        ExprKind::Index(a, b) => {
            out.push_str("Index");
            kids.push(("of", Node::Expr(a)));
            kids.push(("at", Node::Expr(b)));
        }
        ExprKind::Member(a, f) => {
            let _ = write!(out, "Member .{}", f.name);
            kids.push(("of", Node::Expr(a)));
        }
        ExprKind::Call { callee, args } => {
            out.push_str("Call");
            kids.push(("callee", Node::Expr(callee)));
            kids.extend(args.iter().map(|a| ("arg", Node::Expr(a))));
        }
        ExprKind::Named(n, v) => {
            let _ = write!(out, "Named {}", n.name);
            kids.push(("", Node::Expr(v)));
        }
        ExprKind::Unary(op, a) => {
            let _ = write!(out, "Unary {}", if *op == UnaryOp::Neg { "-" } else { "!" });
            kids.push(("", Node::Expr(a)));
        }
        ExprKind::Binary(..) => {
            // Flat: a left-nested chain is as deep as it is long.
            let (first, steps) = e.binary_chain();
            out.push_str("Binary");
            kids.push(("", Node::Expr(first)));
            kids.extend(
                steps
                    .into_iter()
                    .map(|(op, rhs, _)| (op.symbol(), Node::Expr(rhs))),
            );
        }
        ExprKind::Assign(a, b) => {
            out.push_str("Assign");
            kids.push(("to", Node::Expr(a)));
            kids.push(("value", Node::Expr(b)));
        }
        ExprKind::Switch(s) => {
            out.push_str("Switch");
            kids.push(("on", Node::Expr(&s.scrutinee)));
            kids.extend(s.cases.iter().map(|c| ("", Node::Case(c))));
        }
        ExprKind::Error => out.push_str("Error"),
    }
    span(out, e.span);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> File {
        let p = crate::syntax::parse(src);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        p.file
    }

    #[test]
    fn prints_each_node_on_its_own_line() {
        let f = parse("agent A { flow main() -> str { let x = 1 + 2 * 3\n return \"hi {x}\" } }");
        let text = dump(&f);
        let lines: Vec<&str> = text.lines().map(str::trim_start).collect();
        assert!(lines[0].starts_with("File @"), "{text}");
        assert!(
            lines.iter().any(|l| l.starts_with("agent: Agent A")),
            "{text}"
        );
        assert!(lines.iter().any(|l| l.starts_with("Flow main")), "{text}");
        assert!(lines.iter().any(|l| l.starts_with("Let x")), "{text}");
        assert!(lines.iter().any(|l| l.starts_with("+: Binary")), "{text}");
        assert!(lines.iter().any(|l| l.starts_with("*: Number 3")), "{text}");
        assert!(
            lines.iter().any(|l| l.starts_with("value: Str \"hi {x}\"")),
            "{text}"
        );
    }

    /// A `+` chain N terms long gives N + a constant lines of bounded
    /// length: the output grows linearly (it grew with N² before).
    #[test]
    fn long_chain_is_linear() {
        let sizes = |n: usize| {
            let terms = vec!["1"; n].join(" + ");
            let f = parse(&format!(
                "agent A {{ flow main() -> number {{ return {terms} }} }}"
            ));
            let text = dump(&f);
            (text.len(), text.lines().count())
        };
        let (bytes_small, lines_small) = sizes(20_000);
        let (bytes_big, lines_big) = sizes(40_000);
        assert!(
            lines_small > 20_000 && lines_small < 20_020,
            "{lines_small}"
        );
        assert!(lines_big > 40_000 && lines_big < 40_020, "{lines_big}");
        // Twice the terms: at most a little over twice the text (spans
        // grow a digit).
        assert!(
            bytes_big <= bytes_small * 22 / 10,
            "{bytes_small} -> {bytes_big}"
        );
    }

    /// Nesting that does grow the tree's depth (each `else if` is a block
    /// inside the previous one) is printed without recursion, and the
    /// indentation stops at `MAX_INDENT` levels.
    #[test]
    fn deep_else_if_chain_caps_indentation() {
        let n = 2_000;
        let mut src =
            String::from("agent A { flow main(x: number) -> number { if x == 0 { return 0 }");
        for i in 1..n {
            let _ = write!(src, " else if x == {i} {{ return {i} }}");
        }
        src.push_str("\n return 1 } }");
        let f = parse(&src);
        // A small stack: the printer must not recurse once per level.
        let text = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || (dump(&f), f))
            .expect("spawn")
            .join()
            .expect("dump on a small stack")
            .0;
        let widest = text
            .lines()
            .map(|l| l.len() - l.trim_start().len())
            .max()
            .unwrap_or(0);
        assert_eq!(widest, 2 * MAX_INDENT, "indentation is capped");
        assert!(
            text.contains(&format!("[{}] ", MAX_INDENT + 1)),
            "deep lines carry their depth"
        );
        let deepest: usize = text
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix('['))
            .filter_map(|l| l.split(']').next()?.parse().ok())
            .max()
            .unwrap_or(0);
        assert!(deepest > 2 * n, "every level is there: {deepest}");
    }
}
