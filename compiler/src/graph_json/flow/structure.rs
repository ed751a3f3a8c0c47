//! The graph's shape, before any node is lowered: ids and ops, region
//! nesting (`parent`), edges resolved to their sources and lifted into the
//! region both ends share, result types, and each region's stable
//! topological order.

use super::{FlowLowering, Input, Scope, Source};
use crate::graph_json::attrs;
use crate::graph_json::errors::GraphError;
use crate::graph_json::schema::Node;
use crate::graph_json::spans::Seg;
use ais_ir::ops::{ResultRule, REFERENCE_ONLY_OPS};
use ais_ir::{Attr, FlowData, Opcode, Type};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

impl FlowLowering<'_, '_> {
    /// Ids, ops: every node's opcode, and the id → index map.
    pub(super) fn nodes(&mut self) -> Result<HashMap<u64, usize>, Vec<GraphError>> {
        let mut index: HashMap<u64, usize> = HashMap::new();
        let mut errors = Vec::new();
        for (i, n) in self.g.g.nodes.iter().enumerate() {
            match n.id {
                None => errors.push(GraphError::MissingId {
                    span: self.node_span(i),
                }),
                Some(id) => {
                    if let Some(&first) = index.get(&id) {
                        errors.push(GraphError::DuplicateId {
                            id,
                            span: self.field_span(i, "id"),
                            first: self.field_span(first, "id"),
                        });
                    } else {
                        index.insert(id, i);
                    }
                }
            }
            let op = match n.op.as_deref() {
                None => {
                    errors.push(GraphError::MissingOp {
                        span: self.node_span(i),
                    });
                    Opcode::Const
                }
                Some(name) if n.results.is_some() => {
                    match crate::graph_json::mirror::our_opcode(n, name) {
                        // Ours: a flow parameter's node has no op.
                        _ if n.attributes.contains_key("ais_param") => Opcode::Const,
                        Some(op) => op,
                        None => {
                            errors.push(GraphError::UnknownOp {
                                op: format!("{:?}", n.attributes.get("ais_op")),
                                suggestion: None,
                                span: self.field_span(i, "attributes"),
                            });
                            Opcode::Const
                        }
                    }
                }
                Some(name) => match Opcode::from_graph_name(name) {
                    Some(op) => op,
                    None if REFERENCE_ONLY_OPS.contains(&name) => {
                        self.refonly.resize(i + 1, None);
                        self.refonly[i] = REFERENCE_ONLY_OPS.iter().copied().find(|n| *n == name);
                        Opcode::Const
                    }
                    None => {
                        let names: Vec<String> =
                            Opcode::ALL.iter().map(|o| o.graph_name()).collect();
                        let upper = name.to_ascii_uppercase();
                        let suggestion = names
                            .iter()
                            .find(|n| **n == upper)
                            .cloned()
                            .or_else(|| crate::sema::closest(&upper, names.iter()));
                        errors.push(GraphError::UnknownOp {
                            op: name.to_string(),
                            suggestion,
                            span: self.field_span(i, "op"),
                        });
                        Opcode::Const
                    }
                },
            };
            self.opcodes.push(op);
        }
        self.refonly.resize(self.g.g.nodes.len(), None);
        if errors.is_empty() {
            Ok(index)
        } else {
            Err(errors)
        }
    }

    /// Each node's enclosing region, checked to be acyclic and to exist.
    pub(super) fn scopes(&mut self, index: &HashMap<u64, usize>) -> Result<(), Vec<GraphError>> {
        for (i, n) in self.g.g.nodes.iter().enumerate() {
            let scope = match &n.parent {
                None => None,
                Some(p) => {
                    let bad = |message: String| {
                        vec![GraphError::BadStructure {
                            message,
                            span: self.field_span(i, "parent"),
                        }]
                    };
                    let Some(&pi) = index.get(&p.node) else {
                        return Err(vec![GraphError::UnknownEnd {
                            message: format!("parent node {} does not exist", p.node),
                            span: self.field_span(i, "parent"),
                        }]);
                    };
                    if p.region >= self.g.g.nodes[pi].regions.len() {
                        return Err(bad(format!("node {} has no region {}", p.node, p.region)));
                    }
                    Some((pi, p.region))
                }
            };
            self.scope.push(scope);
        }
        // Nesting must be a tree.
        self.nest = crate::graph_json::nest::Nesting::new(&self.scope).map_err(|i| {
            vec![GraphError::Cycle {
                message: "a node is nested in itself through `parent`".into(),
                span: self.field_span(i, "parent"),
            }]
        })?;
        Ok(())
    }

