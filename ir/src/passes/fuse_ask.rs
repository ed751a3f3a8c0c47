//! `fuse-ask` (the paper's FuseAskOps): fuses a producer→consumer chain of
//! `ask` calls into one call that asks for the final answer.
//!
//! A *link* `a → b` exists when
//! - `a` and `b` are fusable LLM ops (`ask`/`llm`; also `think`/`reason`
//!   with the `think` option) without `no_fuse`, in the same region;
//! - `a`'s result is a `str` with exactly one use in the flow, and that use
//!   reaches a data operand (prompt or context) of `b` directly or through a
//!   chain of `template`/`concat`/`merge` ops in the same region, each of
//!   whose results has exactly one use (so no intermediate is observable);
//! - `a` and `b` agree on `model`, `temperature` and `system`;
//! - neither offers its model tools (a non-empty `tools`): such a call is
//!   an exchange of turns with tool calls, not one text step.
//!
//! A chain `a1 → … → an` grows from its head while
//! - it has fewer than `max-depth` calls (default 5);
//! - the estimated fused prompt stays within `prompt-budget` characters
//!   (default 12000; each dynamic value counts [`HOLE_ESTIMATE`]);
//! - the new step adds no effect dependency: every effectful op (LLM,
//!   tool, memory, io, call, control) that the new step or its glue waits
//!   for — through data or ordering tokens — is already an ancestor of the
//!   head. So no call is ever moved across an effect: the fused call can
//!   start exactly when `a1` could, and effects between the links (a
//!   `print` whose token the next step takes, a tool result it reads) stop
//!   the chain.
//!
//! A chain of two or more calls becomes a `template` (the fused prompt) and
//! one LLM call placed where `an` was; `an`'s uses move to it. The fused
//! prompt keeps every step's instruction and context verbatim, numbered,
//! with earlier results referenced as `[result of step K]`, and asks for the
//! final result only (format: [`split_fused_prompt`]). A step's context
//! that is a value from outside the chain (a parameter, another call's
//! result) stays a context block of the fused call, under its label, once
//! however many steps use it, and the step refers to it as
//! `[context block K: label]` ([`context_marker`]): so a document every
//! call of a flow sends remains a block of its own, which `cache-layout`
//! can put in the prefix the calls share (issue 36), instead of text
//! inside one call's prompt.

use super::pipeline::{bool_option, usize_option, PassSpec, PipelineError};
use super::util::{
    const_str, def_op, erase_dead, erase_op, simple_template, template_safe, FlowFacts,
    TemplatePiece,
};
use super::{Changed, Pass};
use crate::entity::{Op, Value};
use crate::module::{Attr, Dfg, FlowData, Module};
use crate::ops::{Latency, Opcode};
use crate::printer::attr_text;
use crate::types::Type;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// Characters a dynamic value (a hole of the fused template) is assumed to
/// take when checking the prompt budget.
pub const HOLE_ESTIMATE: usize = 256;

/// How a `merge` used as glue between two steps is rendered: its operands'
/// texts joined by this separator (the runtime's merge separator).
pub const MERGE_SEPARATOR: &str = "\n\n";

const HEADING: &str = "\n\n### Step ";

/// How an op's context operand is labelled inside a step (1-based).
fn context_label(j: usize) -> String {
    format!("\n\nContext {j}:\n")
}

/// The reference to the fused call's context block `k` (1-based), labelled
/// `label`, inside a step of its prompt.
pub fn context_marker(k: usize, label: &str) -> String {
    format!("[context block {k}: {label}]")
}

/// A context label as it can appear in a marker and a template.
fn marker_label(label: &str) -> String {
    label
        .chars()
        .filter(|c| !matches!(c, '[' | ']' | '{' | '}' | '\n' | '\r'))
        .collect()
}

/// The labels an LLM op gives its context operands (its `context`
/// attribute; codegen's default where it has none).
fn context_labels(dfg: &Dfg, op: Op) -> Vec<Option<String>> {
    let given = dfg.ops.get(op).and_then(|d| match d.attrs.get("context") {
        Some(Attr::Json(serde_json::Value::Array(a))) => Some(a.clone()),
        _ => None,
    });
    let n = data_operands(dfg, op).len().saturating_sub(1);
    (0..n)
        .map(|i| {
            given
                .as_ref()
                .and_then(|a| a.get(i))
                .and_then(|l| l.as_str())
                .map(str::to_string)
        })
        .collect()
}

