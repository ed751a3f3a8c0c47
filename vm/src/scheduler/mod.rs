//! The dataflow scheduler.
//!
//! Workers (one per core by default) pull ready ops from their own
//! crossbeam-deque (LIFO), then from the global injector, then steal from
//! each other; idle workers spin briefly and park. An op is *ready* when the
//! atomic pending counter of its frame reaches zero. Workers run cheap ops
//! (pure ops, quick host effects) inline, start frames for calls and control
//! ops, and hand blocking ops (LLM calls, tools) to the I/O executor, whose
//! threads deliver results straight into the frame and push newly ready ops
//! to the injector. See `docs/runtime.md`.

mod io;
pub mod limits;
pub mod policy;

pub use policy::{Policy, PolicyQueue, UnknownPolicy};

use crate::error::RunError;
use crate::exec::{self, Class, OpError, Results};
use crate::frame::{Frame, LoopState, Owner, Role};
use crate::host::Host;
use crate::llm::{CancelToken, LlmBackend};
use crate::sync::{lock, wait_until, SPIN};
use crate::telemetry::{self, AttemptRecord, LlmInfo, OpEvent, RunSummary, Status, Track};
use crate::tx::{Deferred, Parent as TxParent, Tx};
use crate::value::Val;
use ais_ir::bytecode::{Imm, Instr, Program};
use ais_ir::Opcode;
use crossbeam::sync::{Parker, Unparker};
use crossbeam::utils::CachePadded;
use crossbeam_deque::{Injector, Steal, Stealer, Worker};
use io::{Job, Lane};
use serde_json::Value as Json;
use smallvec::{smallvec, SmallVec};
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How to run a program.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Entry flow (`Agent.flow` or a flow name); `None`: the flow marked `entry`.
    pub entry: Option<String>,
    /// Entry arguments by parameter name.
    pub args: Vec<(String, Json)>,
    /// Scheduler worker threads; `None`: one per available core.
    pub workers: Option<usize>,
    /// Order of queued blocking calls.
    pub policy: Policy,
    /// Concurrent calls per backend (LLM lane, tool lane); `None`: the LLM
    /// backend's own limit (`LlmBackend::concurrency`, 16 by default).
    pub concurrency: Option<usize>,
    /// Write per-op events as JSONL here.
    pub events_path: Option<PathBuf>,
    /// Write a Chrome trace (Perfetto) here.
    pub trace_path: Option<PathBuf>,
    /// Receives live progress while the run lasts (the CLI draws it).
    pub progress: Option<crate::progress::ProgressSink>,
    /// Keep per-op events in the report (needed for exports; on by default).
    pub record_events: bool,
    /// Deepest `flow.call` nesting before the call fails with `call.depth`.
    pub max_call_depth: u32,
    /// Most frames alive at once (calls, branches, loop iterations, ...)
    /// before the run stops with `LIMIT_FRAMES` (see `limits`).
    pub max_live_frames: usize,
    /// Journal every effect op's result here (and replay what an earlier
    /// attempt of the run completed); see `crate::journal`.
    pub journal: Option<Arc<crate::journal::Journal>>,
    /// Token, call, deadline and cost limits (`budget.*` errors).
    pub budget: crate::journal::Budget,
    /// Stop with `WATCHDOG_LOOP` when an LLM or tool call in a loop runs this many
    /// times with the same inputs (`None`: off; `aisc run` uses 3).
    pub watchdog: Option<u32>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            entry: None,
            args: Vec::new(),
            workers: None,
            policy: Policy::Fifo,
            concurrency: None,
            events_path: None,
            trace_path: None,
            progress: None,
            record_events: true,
            max_call_depth: 512,
            max_live_frames: limits::DEFAULT_MAX_LIVE_FRAMES,
            journal: None,
            budget: crate::journal::Budget::default(),
            watchdog: None,
        }
    }
}

/// The result of a run.
#[derive(Debug)]
pub struct RunReport {
    /// The entry flow's return value (`null` for a void flow), or why the run failed.
    pub outcome: Result<Json, RunError>,
    pub summary: RunSummary,
    /// Per-op events ordered by start time (empty when `record_events` is off).
    pub events: Vec<OpEvent>,
}

pub(crate) struct Task<'r> {
    frame: Arc<Frame<'r>>,
    op: u32,
    ready_ns: u64,
}

/// A blocking op handed to the I/O executor, between its start and its
/// settling.
struct Call<'r> {
    frame: Arc<Frame<'r>>,
    op: u32,
    ready_ns: u64,
    /// Worker that dispatched it.
    worker: u32,
    track: Track,
    start_ns: u64,
    jkey: Option<(String, String)>,
    llm: bool,
}

impl Call<'_> {
    /// The call's telemetry event, ending at `end_ns`.
    fn event(&self, end_ns: u64, status: Status, llm: Option<Box<LlmInfo>>) -> Option<OpEvent> {
        let instr = self.frame.code.ops.get(self.op as usize)?;
        Some(OpEvent {
            frame: self.frame.id,
            flow: self.frame.flow,
            op: self.op,
            opcode: instr.opcode,
            agent: self.frame.agent,
            track: self.track,
            worker: self.worker,
            ready_ns: self.ready_ns,
            start_ns: self.start_ns,
            end_ns,
            status,
            llm,
        })
    }
}

/// LLM calls started on a backend that does not wait (see
/// [`Run::pump_llm`]): what each is for, by token.
#[derive(Default)]
struct Calls<'r> {
    table: std::collections::HashMap<u64, Pending<'r>, TokenHash>,
    /// Trace tracks of finished calls, reused so the trace shows at most
    /// `concurrency` LLM tracks.
    free_slots: Vec<u32>,
    slots: u32,
    /// Events of calls dropped before they started (the run had ended).
    events: Vec<OpEvent>,
}

/// A started LLM call: its op, its request (for reading the reply) and,
/// for a scheduled reply, the reply and the delay it was due after.
struct Pending<'r> {
    call: Call<'r>,
    req: crate::llm::LlmRequest,
    scheduled: Option<(
        Duration,
        Result<crate::llm::LlmResponse, crate::llm::LlmError>,
    )>,
}

/// Tokens are distinct sequential numbers: hashing them is a multiply.
#[derive(Clone, Copy, Default)]
struct TokenHash;

impl std::hash::BuildHasher for TokenHash {
    type Hasher = TokenHasher;
    fn build_hasher(&self) -> TokenHasher {
        TokenHasher(0)
    }
}

struct TokenHasher(u64);

impl std::hash::Hasher for TokenHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The outcome of one LLM call, for the completion thread.
struct Outcome {
    token: u64,
    result: Result<crate::llm::LlmResponse, crate::llm::LlmError>,
    attempts: Vec<crate::llm::Attempt>,
}

/// Where LLM outcomes wait for the completion thread: replies of started
/// calls as they arrive, scheduled replies until they are due. Shared with
/// the backends' reply callbacks, so it borrows nothing from the run.
#[derive(Default)]
struct Inbox {
    state: Mutex<InboxState>,
    cv: Condvar,
}

