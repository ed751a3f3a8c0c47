//! Running one program on the oracle and on the VM and comparing what they
//! did. Shared by the differential property test, the golden corpus and the
//! examples harness.
//!
//! Comparison rules (see docs/runtime.md, "Reference interpreter and
//! tests"):
//! - **-O0**: the oracle and the VM both use the prompt-hashing
//!   [`FakeBackend`]; results, printed lines, memory per agent and tier (in
//!   order), beliefs, tool calls (as a multiset: independent calls may run in
//!   any order) and LLM requests (kind, prompt, context; as a multiset) must
//!   agree exactly.
//! - **-O1/-O2**: `fuse-ask` merges ask chains into one call (other prompts,
//!   fewer calls) and CSE may merge identical calls, so LLM requests are not
//!   compared there. To keep *values* comparable, both sides use
//!   [`FixedText`], whose reply to a text op depends only on the op kind, so a
//!   fused chain yields the same value as the chain; everything else is
//!   compared exactly as at -O0.
//! - When both sides fail, only the failure is compared (see [`describe`]).
#![allow(clippy::unwrap_used, dead_code)]

use ais_compiler::driver::{compile_source, optimize, OptOptions};
use ais_ir::passes::OptLevel;
use ais_ir::{bytecode, Tier};
use ais_oracle::{Program, TIERS};
use ais_testkit::fake::FakeBackend;
use ais_testkit::MemoryHost;
use ais_vm::llm::{LlmOpKind, LlmResponse, Usage};
use ais_vm::{HostError, RunOptions};
use serde_json::{json, Value as Json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One LLM request as compared: kind, prompt, `(label, text)` context blocks.
pub type Request = (String, String, Vec<(String, String)>);

/// One agent's tier: agent, tier, `(key, value)` entries in order.
pub type TierEntries = (String, String, Vec<(String, Json)>);

/// Which reply function the LLM fake uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replies {
    /// The prompt-hashing `FakeBackend` (-O0).
    Hashed,
    /// Text replies fixed per op kind (-O1/-O2, see the module doc).
    FixedText,
}

/// The LLM fake both sides use: the prompt-hashing [`FakeBackend`], whose
/// text ops are scripted to one fixed reply for [`Replies::FixedText`]. It
/// keeps every request it gets ([`sorted_requests`]).
pub fn fake_model(replies: Replies) -> FakeBackend {
    let fake = FakeBackend::new().named("recording-fake");
    match replies {
        Replies::Hashed => fake,
        Replies::FixedText => fake.with_script(|request, _| {
            let text_op = matches!(
                request.kind,
                LlmOpKind::Ask | LlmOpKind::Think | LlmOpKind::Reason | LlmOpKind::Llm
            );
            text_op.then(|| {
                Ok(LlmResponse {
                    text: "model reply".into(),
                    json: None,
                    usage: Usage::default(),
                    finish_reason: "stop".into(),
                    model: "fixed".into(),
                    latency: Duration::ZERO,
                    simulated: true,
                    tool_calls: Vec::new(),
                })
            })
        }),
    }
}

/// The requests `fake` got, sorted, so independent calls compare in any
/// order.
pub fn sorted_requests(fake: &FakeBackend) -> Vec<Request> {
    let mut r: Vec<Request> = fake
        .requests()
        .iter()
        .map(|request| {
            (
                request.kind.name().to_string(),
                request.prompt.clone(),
                request
                    .context
                    .iter()
                    .map(|c| (c.label.clone(), c.text.clone()))
                    .collect(),
            )
        })
        .collect();
    r.sort();
    r
}

