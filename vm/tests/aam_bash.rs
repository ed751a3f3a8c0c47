//! The `bash` tool: denied unless allowed, confined to the workspace
//! (bubblewrap), with output, time and job limits; the unconfined opt-out.
#![allow(clippy::unwrap_used)]

mod aam_support;
use aam_support::{host, inv, toml_str};

use ais_vm::aam::config::AamConfig;
use ais_vm::aam::{AamHost, Confirm};
use serde_json::json;
use std::path::Path;

/// A host whose agent `A` may run `bash` in `workspace`; `extra` adds lines
/// to its `[tools]` table.
fn bash_host(workspace: &Path, extra: &str) -> AamHost {
    host(
        &format!(
            "[tools]\nworkspace = \"{}\"\n{extra}[access]\nallow = {{ A = [\"bash\"] }}\n",
            toml_str(workspace)
        ),
        Confirm::Deny,
    )
}

#[test]
fn bash_is_denied_unless_allowed_and_runs_confined_with_limits() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("sub")).unwrap();
    let denied = host(
        &format!("[tools]\nworkspace = \"{}\"\n", toml_str(d.path())),
        Confirm::Deny,
    );
    let e = inv(&denied, "A", "bash", json!({"command": "touch pwned"})).unwrap_err();
    assert_eq!(e.code, "tool.denied");
    assert!(!d.path().join("pwned").exists());
    let h = bash_host(d.path(), "");
    // A failing command is an answer: its exit code and output.
    let r = inv(
        &h,
        "A",
        "bash",
        json!({"command": "echo hi; echo oops >&2; exit 3"}),
    )
    .unwrap();
    assert_eq!(r["exit_code"], 3);
    assert_eq!(r["stdout"], "hi\n");
    assert_eq!(r["stderr"], "oops\n");
    assert_eq!(r["truncated"], false);
    // It runs in the workspace (or a directory inside it), with HOME there.
    let r = inv(&h, "A", "bash", json!({"command": "pwd", "cwd": "sub"})).unwrap();
    let pwd = r["stdout"].as_str().unwrap().trim().to_string();
    assert!(pwd.ends_with("/sub"), "{pwd}");
    let e = inv(&h, "A", "bash", json!({"command": "pwd", "cwd": ".."})).unwrap_err();
    assert_eq!(e.code, "tool.outside_workspace");
    // Output is cut at 64 KiB per stream, and said to be.
    let r = inv(
        &h,
        "A",
        "bash",
        json!({"command": "head -c 200000 /dev/zero | tr '\\0' x"}),
    )
    .unwrap();
    assert_eq!(r["stdout"].as_str().map(str::len), Some(64 * 1024));
    assert_eq!(r["truncated"], true);
    // A command that outlives its timeout is killed.
    let e = inv(
        &h,
        "A",
        "bash",
        json!({"command": "sleep 30", "timeout_s": 0.2}),
    )
    .unwrap_err();
    assert_eq!(e.code, "tool.timeout");
    // Arguments are checked against the schema before anything runs.
    let e = inv(&h, "A", "bash", json!({"cmd": "ls"})).unwrap_err();
    assert!(e.code.starts_with("tool."), "{}", e.code);
}

/// `bash` is confined to the workspace (bubblewrap): a file outside it is
/// not there to read, by absolute path or by `..`; a background job, even
/// one in a session of its own, ends with the call at its timeout.
#[test]
fn bash_cannot_read_outside_the_workspace_and_its_jobs_end_with_the_call() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "TOP-SECRET").unwrap();
    let d = tempfile::tempdir().unwrap();
    let h = bash_host(d.path(), "");
    for cmd in [
        format!("cat '{}'", secret.display()),
        "cat /etc/passwd".to_string(),
        format!(
            "cat ../{}/secret.txt",
            outside.path().file_name().unwrap().to_string_lossy()
        ),
    ] {
        let r = inv(&h, "A", "bash", json!({ "command": cmd })).unwrap();
        assert_ne!(r["exit_code"], 0, "{cmd}: {r}");
        assert!(
            !r["stdout"].as_str().unwrap().contains("TOP-SECRET"),
            "{cmd}"
        );
        assert!(!r["stdout"].as_str().unwrap().contains("root:"), "{cmd}");
    }
    // The workspace itself is there, read-write.
    let r = inv(
        &h,
        "A",
        "bash",
        json!({"command": "echo hi > in.txt && cat in.txt"}),
    )
    .unwrap();
    assert_eq!(r["stdout"], "hi\n");
    let e = inv(
        &h,
        "A",
        "bash",
        json!({
            "command": "(sleep 1; echo late > late1.txt) & setsid sh -c 'sleep 1; echo late > late2.txt' & sleep 30",
            "timeout_s": 0.3
        }),
    )
    .unwrap_err();
    assert_eq!(e.code, "tool.timeout");
    // Long after the jobs would have written, neither did.
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(!d.path().join("late1.txt").exists());
    assert!(!d.path().join("late2.txt").exists());
    // The same jobs after a command that finishes: ended with the call too.
    let r = inv(
        &h,
        "A",
        "bash",
        json!({"command": "setsid sh -c 'sleep 1; echo late > late3.txt' & echo started"}),
    )
    .unwrap();
    assert_eq!(r["stdout"], "started\n");
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(!d.path().join("late3.txt").exists());
}

/// The opt-out runs commands unconfined (and says so in the config).
#[test]
fn bash_without_a_sandbox_is_an_explicit_choice() {
    let d = tempfile::tempdir().unwrap();
    let h = bash_host(d.path(), "sandbox = \"none\"\n");
    let r = inv(
        &h,
        "A",
        "bash",
        json!({"command": "test -e /etc/passwd && echo seen"}),
    )
    .unwrap();
    assert_eq!(r["stdout"], "seen\n");
    let e = AamConfig::parse("[tools]\nsandbox = \"maybe\"\n", None).unwrap_err();
    assert!(e.message().contains("tools.sandbox"), "{}", e.message());
}
