//! `ais-oracle`: a source-level reference interpreter for AIS.
//!
//! It evaluates the *checked AST* sequentially (statements in source order,
//! calls where they are written) with semantics written from
//! docs/language.md and docs/runtime.md. It shares no code with lowering,
//! the IR, the bytecode or the VM's op semantics, so a defect there shows up
//! as a disagreement in the differential tests (`oracle/tests/`). It talks
//! to the same [`LlmBackend`] and [`Host`] traits as the VM, so prompts and
//! tool calls are comparable; memory, beliefs, prints and messages are kept
//! in the oracle's own [`World`] so a failing `try` body can be undone.

mod error;
mod eval;
pub mod value;
mod world;

pub use error::OracleError;
pub use eval::Interpreter;
pub use world::{World, TIERS};

use ais_compiler::syntax::ast::{File, Member};
use ais_vm::llm::LlmBackend;
use ais_vm::Host;
use serde_json::Value as Json;

/// A parsed and checked program.
pub struct Program {
    pub file: File,
}

impl Program {
    /// Parses and checks `source`; any error diagnostic is a load failure.
    pub fn load(source: &str) -> Result<Program, OracleError> {
        let front = ais_compiler::driver::check_source(source);
        if front.has_errors() {
            let first = front
                .diagnostics
                .iter()
                .find(|d| d.is_error())
                .map(|d| format!("{d:?}"))
                .unwrap_or_default();
            return Err(OracleError::new("oracle.check", first));
        }
        Ok(Program { file: front.file })
    }
}

/// What a run produced: the entry's result (or failure) and the program's
/// state afterwards.
#[derive(Debug)]
pub struct Outcome {
    pub result: Result<Json, OracleError>,
    pub world: World,
}

/// Runs the entry flow (the first agent's `@entry` flow, or the program's
/// only flow) with `args` by
/// parameter name (missing ones are `null`).
pub fn run(
    program: &Program,
    args: &[(String, Json)],
    backend: &dyn LlmBackend,
    host: &dyn Host,
) -> Outcome {
    let mut interp = Interpreter::new(&program.file.agents, backend, host);
    let result = interp.init_beliefs().and_then(|()| {
        let flows: Vec<_> = program
            .file
            .agents
            .iter()
            .flat_map(|a| {
                a.members.iter().filter_map(move |m| match m {
                    Member::Flow(f) => Some((a, f)),
                    _ => None,
                })
            })
            .collect();
        // docs/language.md: a program with exactly one flow runs it, marked
        // `@entry` or not.
        let entry = flows
            .iter()
            .find(|(_, f)| f.is_entry())
            .or(match flows.as_slice() {
                [only] => Some(only),
                _ => None,
            })
            .copied();
        let Some((agent, flow)) = entry else {
            return Err(OracleError::new("oracle.no_entry", "no @entry flow"));
        };
        let values = flow
            .params
            .iter()
            .map(|p| {
                args.iter()
                    .find(|(k, _)| *k == p.name.name)
                    .map_or(Json::Null, |(_, v)| v.clone())
            })
            .collect();
        interp.call_flow(agent, flow, values)
    });
    Outcome {
        result,
        world: interp.world,
    }
}
