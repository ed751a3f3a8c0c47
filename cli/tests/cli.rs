//! End-to-end tests of the `aisc` binary: exit codes, output streams, JSON
//! diagnostics, artifacts and runs on the offline simulator.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn aisc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aisc"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env("NO_COLOR", "1")
        .current_dir(std::env::temp_dir())
        .output()
        .expect("aisc runs")
}

/// `aisc run FILE` on the simulator, with no delays and no memory kept,
/// plus `extra` arguments.
fn sim_run(file: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "run",
        file,
        "--memory",
        ":memory:",
        "--sim-delay-scale",
        "0",
    ];
    args.extend_from_slice(extra);
    aisc(&args)
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A project folder whose `.apxm/config.toml` is `config`.
fn project(config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join(".apxm")).expect("mkdir");
    std::fs::write(dir.path().join(".apxm/config.toml"), config).expect("config");
    dir
}

/// `aisc ARGS` in project `dir` (its HOME too: no user configuration).
fn aisc_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aisc"))
        .args(args)
        .env("HOME", dir)
        .env("NO_COLOR", "1")
        .current_dir(dir)
        .output()
        .expect("aisc runs")
}

fn path(rel: &str) -> String {
    root().join(rel).display().to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn check_valid_example_exits_zero() {
    let o = aisc(&["check", &path("examples/01_parallel_research.ais")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("0 errors, 0 warnings"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn check_reports_every_error_and_fails() {
    let o = aisc(&["check", &path("tests/ui/multi_semantic_errors.ais")]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.matches("] Error:").count() >= 5, "{err}");
    assert!(!err.contains('\u{1b}'), "no colour when not a terminal");
}

#[test]
fn json_diagnostics_are_one_object_per_line() {
    let o = aisc(&[
        "check",
        "--error-format=json",
        &path("tests/type-verification/02_type_mismatch.ais"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert!(!lines.is_empty());
    let d = &lines[0];
    assert_eq!(d["level"], "error");
    assert_eq!(d["code"]["code"], "E0109");
    let span = &d["spans"][0];
    assert!(span["line_start"].as_u64().is_some_and(|l| l >= 1));
    assert!(span["column_start"].as_u64().is_some_and(|c| c >= 1));
    assert!(span["byte_end"].as_u64() >= span["byte_start"].as_u64());
    assert!(d["rendered"]
        .as_str()
        .is_some_and(|r| r.contains("mismatched types")));
}

#[test]
fn explain_known_and_unknown_codes() {
    let o = aisc(&["explain", "E0100"]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("undefined variable"));
    let o = aisc(&["explain", "E9876"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no diagnostic has the code"));
}

#[test]
fn missing_file_is_an_error_not_a_panic() {
    let o = aisc(&["check", "/nonexistent/x.ais"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot read"));
    assert!(!stderr(&o).contains("panicked"));
}

#[test]
fn optimization_levels_change_the_call_count() {
    let f = path("examples/02_chain_fusion.ais");
    let o0 = aisc(&["build", &f, "--emit=ir", "-O0"]);
    let o1 = aisc(&["build", &f, "--emit=ir"]);
    assert!(o0.status.success() && o1.status.success());
    let asks = |o: &Output| stdout(o).matches("= ask ").count();
    assert_eq!(asks(&o0), 5);
    assert_eq!(asks(&o1), 1);
}

#[test]
fn graphs_are_emitted() {
    let f = path("examples/01_parallel_research.ais");
    let dot = aisc(&["build", &f, "--emit=dot"]);
    assert!(dot.status.success());
    assert!(stdout(&dot).contains("digraph"));
    let mermaid = aisc(&["build", &f, "--emit=mermaid"]);
    assert!(stdout(&mermaid).contains("flowchart"));
}

#[test]
fn artifact_build_inspect_run_and_corruption() {
    let dir = tempfile::tempdir().expect("temp dir");
    let art = dir.path().join("chain.apxmobj");
    let art_s = art.display().to_string();
    let o = aisc(&["build", &path("examples/02_chain_fusion.ais"), "-o", &art_s]);
    assert!(o.status.success(), "{}", stderr(&o));
    let i = aisc(&["inspect", &art_s]);
    assert!(i.status.success(), "{}", stderr(&i));
    assert!(stdout(&i).contains("Copywriter"), "{}", stdout(&i));
    let r = sim_run(&art_s, &["--arg", "product=kettle"]);
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(!stdout(&r).trim().is_empty());
    assert!(stderr(&r).contains("1 LLM calls"), "{}", stderr(&r));

    // A flipped byte, a truncation and junk are clear errors.
    let mut bytes = std::fs::read(&art).expect("artifact");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    let bad = dir.path().join("bad.apxmobj");
    std::fs::write(&bad, &bytes).expect("write");
    let r = aisc(&["run", &bad.display().to_string(), "--memory", ":memory:"]);
    assert_eq!(r.status.code(), Some(1));
    assert!(
        stderr(&r).contains("error[L0006]") && stderr(&r).contains("corrupted"),
        "{}",
        stderr(&r)
    );
    std::fs::write(&bad, &bytes[..10]).expect("write");
    let r = aisc(&["inspect", &bad.display().to_string()]);
    assert_eq!(r.status.code(), Some(1));
    assert!(!stderr(&r).contains("panicked"));
}

#[test]
fn run_on_the_simulator_says_so() {
    let o = sim_run(
        &path("examples/01_parallel_research.ais"),
        &["--arg", "topic=tidal power"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("simulat"), "{}", stderr(&o));
    assert!(stdout(&o).contains("simulated"), "{}", stdout(&o));
}

#[test]
fn run_with_a_missing_argument_fails_clearly() {
    let o = sim_run(&path("examples/01_parallel_research.ais"), &[]);
    // A missing argument is a usage error (docs/cli.md: exit 2).
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("missing argument `topic"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn run_writes_a_json_report() {
    let dir = tempfile::tempdir().expect("temp dir");
    let report = dir.path().join("r.json");
    let o = sim_run(
        &path("examples/04_scalability_n4.ais"),
        &[
            "--arg",
            "topic=x",
            "--report-json",
            &report.display().to_string(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("json");
    assert_eq!(j["ok"], true);
    assert_eq!(j["simulated"], true);
    assert!(j["summary"]["llm_calls"].as_u64().is_some_and(|n| n >= 4));
}

/// The lines of an `--events` file, each a JSON object, the last the
/// summary.
fn events_of(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).expect("events written");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(
        lines.last().map(|l| l["type"].clone()),
        Some("summary".into())
    );
    lines
}

#[test]
fn exports_are_written_by_the_edge_and_an_unwritable_one_is_r0004() {
    let dir = tempfile::tempdir().expect("temp dir");
    let events = dir.path().join("events.jsonl");
    let missing = dir.path().join("no-such-dir").join("trace.json");
    let o = sim_run(
        &path("examples/04_scalability_n4.ais"),
        &[
            "--arg",
            "topic=x",
            "--events",
            &events.display().to_string(),
            "--trace",
            &missing.display().to_string(),
        ],
    );
    // The run's value is still printed; the failed export makes it exit 1.
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).contains("simulated"), "{}", stdout(&o));
    assert!(stderr(&o).contains("R0004"), "{}", stderr(&o));
    assert!(stderr(&o).contains("trace"), "{}", stderr(&o));
    assert!(!missing.exists());
    // The other export is complete: ops, then one summary line.
    let lines = events_of(&events);
    assert!(lines.len() > 5);
    assert!(lines.iter().filter(|l| l["opcode"] == "ask").count() >= 4);
    // No temporary file is left next to it.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn a_failed_run_still_writes_its_events() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("fails.ais");
    std::fs::write(
        &src,
        "agent A {\n    @entry flow main() -> json {\n        let a = ask(\"first\")\n        let b = http_get(a)\n        return b\n    }\n}\n",
    )
    .expect("write");
    let events = dir.path().join("events.jsonl");
    let o = sim_run(
        &src.display().to_string(),
        &["--events", &events.display().to_string()],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // A network tool without an allow: denied at run time, after the ask.
    assert!(stderr(&o).contains("tool.denied"), "{}", stderr(&o));
    let lines = events_of(&events);
    assert!(lines
        .iter()
        .any(|l| l["opcode"] == "ask" && l["status"] == "ok"));
    assert!(lines
        .iter()
        .any(|l| l["opcode"] == "inv" && l["status"] == "failed"));
}

#[test]
fn solve_on_the_simulator_emits_a_plan_that_checks_and_runs_again() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("solve.ais");
    std::fs::write(
        &src,
        "agent Analyst {\n    @entry flow main(goal: str) -> str {\n        return solve(\"Answer this: {goal}\")\n    }\n}\n",
    )
    .expect("write");
    let plans = dir.path().join("plans");
    let o = sim_run(
        &src.display().to_string(),
        &[
            "--arg",
            "goal=why is the sky blue",
            "--emit-plans",
            &plans.display().to_string(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // The plan's own `ask` answered: its label is in the result.
    assert!(stdout(&o).contains("[simulated plan]"), "{}", stdout(&o));
    assert!(stderr(&o).contains("2 LLM calls"), "{}", stderr(&o));
    let ais = plans.join("plan-1.ais");
    let text = std::fs::read_to_string(&ais).expect("plan-1.ais");
    assert!(text.contains("@entry flow plan() -> str"), "{text}");
    assert!(text.contains("ask("), "{text}");
    // What the model wrote is a program of its own: it checks and runs.
    let check = aisc(&["check", &ais.display().to_string()]);
    assert!(check.status.success(), "{}", stderr(&check));
    let rerun = sim_run(&ais.display().to_string(), &[]);
    assert!(rerun.status.success(), "{}", stderr(&rerun));
    let ir = plans.join("plan-1.aisir");
    let opt = Command::new(env!("CARGO_BIN_EXE_ais-opt"))
        .arg(&ir)
        .output()
        .expect("ais-opt runs");
    assert!(opt.status.success(), "{}", stderr(&opt));
    assert!(
        stdout(&opt).contains("flow @plan() -> str entry"),
        "{}",
        stdout(&opt)
    );
}

#[test]
fn ops_lists_the_op_table_and_describes_one_op() {
    let o = aisc(&["ops", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ops: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(ops.len(), ais_ir::Opcode::ALL.len());
    let solve = ops
        .iter()
        .find(|o| o["op"] == "solve")
        .expect("solve listed");
    assert_eq!(solve["effect"], "llm");
    assert_eq!(solve["llm"], "solve");
    assert!(solve["attributes"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x["name"] == "tools")));
    let inv = aisc(&["ops", "inv"]);
    assert!(
        stdout(&inv).contains("attributes: tool: nonemptystr"),
        "{}",
        stdout(&inv)
    );
    let typo = aisc(&["ops", "sove"]);
    assert_eq!(typo.status.code(), Some(1));
    assert!(
        stderr(&typo).contains("did you mean `solve`"),
        "{}",
        stderr(&typo)
    );
}

#[test]
fn analyze_reports_critical_path_phases_and_speedup() {
    let o = aisc(&[
        "analyze",
        &path("examples/01_parallel_research.ais"),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let flows: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let main = flows
        .iter()
        .find(|f| f["entry"] == true)
        .expect("the entry flow");
    // ask → three parallel calls (1000 ms each) → ask.
    assert_eq!(main["critical_path_ms"], 3000);
    assert_eq!(main["sequential_ms"], 5000);
    let phases = main["phases"].as_array().expect("phases");
    assert_eq!(phases.len(), 3);
    assert_eq!(phases[1]["ops"].as_array().map(Vec::len), Some(3));
    assert!((main["speedup"].as_f64().unwrap_or(0.0) - 5.0 / 3.0).abs() < 1e-9);
    let text = aisc(&["analyze", &path("examples/01_parallel_research.ais")]);
    assert!(
        stdout(&text).contains("estimated speed-up 1.67×"),
        "{}",
        stdout(&text)
    );
    let bad = aisc(&["analyze", "/no/such/file.ais"]);
    assert_ne!(bad.status.code(), Some(0));
}

#[test]
fn analyze_reports_the_expected_prompt_cache_hit_rate() {
    let prog = path("bench/server/cache/w01_research_doc.ais");
    let o = aisc(&["analyze", &prog, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let classes: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .filter(|v: &serde_json::Value| v.get("cache_key").is_some())
        .collect();
    // One class: the question, three workers (through their flows'
    // parameters) and the synthesis; all but the question start after
    // another call of the class answered.
    assert_eq!(classes.len(), 1, "{classes:?}");
    assert_eq!(classes[0]["cache_key"], "Coordinator.main#0");
    assert_eq!(classes[0]["calls"], 5);
    assert_eq!(classes[0]["warm_calls"], 4);
    assert_eq!(classes[0]["prefix_blocks"], 1);
    let text = stdout(&aisc(&["analyze", &prog]));
    assert!(text.contains("expected hit rate 80%"), "{text}");
    // Without the pass there are no classes.
    let o0 = stdout(&aisc(&["analyze", &prog, "-O", "0", "--json"]));
    assert!(!o0.contains("cache_key"), "{o0}");
}

#[test]
fn the_tool_agent_and_planner_examples_run_on_the_simulator() {
    let o = sim_run(
        &path("examples/14_tool_agent.ais"),
        &["--arg", "question=what is new?"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // The model called both offered tools, and both answered.
    let out = stdout(&o);
    assert!(out.contains("simulated tool results: echo → {"), "{out}");
    assert!(out.contains("now → 20"), "{out}");
    assert!(stderr(&o).contains("2 tool calls"), "{}", stderr(&o));
    let dir = tempfile::tempdir().expect("temp dir");
    let o = sim_run(
        &path("examples/15_planner.ais"),
        &[
            "--arg",
            "goal=status",
            "--emit-plans",
            &dir.path().display().to_string(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("[simulated plan]"), "{}", stdout(&o));
    let plan = std::fs::read_to_string(dir.path().join("plan-1.ais")).expect("plan");
    assert!(
        plan.contains("@read_only capability echo(data: json) -> json;"),
        "{plan}"
    );
    assert!(
        plan.contains("= echo(") && plan.contains("= now()"),
        "{plan}"
    );
}

/// A declared capability that no tool provides is reported before any
/// call: on a real backend the run does not start (no LLM call, nothing
/// journaled); on the simulator its calls are simulated from the declared
/// signature, labelled, and a note says so.
#[test]
fn unprovided_capabilities_are_reported_before_any_call() {
    use ais_testkit::mock::{MockReply, MockServer};
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("p.ais");
    std::fs::write(
        &src,
        "agent Travel {\n    capability find_flights(city: str, days: number) -> json;\n    capability weather(city: str) -> str;\n    @entry flow main(city: str) -> str {\n        let f = find_flights(city, 3)\n        let w = weather(city)\n        return ask(\"Plan a trip\", f, w)\n    }\n}\n",
    )
    .expect("write");
    let o = sim_run(&src.display().to_string(), &["--arg", "city=Oslo"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("no tool provides `find_flights` (agent Travel), `weather` (agent Travel)")
            && err.contains("simulated"),
        "{err}"
    );

    let server = MockServer::start().expect("mock");
    server.push(MockReply::Content("a plan".into()));
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "default_backend = \"m\"\n[[llm_backends]]\nname = \"m\"\nprotocol = \"openai\"\nbase_url = \"{}\"\n",
            server.openai_url()
        ),
    )
    .expect("config");
    let o = Command::new(env!("CARGO_BIN_EXE_aisc"))
        .args([
            "run",
            &src.display().to_string(),
            "--arg",
            "city=Oslo",
            "--config",
        ])
        .arg(&config)
        .env("HOME", dir.path())
        .env("NO_COLOR", "1")
        .current_dir(dir.path())
        .output()
        .expect("aisc");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no tool provides the declared capability `find_flights` (agent Travel), `weather` (agent Travel); nothing was called"),
        "{}",
        stderr(&o)
    );
    assert_eq!(server.request_count(), 0);
}

/// As in the reference, calling an undeclared name is a tool call when the
/// configuration provides a tool of that name (here a subprocess tool),
/// arguments by its schema's parameters; an unknown name stays E0114 with
/// the configured tool as its suggestion.
#[test]
fn undeclared_names_call_configured_tools() {
    let dir = project(
        r#"default_backend = "sim"
[[llm_backends]]
name = "sim"
protocol = "sim"
[[tools.subprocess]]
name = "word_count"
command = ["sh", "-c", "cat >/dev/null; echo 3"]
input_schema = { type = "object", required = ["text"], properties = { text = { type = "string" } } }
[access.allow]
Counter = ["word_count"]
"#,
    );
    let program = "agent Counter {\n    flow main(text: str) -> json {\n        return word_count(text: text)\n    }\n}\n";
    std::fs::write(dir.path().join("w.ais"), program).expect("write");
    let run = |args: &[&str]| aisc_in(dir.path(), args);
    let o = run(&["check", "w.ais"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&["run", "w.ais", "--arg", "text=one two three", "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "3");
    std::fs::write(
        dir.path().join("w.ais"),
        program.replace("word_count(", "word_cont("),
    )
    .expect("write");
    let o = run(&["check", "w.ais"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("E0114") && err.contains("did you mean `word_count`?"),
        "{err}"
    );
}

/// `aisc tools` lists every tool a run would have, with its origin and the
/// access decision for an agent under `[access]`.
#[test]
fn tools_lists_every_tool_with_its_access_decision() {
    let dir = project(
        "default_backend = \"sim\"\n[[llm_backends]]\nname = \"sim\"\nprotocol = \"sim\"\n\
         [[tools.subprocess]]\nname = \"word_count\"\ncommand = [\"sh\", \"-c\", \"echo 1\"]\n\
         [[remote_agents]]\nname = \"Peer\"\nurl = \"http://127.0.0.1:9/a2a/Peer\"\n\
         [access.allow]\nCounter = [\"word_count\", \"http_get\"]\n",
    );
    let run = |args: &[&str]| aisc_in(dir.path(), args);
    let o = run(&["tools", "--json", "--agent", "Counter"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let tools: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    let find = |n: &str| {
        tools
            .iter()
            .find(|t| t["name"] == n)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(find("word_count")["origin"], "subprocess");
    assert_eq!(find("word_count")["access"]["allowed"], true);
    assert_eq!(find("http_get")["access"]["allowed"], true);
    assert_eq!(find("bash")["access"]["allowed"], false);
    assert_eq!(find("Peer")["origin"], "remote agent");
    assert_eq!(
        find("calculator")["input_schema"]["required"][0],
        "expression"
    );
    // Each tool's catalogue declaration, as the policy applies it.
    let http = find("http_get")["declared"].clone();
    assert_eq!(http["trusted"], false);
    assert_eq!(http["effect"], "read-only");
    assert_eq!(http["sink_args"], serde_json::json!(["url", "headers"]));
    assert_eq!(find("write")["declared"]["alias_of"], "write_file");
    assert_eq!(
        find("write")["declared"]["sink_args"],
        serde_json::json!(["*"])
    );
    assert_eq!(find("Peer")["declared"]["trusted"], false);
    assert_eq!(find("word_count")["declared"]["trusted"], true);
    assert_eq!(
        find("calculator")["declared"]["sink_args"],
        serde_json::json!([])
    );
    // Another agent: the allow list does not name it.
    let o = run(&["tools", "--agent", "Other"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("word_count  [subprocess]  denied:"), "{text}");
    assert!(
        text.contains("effect: read-only; results: untrusted; sink arguments: url, headers"),
        "{text}"
    );
    assert!(
        text.contains("tools; access shown for agent `Other`"),
        "{text}"
    );
}

/// `aisc config show` prints every section as it takes effect (tools,
/// search, MCP servers, access, remote agents, policy, telemetry, store),
/// secrets hidden; `aisc doctor` checks each tool provider too and fails
/// when one does not answer.
#[test]
fn config_show_covers_every_section_and_doctor_checks_tool_providers() {
    use std::io::{Read, Write};
    let provider = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let search_url = format!("http://{}", provider.local_addr().expect("addr"));
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = provider.accept() {
            let mut buf = [0u8; 2048];
            let _ = s.read(&mut buf);
            let body = r#"{"results": [{"title": "t", "url": "u", "content": "c"}]}"#;
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let dir = project(&format!(
            "default_backend = \"sim\"\n[[llm_backends]]\nname = \"sim\"\nprotocol = \"sim\"\n\
             [[tools.subprocess]]\nname = \"gone\"\ncommand = [\"no-such-command-here\"]\nenv = {{ TOKEN = \"s3cret-value\" }}\n\
             [tools.search]\nurl = \"{search_url}\"\n\
             [[remote_agents]]\nname = \"Peer\"\nurl = \"http://127.0.0.1:9/a2a/Peer\"\n\
             [access.allow]\nA = [\"gone\"]\n[policy]\ntrusted = [\"gone\"]\n[telemetry]\nredact = true\n"
        ));
    let run = |args: &[&str]| aisc_in(dir.path(), args);
    let o = run(&["config", "show"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    for section in [
        "[memory]",
        "[tools]",
        "[[tools.subprocess]]",
        "[tools.search]",
        "[access]",
        "[[remote_agents]]",
        "[policy]",
        "[telemetry]",
        "redact = true",
        "trusted = [\"gone\"]",
        "allow.\"A\" = [\"gone\"]",
    ] {
        assert!(text.contains(section), "{section} missing:\n{text}");
    }
    assert!(!text.contains("s3cret-value"), "{text}");
    let o = run(&["doctor"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("FAIL  tool gone [subprocess]: command `no-such-command-here` not found"),
        "{text}"
    );
    assert!(
        text.contains("ok    search") && text.contains("answered (1 results)"),
        "{text}"
    );
    assert!(text.contains("FAIL  remote agent Peer"), "{text}");
    assert!(
        text.contains("3 tool provider(s) checked, 2 failed"),
        "{text}"
    );
}
