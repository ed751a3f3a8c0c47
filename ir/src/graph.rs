//! Graph renderings of each flow's data-flow graph: Graphviz DOT and Mermaid.
//!
//! Nodes are ops labelled `mnemonic [latency]` (plus parameters); data edges
//! are solid, ordering-token edges dashed; regions are clusters / subgraphs.

use crate::entity::{Op, Region, Value};
use crate::module::{FlowData, Module, ValueDef};
use crate::types::Type;
use std::fmt::Write;

/// One node id per op / parameter, unique within the whole module.
fn op_node(a: usize, f: usize, op: Op) -> String {
    format!("a{a}_f{f}_op{}", op.as_u32())
}

fn source_node(a: usize, f: usize, flow: &FlowData, v: Value) -> Option<String> {
    match flow.dfg.values.get(v)?.def {
        ValueDef::Result(op, _) => Some(op_node(a, f, op)),
        ValueDef::Param(i) => Some(format!("a{a}_f{f}_p{i}")),
        ValueDef::Arg(r, i) => Some(format!("a{a}_f{f}_r{}_arg{i}", r.as_u32())),
    }
}

fn op_label(flow: &FlowData, op: Op) -> String {
    let od = &flow.dfg.ops[op];
    let info = od.opcode.info();
    let mut l = od.opcode.mnemonic().to_string();
    if let Some(t) = od.attrs.get("tool").and_then(|a| a.as_str()) {
        let _ = write!(l, " {t}");
    }
    if let Some(t) = od.attrs.get("tier").and_then(|a| a.as_str()) {
        let _ = write!(l, " {t}");
    }
    if let Some(crate::Attr::Symbol { agent, flow }) = od.attrs.get("callee") {
        let _ = write!(l, " @{agent}.{flow}");
    }
    if info.latency != crate::Latency::None {
        let _ = write!(l, " [{}]", info.latency.name());
    }
    l
}

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Graphviz DOT for every flow of the module.
pub fn to_dot(m: &Module) -> String {
    let mut out = String::from(
        "digraph ais {\n  compound=true;\n  node [shape=box, fontname=\"monospace\"];\n",
    );
    for (ai, (_, agent)) in m.agents.iter().enumerate() {
        for (fi, (_, flow)) in agent.flows.iter().enumerate() {
            let _ = writeln!(
                out,
                "  subgraph cluster_a{ai}_f{fi} {{\n    label=\"@{}.{}\";",
                esc(&agent.name),
                esc(&flow.name)
            );
            for (i, (name, _)) in flow.params.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "    a{ai}_f{fi}_p{i} [label=\"%{}\", shape=ellipse];",
                    esc(name)
                );
            }
            dot_region(&mut out, ai, fi, flow, flow.body, 2);
            out.push_str("  }\n");
            for op in flow.walk() {
                for &v in &flow.dfg.ops[op].operands {
                    let Some(src) = source_node(ai, fi, flow, v) else {
                        continue;
                    };
                    let dashed = flow.dfg.values.get(v).is_some_and(|d| d.ty == Type::Ord);
                    let style = if dashed { " [style=dashed]" } else { "" };
                    let _ = writeln!(out, "  {src} -> {}{style};", op_node(ai, fi, op));
                }
            }
        }
    }
    out.push_str("}\n");
    out
}

