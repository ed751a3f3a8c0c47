//! Regression tests for defects found by running programs as a user would.
//! Each test is named after its defect and runs the program from source at
//! -O0, -O1 and -O2 on the VM with 1, 2 and 8 workers.
#![allow(clippy::unwrap_used)]

use ais_compiler::driver::{compile_source, optimize, OptOptions};
use ais_ir::bytecode;
use ais_ir::passes::OptLevel;
use ais_testkit::fake::FakeBackend;
use ais_testkit::MemoryHost;
use ais_vm::RunOptions;
use serde_json::{json, Value as Json};
use std::sync::Arc;

/// One run of a program: its outcome and printed lines.
type Outcome = (Result<Json, String>, Vec<String>);

/// Compiles `source` at -O0, -O1 and -O2 and runs each `runs` times with
/// 1, 2 and 8 workers, with `args` and a fresh host from `host` each time.
fn run_matrix(
    source: &str,
    args: &[(&str, Json)],
    runs: usize,
    host: impl Fn() -> Arc<MemoryHost>,
) -> Vec<Outcome> {
    let mut out = Vec::new();
    for level in [OptLevel::O0, OptLevel::O1, OptLevel::O2] {
        let mut module = compile_source(source).unwrap().module;
        let opt = OptOptions {
            level,
            verify_each: true,
            ..OptOptions::default()
        };
        optimize(&mut module, &opt).unwrap();
        let program = bytecode::compile(&module).unwrap();
        for workers in [1, 2, 8] {
            for _ in 0..runs {
                let options = RunOptions {
                    workers: Some(workers),
                    args: args
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.clone()))
                        .collect(),
                    ..RunOptions::default()
                };
                let h = host();
                let report =
                    ais_vm::run(&program, &options, Arc::new(FakeBackend::new()), h.clone());
                out.push((report.outcome.map_err(|e| e.to_string()), h.printed()));
            }
        }
    }
    out
}

