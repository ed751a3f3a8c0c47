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

use super::util::{def_op, erase_op};
use super::{Changed, Pass};
use crate::entity::{Region, Value};
use crate::module::{Dfg, FlowData, Module};
use crate::ops::Effect;
use crate::printer::attr_text;
use rustc_hash::FxHashMap as HashMap;

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

/// What makes two ops identical.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    opcode: crate::ops::Opcode,
    operands: Vec<Value>,
    attrs: Vec<String>,
    types: Vec<String>,
}

impl Cse {
    fn flow(&mut self, flow: &mut FlowData) {
        let mut scopes: Vec<HashMap<Key, Vec<Value>>> = Vec::new();
        self.region(&mut flow.dfg, flow.body, &mut scopes, 0);
    }

    fn region(
        &mut self,
        dfg: &mut Dfg,
        region: Region,
        scopes: &mut Vec<HashMap<Key, Vec<Value>>>,
        depth: usize,
    ) {
        if depth > 256 {
            return;
        }
        scopes.push(HashMap::default());
        let ops = dfg
            .regions
            .get(region)
            .map(|r| r.ops.clone())
            .unwrap_or_default();
        for op in ops {
            let Some(od) = dfg.ops.get(op) else { continue };
            let regions = od.regions.to_vec();
            if !regions.is_empty() {
                for r in regions {
                    self.region(dfg, r, scopes, depth + 1);
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
                operands: od.operands.to_vec(),
                attrs: od.attrs.iter().map(|(n, a)| attr_text(n, a)).collect(),
                types: od
                    .results
                    .iter()
                    .map(|&r| dfg.value_type(r).to_string())
                    .collect(),
            };
            let results = od.results.to_vec();
            let earlier = scopes.iter().rev().find_map(|s| s.get(&key)).cloned();
            match earlier {
                Some(prev) if prev.len() == results.len() => {
                    for (old, new) in results.iter().zip(&prev) {
                        dfg.replace_all_uses(*old, *new);
                    }
                    // Keep the earliest span if the kept op has none.
                    if let Some(kept) = prev.first().and_then(|&v| def_op(dfg, v)) {
                        if dfg.span(kept).is_dummy() {
                            let sp = dfg.span(op);
                            dfg.set_span(kept, sp);
                        }
                    }
                    erase_op(dfg, region, op);
                    if effect == Effect::Llm {
                        self.merged_llm += 1;
                    } else {
                        self.merged += 1;
                    }
                }
                _ => {
                    if let Some(top) = scopes.last_mut() {
                        top.insert(key, results);
                    }
                }
            }
        }
        scopes.pop();
    }
}
