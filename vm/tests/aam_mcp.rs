//! MCP tools over stdio: against a small test server (fixtures/
//! mcp_test_server.js), a scripted one that records what the client sends
//! (fixtures/mcp_scripted_server.js), and against the real
//! `@modelcontextprotocol/server-filesystem` that `.ci/run` installs with
//! npm into `$AIS_NPM_DIR` (default `target/npm` in the workspace).
//!
//! The servers are node programs, so every test that starts one is
//! `#[ignore = "needs node: run ./test"]` (and fails, naming the fix, when
//! run without node); the start-up failures need none and always run.
#![allow(clippy::unwrap_used)]

mod aam_support;
use aam_support::{open_host, toml_str};

use ais_vm::aam::{AamHost, Confirm};
use ais_vm::llm::CancelToken;
use ais_vm::{Host, HostError};
use serde_json::{json, Value as Json};
use std::path::{Path, PathBuf};

/// Agent `A` calls `tool`.
fn inv(h: &AamHost, tool: &str, args: Json) -> Result<Json, HostError> {
    aam_support::inv(h, "A", tool, args)
}

/// Fails the test, naming the fix, when `node` does not run.
fn need_node() {
    let ok = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "needs node: `node --version` does not run. Run ./test, which installs it (scripts/provision/apt.sh)"
    );
}

fn test_server() -> PathBuf {
    need_node();
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_test_server.js")
}

fn test_config(extra: &str) -> String {
    format!(
        "[[mcp_servers]]\nname = \"t\"\ncommand = [\"node\", \"{}\"]\ntimeout_s = 4.0\n{extra}[access]\nallow = {{ A = [\"t.*\"] }}\n",
        toml_str(&test_server())
    )
}

#[test]
#[ignore = "needs node: run ./test"]
fn test_server_tools_are_imported_and_callable() {
    let h = open_host(&test_config(""), Confirm::Deny).unwrap();
    // Both pages of tools/list, with their schemas, in the registry.
    let names: Vec<String> = h
        .tool_list()
        .iter()
        .filter_map(|t| t["name"].as_str().map(String::from))
        .filter(|n| n.starts_with("t."))
        .collect();
    assert_eq!(
        names,
        ["t.add", "t.echo", "t.fail", "t.noisy", "t.order", "t.slow", "t.wipe"]
    );
    // The properties' order as the server wrote them, which the parsed
    // schema (sorted keys) has lost.
    let order = h
        .tool_list()
        .into_iter()
        .find(|t| t["name"] == "t.order")
        .unwrap();
    assert_eq!(order["param_order"], json!(["z_first", "a_second"]));
    assert_eq!(
        inv(&h, "t.echo", json!({"text": "hi"})).unwrap(),
        json!("hi")
    );
    assert_eq!(
        inv(&h, "t.add", json!("{\"a\": 2, \"b\": 3}")).unwrap(),
        json!({"sum": 5})
    );
    // The imported input schema is checked before the call.
    let e = inv(&h, "t.add", json!({"a": 2})).unwrap_err();
    assert_eq!(e.code, "tool.invalid_args");
    assert_eq!(e.payload["path"], "$");
    // isError replies, timeouts, junk lines on stdout.
    let e = inv(&h, "t.fail", json!({})).unwrap_err();
    assert_eq!(e.code, "mcp.tool_error");
    assert!(e.message.contains("it broke"), "{}", e.message);
    assert_eq!(
        inv(&h, "t.slow", json!({})).unwrap_err().code,
        "mcp.timeout"
    );
    assert_eq!(inv(&h, "t.noisy", json!({})).unwrap(), json!("ok"));
    // The server keeps working after all of that.
    assert_eq!(
        inv(&h, "t.echo", json!({"text": "again"})).unwrap(),
        json!("again")
    );
    // Annotated destructive: needs confirmation.
    assert_eq!(
        inv(&h, "t.wipe", json!({})).unwrap_err().code,
        "tool.confirmation_required"
    );
    // Not allowed for other agents.
    assert_eq!(
        h.invoke_tool("B", "t.echo", &json!({"text": "x"}), &CancelToken::new())
            .unwrap_err()
            .code,
        "tool.denied"
    );
}