/// Runs the entry flow with `args` at every optimization level and worker
/// count and returns the single result they all agree on.
fn run_everywhere(source: &str, args: &[(&str, Json)]) -> Json {
    let outcomes = run_matrix(source, args, 1, || Arc::new(MemoryHost::new()));
    let first = outcomes[0].0.clone().unwrap();
    for (i, (o, _)) in outcomes.iter().enumerate() {
        assert_eq!(o.as_ref().unwrap(), &first, "run {i} of the matrix");
    }
    first
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

/// Runs `source` `runs` times at every optimization level and worker count;
/// returns each run's outcome and printed lines.
fn run_many(source: &str, args: &[(&str, Json)], runs: usize) -> Vec<Outcome> {
    run_matrix(source, args, runs, || Arc::new(MemoryHost::new()))
}

/// A `communicate` in a `try` body starts an `on` handler, then the body
/// fails: the run used to stall ("the run stalled") because abandoning the
/// `try` cancelled the detached handler frame too, which then never ended.
#[test]
fn communicate_in_failing_try_does_not_stall() {
    // The message is sent in the body itself or in a flow the body calls.
    let program = |tool: &str, send: &str| {
        format!(
            r#"
agent B {{
    on message.received {{ sender: str, content: str }} => {{
        let h = ask("handle {{content}}")
        print("handled", h)
    }}
}}
agent Main {{
    flow tell(topic: str) {{
        communicate("B", topic, "direct")
    }}
    @entry flow main(topic: str) -> str {{
        let r = "start"
        try {{
            {send}
            let _t = inv("{tool}", "{{{{}}}}")
            r = "done"
        }} catch {{
            r = "caught"
        }}
        return r
    }}
}}
"#
        )
    };
    for send in ["communicate(\"B\", topic, \"direct\")", "tell(topic)"] {
        let failing = run_many(&program("no_such_tool", send), &[("topic", json!("t"))], 20);
        assert_eq!(failing.len(), 180);
        for (outcome, printed) in &failing {
            assert_eq!(outcome, &Ok(json!("caught")), "{send}: {printed:?}");
            // The failed body's message is discarded: no handler runs.
            assert!(printed.is_empty(), "{send}: {printed:?}");
        }
        let succeeding = run_many(&program("echo", send), &[("topic", json!("t"))], 20);
        for (outcome, printed) in &succeeding {
            assert_eq!(outcome, &Ok(json!("done")), "{send}");
            assert_eq!(printed.len(), 1, "{send}: {printed:?}");
            assert!(printed[0].starts_with("handled"), "{send}: {printed:?}");
        }
    }
}

/// Compiles `source` at every optimization level; runs it `runs` times per
/// level and worker count with a fresh host from `host`; returns outcomes.
fn run_with_host(
    source: &str,
    runs: usize,
    host: impl Fn() -> Arc<MemoryHost>,
) -> Vec<Result<Json, String>> {
    run_matrix(source, &[], runs, host)
        .into_iter()
        .map(|(o, _)| o)
        .collect()
}

/// A side-effecting call and a later call to the same provider (`kv.*`, as
/// an MCP server's tools are named) run in program order, so the read sees
/// the write; `fence()` orders calls of different providers; two read-only
/// calls still run at the same time.
#[test]
fn tool_side_effects_are_ordered_per_provider() {
    use std::sync::Mutex;
    let source = r#"
agent Main {
    @entry flow main() -> json {
        let _w = inv("kv.put", "{{\"key\": \"a\", \"value\": \"written\"}}")
        let seen = inv("kv.get", "{{\"key\": \"a\"}}")
        let _x = inv("other.put", "{{\"key\": \"b\", \"value\": \"fenced\"}}")
        fence()
        let after_fence = inv("kv.get", "{{\"key\": \"b\"}}")
        return [seen, after_fence]
    }
}
"#;
    let host = || {
        let h = Arc::new(MemoryHost::new());
        let store: Arc<Mutex<std::collections::HashMap<String, Json>>> = Arc::default();
        for name in ["kv.put", "other.put"] {
            let s = store.clone();
            h.register_tool(name, move |args: &Json| {
                // Slow enough that an unordered read would overtake it.
                std::thread::sleep(std::time::Duration::from_millis(5));
                let key = args["key"].as_str().unwrap_or_default().to_string();
                s.lock().unwrap().insert(key, args["value"].clone());
                Ok(Json::Null)
            });
        }
        let s = store.clone();
        h.register_tool("kv.get", move |args: &Json| {
            let key = args["key"].as_str().unwrap_or_default();
            Ok(s.lock().unwrap().get(key).cloned().unwrap_or(Json::Null))
        });
        h
    };
    let outcomes = run_with_host(source, 20, host);
    assert_eq!(outcomes.len(), 180);
    for o in outcomes {
        assert_eq!(o, Ok(json!(["written", "fenced"])));
    }

    // Two read-only calls overlap: each waits (bounded) until both have
    // started, and reports whether it saw the other.
    let source = r#"
agent Main {
    @read_only capability probe_a() -> json;
    @read_only capability probe_b() -> json;
    @entry flow main() -> json {
        let a = probe_a()
        let b = probe_b()
        return [a, b]
    }
}
"#;
    let host = || {
        let h = Arc::new(MemoryHost::new());
        let started = Arc::new((Mutex::new(0usize), std::sync::Condvar::new()));
        for name in ["probe_a", "probe_b"] {
            let s = started.clone();
            h.register_tool(name, move |_: &Json| {
                let (m, cv) = &*s;
                let mut n = m.lock().unwrap();
                *n += 1;
                cv.notify_all();
                let (n, _) = cv
                    .wait_timeout_while(n, std::time::Duration::from_secs(10), |n| *n < 2)
                    .unwrap();
                Ok(json!(*n >= 2))
            });
        }
        h
    };
    for o in run_with_host(source, 2, host) {
        assert_eq!(o, Ok(json!([true, true])));
    }
}

/// A flow that calls itself twice per call doubles its frames at every
/// level; the call-depth limit never trips and the process used to run out
/// of memory. The live-frame limit stops it with `LIMIT_FRAMES` (not
/// caught by the `try` around it), while a wide but bounded program under
/// the same limit still succeeds.
#[test]
fn binary_recursion_stops_at_the_frame_limit() {
    let source = r#"
agent Main {
    flow grow(n: number) -> number {
        if n <= 0 { return 1 }
        return grow(n - 1) + grow(n - 1)
    }
    @entry flow main(n: number) -> number {
        let r = 0
        try { r = grow(n) } catch { r = -1 }
        return r
    }
}
"#;
    let program = {
        let module = compile_source(source).unwrap().module;
        bytecode::compile(&module).unwrap()
    };
    let run = |n: u32, workers: usize, max: usize| {
        let options = RunOptions {
            workers: Some(workers),
            args: vec![("n".into(), json!(n))],
            max_live_frames: max,
            ..RunOptions::default()
        };
        ais_vm::run(
            &program,
            &options,
            Arc::new(FakeBackend::new()),
            Arc::new(MemoryHost::new()),
        )
        .outcome
    };
    for workers in [1, 2, 8] {
        // 2^40 calls: far beyond any limit.
        match run(40, workers, 10_000) {
            Err(ais_vm::RunError::OpFailed { code, payload, .. }) => {
                assert_eq!(code, "LIMIT_FRAMES");
                assert_eq!(payload["limit"], json!(10_000));
            }
            other => panic!("{workers} workers: {other:?}"),
        }
        // 2^10 leaves, fewer than 10,000 frames alive: completes.
        assert_eq!(run(10, workers, 10_000).unwrap(), json!(1024));
    }
    // A loop of 5,000 iterations, each calling a flow, stays under the
    // default limit at every optimization level and worker count.
    let wide = r#"
agent Main {
    flow double(x: number) -> number { return x * 2 }
    @entry flow main(items: list<number>) -> number {
        let total = 0
        loop (x in items) { total = total + double(x) }
        return total
    }
}
"#;
    let items: Vec<u32> = (1..=5000).collect();
    let expected: u64 = items.iter().map(|x| u64::from(*x) * 2).sum();
    assert_eq!(
        run_everywhere(wide, &[("items", json!(items))]),
        json!(expected)
    );
}

/// Text doubled in a loop reaches 2^40 times its size: the value-size limit
/// stops the run (not caught by `try`) long before memory runs out; under
/// the limit the same program completes.
#[test]
fn a_value_doubled_in_a_loop_stops_at_the_value_limit() {
    let source = r#"
agent Main {
    @entry flow main(n: number) -> str {
        let rounds = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
                      21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40]
        let s = "ab"
        try {
            loop (r in rounds) {
                if r <= n { s = s + s }
            }
        } catch { s = "caught" }
        return s
    }
}
"#;
    for level in [OptLevel::O0, OptLevel::O2] {
        let mut module = compile_source(source).unwrap().module;
        optimize(
            &mut module,
            &OptOptions {
                level,
                ..OptOptions::default()
            },
        )
        .unwrap();
        let program = bytecode::compile(&module).unwrap();
        let run = |n: u32, workers: usize| {
            let options = RunOptions {
                workers: Some(workers),
                args: vec![("n".into(), json!(n))],
                max_value_bytes: 4096,
                ..RunOptions::default()
            };
            ais_vm::run(
                &program,
                &options,
                Arc::new(FakeBackend::new()),
                Arc::new(MemoryHost::new()),
            )
            .outcome
        };
        for workers in [1, 2, 8] {
            match run(40, workers) {
                Err(ais_vm::RunError::OpFailed { code, payload, .. }) => {
                    assert_eq!(code, "LIMIT_VALUE_BYTES");
                    assert_eq!(payload["limit"], json!(4096));
                    assert_eq!(payload["size"], json!(8192), "the first value over 4096");
                }
                other => panic!("{level:?}, {workers} workers: {other:?}"),
            }
            // 2 × 2^11 = 4096 bytes: at the limit, not over it.
            assert_eq!(run(11, workers).unwrap().as_str().map(str::len), Some(4096));
        }
    }
}

