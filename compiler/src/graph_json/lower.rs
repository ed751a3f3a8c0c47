//! Graph JSON → IR module: validation with spans, then one IR flow per
//! graph. Nodes become ops in a stable topological order (the document's
//! order whenever it is already valid, so our own output reads back
//! exactly); reference-style attributes (`template_str`, `prompt`,
//! `capability`, `params_json`, `query`, `space`) are expanded into the ops
//! that compute the operands they stand for. The result goes through the
//! IR verifier, whose diagnostics point at the offending node.

use super::errors::GraphError;
use super::flow::FlowLowering;
use super::schema::Graph;
use super::spans::{Seg, Tree};
use ais_ir::{
    AgentData, BeliefDecl, BeliefInit, Capability, FlowData, GoalDecl, Handler, MemoryDecl, Module,
    Span, Tier, Type,
};
use std::collections::HashMap;

/// Where things are in the text.
pub(super) struct Locator {
    tree: Option<Tree>,
}

impl Locator {
    pub fn new(text: &str) -> Locator {
        Locator {
            tree: Tree::scan(text),
        }
    }

    pub fn at(&self, path: &[Seg<'_>]) -> Span {
        self.tree.as_ref().map_or(Span::new(0, 0), |t| t.span(path))
    }
}

/// One graph of the document and its path (`[]` or `["graphs", i]`).
pub(super) struct GraphAt<'g> {
    pub g: &'g Graph,
    pub prefix: Vec<Seg<'static>>,
    pub agent: String,
    pub flow: String,
}

impl GraphAt<'_> {
    pub fn path<'a>(&self, rest: &[Seg<'a>]) -> Vec<Seg<'a>> {
        let mut p: Vec<Seg<'a>> = self.prefix.clone();
        p.extend_from_slice(rest);
        p
    }
}

