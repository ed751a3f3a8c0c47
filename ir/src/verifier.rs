//! The IR verifier.
//!
//! Per flow it first checks handles and graph structure (every reference
//! points into its arena, each op and region is placed once, definitions
//! agree with their values); only a structurally sound flow gets the semantic
//! checks (scoping, the op table, regions and yields, terminators, attributes,
//! ordering tokens, calls, capabilities). Every problem is collected; nothing
//! stops at the first error. Codes are stable: `V0001`.. (`V0900` and up are warnings)
//! for warnings (see `docs/ir.md`).

use crate::diag::{Diagnostic, IntoDiagnostic, Severity};
use crate::entity::{DenseSet, EntityRef, Op, Region, Value};
use crate::module::{AgentData, AgentIndex, Attr, Dfg, FlowData, Module, OpData, Tier, ValueDef};
use crate::ops::{AttrKind, Effect, Opcode, RegionSpec, ResultRule};
use crate::printer::value_names;
use crate::types::Type;
use crate::Span;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VerifyError {
    #[error("invalid reference: {what}")]
    BadHandle { what: String, span: Span },
    #[error("malformed graph: {what}")]
    Malformed { what: String, span: Span },
    #[error("value `{value}` is used before its definition")]
    UseBeforeDef { value: String, span: Span },
    #[error("value `{value}` is not in scope here (it is defined inside another region)")]
    OutOfScope { value: String, span: Span },
    #[error("`{op}` takes {expected} data operand(s), found {found}")]
    OperandCount {
        op: &'static str,
        expected: String,
        found: usize,
        span: Span,
    },
    #[error("`{op}` has {expected} result(s), found {found}")]
    ResultCount {
        op: &'static str,
        expected: String,
        found: usize,
        span: Span,
    },
    #[error("operand {index} of `{op}` must be {expected}, found `{found}`")]
    OperandType {
        op: &'static str,
        index: usize,
        expected: String,
        found: Type,
        span: Span,
    },
    #[error("result {index} of `{op}` is declared `{found}`, expected {expected}")]
    ResultType {
        op: &'static str,
        index: usize,
        expected: String,
        found: Type,
        span: Span,
    },
    #[error("`{op}`: {message}")]
    RegionShape {
        op: &'static str,
        message: String,
        span: Span,
    },
    #[error("{message}")]
    YieldMismatch { message: String, span: Span },
    #[error("{what} does not end with `{terminator}`")]
    MissingTerminator {
        what: String,
        terminator: &'static str,
        span: Span,
    },
    #[error("{message}")]
    MisplacedTerminator { message: String, span: Span },
    #[error("{message}")]
    ReturnType { message: String, span: Span },
    #[error("`{op}` has no attribute `{name}`")]
    UnknownAttr {
        op: &'static str,
        name: String,
        span: Span,
    },
    #[error("`{op}` requires attribute `{name}`")]
    MissingAttr {
        op: &'static str,
        name: &'static str,
        span: Span,
    },
    #[error("attribute `{name}` of `{op}`: {message}")]
    BadAttr {
        op: &'static str,
        name: String,
        message: String,
        span: Span,
    },
    #[error("{message}")]
    OrdMisuse { message: String, span: Span },
    #[error(
        "unordered writes to {resource}: two writes consume the same ordering token `{token}`"
    )]
    UnorderedWrites {
        resource: String,
        token: String,
        span: Span,
        other: Span,
    },
    #[error("unknown callee `@{callee}`: {reason}")]
    UnknownCallee {
        callee: String,
        reason: String,
        span: Span,
    },
    #[error("call to `@{callee}` passes {found} argument(s), but it takes {expected}")]
    CallArgCount {
        callee: String,
        expected: usize,
        found: usize,
        span: Span,
    },
    #[error("argument {index} of call to `@{callee}` has type `{found}`, but parameter `{param}` is `{expected}`")]
    CallArgType {
        callee: String,
        index: usize,
        param: String,
        expected: Type,
        found: Type,
        span: Span,
    },
    #[error("capability `{capability}`: {message}")]
    CapabilityArgs {
        capability: String,
        message: String,
        span: Span,
    },
    #[error("agent `@{agent}` has more than one entry flow")]
    MultipleEntries {
        agent: String,
        span: Span,
        first: Span,
    },
    #[error("duplicate {kind} `{name}`")]
    DuplicateName {
        kind: &'static str,
        name: String,
        span: Span,
    },
    #[error("{message}")]
    SwitchCases { message: String, span: Span },
    #[error("`const` value is {literal} but the result is declared `{declared}`")]
    ConstType {
        literal: String,
        declared: Type,
        span: Span,
    },
    #[error("empty prompt in `{op}`")]
    EmptyPrompt { op: &'static str, span: Span },
    #[error("invalid {kind} name `{name}`")]
    InvalidName {
        kind: &'static str,
        name: String,
        span: Span,
    },
    #[error("belief `{belief}` is initialised by code with an effect: `{op}`{}", via.as_ref().map(|f| format!(" (in called flow `@{f}`)")).unwrap_or_default())]
    EffectfulBeliefInit {
        belief: String,
        op: &'static str,
        via: Option<String>,
        span: Span,
    },
    #[error("value `{value}` of pure op `{op}` is never used")]
    UnusedValue {
        value: String,
        op: &'static str,
        span: Span,
    },
}

