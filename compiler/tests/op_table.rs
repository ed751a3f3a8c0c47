//! The op-table checklist, front-end side: every LLM op of the table is a
//! built-in of the language of the same name, lowered to that op with the
//! table's result type (the IR and VM sides are `ir/tests/op_table.rs` and
//! `vm/tests/op_table.rs`).

use ais_compiler::driver::lower_source;
use ais_ir::{LlmKind, Opcode};

#[test]
fn every_llm_op_is_a_builtin_lowered_to_it() {
    for &k in LlmKind::ALL {
        let ty = if k.structured() { "json" } else { "str" };
        let src = format!(
            "agent A {{\n    @entry flow main(doc: str) -> {ty} {{\n        return {}(\"Look at this.\", doc)\n    }}\n}}\n",
            k.name()
        );
        let m = lower_source(&src).unwrap_or_else(|d| panic!("{}: {d:?}", k.name()));
        let ops: Vec<Opcode> = m
            .agents
            .values()
            .flat_map(|a| a.flows.values())
            .flat_map(|f| f.walk().into_iter().map(move |op| f.dfg.ops[op].opcode))
            .collect();
        assert!(
            ops.contains(&k.opcode()),
            "{}: lowered to {ops:?}",
            k.name()
        );
    }
}
