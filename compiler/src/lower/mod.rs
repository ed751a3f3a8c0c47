//! Lowering: the checked AST to the AIS IR.
//!
//! Runs only on programs that passed `sema` without errors. Each agent
//! becomes an IR agent (memory, beliefs, goals, capabilities, handlers,
//! flows); each flow body becomes SSA with structured regions (`flow.rs`);
//! effects are ordered by `ord` tokens along per-agent chains
//! (`effects.rs`). Source spans are kept on every op.

mod effects;
mod flow;

use crate::sema::{ProgramIndex, Ty};
use crate::syntax::ast::{self, ExprKind, Member};
use ais_ir::{
    AgentData, BeliefDecl, BeliefInit, Capability, GoalDecl, Handler, MemoryDecl, Module, Tier,
    Type,
};
pub(crate) use flow::builtin_offer;
use flow::{Ctx, FlowLowerer};

/// The IR type of a language type.
pub fn ty_to_ir(t: &Ty) -> Type {
    match t {
        Ty::Str => Type::Str,
        Ty::Number => Type::Number,
        Ty::Bool => Type::Bool,
        Ty::Json | Ty::Unknown => Type::Json,
        Ty::Void => Type::Void,
        Ty::Null => Type::Null,
        Ty::List(inner) => Type::list(ty_to_ir(inner)),
        Ty::Named(n) => Type::Opaque(n.clone()),
    }
}

pub fn lower(file: &ast::File, index: &ProgramIndex) -> Module {
    let providers = effects::Providers::default();
    let summaries = effects::summarize(file, index, &providers);
    let mut module = Module::new();
    let mut seen = std::collections::HashSet::new();
    for agent in &file.agents {
        // A duplicated agent was reported by sema; the first one wins.
        if !seen.insert(agent.name.name.as_str()) {
            continue;
        }
        let Some(info) = index.agents.get(&agent.name.name) else {
            continue;
        };
        let ctx = || Ctx {
            index,
            agent: info,
            summaries: &summaries,
            providers: &providers,
        };
        let mut data = AgentData::new(agent.name.name.clone());
        data.span = agent.span;
        for member in &agent.members {
            match member {
                Member::Memory(decls, _) => {
                    for d in decls {
                        if let Some(m) = info.memories.get(&d.name.name) {
                            data.memory.push(MemoryDecl {
                                name: d.name.name.clone(),
                                tier: Tier::parse(m.tier).unwrap_or(Tier::Stm),
                                span: d.span,
                            });
                        }
                    }
                }
                Member::Goals(goals, _) => {
                    for g in goals {
                        data.goals.push(GoalDecl {
                            name: g.name.name.clone(),
                            priority: g.priority.map_or(0, |(p, _)| p.round() as i64),
                            description: g
                                .description
                                .as_ref()
                                .map(|d| d.text())
                                .unwrap_or_default(),
                            span: g.span,
                        });
                    }
                }
                Member::Capability(c) => {
                    if let Some(sig) = info.capabilities.get(&c.name.name) {
                        data.capabilities.push(Capability {
                            name: sig.name.clone(),
                            params: sig
                                .params
                                .iter()
                                .map(|p| (p.name.clone(), ty_to_ir(&p.ty)))
                                .collect(),
                            result: ty_to_ir(&sig.ret),
                            span: c.span,
                        });
                    }
                }
                Member::Beliefs(beliefs, _) => {
                    for b in beliefs {
                        let init = match literal_json(&b.value) {
                            Some(v) => BeliefInit::Const(v),
                            None => {
                                let l = FlowLowerer::new(
                                    ctx(),
                                    &format!("belief_init_{}", b.name.name),
                                    Type::Json,
                                    b.span,
                                );
                                let body = ast::Block {
                                    stmts: vec![ast::Stmt {
                                        kind: ast::StmtKind::Return(Some(b.value.clone())),
                                        span: b.value.span,
                                    }],
                                    span: b.value.span,
                                };
                                let f = l.body(&body);
                                BeliefInit::Flow(data.add_flow(f))
                            }
                        };
                        data.beliefs.push(BeliefDecl {
                            name: b.name.name.clone(),
                            init,
                            span: b.span,
                        });
                    }
                }
                Member::Flow(f) => {
                    let Some(sig) = info.flows.get(&f.name.name) else {
                        continue;
                    };
                    if sig.span != f.name.span {
                        continue; // a duplicate, reported by sema
                    }
                    let mut l = FlowLowerer::new(ctx(), &sig.name, ty_to_ir(&sig.ret), f.span);
                    for p in &sig.params {
                        l.param(&p.name, ty_to_ir(&p.ty));
                    }
                    let mut flow = l.body(&f.body);
                    flow.entry = sig.entry;
                    flow.discoverable = info
                        .discoverable
                        .as_ref()
                        .is_some_and(|d| d.contains(&f.name.name));
                    data.add_flow(flow);
                }
                // Read by flow lowering (`ctx.agent.tools`, `.context`) and by
                // the checker (`discoverable`).
                Member::Tools(..) | Member::Discoverable(..) | Member::Context(..) => {}
                Member::Handler(h) => {
                    let event = h.event_name();
                    // Several handlers may listen to one event: number them.
                    let base = format!("on_{}", event.replace('.', "_"));
                    let mut name = base.clone();
                    let mut n = 1;
                    while data.flow_by_name(&name).is_some() || info.flows.contains_key(&name) {
                        n += 1;
                        name = format!("{base}_{n}");
                    }
                    let mut l = FlowLowerer::new(ctx(), &name, Type::Void, h.span);
                    for p in &h.fields {
                        let ty = p.ty.as_ref().map_or(Ty::Str, Ty::from_ast);
                        l.param(&p.name.name, ty_to_ir(&ty));
                    }
                    let body = match &h.guard {
                        Some(g) => ast::Block {
                            stmts: vec![ast::Stmt {
                                kind: ast::StmtKind::If {
                                    cond: g.clone(),
                                    then: h.body.clone(),
                                    otherwise: None,
                                },
                                span: h.span,
                            }],
                            span: h.body.span,
                        },
                        None => h.body.clone(),
                    };
                    let flow = l.body(&body);
                    let id = data.add_flow(flow);
                    data.handlers.push(Handler {
                        event,
                        flow: id,
                        span: h.span,
                    });
                }
                Member::Error(_) => {}
            }
        }
        module.add_agent(data);
    }
    module
}

