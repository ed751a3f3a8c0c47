//! `cse`: common-subexpression elimination.
//!
//! Two ops are identical when they have the same opcode, operands (after
//! earlier replacements), attributes and result types. A later identical op
//! is replaced by an earlier one that dominates it: one earlier in the same
//! region or in an enclosing region. Eligible ops:
//! - pure ops without regions (`const`, `template`, `concat`, `merge`,
//!   arithmetic, ...);
//! - LLM ops carrying the `cacheable` flag (the author promises that the
//!   same request may be answered once). All other effects are never merged.

use super::util::{def_op, erase_ops};
use super::{Changed, Pass};
use crate::entity::{Region, Value};
use crate::module::{Attr, Attrs, Dfg, FlowData, Module};
use crate::ops::Effect;
use crate::printer::attr_text;
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;
use std::fmt::Write;
use std::rc::Rc;

#[derive(Debug, Default)]
pub struct Cse {
    merged: u64,
    merged_llm: u64,
}

impl Pass for Cse {
    fn name(&self) -> &'static str {
        "cse"
    }

    fn run(&mut self, m: &mut Module) -> Changed {
        *self = Cse::default();
        for (_, agent) in m.agents.iter_mut() {
            for (_, flow) in agent.flows.iter_mut() {
                self.flow(flow);
            }
        }
        Changed::from(self.merged + self.merged_llm > 0)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("merged ops", self.merged),
            ("merged llm calls", self.merged_llm),
        ]
    }
}

/// What makes two ops identical. Inline vectors and the attributes as one
/// string: a key per eligible op, built with a vector per part and a string
/// per attribute (and cloned whole when kept), was most of this pass's
/// allocations (issue 40).
#[derive(Debug, PartialEq, Eq, Hash)]
struct Key {
    opcode: crate::ops::Opcode,
    operands: SmallVec<[Value; 4]>,
    attrs: String,
    types: SmallVec<[crate::types::Type; 2]>,
}

/// The attributes as one string, each part length-prefixed so that
/// different lists never give the same text. A number is compared by its
/// bits (`0` and `-0` differ, as their printed forms do).
fn attrs_key(attrs: &Attrs) -> String {
    let mut out = String::new();
    for (name, a) in attrs.iter() {
        let _ = write!(out, "{}:{name}", name.len());
        let _ = match a {
            Attr::Flag => write!(out, "F;"),
            Attr::Bool(b) => write!(out, "B{};", u8::from(*b)),
            Attr::Number(n) => write!(out, "N{:x};", n.to_bits()),
            Attr::Str(s) => write!(out, "S{}:{s};", s.len()),
            Attr::Symbol { agent, flow } => {
                write!(out, "Y{}:{agent}{}:{flow};", agent.len(), flow.len())
            }
            Attr::Type(_) | Attr::Json(_) => {
                let text = attr_text(name, a);
                write!(out, "T{}:{text};", text.len())
            }
        };
    }
    out
}

/// The identical ops seen so far, visible from the region being walked: one
/// map for all enclosing regions (a map per region, searched outwards, cost
/// a lookup per enclosing region for every op).
#[derive(Default)]
struct Scopes {
    seen: HashMap<Rc<Key>, SmallVec<[Value; 2]>>,
    /// Merged results and what replaces them; applied to every operand once,
    /// at the end (replacing uses op by op scanned the flow per merge).
    replaced: HashMap<Value, Value>,
    /// Merged ops, erased at the end all at once.
    erased: Vec<(Region, crate::entity::Op)>,
}

impl Scopes {
    fn resolve(&self, v: Value) -> Value {
        self.replaced.get(&v).copied().unwrap_or(v)
    }
}

impl Cse {
    fn flow(&mut self, flow: &mut FlowData) {
        let mut scopes = Scopes::default();
        self.region(&mut flow.dfg, flow.body, &mut scopes);
        if !scopes.replaced.is_empty() {
            for (_, data) in flow.dfg.ops.iter_mut() {
                for v in data.operands.iter_mut() {
                    if let Some(&new) = scopes.replaced.get(v) {
                        *v = new;
                    }
                }
            }
        }
        erase_ops(&mut flow.dfg, &scopes.erased);
    }

    /// Walks `region` and every region nested in it, in program order, with
    /// an explicit stack of open regions: recursion here followed the
    /// input's nesting (and stopped silently at 256 levels, leaving deeper
    /// regions unmerged).
    fn region(&mut self, dfg: &mut Dfg, region: Region, scopes: &mut Scopes) {
        let mut stack = vec![Frame::new(dfg, region)];
        while let Some(frame) = stack.last_mut() {
            let Some(&op) = frame.ops.get(frame.next) else {
                if let Some(done) = stack.pop() {
                    for key in done.added {
                        scopes.seen.remove(&*key);
                    }
                }
                continue;
            };
            frame.next += 1;
            let region = frame.region;
            let Some(od) = dfg.ops.get(op) else { continue };
            if !od.regions.is_empty() {
                // Pushed last-first so the first region is walked first; each
                // is finished (and its keys dropped) before the next starts.
                let regions = od.regions.to_vec();
                for &r in regions.iter().rev() {
                    stack.push(Frame::new(dfg, r));
                }
                continue;
            }
            let effect = od.opcode.effect();
            let eligible =
                effect == Effect::Pure || (effect == Effect::Llm && od.attrs.has("cacheable"));
            if !eligible || od.results.is_empty() {
                continue;
            }
            let key = Key {
                opcode: od.opcode,
                operands: od.operands.iter().map(|&v| scopes.resolve(v)).collect(),
                attrs: attrs_key(&od.attrs),
                types: od
                    .results
                    .iter()
                    .map(|&r| dfg.value_type(r).clone())
                    .collect(),
            };
            match scopes.seen.get(&key) {
                Some(prev) if prev.len() == od.results.len() => {
                    for (old, new) in od.results.iter().zip(prev) {
                        scopes.replaced.insert(*old, *new);
                    }
                    // Keep the earliest span if the kept op has none.
                    if let Some(kept) = prev.first().and_then(|&v| def_op(dfg, v)) {
                        if dfg.span(kept).is_dummy() {
                            let sp = dfg.span(op);
                            dfg.set_span(kept, sp);
                        }
                    }
                    scopes.erased.push((region, op));
                    if effect == Effect::Llm {
                        self.merged_llm += 1;
                    } else {
                        self.merged += 1;
                    }
                }
                // An earlier op with this key but other results (kept, as
                // before: the innermost definition wins).
                Some(_) => {}
                None => {
                    let key = Rc::new(key);
                    scopes.seen.insert(Rc::clone(&key), od.results.clone());
                    if let Some(top) = stack.last_mut() {
                        top.added.push(key);
                    }
                }
            }
        }
    }
}

/// A region being walked: its ops, the next one to visit, and the keys it
/// added to [`Scopes::seen`] (removed when it ends).
struct Frame {
    region: Region,
    ops: Vec<crate::entity::Op>,
    next: usize,
    added: Vec<Rc<Key>>,
}

impl Frame {
    fn new(dfg: &Dfg, region: Region) -> Frame {
        let ops = dfg
            .regions
            .get(region)
            .map(|r| r.ops.clone())
            .unwrap_or_default();
        crate::work::add(ops.len());
        Frame {
            region,
            ops,
            next: 0,
            added: Vec::new(),
        }
    }
}
