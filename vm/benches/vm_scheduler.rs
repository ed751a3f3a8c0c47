//! Scheduler benchmarks (`cargo bench -p ais-vm --bench vm_scheduler`).
//!
//! 1. Scheduler overhead on the paper's synthetic shape: one op fanning out
//!    to 48 cheap ops, joined, 20 loop iterations (carried dependency).
//! 2. Layered DAGs of 1k, 100k and 1M cheap ops (width 64, each op adds two
//!    ops of the previous layer).
//! 3. Makespan against the critical path with a fake LLM answering every
//!    call in 50 ms: ask → N parallel asks → wait_all → ask, N = 2, 8, 64,
//!    1024, concurrency limit ≥ N. Critical path = 3 × 50 ms.
//!
//! Prints a Markdown table. `VM_BENCH_QUICK=1` runs fewer repetitions;
//! `VM_BENCH_REPS=n` runs exactly `n`; `VM_BENCH_WORKERS=n` runs only that
//! worker count; `VM_BENCH_RECORD=on|off` only that events setting;
//! `VM_BENCH_POLICY=off` turns information-flow labels off;
//! `VM_BENCH_OTLP=down|slow|noop` exports each run's OpenTelemetry trace
//! to a collector that refuses connections (`down`) or takes requests and
//! never answers (`slow`), or only adds an observer that does nothing
//! (`noop`, what `aisc run` always has: its kept telemetry) (docs/telemetry.md).
//! The last four make instruction counts comparable under
//! `valgrind --tool=cachegrind` (docs/security.md, "Cost").
#![allow(clippy::unwrap_used)]

use ais_ir::bytecode::{compile, Program};
use ais_ir::{AgentData, Attr, FlowData, Module, Opcode, Type, Value};
use ais_testkit::fake::FakeBackend;
use ais_testkit::MemoryHost;
use ais_vm::RunOptions;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn module_of(flow: FlowData) -> Program {
    let mut a = AgentData::new("Bench");
    a.add_flow(flow);
    let mut m = Module::new();
    m.add_agent(a);
    // The verifier is not built for million-op flows; small ones are checked
    // (the bytecode validator runs in `compile` for all).
    if m.agents
        .iter()
        .all(|(_, a)| a.flows.iter().all(|(_, f)| f.dfg.ops.len() < 20_000))
    {
        let errs = ais_ir::verify_errors(&m);
        assert!(errs.is_empty(), "{errs:?}");
    }
    compile(&m).unwrap()
}

/// The paper's shape: per iteration, `root = add(c, 1)`, 48 × `neg root`,
/// `join = wait_all(...)`, next carried = `join[0]`.
fn paper_shape() -> Program {
    let mut f = FlowData::new("main", Type::Json);
    f.entry = true;
    let mut b = f.builder();
    let items: Vec<Value> = (0..20).map(|i| b.const_number(i as f64)).collect();
    let list = b.ins1(Opcode::List, &items, Type::list(Type::Number));
    let zero = b.const_number(0.0);
    let lp = b.ins_attrs(Opcode::Loop, &[list, zero], vec![], &[Type::Number]);
    b.with_region(lp, "body", None, |b, r| {
        let _item = b.add_region_arg(r, Type::Number);
        let _index = b.add_region_arg(r, Type::Number);
        let c = b.add_region_arg(r, Type::Number);
        let one = b.const_number(1.0);
        let root = b.ins1(Opcode::Add, &[c, one], Type::Number);
        let fan: Vec<Value> = (0..48)
            .map(|_| b.ins1(Opcode::Neg, &[root], Type::Number))
            .collect();
        let join = b.ins1(Opcode::WaitAll, &fan, Type::Json);
        let k = b.const_number(0.0);
        let next = b.ins1(Opcode::Index, &[join, k], Type::Number);
        b.yield_(&[next]);
    });
    let out = b.result(lp, 0);
    let w = b.ins1(Opcode::WaitAll, &[out], Type::Json);
    b.ret(Some(w));
    module_of(f)
}

/// A layered DAG of about `n` cheap ops.
fn layered(n: usize) -> Program {
    let width = 64.min(n);
    let layers = (n / width).max(1);
    let mut f = FlowData::new("main", Type::Json);
    f.entry = true;
    let mut b = f.builder();
    let mut prev: Vec<Value> = (0..width).map(|i| b.const_number(i as f64)).collect();
    for _ in 1..layers {
        prev = (0..width)
            .map(|i| b.ins1(Opcode::Add, &[prev[i], prev[(i + 1) % width]], Type::Number))
            .collect();
    }
    let w = b.ins1(Opcode::WaitAll, &prev, Type::Json);
    b.ret(Some(w));
    module_of(f)
}

