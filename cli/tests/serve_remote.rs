//! Remote agents over A2A: a program whose agents live in two `aisc serve`
//! processes on loopback. The lead's server reaches the other's agents by
//! the names its `[[remote_agents]]` configure, through `communicate` and
//! `Agent.flow(...)`; the messages overlap; a resumed run does not resend a
//! message whose reply was recorded.

mod serve_support;

use serde_json::json;
use serve_support::{aisc, write, Server};
use std::path::Path;

const WORKERS: &str = r#"agent Summarizer {
    @entry flow summarize(text: str) -> str {
        return ask("Summarize in one line: {text}")
    }
}
agent Critic {
    discoverable: [polish]
    @entry flow review(message: str) -> str {
        let r = think("Review: {message}")
        return "critic: {r}"
    }
    flow polish(text: str, tone: str) -> str {
        return "polished ({tone}): {text}"
    }
}
"#;

const LEAD: &str = r#"agent Lead {
    @entry flow main(doc: str) -> str {
        let a = communicate("Summarizer", "part one of {doc}")
        let b = Summarizer.summarize(text: "part two of {doc}")
        let c = communicate(recipient: "Critic", message: "all of {doc}")
        return "{a} | {b} | {c}"
    }
}
"#;

fn remote_config(dir: &Path, workers: &Server) {
    std::fs::create_dir_all(dir.join(".apxm")).expect("mkdir");
    let url = |agent: &str| format!("http://{}/a2a/{agent}", workers.addr);
    std::fs::write(
        dir.join(".apxm/config.toml"),
        format!(
            "default_backend = \"sim\"\n[[llm_backends]]\nname = \"sim\"\nprotocol = \"sim\"\n\
             [[remote_agents]]\nname = \"Summarizer\"\nurl = \"{}\"\n\
             [[remote_agents]]\nname = \"Critic\"\nurl = \"{}\"\n",
            url("Summarizer"),
            url("Critic")
        ),
    )
    .expect("config");
}

/// The workers' runs, each as (started_ms, ended_ms).
fn spans(workers: &Server) -> Vec<(i64, i64)> {
    let list = workers.get("/v1/runs").json();
    list["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| {
            (
                r["started_ms"].as_i64().expect("started"),
                r["ended_ms"].as_i64().expect("ended"),
            )
        })
        .collect()
}

#[test]
fn a_program_split_across_two_servers_talks_over_a2a_with_overlapping_calls() {
    let wdir = tempfile::tempdir().expect("tempdir");
    write(wdir.path(), "workers.ais", WORKERS);
    // Slow enough that overlapping and sequential calls differ.
    let workers = Server::start(
        wdir.path(),
        &["workers.ais"],
        &["--sim-delay-scale", "0.3"],
        &[],
    );
    let ldir = tempfile::tempdir().expect("tempdir");
    remote_config(ldir.path(), &workers);
    write(ldir.path(), "lead.ais", LEAD);
    let lead = Server::start(ldir.path(), &["lead.ais"], &[], &[]);

    let started = lead.post(
        "/v1/runs",
        &json!({"program": "lead.ais", "args": {"doc": "the memo"}}).to_string(),
    );
    assert_eq!(started.status, 201, "{}", started.body);
    let id = started.json()["id"].as_str().expect("run id").to_string();
    let done = lead.wait_final(&id);
    assert_eq!(done["status"], "succeeded", "{done}");
    let result = done["result"].as_str().expect("text result");
    let parts: Vec<&str> = result.split(" | ").collect();
    assert_eq!(parts.len(), 3, "{result}");
    assert!(
        parts[0].contains("Summarize in one line: part one of the memo"),
        "{result}"
    );
    assert!(
        parts[1].contains("Summarize in one line: part two of the memo"),
        "{result}"
    );
    assert!(
        parts[2].starts_with("critic: ") && parts[2].contains("Review: all of the memo"),
        "{result}"
    );

    // Three runs on the workers' server, all in flight at once.
    let spans = spans(&workers);
    assert_eq!(spans.len(), 3, "{spans:?}");
    let last_start = spans.iter().map(|s| s.0).max().expect("starts");
    let first_end = spans.iter().map(|s| s.1).min().expect("ends");
    assert!(
        last_start < first_end,
        "the remote calls did not overlap: {spans:?}"
    );
}

#[test]
fn a_resumed_run_does_not_resend_a_recorded_message_and_failures_are_coded() {
    let wdir = tempfile::tempdir().expect("tempdir");
    write(wdir.path(), "workers.ais", WORKERS);
    let workers = Server::start(wdir.path(), &["workers.ais"], &[], &[]);
    let ldir = tempfile::tempdir().expect("tempdir");
    remote_config(ldir.path(), &workers);
    write(
        ldir.path(),
        "ask.ais",
        "agent Lead {\n    flow main() -> str {\n        let s = Summarizer.summarize(\"the memo\")\n        let ok = pause(\"Send {s}?\")\n        return \"{ok}: {s}\"\n    }\n}\n",
    );
    let o = aisc(ldir.path(), &["run", "ask.ais"]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(spans(&workers).len(), 1);
    let o = aisc(ldir.path(), &["resume", "last", "--input", "yes", "-q"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.starts_with("yes: ") && out.contains("Summarize in one line: the memo"),
        "{out}"
    );
    // The reply was replayed from the journal: still one remote run.
    assert_eq!(spans(&workers).len(), 1);

    // A discoverable flow is a skill of its agent's card, callable by name.
    let card = workers
        .get("/a2a/Critic/.well-known/agent-card.json")
        .json();
    let ids: Vec<&str> = card["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(ids, ["Critic.review", "Critic.polish"], "{card}");
    write(
        ldir.path(),
        "polish.ais",
        "agent Lead {\n    flow main() -> json {\n        return Critic.polish(text: \"the memo\", tone: \"dry\")\n    }\n}\n",
    );
    let o = aisc(ldir.path(), &["run", "polish.ais", "-q"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "polished (dry): the memo"
    );

    // The remote side gone: a coded failure naming the agent.
    let addr = workers.addr;
    drop(workers);
    let o = aisc(ldir.path(), &["run", "ask.ais"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("remote.transport") && err.contains("Summarizer"),
        "{err}"
    );
    assert!(err.contains(&addr.to_string()), "{err}");
}
