//! Front-end benchmarks (issue: `aisc check` speed). Run with
//! `cargo bench -p ais-cli --bench frontend`; results are printed and
//! written to `docs/bench/frontend.md`.
//!
//! 1. Throughput of parse + check on a generated 100k-line program
//!    (target ≥ 500k lines/s).
//! 2. Whole-process `aisc check` on a file with 5 errors, including process
//!    start (target ≤ 5 ms; the A-PXM paper reports 65 ms).
//! 3. Whole-process `aisc run` of a trivial program.
//! 4. Compile time against program size: the whole `aisc build -O1`
//!    pipeline (check, lower, verify, optimize, codegen, encode) at about
//!    10k, 100k and 1M IR ops, plus shapes that used to be quadratic
//!    (target ≥ 200k ops/s).

use ais_compiler::driver::{check_source, compile_source, with_deep_stack};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// One agent using every statement form (`WorkerN` renamed per copy), shared
/// with the compile-scale shapes (`bench/src/shapes.rs`).
const WORKER_AGENT: &str = include_str!("../../bench/programs/worker_agent.ais");

/// A realistic program of about `lines` lines: many agents, each with memory,
/// beliefs, a capability, and flows using every statement form.
fn generate(lines: usize) -> String {
    let mut s = String::with_capacity(lines * 40);
    let mut i = 0;
    while s.lines().count() < lines {
        s.push_str(&WORKER_AGENT.replace("WorkerN", &format!("Worker{i}")));
        i += 1;
    }
    s
}

const FIVE_ERRORS: &str = r#"agent Researcher {
    flow research(topic: str) -> str {
        return ask("Research {topic}.")
    }
}
agent Coordinator {
    capability score(text: str) -> number;
    @entry flow main(topic: str) -> str {
        let plan = ask("Plan a report on {topic}.", notes)
        Researcher.reserch(plan) -> findings
        let n: number = ask("How many sections?", plan)
        umem(findings, "disk")
        let s = score(findings, 3)
        return findings
    }
}
"#;

/// IR ops of a module (every flow, nested regions included).
fn op_count(m: &ais_ir::Module) -> usize {
    m.agents
        .values()
        .flat_map(|a| a.flows.values())
        .map(|f| f.dfg.walk_region(f.body).len())
        .sum()
}

/// The `aisc build -O1 -o FILE` pipeline in process; returns the lowered op
/// count and the artifact size.
fn build_o1(src: &str) -> (usize, usize) {
    with_deep_stack(|| {
        let mut module = match compile_source(src) {
            Ok(c) => c.module,
            Err(d) => panic!("benchmark program must compile: {:?}", d.first()),
        };
        let ops = op_count(&module);
        ais_compiler::driver::optimize(&mut module, &Default::default()).expect("optimize");
        let program = ais_ir::bytecode::compile(&module).expect("codegen");
        let bytes = ais_ir::bytecode::encode(&program).expect("encode");
        let n = bytes.len();
        // Like `aisc build`, which exits without freeing the IR.
        std::mem::forget(module);
        std::mem::forget(program);
        (ops, n)
    })
}

/// A chain of `let`s, each extending the previous string (180k of them took
/// 21 s before the passes were made linear).
fn let_chain(n: usize) -> String {
    let mut s =
        String::from("agent A {\n    @entry flow main(x: str) -> str {\n        let v0 = x\n");
    for i in 1..n {
        s.push_str(&format!("        let v{i} = v{} + \"{i}\"\n", i - 1));
    }
    s.push_str(&format!("        return v{}\n    }}\n}}\n", n - 1));
    s
}

/// One `return` of a `+` chain of `n` terms (10k took 4.2 s and 1 GB).
fn plus_chain(n: usize) -> String {
    let terms: Vec<String> = (0..n)
        .map(|i| {
            if i % 2 == 0 {
                "x".into()
            } else {
                format!("\"t{i}\"")
            }
        })
        .collect();
    format!(
        "agent A {{\n    @entry flow main(x: str) -> str {{\n        return {}\n    }}\n}}\n",
        terms.join(" + ")
    )
}

fn compile_scaling() -> String {
    let mut out = String::from(
        "\n## Compile time against program size\n\nThe whole `aisc build -O1` pipeline in process (check, lower, verify, optimize, codegen, encode; the IR is not freed, as in `aisc build`), median of 3 runs. *ops* are the IR ops after lowering.\n\n| program | source | ops | time | ops/s |\n|---|---|---|---|---|\n",
    );
    // Calibrate the realistic generator: ops per line.
    let probe = generate(2_000);
    let per_line = build_o1(&probe).0 as f64 / probe.lines().count() as f64;
    let mut cases: Vec<(String, String)> = [10_000usize, 100_000, 1_000_000]
        .iter()
        .map(|&ops| {
            let lines = (ops as f64 / per_line).ceil() as usize;
            (format!("generated agents, ~{ops} ops"), generate(lines))
        })
        .collect();
    cases.push(("180k `let` chain".into(), let_chain(180_000)));
    cases.push(("10k-term `+` chain".into(), plus_chain(10_000)));
    for (name, src) in cases {
        let mut runs = Vec::new();
        let mut ops = 0;
        for _ in 0..3 {
            let t = Instant::now();
            ops = build_o1(&src).0;
            runs.push(t.elapsed());
        }
        let (_, med, _) = stats(runs);
        out.push_str(&format!(
            "| {name} | {} KiB | {ops} | {:.0} ms | {:.0} |\n",
            src.len() / 1024,
            ms(med),
            ops as f64 / med.as_secs_f64()
        ));
    }
    out.push_str("\nTarget: ≥ 200,000 ops/s through `aisc build -O1` at every size.\n");
    out
}

