//! Pause and resume across processes (issue 22): a run stops at `pause`
//! (exit code 3) and `aisc runs` shows what it waits for; a resume killed
//! with SIGKILL while its LLM call is in flight leaves the run resumable;
//! the next resume completes it, and no LLM call that had completed is
//! sent again. The model is the testkit's mock server.

use ais_testkit::mock::{MockReply, MockServer};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// `aisc run`'s exit code for a run stopped at `pause` (docs/language.md).
const PAUSED: i32 = 3;

const PROGRAM: &str = r#"// Human in the loop: the summary is asked before the pause (its
// message needs it), the letter after it (it needs the answer).
agent Refunds {
    flow main(amount: number) -> str {
        let summary = ask(prompt: "Summarise the refund request for {amount}")
        let answer = pause("Approve? {summary}")
        let letter = ask(prompt: "Write to the customer that the answer is {answer}")
        return "{answer}: {letter}"
    }
}
"#;

fn aisc(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_aisc"));
    c.env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env("HOME", dir)
        .env("NO_COLOR", "1")
        .current_dir(dir);
    c
}

fn output(dir: &Path, args: &[&str]) -> Output {
    aisc(dir).args(args).output().expect("aisc runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The prompts the mock received, in order.
fn prompts(server: &MockServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .map(|r| {
            let messages = r.body["messages"].as_array().cloned().unwrap_or_default();
            messages
                .iter()
                .rev()
                .find(|m| m["role"] == "user")
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[test]
fn a_resume_killed_mid_call_resumes_again_without_repeating_completed_calls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MockServer::start().expect("mock");
    server.push(MockReply::Content("a refund of 40 for a kettle".into()));
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "default_backend = \"m\"\n[[llm_backends]]\nname = \"m\"\nprotocol = \"openai\"\nbase_url = \"{}\"\nstream = false\n",
            server.openai_url()
        ),
    )
    .expect("config");
    let config = config.display().to_string();
    let program = dir.path().join("refunds.ais");
    std::fs::write(&program, PROGRAM).expect("program");
    let program = program.display().to_string();

    // (a) The run stops at the pause after its one LLM call.
    let o = output(
        dir.path(),
        &["run", &program, "--config", &config, "--arg", "amount=40"],
    );
    assert_eq!(o.status.code(), Some(PAUSED), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("paused: Approve? a refund of 40 for a kettle"),
        "{}",
        stderr(&o)
    );
    assert_eq!(server.request_count(), 1);
    let runs = output(dir.path(), &["runs"]);
    let listed = String::from_utf8_lossy(&runs.stdout).into_owned();
    assert!(listed.contains("paused"), "{listed}");
    assert!(
        listed.contains("waiting for input: Approve? a refund of 40 for a kettle"),
        "{listed}"
    );

    // (b) A resume whose LLM call is slow is killed while the call is in
    // flight: the mock has received it and not answered.
    server.set_latency(Duration::from_secs(600));
    let mut child = aisc(dir.path())
        .args(["resume", "last", "--config", &config, "--input", "yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("aisc resume starts");
    while server.request_count() < 2 {
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("the resume ended before its LLM call was in flight: {status}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), None, "killed by a signal");

    // The answer was journaled before the kill: the run is interrupted,
    // no longer waiting for input.
    let runs = output(dir.path(), &["runs"]);
    let listed = String::from_utf8_lossy(&runs.stdout).into_owned();
    assert!(listed.contains("interrupted"), "{listed}");
    assert!(!listed.contains("waiting for input"), "{listed}");

    // (c) Resumed again, the run completes with the journaled answer.
    server.set_latency(Duration::ZERO);
    server.push(MockReply::Content("Dear customer, approved.".into()));
    let o = output(dir.path(), &["resume", "last", "--config", &config, "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "yes: Dear customer, approved."
    );

    // The summary had completed before the pause: asked once in all. The
    // letter was asked by the killed resume (never answered) and again.
    let sent = prompts(&server);
    assert_eq!(sent.len(), 3, "{sent:?}");
    let summaries = sent.iter().filter(|p| p.starts_with("Summarise")).count();
    assert_eq!(summaries, 1, "{sent:?}");
    let letters = sent
        .iter()
        .filter(|p| p.starts_with("Write to the customer that the answer is yes"))
        .count();
    assert_eq!(letters, 2, "{sent:?}");
    let runs = output(dir.path(), &["runs"]);
    let listed = String::from_utf8_lossy(&runs.stdout).into_owned();
    assert!(listed.contains("completed"), "{listed}");
}

/// Issue 32, defect 3: a `pause` reached while an LLM call is in flight
/// lets the call finish and journals it before the run is paused, so the
/// resumed run does not pay for it again (it was: 3 requests for 2 calls).
#[test]
fn a_pause_keeps_the_llm_call_in_flight_and_the_resume_does_not_repeat_it() {
    const PROGRAM: &str = r#"agent A {
    flow main() -> str {
        let a = ask(prompt: "The slow one")
        let answer = pause("Go?")
        let b = ask(prompt: "The second after {answer}")
        return "{a} | {answer} | {b}"
    }
}
"#;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MockServer::start().expect("mock");
    server.push(MockReply::Content("first".into()));
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "default_backend = \"m\"\n[[llm_backends]]\nname = \"m\"\nprotocol = \"openai\"\nbase_url = \"{}\"\nstream = false\n",
            server.openai_url()
        ),
    )
    .expect("config");
    let config = config.display().to_string();
    let program = dir.path().join("p.ais");
    std::fs::write(&program, PROGRAM).expect("program");
    let program = program.display().to_string();

    // The pause does not wait for the call; the call is slow.
    server.set_latency(Duration::from_millis(1500));
    let o = output(dir.path(), &["run", &program, "--config", &config]);
    assert_eq!(o.status.code(), Some(PAUSED), "{}", stderr(&o));
    // The call in flight was answered and journaled before the run paused.
    let shown = output(dir.path(), &["runs", "show", "last", "--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("runs show --json");
    assert_eq!(shown["summary"]["by_op"]["ask"], 1, "{shown}");

    server.set_latency(Duration::ZERO);
    server.push(MockReply::Content("second".into()));
    let o = output(
        dir.path(),
        &["resume", "last", "--config", &config, "--input", "go", "-q"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "first | go | second"
    );
    let sent = prompts(&server);
    assert_eq!(
        sent,
        ["The slow one", "The second after go"],
        "2 calls, 2 requests"
    );
}