/// The reference to the result of step `k` inside a fused prompt.
pub fn result_marker(k: usize) -> String {
    format!("[result of step {k}]")
}

fn header(n: usize) -> String {
    format!(
        "Complete the following {n} steps in order. A step that mentions [result of step K] uses the result of that earlier step. \
Do not show intermediate results: reply with the final result of step {n} only."
    )
}

/// Splits a fused prompt (as produced by this pass, after its template is
/// filled) into its step texts, in order; `None` if `prompt` is not one.
/// Step `k > 1` refers to earlier results with [`result_marker`]. A step's
/// text is laid out as an unfused call is rendered: the prompt, then each
/// context as `"\n\nContext J:\n"` + text. Simulated backends use this to
/// answer fused calls consistently with the unfused chain.
pub fn split_fused_prompt(prompt: &str) -> Option<Vec<String>> {
    let rest = prompt.strip_prefix("Complete the following ")?;
    let (n, _) = rest.split_once(' ')?;
    let n: usize = n.parse().ok()?;
    let body = prompt.strip_prefix(&header(n))?;
    let mut steps = Vec::new();
    let mut rest = body;
    for k in 1..=n {
        let head = format!("{HEADING}{k}\n");
        rest = rest.strip_prefix(&head)?;
        let next = format!("{HEADING}{}\n", k + 1);
        let end = if k == n {
            rest.len()
        } else {
            rest.find(&next)?
        };
        steps.push(rest[..end].to_string());
        rest = &rest[end..];
    }
    Some(steps)
}

#[derive(Debug, Clone)]
pub struct FuseAsk {
    /// Maximum calls fused into one (>= 2 to fuse anything).
    pub max_depth: usize,
    /// Maximum estimated characters of a fused prompt.
    pub prompt_budget: usize,
    /// Also fuse `think` and `reason` (off by default: their latency class
    /// asks for a stronger model and more deliberate answers).
    pub think: bool,
    chains: u64,
    calls_removed: u64,
}

impl Default for FuseAsk {
    fn default() -> FuseAsk {
        FuseAsk {
            max_depth: 5,
            prompt_budget: 12_000,
            think: false,
            chains: 0,
            calls_removed: 0,
        }
    }
}

impl FuseAsk {
    /// Options: `max-depth=N`, `prompt-budget=N`, `think[=true|false]`.
    pub fn from_spec(spec: &PassSpec) -> Result<FuseAsk, PipelineError> {
        let mut p = FuseAsk::default();
        for (k, v) in &spec.options {
            match k.as_str() {
                "max-depth" => p.max_depth = usize_option(spec, k, v.as_deref())?,
                "prompt-budget" => p.prompt_budget = usize_option(spec, k, v.as_deref())?,
                "think" => p.think = bool_option(spec, k, v.as_deref())?,
                _ => {
                    return Err(PipelineError::UnknownOption {
                        pass: spec.name.clone(),
                        option: k.clone(),
                        known: "max-depth=N, prompt-budget=N, think",
                        span: spec.span,
                    })
                }
            }
        }
        Ok(p)
    }

    /// Text-reply LLM ops fuse; the slower latency classes only with `think`.
    fn fusable(&self, opcode: Opcode) -> bool {
        opcode
            .info()
            .llm
            .is_some_and(|k| !k.structured() && (k.latency() == Latency::Ask || self.think))
    }
}

/// Whether an LLM op's `tools` attribute offers its model any tool.
fn offers_tools(attrs: &crate::module::Attrs) -> bool {
    matches!(attrs.get("tools"), Some(Attr::Json(serde_json::Value::Array(t))) if !t.is_empty())
}

impl Pass for FuseAsk {
    fn name(&self) -> &'static str {
        "fuse-ask"
    }

    fn run(&mut self, m: &mut Module) -> Changed {
        self.chains = 0;
        self.calls_removed = 0;
        for (_, agent) in m.agents.iter_mut() {
            for (_, flow) in agent.flows.iter_mut() {
                self.flow(flow);
            }
        }
        Changed::from(self.chains > 0)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("fused chains", self.chains),
            ("calls removed", self.calls_removed),
        ]
    }
}

