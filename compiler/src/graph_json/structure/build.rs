//! The pieces the structurizer writes (nodes, edges, regions of ours) and
//! reads (loop counts, labels, the order of the flat graph).

use super::super::schema::{Dependency, Edge, Node, Parent, RegionSpec};
use super::markers::Marker;
use serde_json::{json, Value as Json};

/// A constant node of ours (tagged, so any JSON reads back as it is).
pub fn const_node(id: u64, ty: &str, value: Json, parent: Option<Parent>) -> Node {
    Node {
        id: Some(id),
        name: format!("const_{id}"),
        op: Some("CONST_STR".into()),
        attributes: [(
            "value".to_string(),
            json!({"$kind": "json", "value": value}),
        )]
        .into_iter()
        .collect(),
        results: Some(vec![ty.to_string()]),
        parent,
        regions: Vec::new(),
    }
}

/// Most iterations a counted loop may have: its items are one constant.
pub const MAX_COUNT: u64 = 100_000;

/// A counted loop's iterations: `max_iterations`, else a numeric
/// `count_token` or `count`, else 100 (the reference's default).
pub fn count(attrs: &indexmap::IndexMap<String, Json>) -> Result<u64, String> {
    let num = |k: &str| match attrs.get(k) {
        Some(Json::Number(n)) => n.as_f64(),
        Some(Json::String(s)) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    let n = num("max_iterations")
        .or_else(|| num("count_token"))
        .or_else(|| num("count"))
        .unwrap_or(100.0);
    if !(0.0..=MAX_COUNT as f64).contains(&n) || n.fract() != 0.0 {
        return Err(format!(
            "a loop's count must be a whole number from 0 to {MAX_COUNT}, not {n}"
        ));
    }
    Ok(n as u64)
}

/// `{{node_7}}` (or a bare id) in an attribute: the label it names.
pub fn reference_of(v: &Json) -> Option<Json> {
    match v {
        Json::String(s) => {
            let s = s.trim();
            let inner = s
                .strip_prefix("{{")
                .and_then(|r| r.strip_suffix("}}"))
                .unwrap_or(s);
            Some(Json::String(inner.trim().to_string()))
        }
        Json::Number(_) => Some(v.clone()),
        _ => None,
    }
}

/// Whether a node's first value is data (not only an ordering token), by
/// the op table; the reference-only ops all have one but `AGENT`.
pub fn has_value(n: &Node) -> bool {
    use ais_ir::ops::{Canon, ResultRule};
    let Some(op) = n.op.as_deref() else {
        return false;
    };
    match ais_ir::Opcode::from_graph_name(op) {
        Some(o) => match o.info().result_rule {
            ResultRule::None => false,
            ResultRule::Fixed(rs) => rs.first().is_some_and(|c| *c != Canon::Ord),
            _ => true,
        },
        None => op != "AGENT",
    }
}

pub fn region_spec(label: &str, key: Option<String>, args: &[&str]) -> RegionSpec {
    RegionSpec {
        label: label.to_string(),
        key,
        args: args.iter().map(|s| s.to_string()).collect(),
    }
}

pub fn data_edge(from: u64, to: u64, result: Option<usize>, operand: Option<usize>) -> Edge {
    Edge {
        from: Some(from),
        to,
        dependency: Dependency::Data,
        param: None,
        result,
        region_arg: None,
        operand,
    }
}

/// Kahn's order over `preds` (and, with `labels`, an edge from each marker
/// to the nodes its labels name); `None` on a cycle.
pub fn topo(
    n: usize,
    preds: &[Vec<usize>],
    target: &[Option<(usize, usize)>],
    found: &[Marker],
    labels: bool,
) -> Option<Vec<usize>> {
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut indeg = vec![0usize; n];
    for (v, ps) in preds.iter().enumerate() {
        for &p in ps {
            succ[p].push(v);
            indeg[v] += 1;
        }
        if labels {
            if let Some((c, _)) = target[v] {
                succ[found[c].node].push(v);
                indeg[v] += 1;
            }
        }
    }
    let mut ready: std::collections::VecDeque<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
    let mut out = Vec::with_capacity(n);
    while let Some(i) = ready.pop_front() {
        out.push(i);
        for &j in &succ[i] {
            indeg[j] -= 1;
            if indeg[j] == 0 {
                ready.push_back(j);
            }
        }
    }
    (out.len() == n).then_some(out)
}
