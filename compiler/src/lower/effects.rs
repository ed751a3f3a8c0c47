//! Effect chains and per-flow effect summaries.
//!
//! Effects that must not reorder are ordered by `ord` tokens threaded along
//! *chains*: one per memory tier, one for beliefs, one for output (`print`,
//! `communicate`). Memory is per agent, so a call into another agent only
//! shares the output chain. A flow's summary says which chains it (or
//! anything it calls) touches, so a call can be ordered with the caller's
//! effects on exactly those chains and nothing else.

use crate::sema::builtins::{self, BuiltinKind};
use crate::sema::index::AgentInfo;
use crate::sema::{resolve_tier, ProgramIndex};
use crate::syntax::ast::*;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Chain {
    Stm,
    Ltm,
    Episodic,
    Beliefs,
    Io,
}

impl Chain {
    pub fn of_tier(tier: &str) -> Chain {
        match tier {
            "ltm" => Chain::Ltm,
            "episodic" => Chain::Episodic,
            _ => Chain::Stm,
        }
    }

    /// The chains a `fence` orders: all of an agent's memory.
    pub const MEMORY: [Chain; 4] = [Chain::Stm, Chain::Ltm, Chain::Episodic, Chain::Beliefs];
}

/// What a block does, found by walking its AST.
#[derive(Default, Debug)]
pub struct Scan {
    pub chains: BTreeSet<Chain>,
    /// Flows called: (agent, flow).
    pub calls: BTreeSet<(String, String)>,
    /// Names assigned with `=`.
    pub assigned: BTreeSet<String>,
    pub returns: bool,
}

pub struct Scanner<'a> {
    pub agent: &'a AgentInfo,
    pub index: &'a ProgramIndex,
}

impl Scanner<'_> {
    pub fn block(&self, b: &Block, out: &mut Scan) {
        for s in &b.stmts {
            self.stmt(s, out);
        }
    }

    fn stmt(&self, s: &Stmt, out: &mut Scan) {
        match &s.kind {
            StmtKind::Let { value, .. } | StmtKind::Bind { value, .. } | StmtKind::Expr(value) => {
                self.expr(value, out)
            }
            StmtKind::Return(v) => {
                out.returns = true;
                if let Some(v) = v {
                    self.expr(v, out);
                }
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                self.expr(cond, out);
                self.block(then, out);
                if let Some(o) = otherwise {
                    self.block(o, out);
                }
            }
            StmtKind::Parallel(b) => self.block(b, out),
            StmtKind::Loop { iter, body, .. } => {
                self.expr(iter, out);
                self.block(body, out);
            }
            StmtKind::Try { body, handler, .. } => {
                self.block(body, out);
                self.block(handler, out);
            }
            StmtKind::Error(_) => {}
        }
    }

    fn expr(&self, e: &Expr, out: &mut Scan) {
        match &e.kind {
            // A template hole may read a belief.
            ExprKind::Str(lit) => {
                let reads_belief = lit.parts.iter().any(|p| {
                    matches!(p, crate::syntax::lexer::StrPart::Interp(name, _)
                        if self.agent.beliefs.contains_key(name))
                });
                if reads_belief {
                    out.chains.insert(Chain::Beliefs);
                }
            }
            ExprKind::Number(_) | ExprKind::Bool(_) | ExprKind::Null | ExprKind::Error => {}
            ExprKind::Var(id) => {
                if self.agent.beliefs.contains_key(&id.name) {
                    out.chains.insert(Chain::Beliefs);
                }
            }
            ExprKind::List(items) => items.iter().for_each(|i| self.expr(i, out)),
            ExprKind::Index(a, b) | ExprKind::Binary(_, a, b) => {
                self.expr(a, out);
                self.expr(b, out);
            }
            ExprKind::Member(a, _) | ExprKind::Unary(_, a) => self.expr(a, out),
            ExprKind::Assign(target, value) => {
                if let ExprKind::Var(id) = &target.kind {
                    out.assigned.insert(id.name.clone());
                    if self.agent.beliefs.contains_key(&id.name) {
                        out.chains.insert(Chain::Beliefs);
                    }
                }
                self.expr(value, out);
            }
            ExprKind::Switch(s) => {
                self.expr(&s.scrutinee, out);
                for c in &s.cases {
                    match &c.body {
                        CaseBody::Expr(e) => self.expr(e, out),
                        CaseBody::Block(b) => self.block(b, out),
                    }
                }
            }
            ExprKind::Call { callee, args } => {
                for a in args {
                    self.expr(a, out);
                }
                match &callee.kind {
                    ExprKind::Var(id) => {
                        if self.agent.flows.contains_key(&id.name) {
                            out.calls.insert((self.agent.name.clone(), id.name.clone()));
                        } else if self.agent.capabilities.contains_key(&id.name) {
                            // Tools are not ordered with each other.
                        } else if let Some(b) = builtins::lookup(&id.name) {
                            match b.kind {
                                BuiltinKind::Qmem | BuiltinKind::Umem => {
                                    if let Some(tier) =
                                        args.get(1).and_then(|t| resolve_tier(self.agent, t))
                                    {
                                        out.chains.insert(Chain::of_tier(tier));
                                    }
                                }
                                BuiltinKind::Fence => out.chains.extend(Chain::MEMORY),
                                BuiltinKind::Print | BuiltinKind::Communicate => {
                                    out.chains.insert(Chain::Io);
                                }
                                _ => {}
                            }
                        }
                    }
                    ExprKind::Member(target, flow) => {
                        if let ExprKind::Var(agent) = &target.kind {
                            if self.index.agents.contains_key(&agent.name) {
                                out.calls.insert((agent.name.clone(), flow.name.clone()));
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

/// Chains each flow touches, including through the flows it calls.
pub type Summaries = BTreeMap<(String, String), BTreeSet<Chain>>;

pub fn summarize(file: &File, index: &ProgramIndex) -> Summaries {
    let mut direct: BTreeMap<(String, String), Scan> = BTreeMap::new();
    for agent in &file.agents {
        let Some(info) = index.agents.get(&agent.name.name) else {
            continue;
        };
        let scanner = Scanner { agent: info, index };
        for m in &agent.members {
            if let Member::Flow(f) = m {
                let mut scan = Scan::default();
                scanner.block(&f.body, &mut scan);
                direct.insert((agent.name.name.clone(), f.name.name.clone()), scan);
            }
        }
    }
    let mut summaries: Summaries = direct
        .iter()
        .map(|(k, s)| (k.clone(), s.chains.clone()))
        .collect();
    // Fixpoint over the call graph (it may be recursive).
    loop {
        let mut changed = false;
        for (caller, scan) in &direct {
            for callee in &scan.calls {
                let Some(theirs) = summaries.get(callee).cloned() else {
                    continue;
                };
                let inherited: Vec<Chain> = if callee.0 == caller.0 {
                    theirs.into_iter().collect()
                } else {
                    theirs.into_iter().filter(|c| *c == Chain::Io).collect()
                };
                if let Some(mine) = summaries.get_mut(caller) {
                    for c in inherited {
                        changed |= mine.insert(c);
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    summaries
}
