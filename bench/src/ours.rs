//! Our side: compile a workload and run it in process on the VM; the
//! critical path of a program under the benchmark's latencies.

use crate::env::Latencies;
use ais_compiler::driver::{self, OptOptions};
use ais_ir::bytecode::{self, Imm, Program};
use ais_ir::{Latency, OptLevel};
use ais_vm::llm::{
    AttemptObserver, CancelToken, LlmBackend, LlmError, LlmRequest, LlmResponse, OnDone,
};
use ais_vm::{Host, RunOptions, RunSummary};
use serde_json::Value as Json;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Why a program did not compile.
#[derive(Clone, Debug, PartialEq)]
pub enum CompileFailure {
    /// The source could not be read.
    Io(String),
    /// Rejected with diagnostics (error codes and messages).
    Rejected {
        codes: Vec<String>,
        messages: Vec<String>,
    },
    /// A pass or code generation failed (a compiler bug).
    Internal(String),
}

impl std::fmt::Display for CompileFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompileFailure::Io(e) => write!(f, "cannot read the program: {e}"),
            CompileFailure::Rejected { codes, messages } => {
                write!(f, "rejected: ")?;
                for (c, m) in codes.iter().zip(messages) {
                    write!(f, "[{c}] {m}; ")?;
                }
                Ok(())
            }
            CompileFailure::Internal(e) => write!(f, "internal compiler error: {e}"),
        }
    }
}

/// Source → checked, lowered, optimized IR → bytecode.
pub fn compile_source(source: &str, level: OptLevel) -> Result<Program, CompileFailure> {
    let mut compiled = driver::compile_source(source).map_err(|diags| {
        let errors: Vec<_> = diags.iter().filter(|d| d.is_error()).collect();
        CompileFailure::Rejected {
            codes: errors.iter().map(|d| d.code.to_string()).collect(),
            messages: errors.iter().map(|d| d.message.clone()).collect(),
        }
    })?;
    let opts = OptOptions {
        level,
        ..OptOptions::default()
    };
    driver::optimize(&mut compiled.module, &opts).map_err(CompileFailure::Internal)?;
    bytecode::compile(&compiled.module).map_err(|e| CompileFailure::Internal(e.to_string()))
}

/// Reads and compiles a file; returns the program and the compile time (ms).
pub fn compile_file(path: &Path, level: OptLevel) -> Result<(Program, f64), CompileFailure> {
    let source = std::fs::read_to_string(path)
        .map_err(|e| CompileFailure::Io(format!("{}: {e}", path.display())))?;
    let t = Instant::now();
    let p = compile_source(&source, level)?;
    Ok((p, t.elapsed().as_secs_f64() * 1e3))
}

/// A backend wrapper that counts calls and the most calls in flight at once.
pub struct InFlight {
    inner: Arc<dyn LlmBackend>,
    counts: Arc<Counts>,
}

#[derive(Default)]
struct Counts {
    current: AtomicUsize,
    max: AtomicUsize,
    calls: AtomicUsize,
}

impl Counts {
    fn enter(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.current.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
    }

    fn leave(&self) {
        self.current.fetch_sub(1, Ordering::SeqCst);
    }
}

impl InFlight {
    pub fn new(inner: Arc<dyn LlmBackend>) -> InFlight {
        InFlight {
            inner,
            counts: Arc::default(),
        }
    }

    /// Most requests in flight at one instant since the last reset.
    pub fn max_in_flight(&self) -> usize {
        self.counts.max.load(Ordering::SeqCst)
    }

    pub fn calls(&self) -> usize {
        self.counts.calls.load(Ordering::SeqCst)
    }

    pub fn reset(&self) {
        self.counts.max.store(0, Ordering::SeqCst);
        self.counts.calls.store(0, Ordering::SeqCst);
    }

    fn enter(&self) -> Guard<'_> {
        self.counts.enter();
        Guard(&self.counts)
    }
}

struct Guard<'a>(&'a Counts);

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.0.leave();
    }
}

impl LlmBackend for InFlight {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn concurrency(&self) -> usize {
        self.inner.concurrency()
    }

