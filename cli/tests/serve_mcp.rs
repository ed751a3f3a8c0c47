//! The MCP server (`aisc mcp` over stdio, `POST /mcp` under `aisc serve`)
//! driven by the official MCP Python SDK (`mcp` on PyPI) from the virtual
//! environment `./test` provisions (`scripts/provision/python.sh`); the SDK
//! test is `#[ignore = "needs the MCP Python SDK: run ./test"]`.

mod serve_support;

use serde_json::Value as Json;
use serve_support::{write, Server};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The SDK version the test runs (pinned: the client decides the protocol
/// revision and the checks it makes).
const MCP_SDK: &str = "mcp==2.3.0";

const ECHO: &str = "agent Echo {\n    @entry flow main(topic: str) -> str {\n        return ask(\"Say \" + topic)\n    }\n}\n";

/// The provisioned venv's python, with the pinned SDK.
fn venv_python() -> PathBuf {
    serve_support::sdk_venv("MCP", &[MCP_SDK], "import mcp")
}

fn client(python: &Path, dir: &Path, args: &[&str]) -> Json {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py");
    let o = Command::new(python)
        .arg(script)
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("the MCP client runs");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "client failed: {out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("client output is not JSON ({e}): {out}"))
}

fn check(r: &Json) {
    let echo = &r["tools"]["Echo"];
    assert_eq!(
        echo["input"]["required"],
        serde_json::json!(["topic"]),
        "{r}"
    );
    assert_eq!(
        echo["input"]["properties"]["topic"]["type"], "string",
        "{r}"
    );
    assert_eq!(
        echo["output"]["properties"]["result"]["type"], "string",
        "{r}"
    );
    assert!(
        r["tools"]["check"].is_object() && r["tools"]["build"].is_object(),
        "{r}"
    );

    assert_eq!(r["echo"]["is_error"], false, "{r}");
    assert!(
        r["echo"]["structured"]["result"]
            .as_str()
            .is_some_and(|t| t.contains("Say bees")),
        "{r}"
    );

    let c = &r["check_bad"];
    assert_eq!(c["is_error"], true, "{r}");
    assert_eq!(c["structured"]["errors"], 1, "{r}");
    assert_eq!(
        c["structured"]["diagnostics"][0]["code"]["code"], "E0100",
        "{r}"
    );
    assert_eq!(
        c["structured"]["diagnostics"][0]["spans"][0]["line_start"], 2,
        "{r}"
    );

    let b = &r["build_ok"];
    assert_eq!(b["is_error"], false, "{r}");
    assert_eq!(b["structured"]["flows"][0]["name"], "A.f", "{r}");
    assert!(
        b["structured"]["artifact_bytes"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{r}"
    );

    assert_eq!(r["bad_args"]["is_error"], true, "{r}");
    assert!(
        r["bad_args"]["text"][0]
            .as_str()
            .is_some_and(|t| t.contains("run.bad_args")),
        "{r}"
    );
}

#[test]
#[ignore = "needs the MCP Python SDK: run ./test"]
fn the_official_mcp_client_lists_and_calls_tools_over_stdio_and_streamable_http() {
    let python = venv_python();
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "echo.ais", ECHO);
    let aisc = env!("CARGO_BIN_EXE_aisc");

    // stdio: the SDK starts `aisc mcp` itself and stops it at the end.
    let r = client(
        &python,
        dir.path(),
        &["stdio", aisc, "mcp", &p, "--sim-delay-scale", "0"],
    );
    check(&r);

    // Streamable HTTP at /mcp of a running `aisc serve`.
    let s = Server::start(dir.path(), &[&p], &["--sim-delay-scale", "0"], &[]);
    let url = format!("http://{}/mcp", s.addr);
    let r = client(&python, dir.path(), &["http", &url]);
    check(&r);
    // The tool calls were runs like any other, journaled in the same
    // directory: the stdio server's and this server's are listed.
    let runs = s.get("/v1/runs?status=succeeded").json();
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(2), "{runs}");
    // A page of another site is refused (DNS rebinding).
    let r = serve_support::request(
        s.addr,
        "POST",
        "/mcp",
        &[("Origin", "http://evil.example")],
        Some(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
    );
    assert_eq!(r.status, 403);
}
