//! Starting a run: building the shared state, spawning workers, I/O and
//! completion threads, then collecting the outcome, the summary and the
//! events once every thread has stopped.

use super::io::Lane;
use super::limits;
use super::llm_calls::{Calls, TokenHash};
use super::progress::progress_loop;
use super::worker::{Sleep, WorkerCtx, WorkerStats};
use super::{gate, Run, RunOptions, RunReport, Sink, Task};
use crate::error::RunError;
use crate::exec::{self, Class};
use crate::host::Host;
use crate::llm::{CancelToken, LlmBackend};
use crate::sync::lock;
use crate::telemetry::{OpEvent, RunSummary};
use ais_ir::bytecode::{Instr, Program};
use ais_ir::Opcode;
use crossbeam::sync::Parker;
use crossbeam::utils::CachePadded;
use crossbeam_deque::{Injector, Worker};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// How many ops of a class can possibly be in flight at once, when that is
/// bounded by the program's shape: with no loop, no call and no handler every
/// op runs at most once. `None` when unbounded.
pub(super) fn max_in_flight(program: &Program, pred: impl Fn(&Instr) -> bool) -> Option<usize> {
    let ops = || {
        program
            .flows
            .iter()
            .flat_map(|f| f.regions.iter())
            .flat_map(|r| r.ops.iter())
    };
    let repeats = ops().any(|op| matches!(op.opcode, Opcode::Loop | Opcode::FlowCall))
        || program.agents.iter().any(|a| !a.handlers.is_empty());
    (!repeats).then(|| ops().filter(|op| pred(op)).count())
}

