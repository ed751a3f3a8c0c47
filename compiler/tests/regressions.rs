//! Regression tests for defects found by running programs as a user would.
//! Each test is named after its defect and runs the program from source at
//! -O0, -O1 and -O2 on the VM with 1, 2 and 8 workers.
#![allow(clippy::unwrap_used)]

use ais_compiler::driver::{compile_source, optimize, OptOptions};
use ais_ir::bytecode;
use ais_ir::passes::OptLevel;
use ais_vm::llm::fake::FakeBackend;
use ais_vm::{MemoryHost, RunOptions};
use serde_json::{json, Value as Json};
use std::sync::Arc;

/// Runs `entry`'s flow with `args` at every optimization level and worker
/// count and returns the single result they all agree on.
fn run_everywhere(source: &str, args: &[(&str, Json)]) -> Json {
    let mut seen: Option<Json> = None;
    for level in [OptLevel::O0, OptLevel::O1, OptLevel::O2] {
        let mut module = compile_source(source).unwrap().module;
        optimize(
            &mut module,
            &OptOptions {
                level,
                verify_each: true,
                ..OptOptions::default()
            },
        )
        .unwrap();
        let program = bytecode::compile(&module).unwrap();
        for workers in [1, 2, 8] {
            let options = RunOptions {
                workers: Some(workers),
                args: args
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
                ..RunOptions::default()
            };
            let report = ais_vm::run(
                &program,
                &options,
                Arc::new(FakeBackend::new()),
                Arc::new(MemoryHost::new()),
            );
            let value = report.outcome.unwrap();
            match &seen {
                Some(s) => assert_eq!(s, &value, "{level:?}, {workers} workers"),
                None => seen = Some(value),
            }
        }
    }
    seen.unwrap()
}

#[test]
fn guard_clauses_miscompile() {
    let source = r#"
agent A {
    @entry flow pick3(which: str) -> str {
        if which == "a" { return "got a" }
        if which == "b" { return "got b" }
        if which == "c" { return "got c" }
        return "default"
    }
}
"#;
    for (which, expected) in [
        ("a", "got a"),
        ("b", "got b"),
        ("c", "got c"),
        ("d", "default"),
    ] {
        assert_eq!(
            run_everywhere(source, &[("which", json!(which))]),
            json!(expected),
            "pick3({which:?})"
        );
    }
}

#[test]
fn constant_switch_folded_to_default_despite_loose_match() {
    // canonicalize folded a switch on a constant that matches a case only
    // loosely ("**billing**", "Billing.") to its default at -O1/-O2.
    for scrutinee in ["**billing**", "Billing.", "billing: overdue"] {
        let source = format!(
            "agent A {{\n    @entry flow main() -> str {{\n        switch \"{scrutinee}\" {{\n            case \"billing\" => \"loose\"\n            default => \"default\"\n        }} -> v\n        return v\n    }}\n}}\n"
        );
        assert_eq!(
            run_everywhere(&source, &[]),
            json!("loose"),
            "{scrutinee:?}"
        );
    }
}

#[test]
fn switch_without_default_yielded_null_instead_of_failing() {
    // Lowering made up a default region yielding null, so a `-> str` switch
    // with no matching case and no default returned null; the runtime docs
    // say it fails with `switch.no_match`.
    let source = r#"
agent A {
    @entry flow main(kind: str) -> str {
        switch kind {
            case "a" => "first"
            case "b" => "second"
        } -> label
        return label
    }
}
"#;
    assert_eq!(
        run_everywhere(source, &[("kind", json!("b"))]),
        json!("second")
    );
    for level in [OptLevel::O0, OptLevel::O1, OptLevel::O2] {
        let mut module = compile_source(source).unwrap().module;
        optimize(
            &mut module,
            &OptOptions {
                level,
                verify_each: true,
                ..OptOptions::default()
            },
        )
        .unwrap();
        let program = bytecode::compile(&module).unwrap();
        for workers in [1, 2, 8] {
            let options = RunOptions {
                workers: Some(workers),
                args: vec![("kind".into(), json!("c"))],
                ..RunOptions::default()
            };
            let report = ais_vm::run(
                &program,
                &options,
                Arc::new(FakeBackend::new()),
                Arc::new(MemoryHost::new()),
            );
            let error = report
                .outcome
                .expect_err("no case matches and there is no default");
            assert!(
                format!("{error:?}").contains("switch.no_match"),
                "{level:?}, {workers}: {error:?}"
            );
        }
    }
}

#[test]
fn switch_block_arm_after_guard_clause_yielded_null() {
    // After a guard clause (`if (...) { return ... }`) the rest of the flow
    // runs under "nothing returned", and a switch arm block's value was
    // dropped as if the arm itself might have returned: `v1` was null.
    let source = r#"
agent A {
    @entry flow main(s: str) -> str {
        if (s == "x") { return "early" }
        switch s {
            case "billing" => { "arm0" }
            default => "d"
        } -> v1
        return v1
    }
}
"#;
    assert_eq!(
        run_everywhere(source, &[("s", json!("billing"))]),
        json!("arm0")
    );
    assert_eq!(run_everywhere(source, &[("s", json!("x"))]), json!("early"));
    assert_eq!(run_everywhere(source, &[("s", json!("other"))]), json!("d"));
}

#[test]
fn switch_block_arm_with_guard_yielded_null() {
    // A switch arm block holding a guard clause lost its value: the final
    // expression was lowered as if the guard had certainly returned.
    let source = r#"
agent A {
    @entry flow main(s: str) -> str {
        switch s {
            case "billing" => {
                if (s == "x") { return "early" }
                "arm0"
            }
            case "x" => {
                if (s == "x") { return "early" }
                "arm1"
            }
            default => "d"
        } -> v1
        return v1
    }
}
"#;
    assert_eq!(
        run_everywhere(source, &[("s", json!("billing"))]),
        json!("arm0")
    );
    assert_eq!(run_everywhere(source, &[("s", json!("x"))]), json!("early"));
}