impl VerifyError {
    pub fn code(&self) -> &'static str {
        use VerifyError::*;
        match self {
            BadHandle { .. } => "V0001",
            Malformed { .. } => "V0002",
            UseBeforeDef { .. } => "V0003",
            OutOfScope { .. } => "V0004",
            OperandCount { .. } => "V0005",
            ResultCount { .. } => "V0006",
            OperandType { .. } => "V0007",
            ResultType { .. } => "V0008",
            RegionShape { .. } => "V0009",
            YieldMismatch { .. } => "V0010",
            MissingTerminator { .. } => "V0011",
            MisplacedTerminator { .. } => "V0012",
            ReturnType { .. } => "V0013",
            UnknownAttr { .. } => "V0014",
            MissingAttr { .. } => "V0015",
            BadAttr { .. } => "V0016",
            OrdMisuse { .. } => "V0017",
            UnorderedWrites { .. } => "V0018",
            UnknownCallee { .. } => "V0019",
            CallArgCount { .. } => "V0020",
            CallArgType { .. } => "V0021",
            CapabilityArgs { .. } => "V0022",
            MultipleEntries { .. } => "V0023",
            DuplicateName { .. } => "V0024",
            SwitchCases { .. } => "V0025",
            ConstType { .. } => "V0026",
            EmptyPrompt { .. } => "V0027",
            InvalidName { .. } => "V0028",
            EffectfulBeliefInit { .. } => "V0029",
            UnusedValue { .. } => "V0900",
        }
    }

    pub fn severity(&self) -> Severity {
        match self {
            VerifyError::UnusedValue { .. } => Severity::Warning,
            _ => Severity::Error,
        }
    }

    pub fn is_error(&self) -> bool {
        self.severity() == Severity::Error
    }

    pub fn span(&self) -> Span {
        use VerifyError::*;
        match self {
            BadHandle { span, .. }
            | Malformed { span, .. }
            | UseBeforeDef { span, .. }
            | OutOfScope { span, .. }
            | OperandCount { span, .. }
            | ResultCount { span, .. }
            | OperandType { span, .. }
            | ResultType { span, .. }
            | RegionShape { span, .. }
            | YieldMismatch { span, .. }
            | MissingTerminator { span, .. }
            | MisplacedTerminator { span, .. }
            | ReturnType { span, .. }
            | UnknownAttr { span, .. }
            | MissingAttr { span, .. }
            | BadAttr { span, .. }
            | OrdMisuse { span, .. }
            | UnorderedWrites { span, .. }
            | UnknownCallee { span, .. }
            | CallArgCount { span, .. }
            | CallArgType { span, .. }
            | CapabilityArgs { span, .. }
            | MultipleEntries { span, .. }
            | DuplicateName { span, .. }
            | SwitchCases { span, .. }
            | ConstType { span, .. }
            | EmptyPrompt { span, .. }
            | InvalidName { span, .. }
            | EffectfulBeliefInit { span, .. }
            | UnusedValue { span, .. } => *span,
        }
    }
}

impl IntoDiagnostic for VerifyError {
    fn into_diagnostic(self) -> Diagnostic {
        let mut d = Diagnostic::new(self.severity(), self.code(), self.to_string(), self.span());
        match &self {
            VerifyError::UnorderedWrites { other, .. } => {
                d = d
                    .with_secondary(*other, "the other write")
                    .with_help("thread the ordering token of the first write into the second");
            }
            VerifyError::MultipleEntries { first, .. } => {
                d = d.with_secondary(*first, "first entry flow");
            }
            VerifyError::UnusedValue { .. } => {
                d = d.with_help("remove the op, or run the `dce` pass");
            }
            VerifyError::EffectfulBeliefInit { .. } => {
                d = d.with_help(
                    "belief initialisers run before the run, outside the journal and the flow policy: compute the value in a flow and assign the belief",
                );
            }
            _ => {}
        }
        d
    }
}

/// Verifies a module; returns every error and warning (empty = clean).
pub fn verify(m: &Module) -> Vec<VerifyError> {
    let mut out = Vec::new();
    let mut agent_names = HashSet::default();
    let index = m.agent_index();
    for (_, a) in m.agents.iter() {
        if !is_ident(&a.name) {
            out.push(VerifyError::InvalidName {
                kind: "agent",
                name: a.name.clone(),
                span: a.span,
            });
        }
        if !agent_names.insert(a.name.as_str()) {
            out.push(VerifyError::DuplicateName {
                kind: "agent",
                name: a.name.clone(),
                span: a.span,
            });
        }
        verify_agent(m, &index, a, &mut out);
    }
    out.extend(crate::effects::belief_effects(m).into_iter().map(|e| {
        VerifyError::EffectfulBeliefInit {
            belief: e.belief,
            op: e.opcode.mnemonic(),
            via: e.via,
            span: e.span,
        }
    }));
    out
}

/// Errors only (warnings dropped).
pub fn verify_errors(m: &Module) -> Vec<VerifyError> {
    verify(m)
        .into_iter()
        .filter(VerifyError::is_error)
        .collect()
}

/// `verify`, converted to diagnostics.
pub fn verify_diagnostics(m: &Module) -> Vec<Diagnostic> {
    verify(m)
        .into_iter()
        .map(IntoDiagnostic::into_diagnostic)
        .collect()
}

pub(crate) fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(x) if x.is_ascii_alphabetic() || x == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// A tool name: not blank, no control characters.
pub(crate) fn is_tool_name(s: &str) -> bool {
    !s.trim().is_empty() && !s.chars().any(char::is_control)
}

fn dup_check<'a>(
    out: &mut Vec<VerifyError>,
    kind: &'static str,
    items: impl Iterator<Item = (&'a str, Span)>,
) {
    let mut seen = HashSet::default();
    for (name, span) in items {
        // A capability names a tool, and tool names need not be identifiers
        // (MCP servers' prefixed tools: `ev.get-sum`).
        let valid = if kind == "capability" {
            is_tool_name(name)
        } else {
            is_ident(name)
        };
        if !valid {
            out.push(VerifyError::InvalidName {
                kind,
                name: name.to_string(),
                span,
            });
        }
        if !seen.insert(name) {
            out.push(VerifyError::DuplicateName {
                kind,
                name: name.to_string(),
                span,
            });
        }
    }
}

