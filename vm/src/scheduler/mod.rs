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
//!
//! One concern per file; the shared state of a run ([`Run`]) lives here:
//! - `launch`: [`run`]: sets up a run, starts and joins its threads, builds
//!   the report;
//! - `worker`: the worker loop, ready queues, parking, executing one op;
//! - `frames`: frames and regions (calls, branches, loops, `try`,
//!   handlers), delivery of values, completion and failure propagation;
//! - `gate`: the effect gate, the one path of every effect (journal
//!   replay, admission: budget and loop watchdog, intent, record, in-doubt
//!   decisions) and the printed output (`gate/outbox.rs`, exactly once
//!   across kill + resume);
//! - `io`: the I/O hand-off: lanes and threads for blocking calls;
//! - `llm_calls`: calls on backends that start without waiting, and the
//!   completion thread for their replies;
//! - `inner_plan`: `solve` ops: the model's plan checked by the edge's
//!   plan compiler, repaired, then linked into the run as a frame;
//! - `tool_loop`: LLM ops that offer their model tools: model turns and
//!   the tool calls they ask for, each through the gate, the host and
//!   telemetry like the program's own;
//! - `speculate`: arms of branches decided by an LLM reply, started
//!   before it arrives and adopted or discarded when it does;
//! - `progress`, `limits`, `policy`: the progress line, resource limits,
//!   the I/O queues' ordering policy;
//! - `warmup`: fan-out calls that share a long prompt prefix wait for the
//!   first one's reply to start, so they read the provider's cache.

mod critical;
pub(crate) mod early_calls;
mod flow_ask;
mod flow_calls;
mod frames;
mod gate;
mod inner_plan;
mod io;
mod launch;
pub mod limits;
mod llm_calls;
mod observe;
pub mod policy;
mod progress;
mod speculate;
mod tool_loop;
mod warmup;
mod worker;

pub use inner_plan::LinkedPlan;
pub use launch::run;
pub use speculate::{Speculate, SpeculationSummary};

use llm_calls::{Calls, Inbox};
use worker::Sleep;

pub use policy::{Policy, PolicyQueue, UnknownPolicy};

use crate::error::RunError;
use crate::frame::Frame;
use crate::host::Host;
use crate::llm::{CancelToken, LlmBackend};
use crate::sync::lock;
use crate::telemetry::{OpEvent, RunSummary};
use ais_ir::bytecode::Program;
use crossbeam::utils::CachePadded;
use crossbeam_deque::{Injector, Stealer, Worker};
use io::Lane;
use serde_json::Value as Json;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

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
    /// Receives live progress while the run lasts (the CLI draws it).
    pub progress: Option<crate::progress::ProgressSink>,
    /// Keep per-op events in the report (the edge exports them with
    /// `telemetry::write_jsonl` / `write_chrome_trace`; on by default).
    pub record_events: bool,
    /// Deepest `flow.call` nesting before the call fails with `call.depth`.
    pub max_call_depth: u32,
    /// Most frames alive at once (calls, branches, loop iterations, ...)
    /// before the run stops with `LIMIT_FRAMES` (see `limits`).
    pub max_live_frames: usize,
    /// Largest value (text bytes, list items × 8) an op may compute or a
    /// tool return before the run stops with `LIMIT_VALUE_BYTES`.
    pub max_value_bytes: usize,
    /// Journal every effect op's result here (and replay what an earlier
    /// attempt of the run completed); see `crate::journal`.
    pub journal: Option<Arc<crate::journal::Journal>>,
    /// Token, call, deadline and cost limits (`budget.*` errors).
    pub budget: crate::journal::Budget,
    /// Stop with `WATCHDOG_LOOP` when an LLM or tool call in a loop runs this many
    /// times with the same inputs (`None`: off; `aisc run` uses 3).
    pub watchdog: Option<u32>,
    /// Checks the plans `solve` ops ask models for (`None`: such an op
    /// fails with `plan.unavailable`).
    pub planner: Option<Arc<dyn crate::plan::PlanCompiler>>,
    /// Receives each op's event as it is recorded and LLM text as it
    /// streams in (see `crate::observe`); events are recorded when set.
    pub observer: Option<crate::observe::Observer>,
    /// How events keep prompts, replies and tool arguments (size limit,
    /// redaction, secrets scrubbed).
    pub telemetry_text: crate::telemetry::TextPolicy,
    /// Information-flow policy (`[policy]`; see `crate::ifc`): enforced by
    /// default with the default trust and sinks.
    pub flow_policy: ais_ir::ifc::FlowPolicy,
    /// Asked before a denied flow fails its op (`None`: denials stand).
    pub flow_approver: Option<Arc<dyn crate::ifc::FlowApprover>>,
    /// Collects every op's result label by source name (the propagation
    /// goldens, `tests/ifc_goldens.rs`); `None` in normal runs.
    pub label_trace: Option<Arc<crate::ifc::LabelTrace>>,
    /// The host prints to this process's stdout: note here which printed
    /// lines reached it (`crate::journal::marks_path`), so a resumed run
    /// shows the lines a kill left journaled and unshown, once. `None`:
    /// lines a resumed run replays are never shown again.
    pub stdout_marks: Option<std::path::PathBuf>,
    /// Start the likely arms of branches decided by an LLM reply before
    /// the reply arrives, within this budget (`None`: never; see
    /// `speculate`).
    pub speculate: Option<Speculate>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            entry: None,
            args: Vec::new(),
            workers: None,
            policy: Policy::Fifo,
            concurrency: None,
            progress: None,
            record_events: true,
            max_call_depth: 512,
            max_live_frames: limits::DEFAULT_MAX_LIVE_FRAMES,
            max_value_bytes: limits::DEFAULT_MAX_VALUE_BYTES,
            journal: None,
            budget: crate::journal::Budget::default(),
            watchdog: None,
            planner: None,
            observer: None,
            telemetry_text: crate::telemetry::TextPolicy::default(),
            flow_policy: ais_ir::ifc::FlowPolicy::default(),
            flow_approver: None,
            label_trace: None,
            stdout_marks: None,
            speculate: None,
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
    /// The inner plans linked during the run, in the order they were.
    pub plans: Vec<LinkedPlan>,
}

