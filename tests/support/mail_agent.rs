//! The agent the information-flow tests across runs share (with
//! `ifc_policy.rs`'s policy): an entry flow around `body` that may read an
//! untrusted page (`fetch_page`), a trusted note (`read_note`) and `send`.

use ais_vm::{RunError, RunReport};

pub fn program(body: &str) -> ais_ir::bytecode::Program {
    let src = format!(
        r#"agent A {{
    capability fetch_page(url: str) -> str;
    capability read_note(name: str) -> str;
    capability send(to: str, note: str) -> json;

    @entry flow main() -> str {{
        {body}
    }}
}}
"#
    );
    let m = ais_compiler::driver::lower_source(&src).unwrap_or_else(|d| panic!("{d:?}"));
    ais_ir::bytecode::compile(&m).unwrap()
}

/// Whether the run stopped at a sink that refused its argument.
pub fn denied(r: &RunReport) -> bool {
    matches!(&r.outcome, Err(RunError::OpFailed { code, .. }) if code == "policy.denied")
}
