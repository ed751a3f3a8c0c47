//! Benchmark results, target checks, and their markdown rendering.

use crate::env::Latencies;
use crate::stats::Stats;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// Our side of one workload.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Ours {
    /// Wall time of `ais_vm::run` (ms).
    pub in_process: Option<Stats>,
    /// The run summary's makespan (ms).
    pub makespan: Option<Stats>,
    /// `aisc run` (or `ais-bench exec`) process wall time (ms).
    pub whole_process: Option<Stats>,
    pub whole_via: String,
    pub compile: Option<Stats>,
    /// LLM calls per measured run, counted by the mock server.
    pub llm_calls: Vec<u64>,
    /// LLM calls of one run compiled at -O0 (workload 2).
    pub llm_calls_o0: Option<u64>,
    pub tokens: Option<Stats>,
    pub critical_path_ms: Option<u64>,
    /// LLM calls along that critical path.
    pub critical_path_llm_calls: Option<u64>,
    pub avg_parallelism: Option<Stats>,
    pub peak_parallelism: u32,
    pub sched_overhead_us: Option<Stats>,
    /// Per in-process run, the share of the machine's CPU time the host
    /// took away (%, see [`crate::steal`]); absent where not measurable.
    pub host_steal_pct: Option<Stats>,
    pub max_in_flight: usize,
    pub failures: usize,
    pub first_error: Option<String>,
}

/// One LangGraph style of one workload.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Lg {
    /// `graph.invoke` wall time (ms), reported by the script.
    pub in_process: Option<Stats>,
    /// Python process wall time (ms): start, imports, graph build, invoke.
    pub whole_process: Option<Stats>,
    pub llm_calls: Vec<u64>,
    pub tokens: Option<Stats>,
    pub max_in_flight: usize,
    pub failures: usize,
    pub first_error: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkloadResult {
    pub id: String,
    pub name: String,
    pub file: String,
    pub ours: Ours,
    pub lg_seq: Option<Lg>,
    pub lg_par: Option<Lg>,
}

/// One type-verification program (workload 3).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct TvCase {
    pub file: String,
    pub expected_code: String,
    pub rejected: bool,
    pub codes: Vec<String>,
    /// In-process detection (check + lower) time (ms).
    pub detect_in_process: Option<Stats>,
    /// `aisc run` process wall time until it exits with the rejection (ms).
    pub detect_whole_process: Option<Stats>,
    /// LLM calls the mock server saw during the `aisc run` attempts.
    pub llm_calls: u64,
    /// LangGraph: did an exception surface, after how long, after how many calls.
    pub lg_detected: Option<bool>,
    pub lg_error: Option<String>,
    pub lg_detect_ms: Option<Stats>,
    pub lg_llm_calls: Option<u64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Results {
    /// The driver's command line (for the docs).
    pub command: String,
    pub latencies: Option<Latencies>,
    pub runs: usize,
    pub warmup: usize,
    pub workers: usize,
    pub commit: String,
    pub langgraph: Option<String>,
    pub workloads: Vec<WorkloadResult>,
    pub type_verification: Vec<TvCase>,
    /// LangGraph workload-3 script, whole process (all five cases) (ms).
    pub tv_lg_whole_process: Option<Stats>,
    /// Direct `ask` calls through our backend (no VM), minus the mock's
    /// latency: the transport floor every LLM op pays (ms).
    pub transport_floor: Option<Stats>,
    /// The same for 64 concurrent calls (one round's wall time minus the
    /// mock's latency) (ms).
    pub transport_floor_64: Option<Stats>,
}

/// A target and whether it is met, with the evidence.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    pub target: String,
    pub met: bool,
    pub detail: String,
}

fn mean(s: &Option<Stats>) -> Option<f64> {
    s.as_ref().map(|s| s.mean)
}

fn calls_text(c: &[u64]) -> String {
    match (c.iter().min(), c.iter().max()) {
        (Some(a), Some(b)) if a == b => a.to_string(),
        (Some(a), Some(b)) => format!("{a}–{b}"),
        _ => "–".into(),
    }
}

fn ms(s: &Option<Stats>) -> String {
    match s {
        Some(s) => s.pm(),
        None => "–".into(),
    }
}

fn ratio(them: &Option<Stats>, ours: &Option<Stats>) -> String {
    match (mean(them), mean(ours)) {
        (Some(t), Some(o)) if o > 0.0 => format!("{:.2}×", t / o),
        _ => "–".into(),
    }
}

