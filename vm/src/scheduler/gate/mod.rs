//! The effect gate: the one path every effect of a run takes, whatever
//! started it (a program op, a tool the model asked for, a model turn, a
//! planner reply, an early call of a streaming plan, a printed line, a
//! message, a memory write, a `pause`):
//!
//! ```text
//!   replay ──► admission ──► intent ──► execute ──► record / failed
//!   (journal)  (budget,      (side       (host,      (typed record,
//!              watchdog,      effects     backend)    durable before
//!              flow policy)   only)                   consumers fire)
//! ```
//!
//! - *replay* ([`Run::gate_replay`]): an outcome an earlier attempt of the
//!   run recorded is delivered instead of executing; a side effect that
//!   was started and never recorded is *in doubt*: it is repeated only
//!   when its tool is declared idempotent or a person resolved it
//!   (`aisc resume --in-doubt retry|skip|fail`), else the op fails with
//!   `journal.in_doubt`. This is the only place that decides that.
//! - *admission* (`admission.rs`): the run's budget, the loop watchdog.
//!   (The information-flow checks that need the op's input labels run in
//!   the worker just before, see `worker.rs`.)
//! - *intent*: a side-effecting call writes an `intent` entry first, so a
//!   kill during the call leaves it in doubt rather than forgotten.
//! - *record*: the outcome as a typed, versioned [`Record`]
//!   (`crate::journal::record`); a failed side effect is recorded as
//!   `failed` (an error is an answer: a resume asks again).
//! - printed lines are journaled *before* they are shown (`outbox.rs`).
//!
//! Program ops run the steps apart (admission in the worker, the call on
//! an I/O thread, the record when it settles: `io.rs`); calls made on the
//! thread that asks for them go through [`Run::gated_call`].

pub(super) mod admission;
pub(super) mod outbox;
pub(super) mod pause;
pub(crate) mod watchdog;

use super::Run;
use crate::exec::OpError;
use crate::frame::Frame;
use crate::journal::{JournalError, Record, Replay, Resolution};
use crate::value::Val;
use sha2::{Digest, Sha256};
use std::sync::atomic::AtomicU64;

/// What the gate keeps for one run (a part of `Run`).
pub(in crate::scheduler) struct Gate<'r> {
    pub(in crate::scheduler) journal: Option<&'r crate::journal::Journal>,
    pub(in crate::scheduler) budget: &'r crate::journal::Budget,
    /// LLM calls, tokens and micro-dollars used by the run (with earlier
    /// attempts).
    pub(in crate::scheduler) used: [AtomicU64; 3],
    pub(in crate::scheduler) watchdog: Option<watchdog::Watchdog>,
    /// Per agent: LLM calls and tokens of this attempt.
    pub(in crate::scheduler) agent_used: Vec<[AtomicU64; 2]>,
    /// Printed lines, journaled before shown.
    pub(in crate::scheduler) outbox: outbox::Outbox,
    /// Set when a `pause` stops the run.
    pub(in crate::scheduler) pausing: pause::Pausing,
}

impl<'r> Gate<'r> {
    pub(in crate::scheduler) fn new(
        program: &ais_ir::bytecode::Program,
        options: &'r super::RunOptions,
    ) -> Gate<'r> {
        let (c, t) = options.journal.as_ref().map_or((0, 0), |j| j.prior_usage());
        Gate {
            journal: options.journal.as_deref(),
            budget: &options.budget,
            used: [AtomicU64::new(c), AtomicU64::new(t), AtomicU64::new(0)],
            watchdog: options
                .watchdog
                .filter(|&n| n > 0)
                .map(watchdog::Watchdog::new),
            agent_used: program
                .agents
                .iter()
                .map(|_| [AtomicU64::new(0), AtomicU64::new(0)])
                .collect(),
            outbox: outbox::Outbox::new(options.stdout_marks.clone()),
            pausing: pause::Pausing::default(),
        }
    }
}

/// An effect's identity in the journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EffectId {
    /// The op's dynamic identity ([`op_key`], with a suffix
    /// for a turn or call within it).
    pub key: String,
    /// A hash of its inputs: an entry with other inputs is not replayed.
    pub hash: String,
}

impl EffectId {
    pub(crate) fn new(key: String, hash: String) -> EffectId {
        EffectId { key, hash }
    }
}

