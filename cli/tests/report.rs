//! Run telemetry people can use (prompts, replies, tool arguments, cost,
//! truncation, redaction, no secrets) and the pages of `aisc report` and
//! `aisc graph`, checked as text and in a headless Chromium
//! (`tests/report/browser.js`; needs `chromium` and the `ws` npm package in
//! `$AIS_NPM_DIR`, so those two are `#[ignore = "needs chromium and node:
//! run ./test"]`; `./test` installs both and runs them).

use serde_json::{json, Value as Json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf()
}

fn aisc(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_aisc"));
    c.args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("APXM_CONFIG")
        .env_remove("APXM_BACKEND")
        .env("NO_COLOR", "1")
        .current_dir(dir);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("aisc runs")
}

fn ok(o: &Output) {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn events(path: &Path) -> Vec<Json> {
    std::fs::read_to_string(path)
        .expect("events written")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

fn example(name: &str) -> String {
    root().join("examples").join(name).display().to_string()
}

const PRICED: &str = r#"
default_backend = "priced"
[[llm_backends]]
name = "priced"
protocol = "sim"
api_key_env = "AIS_TEST_KEY"
[llm_backends.prices]
input_per_mtok = 2.0
output_per_mtok = 8.0
"#;

const KEY: &str = "sk-test-0123456789abcdef";

/// A project dir whose config selects a priced simulator with an API key.
fn priced_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join(".apxm")).expect("mkdir");
    std::fs::write(dir.path().join(".apxm/config.toml"), PRICED).expect("config");
    dir
}

#[test]
fn llm_events_carry_prompt_reply_finish_reason_backend_and_cost() {
    let dir = priced_dir();
    let o = aisc(
        dir.path(),
        &[
            "run",
            &example("01_parallel_research.ais"),
            "--arg",
            "topic=sodium batteries",
            "--events",
            "ev.jsonl",
            "--trace",
            "trace.json",
        ],
        &[("AIS_TEST_KEY", KEY)],
    );
    ok(&o);
    let evs = events(&dir.path().join("ev.jsonl"));
    let asks: Vec<&Json> = evs.iter().filter(|e| e["opcode"] == "ask").collect();
    assert_eq!(asks.len(), 5);
    let first = asks
        .iter()
        .find(|e| e["flow"] == "Coordinator.main" && e["op"] == 1)
        .expect("the first ask");
    // The OpenTelemetry GenAI names (docs/telemetry.md).
    assert_eq!(first["gen_ai.operation.name"], "chat");
    let prompt = first["gen_ai.input.messages"]
        .as_array()
        .expect("prompt messages");
    assert_eq!(prompt[0]["role"], "system");
    assert_eq!(prompt[1]["role"], "user");
    assert!(prompt[1]["parts"][0]["content"]
        .as_str()
        .expect("present")
        .contains("Rewrite this research topic as one precise question that names the scope and the time frame: sodium batteries"));
    assert!(first["gen_ai.output.messages"][0]["parts"][0]["content"]
        .as_str()
        .expect("present")
        .starts_with("[simulated ask"));
    assert_eq!(first["gen_ai.response.finish_reasons"], json!(["stop"]));
    assert_eq!(first["gen_ai.provider.name"], "priced");
    let tokens_in = first["gen_ai.usage.input_tokens"]
        .as_f64()
        .expect("present");
    let tokens_out = first["gen_ai.usage.output_tokens"]
        .as_f64()
        .expect("present");
    let cost = first["cost_usd"].as_f64().expect("present");
    let expected = (tokens_in * 2.0 + tokens_out * 8.0) / 1e6;
    assert!((cost - expected).abs() < 2e-6, "{cost} vs {expected}");
    let summary = evs.last().expect("present");
    assert_eq!(summary["type"], "summary");
    let total: f64 = asks
        .iter()
        .map(|e| e["cost_usd"].as_f64().expect("present"))
        .sum();
    assert!(summary["cost_usd"].as_f64().expect("present") > 0.0);
    assert!((summary["cost_usd"].as_f64().expect("present") - total).abs() < 1e-9);
    // The run line shows the cost.
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("cost $0.00"), "{stderr}");
    // The trace's async slices carry the same fields in their args.
    let trace: Json =
        serde_json::from_slice(&std::fs::read(dir.path().join("trace.json")).expect("present"))
            .expect("present");
    let begins: Vec<&Json> = trace["traceEvents"]
        .as_array()
        .expect("present")
        .iter()
        .filter(|e| e["ph"] == "b" && e["cat"] == "llm")
        .collect();
    assert_eq!(begins.len(), 5);
    assert!(begins
        .iter()
        .all(|e| e["args"]["gen_ai.input.messages"].is_array()
            && e["args"]["gen_ai.output.messages"].is_array()
            && e["args"]["cost_usd"].as_f64().expect("present") > 0.0
            && e["args"]["gen_ai.response.finish_reasons"] == json!(["stop"])));
}

