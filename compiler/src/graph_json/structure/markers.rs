//! Which nodes of a flat reference graph are control markers, and which
//! nodes their labels name (docs/graph-json.md, "Flat control flow").

use super::super::schema::Graph;
use serde_json::Value as Json;
use std::collections::HashMap;

/// What a marker becomes.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// `BRANCH_ON_VALUE`: a new `if` on the marker's value (whether its
    /// input equals `value`); arms then, else.
    If,
    /// A flat `SWITCH`: the node itself becomes our `switch`; one arm per
    /// case (its key), then the default.
    Switch(Vec<String>),
    /// `TRY_CATCH` with `try_subgraph`/`catch_subgraph` naming nodes: the
    /// node itself becomes our `try_catch`; arms try, catch.
    Try,
    /// `LOOP_START` with a `LOOP_END` after it: the node becomes our `loop`
    /// over its input (or over `0..count`); one arm, the body.
    Loop,
}

pub struct Marker {
    /// Index of the marker node.
    pub node: usize,
    pub kind: Kind,
    /// Per arm, the node its label names (an arm whose label names no node
    /// is empty).
    pub targets: Vec<Option<usize>>,
    /// The attribute each arm's label is in (for diagnostics).
    pub keys: Vec<String>,
}

/// Resolves labels: a node id (number, `"7"`, `"node_7"`) or a node name
/// that only one node has.
pub struct Names {
    ids: HashMap<u64, usize>,
    names: HashMap<String, Option<usize>>,
}

impl Names {
    pub fn new(g: &Graph, ids: HashMap<u64, usize>) -> Names {
        let mut names: HashMap<String, Option<usize>> = HashMap::new();
        for (i, n) in g.nodes.iter().enumerate() {
            names
                .entry(n.name.clone())
                .and_modify(|e| *e = None)
                .or_insert(Some(i));
        }
        Names { ids, names }
    }

    pub fn resolve(&self, label: &Json) -> Option<usize> {
        match label {
            Json::Number(n) => n.as_u64().and_then(|id| self.ids.get(&id).copied()),
            Json::String(s) => {
                let s = s.trim();
                let digits = s.strip_prefix("node_").unwrap_or(s);
                if let Ok(id) = digits.parse::<u64>() {
                    if let Some(&i) = self.ids.get(&id) {
                        return Some(i);
                    }
                }
                self.names.get(s).copied().flatten()
            }
            _ => None,
        }
    }
}

fn first<'a>(
    attrs: &'a indexmap::IndexMap<String, Json>,
    keys: &[&str],
) -> Option<(&'a Json, String)> {
    keys.iter()
        .find_map(|k| attrs.get(*k).map(|v| (v, (*k).to_string())))
}

/// The markers of `g` whose labels name at least one node. A marker whose
/// labels name no node (the reference's code generator writes `if_true_12`)
/// stays a flat marker with the value the reference's runtime gives it.
pub fn find(g: &Graph, names: &Names) -> Vec<Marker> {
    let mut out = Vec::new();
    for (i, n) in g.nodes.iter().enumerate() {
        let a = &n.attributes;
        let arms: Vec<Option<(&Json, String)>>;
        let kind = match n.op.as_deref() {
            Some("BRANCH_ON_VALUE") => {
                arms = vec![
                    first(a, &["label_true", "true_label", "then_label"]),
                    first(a, &["label_false", "false_label", "else_label"]),
                ];
                Kind::If
            }
            Some("TRY_CATCH") => {
                arms = vec![
                    first(a, &["try_subgraph", "try_label"]),
                    first(a, &["catch_subgraph", "catch_label"]),
                ];
                Kind::Try
            }
            Some("SWITCH") => {
                let mut keys = Vec::new();
                let mut v = Vec::new();
                if let Some(Json::Array(cases)) = a.get("cases") {
                    for c in cases {
                        let key = c.get("label").or_else(|| c.get("value")).map(|k| match k {
                            Json::String(s) => s.clone(),
                            other => other.to_string(),
                        });
                        let target = c
                            .get("node_id")
                            .or_else(|| c.get("node"))
                            .or_else(|| c.get("target"));
                        match (key, target) {
                            (Some(k), Some(t)) => {
                                keys.push(k);
                                v.push(Some((t, "cases".to_string())));
                            }
                            _ => {
                                keys.clear();
                                break;
                            }
                        }
                    }
                }
                if keys.is_empty() {
                    continue;
                }
                v.push(a.get("default").map(|d| (d, "default".to_string())));
                arms = v;
                Kind::Switch(keys)
            }
            _ => continue,
        };
        let targets: Vec<Option<usize>> = arms
            .iter()
            .map(|x| x.as_ref().and_then(|(v, _)| names.resolve(v)))
            .collect();
        if targets.iter().all(Option::is_none) {
            continue;
        }
        let keys = arms
            .into_iter()
            .map(|x| x.map(|(_, k)| k).unwrap_or_default())
            .collect();
        out.push(Marker {
            node: i,
            kind,
            targets,
            keys,
        });
    }
    out
}
