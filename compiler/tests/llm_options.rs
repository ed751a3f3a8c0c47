//! One table of LLM options: every attribute an LLM op takes in the IR
//! (`ir/src/ops.rs`) and every named argument the language accepts for an
//! LLM operation has its row in the option table of `docs/backends.md`
//! (name, type, ops, request field, and how each provider sends it), and
//! the table names nothing else.

use std::collections::BTreeSet;

/// The first column of the "### LLM options" table: each backticked name.
fn documented() -> BTreeSet<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/backends.md");
    let text = std::fs::read_to_string(path).expect("docs/backends.md");
    let start = text
        .find("### LLM options")
        .expect("the option table's section");
    let section = &text[start..];
    let end = section[3..].find("\n### ").map_or(section.len(), |i| i + 3);
    let mut names = BTreeSet::new();
    for line in section[..end].lines().filter(|l| l.starts_with("| `")) {
        let first = line.split('|').nth(1).unwrap_or("");
        for (i, piece) in first.split('`').enumerate() {
            if i % 2 == 1 {
                names.insert(piece.to_string());
            }
        }
    }
    names
}

#[test]
fn every_llm_option_has_one_row() {
    let docs = documented();
    let mut known = BTreeSet::new();
    for kind in ais_ir::LlmKind::ALL {
        let op = kind.opcode();
        for a in op.info().attrs {
            assert!(
                docs.contains(a.name),
                "IR attribute `{}` of `{op}` has no row",
                a.name
            );
            known.insert(a.name.to_string());
        }
        let named = ais_compiler::sema::named_arguments(op.info().mnemonic)
            .expect("an LLM op takes named arguments");
        for n in named.iter().filter(|n| **n != "prompt") {
            assert!(
                docs.contains(*n),
                "named argument `{n}` of `{op}` has no row"
            );
            known.insert(n.to_string());
        }
    }
    let extra: Vec<&String> = docs.difference(&known).collect();
    assert!(extra.is_empty(), "rows for no option: {extra:?}");
}