fn verify_agent(m: &Module, index: &AgentIndex<'_>, a: &AgentData, out: &mut Vec<VerifyError>) {
    dup_check(
        out,
        "memory",
        a.memory.iter().map(|d| (d.name.as_str(), d.span)),
    );
    dup_check(
        out,
        "belief",
        a.beliefs.iter().map(|d| (d.name.as_str(), d.span)),
    );
    dup_check(
        out,
        "goal",
        a.goals.iter().map(|d| (d.name.as_str(), d.span)),
    );
    dup_check(
        out,
        "capability",
        a.capabilities.iter().map(|d| (d.name.as_str(), d.span)),
    );
    for c in &a.capabilities {
        dup_check(
            out,
            "capability parameter",
            c.params.iter().map(|(n, _)| (n.as_str(), c.span)),
        );
    }
    dup_check(
        out,
        "flow",
        a.flows.values().map(|f| (f.name.as_str(), f.span)),
    );
    for h in &a.handlers {
        if !a.flows.contains(h.flow) {
            out.push(VerifyError::BadHandle {
                what: format!("handler for `{}` names missing {}", h.event, h.flow),
                span: h.span,
            });
        }
    }
    for b in &a.beliefs {
        if let crate::BeliefInit::Flow(f) = b.init {
            if !a.flows.contains(f) {
                out.push(VerifyError::BadHandle {
                    what: format!("belief `{}` is initialised by missing {f}", b.name),
                    span: b.span,
                });
            }
        }
    }
    let mut first_entry: Option<Span> = None;
    for (_, f) in a.flows.iter() {
        if f.entry {
            match first_entry {
                None => first_entry = Some(f.span),
                Some(first) => out.push(VerifyError::MultipleEntries {
                    agent: a.name.clone(),
                    span: f.span,
                    first,
                }),
            }
        }
        dup_check(
            out,
            "parameter",
            f.params.iter().map(|(n, _)| (n.as_str(), f.span)),
        );
        let before = out.len();
        structure(f, out);
        if out[before..].iter().any(|e| {
            matches!(
                e,
                VerifyError::BadHandle { .. } | VerifyError::Malformed { .. }
            )
        }) {
            continue;
        }
        let mut fv = FlowVerifier {
            m,
            index,
            agent: a,
            flow: f,
            dfg: &f.dfg,
            names: std::cell::OnceCell::new(),
            out,
            scopes: Vec::new(),
            visible: DenseSet::with_len(f.dfg.values.len()),
            seen: DenseSet::with_len(f.dfg.values.len()),
        };
        fv.run();
    }
}

// ------------------------------------------------------------ structure

fn structure(f: &FlowData, out: &mut Vec<VerifyError>) {
    let dfg = &f.dfg;
    let span = f.span;
    for (i, (_, v)) in f.params.iter().enumerate() {
        match dfg.values.get(*v) {
            None => out.push(VerifyError::BadHandle {
                what: format!("parameter {i} of `@{}` is missing {v}", f.name),
                span,
            }),
            Some(d) if d.def != ValueDef::Param(i as u32) => out.push(VerifyError::Malformed {
                what: format!("{v} is parameter {i} but its definition says {:?}", d.def),
                span,
            }),
            Some(_) => {}
        }
    }
    if !dfg.regions.contains(f.body) {
        out.push(VerifyError::BadHandle {
            what: format!("flow body {} does not exist", f.body),
            span,
        });
        return;
    }
    let mut seen_ops = DenseSet::with_len(dfg.ops.len());
    let mut seen_regions = DenseSet::with_len(dfg.regions.len());
    let mut stack = vec![(f.body, None::<Op>)];
    while let Some((r, parent)) = stack.pop() {
        let Some(rd) = dfg.regions.get(r) else {
            out.push(VerifyError::BadHandle {
                what: format!("region {r} does not exist"),
                span,
            });
            continue;
        };
        if !seen_regions.insert(r) {
            out.push(VerifyError::Malformed {
                what: format!("region {r} is attached more than once"),
                span,
            });
            continue;
        }
        if rd.parent != parent {
            out.push(VerifyError::Malformed {
                what: format!(
                    "region {r} records parent {:?} but belongs to {:?}",
                    rd.parent, parent
                ),
                span,
            });
        }
        for (i, &a) in rd.args.iter().enumerate() {
            match dfg.values.get(a) {
                None => out.push(VerifyError::BadHandle {
                    what: format!("argument {i} of region {r} is missing {a}"),
                    span,
                }),
                Some(d) if d.def != ValueDef::Arg(r, i as u32) => {
                    out.push(VerifyError::Malformed {
                        what: format!(
                            "{a} is argument {i} of {r} but its definition says {:?}",
                            d.def
                        ),
                        span,
                    })
                }
                Some(_) => {}
            }
        }
        for &op in &rd.ops {
            let sp = dfg.spans.get(&op).copied().unwrap_or(span);
            let Some(od) = dfg.ops.get(op) else {
                out.push(VerifyError::BadHandle {
                    what: format!("region {r} lists missing {op}"),
                    span,
                });
                continue;
            };
            if !seen_ops.insert(op) {
                out.push(VerifyError::Malformed {
                    what: format!("{op} is placed more than once"),
                    span: sp,
                });
                continue;
            }
            for &v in &od.operands {
                if !dfg.values.contains(v) {
                    out.push(VerifyError::BadHandle {
                        what: format!("operand {v} of `{}` does not exist", od.opcode),
                        span: sp,
                    });
                }
            }
            for (i, &v) in od.results.iter().enumerate() {
                match dfg.values.get(v) {
                    None => out.push(VerifyError::BadHandle {
                        what: format!("result {v} of `{}` does not exist", od.opcode),
                        span: sp,
                    }),
                    Some(d) if d.def != ValueDef::Result(op, i as u32) => {
                        out.push(VerifyError::Malformed {
                            what: format!(
                                "{v} is result {i} of {op} but its definition says {:?}",
                                d.def
                            ),
                            span: sp,
                        })
                    }
                    Some(_) => {}
                }
            }
            for &child in od.regions.iter().rev() {
                stack.push((child, Some(op)));
            }
        }
    }
}

// ------------------------------------------------------------ semantics

