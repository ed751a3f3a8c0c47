//! Op semantics, shared by the dataflow VM and the reference interpreter so
//! that both compute the same thing; only the scheduling differs.
//!
//! Here: the op error, operand access, host effects (inline ops, tools,
//! messages). `pure.rs`: ops from values to a value; `llm.rs`: an LLM op's
//! request and the value of its reply; `control.rs`: branches, loops,
//! calls and entry arguments.

mod control;
mod llm;
mod pure;

pub use control::{call_results, case_matches, entry_args, loop_items, select_branch};
pub use llm::{
    llm_request, llm_value, max_steps, offers_tools, on_agent_lane, plans, repairs,
    DEFAULT_MAX_STEPS, DEFAULT_REPAIRS,
};
pub use pure::{eval_pure, fill_template, fits, truthy};

use crate::host::{Host, Message};
use crate::llm::{CancelToken, LlmError, LlmOpKind};
use crate::value::Val;
use ais_ir::bytecode::{Imm, Instr, Program};
use ais_ir::Opcode;
use serde_json::{json, Value as Json};
use smallvec::{smallvec, SmallVec};

/// Results of one op.
pub type Results = SmallVec<[Val; 2]>;

/// A failed op, before it is located (flow, op, span) by the caller.
#[derive(Clone, Debug, PartialEq)]
pub struct OpError {
    /// Dotted code: `llm.server`, `tool.unknown`, `type.not_number`, ...
    pub code: String,
    pub message: String,
    pub payload: Json,
}

impl OpError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> OpError {
        OpError {
            code: code.into(),
            message: message.into(),
            payload: Json::Null,
        }
    }

    fn ty(what: &str, v: &Val) -> OpError {
        OpError::new(
            format!("type.not_{what}"),
            format!("expected {what}, got {} `{}`", v.kind(), short(&v.text())),
        )
    }

    /// The structured error value a `catch` region receives.
    pub fn to_value(&self, program: &Program, flow: u32, instr: &Instr) -> Val {
        Val::from_json(json!({
            "code": self.code,
            "message": self.message,
            "op": instr.opcode.mnemonic(),
            "flow": program.flow_name(flow),
            "span": {"start": instr.span.start, "end": instr.span.end},
            "payload": self.payload,
            "hint": crate::error::hint_for(&self.code),
        }))
    }
}

impl From<LlmError> for OpError {
    fn from(e: LlmError) -> OpError {
        let kind = serde_json::to_value(e.kind)
            .ok()
            .and_then(|k| k.as_str().map(str::to_string))
            .unwrap_or_else(|| "error".into());
        OpError {
            code: format!("llm.{kind}"),
            message: e.to_string(),
            payload: serde_json::to_value(&e).unwrap_or(Json::Null),
        }
    }
}

impl From<crate::host::HostError> for OpError {
    fn from(e: crate::host::HostError) -> OpError {
        OpError {
            code: e.code,
            message: e.message,
            payload: e.payload,
        }
    }
}

fn short(s: &str) -> String {
    if s.chars().count() > 60 {
        let head: String = s.chars().take(57).collect();
        format!("{head}...")
    } else {
        s.to_string()
    }
}

/// Where an op runs: the op table's [`ais_ir::ExecClass`].
pub use ais_ir::ExecClass as Class;

pub fn class(op: Opcode) -> Class {
    op.info().exec
}

/// The LLM operation `op` is (`None` for any other op); from the op table.
pub fn llm_kind(op: Opcode) -> Option<LlmOpKind> {
    op.info().llm
}

fn num(v: &Val) -> Result<f64, OpError> {
    v.as_num().ok_or_else(|| OpError::ty("number", v))
}

fn boolean(v: &Val) -> Result<bool, OpError> {
    v.as_bool().ok_or_else(|| OpError::ty("bool", v))
}

fn arg(args: &[Val], i: usize) -> Result<&Val, OpError> {
    args.get(i)
        .ok_or_else(|| OpError::new("internal.operand", format!("missing operand {i}")))
}

/// The message a `communicate` op's operands `(to, body, protocol)` make.
pub fn message_of(from: &str, args: &[Val]) -> Message {
    let text = |i: usize| args.get(i).map(Val::text).unwrap_or_default();
    Message {
        from: from.to_string(),
        to: text(0),
        body: args.get(1).map_or(Json::Null, Val::to_json),
        protocol: text(2),
    }
}

/// The code a run stops with at a `pause` (not catchable: see
/// `scheduler::limits::is_fatal`).
pub const PAUSED: &str = "run.paused";

