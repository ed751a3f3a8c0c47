//! Effect chains and per-flow effect summaries.
//!
//! Effects that must not reorder are ordered by `ord` tokens threaded along
//! *chains*: one per memory tier, one for beliefs, one for output (`print`,
//! `communicate`). Memory is per agent, so a call into another agent only
//! shares the output chain. A flow's summary says which chains it (or
//! anything it calls) touches, so a call can be ordered with the caller's
//! effects on exactly those chains and nothing else.
//!
//! Tools: every tool provider (an MCP server, a subprocess tool, the file
//! system, ...) has its own chain, [`Chain::Tool`]. A side-effecting call is
//! a write on its provider's chain, a read-only call a read, so calls to one
//! provider keep program order (reads after writes) while read-only calls
//! stay parallel. [`Chain::Tools`] stands for *every* provider of the agent:
//! a call whose provider is not known at compile time (`exec`) writes it and
//! every call to a known provider reads it, so the unknown call is ordered
//! against all of them. `fence()` writes every chain.

use crate::sema::builtins;
use crate::sema::index::AgentInfo;
use crate::sema::{resolve_tier, ProgramIndex};
use crate::syntax::ast::*;
use ais_ir::{ChainKind, ImmKind, Opcode};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Chain {
    Stm,
    Ltm,
    Episodic,
    Beliefs,
    Io,
    /// Every tool provider of the agent (see the module comment).
    Tools,
    /// One tool provider, by [`Providers`] id.
    Tool(u32),
}

impl Chain {
    pub fn of_tier(tier: &str) -> Chain {
        match tier {
            "ltm" => Chain::Ltm,
            "episodic" => Chain::Episodic,
            _ => Chain::Stm,
        }
    }

    /// The chains a `fence` writes: everything (writing `Tools` orders it
    /// with every tool call, before and after).
    pub const FENCE: [Chain; 6] = [
        Chain::Stm,
        Chain::Ltm,
        Chain::Episodic,
        Chain::Beliefs,
        Chain::Io,
        Chain::Tools,
    ];

    /// Chains shared with a call into another agent: output, and tools
    /// (files, the network, work queues and MCP servers are the same for
    /// every agent; provider ids are numbered module-wide). Memory and
    /// beliefs are each agent's own.
    pub fn shared_across_agents(self) -> bool {
        matches!(self, Chain::Io | Chain::Tools | Chain::Tool(_))
    }
}

/// Tool providers by name, numbered in the order first seen (scanning is
/// deterministic, so the numbering is too).
#[derive(Default, Debug)]
pub struct Providers(RefCell<Vec<String>>);

impl Providers {
    pub fn id(&self, name: &str) -> u32 {
        let mut names = self.0.borrow_mut();
        match names.iter().position(|n| n == name) {
            Some(i) => i as u32,
            None => {
                names.push(name.to_string());
                (names.len() - 1) as u32
            }
        }
    }
}

/// How a tool call is ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolAccess {
    /// Read-only on a provider's chain.
    Read(u32),
    /// Side-effecting on a provider's chain.
    Write(u32),
    /// Provider unknown at compile time: ordered with every provider.
    Any,
}

impl ToolAccess {
    /// The chains a call with this access touches (for flow summaries).
    pub fn chains(self) -> Vec<Chain> {
        match self {
            ToolAccess::Read(p) | ToolAccess::Write(p) => vec![Chain::Tool(p), Chain::Tools],
            ToolAccess::Any => vec![Chain::Tools],
        }
    }
}

/// The provider of tool `name` and whether a call may have side effects.
///
/// - A capability declared `@read_only` is read-only.
/// - A built-in tool, or one of the AAM's (`ais_stdlib::HOST_TOOLS`), has its
///   provider and class from `ais-stdlib`.
/// - An MCP tool is exposed as `server.tool`: the part before the first `.`
///   names the provider (the server).
/// - Anything else (a subprocess tool, an undeclared name) is its own
///   provider.
///
/// Everything not known to be read-only is side-effecting.
pub fn tool_access(agent: &AgentInfo, providers: &Providers, name: &str) -> ToolAccess {
    let declared_read_only = agent.capabilities.get(name).is_some_and(|c| c.read_only);
    let builtin = ais_stdlib::builtin(name)
        .map(|b| (b.provider, b.class))
        .or_else(|| {
            ais_stdlib::HOST_TOOLS
                .iter()
                .find(|h| h.name == name)
                .map(|h| (h.provider, h.class))
        });
    let provider = match (&builtin, name.split_once('.')) {
        (Some((p, _)), _) => format!("builtin:{p}"),
        (None, Some((server, _))) => server.to_string(),
        (None, None) => name.to_string(),
    };
    let read_only =
        declared_read_only || builtin.is_some_and(|(_, c)| c == ais_stdlib::ToolClass::ReadOnly);
    let id = providers.id(&provider);
    if read_only {
        ToolAccess::Read(id)
    } else {
        ToolAccess::Write(id)
    }
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
    pub providers: &'a Providers,
}