#[test]
fn mcp_start_up_failures_are_errors() {
    let cfg = |server: &str| {
        format!("[[mcp_servers]]\nname = \"x\"\n{server}\ntimeout_s = 3.0\n[access]\nallow = {{ A = [\"x.*\"] }}\n")
    };
    // The host opens (servers start lazily); the first call reports it.
    let h = open_host(&cfg("command = [\"/nonexistent/server\"]"), Confirm::Deny).unwrap();
    let e = inv(&h, "x.tool", json!({})).unwrap_err();
    assert_eq!(e.code, "mcp.spawn");
    assert_eq!(e.payload["server"], "x");
    // A server that exits at once: how it exited and what it said.
    let h = open_host(
        &cfg("command = [\"sh\", \"-c\", \"echo 'Error: Cannot find module server.js' >&2; exit 3\"]"),
        Confirm::Deny,
    )
    .unwrap();
    let e = inv(&h, "x.tool", json!({})).unwrap_err();
    assert_eq!(e.code, "mcp.closed");
    assert!(e.message.contains("MCP server `x`"), "{}", e.message);
    assert!(
        e.message.contains("Cannot find module server.js"),
        "{}",
        e.message
    );
    assert_eq!(e.payload["exit_code"], 3);
    assert_eq!(
        e.payload["stderr"],
        json!(["Error: Cannot find module server.js"])
    );
    // A server that never answers.
    let h = open_host(&cfg("command = [\"sleep\", \"30\"]"), Confirm::Deny).unwrap();
    assert_eq!(
        inv(&h, "x.tool", json!({})).unwrap_err().code,
        "mcp.timeout"
    );
}

// ---- the scripted server: what the client sends, version negotiation

fn scripted_server() -> PathBuf {
    need_node();
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_scripted_server.js")
}

/// An `[[mcp_servers]]` entry `s` running the scripted server with `env`,
/// recording what it receives in `record`.
/// A host whose one MCP server is the scripted test server (denying
/// confirmations), with `env` appended to its environment.
fn scripted_host(env: &str, timeout_s: f64, record: &Path) -> AamHost {
    open_host(&scripted_config(env, timeout_s, record), Confirm::Deny).unwrap()
}

fn scripted_config(env: &str, timeout_s: f64, record: &Path) -> String {
    format!(
        "[[mcp_servers]]\nname = \"s\"\ncommand = [\"node\", \"{}\"]\ntimeout_s = {timeout_s}\n\
         env = {{ MCP_RECORD = \"{}\"{env} }}\n[access]\nallow = {{ A = [\"s.*\"] }}\n",
        toml_str(&scripted_server()),
        toml_str(record)
    )
}

/// The messages the scripted server received, in order.
fn received(record: &Path) -> Vec<Json> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The methods of `msgs`; `start` where the server (re)started.
fn methods(msgs: &[Json]) -> Vec<String> {
    msgs.iter()
        .map(|m| match m["method"].as_str() {
            Some(method) => method.to_string(),
            None if m["start"] == true => "start".to_string(),
            None => "(reply)".to_string(),
        })
        .collect()
}

fn status_of(h: &AamHost, server: &str) -> Json {
    h.mcp_status()
        .into_iter()
        .find(|s| s["name"] == server)
        .unwrap()
}

