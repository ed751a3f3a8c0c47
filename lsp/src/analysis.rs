//! One document, analysed with the files it imports: the front end's
//! diagnostics, and a table of every name occurrence (agents, flows,
//! capabilities, memories, variables, beliefs, operations) with what it
//! refers to. Hover, definitions, references, rename, completion and
//! symbols are queries on that table.
//!
//! The document is the program's entry file, at base 0 of its
//! [`SourceMap`], so an offset in the document is a global offset; spans
//! past [`Analysis::own_end`] are in imported files.

use ais_compiler::program::{self, Loader, ParsedProgram};
use ais_compiler::sema::builtins::{self, ArgRole, Builtin, BUILTINS};
use ais_compiler::sema::index::{AgentInfo, ProgramIndex};
use ais_compiler::sema::{self, Resolutions, Ty};
use ais_compiler::syntax::ast::*;
use ais_ir::{Diagnostic, IntoDiagnostic, SourceMap, Span};
use std::path::{Path, PathBuf};

/// What a name occurrence refers to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Symbol {
    Agent(String),
    /// (agent, flow)
    Flow(String, String),
    /// (agent, capability)
    Capability(String, String),
    /// (agent, memory): a name declared in `memory { }`, and the tier
    /// strings of `qmem`/`umem` that name it.
    Memory(String, String),
    /// A variable, parameter, handler field or belief: the span of its
    /// definition's name.
    Var(Span),
    /// A built-in operation (its canonical name).
    Op(&'static str),
}

/// A variable definition and where it is visible.
#[derive(Clone, Debug)]
pub struct Binding {
    pub name: String,
    pub def: Span,
    /// The block (or flow body) the name is visible in, from `def` on.
    pub scope: Span,
    pub ty: Ty,
}

pub struct Analysis {
    /// The document and every file it imports.
    pub sources: SourceMap,
    /// Each file's path (same order as `sources`; `None` for the bundled
    /// library and for a document that is not a file).
    pub paths: Vec<Option<PathBuf>>,
    /// The agents of every file (the document's first).
    pub file: File,
    pub index: ProgramIndex,
    pub diagnostics: Vec<Diagnostic>,
    /// Every occurrence, in the order found.
    pub occurrences: Vec<(Span, Symbol)>,
    pub bindings: Vec<Binding>,
}

impl Analysis {
    /// A document that is not a file: it can import only `std/` modules.
    pub fn new(source: &str) -> Analysis {
        Analysis::in_file(None, source, &program::NoFiles)
    }

    /// The document at `path` (when it is a file) with its imports, read
    /// through `loader` (an untitled document reads nothing from disk).
    pub fn in_file(path: Option<&Path>, source: &str, loader: &dyn Loader) -> Analysis {
        let name = path.map_or_else(|| "input.ais".to_string(), |p| p.display().to_string());
        let loader: &dyn Loader = if path.is_some() {
            loader
        } else {
            &program::NoFiles
        };
        let parsed = program::parse_program(&name, path, source, loader);
        Analysis::of(parsed, &name, path, source, loader)
    }

    fn of(
        parsed: ParsedProgram,
        name: &str,
        path: Option<&Path>,
        source: &str,
        loader: &dyn Loader,
    ) -> Analysis {
        let checked = sema::check(&parsed.file);
        let mut diagnostics = parsed.diagnostics;
        let front_errors = !checked.errors.is_empty() || !diagnostics.is_empty();
        diagnostics.extend(
            checked
                .errors
                .into_iter()
                .map(IntoDiagnostic::into_diagnostic),
        );
        // Later phases (lowering, IR verification) when the front end is
        // clean: their problems are reported too.
        if !front_errors || !diagnostics.iter().any(Diagnostic::is_error) {
            let compiled = match path {
                Some(p) => {
                    ais_compiler::driver::compile_file(name, p, source, loader, &Default::default())
                        .1
                }
                None => ais_compiler::driver::compile_source(source),
            };
            if let Err(all) = compiled {
                let seen = diagnostics.len();
                diagnostics.extend(all.into_iter().skip(seen));
            }
        }
        let mut a = Analysis {
            sources: parsed.sources,
            paths: parsed.paths,
            file: parsed.file,
            index: checked.index,
            diagnostics,
            occurrences: Vec::new(),
            bindings: Vec::new(),
        };
        a.collect(&checked.resolutions);
        a
    }

