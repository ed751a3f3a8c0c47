//! Admission, the gate's check before a program op runs: an effect op is
//! replayed from the journal, stopped by the run's budget or the loop
//! watchdog, or admitted to run (and recorded when it completes).

use super::{journal_error, record_results, EffectId, Run};
use crate::exec::{self, Class, OpError, Results};
use crate::frame::Frame;
use crate::value::Val;
use ais_ir::bytecode::{Imm, Instr};
use serde_json::Value as Json;
use std::sync::atomic::Ordering;

/// What [`Run::admit`] decided for an op.
pub(in crate::scheduler) enum Admission {
    /// Run it; `jkey` is its journal identity when it is journaled.
    Run { jkey: Option<EffectId> },
    /// An earlier attempt's outcome: delivered instead of running the op,
    /// with the label the attempt recorded for its results (0: none).
    Replayed(Result<Results, OpError>, u64),
    /// The budget or the watchdog stopped the run.
    Stopped,
}

impl<'r> Run<'r> {
    /// The one check before an op runs. Ops that are not effects are
    /// always admitted. An effect op is replayed when an earlier attempt
    /// of the run recorded it (a replay costs no budget), else it counts
    /// against the budget; either way it counts for the loop watchdog.
    /// The budget and the watchdog stop the run.
    pub(in crate::scheduler) fn admit(
        &self,
        frame: &Frame<'r>,
        op: u32,
        instr: &Instr,
        class: Class,
        args: &[Val],
    ) -> Admission {
        // A run stopping at a `pause` admits no new effect (`pause.rs`).
        if self.pausing() && instr.opcode.info().journaled {
            return Admission::Stopped;
        }
        let jkey = self.journal_key(frame, op, instr, args);
        let replayed = jkey.as_ref().and_then(|id| self.replay(id, instr, args));
        if replayed.is_none() && self.over_budget(frame, op, instr, class) {
            return Admission::Stopped;
        }
        // Replays count too: a loop that made no progress before the run
        // was resumed must still be stopped.
        if self.watchdog_tripped(frame, op, instr, class, args) {
            return Admission::Stopped;
        }
        match replayed {
            Some(results) => {
                let label = match (&jkey, self.gate.journal) {
                    (Some(id), Some(j)) if !self.labels.off() => j
                        .recorded_labels(&id.key)
                        .map_or(0, |names| self.labels.of_names(&names)),
                    _ => 0,
                };
                Admission::Replayed(results, label)
            }
            None => Admission::Run { jkey },
        }
    }

    /// The journal identity of an effect op (`None`: not journaled).
    pub(in crate::scheduler) fn journal_key(
        &self,
        frame: &Frame<'r>,
        op: u32,
        instr: &Instr,
        args: &[Val],
    ) -> Option<EffectId> {
        self.gate.journal?;
        // The op table says which ops the journal records.
        if !instr.opcode.info().journaled {
            return None;
        }
        Some(EffectId::new(
            super::op_key(frame, op),
            crate::journal::input_hash(args),
        ))
    }

    /// An earlier attempt's results for this op: `Some(Ok)` to deliver,
    /// `Some(Err)` when it must fail (in doubt, resolved as failed, an
    /// unreadable record), `None` to execute it.
    pub(in crate::scheduler) fn replay(
        &self,
        id: &EffectId,
        instr: &Instr,
        args: &[Val],
    ) -> Option<Result<Results, OpError>> {
        // A tool op (and `exec`) is a side effect: its in-doubt decision
        // names the tool.
        let tool = match (&instr.imm, exec::class(instr.opcode)) {
            (Imm::Tool(t), _) => Some(t.to_string()),
            (_, Class::Tool) => Some(args.first().map(Val::text).unwrap_or_default()),
            _ => None,
        };
        match self.gate_replay(id, tool.as_deref()) {
            Ok(None) => None,
            Ok(Some(record)) => Some(record_results(id, record).map(|vs| {
                let mut r: Results = vs.into_iter().collect();
                exec::pad_ord(instr, &mut r);
                r
            })),
            Err(e) => Some(Err(e)),
        }
    }

    /// Durably records an effect op's results before its consumers fire.
    /// `label` is the results' provenance, recorded by source name so a
    /// resumed run (another process, other bit numbers) restores it.
    pub(in crate::scheduler) fn journal_record(
        &self,
        jkey: Option<&EffectId>,
        instr: &Instr,
        res: &[Val],
        tokens: u64,
        label: u64,
    ) -> Result<(), OpError> {
        match jkey {
            Some(id) => {
                let names = self.label_names(label);
                let record = crate::journal::Record::values(res);
                self.gate_record(
                    id,
                    instr.opcode.mnemonic(),
                    &record,
                    tokens,
                    names.as_deref(),
                )
            }
            None => Ok(()),
        }
    }

    /// `label`'s source names, or `None` when labels are not tracked.
    pub(in crate::scheduler) fn label_names(&self, label: u64) -> Option<Vec<String>> {
        (!self.labels.off()).then(|| self.labels.names(label))
    }