pub(crate) struct Task<'r> {
    frame: Arc<Frame<'r>>,
    op: u32,
    ready_ns: u64,
}

enum Sink<'a, 'r> {
    Local(&'a Worker<Task<'r>>),
    Global,
}

struct Run<'r> {
    program: &'r Program,
    /// Provenance labels and the flow policy (`crate::ifc`).
    labels: crate::ifc::Labels,
    /// Denied flows the person running the program let through.
    approvals: crate::ifc::Approvals,
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
    /// LLM ops that offer their model tools: each holds a thread of this
    /// lane for its whole exchange (see `tool_loop`).
    agent: Lane<'r>,
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
    max_value_bytes: usize,
    frames: &'r limits::FrameCount,
    done_ops: Vec<CachePadded<AtomicU64>>,
    end_ns: AtomicU64,
    /// `on` handlers still running, and the entry flow's result once it is
    /// done (the run ends when both are settled).
    handlers: Mutex<(usize, Option<Json>)>,
    /// The effect gate's state: journal, budgets, watchdog, output, pause.
    gate: gate::Gate<'r>,
    planner: Option<&'r dyn crate::plan::PlanCompiler>,
    /// Accepted plans' bytecode (frames point into it).
    plans: &'r crate::plan::PlanArena,
    linked: Mutex<Vec<LinkedPlan>>,
    observer: Option<&'r dyn crate::observe::RunObserver>,
    /// The same observer, for text sinks (they are `'static`).
    observer_arc: Option<observe::SharedObserver>,
    /// The flow calls' extents, for an observer that wants them.
    flow_calls: Option<flow_calls::FlowCallLog>,
    text: &'r crate::telemetry::TextPolicy,
    /// Slack-free ops per region, for `LlmRequest::critical`.
    critical: critical::CriticalOps,
    /// Calls of undecided branches' arms, held aside (`speculate`).
    spec: speculate::Spec,
    /// Calls held behind the one writing their prompt-cache prefix.
    warmup: warmup::Warmup<llm_calls::Pending<'r>>,
}

impl<'r> Run<'r> {
    fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The developer's program as a unit of code (plans are linked as
    /// others).
    fn unit(&self) -> crate::frame::Unit<'r> {
        crate::frame::Unit {
            program: self.program,
            base: 0,
            prefetch: None,
        }
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
        self.agent.close();
        self.inbox.stop();
        self.spec_stop();
        self.sleep.notify_all();
    }
}
