//! The streaming planner (LLMCompiler's): while the model is still writing
//! a plan, every statement that is complete and checks is looked at, and
//! its calls to read-only tools whose arguments are already known
//! (constants, or computed from constants) start at once instead of after
//! the whole plan has checked and been linked. The plan's own `inv` op then
//! takes the call's result from the solve's [`Prefetch`] instead of calling
//! the tool again.
//!
//! Only read-only tools start early: a call with side effects never runs
//! before the whole plan has checked. A plan whose complete statements
//! checked but whose rest never does has still made its early read-only
//! calls (their results are unused). Early calls go through the host (its
//! access control and per-tool limits) and are journaled under the `solve`
//! op's key (`<key>#early/<tool>/<n>`), so a resumed run does not repeat
//! one that completed, even when the planner is asked again.

use super::gate::{self, EffectId};
use super::Run;
use crate::exec::OpError;
use crate::exec::{self, Class};
use crate::host::HostError;
use crate::journal::Record;
use crate::telemetry::ToolCallRecord;
use crate::value::Val;
use ais_ir::bytecode::{Imm, Program};
use ais_ir::Opcode;
use serde_json::Value as Json;
use std::sync::Arc;
use std::thread::Scope;

/// Most calls one `solve` op starts early.
pub const MAX_EARLY_CALLS: usize = 64;

pub(crate) use crate::prefetch::Prefetch;

/// The calls in a checked plan prefix that may start now: `inv` ops of the
/// entry flow's body on read-only tools whose argument is known, in order.
pub(crate) fn ready_calls(program: &Program, read_only: &[String]) -> Vec<(String, Json)> {
    let Some(flow) = program
        .find_entry(None)
        .ok()
        .and_then(|e| program.flows.get(e as usize))
    else {
        return Vec::new();
    };
    let Some(body) = flow.regions.first() else {
        return Vec::new();
    };
    let mut known: Vec<Option<Val>> = vec![None; body.n_slots()];
    let mut calls = Vec::new();
    for instr in &body.ops {
        let first = instr.first_operand as usize;
        let data = body
            .operands
            .get(first..first + instr.n_data as usize)
            .unwrap_or(&[]);
        let args: Option<Vec<Val>> = data
            .iter()
            .map(|&s| known.get(s as usize).cloned().flatten())
            .collect();
        let Some(args) = args else { continue };
        match (exec::class(instr.opcode), instr.opcode, &instr.imm) {
            (Class::Pure, _, _) if instr.n_results == 1 => {
                if let Ok(v) = exec::eval_pure(program, instr, &args) {
                    if let Some(slot) = known.get_mut(instr.result as usize) {
                        *slot = Some(v);
                    }
                }
            }
            (Class::Tool, Opcode::Inv, Imm::Tool(t)) if read_only.contains(t) => {
                if let Some(a) = args.first() {
                    calls.push((t.clone(), a.to_json()));
                }
            }
            _ => {}
        }
    }
    calls
}

impl<'r> Run<'r> {
    /// Starts, on threads of `scope`, the calls of `ready` that have not
    /// started yet (a call made twice in the plan starts twice).
    pub(super) fn start_early<'s>(
        &'s self,
        scope: &'s Scope<'s, '_>,
        site: EarlySite<'s>,
        prefetch: &'s Arc<Prefetch>,
        ready: Vec<(String, Json)>,
    ) {
        let mut seen: Vec<(&str, &Json, usize)> = Vec::new();
        for (tool, args) in &ready {
            let n = match seen.iter_mut().find(|(t, a, _)| t == tool && *a == args) {
                Some(e) => {
                    e.2 += 1;
                    e.2
                }
                None => {
                    seen.push((tool, args, 1));
                    1
                }
            };
            if prefetch.count(tool, args) >= n || prefetch.len() >= MAX_EARLY_CALLS || self.halted()
            {
                continue;
            }
            let i = prefetch.start(tool, args);
            let key = site.jkey.map(|k| format!("{k}#early/{tool}/{n}"));
            let (tool, args) = (tool.clone(), args.clone());
            let spawned = std::thread::Builder::new()
                .name("ais-early-call".into())
                .stack_size(256 * 1024)
                .spawn_scoped(scope, move || {
                    let start_ns = self.now();
                    let ((result, replayed), read) = crate::host::flow::with(Vec::new(), || {
                        self.early_call(site.agent, &tool, &args, key)
                    });
                    if !read.is_empty() {
                        // It read labelled stored values (`crate::host::flow`):
                        // the plan's own op calls it again, so its result
                        // carries their labels.
                        prefetch.abandon(i);
                        return;
                    }
                    let record = ToolCallRecord {
                        turn: site.round,
                        tool: tool.clone(),
                        status: if result.is_ok() { "ok" } else { "error" },
                        code: result.as_ref().err().map(|e| e.code.clone()),
                        replayed,
                        arguments: self.text.keep(&args.to_string()),
                        start_ns,
                        end_ns: self.now(),
                    };
                    prefetch.finish(i, result, record);
                });
            if spawned.is_err() {
                // No thread: the plan's op will call the tool itself.
                prefetch.abandon(i);
            }
        }
    }

    /// One early call, through the gate: from the journal when an
    /// earlier attempt completed it, else through the host (and then
    /// journaled). Only read-only tools start early: no intent is written
    /// and nothing is left in doubt. A journal failure is the call's error.
    fn early_call(
        &self,
        agent: &str,
        tool: &str,
        args: &Json,
        key: Option<String>,
    ) -> (Result<Json, HostError>, bool) {
        let id = key.map(|k| {
            EffectId::new(
                k,
                crate::journal::input_hash(&[Val::from_json(args.clone())]),
            )
        });
        let gated = self.gated_call(
            id.as_ref(),
            "inv",
            None,
            None,
            |record| {
                let k = id.as_ref().map_or("?", |i| i.key.as_str());
                gate::single_value(k, record).map(|v| v.to_json())
            },
            |_| {
                self.host
                    .invoke_tool(agent, tool, args, &self.cancel)
                    .map_err(OpError::from)
            },
            |v| (Record::values(&[Val::from_json(v.clone())]), 0),
        );
        let host_error = |e: OpError| HostError {
            code: e.code,
            message: e.message,
            payload: e.payload,
        };
        match gated {
            Ok((r, replayed)) => (r.map_err(host_error), replayed),
            Err(e) => (Err(host_error(e)), false),
        }
    }
}

/// Where early calls come from: the `solve` op's agent, journal key and
/// planner round.
#[derive(Clone, Copy)]
pub(super) struct EarlySite<'s> {
    pub agent: &'s str,
    pub jkey: Option<&'s str>,
    pub round: u32,
}
