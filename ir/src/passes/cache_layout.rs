//! `cache-layout`: lays LLM requests out for provider prompt caching
//! (`docs/passes.md`).
//!
//! Providers cache by prefix: OpenAI by itself for prompts of 1024 tokens
//! or more (`prompt_cache_key` routes requests that share one to the same
//! cache), Anthropic up to four explicit `cache_control` breakpoints, render
//! order tools → system → messages. A request is rendered as the system
//! text, then the user message: the prompt, then the labelled context
//! blocks. The prompt usually differs from call to call, so a long shared
//! context behind it is never a shared prefix.
//!
//! For each LLM op the pass finds its *shared* context blocks: values that
//! another LLM op of the module also sends as context (followed through
//! flow parameters to the caller when a flow has one call site), or values
//! defined outside a `loop` the op runs in (every iteration sends them).
//! It then sets
//! - `cache_prefix`: the shared blocks, rendered before the prompt, in one
//!   order for every op (the values' definition order), so ops that share
//!   them share the first bytes of the message. The request keeps its
//!   prompt and its labelled blocks: only where they appear changes. A
//!   context block is labelled data the prompt refers to by name, so its
//!   place in the message is not part of what the prompt means (the op
//!   table's `cache_prefix` attribute); the prompt itself is never
//!   reordered or split.
//! - `cache_key`: one key per class of ops that can share a prefix (same op
//!   kind, system text, tools, model, backend and shared blocks).
//! - `cache_points`: Anthropic breakpoints at the ends of the shared parts:
//!   `tools` when the op offers tools, `context:N` after the N shared
//!   blocks (when the class has two calls or more, or a loop repeats it:
//!   a read can follow; concurrent calls read through the runtime's
//!   fan-out warm-up), and `context` (the whole first message) when the op offers
//!   tools, because each turn of a tool exchange sends it again. At most
//!   three, within Anthropic's four.
//!
//! Ops whose author set any of the three attributes are left alone (and so
//! a second run changes nothing). Ops with neither shared blocks nor tools
//! get nothing: a breakpoint on a prefix nobody reads again costs a cache
//! write (1.25x) for no read.
//!
//! [`cache_estimate`] is the matching analysis (`aisc analyze`): per class,
//! how many of its calls can read what an earlier call of the class wrote
//! (a call that depends on another call of its class starts after that one
//! answered; calls that run concurrently all miss, as a provider's cache
//! entry exists only once its first request has been answered).

use super::util::FlowFacts;
use super::{Changed, Pass};
use crate::entity::{AgentId, FlowId, Op, Region, Value};
use crate::module::{Attr, Dfg, Module, ValueDef};
use crate::ops::Opcode;
use crate::types::Type;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::collections::BTreeMap;

#[derive(Debug, Default)]
pub struct CacheLayout {
    laid_out: u64,
    keyed: u64,
    points: u64,
}

