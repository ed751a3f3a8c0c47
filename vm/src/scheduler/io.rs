//! The I/O executor: lanes of blocking calls (LLM, tools), each with a
//! fixed number of I/O threads (its concurrency limit) and a policy queue.

use super::gate::EffectId;
use super::policy::{Policy, PolicyQueue};
use super::{limits, Run, Sink};
use crate::exec::{self, OpError};
use crate::frame::Frame;
use crate::sync::lock;
use crate::telemetry::{AttemptRecord, LlmInfo, OpEvent, Status, Track};
use crate::value::Val;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// A blocking op waiting for (or running on) an I/O thread.
pub(crate) struct Job<'r> {
    pub frame: Arc<Frame<'r>>,
    pub op: u32,
    pub ready_ns: u64,
    /// Worker that dispatched it.
    pub worker: u32,
    pub args: SmallVec<[Val; 4]>,
    /// Journal identity ([`Run::admit`]), when journaled.
    pub jkey: Option<EffectId>,
}

struct State<'r> {
    queue: PolicyQueue<Job<'r>>,
    closed: bool,
    /// Threads waiting for a job.
    waiting: usize,
}

pub(crate) struct Lane<'r> {
    state: Mutex<State<'r>>,
    cv: Condvar,
    /// Jobs popped and not yet finished (for stall detection and progress).
    pub busy: AtomicUsize,
}

impl<'r> Lane<'r> {
    pub fn new(policy: Policy) -> Lane<'r> {
        Lane {
            state: Mutex::new(State {
                queue: PolicyQueue::new(policy),
                closed: false,
                waiting: 0,
            }),
            cv: Condvar::new(),
            busy: AtomicUsize::new(0),
        }
    }

    /// Queues a job without waking a thread; the caller calls
    /// [`Lane::wake`] later (workers batch the wake-ups of a burst of
    /// dispatches, so I/O threads do not preempt them one call at a time).
    pub fn push_quiet(&self, job: Job<'r>, prio: u64, agent: u32) {
        let mut g = lock(&self.state);
        if g.closed {
            return;
        }
        g.queue.push(job, prio, agent);
    }

    /// Wakes up to `n` waiting threads.
    pub fn wake(&self, n: usize) {
        let waiting = lock(&self.state).waiting;
        if n >= waiting {
            self.cv.notify_all();
        } else {
            for _ in 0..n {
                self.cv.notify_one();
            }
        }
    }

    /// Blocks until a job is available; `None` once the lane is closed.
    /// The caller must call [`Lane::finished`] after running the job.
    pub fn pop(&self) -> Option<Job<'r>> {
        let mut g = lock(&self.state);
        loop {
            if g.closed {
                return None;
            }
            if let Some(j) = g.queue.pop() {
                self.busy.fetch_add(1, Ordering::SeqCst);
                return Some(j);
            }
            g.waiting += 1;
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
            g.waiting -= 1;
        }
    }

    /// Pops a job if fewer than `limit` are running (counting it as
    /// running); never blocks. For backends that start calls without
    /// waiting, where the limit is not a thread count.
    pub fn try_pop(&self, limit: usize) -> Option<Job<'r>> {
        let mut g = lock(&self.state);
        if g.closed || self.busy.load(Ordering::SeqCst) >= limit {
            return None;
        }
        let j = g.queue.pop()?;
        self.busy.fetch_add(1, Ordering::SeqCst);
        Some(j)
    }

    /// Counts up to `n` more jobs as running, as many as keep the count
    /// within `limit` when nothing is queued ahead of them (queued jobs go
    /// first, in policy order); returns how many.
    pub fn try_reserve(&self, limit: usize, n: usize) -> usize {
        let g = lock(&self.state);
        if g.closed || !g.queue.is_empty() {
            return 0;
        }
        let busy = self.busy.load(Ordering::SeqCst);
        let k = limit.saturating_sub(busy).min(n);
        self.busy.fetch_add(k, Ordering::SeqCst);
        k
    }

    pub fn finished(&self) {
        self.busy.fetch_sub(1, Ordering::SeqCst);
    }

    pub fn queued(&self) -> usize {
        lock(&self.state).queue.len()
    }

    /// Stops the lane: queued jobs are dropped, idle threads exit, running
    /// calls finish (they see the run's cancel token) and then exit.
    pub fn close(&self) {
        let dropped = {
            let mut g = lock(&self.state);
            g.closed = true;
            let mut q = PolicyQueue::new(Policy::Fifo);
            std::mem::swap(&mut q, &mut g.queue);
            q
        };
        drop(dropped);
        self.cv.notify_all();
    }
}