/// ask → N asks → wait_all → ask.
fn fan_out(n: usize) -> Program {
    let mut f = FlowData::new("main", Type::Str);
    f.entry = true;
    let mut b = f.builder();
    let p = b.const_str("Plan the work");
    let root = b.ins1(Opcode::Ask, &[p], Type::Str);
    let asks: Vec<Value> = (0..n)
        .map(|i| {
            let t = b.template(&format!("Part {i} of {{0}}"), &[root]);
            b.ins1(Opcode::Ask, &[t], Type::Str)
        })
        .collect();
    let join = b.ins1(Opcode::WaitAll, &asks, Type::Json);
    let s = b.ins_attrs(
        Opcode::Template,
        &[join],
        vec![("template".into(), Attr::Str("Synthesize {0}".into()))],
        &[Type::Str],
    );
    let s = b.result(s, 0);
    let fin = b.ins1(Opcode::Ask, &[s], Type::Str);
    b.ret(Some(fin));
    module_of(f)
}

struct Stats {
    min: f64,
    median: f64,
    max: f64,
}

fn stats(mut xs: Vec<f64>) -> Stats {
    xs.sort_by(|a, b| a.total_cmp(b));
    Stats {
        min: xs[0],
        median: xs[xs.len() / 2],
        max: xs[xs.len() - 1],
    }
}

/// What `VM_BENCH_OTLP` asks for: the pipeline runs export through.
enum Export {
    Off,
    Noop,
    To(Arc<ais_vm::observe::otlp::Pipeline>),
}

struct Noop;
impl ais_vm::observe::RunObserver for Noop {}

fn export() -> Export {
    use ais_vm::observe::otlp::{OtlpSettings, Pipeline};
    let mode = std::env::var("VM_BENCH_OTLP").unwrap_or_default();
    let url = match mode.as_str() {
        "noop" => return Export::Noop,
        // A port nothing listens on.
        "down" => {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}/v1/traces", l.local_addr().unwrap())
        }
        // Connections accepted and never answered.
        "slow" => {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let url = format!("http://{}/v1/traces", l.local_addr().unwrap());
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for c in l.incoming() {
                    held.push(c);
                }
            });
            url
        }
        _ => return Export::Off,
    };
    Export::To(
        Pipeline::start(OtlpSettings {
            traces_url: url,
            headers: Vec::new(),
            capture_content: false,
            sample_ratio: 1.0,
            queue_size: 2048,
            service_name: "bench".into(),
            timeout: Duration::from_secs(600),
        })
        .unwrap(),
    )
}

fn run(p: &Program, o: &RunOptions, backend: Arc<FakeBackend>) -> ais_vm::RunReport {
    thread_local!(static EXPORT: Export = export());
    EXPORT.with(|x| {
        let mut o = o.clone();
        let trace = match x {
            Export::Off => None,
            Export::Noop => {
                o.observer = Some(ais_vm::observe::Observer(Arc::new(Noop)));
                None
            }
            Export::To(pipeline) => {
                let t = Arc::new(ais_vm::observe::otlp::RunTrace::new(
                    pipeline.clone(),
                    "bench",
                    1,
                    Default::default(),
                ));
                o.observer = Some(ais_vm::observe::Observer(t.clone()));
                Some(t)
            }
        };
        let r = ais_vm::run(p, &o, backend, Arc::new(MemoryHost::new()));
        assert!(r.outcome.is_ok(), "{:?}", r.outcome);
        if let Some(t) = trace {
            t.finish_report(p, &r);
        }
        r
    })
}

