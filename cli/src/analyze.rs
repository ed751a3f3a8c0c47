//! `aisc analyze FILE`: what the dataflow engine can do with a program
//! before it runs: per flow, the critical path, the phases of work that can
//! run at once, and the estimated speed-up over running every op one after
//! the other. Costs are the op table's nominal latencies (ask 1000 ms,
//! think 3000, reason 10000, tool 500); see `ais_ir::passes::critical_path`.
//! Then the expected prompt-cache hit rate per class of calls sharing a
//! prefix (`ais_ir::passes::cache_estimate`).

use super::output::Output;
use super::OptArgs;
use ais_compiler::driver;
use ais_ir::passes::{critical_path, FlowEstimate};
use serde_json::json;
use std::collections::BTreeMap;

fn speedup(f: &FlowEstimate) -> f64 {
    if f.makespan_ms == 0 {
        1.0
    } else {
        f.sequential_ms as f64 / f.makespan_ms as f64
    }
}

/// `4 × ask, 1 × inv`.
fn summary(ops: &[ais_ir::Opcode]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for op in ops {
        *counts.entry(op.mnemonic()).or_default() += 1;
    }
    counts
        .iter()
        .map(|(op, n)| format!("{n} × {op}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn analyze(out: &mut Output, path: &std::path::Path, opt: &OptArgs, json_out: bool) -> i32 {
    let Some(source) = out.read_source(path) else {
        return 1;
    };
    let (sources, compiled) = crate::load::compile_input(path, &source, &Default::default());
    let mut compiled = match compiled {
        Ok(c) => c,
        Err(ds) => {
            out.diagnostics_map(&sources, &ds);
            return 1;
        }
    };
    out.diagnostics_map(&sources, &compiled.diagnostics);
    if let Err(e) = driver::optimize_unmeasured(&mut compiled.module, &opt.options()) {
        eprintln!("error: {e}");
        return 1;
    }
    let estimate = critical_path(&compiled.module);
    let cache = ais_ir::passes::cache_estimate(&compiled.module);
    if json_out {
        for f in &estimate.flows {
            let v = json!({
                "flow": format!("{}.{}", f.agent, f.flow),
                "entry": f.entry,
                "critical_path_ms": f.makespan_ms,
                "sequential_ms": f.sequential_ms,
                "speedup": speedup(f),
                "llm_calls": f.llm_calls,
                "phases": f.phases.iter().map(|p| json!({
                    "start_ms": p.start_ms,
                    "ops": p.ops.iter().map(|o| o.mnemonic()).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
                "path": f.path.iter().map(|s| json!({
                    "op": s.label, "start_ms": s.start_ms, "cost_ms": s.cost_ms,
                })).collect::<Vec<_>>(),
                "recursive_calls": f.recursive,
            });
            out.stdout(&format!("{v}\n"));
        }
        for c in &cache.classes {
            let v = json!({
                "cache_key": c.key,
                "calls": c.calls,
                "warm_calls": c.warm,
                "in_loop": c.in_loop,
                "prefix_blocks": c.prefix_blocks,
                "tools": c.tools,
                "expected_hit_rate": c.hit_rate(),
            });
            out.stdout(&format!("{v}\n"));
        }
        return 0;
    }
    let mut text = String::new();
    for f in &estimate.flows {
        text.push_str(&format!(
            "{}.{}{}\n",
            f.agent,
            f.flow,
            if f.entry { " (entry)" } else { "" }
        ));
        text.push_str(&format!(
            "  critical path  {} ms   sequential {} ms   estimated speed-up {:.2}×   LLM calls {}\n",
            f.makespan_ms,
            f.sequential_ms,
            speedup(f),
            f.llm_calls
        ));
        if !f.phases.is_empty() {
            text.push_str("  phases (work that can run at once):\n");
            for (i, p) in f.phases.iter().enumerate() {
                text.push_str(&format!(
                    "    {:>2}. at {:>6} ms: {}\n",
                    i + 1,
                    p.start_ms,
                    summary(&p.ops)
                ));
            }
        }
        if !f.path.is_empty() {
            let steps: Vec<String> = f
                .path
                .iter()
                .map(|s| format!("{} ({} ms)", s.label, s.cost_ms))
                .collect();
            text.push_str(&format!("  critical path: {}\n", steps.join(" → ")));
        }
        if !f.recursive.is_empty() {
            text.push_str(&format!(
                "  recursive calls not counted: {}\n",
                f.recursive.join(", ")
            ));
        }
    }
    text.push_str("prompt cache:\n");
    for line in cache.lines() {
        text.push_str(&format!("  {line}\n"));
    }
    text.push_str("(nominal latencies: ask 1000 ms, think/plan/reflect/verify/solve 3000, reason 10000, tool 500; loops without a known count assume 5 iterations)\n");
    out.stdout(&text);
    0
}