/// A `try` body is all-or-nothing for the program's own state: its prints,
/// memory writes (every tier), belief updates and messages happen only if
/// it completes; inside it, its own writes are visible (read-your-writes);
/// flows it calls belong to it. The same result and output at every
/// optimization level and worker count, 40 runs each.
#[test]
fn failing_try_body_effects_are_discarded() {
    let program = |tool: &str| {
        format!(
            r#"
agent Main {{
    beliefs {{ status: "idle" }}
    flow note(x: str) {{
        print("noted", x)
        umem(x, "episodic")
    }}
    @entry flow main(topic: str) -> str {{
        let r = "start"
        try {{
            print("in body", topic)
            umem("draft", "stm", "k")
            umem("fact", "ltm", "f")
            status = "busy"
            note(topic)
            let seen = qmem("k", "stm")
            print("seen", seen, status)
            let _t = inv("{tool}", "{{{{}}}}")
            r = "completed"
        }} catch {{
            r = "caught"
        }}
        print("after", qmem("k", "stm"), qmem("f", "ltm"), status)
        return r
    }}
}}
"#
        )
    };
    let failing = run_many(&program("no_such_tool"), &[("topic", json!("t"))], 40);
    assert_eq!(failing.len(), 360);
    for (outcome, printed) in &failing {
        assert_eq!(outcome, &Ok(json!("caught")));
        assert_eq!(printed, &vec!["after [] [] idle".to_string()]);
    }
    let succeeding = run_many(&program("echo"), &[("topic", json!("t"))], 40);
    for (outcome, printed) in &succeeding {
        assert_eq!(outcome, &Ok(json!("completed")));
        assert_eq!(
            printed,
            &vec![
                "in body t".to_string(),
                "noted t".to_string(),
                "seen draft busy".to_string(),
                "after draft fact busy".to_string(),
            ]
        );
    }
}

