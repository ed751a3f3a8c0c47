//! The reference A-PXM graph format's op names (`ASK`, `CONST_STR`,
//! `WAIT_ALL`, ...) for each of our opcodes, and the reference ops that
//! have no equivalent here. Part of the op table: the graph-JSON front end
//! and emitter (`ais_compiler::graph_json`) read these, nothing else.

use super::Opcode;

impl Opcode {
    /// The op's name in graph JSON: the reference's name where it has the
    /// op, otherwise our mnemonic upper-cased (`belief.get` → `BELIEF_GET`).
    pub fn graph_name(self) -> String {
        match self {
            Opcode::Const => "CONST_STR".to_string(),
            Opcode::Exec => "EXC".to_string(),
            op => op.mnemonic().replace('.', "_").to_ascii_uppercase(),
        }
    }

    /// The opcode a graph-JSON op name denotes (case-sensitive, as in the
    /// reference).
    pub fn from_graph_name(name: &str) -> Option<Opcode> {
        Opcode::ALL
            .iter()
            .copied()
            .find(|op| op.graph_name() == name)
    }
}

/// Reference ops with no op of their own in our IR: its flat control-flow
/// markers (we nest regions instead), its agent declaration and the
/// coordination ops we run as AAM tools. The graph-JSON reader lowers each
/// to the ops that do what it does (`compiler/src/graph_json/refonly.rs`).
pub const REFERENCE_ONLY_OPS: &[&str] = &[
    "AGENT",
    "JUMP",
    "BRANCH_ON_VALUE",
    "LOOP_START",
    "LOOP_END",
    "ERR",
    "UPDATE_GOAL",
    "CLAIM",
    "RESUME",
];