/// The module and the document's warnings (`G0014`).
pub fn lower_document(
    doc: &Graph,
    loc: &Locator,
) -> Result<(Module, Vec<GraphError>), Vec<GraphError>> {
    let graphs = name_graphs(doc, loc)?;
    for g in &graphs {
        reference_rules(g, loc)?;
    }
    if !graphs.iter().any(|g| is_entry(g.g)) {
        let span = loc.at(&[Seg::Key("metadata")]);
        return Err(vec![GraphError::MissingEntry { span }]);
    }
    for g in &graphs {
        if let Some(v) = g.g.metadata.get("is_entry") {
            if !v.is_boolean() {
                return Err(vec![GraphError::MissingEntry {
                    span: loc.at(&g.path(&[Seg::Key("metadata"), Seg::Key("is_entry")])),
                }]);
            }
        }
    }
    // Agents in declared order, then any only named by a graph.
    let mut order: Vec<String> = doc.agents.iter().map(|a| a.name.clone()).collect();
    for g in &graphs {
        if !order.contains(&g.agent) {
            order.push(g.agent.clone());
        }
    }
    let mut module = Module::new();
    // Per agent: the graphs of its flows in declared order.
    let mut placed: Vec<Vec<&GraphAt<'_>>> = Vec::new();
    for (ai, name) in order.iter().enumerate() {
        let decl = doc.agents.iter().find(|a| &a.name == name);
        let mut mine: Vec<&GraphAt<'_>> = Vec::new();
        if let Some(d) = decl {
            for (fi, f) in d.flows.iter().enumerate() {
                match graphs.iter().find(|g| &g.agent == name && &g.flow == f) {
                    Some(g) if !mine.iter().any(|m| std::ptr::eq(*m, g)) => mine.push(g),
                    _ => {
                        return Err(vec![GraphError::BadStructure {
                            message: format!("agent `{name}` lists flow `{f}`, which no graph (or more than one place) defines"),
                            span: loc.at(&[
                                Seg::Key("agents"),
                                Seg::Index(ai),
                                Seg::Key("flows"),
                                Seg::Index(fi),
                            ]),
                        }])
                    }
                }
            }
        }
        for g in graphs.iter().filter(|g| &g.agent == name) {
            if mine
                .iter()
                .any(|m| m.flow == g.flow && !std::ptr::eq(*m, g))
            {
                return Err(vec![GraphError::BadStructure {
                    message: format!("flow `{}.{}` is defined twice", g.agent, g.flow),
                    span: loc.at(&g.path(&[Seg::Key("metadata")])),
                }]);
            }
            if !mine.iter().any(|m| std::ptr::eq(*m, g)) {
                mine.push(g);
            }
        }
        let mut agent = AgentData::new(name.clone());
        for g in &mine {
            let mut f = FlowData::new(g.flow.clone(), Type::Void);
            f.entry = is_entry(g.g);
            f.discoverable =
                g.g.metadata.get("discoverable").and_then(|v| v.as_bool()) == Some(true);
            for (pi, p) in g.g.parameters.iter().enumerate() {
                let span = loc.at(&g.path(&[Seg::Key("parameters"), Seg::Index(pi)]));
                if !is_ident(&p.name) || f.params.iter().any(|(n, _)| n == &p.name) {
                    return Err(vec![GraphError::BadParameter {
                        message: format!("`{}` is not a fresh identifier", p.name),
                        span,
                    }]);
                }
                if p.type_name.trim().is_empty() {
                    return Err(vec![GraphError::BadParameter {
                        message: format!("parameter '{}' has empty type", p.name),
                        span,
                    }]);
                }
                // A type name neither we nor the reference know is `json`
                // (the reference warns and runs it untyped).
                let ty = param_type(&p.type_name).unwrap_or(Type::Json);
                f.add_param(p.name.clone(), ty);
            }
            if f.entry && f.params.is_empty() && reads_run_input(g.g) {
                // The graph checks or asks the run's input (the guides'
                // `coordinated-worker`: "No input provided"): it gets one,
                // `--arg input=TEXT`, a text as the reference's are.
                f.add_param(RUN_INPUT, Type::Str);
            }
            if let Some(r) = g.g.metadata.get("result") {
                f.result = r.as_str().and_then(Type::parse).ok_or_else(|| {
                    vec![GraphError::BadStructure {
                        message: format!("`metadata.result` is not a type: {r}"),
                        span: loc.at(&g.path(&[Seg::Key("metadata"), Seg::Key("result")])),
                    }]
                })?;
            }
            agent.add_flow(f);
        }
        module.add_agent(agent);
        placed.push(mine);
    }
    // Declared results, for calls between flows.
    let results: HashMap<(String, String), Type> = module
        .agents
        .iter()
        .flat_map(|(_, a)| {
            a.flows
                .iter()
                .map(|(_, f)| ((a.name.clone(), f.name.clone()), f.result.clone()))
        })
        .collect();
    let whole_program = !doc.graphs.is_empty() || !doc.agents.is_empty();
    let mut warnings = Vec::new();
    for ((_, agent), mine) in module.agents.iter_mut().zip(&placed) {
        let ids: Vec<_> = agent.flows.iter().map(|(k, _)| k).collect();
        for (fid, g) in ids.into_iter().zip(mine) {
            let declared = g.g.metadata.contains_key("result");
            let flow = &mut agent.flows[fid];
            let mut lowering = FlowLowering::new(g, loc, &results, whole_program);
            lowering.run(flow, declared)?;
            warnings.append(&mut lowering.warnings);
        }
    }
    for ((_, agent), mine) in module.agents.iter_mut().zip(&placed) {
        for g in mine {
            agent_nodes(agent, g.g);
        }
    }
    for (ai, d) in doc.agents.iter().enumerate() {
        let Some(aid) = module.agent_by_name(&d.name) else {
            continue;
        };
        declare(&mut module.agents[aid], d, ai, loc)?;
    }
    Ok((module, warnings))
}

/// The parameter an entry graph without parameters gets when a `GUARD`
/// or an LLM node without a prompt in it has no input: the run's input
/// (docs/graph-json.md).
pub const RUN_INPUT: &str = "input";

/// Whether a reference node (not ours: ours carry `results`) reads the
/// run's input: a `GUARD` without a `Data` input, or an LLM node with
/// neither its prompt attribute nor a `Data` input (`G0015`).
fn reads_run_input(g: &Graph) -> bool {
    g.nodes.iter().any(|n| {
        let op = n.op.as_deref().unwrap_or_default();
        n.results.is_none()
            && !g
                .edges
                .iter()
                .any(|e| Some(e.to) == n.id && e.dependency == super::schema::Dependency::Data)
            && (op == "GUARD" || asks_nothing(op, &n.attributes))
    })
}