/// A belief initializer that is a plain literal becomes a constant.
/// Does some belief have an initialiser that is not a literal (one that
/// lowers to a flow)? Only those need the effect check
/// (`ais_ir::effects`), which needs the lowered program.
pub fn has_computed_beliefs(file: &ast::File) -> bool {
    file.agents.iter().any(|a| {
        a.members.iter().any(|m| match m {
            ast::Member::Beliefs(bs, _) => bs.iter().any(|b| literal_json(&b.value).is_none()),
            _ => false,
        })
    })
}

fn literal_json(e: &ast::Expr) -> Option<serde_json::Value> {
    use serde_json::Value as J;
    Some(match &e.kind {
        ExprKind::Str(s) if !s.has_holes() => J::String(s.text()),
        ExprKind::Number(n) => json_number(*n)?,
        ExprKind::Bool(b) => J::Bool(*b),
        ExprKind::Null => J::Null,
        ExprKind::List(items) => J::Array(items.iter().map(literal_json).collect::<Option<_>>()?),
        ExprKind::Unary(ast::UnaryOp::Neg, x) => match &x.kind {
            ExprKind::Number(n) => json_number(-*n)?,
            _ => return None,
        },
        _ => return None,
    })
}

/// Whole numbers become JSON integers (`200`, not `200.0`).
fn json_number(n: f64) -> Option<serde_json::Value> {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        Some(serde_json::Value::from(n as i64))
    } else {
        serde_json::Number::from_f64(n).map(serde_json::Value::Number)
    }
}