#[test]
fn tool_ops_carry_tool_name_and_arguments_and_failures_their_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = aisc(
        dir.path(),
        &[
            "run",
            &example("06_tool_invocation.ais"),
            "--arg",
            "ticker=ACME",
            "--events",
            "ev.jsonl",
            "--trace",
            "trace.json",
        ],
        &[],
    );
    ok(&o);
    let evs = events(&dir.path().join("ev.jsonl"));
    let calc = evs
        .iter()
        .find(|e| e["tool"] == "calculator")
        .expect("the calculator call");
    assert_eq!(calc["opcode"], "inv");
    assert!(calc["arguments"]
        .as_str()
        .expect("present")
        .contains("(182.40 - 151.90) / 151.90 * 100"));
    let trace = std::fs::read_to_string(dir.path().join("trace.json")).expect("present");
    assert!(trace.contains("\"tool\":\"calculator\""));

    // A failing tool call: its event names the error code.
    std::fs::write(
        dir.path().join("bad.ais"),
        "agent A {\n    capability calculator(expression: str) -> number;\n    @entry flow main() -> str {\n        let x = inv(\"calculator\", \"{{\\\"expression\\\": \\\"1 +\\\"}}\")\n        return \"done {x}\"\n    }\n}\n",
    )
    .expect("present");
    let o = aisc(
        dir.path(),
        &["run", "bad.ais", "--events", "bad.jsonl"],
        &[],
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let evs = events(&dir.path().join("bad.jsonl"));
    let failed = evs
        .iter()
        .find(|e| e["status"] == "failed" && e["tool"] == "calculator")
        .expect("the failed call");
    assert_eq!(failed["error"], "calculator.error", "{failed}");
    assert_eq!(failed["arguments"], "{\"expression\": \"1 +\"}");
}

#[test]
fn texts_are_cut_at_the_limit_and_left_out_with_redact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let long_topic = "x".repeat(500);
    let topic = format!("topic={long_topic}");
    let o = aisc(
        dir.path(),
        &[
            "run",
            &example("01_parallel_research.ais"),
            "--arg",
            &topic,
            "--events",
            "cut.jsonl",
            "--telemetry-text-limit",
            "40",
        ],
        &[],
    );
    ok(&o);
    let evs = events(&dir.path().join("cut.jsonl"));
    let ask = evs.iter().find(|e| e["opcode"] == "ask").expect("present");
    let user = ask["gen_ai.input.messages"][1]["parts"][0]["content"]
        .as_str()
        .expect("present");
    assert!(user.starts_with("Rewrite this research topic as one prec"));
    assert!(user.contains("[truncated: "), "{user}");
    assert!(!user.contains(&"x".repeat(41)));

    // The config can set the limit and redaction too; the flag adds to it.
    std::fs::create_dir_all(dir.path().join(".apxm")).expect("present");
    std::fs::write(
        dir.path().join(".apxm/config.toml"),
        "[telemetry]\ntext_limit = 10\n",
    )
    .expect("present");
    let o = aisc(
        dir.path(),
        &[
            "run",
            &example("06_tool_invocation.ais"),
            "--arg",
            "ticker=SECRETTICKER",
            "--events",
            "red.jsonl",
            "--trace",
            "red.json",
            "--redact",
        ],
        &[],
    );
    ok(&o);
    for f in ["red.jsonl", "red.json"] {
        let text = std::fs::read_to_string(dir.path().join(f)).expect("present");
        assert!(!text.contains("SECRETTICKER"), "{f} keeps a redacted text");
        assert!(!text.contains("\"arguments\""), "{f}");
        assert!(
            !text.contains("gen_ai.input.messages") && !text.contains("gen_ai.output.messages")
        );
    }
    let evs = events(&dir.path().join("red.jsonl"));
    assert!(evs.iter().any(|e| e["tool"] == "echo"), "tool names stay");
    let o = aisc(
        dir.path(),
        &[
            "run",
            &example("06_tool_invocation.ais"),
            "--arg",
            "ticker=ACME",
            "--events",
            "ten.jsonl",
        ],
        &[],
    );
    ok(&o);
    let evs = events(&dir.path().join("ten.jsonl"));
    let calc = evs
        .iter()
        .find(|e| e["tool"] == "calculator")
        .expect("present");
    assert!(calc["arguments"]
        .as_str()
        .expect("present")
        .starts_with("{\"expressi… [truncated"));
}