/// An LLM node of the reference's without its prompt attribute
/// (`template_str`): with no input either, it asks the run's input.
pub fn asks_nothing(op: &str, attrs: &indexmap::IndexMap<String, serde_json::Value>) -> bool {
    ais_ir::Opcode::from_graph_name(op).is_some_and(|o| o.info().llm.is_some())
        && super::reference::missing_required(op, attrs).is_some()
}

/// `metadata.is_entry` absent means `true`, as in the reference.
fn is_entry(g: &Graph) -> bool {
    g.metadata
        .get("is_entry")
        .is_none_or(|v| v.as_bool() == Some(true))
}

/// What the reference's validator rejects before anything else: an empty
/// graph name, a graph without nodes, a node without a name (its reasons).
fn reference_rules(g: &GraphAt<'_>, loc: &Locator) -> Result<(), Vec<GraphError>> {
    let bad = |message: String, path: Vec<Seg<'_>>| {
        Err(vec![GraphError::BadStructure {
            message,
            span: loc.at(&path),
        }])
    };
    if g.g.name.trim().is_empty() {
        return bad(
            "graph name cannot be empty".into(),
            g.path(&[Seg::Key("name")]),
        );
    }
    if g.g.nodes.is_empty() {
        return bad(
            "graph must contain at least one node".into(),
            g.path(&[Seg::Key("nodes")]),
        );
    }
    for (i, n) in g.g.nodes.iter().enumerate() {
        if n.name.trim().is_empty() {
            let id = n.id.map_or_else(|| "?".to_string(), |id| id.to_string());
            return bad(
                format!("node {id} has empty name"),
                g.path(&[Seg::Key("nodes"), Seg::Index(i)]),
            );
        }
    }
    Ok(())
}

/// The declarations of the reference's `AGENT` nodes: `beliefs` (an object
/// of initial values) and `goals` (descriptions, in priority order).
/// `memory` and `capabilities` need no declaration here: every agent has
/// the three tiers, and tools come from the catalogue.
fn agent_nodes(a: &mut AgentData, g: &Graph) {
    for n in g.nodes.iter().filter(|n| n.op.as_deref() == Some("AGENT")) {
        if let Some(serde_json::Value::Object(bs)) = n.attributes.get("beliefs") {
            for (name, v) in bs {
                if !a.beliefs.iter().any(|b| &b.name == name) {
                    a.beliefs.push(BeliefDecl {
                        name: name.clone(),
                        init: BeliefInit::Const(v.clone()),
                        span: Span::DUMMY,
                    });
                }
            }
        }
        if let Some(serde_json::Value::Array(gs)) = n.attributes.get("goals") {
            for (k, goal) in gs.iter().enumerate() {
                let text = goal
                    .as_str()
                    .map_or_else(|| goal.to_string(), str::to_string);
                // Goal names are identifiers; the text is the description.
                let mut name: String = text
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                    .collect();
                if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                    name.insert(0, '_');
                }
                if !a.goals.iter().any(|x| x.name == name) {
                    a.goals.push(GoalDecl {
                        name,
                        priority: k as i64 + 1,
                        description: text,
                        span: Span::DUMMY,
                    });
                }
            }
        }
    }
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// Our type names and the reference's (`int`, `float`, `string`, ...).
fn param_type(name: &str) -> Option<Type> {
    match name {
        "int" | "integer" | "float" | "double" => Some(Type::Number),
        "boolean" => Some(Type::Bool),
        "any" | "object" => Some(Type::Json),
        _ => Type::parse(name),
    }
}

