//! Differential test of `aisc fork` with no edit (issue 38): a generated
//! program runs on the VM with a journal, the run is forked at its first
//! journal step with the value kept, and the fork, run from that journal,
//! must give the original's result and printed lines with no LLM call and
//! no tool call but those that failed in the original (a failed call is
//! made again, as on any resume): every other effect is replayed. `FORK_CASES` scales it (default
//! 300 cases: a few seconds).
#![allow(clippy::unwrap_used)]

mod gen;
mod support;

use ais_compiler::driver::compile_source;
use ais_ir::passes::OptLevel;
use ais_vm::journal::{self, ForkAt, Journal};
use ais_vm::RunOptions;
use proptest::prelude::*;
use serde_json::Value as Json;
use std::sync::{Arc, Mutex};
use support::{fake_model, host_with_tools, normalize, Replies};

/// What one journaled VM run did.
struct Seen {
    result: Result<Json, ()>,
    printed: Vec<String>,
    llm_calls: usize,
    tool_calls: usize,
}

fn run(code: &ais_ir::bytecode::Program, args: &[(String, Json)], j: Arc<Journal>) -> Seen {
    let log = Arc::new(Mutex::new(Vec::new()));
    let host = Arc::new(host_with_tools(log.clone()));
    run_on(code, args, j, &host, &log)
}

/// [`run`] on a given host whose tools log into `log`.
fn run_on(
    code: &ais_ir::bytecode::Program,
    args: &[(String, Json)],
    j: Arc<Journal>,
    host: &Arc<ais_testkit::MemoryHost>,
    log: &Arc<Mutex<Vec<String>>>,
) -> Seen {
    let backend = Arc::new(fake_model(Replies::Hashed));
    let tools_before = log.lock().unwrap().len();
    let printed_before = host.printed().len();
    let options = RunOptions {
        workers: Some(2),
        args: args.to_vec(),
        record_events: false,
        concurrency: Some(4),
        flow_policy: ais_ir::ifc::FlowPolicy {
            mode: ais_ir::ifc::Mode::Off,
            ..Default::default()
        },
        journal: Some(j),
        ..RunOptions::default()
    };
    let report = ais_vm::run(code, &options, backend.clone(), host.clone());
    let llm_calls = backend.requests().len();
    let tool_calls = log.lock().unwrap().len() - tools_before;
    Seen {
        result: report.outcome.map(|v| normalize(&v)).map_err(|_| ()),
        printed: host.printed().split_off(printed_before),
        llm_calls,
        tool_calls,
    }
}

fn config() -> ProptestConfig {
    let cases = std::env::var("FORK_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(300);
    ProptestConfig {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2_000,
        ..ProptestConfig::default()
    }
}

fn features() -> gen::Features {
    gen::Features {
        effects_in_try: true,
        calls_in_failing_try: false,
        effects_in_calls: false,
        side_effecting_tools: true,
    }
}

/// Forks `source`'s run at its first step with no edit and runs the fork:
/// (original, fork).
fn original_and_fork(source: &str, args: &[(String, Json)]) -> (Seen, Seen) {
    let lowered = compile_source(source).unwrap().module;
    let code = support::compile(&lowered, OptLevel::O1);
    let artifact = ais_ir::bytecode::encode(&code).unwrap();
    let original = Journal::begin(None, "orig", "gen.ais", &artifact, None, args).unwrap();
    let store = original.store().clone();
    let first = run(&code, args, Arc::new(original));
    let forked = journal::fork_in(&store, "orig", &ForkAt::Step(1), None).unwrap();
    let j = Journal::resume_in(store.clone(), &forked.id).unwrap();
    (first, run(&code, args, Arc::new(j)))
}

/// The shrunk case this test once found: the `try` body failed in the
/// original (0 / 0), so the fork runs it again, live, after replaying the
/// belief writes before it. A replayed write of state that ends with the
/// process (beliefs of a host that does not keep them, short-term memory)
/// was not written again, so the body read the initial values and
/// succeeded. Short-term memory the same way.
#[test]
fn ops_run_again_after_replayed_state_writes_read_what_they_wrote() {
    let source = r#"agent A {
    beliefs { mood: "calm", count = 0 }
    @entry flow main(s: str) -> str {
        count = count + (0 + inv("t.record", "{{}}"))
        mood = "billing"
        umem("noted", "stm", "note")
        try {
            let _v1 = (0 / (count + -1))
            s = "t<{mood}>"
        } catch {
        }
        try {
            let n = "" + qmem("note", "stm")
            if n == "noted" {
                let _v2 = 0 / (count - count)
            }
            s = s + " missed the note"
        } catch {
        }
        return s + " " + mood + " " + count
    }
}
"#;
    let args = vec![("s".to_string(), Json::String("kept".into()))];
    let (first, again) = original_and_fork(source, &args);
    assert_eq!(first.result, Ok(Json::String("kept billing 1".into())));
    assert_eq!(again.result, first.result);
    assert_eq!(again.llm_calls, 0);
}

