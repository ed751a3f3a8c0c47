//! `aisc fork RUN --at STEP [--set VALUE]` and `POST /v1/runs/{id}/fork`
//! (docs/cli.md, "Fork"): a fork replays the original's journal, takes the
//! edited value and executes only the ops that depend on it, counted at
//! the mock LLM server.

mod serve_support;

use ais_testkit::mock::{MockReply, MockServer};
use serde_json::{json, Value as Json};
use serve_support::{aisc, mock_config, write, Server};
use std::path::Path;

/// Four LLM ops: `c` depends on `a`, `d` on `c`; `b` on nothing.
const CHAIN: &str = "agent F {\n    @entry flow main(t: str) -> str {\n        let a = ask(\"one {t}\")\n        let b = ask(\"two {t}\")\n        let c = ask(\"three {a}\")\n        let d = ask(\"four {c}\")\n        return \"{b} | {d}\"\n    }\n}\n";

fn text(o: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn last_run(dir: &Path) -> String {
    let o = aisc(dir, &["runs", "--json"]);
    let (out, _) = text(&o);
    let line = out.lines().last().expect("a run");
    serde_json::from_str::<Json>(line).expect("json")["id"]
        .as_str()
        .expect("id")
        .to_string()
}

/// The step whose listed value contains `needle`.
fn step_with(dir: &Path, run: &str, needle: &str) -> String {
    let (out, err) = text(&aisc(dir, &["fork", run]));
    let line = out
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no step with {needle}: {out}{err}"));
    line.split_whitespace().next().expect("step").to_string()
}

#[test]
fn a_fork_executes_only_the_ops_downstream_of_the_edit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockServer::start().expect("mock");
    let config = mock_config(dir.path(), &mock.openai_url());
    let p = write(dir.path(), "chain.ais", CHAIN);
    let o = aisc(
        dir.path(),
        &["run", "-O0", &p, "--config", &config, "--arg", "t=x"],
    );
    let (original, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(mock.request_count(), 4);
    let run = last_run(dir.path());

    // No edit: the original again, with no call.
    let o = aisc(
        dir.path(),
        &["fork", &run, "--at", "1", "--config", &config],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(out, original);
    assert_eq!(mock.request_count(), 4, "{err}");
    assert!(
        err.contains("0 LLM calls made (0 tokens); 4 replayed"),
        "{err}"
    );

    // At `c`: `d` is downstream, `a` and `b` are not: one call, `d`'s.
    let at = step_with(dir.path(), &run, "three");
    let o = aisc(
        dir.path(),
        &[
            "fork", &run, "--at", &at, "--set", "EDITED", "--config", &config,
        ],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(mock.request_count(), 5, "{err}");
    let last = mock.last_request().expect("a request");
    assert!(
        last.body.to_string().contains("four EDITED"),
        "{}",
        last.body
    );
    assert!(
        out.contains("mock reply to: two x | mock reply to: four EDITED"),
        "{out}"
    );
    assert!(err.contains("1 LLM call made"), "{err}");
    assert!(err.contains("2 replayed from"), "{err}");

    // At the last LLM op: nothing downstream calls a model.
    let at = step_with(dir.path(), &run, "four");
    let o = aisc(
        dir.path(),
        &[
            "fork", &run, "--at", &at, "--set", "\"LAST\"", "--config", &config,
        ],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(mock.request_count(), 5, "{err}");
    assert!(out.contains("mock reply to: two x | LAST"), "{out}");
    // The original is untouched.
    let (shown, _) = text(&aisc(dir.path(), &["runs", "show", &run]));
    assert!(shown.contains("four mock reply to: three"), "{shown}");
}

/// A run that failed on a bad reply: the fork sets the reply it should
/// have had, and goes on from there.
#[test]
fn a_failed_run_is_fixed_by_a_fork() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockServer::start().expect("mock");
    mock.push(MockReply::Content("{\"other\": 1}".into()));
    let config = mock_config(dir.path(), &mock.openai_url());
    let p = write(
        dir.path(),
        "shape.ais",
        "agent S {\n    @entry flow main() -> str {\n        let j = ask(\"facts\", schema: '{\"type\": \"object\"}')\n        let n = j.found.name\n        return \"name: {n}\"\n    }\n}\n",
    );
    let o = aisc(dir.path(), &["run", &p, "--config", &config]);
    assert!(!o.status.success(), "{:?}", text(&o));
    let run = last_run(dir.path());
    let o = aisc(
        dir.path(),
        &[
            "fork",
            &run,
            "--at",
            "1",
            "--set",
            "{\"found\": {\"name\": \"Ada\"}}",
            "--config",
            &config,
        ],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(out.trim(), "name: Ada");
    assert_eq!(mock.request_count(), 1, "{err}");
}

#[test]
fn a_served_run_is_forked_over_http() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockServer::start().expect("mock");
    let config = mock_config(dir.path(), &mock.openai_url());
    let p = write(dir.path(), "chain.ais", CHAIN);
    let s = Server::start(dir.path(), &[&p], &["--config", &config, "-O0"], &[]);
    let r = s.post(
        "/v1/runs?wait=true",
        &json!({"program": "chain.ais", "args": {"t": "x"}}).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["id"].as_str().expect("id").to_string();
    assert_eq!(mock.request_count(), 4);
    let steps = s.get(&format!("/v1/runs/{id}/steps")).json();
    let list = steps["steps"].as_array().expect("steps");
    assert_eq!(list.len(), 4, "{steps}");
    let at = list
        .iter()
        .find(|st| st["value"].as_str().is_some_and(|v| v.contains("three")))
        .expect("c's step")["step"]
        .clone();
    let r = s.post(
        &format!("/v1/runs/{id}/fork"),
        &json!({"at": at, "set": "EDITED"}).to_string(),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let j = r.json();
    assert_eq!(j["fork"]["from"], id.as_str());
    assert_eq!(j["fork"]["op"], "ask");
    let fork = j["id"].as_str().expect("id").to_string();
    assert_eq!(fork, format!("{id}.f1"));
    let done = s.wait_final(&fork);
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(
        done["result"],
        "mock reply to: two x | mock reply to: four EDITED"
    );
    assert_eq!(mock.request_count(), 5);
    let r = s.post(
        &format!("/v1/runs/{id}/fork"),
        &json!({"at": 99}).to_string(),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "fork.no_op");
}

/// Control dependence: an edit that changes a decision runs the branch now
/// taken (its ops were never journaled), and nothing of the other.
#[test]
fn a_fork_that_changes_a_decision_runs_the_branch_now_taken() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockServer::start().expect("mock");
    let config = mock_config(dir.path(), &mock.openai_url());
    let p = write(
        dir.path(),
        "branch.ais",
        "agent B {\n    @entry flow main() -> str {\n        let a = ask(\"decide\")\n        let k = ask(\"unrelated\")\n        if a == \"yes\" {\n            let y = ask(\"on yes\")\n            return \"{y} {k}\"\n        }\n        let n = ask(\"on no\")\n        return \"{n} {k}\"\n    }\n}\n",
    );
    let o = aisc(dir.path(), &["run", "-O0", &p, "--config", &config]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("mock reply to: on no"), "{out}");
    assert_eq!(mock.request_count(), 3);
    let run = last_run(dir.path());
    let at = step_with(dir.path(), &run, "decide");
    let o = aisc(
        dir.path(),
        &[
            "fork", &run, "--at", &at, "--set", "yes", "--config", &config,
        ],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(out.trim(), "mock reply to: on yes mock reply to: unrelated");
    // One call: the branch now taken; `unrelated` replayed.
    assert_eq!(mock.request_count(), 4, "{err}");
    let last = mock.last_request().expect("a request");
    assert!(last.body.to_string().contains("on yes"), "{}", last.body);
}