fn stats(mut xs: Vec<Duration>) -> (Duration, Duration, Duration) {
    xs.sort();
    (xs[0], xs[xs.len() / 2], xs[xs.len() - 1])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let mut report = String::from("# Front-end benchmarks\n\n");
    report.push_str("Command: `cargo bench -p ais-cli --bench frontend` (release build).\n");
    report.push_str(&format!(
        "Machine: {} logical cores.\n\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    ));

    // 1. Throughput.
    let src = generate(100_000);
    let lines = src.lines().count();
    let fe = with_deep_stack(|| check_source(&src).diagnostics.len());
    assert_eq!(fe, 0, "generated program must be clean");
    let mut runs = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        // Like `aisc check`, which exits without freeing the tree.
        let n = with_deep_stack(|| {
            let fe = check_source(&src);
            let n = fe.diagnostics.len();
            std::mem::forget(fe);
            n
        });
        runs.push(t.elapsed());
        assert_eq!(n, 0);
    }
    let (min, med, max) = stats(runs);
    let rate = |d: Duration| lines as f64 / d.as_secs_f64();
    report.push_str(&format!(
        "## `check` throughput\n\nA generated program of {lines} lines ({} KiB): parse + full semantic check, 7 runs (the tree is not freed, as in `aisc check`, which exits right after).\n\n| | time | lines/s |\n|---|---|---|\n| min | {:.1} ms | {:.0} |\n| median | {:.1} ms | {:.0} |\n| max | {:.1} ms | {:.0} |\n\nTarget: ≥ 500,000 lines/s.\n\n",
        src.len() / 1024,
        ms(min), rate(min), ms(med), rate(med), ms(max), rate(max)
    ));
    // Where the time goes.
    let phase = |f: &dyn Fn() -> usize| {
        let mut runs = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            std::hint::black_box(f());
            runs.push(t.elapsed());
        }
        stats(runs).1
    };
    let lex = phase(&|| ais_compiler::syntax::lexer::lex(&src).0.len());
    let parse = phase(&|| with_deep_stack(|| ais_compiler::syntax::parse(&src).file.agents.len()));
    report.push_str(&format!(
        "Phases (median of 5): lex {:.1} ms, lex + parse {:.1} ms, lex + parse + check {:.1} ms.\n\n",
        ms(lex),
        ms(parse),
        ms(med)
    ));
    let mut lower_runs = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let ok = with_deep_stack(|| compile_source(&src).is_ok());
        lower_runs.push(t.elapsed());
        assert!(ok);
    }
    let (lmin, lmed, _) = stats(lower_runs);
    report.push_str(&format!(
        "Check + lower to verified IR of the same program: min {:.1} ms, median {:.1} ms ({:.0} lines/s at the median).\n\n",
        ms(lmin), ms(lmed), rate(lmed)
    ));

    // 2. Whole process on a file with 5 errors.
    let dir = std::env::temp_dir().join("ais-bench-frontend");
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join("five_errors.ais");
    std::fs::write(&file, FIVE_ERRORS).expect("write temp file");
    let aisc = Path::new(env!("CARGO_BIN_EXE_aisc"));
    let run = || {
        let t = Instant::now();
        let out = Command::new(aisc)
            .args(["check", "--color", "never"])
            .arg(&file)
            .output()
            .expect("run aisc");
        (t.elapsed(), out)
    };
    let (_, out) = run();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let errors = stderr.matches("] Error:").count();
    assert_eq!(
        errors, 5,
        "the benchmark file must have exactly 5 errors:\n{stderr}"
    );
    let mut runs = Vec::new();
    for _ in 0..50 {
        runs.push(run().0);
    }
    let (min, med, max) = stats(runs);
    report.push_str(&format!(
        "## Whole-process `aisc check` on a file with 5 errors\n\nProcess start to exit, including rendering all 5 reports; 50 runs.\n\n| min | median | max |\n|---|---|---|\n| {:.2} ms | {:.2} ms | {:.2} ms |\n\nTarget: ≤ 5 ms (the A-PXM paper: 65 ms for the same job).\n",
        ms(min), ms(med), ms(max)
    ));

    // 3. Whole-process `aisc run` of a trivial program (simulator, no delay,
    //    ephemeral memory): compile + VM start + run + exit.
    let trivial = dir.join("trivial.ais");
    std::fs::write(
        &trivial,
        "agent A {\n    @entry flow main(name: str) -> str {\n        return ask(\"Greet {name}.\")\n    }\n}\n",
    )
    .expect("write temp file");
    let run_once = || {
        let t = Instant::now();
        let out = Command::new(aisc)
            .args([
                "run",
                "-q",
                "--memory",
                ":memory:",
                "--sim-delay-scale",
                "0",
                "--arg",
                "name=Ada",
            ])
            .arg(&trivial)
            .env_remove("OPENAI_API_KEY")
            .output()
            .expect("run aisc");
        (t.elapsed(), out)
    };
    let (_, out) = run_once();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut runs = Vec::new();
    for _ in 0..50 {
        runs.push(run_once().0);
    }
    let (min, med, max) = stats(runs);
    report.push_str(&format!(
        "\n## Whole-process `aisc run` of a trivial program\n\nOne `ask` on the simulator with no delay, ephemeral memory: process start, compile, VM start, run, exit; 50 runs.\n\n| min | median | max |\n|---|---|---|\n| {:.2} ms | {:.2} ms | {:.2} ms |\n\nTarget: ≤ 10 ms.\n",
        ms(min), ms(med), ms(max)
    ));

    report.push_str(&compile_scaling());

    print!("{report}");
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/bench/frontend.md");
    if let Err(e) = std::fs::write(&out, &report) {
        eprintln!("could not write {}: {e}", out.display());
    }
}
