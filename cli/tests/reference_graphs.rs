//! The reference's graph format, every op and attribute: the documents in
//! `tests/reference/graphs/` (ours, written after the reference's op
//! definitions) check and run on the simulator with the output in their
//! `.stdout` golden (`AIS_BLESS=1` rewrites them); the documents in
//! `tests/reference/invalid/` are rejected with the code their name starts
//! with, for the reason the reference gives; the programs in
//! `tests/reference/source/` (the reference's ops as named arguments) run
//! with the output in their `.stdout` golden.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn aisc(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aisc"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env("NO_COLOR", "1")
        .current_dir(dir)
        .output()
        .expect("aisc runs")
}

fn corpus(dir: &str) -> Vec<PathBuf> {
    corpus_of(dir, "json")
}

fn corpus_of(dir: &str, ext: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/reference")
        .join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("corpus")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    files.sort();
    files
}

#[test]
fn reference_graphs_run_with_their_expected_output() {
    let bless = std::env::var_os("AIS_BLESS").is_some();
    let files = corpus("graphs");
    assert!(files.len() >= 5, "only {} graphs", files.len());
    let tmp = tempfile::tempdir().expect("tempdir");
    for f in files {
        let path = f.to_string_lossy().into_owned();
        let mut args: Vec<String> = [
            "run",
            &path,
            "--backend",
            "sim",
            "--sim-delay-scale",
            "0",
            "--memory",
            ":memory:",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // `NAME.args`: the run's arguments, one `name=value` a line.
        if let Ok(given) = std::fs::read_to_string(f.with_extension("args")) {
            for kv in given.lines().filter(|l| !l.trim().is_empty()) {
                args.extend(["--arg".to_string(), kv.to_string()]);
            }
        }
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = aisc(tmp.path(), &a);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("Error:") && !stderr.contains("error["),
            "{path}: {stderr}"
        );
        let golden = f.with_extension("stdout");
        if bless {
            std::fs::write(&golden, &stdout).expect("bless");
        } else {
            let want = std::fs::read_to_string(&golden)
                .unwrap_or_else(|e| panic!("{}: {e} (bless with AIS_BLESS=1)", golden.display()));
            assert_eq!(stdout, want, "{path}");
        }
    }
}

/// The guides' worker graph starts with a `GUARD` that has no input: it
/// checks the run's input (`--arg input=...`). Without one the run does
/// not start (exit 2, naming the argument); with an empty one the guard
/// halts with its message before any tool call, since what follows the
/// guard by a `Data` edge waits for it.
#[test]
fn an_input_less_guard_checks_the_runs_input() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let f =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/reference/graphs/guarded_worker.json");
    let path = f.to_string_lossy().into_owned();
    let run = [
        "run",
        &path,
        "--backend",
        "sim",
        "--memory",
        ":memory:",
        "-q",
    ];
    let out = aisc(tmp.path(), &run);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--arg input=VALUE"), "{err}");

    let report = tmp.path().join("r.json");
    let report_s = report.to_string_lossy().into_owned();
    let mut a: Vec<&str> = run.to_vec();
    a.extend(["--arg", "input=", "--report-json", &report_s]);
    let out = aisc(tmp.path(), &a);
    assert_eq!(out.status.code(), Some(1));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("json");
    assert_eq!(r["error"]["message"], "No input provided", "{r}");
    assert_eq!(r["error"]["cause"], "guard.failed", "{r}");
    assert_eq!(r["summary"]["tool_calls"], 0, "{r}");
}