/// Makespan within 2% + 2 ms of the critical path.
pub fn makespan_ok(makespan_ms: f64, cp_ms: u64) -> bool {
    let cp = cp_ms as f64;
    (makespan_ms - cp).abs() <= 0.02 * cp + 2.0
}

/// Checks the issue's targets against the results.
pub fn verdicts(r: &Results) -> Vec<Verdict> {
    let mut v = Vec::new();
    for w in &r.workloads {
        let Some(par) = &w.lg_par else { continue };
        for (label, o, t) in [
            ("in-process", &w.ours.in_process, &par.in_process),
            ("whole-process", &w.ours.whole_process, &par.whole_process),
        ] {
            if let (Some(o), Some(t)) = (mean(o), mean(t)) {
                v.push(Verdict {
                    target: format!(
                        "{} {}: ours ≤ hand-parallel LangGraph ({label})",
                        w.id, w.name
                    ),
                    met: o <= t,
                    detail: format!("{o:.1} ms vs {t:.1} ms ({:.2}×)", t / o),
                });
            }
        }
    }
    for w in &r.workloads {
        if let (Some(m), Some(cp)) = (&w.ours.makespan, w.ours.critical_path_ms) {
            let met = makespan_ok(m.mean, cp);
            let mut detail = format!(
                "mean {:.2} ms (max {:.2}) vs {cp} ms: {:+.2} ms, bound ±{:.2} ms",
                m.mean,
                m.max,
                m.mean - cp as f64,
                0.02 * cp as f64 + 2.0
            );
            if let Some(k) = w.ours.critical_path_llm_calls.filter(|&k| k > 0) {
                let _ = write!(
                    detail,
                    "; {k} LLM call{} on the path: {:+.2} ms per call",
                    if k == 1 { "" } else { "s" },
                    (m.mean - cp as f64) / k as f64
                );
            }
            if let Some(s) = &w.ours.host_steal_pct {
                let _ = write!(
                    detail,
                    "; host steal during the runs {:.1}% mean, {:.1}% max",
                    s.mean, s.max
                );
            }
            v.push(Verdict {
                target: format!(
                    "{} {}: makespan within 2% + 2 ms of the critical path",
                    w.id, w.name
                ),
                met,
                detail,
            });
        }
    }
    if let Some(w) = r.workloads.iter().find(|w| w.id == "2") {
        let o1 = calls_text(&w.ours.llm_calls);
        let o0 = w.ours.llm_calls_o0.map_or("–".into(), |c| c.to_string());
        v.push(Verdict {
            target: "2 Chain Fusion: 5 LLM calls at -O0 → 1 at -O1".into(),
            met: w.ours.llm_calls_o0 == Some(5)
                && !w.ours.llm_calls.is_empty()
                && w.ours.llm_calls.iter().all(|&c| c == 1),
            detail: format!("-O0: {o0} calls, -O1: {o1} calls"),
        });
    }
    if !r.type_verification.is_empty() {
        let ok = r
            .type_verification
            .iter()
            .all(|c| c.rejected && c.llm_calls == 0 && c.codes.contains(&c.expected_code));
        v.push(Verdict {
            target: "3 Type Verification: five programs rejected at compile time, zero LLM calls"
                .into(),
            met: ok && r.type_verification.len() == 5,
            detail: r
                .type_verification
                .iter()
                .map(|c| {
                    format!(
                        "{}: {} ({}) {} calls",
                        short(&c.file),
                        if c.rejected {
                            "rejected"
                        } else {
                            "NOT rejected"
                        },
                        c.codes.join(","),
                        c.llm_calls
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
        });
    }
    v
}

fn short(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The generated part of `## Workloads vs LangGraph` (markdown).
pub fn markdown(r: &Results, commands: &str) -> String {
    let mut o = String::new();
    let lat = r.latencies.unwrap_or_default();
    let _ = writeln!(
        o,
        "Run: commit `{}`, {} warm-up + {} measured runs per cell, mock latencies ask {} ms · think/plan/reflect/verify {} ms · reason {} ms, tools {} ms; {} scheduler workers; {}.\n",
        r.commit,
        r.warmup,
        r.runs,
        lat.ask_ms,
        lat.think_ms,
        lat.reason_ms,
        lat.tool_ms,
        r.workers,
        r.langgraph.as_deref().unwrap_or("LangGraph not run")
    );
    let _ = writeln!(o, "```sh\n{}\n```\n", commands.trim_end());
    if let Some(f) = &r.transport_floor {
        let _ = write!(
            o,
            "Transport floor (our OpenAI backend straight to the mock, no VM): one `ask` takes the mock's latency plus {} ms (p50 {:.2}, p95 {:.2})",
            f.pm(),
            f.p50,
            f.p95
        );
        if let Some(g) = &r.transport_floor_64 {
            let _ = write!(
                o,
                "; 64 concurrent `ask`s finish {} ms after it (p95 {:.2})",
                g.pm(),
                g.p95
            );
        }
        let _ = writeln!(
            o,
            ". Every LLM call on a critical path pays this, whatever the scheduler does.\n"
        );
    }
    let _ = writeln!(
        o,
        "### Latency, ours vs LangGraph (ms, mean ± std; ratio = LangGraph / ours)\n"
    );
    let _ = writeln!(
        o,
        "| # | workload | ours in-process | LG hand-parallel | ratio | LG sequential | ratio | ours whole process | LG hand-parallel | ratio | LG sequential | ratio | LLM calls ours / par / seq |"
    );
    let _ = writeln!(
        o,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for w in &r.workloads {
        let none = Lg::default();
        let par = w.lg_par.as_ref().unwrap_or(&none);
        let seq = w.lg_seq.as_ref().unwrap_or(&none);
        let via = if w.ours.whole_via.contains("exec") {
            "ᵃ"
        } else {
            ""
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {}{via} | {} | {} | {} | {} | {} / {} / {} |",
            w.id,
            w.name,
            ms(&w.ours.in_process),
            ms(&par.in_process),
            ratio(&par.in_process, &w.ours.in_process),
            ms(&seq.in_process),
            ratio(&seq.in_process, &w.ours.in_process),
            ms(&w.ours.whole_process),
            ms(&par.whole_process),
            ratio(&par.whole_process, &w.ours.whole_process),
            ms(&seq.whole_process),
            ratio(&seq.whole_process, &w.ours.whole_process),
            calls_text(&w.ours.llm_calls),
            calls_text(&par.llm_calls),
            calls_text(&seq.llm_calls),
        );
    }
    let _ = writeln!(
        o,
        "\nIn-process: ours = the `ais_vm::run` call (worker start-up included, compilation not); LangGraph = `graph.invoke`. Whole process: from spawning the process to its exit — `aisc run FILE --config …` (source compiled in the process), or `python wNN.py` (interpreter start, imports, graph construction). ᵃ `ais-bench exec` (same compile + run path as `aisc run`, plus the benchmark's tool registry: `aisc run` has none yet). LLM calls are counted by the mock server.\n"
    );
    let _ = writeln!(o, "### Our runs in detail\n");
    let _ = writeln!(
        o,
        "| # | critical path (ms) [LLM calls on it] | makespan mean ± std | p50 | p95 | in-process p50 / p95 | tokens | avg / peak parallelism | max calls in flight | scheduler overhead (µs/op) | compile (ms) | host steal % mean / max | failures |"
    );
    let _ = writeln!(
        o,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for w in &r.workloads {
        let u = &w.ours;
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} | {} |",
            w.id,
            match (u.critical_path_ms, u.critical_path_llm_calls) {
                (Some(c), Some(k)) => format!("{c} [{k}]"),
                (Some(c), None) => c.to_string(),
                _ => "–".into(),
            },
            ms(&u.makespan),
            u.makespan.map_or("–".into(), |s| format!("{:.1}", s.p50)),
            u.makespan.map_or("–".into(), |s| format!("{:.1}", s.p95)),
            u.in_process
                .map_or("–".into(), |s| format!("{:.1} / {:.1}", s.p50, s.p95)),
            u.tokens.map_or("–".into(), |s| format!("{:.0}", s.mean)),
            u.avg_parallelism
                .map_or("–".into(), |s| format!("{:.2}", s.mean)),
            u.peak_parallelism,
            u.max_in_flight,
            u.sched_overhead_us
                .map_or("–".into(), |s| format!("{:.2}", s.mean)),
            u.compile.map_or("–".into(), |s| format!("{:.2}", s.mean)),
            u.host_steal_pct
                .map_or("–".into(), |s| format!("{:.1} / {:.1}", s.mean, s.max)),
            u.failures,
        );
    }
    let _ = writeln!(
        o,
        "\nCritical path: the entry flow's longest dependency chain with every LLM call taking exactly its class's mock latency and every tool call its fixed latency (computed by the driver from the bytecode; workload 9 is routed to its longest branch). Makespan: the VM's run summary (entry frame created → completed). Parallelism: Σ op durations / makespan, and the most ops in flight. Tokens: prompt + completion as reported by the mock. Host steal: the CPU time the hypervisor gave to other guests during each in-process run, as a share of the machine's CPUs over the run's wall time (`/proc/stat`, 10 ms ticks); a run that lost CPU time to the host is slow whatever the runtime does.\n"
    );
    if !r.type_verification.is_empty() {
        let _ = writeln!(o, "### Workload 3: type verification\n");
        let _ = writeln!(
            o,
            "| program | expected | ours | detection in process (ms) | `aisc run` until rejected (ms) | LLM calls | LangGraph | LG time to failure (ms) | LG LLM calls |"
        );
        let _ = writeln!(o, "|---|---|---|---:|---:|---:|---|---:|---:|");
        for c in &r.type_verification {
            let lg = match (c.lg_detected, &c.lg_error) {
                (Some(true), Some(e)) => format!("runtime `{}`", e.split(':').next().unwrap_or(e)),
                (Some(false), _) => "not detected (runs to the end)".into(),
                _ => "–".into(),
            };
            let _ = writeln!(
                o,
                "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} |",
                short(&c.file),
                c.expected_code,
                if c.rejected {
                    format!("rejected ({})", c.codes.join(", "))
                } else {
                    "**accepted**".into()
                },
                ms(&c.detect_in_process),
                ms(&c.detect_whole_process),
                c.llm_calls,
                lg,
                ms(&c.lg_detect_ms),
                c.lg_llm_calls.map_or("–".into(), |n| n.to_string()),
            );
        }
        if let Some(s) = &r.tv_lg_whole_process {
            let _ = writeln!(
                o,
                "\nLangGraph's five cases run in one Python process: {} ms whole process.",
                s.pm()
            );
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(o, "### Targets\n");
    for t in verdicts(r) {
        let _ = writeln!(
            o,
            "- {} **{}** — {}",
            if t.met { "✅" } else { "❌" },
            t.target,
            t.detail
        );
    }
    o
}

/// Replaces the text between `begin` and `end` markers in the
/// `## Workloads vs LangGraph` section of `doc` (creating the section, or
/// the file's title, when missing). Text outside the markers is kept.
pub fn splice(doc: &str, generated: &str, intro: &str) -> String {
    const HEADING: &str = "## Workloads vs LangGraph";
    const BEGIN: &str = "<!-- ais-bench workloads: begin (generated by `ais-bench workloads`; edits here are overwritten) -->";
    const END: &str = "<!-- ais-bench workloads: end -->";
    let block = format!("{BEGIN}\n{}\n{END}", generated.trim_end());
    let mut doc = if doc.trim().is_empty() {
        "# Benchmarks\n".to_string()
    } else {
        doc.to_string()
    };
    if let (Some(b), Some(e)) = (doc.find(BEGIN), doc.find(END)) {
        if b < e {
            doc.replace_range(b..e + END.len(), &block);
            return doc;
        }
    }
    if let Some(h) = doc.find(HEADING) {
        // Section exists without markers: put the block at its end.
        let after = h + HEADING.len();
        let end = doc[after..]
            .find("\n## ")
            .map_or(doc.len(), |i| after + i + 1);
        let mut insert = String::new();
        if !doc[..end].ends_with("\n\n") {
            insert.push('\n');
        }
        insert.push_str(&block);
        insert.push_str("\n\n");
        doc.insert_str(end, &insert);
        return doc;
    }
    if !doc.ends_with('\n') {
        doc.push('\n');
    }
    let _ = write!(doc, "\n{HEADING}\n\n{}\n\n{block}\n", intro.trim_end());
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_keeps_other_sections_and_replaces_block() {
        let doc = "# Benchmarks\n\n## Front end\n\nfast\n";
        let once = splice(doc, "TABLE 1", "intro");
        assert!(once.contains("## Front end\n\nfast\n"));
        assert!(once.contains("## Workloads vs LangGraph\n\nintro\n"));
        assert!(once.contains("TABLE 1"));
        let twice = splice(&once, "TABLE 2", "intro");
        assert!(!twice.contains("TABLE 1"));
        assert!(twice.contains("TABLE 2"));
        assert_eq!(twice.matches("## Workloads vs LangGraph").count(), 1);
        let with_later = format!("{twice}\n## Later\n\nkept\n");
        let third = splice(&with_later, "TABLE 3", "intro");
        assert!(third.ends_with("## Later\n\nkept\n"));
        assert!(splice("", "T", "i").starts_with("# Benchmarks\n"));
    }

    #[test]
    fn makespan_bound() {
        assert!(makespan_ok(101.9, 100));
        assert!(makespan_ok(104.0, 100));
        assert!(!makespan_ok(104.1, 100));
        assert!(makespan_ok(1818.0, 1800));
    }
}