#[test]
#[ignore = "needs node: run ./test"]
fn mcp_timeout_sends_cancelled() {
    // The timeout is generous: `slow` answers only once cancelled, and a
    // loaded machine must not time out the echo call after it.
    let d = tempfile::tempdir().unwrap();
    let record = d.path().join("received.jsonl");
    let h = scripted_host("", 3.0, &record);
    let e = inv(&h, "s.slow", json!({})).unwrap_err();
    assert_eq!(e.code, "mcp.timeout");
    // The server answers `slow` late, once cancelled; the next call gets
    // its own reply, not that one.
    assert_eq!(
        inv(&h, "s.echo", json!({"text": "next"})).unwrap(),
        json!("next")
    );
    let msgs = received(&record);
    let call = msgs
        .iter()
        .find(|m| m["method"] == "tools/call" && m["params"]["name"] == "slow")
        .unwrap();
    let cancelled: Vec<&Json> = msgs
        .iter()
        .filter(|m| m["method"] == "notifications/cancelled")
        .collect();
    assert_eq!(cancelled.len(), 1, "{msgs:?}");
    assert_eq!(cancelled[0]["params"]["requestId"], call["id"]);
    assert_eq!(e.payload["request_id"], call["id"]);
    let reason = cancelled[0]["params"]["reason"].as_str().unwrap();
    assert!(reason.contains("timed out"), "{reason}");
    // The notice went out before the next request.
    let pos = |method: &str, name: &str| {
        msgs.iter()
            .position(|m| m["method"] == method && (name.is_empty() || m["params"]["name"] == name))
            .unwrap()
    };
    assert!(pos("notifications/cancelled", "") < pos("tools/call", "echo"));
}

#[test]
#[ignore = "needs node: run ./test"]
fn mcp_run_cancellation_sends_cancelled() {
    let d = tempfile::tempdir().unwrap();
    let record = d.path().join("received.jsonl");
    let h = scripted_host("", 60.0, &record);
    let cancel = CancelToken::new();
    let e = std::thread::scope(|s| {
        let call = s.spawn(|| h.invoke_tool("A", "s.slow", &json!({}), &cancel));
        // Cancel the run once the server has the call.
        while !received(&record)
            .iter()
            .any(|m| m["params"]["name"] == "slow")
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        cancel.cancel();
        call.join().unwrap().unwrap_err()
    });
    assert_eq!(e.code, "cancelled");
    assert_eq!(
        inv(&h, "s.echo", json!({"text": "still here"})).unwrap(),
        json!("still here")
    );
    let msgs = received(&record);
    let call = msgs.iter().find(|m| m["params"]["name"] == "slow").unwrap();
    let n = msgs
        .iter()
        .find(|m| m["method"] == "notifications/cancelled")
        .unwrap();
    assert_eq!(n["params"]["requestId"], call["id"]);
    assert_eq!(n["params"]["reason"], "the run was cancelled");
}