/// A lone graph's `FLOW_CALL` to an agent it does not define (the
/// reference's op definition's own example) checks with the warning
/// `G0014` and fails when the call runs, naming the agent, before what
/// depends on it; a misspelling of an agent the document defines, or any
/// unknown agent in a whole program (`graphs`), stays the error `V0019`.
#[test]
fn flow_calls_to_absent_agents_warn_in_a_lone_graph_and_fail_in_a_program() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let graph = |agent: &str, whole: bool| {
        let mut g = serde_json::json!({
            "name": "caller",
            "nodes": [
                {"id": 1, "name": "topic", "op": "CONST_STR", "attributes": {"value": "tides"}},
                {"id": 4, "name": "call", "op": "FLOW_CALL", "attributes": {"agent_name": agent, "flow_name": "analyze", "args": {"topic": "{{node_1}}"}}},
                {"id": 5, "name": "after", "op": "PRINT", "attributes": {"message": "reached"}}
            ],
            "edges": [
                {"from": 1, "to": 4, "dependency": "Data"},
                {"from": 4, "to": 5, "dependency": "Data"}
            ],
            "parameters": []
        });
        if whole {
            g["graphs"] = serde_json::json!([{
                "name": "helper",
                "nodes": [{"id": 1, "name": "x", "op": "ASK", "attributes": {"template_str": "hi"}}],
                "metadata": {"is_entry": false}
            }]);
        }
        g
    };
    let write = |name: &str, g: &serde_json::Value| {
        let p = tmp.path().join(name);
        std::fs::write(&p, g.to_string()).expect("write");
        p.to_string_lossy().into_owned()
    };

    let lone = write("lone.json", &graph("researcher", false));
    let out = aisc(tmp.path(), &["check", &lone]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("[G0014] Warning") && err.contains("`researcher`"),
        "{err}"
    );
    assert!(err.contains("0 errors, 1 warning"), "{err}");
    let out = aisc(
        tmp.path(),
        &[
            "run",
            &lone,
            "--backend",
            "sim",
            "--memory",
            ":memory:",
            "-q",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("`@researcher.analyze`: this program has no agent `researcher`"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("reached"));

    // `caller` is the lone graph's agent: `calller` is a misspelling of it.
    let typo = write("typo.json", &graph("calller", false));
    let out = aisc(tmp.path(), &["check", &typo]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("[V0019]") && err.contains("`@calller.analyze`"),
        "{err}"
    );

    let whole = write("whole.json", &graph("researcher", true));
    let out = aisc(tmp.path(), &["check", &whole]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("[V0019]") && !err.contains("G0014"), "{err}");
}

/// The reference's `EXC` runs `code` in a sandbox: here the confined
/// `bash` tool, denied unless the configuration allows it for the agent,
/// then its `{exit_code, stdout, ...}`.
#[test]
fn exc_code_is_the_confined_bash_tool() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let g = serde_json::json!({
        "name": "Coder",
        "nodes": [{"id": 1, "name": "run", "op": "EXC", "attributes": {"code": "echo hi", "sandbox_config": {}}}]
    });
    let path = tmp.path().join("exc.json");
    std::fs::write(&path, g.to_string()).expect("write");
    let path = path.to_string_lossy().into_owned();
    let run = [
        "run",
        &path,
        "--backend",
        "sim",
        "--memory",
        ":memory:",
        "-q",
    ];
    let out = aisc(tmp.path(), &run);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("may not call tool `bash`") && err.contains("tool.denied"),
        "{err}"
    );

    std::fs::create_dir(tmp.path().join(".apxm")).expect("mkdir");
    std::fs::write(
        tmp.path().join(".apxm/config.toml"),
        "[access.allow]\nCoder = [\"bash\"]\n",
    )
    .expect("config");
    let out = aisc(tmp.path(), &run);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json result");
    assert_eq!(v["stdout"], "hi\n", "{v}");
    assert_eq!(v["exit_code"], 0, "{v}");
}