pub(super) fn uses(program: &Program, pred: impl Fn(&Instr) -> bool) -> bool {
    program
        .flows
        .iter()
        .flat_map(|f| f.regions.iter())
        .flat_map(|r| r.ops.iter())
        .any(pred)
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
        plans: Vec::new(),
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

    let makes_plans = uses(program, exec::plans);
    let labels =
        crate::ifc::Labels::new(options.flow_policy.clone()).traced(options.label_trace.clone());
    // Only a program that touches memory or beliefs (or may, in a plan)
    // reads the stored labels: others need not open the store.
    let touches_memory = makes_plans
        || uses(program, |i| {
            matches!(
                i.opcode,
                Opcode::Qmem | Opcode::Umem | Opcode::BeliefGet | Opcode::BeliefSet
            )
        });
    if touches_memory {
        if let Err(e) = labels.load_stored(host.as_ref()) {
            let why = format!("reading the information-flow labels of stored memory: {e}");
            return failed(summary, RunError::Setup(why));
        }
    }
    // What earlier runs wrote into the workspace (`crate::catalogue::labels`).
    if let Err(e) = labels.load_workspace(host.as_ref()) {
        let why = format!("reading the information-flow labels of the workspace: {e}");
        return failed(summary, RunError::Setup(why));
    }
    // Room for linked plans only when the program can make any.
    let plan_arena = crate::plan::PlanArena::new(if makes_plans {
        crate::plan::MAX_PLANS_PER_RUN
    } else {
        0
    });
    let locals: Vec<Worker<Task<'_>>> = (0..workers).map(|_| Worker::new_fifo()).collect();
    let parkers: Vec<Parker> = (0..workers).map(|_| Parker::new()).collect();
    let frames = limits::FrameCount::new(options.max_live_frames);
    let run = Run {
        program,
        labels,
        approvals: crate::ifc::Approvals::new(options.flow_approver.clone()),
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
        agent: Lane::new(options.policy),
        llm_async: backend.starts_without_waiting(),
        reply_soon: AtomicBool::new(false),
        llm_limit: concurrency,
        // Room for every call that can be in flight at once (capped), so
        // the table does not rehash its large entries during a fan-out.
        calls: Mutex::new(Calls {
            table: std::collections::HashMap::with_capacity_and_hasher(
                if backend.starts_without_waiting() {
                    max_in_flight(program, |o| exec::class(o.opcode) == Class::Llm)
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
        record: options.record_events || options.observer.is_some(),
        max_depth: options.max_call_depth,
        max_value_bytes: options.max_value_bytes,
        frames: &frames,
        done_ops: (0..workers)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect(),
        end_ns: AtomicU64::new(0),
        handlers: Mutex::new((0, None)),
        gate: gate::Gate::new(program, options),
        planner: options.planner.as_deref(),
        plans: &plan_arena,
        linked: Mutex::new(Vec::new()),
        observer: options.observer.as_ref().map(|o| &*o.0),
        observer_arc: options.observer.as_ref().map(|o| o.0.clone()),
        flow_calls: options
            .observer
            .as_ref()
            .filter(|o| o.0.wants_flow_calls())
            .map(|_| super::flow_calls::FlowCallLog::default()),
        text: &options.telemetry_text,
        critical: super::critical::CriticalOps::default(),
        spec: super::speculate::Spec::new(program, options.speculate),
        warmup: super::warmup::Warmup::default(),
    };
    // Room for one event per op of the program (capped), so recording does
    // not regrow and copy the vector while the run is timed; pages are only
    // touched as events are written.
    let event_capacity = if run.record {
        program.op_count().min(1 << 22)
    } else {
        0
    };
    // An inner plan may call LLMs and tools the program itself does not:
    // a program that can link one gets every lane, at full width.
    let links_plans = uses(program, exec::plans);
    let need_llm = links_plans || uses(program, |o| exec::class(o.opcode) == Class::Llm);
    let need_tool = links_plans || uses(program, |o| exec::class(o.opcode) == Class::Tool);
    let need_agent = uses(program, exec::on_agent_lane);
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
        let lanes = [
            (&run.llm, Class::Llm, need_llm && !run.llm_async),
            (&run.tool, Class::Tool, need_tool),
            (&run.agent, Class::Llm, need_agent),
        ];
        for (k, (lane, class, needed)) in lanes.into_iter().enumerate() {
            if !needed || spawn_err.is_some() {
                continue;
            }
            let agent_lane = k == 2;
            // Starting threads costs: no more than the program can ever use.
            let threads = if agent_lane {
                max_in_flight(program, exec::on_agent_lane)
            } else if links_plans {
                None
            } else {
                max_in_flight(program, |o| {
                    exec::class(o.opcode) == class && !exec::on_agent_lane(o)
                })
            }
            .map_or(concurrency, |n| n.clamp(1, concurrency));
            let name = ["llm", "tool", "agent"][k];
            for i in 0..threads {
                let work = move || {
                    if agent_lane {
                        run.agent_loop(lane, i as u32)
                    } else {
                        run.io_loop(lane, class == Class::Llm, i as u32)
                    }
                };
                match std::thread::Builder::new()
                    .name(format!("ais-io-{name}-{i}"))
                    .stack_size(256 * 1024)
                    .spawn_scoped(s, work)
                {
                    Ok(h) => io_handles.push(h),
                    Err(e) => {
                        spawn_err = Some(e.to_string());
                        break;
                    }
                }
            }
        }
        // Speculated tool calls block: they run on threads of their own.
        let spec_threads = if run.llm_async && spawn_err.is_none() {
            run.spec.tool_threads()
        } else {
            0
        };
        for i in 0..spec_threads {
            match std::thread::Builder::new()
                .name(format!("ais-spec-tool-{i}"))
                .stack_size(256 * 1024)
                .spawn_scoped(s, move || run.spec_tool_loop())
            {
                Ok(h) => io_handles.push(h),
                Err(e) => {
                    spawn_err = Some(e.to_string());
                    break;
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
            // What an earlier attempt printed and a kill kept from
            // showing comes first.
            let started = match run.show_pending() {
                Err(e) => Err(RunError::Setup(format!("{}: {}", e.code, e.message))),
                Ok(()) => run
                    .new_frame(run.unit(), entry, 0, None, 0, 0)
                    .and_then(|f| {
                        let l = [run.labels.args; 1];
                        // The user's request, for argument rules that
                        // accept values from it (`from = ["@args"]`).
                        run.labels.note_value("@args", || {
                            serde_json::Value::Array(
                                args.iter().map(crate::value::Val::to_json).collect(),
                            )
                        });
                        run.start_frame(&f, args, &l, None, &Sink::Global)
                    })
                    .map_err(|e| RunError::Internal(e.message)),
            };
            if let Err(e) = started {
                run.finish(Err(e));
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
        if let Some(l) = &mut e.llm {
            for c in &mut l.tool_calls {
                c.start_ns = c.start_ns.saturating_sub(t0);
                c.end_ns = c.end_ns.saturating_sub(t0);
            }
        }
    }
    events.sort_by_key(|e| (e.start_ns, e.end_ns));
    summary.setup_ms = t0 as f64 / 1e6;
    summary.makespan_ms = end.saturating_sub(t0) as f64 / 1e6;
    summary.frames = run.next_frame.load(Ordering::Relaxed);
    summary.cache_warmup_holds = run.warmup.holds();
    summary.absorb(&events);
    run.spec_report(&mut summary, super::llm_calls::CANCEL_GRACE);
    if let (Some(log), Some(o)) = (&run.flow_calls, run.observer) {
        o.flow_calls(&log.finish(&events, t0));
    }
    let worker_ops: u64 = run.done_ops.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    let overhead_ns: u64 = stats
        .iter()
        .map(|s| s.life_ns.saturating_sub(s.busy_ns + s.idle_ns))
        .sum();
    if !run.record {
        summary.ops = worker_ops;
    }
    if worker_ops > 0 {
        summary.sched_overhead_us_per_op = overhead_ns as f64 / 1e3 / worker_ops as f64;
    }
    let mut outcome = outcome;
    if let Some(j) = &options.journal {
        let r = match &outcome {
            Ok(v) => j.finish(Ok(v)),
            Err(e) => j.finish(Err(&e.to_string())),
        };
        if let (Err(e), Ok(_)) = (r, &outcome) {
            outcome = Err(RunError::Internal(e.to_string()));
        }
    }
    let plans = std::mem::take(&mut *lock(&run.linked));
    summary.linked_flows = plans
        .iter()
        .flat_map(super::LinkedPlan::flow_labels)
        .collect();
    RunReport {
        outcome,
        summary,
        events,
        plans,
    }
}
