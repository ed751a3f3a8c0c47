//! What a new user hits in the first hour (issue 33): Ctrl-C during a run
//! says how to resume it, and the resumed run keeps its id; a program's
//! configuration and memory come from its own project, wherever aisc is
//! started; `aisc ops` suggests the closest op; `aisc graph` refuses an
//! output it does not write; a budget stop without a journal does not
//! suggest a resume; `aisc memory clear --agent` needs no `--tier`.

use ais_testkit::mock::{MockReply, MockServer};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const TWO_CALLS: &str = r#"agent Writer {
    @entry flow main(topic: str) -> str {
        let notes = ask("List three facts about {topic}.")
        return think("Write a paragraph on {topic}.", notes)
    }
}
"#;

fn aisc(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_aisc"));
    c.current_dir(dir)
        .env("HOME", dir)
        .env("NO_COLOR", "1")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("APXM_CONFIG")
        .env_remove("AIS_STORE");
    c
}

fn output(dir: &Path, args: &[&str]) -> Output {
    aisc(dir).args(args).output().expect("aisc runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn mock_config(dir: &Path, server: &MockServer) -> String {
    let config = dir.join("mock.toml");
    std::fs::write(
        &config,
        format!(
            "default_backend = \"m\"\n[[llm_backends]]\nname = \"m\"\nprotocol = \"openai\"\nbase_url = \"{}\"\nstream = false\n",
            server.openai_url()
        ),
    )
    .expect("config");
    config.display().to_string()
}

#[test]
fn ctrl_c_says_how_to_resume_and_the_resumed_run_keeps_its_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = MockServer::start().expect("mock");
    let config = mock_config(dir.path(), &server);
    std::fs::write(dir.path().join("w.ais"), TWO_CALLS).expect("program");
    // The first call never answers in time: the run is in flight.
    server.set_latency(Duration::from_secs(600));
    let mut child = aisc(dir.path())
        .args(["run", "w.ais", "--config", &config, "--arg", "topic=tides"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("aisc run starts");
    while server.request_count() < 1 {
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("the run ended before its LLM call was in flight: {status}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    let o = child.wait_with_output().expect("aisc ends");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    let runs = output(dir.path(), &["runs", "--json"]);
    let listed = text(&runs.stdout);
    assert_eq!(listed.lines().count(), 1, "{listed}");
    let run: serde_json::Value = serde_json::from_str(listed.trim()).expect("JSON");
    let id = run["id"]
        .as_str()
        .or_else(|| run["run_id"].as_str())
        .expect("an id")
        .to_string();
    assert!(
        err.contains(&format!("interrupted: run {id} stopped"))
            && err.contains(&format!("`aisc resume {id}`")),
        "{err}"
    );

    // The resume completes the run under the same id, and says so.
    server.set_latency(Duration::ZERO);
    server.push(MockReply::Content("facts".into()));
    server.push(MockReply::Content("a paragraph".into()));
    let o = output(dir.path(), &["resume", &id, "--config", &config]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(text(&o.stdout).trim(), "a paragraph");
    assert!(err.contains(&format!("run id {id} ")), "{err}");
    assert!(err.contains(&format!("`aisc trace {id}`")), "{err}");
    let runs = output(dir.path(), &["runs", "--json"]);
    let listed = text(&runs.stdout);
    assert_eq!(listed.lines().count(), 1, "still one run: {listed}");
    assert!(listed.contains("completed"), "{listed}");
    let trace = output(dir.path(), &["trace", &id]);
    assert_eq!(trace.status.code(), Some(0), "{}", text(&trace.stderr));
}

#[test]
fn a_program_uses_its_own_projects_config_and_memory_from_any_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let parent = dir.path();
    let o = output(parent, &["new", "myagent"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    // The project names a backend the built-in default does not have.
    let server = MockServer::start().expect("mock");
    server.push(MockReply::Content("from the project's backend".into()));
    std::fs::write(
        parent.join("myagent/.apxm/config.toml"),
        format!(
            "default_backend = \"proj\"\n[[llm_backends]]\nname = \"proj\"\nprotocol = \"openai\"\nbase_url = \"{}\"\nstream = false\n",
            server.openai_url()
        ),
    )
    .expect("config");
    std::fs::write(
        parent.join("myagent/one.ais"),
        "agent A {\n    @entry flow main() -> str {\n        return ask(\"Say hello.\")\n    }\n}\n",
    )
    .expect("program");
    let o = output(parent, &["run", "myagent/one.ais"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_eq!(text(&o.stdout).trim(), "from the project's backend");
    assert_eq!(server.request_count(), 1);
    assert!(!err.contains("simulat"), "{err}");
    // Nothing in the folder aisc was started from; the run is in the
    // project's memory, and the footer says how to find it from here.
    assert!(!parent.join(".apxm").exists(), "a stray .apxm/ in the cwd");
    assert!(
        err.contains("--memory ") && err.contains("myagent/.apxm"),
        "{err}"
    );
    let runs = output(parent, &["runs", "--memory", "myagent/.apxm"]);
    assert!(
        text(&runs.stdout).contains("one.ais"),
        "{}",
        text(&runs.stdout)
    );
    // `check` reads the same project's configuration.
    let o = output(parent, &["check", "myagent/one.ais"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(!parent.join(".apxm").exists());
}

#[test]
fn ops_suggests_the_closest_op_for_a_typo() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = output(dir.path(), &["ops", "aks"]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(err.contains("no op named `aks`"), "{err}");
    assert!(err.contains("did you mean `ask`?"), "{err}");
}

#[test]
fn graph_refuses_an_output_it_does_not_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("w.ais"), TWO_CALLS).expect("program");
    for (out, ok) in [
        ("g.png", false),
        ("g", false),
        ("g.svg", true),
        ("g.html", true),
    ] {
        let o = output(dir.path(), &["graph", "w.ais", "-o", out]);
        let err = text(&o.stderr);
        if ok {
            assert_eq!(o.status.code(), Some(0), "{out}: {err}");
            assert!(dir.path().join(out).is_file());
        } else {
            assert_eq!(o.status.code(), Some(2), "{out}: {err}");
            assert!(err.contains("writes SVG (`.svg`) or an HTML page"), "{err}");
            assert!(!dir.path().join(out).exists(), "{out} was written");
        }
    }
}

#[test]
fn a_budget_stop_suggests_resume_only_when_the_run_can_be_resumed() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("w.ais"), TWO_CALLS).expect("program");
    let base = [
        "run",
        "w.ais",
        "--arg",
        "topic=tides",
        "--sim-delay-scale",
        "0",
        "--llm-call-budget",
        "1",
    ];
    let mut args = base.to_vec();
    args.extend(["--memory", ":memory:"]);
    let o = output(dir.path(), &args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("budget."), "{err}");
    assert!(!err.contains("aisc resume"), "{err}");
    assert!(err.contains("cannot be resumed"), "{err}");
    // With a journal: the hint names this run.
    let o = output(dir.path(), &base);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let runs = text(&output(dir.path(), &["runs", "--json"]).stdout);
    let run: serde_json::Value =
        serde_json::from_str(runs.lines().next().expect("one run")).expect("JSON");
    let id = run["id"]
        .as_str()
        .or_else(|| run["run_id"].as_str())
        .expect("an id");
    assert!(err.contains(&format!("`aisc resume {id}`")), "{err}");
}

#[test]
fn memory_clear_for_one_agent_needs_no_tier() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("m.ais"),
        "agent Keeper {\n    @entry flow main() -> str {\n        umem(\"the color is blue\", \"ltm\")\n        return \"kept\"\n    }\n}\n",
    )
    .expect("program");
    let o = output(dir.path(), &["run", "m.ais"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let o = output(
        dir.path(),
        &["memory", "clear", "--agent", "Keeper", "--yes"],
    );
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}{out}", text(&o.stderr));
    assert!(out.contains("cleared 1 LTM entries"), "{out}");
    assert!(out.contains("the episodic log is kept"), "{out}");
    // Asked for explicitly, an agent's share of the episodic log is still
    // refused (the log is append-only).
    let o = output(
        dir.path(),
        &[
            "memory", "clear", "--agent", "Keeper", "--tier", "episodic", "--yes",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
}
