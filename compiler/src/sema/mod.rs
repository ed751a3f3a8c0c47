//! Semantic analysis: builds the [`ProgramIndex`], then checks every belief
//! initializer, flow and handler body. All problems are collected.

pub(crate) mod arguments;
pub mod builtins;
mod check;
pub mod errors;
pub mod holes;
pub mod index;
pub mod meanings;
pub mod reply;
pub mod types;

pub use check::{closest, literal_key, named_arguments, resolve_tier, Resolutions};
pub use errors::SemaError;
pub use index::ProgramIndex;
pub use types::Ty;

use crate::syntax::ast::{File, Member};
use check::Checker;

pub struct Checked {
    pub index: ProgramIndex,
    /// Errors and warnings in source order.
    pub errors: Vec<SemaError>,
    /// Variable definitions and uses, as resolved.
    pub resolutions: Resolutions,
}

impl Checked {
    pub fn has_errors(&self) -> bool {
        self.errors
            .iter()
            .any(|e| e.severity() == ais_ir::Severity::Error)
    }
}

/// What the program is checked against besides itself: the tools the
/// configuration provides (name, parameters in positional order) and the
/// remote agents it names.
#[derive(Clone, Debug, Default)]
pub struct Environment {
    pub tools: Vec<(String, Vec<String>)>,
    /// `[[remote_agents]]` names.
    pub remote_agents: Vec<String>,
}

pub fn check(file: &File) -> Checked {
    check_in(file, &Environment::default())
}

pub fn check_in(file: &File, env: &Environment) -> Checked {
    let mut errors = Vec::new();
    let mut index = index::build(file, &mut errors);
    index.configured_tools = env.tools.iter().cloned().collect();
    index.remote_agents = env.remote_agents.clone();
    let mut resolutions = Resolutions::default();

    // Belief types come from their initializers.
    for agent in &file.agents {
        let mut belief_types = Vec::new();
        if let Some(info) = index.agents.get(&agent.name.name) {
            let mut checker = Checker::new(&index, info, &mut errors);
            for member in &agent.members {
                if let Member::Beliefs(beliefs, _) = member {
                    for b in beliefs {
                        belief_types.push((b.name.name.clone(), checker.check_belief(&b.value)));
                    }
                }
            }
            let r = checker.take_resolutions();
            resolutions.defs.extend(r.defs);
            resolutions.uses.extend(r.uses);
        }
        if let Some(info) = index.agents.get_mut(&agent.name.name) {
            for (name, ty) in belief_types {
                if let Some(b) = info.beliefs.get_mut(&name) {
                    if b.ty == Ty::Unknown {
                        b.ty = ty;
                    }
                }
            }
        }
    }

    let mut seen = std::collections::HashSet::new();
    for agent in &file.agents {
        // Duplicate agents are skipped (already reported); the first wins.
        let Some(info) = index.agents.get(&agent.name.name) else {
            continue;
        };
        if !seen.insert(agent.name.name.as_str()) {
            continue;
        }
        let mut checker = Checker::new(&index, info, &mut errors);
        for member in &agent.members {
            match member {
                Member::Flow(f) => {
                    // A duplicate flow is not in the index; check it against its own signature.
                    let (params, ret) = match info.flows.get(&f.name.name) {
                        Some(sig) if sig.span == f.name.span => {
                            (sig.params.clone(), sig.ret.clone())
                        }
                        _ => {
                            let params = f
                                .params
                                .iter()
                                .map(|p| index::ParamSig {
                                    name: p.name.name.clone(),
                                    ty: p.ty.as_ref().map_or(Ty::Json, Ty::from_ast),
                                    span: p.name.span,
                                })
                                .collect();
                            (params, f.ret.as_ref().map_or(Ty::Void, Ty::from_ast))
                        }
                    };
                    checker.check_flow(f, &params, ret);
                }
                Member::Handler(h) => checker.check_handler(h),
                _ => {}
            }
        }
        let r = checker.take_resolutions();
        resolutions.defs.extend(r.defs);
        resolutions.uses.extend(r.uses);
    }
    errors.sort_by_key(|e| (e.span().start, e.span().end));
    Checked {
        index,
        errors,
        resolutions,
    }
}
