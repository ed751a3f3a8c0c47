//! Frames and regions: starting flows, branches, loops, `try` bodies and
//! handlers in frames, delivering values into slots, completing ops and
//! frames, and failure propagation to the nearest handler.

use super::gate::EffectId;
use super::worker::Credit;
use super::{limits, Run, Sink, Task};
use crate::error::RunError;
use crate::exec::{self, OpError, Results};
use crate::frame::{Frame, LoopState, Owner, Role, Unit};
use crate::host::HostError;
use crate::sync::lock;
use crate::tx::{Parent as TxParent, Tx};
use crate::value::Val;
use ais_ir::bytecode::{Imm, Instr};
use ais_ir::RegionSpec;
use serde_json::Value as Json;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

impl<'r> Run<'r> {
    pub(super) fn new_frame(
        &self,
        unit: Unit<'r>,
        flow: u32,
        region: u32,
        owner: Option<Owner<'r>>,
        tail_ms: u64,
        depth: u32,
    ) -> Result<Arc<Frame<'r>>, OpError> {
        let f = unit
            .program
            .flows
            .get(flow as usize)
            .ok_or_else(|| OpError::new("internal.flow", "bad flow"))?;
        let code = f
            .regions
            .get(region as usize)
            .ok_or_else(|| OpError::new("internal.region", "bad region"))?;
        if !self.frames.claim() {
            return Err(OpError::new(
                limits::FRAMES_CODE,
                format!(
                    "more than {} frames alive at once (calls, branches, loop iterations): the program grows without bound",
                    self.frames.max
                ),
            )
            .with_payload(serde_json::json!({"limit": self.frames.max})));
        }
        // A `try` body buffers its effects (`crate::tx`); the frames it
        // starts share its buffer; handlers run outside any.
        let tx = owner.as_ref().and_then(|o| match o.role {
            Role::Try => Some(Arc::new(Tx::new(match &o.frame.tx {
                Some(t) => TxParent::Tx(t.clone()),
                None => TxParent::Host(self.host),
            }))),
            Role::Handler => None,
            _ => o.frame.tx.clone(),
        });
        // A called flow runs as its own agent; a region (and an inner plan)
        // as the agent of the frame that started it.
        let agent = match &owner {
            Some(o) if !matches!(o.role, Role::Call | Role::Handler) => o.frame.agent,
            _ => f.agent,
        };
        let id = self.next_frame.fetch_add(1, Ordering::Relaxed);
        let pc = owner.as_ref().map_or(0, |o| self.context_label(o));
        let mut f = Frame::new(
            id,
            unit,
            flow,
            region,
            agent,
            code,
            owner,
            tail_ms,
            depth,
            self.frames,
            tx,
        );
        f.pc = pc;
        Ok(Arc::new(f))
    }

    /// The control context of a frame its owner starts: the owner's, plus
    /// the condition of a branch (the items of a loop) and the inputs of
    /// a `solve` (the plan's code is derived from them). Values computed
    /// under an untrusted condition are thereby tainted by it.
    /// Where op `op` of `frame` is, for [`crate::ifc::LabelTrace`].
    pub(super) fn site(&self, frame: &Frame<'r>, op: u32) -> crate::ifc::OpSite {
        let plan = !std::ptr::eq(frame.unit.program, self.program);
        (plan, frame.flow, frame.region, op)
    }

    fn context_label(&self, o: &Owner<'r>) -> u64 {
        if self.labels.off() {
            return 0;
        }
        let f = &o.frame;
        let Some(instr) = f.code.ops.get(o.op as usize) else {
            return f.pc;
        };
        let data = f.code.data(instr);
        match o.role {
            Role::Branch | Role::Iter { .. } => f.label_of(&data[..data.len().min(1)]),
            Role::Plan => f.label_of(data) | self.labels.plan,
            _ => f.pc,
        }
    }

    /// Makes the frame's roots ready and delivers its arguments (slots
    /// `0..`) and captures (read from `parent`).
    pub(super) fn start_frame(
        &self,
        frame: &Arc<Frame<'r>>,
        args: impl IntoIterator<Item = Val>,
        labels: &[u64],
        parent: Option<&Frame<'r>>,
        sink: &Sink<'_, 'r>,
    ) -> Result<(), OpError> {
        let now = self.now();
        // Before any op of the frame can run (and complete it).
        self.call_opened(frame, now);
        for &r in &frame.code.roots {
            self.push(
                sink,
                Task {
                    frame: frame.clone(),
                    op: r,
                    ready_ns: now,
                },
            );
        }
        for (i, v) in args.into_iter().enumerate() {
            let l = labels.get(i).or(labels.last()).copied().unwrap_or(0);
            self.deliver(frame, i as u32, v, l, now, sink);
        }
        if let Some(p) = parent {
            let base = frame.code.n_args;
            for (k, &ps) in frame.code.captures.iter().enumerate() {
                let v = p
                    .slot(ps)
                    .cloned()
                    .ok_or_else(|| OpError::new("internal.capture", "captured value not ready"))?;
                self.deliver(frame, base + k as u32, v, p.label(ps), now, sink);
            }
        }
        Ok(())
    }

    pub(super) fn deliver(
        &self,
        frame: &Arc<Frame<'r>>,
        slot: u32,
        v: Val,
        label: u64,
        now: u64,
        sink: &Sink<'_, 'r>,
    ) {
        let Some(cell) = frame.slots.get(slot as usize) else {
            return;
        };
        frame.add_label(slot, label | frame.pc);
        if cell.set(v).is_err() {
            return;
        }
        for &c in frame.code.consumers_of(slot) {
            if frame.input_arrived(c) {
                self.push(
                    sink,
                    Task {
                        frame: frame.clone(),
                        op: c,
                        ready_ns: now,
                    },
                );
            }
        }
    }

    /// Delivers an op's results; completes frames (and their owners) as
    /// they finish, iteratively. Newly ready ops of the same frame are
    /// pushed to `sink`, except one, returned as a continuation that reuses
    /// `frame` (saving a reference-count round trip per op).
    pub(super) fn complete_op(
        &self,
        frame: Arc<Frame<'r>>,
        op: u32,
        results: Results,
        now: u64,
        sink: &Sink<'_, 'r>,
    ) -> Option<Task<'r>> {
        self.complete_op_counted(frame, op, results, now, sink, None)
    }

    /// [`Self::complete_op`] for an op run on a worker: the op is counted
    /// in the worker's `credit` (see [`Credit`]) instead of the frame's
    /// `remaining` while it stays in the same frame.
    pub(super) fn complete_op_counted(
        &self,
        mut frame: Arc<Frame<'r>>,
        mut op: u32,
        mut results: Results,
        now: u64,
        sink: &Sink<'_, 'r>,
        mut credit: Option<&mut Option<Credit<'r>>>,
    ) -> Option<Task<'r>> {
        loop {
            let instr = frame.code.ops.get(op as usize)?;
            let n = instr.n_results as usize;
            let mut ready: SmallVec<[u32; 8]> = SmallVec::new();
            for (i, v) in results.into_iter().enumerate().take(n) {
                let slot = instr.result + i as u32;
                let Some(cell) = frame.slots.get(slot as usize) else {
                    continue;
                };
                if cell.set(v).is_err() {
                    continue;
                }
                for &c in frame.code.consumers_of(slot) {
                    if frame.input_arrived(c) {
                        ready.push(c);
                    }
                }
            }
            let last = ready.pop();
            for c in ready {
                self.push(
                    sink,
                    Task {
                        frame: frame.clone(),
                        op: c,
                        ready_ns: now,
                    },
                );
            }
            if let Some(held) = credit.take() {
                match held {
                    Some(cr) if Arc::ptr_eq(&cr.frame, &frame) => cr.ops += 1,
                    _ => {
                        let old = held.replace(Credit {
                            frame: frame.clone(),
                            ops: 1,
                        });
                        if let Some(old) = old {
                            self.settle_credit(old, now, sink);
                        }
                    }
                }
                return last.map(|c| Task {
                    frame,
                    op: c,
                    ready_ns: now,
                });
            }
            if frame.remaining.fetch_sub(1, Ordering::AcqRel) != 1 {
                return last.map(|c| Task {
                    frame,
                    op: c,
                    ready_ns: now,
                });
            }
            // A complete frame has no op left to run.
            match self.frame_done(&frame) {
                Some((f, o, r)) => {
                    frame = f;
                    op = o;
                    results = r;
                }
                None => return None,
            }
        }
    }

    /// A frame completed: the owner op's completion, if any.
    pub(super) fn frame_done(
        &self,
        frame: &Arc<Frame<'r>>,
    ) -> Option<(Arc<Frame<'r>>, u32, Results)> {
        if frame.is_cancelled() {
            return None;
        }
        self.call_closed(frame);
        let ys = frame.yielded.get().cloned().unwrap_or_default();
        let Some(owner) = &frame.owner else {
            // The entry flow is done; the run ends once no handler runs.
            // Its answer is shown to the user: judged by `[policy.answer]`.
            let v = ys.first().map_or(Json::Null, Val::to_json);
            let v = self
                .labels
                .judge_answer(v, frame.ylab.load(Ordering::Relaxed) | frame.pc);
            let mut h = lock(&self.handlers);
            if h.0 == 0 {
                drop(h);
                self.finish(Ok(v));
            } else {
                h.1 = Some(v);
            }
            return None;
        };
        let pf = owner.frame.clone();
        // The owner op's results carry what the frame yielded (and its
        // context); a loop's, every iteration's.
        if !matches!(owner.role, Role::Handler) {
            let l = frame.ylab.load(Ordering::Relaxed) | frame.pc;
            if let Some(instr) = pf.code.ops.get(owner.op as usize) {
                for i in 0..instr.n_results {
                    pf.add_label(instr.result.saturating_add(i), l);
                }
                if instr.n_results > 0 {
                    self.labels.trace(|| self.site(&pf, owner.op), l | pf.pc);
                }
            }
        }
        match &owner.role {
            Role::Call | Role::Plan => {
                let instr = pf.code.ops.get(owner.op as usize)?;
                let r = exec::call_results(instr, ys.into_iter().next());
                Some((pf, owner.op, r))
            }
            Role::Branch | Role::Catch => Some((pf, owner.op, ys)),
            Role::Handler => {
                self.handler_done();
                None
            }
            Role::Try => {
                if frame
                    .settled
                    .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    return None;
                }
                // The body completed: its effects become visible now.
                if let Some(tx) = &frame.tx {
                    let mut show = |agent: &str, line: &str, j: Option<&(String, String)>| {
                        let id = j.map(|(k, h)| EffectId::new(k.clone(), h.clone()));
                        self.show_line(id.as_ref(), agent, line)
                            .map_err(|e| HostError::new(e.code, e.message))
                    };
                    let committed =
                        tx.commit_with(&mut show)
                            .map_err(OpError::from)
                            .and_then(|c| {
                                // Journaled now that their effects happened.
                                for d in &c.journal {
                                    let id = EffectId::new(d.key.clone(), d.hash.clone());
                                    let record = crate::journal::Record::values(&d.results);
                                    self.gate_record(&id, d.op, &record, 0, d.labels.as_deref())?;
                                }
                                Ok(c.messages)
                            });
                    match committed {
                        Ok(delivered) => {
                            for m in &delivered {
                                let l = self.labels.message | pf.pc;
                                self.start_handlers_for(&pf, owner.op, m, l, &Sink::Global);
                            }
                        }
                        Err(e) => {
                            self.fail(&pf, owner.op, e, &Sink::Global);
                            return None;
                        }
                    }
                }
                Some((pf, owner.op, ys))
            }
            Role::Iter { state, index } => {
                if index + 1 == state.count {
                    let _ = state.last.set(ys);
                }
                if state.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
                    Some((pf, owner.op, state.last.get().cloned().unwrap_or_default()))
                } else {
                    None
                }
            }
        }
    }

    /// A delivered message runs the recipient's matching `on` handlers
    /// (`crate::aam::messaging`), each in a detached frame.
    ///
    /// Inside a `try` body the message is buffered with the body's other
    /// effects and its handlers start when the body commits.
    pub(super) fn start_handlers(
        &self,
        frame: &Arc<Frame<'r>>,
        op: u32,
        args: &[Val],
        sink: &Sink<'_, 'r>,
    ) {
        let message = exec::message_of(self.agent_name(frame.agent), args);
        // A message between agents of the program carries the labels of
        // what was sent (its recipient, body and protocol) and of the
        // sender's context, not `@message`: the program wrote it.
        let label = frame
            .code
            .ops
            .get(op as usize)
            .map_or(self.labels.message, |i| {
                frame
                    .code
                    .data(i)
                    .iter()
                    .fold(frame.pc, |l, &s| l | frame.label(s))
            });
        self.start_handlers_for(frame, op, &message, label, sink);
    }

    /// `label`: what the handlers' arguments carry (a message buffered
    /// by a `try` body: `@message`, its own labels were not kept).
    pub(super) fn start_handlers_for(
        &self,
        frame: &Arc<Frame<'r>>,
        op: u32,
        message: &crate::host::Message,
        label: u64,
        sink: &Sink<'_, 'r>,
    ) {
        for d in crate::aam::messaging::dispatch(self.program, message) {
            lock(&self.handlers).0 += 1;
            let owner = Owner {
                frame: frame.clone(),
                op,
                role: Role::Handler,
            };
            let started = self
                .new_frame(
                    self.unit(),
                    d.flow,
                    0,
                    Some(owner),
                    0,
                    frame.depth.saturating_add(1),
                )
                .and_then(|child| {
                    let l = [label | frame.pc];
                    self.start_frame(
                        &child,
                        d.args.into_iter().map(Val::from_json),
                        &l,
                        None,
                        sink,
                    )
                });
            if let Err(e) = started {
                self.handler_done();
                self.fail(frame, op, e, sink);
            }
        }
    }

    /// A handler frame completed: end the run if it was the last thing running.
    pub(super) fn handler_done(&self) {
        let mut h = lock(&self.handlers);
        h.0 = h.0.saturating_sub(1);
        if h.0 == 0 {
            if let Some(v) = h.1.take() {
                drop(h);
                self.finish(Ok(v));
            }
        }
    }

    /// An op failed: the nearest enclosing `try` that is still running
    /// catches it (its frame is abandoned and the `catch` region starts with
    /// the error value); without one, the run fails.
    pub(super) fn fail(&self, frame: &Arc<Frame<'r>>, op: u32, err: OpError, sink: &Sink<'_, 'r>) {
        if self.halted() || frame.is_cancelled() {
            return;
        }
        let Some(instr) = frame.code.ops.get(op as usize) else {
            return;
        };
        let value = err.to_value(frame.unit.program, frame.flow, instr);
        let mut f = frame.clone();
        // A resource limit ends the run: catching it would let it grow on.
        while !limits::is_fatal(&err.code) {
            if f.is_try() {
                if f.settled
                    .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    // Another op of this body failed first (and is being
                    // caught) or the body completed: this failure is the
                    // body's too, and must not escape past its `try`.
                    return;
                }
                f.cancelled.store(true, Ordering::Release);
                // The body failed: none of its effects happen.
                if let Some(tx) = &f.tx {
                    tx.discard();
                }
                if let Some(owner) = &f.owner {
                    let pf = owner.frame.clone();
                    let pop = owner.op;
                    let caught = pf
                        .code
                        .ops
                        .get(pop as usize)
                        .and_then(|pi| pi.regions.get(1).copied().map(|c| (pi, c)))
                        .ok_or_else(|| OpError::new("internal.catch", "no catch region"))
                        .and_then(|(pi, c)| {
                            let tail = pf.tail_ms + pi.rem_ms.saturating_sub(pi.est_ms);
                            let owner = Owner {
                                frame: pf.clone(),
                                op: pop,
                                role: Role::Catch,
                            };
                            let child =
                                self.new_frame(pf.unit, pf.flow, c, Some(owner), tail, pf.depth)?;
                            self.start_frame(&child, [value.clone()], &[], Some(&pf), sink)
                        });
                    if let Err(e) = caught {
                        self.fail(&pf, pop, e, sink);
                    }
                }
                return;
            }
            let next = match &f.owner {
                // A handler's failure is its own, not its sender's.
                Some(o) if !matches!(o.role, Role::Handler) => o.frame.clone(),
                _ => break,
            };
            f = next;
        }
        self.stop(frame, op, instr, err);
    }

    /// Ends the run with op `op`'s failure (uncaught, or not catchable: a
    /// limit, a budget, the watchdog).
    ///
    /// A failure inside an inner plan is reported at the `solve` op that
    /// linked it (spans in a plan point into the plan's text, not the
    /// program's), and its message says where in the plan it happened.
    pub(super) fn stop(&self, frame: &Frame<'r>, op: u32, instr: &Instr, err: OpError) {
        let (mut at, mut at_op, mut at_instr) = (frame, op, instr);
        let mut message = err.message;
        while at.unit.base != 0 {
            let Some(o) = &at.owner else { break };
            if matches!(o.role, crate::frame::Role::Plan) {
                message = format!(
                    "in the inner plan ({} op {at_op} `{}`): {message}",
                    at.unit.program.flow_name(at.flow),
                    at_instr.opcode.mnemonic()
                );
            }
            let Some(i) = o.frame.code.ops.get(o.op as usize) else {
                break;
            };
            (at, at_op, at_instr) = (&o.frame, o.op, i);
        }
        let paused = err.code == crate::exec::PAUSED;
        let e = RunError::OpFailed {
            flow: at.unit.program.flow_name(at.flow),
            opcode: at_instr.opcode.mnemonic(),
            region: at.region,
            op: at_op,
            span: at_instr.span,
            code: err.code,
            message,
            payload: Box::new(err.payload),
        };
        if paused {
            // Calls in flight finish and are journaled first (`gate::pause`).
            self.begin_pause(e);
        } else {
            self.finish(Err(e));
        }
    }

    pub(super) fn start_call(
        &self,
        frame: &Arc<Frame<'r>>,
        op: u32,
        instr: &Instr,
        args: SmallVec<[Val; 4]>,
        sink: &Sink<'_, 'r>,
    ) -> Result<(), OpError> {
        let Imm::Callee(c) = instr.imm else {
            return Err(OpError::new("internal.call", "no callee"));
        };
        if frame.depth >= self.max_depth {
            return Err(OpError::new(
                "call.depth",
                format!(
                    "call depth limit ({}) exceeded calling @{}",
                    self.max_depth,
                    frame.unit.program.flow_name(c)
                ),
            ));
        }
        let tail = frame.tail_ms + instr.rem_ms.saturating_sub(instr.est_ms);
        let owner = Owner {
            frame: frame.clone(),
            op,
            role: Role::Call,
        };
        let child = self.new_frame(frame.unit, c, 0, Some(owner), tail, frame.depth + 1)?;
        let labels: SmallVec<[u64; 4]> = frame
            .code
            .data(instr)
            .iter()
            .map(|&s| frame.label(s))
            .collect();
        self.start_frame(&child, args, &labels, None, sink)
    }

    pub(super) fn start_control(
        &self,
        frame: &Arc<Frame<'r>>,
        op: u32,
        instr: &Instr,
        args: &[Val],
        sink: &Sink<'_, 'r>,
    ) -> Result<(), OpError> {
        let flow = frame
            .unit
            .program
            .flows
            .get(frame.flow as usize)
            .ok_or_else(|| OpError::new("internal.flow", "bad flow"))?;
        let tail = frame.tail_ms + instr.rem_ms.saturating_sub(instr.est_ms);
        let owner = |role| Owner {
            frame: frame.clone(),
            op,
            role,
        };
        let first = || {
            args.first()
                .ok_or_else(|| OpError::new("internal.operand", "missing operand"))
        };
        // By the op table's region shape: a new control op with a known
        // shape needs no edit here, an unknown shape fails to compile.
        match instr.opcode.info().regions {
            RegionSpec::IfElse | RegionSpec::Switch => {
                let r = first().and_then(|c| exec::select_branch(flow, instr, c));
                // Calls speculated for the arms not taken are discarded.
                self.spec_resolve(frame.id, op, r.as_ref().ok().copied());
                let r = r?;
                let child = self.new_frame(
                    frame.unit,
                    frame.flow,
                    r,
                    Some(owner(Role::Branch)),
                    tail,
                    frame.depth,
                )?;
                self.start_frame(&child, [], &[], Some(frame), sink)
            }
            RegionSpec::TryCatch => {
                let r = instr
                    .regions
                    .first()
                    .copied()
                    .ok_or_else(|| OpError::new("internal.region", "no try region"))?;
                let child = self.new_frame(
                    frame.unit,
                    frame.flow,
                    r,
                    Some(owner(Role::Try)),
                    tail,
                    frame.depth,
                )?;
                self.start_frame(&child, [], &[], Some(frame), sink)
            }
            RegionSpec::Loop => {
                let items = exec::loop_items(instr, first()?)?;
                let carried: Vec<Val> = args.iter().skip(1).cloned().collect();
                let n = items.len();
                if n == 0 {
                    let l = frame.label_of(frame.code.data(instr));
                    for i in 0..instr.n_results {
                        frame.add_label(instr.result.saturating_add(i), l);
                    }
                    let now = self.now();
                    if let Some(t) = self.complete_op(
                        frame.clone(),
                        op,
                        carried.into_iter().collect(),
                        now,
                        sink,
                    ) {
                        self.push(sink, t);
                    }
                    return Ok(());
                }
                let body = instr
                    .regions
                    .first()
                    .copied()
                    .ok_or_else(|| OpError::new("internal.region", "no loop body"))?;
                let state = Arc::new(LoopState {
                    remaining: AtomicUsize::new(n),
                    count: n,
                    last: OnceLock::new(),
                });
                // All iterations at once; iteration i+1 receives its carried
                // values from iteration i's `yield`, so only the carried
                // chain is sequential.
                let mut frames = Vec::with_capacity(n);
                let mut next: Option<Arc<Frame<'r>>> = None;
                for index in (0..n).rev() {
                    let role = Role::Iter {
                        state: state.clone(),
                        index,
                    };
                    let f = self.new_frame(
                        frame.unit,
                        frame.flow,
                        body,
                        Some(owner(role)),
                        tail,
                        frame.depth,
                    )?;
                    *f.next_iter.lock().unwrap_or_else(|e| e.into_inner()) = next.take();
                    next = Some(f.clone());
                    frames.push(f);
                }
                drop(next);
                frames.reverse();
                let mut carried = Some(carried);
                let data = frame.code.data(instr);
                let labels: SmallVec<[u64; 4]> = data
                    .first()
                    .into_iter()
                    .chain(data.first())
                    .chain(data.iter().skip(1))
                    .map(|&s| frame.label(s))
                    .collect();
                for (i, (f, item)) in frames.iter().zip(items).enumerate() {
                    let mut a = vec![item, Val::Num(i as f64)];
                    if i == 0 {
                        a.extend(carried.take().unwrap_or_default());
                    }
                    self.start_frame(f, a, &labels, Some(frame), sink)?;
                }
                Ok(())
            }
            RegionSpec::None => Err(OpError::new(
                "internal.control",
                format!("`{}` is not a control op", instr.opcode),
            )),
        }
    }
}
