//! Rendering a generated [`Case`] to AIS source, resolving variable indices
//! against the variables in scope so the program always checks.

use super::*;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ty {
    Num,
    Str,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Which {
    Main,
    Step,
    Work,
}

struct Ctx {
    which: Which,
    features: Features,
    /// Inside a `try` body (effects there are gated by `effects_in_try`).
    in_try: bool,
    /// Inside a `try` body that fails (LLM/tool calls there are gated by
    /// `calls_in_failing_try`).
    in_failing_try: bool,
    /// Inside a `try` body with a pure op that may fail: it may fail before
    /// any call starts, so even side-effecting tool calls (ordered only
    /// among themselves) may or may not be made.
    in_pure_failing_try: bool,
    /// Variables in scope, innermost last; `true` when assignable without an
    /// effect (a local, not a belief).
    vars: Vec<(String, Ty, bool)>,
    next: usize,
    out: String,
    indent: usize,
}

impl Ctx {
    fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn fresh(&mut self) -> String {
        self.next += 1;
        format!("v{}", self.next)
    }

    fn pick(&self, ty: Ty, i: u8, local_only: bool) -> Option<String> {
        let c: Vec<&String> = self
            .vars
            .iter()
            .filter(|(_, t, local)| *t == ty && (*local || !local_only))
            .map(|(n, _, _)| n)
            .collect();
        (!c.is_empty()).then(|| c[i as usize % c.len()].clone())
    }

    fn calls_ok(&self) -> bool {
        !self.in_failing_try || self.features.calls_in_failing_try
    }

    fn effects_ok(&self) -> bool {
        (!self.in_try || self.features.effects_in_try)
            && (self.which == Which::Main || self.features.effects_in_calls)
    }

    fn num(&self, e: &NumE) -> String {
        match e {
            NumE::Lit(n) => n.to_string(),
            NumE::Var(i) => self.pick(Ty::Num, *i, false).unwrap_or_else(|| "1".into()),
            NumE::Add(a, b) => format!("({} + {})", self.num(a), self.num(b)),
            NumE::Sub(a, b) => format!("({} - {})", self.num(a), self.num(b)),
            NumE::Times(a, k) => format!("({} * {k})", self.num(a)),
            // A flow call is gated like the calls its body makes.
            NumE::Step(a) if self.which == Which::Main && self.effects_ok() && self.calls_ok() => {
                format!("step({})", self.num(a))
            }
            NumE::Step(a) => self.num(a),
            NumE::Record
                if self.features.side_effecting_tools
                    && self.effects_ok()
                    && (!self.in_pure_failing_try || self.features.calls_in_failing_try) =>
            {
                "(0 + inv(\"t.record\", \"{{}}\"))".into()
            }
            NumE::Record => "2".into(),
        }
    }

    fn text(&self, e: &StrE) -> String {
        match e {
            StrE::Lit(i) => format!("\"{}\"", WORDS[*i as usize % WORDS.len()]),
            StrE::Var(i) => self
                .pick(Ty::Str, *i, false)
                .unwrap_or_else(|| "\"none\"".into()),
            StrE::Template(i) => {
                let all: Vec<&String> = self.vars.iter().map(|(n, _, _)| n).collect();
                match all.get(*i as usize % all.len().max(1)) {
                    Some(n) => format!("\"t<{{{n}}}>\""),
                    None => "\"t\"".into(),
                }
            }
            StrE::Concat(a, b) => format!("({} + {})", self.text(a), self.text(b)),
            StrE::ConcatNum(a, b) => format!("({} + {})", self.text(a), self.num(b)),
            StrE::Llm(_, p, _) | StrE::Structured(_, p) if !self.calls_ok() => self.text(p),
            StrE::Lookup(_) if !self.calls_ok() => "\"found\"".into(),
            StrE::Llm(k, p, c) => {
                let op = TEXT_OPS[*k as usize % TEXT_OPS.len()];
                match c {
                    Some(c) => format!("{op}(\"q \" + {}, {})", self.text(p), self.text(c)),
                    None => format!("{op}(\"q \" + {})", self.text(p)),
                }
            }
            StrE::Structured(k, p) => match k % 3 {
                0 => format!("(\"\" + reflect({}))", self.text(p)),
                1 => format!(
                    "(\"\" + verify(\"claim\" + {}, \"evidence\"))",
                    self.text(p)
                ),
                _ => format!(
                    "(\"\" + plan(\"goal\" + {}).steps[0].description)",
                    self.text(p)
                ),
            },
            StrE::Work(a) if self.which == Which::Main && self.effects_ok() && self.calls_ok() => {
                format!("B.work({})", self.text(a))
            }
            StrE::Work(a) => self.text(a),
            StrE::Lookup(i) => {
                let v = self
                    .pick(Ty::Str, *i, false)
                    .unwrap_or_else(|| "none".into());
                let v = if v.starts_with('"') {
                    "none".to_string()
                } else {
                    format!("{{{v}}}")
                };
                format!("(\"\" + inv(\"t.lookup\", \"{{{{\\\"q\\\": \\\"{v}\\\"}}}}\"))")
            }
            StrE::Qmem(q, t) => {
                let q = self
                    .pick(Ty::Str, *q, false)
                    .unwrap_or_else(|| "\"*\"".into());
                format!("(\"\" + qmem({q}, \"{}\"))", TIERS[*t as usize % 3])
            }
        }
    }

    fn cond(&self, c: &Cond) -> String {
        match c {
            Cond::Less(a, b) => format!("{} < {}", self.num(a), self.num(b)),
            Cond::NumEq(a, b) => format!("{} == {}", self.num(a), self.num(b)),
            Cond::StrEq(a, w) => format!(
                "{} == \"{}\"",
                self.text(a),
                WORDS[*w as usize % WORDS.len()]
            ),
            Cond::Not(c) => format!("!({})", self.cond(c)),
            Cond::And(a, b) => format!("({}) && ({})", self.cond(a), self.cond(b)),
            Cond::Truthy(a) => format!("!!{}", self.text(a)),
        }
    }

    fn ret(&self, s: &StrE, n: &NumE) -> String {
        match self.which {
            Which::Step => format!("return {}", self.num(n)),
            _ => format!("return {}", self.text(s)),
        }
    }

    fn block(&mut self, stmts: &[Stmt]) {
        let mark = self.vars.len();
        self.indent += 1;
        for s in stmts {
            self.stmt(s);
        }
        self.indent -= 1;
        self.vars.truncate(mark);
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::LetNum(e) => {
                let v = self.num(e);
                let name = self.fresh();
                self.line(&format!("let {name} = {v}"));
                self.vars.push((name, Ty::Num, true));
            }
            Stmt::LetStr(e) => {
                let v = self.text(e);
                let name = self.fresh();
                self.line(&format!("let {name} = {v}"));
                self.vars.push((name, Ty::Str, true));
            }
            Stmt::SetNum(i, e) => {
                if let Some(name) = self.pick(Ty::Num, *i, !self.effects_ok()) {
                    let v = self.num(e);
                    self.line(&format!("{name} = {v}"));
                }
            }
            Stmt::SetStr(i, e) => {
                if let Some(name) = self.pick(Ty::Str, *i, !self.effects_ok()) {
                    let v = self.text(e);
                    self.line(&format!("{name} = {v}"));
                }
            }
            Stmt::Print(a, b) if self.effects_ok() => {
                let line = match b {
                    Some(b) => format!("print({}, {})", self.text(a), self.num(b)),
                    None => format!("print({})", self.text(a)),
                };
                self.line(&line);
            }
            Stmt::Umem(v, t, k) if self.effects_ok() => {
                let tier = TIERS[*t as usize % 3];
                let line = match k {
                    Some(k) => format!("umem({}, \"{tier}\", \"k{k}\")", self.text(v)),
                    None => format!("umem({}, \"{tier}\")", self.text(v)),
                };
                self.line(&line);
            }
            Stmt::Belief(n, s) if self.effects_ok() && self.which != Which::Work => {
                let line = format!("count = count + {}", self.num(n));
                self.line(&line);
                let line = format!("mood = {}", self.text(s));
                self.line(&line);
            }
            Stmt::Print(..) | Stmt::Umem(..) | Stmt::Belief(..) => {}
            // In `main` only: a failure in `step` or `B.work` would make
            // every `try` body calling them one that may fail.
            Stmt::Fail(f, unused) if self.which == Which::Main => {
                let v = match f {
                    FailE::Div(a, b) => format!("({} / {})", self.num(a), self.num(b)),
                    FailE::Mod(a, b) => format!("({} % {})", self.num(a), self.num(b)),
                    FailE::Index(n, i) => {
                        let items: Vec<String> = (1..=*n).map(|k| (k * 10).to_string()).collect();
                        format!("[{}][{}]", items.join(", "), self.num(i))
                    }
                };
                let name = self.fresh();
                if *unused {
                    self.line(&format!("let _{name} = {v}"));
                } else {
                    self.line(&format!("let {name} = {v}"));
                    self.vars.push((name, Ty::Num, true));
                }
            }
            Stmt::Fail(..) => {}
            Stmt::If(c, t, e) => {
                let c = self.cond(c);
                self.line(&format!("if ({c}) {{"));
                self.block(t);
                if e.is_empty() {
                    self.line("}");
                } else {
                    self.line("} else {");
                    self.block(e);
                    self.line("}");
                }
            }
            Stmt::Guard(c, s, n) => {
                let line = format!("if ({}) {{ {} }}", self.cond(c), self.ret(s, n));
                self.line(&line);
            }
            Stmt::Return(s, n) => {
                let line = self.ret(s, n);
                self.line(&line);
            }
            Stmt::Loop(n, body) => {
                let items: Vec<String> = (1..=*n).map(|i| (i * 10).to_string()).collect();
                let it = self.fresh();
                self.line(&format!("loop ({it} in [{}]) {{", items.join(", ")));
                self.vars.push((it, Ty::Num, false));
                self.block(body);
                self.vars.pop();
                self.line("}");
            }
            Stmt::Try(body, fails, handler) => {
                self.line("try {");
                // A pure op that may fail makes the body one that may fail:
                // calls in it (the failing tool call too) are gated like
                // those of a failing body, since the pure op may fail before
                // they start.
                let pure_fails = self.which == Which::Main && may_fail(body);
                // Inside a failing body the nested failure is a call too.
                let fails = fails.filter(|_| {
                    self.calls_ok() && (!pure_fails || self.features.calls_in_failing_try)
                });
                let was = (self.in_try, self.in_failing_try, self.in_pure_failing_try);
                self.in_try = true;
                self.in_failing_try |= fails.is_some() || pure_fails;
                self.in_pure_failing_try |= pure_fails;
                let mark = self.vars.len();
                self.indent += 1;
                let at = fails.map(|f| f as usize % (body.len() + 1));
                for (i, s) in body.iter().enumerate() {
                    if at == Some(i) {
                        self.line("inv(\"t.fail\", \"{{}}\")");
                    }
                    self.stmt(s);
                }
                if at == Some(body.len()) {
                    self.line("inv(\"t.fail\", \"{{}}\")");
                }
                self.indent -= 1;
                self.vars.truncate(mark);
                (self.in_try, self.in_failing_try, self.in_pure_failing_try) = was;
                self.line("} catch {");
                self.block(handler);
                self.line("}");
            }
            Stmt::Switch(scrutinee, arms, default) => {
                let scrutinee = self.text(scrutinee);
                self.line(&format!("switch {scrutinee} {{"));
                self.indent += 1;
                for (i, arm) in arms.iter().enumerate() {
                    self.line(&format!("case \"{}\" => {{", CASES[i % CASES.len()]));
                    let mark = self.vars.len();
                    self.block(arm);
                    self.indent += 1;
                    let last = self.text(&StrE::Template(i as u8));
                    self.line(&format!("\"arm{i} \" + {last}"));
                    self.indent -= 1;
                    self.vars.truncate(mark);
                    self.line("}");
                }
                let d = self.text(default);
                self.line(&format!("default => {d}"));
                self.indent -= 1;
                let name = self.fresh();
                self.line(&format!("}} -> {name}"));
                self.vars.push((name, Ty::Str, true));
            }
        }
    }
}