#[test]
fn the_backend_key_never_appears_in_telemetry_or_the_report() {
    let dir = priced_dir();
    // The key reaches a prompt (a user pasted it into an argument).
    let topic = format!("topic=use {KEY} please");
    let o = aisc(
        dir.path(),
        &[
            "run",
            &example("01_parallel_research.ais"),
            "--arg",
            &topic,
            "--events",
            "ev.jsonl",
            "--trace",
            "trace.json",
        ],
        &[("AIS_TEST_KEY", KEY)],
    );
    ok(&o);
    let o = aisc(dir.path(), &["report", "last", "-o", "run.html"], &[]);
    ok(&o);
    // The kept telemetry: the process's segment and the segments' index.
    let kept = std::fs::read_dir(dir.path().join(".apxm/telemetry"))
        .expect("present")
        .flatten()
        .map(|e| e.path())
        .collect::<Vec<_>>();
    assert_eq!(kept.len(), 2, "{kept:?}");
    for f in &kept {
        let text = std::fs::read_to_string(f).expect("present");
        assert!(!text.contains(KEY), "{} shows the key", f.display());
    }
    let segment = kept
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "seg"))
        .expect("a segment");
    for f in [
        dir.path().join("ev.jsonl"),
        dir.path().join("trace.json"),
        dir.path().join("run.html"),
        segment.clone(),
    ] {
        let text = std::fs::read_to_string(&f).expect("present");
        assert!(!text.contains(KEY), "{} shows the key", f.display());
        assert!(text.contains("[secret]"), "{}", f.display());
    }
}

/// Runs example 01 on the simulator with a topic that tries HTML injection
/// and writes its report; returns the dir and the page's path.
fn report_of_example_01() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = aisc(
        dir.path(),
        &[
            "run",
            &example("01_parallel_research.ais"),
            "--arg",
            "topic=<script>alert(1)</script></script><img src=x onerror=alert(2)>",
        ],
        &[],
    );
    ok(&o);
    let o = aisc(dir.path(), &["report", "last", "-o", "run.html"], &[]);
    ok(&o);
    let page = dir.path().join("run.html");
    (dir, page)
}

#[test]
fn report_is_one_self_contained_page_with_every_op_and_escaped_text() {
    let (_dir, page) = report_of_example_01();
    let html = std::fs::read_to_string(&page).expect("present");
    // 17 ops: 3 callees × 3, main 8; every one ran once.
    assert_eq!(html.matches("<g class=\"node ").count(), 17);
    assert_eq!(html.matches("<rect class=\"bar ").count(), 17);
    assert_eq!(html.matches(" st-ok\" data-key").count(), 17);
    // Calls link to their callees; the critical path is marked.
    assert_eq!(html.matches("class=\"edge call\"").count(), 3);
    assert!(html.contains(" crit\""));
    // No network: nothing is fetched.
    for needle in ["http://", "https://", "<link", "src=\"", "@import"] {
        let n = html.matches(needle).count();
        // The SVG namespace is the one URL, and it is never fetched.
        let allowed = if needle == "http://" {
            html.matches("http://www.w3.org/2000/svg").count()
        } else {
            0
        };
        assert_eq!(n, allowed, "{needle}");
    }
    assert!(!html.contains("<script>alert(1)"));
    assert!(!html.contains("<img src=x"));
    assert_eq!(html.matches("<script").count(), 2);
}

#[test]
fn report_names_a_run_without_telemetry_and_an_unknown_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = aisc(dir.path(), &["report", "nope", "-o", "x.html"], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("error:"));
    assert!(!dir.path().join("x.html").exists());
}

