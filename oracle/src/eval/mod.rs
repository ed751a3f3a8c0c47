//! The tree-walking evaluator: one flow body at a time, statements in
//! source order, calls evaluated to completion where they are written.
//! Written from docs/language.md and docs/runtime.md; it shares nothing with
//! lowering, the IR or the VM's op semantics. Only the backend and host
//! traits are shared, so prompts and tool calls can be compared.
//!
//! Statements and expressions are here; calls (flows, operations, tools,
//! the model) in `calls`.

use crate::error::OracleError;
use crate::value::{self, text};
use crate::world::World;
use ais_compiler::syntax::ast::{
    Agent, BinaryOp, Block, CaseBody, Expr, ExprKind, Flow, Member, Stmt, StmtKind, Switch, UnaryOp,
};
use ais_compiler::syntax::lexer::{StrLit, StrPart};
use ais_vm::llm::LlmBackend;
use ais_vm::Host;
use serde_json::Value as Json;
use std::collections::HashMap;

mod calls;

/// Deepest flow-call nesting, as the VM's default `max_call_depth`.
const MAX_CALL_DEPTH: usize = 512;

/// Why evaluation stopped early: a failure (caught by `try`) or a
/// `return` (caught by the flow call that started the body).
pub(crate) enum Unwind {
    Fail(OracleError),
    Return(Json),
}

impl From<OracleError> for Unwind {
    fn from(e: OracleError) -> Unwind {
        Unwind::Fail(e)
    }
}

type Eval<T> = Result<T, Unwind>;

fn fail<T>(code: &str, message: impl Into<String>) -> Eval<T> {
    Err(Unwind::Fail(OracleError::new(code, message)))
}

/// One running flow body: its agent and its block scopes (innermost last).
struct Frame<'p> {
    agent: &'p Agent,
    scopes: Vec<HashMap<String, Json>>,
}

impl Frame<'_> {
    fn lookup(&self, name: &str) -> Option<&Json> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }
}

/// The interpreter of one run.
pub struct Interpreter<'p> {
    agents: &'p [Agent],
    backend: &'p dyn LlmBackend,
    host: &'p dyn Host,
    pub world: World,
    depth: usize,
}

impl<'p> Interpreter<'p> {
    pub fn new(agents: &'p [Agent], backend: &'p dyn LlmBackend, host: &'p dyn Host) -> Self {
        Interpreter {
            agents,
            backend,
            host,
            world: World::default(),
            depth: 0,
        }
    }