impl Scanner<'_> {
    /// How a message to a remote agent is ordered (see `FlowLowerer::remote_call`).
    fn remote(&self, agent: &str) -> ToolAccess {
        ToolAccess::Read(self.providers.id(&format!("remote:{agent}")))
    }

    pub fn block(&self, b: &Block, out: &mut Scan) {
        for s in &b.stmts {
            self.stmt(s, out);
        }
    }

    fn stmt(&self, s: &Stmt, out: &mut Scan) {
        match &s.kind {
            StmtKind::Let { value, .. } | StmtKind::Expr(value) => self.expr(value, out),
            // `-> name` may rebind a variable of an enclosing block (the
            // lowering decides): counted as assigned, so loops carry it.
            StmtKind::Bind { value, name } => {
                self.expr(value, out);
                out.assigned.insert(name.name.clone());
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
                    matches!(p, crate::syntax::lexer::StrPart::Interp(hole, _)
                        if self.agent.beliefs.contains_key(crate::syntax::lexer::hole_path(hole).0))
                });
                if reads_belief {
                    out.chains.insert(Chain::Beliefs);
                }
            }
            // Named arguments are literals and tool names: no effect.
            ExprKind::Number(_)
            | ExprKind::Bool(_)
            | ExprKind::Null
            | ExprKind::Error
            | ExprKind::Named(..) => {}
            ExprKind::Var(id) => {
                if self.agent.beliefs.contains_key(&id.name) {
                    out.chains.insert(Chain::Beliefs);
                }
            }
            ExprKind::List(items) => items.iter().for_each(|i| self.expr(i, out)),
            ExprKind::Binary(..) => {
                let (first, steps) = e.binary_chain();
                self.expr(first, out);
                for (_, b, _) in steps {
                    self.expr(b, out);
                }
            }
            ExprKind::Index(a, b) => {
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
                            out.chains
                                .extend(tool_access(self.agent, self.providers, &id.name).chains());
                        } else if let Some((recipient, sig)) = builtins::lookup(&id.name)
                            .filter(|b| b.kind == builtins::BuiltinKind::Communicate)
                            .and_then(|_| crate::sema::reply::literal_recipient(args))
                            .and_then(|r| {
                                let sig = crate::sema::reply::reply_flow(
                                    self.index,
                                    &self.agent.name,
                                    &r,
                                )?
                                .0;
                                Some((r, sig))
                            })
                        {
                            // Request and reply: a call of the reply flow.
                            out.calls.insert((recipient, sig.name.clone()));
                        } else if let Some(remote) = builtins::lookup(&id.name)
                            .filter(|b| b.kind == builtins::BuiltinKind::Communicate)
                            .and_then(|_| crate::sema::reply::literal_recipient(args))
                            .filter(|r| self.index.is_remote_agent(r))
                        {
                            out.chains.extend(self.remote(&remote).chains());
                        } else if let Some(b) = builtins::lookup(&id.name) {
                            // The op the built-in lowers to (of the same
                            // name) says which chain it is ordered on.
                            let op = Opcode::from_mnemonic(b.name).map(|op| op.info());
                            match op.map(|i| (i.chain, i.imm)) {
                                Some((ChainKind::Tool, ImmKind::Tool)) => {
                                    if let Some(ExprKind::Str(s)) = args.first().map(|a| &a.kind) {
                                        out.chains.extend(
                                            tool_access(self.agent, self.providers, &s.text())
                                                .chains(),
                                        );
                                    }
                                }
                                Some((ChainKind::Tool, _)) => {
                                    out.chains.extend(ToolAccess::Any.chains())
                                }
                                Some((ChainKind::Memory, _)) => {
                                    if let Some(tier) =
                                        args.get(1).and_then(|t| resolve_tier(self.agent, t))
                                    {
                                        out.chains.insert(Chain::of_tier(tier));
                                    }
                                }
                                Some((ChainKind::All, _)) => out.chains.extend(Chain::FENCE),
                                Some((ChainKind::Io, _)) => {
                                    out.chains.insert(Chain::Io);
                                }
                                Some((ChainKind::Beliefs | ChainKind::None, _)) | None => {}
                            }
                        } else if builtins::is_builtin_tool(&id.name)
                            || self.index.configured_tools.contains_key(&id.name)
                        {
                            // A built-in tool called by name (`claim("q")`)
                            // is a call of that tool: a caller orders this
                            // flow with its own calls to the tool's provider.
                            out.chains
                                .extend(tool_access(self.agent, self.providers, &id.name).chains());
                        }
                    }
                    ExprKind::Member(target, flow) => {
                        if let ExprKind::Var(agent) = &target.kind {
                            if self.index.agents.contains_key(&agent.name) {
                                out.calls.insert((agent.name.clone(), flow.name.clone()));
                            } else if self.index.is_remote_agent(&agent.name) {
                                out.chains.extend(self.remote(&agent.name).chains());
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

pub fn summarize(file: &File, index: &ProgramIndex, providers: &Providers) -> Summaries {
    let mut direct: BTreeMap<(String, String), Scan> = BTreeMap::new();
    for agent in &file.agents {
        let Some(info) = index.agents.get(&agent.name.name) else {
            continue;
        };
        let scanner = Scanner {
            agent: info,
            index,
            providers,
        };
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
                    theirs
                        .into_iter()
                        .filter(|c| c.shared_across_agents())
                        .collect()
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