#[derive(Default)]
struct InboxState {
    arrived: Vec<Outcome>,
    /// Scheduled replies by due time (the replies wait in the calls table).
    due: std::collections::BinaryHeap<std::cmp::Reverse<(Instant, u64)>>,
    stop: bool,
}

/// What the completion thread takes at once.
#[derive(Default)]
struct Ready {
    arrived: Vec<Outcome>,
    due: Vec<u64>,
}

impl Inbox {
    fn arrive(&self, o: Outcome) {
        lock(&self.state).arrived.push(o);
        self.cv.notify_one();
    }

    /// Calls are due at these times; wakes the completion thread only when
    /// one is earlier than everything it waits for (a fan-out of scheduled
    /// calls costs one wake-up, not one per call).
    fn schedule_all(&self, due: Vec<(Instant, u64)>) {
        let mut g = lock(&self.state);
        let earliest = g.due.peek().map(|std::cmp::Reverse((t, _))| *t);
        let first = due.iter().map(|(t, _)| *t).min();
        g.due.extend(due.into_iter().map(std::cmp::Reverse));
        drop(g);
        if let Some(first) = first {
            if earliest.is_none_or(|t| first < t) {
                self.cv.notify_one();
            }
        }
    }

    fn stop(&self) {
        lock(&self.state).stop = true;
        self.cv.notify_all();
    }

    /// Blocks until outcomes are ready (arrived, or due); `None` once
    /// stopped. `soon` is called once when a scheduled reply is due within
    /// [`SPIN`] (the wait then yields instead of sleeping, to be on time).
    fn take(&self, soon: &dyn Fn()) -> Option<Ready> {
        let mut g = lock(&self.state);
        let mut warned = false;
        loop {
            if g.stop {
                return None;
            }
            let now = Instant::now();
            let mut ready = Ready {
                arrived: std::mem::take(&mut g.arrived),
                due: Vec::new(),
            };
            while let Some(std::cmp::Reverse((at, token))) = g.due.peek().copied() {
                if at > now {
                    break;
                }
                g.due.pop();
                ready.due.push(token);
            }
            if !ready.arrived.is_empty() || !ready.due.is_empty() {
                return Some(ready);
            }
            let next = g.due.peek().map(|std::cmp::Reverse((at, _))| *at);
            if !warned && next.is_some_and(|at| at.saturating_duration_since(now) <= SPIN) {
                warned = true;
                drop(g);
                soon();
                g = lock(&self.state);
                continue;
            }
            g = wait_until(&self.state, &self.cv, g, next);
        }
    }
}

enum Sink<'a, 'r> {
    Local(&'a Worker<Task<'r>>),
    Global,
}

struct Sleep {
    idle: Mutex<Vec<usize>>,
    n_idle: AtomicUsize,
    unparkers: Vec<Unparker>,
}

impl Sleep {
    fn notify_one(&self) {
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

    fn notify_all(&self) {
        {
            let mut g = lock(&self.idle);
            g.clear();
            self.n_idle.store(0, Ordering::SeqCst);
        }
        for u in &self.unparkers {
            u.unpark();
        }
    }

    fn register(&self, me: usize) {
        let mut g = lock(&self.idle);
        if !g.contains(&me) {
            g.push(me);
        }
        self.n_idle.store(g.len(), Ordering::SeqCst);
    }

    fn unregister(&self, me: usize) {
        let mut g = lock(&self.idle);
        g.retain(|&x| x != me);
        self.n_idle.store(g.len(), Ordering::SeqCst);
    }
}

struct Run<'r> {
    program: &'r Program,
    backend: &'r dyn LlmBackend,
    host: &'r dyn Host,
    injector: Injector<Task<'r>>,
    stealers: Vec<Stealer<Task<'r>>>,
    sleep: Sleep,
    halted: AtomicBool,
    outcome: Mutex<Option<Result<Json, RunError>>>,
    done: (Mutex<bool>, Condvar),
    cancel: CancelToken,
    llm: Lane<'r>,
    tool: Lane<'r>,
    /// The backend starts calls without waiting: no I/O thread per LLM
    /// call; `pump_llm` starts them and one completion thread settles them.
    llm_async: bool,
    /// A scheduled reply is due within [`SPIN`]: idle workers yield
    /// instead of parking, so the ops it makes ready start on time (waking
    /// a parked thread on a virtual machine takes 0.1–2 ms).
    reply_soon: AtomicBool,
    llm_limit: usize,
    calls: Mutex<Calls<'r>>,
    next_call: AtomicU64,
    inbox: Arc<Inbox>,
    start: Instant,
    next_frame: AtomicU64,
    record: bool,
    max_depth: u32,
    frames: &'r limits::FrameCount,
    done_ops: Vec<CachePadded<AtomicU64>>,
    end_ns: AtomicU64,
    /// `on` handlers still running, and the entry flow's result once it is
    /// done (the run ends when both are settled).
    handlers: Mutex<(usize, Option<Json>)>,
    journal: Option<&'r crate::journal::Journal>,
    budget: &'r crate::journal::Budget,
    /// LLM calls, tokens and micro-dollars used by the run (with earlier attempts).
    used: [AtomicU64; 3],
    watchdog: Option<crate::journal::watchdog::Watchdog>,
    /// Per agent: LLM calls and tokens of this attempt.
    agent_used: Vec<[AtomicU64; 2]>,
}

struct WorkerCtx<'r> {
    id: u32,
    local: Worker<Task<'r>>,
    events: Vec<OpEvent>,
    busy_ns: u64,
    /// Calls queued on the LLM / tool lane whose thread is not woken yet.
    unwoken: [usize; 2],
    /// LLM calls dispatched and not yet started (backends that start calls
    /// without waiting).
    llm_batch: Vec<Job<'r>>,
    credit: Option<Credit<'r>>,
}

/// Ops a worker completed in one frame and has not yet counted in the
/// frame's shared `remaining`: one atomic update per run of ops in a frame
/// instead of one per op (the counter is contended between workers).
/// Settled when the worker moves to another frame and before it looks for
/// work elsewhere, so a frame's completion is never held back by an idle
/// worker.
struct Credit<'r> {
    frame: Arc<Frame<'r>>,
    ops: usize,
}

struct WorkerStats {
    events: Vec<OpEvent>,
    busy_ns: u64,
    idle_ns: u64,
    life_ns: u64,
}

impl<'r> Run<'r> {
    fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn halted(&self) -> bool {
        self.halted.load(Ordering::Acquire)
    }