/// A blocking op handed to the I/O executor, between its start and its
/// settling.
pub(super) struct Call<'r> {
    pub(super) frame: Arc<Frame<'r>>,
    pub(super) op: u32,
    pub(super) ready_ns: u64,
    /// Worker that dispatched it.
    pub(super) worker: u32,
    pub(super) track: Track,
    pub(super) start_ns: u64,
    pub(super) jkey: Option<EffectId>,
    pub(super) llm: bool,
    /// Its tokens were already counted against the budgets as they were
    /// spent (a tool-calling exchange counts each model turn).
    pub(super) usage_accounted: bool,
    /// A tool op's tool and arguments, for its event.
    pub(super) detail: Option<Box<crate::telemetry::OpDetail>>,
}

impl<'r> Job<'r> {
    /// The call this job becomes when it starts at `start_ns` on `track`
    /// (journal key not yet set: it is once the call has run), with the
    /// job's arguments and journal key.
    pub(super) fn into_call(
        self,
        track: Track,
        start_ns: u64,
    ) -> (Call<'r>, SmallVec<[Val; 4]>, Option<EffectId>) {
        let call = Call {
            frame: self.frame,
            op: self.op,
            ready_ns: self.ready_ns,
            worker: self.worker,
            track,
            start_ns,
            jkey: None,
            llm: matches!(track, Track::Llm(_)),
            usage_accounted: false,
            detail: None,
        };
        (call, self.args, self.jkey)
    }
}

impl Call<'_> {
    /// The call's telemetry event, ending at `end_ns`.
    pub(super) fn event(
        &self,
        end_ns: u64,
        status: Status,
        llm: Option<Box<LlmInfo>>,
    ) -> Option<OpEvent> {
        let instr = self.frame.code.ops.get(self.op as usize)?;
        Some(OpEvent {
            frame: self.frame.id,
            frame_key: self.frame.path,
            flow: self.frame.flow_id(),
            region: self.frame.region,
            op: self.op,
            opcode: instr.opcode,
            agent: self.frame.agent,
            invocation: self.frame.invocation,
            track: self.track,
            worker: self.worker,
            ready_ns: self.ready_ns,
            start_ns: self.start_ns,
            end_ns,
            status,
            llm,
            detail: self.detail.clone(),
        })
    }
}

impl<'r> Run<'r> {
    /// A call taken from `lane` is over (settled or dropped): a pausing
    /// run may now end.
    pub(in crate::scheduler) fn call_finished(&self, lane: &Lane<'r>) {
        lane.finished();
        self.pause_if_idle();
    }

    pub(super) fn io_loop(&self, lane: &Lane<'r>, llm: bool, idx: u32) -> Vec<OpEvent> {
        let mut events = Vec::new();
        while let Some(job) = lane.pop() {
            let ev = self.run_job(job, llm, idx);
            self.call_finished(lane);
            if let Some(e) = ev {
                self.observe_op(&e);
                events.push(e);
            }
        }
        events
    }

    /// The event of a call the run no longer wants (ended, or its frame
    /// abandoned), or `None` when it should run.
    pub(super) fn unwanted(&self, call: &Call<'r>) -> Option<Option<OpEvent>> {
        // A pausing run starts no call: nothing was paid for it yet.
        (self.halted() || self.pausing() || call.frame.is_cancelled()).then(|| {
            self.record
                .then(|| call.event(call.start_ns, Status::Cancelled, None))
                .flatten()
        })
    }