/// A `MemoryHost` with the deterministic tools the generated programs use,
/// and a log of tool calls. Each tool is registered under its plain name
/// (programs in `tests/differential/`) and under the provider `t`
/// (`t.lookup`, `t.fail`, `t.record`: the generator's, see `gen/render.rs`).
pub fn host_with_tools(log: Arc<Mutex<Vec<String>>>) -> MemoryHost {
    let host = MemoryHost::new();
    // Side-effecting: its result depends on how many calls came before.
    let counter = Arc::new(Mutex::new(0u64));
    for prefix in ["", "t."] {
        let l = log.clone();
        // Read-only: a pure function of its arguments.
        host.register_tool(&format!("{prefix}lookup"), move |args| {
            l.lock().unwrap().push(format!("lookup {args}"));
            let q = args.get("q").map(ToString::to_string).unwrap_or_default();
            Ok(json!({ "hit": format!("found {q}"), "len": q.len() }))
        });
        let l = log.clone();
        host.register_tool(&format!("{prefix}fail"), move |args| {
            l.lock().unwrap().push(format!("fail {args}"));
            Err(HostError::new("tool.failed", "this tool always fails"))
        });
        let l = log.clone();
        let counter = counter.clone();
        host.register_tool(&format!("{prefix}record"), move |args| {
            l.lock().unwrap().push(format!("record {args}"));
            let mut c = counter.lock().unwrap();
            *c += 1;
            Ok(json!(*c))
        });
    }
    host
}

/// Everything one run did that the comparison looks at.
#[derive(Debug, PartialEq)]
pub struct Observed {
    /// `Err(())`: the run failed (codes differ in wording between sides).
    pub result: Result<Json, ()>,
    pub printed: Vec<String>,
    pub memory: Vec<TierEntries>,
    pub beliefs: Vec<(String, String, Json)>,
    pub tool_calls: Vec<String>,
    /// `None` where LLM requests are not compared (-O1/-O2).
    pub llm: Option<Vec<Request>>,
}

/// Numbers compare by value (the VM may give `3` where the oracle gives `3.0`).
pub fn normalize(v: &Json) -> Json {
    match v {
        // `-0` and `0` are the same number to a program (same text form).
        Json::Number(n) => json!(n.as_f64().unwrap_or(0.0) + 0.0),
        Json::Array(a) => Json::Array(a.iter().map(normalize).collect()),
        Json::Object(o) => Json::Object(o.iter().map(|(k, v)| (k.clone(), normalize(v))).collect()),
        other => other.clone(),
    }
}

fn agents_and_beliefs(program: &Program) -> Vec<(String, Vec<String>)> {
    use ais_compiler::syntax::ast::Member;
    program
        .file
        .agents
        .iter()
        .map(|a| {
            let beliefs = a
                .members
                .iter()
                .flat_map(|m| match m {
                    Member::Beliefs(b, _) => b.iter().map(|b| b.name.name.clone()).collect(),
                    _ => Vec::new(),
                })
                .collect();
            (a.name.name.clone(), beliefs)
        })
        .collect()
}

fn tier_of(name: &str) -> Tier {
    match name {
        "stm" => Tier::Stm,
        "ltm" => Tier::Ltm,
        _ => Tier::Episodic,
    }
}

/// Runs `program` on the oracle.
pub fn run_oracle(program: &Program, args: &[(String, Json)], replies: Replies) -> Observed {
    let backend = fake_model(replies);
    let log = Arc::new(Mutex::new(Vec::new()));
    let host = host_with_tools(log.clone());
    let outcome = ais_oracle::run(program, args, &backend, &host);
    let world = outcome.world;
    let mut memory = Vec::new();
    let mut beliefs = Vec::new();
    for (agent, names) in agents_and_beliefs(program) {
        for tier in TIERS {
            let entries = world
                .memory
                .get(&(agent.clone(), tier.to_string()))
                .cloned()
                .unwrap_or_default();
            if !entries.is_empty() {
                let entries = entries
                    .iter()
                    .map(|(k, v)| (k.clone(), normalize(v)))
                    .collect();
                memory.push((agent.clone(), tier.to_string(), entries));
            }
        }
        for name in names {
            let v = world
                .beliefs
                .get(&(agent.clone(), name.clone()))
                .cloned()
                .unwrap_or(Json::Null);
            beliefs.push((agent.clone(), name, normalize(&v)));
        }
    }
    let mut tool_calls = log.lock().unwrap().clone();
    tool_calls.sort();
    Observed {
        result: outcome.result.map(|v| normalize(&v)).map_err(|_| ()),
        printed: world.printed,
        memory,
        beliefs,
        tool_calls,
        llm: (replies == Replies::Hashed).then(|| sorted_requests(&backend)),
    }
}