    /// The global offset one past the document's last byte: spans before it
    /// are in the document, the others in imported files.
    pub fn own_end(&self) -> u32 {
        self.sources.files().first().map_or(0, |f| f.end())
    }

    /// Whether `span` is in the document itself.
    pub fn is_own(&self, span: Span) -> bool {
        span.start <= self.own_end()
    }

    /// The source text of a (global) span.
    pub fn text_of(&self, span: Span) -> &str {
        self.sources
            .file_of(span)
            .and_then(|f| f.text.get(f.local(span)))
            .unwrap_or("")
    }

    fn agent_info(&self, name: &str) -> Option<&AgentInfo> {
        self.index.agents.get(name)
    }

    // ------------------------------------------------------------ collection

    fn collect(&mut self, res: &Resolutions) {
        let types: std::collections::HashMap<Span, Ty> = res.defs.iter().cloned().collect();
        let mut occ = Vec::new();
        let mut scopes: Vec<(Span, Span)> = Vec::new(); // (def, scope)
        let agents = std::mem::take(&mut self.file.agents);
        for agent in &agents {
            let a = agent.name.name.clone();
            occ.push((agent.name.span, Symbol::Agent(a.clone())));
            let info = self.agent_info(&a);
            let mut w = Walker {
                agent: &a,
                info,
                index: &self.index,
                occ: &mut occ,
                scopes: &mut scopes,
            };
            for m in &agent.members {
                w.member(m);
            }
        }
        self.file.agents = agents;
        for (u, d) in &res.uses {
            occ.push((*u, Symbol::Var(*d)));
        }
        for (d, _) in &res.defs {
            occ.push((*d, Symbol::Var(*d)));
        }
        // Beliefs are variables of their agent.
        let mut bindings = Vec::new();
        for info in self.index.agents.values() {
            for (name, b) in &info.beliefs {
                occ.push((b.span, Symbol::Var(b.span)));
                bindings.push(Binding {
                    name: name.clone(),
                    def: b.span,
                    scope: info.span,
                    ty: b.ty.clone(),
                });
            }
        }
        for (def, scope) in scopes {
            let name = self.text_of(def).to_string();
            bindings.push(Binding {
                name,
                def,
                scope,
                ty: types.get(&def).cloned().unwrap_or(Ty::Unknown),
            });
        }
        self.occurrences = occ;
        self.bindings = bindings;
    }

    // ------------------------------------------------------------ queries

    /// The innermost occurrence covering `offset` (a cursor just after a
    /// name counts).
    pub fn symbol_at(&self, offset: usize) -> Option<(Span, &Symbol)> {
        let o = offset as u32;
        self.occurrences
            .iter()
            .filter(|(s, _)| s.start <= o && o <= s.end)
            .min_by_key(|(s, _)| s.end - s.start)
            .map(|(s, sym)| (*s, sym))
    }

    pub fn definition(&self, sym: &Symbol) -> Option<Span> {
        match sym {
            Symbol::Agent(a) => self
                .agent_info(a)
                .map(|i| agent_name_span(&self.file, a, i)),
            Symbol::Flow(a, f) => self.agent_info(a)?.flows.get(f).map(|s| s.span),
            Symbol::Capability(a, c) => self.agent_info(a)?.capabilities.get(c).map(|s| s.span),
            Symbol::Memory(a, m) => self.agent_info(a)?.memories.get(m).map(|i| i.span),
            Symbol::Var(d) => Some(*d),
            Symbol::Op(_) => None,
        }
    }

    pub fn references(&self, sym: &Symbol) -> Vec<Span> {
        let mut v: Vec<Span> = self
            .occurrences
            .iter()
            .filter(|(_, s)| s == sym)
            .map(|(sp, _)| *sp)
            .collect();
        v.sort_by_key(|s| (s.start, s.end));
        v.dedup();
        v
    }

