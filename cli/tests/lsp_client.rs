//! `aisc lsp` with a real LSP client: pygls and lsprotocol (pinned, from
//! PyPI, in the virtual environment `./test` provisions) open a document and
//! ask for diagnostics, hover, completion, signature help, rename and a
//! quick fix through their typed API (`tests/lsp_client/client.py`).

mod serve_support;

use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

const PACKAGES: &[&str] = &["pygls==2.1.1", "lsprotocol==2025.0.0"];

const PROGRAM: &str = r#"agent Researcher {
    flow research(topic: str) -> str {
        return ask("List questions about {topic}.")
    }
}

agent Coordinator {
    @read_only capability lookup(q: str) -> json;
    @entry flow main(topic: str) -> str {
        let questions = Researcher.research(topic)
        let facts = inv("lookup", "{}")
        return think("Write a brief on {topic}.", questions, facts)
    }
}
"#;

#[test]
#[ignore = "needs the pygls Python SDK: run ./test"]
fn pygls_client_sees_diagnostics_hover_completion_signatures_rename_and_fixes() {
    let python = serve_support::sdk_venv("pygls", PACKAGES, "import pygls, lsprotocol");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("brief.ais");
    std::fs::write(&file, PROGRAM).expect("write");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lsp_client/client.py");
    let out = Command::new(python)
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_aisc"))
        .arg(&file)
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .output()
        .expect("the client runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client failed\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.trim()).expect("the client prints JSON");
    assert_eq!(seen["server"], "aisc lsp");
    assert_eq!(seen["rename_provider"], true);
    assert_eq!(seen["signature_help_provider"], true);
    assert_eq!(seen["diagnostics_on_open"], json!([]));
    assert_eq!(seen["hover"], "```ais\nquestions: str\n```");
    let completion: Vec<&str> = seen["completion"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for want in [
        "questions",
        "facts",
        "topic",
        "think",
        "temperature:",
        "model:",
    ] {
        assert!(completion.contains(&want), "no `{want}` in {completion:?}");
    }
    assert!(
        seen["signature"]
            .as_str()
            .is_some_and(|s| s.starts_with("think(prompt, value...")),
        "{seen}"
    );
    assert_eq!(seen["active_parameter"], 1);
    // `facts`: its definition and its use.
    assert_eq!(
        seen["rename_edits"],
        json!([[10, 12, "evidence"], [11, 61, "evidence"]])
    );
    // `fact` is undefined (and `facts` now unused); the fix is offered.
    assert_eq!(seen["diagnostics_after_change"], json!(["E0100", "W0001"]));
    assert_eq!(seen["code_actions"], json!(["Change `fact` to `facts`"]));
}