    pub(super) fn run_job(&self, job: Job<'r>, llm: bool, idx: u32) -> Option<OpEvent> {
        let track = if llm {
            Track::Llm(idx)
        } else {
            Track::Tool(idx)
        };
        let (mut call, args, jkey) = job.into_call(track, self.now());
        let op = call.op;
        let instr = call.frame.code.ops.get(op as usize)?;
        if let Some(ev) = self.unwanted(&call) {
            return ev;
        }
        let frame = &call.frame;
        self.observe_start(frame, op, call.start_ns);
        let agent = self.agent_name(frame.agent);
        // A tool call is a side effect: its intent is durable before it starts.
        if let (Some(id), false) = (&jkey, llm) {
            if let Err(e) = self.gate_intent(id, instr.opcode.mnemonic()) {
                self.fail(frame, op, e, &Sink::Global);
                return None;
            }
        }
        let (result, info) = if llm {
            match exec::llm_request(agent, instr, &args) {
                Ok(mut req) => {
                    req.on_text = self.text_sink(frame, op, None);
                    req.critical = self.on_critical_path(frame, op);
                    // Every attempt (retries included) goes into the op's
                    // telemetry.
                    let log = crate::llm::AttemptLog::new();
                    let result = self.backend.complete_observed(&req, &self.cancel, &log);
                    self.llm_outcome(&req, result, log.attempts())
                }
                Err(e) => (Err(e), None),
            }
        } else {
            if self.record {
                call.detail = Some(Box::new(crate::telemetry::OpDetail {
                    tool: match &instr.imm {
                        ais_ir::bytecode::Imm::Tool(t) => Some(t.clone()),
                        _ => None,
                    },
                    // A text argument is the JSON the tool gets: kept as is.
                    arguments: args.first().and_then(|a| match a.to_json() {
                        serde_json::Value::String(s) => self.text.keep(&s),
                        other => self.text.keep(&other.to_string()),
                    }),
                    ..Default::default()
                }));
            }
            let key = jkey.as_ref().and_then(|id| self.idempotency_key(id));
            (self.tool_op_call(frame, op, agent, instr, &args, key), None)
        };
        call.jkey = jkey;
        self.settle(call, result, info)
    }

    /// A tool op's call, or the result of the same call started early: in
    /// an inner plan while the plan was streaming in, in a branch's arm
    /// before the branch was decided (speculation).
    fn tool_op_call(
        &self,
        frame: &Frame<'r>,
        op: u32,
        agent: &str,
        instr: &ais_ir::bytecode::Instr,
        args: &[Val],
        idempotency_key: Option<String>,
    ) -> Result<Val, OpError> {
        if let (Some(pre), ais_ir::bytecode::Imm::Tool(t), Some(a)) =
            (frame.unit.prefetch, &instr.imm, args.first())
        {
            if let Some(r) = pre.take(t, &a.to_json()) {
                return r.map(Val::from_json).map_err(OpError::from);
            }
        }
        if let (ais_ir::bytecode::Imm::Tool(t), Some(a)) = (&instr.imm, args.first()) {
            if let Some((r, read)) = self.spec_adopt_tool(frame, op, t, &a.to_json()) {
                if !read.is_empty() && !self.labels.off() {
                    frame.add_label(instr.result, self.labels.of_names(&read));
                }
                return r.map(Val::from_json).map_err(OpError::from);
            }
        }
        let call = || {
            exec::exec_tool(
                self.host,
                agent,
                instr,
                args,
                &self.cancel,
                idempotency_key.as_deref(),
            )
        };
        if self.labels.off() {
            return call();
        }
        // A tool that stores its argument keeps the argument's labels; one
        // that reads stored values back gives their labels to the result
        // (`crate::host::flow`), journaled with it by `settle`.
        let writing = self.labels.names(frame.label(instr.result));
        let (r, read) = crate::host::flow::with(writing, call);
        if !read.is_empty() {
            frame.add_label(instr.result, self.labels.of_names(&read));
        }
        r
    }

    /// An LLM reply (or failure) as the op's value and its telemetry.
    pub(super) fn llm_outcome(
        &self,
        req: &crate::llm::LlmRequest,
        result: Result<crate::llm::LlmResponse, crate::llm::LlmError>,
        attempts: Vec<crate::llm::Attempt>,
    ) -> (Result<Val, OpError>, Option<Box<LlmInfo>>) {
        // Failed and rejected attempts spent tokens too.
        let usage = crate::llm::call_usage(result.as_ref().ok(), &attempts);
        let attempts: Vec<AttemptRecord> =
            attempts.iter().map(AttemptRecord::from_attempt).collect();
        let (model, simulated, reply, finish_reason) = match &result {
            Ok(resp) => (
                resp.model.clone(),
                resp.simulated,
                self.text.keep(&resp.text),
                Some(resp.finish_reason.clone()).filter(|r| !r.is_empty()),
            ),
            Err(_) => (
                req.model.clone().unwrap_or_default(),
                self.backend.is_simulated(),
                None,
                attempts.last().and_then(|a| a.finish_reason.clone()),
            ),
        };
        let info = Box::new(LlmInfo {
            cost_micro_usd: self.gate.budget.cost_of(&model, &usage),
            model,
            input_tokens: usage.prompt_tokens,
            output_tokens: usage.completion_tokens,
            cache_read_tokens: usage.cache_read_tokens,
            cache_write_tokens: usage.cache_write_tokens,
            simulated,
            attempts,
            tool_calls: Vec::new(),
            plan_checks: Vec::new(),
            backend: self.backend.name().to_string(),
            prompt: crate::telemetry::prompt_messages(req, self.text),
            reply,
            finish_reason,
        });
        match result {
            Ok(resp) => (exec::llm_value(req, &resp), Some(info)),
            Err(e) => (Err(OpError::from(e)), Some(info)),
        }
    }