    pub fn hover(&self, sym: &Symbol) -> Option<String> {
        Some(match sym {
            Symbol::Agent(a) => {
                let info = self.agent_info(a)?;
                let mut s = format!("```ais\nagent {a}\n```\n");
                let flows: Vec<&str> = info.flows.keys().map(String::as_str).collect();
                if !flows.is_empty() {
                    s.push_str(&format!("\nflows: {}", flows.join(", ")));
                }
                let caps: Vec<&str> = info.capabilities.keys().map(String::as_str).collect();
                if !caps.is_empty() {
                    s.push_str(&format!("\ncapabilities: {}", caps.join(", ")));
                }
                s
            }
            Symbol::Flow(a, f) => {
                let sig = self.agent_info(a)?.flows.get(f)?;
                format!("```ais\n{}\n```", flow_signature(a, sig))
            }
            Symbol::Capability(a, c) => {
                let sig = self.agent_info(a)?.capabilities.get(c)?;
                let params: Vec<String> = sig
                    .params
                    .iter()
                    .map(|p| format!("{}: {}", p.name, p.ty))
                    .collect();
                format!(
                    "```ais\n{}capability {c}({}) -> {}\n```\nof agent `{a}`",
                    if sig.read_only { "@read_only " } else { "" },
                    params.join(", "),
                    sig.ret
                )
            }
            Symbol::Memory(a, m) => {
                let info = self.agent_info(a)?.memories.get(m)?;
                format!(
                    "```ais\nmemory {m}: {}\n```\nof agent `{a}`; `qmem`/`umem` name it as \"{m}\"",
                    info.tier
                )
            }
            Symbol::Var(d) => {
                let b = self.bindings.iter().find(|b| b.def == *d)?;
                let belief = self
                    .index
                    .agents
                    .values()
                    .any(|i| i.beliefs.values().any(|x| x.span == *d));
                format!(
                    "```ais\n{}{}: {}\n```",
                    if belief { "belief " } else { "" },
                    b.name,
                    b.ty
                )
            }
            Symbol::Op(name) => op_doc(builtins::lookup(name)?),
        })
    }

    /// The agent whose span holds `offset`.
    pub fn agent_at(&self, offset: usize) -> Option<&Agent> {
        let o = offset as u32;
        self.file
            .agents
            .iter()
            .find(|a| a.span.start <= o && o <= a.span.end)
    }

    /// Variables visible at `offset`: innermost first, one per name.
    pub fn visible(&self, offset: usize) -> Vec<&Binding> {
        let o = offset as u32;
        let mut v: Vec<&Binding> = self
            .bindings
            .iter()
            .filter(|b| b.scope.start <= o && o <= b.scope.end && b.def.end <= o)
            .collect();
        v.sort_by_key(|b| std::cmp::Reverse(b.def.start));
        let mut seen = std::collections::HashSet::new();
        v.retain(|b| seen.insert(b.name.clone()));
        v
    }
}

fn agent_name_span(file: &File, name: &str, info: &AgentInfo) -> Span {
    file.agents
        .iter()
        .find(|a| a.name.name == name)
        .map_or(info.span, |a| a.name.span)
}

pub fn flow_signature(agent: &str, sig: &ais_compiler::sema::index::FlowSig) -> String {
    let params: Vec<String> = sig
        .params
        .iter()
        .map(|p| format!("{}: {}", p.name, p.ty))
        .collect();
    format!(
        "{}flow {agent}.{}({}) -> {}",
        if sig.entry { "@entry " } else { "" },
        sig.name,
        params.join(", "),
        sig.ret
    )
}

/// `ask(prompt, value...) -> str`, the summary, named arguments and the op
/// table's effect and latency class.
pub fn op_doc(b: &Builtin) -> String {
    let mut args: Vec<String> = (0..b.min_args.max(b.roles.len()))
        .map(|i| {
            let name = match b.role(i) {
                ArgRole::Prompt => "prompt",
                ArgRole::ToolName => "tool",
                ArgRole::Tier => "tier",
                ArgRole::Limit => "limit",
                ArgRole::Value => "value",
            };
            if i < b.min_args {
                name.to_string()
            } else {
                format!("{name}?")
            }
        })
        .collect();
    if b.max_args.is_none() {
        args.push("value...".into());
    }
    let mut s = format!(
        "```ais\n{}({}) -> {}\n```\n{}",
        b.name,
        args.join(", "),
        (b.result)(),
        b.summary
    );
    if !b.aliases.is_empty() {
        s.push_str(&format!("\n\naliases: {}", b.aliases.join(", ")));
    }
    if let Some(named) = ais_compiler::sema::named_arguments(b.name) {
        s.push_str(&format!("\n\nnamed arguments: {}", named.join(", ")));
    }
    if let Some(op) = ais_ir::Opcode::from_mnemonic(b.name) {
        let info = op.info();
        s.push_str(&format!(
            "\n\nop `{}`: effect {:?}, latency {:?}",
            info.mnemonic, info.effect, info.latency
        ));
    }
    s
}