    fn is_simulated(&self) -> bool {
        self.inner.is_simulated()
    }

    fn starts_without_waiting(&self) -> bool {
        self.inner.starts_without_waiting()
    }

    fn start(&self, request: LlmRequest, cancel: CancelToken, done: ais_vm::llm::OnDone) {
        self.start_many(vec![(request, cancel, done)]);
    }

    fn start_many(&self, calls: Vec<(LlmRequest, CancelToken, ais_vm::llm::OnDone)>) {
        let calls = calls
            .into_iter()
            .map(|(request, cancel, done)| {
                self.counts.enter();
                let counts = Arc::clone(&self.counts);
                let done: ais_vm::llm::OnDone = Box::new(move |result, attempts| {
                    counts.leave();
                    done(result, attempts)
                });
                (request, cancel, done)
            })
            .collect();
        self.inner.start_many(calls);
    }

    fn complete(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
    ) -> Result<LlmResponse, LlmError> {
        let _g = self.enter();
        self.inner.complete(request, cancel)
    }

    fn complete_observed(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
        observer: &dyn AttemptObserver,
    ) -> Result<LlmResponse, LlmError> {
        let _g = self.enter();
        self.inner.complete_observed(request, cancel, observer)
    }
}

/// One in-process run.
#[derive(Clone, Debug)]
pub struct OursRun {
    pub ok: bool,
    pub error: Option<String>,
    pub result: Json,
    /// Wall time of the `ais_vm::run` call (thread start-up included).
    pub wall_ms: f64,
    pub summary: RunSummary,
}

/// Runs `program` with string entry arguments.
pub fn run_program(
    program: &Program,
    args: &[(&str, &str)],
    backend: Arc<dyn LlmBackend>,
    host: Arc<dyn Host>,
    workers: Option<usize>,
) -> OursRun {
    let options = RunOptions {
        args: args
            .iter()
            .map(|(k, v)| (k.to_string(), Json::String(v.to_string())))
            .collect(),
        workers,
        ..RunOptions::default()
    };
    let t = Instant::now();
    let report = ais_vm::run(program, &options, backend, host);
    let wall_ms = t.elapsed().as_secs_f64() * 1e3;
    let (ok, error, result) = match report.outcome {
        Ok(v) => (true, None, v),
        Err(e) => (false, Some(e.to_string()), Json::Null),
    };
    OursRun {
        ok,
        error,
        result,
        wall_ms,
        summary: report.summary,
    }
}

/// The cost (ms) of an op of this latency class under `lat`.
pub fn class_ms(l: Latency, lat: &Latencies) -> u64 {
    match l {
        Latency::Ask => lat.ask_ms,
        Latency::Think => lat.think_ms,
        Latency::Reason => lat.reason_ms,
        Latency::Tool => lat.tool_ms,
        Latency::None | Latency::Mem | Latency::Io => 0,
    }
}

/// The critical path (ms) of the entry flow if every op started as soon as
/// its inputs were ready and took exactly its latency class's time under
/// `lat` (pure, memory and I/O ops: 0). Calls cost the callee's path;
/// `switch`/`if` their longest region (the benchmark's scripted replies
/// route workload 9 to its longest branch, so this is the taken path); a
/// loop one iteration (no workload loops). `None` without an entry flow.
pub fn critical_path_ms(p: &Program, lat: &Latencies) -> Option<u64> {
    critical_path(p, lat).map(|c| c.0)
}

/// [`critical_path_ms`] and the number of LLM calls along that path (on
/// ties, the path with more calls).
pub fn critical_path(p: &Program, lat: &Latencies) -> Option<(u64, u64)> {
    let entry = p.flows.iter().position(|f| f.entry)?;
    let mut memo = vec![None; p.flows.len()];
    let mut busy = vec![false; p.flows.len()];
    Some(flow_cp(p, entry, lat, &mut memo, &mut busy))
}

/// (ms, LLM calls) of a path; ordered by time, then calls.
type Cost = (u64, u64);