impl Pass for CacheLayout {
    fn name(&self) -> &'static str {
        "cache-layout"
    }

    fn run(&mut self, m: &mut Module) -> Changed {
        *self = CacheLayout::default();
        let mut graph = Graph::new(m);
        let sites = graph.sites(m);
        let mut classes: BTreeMap<String, usize> = BTreeMap::new();
        // (site, its shared blocks, its class number, its key)
        let mut planned: Vec<(usize, Vec<usize>, usize, String)> = Vec::new();
        let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (si, site) in sites.iter().enumerate() {
            if site.hinted {
                continue;
            }
            let lead = site.lead(&graph);
            if lead.is_empty() && !site.tools {
                continue;
            }
            let mut class = site.class.clone();
            for &j in &lead {
                let (a, f, v) = site.contexts[j].origin;
                class.push_str(&format!("|{a:?}.{f:?}.{v:?}={}", site.contexts[j].label));
            }
            let next = classes.len();
            let n = *classes.entry(class).or_insert(next);
            // Named after where the shared material comes from.
            let (oa, of) = lead.first().map_or((site.agent, site.flow), |&j| {
                let (a, f, _) = site.contexts[j].origin;
                (a, f)
            });
            let key = format!("{}#{n}", graph.flow_name(m, oa, of));
            members.entry(n).or_default().push(si);
            planned.push((si, lead, n, key));
        }
        // A breakpoint after the shared blocks pays a cache write (1.25x
        // at Anthropic); it is placed only where a read can follow: a class
        // of two calls or more, or a loop repeats the call.
        let warm: HashSet<usize> = members
            .iter()
            .filter(|(_, idx)| {
                let of_class: Vec<&Site> = idx.iter().map(|&i| &sites[i]).collect();
                // Calls of a class that run at once can read it too: the
                // runtime's warm-up sends one first and the others once its
                // reply started, and sends the others without breakpoints
                // when it does not (vm scheduler/warmup.rs).
                of_class.len() >= 2
                    || of_class
                        .iter()
                        .any(|s| s.lead(&graph).iter().any(|&j| s.contexts[j].loop_invariant))
            })
            .map(|(n, _)| *n)
            .collect();
        let mut edits: Vec<Edit> = Vec::new();
        for (si, lead, n, key) in planned {
            let site = &sites[si];
            let mut points: Vec<serde_json::Value> = Vec::new();
            if site.tools {
                points.push("tools".into());
            }
            if !lead.is_empty() && warm.contains(&n) {
                points.push(format!("context:{}", lead.len()).into());
            }
            if site.tools {
                points.push("context".into());
            }
            let mut attrs = vec![("cache_key".to_string(), Attr::Str(key))];
            if !lead.is_empty() {
                let numbers: Vec<serde_json::Value> = lead
                    .iter()
                    .map(|&j| serde_json::Value::from(j + 1))
                    .collect();
                attrs.push((
                    "cache_prefix".to_string(),
                    Attr::Json(serde_json::Value::Array(numbers)),
                ));
                self.laid_out += 1;
            }
            self.keyed += 1;
            self.points += points.len() as u64;
            if !points.is_empty() {
                attrs.push((
                    "cache_points".to_string(),
                    Attr::Json(serde_json::Value::Array(points)),
                ));
            }
            edits.push((site.agent, site.flow, site.op, attrs));
        }
        let changed = !edits.is_empty();
        for (a, f, op, attrs) in edits {
            let Some(od) = m
                .agents
                .get_mut(a)
                .and_then(|ad| ad.flows.get_mut(f))
                .and_then(|fd| fd.dfg.ops.get_mut(op))
            else {
                continue;
            };
            for (name, attr) in attrs {
                od.attrs.set(name, attr);
            }
        }
        Changed::from(changed)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("laid out calls", self.laid_out),
            ("cache keys", self.keyed),
            ("breakpoints", self.points),
        ]
    }
}

/// A value as the module sees it: its flow and the value there.
type Origin = (AgentId, FlowId, Value);
/// A flow of the module.
type FlowKey = (AgentId, FlowId);
/// An op of the module: its flow and the op there.
type OpKey = (AgentId, FlowId, Op);
/// Attributes to set on an op.
type Edit = (AgentId, FlowId, Op, Vec<(String, Attr)>);

/// One context operand of an LLM op.
struct Ctx {
    origin: Origin,
    label: String,
    /// Defined outside a `loop` the op runs in.
    loop_invariant: bool,
}

/// One live LLM op.
struct Site {
    agent: AgentId,
    flow: FlowId,
    op: Op,
    contexts: Vec<Ctx>,
    tools: bool,
    /// The author set a cache attribute: left alone.
    hinted: bool,
    /// Inside a `loop`.
    in_loop: bool,
    /// Kind, system text, tools, model and backend.
    class: String,
}

impl Site {
    /// The shared context blocks (0-based), in the order of their values'
    /// definitions (the same for every op that shares them).
    fn lead(&self, g: &Graph) -> Vec<usize> {
        let mut lead: Vec<usize> = (0..self.contexts.len())
            .filter(|&j| {
                let c = &self.contexts[j];
                c.loop_invariant
                    || g.users
                        .get(&(self.class.clone(), c.origin))
                        .is_some_and(|u| u.len() >= 2)
            })
            .collect();
        lead.sort_by_key(|&j| (self.contexts[j].origin, j));
        lead.dedup_by_key(|j| self.contexts[*j].origin);
        lead
    }
}

