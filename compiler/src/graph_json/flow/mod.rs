//! One graph → one IR flow: ids and ops checked, region nesting checked,
//! edges resolved to operands (type-checked against the op table), nodes
//! lowered region by region in a stable topological order. Longer than
//! most files: the passes share one context and read best together.

mod calls;

use super::attrs;
use super::build::{Build, Data, DataIn};
use super::errors::GraphError;
use super::lower::{GraphAt, Locator};
use super::reference::Expanded;
use super::schema::{Dependency, Node};
use super::spans::Seg;
use ais_ir::ops::{ResultRule, REFERENCE_ONLY_OPS};
use ais_ir::{Attr, FlowData, Opcode, Region, Span, Type, Value};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// Where a node sits: the body (`None`) or region `k` of a control node.
type Scope = Option<(usize, usize)>;

/// An incoming edge that carries a value.
#[derive(Clone, Copy)]
enum Source<'g> {
    Node {
        node: usize,
        result: Option<usize>,
    },
    Arg {
        node: usize,
        region: usize,
        arg: usize,
    },
    Param(&'g str),
}

struct Input<'g> {
    edge: usize,
    source: Source<'g>,
    dependency: Dependency,
    operand: Option<usize>,
}

pub(super) struct FlowLowering<'g, 'l> {
    g: &'g GraphAt<'g>,
    loc: &'l Locator,
    results: &'l HashMap<(String, String), Type>,
    opcodes: Vec<Opcode>,
    scope: Vec<Scope>,
    /// The nesting tree (`nest.rs`): depths and jump pointers, so lifting
    /// an edge costs O(log depth), not O(depth).
    nest: super::nest::Nesting,
    /// Each region's nodes in document order, and the indices into
    /// `order` of its constraints (grouped once, not filtered per region).
    members: HashMap<Scope, Vec<usize>>,
    order_at: HashMap<Scope, Vec<usize>>,
    inputs: Vec<Vec<Input<'g>>>,
    /// Ordering constraints lifted into one region: `(from, to, edge)`.
    order: Vec<(usize, usize, usize)>,
    types: Vec<Vec<Type>>,
    values: Vec<Vec<Value>>,
    region_args: HashMap<(usize, usize), Vec<Value>>,
    /// Body nodes in the order lowered.
    body_nodes: Vec<usize>,
    /// The reference op of a node that has no opcode of its own.
    refonly: Vec<Option<&'static str>>,
    /// `PAUSE` answers by `checkpoint_id`, for `RESUME`.
    pauses: HashMap<String, Value>,
    /// Nodes whose value stands for "this passed" beside an ordering token
    /// (a halting `GUARD`, a `FLOW_CALL` to an absent agent): what they
    /// feed by a `Data` edge also waits for the token.
    gated: std::collections::HashSet<usize>,
    /// Whether the document is a whole program (more than one graph, or
    /// declared agents): a call to an agent it does not define is then a
    /// mistake (`V0019`), not an agent from elsewhere.
    whole_program: bool,
    pub(super) warnings: Vec<GraphError>,
}

impl<'g, 'l> FlowLowering<'g, 'l> {
    pub(super) fn new(
        g: &'g GraphAt<'g>,
        loc: &'l Locator,
        results: &'l HashMap<(String, String), Type>,
        whole_program: bool,
    ) -> Self {
        FlowLowering {
            g,
            loc,
            results,
            opcodes: Vec::new(),
            scope: Vec::new(),
            nest: Default::default(),
            members: HashMap::new(),
            order_at: HashMap::new(),
            inputs: Vec::new(),
            order: Vec::new(),
            types: Vec::new(),
            values: Vec::new(),
            region_args: HashMap::new(),
            body_nodes: Vec::new(),
            refonly: Vec::new(),
            pauses: HashMap::new(),
            gated: Default::default(),
            whole_program,
            warnings: Vec::new(),
        }
    }

    fn node_span(&self, i: usize) -> Span {
        self.loc
            .at(&self.g.path(&[Seg::Key("nodes"), Seg::Index(i)]))
    }

    fn field_span(&self, i: usize, field: &'static str) -> Span {
        self.loc.at(&self
            .g
            .path(&[Seg::Key("nodes"), Seg::Index(i), Seg::Key(field)]))
    }

    fn edge_span(&self, e: usize, field: Option<&'static str>) -> Span {
        let mut p = self.g.path(&[Seg::Key("edges"), Seg::Index(e)]);
        if let Some(f) = field {
            p.push(Seg::Key(f));
        }
        self.loc.at(&p)
    }