    /// A run stopping at a `pause`: the journal records what it waits for
    /// (so `aisc resume RUN --input VALUE` can answer it) and marks the
    /// run paused. Other errors pass through.
    pub(in crate::scheduler) fn note_pause(&self, e: OpError, jkey: Option<&EffectId>) -> OpError {
        if e.code != crate::exec::PAUSED {
            return e;
        }
        let (Some(j), Some(id)) = (self.gate.journal, jkey) else {
            return e;
        };
        let message = e.payload["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match j.waiting(&id.key, &id.hash, &message) {
            Ok(()) => e,
            Err(w) => journal_error(w),
        }
    }

    /// The loop watchdog (see `watchdog.rs`).
    pub(in crate::scheduler) fn watchdog_tripped(
        &self,
        frame: &Frame<'r>,
        op: u32,
        instr: &Instr,
        class: Class,
        args: &[Val],
    ) -> bool {
        let Some(w) = &self.gate.watchdog else {
            return false;
        };
        if !matches!(class, Class::Llm | Class::Tool) {
            return false;
        }
        // Tools that read state others change answer the same inputs
        // differently (a worker loop claiming jobs, polling its inbox or
        // its next goal): repeating them is progress.
        if let ais_ir::bytecode::Imm::Tool(t) = &instr.imm {
            let stateful = t == "now"
                || ais_stdlib::HOST_TOOLS
                    .iter()
                    .any(|h| h.name == t && h.name != "bash");
            if stateful {
                return false;
            }
        }
        let Some(n) = w.observe(frame, op, &crate::journal::input_hash(args)) else {
            return false;
        };
        if n > w.limit() {
            // A concurrent iteration reached the limit first and reports
            // it; this one only must not run (reporting it too would race
            // that report for the run's outcome).
            return true;
        }
        let e = OpError::new(
            "WATCHDOG_LOOP",
            format!(
                "`{}` ran {n} times in a loop with the same inputs: the loop makes no progress",
                instr.opcode.mnemonic()
            ),
        );
        self.stop(
            frame,
            op,
            instr,
            e.with_payload(serde_json::json!({"repeats": n, "limit": n})),
        );
        true
    }

    /// Checks the run's budget before an effect op starts; when exceeded,
    /// stops the run (not catchable) with `budget.<what>` and `{limit, used}`.
    pub(in crate::scheduler) fn over_budget(
        &self,
        frame: &Frame<'r>,
        op: u32,
        instr: &Instr,
        class: Class,
    ) -> bool {
        let b = self.gate.budget;
        if b.is_empty() || !matches!(class, Class::Llm | Class::Tool | Class::Inline) {
            return false;
        }
        let mut hit: Option<(&str, Json, Json)> = None;
        if let Some(d) = b.deadline_ms {
            let el = self.start.elapsed().as_millis() as u64;
            if el > d {
                hit = Some(("deadline_ms", d.into(), el.into()));
            }
        }
        if hit.is_none() && class == Class::Llm {
            let tokens = self.gate.used[1].load(Ordering::SeqCst);
            let cost = self.gate.used[2].load(Ordering::SeqCst) as f64 / 1e6;
            if let Some(l) = b.tokens.filter(|&l| tokens >= l) {
                hit = Some(("tokens", l.into(), tokens.into()));
            } else if let Some(l) = b.cost_usd.filter(|&l| cost >= l) {
                hit = Some(("cost_usd", l.into(), cost.into()));
            } else if let Some(l) = b.llm_calls {
                let calls = self.gate.used[0].fetch_add(1, Ordering::SeqCst) + 1;
                if calls > l {
                    hit = Some(("llm_calls", l.into(), (calls - 1).into()));
                }
            } else {
                self.gate.used[0].fetch_add(1, Ordering::SeqCst);
            }
        }
        if hit.is_none() && class == Class::Llm {
            let name = self.agent_name(frame.agent);
            if let (Some(l), Some(u)) = (
                b.agent(name),
                self.gate.agent_used.get(frame.agent as usize),
            ) {
                let tokens = u[1].load(Ordering::SeqCst);
                if let Some(t) = l.tokens.filter(|&t| tokens >= t) {
                    hit = Some(("agent_tokens", t.into(), tokens.into()));
                } else if let Some(c) = l.llm_calls {
                    let calls = u[0].fetch_add(1, Ordering::SeqCst) + 1;
                    if calls > c {
                        hit = Some(("agent_llm_calls", c.into(), (calls - 1).into()));
                    }
                }
            }
        }
        let Some((what, limit, used)) = hit else {
            return false;
        };
        let e = OpError::new(
            format!("budget.{what}"),
            format!(
                // Whether it can be resumed depends on the journal: the
                // edge's hint says (`--memory :memory:` keeps none).
                "the run's {what} budget is exhausted (limit {limit}, used {used})"
            ),
        );
        self.stop(
            frame,
            op,
            instr,
            e.with_payload(serde_json::json!({
                "limit": limit,
                "used": used,
                "budget": what,
                "agent": self.agent_name(frame.agent),
            })),
        );
        true
    }
}
