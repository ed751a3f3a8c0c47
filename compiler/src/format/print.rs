//! The syntax tree (plus the comments of its source) to a [`Doc`].
//!
//! Literals (strings, numbers, quoted capability names) are copied from the
//! source as written; everything else is printed from the tree. Comments are
//! placed at *slots*: the starts of agents, members, statements, list
//! entries, switch arms, arguments, parameters and list items, and before
//! closing brackets. A comment written elsewhere (inside an expression) moves
//! to the next slot, or, when the statement holding it ends first, to the line
//! after that statement; a block comment inside an expression stays in front
//! of the expression that follows it.

use super::doc::{group, text, Doc};
use crate::syntax::ast::*;
use crate::syntax::lexer::{Comment, CommentKind};

pub struct Printer<'s> {
    src: &'s str,
    comments: Vec<Comment>,
    /// The first comment not printed yet.
    next: usize,
}

/// Precedence levels, lowest first (the grammar's expression layers).
const ASSIGN: u8 = 0;
const PIPE: u8 = 1;
const UNARY: u8 = 8;
const POSTFIX: u8 = 9;
const PRIMARY: u8 = 10;

fn binary_level(op: BinaryOp) -> u8 {
    match op {
        BinaryOp::Or => 2,
        BinaryOp::And => 3,
        BinaryOp::Eq | BinaryOp::Ne => 4,
        BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge => 5,
        BinaryOp::Add | BinaryOp::Sub => 6,
        BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => 7,
    }
}

/// `x |> f(a)` is parsed as `f(x, a)`; the piped value comes before the
/// callee in the source, which no plain call has.
fn is_pipe(callee: &Expr, args: &[Expr]) -> bool {
    args.first()
        .is_some_and(|first| first.span.start < callee.span.start)
}

fn level(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Assign(..) | ExprKind::Named(..) => ASSIGN,
        ExprKind::Call { callee, args } if is_pipe(callee, args) => PIPE,
        ExprKind::Binary(op, ..) => binary_level(*op),
        ExprKind::Unary(..) => UNARY,
        ExprKind::Call { .. } | ExprKind::Index(..) | ExprKind::Member(..) => POSTFIX,
        _ => PRIMARY,
    }
}