fn flow_cp(
    p: &Program,
    f: usize,
    lat: &Latencies,
    memo: &mut [Option<Cost>],
    busy: &mut [bool],
) -> Cost {
    if let Some(c) = memo.get(f).copied().flatten() {
        return c;
    }
    if busy.get(f).copied().unwrap_or(true) {
        return (0, 0); // recursion (or a bad index) counts once
    }
    busy[f] = true;
    let c = region_cp(p, f, 0, lat, memo, busy);
    busy[f] = false;
    memo[f] = Some(c);
    c
}

fn region_cp(
    p: &Program,
    f: usize,
    r: usize,
    lat: &Latencies,
    memo: &mut [Option<Cost>],
    busy: &mut [bool],
) -> Cost {
    let Some(rc) = p.flows.get(f).and_then(|fc| fc.regions.get(r)) else {
        return (0, 0);
    };
    let est: Vec<Cost> = rc
        .ops
        .iter()
        .map(|op| match &op.imm {
            Imm::Callee(c) => flow_cp(p, *c as usize, lat, memo, busy),
            _ if !op.regions.is_empty() => op
                .regions
                .iter()
                .map(|&c| region_cp(p, f, c as usize, lat, memo, busy))
                .max()
                .unwrap_or((0, 0)),
            _ => {
                let info = op.opcode.info();
                let llm = info.llm.is_some();
                (class_ms(info.latency, lat), u64::from(llm))
            }
        })
        .collect();
    // Consumers come after their producers in op order.
    let mut rem: Vec<Cost> = vec![(0, 0); rc.ops.len()];
    let mut best = (0, 0);
    for i in (0..rc.ops.len()).rev() {
        let mut tail = (0, 0);
        for s in rc.ops[i].results() {
            for &c in rc.consumers_of(s) {
                tail = tail.max(rem.get(c as usize).copied().unwrap_or((0, 0)));
            }
        }
        rem[i] = (est[i].0.saturating_add(tail.0), est[i].1 + tail.1);
        best = best.max(rem[i]);
    }
    best
}

fn probe_request(i: usize) -> LlmRequest {
    LlmRequest {
        cache: Default::default(),
        kind: ais_vm::llm::LlmOpKind::Ask,
        agent: "Probe".into(),
        system: None,
        prompt: format!("probe {i}"),
        context: Vec::new(),
        model: None,
        temperature: None,
        max_tokens: None,
        json_schema: None,
        budget_tokens: None,
        backend: None,
        tools: Vec::new(),
        turns: Vec::new(),
        on_text: None,
        critical: false,
        attained: Default::default(),
    }
}

/// Times `rounds` rounds of `width` concurrent direct `ask` calls through
/// `backend`, started together with [`LlmBackend::start_many`] (the path
/// the VM takes for a fan-out, without the VM): the transport floor (HTTP
/// client, loopback, mock, thread wake-ups) that LLM ops pay on top of the
/// mock's configured latency. Returns each round's wall time (ms), from
/// starting the calls to the last reply, or the first error.
pub fn probe_backend(
    backend: &dyn LlmBackend,
    width: usize,
    rounds: usize,
) -> Result<Vec<f64>, String> {
    let width = width.max(1);
    let mut out = Vec::with_capacity(rounds);
    for r in 0..rounds {
        let (tx, rx) = std::sync::mpsc::channel::<Result<LlmResponse, LlmError>>();
        let calls: Vec<(LlmRequest, CancelToken, OnDone)> = (0..width)
            .map(|i| {
                let tx = tx.clone();
                let done: OnDone = Box::new(move |result, _attempts| {
                    let _ = tx.send(result);
                });
                (probe_request(r * width + i), CancelToken::new(), done)
            })
            .collect();
        drop(tx);
        let t = Instant::now();
        backend.start_many(calls);
        for _ in 0..width {
            match rx.recv_timeout(PROBE_TIMEOUT) {
                Ok(result) => {
                    result.map_err(|e| e.to_string())?;
                }
                Err(_) => return Err("transport probe: a call never finished".into()),
            }
        }
        out.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(out)
}

/// How long the probe waits for one reply (the mock answers in its
/// configured latency; this only bounds a broken run).
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);