/// `a → b`: the glue ops on the way (in use order) and the operand of `b`
/// the value arrives at.
#[derive(Clone, Debug)]
struct Link {
    to: Op,
    glue: Vec<Op>,
}

/// A chain to fuse.
struct Chain {
    members: Vec<Op>,
    /// `glue[k]`: glue between member k and k+1.
    glue: Vec<Vec<Op>>,
}

impl FuseAsk {
    fn flow(&mut self, flow: &mut FlowData) {
        let facts = FlowFacts::new(flow);
        let dfg = &flow.dfg;
        let mut links: HashMap<Op, Link> = HashMap::default();
        let mut has_pred: HashSet<Op> = HashSet::default();
        for &op in &facts.order {
            if let Some(l) = self.link(dfg, &facts, op) {
                has_pred.insert(l.to);
                links.insert(op, l);
            }
        }
        if links.is_empty() {
            return;
        }
        // Grow chains from heads, in program order.
        let mut chains: Vec<Chain> = Vec::new();
        let mut heads: Vec<Op> = facts
            .order
            .iter()
            .copied()
            .filter(|o| links.contains_key(o) && !has_pred.contains(o))
            .collect();
        heads.reverse();
        while let Some(head) = heads.pop() {
            let mut chain = Chain {
                members: vec![head],
                glue: Vec::new(),
            };
            let head_ancestors = effect_ancestors(dfg, &operand_values(dfg, head));
            let mut size = step_estimate(dfg, head, head, None);
            let mut cur = head;
            while let Some(l) = links.get(&cur) {
                let b = l.to;
                let ok = chain.members.len() < self.max_depth
                    && compatible(dfg, head, b)
                    && {
                        let external = external_inputs(dfg, cur, l);
                        effect_ancestors(dfg, &external).is_subset(&head_ancestors)
                    }
                    && {
                        let s = step_estimate(dfg, cur, b, Some(l));
                        size += s;
                        size + header(chain.members.len() + 1).len() <= self.prompt_budget
                    };
                if !ok {
                    // `b` starts a chain of its own.
                    heads.push(b);
                    break;
                }
                chain.members.push(b);
                chain.glue.push(l.glue.clone());
                cur = b;
            }
            if chain.members.len() >= 2 {
                chains.push(chain);
            }
        }
        for chain in chains {
            self.fuse(flow, &facts, &chain);
        }
    }

    /// The link out of `a`, if any (ignoring depth, budget and effects).
    fn link(&self, dfg: &Dfg, facts: &FlowFacts, a: Op) -> Option<Link> {
        let ad = dfg.ops.get(a)?;
        if !self.fusable(ad.opcode) || ad.attrs.has("no_fuse") || offers_tools(&ad.attrs) {
            return None;
        }
        let region = facts.region(a)?;
        let [r] = ad.results.as_slice() else {
            return None;
        };
        if dfg.value_type(*r) != &Type::Str {
            return None;
        }
        let mut v = *r;
        let mut glue = Vec::new();
        loop {
            let [(user, _)] = facts.uses(v) else {
                return None;
            };
            let user = *user;
            if facts.region(user) != Some(region) || glue.len() > 16 {
                return None;
            }
            let ud = dfg.ops.get(user)?;
            match ud.opcode {
                Opcode::Template | Opcode::Concat | Opcode::Merge => {
                    if ud.opcode == Opcode::Template
                        && ud
                            .attrs
                            .get("template")
                            .and_then(Attr::as_str)
                            .and_then(simple_template)
                            .is_none()
                    {
                        return None;
                    }
                    let [res] = ud.results.as_slice() else {
                        return None;
                    };
                    if dfg.value_type(*res) != &Type::Str {
                        return None;
                    }
                    glue.push(user);
                    v = *res;
                }
                op if self.fusable(op)
                    && !ud.attrs.has("no_fuse")
                    && !offers_tools(&ud.attrs)
                    && user != a =>
                {
                    return Some(Link { to: user, glue });
                }
                _ => return None,
            }
        }
    }

