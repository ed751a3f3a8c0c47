//! The serde shape of a graph-JSON document (docs/graph-json.md).
//!
//! The reference's fields (`name`, `nodes`, `edges`, `parameters`,
//! `metadata`; node `id`/`name`/`op`/`attributes`; edge
//! `from`/`to`/`dependency`) keep their meaning. Everything else is our
//! extension, optional, so that a plain reference graph reads as is and
//! our IR survives the trip exactly: result types, region nesting, operand
//! positions, further flows (`graphs`) and agent declarations (`agents`).
//! Ids, ops and similar fields are `Option`s so that a missing one is
//! reported with its own code, pointing at the node, not as a parse error.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// One flow's graph; the document itself is one, with `graphs` and
/// `agents` only at the top.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Graph {
    #[serde(default)]
    pub name: String,
    pub nodes: Vec<Node>,
    #[serde(default)]
    pub edges: Vec<Edge>,
    #[serde(default)]
    pub parameters: Vec<Parameter>,
    #[serde(default)]
    pub metadata: IndexMap<String, serde_json::Value>,
    /// The module's further flows (ours).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graphs: Vec<Graph>,
    /// Agent declarations and flow order (ours).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<Agent>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub id: Option<u64>,
    #[serde(default)]
    pub name: String,
    pub op: Option<String>,
    #[serde(default)]
    pub attributes: IndexMap<String, serde_json::Value>,
    /// Result types (ours); inferred from the op table when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<String>>,
    /// The control node and region index this node is nested in (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Parent>,
    /// The regions of a control node (ours).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regions: Vec<RegionSpec>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parent {
    pub node: u64,
    pub region: usize,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegionSpec {
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Types of the region's arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Dependency {
    Data,
    Effect,
    Control,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edge {
    /// The producing node; absent when the value is a flow parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<u64>,
    pub to: u64,
    pub dependency: Dependency,
    /// The flow parameter carried (ours), instead of `from`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    /// Which result of `from` (ours; default 0, or the ord result of an
    /// `Effect` edge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<usize>,
    /// `[region, argument]` of `from`, a control node (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region_arg: Option<[usize; 2]>,
    /// The operand position at `to` (ours; default: edge order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operand: Option<usize>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parameter {
    pub name: String,
    pub type_name: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    pub name: String,
    /// Flow names in declaration order.
    #[serde(default)]
    pub flows: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<Memory>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub beliefs: Vec<Belief>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub goals: Vec<Goal>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<Capability>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handlers: Vec<Handler>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    pub name: String,
    pub tier: String,
}

/// A belief starts from a constant `value` or from a `flow` of its agent.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Belief {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Goal {
    pub name: String,
    pub priority: i64,
    pub description: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capability {
    pub name: String,
    #[serde(default)]
    pub params: Vec<Parameter>,
    pub result: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Handler {
    pub event: String,
    pub flow: String,
}
