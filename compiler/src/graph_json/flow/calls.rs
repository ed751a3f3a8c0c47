//! Reference nodes whose value only says "this happened": a halting
//! `GUARD`, and a lone graph's `FLOW_CALL` to an agent it does not define
//! (docs/graph-json.md). What they feed by a `Data` edge waits for them.

use super::{FlowLowering, Source};
use crate::graph_json::build::Build;
use ais_ir::{Attr, Opcode, Type, Value};

impl FlowLowering<'_, '_> {
    /// The ordering token of a gated node (a halting `GUARD`) that feeds
    /// node `i` by its `Data` edge `e`: its value is only "passed", so what
    /// depends on it must also wait for it (the reference runs a node
    /// after its inputs' nodes; a `CLAIM` after a guard must not take a
    /// job the guard would have refused).
    pub(super) fn guard_token(&self, i: usize, e: usize) -> Option<Value> {
        let input = self.inputs[i].iter().find(|x| x.edge == e)?;
        let Source::Node { node, result: None } = input.source else {
            return None;
        };
        if !self.gated.contains(&node) {
            return None;
        }
        match self.values.get(node)?.as_slice() {
            [_, t] => Some(*t),
            _ => None,
        }
    }

    /// The agent and flow of a reference `FLOW_CALL` to an agent from
    /// elsewhere: a lone graph (not a whole program) naming an agent it
    /// does not define and that is no misspelling of one it does (the
    /// reference resolves agents at run time, among those registered).
    /// Anything else stays a call, checked by the verifier (`V0019`).
    pub(super) fn external_callee(
        &self,
        attrs: &indexmap::IndexMap<String, serde_json::Value>,
    ) -> Option<(String, String)> {
        let agent = attrs.get("agent_name")?.as_str()?;
        let callee = attrs.get("flow_name")?.as_str()?;
        if self.whole_program {
            return None;
        }
        let known: Vec<String> = self.results.keys().map(|(a, _)| a.clone()).collect();
        let lower = agent.to_ascii_lowercase();
        let near = known
            .iter()
            .any(|k| k == agent || k.to_ascii_lowercase() == lower)
            || crate::sema::closest(agent, known.iter()).is_some();
        (!near).then(|| (agent.to_string(), callee.to_string()))
    }
}

/// A call to an agent the program does not have: a `guard` that fails with
/// `message` when the call would run (after its ordering inputs), and a
/// `null` value that waits for it (the node is gated).
pub(super) fn external_call(b: &mut Build<'_>, message: String, tokens: &[Value]) -> Vec<Value> {
    let no = b.konst(Attr::Bool(false), Type::Bool);
    let m = b.konst(Attr::Str(message), Type::Str);
    let mut operands = vec![no, m];
    operands.extend(tokens.iter().copied());
    let t = b.op1(Opcode::Guard, &operands, Type::Ord, Vec::new());
    let null = b.konst(Attr::Json(serde_json::Value::Null), Type::Null);
    vec![null, t]
}