/// `aisc ops` shows the reference's spellings: both attribute names, the
/// LLM options it names otherwise, a control op's flat form, and how a
/// reference-only op is read (with the attributes read and not used).
#[test]
fn ops_show_the_reference_spellings() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let show = |name: &str| {
        let out = aisc(tmp.path(), &["ops", name]);
        assert!(out.status.success(), "{name}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let ask = show("ASK");
    assert!(
        ask.contains("template_str") && ask.contains("system_prompt (= system)"),
        "{ask}"
    );
    let reflect = show("reflect");
    assert!(
        reflect.contains("trace_query") && reflect.contains("trace_id"),
        "{reflect}"
    );
    let switch = show("switch");
    assert!(
        switch.contains("flat form:  discriminant, cases, case_labels, default"),
        "{switch}"
    );
    let claim = show("CLAIM");
    assert!(
        claim.contains("server_url") && claim.contains("lease_ms"),
        "{claim}"
    );
    let exc = show("EXC");
    assert!(exc.contains("code, sandbox_config"), "{exc}");
}

/// A broadcast `communicate` whose value is used means every agent's
/// reply in the reference, one message here: warning `W0011`; as a
/// statement (a message) it is not warned about.
#[test]
fn a_used_broadcast_is_warned_about() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let program = |body: &str| {
        format!(
            "agent Lead {{\n    @entry\n    flow main() -> str {{\n        {body}\n        return \"sent\"\n    }}\n}}\nagent Critic {{\n    flow main(message: str) -> str {{ return \"ok\" }}\n}}\n"
        )
    };
    let used = tmp.path().join("used.ais");
    std::fs::write(
        &used,
        program("let all = communicate(target_agent: \"Critic\", message: \"vote\", protocol: \"broadcast\")\n        print(all)"),
    )
    .expect("write");
    let out = aisc(tmp.path(), &["check", &used.to_string_lossy()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("[W0011] Warning"), "{err}");

    let sent = tmp.path().join("sent.ais");
    std::fs::write(
        &sent,
        program(
            "communicate(target_agent: \"Critic\", message: \"vote\", protocol: \"broadcast\")",
        ),
    )
    .expect("write");
    let out = aisc(tmp.path(), &["check", &sent.to_string_lossy()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("0 errors, 0 warnings"), "{err}");
}

/// A numeric `GUARD` over text computed at run time reads the text as a
/// number (`tests/reference/graphs/guard_reply_text.json` and
/// `source/guard_reply.ais` pass with "0.93"); text that is not a number
/// fails the run naming the guard, in graph JSON and in source, before
/// what the guard gates runs.
#[test]
fn a_numeric_guard_reads_text_as_a_number_or_fails_naming_itself() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/reference");
    let cases = [
        (
            dir.join("graphs/guard_reply_text.json"),
            "confidence=high",
            // Either guard may read it first; each names itself.
            "`): str `high` is not a number",
        ),
        (
            dir.join("source/guard_reply.ais"),
            "score=high",
            // Its two guards read the same text independently: either may
            // fail first, and each names itself.
            "`: str `high` is not a number",
        ),
    ];
    for (file, arg, want) in cases {
        let path = file.to_string_lossy().into_owned();
        let run = [
            "run",
            &path,
            "--backend",
            "sim",
            "--memory",
            ":memory:",
            "-q",
            "--arg",
            arg,
        ];
        let out = aisc(tmp.path(), &run);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{path}: {err}");
        assert!(
            err.contains(want)
                && err.contains("type.not_a_number")
                && err.to_lowercase().contains("guard `"),
            "{path}: {err}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains("passed"), "{path}: {stdout}");
    }
}

/// An `ASK` with neither `template_str` nor an input asks the run's input,
/// with the warning G0015; without `--arg input=...` the run does not
/// start. An `ERR` with only `recovery_template` (the reference's guides
/// and its generator) is the text `Error: ` + that template.
#[test]
fn a_promptless_ask_asks_the_runs_input_and_err_reads_any_of_its_names() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/reference/graphs");
    let ask = dir
        .join("ask_run_input.json")
        .to_string_lossy()
        .into_owned();
    let out = aisc(tmp.path(), &["check", &ask]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("[G0015] Warning") && err.contains("asks the run's input"),
        "{err}"
    );
    let run = [
        "run",
        &ask,
        "--backend",
        "sim",
        "--memory",
        ":memory:",
        "-q",
    ];
    let out = aisc(tmp.path(), &run);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--arg input=VALUE"));
    let mut with: Vec<&str> = run.to_vec();
    with.extend(["--arg", "input=Name a prime"]);
    let out = aisc(tmp.path(), &with);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("Answer for: Name a prime"));

    let err_graph = serde_json::json!({
        "name": "e",
        "nodes": [{"id": 1, "name": "recover", "op": "ERR", "attributes": {"recovery_template": "try_catch_recovery"}}],
        "edges": [],
        "metadata": {"result": "str"}
    });
    let f = tmp.path().join("err.json");
    std::fs::write(&f, err_graph.to_string()).expect("write");
    let out = aisc(tmp.path(), &["build", &f.to_string_lossy(), "--emit", "ir"]);
    let ir = String::from_utf8_lossy(&out.stdout);
    assert!(ir.contains("\"Error: try_catch_recovery\""), "{ir}");
}

