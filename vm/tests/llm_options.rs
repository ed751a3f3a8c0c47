//! An op's `schema:` reaches the request parsed once, and an unreadable
//! one (a hand-edited artifact) fails the op instead of being dropped.

use ais_ir::bytecode::{Imm, Instr, LlmAttrs};

fn ask(attrs: LlmAttrs) -> Instr {
    Instr {
        opcode: ais_ir::Opcode::Ask,
        first_operand: 0,
        n_data: 1,
        n_tokens: 0,
        n_deps: 0,
        result: 0,
        n_results: 1,
        regions: Vec::new(),
        imm: Imm::Llm(Box::new(attrs)),
        span: ais_ir::Span::DUMMY,
        est_ms: 0,
        rem_ms: 0,
    }
}

#[test]
fn a_schema_is_parsed_once_and_an_unreadable_one_fails_the_op() {
    let schema = r#"{"type":"object","required":["a"]}"#;
    let instr = ask(LlmAttrs {
        schema: Some(schema.into()),
        ..Default::default()
    });
    let Imm::Llm(a) = &instr.imm else {
        panic!("an LLM op");
    };
    let first = a.schema_value().expect("valid").map(|v| v as *const _);
    let again = a.schema_value().expect("valid").map(|v| v as *const _);
    assert_eq!(first, again, "the same parsed value, not parsed again");
    let r = ais_vm::exec::llm_request("A", &instr, &[]).expect("request");
    assert_eq!(r.json_schema, serde_json::from_str(schema).ok());
    for bad in ["{not json", "[1, 2]"] {
        let instr = ask(LlmAttrs {
            schema: Some(bad.into()),
            ..Default::default()
        });
        let e = match ais_vm::exec::llm_request("A", &instr, &[]) {
            Ok(r) => panic!("{bad}: expected an error, got {:?}", r.json_schema),
            Err(e) => e,
        };
        assert_eq!(e.code, "llm.invalid_schema", "{bad}");
    }
}
