//! Model-driven tool calls. An LLM op that offers its model tools
//! (`tools:` on the op, or the agent's `tools:` member) runs its whole
//! exchange on a thread of the agent lane:
//!
//! 1. ask the model (one *turn*);
//! 2. when it asks for tools, run every call of that turn in parallel, each
//!    through the same path as a tool op of the program: the budget check,
//!    the run journal (intent, then result; replayed on resume), the host
//!    (access control, argument schema, per-tool concurrency) and
//!    telemetry;
//! 3. send the results back and repeat, until the model answers without
//!    calling tools or the op's step bound (`max_steps`, default 8) is
//!    reached (`llm.max_steps`, catchable).
//!
//! A call the model gets wrong (a tool it was not offered, arguments that
//! are not JSON or do not match the schema) does not run: the model is told
//! why and may correct itself. A tool that fails is reported to the model
//! the same way. What stops the exchange: the run's budget, the loop
//! watchdog (the same call with the same arguments repeated up to its
//! limit), a side effect in doubt on resume, cancellation.
//!
//! Each model turn is journaled under `<op key>#turn<N>` and each tool call
//! under `<op key>#turn<N>.<i>`, so a resumed run replays completed turns
//! and calls instead of repeating them; the op's own entry records its
//! final value.

use super::gate::{self, EffectId};
use super::io::{Call, Job, Lane};
use super::Run;
use crate::exec::{self, Class, OpError};
use crate::frame::Frame;
use crate::journal::Record;
use crate::llm::{Attempt, AttemptLog, LlmRequest, LlmResponse, ToolCall, ToolSpec, Turn, Usage};
use crate::telemetry::{AttemptRecord, LlmInfo, OpEvent, Status, ToolCallRecord, Track};
use crate::value::Val;
use ais_ir::bytecode::Instr;
use serde_json::Value as Json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Tool calls of one turn started at once, at most (the rest wait for a
/// free slot): a model asking for hundreds of calls does not get hundreds
/// of threads.
const MAX_PARALLEL_CALLS: usize = 16;

/// The largest tool result text sent back to the model; longer results are
/// cut with a note (the program's own value-size limit still applies).
const MAX_RESULT_CHARS: usize = 64 * 1024;

/// What an exchange has spent and seen so far, for the op's telemetry.
#[derive(Default)]
pub(super) struct Exchange {
    attempts: Vec<AttemptRecord>,
    pub(super) tool_calls: Vec<ToolCallRecord>,
    usage: Usage,
    pub(super) model: String,
    pub(super) simulated: bool,
    backend: String,
    prompt: Vec<crate::telemetry::MessageRecord>,
    reply: Option<String>,
    finish_reason: Option<String>,
    cost_micro_usd: u64,
    /// A `solve` op's refused or flagged plans (`inner_plan`).
    pub(super) plan_checks: Vec<crate::telemetry::PlanCheck>,
}

impl Exchange {
    pub(super) fn new(simulated: bool) -> Exchange {
        Exchange {
            simulated,
            ..Exchange::default()
        }
    }

    pub(super) fn info(self) -> Box<LlmInfo> {
        Box::new(LlmInfo {
            model: self.model,
            input_tokens: self.usage.prompt_tokens,
            output_tokens: self.usage.completion_tokens,
            cache_read_tokens: self.usage.cache_read_tokens,
            cache_write_tokens: self.usage.cache_write_tokens,
            simulated: self.simulated,
            attempts: self.attempts,
            tool_calls: self.tool_calls,
            backend: self.backend,
            prompt: self.prompt,
            reply: self.reply,
            finish_reason: self.finish_reason,
            cost_micro_usd: self.cost_micro_usd,
            plan_checks: self.plan_checks,
        })
    }
}

/// One tool call's answer to the model.
struct Answer {
    content: String,
    is_error: bool,
    record: ToolCallRecord,
}

/// Why an exchange ends before the model's answer.
pub(super) enum Stop {
    /// The op fails with this error (catchable).
    Fail(OpError),
    /// The run was stopped (budget, watchdog) or cancelled: the op is
    /// already settled.
    Halted,
}

/// The place of one exchange in the run: its op and journal key.
pub(super) struct Site<'a, 'r> {
    pub(super) frame: &'a Frame<'r>,
    pub(super) op: u32,
    pub(super) instr: &'a Instr,
    pub(super) agent: &'r str,
    pub(super) jkey: Option<&'a EffectId>,
    /// What the exchange has read so far (`crate::ifc`): its inputs, the
    /// model and the sources of the replies of the turns before; a turn's
    /// calls are judged with it, then the sources of the replies they
    /// return join it.
    pub(super) read: AtomicU64,
}

impl<'r> Run<'r> {
    /// The agent lane's thread: runs exchanges until the lane closes.
    pub(super) fn agent_loop(&self, lane: &Lane<'r>, idx: u32) -> Vec<OpEvent> {
        let mut events = Vec::new();
        while let Some(job) = lane.pop() {
            let plans = job
                .frame
                .code
                .ops
                .get(job.op as usize)
                .is_some_and(exec::plans);
            let ev = if plans {
                self.run_solve(job, idx)
            } else {
                self.run_exchange(job, idx)
            };
            self.call_finished(lane);
            if let Some(e) = ev {
                self.observe_op(&e);
                events.push(e);
            }
        }
        events
    }

    fn run_exchange(&self, job: Job<'r>, idx: u32) -> Option<OpEvent> {
        let (mut call, args, jkey) = job.into_call(Track::Llm(idx), self.now());
        let op = call.op;
        let instr = call.frame.code.ops.get(op as usize)?;
        // Its tokens are counted turn by turn, as they are spent.
        call.usage_accounted = true;
        if let Some(ev) = self.unwanted(&call) {
            return ev;
        }
        let agent = self.agent_name(call.frame.agent);
        let mut ex = Exchange {
            simulated: self.backend.is_simulated(),
            ..Exchange::default()
        };
        let site = Site {
            frame: &call.frame,
            op,
            instr,
            agent,
            jkey: jkey.as_ref(),
            read: AtomicU64::new(call.frame.label(instr.result)),
        };
        let result = match exec::llm_request(agent, instr, &args) {
            Ok(req) => {
                ex.model = req.model.clone().unwrap_or_default();
                self.exchange(&site, req, &mut ex)
            }
            Err(e) => Err(Stop::Fail(e)),
        };
        call.jkey = jkey.clone();
        // The answer carries what the exchange read: its result's label
        // grows by the replies' sources before it is journaled or used.
        let read = site.read.load(Ordering::Acquire);
        if !self.labels.off() {
            for i in 0..instr.n_results {
                call.frame.add_label(instr.result.saturating_add(i), read);
            }
            self.labels.trace(|| self.site(&call.frame, op), read);
        }
        match result {
            Ok(v) => self.settle(call, Ok(v), Some(ex.info())),
            Err(Stop::Fail(e)) => self.settle(call, Err(e), Some(ex.info())),
            Err(Stop::Halted) => self.halted_event(&call, ex),
        }
    }

    /// The event of an exchange that the run's end, a budget or the
    /// watchdog stopped (the op is already settled by what stopped it).
    pub(super) fn halted_event(&self, call: &Call<'r>, ex: Exchange) -> Option<OpEvent> {
        let status = if self.halted() || self.pausing() || call.frame.is_cancelled() {
            Status::Cancelled
        } else {
            Status::Failed
        };
        let end = self.now();
        self.record
            .then(|| call.event(end, status, Some(ex.info())))
            .flatten()
    }

    /// Turns until the model answers without calling tools.
    fn exchange(
        &self,
        site: &Site<'_, 'r>,
        mut req: LlmRequest,
        ex: &mut Exchange,
    ) -> Result<Val, Stop> {
        let max_steps = exec::max_steps(site.instr).max(1);
        let repeats: Mutex<HashMap<(String, String), u32>> = Mutex::new(HashMap::new());
        for turn in 1..=max_steps {
            if turn > 1 {
                // A pausing run keeps the turns it paid for, asks no more.
                if self.halted() || self.pausing() || site.frame.is_cancelled() {
                    return Err(Stop::Halted);
                }
                // A later turn is another LLM call: same budget check.
                if self.over_budget(site.frame, site.op, site.instr, Class::Llm) {
                    return Err(Stop::Halted);
                }
            }
            req.on_text = self.text_sink(site.frame, site.op, Some(turn));
            let resp = self.model_turn(site, &req, turn, ex)?;
            if resp.tool_calls.is_empty() {
                return exec::llm_value(&req, &resp).map_err(Stop::Fail);
            }
            if turn == max_steps {
                let names: Vec<&str> = resp.tool_calls.iter().map(|c| c.name.as_str()).collect();
                let e = OpError::new(
                    "llm.max_steps",
                    format!(
                        "the model was still calling tools ({}) after {max_steps} turns; raise `max_steps:` or narrow the task",
                        names.join(", ")
                    ),
                );
                return Err(Stop::Fail(e.with_payload(serde_json::json!({
                    "max_steps": max_steps,
                    "pending_calls": names,
                }))));
            }
            let answers = self.tool_turn(site, &req.tools, turn, &resp.tool_calls, &repeats)?;
            req.turns.push(Turn::Assistant {
                text: resp.text.clone(),
                calls: resp.tool_calls.clone(),
            });
            for (c, a) in resp.tool_calls.iter().zip(answers) {
                req.turns.push(Turn::ToolResult {
                    call_id: c.id.clone(),
                    name: c.name.clone(),
                    content: a.content,
                    is_error: a.is_error,
                });
                ex.tool_calls.push(a.record);
            }
        }
        // Not reached: the last turn either answers or fails above.
        Err(Stop::Fail(OpError::new(
            "internal.tool_loop",
            "the tool-calling exchange ended without an answer",
        )))
    }

    /// One model turn: replayed from the journal, or asked (and journaled
    /// with the tokens it spent).
    pub(super) fn model_turn(
        &self,
        site: &Site<'_, 'r>,
        req: &LlmRequest,
        turn: u32,
        ex: &mut Exchange,
    ) -> Result<LlmResponse, Stop> {
        let id = site
            .jkey
            .map(|j| EffectId::new(format!("{}#turn{turn}", j.key), j.hash.clone()));
        if let Some(id) = &id {
            if let Some(record) = self.gate_replay(id, None).map_err(Stop::Fail)? {
                let resp = gate::response_of(id, record).map_err(Stop::Fail)?;
                ex.model.clone_from(&resp.model);
                ex.simulated |= resp.simulated;
                ex.prompt = crate::telemetry::prompt_messages(req, self.text);
                ex.reply = self.text.keep(&resp.text);
                ex.finish_reason = Some(resp.finish_reason.clone());
                return Ok(resp);
            }
        }
        let log = AttemptLog::new();
        let result = self.backend.complete_observed(req, &self.cancel, &log);
        let attempts = log.attempts();
        let usage = crate::llm::call_usage(result.as_ref().ok(), &attempts);
        if let Ok(r) = &result {
            ex.model.clone_from(&r.model);
            ex.simulated |= r.simulated;
        }
        self.account_llm(site.frame.agent, &ex.model, usage);
        ex.cost_micro_usd += self.gate.budget.cost_of(&ex.model, &usage);
        ex.backend = self.backend.name().to_string();
        ex.prompt = crate::telemetry::prompt_messages(req, self.text);
        ex.finish_reason = result
            .as_ref()
            .ok()
            .map(|r| r.finish_reason.clone())
            .or_else(|| attempts.last().and_then(|a| a.finish_reason.clone()));
        ex.reply = result.as_ref().ok().and_then(|r| self.text.keep(&r.text));
        ex.usage = ex.usage.plus(&usage);
        ex.attempts
            .extend(attempts.iter().map(|a: &Attempt| AttemptRecord {
                turn: Some(turn),
                ..AttemptRecord::from_attempt(a)
            }));
        let resp = result.map_err(|e| Stop::Fail(OpError::from(e)))?;
        if let Some(id) = &id {
            let record = Record::ModelTurn(gate::turn_of(&resp));
            self.gate_record(
                id,
                site.instr.opcode.mnemonic(),
                &record,
                usage.total(),
                None,
            )
            .map_err(Stop::Fail)?;
        }
        Ok(resp)
    }

    /// Runs the calls of one turn, in parallel (bounded), and returns their
    /// answers in the model's order.
    fn tool_turn(
        &self,
        site: &Site<'_, 'r>,
        offered: &[ToolSpec],
        turn: u32,
        calls: &[ToolCall],
        repeats: &Mutex<HashMap<(String, String), u32>>,
    ) -> Result<Vec<Answer>, Stop> {
        self.watch_repeats(site, calls, repeats)?;
        // The calls of one turn are judged on what was read before it:
        // the model chose them all before any of their replies.
        let before = site.read.load(Ordering::Acquire);
        let mut answers = Vec::with_capacity(calls.len());
        for (chunk_no, chunk) in calls.chunks(MAX_PARALLEL_CALLS).enumerate() {
            let base = chunk_no * MAX_PARALLEL_CALLS;
            let results: Vec<Result<Answer, Stop>> = if chunk.len() == 1 {
                vec![self.tool_call(site, offered, turn, base, &chunk[0], before)]
            } else {
                std::thread::scope(|s| {
                    let handles: Vec<_> = chunk
                        .iter()
                        .enumerate()
                        .map(|(i, c)| {
                            std::thread::Builder::new()
                                .name("ais-tool-call".into())
                                .stack_size(256 * 1024)
                                .spawn_scoped(s, move || {
                                    self.tool_call(site, offered, turn, base + i, c, before)
                                })
                        })
                        .collect();
                    handles
                        .into_iter()
                        .zip(chunk)
                        .enumerate()
                        .map(|(i, (h, c))| match h {
                            Ok(h) => h.join().unwrap_or_else(|_| {
                                Err(Stop::Fail(OpError::new(
                                    "internal.tool_call",
                                    "a tool call's thread panicked",
                                )))
                            }),
                            // No thread to spare: run it here.
                            Err(_) => self.tool_call(site, offered, turn, base + i, c, before),
                        })
                        .collect()
                })
            };
            for r in results {
                answers.push(r?);
            }
        }
        Ok(answers)
    }

    /// The loop watchdog within an exchange: a call (tool and arguments)
    /// the model asks for in as many turns as the watchdog's limit makes no
    /// progress, and stops the run. Duplicates within one turn count once:
    /// they are parallel, not repeated.
    fn watch_repeats(
        &self,
        site: &Site<'_, 'r>,
        calls: &[ToolCall],
        repeats: &Mutex<HashMap<(String, String), u32>>,
    ) -> Result<(), Stop> {
        let Some(w) = &self.gate.watchdog else {
            return Ok(());
        };
        let mut this_turn: Vec<(String, String)> = calls
            .iter()
            .map(|c| {
                let args = parse_arguments(&c.arguments)
                    .map_or_else(|_| c.arguments.clone(), |a| a.to_string());
                (c.name.clone(), args)
            })
            .collect();
        this_turn.sort();
        this_turn.dedup();
        let mut g = crate::sync::lock(repeats);
        for key in this_turn {
            let n = g.entry(key.clone()).or_insert(0);
            *n += 1;
            if *n >= w.limit() {
                let n = *n;
                drop(g);
                let e = OpError::new(
                    "WATCHDOG_LOOP",
                    format!(
                        "the model called `{}` in {n} turns with the same arguments: the exchange makes no progress",
                        key.0
                    ),
                );
                self.stop(
                    site.frame,
                    site.op,
                    site.instr,
                    e.with_payload(serde_json::json!({
                        "tool": key.0,
                        "repeats": n,
                        "limit": w.limit(),
                    })),
                );
                return Err(Stop::Halted);
            }
        }
        Ok(())
    }

    /// One tool call the model asked for.
    fn tool_call(
        &self,
        site: &Site<'_, 'r>,
        offered: &[ToolSpec],
        turn: u32,
        index: usize,
        call: &ToolCall,
        label: u64,
    ) -> Result<Answer, Stop> {
        let start_ns = self.now();
        let record = |status: &'static str, code: Option<&str>, replayed: bool| ToolCallRecord {
            turn,
            tool: call.name.clone(),
            status,
            code: code.map(str::to_string),
            replayed,
            arguments: self.text.keep(&call.arguments),
            start_ns,
            end_ns: self.now(),
        };
        let refuse = |code: &str, message: String| Answer {
            content: format!("error [{code}]: {message}"),
            is_error: true,
            record: record("refused", Some(code), false),
        };
        let Some(spec) = offered.iter().find(|t| t.name == call.name) else {
            let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
            return Ok(refuse(
                "tool.not_offered",
                format!(
                    "no tool named `{}` is offered here; the tools are: {}",
                    call.name,
                    names.join(", ")
                ),
            ));
        };
        let args = match parse_arguments(&call.arguments) {
            Ok(a) => a,
            Err(m) => return Ok(refuse("tool.invalid_arguments", m)),
        };
        if let Err(e) = crate::llm::jsonschema::validate(&spec.parameters, &args) {
            return Ok(refuse(
                "tool.invalid_arguments",
                format!("the arguments do not match the tool's schema: {e}"),
            ));
        }
        // A call without arguments (a trusted tool listing the user's own
        // payees) returns the same whatever the exchange has read.
        let unsteered = args.is_null() || args.as_object().is_some_and(|m| m.is_empty());
        if let Err(e) = self
            .labels
            .check_tool_call(&call.name, &args, label)
            .or_else(|e| self.approvals.review(self.agent_name(site.frame.agent), e))
            .or_else(|e| {
                let id = site.jkey.map(|j| {
                    EffectId::new(
                        format!("{}#turn{turn}.{index}#approval", j.key),
                        crate::journal::input_hash(&[
                            Val::str(&call.name),
                            Val::from_json(args.clone()),
                        ]),
                    )
                });
                self.ask_at(id, e)
            })
        {
            // Waiting for a person: the run pauses (the exchange's turns
            // are journaled; a resumed run replays them to this call).
            if e.code == crate::exec::PAUSED {
                return Err(Stop::Fail(e));
            }
            return Ok(refuse(&e.code, e.message));
        }
        // What it writes into the workspace keeps the exchange's label
        // (`crate::catalogue::labels`), kept before the call.
        if let Some(names) = self.labels.note_tool_write(&call.name, label) {
            if let Err(e) = self.host.store_labels("workspace", &names) {
                return Ok(refuse(&e.code, e.message));
            }
        }
        if self.over_budget(site.frame, site.op, site.instr, Class::Tool) {
            return Err(Stop::Halted);
        }
        let id = site.jkey.map(|j| {
            EffectId::new(
                format!("{}#turn{turn}.{index}", j.key),
                crate::journal::input_hash(&[Val::str(&call.name), Val::from_json(args.clone())]),
            )
        });
        let gated = self.gated_call(
            id.as_ref(),
            "inv",
            Some(&call.name),
            Some(site.frame),
            |record| {
                let id = id.as_ref().map_or("?", |i| i.key.as_str());
                gate::single_value(id, record)
            },
            |key| {
                // The exchange's label goes with what a tool stores, and
                // what a tool reads back joins the exchange's result
                // (`crate::host::flow`).
                let writing = if self.labels.off() {
                    Vec::new()
                } else {
                    self.labels.names(label)
                };
                let (r, read) = crate::host::flow::with(writing, || {
                    self.host.invoke_tool_keyed(
                        site.agent,
                        &call.name,
                        &args,
                        &self.cancel,
                        key.as_deref(),
                    )
                });
                if !read.is_empty() && !self.labels.off() {
                    // What the tool read back (a stored fact, a message)
                    // is read by the model too: later turns are judged
                    // with it.
                    let stored = self.labels.of_names(&read);
                    site.read.fetch_or(stored, Ordering::AcqRel);
                    site.frame.add_label(site.instr.result, stored);
                }
                r.map_err(OpError::from).and_then(|v| {
                    let v = Val::from_json(v);
                    super::limits::check_value(&v, self.max_value_bytes).map(|()| v)
                })
            },
            |v| (Record::values(std::slice::from_ref(v)), 0),
        );
        let gated = gated.map_err(Stop::Fail)?;
        // The model reads the reply (or the tool's error, which may carry
        // the tool's text too): its source joins what the exchange read.
        if !self.labels.off() {
            site.read
                .fetch_or(self.labels.reply_label(&call.name), Ordering::AcqRel);
        }
        match gated {
            (Ok(v), replayed) => {
                // Its arguments came from what the exchange had read,
                // unless each of them is a value of trusted data.
                let vouches = unsteered
                    || self.labels.is_trusted(label)
                    || self.labels.keyed_by_trusted(&args);
                self.labels
                    .note_call_result(&call.name, Some(&args), vouches, || v.to_json());
                self.labels.note_tool_ran(&call.name);
                Ok(Answer {
                    content: result_text(&v.to_json()),
                    is_error: false,
                    record: record("ok", None, replayed),
                })
            }
            (Err(_), _) if self.halted() || site.frame.is_cancelled() => Err(Stop::Halted),
            (Err(e), _) => {
                // A denial is a refusal (nothing ran); any other failure
                // is the tool's own.
                let status = if e.code == "tool.denied" {
                    "refused"
                } else {
                    // It ran, and may have written before it failed.
                    self.labels.note_tool_ran(&call.name);
                    "error"
                };
                Ok(Answer {
                    content: format!("error [{}]: {}", e.code, e.message),
                    is_error: true,
                    record: record(status, Some(&e.code), false),
                })
            }
        }
    }
}

