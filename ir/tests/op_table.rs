//! The op-table checklist, IR side: every opcode through every consumer in
//! `ais-ir` (table invariants, mnemonic, printer and parser, verifier,
//! codegen's immediate, the bytecode validator). A new op fails here until
//! the fixture `fixtures/every_op.aisir` uses it, so every consumer sees it.
//! The VM side is `vm/tests/op_table.rs`.

use ais_ir::bytecode::{compile, validate, Imm, Program};
use ais_ir::{
    parse_module, print_module, verify_errors, ChainKind, Effect, ExecClass, ImmKind, Latency,
    LlmKind, Opcode, RegionSpec, ResultRule,
};
use std::collections::BTreeSet;

const EVERY_OP: &str = include_str!("fixtures/every_op.aisir");

fn program() -> Program {
    let m = parse_module(EVERY_OP).expect("the fixture parses");
    let errors = verify_errors(&m);
    assert!(errors.is_empty(), "the fixture verifies: {errors:?}");
    compile(&m).expect("the fixture compiles")
}

#[test]
fn the_table_is_indexed_by_opcode() {
    for (k, &op) in Opcode::ALL.iter().enumerate() {
        assert_eq!(op as usize, k, "{op}");
        assert_eq!(op.info().opcode, op);
        assert_eq!(op.info().mnemonic, op.mnemonic());
        assert_eq!(Opcode::from_mnemonic(op.mnemonic()), Some(op));
    }
}

#[test]
fn derived_facts_agree_with_the_effect() {
    for &op in Opcode::ALL {
        let i = op.info();
        let want = match i.effect {
            Effect::Pure => ExecClass::Pure,
            Effect::Llm => ExecClass::Llm,
            Effect::Tool => ExecClass::Tool,
            Effect::MemRead | Effect::MemWrite | Effect::Io => ExecClass::Inline,
            Effect::Call => ExecClass::Call,
            Effect::Control if i.terminator => ExecClass::Terminator,
            Effect::Control => ExecClass::Control,
        };
        assert_eq!(i.exec, want, "{op}");
        // Control ops (not terminators) own regions, nothing else does.
        assert_eq!(
            i.exec == ExecClass::Control,
            i.regions != RegionSpec::None,
            "{op}"
        );
        // Effects that order take tokens and thread a chain; LLM calls
        // take tokens but order nothing.
        assert_eq!(i.takes_ord, i.effect.takes_ord(), "{op}");
        if i.chain != ChainKind::None {
            assert!(i.takes_ord, "{op}");
        }
        assert_eq!(
            i.journaled,
            matches!(i.exec, ExecClass::Inline | ExecClass::Llm | ExecClass::Tool)
                && op != Opcode::Fence,
            "{op}"
        );
        if i.prompt {
            assert!(i.llm.is_some(), "{op}: only LLM ops take a prompt");
        }
    }
}

#[test]
fn llm_kinds_and_llm_ops_are_one_to_one() {
    let from_ops: Vec<LlmKind> = Opcode::ALL.iter().filter_map(|o| o.info().llm).collect();
    assert_eq!(
        from_ops,
        LlmKind::ALL,
        "one kind per LLM op, in table order"
    );
    for &op in Opcode::ALL {
        let i = op.info();
        assert_eq!(i.llm.is_some(), i.effect == Effect::Llm, "{op}");
        assert_eq!(i.llm.is_some(), i.imm == ImmKind::Llm, "{op}");
    }
    for &k in LlmKind::ALL {
        let op = k.opcode();
        assert_eq!(op.info().llm, Some(k));
        assert_eq!(k.name(), op.mnemonic());
        // The model class a backend picks is the latency class.
        assert!(
            matches!(k.latency(), Latency::Ask | Latency::Think | Latency::Reason),
            "{op}"
        );
        let structured = matches!(op.info().result_rule, ResultRule::Fixed([c]) if c.to_type() == ais_ir::Type::Json);
        assert_eq!(k.structured(), structured, "{op}");
        // Serialized kinds (telemetry, recordings) are the mnemonics.
        assert_eq!(
            serde_json::to_value(k).ok(),
            Some(serde_json::Value::from(op.mnemonic()))
        );
    }
}

#[test]
fn the_fixture_uses_every_op_and_round_trips_through_the_text_form() {
    let m = parse_module(EVERY_OP).expect("the fixture parses");
    let used: BTreeSet<Opcode> = m
        .agents
        .values()
        .flat_map(|a| a.flows.values())
        .flat_map(|f| f.walk().into_iter().map(move |op| f.dfg.ops[op].opcode))
        .collect();
    let missing: Vec<&str> = Opcode::ALL
        .iter()
        .filter(|op| !used.contains(op))
        .map(|op| op.mnemonic())
        .collect();
    assert!(
        missing.is_empty(),
        "add these ops to ir/tests/fixtures/every_op.aisir: {missing:?}"
    );
    let printed = print_module(&m);
    let again = parse_module(&printed).expect("the printed fixture parses");
    assert_eq!(print_module(&again), printed);
}

#[test]
fn codegen_emits_the_tables_immediate_and_the_validator_accepts_it() {
    let p = program();
    validate(&p).expect("the compiled fixture validates");
    let mut seen = BTreeSet::new();
    for f in &p.flows {
        for r in &f.regions {
            for instr in &r.ops {
                assert_eq!(
                    instr.imm.kind(),
                    instr.opcode.info().imm,
                    "{}",
                    instr.opcode
                );
                seen.insert(instr.opcode);
            }
        }
    }
    assert_eq!(
        seen.len(),
        Opcode::ALL.len(),
        "every op reaches the bytecode"
    );
}

#[test]
fn the_validator_rejects_an_immediate_of_another_kind() {
    let p = program();
    for &op in Opcode::ALL {
        let mut bad = p.clone();
        let Some(instr) = bad
            .flows
            .iter_mut()
            .flat_map(|f| f.regions.iter_mut())
            .flat_map(|r| r.ops.iter_mut())
            .find(|i| i.opcode == op)
        else {
            panic!("`{op}` is not in the fixture");
        };
        // Any immediate of the wrong kind: `None` for ops that carry one,
        // a tool name for those that carry none.
        instr.imm = match op.info().imm {
            ImmKind::None => Imm::Tool("t".into()),
            _ => Imm::None,
        };
        assert!(
            validate(&bad).is_err(),
            "`{op}` accepted {:?}",
            instr_imm(&bad, op)
        );
    }
}

fn instr_imm(p: &Program, op: Opcode) -> Option<&Imm> {
    p.flows
        .iter()
        .flat_map(|f| f.regions.iter())
        .flat_map(|r| r.ops.iter())
        .find(|i| i.opcode == op)
        .map(|i| &i.imm)
}