/// Optimizes a copy of the lowered `module` at `level` and encodes it.
pub fn compile(module: &ais_ir::Module, level: OptLevel) -> bytecode::Program {
    let mut module = module.clone();
    optimize(
        &mut module,
        &OptOptions {
            level,
            verify_each: false,
            ..OptOptions::default()
        },
    )
    .unwrap();
    bytecode::compile(&module).unwrap()
}

/// Runs compiled `code` on the VM with `workers` threads.
pub fn run_vm(
    program: &Program,
    code: &bytecode::Program,
    args: &[(String, Json)],
    workers: usize,
    replies: Replies,
) -> Observed {
    run_vm_speculating(program, code, args, workers, replies, None)
}

/// [`run_vm`] with a speculation budget (`tests/speculation.rs`).
pub fn run_vm_speculating(
    program: &Program,
    code: &bytecode::Program,
    args: &[(String, Json)],
    workers: usize,
    replies: Replies,
    speculate: Option<ais_vm::Speculate>,
) -> Observed {
    let backend = Arc::new(fake_model(replies));
    let log = Arc::new(Mutex::new(Vec::new()));
    let host = Arc::new(host_with_tools(log.clone()));
    let options = RunOptions {
        workers: Some(workers),
        args: args.to_vec(),
        record_events: false,
        // Fewer I/O threads to start per run; calls still overlap.
        concurrency: Some(4),
        // The reference interpreter knows no information-flow policy (its
        // enforcement is tested against the static check instead): the VM
        // computes what the language says, with no flow denied.
        flow_policy: ais_ir::ifc::FlowPolicy {
            mode: ais_ir::ifc::Mode::Off,
            ..Default::default()
        },
        speculate,
        ..RunOptions::default()
    };
    let report = ais_vm::run(code, &options, backend.clone(), host.clone());
    let mut memory = Vec::new();
    let mut beliefs = Vec::new();
    for (agent, names) in agents_and_beliefs(program) {
        for tier in TIERS {
            let entries = host.entries(&agent, tier_of(tier));
            if !entries.is_empty() {
                let entries = entries
                    .iter()
                    .map(|e| (e.key.clone(), normalize(&e.value)))
                    .collect();
                memory.push((agent.clone(), tier.to_string(), entries));
            }
        }
        for name in names {
            let v = ais_vm::Host::belief_get(host.as_ref(), &agent, &name).unwrap_or(Json::Null);
            beliefs.push((agent.clone(), name, normalize(&v)));
        }
    }
    let mut tool_calls = log.lock().unwrap().clone();
    tool_calls.sort();
    Observed {
        result: report.outcome.map(|v| normalize(&v)).map_err(|_| ()),
        printed: host.printed(),
        memory,
        beliefs,
        tool_calls,
        llm: (replies == Replies::Hashed).then(|| sorted_requests(&backend)),
    }
}

/// Runs `source` on the oracle and on the VM at -O0, -O1 and -O2 with 1, 2
/// and 8 workers; returns what the oracle observed at -O0, or the first
/// disagreement, described.
pub fn differences(source: &str, args: &[(String, Json)]) -> Result<Observed, String> {
    let (expected, runs) = compare_runs(source, args)?;
    for run in runs {
        if let Some(diff) = run.diff {
            return Err(format!("{:?}, {} workers: {diff}", run.level, run.workers));
        }
    }
    Ok(expected)
}