/// Call sites and context users across the module.
struct Graph {
    /// Flow → its call sites: (caller agent, caller flow, data operands).
    calls: HashMap<FlowKey, Vec<(AgentId, FlowId, Vec<Value>)>>,
    /// Flow → its call op, for flows with exactly one call site.
    call_op: HashMap<(AgentId, FlowId), (AgentId, FlowId, Op)>,
    entries: HashSet<(AgentId, FlowId)>,
    /// (Op class, origin) → the LLM ops of that class (by agent, flow, op)
    /// sending it as context: ops of different kinds, system texts, tools,
    /// models or backends never share a prefix.
    users: HashMap<(String, Origin), HashSet<OpKey>>,
}

impl Graph {
    fn new(m: &Module) -> Graph {
        let index = m.agent_index();
        let mut sites: HashMap<FlowKey, Vec<OpKey>> = HashMap::default();
        let mut g = Graph {
            calls: HashMap::default(),
            call_op: HashMap::default(),
            entries: HashSet::default(),
            users: HashMap::default(),
        };
        for (aid, agent) in m.agents.iter() {
            for (fid, flow) in agent.flows.iter() {
                if flow.entry || flow.discoverable {
                    g.entries.insert((aid, fid));
                }
                for op in flow.walk() {
                    let Some(od) = flow.dfg.ops.get(op) else {
                        continue;
                    };
                    if od.opcode != Opcode::FlowCall {
                        continue;
                    }
                    if let Some(Attr::Symbol { agent, flow: f }) = od.attrs.get("callee") {
                        if let Some(target) = index.resolve(agent, f) {
                            let args = data_operands(&flow.dfg, &od.operands);
                            g.calls.entry(target).or_default().push((aid, fid, args));
                            sites.entry(target).or_default().push((aid, fid, op));
                        }
                    }
                }
            }
        }
        for (target, at) in sites {
            if let [one] = at.as_slice() {
                g.call_op.insert(target, *one);
            }
        }
        g
    }

    /// Where `v` of flow `(a, f)` comes from: through a parameter of a flow
    /// with one call site (and not callable from outside) to the argument.
    fn origin(&self, m: &Module, a: AgentId, f: FlowId, v: Value) -> Origin {
        let (mut a, mut f, mut v) = (a, f, v);
        for _ in 0..32 {
            let Some(flow) = m.agents.get(a).and_then(|ad| ad.flows.get(f)) else {
                break;
            };
            let Some(ValueDef::Param(i)) = flow.dfg.values.get(v).map(|d| d.def) else {
                break;
            };
            if self.entries.contains(&(a, f)) {
                break;
            }
            match self.calls.get(&(a, f)).map(Vec::as_slice) {
                Some([(ca, cf, args)]) => match args.get(i as usize) {
                    Some(&arg) => (a, f, v) = (*ca, *cf, arg),
                    None => break,
                },
                _ => break,
            }
        }
        (a, f, v)
    }

    fn flow_name(&self, m: &Module, a: AgentId, f: FlowId) -> String {
        match m.agents.get(a) {
            Some(ad) => match ad.flows.get(f) {
                Some(fd) => format!("{}.{}", ad.name, fd.name),
                None => ad.name.clone(),
            },
            None => String::new(),
        }
    }

