//! What makes our nodes reference nodes: each is written as one of the
//! reference's ops (`Opcode::reference_form`), with the attributes the
//! reference requires of that op filled from the node's operands
//! (`{{node_N}}` names the node an operand comes from). Our op, when the
//! reference has none, is the `ais_op` attribute; a flow parameter is a
//! `CONST_STR` node with `ais_param`. Reading our own nodes (they carry
//! `results`), these mirrors are skipped: our attributes and edges say it
//! all, so the trip back gives the same IR.

use super::schema::Node;
use ais_ir::ops::reference_required;
use ais_ir::{Attr, Dfg, OpData, Opcode, Type};
use serde_json::{json, Value as Json};

type Attrs = indexmap::IndexMap<String, Json>;

/// Fills the reference's required attributes; returns the op written.
pub fn mirror(
    dfg: &Dfg,
    od: &OpData,
    refs: &[String],
    firsts: &[String],
    attrs: &mut Attrs,
) -> &'static str {
    use Opcode as O;
    let op = od.opcode;
    let written = op.reference_form();
    if op.graph_name() != written {
        attrs.insert("ais_op".into(), json!(op.mnemonic()));
    }
    let r = |k: usize| json!(refs.get(k).cloned().unwrap_or_default());
    let first = |k: usize| json!(firsts.get(k).cloned().unwrap_or_default());
    let name_attr = || match od.attrs.get("name") {
        Some(Attr::Str(s)) => json!(s),
        _ => json!(""),
    };
    let mut put = |k: &str, v: Json| {
        attrs.entry(k.to_string()).or_insert(v);
    };
    match written {
        "ASK" | "THINK" | "REASON" => {
            // The prompt is input 0; the reference drops other inputs when
            // the template has a hole, so they are holes too.
            let mut t = "{0}".to_string();
            for k in 1..refs.len() {
                t.push_str(&format!("\n\n{{{k}}}"));
            }
            put("template_str", json!(t));
        }
        "PLAN" => put("goal", r(0)),
        "REFLECT" => put("trace_query", r(0)),
        "VERIFY" => {
            put("claim", r(0));
            put("evidence", r(1));
        }
        "INV" => {
            if let Some(Attr::Str(t)) = od.attrs.get("tool") {
                put("capability", json!(t));
            }
        }
        "EXC" => put("code", r(0)),
        "QMEM" if op == O::BeliefGet => put("query", name_attr()),
        "QMEM" => put("query", r(0)),
        "UMEM" if op == O::BeliefSet => {
            put("key", name_attr());
            put("value", r(0));
        }
        "UMEM" => {
            put("key", r(1));
            put("value", r(0));
        }
        "PRINT" => put("message", json!("")),
        "RETURN" => put("token", r(0)),
        "YIELD" => put("value", r(0)),
        "SWITCH" => {
            put("discriminant", r(0));
            let cases: Vec<Json> = od
                .regions
                .iter()
                .enumerate()
                .map(|(k, &reg)| {
                    let label = dfg.regions[reg]
                        .key
                        .clone()
                        .unwrap_or_else(|| dfg.regions[reg].label.clone());
                    json!({"label": label, "node_id": first(k)})
                })
                .collect();
            put("cases", Json::Array(cases));
        }
        "FLOW_CALL" => {
            if let Some(Attr::Symbol { agent, flow }) = od.attrs.get("callee") {
                put("agent_name", json!(agent));
                put("flow_name", json!(flow));
            }
        }
        "MERGE" | "WAIT_ALL" => {
            put(
                "tokens",
                Json::Array(refs.iter().map(|s| json!(s)).collect()),
            );
            if written == "MERGE" {
                let strategy = match op {
                    O::Merge => "join",
                    O::Concat => "concat",
                    _ => "array",
                };
                put("strategy", json!(strategy));
            }
        }
        "TRY_CATCH" => {
            put("try_subgraph", first(0));
            put("catch_subgraph", first(1));
        }
        "COMMUNICATE" => {
            put("target_agent", r(0));
            put("message", r(1));
        }
        "GUARD" => {
            // Our condition operand is a bool: the reference's `is_true`.
            put("condition", json!("is_true"));
            put("error_message", r(1));
        }
        "PAUSE" => put("message", r(0)),
        "BRANCH_ON_VALUE" => {
            put("token", r(0));
            put("value", json!("true"));
            put("label_true", first(0));
            put("label_false", first(1));
        }
        "LOOP_START" => put("count_token", r(0)),
        _ => {}
    }
    written
}

/// The node standing for flow parameter `name`.
pub fn param_node(id: u64, name: &str, ty: &Type) -> Node {
    let mut attributes = Attrs::new();
    attributes.insert("value".into(), json!(format!("{{{{{name}}}}}")));
    attributes.insert("ais_param".into(), json!(name));
    Node {
        id: Some(id),
        name: format!("param_{name}"),
        op: Some("CONST_STR".into()),
        attributes,
        results: Some(vec![ty.to_string()]),
        parent: None,
        regions: Vec::new(),
    }
}

/// Our own node (it carries `results`): its opcode, from `ais_op` or its
/// op name; `None` when `ais_op` names no op.
pub fn our_opcode(node: &Node, written: &str) -> Option<Opcode> {
    match node.attributes.get("ais_op") {
        Some(Json::String(m)) => Opcode::from_mnemonic(m),
        Some(_) => None,
        None => Opcode::from_graph_name(written),
    }
}

/// Whether attribute `name` of our node written as `written` is a mirror
/// (skipped on reading), not one of `op`'s own.
pub fn is_mirror(op: Opcode, written: &str, name: &str) -> bool {
    op.info().attr(name).is_none()
        && (matches!(name, "ais_op" | "strategy" | "error_message")
            || reference_required(written).is_some_and(|r| r.contains(&name)))
}
