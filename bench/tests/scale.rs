//! Compile-time scaling (issue 40), by counting work instead of timing it:
//! doubling a generated program of any shape at most doubles (plus a
//! margin) the work lowering and the passes do (`ais_ir::work`), and a
//! flat `+` chain far longer than any stack could recurse over compiles on
//! a small stack.

use ais_bench::shapes::{op_count, Shape};
use ais_compiler::driver;

/// Work units of lowering (with the verifier), of the `-O1` passes and of
/// codegen for one program, and its op count.
fn work(source: &str) -> (u64, u64, u64, usize) {
    driver::with_deep_stack(|| {
        let fe = driver::check_source(source);
        assert!(
            !fe.has_errors(),
            "generated program has errors: {:?}",
            fe.diagnostics.first()
        );
        ais_ir::work::take();
        let mut module = match driver::compile_source(source) {
            Ok(c) => c.module,
            Err(d) => panic!("generated program does not compile: {:?}", d.first()),
        };
        let lower = ais_ir::work::take();
        let ops = op_count(&module);
        driver::optimize(&mut module, &Default::default()).expect("optimize");
        let passes = ais_ir::work::take();
        let program = ais_ir::bytecode::compile(&module).expect("codegen");
        assert!(!program.flows.is_empty());
        let codegen = ais_ir::work::take();
        (lower, passes, codegen, ops)
    })
}

#[test]
fn doubling_a_program_at_most_doubles_the_work() {
    for shape in Shape::ALL {
        // Small sizes (debug build); a deep shape of 2 units would not be
        // deep, so it starts at two full blocks.
        let base = match shape {
            Shape::Deep => 2 * ais_bench::shapes::DEEP_NESTING,
            Shape::Agents => 20,
            Shape::Flows => 200,
            _ => 1_000,
        };
        let (l1, p1, c1, o1) = work(&shape.program(base));
        let (l2, p2, c2, o2) = work(&shape.program(2 * base));
        let (l4, p4, c4, o4) = work(&shape.program(4 * base));
        assert!(
            o2 > o1 && o4 > o2,
            "{}: the program must grow: {o1} {o2} {o4} ops",
            shape.name()
        );
        for (phase, a, b, c) in [
            ("lowering", l1, l2, l4),
            ("passes", p1, p2, p4),
            ("codegen", c1, c2, c4),
        ] {
            // Codegen counts only name lookups, which may be none.
            if phase == "codegen" && a == 0 {
                assert_eq!((b, c), (0, 0), "{}: codegen", shape.name());
                continue;
            }
            assert!(a > 0, "{}: {phase} counted no work", shape.name());
            for (small, big) in [(a, b), (b, c)] {
                let ratio = big as f64 / small as f64;
                assert!(
                    ratio <= 2.2,
                    "{}: {phase} work grew {ratio:.2}× for 2× the program ({small} -> {big})",
                    shape.name()
                );
            }
        }
    }
}

/// 200,000 terms, checked, lowered, verified, optimized, encoded and freed
/// on a 16 MiB stack: recursing once per term would need far more (the
/// frames of the checker and lowering are hundreds of bytes each).
#[test]
fn a_long_plus_chain_compiles_on_a_small_stack() {
    let source = Shape::Plus.program(200_000);
    let handle = std::thread::Builder::new()
        .stack_size(16 << 20)
        .spawn(move || {
            let fe = driver::check_source(&source);
            assert!(!fe.has_errors(), "{:?}", fe.diagnostics.first());
            drop(fe);
            let mut module = driver::compile_source(&source).expect("compiles").module;
            let ops = op_count(&module);
            driver::optimize(&mut module, &Default::default()).expect("optimize");
            let program = ais_ir::bytecode::compile(&module).expect("codegen");
            let bytes = ais_ir::bytecode::encode(&program).expect("encode");
            (ops, bytes.len())
        })
        .expect("thread");
    let (ops, bytes) = handle
        .join()
        .expect("compiling a long chain must not crash");
    assert!(ops >= 200_000, "{ops} ops");
    assert!(bytes > 0);
}

/// Postfix chains nest like brackets: past the limit, a coded error, not
/// a crash.
#[test]
fn a_postfix_chain_past_the_nesting_limit_is_an_error() {
    let chain = ".a".repeat(ais_compiler::syntax::lexer::MAX_NESTING + 10);
    let source = format!("agent A {{\n    @entry flow main(x: json) -> json {{\n        return x{chain}\n    }}\n}}\n");
    let fe = driver::with_deep_stack(|| driver::check_source(&source));
    assert!(
        fe.diagnostics.iter().any(|d| d.code == "E0008"),
        "{:?}",
        fe.diagnostics.iter().map(|d| &d.code).collect::<Vec<_>>()
    );
    // Just under the limit still checks.
    let chain = ".a".repeat(ais_compiler::syntax::lexer::MAX_NESTING - 10);
    let source = format!("agent A {{\n    @entry flow main(x: json) -> json {{\n        return x{chain}\n    }}\n}}\n");
    let fe = driver::with_deep_stack(|| driver::check_source(&source));
    assert!(!fe.has_errors(), "{:?}", fe.diagnostics.first());
}