    /// Counts an LLM call's tokens and cost against the run's and its
    /// agent's budgets.
    pub(super) fn account_llm(&self, agent: u32, model: &str, usage: crate::llm::Usage) {
        let tokens = usage.total();
        self.gate.used[1].fetch_add(tokens, Ordering::SeqCst);
        if let Some(a) = self.gate.agent_used.get(agent as usize) {
            a[1].fetch_add(tokens, Ordering::SeqCst);
        }
        let c = self.gate.budget.cost_of(model, &usage);
        self.gate.used[2].fetch_add(c, Ordering::SeqCst);
    }

    /// Finishes a blocking op whose call has returned: journal, usage,
    /// delivery of the value (or failure), and its event.
    pub(super) fn settle(
        &self,
        call: Call<'r>,
        result: Result<Val, OpError>,
        info: Option<Box<LlmInfo>>,
    ) -> Option<OpEvent> {
        let (frame, op, jkey, llm) = (&call.frame, call.op, &call.jkey, call.llm);
        let instr = frame.code.ops.get(op as usize)?;
        let end = self.now();
        let tokens = info
            .as_ref()
            .map_or(0, |i| i.input_tokens + i.output_tokens);
        // Tokens already journaled with each turn are not journaled again.
        let journal_tokens = if call.usage_accounted { 0 } else { tokens };
        let result = result
            .and_then(|v| limits::check_value(&v, self.max_value_bytes).map(|()| v))
            .and_then(|v| {
                self.journal_record(
                    jkey.as_ref(),
                    instr,
                    std::slice::from_ref(&v),
                    journal_tokens,
                    frame.label(instr.result),
                )
                .map(|()| v)
            });
        // Every attempt's tokens count, a failed call's too: they were spent.
        if let (Some(i), false) = (&info, call.usage_accounted) {
            self.account_llm(
                frame.agent,
                &i.model,
                crate::llm::Usage {
                    prompt_tokens: i.input_tokens,
                    completion_tokens: i.output_tokens,
                    cache_read_tokens: i.cache_read_tokens,
                    cache_write_tokens: i.cache_write_tokens,
                },
            );
        }
        let mut error = None;
        let status = match result {
            Ok(v) => {
                // A trusted tool's reply vouches for values only when it
                // was computed from trusted data (a lookup keyed by an
                // injected name could echo the attacker's value).
                if let ais_ir::bytecode::Imm::Tool(t) = &instr.imm {
                    let vouches = self.labels.is_trusted(frame.label(instr.result));
                    self.labels.note_result(t, vouches, || v.to_json());
                    self.labels.note_tool_ran(t);
                }
                if let Some(t) = self.complete_op(
                    frame.clone(),
                    op,
                    exec::tool_results(instr, v),
                    end,
                    &Sink::Global,
                ) {
                    self.injector.push(t);
                }
                Status::Ok
            }
            Err(_) if self.halted() || frame.is_cancelled() => Status::Cancelled,
            Err(e) => {
                // A failed call completed: recorded so a resume asks
                // again. If that cannot be written, the journal's error
                // is the op's.
                let e = match (jkey, llm) {
                    (Some(id), false) => match self.gate_failed(id, instr.opcode.mnemonic()) {
                        Ok(()) => e,
                        Err(w) => w,
                    },
                    _ => e,
                };
                error = Some(e.code.clone());
                self.fail(frame, op, e, &Sink::Global);
                Status::Failed
            }
        };
        if !self.injector.is_empty() {
            self.sleep.notify_one();
        }
        if self.record {
            let mut ev = call.event(end, status, info)?;
            if let Some(code) = error {
                ev.detail.get_or_insert_with(Box::default).error = Some(code);
            }
            // The result's information-flow label, by source name (only a
            // labelled result costs the lookup).
            let label = frame.label(instr.result);
            if label != 0 && !self.labels.off() {
                let d = ev.detail.get_or_insert_with(Box::default);
                d.sources = self.labels.names(label);
                d.untrusted = !self.labels.is_trusted(label);
            }
            Some(ev)
        } else {
            None
        }
    }
}