/// One VM run compared with the oracle.
pub struct RunDiff {
    pub level: OptLevel,
    pub workers: usize,
    /// The oracle succeeded and the VM failed, or the other way round, or
    /// both succeeded with different results.
    pub outcome: bool,
    /// The printed lines differ (not compared when both failed).
    pub printed: bool,
    /// Every differing field, described; `None` if the run agrees.
    pub diff: Option<String>,
}

/// Runs `source` on the oracle and on the VM at -O0, -O1 and -O2 with 1, 2
/// and 8 workers; returns what the oracle observed at -O0 and every VM
/// run's comparison with it. The nine VM runs go on threads of their own:
/// a run spends most of its time waiting for wake-ups, not computing.
pub fn compare_runs(
    source: &str,
    args: &[(String, Json)],
) -> Result<(Observed, Vec<RunDiff>), String> {
    let program = Program::load(source).map_err(|e| format!("does not check: {e}"))?;
    let lowered = compile_source(source)
        .map_err(|e| format!("does not compile: {e:?}"))?
        .module;
    let levels = [
        (OptLevel::O0, Replies::Hashed),
        (OptLevel::O1, Replies::FixedText),
        (OptLevel::O2, Replies::FixedText),
    ];
    let codes: Vec<_> = levels
        .iter()
        .map(|(level, _)| compile(&lowered, *level))
        .collect();
    let expected: Vec<Observed> = levels
        .iter()
        .map(|(_, replies)| run_oracle(&program, args, *replies))
        .collect();
    let program = &program;
    let runs: Vec<(usize, usize, Observed)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..levels.len())
            .flat_map(|i| [1usize, 2, 8].map(|w| (i, w)))
            .map(|(i, workers)| {
                let (code, replies) = (&codes[i], levels[i].1);
                scope.spawn(move || (i, workers, run_vm(program, code, args, workers, replies)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let diffs = runs
        .into_iter()
        .map(|(i, workers, got)| {
            let want = &expected[i];
            let both_failed = want.result.is_err() && got.result.is_err();
            RunDiff {
                level: levels[i].0,
                workers,
                outcome: want.result != got.result,
                printed: !both_failed && want.printed != got.printed,
                diff: describe(want, &got),
            }
        })
        .collect();
    let first = expected
        .into_iter()
        .next()
        .ok_or_else(|| "no run".to_string())?;
    Ok((first, diffs))
}

/// The fields on which `oracle` and `vm` differ, or `None`.
///
/// When both runs fail, only that is compared: the VM runs independent work
/// concurrently, so which calls, prints and writes happened before the
/// failure stopped the run depends on the schedule.
pub fn describe(oracle: &Observed, vm: &Observed) -> Option<String> {
    if oracle.result.is_err() && vm.result.is_err() {
        return None;
    }
    let mut out = String::new();
    let mut field = |name: &str, a: String, b: String| {
        if a != b {
            out.push_str(&format!("\n{name}:\n  oracle: {a}\n  vm:     {b}"));
        }
    };
    let pairs = [
        (
            "result",
            format!("{:?}", oracle.result),
            format!("{:?}", vm.result),
        ),
        (
            "printed",
            format!("{:?}", oracle.printed),
            format!("{:?}", vm.printed),
        ),
        (
            "memory",
            format!("{:?}", oracle.memory),
            format!("{:?}", vm.memory),
        ),
        (
            "beliefs",
            format!("{:?}", oracle.beliefs),
            format!("{:?}", vm.beliefs),
        ),
        (
            "tool calls",
            format!("{:?}", oracle.tool_calls),
            format!("{:?}", vm.tool_calls),
        ),
        (
            "llm requests",
            format!("{:?}", oracle.llm),
            format!("{:?}", vm.llm),
        ),
    ];
    for (name, a, b) in pairs {
        field(name, a, b);
    }
    (!out.is_empty()).then_some(out)
}