/// A statement-like sequence entry: where it starts and ends in the source.
/// A top-level item of a file.
enum Top<'a> {
    Import(&'a Import),
    Agent(&'a Agent),
}

struct Entry {
    start: u32,
    end: u32,
}

impl<'s> Printer<'s> {
    pub fn new(src: &'s str, comments: Vec<Comment>) -> Printer<'s> {
        Printer {
            src,
            comments,
            next: 0,
        }
    }

    // ------------------------------------------------------------ comments

    fn comment_text(&self, c: &Comment) -> String {
        c.text(self.src).to_string()
    }

    fn peek(&self) -> Option<&Comment> {
        self.comments.get(self.next)
    }

    /// Whether the source between `a` and `b` holds an empty line.
    fn blank_between(&self, a: u32, b: u32) -> bool {
        let gap = self.src.get(a as usize..b as usize).unwrap_or("");
        let segs: Vec<&str> = gap.split('\n').collect();
        segs.len() >= 3 && segs[1..segs.len() - 1].iter().any(|s| s.trim().is_empty())
    }

    /// Whether only spaces follow `end` on its line.
    fn ends_line(&self, end: u32) -> bool {
        let after = self.src.get(end as usize..).unwrap_or("");
        after
            .trim_start_matches([' ', '\t', '\r'])
            .chars()
            .next()
            .is_none_or(|ch| ch == '\n')
    }

    /// Comments right after `end` on the same line (only spaces, `,` or `;`
    /// between): line comments, and block comments that end their line.
    /// Returns their docs (each preceded by a space).
    fn trailing(&mut self, end: u32) -> Vec<Doc> {
        // The run of comments on the line after `end`; taken only when it
        // ends the line (a line comment, or a block comment last on it).
        let mut at = end;
        let mut run = 0;
        let mut ends = false;
        while let Some(c) = self.comments.get(self.next + run) {
            if c.span.start < at {
                break;
            }
            let gap = self
                .src
                .get(at as usize..c.span.start as usize)
                .unwrap_or("");
            if !gap.chars().all(|ch| matches!(ch, ' ' | '\t' | ',' | ';')) {
                break;
            }
            run += 1;
            at = c.span.end;
            if c.kind == CommentKind::Line || self.ends_line(c.span.end) {
                ends = true;
                break;
            }
        }
        let mut out = Vec::new();
        if !ends {
            return out;
        }
        for _ in 0..run {
            let c = self.comments[self.next].clone();
            self.next += 1;
            out.push(text(" "));
            out.push(text(self.comment_text(&c)));
        }
        // It ends its line, and keeps doing so.
        out.push(Doc::BreakParent);
        out
    }

    /// Block comments before `pos` that can stay in front of an expression
    /// (stops at the first line comment, which waits for a slot).
    fn inline_before(&mut self, pos: u32) -> Vec<Doc> {
        let mut out = Vec::new();
        while let Some(c) = self.peek() {
            if c.span.start >= pos || c.kind == CommentKind::Line {
                break;
            }
            out.push(text(self.comment_text(&c.clone())));
            out.push(text(" "));
            self.next += 1;
        }
        out
    }

    /// Comments before `pos` in a bracketed list slot: line comments (and
    /// block comments that end their line) on a line of their own, other
    /// block comments inline.
    fn list_slot(&mut self, pos: u32) -> Vec<Doc> {
        let mut out = Vec::new();
        while let Some(c) = self.peek() {
            if c.span.start >= pos {
                break;
            }
            let c = c.clone();
            self.next += 1;
            out.push(text(self.comment_text(&c)));
            if c.kind == CommentKind::Line || self.ends_line(c.span.end) {
                out.push(Doc::Hard);
            } else {
                out.push(text(" "));
            }
        }
        out
    }

    /// A sequence of line-per-entry items (agents, members, statements,
    /// entries, switch arms) with the comments among them, each on its own
    /// line, and the comments left before `close` (the closing bracket).
    /// Returns the entries separated by line breaks, starting with one
    /// (when anything is printed); `blank`: keep one empty line where the
    /// source has one or more (`always_blank`: between items always).
    #[allow(clippy::too_many_arguments)]
    fn lines<T>(
        &mut self,
        open_end: u32,
        items: &[T],
        span: impl Fn(&T) -> Entry,
        mut print: impl FnMut(&mut Self, &T) -> Doc,
        suffix: &str,
        close: u32,
        always_blank: impl Fn(usize) -> bool,
    ) -> Vec<Doc> {
        let mut out = Vec::new();
        let mut prev_end: Option<u32> = None;
        let mut prev_was_item = false;
        let _ = open_end;
        let sep =
            |p: &Self, out: &mut Vec<Doc>, prev: Option<u32>, start: u32, blank: bool| match prev {
                None => out.push(Doc::Hard),
                Some(e) if blank || p.blank_between(e, start) => out.push(Doc::Blank),
                Some(_) => out.push(Doc::Hard),
            };
        for (i, item) in items.iter().enumerate() {
            let Entry { start, end } = span(item);
            while let Some(c) = self.peek() {
                if c.span.start >= start {
                    break;
                }
                let c = c.clone();
                self.next += 1;
                sep(
                    self,
                    &mut out,
                    prev_end,
                    c.span.start,
                    prev_was_item && always_blank(i),
                );
                out.push(text(self.comment_text(&c)));
                prev_end = Some(c.span.end);
                prev_was_item = false;
            }
            sep(
                self,
                &mut out,
                prev_end,
                start,
                prev_was_item && always_blank(i),
            );
            let doc = print(self, item);
            out.push(doc);
            if i + 1 < items.len() {
                out.push(text(suffix));
            }
            // Comments inside the item that no slot took: after it.
            let mut deferred = Vec::new();
            while let Some(c) = self.peek() {
                if c.span.start >= end {
                    break;
                }
                let c = c.clone();
                self.next += 1;
                deferred.push(c);
            }
            if deferred.is_empty() {
                out.extend(self.trailing(end));
            }
            prev_end = Some(end);
            for c in deferred {
                out.push(Doc::Hard);
                out.push(text(self.comment_text(&c)));
                prev_end = Some(c.span.end);
            }
            prev_was_item = true;
        }
        while let Some(c) = self.peek() {
            if c.span.start >= close {
                break;
            }
            let c = c.clone();
            self.next += 1;
            sep(
                self,
                &mut out,
                prev_end,
                c.span.start,
                prev_was_item && always_blank(items.len()),
            );
            out.push(text(self.comment_text(&c)));
            prev_end = Some(c.span.end);
            prev_was_item = false;
        }
        out
    }

    /// The position of the first `ch` (ASCII) at or after `from` outside
    /// comments (only whitespace and comments lie between them in the
    /// places this is used).
    fn find(&self, from: u32, ch: char) -> u32 {
        let mut i = from as usize;
        let bytes = self.src.as_bytes();
        let mut k = self
            .comments
            .partition_point(|c| (c.span.start as usize) < i);
        while i < bytes.len() {
            if let Some(c) = self.comments.get(k).filter(|c| c.span.start as usize == i) {
                i = c.span.end as usize;
                k += 1;
                continue;
            }
            if bytes[i] == ch as u8 {
                return i as u32;
            }
            i += 1;
        }
        from
    }

    /// `{` at `open` plus the comments on its line after it.
    fn open_brace(&mut self, open: u32) -> Vec<Doc> {
        let mut out = vec![text("{")];
        out.extend(self.trailing(open + 1));
        out
    }

    /// `{ lines }` where `lines` came from [`Self::lines`].
    fn braced(mut open: Vec<Doc>, lines: Vec<Doc>) -> Doc {
        if lines.is_empty() && open.len() == 1 {
            return text("{}");
        }
        open.push(Doc::Nest(lines));
        open.push(Doc::Hard);
        open.push(text("}"));
        Doc::Concat(open)
    }

    /// A comma-separated list in brackets, on one line when it fits, else
    /// one item per line with a trailing comma.
    fn bracketed<T>(
        &mut self,
        open: &str,
        items: &[T],
        span: impl Fn(&T) -> Entry,
        print: impl FnMut(&mut Self, &T) -> Doc,
        close_at: u32,
        close: &str,
    ) -> Doc {
        self.bracketed_with(open, items, span, print, close_at, close, Doc::Soft)
    }

    /// [`Self::bracketed`] with `edge` inside the brackets (`Line` for `{ a }`).
    #[allow(clippy::too_many_arguments)]
    fn bracketed_with<T>(
        &mut self,
        open: &str,
        items: &[T],
        span: impl Fn(&T) -> Entry,
        mut print: impl FnMut(&mut Self, &T) -> Doc,
        close_at: u32,
        close: &str,
        edge: Doc,
    ) -> Doc {
        let mut inner = vec![edge.clone()];
        for (i, item) in items.iter().enumerate() {
            let Entry { start, end } = span(item);
            if i > 0 {
                inner.push(Doc::Line);
            }
            inner.extend(self.list_slot(start));
            inner.push(print(self, item));
            if i + 1 < items.len() {
                inner.push(text(","));
            } else {
                inner.push(Doc::IfBreak(","));
            }
            // Comments inside the item that nothing took: after it, ending
            // the line (where they are trailing comments the next time).
            while let Some(c) = self.peek() {
                if c.span.start >= end {
                    break;
                }
                let c = c.clone();
                self.next += 1;
                inner.push(text(" "));
                inner.push(text(self.comment_text(&c)));
                inner.push(Doc::BreakParent);
            }
            inner.extend(self.trailing(end));
        }
        let mut dangling = false;
        while let Some(c) = self.peek() {
            if c.span.start >= close_at {
                break;
            }
            let c = c.clone();
            self.next += 1;
            if !items.is_empty() || dangling {
                inner.push(Doc::Hard);
            }
            inner.push(text(self.comment_text(&c)));
            inner.push(Doc::BreakParent);
            dangling = true;
        }
        if items.is_empty() && !dangling {
            return text(format!("{open}{close}"));
        }
        // One item hugs its brackets (a long prompt stays `ask("...")`)
        // unless a comment forces lines.
        if items.len() == 1 && !dangling {
            let hugged: Vec<Doc> = inner
                .iter()
                .filter(|d| !matches!(d, Doc::Soft | Doc::Line | Doc::IfBreak(_)))
                .cloned()
                .collect();
            if !super::doc::has_hard(&hugged) {
                let pad = if matches!(edge, Doc::Line) { " " } else { "" };
                let mut v = vec![text(format!("{open}{pad}"))];
                v.extend(hugged);
                v.push(text(format!("{pad}{close}")));
                return Doc::Concat(v);
            }
        }
        group(vec![text(open), Doc::Nest(inner), edge, text(close)])
    }

    // ------------------------------------------------------------ file

    pub fn file(&mut self, f: &File) -> Doc {
        let end = self.src.len() as u32;
        // Imports first (the parser accepts them nowhere else), one per
        // line; a blank line after them and between agents.
        let items: Vec<Top<'_>> = f
            .imports
            .iter()
            .map(Top::Import)
            .chain(f.agents.iter().map(Top::Agent))
            .collect();
        let imports = f.imports.len();
        let mut lines = self.lines(
            0,
            &items,
            |t| match t {
                Top::Import(i) => Entry {
                    start: i.span.start,
                    end: i.span.end,
                },
                Top::Agent(a) => Entry {
                    start: a.span.start,
                    end: a.span.end,
                },
            },
            |p, t| match t {
                Top::Import(i) => text(format!("import {}", p.slice(i.path_span))),
                Top::Agent(a) => p.agent(a),
            },
            "",
            end,
            |i| i > imports || (i == imports && imports > 0),
        );
        // `lines` starts with a line break; a file starts with its first line.
        if matches!(lines.first(), Some(Doc::Hard)) {
            lines.remove(0);
        }
        lines.push(Doc::Hard);
        Doc::Concat(lines)
    }

    /// The source text of `span` (a literal is copied as written).
    fn slice(&self, span: ais_ir::Span) -> &str {
        self.src.get(span.range()).unwrap_or("")
    }

    fn agent(&mut self, a: &Agent) -> Doc {
        let open = self.find(a.name.span.end, '{');
        let head = self.open_brace(open);
        let close = a.span.end.saturating_sub(1);
        let lines = self.lines(
            open + 1,
            &a.members,
            |m| {
                let s = member_span(m);
                Entry {
                    start: s.start,
                    end: s.end,
                }
            },
            |p, m| p.member(m),
            "",
            close,
            |_| false,
        );
        Doc::Concat(vec![
            text(format!("agent {} ", a.name.name)),
            Self::braced(head, lines),
        ])
    }

    fn member(&mut self, m: &Member) -> Doc {
        match m {
            Member::Memory(decls, span) => self.entries_block(
                "memory",
                *span,
                decls,
                |d| d.span,
                |_, d| text(format!("{}: {}", d.name.name, d.tier.name)),
            ),
            Member::Beliefs(bs, span) => self.entries_block(
                "beliefs",
                *span,
                bs,
                |b| b.span,
                |p, b| {
                    let mut v = vec![text(format!("{}: ", b.name.name))];
                    if b.from {
                        v.push(text("from "));
                    }
                    v.push(p.expr(&b.value, ASSIGN));
                    Doc::Concat(v)
                },
            ),
            Member::Goals(gs, span) => {
                self.entries_block("goals", *span, gs, |g| g.span, |p, g| p.goal(g))
            }
            Member::Capability(c) => {
                let mut v = self.decorators(&c.decorators);
                v.push(text("capability "));
                v.push(text(self.name_as_written(&c.name)));
                let close = self.find(c.params.last().map_or(c.name.span.end, |p| p.span.end), ')');
                v.push(self.params(&c.params, close));
                if let Some(t) = &c.ret {
                    v.push(text(format!(" -> {}", type_text(t))));
                }
                v.push(text(";"));
                Doc::Concat(v)
            }
            Member::Flow(f) => {
                let mut v = self.decorators(&f.decorators);
                v.push(text(format!("flow {}", f.name.name)));
                if !f.params.is_empty() || f.ret.is_some() {
                    let close =
                        self.find(f.params.last().map_or(f.name.span.end, |p| p.span.end), ')');
                    v.push(self.params(&f.params, close));
                }
                if let Some(t) = &f.ret {
                    v.push(text(format!(" -> {}", type_text(t))));
                }
                v.push(text(" "));
                v.push(self.block(&f.body));
                Doc::Concat(v)
            }
            Member::Handler(h) => self.handler(h),
            // The string as written (escapes and holes kept).
            Member::Context(lit, _) => Doc::Concat(vec![
                text("context: "),
                text(self.src.get(lit.span.range()).unwrap_or("")),
            ]),
            Member::Tools(names, span) | Member::Discoverable(names, span) => {
                let close = span.end.saturating_sub(1);
                let list = self.bracketed(
                    "[",
                    names,
                    |n| Entry {
                        start: n.span.start,
                        end: n.span.end,
                    },
                    |_, n| text(n.name.clone()),
                    close,
                    "]",
                );
                let key = if matches!(m, Member::Tools(..)) {
                    "tools: "
                } else {
                    "discoverable: "
                };
                Doc::Concat(vec![text(key), list])
            }
            // Files with syntax errors are never formatted.
            Member::Error(span) => text(self.src.get(span.range()).unwrap_or("")),
        }
    }

    fn name_as_written(&self, name: &Ident) -> String {
        match self.src.get(name.span.range()) {
            Some(s) if s.starts_with(['"', '\'']) => s.to_string(),
            _ => name.name.clone(),
        }
    }

    fn decorators(&mut self, ds: &[Decorator]) -> Vec<Doc> {
        ds.iter()
            .map(|d| text(format!("@{} ", d.name.name)))
            .collect()
    }

    fn params(&mut self, ps: &[Param], close: u32) -> Doc {
        self.bracketed(
            "(",
            ps,
            |p| Entry {
                start: p.span.start,
                end: p.span.end,
            },
            |_, p| text(param_text(p)),
            close,
            ")",
        )
    }

    /// `memory { ... }`, `beliefs { ... }`, `goals { ... }`: on one line
    /// when they fit, else one entry per line.
    fn entries_block<T>(
        &mut self,
        keyword: &str,
        span: ais_ir::Span,
        items: &[T],
        item_span: impl Fn(&T) -> ais_ir::Span,
        print: impl FnMut(&mut Self, &T) -> Doc,
    ) -> Doc {
        let list = self.bracketed_with(
            "{",
            items,
            |t| {
                let s = item_span(t);
                Entry {
                    start: s.start,
                    end: s.end,
                }
            },
            print,
            span.end.saturating_sub(1),
            "}",
            Doc::Line,
        );
        Doc::Concat(vec![text(format!("{keyword} ")), list])
    }

    fn goal(&mut self, g: &Goal) -> Doc {
        let desc = g
            .description
            .as_ref()
            .map(|d| self.src.get(d.span.range()).unwrap_or("\"\"").to_string());
        let prio = g
            .priority
            .as_ref()
            .map(|(_, s)| self.src.get(s.range()).unwrap_or("0").to_string());
        text(match (desc, prio) {
            (Some(d), Some(p)) => format!("{}: {d} priority {p}", g.name.name),
            (Some(d), None) => format!("{}: {d}", g.name.name),
            (None, Some(p)) => format!("{}({p})", g.name.name),
            (None, None) => format!("{}()", g.name.name),
        })
    }

    fn handler(&mut self, h: &Handler) -> Doc {
        let mut v = vec![text(format!("on {}", h.event_name()))];
        if !h.fields.is_empty() {
            let open = self.find(h.event.last().map_or(h.span.start, |i| i.span.end), '{');
            let close = self.find(h.fields.last().map_or(open, |p| p.span.end), '}');
            let _ = open;
            let fields = self.bracketed_with(
                "{",
                &h.fields,
                |p| Entry {
                    start: p.span.start,
                    end: p.span.end,
                },
                |_, p| text(param_text(p)),
                close,
                "}",
                Doc::Line,
            );
            v.push(text(" "));
            v.push(fields);
        }
        if let Some(g) = &h.guard {
            v.push(text(" if "));
            v.push(self.expr(g, ASSIGN));
        }
        v.push(text(" => "));
        // `=> expr`: the body block is the statement itself (no braces).
        match h.body.stmts.as_slice() {
            [s] if s.span == h.body.span => {
                if let StmtKind::Expr(e) = &s.kind {
                    v.push(self.expr(e, ASSIGN));
                } else {
                    v.push(self.stmt(s));
                }
            }
            _ => v.push(self.block(&h.body)),
        }
        Doc::Concat(v)
    }

    // ------------------------------------------------------------ statements

    fn block(&mut self, b: &Block) -> Doc {
        let head = self.open_brace(b.span.start);
        let lines = self.stmt_lines(b);
        Self::braced(head, lines)
    }

    fn stmt_lines(&mut self, b: &Block) -> Vec<Doc> {
        self.lines(
            b.span.start + 1,
            &b.stmts,
            |s| Entry {
                start: s.span.start,
                end: s.span.end,
            },
            |p, s| p.stmt(s),
            "",
            b.span.end.saturating_sub(1),
            |_| false,
        )
    }

    fn stmt(&mut self, s: &Stmt) -> Doc {
        match &s.kind {
            StmtKind::Let { name, ty, value } => {
                let mut v = vec![text(format!("let {}", name.name))];
                if let Some(t) = ty {
                    v.push(text(format!(": {}", type_text(t))));
                }
                v.push(text(" = "));
                v.push(self.expr(value, ASSIGN));
                Doc::Concat(v)
            }
            StmtKind::Bind { value, name } => Doc::Concat(vec![
                self.expr(value, ASSIGN),
                text(format!(" -> {}", name.name)),
            ]),
            StmtKind::Return(None) => text("return"),
            StmtKind::Return(Some(e)) => Doc::Concat(vec![text("return "), self.expr(e, ASSIGN)]),
            StmtKind::If { .. } => self.if_chain(s),
            StmtKind::Parallel(b) => Doc::Concat(vec![text("parallel "), self.block(b)]),
            StmtKind::Loop { var, iter, body } => Doc::Concat(vec![
                text(format!("loop ({} in ", var.name)),
                self.expr(iter, ASSIGN),
                text(") "),
                self.block(body),
            ]),
            StmtKind::Try { body, err, handler } => {
                let mut v = vec![text("try "), self.block(body), text(" catch ")];
                if let Some(e) = err {
                    v.push(text(format!("({}) ", e.name)));
                }
                v.push(self.block(handler));
                Doc::Concat(v)
            }
            StmtKind::Expr(e) => self.expr(e, ASSIGN),
            // Files with syntax errors are never formatted.
            StmtKind::Error(_) => text(self.src.get(s.span.range()).unwrap_or("")),
        }
    }

    fn if_chain(&mut self, s: &Stmt) -> Doc {
        let StmtKind::If {
            cond,
            then,
            otherwise,
        } = &s.kind
        else {
            return self.stmt(s);
        };
        let mut v = vec![
            text("if ("),
            self.expr(cond, ASSIGN),
            text(") "),
            self.block(then),
        ];
        if let Some(o) = otherwise {
            v.push(text(" else "));
            match o.stmts.as_slice() {
                // `else if`: the block is the nested statement (no braces).
                [inner] if inner.span == o.span && matches!(inner.kind, StmtKind::If { .. }) => {
                    v.push(self.if_chain(inner));
                }
                _ => v.push(self.block(o)),
            }
        }
        Doc::Concat(v)
    }

    // ------------------------------------------------------------ expressions

    /// `e` in a context that needs at least precedence `min`.
    fn expr(&mut self, e: &Expr, min: u8) -> Doc {
        // Comments go inside added parentheses: parsed again, the
        // expression starts after its `(`, so they stay where they are.
        let parens = level(e) < min;
        let mut v = if parens { vec![text("(")] } else { vec![] };
        v.extend(self.inline_before(e.span.start));
        v.push(self.expr_inner(e));
        if parens {
            v.push(text(")"));
        }
        if v.len() == 1 {
            v.remove(0)
        } else {
            Doc::Concat(v)
        }
    }

    fn expr_inner(&mut self, e: &Expr) -> Doc {
        match &e.kind {
            ExprKind::Str(_) | ExprKind::Number(_) => {
                text(self.src.get(e.span.range()).unwrap_or(""))
            }
            ExprKind::Bool(b) => text(if *b { "true" } else { "false" }),
            ExprKind::Null => text("null"),
            ExprKind::Var(i) => text(i.name.clone()),
            ExprKind::List(items) => self.bracketed(
                "[",
                items,
                |x| Entry {
                    start: x.span.start,
                    end: x.span.end,
                },
                |p, x| p.expr(x, ASSIGN),
                e.span.end.saturating_sub(1),
                "]",
            ),
            ExprKind::Index(x, i) => Doc::Concat(vec![
                self.expr(x, POSTFIX),
                text("["),
                self.expr(i, ASSIGN),
                text("]"),
            ]),
            ExprKind::Member(x, m) => {
                Doc::Concat(vec![self.expr(x, POSTFIX), text(format!(".{}", m.name))])
            }
            ExprKind::Call { callee, args } if is_pipe(callee, args) => {
                let first = self.expr(&args[0], PIPE);
                let f = self.expr(callee, POSTFIX);
                let rest = self.args(&args[1..], e.span.end);
                Doc::Concat(vec![first, text(" |> "), f, rest])
            }
            ExprKind::Call { callee, args } => {
                let f = self.expr(callee, POSTFIX);
                let a = self.args(args, e.span.end);
                Doc::Concat(vec![f, a])
            }
            ExprKind::Named(n, v) => {
                Doc::Concat(vec![text(format!("{}: ", n.name)), self.expr(v, ASSIGN)])
            }
            ExprKind::Unary(op, x) => {
                // `-(-x)`, not `--x`.
                let min = match (&x.kind, op) {
                    (ExprKind::Unary(UnaryOp::Neg, _), UnaryOp::Neg) => PRIMARY,
                    _ => UNARY,
                };
                Doc::Concat(vec![
                    text(match op {
                        UnaryOp::Neg => "-",
                        UnaryOp::Not => "!",
                    }),
                    self.expr(x, min),
                ])
            }
            ExprKind::Binary(op, a, b) => {
                let l = binary_level(*op);
                Doc::Concat(vec![
                    self.expr(a, l),
                    text(format!(" {} ", op.symbol())),
                    self.expr(b, l + 1),
                ])
            }
            ExprKind::Assign(t, v) => {
                Doc::Concat(vec![self.expr(t, PIPE), text(" = "), self.expr(v, ASSIGN)])
            }
            ExprKind::Switch(sw) => self.switch(sw),
            // Files with syntax errors are never formatted.
            ExprKind::Error => text(self.src.get(e.span.range()).unwrap_or("")),
        }
    }

    /// `(args)`; `end` is the end of the call (just after its `)`).
    fn args(&mut self, args: &[Expr], end: u32) -> Doc {
        self.bracketed(
            "(",
            args,
            |x| Entry {
                start: x.span.start,
                end: x.span.end,
            },
            |p, x| p.expr(x, ASSIGN),
            end.saturating_sub(1),
            ")",
        )
    }

    fn switch(&mut self, sw: &Switch) -> Doc {
        let head = vec![text("switch "), self.expr(&sw.scrutinee, ASSIGN), text(" ")];
        let open = self.find(sw.scrutinee.span.end, '{');
        let brace = self.open_brace(open);
        let lines = self.lines(
            open + 1,
            &sw.cases,
            |c| Entry {
                start: c.span.start,
                end: c.span.end,
            },
            |p, c| p.case(c),
            "",
            sw.span.end.saturating_sub(1),
            |_| false,
        );
        let mut v = head;
        v.push(Self::braced(brace, lines));
        Doc::Concat(v)
    }

    fn case(&mut self, c: &Case) -> Doc {
        let mut v = match &c.pattern {
            Some(p) => vec![text("case "), self.expr(p, PRIMARY), text(" => ")],
            None => vec![text("default => ")],
        };
        v.push(match &c.body {
            CaseBody::Expr(e) => self.expr(e, ASSIGN),
            CaseBody::Block(b) => self.block(b),
        });
        Doc::Concat(v)
    }
}

fn member_span(m: &Member) -> ais_ir::Span {
    match m {
        Member::Memory(_, s)
        | Member::Beliefs(_, s)
        | Member::Goals(_, s)
        | Member::Tools(_, s)
        | Member::Discoverable(_, s)
        | Member::Context(_, s)
        | Member::Error(s) => *s,
        Member::Capability(c) => c.span,
        Member::Flow(f) => f.span,
        Member::Handler(h) => h.span,
    }
}

fn type_text(t: &TypeExpr) -> String {
    match t {
        TypeExpr::Named(i) => i.name.clone(),
        TypeExpr::List(inner, _) => format!("list<{}>", type_text(inner)),
    }
}

fn param_text(p: &Param) -> String {
    match &p.ty {
        Some(t) => format!("{}: {}", p.name.name, type_text(t)),
        None => p.name.name.clone(),
    }
}
