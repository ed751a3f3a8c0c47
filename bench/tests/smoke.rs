//! Smoke version of the workload benchmark: every workload once, on our VM
//! only, against the loopback mock server with 1–5 ms latencies. Asserts
//! behaviour (call counts, routing, overlap, compile-time rejection), never
//! timings. The LangGraph baselines are not part of the test suite (they
//! need the Python venv of bench/langgraph/setup.sh).

use ais_bench::env::{self, Latencies};
use ais_bench::ours::{self, CompileFailure, InFlight};
use ais_bench::workloads::{self, Workload, TYPE_VERIFICATION, WORKLOADS};
use ais_ir::OptLevel;
use ais_testkit::mock::{MockReply, MockServer};
use ais_vm::llm::LlmBackend;
use std::path::PathBuf;
use std::sync::Arc;

const TINY: Latencies = Latencies {
    ask_ms: 2,
    think_ms: 3,
    reason_ms: 5,
    tool_ms: 1,
};

struct Bench {
    server: MockServer,
    backend: Arc<InFlight>,
    dir: PathBuf,
}

impl Drop for Bench {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn bench(tag: &str) -> Bench {
    let server = env::start_mock(&TINY).expect("mock server starts on loopback");
    let dir = std::env::temp_dir().join(format!("ais-bench-smoke-{tag}-{}", std::process::id()));
    let config = env::write_config(&dir, &server.openai_url()).expect("config written");
    let backend = Arc::new(InFlight::new(
        env::backend(&config).expect("backend builds"),
    ));
    Bench {
        server,
        backend,
        dir,
    }
}

/// Runs `w` once (compiled at `level`), optionally with a scripted first
/// reply; returns (LLM calls seen by the mock, max in flight, the run).
fn run_once(
    b: &Bench,
    w: &Workload,
    level: OptLevel,
    first_reply: Option<&str>,
) -> (usize, usize, ours::OursRun) {
    let path = workloads::repo_root().join(w.file);
    let (program, _) = ours::compile_file(&path, level).expect("workload compiles");
    if let Some(r) = first_reply {
        b.server.push(MockReply::Content(r.to_string()));
    }
    b.backend.reset();
    let before = b.server.request_count();
    let backend: Arc<dyn LlmBackend> = b.backend.clone();
    let run = ours::run_program(&program, w.args, backend, env::host(TINY.tool_ms), None);
    let calls = b.server.request_count() - before;
    (calls, b.backend.max_in_flight(), run)
}

fn workload(id: &str) -> &'static Workload {
    workloads::by_id(id).expect("known workload")
}

#[test]
fn every_workload_completes_against_the_mock() {
    let b = bench("all");
    for w in WORKLOADS {
        let (calls, _, run) = run_once(&b, w, OptLevel::O1, w.first_reply);
        assert!(run.ok, "workload {} failed: {:?}", w.id, run.error);
        assert!(calls > 0, "workload {} made no LLM call", w.id);
        assert_eq!(
            calls as u64, run.summary.llm_calls,
            "workload {}: the mock and the run summary disagree on the call count",
            w.id
        );
        let program = ours::compile_file(&workloads::repo_root().join(w.file), OptLevel::O1)
            .expect("compiles")
            .0;
        assert!(
            ours::critical_path_ms(&program, &TINY).is_some_and(|c| c > 0),
            "workload {} has no critical path",
            w.id
        );
    }
}

#[test]
fn chain_fusion_turns_five_calls_into_one() {
    let b = bench("fusion");
    let w = workload("2");
    let (o0, _, run0) = run_once(&b, w, OptLevel::O0, None);
    assert!(run0.ok, "{:?}", run0.error);
    let (o1, _, run1) = run_once(&b, w, OptLevel::O1, None);
    assert!(run1.ok, "{:?}", run1.error);
    assert_eq!((o0, o1), (5, 1), "calls at -O0 and -O1");
    // The fused prompt keeps every step's instruction.
    let last = b.server.last_request().expect("a request");
    let prompt = last.body.to_string();
    for step in [
        "five features",
        "concrete benefit",
        "likely objection",
        "Answer each objection",
        "150-word product description",
    ] {
        assert!(prompt.contains(step), "fused prompt lost `{step}`");
    }
}

