//! Generated programs: random valid AIS programs (nested control flow,
//! assignments, early returns, memory and output effects, calls) must check
//! without errors, lower, and verify. The generator takes its decisions from
//! a proptest-drawn tape of choices, so proptest explores many shapes and
//! shrinks a failing program (choice 0 is the simpler option);
//! `PROPTEST_CASES` scales the run.

use ais_choices::tape;
use ais_compiler::driver::{check_source, compile_source, with_deep_stack};
use proptest::prelude::*;

mod gen_programs;
use gen_programs::program;

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn generated_programs_lower_and_verify(choices in tape()) {
        let src = program(choices);
        with_deep_stack(|| {
            let fe = check_source(&src);
            let errors: Vec<_> = fe.diagnostics.iter().filter(|d| d.is_error()).collect();
            assert!(errors.is_empty(), "generator made an invalid program:\n{src}\n{errors:#?}");
            if let Err(diags) = compile_source(&src) {
                let at: Vec<String> = diags
                    .iter()
                    .map(|d| {
                        let (line, col) = ais_ir::diag::line_col(&src, d.primary.span.start as usize);
                        format!("{line}:{col} {}", d.message)
                    })
                    .collect();
                let dump = std::env::temp_dir().join("ais_lower_props_failure.ais");
                let _ = std::fs::write(&dump, &src);
                panic!("lowering failed (program saved to {}):\n{src}\n{at:#?}", dump.display());
            }
        });
    }
}
