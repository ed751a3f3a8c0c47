//! The program index: every agent with its flows, capabilities, memories,
//! beliefs and goals, built before any body is checked so that forward
//! references and cross-agent calls resolve. Lowering reuses it.

use super::builtins::canonical_tier;
use super::errors::SemaError;
use super::types::Ty;
use crate::syntax::ast::{self, Member};
use ais_ir::Span;
use indexmap::IndexMap;

#[derive(Clone, Debug)]
pub struct ParamSig {
    pub name: String,
    pub ty: Ty,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct FlowSig {
    pub name: String,
    pub params: Vec<ParamSig>,
    pub ret: Ty,
    /// Span of the written result type, if any.
    pub ret_span: Option<Span>,
    pub entry: bool,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct CapabilitySig {
    pub name: String,
    /// Declared `@read_only`: calls are not ordered with each other.
    pub read_only: bool,
    pub params: Vec<ParamSig>,
    pub ret: Ty,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct MemoryInfo {
    /// Canonical tier: "stm", "ltm" or "episodic".
    pub tier: &'static str,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct BeliefInfo {
    pub ty: Ty,
    pub span: Span,
}

#[derive(Clone, Debug, Default)]
pub struct AgentInfo {
    pub name: String,
    pub span: Span,
    pub flows: IndexMap<String, FlowSig>,
    pub capabilities: IndexMap<String, CapabilitySig>,
    pub memories: IndexMap<String, MemoryInfo>,
    pub beliefs: IndexMap<String, BeliefInfo>,
    /// `tools: [a, b]`: what the agent's LLM operations offer their model
    /// when they name no `tools:` themselves.
    pub tools: Vec<String>,
    /// `discoverable: [a, b]`: the flows and capabilities other agents may
    /// call (`None`: the agent lists none, and all may be called).
    pub discoverable: Option<Vec<String>>,
    /// `context: "..."`: the standing system prompt of its LLM operations.
    pub context: Option<String>,
    pub goals: IndexMap<String, Span>,
    pub entry: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub struct ProgramIndex {
    pub agents: IndexMap<String, AgentInfo>,
    /// Tools the configuration provides (subprocess and MCP tools), by
    /// name, with their parameters in positional order: a call of such a
    /// name is a tool call, as in the reference (`web_search(q)`).
    pub configured_tools: IndexMap<String, Vec<String>>,
    /// Agents served elsewhere (`[[remote_agents]]`), reached over A2A:
    /// `communicate("Name", m)` and `Name.flow(...)` call them.
    pub remote_agents: Vec<String>,
}

impl ProgramIndex {
    /// Whether `name` is a remote agent (and no agent of the program).
    pub fn is_remote_agent(&self, name: &str) -> bool {
        !self.agents.contains_key(name) && self.remote_agents.iter().any(|r| r == name)
    }
}

impl ProgramIndex {
    /// The parameters of a tool called by name: a built-in or AAM tool, or
    /// one the configuration provides. `None`: no such tool.
    pub fn tool_params(&self, name: &str) -> Option<Vec<String>> {
        super::builtins::builtin_tool_params(name)
            .or_else(|| self.configured_tools.get(name).cloned())
    }

    /// The agent holding the program's entry flow: the first agent with an
    /// `@entry` flow.
    pub fn entry_agent(&self) -> Option<&AgentInfo> {
        self.agents.values().find(|a| a.entry.is_some())
    }
}

/// Reports `ident` as a duplicate of the definition at `first`, if any.
fn duplicate(
    errors: &mut Vec<SemaError>,
    kind: &'static str,
    ident: &ast::Ident,
    first: Option<Span>,
) -> bool {
    let Some(first) = first else {
        return false;
    };
    errors.push(SemaError::Duplicate {
        kind,
        name: ident.name.clone(),
        span: ident.span,
        first,
    });
    true
}

fn params(ps: &[ast::Param], default: Ty, errors: &mut Vec<SemaError>) -> Vec<ParamSig> {
    let mut out: Vec<ParamSig> = Vec::new();
    for p in ps {
        if duplicate(
            errors,
            "parameter",
            &p.name,
            out.iter().find(|q| q.name == p.name.name).map(|x| x.span),
        ) {
            continue;
        }
        out.push(ParamSig {
            name: p.name.name.clone(),
            ty: p.ty.as_ref().map_or(default.clone(), Ty::from_ast),
            span: p.name.span,
        });
    }
    out
}

pub fn build(file: &ast::File, errors: &mut Vec<SemaError>) -> ProgramIndex {
    let mut index = ProgramIndex::default();
    for agent in &file.agents {
        if duplicate(
            errors,
            "agent",
            &agent.name,
            index.agents.get(&agent.name.name).map(|x| x.span),
        ) {
            continue;
        }
        let mut info = AgentInfo {
            name: agent.name.name.clone(),
            span: agent.name.span,
            ..AgentInfo::default()
        };
        let mut entry_span: Option<Span> = None;
        for member in &agent.members {
            match member {
                Member::Memory(decls, _) => {
                    for d in decls {
                        let Some(tier) = canonical_tier(&d.tier.name) else {
                            errors.push(SemaError::InvalidMemoryDecl {
                                found: d.tier.name.clone(),
                                span: d.tier.span,
                            });
                            continue;
                        };
                        if duplicate(
                            errors,
                            "memory",
                            &d.name,
                            info.memories.get(&d.name.name).map(|x| x.span),
                        ) {
                            continue;
                        }
                        info.memories.insert(
                            d.name.name.clone(),
                            MemoryInfo {
                                tier,
                                span: d.name.span,
                            },
                        );
                    }
                }
                Member::Beliefs(beliefs, _) => {
                    for b in beliefs {
                        if duplicate(
                            errors,
                            "belief",
                            &b.name,
                            info.beliefs.get(&b.name.name).map(|x| x.span),
                        ) {
                            continue;
                        }
                        // The type is filled in once the initializer is checked.
                        info.beliefs.insert(
                            b.name.name.clone(),
                            BeliefInfo {
                                ty: Ty::Unknown,
                                span: b.name.span,
                            },
                        );
                    }
                }
                Member::Goals(goals, _) => {
                    for g in goals {
                        if duplicate(
                            errors,
                            "goal",
                            &g.name,
                            info.goals.get(&g.name.name).copied(),
                        ) {
                            continue;
                        }
                        info.goals.insert(g.name.name.clone(), g.name.span);
                    }
                }
                Member::Capability(c) => {
                    for d in &c.decorators {
                        if d.name.name != "read_only" {
                            errors.push(SemaError::UnknownDecorator {
                                name: d.name.name.clone(),
                                span: d.span,
                            });
                        }
                    }
                    // Only a quoted name can be empty: `capability ""(...)`.
                    if c.name.name.trim().is_empty() {
                        errors.push(SemaError::EmptyToolName {
                            op: "capability".into(),
                            span: c.name.span,
                        });
                        continue;
                    }
                    let first = info
                        .capabilities
                        .get(&c.name.name)
                        .map(|x| x.span)
                        .or_else(|| info.flows.get(&c.name.name).map(|x| x.span));
                    if duplicate(errors, "capability", &c.name, first) {
                        continue;
                    }
                    let sig = CapabilitySig {
                        name: c.name.name.clone(),
                        read_only: c.decorators.iter().any(|d| d.name.name == "read_only"),
                        params: params(&c.params, Ty::Json, errors),
                        ret: c.ret.as_ref().map_or(Ty::Json, Ty::from_ast),
                        span: c.name.span,
                    };
                    info.capabilities.insert(sig.name.clone(), sig);
                }
                Member::Flow(f) => {
                    for d in &f.decorators {
                        if d.name.name != "entry" {
                            errors.push(SemaError::UnknownDecorator {
                                name: d.name.name.clone(),
                                span: d.span,
                            });
                        }
                    }
                    let first = info
                        .flows
                        .get(&f.name.name)
                        .map(|x| x.span)
                        .or_else(|| info.capabilities.get(&f.name.name).map(|x| x.span));
                    if duplicate(errors, "flow", &f.name, first) {
                        continue;
                    }
                    let entry = f.is_entry();
                    if entry {
                        let here = f
                            .decorators
                            .iter()
                            .find(|d| d.name.name == "entry")
                            .map_or(f.name.span, |d| d.span);
                        match entry_span {
                            Some(first) => errors.push(SemaError::MultipleEntries {
                                agent: info.name.clone(),
                                span: here,
                                first,
                            }),
                            None => {
                                entry_span = Some(here);
                                info.entry = Some(f.name.name.clone());
                            }
                        }
                    }
                    let sig = FlowSig {
                        name: f.name.name.clone(),
                        params: params(&f.params, Ty::Json, errors),
                        ret: f.ret.as_ref().map_or(Ty::Void, Ty::from_ast),
                        ret_span: f.ret.as_ref().map(|t| t.span()),
                        entry,
                        span: f.name.span,
                    };
                    info.flows.insert(sig.name.clone(), sig);
                }
                Member::Tools(names, _) => {
                    info.tools.extend(names.iter().map(|n| n.name.clone()));
                }
                Member::Discoverable(names, _) => {
                    info.discoverable
                        .get_or_insert_with(Vec::new)
                        .extend(names.iter().map(|n| n.name.clone()));
                }
                Member::Context(text, _) => info.context = Some(text.text()),
                Member::Handler(_) | Member::Error(_) => {}
            }
        }
        // Capabilities may be declared after the list: check it now.
        for member in &agent.members {
            let Member::Tools(names, _) = member else {
                continue;
            };
            for t in names {
                if info.capabilities.contains_key(&t.name)
                    || super::builtins::is_builtin_tool(&t.name)
                {
                    continue;
                }
                let caps: Vec<String> = info.capabilities.keys().cloned().collect();
                errors.push(SemaError::BadNamedArgument {
                    name: "tools".into(),
                    expected: format!(
                        "lists capabilities of the agent or built-in tools, and `{}` is neither",
                        t.name
                    ),
                    suggestion: super::check::closest(&t.name, caps.iter()),
                    span: t.span,
                });
            }
        }
        // `discoverable` names the agent's own flows and capabilities.
        for member in &agent.members {
            let Member::Discoverable(names, _) = member else {
                continue;
            };
            for d in names {
                if info.flows.contains_key(&d.name) || info.capabilities.contains_key(&d.name) {
                    continue;
                }
                let own: Vec<String> = info
                    .flows
                    .keys()
                    .chain(info.capabilities.keys())
                    .cloned()
                    .collect();
                errors.push(SemaError::BadNamedArgument {
                    name: "discoverable".into(),
                    expected: format!(
                        "lists flows and capabilities of the agent, and `{}` is neither",
                        d.name
                    ),
                    suggestion: super::check::closest(&d.name, own.iter()),
                    span: d.span,
                });
            }
        }
        index.agents.insert(info.name.clone(), info);
    }
    implicit_entry(&mut index);
    report_entry(file, &index, errors);
    index
}

/// Warns at check time when `aisc run` could not pick an entry flow without
/// `--entry` (none marked with several flows, or entries in several agents).
fn report_entry(file: &ast::File, index: &ProgramIndex, errors: &mut Vec<SemaError>) {
    let flow_span = |agent: &str, flow: &str| {
        index
            .agents
            .get(agent)
            .and_then(|a| a.flows.get(flow))
            .map(|f| f.span)
    };
    // In source order, so the spans point where a reader looks first.
    let entries: Vec<(String, Span)> = file
        .agents
        .iter()
        .filter_map(|a| {
            let info = index.agents.get(&a.name.name)?;
            let flow = info.entry.as_ref()?;
            Some((
                format!("{}.{flow}", info.name),
                flow_span(&info.name, flow)?,
            ))
        })
        .collect();
    match entries.as_slice() {
        [] => {
            let flows: Vec<Span> = file
                .agents
                .iter()
                .flat_map(|a| {
                    a.members.iter().filter_map(|m| match m {
                        ast::Member::Flow(f) => Some(f.name.span),
                        _ => None,
                    })
                })
                .collect();
            if let (Some(&span), true) = (flows.first(), flows.len() > 1) {
                errors.push(SemaError::NoEntryFlow {
                    flows: flows.len(),
                    span,
                });
            }
        }
        [_] => {}
        [(_, first), (_, span), ..] => errors.push(SemaError::SeveralEntryAgents {
            entries: entries.iter().map(|(n, _)| n.clone()).collect(),
            span: *span,
            first: *first,
        }),
    }
}

/// A program with no `@entry` flow and exactly one flow runs that flow (as
/// the reference language does): it becomes the entry.
fn implicit_entry(index: &mut ProgramIndex) {
    if index.agents.values().any(|a| a.entry.is_some()) {
        return;
    }
    let mut flows = index
        .agents
        .values_mut()
        .flat_map(|a| a.flows.values_mut().map(|f| (f.name.clone(), f)))
        .collect::<Vec<_>>();
    if let [(name, flow)] = flows.as_mut_slice() {
        flow.entry = true;
        let name = name.clone();
        if let Some(agent) = index
            .agents
            .values_mut()
            .find(|a| a.flows.contains_key(&name))
        {
            agent.entry = Some(name);
        }
    }
}