    fn agent_name(&self, a: u32) -> &'r str {
        self.program
            .agents
            .get(a as usize)
            .map_or("?", |a| a.name.as_str())
    }

    fn push(&self, sink: &Sink<'_, 'r>, t: Task<'r>) {
        match sink {
            Sink::Local(w) => w.push(t),
            Sink::Global => self.injector.push(t),
        }
    }

    fn has_work(&self) -> bool {
        !self.injector.is_empty() || self.stealers.iter().any(|s| !s.is_empty())
    }

    /// Ends the run (first outcome wins): stops workers, closes the I/O
    /// lanes and cancels in-flight calls.
    fn finish(&self, r: Result<Json, RunError>) {
        {
            let mut o = lock(&self.outcome);
            if o.is_some() {
                return;
            }
            *o = Some(r);
        }
        self.end_ns.store(self.now(), Ordering::SeqCst);
        self.halted.store(true, Ordering::Release);
        self.cancel.cancel();
        // Workers see `halted` and exit; the calling thread (worker 0)
        // then closes the lanes.
        self.sleep.notify_all();
        let (m, cv) = &self.done;
        *lock(m) = true;
        cv.notify_all();
    }

    /// Teardown after `finish`: drop queued calls, let threads exit.
    fn shut_down(&self) {
        self.llm.close();
        self.tool.close();
        self.inbox.stop();
        self.sleep.notify_all();
    }

    fn new_frame(
        &self,
        flow: u32,
        region: u32,
        owner: Option<Owner<'r>>,
        tail_ms: u64,
        depth: u32,
    ) -> Result<Arc<Frame<'r>>, OpError> {
        let f = self
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
        let id = self.next_frame.fetch_add(1, Ordering::Relaxed);
        Ok(Arc::new(Frame::new(
            id,
            flow,
            region,
            f.agent,
            code,
            owner,
            tail_ms,
            depth,
            self.frames,
            tx,
        )))
    }

    /// Makes the frame's roots ready and delivers its arguments (slots
    /// `0..`) and captures (read from `parent`).
    fn start_frame(
        &self,
        frame: &Arc<Frame<'r>>,
        args: impl IntoIterator<Item = Val>,
        parent: Option<&Frame<'r>>,
        sink: &Sink<'_, 'r>,
    ) -> Result<(), OpError> {
        let now = self.now();
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
            self.deliver(frame, i as u32, v, now, sink);
        }
        if let Some(p) = parent {
            let base = frame.code.n_args;
            for (k, &ps) in frame.code.captures.iter().enumerate() {
                let v = p
                    .slot(ps)
                    .cloned()
                    .ok_or_else(|| OpError::new("internal.capture", "captured value not ready"))?;
                self.deliver(frame, base + k as u32, v, now, sink);
            }
        }
        Ok(())
    }

    fn deliver(&self, frame: &Arc<Frame<'r>>, slot: u32, v: Val, now: u64, sink: &Sink<'_, 'r>) {
        let Some(cell) = frame.slots.get(slot as usize) else {
            return;
        };
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
    fn complete_op(
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
    fn complete_op_counted(
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

    /// Counts a worker's held completions into their frame's `remaining`;
    /// completes the frame (and its owners) if they were its last ops.
    fn settle_credit(&self, cr: Credit<'r>, now: u64, sink: &Sink<'_, 'r>) {
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
    fn flush_credit(&self, cx: &mut WorkerCtx<'r>) -> bool {
        let Some(cr) = cx.credit.take() else {
            return false;
        };
        let now = self.now();
        self.settle_credit(cr, now, &Sink::Local(&cx.local));
        !cx.local.is_empty()
    }

    /// A frame completed: the owner op's completion, if any.
    fn frame_done(&self, frame: &Arc<Frame<'r>>) -> Option<(Arc<Frame<'r>>, u32, Results)> {
        if frame.is_cancelled() {
            return None;
        }
        let ys = frame.yielded.get().cloned().unwrap_or_default();
        let Some(owner) = &frame.owner else {
            // The entry flow is done; the run ends once no handler runs.
            let v = ys.first().map_or(Json::Null, Val::to_json);
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
        match &owner.role {
            Role::Call => {
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
                    let committed = tx.commit().map_err(OpError::from).and_then(|c| {
                        // Journaled now that their effects happened.
                        for d in &c.journal {
                            if let Some(j) = self.journal {
                                j.record(&d.key, d.op, &d.hash, &d.results, 0)
                                    .map_err(|e| OpError::new(e.code, e.message))?;
                            }
                        }
                        Ok(c.messages)
                    });
                    match committed {
                        Ok(delivered) => {
                            for m in &delivered {
                                self.start_handlers_for(&pf, owner.op, m, &Sink::Global);
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
    fn start_handlers(&self, frame: &Arc<Frame<'r>>, op: u32, args: &[Val], sink: &Sink<'_, 'r>) {
        let message = exec::message_of(self.agent_name(frame.agent), args);
        self.start_handlers_for(frame, op, &message, sink);
    }

    fn start_handlers_for(
        &self,
        frame: &Arc<Frame<'r>>,
        op: u32,
        message: &crate::host::Message,
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
                .new_frame(d.flow, 0, Some(owner), 0, frame.depth.saturating_add(1))
                .and_then(|child| {
                    self.start_frame(&child, d.args.into_iter().map(Val::from_json), None, sink)
                });
            if let Err(e) = started {
                self.handler_done();
                self.fail(frame, op, e, sink);
            }
        }
    }

    /// A handler frame completed: end the run if it was the last thing running.
    fn handler_done(&self) {
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
    fn fail(&self, frame: &Arc<Frame<'r>>, op: u32, err: OpError, sink: &Sink<'_, 'r>) {
        if self.halted() || frame.is_cancelled() {
            return;
        }
        let Some(instr) = frame.code.ops.get(op as usize) else {
            return;
        };
        let value = err.to_value(self.program, frame.flow, instr);
        let mut f = frame.clone();
        // A resource limit ends the run: catching it would let it grow on.
        while !limits::is_fatal(&err.code) {
            if f.is_try()
                && f.settled
                    .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
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
                            let child = self.new_frame(pf.flow, c, Some(owner), tail, pf.depth)?;
                            self.start_frame(&child, [value.clone()], Some(&pf), sink)
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
        self.finish(Err(RunError::OpFailed {
            flow: self.program.flow_name(frame.flow),
            opcode: instr.opcode.mnemonic(),
            region: frame.region,
            op,
            span: instr.span,
            code: err.code,
            message: err.message,
            payload: Box::new(err.payload),
        }));
    }

    /// Runs one ready op; returns the next op to run on this worker, if
    /// its completion made one ready.
    fn execute(&self, t: Task<'r>, cx: &mut WorkerCtx<'r>) -> Option<Task<'r>> {
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
        for &s in frame.code.data(instr) {
            match frame.slot(s) {
                Some(v) => args.push(v.clone()),
                None => {
                    let e = OpError::new("internal.operand", "operand not ready");
                    self.fail(&frame, op, e, &sink);
                    return None;
                }
            }
        }
        let class = exec::class(instr.opcode);
        let jkey = self.journal_key(&frame, op, instr, class, &args);
        let replayed = match (&jkey, self.journal) {
            (Some((k, h)), Some(j)) => self.replay(j, k, h, instr, &args),
            _ => None,
        };
        if replayed.is_none() && self.over_budget(&frame, op, instr, class) {
            return None;
        }
        if self.watchdog_tripped(&frame, op, instr, class, &args) {
            return None;
        }
        // `Some(results)`: the op is done, deliver them; `None`: it
        // completes later (frames it started, or the I/O executor).
        let r: Result<Option<Results>, OpError> = match class {
            _ if replayed.is_some() => {
                let r = replayed.unwrap_or(Ok(Results::new())).map(Some);
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
            Class::Pure => exec::eval_pure(self.program, instr, &args).map(|v| Some(smallvec![v])),
            Class::Inline => {
                let host: &dyn Host = match &frame.tx {
                    Some(tx) => tx.as_ref(),
                    None => self.host,
                };
                let r = exec::exec_inline(host, self.agent_name(frame.agent), instr, &args)
                    .and_then(|res| match (&frame.tx, &jkey) {
                        // In a `try` body: journaled when the body commits.
                        (Some(tx), Some((key, hash))) => {
                            tx.defer_journal(Deferred {
                                key: key.clone(),
                                op: instr.opcode.mnemonic(),
                                hash: hash.clone(),
                                results: res.to_vec(),
                            });
                            Ok(res)
                        }
                        _ => self
                            .journal_record(jkey.as_ref(), instr, &res, 0)
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
                let lane = if class == Class::Llm {
                    &self.llm
                } else {
                    &self.tool
                };
                let job = Job {
                    frame,
                    op,
                    ready_ns,
                    worker: cx.id,
                    args,
                };
                if class == Class::Llm && self.llm_async {
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
                        for (k, v) in args.iter().enumerate() {
                            self.deliver(&next, 2 + k as u32, v.clone(), now, &sink);
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
        let (id, flow, agent) = (frame.id, frame.flow, frame.agent);
        let mut next = None;
        let status = match r {
            Ok(Some(results)) => {
                next =
                    self.complete_op_counted(frame, op, results, end, &sink, Some(&mut cx.credit));
                Status::Ok
            }
            Ok(None) => Status::Ok,
            Err(e) => {
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
            cx.events.push(OpEvent {
                frame: id,
                flow,
                op,
                opcode: instr.opcode,
                agent,
                track: Track::Worker(cx.id),
                worker: cx.id,
                ready_ns,
                start_ns: start,
                end_ns: end,
                status,
                llm: None,
            });
        }
        // Work left in the local queue: let an idle worker steal it (there
        // is none to wake with one worker; skip the fence).
        if self.stealers.len() > 1 && !cx.local.is_empty() {
            self.sleep.notify_one();
        }
        next
    }

    /// The journal key and input hash of an effect op (`None`: not journaled).
    fn journal_key(
        &self,
        frame: &Frame<'r>,
        op: u32,
        instr: &Instr,
        class: Class,
        args: &[Val],
    ) -> Option<(String, String)> {
        self.journal?;
        if !matches!(class, Class::Inline | Class::Llm | Class::Tool)
            || instr.opcode == Opcode::Fence
        {
            return None;
        }
        Some((
            crate::journal::op_key(frame, op),
            crate::journal::input_hash(args),
        ))
    }

    /// An earlier attempt's results for this op: `Some(Ok)` to deliver,
    /// `Some(Err)` for a side effect in doubt, `None` to execute it.
    fn replay(
        &self,
        j: &crate::journal::Journal,
        key: &str,
        hash: &str,
        instr: &Instr,
        args: &[Val],
    ) -> Option<Result<Results, OpError>> {
        use crate::journal::Replay;
        match j.lookup(key, hash) {
            Replay::Done(vs) => {
                let mut r: Results = vs.into_iter().collect();
                exec::pad_ord(instr, &mut r);
                Some(Ok(r))
            }
            Replay::Miss => None,
            Replay::InDoubt => {
                let tool = match &instr.imm {
                    Imm::Tool(t) => t.to_string(),
                    _ => args.first().map(Val::text).unwrap_or_default(),
                };
                if j.is_idempotent(&tool) {
                    return None;
                }
                let mut e = OpError::new(
                    "journal.in_doubt",
                    format!(
                        "tool `{tool}` was started by an earlier attempt of this run and never recorded as completed; it is not declared idempotent, so it is not repeated"
                    ),
                );
                e.payload = serde_json::json!({"tool": tool, "idempotency_key": key});
                Some(Err(e))
            }
        }
    }

    /// Durably records an effect op's results before its consumers fire.
    fn journal_record(
        &self,
        jkey: Option<&(String, String)>,
        instr: &Instr,
        res: &[Val],
        tokens: u64,
    ) -> Result<(), OpError> {
        match (self.journal, jkey) {
            (Some(j), Some((k, h))) => j
                .record(k, instr.opcode.mnemonic(), h, res, tokens)
                .map_err(|e| OpError::new(e.code, e.message)),
            _ => Ok(()),
        }
    }

    /// The loop watchdog (see `crate::journal::watchdog`).
    fn watchdog_tripped(
        &self,
        frame: &Frame<'r>,
        op: u32,
        instr: &Instr,
        class: Class,
        args: &[Val],
    ) -> bool {
        let Some(w) = &self.watchdog else {
            return false;
        };
        if !matches!(class, Class::Llm | Class::Tool) {
            return false;
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
        self.finish(Err(RunError::OpFailed {
            flow: self.program.flow_name(frame.flow),
            opcode: instr.opcode.mnemonic(),
            region: frame.region,
            op,
            span: instr.span,
            code: "WATCHDOG_LOOP".into(),
            message: format!(
                "`{}` ran {n} times in a loop with the same inputs: the loop makes no progress",
                instr.opcode.mnemonic()
            ),
            payload: Box::new(serde_json::json!({"repeats": n, "limit": n})),
        }));
        true
    }

    /// Checks the run's budget before an effect op starts; when exceeded,
    /// stops the run (not catchable) with `budget.<what>` and `{limit, used}`.
    fn over_budget(&self, frame: &Frame<'r>, op: u32, instr: &Instr, class: Class) -> bool {
        let b = self.budget;
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
            let tokens = self.used[1].load(Ordering::SeqCst);
            let cost = self.used[2].load(Ordering::SeqCst) as f64 / 1e6;
            if let Some(l) = b.tokens.filter(|&l| tokens >= l) {
                hit = Some(("tokens", l.into(), tokens.into()));
            } else if let Some(l) = b.cost_usd.filter(|&l| cost >= l) {
                hit = Some(("cost_usd", l.into(), cost.into()));
            } else if let Some(l) = b.llm_calls {
                let calls = self.used[0].fetch_add(1, Ordering::SeqCst) + 1;
                if calls > l {
                    hit = Some(("llm_calls", l.into(), (calls - 1).into()));
                }
            } else {
                self.used[0].fetch_add(1, Ordering::SeqCst);
            }
        }
        if hit.is_none() && class == Class::Llm {
            let name = self.agent_name(frame.agent);
            if let (Some(l), Some(u)) = (b.agent(name), self.agent_used.get(frame.agent as usize)) {
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
        self.finish(Err(RunError::OpFailed {
            flow: self.program.flow_name(frame.flow),
            opcode: instr.opcode.mnemonic(),
            region: frame.region,
            op,
            span: instr.span,
            code: format!("budget.{what}"),
            message: format!(
                "the run's {what} budget is exhausted (limit {limit}, used {used}); completed ops are journaled: resume with a higher limit"
            ),
            payload: Box::new(serde_json::json!({
                "limit": limit,
                "used": used,
                "budget": what,
                "agent": self.agent_name(frame.agent),
            })),
        }));
        true
    }

    fn start_call(
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
                    self.program.flow_name(c)
                ),
            ));
        }
        let tail = frame.tail_ms + instr.rem_ms.saturating_sub(instr.est_ms);
        let owner = Owner {
            frame: frame.clone(),
            op,
            role: Role::Call,
        };
        let child = self.new_frame(c, 0, Some(owner), tail, frame.depth + 1)?;
        self.start_frame(&child, args, None, sink)
    }

    fn start_control(
        &self,
        frame: &Arc<Frame<'r>>,
        op: u32,
        instr: &Instr,
        args: &[Val],
        sink: &Sink<'_, 'r>,
    ) -> Result<(), OpError> {
        let flow = self
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
        match instr.opcode {
            Opcode::If | Opcode::Switch => {
                let r = exec::select_branch(flow, instr, first()?)?;
                let child =
                    self.new_frame(frame.flow, r, Some(owner(Role::Branch)), tail, frame.depth)?;
                self.start_frame(&child, [], Some(frame), sink)
            }
            Opcode::TryCatch => {
                let r = instr
                    .regions
                    .first()
                    .copied()
                    .ok_or_else(|| OpError::new("internal.region", "no try region"))?;
                let child =
                    self.new_frame(frame.flow, r, Some(owner(Role::Try)), tail, frame.depth)?;
                self.start_frame(&child, [], Some(frame), sink)
            }
            Opcode::Loop => {
                let items = exec::loop_items(instr, first()?)?;
                let carried: Vec<Val> = args.iter().skip(1).cloned().collect();
                let n = items.len();
                if n == 0 {
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
                    let f =
                        self.new_frame(frame.flow, body, Some(owner(role)), tail, frame.depth)?;
                    *f.next_iter.lock().unwrap_or_else(|e| e.into_inner()) = next.take();
                    next = Some(f.clone());
                    frames.push(f);
                }
                drop(next);
                frames.reverse();
                let mut carried = Some(carried);
                for (i, (f, item)) in frames.iter().zip(items).enumerate() {
                    let mut a = vec![item, Val::Num(i as f64)];
                    if i == 0 {
                        a.extend(carried.take().unwrap_or_default());
                    }
                    self.start_frame(f, a, Some(frame), sink)?;
                }
                Ok(())
            }
            other => Err(OpError::new(
                "internal.control",
                format!("`{other}` is not a control op"),
            )),
        }
    }

    /// Wakes I/O threads for the calls this worker queued.
    fn wake_io(&self, cx: &mut WorkerCtx<'r>) {
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

    fn worker_loop(&self, mut cx: WorkerCtx<'r>, parker: Parker) -> WorkerStats {
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

    fn steal(&self, cx: &WorkerCtx<'r>) -> Option<Task<'r>> {
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

    fn io_loop(&self, lane: &Lane<'r>, llm: bool, idx: u32) -> Vec<OpEvent> {
        let mut events = Vec::new();
        while let Some(job) = lane.pop() {
            let ev = self.run_job(job, llm, idx);
            lane.finished();
            if let Some(e) = ev {
                events.push(e);
            }
        }
        events
    }

    fn run_job(&self, job: Job<'r>, llm: bool, idx: u32) -> Option<OpEvent> {
        let Job {
            frame,
            op,
            ready_ns,
            worker,
            args,
        } = job;
        let instr = frame.code.ops.get(op as usize)?;
        let track = if llm {
            Track::Llm(idx)
        } else {
            Track::Tool(idx)
        };
        let start = self.now();
        let mut call = Call {
            frame,
            op,
            ready_ns,
            worker,
            track,
            start_ns: start,
            jkey: None,
            llm,
        };
        if self.halted() || call.frame.is_cancelled() {
            return self
                .record
                .then(|| call.event(start, Status::Cancelled, None))
                .flatten();
        }
        let frame = &call.frame;
        let agent = self.agent_name(frame.agent);
        let jkey = self.journal_key(frame, op, instr, exec::class(instr.opcode), &args);
        if let (Some(j), Some((k, h)), false) = (self.journal, &jkey, llm) {
            if let Err(e) = j.intent(k, instr.opcode.mnemonic(), h) {
                self.fail(frame, op, OpError::new(e.code, e.message), &Sink::Global);
                return None;
            }
        }
        let (result, info) = if llm {
            let req = exec::llm_request(agent, instr, &args);
            // Every attempt (retries included) goes into the op's telemetry.
            let log = crate::llm::AttemptLog::new();
            let result = self.backend.complete_observed(&req, &self.cancel, &log);
            self.llm_outcome(&req, result, log.attempts())
        } else {
            (
                exec::exec_tool(self.host, agent, instr, &args, &self.cancel),
                None,
            )
        };
        call.jkey = jkey;
        self.settle(call, result, info)
    }

    /// An LLM reply (or failure) as the op's value and its telemetry.
    fn llm_outcome(
        &self,
        req: &crate::llm::LlmRequest,
        result: Result<crate::llm::LlmResponse, crate::llm::LlmError>,
        attempts: Vec<crate::llm::Attempt>,
    ) -> (Result<Val, OpError>, Option<Box<LlmInfo>>) {
        // Failed and rejected attempts spent tokens too.
        let usage = crate::llm::call_usage(result.as_ref().ok(), &attempts);
        let attempts: Vec<AttemptRecord> =
            attempts.iter().map(AttemptRecord::from_attempt).collect();
        match result {
            Ok(resp) => {
                let info = Box::new(LlmInfo {
                    model: resp.model.clone(),
                    input_tokens: usage.prompt_tokens,
                    output_tokens: usage.completion_tokens,
                    simulated: resp.simulated,
                    attempts,
                });
                (exec::llm_value(req, &resp), Some(info))
            }
            Err(e) => {
                let info = Box::new(LlmInfo {
                    model: req.model.clone().unwrap_or_default(),
                    input_tokens: usage.prompt_tokens,
                    output_tokens: usage.completion_tokens,
                    simulated: self.backend.is_simulated(),
                    attempts,
                });
                (Err(OpError::from(e)), Some(info))
            }
        }
    }

    /// Finishes a blocking op whose call has returned: journal, usage,
    /// delivery of the value (or failure), and its event.
    fn settle(
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
        let result = result.and_then(|v| {
            self.journal_record(jkey.as_ref(), instr, std::slice::from_ref(&v), tokens)
                .map(|()| v)
        });
        if let (Ok(_), Some(i)) = (&result, &info) {
            self.used[1].fetch_add(tokens, Ordering::SeqCst);
            if let Some(a) = self.agent_used.get(frame.agent as usize) {
                a[1].fetch_add(tokens, Ordering::SeqCst);
            }
            let c = self
                .budget
                .cost_micro_usd(&i.model, i.input_tokens, i.output_tokens);
            self.used[2].fetch_add(c, Ordering::SeqCst);
        }
        let status = match result {
            Ok(v) => {
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
                if let (Some(j), Some((k, h)), false) = (self.journal, jkey, llm) {
                    let _ = j.failed(k, instr.opcode.mnemonic(), h);
                }
                self.fail(frame, op, e, &Sink::Global);
                Status::Failed
            }
        };
        if !self.injector.is_empty() {
            self.sleep.notify_one();
        }
        if self.record {
            call.event(end, status, info)
        } else {
            None
        }
    }

    /// Starts queued LLM calls while the backend's limit allows (backends
    /// that [start without waiting](LlmBackend::starts_without_waiting)).
    /// Called by workers after queuing calls and by the completion thread
    /// after each reply.
    fn pump_llm(&self) {
        let mut jobs = Vec::new();
        while let Some(job) = self.llm.try_pop(self.llm_limit) {
            jobs.push(job);
        }
        if !jobs.is_empty() {
            self.start_llms(jobs);
        }
    }

    /// A worker's burst of LLM calls: those the limit allows start now
    /// (together), the rest wait in the policy queue for a finishing call
    /// (the pump after queuing closes the race with one).
    fn dispatch_llm(&self, batch: Vec<Job<'r>>) {
        let mut now = Vec::with_capacity(batch.len());
        let mut queued = false;
        let mut free = self.llm.try_reserve(self.llm_limit, batch.len());
        for job in batch {
            if free > 0 {
                free -= 1;
                now.push(job);
                continue;
            }
            queued = true;
            let (prio, agent) = job
                .frame
                .code
                .ops
                .get(job.op as usize)
                .map_or((0, job.frame.agent), |i| {
                    (job.frame.tail_ms.saturating_add(i.rem_ms), job.frame.agent)
                });
            self.llm.push_quiet(job, prio, agent);
        }
        if !now.is_empty() {
            self.start_llms(now);
        }
        if queued {
            self.pump_llm();
        }
    }

    /// Registers a batch of calls (one lock for the table, one for the
    /// inbox): scheduled replies go to the inbox, the others to the
    /// backend's `start_many`.
    fn start_llms(&self, jobs: Vec<Job<'r>>) {
        let mut prepared = Vec::with_capacity(jobs.len());
        for job in jobs {
            if let Some(p) = self.prepare_llm(job) {
                prepared.push(p);
            }
        }
        if prepared.is_empty() {
            return;
        }
        let mut due = Vec::new();
        let mut started = Vec::new();
        {
            let mut g = lock(&self.calls);
            for (token, mut pending) in prepared {
                let slot = g.free_slots.pop().unwrap_or_else(|| {
                    g.slots += 1;
                    g.slots - 1
                });
                pending.call.track = Track::Llm(slot);
                match &pending.scheduled {
                    Some((delay, _)) => due.push((Instant::now() + *delay, token)),
                    None => started.push((token, pending.req.clone())),
                }
                g.table.insert(token, pending);
            }
        }
        if !due.is_empty() {
            self.inbox.schedule_all(due);
        }
        if started.is_empty() {
            return;
        }
        let calls = started
            .into_iter()
            .map(|(token, req)| {
                let inbox = Arc::clone(&self.inbox);
                let done: crate::llm::OnDone = Box::new(move |result, attempts| {
                    // After the run ends nobody takes it; it is dropped.
                    inbox.arrive(Outcome {
                        token,
                        result,
                        attempts,
                    });
                });
                (req, self.cancel.clone(), done)
            })
            .collect();
        self.backend.start_many(calls);
    }

    /// One call's request and, when the backend has its reply at once, the
    /// reply; `None` when the run has ended (the call is cancelled).
    fn prepare_llm(&self, job: Job<'r>) -> Option<(u64, Pending<'r>)> {
        let Job {
            frame,
            op,
            ready_ns,
            worker,
            args,
        } = job;
        let Some(instr) = frame.code.ops.get(op as usize) else {
            self.llm.finished();
            return None;
        };
        let start_ns = self.now();
        let mut call = Call {
            frame,
            op,
            ready_ns,
            worker,
            track: Track::Llm(0),
            start_ns,
            jkey: None,
            llm: true,
        };
        if self.halted() || call.frame.is_cancelled() {
            if let Some(ev) = self
                .record
                .then(|| call.event(start_ns, Status::Cancelled, None))
                .flatten()
            {
                lock(&self.calls).events.push(ev);
            }
            self.llm.finished();
            return None;
        }
        let req = exec::llm_request(self.agent_name(call.frame.agent), instr, &args);
        call.jkey = self.journal_key(&call.frame, op, instr, Class::Llm, &args);
        let token = self.next_call.fetch_add(1, Ordering::Relaxed);
        let scheduled = self.backend.scheduled_reply(&req);
        Some((
            token,
            Pending {
                call,
                req,
                scheduled,
            },
        ))
    }

    /// The completion thread of started LLM calls: settles each reply,
    /// then starts queued calls the freed slot allows. Returns the events
    /// of the calls it settled (and of those cancelled by the run's end).
    fn replies_loop(&self) -> Vec<OpEvent> {
        let mut events = Vec::new();
        let soon = || {
            self.reply_soon.store(true, Ordering::Release);
            self.sleep.notify_all();
        };
        while let Some(ready) = self.inbox.take(&soon) {
            let settled_due = !ready.due.is_empty();
            let outcomes = ready.arrived.into_iter().map(|o| (o.token, Some(o)));
            let due = ready.due.into_iter().map(|t| (t, None));
            for (token, outcome) in outcomes.chain(due) {
                if let Some(ev) = self.settle_llm(token, outcome) {
                    events.push(ev);
                }
            }
            if settled_due {
                self.reply_soon.store(false, Ordering::Release);
            }
        }
        // The run is over: calls still out are cancelled.
        let now = self.now();
        let mut g = lock(&self.calls);
        events.append(&mut g.events);
        for (_, Pending { call: c, .. }) in g.table.drain() {
            self.llm.finished();
            if self.record {
                events.extend(c.event(now, Status::Cancelled, None));
            }
        }
        events
    }

    /// Settles call `token` with its outcome (a scheduled reply's is in
    /// the table), then starts queued calls the freed slot allows.
    fn settle_llm(&self, token: u64, outcome: Option<Outcome>) -> Option<OpEvent> {
        let pending = {
            let mut g = lock(&self.calls);
            let pending = g.table.remove(&token);
            if let Some(Pending {
                call:
                    Call {
                        track: Track::Llm(slot),
                        ..
                    },
                ..
            }) = &pending
            {
                g.free_slots.push(*slot);
            }
            pending
        }?;
        let (result, attempts) = match (outcome, pending.scheduled) {
            (Some(o), _) => (o.result, o.attempts),
            (None, Some((delay, result))) => {
                let attempt = crate::llm::Attempt::single(self.backend.name(), &result, delay);
                (result, vec![attempt])
            }
            (None, None) => {
                // Not reachable: only scheduled calls are settled by token.
                self.llm.finished();
                return None;
            }
        };
        let (value, info) = self.llm_outcome(&pending.req, result, attempts);
        let ev = self.settle(pending.call, value, info);
        self.llm.finished();
        self.pump_llm();
        ev
    }

    /// True when nothing can make progress: every worker parked, no queued
    /// or running job, no queued task.
    fn stalled(&self, workers: usize) -> bool {
        self.sleep.n_idle.load(Ordering::SeqCst) >= workers
            && !self.has_work()
            && self.llm.busy.load(Ordering::SeqCst) == 0
            && self.tool.busy.load(Ordering::SeqCst) == 0
            && self.llm.queued() == 0
            && self.tool.queued() == 0
    }
}

/// How many ops of a class can possibly be in flight at once, when that is
/// bounded by the program's shape: with no loop, no call and no handler every
/// op runs at most once. `None` when unbounded.
fn max_in_flight(program: &Program, pred: impl Fn(Opcode) -> bool) -> Option<usize> {
    let ops = || {
        program
            .flows
            .iter()
            .flat_map(|f| f.regions.iter())
            .flat_map(|r| r.ops.iter())
    };
    let repeats = ops().any(|op| matches!(op.opcode, Opcode::Loop | Opcode::FlowCall))
        || program.agents.iter().any(|a| !a.handlers.is_empty());
    (!repeats).then(|| ops().filter(|op| pred(op.opcode)).count())
}

fn uses(program: &Program, pred: impl Fn(Opcode) -> bool) -> bool {
    program
        .flows
        .iter()
        .flat_map(|f| f.regions.iter())
        .flat_map(|r| r.ops.iter())
        .any(|op| pred(op.opcode))
}

/// Runs `program` from its entry flow on the dataflow VM.
///
/// The program must come from [`ais_ir::bytecode::compile`] or
/// [`ais_ir::bytecode::decode`] (both validate it). Belief initialisers run
/// first (sequentially, with the reference interpreter), then the entry flow.
pub fn run(
    program: &Program,
    options: &RunOptions,
    backend: Arc<dyn LlmBackend>,
    host: Arc<dyn Host>,
) -> RunReport {
    let workers = options
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, 1024);
    let concurrency = options
        .concurrency
        .unwrap_or_else(|| backend.concurrency())
        .clamp(1, 16384);
    let mut summary = RunSummary {
        workers,
        concurrency,
        policy: options.policy.name().to_string(),
        ..RunSummary::default()
    };
    let failed = |summary: RunSummary, e: RunError| RunReport {
        outcome: Err(e),
        summary,
        events: Vec::new(),
    };
    let entry = match program.find_entry(options.entry.as_deref()) {
        Ok(e) => e,
        Err(e) => return failed(summary, e.into()),
    };
    let args = match exec::entry_args(program, entry, &options.args) {
        Ok(a) => a,
        Err(e) => return failed(summary, e),
    };
    if let Err(e) = crate::interp::init_beliefs(program, backend.as_ref(), host.as_ref()) {
        return failed(summary, e);
    }
    summary.critical_path_estimate_ms = program.flows.get(entry as usize).map_or(0, |f| f.cp_ms);

    let locals: Vec<Worker<Task<'_>>> = (0..workers).map(|_| Worker::new_fifo()).collect();
    let parkers: Vec<Parker> = (0..workers).map(|_| Parker::new()).collect();
    let frames = limits::FrameCount::new(options.max_live_frames);
    let run = Run {
        program,
        backend: backend.as_ref(),
        host: host.as_ref(),
        injector: Injector::new(),
        stealers: locals.iter().map(Worker::stealer).collect(),
        sleep: Sleep {
            idle: Mutex::new(Vec::new()),
            n_idle: AtomicUsize::new(0),
            unparkers: parkers.iter().map(|p| p.unparker().clone()).collect(),
        },
        halted: AtomicBool::new(false),
        outcome: Mutex::new(None),
        done: (Mutex::new(false), Condvar::new()),
        cancel: CancelToken::new(),
        llm: Lane::new(options.policy),
        tool: Lane::new(options.policy),
        llm_async: backend.starts_without_waiting(),
        reply_soon: AtomicBool::new(false),
        llm_limit: concurrency,
        // Room for every call that can be in flight at once (capped), so
        // the table does not rehash its large entries during a fan-out.
        calls: Mutex::new(Calls {
            table: std::collections::HashMap::with_capacity_and_hasher(
                if backend.starts_without_waiting() {
                    max_in_flight(program, |o| exec::class(o) == Class::Llm)
                        .map_or(concurrency, |n| n.min(concurrency))
                        .min(4096)
                } else {
                    0
                },
                TokenHash,
            ),
            ..Calls::default()
        }),
        next_call: AtomicU64::new(0),
        inbox: Arc::default(),
        start: Instant::now(),
        next_frame: AtomicU64::new(0),
        record: options.record_events,
        max_depth: options.max_call_depth,
        frames: &frames,
        done_ops: (0..workers)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect(),
        end_ns: AtomicU64::new(0),
        handlers: Mutex::new((0, None)),
        journal: options.journal.as_deref(),
        budget: &options.budget,
        used: {
            let (c, t) = options.journal.as_ref().map_or((0, 0), |j| j.prior_usage());
            [AtomicU64::new(c), AtomicU64::new(t), AtomicU64::new(0)]
        },
        watchdog: options
            .watchdog
            .filter(|&n| n > 0)
            .map(crate::journal::watchdog::Watchdog::new),
        agent_used: program
            .agents
            .iter()
            .map(|_| [AtomicU64::new(0), AtomicU64::new(0)])
            .collect(),
    };
    // Room for one event per op of the program (capped), so recording does
    // not regrow and copy the vector while the run is timed; pages are only
    // touched as events are written.
    let event_capacity = if options.record_events {
        program.op_count().min(1 << 22)
    } else {
        0
    };
    let need_llm = uses(program, |o| exec::class(o) == Class::Llm);
    let need_tool = uses(program, |o| exec::class(o) == Class::Tool);
    let mut t0 = 0u64;
    let mut stats: Vec<WorkerStats> = Vec::new();
    let mut io_events: Vec<OpEvent> = Vec::new();
    let spawn_result: Result<(), String> = std::thread::scope(|s| {
        let run = &run;
        let mut worker_handles = Vec::new();
        let mut io_handles = Vec::new();
        let mut spawn_err = None;
        // Worker 0 is the calling thread itself.
        let mut own: Option<(WorkerCtx<'_>, Parker)> = None;
        for (i, (local, parker)) in locals.into_iter().zip(parkers).enumerate() {
            let cx = WorkerCtx {
                id: i as u32,
                local,
                events: Vec::with_capacity(event_capacity),
                busy_ns: 0,
                unwoken: [0; 2],
                llm_batch: Vec::new(),
                credit: None,
            };
            if i == 0 {
                own = Some((cx, parker));
                continue;
            }
            match std::thread::Builder::new()
                .name(format!("ais-worker-{i}"))
                .spawn_scoped(s, move || run.worker_loop(cx, parker))
            {
                Ok(h) => worker_handles.push(h),
                Err(e) => spawn_err = Some(e.to_string()),
            }
        }
        let mut replies_handle = None;
        if need_llm && run.llm_async && spawn_err.is_none() {
            match std::thread::Builder::new()
                .name("ais-llm-replies".into())
                .spawn_scoped(s, move || run.replies_loop())
            {
                Ok(h) => replies_handle = Some(h),
                Err(e) => spawn_err = Some(e.to_string()),
            }
        }
        for (lane, llm, needed) in [(&run.llm, true, need_llm), (&run.tool, false, need_tool)] {
            if !needed || spawn_err.is_some() || (llm && run.llm_async) {
                continue;
            }
            // Starting threads costs: no more than the program can ever use.
            let class = if llm { Class::Llm } else { Class::Tool };
            let threads = max_in_flight(program, |o| exec::class(o) == class)
                .map_or(concurrency, |n| n.clamp(1, concurrency));
            for i in 0..threads {
                match std::thread::Builder::new()
                    .name(format!("ais-io-{}-{i}", if llm { "llm" } else { "tool" }))
                    .stack_size(256 * 1024)
                    .spawn_scoped(s, move || run.io_loop(lane, llm, i as u32))
                {
                    Ok(h) => io_handles.push(h),
                    Err(e) => {
                        spawn_err = Some(e.to_string());
                        break;
                    }
                }
            }
        }
        let progress = options
            .progress
            .as_ref()
            .map(|p| s.spawn(move || progress_loop(run, &*p.0)));
        if let Some(e) = spawn_err {
            run.finish(Err(RunError::Internal(format!(
                "cannot start threads: {e}"
            ))));
        } else {
            t0 = run.now();
            let started = run
                .new_frame(entry, 0, None, 0, 0)
                .and_then(|f| run.start_frame(&f, args, None, &Sink::Global));
            if let Err(e) = started {
                run.finish(Err(RunError::Internal(e.message)));
            }
            run.sleep.notify_all();
            if let Some((cx, parker)) = own.take() {
                stats.push(run.worker_loop(cx, parker));
            }
        }
        run.shut_down();
        for h in worker_handles {
            if let Ok(st) = h.join() {
                stats.push(st);
            }
        }
        for h in io_handles.into_iter().chain(replies_handle) {
            if let Ok(ev) = h.join() {
                io_events.extend(ev);
            }
        }
        if let Some(p) = progress {
            let _ = p.join();
        }
        Ok(())
    });
    let _ = spawn_result;

    let end = run.end_ns.load(Ordering::SeqCst);
    let outcome = lock(&run.outcome).take().unwrap_or_else(|| {
        Err(RunError::Internal(
            "the run ended without an outcome".into(),
        ))
    });
    // The first worker's vector is reused (it was reserved for the whole
    // program): no copy of its events into a fresh allocation.
    let mut events: Vec<OpEvent> = Vec::new();
    for s in &mut stats {
        if events.is_empty() {
            std::mem::swap(&mut events, &mut s.events);
        }
        events.append(&mut s.events);
    }
    events.extend(io_events);
    for e in &mut events {
        e.ready_ns = e.ready_ns.saturating_sub(t0);
        e.start_ns = e.start_ns.saturating_sub(t0);
        e.end_ns = e.end_ns.saturating_sub(t0);
    }
    events.sort_by_key(|e| (e.start_ns, e.end_ns));
    summary.setup_ms = t0 as f64 / 1e6;
    summary.makespan_ms = end.saturating_sub(t0) as f64 / 1e6;
    summary.frames = run.next_frame.load(Ordering::Relaxed);
    summary.absorb(&events);
    let worker_ops: u64 = run.done_ops.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    let overhead_ns: u64 = stats
        .iter()
        .map(|s| s.life_ns.saturating_sub(s.busy_ns + s.idle_ns))
        .sum();
    if !options.record_events {
        summary.ops = worker_ops;
    }
    if worker_ops > 0 {
        summary.sched_overhead_us_per_op = overhead_ns as f64 / 1e3 / worker_ops as f64;
    }
    let mut outcome = outcome;
    type Export = fn(&Path, &Program, &[OpEvent], &RunSummary) -> std::io::Result<()>;
    let exports: [(&str, &Option<PathBuf>, Export); 2] = [
        ("events", &options.events_path, telemetry::write_jsonl),
        ("trace", &options.trace_path, telemetry::write_chrome_trace),
    ];
    for (what, path, write) in exports {
        let Some(p) = path else { continue };
        if let Err(e) = write(p, program, &events, &summary) {
            outcome = Err(RunError::Export {
                what,
                path: p.display().to_string(),
                message: e.to_string(),
            });
        }
    }
    if let Some(j) = &options.journal {
        let r = match &outcome {
            Ok(v) => j.finish(Ok(v)),
            Err(e) => j.finish(Err(&e.to_string())),
        };
        if let (Err(e), Ok(_)) = (r, &outcome) {
            outcome = Err(RunError::Internal(e.to_string()));
        }
    }
    RunReport {
        outcome,
        summary,
        events,
    }
}

fn progress_loop(run: &Run<'_>, observer: &dyn crate::progress::ProgressObserver) {
    loop {
        observer.update(&crate::progress::Progress {
            ops_done: run.done_ops.iter().map(|c| c.load(Ordering::Relaxed)).sum(),
            ops_total: run.program.op_count(),
            llm_busy: run.llm.busy.load(Ordering::Relaxed),
            llm_queued: run.llm.queued(),
            tools_busy: run.tool.busy.load(Ordering::Relaxed),
        });
        let (m, cv) = &run.done;
        let g = lock(m);
        if *g {
            break;
        }
        let (g, _) = cv
            .wait_timeout(g, Duration::from_millis(100))
            .unwrap_or_else(|e| e.into_inner());
        if *g {
            break;
        }
    }
    observer.finish();
}