/// The test tools share one provider, `t` (see `host_with_tools`): calls
/// that may have side effects (`t.record`, `t.fail`) keep program order on
/// its chain, as calls to one MCP server do, so a call after a failing one
/// in a `try` body never runs on either side. (Calls to *different*
/// providers in a failing body may or may not run on the VM, which the
/// sequential oracle cannot mirror.) `t.lookup` is declared read-only, so
/// lookups still run in parallel.
const READ_ONLY_LOOKUP: &str = "@read_only capability \"t.lookup\"(q: str) -> json;";

/// The program's source, with `features` deciding what may be generated.
pub fn render(case: &Case, features: Features) -> String {
    let mut ctx = Ctx {
        which: Which::Main,
        features,
        in_try: false,
        in_failing_try: false,
        in_pure_failing_try: false,
        vars: Vec::new(),
        next: 0,
        out: String::new(),
        indent: 0,
    };
    let beliefs = [
        ("mood".to_string(), Ty::Str, false),
        ("count".to_string(), Ty::Num, false),
    ];
    ctx.line("agent A {");
    ctx.indent += 1;
    ctx.line("beliefs { mood: \"calm\", count = 0 }");
    ctx.line(READ_ONLY_LOOKUP);
    ctx.line("@entry flow main(n: number, s: str) -> str {");
    ctx.vars = beliefs.to_vec();
    ctx.vars.push(("n".into(), Ty::Num, true));
    ctx.vars.push(("s".into(), Ty::Str, true));
    ctx.block(&case.main);
    ctx.indent += 1;
    ctx.line("return s + \" \" + n + \" \" + mood + \" \" + count");
    ctx.indent -= 1;
    ctx.line("}");
    ctx.which = Which::Step;
    ctx.line("flow step(x: number) -> number {");
    ctx.vars = beliefs.to_vec();
    ctx.vars.push(("x".into(), Ty::Num, true));
    ctx.block(&case.step);
    ctx.indent += 1;
    ctx.line("return x + 1");
    ctx.indent -= 1;
    ctx.line("}");
    ctx.indent -= 1;
    ctx.line("}");
    ctx.which = Which::Work;
    ctx.line("agent B {");
    ctx.indent += 1;
    ctx.line(READ_ONLY_LOOKUP);
    ctx.line("flow work(t: str) -> str {");
    ctx.vars = vec![("t".into(), Ty::Str, true)];
    ctx.block(&case.work);
    ctx.indent += 1;
    ctx.line("return \"w \" + t");
    ctx.indent -= 1;
    ctx.line("}");
    ctx.indent -= 1;
    ctx.line("}");
    ctx.out
}
