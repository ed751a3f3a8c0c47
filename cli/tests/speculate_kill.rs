//! Speculation and kill -9 (issue 36): a run killed while its branch's
//! arms were speculated, their replies held, the deciding call still in
//! flight, has journaled none of them; its resume decides the branch and
//! journals the taken arm's call once, nothing of the others.

#[path = "support/isolated_aisc.rs"]
mod isolated_aisc;
use ais_testkit::mock::MockServer;
use isolated_aisc::aisc;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

const ROUTER: &str = r#"agent Router {
    @entry flow main(ticket: str) -> str {
        let category = ask("Classify this ticket: {ticket}")
        switch category {
            case "billing" => think("Billing answer for {ticket}")
            case "technical" => think("Technical answer for {ticket}")
            default => think("Escalation for {ticket}")
        } -> reply
        return reply
    }
}
"#;

/// The journal's completed steps of `id` by op name.
fn done(dir: &Path, id: &str, op: &str) -> usize {
    ais_vm::journal::load_record(&dir.join(".apxm"), id)
        .expect("journal")
        .steps
        .iter()
        .filter(|s| s.kind == "done" && s.op == op)
        .count()
}

#[test]
fn a_run_killed_mid_speculation_journals_no_speculated_reply() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let server = MockServer::start().expect("mock");
    // The classifier does not answer while it matters; the arms answer at
    // once, so their replies are held when the run is killed.
    server.set_kind_latency("ask", Duration::from_secs(600));
    server.set_kind_latency("think", Duration::ZERO);
    std::fs::write(
        d.join("config.toml"),
        format!(
            "default_backend = \"m\"\nspeculate = {{ max_extra_calls = 2, max_extra_cost = 1.0 }}\n[[llm_backends]]\nname = \"m\"\nprotocol = \"openai\"\nbase_url = \"{}\"\nstream = false\nretries = 0\n",
            server.openai_url()
        ),
    )
    .expect("config");
    std::fs::write(d.join("router.ais"), ROUTER).expect("program");

    let mut child = aisc(d)
        .args([
            "run",
            "router.ais",
            "--config",
            "config.toml",
            "-q",
            "--arg",
            "ticket=my printer is on fire",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("aisc run starts");
    // The classifier and the three arms' calls have reached the server.
    while server.request_count() < 4 {
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("the run ended before its calls were sent: {status}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // The arms' replies are on their way back (no latency); give them
    // time to arrive and be held.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "still running"
    );
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), None, "killed by a signal");
    assert_eq!(server.request_count(), 4, "one classifier, three arms");

    let runs = ais_vm::journal::list_runs(&d.join(".apxm")).expect("runs");
    assert_eq!(runs.len(), 1);
    let id = runs[0].id.clone();
    assert_eq!(done(d, &id, "ask"), 0);
    assert_eq!(done(d, &id, "think"), 0, "no speculated reply journaled");

    // The resume: the classifier answers (matching no case: `default`);
    // the arms are speculated again, the taken one adopted.
    server.set_kind_latency("ask", Duration::ZERO);
    let o = aisc(d)
        .args(["resume", &id, "--config", "config.toml"])
        .output()
        .expect("aisc resume");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("Escalation for"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(err.contains("1 adopted, 2 discarded"), "{err}");
    assert_eq!(server.request_count(), 8);
    assert_eq!(done(d, &id, "ask"), 1);
    assert_eq!(done(d, &id, "think"), 1, "the taken arm only");

    // The report shows what speculation did.
    let o = aisc(d)
        .args(["report", &id, "-o", "resumed.html"])
        .output()
        .expect("aisc report");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let page = std::fs::read_to_string(d.join("resumed.html")).expect("page");
    assert!(
        page.contains("3 calls started early: 1 adopted, 2 discarded"),
        "no speculation line in the report"
    );
}