/// The reference's getting-started tool use as written offers `search` to
/// the `ask` that picks the topic: the simulated model calls it, and the
/// reply then reaching `search`'s query is denied by the information-flow
/// check. The corpus's `tool_use_topic.ais` (no `tools:` member) runs.
#[test]
fn a_topic_asked_with_search_offered_is_denied_as_a_search_query() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let corpus =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/reference/source/tool_use_topic.ais");
    let fixed = std::fs::read_to_string(&corpus).expect("corpus");
    let written = fixed.replacen(
        "capability search(query: str) -> str;",
        "capability search(query: str) -> str;\n    tools: [search]",
        1,
    );
    assert_ne!(written, fixed);
    let f = tmp.path().join("tool_use.ais");
    std::fs::write(&f, written).expect("write");
    let path = f.to_string_lossy().into_owned();
    let out = aisc(
        tmp.path(),
        &[
            "run",
            &path,
            "--backend",
            "sim",
            "--memory",
            ":memory:",
            "-q",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("policy.denied") && err.contains("`search` argument `query`"),
        "{err}"
    );
}

#[test]
fn invalid_reference_graphs_are_rejected_with_their_code() {
    let files = corpus("invalid");
    assert!(files.len() >= 10, "only {} graphs", files.len());
    let tmp = tempfile::tempdir().expect("tempdir");
    for f in files {
        let name = f.file_name().expect("name").to_string_lossy().into_owned();
        let code = &name[..5];
        let out = aisc(tmp.path(), &["check", &f.to_string_lossy()]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("[{code}]")), "{name}: {err}");
    }
}

#[test]
fn reference_style_source_runs_with_its_expected_output() {
    let bless = std::env::var_os("AIS_BLESS").is_some();
    let files = corpus_of("source", "ais");
    assert!(!files.is_empty());
    let tmp = tempfile::tempdir().expect("tempdir");
    for f in files {
        let path = f.to_string_lossy().into_owned();
        let source = std::fs::read_to_string(&f).expect("source");
        let mut args: Vec<String> = [
            "run",
            &path,
            "--backend",
            "sim",
            "--sim-delay-scale",
            "0",
            "--memory",
            ":memory:",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for l in source.lines() {
            if let Some(a) = l.strip_prefix("// ARGS:") {
                for kv in a.split_whitespace() {
                    args.extend(["--arg".to_string(), kv.to_string()]);
                }
            }
        }
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = aisc(tmp.path(), &a);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{path}: {stderr}");
        assert!(!stderr.contains("Warning"), "{path}: {stderr}");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let golden = f.with_extension("stdout");
        if bless {
            std::fs::write(&golden, &stdout).expect("bless");
        } else {
            let want = std::fs::read_to_string(&golden)
                .unwrap_or_else(|e| panic!("{}: {e} (bless with AIS_BLESS=1)", golden.display()));
            assert_eq!(stdout, want, "{path}");
        }
    }
}

/// The structurizer's result survives the trip: a flat graph read, written
/// as graph JSON (our nested form) and read again gives the same IR.
#[test]
fn structured_flat_graphs_round_trip_to_the_same_ir() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let flat: Vec<PathBuf> = corpus("graphs")
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("flat_"))
        })
        .collect();
    assert!(flat.len() >= 4, "only {} flat graphs", flat.len());
    for f in flat {
        let path = f.to_string_lossy().into_owned();
        let ir = aisc(tmp.path(), &["build", &path, "--emit", "ir", "-O0"]);
        assert!(
            ir.status.success(),
            "{path}: {}",
            String::from_utf8_lossy(&ir.stderr)
        );
        let ir = String::from_utf8_lossy(&ir.stdout).into_owned();
        assert!(
            ["if ", "switch ", "try_catch", "loop "]
                .iter()
                .any(|k| ir.contains(k)),
            "{path}: not structured:\n{ir}"
        );
        let json = aisc(tmp.path(), &["build", &path, "--emit", "graph-json", "-O0"]);
        assert!(
            json.status.success(),
            "{path}: {}",
            String::from_utf8_lossy(&json.stderr)
        );
        let written = tmp.path().join("written.json");
        std::fs::write(&written, &json.stdout).expect("write");
        let back = aisc(
            tmp.path(),
            &["build", &written.to_string_lossy(), "--emit", "ir", "-O0"],
        );
        assert!(
            back.status.success(),
            "{path}: {}",
            String::from_utf8_lossy(&back.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&back.stdout), ir, "{path}");
    }
}