    fn fuse(&mut self, flow: &mut FlowData, facts: &FlowFacts, chain: &Chain) {
        let (Some(&head), Some(&last)) = (chain.members.first(), chain.members.last()) else {
            return;
        };
        let Some(region) = facts.region(last) else {
            return;
        };
        let dfg = &flow.dfg;
        let n = chain.members.len();
        // Render the fused prompt. Contexts that are values from outside
        // the chain become the fused call's context blocks (see the module
        // documentation): (value, label).
        let mut blocks: Vec<(Value, String)> = Vec::new();
        let mut pieces = vec![Piece::Text(header(n))];
        for (k, &member) in chain.members.iter().enumerate() {
            pieces.push(Piece::Text(format!("{HEADING}{}\n", k + 1)));
            let prev = if k == 0 {
                None
            } else {
                let p = chain.members[k - 1];
                dfg.ops.get(p).and_then(|d| d.results.first().copied())
            };
            let glue: HashSet<Op> = if k == 0 {
                HashSet::default()
            } else {
                chain.glue[k - 1].iter().copied().collect()
            };
            let r = Renderer {
                dfg,
                prev,
                step: k,
                glue: &glue,
            };
            let labels = context_labels(dfg, member);
            for (j, v) in data_operands(dfg, member).into_iter().enumerate() {
                if j == 0 {
                    r.render(v, &mut pieces, 0);
                    continue;
                }
                pieces.push(Piece::Text(context_label(j)));
                let mut own = Vec::new();
                r.render(v, &mut own, 0);
                if own != [Piece::Hole(v)] {
                    pieces.extend(own);
                    continue;
                }
                let k = match blocks.iter().position(|(b, _)| *b == v) {
                    Some(k) => k,
                    None => {
                        let label = labels
                            .get(j - 1)
                            .cloned()
                            .flatten()
                            .unwrap_or_else(|| format!("context {}", blocks.len() + 1));
                        blocks.push((v, label));
                        blocks.len() - 1
                    }
                };
                let label = marker_label(&blocks[k].1);
                pieces.push(Piece::Text(context_marker(k + 1, &label)));
            }
        }
        let (text, holes) = assemble(&pieces);
        // Ordering tokens of every member, once each, in order.
        let mut tokens: Vec<Value> = Vec::new();
        for &member in &chain.members {
            if let Some(d) = dfg.ops.get(member) {
                for &v in &d.operands {
                    if dfg.value_type(v) == &Type::Ord && !tokens.contains(&v) {
                        tokens.push(v);
                    }
                }
            }
        }
        let opcodes: Vec<Opcode> = chain
            .members
            .iter()
            .filter_map(|&o| dfg.ops.get(o).map(|d| d.opcode))
            .collect();
        let opcode = if opcodes.iter().all(|&o| o == Opcode::Llm) {
            Opcode::Llm
        } else if opcodes.contains(&Opcode::Reason) {
            Opcode::Reason
        } else if opcodes.contains(&Opcode::Think) {
            Opcode::Think
        } else {
            Opcode::Ask
        };
        let mut attrs = crate::module::Attrs::default();
        let head_attrs = dfg
            .ops
            .get(head)
            .map(|d| d.attrs.clone())
            .unwrap_or_default();
        let last_attrs = dfg
            .ops
            .get(last)
            .map(|d| d.attrs.clone())
            .unwrap_or_default();
        for key in ["model", "temperature", "system"] {
            if let Some(a) = head_attrs.get(key) {
                attrs.set(key, a.clone());
            }
        }
        if let Some(a) = last_attrs.get("max_tokens") {
            attrs.set("max_tokens", a.clone());
        }
        if chain
            .members
            .iter()
            .all(|&o| dfg.ops.get(o).is_some_and(|d| d.attrs.has("cacheable")))
        {
            attrs.set("cacheable", Attr::Flag);
        }
        let Some(&last_result) = dfg.ops.get(last).and_then(|d| d.results.first()) else {
            return;
        };
        let result_ty = dfg.value_type(last_result).clone();
        let span = {
            let (s1, s2) = (dfg.span(head), dfg.span(last));
            if s1.is_dummy() {
                s2
            } else if s2.is_dummy() {
                s1
            } else {
                s1.to(s2)
            }
        };
        // Candidates for clean-up: inputs of everything removed.
        let mut removed: Vec<Op> = chain.members.clone();
        removed.extend(chain.glue.iter().flatten().copied());
        let candidates: Vec<Op> = removed
            .iter()
            .filter_map(|&o| dfg.ops.get(o))
            .flat_map(|d| d.operands.iter().filter_map(|&v| def_op(dfg, v)))
            .collect();

        // Build: prompt, then the call, just before `last`.
        let dfg = &mut flow.dfg;
        let prompt_op = if holes.is_empty() {
            let c = dfg.create_op(Opcode::Const, &[], &[Type::Str]);
            dfg.ops[c].attrs.set("value", Attr::Str(text));
            c
        } else {
            let t = dfg.create_op(Opcode::Template, &holes, &[Type::Str]);
            dfg.ops[t].attrs.set("template", Attr::Str(text));
            t
        };
        let prompt = dfg.ops[prompt_op].results[0];
        let mut operands = vec![prompt];
        operands.extend(blocks.iter().map(|(v, _)| *v));
        operands.extend(tokens);
        let call = dfg.create_op(opcode, &operands, &[result_ty]);
        dfg.ops[call].attrs = attrs;
        if !blocks.is_empty() {
            let labels = blocks.iter().map(|(_, l)| l.clone().into()).collect();
            dfg.ops[call]
                .attrs
                .set("context", Attr::Json(serde_json::Value::Array(labels)));
        }
        if !span.is_dummy() {
            dfg.set_span(prompt_op, span);
            dfg.set_span(call, span);
        }
        if let Some(rd) = dfg.regions.get_mut(region) {
            let Some(pos) = rd.ops.iter().position(|&o| o == last) else {
                return;
            };
            rd.ops.insert(pos, call);
            rd.ops.insert(pos, prompt_op);
        }
        let new_result = dfg.ops[call].results[0];
        dfg.replace_all_uses(last_result, new_result);
        for &o in &removed {
            erase_op(dfg, region, o);
        }
        erase_dead(flow, candidates);
        self.chains += 1;
        self.calls_removed += (n - 1) as u64;
    }
}