    /// Lowers the graph into `flow`; its warnings are left in `warnings`.
    pub(super) fn run(
        &mut self,
        flow: &mut FlowData,
        declared: bool,
    ) -> Result<(), Vec<GraphError>> {
        let nodes = &self.g.g.nodes;
        let index = self.nodes()?;
        self.scopes(&index)?;
        self.edges(&index, flow)?;
        self.group();
        self.result_types()?;
        // Lower region by region, starting at the body.
        let mut errors = Vec::new();
        let body = flow.body;
        self.region(flow, None, body, &mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }
        self.finish(flow, declared, nodes.len());
        Ok(())
    }

    /// Ids, ops: every node's opcode, and the id → index map.
    fn nodes(&mut self) -> Result<HashMap<u64, usize>, Vec<GraphError>> {
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
                Some(name) if n.results.is_some() => match super::mirror::our_opcode(n, name) {
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
                },
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
    fn scopes(&mut self, index: &HashMap<u64, usize>) -> Result<(), Vec<GraphError>> {
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
        self.nest = super::nest::Nesting::new(&self.scope).map_err(|i| {
            vec![GraphError::Cycle {
                message: "a node is nested in itself through `parent`".into(),
                span: self.field_span(i, "parent"),
            }]
        })?;
        Ok(())
    }

    /// Both ends lifted into their innermost common region.
    fn lift(&self, a: usize, b: usize) -> Option<(usize, usize)> {
        let (x, y) = self.nest.siblings(a, b)?;
        (self.scope[x] == self.scope[y]).then_some((x, y))
    }

    /// Members and ordering constraints grouped by region, once.
    fn group(&mut self) {
        for (i, &s) in self.scope.iter().enumerate() {
            self.members.entry(s).or_default().push(i);
        }
        for (k, &(a, _, _)) in self.order.iter().enumerate() {
            self.order_at.entry(self.scope[a]).or_default().push(k);
        }
        ais_ir::work::add(self.scope.len() + self.order.len());
    }

    fn edges(
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
    fn result_types(&mut self) -> Result<(), Vec<GraphError>> {
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

    fn inferred(&self, op: Opcode, n: &Node) -> Vec<Type> {
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
    fn sorted(&self, scope: Scope) -> Result<Vec<usize>, GraphError> {
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

    fn region(
        &mut self,
        flow: &mut FlowData,
        scope: Scope,
        region: Region,
        errors: &mut Vec<GraphError>,
    ) {
        let order = match self.sorted(scope) {
            Ok(o) => o,
            Err(e) => {
                errors.push(e);
                return;
            }
        };
        for i in order {
            if let Err(e) = self.op(flow, i, region, errors) {
                errors.push(e);
                return;
            }
            if scope.is_none() {
                self.body_nodes.push(i);
            }
        }
    }

    fn value_of(&self, flow: &FlowData, input: &Input<'_>) -> Result<Option<Value>, GraphError> {
        let span = self.edge_span(input.edge, None);
        let missing = |what: String| GraphError::UnknownEnd {
            message: what,
            span,
        };
        Ok(Some(match input.source {
            Source::Param(p) => match flow.params.iter().find(|(n, _)| n == p) {
                Some((_, v)) => *v,
                None => return Err(missing(format!("unknown parameter `{p}`"))),
            },
            Source::Arg { node, region, arg } => {
                match self
                    .region_args
                    .get(&(node, region))
                    .and_then(|a| a.get(arg))
                {
                    Some(v) => *v,
                    None => {
                        return Err(missing(format!(
                            "node {} has no region argument [{region}, {arg}] here",
                            self.id(node)
                        )))
                    }
                }
            }
            Source::Node { node, result } => {
                let Some(vals) = self
                    .values
                    .get(node)
                    .filter(|v| !v.is_empty() || self.types[node].is_empty())
                else {
                    return Err(missing(format!(
                        "node {} is used outside the region it is defined in",
                        self.id(node)
                    )));
                };
                let ord_at = self.types[node].iter().rposition(|t| *t == Type::Ord);
                let k = match (result, input.dependency) {
                    (Some(k), _) => k,
                    (None, Dependency::Data) => 0,
                    // Reference ordering edges: the ord token if there is one.
                    (None, Dependency::Effect) => match ord_at {
                        Some(k) => k,
                        None => return Ok(None),
                    },
                    (None, Dependency::Control) => return Ok(None),
                };
                match vals.get(k) {
                    Some(v) => *v,
                    None => {
                        return Err(missing(format!("node {} has no result {k}", self.id(node))))
                    }
                }
            }
        }))
    }

    fn id(&self, i: usize) -> u64 {
        self.g.g.nodes[i].id.unwrap_or_default()
    }

    /// The values feeding node `i`, in operand order, type-checked.
    fn operands(&self, flow: &FlowData, i: usize) -> Result<Vec<(Value, usize)>, GraphError> {
        let mut placed: Vec<Option<(Value, usize)>> = Vec::new();
        let mut data = Vec::new();
        let mut tokens = Vec::new();
        for input in &self.inputs[i] {
            let Some(v) = self.value_of(flow, input)? else {
                continue;
            };
            match input.operand {
                Some(k) => {
                    if k >= placed.len() {
                        placed.resize(k + 1, None);
                    }
                    if placed[k].is_some() {
                        return Err(GraphError::BadStructure {
                            message: format!("two edges feed operand {k} of node {}", self.id(i)),
                            span: self.edge_span(input.edge, Some("operand")),
                        });
                    }
                    placed[k] = Some((v, input.edge));
                }
                None if *flow.dfg.value_type(v) == Type::Ord => tokens.push((v, input.edge)),
                None => data.push((v, input.edge)),
            }
        }
        let mut out = Vec::new();
        for (k, p) in placed.into_iter().enumerate() {
            match p {
                Some(x) => out.push(x),
                None => {
                    return Err(GraphError::BadStructure {
                        message: format!("no edge feeds operand {k} of node {}", self.id(i)),
                        span: self.node_span(i),
                    })
                }
            }
        }
        out.extend(data);
        out.extend(tokens);
        Ok(out)
    }

    fn check_types(
        &self,
        flow: &FlowData,
        i: usize,
        ops: &[(Value, usize)],
        sugar: bool,
    ) -> Result<(), GraphError> {
        let info = self.opcodes[i].info();
        for (k, &(v, e)) in ops.iter().enumerate() {
            let ty = flow.dfg.value_type(v);
            let dep = self.g.g.edges[e].dependency;
            let span = self.edge_span(e, None);
            let mismatch = |message: String| GraphError::TypeMismatch { message, span };
            if *ty == Type::Ord {
                // A `Data` edge from an op whose only result is its token
                // (the reference's `UMEM` → `FENCE`) orders like an
                // `Effect` edge.
                // A reference op without an op of its own takes them: its
                // tool calls (`CLAIM`, `UPDATE_GOAL`) are ordered by them.
                if !info.takes_ord && self.refonly[i].is_none() && !info.operand_type(k).admits(ty)
                {
                    return Err(mismatch(format!(
                        "`{}` takes no ordering tokens",
                        self.opcodes[i].graph_name()
                    )));
                }
            } else if dep == Dependency::Effect {
                return Err(mismatch(format!(
                    "an `Effect` edge carries an ordering token, but this value is `{ty}`"
                )));
            } else if !sugar && !info.operand_type(k).admits(ty) {
                return Err(mismatch(format!(
                    "operand {k} of `{}` must be {}, but node {} gives `{ty}`",
                    self.opcodes[i].graph_name(),
                    info.operand_type(k),
                    self.g.g.edges[e]
                        .from
                        .map_or_else(|| "the parameter".into(), |f| f.to_string()),
                )));
            }
        }
        Ok(())
    }

    fn op(
        &mut self,
        flow: &mut FlowData,
        i: usize,
        region: Region,
        errors: &mut Vec<GraphError>,
    ) -> Result<(), GraphError> {
        let node = &self.g.g.nodes[i];
        let opcode = self.opcodes[i];
        let span = self.node_span(i);
        if opcode == Opcode::Switch && node.results.is_none() && node.regions.is_empty() {
            let no_cases = ["cases", "case_labels", "case_regions"].iter().all(|k| {
                node.attributes
                    .get(*k)
                    .is_none_or(|v| v.as_array().is_some_and(Vec::is_empty))
            });
            if no_cases {
                // No case and no default to run: the reference's switch
                // is `null` (after its inputs, which are ordinary nodes).
                let mut b = Build::new(flow, region, span);
                let null = b.konst(ais_ir::Attr::Json(serde_json::Value::Null), Type::Null);
                self.types[i] = vec![Type::Null];
                if self.values.len() < self.g.g.nodes.len() {
                    self.values.resize(self.g.g.nodes.len(), Vec::new());
                }
                self.values[i] = vec![null];
                return Ok(());
            }
        }
        if opcode == Opcode::Switch
            && node.results.is_none()
            && node.regions.is_empty()
            && ["cases", "case_labels", "discriminant"]
                .iter()
                .any(|k| node.attributes.contains_key(*k))
        {
            // The reference's flat switch: its cases name nodes to run.
            return Err(GraphError::ReferenceOnlyOp {
                op: "SWITCH".into(),
                span: self.field_span(i, "attributes"),
            });
        }
        let ours = node.results.is_some();
        if let (true, Some(serde_json::Value::String(p))) = (ours, node.attributes.get("ais_param"))
        {
            let Some(&(_, v)) = flow.params.iter().find(|(n, _)| n == p) else {
                return Err(GraphError::UnknownEnd {
                    message: format!("node {} stands for the unknown parameter `{p}`", self.id(i)),
                    span,
                });
            };
            self.types[i] = vec![flow.dfg.value_type(v).clone()];
            if self.values.len() < self.g.g.nodes.len() {
                self.values.resize(self.g.g.nodes.len(), Vec::new());
            }
            self.values[i] = vec![v];
            return Ok(());
        }
        let written = node.op.as_deref().unwrap_or_default();
        let operands = self.operands(flow, i)?;
        let refonly = self.refonly[i];
        if !ours && refonly.is_none() {
            // A reference node without what its op definitions require
            // (`ASK` without `template_str`) and without inputs to stand in:
            // the reference's reason, not the verifier's.
            let data = operands
                .iter()
                .filter(|(v, _)| *flow.dfg.value_type(*v) != Type::Ord)
                .count();
            if !opcode.info().operands.allows(data) {
                if let Some(missing) = super::reference::missing_required(written, &node.attributes)
                {
                    return Err(GraphError::BadAttribute {
                        message: format!(
                            "`{written}` needs the attribute `{missing}` (or an input edge)"
                        ),
                        span: self.field_span(i, "attributes"),
                    });
                }
            }
        }
        let sugar = !ours
            && (refonly.is_some()
                || (node.regions.is_empty()
                    && super::reference::applies(opcode, &node.attributes)));
        self.check_types(flow, i, &operands, sugar)?;
        let mut vals: Vec<Value> = operands.iter().map(|x| x.0).collect();
        let mut attrs = ais_ir::Attrs::default();
        let mut consumed: &[&str] = &[];
        if sugar {
            let attrs_span = self.field_span(i, "attributes");
            let bad = |message: String| GraphError::BadAttribute {
                message,
                span: attrs_span,
            };
            let mut data = Vec::new();
            let mut tokens = Vec::new();
            for &(v, e) in &operands {
                if *flow.dfg.value_type(v) == Type::Ord {
                    tokens.push(v);
                } else {
                    data.push(Data {
                        value: v,
                        from: self.g.g.edges[e].from,
                    });
                    if let Some(t) = self.guard_token(i, e) {
                        if !tokens.contains(&t) {
                            tokens.push(t);
                        }
                    }
                }
            }
            if !opcode.info().takes_ord && refonly.is_none() {
                // A pure op has no effect to order; it needs no token.
                tokens.retain(|t| operands.iter().any(|(v, _)| v == t));
            }
            let inputs = DataIn { data, tokens };
            let mut b = Build::new(flow, region, span);
            let external = match (opcode, refonly) {
                (Opcode::FlowCall, None) => self.external_callee(&node.attributes),
                _ => None,
            };
            let is_external = external.is_some();
            let expanded = match (refonly, external) {
                (_, Some((agent, callee))) => {
                    let message = format!(
                        "`FLOW_CALL` to `@{agent}.{callee}`: this program has no agent `{agent}` (a graph document runs with the agents it defines; add the agent's flows to its `graphs`)"
                    );
                    self.warnings.push(GraphError::ExternalAgent {
                        agent: agent.clone(),
                        span: attrs_span,
                    });
                    Ok(Expanded::Values(calls::external_call(&mut b, message, &inputs.tokens)))
                }
                (Some(name), None) => {
                    super::refonly::lower(name, &node.attributes, &mut b, inputs, &self.pauses)
                        .map(Expanded::Values)
                }
                (None, None) => {
                    super::reference::expand(opcode, &node.attributes, &mut b, inputs)
                }
            }
            .map_err(bad)?;
            match expanded {
                Expanded::Values(vs) => {
                    let unknown = node.attributes.keys().find(|k| {
                        refonly.is_none()
                            && !super::reference::reference_attrs(opcode).contains(&k.as_str())
                    });
                    if let Some(k) = unknown {
                        return Err(GraphError::BadAttribute {
                            message: format!("`{}` has no attribute `{k}`", opcode.graph_name()),
                            span: self.field_span(i, "attributes"),
                        });
                    }
                    let gated = (opcode == Opcode::Guard || is_external)
                        && vs.len() == 2
                        && *flow.dfg.value_type(vs[1]) == Type::Ord;
                    if gated {
                        self.gated.insert(i);
                    }
                    self.types[i] = vs.iter().map(|&v| flow.dfg.value_type(v).clone()).collect();
                    if self.values.len() < self.g.g.nodes.len() {
                        self.values.resize(self.g.g.nodes.len(), Vec::new());
                    }
                    self.values[i] = vs;
                    return Ok(());
                }
                Expanded::Op {
                    operands,
                    attrs: xs,
                } => {
                    vals = operands;
                    for (n, a) in xs {
                        attrs.set(n, a);
                    }
                    consumed = super::reference::reference_attrs(opcode);
                }
            }
        }
        for (name, v) in &node.attributes {
            if (ours && super::mirror::is_mirror(opcode, written, name))
                || consumed.contains(&name.as_str())
                || (sugar
                    && opcode.info().llm.is_some()
                    && super::reference::LLM_RUNTIME_ONLY.contains(&name.as_str()))
            {
                continue;
            }
            let ours = if sugar {
                super::reference::renamed(name)
            } else {
                name.as_str()
            };
            let attr_span = self.loc.at(&self.g.path(&[
                Seg::Key("nodes"),
                Seg::Index(i),
                Seg::Key("attributes"),
                Seg::Key(name),
            ]));
            let known = opcode.info().attr(ours).is_some();
            if !known {
                return Err(GraphError::BadAttribute {
                    message: format!("`{}` has no attribute `{name}`", opcode.graph_name()),
                    span: attr_span,
                });
            }
            let a = attrs::decode(opcode, ours, v).map_err(|message| GraphError::BadAttribute {
                message,
                span: attr_span,
            })?;
            attrs.set(ours.to_string(), a);
        }
        let op = flow.dfg.create_op(opcode, &vals, &self.types[i]);
        flow.dfg.ops[op].attrs = attrs;
        flow.dfg.spans.insert(op, span);
        flow.dfg.append_op(region, op);
        let results = flow.dfg.ops[op].results.to_vec();
        if self.values.len() < self.g.g.nodes.len() {
            self.values.resize(self.g.g.nodes.len(), Vec::new());
        }
        self.values[i] = results;
        if opcode == Opcode::Pause {
            if let Some(serde_json::Value::String(c)) = node.attributes.get("checkpoint_id") {
                if let Some(&v) = self.values[i].first() {
                    self.pauses.insert(c.clone(), v);
                }
            }
        }
        for (k, spec) in node.regions.iter().enumerate() {
            let r = flow.dfg.create_region(spec.label.clone(), spec.key.clone());
            let mut args = Vec::new();
            for t in &spec.args {
                let ty = Type::parse(t).ok_or_else(|| GraphError::BadStructure {
                    message: format!("region argument type `{t}` is not a type"),
                    span: self.field_span(i, "regions"),
                })?;
                args.push(flow.dfg.add_region_arg(r, ty));
            }
            flow.dfg.attach_region(op, r);
            self.region_args.insert((i, k), args);
            self.region(flow, Some((i, k)), r, errors);
        }
        Ok(())
    }

    /// A graph without a `RETURN` returns its last sink's value (as the
    /// reference does); an undeclared result is what the flow returns.
    fn finish(&self, flow: &mut FlowData, declared: bool, n: usize) {
        let body_ops = &flow.dfg.regions[flow.body].ops;
        let ends_in_return = body_ops
            .last()
            .is_some_and(|&o| flow.dfg.ops[o].opcode == Opcode::Return);
        if !ends_in_return {
            let mut fed = vec![false; n];
            for &(a, _, _) in &self.order {
                fed[a] = true;
            }
            let sink = self.body_nodes.iter().rev().find_map(|&i| {
                let v = *self.values.get(i)?.first()?;
                (!fed[i] && flow.dfg.value_type(v).is_data()).then_some(v)
            });
            let operands: Vec<Value> = sink.into_iter().collect();
            let ret = flow.dfg.create_op(Opcode::Return, &operands, &[]);
            flow.dfg.append_op(flow.body, ret);
        }
        if !declared {
            let last = flow.dfg.regions[flow.body].ops.last().copied();
            flow.result = last
                .and_then(|o| flow.dfg.ops[o].operands.first().copied())
                .map_or(Type::Void, |v| flow.dfg.value_type(v).clone());
        }
    }
}
