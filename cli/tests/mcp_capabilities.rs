//! MCP tools at the language edge: quoted capability names (tool names that
//! are not identifiers) and `aisc run` with `[[mcp_servers]]` that are
//! started lazily, so a broken server only matters to a program that uses it.
#![allow(clippy::unwrap_used)]

use ais_compiler::driver::check_source;
use std::path::Path;
use std::process::{Command, Output};

fn codes(source: &str) -> Vec<&'static str> {
    check_source(source)
        .diagnostics
        .iter()
        .map(|d| d.code)
        .collect()
}

const CALLS: &str = r#"
    @entry flow main() -> number {
        let a = inv("ev.get-sum", "{{\"a\": 2, \"b\": 3}}")
        let b = tool("ev.get-sum", "{{\"a\": 1, \"b\": 1}}")
        return a + b
    }
}
"#;

#[test]
fn quoted_capability_name_silences_w0003() {
    let undeclared = format!("agent Ev {{{CALLS}");
    assert_eq!(codes(&undeclared), ["W0003", "W0003"]);
    let declared = format!(
        "agent Ev {{\n    capability \"ev.get-sum\"(a: number, b: number) -> number;{CALLS}"
    );
    assert_eq!(codes(&declared), Vec::<&str>::new());
    // The declared result type is the calls' type: two `str` results
    // concatenate to a `str`, which is not the flow's `number`.
    let wrong = declared.replace("-> number;", "-> str;");
    assert_eq!(codes(&wrong), ["E0112"]);
}

#[test]
fn empty_quoted_capability_name_is_an_error() {
    let src = "agent A {\n    capability \"\"(x: json) -> json;\n    @entry flow main() { print(\"x\") }\n}\n";
    assert_eq!(codes(src), ["E0102"]);
}

const CONFIG: &str = r#"
[[mcp_servers]]
name = "broken"
command = ["/nonexistent/mcp-server"]

[access]
allow = { A = ["broken.*"] }
"#;

fn run(dir: &Path, program: &str) -> Output {
    std::fs::write(dir.join("config.toml"), CONFIG).unwrap();
    std::fs::write(dir.join("p.ais"), program).unwrap();
    Command::new(env!("CARGO_BIN_EXE_aisc"))
        .current_dir(dir)
        .args([
            "run",
            "p.ais",
            "--config",
            "config.toml",
            "--memory",
            ":memory:",
        ])
        .output()
        .unwrap()
}

#[test]
fn unused_broken_mcp_server_does_not_block_a_run() {
    let d = tempfile::tempdir().unwrap();
    let o = run(
        d.path(),
        "agent A {\n    capability \"broken.read\"(path: str) -> str;\n    @entry flow main() -> str {\n        print(\"hello\")\n        return \"done\"\n    }\n}\n",
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(stdout.lines().collect::<Vec<_>>(), ["hello", "done"]);
}

#[test]
fn used_broken_mcp_server_fails_the_run_with_its_error() {
    let d = tempfile::tempdir().unwrap();
    let o = run(
        d.path(),
        "agent A {\n    capability \"broken.read\"(path: str) -> str;\n    @entry flow main() -> str {\n        return inv(\"broken.read\", \"{{\\\"path\\\": \\\"x\\\"}}\")\n    }\n}\n",
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(stderr.contains("MCP server `broken`"), "{stderr}");
    assert!(stderr.contains("/nonexistent/mcp-server"), "{stderr}");
    assert!(stderr.contains("[mcp.spawn]"), "{stderr}");
}
