//! The live console of `aisc serve` (`GET /console`, docs/serve.md
//! "Console"): its files, the endpoints it uses (`/v1/programs`, a run's
//! graph, answering a destructive tool's question), and the page itself
//! driven in a headless Chromium (`tests/console/drive.js`; needs chromium
//! and the `ws` npm package, so that test is ignored unless `./test` runs
//! it).

mod serve_support;

use ais_testkit::mock::MockServer;
use serde_json::{json, Value as Json};
use serve_support::{request, write, Server};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn start_run(s: &Server, body: Json) -> String {
    let r = s.post("/v1/runs", &body.to_string());
    assert_eq!(r.status, 201, "{}", r.body);
    r.json()["id"].as_str().expect("id").to_string()
}

/// Answers the run's open question, waiting until it asks.
fn answer(s: &Server, id: &str, allow: bool) {
    for _ in 0..3000 {
        let r = s.post(
            &format!("/v1/runs/{id}/confirm"),
            &json!({ "allow": allow }).to_string(),
        );
        if r.status == 200 {
            return;
        }
        assert_eq!(r.status, 409, "{}", r.body);
        assert_eq!(r.json()["error"]["code"], "run.not_asking", "{}", r.body);
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("run {id} never asked");
}

fn tools_project(dir: &Path) -> (String, String) {
    let config = write(
        dir,
        "config.toml",
        &format!(
            "[tools]\nworkspace = \"{}\"\ndestructive = [\"write_file\"]\n[access]\nallow = {{ W = [\"write_file\"] }}\n",
            dir.display()
        ),
    );
    let program = write(
        dir,
        "w.ais",
        "agent W {\n    @entry flow main(text: str) -> str {\n        write_file(path: \"out.txt\", content: text)\n        return \"wrote\"\n    }\n}\n",
    );
    (config, program)
}

#[test]
fn the_console_its_graph_and_tool_questions_over_http() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (config, program) = tools_project(dir.path());
    let s = Server::start(
        dir.path(),
        &[&program],
        &["--config", &config, "--ask"],
        &[],
    );

    let page = s.get("/console");
    assert_eq!(page.status, 200);
    assert!(page
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/html")));
    assert!(page
        .header("content-security-policy")
        .is_some_and(|c| c.contains("default-src 'none'") && c.contains("frame-ancestors 'none'")));
    assert!(page.body.contains("/console/console.js"), "{}", page.body);
    assert_eq!(s.get("/console/console.js").status, 200);
    assert_eq!(s.get("/console/console.css").status, 200);
    assert_eq!(s.get("/console/nothing.js").status, 404);

    let programs = s.get("/v1/programs").json();
    assert_eq!(
        programs,
        json!({"programs": [{"file": "w.ais", "flows": [{"name": "W.main", "entry": true, "params": ["text"]}]}]})
    );

    // Approved: the tool runs.
    let id = start_run(&s, json!({"program": "w.ais", "args": {"text": "yes"}}));
    answer(&s, &id, true);
    let j = s.wait_final(&id);
    assert_eq!(j["status"], "succeeded", "{j}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.txt"))
            .ok()
            .as_deref(),
        Some("yes")
    );
    let events = s.get(&format!("/v1/runs/{id}/events")).body;
    let kinds: Vec<(u64, String, Json)> = serve_support::sse_events(&events);
    let confirm = kinds
        .iter()
        .find(|(_, k, _)| k == "confirm")
        .expect("a confirm event");
    assert_eq!(confirm.2["tool"], "write_file");
    assert_eq!(confirm.2["args"]["content"], "yes");
    assert!(kinds
        .iter()
        .any(|(_, k, d)| k == "confirmed" && d["allow"] == true));
    // The tool call's start comes before its end, with the graph's key.
    let start = kinds
        .iter()
        .position(|(_, k, d)| k == "op_start" && d["opcode"] == "inv");
    let end = kinds
        .iter()
        .position(|(_, k, d)| k == "op" && d["opcode"] == "inv");
    assert!(
        matches!((start, end), (Some(a), Some(b)) if a < b),
        "{events}"
    );
    let op = &kinds[end.expect("an inv op")].2;
    let key = format!(
        "data-key=\"f{}r{}o{}\"",
        op["flow_id"], op["region"], op["op"]
    );

    let graph = s.get(&format!("/v1/runs/{id}/graph"));
    assert_eq!(graph.status, 200);
    assert!(graph.body.starts_with("<svg"), "{}", graph.body);
    assert!(graph.body.contains(&key), "{key} not in {}", graph.body);

    // Denied: refused, nothing written.
    std::fs::remove_file(dir.path().join("out.txt")).expect("rm");
    let id = start_run(&s, json!({"program": "w.ais", "args": {"text": "no"}}));
    answer(&s, &id, false);
    let j = s.wait_final(&id);
    assert_eq!(j["status"], "failed", "{j}");
    assert!(
        j["error"]
            .to_string()
            .contains("tool.confirmation_required"),
        "{j}"
    );
    assert!(!dir.path().join("out.txt").exists());

    // A cancelled run stops waiting.
    let id = start_run(&s, json!({"program": "w.ais", "args": {"text": "never"}}));
    let mut asking = Json::Null;
    for _ in 0..3000 {
        asking = s.get(&format!("/v1/runs/{id}")).json()["confirm"].clone();
        if !asking.is_null() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(asking[0]["tool"], "write_file", "{asking}");
    assert_eq!(s.post(&format!("/v1/runs/{id}/cancel"), "").status, 202);
    assert_eq!(s.wait_final(&id)["status"], "cancelled");
    assert!(!dir.path().join("out.txt").exists());
    let r = s.post(&format!("/v1/runs/{id}/confirm"), "{\"allow\": true}");
    assert_eq!(r.status, 409, "{}", r.body);
}