/// The model's arguments as a JSON object (empty text: no arguments).
fn parse_arguments(text: &str) -> Result<Json, String> {
    if text.trim().is_empty() {
        return Ok(Json::Object(serde_json::Map::new()));
    }
    match serde_json::from_str::<Json>(text) {
        Ok(v @ Json::Object(_)) => Ok(v),
        Ok(other) => Err(format!(
            "the arguments must be a JSON object, not {}",
            match other {
                Json::Array(_) => "an array",
                Json::String(_) => "a string",
                Json::Number(_) => "a number",
                Json::Bool(_) => "a boolean",
                _ => "null",
            }
        )),
        Err(e) => Err(format!("the arguments are not valid JSON: {e}")),
    }
}

/// A tool's value as the model reads it: text as is, other values as
/// JSON; cut at [`MAX_RESULT_CHARS`] with a note.
fn result_text(v: &Json) -> String {
    let text = match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    };
    if text.chars().count() <= MAX_RESULT_CHARS {
        return text;
    }
    let cut: String = text.chars().take(MAX_RESULT_CHARS).collect();
    format!(
        "{cut}\n[result cut at {MAX_RESULT_CHARS} characters of {}]",
        text.chars().count()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_be_an_object() {
        assert_eq!(parse_arguments("").ok(), Some(serde_json::json!({})));
        assert_eq!(
            parse_arguments(r#"{"q": 1}"#).ok(),
            Some(serde_json::json!({"q": 1}))
        );
        assert!(parse_arguments("[1]")
            .err()
            .is_some_and(|m| m.contains("an array")));
        assert!(parse_arguments("{q: 1")
            .err()
            .is_some_and(|m| m.contains("not valid JSON")));
    }

    #[test]
    fn long_results_are_cut_with_a_note() {
        let long = Json::String("x".repeat(MAX_RESULT_CHARS + 5));
        let t = result_text(&long);
        assert!(t.ends_with(&format!("of {}]", MAX_RESULT_CHARS + 5)));
        assert_eq!(result_text(&serde_json::json!({"a": 1})), r#"{"a":1}"#);
    }
}
