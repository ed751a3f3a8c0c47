//! Workers and their ready queues: each worker runs ops from its own
//! deque, the global injector or a victim's deque, parks when idle, and
//! executes one op at a time ([`Run::execute`]).

use super::gate::admission::Admission;
use super::io::Job;
use super::{limits, Run, Sink, Task};
use crate::error::RunError;
use crate::exec::{self, Class, OpError, Results};
use crate::frame::Frame;
use crate::host::Host;
use crate::sync::lock;
use crate::telemetry::{OpEvent, Status, Track};
use crate::tx::Deferred;
use crate::value::Val;
use ais_ir::bytecode::Imm;
use ais_ir::Opcode;
use crossbeam::sync::{Parker, Unparker};
use crossbeam_deque::{Steal, Worker};
use smallvec::{smallvec, SmallVec};
use std::sync::atomic::{fence, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(super) struct Sleep {
    pub(super) idle: Mutex<Vec<usize>>,
    pub(super) n_idle: AtomicUsize,
    pub(super) unparkers: Vec<Unparker>,
}

impl Sleep {
    pub(super) fn notify_one(&self) {
        fence(Ordering::SeqCst);
        if self.n_idle.load(Ordering::SeqCst) == 0 {
            return;
        }
        let id = {
            let mut g = lock(&self.idle);
            let id = g.pop();
            self.n_idle.store(g.len(), Ordering::SeqCst);
            id
        };
        if let Some(u) = id.and_then(|i| self.unparkers.get(i)) {
            u.unpark();
        }
    }

    pub(super) fn notify_all(&self) {
        {
            let mut g = lock(&self.idle);
            g.clear();
            self.n_idle.store(0, Ordering::SeqCst);
        }
        for u in &self.unparkers {
            u.unpark();
        }
    }

    pub(super) fn register(&self, me: usize) {
        let mut g = lock(&self.idle);
        if !g.contains(&me) {
            g.push(me);
        }
        self.n_idle.store(g.len(), Ordering::SeqCst);
    }

    pub(super) fn unregister(&self, me: usize) {
        let mut g = lock(&self.idle);
        g.retain(|&x| x != me);
        self.n_idle.store(g.len(), Ordering::SeqCst);
    }
}

pub(super) struct WorkerCtx<'r> {
    pub(super) id: u32,
    pub(super) local: Worker<Task<'r>>,
    pub(super) events: Vec<OpEvent>,
    pub(super) busy_ns: u64,
    /// Calls queued on the LLM / tool lane whose thread is not woken yet.
    pub(super) unwoken: [usize; 2],
    /// LLM calls dispatched and not yet started (backends that start calls
    /// without waiting).
    pub(super) llm_batch: Vec<Job<'r>>,
    pub(super) credit: Option<Credit<'r>>,
}

/// Ops a worker completed in one frame and has not yet counted in the
/// frame's shared `remaining`: one atomic update per run of ops in a frame
/// instead of one per op (the counter is contended between workers).
/// Settled when the worker moves to another frame and before it looks for
/// work elsewhere, so a frame's completion is never held back by an idle
/// worker.
pub(super) struct Credit<'r> {
    pub(super) frame: Arc<Frame<'r>>,
    pub(super) ops: usize,
}

pub(super) struct WorkerStats {
    pub(super) events: Vec<OpEvent>,
    pub(super) busy_ns: u64,
    pub(super) idle_ns: u64,
    pub(super) life_ns: u64,
}

impl<'r> Run<'r> {
    /// Counts a worker's held completions into their frame's `remaining`;
    /// completes the frame (and its owners) if they were its last ops.
    pub(super) fn settle_credit(&self, cr: Credit<'r>, now: u64, sink: &Sink<'_, 'r>) {
        let Credit { frame, ops } = cr;
        if frame.remaining.fetch_sub(ops, Ordering::AcqRel) != ops {
            return;
        }
        if let Some((f, o, r)) = self.frame_done(&frame) {
            if let Some(t) = self.complete_op(f, o, r, now, sink) {
                self.push(sink, t);
            }
        }
    }