struct FlowVerifier<'a> {
    m: &'a Module,
    index: &'a AgentIndex<'a>,
    agent: &'a AgentData,
    flow: &'a FlowData,
    dfg: &'a Dfg,
    /// The printer's value names, made only when an error names a value (a
    /// string per value of every flow verified was most of the verifier's
    /// allocations).
    names: std::cell::OnceCell<HashMap<Value, String>>,
    out: &'a mut Vec<VerifyError>,
    /// Values defined in each enclosing region, innermost last.
    scopes: Vec<Vec<Value>>,
    /// The values of all `scopes`: one lookup per operand, however deep the
    /// nesting (a lookup per enclosing region made deep flows O(ops × depth)).
    visible: DenseSet<Value>,
    /// Every value defined so far in the walk (to tell "later" from "elsewhere").
    seen: DenseSet<Value>,
}

impl FlowVerifier<'_> {
    fn name(&self, v: Value) -> String {
        self.names
            .get_or_init(|| value_names(self.flow))
            .get(&v)
            .cloned()
            .unwrap_or_else(|| format!("%undef_{}", v.as_u32()))
    }

    fn ty(&self, v: Value) -> &Type {
        &self.dfg.values[v].ty
    }

    fn span(&self, op: Op) -> Span {
        match self.dfg.spans.get(&op) {
            Some(s) if !s.is_dummy() => *s,
            _ => self.flow.span,
        }
    }

    fn push(&mut self, e: VerifyError) {
        self.out.push(e);
    }

    fn run(&mut self) {
        let mut top = Vec::new();
        for (_, v) in &self.flow.params {
            top.push(*v);
            self.visible.insert(*v);
            self.seen.insert(*v);
        }
        self.scopes.push(top);
        self.region(self.flow.body, true);
        self.pop_scope();
        self.ord_writes();
        self.unused();
    }

    fn in_scope(&self, v: Value) -> bool {
        self.visible.contains(v)
    }

    fn define(&mut self, v: Value) {
        if let Some(s) = self.scopes.last_mut() {
            s.push(v);
            self.visible.insert(v);
        }
    }

    fn pop_scope(&mut self) {
        for v in self.scopes.pop().unwrap_or_default() {
            self.visible.remove(v);
        }
    }

    fn region(&mut self, r: Region, is_body: bool) {
        let rd = &self.dfg.regions[r];
        if !is_body {
            self.scopes.push(Vec::new());
        }
        for &a in &rd.args {
            // A flow body's arguments are not values (its parameters are).
            if !is_body {
                self.define(a);
            }
            self.seen.insert(a);
        }
        let n = rd.ops.len();
        crate::work::add(n);
        for (k, &op) in rd.ops.iter().enumerate() {
            let od = &self.dfg.ops[op];
            let span = self.span(op);
            for &v in &od.operands {
                if !self.in_scope(v) {
                    let value = self.name(v);
                    self.push(if self.seen.contains(v) {
                        VerifyError::OutOfScope { value, span }
                    } else {
                        VerifyError::UseBeforeDef { value, span }
                    });
                }
            }
            match od.opcode {
                Opcode::Return if !is_body => self.push(VerifyError::MisplacedTerminator {
                    message:
                        "`return` is only allowed at the end of a flow body; use `yield` in regions"
                            .into(),
                    span,
                }),
                Opcode::Yield if is_body => self.push(VerifyError::MisplacedTerminator {
                    message: "`yield` outside a region; a flow body ends with `return`".into(),
                    span,
                }),
                o if o.is_terminator() && k + 1 != n => {
                    self.push(VerifyError::MisplacedTerminator {
                        message: format!("`{o}` must be the last op of its region"),
                        span,
                    })
                }
                _ => {}
            }
            self.op(op, od);
            for &v in &od.results {
                self.define(v);
            }
            for &v in &od.results {
                self.seen.insert(v);
            }
            for &child in &od.regions {
                self.region(child, false);
            }
        }
        let last = rd.ops.last().map(|&o| self.dfg.ops[o].opcode);
        let (want, what) = if is_body {
            (Opcode::Return, format!("flow `@{}`", self.flow.name))
        } else {
            (Opcode::Yield, format!("region `{}`", rd.label))
        };
        if last != Some(want) {
            let span = match rd.parent {
                Some(p) => self.span(p),
                None => self.flow.span,
            };
            let span = rd.ops.last().map_or(span, |&o| self.span(o));
            self.push(VerifyError::MissingTerminator {
                what,
                terminator: want.mnemonic(),
                span,
            });
        }
        if !is_body {
            self.pop_scope();
        }
    }

    fn op(&mut self, op: Op, od: &OpData) {
        let info = od.opcode.info();
        let span = self.span(op);
        let mn = info.mnemonic;

        // Split data operands from trailing ordering tokens.
        let mut n_data = od.operands.len();
        if info.takes_ord {
            while n_data > 0 && *self.ty(od.operands[n_data - 1]) == Type::Ord {
                n_data -= 1;
            }
        }
        let data = &od.operands[..n_data];
        if !info.operands.allows(data.len()) {
            self.push(VerifyError::OperandCount {
                op: mn,
                expected: info.operands.to_string(),
                found: data.len(),
                span,
            });
        }
        for (i, &v) in data.iter().enumerate() {
            let con = info.operand_type(i);
            let t = self.ty(v).clone();
            if con.admits(&t) {
                continue;
            }
            if t == Type::Ord {
                let message = if info.effect == Effect::Pure {
                    format!(
                        "pure op `{mn}` cannot consume the ordering token `{}`",
                        self.name(v)
                    )
                } else if info.takes_ord {
                    format!(
                        "ordering token `{}` must come after the data operands of `{mn}`",
                        self.name(v)
                    )
                } else {
                    format!(
                        "ordering token `{}` cannot be used as operand {i} of `{mn}`",
                        self.name(v)
                    )
                };
                self.push(VerifyError::OrdMisuse { message, span });
            } else {
                self.push(VerifyError::OperandType {
                    op: mn,
                    index: i,
                    expected: con.to_string(),
                    found: t,
                    span,
                });
            }
        }

        // Results.
        if !info.results.allows(od.results.len()) {
            self.push(VerifyError::ResultCount {
                op: mn,
                expected: info.results.to_string(),
                found: od.results.len(),
                span,
            });
        }
        for (i, &v) in od.results.iter().enumerate() {
            if *self.ty(v) == Type::Void {
                self.push(VerifyError::ResultType {
                    op: mn,
                    index: i,
                    expected: "a non-void type".into(),
                    found: Type::Void,
                    span,
                });
            }
        }
        let capability = match (od.opcode, od.attrs.get("tool")) {
            (Opcode::Inv, Some(Attr::Str(t))) => self.agent.capability(t),
            _ => None,
        };
        match info.result_rule {
            ResultRule::Fixed(canon) => {
                for (i, (&v, c)) in od.results.iter().zip(canon).enumerate() {
                    let want = match capability {
                        Some(cap) if i == 0 => cap.result.clone(),
                        _ => c.to_type(),
                    };
                    let got = self.ty(v);
                    let ok = *got == want || (want != Type::Ord && got.accepts(&want));
                    if !ok {
                        self.push(VerifyError::ResultType {
                            op: mn,
                            index: i,
                            expected: format!("`{want}`"),
                            found: got.clone(),
                            span,
                        });
                    }
                }
            }
            ResultRule::Declared => {
                if let Some(&v) = od.results.first() {
                    if !self.ty(v).is_data() && *self.ty(v) != Type::Void {
                        self.push(VerifyError::ResultType {
                            op: mn,
                            index: 0,
                            expected: "a data type".into(),
                            found: self.ty(v).clone(),
                            span,
                        });
                    }
                }
            }
            ResultRule::ListOf => {
                if let Some(&v) = od.results.first() {
                    match self.ty(v).clone() {
                        Type::List(elem) => {
                            for (i, &o) in data.iter().enumerate() {
                                let t = self.ty(o);
                                if t.is_data() && !elem.accepts(t) {
                                    self.push(VerifyError::OperandType {
                                        op: mn,
                                        index: i,
                                        expected: format!("`{elem}` (the element type)"),
                                        found: t.clone(),
                                        span,
                                    });
                                }
                            }
                        }
                        other => self.push(VerifyError::ResultType {
                            op: mn,
                            index: 0,
                            expected: "a `list<T>`".into(),
                            found: other,
                            span,
                        }),
                    }
                }
            }
            ResultRule::Call => self.call(od, data, span),
            ResultRule::None | ResultRule::Yielded => {}
        }

        self.attrs(od, span);
        self.regions(op, od, span);

        if od.opcode.info().prompt {
            if let Some(&p) = data.first() {
                if self.is_empty_string_const(p) {
                    self.push(VerifyError::EmptyPrompt { op: mn, span });
                }
            }
        }
        match od.opcode {
            Opcode::Const => {
                if let (Some(a), Some(&v)) = (od.attrs.get("value"), od.results.first()) {
                    if let Some(lit) = a.literal_type() {
                        let declared = self.ty(v);
                        if *declared != lit && !declared.accepts(&lit) {
                            self.push(VerifyError::ConstType {
                                literal: format!("a `{lit}` literal"),
                                declared: declared.clone(),
                                span,
                            });
                        }
                    }
                }
            }
            Opcode::Inv => {
                if let (Some(cap), Some(&args)) = (capability, data.first()) {
                    self.capability_args(cap, args, span);
                }
            }
            Opcode::Return => {
                let want = &self.flow.result;
                match (want, od.operands.first()) {
                    (Type::Void, None) => {}
                    (Type::Void, Some(&v)) => self.push(VerifyError::ReturnType {
                        message: format!(
                            "flow `@{}` returns `void` but `return` gives a `{}`",
                            self.flow.name,
                            self.ty(v)
                        ),
                        span,
                    }),
                    (t, None) => self.push(VerifyError::ReturnType {
                        message: format!("flow `@{}` must return a `{t}`", self.flow.name),
                        span,
                    }),
                    (t, Some(&v)) => {
                        let got = self.ty(v);
                        if got != t && !t.accepts(got) {
                            self.push(VerifyError::ReturnType {
                                message: format!(
                                    "flow `@{}` returns `{t}` but `return` gives a `{got}`",
                                    self.flow.name
                                ),
                                span,
                            });
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn is_empty_string_const(&self, v: Value) -> bool {
        let ValueDef::Result(def, _) = self.dfg.values[v].def else {
            return false;
        };
        let Some(d) = self.dfg.ops.get(def) else {
            return false;
        };
        d.opcode == Opcode::Const
            && matches!(d.attrs.get("value"), Some(Attr::Str(s)) if s.trim().is_empty())
    }

    fn attrs(&mut self, od: &OpData, span: Span) {
        let info = od.opcode.info();
        let mn = info.mnemonic;
        let mut seen = HashSet::default();
        for (name, a) in od.attrs.iter() {
            if !seen.insert(name) {
                self.push(VerifyError::BadAttr {
                    op: mn,
                    name: name.to_string(),
                    message: "given more than once".into(),
                    span,
                });
            }
            let Some(spec) = info.attr(name) else {
                self.push(VerifyError::UnknownAttr {
                    op: mn,
                    name: name.to_string(),
                    span,
                });
                continue;
            };
            let problem = match (spec.kind, a) {
                (AttrKind::Str, Attr::Str(_))
                | (AttrKind::Number, Attr::Number(_))
                | (AttrKind::Bool, Attr::Bool(_))
                | (AttrKind::Flag, Attr::Flag)
                | (AttrKind::Symbol, Attr::Symbol { .. })
                | (AttrKind::Type, Attr::Type(_))
                | (AttrKind::Json, Attr::Json(_))
                | (
                    AttrKind::Literal,
                    Attr::Str(_) | Attr::Number(_) | Attr::Bool(_) | Attr::Json(_),
                ) => None,
                (AttrKind::NonEmptyStr, Attr::Str(s)) => {
                    s.trim().is_empty().then(|| "must not be empty".to_string())
                }
                (AttrKind::Tier, Attr::Str(s)) => Tier::parse(s)
                    .is_none()
                    .then(|| format!("memory tier `{s}` is not one of stm, ltm, episodic")),
                (kind, a) => Some(format!(
                    "expected {}, found a {}",
                    kind_name(kind),
                    a.kind_name()
                )),
            };
            if let Some(message) = problem {
                self.push(VerifyError::BadAttr {
                    op: mn,
                    name: name.to_string(),
                    message,
                    span,
                });
            }
        }
        for spec in info.attrs {
            if spec.required && !od.attrs.has(spec.name) {
                self.push(VerifyError::MissingAttr {
                    op: mn,
                    name: spec.name,
                    span,
                });
            }
        }
        if let (Opcode::Template, Some(Attr::Str(t))) = (od.opcode, od.attrs.get("template")) {
            for idx in placeholders(t) {
                if idx >= od.operands.len() {
                    self.push(VerifyError::BadAttr {
                        op: mn,
                        name: "template".into(),
                        message: format!(
                            "placeholder {{{idx}}} has no operand ({} given)",
                            od.operands.len()
                        ),
                        span,
                    });
                }
            }
        }
    }

    fn regions(&mut self, _op: Op, od: &OpData, span: Span) {
        let info = od.opcode.info();
        let mn = info.mnemonic;
        let regs: Vec<&crate::RegionData> =
            od.regions.iter().map(|&r| &self.dfg.regions[r]).collect();
        let shape = |s: &mut Self, message: String| {
            s.push(VerifyError::RegionShape {
                op: mn,
                message,
                span,
            });
        };
        let no_args = |s: &mut Self, rd: &crate::RegionData| {
            if !rd.args.is_empty() {
                s.push(VerifyError::RegionShape {
                    op: mn,
                    message: format!("region `{}` takes no arguments", rd.label),
                    span,
                });
            }
        };
        let labels: Vec<&str> = regs.iter().map(|r| r.label.as_str()).collect();
        match info.regions {
            RegionSpec::None => {
                if !regs.is_empty() {
                    shape(self, "this op has no regions".into());
                }
                return;
            }
            RegionSpec::IfElse => {
                if labels != ["then", "else"] {
                    shape(
                        self,
                        format!("expected regions `then`, `else`, found {labels:?}"),
                    );
                }
                for rd in &regs {
                    no_args(self, rd);
                }
            }
            RegionSpec::TryCatch => {
                if labels != ["try", "catch"] {
                    shape(
                        self,
                        format!("expected regions `try`, `catch`, found {labels:?}"),
                    );
                }
                if let Some(t) = regs.first() {
                    no_args(self, t);
                }
                if let Some(c) = regs.get(1) {
                    let ok = c.args.len() == 1 && self.ty(c.args[0]).accepts(&Type::Json);
                    if !ok {
                        shape(
                            self,
                            "region `catch` takes one argument, the error (`json`)".into(),
                        );
                    }
                }
            }
            RegionSpec::Switch => {
                let mut keys = HashSet::default();
                let mut cases = 0;
                for (i, rd) in regs.iter().enumerate() {
                    no_args(self, rd);
                    match (rd.label.as_str(), &rd.key) {
                        ("case", Some(k)) => {
                            cases += 1;
                            if !keys.insert(k.as_str()) {
                                self.push(VerifyError::SwitchCases {
                                    message: format!("duplicate case \"{k}\" in `switch`"),
                                    span,
                                });
                            }
                        }
                        ("default", None) if i + 1 == regs.len() => {}
                        ("default", None) => {
                            shape(self, "`default` must be the last region".into())
                        }
                        (l, _) => shape(
                            self,
                            format!(
                                "unexpected region `{l}`; expected `case \"lit\"` or `default`"
                            ),
                        ),
                    }
                }
                if cases == 0 {
                    self.push(VerifyError::SwitchCases {
                        message: "`switch` has no cases".into(),
                        span,
                    });
                }
            }
            RegionSpec::Loop => {
                if labels != ["body"] {
                    shape(
                        self,
                        format!("expected one region `body`, found {labels:?}"),
                    );
                }
                let carried: Vec<Type> = od
                    .operands
                    .iter()
                    .skip(1)
                    .map(|&v| self.ty(v).clone())
                    .collect();
                if let Some(body) = regs.first() {
                    if body.args.len() != carried.len() + 2 {
                        shape(
                            self,
                            format!(
                                "region `body` takes (item, index, {} carried value(s)), found {} argument(s)",
                                carried.len(),
                                body.args.len()
                            ),
                        );
                    } else {
                        let elem = od.operands.first().and_then(|&l| self.ty(l).element());
                        let item = self.ty(body.args[0]).clone();
                        if let Some(e) = elem {
                            if item != e && !item.accepts(&e) {
                                shape(
                                    self,
                                    format!("loop item is `{e}` but the body argument is `{item}`"),
                                );
                            }
                        }
                        if *self.ty(body.args[1]) != Type::Number {
                            shape(self, "loop index argument must be `number`".into());
                        }
                        for (i, c) in carried.iter().enumerate() {
                            let a = self.ty(body.args[i + 2]);
                            if a != c && !a.accepts(c) {
                                shape(
                                    self,
                                    format!(
                                        "carried value {i} is `{c}` but the body argument is `{a}`"
                                    ),
                                );
                            }
                        }
                    }
                }
                if od.results.len() != carried.len() {
                    shape(
                        self,
                        format!(
                            "{} carried value(s) but {} result(s)",
                            carried.len(),
                            od.results.len()
                        ),
                    );
                } else {
                    for (i, (c, &r)) in carried.iter().zip(&od.results).enumerate() {
                        let rt = self.ty(r);
                        if rt != c && !rt.accepts(c) {
                            shape(
                                self,
                                format!("result {i} is `{rt}` but carried value {i} is `{c}`"),
                            );
                        }
                    }
                }
            }
        }
        // Every region yields the op's results.
        for rd in regs {
            let Some(&last) = rd.ops.last() else { continue };
            let y = &self.dfg.ops[last];
            if y.opcode != Opcode::Yield {
                continue;
            }
            let yspan = self.span(last);
            if y.operands.len() != od.results.len() {
                self.push(VerifyError::YieldMismatch {
                    message: format!(
                        "region `{}` yields {} value(s) but `{mn}` has {} result(s)",
                        rd.label,
                        y.operands.len(),
                        od.results.len()
                    ),
                    span: yspan,
                });
                continue;
            }
            for (i, (&yv, &r)) in y.operands.iter().zip(&od.results).enumerate() {
                let (yt, rt) = (self.ty(yv), self.ty(r));
                if yt != rt && !rt.accepts(yt) {
                    self.push(VerifyError::YieldMismatch {
                        message: format!(
                            "region `{}` yields `{yt}` for result {i} of `{mn}`, which is `{rt}`",
                            rd.label
                        ),
                        span: yspan,
                    });
                }
            }
        }
    }

    fn call(&mut self, od: &OpData, data: &[Value], span: Span) {
        let Some(Attr::Symbol { agent, flow }) = od.attrs.get("callee") else {
            return; // reported by the attribute checks
        };
        let callee = format!("{agent}.{flow}");
        let Some(aid) = self.index.agent(agent) else {
            self.push(VerifyError::UnknownCallee {
                callee,
                reason: format!("there is no agent `@{agent}`"),
                span,
            });
            return;
        };
        let Some(fid) = self.index.flow(aid, flow) else {
            self.push(VerifyError::UnknownCallee {
                callee,
                reason: format!("agent `@{agent}` has no flow `@{flow}`"),
                span,
            });
            return;
        };
        let target = &self.m.agents[aid].flows[fid];
        if target.params.len() != data.len() {
            self.push(VerifyError::CallArgCount {
                callee: callee.clone(),
                expected: target.params.len(),
                found: data.len(),
                span,
            });
        } else {
            for (i, ((pname, pv), &arg)) in target.params.iter().zip(data).enumerate() {
                let Some(pd) = target.dfg.values.get(*pv) else {
                    continue;
                };
                let at = self.ty(arg);
                if *at != pd.ty && !pd.ty.accepts(at) {
                    self.push(VerifyError::CallArgType {
                        callee: callee.clone(),
                        index: i,
                        param: pname.clone(),
                        expected: pd.ty.clone(),
                        found: at.clone(),
                        span,
                    });
                }
            }
        }
        // Results: [callee result unless void] [, ord].
        let value_results = usize::from(target.result != Type::Void);
        let mut rs = od.results.iter();
        if value_results == 1 {
            match rs.next() {
                Some(&r) => {
                    let rt = self.ty(r);
                    if *rt != target.result && !rt.accepts(&target.result) {
                        self.push(VerifyError::ResultType {
                            op: "flow.call",
                            index: 0,
                            expected: format!("`{}` (the result of `@{callee}`)", target.result),
                            found: rt.clone(),
                            span,
                        });
                    }
                }
                None => self.push(VerifyError::ResultCount {
                    op: "flow.call",
                    expected: format!("{} or {} (`@{callee}` returns `{}`)", 1, 2, target.result),
                    found: 0,
                    span,
                }),
            }
        }
        let rest: Vec<Value> = rs.copied().collect();
        let rest_ok = rest.is_empty() || (rest.len() == 1 && *self.ty(rest[0]) == Type::Ord);
        if !rest_ok {
            self.push(VerifyError::ResultCount {
                op: "flow.call",
                expected: format!(
                    "{value_results} or {} (the callee's result, then an optional `ord`)",
                    value_results + 1
                ),
                found: od.results.len(),
                span,
            });
        }
    }

    fn capability_args(&mut self, cap: &crate::Capability, args: Value, span: Span) {
        let t = self.ty(args);
        // A JSON object, JSON text (parsed and checked at run time) or null (no arguments).
        if !(t.is_dynamic() || matches!(t, Type::Str | Type::Null)) {
            self.push(VerifyError::CapabilityArgs {
                capability: cap.name.clone(),
                message: format!("arguments must be a JSON object (or JSON text), found `{t}`"),
                span,
            });
            return;
        }
        let ValueDef::Result(def, _) = self.dfg.values[args].def else {
            return;
        };
        let Some(d) = self.dfg.ops.get(def) else {
            return;
        };
        let Some(Attr::Json(serde_json::Value::Object(obj))) = d.attrs.get("value") else {
            return;
        };
        if d.opcode != Opcode::Const {
            return;
        }
        for (p, pt) in &cap.params {
            match obj.get(p) {
                None => self.push(VerifyError::CapabilityArgs {
                    capability: cap.name.clone(),
                    message: format!("missing argument `{p}`"),
                    span,
                }),
                Some(v) if !json_fits(pt, v) => self.push(VerifyError::CapabilityArgs {
                    capability: cap.name.clone(),
                    message: format!("argument `{p}` should be `{pt}`, found {v}"),
                    span,
                }),
                Some(_) => {}
            }
        }
        for k in obj.keys() {
            if !cap.params.iter().any(|(p, _)| p == k) {
                self.push(VerifyError::CapabilityArgs {
                    capability: cap.name.clone(),
                    message: format!("unknown argument `{k}`"),
                    span,
                });
            }
        }
    }

    /// Two memory writes to the same resource consuming the same token may
    /// run in either order, unless they sit in sibling regions (the branches
    /// of an `if`/`switch` are exclusive; `catch` runs after `try` has ended).
    fn ord_writes(&mut self) {
        let mut writers: HashMap<(Value, crate::MemResource), Op> = HashMap::default();
        // Region → parent region, to tell nesting from siblings, and op →
        // the region holding it, built once (`Dfg::region_of` scans every
        // region, which made this check quadratic); by number, not hashed.
        let mut parent: Vec<Option<Region>> = vec![None; self.dfg.regions.len()];
        let mut home: Vec<Option<Region>> = vec![None; self.dfg.ops.len()];
        let mut stack = vec![self.flow.body];
        while let Some(r) = stack.pop() {
            let Some(rd) = self.dfg.regions.get(r) else {
                continue;
            };
            for &op in &rd.ops {
                match home.get_mut(op.index()) {
                    Some(slot @ None) => *slot = Some(r),
                    _ => continue,
                }
                for &inner in &self.dfg.ops[op].regions {
                    if let Some(slot @ None) = parent.get_mut(inner.index()) {
                        *slot = Some(r);
                        stack.push(inner);
                    }
                }
            }
        }
        let encloses = |outer: Region, mut inner: Region| loop {
            if inner == outer {
                return true;
            }
            match parent.get(inner.index()).copied().flatten() {
                Some(p) => inner = p,
                None => return false,
            }
        };
        let home_of = |op: Op| home.get(op.index()).copied().flatten();
        for op in self.dfg.walk_region(self.flow.body) {
            let od = &self.dfg.ops[op];
            if od.opcode.effect() != Effect::MemWrite {
                continue;
            }
            let Some(res) = self.dfg.mem_resource(op) else {
                continue;
            };
            for &v in &od.operands {
                if *self.ty(v) != Type::Ord {
                    continue;
                }
                if let Some(&first) = writers.get(&(v, res.clone())) {
                    let nested = match (home_of(first), home_of(op)) {
                        (Some(a), Some(b)) => encloses(a, b) || encloses(b, a),
                        _ => true,
                    };
                    if first != op && nested {
                        let e = VerifyError::UnorderedWrites {
                            resource: res.to_string(),
                            token: self.name(v),
                            span: self.span(op),
                            other: self.span(first),
                        };
                        self.push(e);
                    }
                } else {
                    writers.insert((v, res.clone()), op);
                }
            }
        }
    }

    fn unused(&mut self) {
        let mut used = DenseSet::with_len(self.dfg.values.len());
        for op in self.dfg.walk_region(self.flow.body) {
            for &v in &self.dfg.ops[op].operands {
                used.insert(v);
            }
        }
        for op in self.dfg.walk_region(self.flow.body) {
            let od = &self.dfg.ops[op];
            if !od.opcode.is_pure() {
                continue;
            }
            for &r in &od.results {
                if !used.contains(r) {
                    let e = VerifyError::UnusedValue {
                        value: self.name(r),
                        op: od.opcode.mnemonic(),
                        span: self.span(op),
                    };
                    self.push(e);
                }
            }
        }
    }
}

fn kind_name(k: AttrKind) -> &'static str {
    match k {
        AttrKind::Str | AttrKind::NonEmptyStr | AttrKind::Tier => "a string",
        AttrKind::Number => "a number",
        AttrKind::Bool => "a bool",
        AttrKind::Flag => "a flag (no value)",
        AttrKind::Symbol => "a symbol `@Agent.flow`",
        AttrKind::Type => "a type",
        AttrKind::Json => "a json literal",
        AttrKind::Literal => "a literal",
    }
}

/// Does a JSON literal fit a declared parameter type?
fn json_fits(t: &Type, v: &serde_json::Value) -> bool {
    use serde_json::Value as J;
    match (t, v) {
        (t, _) if t.is_dynamic() => true,
        (Type::Str, J::String(_)) | (Type::Number, J::Number(_)) | (Type::Bool, J::Bool(_)) => true,
        (Type::Null, J::Null) => true,
        (Type::List(e), J::Array(xs)) => xs.iter().all(|x| json_fits(e, x)),
        _ => false,
    }
}

/// Indices of `{N}` placeholders in a template.
pub fn placeholders(t: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut rest = t;
    while let Some(i) = rest.find('{') {
        rest = &rest[i + 1..];
        if let Some(j) = rest.find('}') {
            if let Ok(n) = rest[..j].parse::<usize>() {
                out.push(n);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::module::{AgentData, FlowData};

    fn module_with(flow: FlowData) -> Module {
        let mut a = AgentData::new("A");
        a.add_flow(flow);
        let mut m = Module::new();
        m.add_agent(a);
        m
    }

    #[test]
    fn bad_handles_are_reported_before_semantics() {
        let mut flow = FlowData::new("f", Type::Str);
        let mut b = flow.builder();
        let op = b.ins(Opcode::Return, &[Value::from_u32(99)], &[]);
        let codes: Vec<_> = verify(&module_with(flow.clone()))
            .iter()
            .map(|e| e.code())
            .collect();
        assert_eq!(codes, ["V0001"]);
        // The same op placed twice is malformed.
        flow.dfg.ops[op].operands.clear();
        flow.dfg.regions[flow.body].ops.push(op);
        let codes: Vec<_> = verify(&module_with(flow))
            .iter()
            .map(|e| e.code())
            .collect();
        assert_eq!(codes, ["V0002"]);
    }

    #[test]
    fn builder_flow_verifies_clean() {
        let mut flow = FlowData::new("f", Type::Str);
        let p = flow.add_param("q", Type::Str);
        let mut b = flow.builder();
        let c = b.const_bool(true);
        let i = b.ins(Opcode::If, &[c], &[Type::Str]);
        b.with_region(i, "then", None, |b, _| {
            let a = b.ins1(Opcode::Ask, &[p], Type::Str);
            b.yield_(&[a]);
        });
        b.with_region(i, "else", None, |b, _| {
            b.yield_(&[p]);
        });
        let r = b.result(i, 0);
        b.ret(Some(r));
        assert_eq!(verify(&module_with(flow)), []);
    }

    #[test]
    fn placeholders_are_found() {
        assert_eq!(placeholders("a {0} b {12} {x} {"), [0, 12]);
    }
}