    fn agent(&self, name: &str) -> Result<&'p Agent, OracleError> {
        self.agents
            .iter()
            .find(|a| a.name.name == name)
            .ok_or_else(|| OracleError::new("agent.unknown", format!("no agent `{name}`")))
    }

    /// Runs every agent's `beliefs {}` initialisers, in source order.
    pub fn init_beliefs(&mut self) -> Result<(), OracleError> {
        for agent in self.agents {
            for member in &agent.members {
                if let Member::Beliefs(beliefs, _) = member {
                    for b in beliefs {
                        let mut frame = Frame {
                            agent,
                            scopes: vec![HashMap::new()],
                        };
                        let v = self.eval(&mut frame, &b.value).map_err(settle)?;
                        self.world
                            .beliefs
                            .insert((agent.name.name.clone(), b.name.name.clone()), v);
                    }
                }
            }
        }
        Ok(())
    }

    /// Calls `agent.flow(args)` and returns its result (`null` for void).
    pub fn call_flow(
        &mut self,
        agent: &'p Agent,
        flow: &'p Flow,
        args: Vec<Json>,
    ) -> Result<Json, OracleError> {
        if self.depth >= MAX_CALL_DEPTH {
            return Err(OracleError::new(
                "call.depth",
                "flow calls nested too deeply",
            ));
        }
        let scope = flow
            .params
            .iter()
            .map(|p| p.name.name.clone())
            .zip(args)
            .collect();
        let mut frame = Frame {
            agent,
            scopes: vec![scope],
        };
        self.depth += 1;
        let outcome = self.block(&mut frame, &flow.body, false);
        self.depth -= 1;
        match outcome {
            Ok(_) => Ok(Json::Null),
            Err(Unwind::Return(v)) => Ok(v),
            Err(Unwind::Fail(e)) => Err(e),
        }
    }

    /// Runs `block`; its value is that of its last expression statement
    /// (what a switch arm yields).
    fn block(&mut self, frame: &mut Frame<'p>, block: &'p Block, new_scope: bool) -> Eval<Json> {
        if new_scope {
            frame.scopes.push(HashMap::new());
        }
        let mut last = Json::Null;
        let mut outcome = Ok(());
        for stmt in &block.stmts {
            match self.stmt(frame, stmt) {
                Ok(v) => last = v,
                Err(u) => {
                    outcome = Err(u);
                    break;
                }
            }
        }
        if new_scope {
            frame.scopes.pop();
        }
        outcome.map(|()| last)
    }

    fn bind(frame: &mut Frame<'p>, name: &str, v: Json) {
        if let Some(scope) = frame.scopes.last_mut() {
            scope.insert(name.to_string(), v);
        }
    }

    /// Runs one statement; an expression statement gives its value.
    fn stmt(&mut self, frame: &mut Frame<'p>, stmt: &'p Stmt) -> Eval<Json> {
        match &stmt.kind {
            StmtKind::Let { name, value, .. } => {
                let v = self.eval(frame, value)?;
                Self::bind(frame, &name.name, v);
            }
            // docs/language.md: inside a block of an `if`, `switch`, `loop`
            // or `try`, `-> v` with `v` bound outside the block rebinds it.
            StmtKind::Bind { value, name } => {
                let v = self.eval(frame, value)?;
                let (inner, outer) =
                    frame
                        .scopes
                        .split_last()
                        .map_or((false, false), |(last, rest)| {
                            (
                                last.contains_key(&name.name),
                                rest.iter().any(|s| s.contains_key(&name.name)),
                            )
                        });
                if outer && !inner {
                    self.assign(frame, &name.name, v);
                } else {
                    Self::bind(frame, &name.name, v);
                }
            }
            StmtKind::Return(value) => {
                let v = match value {
                    Some(e) => self.eval(frame, e)?,
                    None => Json::Null,
                };
                return Err(Unwind::Return(v));
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                let c = self.eval(frame, cond)?;
                if value::truthy(&c) {
                    self.block(frame, then, true)?;
                } else if let Some(b) = otherwise {
                    self.block(frame, b, true)?;
                }
            }
            StmtKind::Parallel(b) => {
                self.block(frame, b, false)?;
            }
            StmtKind::Loop { var, iter, body } => {
                let items = match self.eval(frame, iter)? {
                    Json::Array(items) => items,
                    // docs/language.md: a string holding a JSON array loops
                    // over its elements, any other string over its
                    // non-empty lines.
                    Json::String(s) => match serde_json::from_str(&s) {
                        Ok(Json::Array(items)) => items,
                        _ => s
                            .lines()
                            .filter(|l| !l.trim().is_empty())
                            .map(|l| Json::String(l.to_string()))
                            .collect(),
                    },
                    other => return fail("type.not_list", format!("cannot loop over {other}")),
                };
                for item in items {
                    frame.scopes.push(HashMap::from([(var.name.clone(), item)]));
                    let r = self.block(frame, body, false);
                    frame.scopes.pop();
                    r?;
                }
            }
            StmtKind::Try { body, err, handler } => {
                self.try_catch(frame, body, err.as_ref().map(|e| e.name.as_str()), handler)?
            }
            StmtKind::Expr(e) => return self.eval(frame, e),
            StmtKind::Error(_) => return fail("oracle.parse", "statement failed to parse"),
        }
        Ok(Json::Null)
    }

    /// `try { body } catch (err) { handler }`: the body is all-or-nothing
    /// for the program's state (variables, memory, beliefs, prints,
    /// messages); LLM and tool calls it made are not undone.
    fn try_catch(
        &mut self,
        frame: &mut Frame<'p>,
        body: &'p Block,
        err: Option<&str>,
        handler: &'p Block,
    ) -> Eval<()> {
        let saved_scopes = frame.scopes.clone();
        let saved_world = self.world.clone();
        let saved_depth = self.depth;
        match self.block(frame, body, true) {
            Err(Unwind::Fail(e)) => {
                frame.scopes = saved_scopes;
                self.world = saved_world;
                self.depth = saved_depth;
                let mut scope = HashMap::new();
                if let Some(name) = err {
                    scope.insert(name.to_string(), e.to_value());
                }
                frame.scopes.push(scope);
                let r = self.block(frame, handler, false);
                frame.scopes.pop();
                r.map(|_| ())
            }
            other => other.map(|_| ()),
        }
    }

    fn template(&self, frame: &Frame<'p>, lit: &StrLit) -> Eval<String> {
        let mut out = String::new();
        for part in &lit.parts {
            match part {
                StrPart::Text(t) => out.push_str(t),
                StrPart::Interp(hole, _) => match self.hole(frame, hole)? {
                    Some(v) => out.push_str(&text(&v)),
                    // W0004: a hole naming nothing in scope stays literal.
                    None => {
                        out.push('{');
                        out.push_str(hole);
                        out.push('}');
                    }
                },
            }
        }
        Ok(out)
    }

    /// A template hole's value: its variable, then each field of its path,
    /// read as `x.f` is (failing the same way); `None` when the variable
    /// is not in scope.
    fn hole(&self, frame: &Frame<'p>, hole: &str) -> Eval<Option<Json>> {
        let mut segs = hole.split('.');
        let Some(mut v) = segs.next().and_then(|n| self.variable(frame, n)) else {
            return Ok(None);
        };
        for f in segs {
            v = value::member(&v, f)?;
        }
        Ok(Some(v))
    }

    /// A local (innermost first), else a belief of the frame's agent.
    fn variable(&self, frame: &Frame<'p>, name: &str) -> Option<Json> {
        frame.lookup(name).cloned().or_else(|| {
            self.world
                .beliefs
                .get(&(frame.agent.name.name.clone(), name.to_string()))
                .cloned()
        })
    }

    fn eval(&mut self, frame: &mut Frame<'p>, expr: &'p Expr) -> Eval<Json> {
        match &expr.kind {
            // Only read by the LLM operation it configures (`call_name`).
            ExprKind::Named(_, v) => self.eval(frame, v),
            ExprKind::Str(lit) => Ok(Json::String(self.template(frame, lit)?)),
            ExprKind::Number(n) => Ok(value::number(*n)?),
            ExprKind::Bool(b) => Ok(Json::Bool(*b)),
            ExprKind::Null => Ok(Json::Null),
            ExprKind::List(items) => {
                let mut out = Vec::with_capacity(items.len());
                for i in items {
                    out.push(self.eval(frame, i)?);
                }
                Ok(Json::Array(out))
            }
            ExprKind::Var(id) => match self.variable(frame, &id.name) {
                Some(v) => Ok(v),
                None => fail(
                    "belief.unknown",
                    format!("no variable or belief `{}`", id.name),
                ),
            },
            ExprKind::Index(base, i) => {
                let b = self.eval(frame, base)?;
                let i = self.eval(frame, i)?;
                Ok(value::index(&b, &i)?)
            }
            ExprKind::Member(base, name) => {
                let b = self.eval(frame, base)?;
                Ok(value::member(&b, &name.name)?)
            }
            ExprKind::Call { callee, args } => self.call(frame, callee, args),
            ExprKind::Unary(op, e) => {
                let v = self.eval(frame, e)?;
                match op {
                    UnaryOp::Not => Ok(Json::Bool(!value::truthy(&v))),
                    UnaryOp::Neg => match v.as_f64() {
                        Some(n) => Ok(value::number(-n)?),
                        None => fail("type.not_number", format!("cannot negate {v}")),
                    },
                }
            }
            ExprKind::Binary(op @ (BinaryOp::And | BinaryOp::Or), a, b) => {
                // Short circuit (docs/language.md §5.3): the right operand
                // runs only when the left one does not decide.
                let left = value::truthy(&self.eval(frame, a)?);
                if left == (*op == BinaryOp::Or) {
                    return Ok(Json::Bool(left));
                }
                Ok(Json::Bool(value::truthy(&self.eval(frame, b)?)))
            }
            ExprKind::Binary(op, a, b) => {
                let a = self.eval(frame, a)?;
                let b = self.eval(frame, b)?;
                Ok(value::binary(*op, &a, &b)?)
            }
            ExprKind::Assign(target, e) => {
                let ExprKind::Var(id) = &target.kind else {
                    return fail("oracle.assign", "invalid assignment target");
                };
                let v = self.eval(frame, e)?;
                self.assign(frame, &id.name, v.clone());
                Ok(v)
            }
            ExprKind::Switch(s) => self.switch(frame, s),
            ExprKind::Error => fail("oracle.parse", "expression failed to parse"),
        }
    }

    /// `x = v`: the innermost binding of `x`, else the agent's belief.
    fn assign(&mut self, frame: &mut Frame<'p>, name: &str, v: Json) {
        if let Some(scope) = frame.scopes.iter_mut().rev().find(|s| s.contains_key(name)) {
            scope.insert(name.to_string(), v);
        } else {
            self.world
                .beliefs
                .insert((frame.agent.name.name.clone(), name.to_string()), v);
        }
    }

    fn switch(&mut self, frame: &mut Frame<'p>, s: &'p Switch) -> Eval<Json> {
        let key = text(&self.eval(frame, &s.scrutinee)?);
        let patterns: Vec<Option<String>> = s
            .cases
            .iter()
            .map(|c| c.pattern.as_ref().map(pattern_text))
            .collect();
        let exact = patterns
            .iter()
            .position(|p| p.as_deref() == Some(key.as_str()));
        let chosen = exact
            .or_else(|| {
                patterns
                    .iter()
                    .position(|p| p.as_deref().is_some_and(|p| loosely_matches(p, &key)))
            })
            .or_else(|| patterns.iter().position(Option::is_none));
        let Some(i) = chosen else {
            return fail("switch.no_match", format!("no case matches {key:?}"));
        };
        match &s.cases[i].body {
            CaseBody::Expr(e) => self.eval(frame, e),
            CaseBody::Block(b) => self.block(frame, b, true),
        }
    }
}