/// Every built-in's name and aliases.
pub fn op_names() -> impl Iterator<Item = (&'static str, &'static Builtin)> {
    BUILTINS
        .iter()
        .flat_map(|b| std::iter::once((b.name, b)).chain(b.aliases.iter().map(move |a| (*a, b))))
}

/// Records the non-variable occurrences of one agent's members and the
/// scopes of its variable definitions.
struct Walker<'a> {
    agent: &'a str,
    info: Option<&'a AgentInfo>,
    index: &'a ProgramIndex,
    occ: &'a mut Vec<(Span, Symbol)>,
    scopes: &'a mut Vec<(Span, Span)>,
}

impl Walker<'_> {
    fn member(&mut self, m: &Member) {
        match m {
            Member::Capability(c) => self.occ.push((
                c.name.span,
                Symbol::Capability(self.agent.into(), c.name.name.clone()),
            )),
            Member::Flow(f) => {
                self.occ.push((
                    f.name.span,
                    Symbol::Flow(self.agent.into(), f.name.name.clone()),
                ));
                for p in &f.params {
                    self.scopes.push((p.name.span, f.body.span));
                }
                self.block(&f.body, f.body.span);
            }
            Member::Handler(h) => {
                for p in &h.fields {
                    self.scopes.push((p.name.span, h.span));
                }
                if let Some(g) = &h.guard {
                    self.expr(g);
                }
                self.block(&h.body, h.body.span);
            }
            Member::Beliefs(bs, _) => {
                for b in bs {
                    self.expr(&b.value);
                }
            }
            Member::Tools(names, _) => {
                for n in names {
                    self.capability_ref(n);
                }
            }
            Member::Discoverable(names, _) => {
                for n in names {
                    if self.info.is_some_and(|i| i.flows.contains_key(&n.name)) {
                        self.occ
                            .push((n.span, Symbol::Flow(self.agent.into(), n.name.clone())));
                    } else {
                        self.capability_ref(n);
                    }
                }
            }
            Member::Memory(decls, _) => {
                for d in decls {
                    self.occ.push((
                        d.name.span,
                        Symbol::Memory(self.agent.into(), d.name.name.clone()),
                    ));
                }
            }
            Member::Goals(..) | Member::Context(..) | Member::Error(_) => {}
        }
    }

    /// `qmem(q, "notes")`: a tier string naming one of the agent's memories.
    fn tier_refs(&mut self, b: &Builtin, args: &[Expr]) {
        for (i, a) in args.iter().enumerate() {
            if b.role(i) != ArgRole::Tier {
                continue;
            }
            if let ExprKind::Str(s) = &a.kind {
                let name = s.text();
                if self
                    .info
                    .is_some_and(|inf| inf.memories.contains_key(&name))
                {
                    self.occ
                        .push((a.span, Symbol::Memory(self.agent.into(), name)));
                }
            }
        }
    }

    fn capability_ref(&mut self, n: &Ident) {
        if self
            .info
            .is_some_and(|i| i.capabilities.contains_key(&n.name))
        {
            self.occ.push((
                n.span,
                Symbol::Capability(self.agent.into(), n.name.clone()),
            ));
        }
    }

    /// `scope`: where definitions directly in this block are visible.
    fn block(&mut self, b: &Block, scope: Span) {
        for s in &b.stmts {
            self.stmt(s, scope);
        }
    }

    fn stmt(&mut self, s: &Stmt, scope: Span) {
        match &s.kind {
            StmtKind::Let { name, value, .. } => {
                self.expr(value);
                self.scopes.push((name.span, scope));
            }
            StmtKind::Bind { value, name } => {
                self.expr(value);
                self.scopes.push((name.span, scope));
            }
            StmtKind::Return(e) => {
                if let Some(e) = e {
                    self.expr(e);
                }
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                self.expr(cond);
                self.block(then, then.span);
                if let Some(o) = otherwise {
                    self.block(o, o.span);
                }
            }
            // Not a scope: what the branches bind is used after the block.
            StmtKind::Parallel(b) => self.block(b, scope),
            StmtKind::Loop { var, iter, body } => {
                self.expr(iter);
                self.scopes.push((var.span, body.span));
                self.block(body, body.span);
            }
            StmtKind::Try { body, err, handler } => {
                self.block(body, body.span);
                if let Some(e) = err {
                    self.scopes.push((e.span, handler.span));
                }
                self.block(handler, handler.span);
            }
            StmtKind::Expr(e) => self.expr(e),
            StmtKind::Error(Broken::Binds(i)) => self.scopes.push((i.span, scope)),
            StmtKind::Error(_) => {}
        }
    }

    fn expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Call { callee, args } => {
                self.callee(callee, args);
                for a in args {
                    self.expr(a);
                }
            }
            ExprKind::Named(n, v) => {
                if n.name == "tools" {
                    if let ExprKind::List(items) = &v.kind {
                        for i in items {
                            if let ExprKind::Var(id) = &i.kind {
                                self.capability_ref(id);
                            }
                        }
                    }
                }
                self.expr(v);
            }
            ExprKind::List(items) => items.iter().for_each(|i| self.expr(i)),
            ExprKind::Binary(..) => {
                let (first, steps) = e.binary_chain();
                self.expr(first);
                for (_, b, _) in steps {
                    self.expr(b);
                }
            }
            ExprKind::Index(a, b) | ExprKind::Assign(a, b) => {
                self.expr(a);
                self.expr(b);
            }
            ExprKind::Member(a, _) | ExprKind::Unary(_, a) => self.expr(a),
            ExprKind::Switch(sw) => {
                self.expr(&sw.scrutinee);
                for c in &sw.cases {
                    if let Some(p) = &c.pattern {
                        self.expr(p);
                    }
                    match &c.body {
                        CaseBody::Expr(x) => self.expr(x),
                        CaseBody::Block(b) => self.block(b, b.span),
                    }
                }
            }
            ExprKind::Str(_)
            | ExprKind::Number(_)
            | ExprKind::Bool(_)
            | ExprKind::Null
            | ExprKind::Var(_)
            | ExprKind::Error => {}
        }
    }

    fn callee(&mut self, callee: &Expr, args: &[Expr]) {
        match &callee.kind {
            ExprKind::Var(id) => {
                let info = self.info;
                if let Some(sig) = info.and_then(|i| i.flows.get(&id.name)) {
                    self.occ
                        .push((id.span, Symbol::Flow(self.agent.into(), id.name.clone())));
                    named_param_refs(self.occ, &sig.params, args);
                } else if let Some(sig) = info.and_then(|i| i.capabilities.get(&id.name)) {
                    named_param_refs(self.occ, &sig.params, args);
                    self.capability_ref(id);
                } else if let Some(b) = builtins::lookup(&id.name) {
                    self.occ.push((id.span, Symbol::Op(b.name)));
                    self.tier_refs(b, args);
                    // `inv("tool", ...)`: the string names a capability.
                    if b.role(0) == ArgRole::ToolName {
                        if let Some(Expr {
                            kind: ExprKind::Str(s),
                            span,
                        }) = args.first()
                        {
                            let name = s.text();
                            if info.is_some_and(|i| i.capabilities.contains_key(&name)) {
                                self.occ
                                    .push((*span, Symbol::Capability(self.agent.into(), name)));
                            }
                        }
                    }
                }
            }
            ExprKind::Member(target, f) => {
                if let ExprKind::Var(a) = &target.kind {
                    if let Some(other) = self.index.agents.get(&a.name) {
                        self.occ.push((a.span, Symbol::Agent(a.name.clone())));
                        if let Some(sig) = other.flows.get(&f.name) {
                            self.occ
                                .push((f.span, Symbol::Flow(a.name.clone(), f.name.clone())));
                            named_param_refs(self.occ, &sig.params, args);
                        }
                        return;
                    }
                }
                self.expr(target);
            }
            _ => self.expr(callee),
        }
    }
}

/// `f(topic: x)`: the argument's name refers to the parameter `topic`.
fn named_param_refs(
    occ: &mut Vec<(Span, Symbol)>,
    params: &[ais_compiler::sema::index::ParamSig],
    args: &[Expr],
) {
    for a in args {
        if let ExprKind::Named(n, _) = &a.kind {
            if let Some(p) = params.iter().find(|p| p.name == n.name) {
                occ.push((n.span, Symbol::Var(p.span)));
            }
        }
    }
}