    /// Every live LLM op, with its context origins; fills `users`.
    fn sites(&mut self, m: &Module) -> Vec<Site> {
        let mut sites = Vec::new();
        for (aid, agent) in m.agents.iter() {
            for (fid, flow) in agent.flows.iter() {
                let facts = FlowFacts::new(flow);
                for &op in &facts.order {
                    let Some(od) = flow.dfg.ops.get(op) else {
                        continue;
                    };
                    if od.opcode.info().llm.is_none() {
                        continue;
                    }
                    let data = data_operands(&flow.dfg, &od.operands);
                    let labels: Vec<String> = match od.attrs.get("context") {
                        Some(Attr::Json(serde_json::Value::Array(ls))) => ls
                            .iter()
                            .map(|l| l.as_str().unwrap_or_default().to_string())
                            .collect(),
                        _ => Vec::new(),
                    };
                    let loops = enclosing_loops(&flow.dfg, &facts, op);
                    let contexts: Vec<Ctx> = data
                        .iter()
                        .skip(1)
                        .enumerate()
                        .map(|(j, &v)| Ctx {
                            origin: self.origin(m, aid, fid, v),
                            label: labels
                                .get(j)
                                .filter(|l| !l.is_empty())
                                .cloned()
                                .unwrap_or_else(|| format!("context {}", j + 1)),
                            loop_invariant: loops
                                .first()
                                .is_some_and(|&l| !defined_within(&flow.dfg, &facts, v, l)),
                        })
                        .collect();
                    let attr = |n: &str| {
                        od.attrs
                            .get(n)
                            .map(|a| crate::printer::attr_text(n, a))
                            .unwrap_or_default()
                    };
                    let tools = matches!(
                        od.attrs.get("tools"),
                        Some(Attr::Json(serde_json::Value::Array(ts))) if !ts.is_empty()
                    );
                    let class = format!(
                        "{}|{}|{}|{}|{}",
                        od.opcode.mnemonic(),
                        attr("system"),
                        attr("tools"),
                        attr("model"),
                        attr("backend")
                    );
                    for c in &contexts {
                        self.users
                            .entry((class.clone(), c.origin))
                            .or_default()
                            .insert((aid, fid, op));
                    }
                    sites.push(Site {
                        in_loop: !loops.is_empty(),
                        agent: aid,
                        flow: fid,
                        op,
                        tools,
                        hinted: ["cache_key", "cache_points", "cache_prefix"]
                            .iter()
                            .any(|n| od.attrs.has(n)),
                        class,
                        contexts,
                    });
                }
            }
        }
        sites
    }
}

/// The data operands (ordering tokens left out).
fn data_operands(dfg: &Dfg, operands: &[Value]) -> Vec<Value> {
    operands
        .iter()
        .copied()
        .filter(|&v| dfg.values.get(v).is_some_and(|d| d.ty != Type::Ord))
        .collect()
}

/// The `loop` ops around `op`, innermost first.
fn enclosing_loops(dfg: &Dfg, facts: &FlowFacts, op: Op) -> Vec<Op> {
    let mut out = Vec::new();
    let mut region = facts.region(op);
    let mut guard = 0;
    while let Some(r) = region {
        guard += 1;
        let Some(parent) = dfg.regions.get(r).and_then(|rd| rd.parent) else {
            break;
        };
        if guard > 10_000 {
            break;
        }
        if dfg
            .ops
            .get(parent)
            .is_some_and(|p| p.opcode == Opcode::Loop)
        {
            out.push(parent);
        }
        region = facts.region(parent);
    }
    out
}

/// Whether `v` is defined inside the regions of `owner`.
fn defined_within(dfg: &Dfg, facts: &FlowFacts, v: Value, owner: Op) -> bool {
    let start: Option<Region> = match dfg.values.get(v).map(|d| d.def) {
        Some(ValueDef::Result(op, _)) => facts.region(op),
        Some(ValueDef::Arg(r, _)) => Some(r),
        _ => None,
    };
    let mut region = start;
    let mut guard = 0;
    while let Some(r) = region {
        guard += 1;
        let Some(parent) = dfg.regions.get(r).and_then(|rd| rd.parent) else {
            return false;
        };
        if parent == owner {
            return true;
        }
        if guard > 10_000 {
            return false;
        }
        region = facts.region(parent);
    }
    false
}

/// The expected prompt-cache behaviour of a module's LLM ops, per
/// `cache_key` class.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CacheEstimate {
    pub classes: Vec<CacheClass>,
}