/// Runs a quick host effect.
pub fn exec_inline(
    host: &dyn Host,
    agent: &str,
    instr: &Instr,
    args: &[Val],
) -> Result<Results, OpError> {
    use Opcode as O;
    let tier = || match &instr.imm {
        Imm::Tier(t) | Imm::Query { tier: t, .. } => Ok(t.tier()),
        _ => Err(OpError::new("internal.tier", "bad tier")),
    };
    let belief = || match &instr.imm {
        Imm::Belief(n) => Ok(n.as_str()),
        _ => Err(OpError::new("internal.belief", "bad belief")),
    };
    Ok(match instr.opcode {
        O::Qmem => {
            let mut r = host.mem_query(agent, tier()?, &arg(args, 0)?.to_json())?;
            if let (Imm::Query { limit: Some(l), .. }, Json::Array(xs)) = (&instr.imm, &mut r) {
                let keep = usize::try_from(*l).unwrap_or(usize::MAX);
                let cut = xs.len().saturating_sub(keep);
                xs.drain(..cut);
            }
            smallvec![Val::from_json(r), Val::Ord]
        }
        O::Umem => {
            let key = args.get(1).map(Val::to_json);
            host.mem_update(agent, tier()?, &arg(args, 0)?.to_json(), key.as_ref())?;
            smallvec![Val::Ord]
        }
        O::BeliefGet => smallvec![Val::from_json(host.belief_get(agent, belief()?)?), Val::Ord],
        O::BeliefSet => {
            host.belief_set(agent, belief()?, &arg(args, 0)?.to_json())?;
            smallvec![Val::Ord]
        }
        O::Print => {
            let line = args.iter().map(Val::text).collect::<Vec<_>>().join(" ");
            host.print(agent, &line);
            smallvec![Val::Ord]
        }
        O::Communicate => {
            host.communicate(Message {
                from: agent.to_string(),
                to: arg(args, 0)?.text(),
                body: arg(args, 1)?.to_json(),
                protocol: arg(args, 2)?.text(),
            })?;
            smallvec![Val::Ord]
        }
        O::Fence => smallvec![Val::Ord],
        O::Guard => {
            if !truthy(arg(args, 0)?) {
                return Err(OpError::new("guard.failed", arg(args, 1)?.text()));
            }
            smallvec![Val::Ord]
        }
        // Reached only when no input was journaled for it (a resumed run
        // replays the input instead): the run stops here.
        O::Pause => {
            let message = arg(args, 0)?.text();
            match host.pause(agent, &message) {
                Some(answer) => smallvec![Val::from_json(answer), Val::Ord],
                None => {
                    return Err(OpError::new(PAUSED, format!("paused: {message}"))
                        .with_payload(serde_json::json!({ "message": message })))
                }
            }
        }
        other => {
            return Err(OpError::new(
                "internal.not_inline",
                format!("`{other}` is not an inline effect"),
            ))
        }
    })
}

/// A tool op's results: its value, then the `ord` token that orders it on
/// its provider's chain (the journal records only the value).
pub fn tool_results(instr: &Instr, v: Val) -> Results {
    let mut r: Results = smallvec![v];
    pad_ord(instr, &mut r);
    r
}

/// Appends the `ord` results an op has beyond the values it computed.
pub fn pad_ord(instr: &Instr, r: &mut Results) {
    while r.len() < instr.n_results as usize {
        r.push(Val::Ord);
    }
}

/// Runs a tool op (blocking; called on an I/O thread).
pub fn exec_tool(
    host: &dyn Host,
    agent: &str,
    instr: &Instr,
    args: &[Val],
    cancel: &CancelToken,
    idempotency_key: Option<&str>,
) -> Result<Val, OpError> {
    let r = match (&instr.opcode, &instr.imm) {
        (Opcode::Inv, Imm::Tool(t)) => {
            host.invoke_tool_keyed(agent, t, &arg(args, 0)?.to_json(), cancel, idempotency_key)?
        }
        (Opcode::Exec, _) => {
            let js: Vec<Json> = args.iter().map(Val::to_json).collect();
            host.exec(agent, &js, cancel)?
        }
        _ => return Err(OpError::new("internal.tool", "bad tool op")),
    };
    Ok(Val::from_json(r))
}

impl OpError {
    pub fn with_payload(mut self, payload: Json) -> OpError {
        self.payload = payload;
        self
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    #[test]
    fn loose_case_matching_for_model_text() {
        assert!(case_matches("billing", "Billing."));
        assert!(case_matches("billing", "  **billing**\n"));
        assert!(case_matches("bug", "bug: crash on save"));
        assert!(case_matches("short", "\"Short\""));
        assert!(!case_matches("bug", "debugging"));
        assert!(!case_matches("bug", "bugfix"));
        assert!(!case_matches("billing", "other"));
        assert!(case_matches("", "  "));
    }
    use super::pure::{index, member};
    use super::*;

    #[test]
    fn templates_fill_numbered_holes_only() {
        let args = [Val::str("x"), Val::Num(2.0)];
        assert_eq!(
            fill_template("a {0} b {1} {2} {x} {", &args),
            "a x b 2 {2} {x} {"
        );
        assert_eq!(fill_template("{{\"k\": {0}}}", &args), "{\"k\": x}");
        assert_eq!(fill_template("}} {{0}} {1}", &args), "} {0} 2");
    }

    #[test]
    fn index_and_member() {
        let j = Val::from_json(json!({"a": [1, 2], "b": "t"}));
        assert_eq!(member(&j, "b").unwrap(), Val::str("t"));
        assert_eq!(member(&j, "zz").unwrap(), Val::Null);
        let a = member(&j, "a").unwrap();
        assert_eq!(index(&a, &Val::Num(1.0)).unwrap(), Val::Num(2.0));
        assert_eq!(
            index(&a, &Val::Num(5.0)).unwrap_err().code,
            "index.out_of_range"
        );
        assert_eq!(
            member(&Val::Num(1.0), "a").unwrap_err().code,
            "type.not_object"
        );
    }
}
