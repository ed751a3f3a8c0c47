//! Per-op label propagation goldens (issue 19; `docs/security.md`): one
//! program per op kind in `tests/ifc-goldens/*.ais`, run on the simulated
//! model with the policy in `warn` mode (labels tracked, nothing denied,
//! so every op runs), and every op's result label dumped as source names
//! next to it (`NAME.labels`; `AIS_BLESS=1` rewrites them).
//!
//! Each line: `Agent.flow region#op mnemonic [source text] -> [label]`,
//! the label's untrusted sources marked `!`; `(not run)` for an op that
//! never executed (an untaken branch). A label is the union over every
//! execution of the op (loop iterations, calls).
//!
//! Every tool declared with `capability NAME(...)` answers `"NAME says
//! hi"` (`*_list`: `["one", "two"]`, `*_count`: 3, `*_flag`: true); tools named `web_*` or `inbox_*` are untrusted (as are the
//! defaults: `http_get`, `search`, MCP tools). Directive `// ARGS: {json}`
//! gives the entry arguments.

use ais_ir::bytecode::Program;
use ais_ir::ifc::{FlowPolicy, Mode};
use ais_testkit::golden::{check_file, corpus, directive, rel};
use ais_testkit::MemoryHost;
use ais_vm::ifc::LabelTrace;
use ais_vm::llm::sim::SimBackend;
use ais_vm::{Host, RunOptions};
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::{json, Value as Json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DIR: &str = "tests/ifc-goldens";

/// The tools a source declares (`capability NAME(`).
fn capabilities(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|l| l.trim().strip_prefix("capability "))
        .filter_map(|r| r.split('(').next())
        .map(|n| n.trim().to_string())
        .collect()
}

fn policy() -> FlowPolicy {
    FlowPolicy {
        mode: Mode::Warn,
        untrusted: vec!["web_*".into(), "inbox_*".into()],
        ..FlowPolicy::default()
    }
}

/// The first line of `source` within the op's span, shortened.
fn snippet(source: &str, span: ais_ir::Span) -> String {
    let (a, b) = (span.start as usize, span.end as usize);
    let text = source.get(a..b.max(a)).unwrap_or("");
    let line = text.lines().next().unwrap_or("").trim();
    let short: String = line.chars().take(44).collect();
    if short.len() < line.len() {
        format!("{short}…")
    } else {
        short.to_string()
    }
}

/// `names` with the untrusted ones marked `!`.
fn mark(names: &BTreeSet<String>, bad: &BTreeSet<String>) -> Vec<String> {
    names
        .iter()
        .map(|n| {
            if bad.contains(n) {
                format!("!{n}")
            } else {
                n.clone()
            }
        })
        .collect()
}

fn dump(source: &str, program: &Program, trace: &LabelTrace, outcome: &str) -> String {
    let seen = trace.ops();
    let bad = trace.untrusted();
    let mut out = format!("# outcome: {outcome}\n");
    for (fi, flow) in program.flows.iter().enumerate() {
        let agent = program
            .agents
            .get(flow.agent as usize)
            .map_or("?", |a| a.name.as_str());
        for (ri, region) in flow.regions.iter().enumerate() {
            for (oi, instr) in region.ops.iter().enumerate() {
                if instr.n_results == 0 {
                    continue;
                }
                let mut what = instr.opcode.mnemonic().to_string();
                if let ais_ir::bytecode::Imm::Tool(t) = &instr.imm {
                    what = format!("{what} {t}");
                }
                let key = (false, fi as u32, ri as u32, oi as u32);
                let label = match seen.get(&key) {
                    None => "(not run)".to_string(),
                    Some(names) => format!("[{}]", mark(names, &bad).join(", ")),
                };
                out.push_str(&format!(
                    "{agent}.{} r{ri}#{oi} {what} `{}` -> {label}\n",
                    flow.name,
                    snippet(source, instr.span)
                ));
            }
        }
    }
    // Ops of inner plans, by position (their code is not in the program).
    for ((plan, f, r, o), names) in &seen {
        if *plan {
            out.push_str(&format!(
                "plan flow{f} r{r}#{o} -> [{}]\n",
                mark(names, &bad).join(", ")
            ));
        }
    }
    out
}

fn run_case(path: &Path) -> Result<(), Failed> {
    let source = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", rel(path)))?;
    let module =
        ais_compiler::driver::lower_source(&source).map_err(|d| format!("{}: {d:?}", rel(path)))?;
    let program = ais_ir::bytecode::compile(&module).map_err(|e| format!("{e:?}"))?;
    let args: Vec<(String, Json)> = match directive(&source, "ARGS") {
        Some(a) => serde_json::from_str::<serde_json::Map<String, Json>>(a)
            .map_err(|e| format!("ARGS: {e}"))?
            .into_iter()
            .collect(),
        None => Vec::new(),
    };
    let host = Arc::new(MemoryHost::new());
    for t in capabilities(&source) {
        let reply = match t.rsplit('_').next() {
            Some("list") => json!(["one", "two"]),
            Some("count") => json!(3),
            Some("flag") => json!(true),
            _ => json!(format!("{t} says hi")),
        };
        host.register_tool(&t, move |_| Ok(reply.clone()));
    }
    let trace = Arc::new(LabelTrace::default());
    let options = RunOptions {
        args,
        workers: Some(2),
        flow_policy: policy(),
        label_trace: Some(trace.clone()),
        planner: Some(Arc::new(ais_testkit::FrontEndPlanner::default())),
        ..RunOptions::default()
    };
    let report = ais_vm::run(
        &program,
        &options,
        Arc::new(SimBackend::new()),
        host as Arc<dyn Host>,
    );
    let outcome = match &report.outcome {
        Ok(v) => format!("ok {v}"),
        Err(e) => format!("error {e}"),
    };
    let text = dump(&source, &program, &trace, &outcome);
    let golden = path.with_extension("labels");
    check_file(&golden, &text).map_err(Failed::from)
}

fn main() {
    ais_testkit::golden::init();
    let args = Arguments::from_args();
    let cases: Vec<PathBuf> = corpus(DIR, "ais");
    assert!(!cases.is_empty(), "no cases in {DIR}");
    let trials = cases
        .into_iter()
        .map(|p| Trial::test(rel(&p), move || run_case(&p)))
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