/// Runs `aisc` on `source` written to a temporary file.
fn aisc_check(source: &str) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.ais");
    std::fs::write(&file, source).unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_aisc"))
        .args(["check", "--color", "never"])
        .arg(&file)
        .output()
        .unwrap()
}

#[test]
fn compiler_output_blows_up_on_a_line_of_invalid_characters() {
    // 10 KB of `$` on one line printed 202 MB: one diagnostic per character,
    // each showing the whole line.
    let source = format!(
        "agent A {{ @entry flow main() -> str {{ return \"x\" }} }}\n{}\n",
        "$".repeat(10_000)
    );
    let fe = ais_compiler::driver::check_source(&source);
    assert_eq!(fe.diagnostics.len(), 1, "{:?}", fe.diagnostics);
    assert_eq!(fe.diagnostics[0].code, "E0003");
    let out = aisc_check(&source);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("10000 in a row"), "{stderr}");
    assert!(stderr.len() < 2_000, "{} bytes:\n{stderr}", stderr.len());
}

#[test]
fn compiler_output_is_capped_per_file_and_per_line() {
    // 300 lines with an error each, and one line with 40.
    let mut source = String::from("agent A { @entry flow main() -> str { return \"x\" } }\n");
    for _ in 0..300 {
        source.push_str("1a\n");
    }
    source.push_str(&" 2b".repeat(40));
    let out = aisc_check(&source);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let shown = stderr.matches("] Error:").count();
    assert_eq!(shown, ais_compiler::diagnostics::MAX_PER_FILE, "{stderr}");
    assert!(
        stderr.contains("more diagnostics not shown"),
        "{}",
        &stderr[stderr.len().saturating_sub(500)..]
    );
}

#[test]
fn compile_time_blows_up_on_a_long_plus_chain() {
    // Every link of a 10k-term `+` chain was folded on its own (4.2 s and
    // 1 GB in canonicalize); now the last link folds the chain once.
    let terms: Vec<String> = (0..10_000)
        .map(|i| {
            if i % 2 == 0 {
                "x".to_string()
            } else {
                format!("\"t{i}\"")
            }
        })
        .collect();
    let source = format!(
        "agent A {{\n    @entry flow main(x: str) -> str {{\n        return {}\n    }}\n}}\n",
        terms.join(" + ")
    );
    // Nested 10k deep: the front end recurses, as `aisc` does on its big stack.
    let (module, stats) = ais_compiler::driver::with_deep_stack(|| {
        let mut module = compile_source(&source).unwrap().module;
        let stats = optimize(&mut module, &OptOptions::default()).unwrap();
        (module, stats)
    });
    let canon = &stats.passes[0];
    assert_eq!(canon.name, "canonicalize");
    let folded = canon
        .counters
        .iter()
        .find(|(k, _)| *k == "folded")
        .map(|(_, v)| *v);
    assert_eq!(folded, Some(1), "{:?}", canon.counters);
    // And the result is still right.
    let program = bytecode::compile(&module).unwrap();
    let report = ais_vm::run(
        &program,
        &RunOptions {
            args: vec![("x".into(), json!("-"))],
            ..RunOptions::default()
        },
        Arc::new(FakeBackend::new()),
        Arc::new(MemoryHost::new()),
    );
    let expected: String = (0..10_000)
        .map(|i| {
            if i % 2 == 0 {
                "-".to_string()
            } else {
                format!("t{i}")
            }
        })
        .collect();
    assert_eq!(report.outcome.unwrap(), json!(expected));
}

