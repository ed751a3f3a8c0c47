//! Paths whose work follows a program's call chain, run on a small stack
//! (issue 40: no crash on any generated program). A chain of flows each
//! calling the next is as long as the program, so anything that recursed
//! once per call overflowed; these run each phase on 8 MiB, far below what
//! one frame per flow would need at this length, and far below the 512 MiB
//! `aisc` gives the compiler.

use ais_compiler::driver::{self, OptOptions};
use ais_compiler::{format::format_source, graph_json};

const FLOWS: usize = 20_000;

/// `n` flows, each calling the next (the `flows` shape of
/// bench/compile-scale.sh).
fn chain(n: usize) -> String {
    let mut s = String::from(
        "agent A {\n    @entry flow main(x: str) -> str {\n        return f0(x)\n    }\n",
    );
    for i in 0..n {
        let tail = if i + 1 < n {
            format!("f{}(c)", i + 1)
        } else {
            "c".into()
        };
        s.push_str(&format!(
            "    flow f{i}(x: str) -> str {{\n        let c = x + \"a{i}\"\n        return {tail}\n    }}\n"
        ));
    }
    s.push_str("}\n");
    s
}

fn small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(f)
        .expect("thread")
        .join()
        .expect("no overflow, no panic")
}

fn module() -> ais_ir::Module {
    match driver::lower_source(&chain(FLOWS)) {
        Ok(m) => m,
        Err(d) => panic!("lowers: {d:?}"),
    }
}

#[test]
fn check_of_a_long_call_chain() {
    let errors = small_stack(|| driver::check_source(&chain(FLOWS)).diagnostics.len());
    assert_eq!(errors, 0);
}

#[test]
fn lowering_and_o1_of_a_long_call_chain() {
    let flows = small_stack(|| {
        let mut m = module();
        let opts = OptOptions {
            level: ais_ir::passes::OptLevel::O1,
            pipeline: None,
            verify_each: true,
        };
        driver::optimize(&mut m, &opts).expect("optimizes");
        m.agents.values().map(|a| a.flows.len()).sum::<usize>()
    });
    assert_eq!(flows, FLOWS + 1, "every flow is reachable from main");
}

#[test]
fn ir_text_of_a_long_call_chain() {
    let text = small_stack(|| ais_ir::print_module(&module()));
    assert_eq!(text.matches("flow.call").count(), FLOWS);
}

#[test]
fn graph_json_round_trip_of_a_long_call_chain() {
    let flows = small_stack(|| {
        let json = graph_json::emit::emit(&module()).expect("emits");
        let back = graph_json::compile(&json).expect("reads back");
        back.agents.values().map(|a| a.flows.len()).sum::<usize>()
    });
    assert_eq!(flows, FLOWS + 1);
}

#[test]
fn formatting_a_long_call_chain() {
    let out = small_stack(|| format_source(&chain(FLOWS)).expect("formats"));
    assert_eq!(out.matches("flow f").count(), FLOWS);
}

#[test]
fn critical_path_of_a_long_call_chain() {
    let makespan = small_stack(|| {
        ais_ir::passes::critical_path(&module())
            .entry()
            .map(|f| f.makespan_ms)
    });
    assert_eq!(makespan, Some(0), "no op with a latency");
}
