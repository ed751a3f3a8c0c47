//! MCP tools over stdio: against a small test server (fixtures/
//! mcp_test_server.js) and against the real
//! `@modelcontextprotocol/server-filesystem` that `.ci/run` installs with
//! npm into `$AIS_NPM_DIR` (default `target/npm` in the workspace).
#![allow(clippy::unwrap_used)]

use ais_vm::aam::config::AamConfig;
use ais_vm::aam::{AamHost, AamOptions, Confirm, Storage};
use ais_vm::llm::CancelToken;
use ais_vm::{Host, HostError};
use serde_json::{json, Value as Json};
use std::path::{Path, PathBuf};

fn toml_str(p: &Path) -> String {
    p.display().to_string().replace('\\', "\\\\")
}

fn host(config: &str, confirm: Confirm) -> Result<AamHost, HostError> {
    AamHost::open(AamOptions {
        storage: Storage::Ephemeral,
        config: AamConfig::parse(config, None).unwrap(),
        confirm,
        echo: false,
    })
}

fn inv(h: &AamHost, tool: &str, args: Json) -> Result<Json, HostError> {
    h.invoke_tool("A", tool, &args, &CancelToken::new())
}

fn test_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_test_server.js")
}

fn test_config(extra: &str) -> String {
    format!(
        "[[mcp_servers]]\nname = \"t\"\ncommand = [\"node\", \"{}\"]\ntimeout_s = 1.0\n{extra}[access]\nallow = {{ A = [\"t.*\"] }}\n",
        toml_str(&test_server())
    )
}

#[test]
fn test_server_tools_are_imported_and_callable() {
    let h = host(&test_config(""), Confirm::Deny).unwrap();
    // Both pages of tools/list, with their schemas, in the registry.
    let names: Vec<String> = h
        .tool_list()
        .iter()
        .filter_map(|t| t["name"].as_str().map(String::from))
        .filter(|n| n.starts_with("t."))
        .collect();
    assert_eq!(
        names,
        ["t.add", "t.echo", "t.fail", "t.noisy", "t.slow", "t.wipe"]
    );
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
    let e = host(
        "[[mcp_servers]]\nname = \"x\"\ncommand = [\"/nonexistent/server\"]\n",
        Confirm::Deny,
    )
    .err()
    .unwrap();
    assert_eq!(e.code, "mcp.spawn");
    // A server that exits at once.
    let e = host(
        "[[mcp_servers]]\nname = \"x\"\ncommand = [\"sh\", \"-c\", \"exit 0\"]\n",
        Confirm::Deny,
    )
    .err()
    .unwrap();
    assert_eq!(e.code, "mcp.closed");
    // A server that talks nonsense and never answers.
    let e = host(
        "[[mcp_servers]]\nname = \"x\"\ncommand = [\"sh\", \"-c\", \"echo hello; exec sleep 30\"]\ntimeout_s = 0.5\n",
        Confirm::Deny,
    )
    .err()
    .unwrap();
    assert_eq!(e.code, "mcp.timeout");
}

/// The npm-installed filesystem server; panics with instructions if absent.
fn filesystem_server() -> PathBuf {
    let dir = std::env::var_os("AIS_NPM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/npm"));
    let entry = dir.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(
        entry.is_file(),
        "the MCP filesystem server is not installed at `{}`.\n\
         Install it (as .ci/run does) with:\n  \
         npm install --prefix {} @modelcontextprotocol/server-filesystem@2026.8.31\n\
         or point AIS_NPM_DIR at the npm prefix where it is installed.",
        entry.display(),
        dir.display()
    );
    entry
}

#[test]
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
    let h = host(&cfg, Confirm::Deny).unwrap();
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
    let h = host(&cfg, Confirm::Yes).unwrap();
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
fn tool_side_effects_are_ordered_per_provider() {
    let server = filesystem_server();
    let d = tempfile::tempdir().unwrap();
    let root = d.path().canonicalize().unwrap();
    let cfg = format!(
        "[[mcp_servers]]\nname = \"fs\"\ncommand = [\"node\", \"{}\", \"{}\"]\ntimeout_s = 30\n[access]\nallow = {{ A = [\"fs.*\"] }}\n",
        toml_str(&server),
        toml_str(&root)
    );
    let h: std::sync::Arc<AamHost> = std::sync::Arc::new(host(&cfg, Confirm::Yes).unwrap());
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
                std::sync::Arc::new(ais_vm::llm::fake::FakeBackend::new()),
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
