//! Shared by the VM tests that run programs written in textual IR.
#![allow(dead_code)]

use ais_ir::bytecode::{self, Program};

/// Parses, verifies and compiles `src`; panics with the errors otherwise.
pub fn program(src: &str) -> Program {
    let m = ais_ir::parse_module(src).unwrap_or_else(|e| panic!("parse: {e:?}"));
    let errs = ais_ir::verify_errors(&m);
    assert!(errs.is_empty(), "verify: {errs:?}");
    bytecode::compile(&m).unwrap_or_else(|e| panic!("compile: {e:?}"))
}