/// Gives each graph its agent and flow name.
fn name_graphs<'g>(doc: &'g Graph, loc: &Locator) -> Result<Vec<GraphAt<'g>>, Vec<GraphError>> {
    let mut out = Vec::new();
    let all = std::iter::once((doc, Vec::new())).chain(
        doc.graphs
            .iter()
            .enumerate()
            .map(|(i, g)| (g, vec![Seg::Key("graphs"), Seg::Index(i)])),
    );
    for (g, prefix) in all {
        if !prefix.is_empty() && (!g.graphs.is_empty() || !g.agents.is_empty()) {
            let mut p = prefix.clone();
            p.push(Seg::Key("graphs"));
            return Err(vec![GraphError::BadStructure {
                message: "`graphs` and `agents` belong at the top of the document only".into(),
                span: loc.at(&p),
            }]);
        }
        let meta = |k: &str| {
            g.metadata
                .get(k)
                .and_then(|v| v.as_str())
                .map(str::to_string)
        };
        let agent = meta("source_agent")
            .or_else(|| doc.agents.first().map(|a| a.name.clone()))
            .unwrap_or_else(|| {
                if is_ident(&doc.name) {
                    doc.name.clone()
                } else {
                    "Graph".to_string()
                }
            });
        let flow = meta("source_flow").unwrap_or_else(|| {
            if prefix.is_empty() || !is_ident(&g.name) {
                "main".to_string()
            } else {
                g.name.clone()
            }
        });
        for (what, name) in [("source_agent", &agent), ("source_flow", &flow)] {
            if !is_ident(name) {
                let mut p = prefix.clone();
                p.extend([Seg::Key("metadata"), Seg::Key(what)]);
                return Err(vec![GraphError::BadStructure {
                    message: format!("`{name}` is not an identifier"),
                    span: loc.at(&p),
                }]);
            }
        }
        out.push(GraphAt {
            g,
            prefix,
            agent,
            flow,
        });
    }
    Ok(out)
}

fn declare(
    a: &mut AgentData,
    d: &super::schema::Agent,
    ai: usize,
    loc: &Locator,
) -> Result<(), Vec<GraphError>> {
    let at = |what: &'static str, i: usize| {
        loc.at(&[
            Seg::Key("agents"),
            Seg::Index(ai),
            Seg::Key(what),
            Seg::Index(i),
        ])
    };
    let bad = |message: String, span| vec![GraphError::BadStructure { message, span }];
    for (i, m) in d.memory.iter().enumerate() {
        let tier = Tier::parse(&m.tier)
            .ok_or_else(|| bad(format!("unknown memory tier `{}`", m.tier), at("memory", i)))?;
        a.memory.push(MemoryDecl {
            name: m.name.clone(),
            tier,
            span: Span::DUMMY,
        });
    }
    for (i, b) in d.beliefs.iter().enumerate() {
        let init = match (&b.value, &b.flow) {
            (Some(v), None) => BeliefInit::Const(v.clone()),
            (None, Some(f)) => BeliefInit::Flow(a.flow_by_name(f).ok_or_else(|| {
                bad(
                    format!("belief `{}` starts from the unknown flow `{f}`", b.name),
                    at("beliefs", i),
                )
            })?),
            _ => {
                return Err(bad(
                    format!(
                        "belief `{}` needs exactly one of `value` and `flow`",
                        b.name
                    ),
                    at("beliefs", i),
                ))
            }
        };
        a.beliefs.push(BeliefDecl {
            name: b.name.clone(),
            init,
            span: Span::DUMMY,
        });
    }
    for g in &d.goals {
        a.goals.push(GoalDecl {
            name: g.name.clone(),
            priority: g.priority,
            description: g.description.clone(),
            span: Span::DUMMY,
        });
    }
    for (i, c) in d.capabilities.iter().enumerate() {
        let mut params = Vec::new();
        for p in &c.params {
            let ty = param_type(&p.type_name).ok_or_else(|| {
                vec![GraphError::BadParameter {
                    message: format!(
                        "capability `{}`: `{}` has the unknown type `{}`",
                        c.name, p.name, p.type_name
                    ),
                    span: at("capabilities", i),
                }]
            })?;
            params.push((p.name.clone(), ty));
        }
        let result = param_type(&c.result).ok_or_else(|| {
            bad(
                format!(
                    "capability `{}` has the unknown result type `{}`",
                    c.name, c.result
                ),
                at("capabilities", i),
            )
        })?;
        a.capabilities.push(Capability {
            name: c.name.clone(),
            params,
            result,
            span: Span::DUMMY,
        });
    }
    for (i, h) in d.handlers.iter().enumerate() {
        let flow = a.flow_by_name(&h.flow).ok_or_else(|| {
            bad(
                format!("handler `{}` names the unknown flow `{}`", h.event, h.flow),
                at("handlers", i),
            )
        })?;
        a.handlers.push(Handler {
            event: h.event.clone(),
            flow,
            span: Span::DUMMY,
        });
    }
    Ok(())
}