/// One class of ops sharing a cache key.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheClass {
    pub key: String,
    /// Call sites (ops) in the class.
    pub calls: usize,
    /// Sites that start only after another site of the class answered
    /// (their shared prefix is a cache read), and sites in a loop.
    pub warm: usize,
    /// Sites inside a `loop`: every iteration after the first is warm.
    pub in_loop: usize,
    /// Shared context blocks rendered first (the largest in the class).
    pub prefix_blocks: usize,
    /// Whether the class offers tools (later turns of an exchange read
    /// the first).
    pub tools: bool,
}

impl CacheClass {
    /// Expected share of the class's calls that read the shared prefix
    /// from the cache, once per run (loops counted once).
    pub fn hit_rate(&self) -> f64 {
        if self.calls == 0 {
            return 0.0;
        }
        self.warm as f64 / self.calls as f64
    }
}

impl CacheEstimate {
    /// The report of `ais-opt --analyze=prompt-cache`: IR comments.
    pub fn render(&self) -> String {
        let mut out = String::from("// ----- prompt cache ----- //\n");
        for line in self.lines() {
            out.push_str("// ");
            out.push_str(&line);
            out.push('\n');
        }
        out
    }

    /// One line per class (`aisc analyze` indents them).
    pub fn lines(&self) -> Vec<String> {
        if self.classes.is_empty() {
            return vec!["no LLM call shares a prefix with another".into()];
        }
        let mut out = vec![
            "per cache_key: a call hits when it starts after another call of its class answered"
                .into(),
        ];
        for c in &self.classes {
            let mut notes = Vec::new();
            if c.calls > MAX_ANALYSED_CLASS {
                notes.push(format!(
                    "order not analysed above {MAX_ANALYSED_CLASS} calls"
                ));
            }
            if c.prefix_blocks > 0 {
                notes.push(format!("{} shared block(s) first", c.prefix_blocks));
            }
            if c.in_loop > 0 {
                notes.push(format!(
                    "{} in a loop: iterations after the first hit",
                    c.in_loop
                ));
            }
            if c.tools {
                notes.push("tools: later turns read the first".into());
            }
            out.push(format!(
                "{}: {} call site(s), {} warm, expected hit rate {:.0}%{}",
                c.key,
                c.calls,
                c.warm,
                c.hit_rate() * 100.0,
                if notes.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", notes.join("; "))
                }
            ));
        }
        out
    }
}

/// The classes of `m`'s LLM ops by their `cache_key` (set by the
/// `cache-layout` pass or the author), with the calls that can read the
/// class's prefix from the cache.
pub fn cache_estimate(m: &Module) -> CacheEstimate {
    let mut g = Graph::new(m);
    let sites = g.sites(m);
    let mut by_key: BTreeMap<String, Vec<&Site>> = BTreeMap::new();
    for s in &sites {
        let key = m
            .agents
            .get(s.agent)
            .and_then(|a| a.flows.get(s.flow))
            .and_then(|f| f.dfg.ops.get(s.op))
            .and_then(|od| od.attrs.get("cache_key"))
            .and_then(Attr::as_str)
            .map(str::to_string);
        if let Some(k) = key {
            by_key.entry(k).or_default().push(s);
        }
    }
    let mut anc = Ancestry::default();
    let mut classes = Vec::new();
    for (key, members) in by_key {
        let warm = warm_calls(&g, m, &mut anc, &members);
        let in_loop = members.iter().filter(|s| s.in_loop).count();
        let prefix_blocks = members
            .iter()
            .filter_map(|s| {
                let od = m
                    .agents
                    .get(s.agent)?
                    .flows
                    .get(s.flow)?
                    .dfg
                    .ops
                    .get(s.op)?;
                match od.attrs.get("cache_prefix") {
                    Some(Attr::Json(serde_json::Value::Array(a))) => Some(a.len()),
                    _ => None,
                }
            })
            .max()
            .unwrap_or(0);
        classes.push(CacheClass {
            key,
            calls: members.len(),
            // A call in a loop is warm from its second iteration on.
            warm: (warm + in_loop).min(members.len()),
            in_loop,
            prefix_blocks,
            tools: members.iter().any(|s| s.tools),
        });
    }
    CacheEstimate { classes }
}