#[test]
fn one_syntax_error_hides_a_whole_flow() {
    // A missing `)` swallowed every later statement of its flow.
    let source = r#"
agent A {
    @entry flow main(topic: str) -> str {
        let a = ask("one {topic}"
        print(a, nope)
        return a
    }
}
"#;
    let fe = ais_compiler::driver::check_source(source);
    let codes: Vec<&str> = fe.diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["E0004", "E0100"], "{:?}", fe.diagnostics);
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
    let outcomes = run_matrix(source, &[("kind", json!("c"))], 1, || {
        Arc::new(MemoryHost::new())
    });
    for (i, (outcome, _)) in outcomes.iter().enumerate() {
        let error = outcome
            .as_ref()
            .expect_err("no case matches and there is no default");
        assert!(error.contains("switch.no_match"), "run {i}: {error}");
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

/// Two tool calls of one `try` body fail at about the same time: the
/// second failure used to walk past the `try` (already settled by the
/// first) and fail the whole run (about 1 run in 40 of
/// `examples/11_verify_fix_retry.ais` with unknown tools, 2 workers).
#[test]
fn second_failure_in_a_try_body_escaped_the_try() {
    let source = r#"
agent Coder {
    capability run_tests(source: str, suite: str) -> json;
    capability lint(source: str) -> json;

    @entry flow main(spec: str) -> str {
        let code: str = "v0"
        let passed = false
        loop (attempt in [1, 2, 3, 4, 5, 6, 7, 8]) {
            if (passed == false) {
                try {
                    let results = run_tests(code, "unit")
                    let style = lint(code)
                    let evidence = wait_all(results, style)
                    code = "fixed"
                } catch {
                    code = code + "c"
                }
            }
        }
        return code
    }
}
"#;
    let outcomes = run_many(source, &[("spec", json!("x"))], 25);
    let failed: Vec<_> = outcomes.iter().filter(|(o, _)| o.is_err()).collect();
    assert!(
        failed.is_empty(),
        "{} of {} runs failed, first: {:?}",
        failed.len(),
        outcomes.len(),
        failed.first()
    );
    for (o, _) in &outcomes {
        assert_eq!(o.as_ref().unwrap(), &json!("v0cccccccc"));
    }
}

#[test]
fn switch_whose_arms_call_tools_yielded_the_ordering_token() {
    // An arm that is a tool call (`=> read_file(...)`, a capability, an
    // arm block ending in one) gave the switch no value: its type was
    // found for flows and built-ins only, so the arm yielded the tool's
    // ordering token and the switch's value was null.
    let source = r#"
agent A {
    capability lookup(key: str) -> str
    @entry flow main(c: str) -> str {
        let x = switch c {
            case "a" => read_file("a.txt")
            case "b" => lookup(c)
            default => { let p = "b.txt"; read_file(p) }
        }
        return x
    }
}
"#;
    let host = || {
        let h = MemoryHost::new();
        h.register_tool("read_file", |args| {
            Ok(json!(format!(
                "content of {}",
                args["path"].as_str().unwrap_or("?")
            )))
        });
        h.register_tool("lookup", |args| {
            Ok(json!(format!(
                "found {}",
                args["key"].as_str().unwrap_or("?")
            )))
        });
        Arc::new(h)
    };
    for (c, want) in [
        ("a", "content of a.txt"),
        ("b", "found b"),
        ("z", "content of b.txt"),
    ] {
        for (i, (outcome, _)) in run_matrix(source, &[("c", json!(c))], 1, host)
            .into_iter()
            .enumerate()
        {
            assert_eq!(outcome, Ok(json!(want)), "c = {c}, run {i}");
        }
    }
}
