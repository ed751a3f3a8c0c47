//! IR module → graph JSON. Every op is a node (pre-order, so a region's
//! ops follow their control node); every operand is an edge carrying its
//! position. See docs/graph-json.md for the shape.

use super::attrs;
use super::errors::GraphError;
use super::schema::{self, Dependency, Edge, Graph, Node, Parameter, Parent, RegionSpec};
use ais_ir::{AgentData, BeliefInit, FlowData, Module, Op, Region, Type, ValueDef};
use std::collections::HashMap;

/// The module as a graph-JSON document (pretty-printed).
pub fn emit(m: &Module) -> Result<String, GraphError> {
    let doc = document(m)?;
    serde_json::to_string_pretty(&doc).map_err(|e| GraphError::NotRepresentable {
        message: e.to_string(),
    })
}

/// The module as a graph document: the entry flow of the first agent that
/// has one at the top (what the reference runs), every other flow under
/// `graphs`, agent declarations and flow order under `agents`.
pub fn document(m: &Module) -> Result<Graph, GraphError> {
    let mut graphs = Vec::new();
    let mut agents = Vec::new();
    let mut top = None;
    for (_, a) in m.agents.iter() {
        for (_, f) in a.flows.iter() {
            if f.entry && top.is_none() {
                top = Some(graphs.len());
            }
            graphs.push(flow_graph(a, f)?);
        }
        agents.push(agent_decl(a));
    }
    let Some(top) = top else {
        return Err(GraphError::NotRepresentable {
            message: "the program has no entry flow, and a graph document names the flow it runs (`metadata.is_entry`)".into(),
        });
    };
    let mut doc = graphs.remove(top);
    doc.graphs = graphs;
    doc.agents = agents;
    Ok(doc)
}

fn agent_decl(a: &AgentData) -> schema::Agent {
    let flow_name = |f| {
        a.flows
            .get(f)
            .map_or_else(String::new, |fd: &FlowData| fd.name.clone())
    };
    schema::Agent {
        name: a.name.clone(),
        flows: a.flows.iter().map(|(_, f)| f.name.clone()).collect(),
        memory: a
            .memory
            .iter()
            .map(|m| schema::Memory {
                name: m.name.clone(),
                tier: m.tier.name().to_string(),
            })
            .collect(),
        beliefs: a
            .beliefs
            .iter()
            .map(|b| match &b.init {
                BeliefInit::Const(v) => schema::Belief {
                    name: b.name.clone(),
                    value: Some(v.clone()),
                    flow: None,
                },
                BeliefInit::Flow(f) => schema::Belief {
                    name: b.name.clone(),
                    value: None,
                    flow: Some(flow_name(*f)),
                },
            })
            .collect(),
        goals: a
            .goals
            .iter()
            .map(|g| schema::Goal {
                name: g.name.clone(),
                priority: g.priority,
                description: g.description.clone(),
            })
            .collect(),
        capabilities: a
            .capabilities
            .iter()
            .map(|c| schema::Capability {
                name: c.name.clone(),
                params: c
                    .params
                    .iter()
                    .map(|(n, t)| Parameter {
                        name: n.clone(),
                        type_name: t.to_string(),
                    })
                    .collect(),
                result: c.result.to_string(),
            })
            .collect(),
        handlers: a
            .handlers
            .iter()
            .map(|h| schema::Handler {
                event: h.event.clone(),
                flow: flow_name(h.flow),
            })
            .collect(),
    }
}