/// Data operands (prompt, contexts) of an LLM op: all but ordering tokens.
fn data_operands(dfg: &Dfg, op: Op) -> Vec<Value> {
    dfg.ops.get(op).map_or_else(Vec::new, |d| {
        d.operands
            .iter()
            .copied()
            .filter(|&v| dfg.value_type(v) != &Type::Ord)
            .collect()
    })
}

fn operand_values(dfg: &Dfg, op: Op) -> Vec<Value> {
    dfg.ops
        .get(op)
        .map_or_else(Vec::new, |d| d.operands.to_vec())
}

/// Inputs of `b` and of the glue of link `a → b` other than the chain value.
fn external_inputs(dfg: &Dfg, a: Op, l: &Link) -> Vec<Value> {
    let mut internal: HashSet<Value> = HashSet::default();
    if let Some(d) = dfg.ops.get(a) {
        internal.extend(d.results.iter().copied());
    }
    for &g in &l.glue {
        if let Some(d) = dfg.ops.get(g) {
            internal.extend(d.results.iter().copied());
        }
    }
    let mut out = Vec::new();
    for &o in l.glue.iter().chain(std::iter::once(&l.to)) {
        for v in operand_values(dfg, o) {
            if !internal.contains(&v) {
                out.push(v);
            }
        }
    }
    out
}

/// Effectful ops (anything not pure) that `values` transitively depend on,
/// through data and ordering tokens. A control op counts as one effect and
/// depends on everything its regions capture.
fn effect_ancestors(dfg: &Dfg, values: &[Value]) -> HashSet<Op> {
    let mut out = HashSet::default();
    let mut seen: HashSet<Op> = HashSet::default();
    let mut stack: Vec<Value> = values.to_vec();
    while let Some(v) = stack.pop() {
        let Some(op) = def_op(dfg, v) else { continue };
        if !seen.insert(op) {
            continue;
        }
        let Some(od) = dfg.ops.get(op) else { continue };
        if !od.opcode.is_pure() {
            out.insert(op);
        }
        stack.extend(od.operands.iter().copied());
        for &r in &od.regions {
            for inner in dfg.walk_region(r) {
                if let Some(d) = dfg.ops.get(inner) {
                    stack.extend(d.operands.iter().copied());
                }
            }
        }
    }
    out
}

/// Same model, temperature and system prompt.
fn compatible(dfg: &Dfg, a: Op, b: Op) -> bool {
    let (Some(x), Some(y)) = (dfg.ops.get(a), dfg.ops.get(b)) else {
        return false;
    };
    ["model", "temperature", "system"]
        .iter()
        .all(|k| x.attrs.get(k).map(|v| attr_text(k, v)) == y.attrs.get(k).map(|v| attr_text(k, v)))
}

