//! The op-table checklist, VM side: every opcode through every consumer in
//! `ais-vm` (execution class, the dataflow VM and the reference
//! interpreter, the journal, the LLM kind, its reply schema, model class,
//! instruction and configuration key). The program is the IR side's
//! fixture, which uses every op (`ir/tests/op_table.rs` checks that).
#![allow(clippy::unwrap_used)]

mod ir_support;

use ais_ir::bytecode::Program;
use ais_ir::Tier;
use ais_ir::{ExecClass, LlmKind, Opcode};
use ais_vm::config::Config;
use ais_vm::exec;
use ais_vm::host::{Host, HostError, Message};
use ais_vm::journal::{self, Journal};
use ais_vm::llm::prompt::{default_instruction, ModelClass};
use ais_vm::llm::schema::schema_for;
use ais_vm::llm::sim::SimBackend;
use ais_vm::llm::CancelToken;
use ais_vm::{interp, RunOptions, Val};
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

const EVERY_OP: &str = include_str!("../../ir/tests/fixtures/every_op.aisir");

fn program() -> Program {
    ir_support::program(EVERY_OP)
}

fn args() -> Vec<(String, Json)> {
    vec![("topic".into(), json!("agents")), ("n".into(), json!(1))]
}

/// A host that answers every effect and counts the calls it got.
#[derive(Default)]
struct Stub {
    calls: Mutex<BTreeMap<&'static str, usize>>,
}

impl Stub {
    fn hit(&self, what: &'static str) {
        *self.calls.lock().unwrap().entry(what).or_default() += 1;
    }
}

impl Host for Stub {
    fn invoke_tool(
        &self,
        _agent: &str,
        _tool: &str,
        args: &Json,
        _cancel: &CancelToken,
    ) -> Result<Json, HostError> {
        self.hit("inv");
        Ok(json!({"args": args}))
    }
    fn exec(&self, _agent: &str, args: &[Json], _cancel: &CancelToken) -> Result<Json, HostError> {
        self.hit("exec");
        Ok(json!(args))
    }
    fn mem_query(&self, _agent: &str, _tier: Tier, _query: &Json) -> Result<Json, HostError> {
        self.hit("qmem");
        Ok(json!(["a", "b", "c", "d"]))
    }
    fn mem_update(
        &self,
        _agent: &str,
        _tier: Tier,
        _value: &Json,
        _key: Option<&Json>,
    ) -> Result<(), HostError> {
        self.hit("umem");
        Ok(())
    }
    fn belief_get(&self, _agent: &str, _name: &str) -> Result<Json, HostError> {
        self.hit("belief.get");
        Ok(json!("calm"))
    }
    fn belief_set(&self, _agent: &str, _name: &str, _value: &Json) -> Result<(), HostError> {
        self.hit("belief.set");
        Ok(())
    }
    fn print(&self, _agent: &str, _line: &str) {
        self.hit("print");
    }
    fn communicate(&self, _message: Message) -> Result<(), HostError> {
        self.hit("communicate");
        Ok(())
    }
    fn pause(&self, _agent: &str, _message: &str) -> Option<Json> {
        self.hit("pause");
        Some(json!("approved"))
    }
}

#[test]
fn the_vm_takes_the_execution_class_and_llm_kind_from_the_table() {
    for &op in Opcode::ALL {
        let i = op.info();
        assert_eq!(exec::class(op), i.exec, "{op}");
        assert_eq!(exec::llm_kind(op), i.llm, "{op}");
        assert_eq!(i.exec == ExecClass::Llm, i.llm.is_some(), "{op}");
    }
}

