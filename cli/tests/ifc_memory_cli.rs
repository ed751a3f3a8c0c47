//! Labels of long-term memory across processes (issue 19, docs/security.md
//! "Labels across runs"): one `aisc run` stores an untrusted page in
//! long-term memory (the policy allows that write); a second `aisc run`,
//! another process on the same memory directory, reads it and would send
//! it — the send is denied and the tool never runs. A trusted note stored
//! the same way is sent. The tools are real subprocess tools; the send
//! counts its calls in a file.

use std::path::Path;
use std::process::{Command, Output};

/// `store` keeps `fetch_page`'s (untrusted) or `read_note`'s (trusted)
/// answer in long-term memory; `send` sends what is stored.
const PROGRAM: &str = r#"agent Clerk {
    flow store_page() -> str {
        let doc = fetch_page(id: "latest")
        umem(doc, "ltm", "contact")
        return "stored"
    }
    flow store_note() -> str {
        let doc = read_note(id: "contacts")
        umem(doc, "ltm", "contact")
        return "stored"
    }
    flow send() -> str {
        let to = qmem("contact", "ltm")
        send_note(to: "{to}")
        return "sent"
    }
}
"#;

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let sent = dir.path().join("sent.txt");
    let script = |name: &str, body: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).expect("script");
        p
    };
    let fetch = script(
        "fetch.sh",
        "cat >/dev/null\necho '\"mallory@evil.test\"'\n".into(),
    );
    let note = script(
        "note.sh",
        "cat >/dev/null\necho '\"alice@example.test\"'\n".into(),
    );
    let send = script(
        "send.sh",
        format!(
            "cat >> '{}'\necho >> '{}'\necho '{{\"ok\": true}}'\n",
            sent.display(),
            sent.display()
        ),
    );
    let tool = |name: &str, path: &Path, arg: &str| {
        format!(
            "[[tools.subprocess]]\nname = \"{name}\"\ncommand = [\"sh\", \"{}\"]\ninput_schema = {{ type = \"object\", required = [\"{arg}\"], properties = {{ {arg} = {{ type = \"string\" }} }} }}\n",
            path.display()
        )
    };
    let config = format!(
        r#"default_backend = "sim"
[[llm_backends]]
name = "sim"
protocol = "sim"
{}{}{}
[access.allow]
Clerk = ["fetch_page", "read_note", "send_note"]
[policy]
untrusted = ["fetch_page"]
[policy.sinks.fetch_page]
sink = false
[policy.sinks.read_note]
sink = false
[policy.sinks."memory.ltm"]
allow_untrusted = ["*"]
"#,
        tool("fetch_page", &fetch, "id"),
        tool("read_note", &note, "id"),
        tool("send_note", &send, "to"),
    );
    std::fs::create_dir(dir.path().join(".apxm")).expect("mkdir");
    std::fs::write(dir.path().join(".apxm/config.toml"), config).expect("config");
    std::fs::write(dir.path().join("m.ais"), PROGRAM).expect("program");
    dir
}

fn aisc(dir: &Path, entry: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aisc"))
        .current_dir(dir)
        .args(["run", "m.ais", "--entry", entry, "--memory", "mem"])
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .output()
        .expect("aisc runs")
}

fn sent(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("sent.txt")).unwrap_or_default()
}

#[test]
fn an_untrusted_page_kept_by_one_process_is_denied_in_the_next() {
    let p = project();
    let first = aisc(p.path(), "store_page");
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let second = aisc(p.path(), "send");
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert!(err.contains("policy.denied"), "{err}");
    assert!(err.contains("fetch_page"), "{err}");
    assert_eq!(sent(p.path()), "", "the send tool ran");
}

#[test]
fn a_trusted_note_kept_by_one_process_is_sent_by_the_next() {
    let p = project();
    assert!(aisc(p.path(), "store_note").status.success());
    let second = aisc(p.path(), "send");
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert!(
        sent(p.path()).contains("alice@example.test"),
        "{}",
        sent(p.path())
    );
}

/// The events carry each call's information-flow label (issue 38): the
/// untrusted page's sources, marked untrusted; the note's, trusted.
#[test]
fn the_events_carry_the_labels_of_call_results() {
    let p = project();
    let events = |entry: &str| -> Vec<serde_json::Value> {
        let out = Command::new(env!("CARGO_BIN_EXE_aisc"))
            .current_dir(p.path())
            .args(["run", "m.ais", "--entry", entry, "--memory", "mem"])
            .args(["--events", &format!("{entry}.jsonl")])
            .env_remove("OPENAI_API_KEY")
            .output()
            .expect("aisc runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read_to_string(p.path().join(format!("{entry}.jsonl")))
            .expect("events")
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let tool_event = |evs: &[serde_json::Value], tool: &str| {
        evs.iter()
            .find(|e| e["gen_ai.tool.name"] == tool)
            .cloned()
            .unwrap_or_else(|| panic!("no {tool} event in {evs:?}"))
    };
    let page = tool_event(&events("store_page"), "fetch_page");
    let sources = page["ifc.sources"].as_array().expect("sources");
    assert!(
        sources
            .iter()
            .any(|s| s.as_str().is_some_and(|s| s.contains("fetch_page"))),
        "{page}"
    );
    assert_eq!(page["ifc.untrusted"], true, "{page}");
    let note = tool_event(&events("store_note"), "read_note");
    assert!(
        note["ifc.sources"]
            .as_array()
            .is_some_and(|s| !s.is_empty()),
        "{note}"
    );
    assert_eq!(note["ifc.untrusted"], false, "{note}");
}