/// A random structured program written flat, the reference's way: nested
/// `BRANCH_ON_VALUE`s and flat `SWITCH`es whose labels name each arm's
/// first node, each joined by a `MERGE` of its arms' last values, and
/// `LOOP_START`/`LOOP_END` loops over lists. The
/// structurizer must give it back its structure: running it prints what
/// the tree evaluates to (a join of arms is the taken arm's value, in a
/// one-element array).
struct Flat {
    nodes: Vec<serde_json::Value>,
    edges: Vec<serde_json::Value>,
    seed: u64,
}

impl Flat {
    fn next(&mut self, n: u64) -> u64 {
        // xorshift64: deterministic, no dependency.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        self.seed % n
    }

    fn node(&mut self, op: &str, attributes: serde_json::Value) -> u64 {
        let id = self.nodes.len() as u64 + 1;
        self.nodes.push(serde_json::json!({
            "id": id, "name": format!("n{id}"), "op": op, "attributes": attributes
        }));
        id
    }

    fn edge(&mut self, from: u64, to: u64, dependency: &str) {
        self.edges
            .push(serde_json::json!({"from": from, "to": to, "dependency": dependency}));
    }

    /// A block: (its first node, its last node, what its last node is).
    fn block(&mut self, depth: u32) -> (u64, u64, serde_json::Value) {
        let kind = if depth == 0 { 0 } else { self.next(4) };
        match kind {
            0 => {
                let id = self.nodes.len() as u64 + 1;
                let v = format!("v{id}");
                self.node("CONST_STR", serde_json::json!({ "value": v }));
                (id, id, serde_json::Value::String(v))
            }
            1 => {
                let cond = ["a", "b"][self.next(2) as usize];
                let c = self.node("CONST_STR", serde_json::json!({ "value": cond }));
                let b = self.node("BRANCH_ON_VALUE", serde_json::json!({ "value": "a" }));
                self.edge(c, b, "Data");
                let (t0, t1, tv) = self.block(depth - 1);
                let (e0, e1, ev) = self.block(depth - 1);
                let attrs = self.nodes[b as usize - 1]["attributes"]
                    .as_object_mut()
                    .expect("attributes");
                attrs.insert("label_true".into(), t0.to_string().into());
                attrs.insert("label_false".into(), e0.to_string().into());
                self.edge(b, t0, "Control");
                self.edge(b, e0, "Control");
                let j = self.node("MERGE", serde_json::json!({ "strategy": "array" }));
                self.edge(t1, j, "Data");
                self.edge(e1, j, "Data");
                (c, j, serde_json::json!([if cond == "a" { tv } else { ev }]))
            }
            2 => {
                // A loop the reference's code generator's way: over a list,
                // the body after `LOOP_START`, `LOOP_END` taking the body's
                // last value (the last iteration's, or null for none).
                let count = self.next(4);
                let items: Vec<String> = (0..count).map(|i| format!("i{i}")).collect();
                let c = self.node(
                    "CONST_STR",
                    serde_json::json!({ "value": serde_json::to_string(&items).expect("json") }),
                );
                let s = self.node(
                    "LOOP_START",
                    serde_json::json!({ "count_token": format!("{{{{node_{c}}}}}") }),
                );
                self.edge(c, s, "Data");
                let (b0, b1, bv) = self.block(depth - 1);
                self.edge(s, b0, "Control");
                let e = self.node("LOOP_END", serde_json::json!({}));
                self.edge(b1, e, "Data");
                (
                    c,
                    e,
                    if count == 0 {
                        serde_json::Value::Null
                    } else {
                        bv
                    },
                )
            }
            _ => {
                let arms = 1 + self.next(3) as usize;
                let pick = self.next(arms as u64 + 1) as usize;
                let key = format!("k{pick}");
                let d = self.node("CONST_STR", serde_json::json!({ "value": key }));
                let s = self.node("SWITCH", serde_json::json!({}));
                self.edge(d, s, "Data");
                let mut cases = Vec::new();
                let mut lasts = Vec::new();
                let mut taken = serde_json::Value::Null;
                for k in 0..=arms {
                    let (f, l, v) = self.block(depth - 1);
                    self.edge(s, f, "Control");
                    lasts.push(l);
                    if k == pick {
                        taken = v;
                    }
                    if k < arms {
                        cases.push(serde_json::json!({"label": format!("k{k}"), "node_id": f}));
                    } else {
                        let attrs = self.nodes[s as usize - 1]["attributes"]
                            .as_object_mut()
                            .expect("attributes");
                        attrs.insert("default".into(), f.to_string().into());
                    }
                }
                // `pick == arms` is a key no case has: the default runs.
                let attrs = self.nodes[s as usize - 1]["attributes"]
                    .as_object_mut()
                    .expect("attributes");
                attrs.insert("discriminant".into(), format!("{{{{node_{d}}}}}").into());
                attrs.insert("cases".into(), cases.into());
                let j = self.node("MERGE", serde_json::json!({ "strategy": "array" }));
                for l in lasts {
                    self.edge(l, j, "Data");
                }
                (d, j, serde_json::json!([taken]))
            }
        }
    }
}