/// The text a case literal matches.
fn pattern_text(p: &Expr) -> String {
    match &p.kind {
        ExprKind::Str(lit) => lit.text(),
        ExprKind::Number(n) => value::number(*n).map(|v| text(&v)).unwrap_or_default(),
        ExprKind::Bool(b) => b.to_string(),
        _ => String::new(),
    }
}

/// Loose case matching (docs/runtime.md, "Frames"): ignoring case,
/// surrounding whitespace, quotes, markdown emphasis and trailing
/// punctuation; or the value starts with the case followed by a non-word
/// character.
fn loosely_matches(case: &str, value: &str) -> bool {
    fn normalize(s: &str) -> String {
        let decoration = |c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '*' | '_');
        s.trim_start_matches(decoration)
            .trim_end_matches(|c: char| {
                decoration(c) || matches!(c, '.' | '!' | '?' | ',' | ';' | ':')
            })
            .to_lowercase()
    }
    let (c, v) = (normalize(case), normalize(value));
    if c.is_empty() {
        return v.is_empty();
    }
    v == c
        || v.strip_prefix(&c)
            .and_then(|rest| rest.chars().next())
            .is_some_and(|ch| !(ch.is_alphanumeric() || ch == '_'))
}

fn settle(u: Unwind) -> OracleError {
    match u {
        Unwind::Fail(e) => e,
        Unwind::Return(_) => OracleError::new("oracle.return", "`return` outside a flow"),
    }
}