/// The dynamic identity of op `op` in `frame`: the path of (flow, region,
/// owner op, loop index) from the entry frame down. It is the same in every
/// execution of the same program with the same inputs, whatever the
/// scheduling order, because frames are started by ops, not by time.
pub(crate) fn op_key(frame: &Frame<'_>, op: u32) -> String {
    let mut h = Sha256::new();
    h.update(op.to_le_bytes());
    let mut f = frame;
    loop {
        h.update(f.flow.to_le_bytes());
        h.update(f.region.to_le_bytes());
        let Some(o) = &f.owner else { break };
        h.update(o.op.to_le_bytes());
        let (tag, idx) = o.role.tag_and_index();
        h.update([tag]);
        h.update(idx.to_le_bytes());
        f = &o.frame;
    }
    h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A journal failure as an op's error.
pub(in crate::scheduler) fn journal_error(e: JournalError) -> OpError {
    OpError::new(e.code, e.message)
}

/// The error of a side effect in doubt that nothing allows repeating.
fn in_doubt(tool: &str, key: &str) -> OpError {
    OpError::new(
        "journal.in_doubt",
        format!(
            "tool `{tool}` was started by an earlier attempt of this run and never recorded as completed; it is not declared idempotent, so it is not repeated (decide with `aisc resume RUN --in-doubt retry|skip|fail --op {key}`)"
        ),
    )
    .with_payload(serde_json::json!({"tool": tool, "idempotency_key": key}))
}

impl<'r> Run<'r> {
    /// The replay step: `Ok(Some(record))` to deliver instead of
    /// executing, `Ok(None)` to execute, `Err` when the op must fail (in
    /// doubt and not repeatable, resolved as failed, unreadable record).
    /// `tool` names a side-effecting call (for the in-doubt decision).
    pub(in crate::scheduler) fn gate_replay(
        &self,
        id: &EffectId,
        tool: Option<&str>,
    ) -> Result<Option<Record>, OpError> {
        let Some(j) = self.gate.journal else {
            return Ok(None);
        };
        match j.lookup(&id.key, &id.hash).map_err(journal_error)? {
            Replay::Miss | Replay::Resolved(Resolution::Retry) => Ok(None),
            Replay::Done(r) => Ok(Some(r)),
            Replay::Resolved(Resolution::Skip) => Ok(Some(Record::values(&[Val::Null]))),
            Replay::Resolved(Resolution::Fail) => Err(OpError::new(
                "journal.in_doubt_failed",
                format!(
                    "op `{}` was in doubt after an interruption and a person resolved it as failed",
                    id.key
                ),
            )
            .with_payload(serde_json::json!({"tool": tool, "idempotency_key": id.key}))),
            Replay::InDoubt => match tool {
                Some(t) if j.is_idempotent(t) => Ok(None),
                t => Err(in_doubt(t.unwrap_or("?"), &id.key)),
            },
        }
    }

    /// Writes the `intent` entry of a side-effecting call.
    pub(in crate::scheduler) fn gate_intent(&self, id: &EffectId, op: &str) -> Result<(), OpError> {
        match self.gate.journal {
            Some(j) => j.intent(&id.key, op, &id.hash).map_err(journal_error),
            None => Ok(()),
        }
    }

    /// Durably records an effect's outcome before its consumers fire.
    pub(in crate::scheduler) fn gate_record(
        &self,
        id: &EffectId,
        op: &str,
        record: &Record,
        tokens: u64,
        labels: Option<&[String]>,
    ) -> Result<(), OpError> {
        match self.gate.journal {
            Some(j) => j
                .record_entry(&id.key, op, &id.hash, record, tokens, labels)
                .map_err(journal_error),
            None => Ok(()),
        }
    }

    /// Records that a side-effecting call failed (it completed: a resume
    /// asks again instead of reporting it in doubt).
    pub(in crate::scheduler) fn gate_failed(&self, id: &EffectId, op: &str) -> Result<(), OpError> {
        match self.gate.journal {
            Some(j) => j.failed(&id.key, op, &id.hash).map_err(journal_error),
            None => Ok(()),
        }
    }

    /// The idempotency key a tool that deduplicates gets for this call:
    /// derived from the run id and the op's identity, the same in every
    /// attempt.
    pub(in crate::scheduler) fn idempotency_key(&self, id: &EffectId) -> Option<String> {
        self.gate.journal.map(|j| j.idempotency_key(&id.key))
    }

    /// A call made on this thread, through the whole gate: replay (then
    /// `decode` turns the record into the value), else intent (for a
    /// side effect: `tool` is `Some`), the call (given the idempotency
    /// key), and the record (`encode`: the record and its tokens).
    ///
    /// The outer `Err` is the gate's (in doubt, unreadable, a journal
    /// write failed): the caller stops. The inner result is the call's,
    /// with whether it was replayed. A call that fails because the run or
    /// its frame was cancelled is left in doubt (nothing is recorded).
    #[allow(clippy::too_many_arguments)]
    pub(in crate::scheduler) fn gated_call<T>(
        &self,
        id: Option<&EffectId>,
        op: &str,
        tool: Option<&str>,
        frame: Option<&Frame<'r>>,
        decode: impl FnOnce(Record) -> Result<T, OpError>,
        call: impl FnOnce(Option<String>) -> Result<T, OpError>,
        encode: impl FnOnce(&T) -> (Record, u64),
    ) -> Result<(Result<T, OpError>, bool), OpError> {
        let Some(id) = id.filter(|_| self.gate.journal.is_some()) else {
            return Ok((call(None), false));
        };
        if let Some(r) = self.gate_replay(id, tool)? {
            return decode(r).map(|v| (Ok(v), true));
        }
        if tool.is_some() {
            self.gate_intent(id, op)?;
        }
        match call(self.idempotency_key(id)) {
            Ok(v) => {
                let (record, tokens) = encode(&v);
                self.gate_record(id, op, &record, tokens, None)?;
                Ok((Ok(v), false))
            }
            Err(e) if self.halted() || frame.is_some_and(|f| f.is_cancelled()) => {
                Ok((Err(e), false))
            }
            Err(e) => {
                if tool.is_some() {
                    self.gate_failed(id, op)?;
                }
                Ok((Err(e), false))
            }
        }
    }
}

/// The results a program op's record holds (a printed line's op has
/// none: its ordering token is padded on).
pub(in crate::scheduler) fn record_results(
    id: &EffectId,
    record: Record,
) -> Result<Vec<Val>, OpError> {
    match record {
        Record::Printed { .. } => Ok(Vec::new()),
        other => other.into_vals().map_err(|e| {
            OpError::new(
                crate::journal::record::UNREADABLE,
                format!("the journal entry of op `{}` cannot be read ({e})", id.key),
            )
        }),
    }
}

fn unreadable(id: &str, why: &str) -> OpError {
    OpError::new(
        crate::journal::record::UNREADABLE,
        format!("the journal entry of `{id}` cannot be read ({why})"),
    )
}

/// The one value of a tool call's record.
pub(super) fn single_value(id: &str, record: Record) -> Result<Val, OpError> {
    let vs = record.into_vals().map_err(|e| unreadable(id, &e))?;
    Ok(vs.into_iter().next().unwrap_or(Val::Null))
}

/// A model reply as the journal keeps it.
pub(super) fn turn_of(r: &crate::llm::LlmResponse) -> crate::journal::record::ModelTurn {
    use crate::journal::record::{ModelTurn, TurnCall};
    ModelTurn {
        text: r.text.clone(),
        json: r.json.clone(),
        calls: r
            .tool_calls
            .iter()
            .map(|c| TurnCall {
                id: c.id.clone(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            })
            .collect(),
        model: r.model.clone(),
        finish_reason: r.finish_reason.clone(),
        simulated: r.simulated,
        prompt_tokens: r.usage.prompt_tokens,
        completion_tokens: r.usage.completion_tokens,
    }
}

/// A journaled model turn as the reply it was (version 1 journals kept
/// the reply's fields in a value list).
pub(super) fn response_of(
    id: &EffectId,
    record: Record,
) -> Result<crate::llm::LlmResponse, OpError> {
    use crate::journal::record::ModelTurn;
    let t = match record {
        Record::ModelTurn(t) => t,
        Record::Values { .. } => {
            let vs = record.into_vals().map_err(|e| unreadable(&id.key, &e))?;
            ModelTurn::from_v1(&vs).map_err(|e| unreadable(&id.key, &e))?
        }
        other => {
            return Err(unreadable(
                &id.key,
                &format!("a {} record where a model turn was expected", other.kind()),
            ))
        }
    };
    Ok(crate::llm::LlmResponse {
        text: t.text,
        json: t.json,
        usage: crate::llm::Usage {
            prompt_tokens: t.prompt_tokens,
            completion_tokens: t.completion_tokens,
            ..crate::llm::Usage::default()
        },
        finish_reason: t.finish_reason,
        model: t.model,
        latency: std::time::Duration::ZERO,
        simulated: t.simulated,
        tool_calls: t
            .calls
            .into_iter()
            .map(|c| crate::llm::ToolCall {
                id: c.id,
                name: c.name,
                arguments: c.arguments,
            })
            .collect(),
    })
}