    /// Settles the worker's held completions; true if that made work.
    pub(super) fn flush_credit(&self, cx: &mut WorkerCtx<'r>) -> bool {
        let Some(cr) = cx.credit.take() else {
            return false;
        };
        let now = self.now();
        self.settle_credit(cr, now, &Sink::Local(&cx.local));
        !cx.local.is_empty()
    }

    /// An inline op on the frame's host (its `try` body's buffer when in
    /// one). With labels on, a message keeps its body's labels in the
    /// mailbox, a memory write its value's; `inbox()` and a memory read give
    /// back the labels of what they return (`crate::host::flow`), joined
    /// into the result's.
    fn exec_inline(
        &self,
        frame: &Frame<'r>,
        instr: &ais_ir::bytecode::Instr,
        args: &[Val],
        label: u64,
        labels_on: bool,
    ) -> Result<Results, OpError> {
        let host: &dyn Host = match &frame.tx {
            Some(tx) => tx.as_ref(),
            None => self.host,
        };
        let agent = self.agent_name(frame.agent);
        if labels_on
            && matches!(
                instr.opcode,
                Opcode::Communicate | Opcode::Umem | Opcode::Qmem
            )
        {
            let writing = self.labels.names(label);
            let (r, read) =
                crate::host::flow::with(writing, || exec::exec_inline(host, agent, instr, args));
            if !read.is_empty() {
                frame.add_label(instr.result, self.labels.of_names(&read));
            }
            r
        } else {
            exec::exec_inline(host, agent, instr, args)
        }
    }

