//! An accepted plan's information flows (issue 19, item 3): the static
//! check of [`crate::flows`] on the plan's program, its entry flow under
//! the labels the plan's inputs carry when it is about to run, each denied
//! flow rendered for the planner model (positions in its own text).

use super::{entry_header, position};
use crate::flows::{self, EntryLabels};
use ais_ir::bytecode::Program;
use ais_ir::ifc::FlowPolicy;
use std::fmt;

/// A flow of a plan the policy denies (warning `W0020` of the static check).
#[derive(Clone, Debug, PartialEq)]
pub struct FlowProblem {
    pub sink: String,
    pub argument: String,
    /// The untrusted sources reaching the argument.
    pub sources: Vec<String>,
    /// The first source's path, source first: `line L, column C: what`, or
    /// what alone for the plan's inputs.
    pub path: Vec<String>,
    /// The sink call's 1-based line and column in the plan text.
    pub at: Option<(usize, usize)>,
    /// The sources came with the plan's inputs only (no call in the plan
    /// can use the argument, whatever the plan does).
    pub from_inputs: bool,
}

impl fmt::Display for FlowProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at {
            Some((l, c)) => write!(f, "line {l}, column {c}: ")?,
            None => f.write_str("plan: ")?,
        }
        let sources: Vec<String> = self.sources.iter().map(|s| format!("`{s}`")).collect();
        write!(
            f,
            "warning[{}]: untrusted data from {} reaches argument `{}` of sink `{}` (path: {})",
            flows::CODE,
            sources.join(", "),
            self.argument,
            self.sink,
            self.path.join(" -> ")
        )?;
        if self.from_inputs {
            write!(
                f,
                " (help: the goal or context of this plan carries untrusted data, so no call in it may set `{}` of `{}`: leave that call out)",
                self.argument, self.sink
            )
        } else {
            write!(
                f,
                " (help: do not derive `{}` of `{}` from what {} returned, nor call it under a condition on it: take the value from the goal, or leave the call out)",
                self.argument,
                self.sink,
                sources.join(", ")
            )
        }
    }
}

/// The flows of a plan (`source` as [`super::check_plan`] made it, compiled
/// to `program`) that `policy` denies, when the plan's inputs (the goal and
/// context the model wrote it from) carry the untrusted sources `inputs`:
/// every value the plan computes depends on them. Empty under `mode = "off"`.
pub fn check_flows(
    source: &str,
    program: &Program,
    inputs: &[String],
    policy: &FlowPolicy,
) -> Vec<FlowProblem> {
    let entry = EntryLabels {
        params: Vec::new(),
        context: inputs.to_vec(),
        origin: "the plan's inputs".into(),
    };
    let header = entry_header();
    let body_start = source.find(&header).map(|i| i + header.len());
    let at = |span| body_start.and_then(|b| position(source, b, span));
    flows::check_with_entry(program, policy, &entry)
        .into_iter()
        .map(|f| {
            let path = f
                .sources
                .values()
                .next()
                .map(|hops| {
                    hops.iter()
                        .map(|h| match at(h.span) {
                            Some((l, c)) => format!("line {l}, column {c}: {}", h.what),
                            None => h.what.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            FlowProblem {
                from_inputs: f.sources.keys().all(|s| inputs.contains(s)),
                sources: f.sources.keys().cloned().collect(),
                at: at(f.span),
                sink: f.sink,
                argument: f.argument,
                path,
            }
        })
        .collect()
}