#[test]
fn graph_draws_every_op_and_links_switch_cases() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = aisc(
        dir.path(),
        &[
            "graph",
            &example("09_conditional_routing.ais"),
            "-o",
            "g.svg",
        ],
        &[],
    );
    ok(&o);
    let svg = std::fs::read_to_string(dir.path().join("g.svg")).expect("present");
    assert!(svg.starts_with("<?xml"));
    assert!(svg.contains("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.matches("<g class=\"node ").count() > 5);
    assert!(svg.contains("class=\"edge region\""));
    assert!(svg.contains(">case "), "switch cases are labelled");
    assert!(
        !svg.contains("st-ok\" data-key"),
        "a static graph has no run status"
    );
    assert_eq!(
        svg.matches("st-static\" data-key").count(),
        svg.matches("<g class=\"node ").count()
    );
    let o = aisc(
        dir.path(),
        &[
            "graph",
            &example("01_parallel_research.ais"),
            "-o",
            "g.html",
        ],
        &[],
    );
    ok(&o);
    let html = std::fs::read_to_string(dir.path().join("g.html")).expect("present");
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(html.matches("<g class=\"node ").count(), 17);
}

/// Runs `browser.js` on a page; fails the test, naming the fix, when
/// Chromium, node or `ws` is missing.
fn browse(page: &Path, click: &str, shot: Option<&Path>) -> Json {
    let chromium = std::env::var("AIS_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let found = Command::new(&chromium).arg("--version").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "needs chromium: `{chromium}` is not installed. Run ./test, which installs it (scripts/provision/apt.sh)"
    );
    let npm = std::env::var("AIS_NPM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root().join("target/npm"));
    assert!(
        npm.join("node_modules/ws").is_dir(),
        "needs the `ws` npm package, which is not in {}. Run ./test, which installs it (scripts/provision/npm.sh)",
        npm.display()
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/report/browser.js");
    let mut c = Command::new("node");
    c.arg(&script).arg(page).arg(click).env("AIS_NPM_DIR", &npm);
    if let Some(s) = shot {
        c.arg(s);
    }
    let o = c
        .output()
        .expect("needs node: run ./test, which installs it (scripts/provision/apt.sh)");
    assert!(
        o.status.success(),
        "browser.js failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("one JSON line")
}

#[test]
#[ignore = "needs chromium and node: run ./test"]
fn report_page_works_in_a_headless_browser() {
    let (dir, page) = report_of_example_01();
    let shot = std::env::var_os("AIS_REPORT_SCREENSHOTS")
        .map(|d| PathBuf::from(d).join("report.png"))
        .unwrap_or_else(|| dir.path().join("report.png"));
    // The first ask of a callee: its prompt is known.
    let r = browse(&page, "#graph .node.kind-llm", Some(&shot));
    assert_eq!(r["errors"], serde_json::json!([]), "console errors");
    assert_eq!(r["nodes"], 17);
    assert_eq!(r["bars"], 17);
    let detail = r["detail"].as_str().expect("present");
    assert!(detail.contains("Prompt"), "{detail}");
    assert!(
        detail.contains("List the three most important findings"),
        "{detail}"
    );
    assert!(detail.contains("Reply"));
    assert!(std::fs::metadata(&shot).expect("present").len() > 10_000);
}

#[test]
#[ignore = "needs chromium and node: run ./test"]
fn graph_page_works_in_a_headless_browser() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = aisc(
        dir.path(),
        &[
            "graph",
            &example("09_conditional_routing.ais"),
            "-o",
            "g.html",
        ],
        &[],
    );
    ok(&o);
    let html = std::fs::read_to_string(dir.path().join("g.html")).expect("present");
    let expected = html.matches("<g class=\"node ").count();
    let shot = std::env::var_os("AIS_REPORT_SCREENSHOTS")
        .map(|d| PathBuf::from(d).join("graph.png"))
        .unwrap_or_else(|| dir.path().join("graph.png"));
    let r = browse(&dir.path().join("g.html"), "#graph .node", Some(&shot));
    assert_eq!(r["errors"], serde_json::json!([]));
    assert_eq!(r["nodes"].as_u64().expect("present") as usize, expected);
    assert_eq!(r["bars"], 0);
    assert!(r["detail"]
        .as_str()
        .expect("present")
        .contains("static graph"));
}