    /// Runs one ready op; returns the next op to run on this worker, if
    /// its completion made one ready.
    pub(super) fn execute(&self, t: Task<'r>, cx: &mut WorkerCtx<'r>) -> Option<Task<'r>> {
        let Task {
            frame,
            op,
            ready_ns,
        } = t;
        let instr = frame.code.ops.get(op as usize)?;
        if self.halted() || frame.is_cancelled() {
            return None;
        }
        let start = self.now();
        let sink = Sink::Local(&cx.local);
        let mut args: SmallVec<[Val; 4]> = SmallVec::new();
        // Provenance (`crate::ifc`): the inputs' labels and the context's,
        // gathered with the inputs (one pass over the operands).
        let labels_on = !self.labels.off();
        let mut label = frame.pc;
        for &s in frame.code.data(instr) {
            match frame.slot(s) {
                Some(v) => args.push(v.clone()),
                None => {
                    let e = OpError::new("internal.operand", "operand not ready");
                    self.fail(&frame, op, e, &sink);
                    return None;
                }
            }
            if labels_on {
                label |= frame.label(s);
            }
        }
        let class = exec::class(instr.opcode);
        // A sink refuses untrusted data before anything is admitted.
        if labels_on {
            if matches!(class, Class::Inline | Class::Tool) && self.labels.needs_check(label) {
                if let Err(e) = self
                    .labels
                    .check_sink(
                        frame.code,
                        instr,
                        &|s| frame.label(s),
                        &|s| frame.slot(s).map(Val::to_json),
                        frame.pc,
                    )
                    .or_else(|e| self.approvals.review(self.agent_name(frame.agent), e))
                    .or_else(|e| self.ask_in_journal(&frame, op, instr, &args, e))
                {
                    self.fail(&frame, op, e, &sink);
                    return None;
                }
            }
            match class {
                Class::Pure | Class::Inline | Class::Llm | Class::Tool => {
                    let l = self
                        .labels
                        .result_label(frame.unit.program, instr, label, frame.pc);
                    for i in 0..instr.n_results {
                        frame.add_label(instr.result.saturating_add(i), l);
                    }
                    self.labels.trace(|| self.site(&frame, op), l);
                    // A tier that outlives the run keeps its new sources
                    // before the write, so a later run's read carries them.
                    if let Some((tier, names)) = self.labels.note_write(instr, label, l) {
                        if let Err(e) = self.host.store_labels(tier, &names) {
                            self.fail(&frame, op, e.into(), &sink);
                            return None;
                        }
                    }
                }
                Class::Terminator => {
                    frame.ylab.fetch_or(label, Ordering::Relaxed);
                }
                Class::Call | Class::Control => {}
            }
        }
        let (jkey, replayed) = match self.admit(&frame, op, instr, class, &args) {
            Admission::Stopped => return None,
            Admission::Replayed(r, label) => {
                // A replayed tool reply is a value of its tool, as when
                // it ran (argument rules compare against it).
                if let (Imm::Tool(t), Ok(vals)) = (&instr.imm, &r) {
                    let l = frame.label(instr.result) | label;
                    if let Some(v) = vals.first() {
                        let vouches = self.labels.is_trusted(l);
                        self.labels.note_result(t, vouches, || v.to_json());
                        self.labels.note_tool_ran(t);
                    }
                }
                // What the earlier attempt recorded joins what the
                // inputs give now (a union: never less than either).
                if label != 0 {
                    for i in 0..instr.n_results {
                        frame.add_label(instr.result.saturating_add(i), label);
                    }
                    self.labels.trace(|| self.site(&frame, op), label);
                }
                (None, Some(r))
            }
            Admission::Run { jkey } => (jkey, None),
        };
        // `Some(results)`: the op is done, deliver them; `None`: it
        // completes later (frames it started, or the I/O executor).
        let r: Result<Option<Results>, OpError> = match class {
            _ if replayed.is_some() => {
                let mut r = replayed.unwrap_or(Ok(Results::new())).map(Some);
                if r.is_ok() && restores_state(instr, self.host) {
                    // State that lives only as long as the process (short-
                    // term memory, beliefs unless the store keeps them) is
                    // written again as the earlier attempt wrote it, so an
                    // op that runs live after it reads what it read then.
                    // An idempotent write: the same value under the same key.
                    if let Err(e) = self.exec_inline(&frame, instr, &args, label, labels_on) {
                        r = Err(e);
                    }
                }
                if r.is_ok() && instr.opcode == Opcode::Communicate {
                    match &frame.tx {
                        // Delivered by an earlier attempt; its handlers
                        // start when the body commits.
                        Some(tx) => tx.replayed_message(exec::message_of(
                            self.agent_name(frame.agent),
                            &args,
                        )),
                        None => self.start_handlers(&frame, op, &args, &sink),
                    }
                }
                r
            }
            Class::Pure => exec::eval_pure(frame.unit.program, instr, &args)
                .and_then(|v| limits::check_value(&v, self.max_value_bytes).map(|()| v))
                .map(|v| Some(smallvec![v])),
            Class::Inline => {
                let r = if instr.opcode == Opcode::Print {
                    // Journaled before it is shown (`gate::outbox`).
                    self.print_op(&frame, &args, jkey.as_ref())
                } else {
                    self.exec_inline(&frame, instr, &args, label, labels_on)
                };
                let r = r
                    .map_err(|e| self.note_pause(e, jkey.as_ref()))
                    .and_then(|res| match (&frame.tx, &jkey) {
                        // A printed line is journaled when it is shown.
                        _ if instr.opcode == Opcode::Print => Ok(res),
                        // In a `try` body: journaled when the body commits.
                        (Some(tx), Some(id)) => {
                            tx.defer_journal(Deferred {
                                key: id.key.clone(),
                                op: instr.opcode.mnemonic(),
                                hash: id.hash.clone(),
                                results: res.to_vec(),
                                labels: self.label_names(frame.label(instr.result)),
                            });
                            Ok(res)
                        }
                        _ => self
                            .journal_record(
                                jkey.as_ref(),
                                instr,
                                &res,
                                0,
                                frame.label(instr.result),
                            )
                            .map(|()| res),
                    })
                    .map(Some);
                if r.is_ok() && instr.opcode == Opcode::Communicate && frame.tx.is_none() {
                    self.start_handlers(&frame, op, &args, &sink);
                }
                r
            }
            Class::Llm | Class::Tool => {
                let prio = frame.tail_ms.saturating_add(instr.rem_ms);
                let agent = frame.agent;
                let tools = exec::on_agent_lane(instr);
                if class == Class::Llm && tools {
                    // Its reply may decide a branch: start the arms' calls
                    // (a call on the LLM lane does so when it starts, after
                    // its prompt-cache warm-up admission: `llm_calls.rs`).
                    self.speculate_after(&frame, op);
                }
                let lane = match class {
                    _ if tools => &self.agent,
                    Class::Llm => &self.llm,
                    _ => &self.tool,
                };
                let job = Job {
                    frame,
                    op,
                    ready_ns,
                    worker: cx.id,
                    args,
                    jkey,
                };
                if class == Class::Llm && self.llm_async && !tools {
                    // Started with the worker's other calls at the end of
                    // its burst (`wake_io`), so a fan-out reaches the
                    // backend as one batch.
                    cx.llm_batch.push(job);
                    if cx.llm_batch.len() >= 64 {
                        self.wake_io(cx);
                    }
                    return None;
                }
                lane.push_quiet(job, prio, agent);
                if tools {
                    // One exchange per thread: wake one now.
                    lane.wake(1);
                    return None;
                }
                cx.unwoken[usize::from(class != Class::Llm)] += 1;
                if cx.unwoken.iter().sum::<usize>() >= 64 {
                    self.wake_io(cx);
                }
                return None;
            }
            Class::Call => self
                .start_call(&frame, op, instr, args, &sink)
                .map(|()| None),
            Class::Control => self
                .start_control(&frame, op, instr, &args, &sink)
                .map(|()| None),
            Class::Terminator => {
                if instr.opcode == Opcode::Yield {
                    if let Some(next) = frame.take_next() {
                        let now = self.now();
                        let data = frame.code.data(instr);
                        for (k, v) in args.iter().enumerate() {
                            let l = data.get(k).map_or(0, |&s| frame.label(s));
                            self.deliver(&next, 2 + k as u32, v.clone(), l, now, &sink);
                        }
                    }
                }
                let _ = frame.yielded.set(args.into_iter().collect());
                Ok(Some(Results::new()))
            }
        };
        // The op's own work ends here; delivering its results is scheduling.
        let end = self.now();
        cx.busy_ns += end - start;
        let (id, flow, agent, region) = (frame.id, frame.flow_id(), frame.agent, frame.region);
        let frame_key = frame.path;
        let invocation = frame.invocation;
        let mut next = None;
        let mut error = None;
        let status = match r {
            Ok(Some(results)) => {
                next =
                    self.complete_op_counted(frame, op, results, end, &sink, Some(&mut cx.credit));
                Status::Ok
            }
            Ok(None) => Status::Ok,
            Err(e) => {
                if self.record {
                    error = Some(e.code.clone());
                }
                self.fail(&frame, op, e, &sink);
                Status::Failed
            }
        };
        if let Some(c) = self.done_ops.get(cx.id as usize) {
            // Only this worker writes its counter (others just read it): a
            // plain store avoids a locked read-modify-write per op.
            c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        }
        if self.record {
            let ev = OpEvent {
                frame: id,
                frame_key,
                flow,
                region,
                op,
                opcode: instr.opcode,
                agent,
                invocation,
                track: Track::Worker(cx.id),
                worker: cx.id,
                ready_ns,
                start_ns: start,
                end_ns: end,
                status,
                llm: None,
                detail: error.map(|code| {
                    Box::new(crate::telemetry::OpDetail {
                        error: Some(code),
                        ..Default::default()
                    })
                }),
            };
            self.observe_op(&ev);
            cx.events.push(ev);
        }
        // Work left in the local queue: let an idle worker steal it (there
        // is none to wake with one worker; skip the fence).
        if self.stealers.len() > 1 && !cx.local.is_empty() {
            self.sleep.notify_one();
        }
        next
    }

    /// Wakes I/O threads for the calls this worker queued.
    pub(super) fn wake_io(&self, cx: &mut WorkerCtx<'r>) {
        if !cx.llm_batch.is_empty() {
            let batch = std::mem::take(&mut cx.llm_batch);
            self.dispatch_llm(batch);
        }
        let [llm, tool] = std::mem::take(&mut cx.unwoken);
        if llm > 0 {
            self.llm.wake(llm);
        }
        if tool > 0 {
            self.tool.wake(tool);
        }
    }

    pub(super) fn worker_loop(&self, mut cx: WorkerCtx<'r>, parker: Parker) -> WorkerStats {
        let enter = Instant::now();
        let me = cx.id as usize;
        // Time with no task at hand (spinning, stealing in vain, parked).
        let mut idle_ns = 0u64;
        let mut idle_since: Option<Instant> = None;
        let mut stalls = 0u32;
        let mut found = |t: Task<'r>, cx: &mut WorkerCtx<'r>, since: &mut Option<Instant>| {
            if let Some(i0) = since.take() {
                idle_ns += i0.elapsed().as_nanos() as u64;
            }
            let mut next = Some(t);
            while let Some(t) = next.take() {
                next = self.execute(t, cx);
            }
            if cx.local.is_empty() {
                self.wake_io(cx);
            }
        };
        'outer: loop {
            if let Some(t) = cx.local.pop() {
                found(t, &mut cx, &mut idle_since);
                continue;
            }
            if self.flush_credit(&mut cx) {
                continue;
            }
            if let Some(t) = self.steal(&cx) {
                found(t, &mut cx, &mut idle_since);
                continue;
            }
            self.wake_io(&mut cx);
            if self.halted() {
                break;
            }
            idle_since.get_or_insert_with(Instant::now);
            for _ in 0..64 {
                std::hint::spin_loop();
                if let Some(t) = self.steal(&cx) {
                    found(t, &mut cx, &mut idle_since);
                    continue 'outer;
                }
            }
            // Stay awake (yielding) while a scheduled reply is due: the ops
            // it makes ready start at once, where a parked thread on a
            // virtual machine takes 0.1–2 ms to run again once woken.
            if self.reply_soon.load(Ordering::Acquire) {
                std::thread::yield_now();
                continue;
            }
            self.sleep.register(me);
            fence(Ordering::SeqCst);
            if self.has_work() || self.halted() {
                self.sleep.unregister(me);
                continue;
            }
            parker.park_timeout(Duration::from_millis(100));
            self.sleep.unregister(me);
            // Worker 0 watches for a stall (nothing runnable, nothing in
            // flight), which would be a VM bug: fail rather than hang.
            if me == 0
                && !self.halted()
                && idle_since.is_some_and(|i0| i0.elapsed() > Duration::from_millis(100))
            {
                stalls = if self.stalled(self.stealers.len() - 1) {
                    stalls + 1
                } else {
                    0
                };
                if stalls >= 3 {
                    self.finish(Err(RunError::Internal(
                        "the run stalled: no op can make progress".into(),
                    )));
                }
            }
        }
        if let Some(i0) = idle_since {
            idle_ns += i0.elapsed().as_nanos() as u64;
        }
        WorkerStats {
            events: cx.events,
            busy_ns: cx.busy_ns,
            idle_ns,
            life_ns: enter.elapsed().as_nanos() as u64,
        }
    }

    pub(super) fn steal(&self, cx: &WorkerCtx<'r>) -> Option<Task<'r>> {
        loop {
            match self.injector.steal_batch_and_pop(&cx.local) {
                Steal::Success(t) => return Some(t),
                Steal::Retry => continue,
                Steal::Empty => break,
            }
        }
        let n = self.stealers.len();
        for k in 1..n {
            let s = &self.stealers[(cx.id as usize + k) % n];
            loop {
                match s.steal_batch_and_pop(&cx.local) {
                    Steal::Success(t) => return Some(t),
                    Steal::Retry => continue,
                    Steal::Empty => break,
                }
            }
        }
        None
    }

    /// True when nothing can make progress: every worker parked, no queued
    /// or running job on any lane, no queued task.
    pub(super) fn stalled(&self, workers: usize) -> bool {
        self.sleep.n_idle.load(Ordering::SeqCst) >= workers
            && !self.has_work()
            && [&self.llm, &self.tool, &self.agent]
                .iter()
                .all(|lane| lane.busy.load(Ordering::SeqCst) == 0 && lane.queued() == 0)
    }
}

/// A journaled write of state that lives only as long as the process: a
/// resumed (or forked) attempt writes it again when it replays the op.
/// Short-term memory, and beliefs unless `host` keeps them; not long-term
/// memory or the episodic log, which the store keeps (an episodic note
/// written again would be a second note).
fn restores_state(instr: &ais_ir::bytecode::Instr, host: &dyn Host) -> bool {
    match instr.opcode {
        Opcode::BeliefSet => !host.beliefs_outlive_run(),
        Opcode::Umem => matches!(&instr.imm, Imm::Tier(t) if t.tier() == ais_ir::Tier::Stm),
        _ => false,
    }
}