/// Under a token the page's files need none (they hold no data; the page
/// asks for the token), everything else still does.
#[test]
fn the_console_files_need_no_token_the_api_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(
        dir.path(),
        "e.ais",
        "agent E {\n    @entry flow main() -> str {\n        return \"x\"\n    }\n}\n",
    );
    let s = Server::start(dir.path(), &[&p], &[], &[("AIS_SERVE_TOKEN", "t0k")]);
    assert_eq!(s.get("/console").status, 200);
    assert_eq!(s.get("/console/console.js").status, 200);
    assert_eq!(s.get("/v1/programs").status, 401);
    assert_eq!(s.get("/v1/runs").status, 401);
    let r = request(
        s.addr,
        "GET",
        "/v1/programs",
        &[("Authorization", "Bearer t0k")],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // POST to the page is still a method error, not a way around the token.
    assert_eq!(s.post("/console", "").status, 401);
}

#[test]
#[ignore = "needs chromium and node: run ./test"]
fn the_console_watches_a_run_and_answers_a_pause_in_a_headless_browser() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockServer::start().expect("mock");
    mock.set_stream_interval(Duration::from_millis(15));
    let config = write(
        dir.path(),
        "config.toml",
        &format!(
            "default_backend = \"m\"\n[[llm_backends]]\nname = \"m\"\nprotocol = \"openai\"\nbase_url = \"{}\"\nretries = 0\nstream = true\n[tools]\nworkspace = \"{}\"\ndestructive = [\"write_file\"]\n[access]\nallow = {{ W = [\"write_file\"] }}\n",
            mock.openai_url(),
            dir.path().display()
        ),
    );
    let echo = write(
        dir.path(),
        "echo.ais",
        "agent Echo {\n    @entry flow main(topic: str) -> str {\n        let a = ask(\"Facts about {topic}\")\n        let b = ask(\"Risks of {topic}\")\n        let c = think(\"Combine {a} and {b}\")\n        print(\"combined\")\n        return c\n    }\n}\n",
    );
    let approve = write(
        dir.path(),
        "approve.ais",
        "agent Approve {\n    @entry flow main(topic: str) -> str {\n        let s = ask(\"Summarise {topic}\")\n        let ok = pause(\"Approve? {s}\")\n        return \"{ok}: {s}\"\n    }\n}\n",
    );
    let w = write(
        dir.path(),
        "w.ais",
        "agent W {\n    @entry flow main(text: str) -> str {\n        write_file(path: \"out.txt\", content: text)\n        return \"wrote\"\n    }\n}\n",
    );
    let s = Server::start(
        dir.path(),
        &[&echo, &approve, &w],
        &["--config", &config, "--ask"],
        &[],
    );

    let chromium = std::env::var("AIS_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    assert!(
        Command::new(&chromium).arg("--version").output().is_ok(),
        "needs chromium: `{chromium}` is not installed. Run ./test, which installs it (scripts/provision/apt.sh)"
    );
    let npm = std::env::var("AIS_NPM_DIR").map_or_else(
        |_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/npm"),
        std::path::PathBuf::from,
    );
    assert!(
        npm.join("node_modules/ws").is_dir(),
        "needs the ws npm package in {}: run ./test (scripts/provision/npm.sh)",
        npm.display()
    );
    // `AIS_CONSOLE_SHOTS=docs/img` keeps the screenshots (docs/serve.md's).
    let shots = tempfile::tempdir().expect("tempdir");
    let shot_dir = std::env::var_os("AIS_CONSOLE_SHOTS")
        .map_or_else(|| shots.path().to_path_buf(), std::path::PathBuf::from);
    let out = Command::new("node")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console/drive.js"))
        .arg(format!("http://{}", s.addr))
        .arg(&shot_dir)
        .env("AIS_NPM_DIR", &npm)
        .env("AIS_CHROMIUM", &chromium)
        .output()
        .expect("needs node: run ./test, which installs it (scripts/provision/apt.sh)");
    assert!(
        out.status.success(),
        "drive.js failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Json = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(r["errors"], json!([]), "{r}");

    // The first run, watched to its end: every op lit, the streamed text
    // shown, the critical path drawn.
    let done = &r["completed"];
    assert_eq!(done["status"], "succeeded", "{r}");
    assert_eq!(done["nodes"], done["lit"], "{r}");
    assert_eq!(done["failed"], 0, "{r}");
    assert!(done["critical"].as_u64().is_some_and(|n| n >= 2), "{r}");
    assert!(done["text"].as_str().is_some_and(|t| !t.is_empty()), "{r}");
    let first = done["id"].as_str().expect("id");
    assert_eq!(
        s.get(&format!("/v1/runs/{first}")).json()["status"],
        "succeeded"
    );

    // The second run: the page showed its question, the answer typed there
    // ended it, and the server agrees.
    let paused = &r["paused"];
    assert_eq!(paused["status"], "paused", "{r}");
    assert!(
        paused["question"]
            .as_str()
            .is_some_and(|q| q.contains("Approve?")),
        "{r}"
    );
    let answered = &r["answered"];
    assert_eq!(answered["status"], "succeeded", "{r}");
    assert!(
        answered["result"]
            .as_str()
            .is_some_and(|t| t.contains("approved by the console")),
        "{r}"
    );
    let second = answered["id"].as_str().expect("id");
    let j = s.get(&format!("/v1/runs/{second}")).json();
    assert_eq!(j["status"], "succeeded", "{j}");
    assert!(
        j["result"]
            .as_str()
            .is_some_and(|t| t.starts_with("approved by the console: ")),
        "{j}"
    );
    // The fork of the first run at its "Risks" step, from the page: only
    // `think` depends on it.
    let forked = &r["forked"];
    assert_eq!(forked["status"], "succeeded", "{r}");
    assert!(
        forked["id"]
            .as_str()
            .is_some_and(|id| id == format!("{first}.f1")),
        "{r}"
    );
    assert!(
        forked["result"]
            .as_str()
            .is_some_and(|t| t.contains("and FORKED")),
        "{r}"
    );
    // A destructive tool's question, approved from the page.
    let approved = &r["approved"];
    assert!(approved["question"].is_null(), "{r}");
    assert!(
        r["confirm"]
            .as_str()
            .is_some_and(|q| q.contains("write_file")),
        "{r}"
    );
    assert_eq!(approved["status"], "succeeded", "{r}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.txt"))
            .ok()
            .as_deref(),
        Some("from the page")
    );
    // 3 LLM calls for the first run, 1 for the second (its resume replayed
    // the summary instead of asking again), 1 for the fork (`think`).
    assert_eq!(mock.request_count(), 5);
}
