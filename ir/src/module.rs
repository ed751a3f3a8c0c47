//! Modules, agents, flows and the per-flow data-flow graph.
//!
//! Definitions (values, ops, regions) live in the arenas of a [`Dfg`]; the
//! *order* of ops lives in [`RegionData::ops`]. An op that is in no region's
//! op list is detached (dead) and is ignored by the printer and verifier.

use crate::entity::{AgentId, Arena, FlowId, Op, Region, Value};
use crate::ops::{ChainKind, Opcode};
use crate::types::Type;
use crate::Span;
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;
use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;

// ---------------------------------------------------------------- module

#[derive(Clone, Debug, Default)]
pub struct Module {
    pub agents: Arena<AgentId, AgentData>,
}

impl Module {
    pub fn new() -> Module {
        Module::default()
    }

    pub fn add_agent(&mut self, agent: AgentData) -> AgentId {
        self.agents.push(agent)
    }

    pub fn agent_by_name(&self, name: &str) -> Option<AgentId> {
        self.agents
            .iter()
            .find(|(_, a)| a.name == name)
            .map(|(k, _)| k)
    }

    /// Resolves `@Agent.flow`.
    pub fn resolve(&self, agent: &str, flow: &str) -> Option<(AgentId, FlowId)> {
        let a = self.agent_by_name(agent)?;
        let f = self.agents[a].flow_by_name(flow)?;
        Some((a, f))
    }

    /// Agents by name, for code that resolves many calls: `agent_by_name`
    /// scans the agents, which made whole-module passes quadratic in the
    /// number of agents.
    pub fn agent_index(&self) -> AgentIndex<'_> {
        let mut by_name = HashMap::with_capacity_and_hasher(self.agents.len(), Default::default());
        let mut flows = HashMap::default();
        for (id, a) in self.agents.iter() {
            // The first of duplicate names wins, as with `agent_by_name`
            // and `flow_by_name`.
            by_name.entry(a.name.as_str()).or_insert(id);
            for (fid, f) in a.flows.iter() {
                flows.entry((id, f.name.as_str())).or_insert(fid);
            }
        }
        AgentIndex { by_name, flows }
    }
}

/// A snapshot of a module's agent names (see [`Module::agent_index`]).
pub struct AgentIndex<'m> {
    by_name: HashMap<&'m str, AgentId>,
    /// Flows by agent and name: `flow_by_name` scans an agent's flows, so
    /// resolving every call with it was O(calls × flows).
    flows: HashMap<(AgentId, &'m str), FlowId>,
}