#[test]
fn random_flat_programs_run_as_their_structure_says() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut structured = 0;
    for case in 0..40u64 {
        let mut g = Flat {
            nodes: Vec::new(),
            edges: Vec::new(),
            seed: 0x9E37_79B9_7F4A_7C15 ^ (case + 1).wrapping_mul(0x2545_F491_4F6C_DD1D),
        };
        let depth = 1 + (case % 4) as u32;
        let (_, last, want) = g.block(depth);
        let r = g.node(
            "RETURN",
            serde_json::json!({ "token": format!("{{{{node_{last}}}}}") }),
        );
        g.edge(last, r, "Data");
        let doc = serde_json::json!({
            "name": format!("random_{case}"), "nodes": g.nodes, "edges": g.edges, "parameters": []
        });
        let path = tmp.path().join(format!("random_{case}.json"));
        std::fs::write(&path, serde_json::to_string_pretty(&doc).expect("json")).expect("write");
        let p = path.to_string_lossy().into_owned();
        let out = aisc(
            tmp.path(),
            &[
                "run",
                &p,
                "--backend",
                "sim",
                "--sim-delay-scale",
                "0",
                "--memory",
                ":memory:",
            ],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "case {case}: {stderr}\n{doc}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        // A text result is printed as it is, a list as JSON, null as nothing.
        let got: serde_json::Value = match stdout.trim() {
            "" => serde_json::Value::Null,
            t => serde_json::from_str(t).unwrap_or_else(|_| serde_json::Value::String(t.into())),
        };
        assert_eq!(got, want, "case {case}: {doc}");
        structured += want.is_array() as usize;
    }
    assert!(structured >= 10, "only {structured} structured cases");
}