/// How many of `members` start only after another member answered.
/// Classes larger than this are not analysed (no call counts as warm, so
/// no breakpoint follows their shared blocks): the pairwise check walks
/// each member's ancestors, and a generated program may put thousands of
/// calls in one class.
const MAX_ANALYSED_CLASS: usize = 64;

fn warm_calls(g: &Graph, m: &Module, anc: &mut Ancestry, members: &[&Site]) -> usize {
    if members.len() > MAX_ANALYSED_CLASS {
        return 0;
    }
    let chains: Vec<Vec<(AgentId, FlowId, Op)>> = members
        .iter()
        .map(|s| g.chain(s.agent, s.flow, s.op))
        .collect();
    (0..chains.len())
        .filter(|&i| (0..chains.len()).any(|k| k != i && anc.before(m, &chains[k], &chains[i])))
        .count()
}

impl Graph {
    /// `op`, then the call site of its flow, and so on up to a flow with
    /// no single call site.
    fn chain(&self, a: AgentId, f: FlowId, op: Op) -> Vec<(AgentId, FlowId, Op)> {
        let mut out = vec![(a, f, op)];
        let (mut a, mut f) = (a, f);
        for _ in 0..32 {
            if self.entries.contains(&(a, f)) {
                break;
            }
            let Some(site) = self.call_op.get(&(a, f)) else {
                break;
            };
            out.push(*site);
            (a, f) = (site.0, site.1);
        }
        out
    }
}

/// Per flow, the ops each op waits for (its operands' definitions,
/// transitively, and those of the ops its regions sit in).
#[derive(Default)]
struct Ancestry {
    memo: HashMap<(AgentId, FlowId, Op), HashSet<Op>>,
    /// Each flow's facts, computed once.
    facts: HashMap<FlowKey, FlowFacts>,
}

impl Ancestry {
    /// Whether the call at the end of chain `a` has answered before the
    /// one of chain `b` starts: at some level of `b`'s chain, `a`'s chain
    /// reaches an ancestor in the same flow.
    fn before(
        &mut self,
        m: &Module,
        a: &[(AgentId, FlowId, Op)],
        b: &[(AgentId, FlowId, Op)],
    ) -> bool {
        for &(ba, bf, bop) in b {
            for &(aa, af, aop) in a {
                if (aa, af) == (ba, bf)
                    && aop != bop
                    && self.ancestors(m, ba, bf, bop).contains(&aop)
                {
                    return true;
                }
            }
        }
        false
    }

    fn ancestors(&mut self, m: &Module, a: AgentId, f: FlowId, op: Op) -> &HashSet<Op> {
        let Some(flow) = m.agents.get(a).and_then(|ad| ad.flows.get(f)) else {
            return self.memo.entry((a, f, op)).or_default();
        };
        let facts = self
            .facts
            .entry((a, f))
            .or_insert_with(|| FlowFacts::new(flow));
        self.memo
            .entry((a, f, op))
            .or_insert_with(|| ancestors(flow, facts, op))
    }
}

/// The ops `op` of `flow` waits for: its operands' definitions,
/// transitively, and what the ops its regions sit in wait for.
fn ancestors(flow: &crate::module::FlowData, facts: &FlowFacts, op: Op) -> HashSet<Op> {
    let mut seen: HashSet<Op> = HashSet::default();
    let mut visited: HashSet<Op> = HashSet::default();
    let mut work = vec![op];
    while let Some(o) = work.pop() {
        if !visited.insert(o) {
            continue;
        }
        let Some(od) = flow.dfg.ops.get(o) else {
            continue;
        };
        for &v in &od.operands {
            if let Some(ValueDef::Result(d, _)) = flow.dfg.values.get(v).map(|x| x.def) {
                seen.insert(d);
                work.push(d);
            }
        }
        // An op in a region waits for what its owner waits for.
        if let Some(owner) = facts
            .region(o)
            .and_then(|r| flow.dfg.regions.get(r))
            .and_then(|rd| rd.parent)
        {
            work.push(owner);
        }
    }
    seen
}