impl AgentIndex<'_> {
    pub fn agent(&self, name: &str) -> Option<AgentId> {
        self.by_name.get(name).copied()
    }

    /// Resolves `@Agent.flow`, like [`Module::resolve`].
    pub fn resolve(&self, agent: &str, flow: &str) -> Option<(AgentId, FlowId)> {
        let a = self.agent(agent)?;
        let f = self.flow(a, flow)?;
        Some((a, f))
    }

    /// The flow `name` of agent `a`.
    pub fn flow(&self, a: AgentId, name: &str) -> Option<FlowId> {
        self.flows.get(&(a, name)).copied()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tier {
    Stm,
    Ltm,
    Episodic,
}

impl Tier {
    pub fn parse(s: &str) -> Option<Tier> {
        match s {
            "stm" => Some(Tier::Stm),
            "ltm" => Some(Tier::Ltm),
            "episodic" => Some(Tier::Episodic),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Tier::Stm => "stm",
            Tier::Ltm => "ltm",
            Tier::Episodic => "episodic",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct MemoryDecl {
    pub name: String,
    pub tier: Tier,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum BeliefInit {
    Const(serde_json::Value),
    /// A flow of the same agent computing the initial value.
    Flow(FlowId),
}

#[derive(Clone, Debug, PartialEq)]
pub struct BeliefDecl {
    pub name: String,
    pub init: BeliefInit,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GoalDecl {
    pub name: String,
    pub priority: i64,
    pub description: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Capability {
    pub name: String,
    pub params: Vec<(String, Type)>,
    pub result: Type,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Handler {
    /// Event name, e.g. `user.message`.
    pub event: String,
    pub flow: FlowId,
    pub span: Span,
}

#[derive(Clone, Debug, Default)]
pub struct AgentData {
    pub name: String,
    pub memory: Vec<MemoryDecl>,
    pub beliefs: Vec<BeliefDecl>,
    pub goals: Vec<GoalDecl>,
    pub capabilities: Vec<Capability>,
    pub handlers: Vec<Handler>,
    pub flows: Arena<FlowId, FlowData>,
    pub span: Span,
}

impl AgentData {
    pub fn new(name: impl Into<String>) -> AgentData {
        AgentData {
            name: name.into(),
            ..AgentData::default()
        }
    }

    pub fn add_flow(&mut self, flow: FlowData) -> FlowId {
        self.flows.push(flow)
    }

    /// A scan of the agent's flows (counted as work: see [`crate::work`]);
    /// resolve many names through [`Module::agent_index`] instead.
    pub fn flow_by_name(&self, name: &str) -> Option<FlowId> {
        crate::work::add(self.flows.len());
        self.flows
            .iter()
            .find(|(_, f)| f.name == name)
            .map(|(k, _)| k)
    }

    pub fn capability(&self, name: &str) -> Option<&Capability> {
        self.capabilities.iter().find(|c| c.name == name)
    }

    pub fn entry(&self) -> Option<FlowId> {
        self.flows.iter().find(|(_, f)| f.entry).map(|(k, _)| k)
    }
}

// ---------------------------------------------------------------- flows

#[derive(Clone, Debug)]
pub struct FlowData {
    pub name: String,
    /// Parameter names (printed as `%name`) and their values.
    pub params: Vec<(String, Value)>,
    pub result: Type,
    pub entry: bool,
    /// Listed in its agent's `discoverable: [...]`: other agents and
    /// clients may call it (served as an A2A skill and an MCP tool).
    pub discoverable: bool,
    /// The top-level region; ends with `return`.
    pub body: Region,
    pub dfg: Dfg,
    pub span: Span,
}

impl FlowData {
    /// An empty flow with an empty body region labelled `body`.
    pub fn new(name: impl Into<String>, result: Type) -> FlowData {
        let mut dfg = Dfg::default();
        let body = dfg.create_region("body", None);
        FlowData {
            name: name.into(),
            params: Vec::new(),
            result,
            entry: false,
            discoverable: false,
            body,
            dfg,
            span: Span::DUMMY,
        }
    }

    pub fn add_param(&mut self, name: impl Into<String>, ty: Type) -> Value {
        let index = u32::try_from(self.params.len()).unwrap_or(u32::MAX);
        let v = self.dfg.make_value(ty, ValueDef::Param(index));
        self.params.push((name.into(), v));
        v
    }

    /// A builder positioned at the end of the body.
    pub fn builder(&mut self) -> FlowBuilder<'_> {
        let region = self.body;
        FlowBuilder {
            dfg: &mut self.dfg,
            region,
        }
    }

    /// All live ops in pre-order (an op before the ops of its regions).
    pub fn walk(&self) -> Vec<Op> {
        // Sized for every op of the flow once: growing by doubling was
        // most of the allocations of `aisc build` (every pass and census
        // walks each flow).
        self.dfg.walk_from(self.body, self.dfg.ops.len())
    }
}

/// Where a value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueDef {
    /// Result `i` of an op.
    Result(Op, u32),
    /// Argument `i` of a region.
    Arg(Region, u32),
    /// Flow parameter `i`.
    Param(u32),
}

#[derive(Clone, Debug, PartialEq)]
pub struct ValueData {
    pub ty: Type,
    pub def: ValueDef,
}

/// An attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    Str(String),
    Number(f64),
    Bool(bool),
    Flag,
    /// `@agent.flow`
    Symbol {
        agent: String,
        flow: String,
    },
    Type(Type),
    Json(serde_json::Value),
}

impl Attr {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Attr::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn kind_name(&self) -> &'static str {
        match self {
            Attr::Str(_) => "string",
            Attr::Number(_) => "number",
            Attr::Bool(_) => "bool",
            Attr::Flag => "flag",
            Attr::Symbol { .. } => "symbol",
            Attr::Type(_) => "type",
            Attr::Json(_) => "json",
        }
    }

    /// The natural IR type of a literal attribute (`const`'s value).
    pub fn literal_type(&self) -> Option<Type> {
        Some(match self {
            Attr::Str(_) => Type::Str,
            Attr::Number(_) => Type::Number,
            Attr::Bool(_) => Type::Bool,
            Attr::Json(serde_json::Value::Null) => Type::Null,
            Attr::Json(_) => Type::Json,
            _ => return None,
        })
    }
}

/// An attribute's name. The names the op table defines are shared
/// `'static` strings (an op's attributes cost no allocation for their
/// names: a per-op `String` was one of the allocations that made `build`'s
/// time per op grow with the heap, issue 40); any other name is owned.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct AttrName(Cow<'static, str>);

impl AttrName {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The op table's own copy of `name`, if it defines it.
    fn known(name: &str) -> Option<&'static str> {
        static KNOWN: OnceLock<rustc_hash::FxHashSet<&'static str>> = OnceLock::new();
        KNOWN
            .get_or_init(|| {
                Opcode::ALL
                    .iter()
                    .flat_map(|o| o.info().attrs.iter().map(|a| a.name))
                    .collect()
            })
            .get(name)
            .copied()
    }
}

impl From<&str> for AttrName {
    fn from(name: &str) -> AttrName {
        AttrName(match AttrName::known(name) {
            Some(k) => Cow::Borrowed(k),
            None => Cow::Owned(name.to_owned()),
        })
    }
}

impl From<String> for AttrName {
    fn from(name: String) -> AttrName {
        AttrName(match AttrName::known(&name) {
            Some(k) => Cow::Borrowed(k),
            None => Cow::Owned(name),
        })
    }
}

impl From<&String> for AttrName {
    fn from(name: &String) -> AttrName {
        AttrName::from(name.as_str())
    }
}

impl std::ops::Deref for AttrName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for AttrName {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for AttrName {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl fmt::Debug for AttrName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for AttrName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An ordered attribute list.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Attrs(pub Vec<(AttrName, Attr)>);

impl Attrs {
    pub fn get(&self, name: &str) -> Option<&Attr> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, a)| a)
    }

    /// Sets (replacing in place) or appends.
    pub fn set(&mut self, name: impl Into<AttrName>, attr: Attr) {
        let name = name.into();
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = attr,
            None => self.0.push((name, attr)),
        }
    }

    pub fn remove(&mut self, name: &str) -> Option<Attr> {
        let i = self.0.iter().position(|(n, _)| *n == name)?;
        Some(self.0.remove(i).1)
    }

    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Attr)> {
        self.0.iter().map(|(n, a)| (n.as_str(), a))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct OpData {
    pub opcode: Opcode,
    pub operands: SmallVec<[Value; 4]>,
    pub results: SmallVec<[Value; 2]>,
    pub regions: SmallVec<[Region; 2]>,
    pub attrs: Attrs,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RegionData {
    /// `body`, `then`, `else`, `case`, `default`, `try`, `catch`.
    pub label: String,
    /// The case literal of a `case` region.
    pub key: Option<String>,
    pub args: Vec<Value>,
    /// Ops in execution (program) order.
    pub ops: Vec<Op>,
    /// The op owning this region (`None` for a flow body or a detached region).
    pub parent: Option<Op>,
}

/// The data-flow graph of one flow.
#[derive(Clone, Debug, Default)]
pub struct Dfg {
    pub values: Arena<Value, ValueData>,
    pub ops: Arena<Op, OpData>,
    pub regions: Arena<Region, RegionData>,
    /// Source spans of ops (in `.ais` or `.aisir` text).
    pub spans: OpSpans,
}

/// Source spans by op number: a vector, not a map (a hashed entry per op
/// cost more than the span itself; issue 40).
#[derive(Clone, Debug, Default)]
pub struct OpSpans(Vec<Option<Span>>);

impl OpSpans {
    pub fn get(&self, op: &Op) -> Option<&Span> {
        self.0.get(op.as_u32() as usize)?.as_ref()
    }

    pub fn insert(&mut self, op: Op, span: Span) -> Option<Span> {
        let i = op.as_u32() as usize;
        if i >= self.0.len() {
            self.0.resize(i + 1, None);
        }
        self.0[i].replace(span)
    }
}

impl Dfg {
    /// Room for `ops` more ops and `values` more values (and the ops'
    /// spans), allocated once: a large flow's arenas otherwise grow by
    /// doubling, each step a copy and a free of the previous block
    /// (issue 40). [`Dfg::shrink_to_fit`] gives back what was not used.
    pub fn reserve(&mut self, ops: usize, values: usize) {
        self.ops.reserve(ops);
        self.values.reserve(values);
        self.spans.0.reserve(ops);
    }

    /// Gives back the room the arenas keep for more entries: a built flow
    /// otherwise holds up to twice its ops and values (they grow by
    /// doubling), which was a third of a large program's peak memory,
    /// reached while the syntax tree is still alive (issue 40).
    pub fn shrink_to_fit(&mut self) {
        self.values.shrink_to_fit();
        self.ops.shrink_to_fit();
        self.regions.shrink_to_fit();
        self.spans.0.shrink_to_fit();
    }

    pub fn make_value(&mut self, ty: Type, def: ValueDef) -> Value {
        self.values.push(ValueData { ty, def })
    }

    pub fn value_type(&self, v: Value) -> &Type {
        &self.values[v].ty
    }

    pub fn create_region(&mut self, label: impl Into<String>, key: Option<String>) -> Region {
        self.regions.push(RegionData {
            label: label.into(),
            key,
            args: Vec::new(),
            ops: Vec::new(),
            parent: None,
        })
    }

    pub fn add_region_arg(&mut self, region: Region, ty: Type) -> Value {
        let i = u32::try_from(self.regions[region].args.len()).unwrap_or(u32::MAX);
        let v = self.make_value(ty, ValueDef::Arg(region, i));
        self.regions[region].args.push(v);
        v
    }

    /// Creates a detached op with fresh result values of the given types.
    pub fn create_op(&mut self, opcode: Opcode, operands: &[Value], result_types: &[Type]) -> Op {
        let op = self.ops.push(OpData {
            opcode,
            operands: operands.iter().copied().collect(),
            results: SmallVec::new(),
            regions: SmallVec::new(),
            attrs: Attrs::default(),
        });
        for (i, ty) in result_types.iter().enumerate() {
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            let v = self.make_value(ty.clone(), ValueDef::Result(op, i));
            self.ops[op].results.push(v);
        }
        op
    }

    /// Makes `region` the next region of `op`.
    pub fn attach_region(&mut self, op: Op, region: Region) {
        self.regions[region].parent = Some(op);
        self.ops[op].regions.push(region);
    }

    pub fn append_op(&mut self, region: Region, op: Op) {
        self.regions[region].ops.push(op);
    }

    /// The region whose op list contains `op`, if any.
    pub fn region_of(&self, op: Op) -> Option<Region> {
        self.regions
            .iter()
            .find(|(_, r)| r.ops.contains(&op))
            .map(|(k, _)| k)
    }

    /// Inserts detached `op` just before `anchor`. Returns false if `anchor` is
    /// not placed in any region.
    pub fn insert_before(&mut self, anchor: Op, op: Op) -> bool {
        self.insert_near(anchor, op, 0)
    }

    /// Inserts detached `op` just after `anchor`.
    pub fn insert_after(&mut self, anchor: Op, op: Op) -> bool {
        self.insert_near(anchor, op, 1)
    }

    fn insert_near(&mut self, anchor: Op, op: Op, offset: usize) -> bool {
        let Some(r) = self.region_of(anchor) else {
            return false;
        };
        let ops = &mut self.regions[r].ops;
        let Some(pos) = ops.iter().position(|&o| o == anchor) else {
            return false;
        };
        ops.insert(pos + offset, op);
        true
    }

    /// Detaches `op` from its region (its arena entry stays, unreachable).
    /// Returns false if it was not placed.
    pub fn remove_op(&mut self, op: Op) -> bool {
        let Some(r) = self.region_of(op) else {
            return false;
        };
        self.regions[r].ops.retain(|&o| o != op);
        true
    }

    /// Rewrites every use of `old` in live and detached ops to `new`.
    /// Returns the number of operands rewritten.
    pub fn replace_all_uses(&mut self, old: Value, new: Value) -> usize {
        let mut n = 0;
        for (_, data) in self.ops.iter_mut() {
            for v in data.operands.iter_mut() {
                if *v == old {
                    *v = new;
                    n += 1;
                }
            }
        }
        n
    }

    /// Pre-order walk of the live ops under `region` (an op, then its regions).
    ///
    /// An explicit stack (nesting follows the input) and a visited vector by
    /// region number (a hashed set per walk was a large part of the walks
    /// the pass manager and the passes make per flow; issue 40).
    pub fn walk_region(&self, region: Region) -> Vec<Op> {
        let direct = self.regions.get(region).map_or(0, |rd| rd.ops.len());
        self.walk_from(region, direct)
    }

    /// [`Dfg::walk_region`] into a vector of `capacity`.
    fn walk_from(&self, region: Region, capacity: usize) -> Vec<Op> {
        /// A frame not yet entered (its region may have been seen).
        const UNENTERED: usize = usize::MAX;
        let mut out = Vec::with_capacity(capacity);
        // `seen` guards against malformed graphs with region cycles.
        let mut seen = vec![false; self.regions.len()];
        // Each frame: a region and where the walk is in its ops.
        let mut stack: Vec<(Region, usize)> = Vec::with_capacity(8);
        stack.push((region, UNENTERED));
        while let Some((r, next)) = stack.last_mut() {
            if *next == UNENTERED {
                match seen.get_mut(r.as_u32() as usize) {
                    Some(s) if !*s => {
                        *s = true;
                        *next = 0;
                    }
                    _ => {
                        stack.pop();
                        continue;
                    }
                }
            }
            let Some(&op) = self.regions.get(*r).and_then(|rd| rd.ops.get(*next)) else {
                stack.pop();
                continue;
            };
            *next += 1;
            out.push(op);
            if let Some(od) = self.ops.get(op) {
                // Last first: the first region is walked first.
                stack.extend(od.regions.iter().rev().map(|&c| (c, UNENTERED)));
            }
        }
        out
    }

    /// Uses of `v` by live ops under `root`, as `(op, operand index)`.
    pub fn users(&self, root: Region, v: Value) -> Vec<(Op, usize)> {
        let mut out = Vec::new();
        for op in self.walk_region(root) {
            for (i, &o) in self.ops[op].operands.iter().enumerate() {
                if o == v {
                    out.push((op, i));
                }
            }
        }
        out
    }

    /// Use counts of every value by live ops under `root`.
    pub fn use_counts(&self, root: Region) -> HashMap<Value, usize> {
        let mut out = HashMap::default();
        for op in self.walk_region(root) {
            for &o in &self.ops[op].operands {
                *out.entry(o).or_insert(0) += 1;
            }
        }
        out
    }

    pub fn result(&self, op: Op, i: usize) -> Option<Value> {
        self.ops.get(op)?.results.get(i).copied()
    }

    pub fn span(&self, op: Op) -> Span {
        self.spans.get(&op).copied().unwrap_or(Span::DUMMY)
    }

    pub fn set_span(&mut self, op: Op, span: Span) {
        self.spans.insert(op, span);
    }

    /// The memory resource an effectful memory op touches: a tier or a belief.
    pub fn mem_resource(&self, op: Op) -> Option<MemResource> {
        let d = self.ops.get(op)?;
        match d.opcode.info().chain {
            ChainKind::Memory => d
                .attrs
                .get("tier")
                .and_then(Attr::as_str)
                .and_then(Tier::parse)
                .map(MemResource::Tier),
            ChainKind::Beliefs => d
                .attrs
                .get("name")
                .and_then(Attr::as_str)
                .map(|n| MemResource::Belief(n.to_string())),
            ChainKind::None | ChainKind::Tool | ChainKind::Io | ChainKind::All => None,
        }
    }
}

/// What a memory op reads or writes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MemResource {
    Tier(Tier),
    Belief(String),
}

impl fmt::Display for MemResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemResource::Tier(t) => write!(f, "memory tier `{}`", t.name()),
            MemResource::Belief(b) => write!(f, "belief `{b}`"),
        }
    }
}

