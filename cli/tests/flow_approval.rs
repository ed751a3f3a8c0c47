//! A denied information flow can be approved on a terminal (issue 19):
//! `aisc run` shows the sink, the argument, the untrusted sources and the
//! path, and asks once per flow; `--yes` does not answer for it, and with
//! no terminal the denial stands. The terminal is a real pseudo-terminal
//! (`tests/tty/drive.py`), so those tests are `#[ignore = "needs python3:
//! run ./test"]`.

use std::path::Path;
use std::process::{Command, Output};

const PROGRAM: &str = r#"agent Mailer {
    flow main(id: str) -> str {
        let page = fetch_page(id: id)
        send_note(to: page)
        send_note(to: "{page}!")
        return "done"
    }
}
"#;

/// A project whose `send_note` appends each call's arguments to `sent.txt`
/// and whose `fetch_page` (untrusted) answers with an attacker's address.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let sent = dir.path().join("sent.txt");
    let (fetch, send) = (dir.path().join("fetch.sh"), dir.path().join("send.sh"));
    std::fs::write(&fetch, "cat >/dev/null\necho '\"attacker@example.com\"'\n").expect("fetch.sh");
    std::fs::write(
        &send,
        format!(
            "cat >> '{}'\necho >> '{}'\necho '{{\"ok\": true}}'\n",
            sent.display(),
            sent.display()
        ),
    )
    .expect("send.sh");
    let config = format!(
        r#"default_backend = "sim"
[[llm_backends]]
name = "sim"
protocol = "sim"
[[tools.subprocess]]
name = "fetch_page"
command = ["sh", "{fetch}"]
input_schema = {{ type = "object", required = ["id"], properties = {{ id = {{ type = "string" }} }} }}
[[tools.subprocess]]
name = "send_note"
command = ["sh", "{send}"]
input_schema = {{ type = "object", required = ["to"], properties = {{ to = {{ type = "string" }} }} }}
[access.allow]
Mailer = ["fetch_page", "send_note"]
[policy]
untrusted = ["fetch_page"]
"#,
        fetch = fetch.display(),
        send = send.display()
    );
    std::fs::create_dir(dir.path().join(".apxm")).expect("mkdir");
    std::fs::write(dir.path().join(".apxm/config.toml"), config).expect("config");
    std::fs::write(dir.path().join("m.ais"), PROGRAM).expect("program");
    dir
}

const RUN: &[&str] = &[
    "run", "m.ais", "--arg", "id=p1", "--memory", ":memory:", "--yes",
];

/// `aisc run` on a pseudo-terminal, answering its question with `answer`.
fn on_tty(dir: &Path, answer: &str) -> Output {
    let drive = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tty/drive.py");
    Command::new("python3")
        .arg(drive)
        .arg(answer)
        .arg(env!("CARGO_BIN_EXE_aisc"))
        .args(RUN)
        .env("HOME", dir)
        .env("NO_COLOR", "1")
        .current_dir(dir)
        .output()
        .expect("needs python3: run ./test, which installs it (scripts/provision/apt.sh)")
}

fn sent(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("sent.txt"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("attacker@example.com"))
        .count()
}

#[test]
#[ignore = "needs python3: run ./test"]
fn approving_on_the_terminal_lets_the_flow_through_once_asked() {
    let dir = project();
    let o = on_tty(dir.path(), "y");
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert_eq!(text.matches("allow this flow").count(), 1, "{text}");
    assert!(
        text.contains("`send_note` argument `to`") && text.contains("from: fetch_page"),
        "{text}"
    );
    assert_eq!(sent(dir.path()), 2, "{text}");
}

#[test]
#[ignore = "needs python3: run ./test"]
fn refusing_on_the_terminal_fails_the_op_with_policy_denied() {
    let dir = project();
    let o = on_tty(dir.path(), "n");
    let text = String::from_utf8_lossy(&o.stdout);
    assert_ne!(o.status.code(), Some(0), "{text}");
    assert_eq!(text.matches("allow this flow").count(), 1, "{text}");
    assert!(
        text.contains("policy.denied") && text.contains("not approved"),
        "{text}"
    );
    assert_eq!(sent(dir.path()), 0, "{text}");
}

#[test]
fn with_no_terminal_the_denial_stands_even_with_yes() {
    let dir = project();
    let o = Command::new(env!("CARGO_BIN_EXE_aisc"))
        .args(RUN)
        .env("HOME", dir.path())
        .env("NO_COLOR", "1")
        .current_dir(dir.path())
        .output()
        .expect("aisc runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("policy.denied") && !err.contains("allow this flow"),
        "{err}"
    );
    assert_eq!(sent(dir.path()), 0, "{err}");
}