#[test]
#[ignore = "needs node: run ./test"]
fn mcp_negotiates_protocol_version() {
    let d = tempfile::tempdir().unwrap();
    // A legacy server: probe, then `initialize` with the newest handshake
    // version; it answers an older one we speak.
    let record = d.path().join("legacy.jsonl");
    let h = scripted_host(", MCP_ANSWER_VERSION = \"2024-11-05\"", 5.0, &record);
    assert_eq!(inv(&h, "s.echo", json!({"text": "a"})).unwrap(), json!("a"));
    assert_eq!(status_of(&h, "s")["protocol_version"], "2024-11-05");
    let msgs = received(&record);
    assert_eq!(
        methods(&msgs),
        [
            "start",
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call"
        ]
    );
    assert_eq!(
        msgs[1]["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(msgs[2]["params"]["protocolVersion"], "2025-11-25");

    // A legacy server that ignores the probe: restarted, then `initialize`.
    let record = d.path().join("ignores-probe.jsonl");
    let h = scripted_host(", MCP_IGNORE = \"server/discover\"", 2.0, &record);
    assert_eq!(inv(&h, "s.echo", json!({"text": "r"})).unwrap(), json!("r"));
    assert_eq!(status_of(&h, "s")["protocol_version"], "2025-11-25");
    // (Whether the first process read the probe's cancellation before it
    // was stopped is a race; the rest is in order.)
    let seen: Vec<String> = methods(&received(&record))
        .into_iter()
        .filter(|m| m != "notifications/cancelled")
        .collect();
    assert_eq!(
        seen,
        [
            "start",
            "server/discover",
            "start",
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call"
        ]
    );

    // A modern server: no handshake; every request carries the version.
    let record = d.path().join("modern.jsonl");
    let h = scripted_host(", MCP_ERA = \"modern\"", 5.0, &record);
    assert_eq!(inv(&h, "s.echo", json!({"text": "b"})).unwrap(), json!("b"));
    assert_eq!(status_of(&h, "s")["protocol_version"], "2026-07-28");
    let msgs = received(&record);
    assert_eq!(
        methods(&msgs),
        ["start", "server/discover", "tools/list", "tools/call"]
    );
    // Multi round-trip requests are not supported: a clear error.
    let e = inv(&h, "s.ask", json!({})).unwrap_err();
    assert_eq!(e.code, "mcp.input_required");
    assert!(e.message.contains("MCP server `s`"), "{}", e.message);
    for m in msgs.iter().skip(1) {
        assert_eq!(
            m["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
            "{m}"
        );
    }

    // Versions this client does not speak: a clear error naming both.
    let record = d.path().join("unknown.jsonl");
    let h = scripted_host(", MCP_ANSWER_VERSION = \"2099-01-01\"", 5.0, &record);
    let e = inv(&h, "s.echo", json!({"text": "c"})).unwrap_err();
    assert_eq!(e.code, "mcp.protocol_version");
    assert!(e.message.contains("`s`"), "{}", e.message);
    assert!(
        e.message.contains("2099-01-01") && e.message.contains("2025-11-25"),
        "{}",
        e.message
    );
    assert!(
        e.message.contains(
            "speaks protocol version `2099-01-01`, but this client asked for `2025-11-25`"
        ),
        "{}",
        e.message
    );
    assert_eq!(e.payload["server_versions"], json!(["2099-01-01"]));
    assert_eq!(status_of(&h, "s")["state"], "failed");
    let record = d.path().join("future.jsonl");
    let h = scripted_host(
        ", MCP_ERA = \"modern\", MCP_SUPPORTED = \"2099-01-01\"",
        5.0,
        &record,
    );
    let e = inv(&h, "s.echo", json!({"text": "d"})).unwrap_err();
    assert_eq!(e.code, "mcp.protocol_version");
    assert!(
        e.message.contains("2099-01-01") && e.message.contains("2026-07-28"),
        "{}",
        e.message
    );
    // It never got an `initialize`: a modern server has none.
    assert_eq!(methods(&received(&record)), ["start", "server/discover"]);
}

#[test]
#[ignore = "needs node: run ./test"]
fn unused_broken_mcp_server_does_not_block() {
    let d = tempfile::tempdir().unwrap();
    let record = d.path().join("received.jsonl");
    let cfg = format!(
        "[[mcp_servers]]\nname = \"broken\"\ncommand = [\"/nonexistent/server\"]\n{}",
        scripted_config("", 5.0, &record)
    );
    let h = open_host(&cfg, Confirm::Deny).unwrap();
    // Built-in tools and the working server's tools work; the broken one
    // is never started.
    assert_eq!(
        inv(&h, "calculator", json!({"expression": "1+2"})).unwrap(),
        json!(3)
    );
    assert_eq!(
        inv(&h, "s.echo", json!({"text": "ok"})).unwrap(),
        json!("ok")
    );
    assert_eq!(status_of(&h, "broken")["state"], "not started");
    assert_eq!(status_of(&h, "s")["state"], "running");
}

#[test]
fn used_broken_mcp_server_fails_the_call() {
    let h = open_host(
        "[[mcp_servers]]\nname = \"broken\"\ncommand = [\"/nonexistent/server\"]\n[access]\nallow = { A = [\"broken.*\"] }\n",
        Confirm::Deny,
    )
    .unwrap();
    let e = inv(&h, "broken.read", json!({})).unwrap_err();
    assert_eq!(e.code, "mcp.spawn");
    assert_eq!(e.payload["server"], "broken");
    assert!(e.message.contains("/nonexistent/server"), "{}", e.message);
    // Remembered: the next call gets the same error without a new attempt.
    assert_eq!(inv(&h, "broken.read", json!({})).unwrap_err(), e);
    assert_eq!(status_of(&h, "broken")["state"], "failed");
    // An agent the policy refuses never starts a server.
    let h = open_host(
        "[[mcp_servers]]\nname = \"broken\"\ncommand = [\"/nonexistent/server\"]\n",
        Confirm::Deny,
    )
    .unwrap();
    assert_eq!(
        inv(&h, "broken.read", json!({})).unwrap_err().code,
        "tool.denied"
    );
    assert_eq!(status_of(&h, "broken")["state"], "not started");
}

#[test]
#[ignore = "needs node: run ./test"]
fn non_json_stdout_is_reported() {
    let d = tempfile::tempdir().unwrap();
    let record = d.path().join("received.jsonl");
    // A banner on stdout, then silence.
    let h = scripted_host(
        ", MCP_ERA = \"mute\", MCP_BANNER = \"Weather server v2 listening\"",
        0.5,
        &record,
    );
    let e = inv(&h, "s.echo", json!({"text": "x"})).unwrap_err();
    assert_eq!(e.code, "mcp.not_json");
    assert!(e.message.contains("MCP server `s`"), "{}", e.message);
    assert!(
        e.message.contains("`Weather server v2 listening`"),
        "{}",
        e.message
    );
    assert_eq!(e.payload["line"], "Weather server v2 listening");
    // A long line is quoted truncated.
    let long = "x".repeat(1000);
    let h = scripted_host(
        &format!(", MCP_ERA = \"mute\", MCP_BANNER = \"{long}\""),
        0.5,
        &record,
    );
    let e = inv(&h, "s.echo", json!({"text": "x"})).unwrap_err();
    assert_eq!(e.code, "mcp.not_json");
    let quoted = e.payload["line"].as_str().unwrap();
    assert!(quoted.ends_with('…') && quoted.len() < 300, "{quoted}");
    // A banner, a clean answer to the probe, then no answer to `initialize`:
    // still the banner's fault.
    let h = scripted_host(
        ", MCP_IGNORE = \"initialize\", MCP_BANNER = \"debug: ready\"",
        0.5,
        &record,
    );
    let e = inv(&h, "s.echo", json!({"text": "x"})).unwrap_err();
    assert_eq!(e.code, "mcp.not_json");
    assert_eq!(e.payload["method"], "initialize");
    assert_eq!(e.payload["line"], "debug: ready");
    // A banner before well-formed replies is tolerated.
    let h = scripted_host(", MCP_BANNER = \"hello\"", 5.0, &record);
    assert_eq!(
        inv(&h, "s.echo", json!({"text": "fine"})).unwrap(),
        json!("fine")
    );
}

/// The npm-installed filesystem server; panics with instructions if absent.
fn filesystem_server() -> PathBuf {
    need_node();
    let dir = std::env::var_os("AIS_NPM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/npm"));
    let entry = dir.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(
        entry.is_file(),
        "needs the npm MCP filesystem server, which is not installed at `{}`.\n\
         Run ./test, which installs it (scripts/provision/npm.sh), \
         or point AIS_NPM_DIR at the npm prefix where it is installed.",
        entry.display()
    );
    entry
}

#[test]
#[ignore = "needs node: run ./test"]
fn the_real_filesystem_server_works_through_the_capability_registry() {
    let server = filesystem_server();
    let d = tempfile::tempdir().unwrap();
    let root = d.path().canonicalize().unwrap();
    std::fs::write(root.join("hello.txt"), "hello from disk\n").unwrap();
    let cfg = format!(
        "[[mcp_servers]]\nname = \"fs\"\ncommand = [\"node\", \"{}\", \"{}\"]\ntimeout_s = 30\n[access]\nallow = {{ A = [\"fs.*\"] }}\n",
        toml_str(&server),
        toml_str(&root)
    );
    let h = open_host(&cfg, Confirm::Deny).unwrap();
    let tools: Vec<Json> = h
        .tool_list()
        .into_iter()
        .filter(|t| t["name"].as_str().unwrap_or("").starts_with("fs."))
        .collect();
    let read = tools
        .iter()
        .find(|t| t["name"] == "fs.read_text_file")
        .expect("fs.read_text_file imported");
    assert!(
        read["input_schema"]["properties"]["path"].is_object(),
        "{read}"
    );
    assert_eq!(read["destructive"], false);
    let path = root.join("hello.txt").display().to_string();
    let r = inv(&h, "fs.read_text_file", json!({"path": path})).unwrap();
    let text = match &r {
        Json::String(s) => s.clone(),
        other => other["content"].as_str().unwrap_or("").to_string(),
    };
    assert!(text.contains("hello from disk"), "{r}");
    // server-filesystem 2026.8.31 is a handshake-era server: the probe
    // falls back to `initialize`, and it answers the version we offered.
    assert_eq!(status_of(&h, "fs")["protocol_version"], "2025-11-25");
    // Schema validation before the call: `path` is required.
    assert_eq!(
        inv(&h, "fs.read_text_file", json!({})).unwrap_err().code,
        "tool.invalid_args"
    );
    // Outside the allowed directory: the server's own error, structured.
    let e = inv(&h, "fs.read_text_file", json!({"path": "/etc/hostname"})).unwrap_err();
    assert!(e.code.starts_with("mcp."), "{e:?}");
    // write_file is destructive per the server's annotations.
    let w = tools.iter().find(|t| t["name"] == "fs.write_file").unwrap();
    assert_eq!(w["destructive"], true);
    let args = json!({"path": root.join("new.txt").display().to_string(), "content": "x"});
    assert_eq!(
        inv(&h, "fs.write_file", args.clone()).unwrap_err().code,
        "tool.confirmation_required"
    );
    let h = open_host(&cfg, Confirm::Yes).unwrap();
    inv(&h, "fs.write_file", args).unwrap();
    assert_eq!(std::fs::read_to_string(root.join("new.txt")).unwrap(), "x");
}

/// What `aisc` lowers a write then a read through the `fs` MCP server to:
/// the read takes the write's `ord` token (`%2`), so it runs after it.
const WRITE_THEN_READ: &str = r#"
agent @A {
  flow @main(%path: str, %content: str) -> json entry {
    %0 = template %path, %content {template = "{{\"path\": \"{0}\", \"content\": \"{1}\"}}"} : str
    %1, %2 = inv %0 {tool = "fs.write_file"} : json, ord
    %3 = template %path {template = "{{\"path\": \"{0}\"}}"} : str
    %4, %5 = inv %3, %2 {tool = "fs.read_text_file"} : json, ord
    return %4
  }
}
"#;

/// Two calls to the same MCP server (write, then read the same file) run
/// in program order: the read always sees the write, 20 runs × 1/2/8
/// workers, each run writing new content.
#[test]
#[ignore = "needs node: run ./test"]
fn tool_side_effects_are_ordered_per_provider() {
    let server = filesystem_server();
    let d = tempfile::tempdir().unwrap();
    let root = d.path().canonicalize().unwrap();
    let cfg = format!(
        "[[mcp_servers]]\nname = \"fs\"\ncommand = [\"node\", \"{}\", \"{}\"]\ntimeout_s = 30\n[access]\nallow = {{ A = [\"fs.*\"] }}\n",
        toml_str(&server),
        toml_str(&root)
    );
    let h: std::sync::Arc<AamHost> = std::sync::Arc::new(open_host(&cfg, Confirm::Yes).unwrap());
    let m = ais_ir::parse_module(WRITE_THEN_READ).unwrap();
    assert!(ais_ir::verify_errors(&m).is_empty());
    let p = ais_ir::bytecode::compile(&m).unwrap();
    let path = root.join("graph.txt").display().to_string();
    let mut n = 0;
    for workers in [1, 2, 8] {
        for run in 0..20 {
            let content = format!("entity {workers}-{run}");
            let o = ais_vm::RunOptions {
                workers: Some(workers),
                args: vec![
                    ("path".into(), json!(path)),
                    ("content".into(), json!(content)),
                ],
                ..ais_vm::RunOptions::default()
            };
            let r = ais_vm::run(
                &p,
                &o,
                std::sync::Arc::new(ais_testkit::fake::FakeBackend::new()),
                h.clone(),
            );
            let v = r.outcome.unwrap();
            let text = match &v {
                Json::String(s) => s.clone(),
                other => other["content"].as_str().unwrap_or("").to_string(),
            };
            assert_eq!(
                text.trim_end(),
                content,
                "{workers} workers, run {run}: {v}"
            );
            n += 1;
        }
    }
    assert_eq!(n, 60);
}