    /// Both ends lifted into their innermost common region.
    pub(super) fn lift(&self, a: usize, b: usize) -> Option<(usize, usize)> {
        let (x, y) = self.nest.siblings(a, b)?;
        (self.scope[x] == self.scope[y]).then_some((x, y))
    }

    /// Members and ordering constraints grouped by region, once.
    pub(super) fn group(&mut self) {
        for (i, &s) in self.scope.iter().enumerate() {
            self.members.entry(s).or_default().push(i);
        }
        for (k, &(a, _, _)) in self.order.iter().enumerate() {
            self.order_at.entry(self.scope[a]).or_default().push(k);
        }
        ais_ir::work::add(self.scope.len() + self.order.len());
    }

    pub(super) fn edges(
        &mut self,
        index: &HashMap<u64, usize>,
        flow: &FlowData,
    ) -> Result<(), Vec<GraphError>> {
        self.inputs = (0..self.g.g.nodes.len()).map(|_| Vec::new()).collect();
        let mut errors = Vec::new();
        for (e, edge) in self.g.g.edges.iter().enumerate() {
            let Some(&to) = index.get(&edge.to) else {
                errors.push(GraphError::UnknownEnd {
                    message: format!("edge to the unknown node {}", edge.to),
                    span: self.edge_span(e, Some("to")),
                });
                continue;
            };
            let source = match (edge.from, &edge.param) {
                (Some(_), Some(_)) | (None, None) => {
                    errors.push(GraphError::BadStructure {
                        message: "an edge has exactly one of `from` and `param`".into(),
                        span: self.edge_span(e, None),
                    });
                    continue;
                }
                (None, Some(p)) => {
                    if !flow.params.iter().any(|(n, _)| n == p) {
                        errors.push(GraphError::UnknownEnd {
                            message: format!("edge from the unknown parameter `{p}`"),
                            span: self.edge_span(e, Some("param")),
                        });
                        continue;
                    }
                    Source::Param(p.as_str())
                }
                (Some(from), None) => {
                    let Some(&fi) = index.get(&from) else {
                        errors.push(GraphError::UnknownEnd {
                            message: format!("edge from the unknown node {from}"),
                            span: self.edge_span(e, Some("from")),
                        });
                        continue;
                    };
                    if fi == to {
                        errors.push(GraphError::Cycle {
                            message: format!("node {from} feeds itself"),
                            span: self.edge_span(e, None),
                        });
                        continue;
                    }
                    match edge.region_arg {
                        Some([r, a]) => Source::Arg {
                            node: fi,
                            region: r,
                            arg: a,
                        },
                        None => Source::Node {
                            node: fi,
                            result: edge.result,
                        },
                    }
                }
            };
            if let Source::Node { node, .. } | Source::Arg { node, .. } = source {
                let lifted = match source {
                    // A region argument is used inside its own control node.
                    Source::Arg { .. } => None,
                    _ => self.lift(node, to),
                };
                if let Some((a, b)) = lifted {
                    self.order.push((a, b, e));
                }
            }
            self.inputs[to].push(Input {
                edge: e,
                source,
                dependency: edge.dependency,
                operand: edge.operand,
            });
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// Each node's result types: declared (`results`) or from the op table.
    pub(super) fn result_types(&mut self) -> Result<(), Vec<GraphError>> {
        for (i, n) in self.g.g.nodes.iter().enumerate() {
            let op = self.opcodes[i];
            let tys = match &n.results {
                // Set when lowered.
                _ if self.refonly[i].is_some() => Vec::new(),
                Some(rs) => {
                    let mut tys = Vec::new();
                    for (k, r) in rs.iter().enumerate() {
                        match Type::parse(r) {
                            Some(t) => tys.push(t),
                            None => {
                                return Err(vec![GraphError::BadStructure {
                                    message: format!("`{r}` is not a type"),
                                    span: self.loc.at(&self.g.path(&[
                                        Seg::Key("nodes"),
                                        Seg::Index(i),
                                        Seg::Key("results"),
                                        Seg::Index(k),
                                    ])),
                                }])
                            }
                        }
                    }
                    tys
                }
                None => self.inferred(op, n),
            };
            self.types.push(tys);
        }
        Ok(())
    }

    pub(super) fn inferred(&self, op: Opcode, n: &Node) -> Vec<Type> {
        match op.info().result_rule {
            ResultRule::Fixed(ts) => ts.iter().map(|c| c.to_type()).collect(),
            ResultRule::Declared => {
                let lit = n
                    .attributes
                    .get("value")
                    .and_then(|v| attrs::decode(op, "value", v).ok())
                    .and_then(|a| a.literal_type());
                vec![lit.unwrap_or(Type::Json)]
            }
            ResultRule::ListOf => vec![Type::list(Type::Json)],
            ResultRule::Call => {
                let callee = n
                    .attributes
                    .get("callee")
                    .and_then(|v| attrs::decode(op, "callee", v).ok());
                match callee {
                    Some(Attr::Symbol { agent, flow }) => match self.results.get(&(agent, flow)) {
                        Some(Type::Void) => vec![],
                        Some(t) => vec![t.clone()],
                        None => vec![Type::Json],
                    },
                    _ => vec![Type::Json],
                }
            }
            ResultRule::None | ResultRule::Yielded => vec![],
        }
    }

    /// The nodes of one region, in a stable topological order.
    pub(super) fn sorted(&self, scope: Scope) -> Result<Vec<usize>, GraphError> {
        let no_members = Vec::new();
        let members = self.members.get(&scope).unwrap_or(&no_members);
        let constraints = self.order_at.get(&scope).map_or(&[][..], |v| &v[..]);
        ais_ir::work::add(members.len() + constraints.len());
        let pos: HashMap<usize, usize> = members.iter().enumerate().map(|(k, &i)| (i, k)).collect();
        let mut indeg = vec![0usize; members.len()];
        let mut succ: Vec<Vec<usize>> = vec![Vec::new(); members.len()];
        for &(a, b, _) in constraints.iter().map(|&k| &self.order[k]) {
            if let (Some(&pa), Some(&pb)) = (pos.get(&a), pos.get(&b)) {
                succ[pa].push(pb);
                indeg[pb] += 1;
            }
        }
        let mut ready: BinaryHeap<Reverse<usize>> = (0..members.len())
            .filter(|&k| indeg[k] == 0)
            .map(Reverse)
            .collect();
        let mut out = Vec::with_capacity(members.len());
        while let Some(Reverse(k)) = ready.pop() {
            out.push(members[k]);
            for &s in &succ[k] {
                indeg[s] -= 1;
                if indeg[s] == 0 {
                    ready.push(Reverse(s));
                }
            }
        }
        if out.len() == members.len() {
            return Ok(out);
        }
        // An edge between two nodes left over lies on (or behind) a cycle.
        let left: Vec<usize> = (0..members.len())
            .filter(|&k| indeg[k] > 0)
            .map(|k| members[k])
            .collect();
        let edge = self
            .order
            .iter()
            .find(|(a, b, _)| left.contains(a) && left.contains(b))
            .map_or(0, |t| t.2);
        Err(GraphError::Cycle {
            message: "these nodes depend on each other in a circle".into(),
            span: self.edge_span(edge, None),
        })
    }
}