#[test]
fn conditional_routing_runs_only_the_taken_branch() {
    let b = bench("routing");
    let w = workload("9");
    for (reply, expected_calls, marker) in [
        ("technical", 3, "Diagnose the most likely root cause"),
        ("billing", 2, "billing specialist"),
        ("account", 2, "account specialist"),
        ("something else", 2, "human agent will follow up"),
    ] {
        let seen = b.server.requests().len();
        let (calls, _, run) = run_once(&b, w, OptLevel::O1, Some(reply));
        assert!(run.ok, "{reply}: {:?}", run.error);
        assert_eq!(calls, expected_calls, "calls when routed to `{reply}`");
        let bodies: Vec<String> = b.server.requests()[seen..]
            .iter()
            .map(|r| r.body.to_string())
            .collect();
        assert!(
            bodies.iter().any(|t| t.contains(marker)),
            "`{reply}` did not run its branch"
        );
        for other in [
            "Diagnose the most likely root cause",
            "billing specialist",
            "account specialist",
            "human agent will follow up",
        ] {
            if other != marker {
                assert!(
                    !bodies.iter().any(|t| t.contains(other)),
                    "`{reply}` also ran the branch with `{other}`"
                );
            }
        }
    }
}

#[test]
fn multi_agent_calls_overlap() {
    let b = bench("multi");
    let w = workload("10");
    let (calls, in_flight, run) = run_once(&b, w, OptLevel::O1, None);
    assert!(run.ok, "{:?}", run.error);
    // 2 investigations + think/reason + 2 counsel asks + draft/verify/revise.
    assert_eq!(calls, 9);
    assert!(in_flight > 1, "no two LLM calls were in flight at once");
    assert!(run.summary.peak_parallelism > 1);
}

#[test]
fn fan_out_is_dispatched_together() {
    let b = bench("fanout");
    let (calls, in_flight, run) = run_once(&b, workload("4c"), OptLevel::O1, None);
    assert!(run.ok, "{:?}", run.error);
    assert_eq!(calls, 8);
    assert!(in_flight > 1, "the eight independent asks never overlapped");
    let (calls, _, run) = run_once(&b, workload("4d"), OptLevel::O1, None);
    assert!(run.ok, "{:?}", run.error);
    assert_eq!(calls, 64);
}

#[test]
fn type_verification_programs_are_rejected_before_any_call() {
    let b = bench("tv");
    assert_eq!(TYPE_VERIFICATION.len(), 5);
    for &(file, code) in TYPE_VERIFICATION {
        let path = workloads::repo_root().join(file);
        let before = b.server.request_count();
        match ours::compile_file(&path, OptLevel::O1) {
            Err(CompileFailure::Rejected { codes, .. }) => {
                assert!(
                    codes.iter().any(|c| c == code),
                    "{file}: expected {code}, got {codes:?}"
                );
            }
            Err(other) => panic!("{file}: unexpected failure {other}"),
            Ok(_) => panic!("{file} compiled, but it has a {code} error"),
        }
        assert_eq!(b.server.request_count(), before, "{file} reached the LLM");
    }
}

#[test]
fn critical_path_follows_the_configured_latencies() {
    let lat = Latencies {
        ask_ms: 100,
        think_ms: 300,
        reason_ms: 1000,
        tool_ms: 50,
    };
    let cp = |id: &str| {
        let w = workload(id);
        let (p, _) = ours::compile_file(&workloads::repo_root().join(w.file), OptLevel::O1)
            .expect("compiles");
        ours::critical_path_ms(&p, &lat)
    };
    // question → slowest worker → synthesis.
    assert_eq!(cp("1"), Some(300));
    // One fused ask.
    assert_eq!(cp("2"), Some(100));
    assert_eq!(cp("4d"), Some(100));
    // classify → think → ask (the longest branch).
    assert_eq!(cp("9"), Some(500));
    // think → reason (economics), then draft → verify → revise.
    assert_eq!(cp("10"), Some(1800));
    // …and the LLM calls along those paths.
    let calls = |id: &str| {
        let w = workload(id);
        let (p, _) = ours::compile_file(&workloads::repo_root().join(w.file), OptLevel::O1)
            .expect("compiles");
        ours::critical_path(&p, &lat).map(|c| c.1)
    };
    assert_eq!(calls("1"), Some(3));
    assert_eq!(calls("9"), Some(3));
    assert_eq!(calls("10"), Some(5));
}