// ---------------------------------------------------------------- builder

/// Appends ops at the end of a current region. Convenient for lowering:
///
/// ```
/// use ais_ir::{FlowData, Type, Opcode, Attr};
/// let mut flow = FlowData::new("main", Type::Str);
/// let topic = flow.add_param("topic", Type::Str);
/// let mut b = flow.builder();
/// let prompt = b.template("Decompose: {0}", &[topic]);
/// let answer = b.ins1(Opcode::Ask, &[prompt], Type::Str);
/// b.ret(Some(answer));
/// ```
pub struct FlowBuilder<'a> {
    pub dfg: &'a mut Dfg,
    region: Region,
}

impl<'a> FlowBuilder<'a> {
    pub fn new(dfg: &'a mut Dfg, region: Region) -> FlowBuilder<'a> {
        FlowBuilder { dfg, region }
    }

    /// The region new ops are appended to.
    pub fn region(&self) -> Region {
        self.region
    }

    /// Moves the insertion point to the end of `region`; returns the old one.
    pub fn switch_to(&mut self, region: Region) -> Region {
        std::mem::replace(&mut self.region, region)
    }

    /// Appends an op and returns it.
    pub fn ins(&mut self, opcode: Opcode, operands: &[Value], result_types: &[Type]) -> Op {
        let op = self.dfg.create_op(opcode, operands, result_types);
        self.dfg.append_op(self.region, op);
        op
    }

    /// Appends an op with attributes.
    pub fn ins_attrs(
        &mut self,
        opcode: Opcode,
        operands: &[Value],
        attrs: Vec<(String, Attr)>,
        result_types: &[Type],
    ) -> Op {
        let op = self.ins(opcode, operands, result_types);
        self.dfg.ops[op].attrs = Attrs(attrs.into_iter().map(|(n, a)| (n.into(), a)).collect());
        op
    }

    /// Appends a single-result op and returns its result.
    pub fn ins1(&mut self, opcode: Opcode, operands: &[Value], ty: Type) -> Value {
        let op = self.ins(opcode, operands, &[ty]);
        self.dfg.ops[op].results[0]
    }

    pub fn set_attr(&mut self, op: Op, name: &str, attr: Attr) {
        self.dfg.ops[op].attrs.set(name, attr);
    }

    pub fn set_span(&mut self, op: Op, span: Span) {
        self.dfg.set_span(op, span);
    }

    pub fn result(&self, op: Op, i: usize) -> Value {
        self.dfg.ops[op].results[i]
    }

    pub fn const_str(&mut self, s: &str) -> Value {
        self.constant(Attr::Str(s.to_string()), Type::Str)
    }

    pub fn const_number(&mut self, n: f64) -> Value {
        self.constant(Attr::Number(n), Type::Number)
    }

    pub fn const_bool(&mut self, b: bool) -> Value {
        self.constant(Attr::Bool(b), Type::Bool)
    }

    pub fn const_json(&mut self, v: serde_json::Value) -> Value {
        let ty = if v.is_null() { Type::Null } else { Type::Json };
        self.constant(Attr::Json(v), ty)
    }

    pub fn constant(&mut self, value: Attr, ty: Type) -> Value {
        let op = self.ins_attrs(Opcode::Const, &[], vec![("value".into(), value)], &[ty]);
        self.result(op, 0)
    }

    pub fn template(&mut self, template: &str, operands: &[Value]) -> Value {
        let op = self.ins_attrs(
            Opcode::Template,
            operands,
            vec![("template".into(), Attr::Str(template.into()))],
            &[Type::Str],
        );
        self.result(op, 0)
    }

    /// Adds a region to `op` and returns it (the insertion point is unchanged).
    pub fn add_region(&mut self, op: Op, label: &str, key: Option<String>) -> Region {
        let r = self.dfg.create_region(label, key);
        self.dfg.attach_region(op, r);
        r
    }

    pub fn add_region_arg(&mut self, region: Region, ty: Type) -> Value {
        self.dfg.add_region_arg(region, ty)
    }

    /// Adds a region to `op`, fills it with `f` (insertion point inside the
    /// region), then restores the insertion point.
    pub fn with_region<R>(
        &mut self,
        op: Op,
        label: &str,
        key: Option<String>,
        f: impl FnOnce(&mut FlowBuilder<'_>, Region) -> R,
    ) -> R {
        let r = self.add_region(op, label, key);
        let saved = self.switch_to(r);
        let out = f(self, r);
        self.switch_to(saved);
        out
    }

    pub fn yield_(&mut self, values: &[Value]) -> Op {
        self.ins(Opcode::Yield, values, &[])
    }

    pub fn ret(&mut self, value: Option<Value>) -> Op {
        let operands: SmallVec<[Value; 1]> = value.into_iter().collect();
        self.ins(Opcode::Return, &operands, &[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_and_mutation_helpers() {
        let mut flow = FlowData::new("f", Type::Str);
        let p = flow.add_param("x", Type::Str);
        let mut b = flow.builder();
        let a = b.ins1(Opcode::Ask, &[p], Type::Str);
        let t = b.ins1(Opcode::Think, &[a], Type::Str);
        let r = b.ret(Some(t));
        let dfg = &mut flow.dfg;
        assert_eq!(dfg.users(flow.body, a).len(), 1);
        assert_eq!(dfg.replace_all_uses(a, p), 1);
        assert!(dfg.users(flow.body, a).is_empty());
        let think = match dfg.values[t].def {
            ValueDef::Result(op, _) => op,
            _ => unreachable!(),
        };
        let c = dfg.create_op(Opcode::ToStr, &[p], &[Type::Str]);
        assert!(dfg.insert_before(think, c));
        assert!(dfg.remove_op(r));
        assert!(!dfg.remove_op(r));
        let order: Vec<Opcode> = flow
            .walk()
            .iter()
            .map(|&o| flow.dfg.ops[o].opcode)
            .collect();
        assert_eq!(order, [Opcode::Ask, Opcode::ToStr, Opcode::Think]);
    }
}