fn flow_graph(a: &AgentData, f: &FlowData) -> Result<Graph, GraphError> {
    let dfg = &f.dfg;
    // Pre-order: each op, then its regions' ops, with its parent.
    let mut order: Vec<(Op, Option<Parent>)> = Vec::new();
    let mut ids: HashMap<Op, u64> = HashMap::new();
    fn walk(
        dfg: &ais_ir::Dfg,
        region: Region,
        parent: Option<Parent>,
        order: &mut Vec<(Op, Option<Parent>)>,
        ids: &mut HashMap<Op, u64>,
    ) {
        let Some(rd) = dfg.regions.get(region) else {
            return;
        };
        for &op in &rd.ops {
            if ids.contains_key(&op) {
                continue; // malformed sharing; printed once
            }
            let id = ids.len() as u64 + 1;
            ids.insert(op, id);
            order.push((op, parent.clone()));
            if let Some(od) = dfg.ops.get(op) {
                for (k, &r) in od.regions.iter().enumerate() {
                    walk(
                        dfg,
                        r,
                        Some(Parent {
                            node: id,
                            region: k,
                        }),
                        order,
                        ids,
                    );
                }
            }
        }
    }
    walk(dfg, f.body, None, &mut order, &mut ids);

    // A node per flow parameter that feeds an op: the reference's edges
    // all come from nodes.
    let mut param_ids: HashMap<u32, u64> = HashMap::new();
    for (op, _) in &order {
        for &v in &dfg.ops[*op].operands {
            if let Some(ValueDef::Param(i)) = dfg.values.get(v).map(|d| d.def) {
                let next = (ids.len() + param_ids.len()) as u64 + 1;
                param_ids.entry(i).or_insert(next);
            }
        }
    }
    let mut nodes = Vec::with_capacity(order.len());
    let mut edges = Vec::new();
    for (op, parent) in order {
        let od = &dfg.ops[op];
        let id = ids[&op];
        let mut attributes = indexmap::IndexMap::new();
        for (name, attr) in od.attrs.iter() {
            attributes.insert(name.to_string(), attrs::encode(od.opcode, name, attr)?);
        }
        let refs: Vec<String> = od
            .operands
            .iter()
            .filter(|&&v| *dfg.value_type(v) != Type::Ord)
            .map(|&v| {
                let from = match dfg.values.get(v).map(|d| d.def) {
                    Some(ValueDef::Result(p, _)) => ids.get(&p).copied(),
                    Some(ValueDef::Arg(r, _)) => dfg
                        .regions
                        .get(r)
                        .and_then(|rd| rd.parent)
                        .and_then(|o| ids.get(&o).copied()),
                    Some(ValueDef::Param(i)) => param_ids.get(&i).copied(),
                    None => None,
                };
                from.map_or_else(String::new, |n| format!("{{{{node_{n}}}}}"))
            })
            .collect();
        let firsts: Vec<String> = od
            .regions
            .iter()
            .map(|&r| {
                dfg.regions[r]
                    .ops
                    .first()
                    .and_then(|o| ids.get(o))
                    .map_or_else(String::new, |n| n.to_string())
            })
            .collect();
        let written = super::mirror::mirror(dfg, od, &refs, &firsts, &mut attributes);
        let regions = od
            .regions
            .iter()
            .map(|&r| {
                let rd = &dfg.regions[r];
                RegionSpec {
                    label: rd.label.clone(),
                    key: rd.key.clone(),
                    args: rd
                        .args
                        .iter()
                        .map(|&v| dfg.value_type(v).to_string())
                        .collect(),
                }
            })
            .collect();
        nodes.push(Node {
            id: Some(id),
            name: format!("{}_{id}", od.opcode.mnemonic().replace('.', "_")),
            op: Some(written.to_string()),
            attributes,
            results: Some(
                od.results
                    .iter()
                    .map(|&v| dfg.value_type(v).to_string())
                    .collect(),
            ),
            parent,
            regions,
        });
        for (k, &v) in od.operands.iter().enumerate() {
            let dependency = if *dfg.value_type(v) == Type::Ord {
                Dependency::Effect
            } else {
                Dependency::Data
            };
            let mut e = Edge {
                from: None,
                to: id,
                dependency,
                param: None,
                result: None,
                region_arg: None,
                operand: Some(k),
            };
            match dfg.values.get(v).map(|d| d.def) {
                Some(ValueDef::Result(p, i)) => {
                    e.from = ids.get(&p).copied();
                    e.result = (i != 0).then_some(i as usize);
                }
                Some(ValueDef::Arg(r, i)) => {
                    let owner = dfg.regions.get(r).and_then(|rd| rd.parent);
                    let pos = owner.and_then(|o| dfg.ops[o].regions.iter().position(|&x| x == r));
                    e.from = owner.and_then(|o| ids.get(&o).copied());
                    e.region_arg = pos.map(|p| [p, i as usize]);
                }
                Some(ValueDef::Param(i)) => {
                    e.from = param_ids.get(&i).copied();
                }
                None => {}
            }
            if e.from.is_none() && e.param.is_none() {
                return Err(GraphError::NotRepresentable {
                    message: format!(
                        "flow `{}.{}`: an operand of node {id} has no definition",
                        a.name, f.name
                    ),
                });
            }
            edges.push(e);
        }
    }

    let mut params: Vec<(&u32, &u64)> = param_ids.iter().collect();
    params.sort_by_key(|(_, id)| **id);
    // First, so that the stable topological order on reading is the
    // original one.
    let mut first: Vec<Node> = Vec::new();
    for (&i, &id) in params {
        let Some((name, v)) = f.params.get(i as usize) else {
            continue;
        };
        first.push(super::mirror::param_node(id, name, dfg.value_type(*v)));
    }
    nodes.splice(0..0, first);

    let mut metadata = indexmap::IndexMap::new();
    metadata.insert("is_entry".to_string(), f.entry.into());
    if f.discoverable {
        // Ours: listed in its agent's `discoverable: [...]`.
        metadata.insert("discoverable".to_string(), true.into());
    }
    metadata.insert("source_agent".to_string(), a.name.clone().into());
    metadata.insert("source_flow".to_string(), f.name.clone().into());
    metadata.insert("result".to_string(), f.result.to_string().into());
    Ok(Graph {
        name: format!("{}_{}", a.name, f.name),
        nodes,
        edges,
        parameters: f
            .params
            .iter()
            .map(|(n, v)| Parameter {
                name: n.clone(),
                type_name: dfg.value_type(*v).to_string(),
            })
            .collect(),
        metadata,
        graphs: Vec::new(),
        agents: Vec::new(),
    })
}
