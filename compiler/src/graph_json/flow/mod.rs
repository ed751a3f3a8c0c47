//! One graph → one IR flow: ids and ops checked, region nesting checked,
//! edges resolved to operands (type-checked against the op table), nodes
//! lowered region by region in a stable topological order. The context
//! and the driver are here; the graph's shape is `structure.rs`, one
//! node's lowering `node.rs`.

mod calls;
mod node;
mod structure;

use super::errors::GraphError;
use super::lower::{GraphAt, Locator};
use super::schema::Dependency;
use super::spans::Seg;
use ais_ir::{FlowData, Opcode, Region, Span, Type, Value};
use std::collections::HashMap;

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