/// Where beliefs outlive a run (a shared store), a resumed or forked run
/// does not write a replayed belief update again: the store has it, and
/// another run may have changed it since (here to 42), which a write of
/// the old value would undo.
#[test]
fn replayed_belief_updates_are_not_written_again_where_the_store_keeps_beliefs() {
    let source = r#"agent A {
    beliefs { count = 0 }
    @entry flow main() -> number {
        count = count + 1
        return count
    }
}
"#;
    let code = support::compile(&compile_source(source).unwrap().module, OptLevel::O1);
    let artifact = ais_ir::bytecode::encode(&code).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let host = Arc::new(host_with_tools(log.clone()).keeping_beliefs());
    let original = Journal::begin(None, "orig", "gen.ais", &artifact, None, &[]).unwrap();
    let store = original.store().clone();
    let first = run_on(&code, &[], Arc::new(original), &host, &log);
    assert_eq!(first.result, Ok(serde_json::json!(1.0)));
    ais_vm::Host::belief_set(host.as_ref(), "A", "count", &serde_json::json!(42)).unwrap();
    let forked = journal::fork_in(&store, "orig", &ForkAt::Step(1), None).unwrap();
    let j = Journal::resume_in(store.clone(), &forked.id).unwrap();
    let again = run_on(&code, &[], Arc::new(j), &host, &log);
    assert_eq!(again.result, first.result);
    let now = ais_vm::Host::belief_get(host.as_ref(), "A", "count").unwrap();
    assert_eq!(now, serde_json::json!(42));
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_fork_with_no_edit_reproduces_the_run_with_no_call(case in gen::case()) {
        let source = gen::render(&case, features());
        let args = case.args();
        let lowered = compile_source(&source).unwrap().module;
        let code = support::compile(&lowered, OptLevel::O1);
        let artifact = ais_ir::bytecode::encode(&code).unwrap();
        let original = Journal::begin(None, "orig", "gen.ais", &artifact, None, &args).unwrap();
        let store = original.store().clone();
        let first = run(&code, &args, Arc::new(original));
        let steps = journal::fork_steps(store.as_ref(), "orig").unwrap();
        let forked = journal::fork_in(&store, "orig", &ForkAt::Step(1), None);
        if steps.is_empty() {
            // Nothing journaled: nothing to fork at.
            prop_assert_eq!(forked.err().map(|e| e.code), Some("fork.no_op"));
            return Ok(());
        }
        let forked = forked.unwrap();
        prop_assert_eq!(forked.id.as_str(), "orig.f1");
        let j = Journal::resume_in(store.clone(), &forked.id).unwrap();
        let again = run(&code, &args, Arc::new(j));
        prop_assert_eq!(&again.result, &first.result, "program:\n{}", source);
        if first.result.is_ok() {
            prop_assert_eq!(&again.printed, &first.printed, "program:\n{}", source);
            prop_assert_eq!(again.llm_calls, 0, "program:\n{}", source);
            // A call that failed is made again, as on any resume (an error
            // may be transient); every other effect is replayed.
            let failed = steps.iter().filter(|s| s.kind == "failed").count();
            prop_assert_eq!(again.tool_calls, failed, "program:\n{}", source);
            let cost = journal::fork_cost(store.as_ref(), "orig", &forked.id).unwrap();
            prop_assert_eq!(cost.executed, (0, 0));
        }
    }
}