#[test]
fn every_op_runs_in_the_vm_and_the_interpreter_with_the_same_result() {
    let p = program();
    let backend = Arc::new(SimBackend::new().with_delay_scale(0.0));
    let host = Arc::new(Stub::default());
    let o = RunOptions {
        args: args(),
        workers: Some(2),
        record_events: true,
        planner: Some(Arc::new(ais_testkit::FrontEndPlanner::default())),
        ..RunOptions::default()
    };
    let report = ais_vm::run(&p, &o, backend.clone(), host.clone());
    let vm = report.outcome.expect("the fixture runs in the VM");
    let ran: std::collections::BTreeSet<Opcode> = report.events.iter().map(|e| e.opcode).collect();
    let missing: Vec<&str> = Opcode::ALL
        .iter()
        .filter(|op| !ran.contains(op))
        .map(|op| op.mnemonic())
        .collect();
    assert!(missing.is_empty(), "never executed: {missing:?}");
    let stub = Stub::default();
    let planner = ais_testkit::FrontEndPlanner::default();
    let it = interp::run_with_planner(&p, None, &args(), backend.as_ref(), &stub, Some(&planner))
        .expect("the fixture runs in the interpreter");
    assert_eq!(vm, it);
    // Every host effect op reached the host, in both executors.
    for calls in [&*host.calls.lock().unwrap(), &*stub.calls.lock().unwrap()] {
        for &op in Opcode::ALL {
            // (`fence` only orders and `guard` only checks: no host.)
            if matches!(op.info().exec, ExecClass::Inline | ExecClass::Tool)
                && !matches!(op, Opcode::Fence | Opcode::Guard)
            {
                // (`belief.set` also initialises the agent's beliefs.)
                assert!(
                    calls.get(op.mnemonic()).is_some_and(|&n| n >= 1),
                    "{op}: {calls:?}"
                );
            }
        }
    }
}

#[test]
fn the_journal_records_exactly_the_journaled_ops() {
    let dir = tempfile::tempdir().unwrap();
    let p = program();
    let j =
        Arc::new(Journal::begin(Some(dir.path()), "r1", "every_op", b"", None, &args()).unwrap());
    let o = RunOptions {
        args: args(),
        workers: Some(2),
        journal: Some(j.clone()),
        planner: Some(Arc::new(ais_testkit::FrontEndPlanner::default())),
        ..RunOptions::default()
    };
    let report = ais_vm::run(
        &p,
        &o,
        Arc::new(SimBackend::new().with_delay_scale(0.0)),
        Arc::new(Stub::default()),
    );
    report.outcome.expect("the fixture runs");
    let record = journal::load_record(dir.path(), "r1").unwrap();
    let mut got: Vec<&str> = record.steps.iter().map(|s| s.op.as_str()).collect();
    got.sort_unstable();
    // (The fixture's `solve` links a plan whose `ask` is journaled too.)
    got.dedup();
    let mut want: Vec<&str> = Opcode::ALL
        .iter()
        .filter(|op| op.info().journaled)
        .map(|op| op.mnemonic())
        .collect();
    want.sort_unstable();
    assert_eq!(got, want);
}

#[test]
fn a_resumed_run_counts_exactly_the_llm_ops_as_prior_llm_calls() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::begin(Some(dir.path()), "r2", "every_op", b"", None, &[]).unwrap();
    // One completed entry per op, one token each.
    for (k, &op) in Opcode::ALL.iter().enumerate() {
        j.record(&format!("k{k}"), op.mnemonic(), "h", &[Val::Null], 1)
            .unwrap();
    }
    j.finish(Err("stopped")).unwrap();
    drop(j);
    let resumed = Journal::resume(dir.path(), "r2").unwrap();
    let n_llm = LlmKind::ALL.len() as u64;
    assert_eq!(resumed.prior_usage(), (n_llm, n_llm));
    let names = journal::llm_op_names_sql();
    for &op in Opcode::ALL {
        let listed = names.contains(&format!("'{}'", op.mnemonic()));
        assert_eq!(listed, op.info().llm.is_some(), "{op}");
    }
}

#[test]
fn every_llm_kind_has_its_semantics() {
    for &k in LlmKind::ALL {
        assert_eq!(
            schema_for(k).is_some(),
            k.structured(),
            "{k:?}: reply schema"
        );
        assert_eq!(
            ModelClass::of(k).name(),
            k.latency().name(),
            "{k:?}: model class"
        );
        assert!(!default_instruction(k).is_empty(), "{k:?}: instruction");
        // The configuration's `[instruction]` section has a key per kind.
        let text = format!("[instruction]\n{} = \"be brief\"\n", k.name());
        let c = Config::parse(&text, std::path::Path::new("ais.toml"))
            .unwrap_or_else(|e| panic!("{k:?}: {e:?}"));
        assert_eq!(
            c.instructions.system_for(k),
            "be brief",
            "{k:?}: config key"
        );
    }
}