fn dot_region(out: &mut String, a: usize, f: usize, flow: &FlowData, r: Region, depth: usize) {
    let pad = "  ".repeat(depth);
    let Some(rd) = flow.dfg.regions.get(r) else {
        return;
    };
    for (i, _) in rd.args.iter().enumerate() {
        let _ = writeln!(
            out,
            "{pad}a{a}_f{f}_r{}_arg{i} [label=\"arg {i}\", shape=ellipse];",
            r.as_u32()
        );
    }
    for &op in &rd.ops {
        let _ = writeln!(
            out,
            "{pad}{} [label=\"{}\"];",
            op_node(a, f, op),
            esc(&op_label(flow, op))
        );
        for &child in &flow.dfg.ops[op].regions {
            let Some(cd) = flow.dfg.regions.get(child) else {
                continue;
            };
            let key = cd
                .key
                .as_deref()
                .map(|k| format!(" {k:?}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{pad}subgraph cluster_a{a}_f{f}_r{} {{\n{pad}  label=\"{}{}\";",
                child.as_u32(),
                esc(&cd.label),
                esc(&key)
            );
            dot_region(out, a, f, flow, child, depth + 1);
            let _ = writeln!(out, "{pad}}}");
        }
    }
}

/// A Mermaid `flowchart` for every flow of the module.
pub fn to_mermaid(m: &Module) -> String {
    let mut out = String::from("flowchart TD\n");
    for (ai, (_, agent)) in m.agents.iter().enumerate() {
        for (fi, (_, flow)) in agent.flows.iter().enumerate() {
            let _ = writeln!(
                out,
                "  subgraph a{ai}_f{fi} [\"@{}.{}\"]",
                mq(&agent.name),
                mq(&flow.name)
            );
            for (i, (name, _)) in flow.params.iter().enumerate() {
                let _ = writeln!(out, "    a{ai}_f{fi}_p{i}([\"%{}\"])", mq(name));
            }
            mermaid_region(&mut out, ai, fi, flow, flow.body, 2);
            out.push_str("  end\n");
            for op in flow.walk() {
                for &v in &flow.dfg.ops[op].operands {
                    let Some(src) = source_node(ai, fi, flow, v) else {
                        continue;
                    };
                    let dashed = flow.dfg.values.get(v).is_some_and(|d| d.ty == Type::Ord);
                    let arrow = if dashed { "-.->" } else { "-->" };
                    let _ = writeln!(out, "  {src} {arrow} {}", op_node(ai, fi, op));
                }
            }
        }
    }
    out
}

fn mq(s: &str) -> String {
    s.replace('"', "#quot;")
}

fn mermaid_region(out: &mut String, a: usize, f: usize, flow: &FlowData, r: Region, depth: usize) {
    let pad = "  ".repeat(depth);
    let Some(rd) = flow.dfg.regions.get(r) else {
        return;
    };
    for (i, _) in rd.args.iter().enumerate() {
        let _ = writeln!(out, "{pad}a{a}_f{f}_r{}_arg{i}([\"arg {i}\"])", r.as_u32());
    }
    for &op in &rd.ops {
        let _ = writeln!(
            out,
            "{pad}{}[\"{}\"]",
            op_node(a, f, op),
            mq(&op_label(flow, op))
        );
        for &child in &flow.dfg.ops[op].regions {
            let Some(cd) = flow.dfg.regions.get(child) else {
                continue;
            };
            let key = cd
                .key
                .as_deref()
                .map(|k| format!(" {}", mq(k)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{pad}subgraph a{a}_f{f}_r{} [\"{}{}\"]",
                child.as_u32(),
                mq(&cd.label),
                key
            );
            mermaid_region(out, a, f, flow, child, depth + 1);
            let _ = writeln!(out, "{pad}end");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AgentData, Attr, FlowData, Opcode};

    #[test]
    fn renders_data_and_token_edges() {
        let mut flow = FlowData::new("main", Type::Str);
        let p = flow.add_param("q", Type::Str);
        let mut b = flow.builder();
        let q = b.ins_attrs(
            Opcode::Qmem,
            &[p],
            vec![("tier".into(), Attr::Str("stm".into()))],
            &[Type::Json, Type::Ord],
        );
        let tok = b.result(q, 1);
        let pr = b.ins1(Opcode::Print, &[p, tok], Type::Ord);
        let _ = pr;
        b.ret(Some(p));
        let mut a = AgentData::new("A");
        a.add_flow(flow);
        let mut m = Module::new();
        m.add_agent(a);
        let dot = to_dot(&m);
        assert!(
            dot.contains("a0_f0_op0 -> a0_f0_op1 [style=dashed];"),
            "{dot}"
        );
        assert!(dot.contains("a0_f0_p0 -> a0_f0_op0;"), "{dot}");
        assert!(dot.contains("qmem stm [mem]"), "{dot}");
        let mm = to_mermaid(&m);
        assert!(mm.contains("a0_f0_op0 -.-> a0_f0_op1"), "{mm}");
    }
}