/// Estimated characters a step adds to the fused prompt.
fn step_estimate(dfg: &Dfg, prev: Op, op: Op, link: Option<&Link>) -> usize {
    let glue: HashSet<Op> = link
        .map(|l| l.glue.iter().copied().collect())
        .unwrap_or_default();
    let r = Renderer {
        dfg,
        prev: link.and_then(|_| dfg.ops.get(prev).and_then(|d| d.results.first().copied())),
        step: 1,
        glue: &glue,
    };
    let mut pieces = Vec::new();
    for (j, v) in data_operands(dfg, op).into_iter().enumerate() {
        if j > 0 {
            pieces.push(Piece::Text(context_label(j)));
        }
        r.render(v, &mut pieces, 0);
    }
    HEADING.len()
        + 4
        + pieces
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.chars().count(),
                Piece::Hole(_) => HOLE_ESTIMATE,
                Piece::Marker(_) => 20,
            })
            .sum::<usize>()
}

#[derive(Clone, Debug, PartialEq)]
enum Piece {
    Text(String),
    Hole(Value),
    Marker(usize),
}

/// Renders a step's operand into pieces of the fused template.
struct Renderer<'a> {
    dfg: &'a Dfg,
    /// The previous step's result (becomes a marker).
    prev: Option<Value>,
    /// 0-based index of the step being rendered.
    step: usize,
    /// Glue ops of the link into this step (always expanded).
    glue: &'a HashSet<Op>,
}

impl Renderer<'_> {
    fn render(&self, v: Value, out: &mut Vec<Piece>, depth: usize) {
        if Some(v) == self.prev {
            out.push(Piece::Marker(self.step));
            return;
        }
        if let Some(s) = const_str(self.dfg, v) {
            if template_safe(s) {
                out.push(Piece::Text(s.to_string()));
                return;
            }
        }
        let def = def_op(self.dfg, v).and_then(|o| self.dfg.ops.get(o).map(|d| (o, d)));
        if let Some((o, d)) = def {
            let is_glue = self.glue.contains(&o);
            let str_result = self.dfg.value_type(v) == &Type::Str;
            // Glue is always expanded; other string templates and concats
            // are inlined for readability (a merge only as glue, since its
            // separator is the runtime's).
            if str_result && depth < 8 {
                match d.opcode {
                    Opcode::Template => {
                        let pieces = d
                            .attrs
                            .get("template")
                            .and_then(Attr::as_str)
                            .and_then(simple_template);
                        let in_range = pieces.as_ref().is_some_and(|ps| {
                            ps.iter().all(|p| match p {
                                TemplatePiece::Hole(n) => *n < d.operands.len(),
                                TemplatePiece::Text(_) => true,
                            })
                        });
                        if let (Some(ps), true) = (pieces, in_range) {
                            for p in ps {
                                match p {
                                    TemplatePiece::Text(t) => out.push(Piece::Text(t)),
                                    TemplatePiece::Hole(n) => {
                                        self.render(d.operands[n], out, depth + 1);
                                    }
                                }
                            }
                            return;
                        }
                    }
                    Opcode::Concat => {
                        for &x in &d.operands {
                            self.render(x, out, depth + 1);
                        }
                        return;
                    }
                    Opcode::Merge if is_glue => {
                        for (i, &x) in d.operands.iter().enumerate() {
                            if i > 0 {
                                out.push(Piece::Text(MERGE_SEPARATOR.to_string()));
                            }
                            self.render(x, out, depth + 1);
                        }
                        return;
                    }
                    _ => {}
                }
            }
        }
        out.push(Piece::Hole(v));
    }
}

/// Template text and operands from pieces (equal values share a hole).
fn assemble(pieces: &[Piece]) -> (String, Vec<Value>) {
    let mut text = String::new();
    let mut holes: Vec<Value> = Vec::new();
    for p in pieces {
        match p {
            Piece::Text(t) => text.push_str(t),
            Piece::Marker(k) => text.push_str(&result_marker(*k)),
            Piece::Hole(v) => {
                let i = holes.iter().position(|h| h == v).unwrap_or_else(|| {
                    holes.push(*v);
                    holes.len() - 1
                });
                text.push_str(&format!("{{{i}}}"));
            }
        }
    }
    (text, holes)
}