fn main() {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    // `cargo bench` passes `--bench`; ignore arguments.
    let quick = std::env::var_os("VM_BENCH_QUICK").is_some();
    // `VM_BENCH_FILTER=text` runs only the cases whose name contains it.
    let filter = std::env::var("VM_BENCH_FILTER").unwrap_or_default();
    let wanted = |name: &str| name.contains(filter.as_str());
    let fixed_reps: Option<usize> = std::env::var("VM_BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok());
    let reps = |n: usize| match fixed_reps {
        Some(r) => r,
        None if quick => n.div_ceil(5).max(2),
        None => n,
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let only_workers: Option<usize> = std::env::var("VM_BENCH_WORKERS")
        .ok()
        .and_then(|v| v.parse().ok());
    let only_record: Option<bool> = match std::env::var("VM_BENCH_RECORD").as_deref() {
        Ok("on") => Some(true),
        Ok("off") => Some(false),
        _ => None,
    };
    println!("## Scheduler overhead (cheap ops; {cores} cores)\n");
    println!("µs per op = makespan / ops executed, over repeated runs (min / median / max); \"sched\" = the summary's scheduler-overhead figure (median).\n");
    println!("| graph | ops | workers | events | runs | µs/op min | median | max | sched µs/op |");
    println!("|---|---:|---:|---|---:|---:|---:|---:|---:|");
    type Case = (&'static str, fn() -> Program, usize);
    let cases: Vec<Case> = vec![
        ("paper shape: 1→48→join ×20 (loop)", paper_shape, reps(200)),
        ("layered 1k", || layered(1_000), reps(200)),
        ("layered 100k", || layered(100_000), reps(20)),
        ("layered 1M", || layered(1_000_000), reps(5)),
    ];
    for (name, make, n) in &cases {
        if !wanted(name) {
            continue;
        }
        let p = make();
        for workers in [1, cores] {
            if only_workers.is_some_and(|w| w != workers) {
                continue;
            }
            for record in [true, false] {
                let skip = match only_record {
                    Some(r) => r != record,
                    None => !record && workers != cores,
                };
                if skip {
                    continue;
                }
                let o = RunOptions {
                    workers: Some(workers),
                    record_events: record,
                    // `VM_BENCH_POLICY=off` runs without information-flow
                    // labels, to measure what they cost (docs/security.md).
                    flow_policy: ais_ir::ifc::FlowPolicy {
                        mode: if std::env::var("VM_BENCH_POLICY").as_deref() == Ok("off") {
                            ais_ir::ifc::Mode::Off
                        } else {
                            ais_ir::ifc::Mode::Enforce
                        },
                        ..Default::default()
                    },
                    ..RunOptions::default()
                };
                let backend = Arc::new(FakeBackend::new());
                let mut per_op = Vec::new();
                let mut sched = Vec::new();
                let mut ops = 0;
                for _ in 0..*n {
                    let r = run(&p, &o, backend.clone());
                    ops = r.summary.ops;
                    per_op.push(r.summary.makespan_ms * 1000.0 / r.summary.ops as f64);
                    sched.push(r.summary.sched_overhead_us_per_op);
                }
                let s = stats(per_op);
                let sc = stats(sched);
                println!(
                    "| {name} | {ops} | {workers} | {} | {n} | {:.3} | {:.3} | {:.3} | {:.3} |",
                    if record { "on" } else { "off" },
                    s.min,
                    s.median,
                    s.max,
                    sc.median
                );
            }
        }
    }

    println!("\n## Makespan vs critical path (fake LLM, every call 50 ms)\n");
    println!("Shape: ask → N asks → wait_all → ask; critical path 150 ms; target ≤ 1.02 × 150 + 2 = 155 ms.\n");
    println!("| N | concurrency | policy | runs | makespan min (ms) | median | max | ratio (median / CP) | peak parallelism | setup (ms) |");
    println!("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    let latency = Duration::from_millis(50);
    for n in [2usize, 8, 64, 1024] {
        if !wanted(&format!("fan-out {n}")) {
            continue;
        }
        let p = fan_out(n);
        for policy in [ais_vm::Policy::Fifo, ais_vm::Policy::CriticalPath] {
            let o = RunOptions {
                concurrency: Some(n.max(16)),
                policy,
                ..RunOptions::default()
            };
            let runs = reps(10);
            let mut ms = Vec::new();
            let mut peak = 0;
            let mut setup = Vec::new();
            for _ in 0..runs {
                let b = Arc::new(FakeBackend::new().with_latency(latency));
                let r = run(&p, &o, b);
                // `VM_BENCH_EVENTS=dir` keeps the JSONL events of each case.
                if let Some(d) = std::env::var_os("VM_BENCH_EVENTS") {
                    let path =
                        std::path::PathBuf::from(d).join(format!("fanout-{n}-{policy}.jsonl"));
                    if let Ok(mut f) = std::fs::File::create(path) {
                        let _ = ais_vm::telemetry::write_jsonl(&mut f, &p, &r.events, &r.summary);
                    }
                }
                ms.push(r.summary.makespan_ms);
                setup.push(r.summary.setup_ms);
                peak = peak.max(r.summary.peak_parallelism);
            }
            let s = stats(ms);
            let su = stats(setup);
            println!(
                "| {n} | {} | {policy} | {runs} | {:.2} | {:.2} | {:.2} | {:.4} | {peak} | {:.2} |",
                n.max(16),
                s.min,
                s.median,
                s.max,
                s.median / 150.0,
                su.median
            );
        }
    }
    let _ = json!(null);
}
