//! Threads (docs/serve.md "Threads", docs/language.md "Threads"): over
//! HTTP (create, runs that see earlier runs and the state, state edits
//! with a version check, history, delete), the order of concurrent runs
//! on one thread, `aisc run --thread` with kill -9 and resume (a state
//! write is not applied twice), a PostgreSQL store across a server's
//! kill -9, and A2A context ids through the official SDK.

#![allow(clippy::unwrap_used)]

mod serve_support;

use serde_json::{json, Value as Json};
use serve_support::{aisc, request, write, Server};
use std::path::Path;

/// Reads the thread's history and state, writes one key, answers with
/// all three.
const CHAT: &str = "agent Chat {
    @entry flow main(msg: str) -> str {
        let past = thread_history()
        let mood = thread_state(key: \"mood\")
        thread_set(key: \"last\", value: msg)
        return \"heard {msg}; before: {past}; mood: {mood}\"
    }
}
";

/// Like CHAT, with an LLM call in the middle (slow on a slow simulator).
const SLOW: &str = "agent Slow {
    @entry flow main(msg: str) -> str {
        let past = thread_history()
        let said = ask(\"Say \" + msg)
        return \"{msg} after {past}\"
    }
}
";

fn send(s: &Server, method: &str, path: &str, body: Json) -> (u16, Json) {
    let text = body.to_string();
    let r = request(
        s.addr,
        method,
        path,
        &[("Content-Type", "application/json")],
        Some(text.as_bytes()),
    );
    let j = serde_json::from_str(r.body.trim()).unwrap_or(Json::Null);
    (r.status, j)
}

fn run_on(s: &Server, thread: &str, msg: &str) -> Json {
    let (st, j) = send(
        s,
        "POST",
        &format!("/v1/threads/{thread}/runs?wait=true"),
        json!({"program": "chat.ais", "args": {"msg": msg}}),
    );
    assert_eq!(st, 201, "{j}");
    assert_eq!(j["status"], "succeeded", "{j}");
    assert_eq!(j["thread_id"], thread);
    j
}

#[test]
fn runs_on_a_thread_see_its_history_and_state_and_the_state_is_edited_with_a_version_check() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "chat.ais", CHAT);
    let s = Server::start(dir.path(), &[&p], &["--sim-delay-scale", "0"], &[]);

    let (st, t) = send(
        &s,
        "POST",
        "/v1/threads",
        json!({"thread_id": "t1", "metadata": {"user": "ann"}}),
    );
    assert_eq!(st, 201, "{t}");
    assert_eq!(
        (t["version"].as_i64(), t["runs"].as_i64()),
        (Some(0), Some(0))
    );
    assert_eq!(t["metadata"]["user"], "ann");
    let (st, e) = send(&s, "POST", "/v1/threads", json!({"thread_id": "t1"}));
    assert_eq!(
        (st, e["error"]["code"].as_str()),
        (409, Some("thread.exists"))
    );
    let (st, e) = send(&s, "POST", "/v1/threads", json!({"thread_id": "a b"}));
    assert_eq!(
        (st, e["error"]["code"].as_str()),
        (400, Some("thread.bad_id"))
    );
    // Without an id the server makes one up.
    let (st, fresh) = send(&s, "POST", "/v1/threads", Json::Null);
    assert_eq!(st, 201, "{fresh}");
    assert!(fresh["thread_id"].as_str().unwrap().starts_with("thr-"));

    // First run: nothing before it, no mood; it writes `last`.
    let first = run_on(&s, "t1", "hello");
    assert_eq!(first["result"], "heard hello; before: []; mood: null");
    let state = s.get("/v1/threads/t1/state").json();
    assert_eq!(state["values"], json!({"last": "hello"}));
    assert_eq!(state["version"], 1);

    // An edit at the version read applies; one at a stale version is 409.
    let (st, j) = send(
        &s,
        "PATCH",
        "/v1/threads/t1/state",
        json!({"values": {"mood": "happy"}, "version": 1}),
    );
    assert_eq!(st, 200, "{j}");
    assert_eq!(j["values"], json!({"last": "hello", "mood": "happy"}));
    assert_eq!(j["version"], 2);
    let (st, j) = send(
        &s,
        "PATCH",
        "/v1/threads/t1/state",
        json!({"values": {"mood": "sad"}, "version": 1}),
    );
    assert_eq!(st, 409, "{j}");
    assert_eq!(j["error"]["code"], "thread.version_conflict");
    assert_eq!(
        s.get("/v1/threads/t1/state").json()["values"]["mood"],
        "happy"
    );

    // The second run sees the first's input and answer, and the edit.
    let second = run_on(&s, "t1", "again");
    let text = second["result"].as_str().unwrap();
    assert!(text.starts_with("heard again; before: ["), "{text}");
    assert!(
        text.contains(r#""answer":"heard hello; before: []; mood: null""#),
        "{text}"
    );
    assert!(text.contains(r#""input":{"msg":"hello"}"#), "{text}");
    assert!(text.ends_with("mood: happy"), "{text}");

    // History: both runs, in order, with inputs and results.
    let h = s.get("/v1/threads/t1/history").json();
    let runs = h["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{h}");
    assert_eq!(
        (runs[0]["seq"].as_i64(), runs[1]["seq"].as_i64()),
        (Some(1), Some(2))
    );
    assert_eq!(runs[0]["run_id"], first["id"]);
    assert_eq!(runs[0]["input"], json!({"msg": "hello"}));
    assert_eq!(runs[0]["result"], first["result"]);
    assert_eq!(runs[1]["result"], second["result"]);
    assert_eq!(runs[1]["status"], "succeeded");
    let t = s.get("/v1/threads/t1").json();
    assert_eq!(
        (t["runs"].as_i64(), t["status"].as_str()),
        (Some(2), Some("idle"))
    );
    let listed = s.get("/v1/threads").json();
    assert!(listed["threads"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["thread_id"] == "t1"));

    // PUT replaces the whole state; without a version it always applies.
    let (st, j) = send(
        &s,
        "PUT",
        "/v1/threads/t1/state",
        json!({"values": {"x": 1}}),
    );
    assert_eq!((st, &j["values"]), (200, &json!({"x": 1})), "{j}");
    let (st, j) = send(&s, "PUT", "/v1/threads/t1/state", json!({"nope": 1}));
    assert_eq!(
        (st, j["error"]["code"].as_str()),
        (400, Some("request.invalid"))
    );

    // Unknown ids are 404 everywhere.
    for (method, path, body) in [
        ("GET", "/v1/threads/nope", Json::Null),
        ("GET", "/v1/threads/nope/state", Json::Null),
        ("GET", "/v1/threads/nope/history", Json::Null),
        ("PATCH", "/v1/threads/nope/state", json!({"values": {}})),
        ("DELETE", "/v1/threads/nope", Json::Null),
        (
            "POST",
            "/v1/threads/nope/runs",
            json!({"program": "chat.ais", "args": {"msg": "x"}}),
        ),
    ] {
        let (st, j) = send(&s, method, path, body);
        assert_eq!(st, 404, "{method} {path}: {j}");
        assert_eq!(j["error"]["code"], "thread.not_found", "{method} {path}");
    }
    let (st, _) = send(&s, "POST", "/v1/threads/t1/state", json!({}));
    assert_eq!(st, 405);

    // Delete: the thread goes, its runs stay in the journal.
    let (st, j) = send(&s, "DELETE", "/v1/threads/t1", Json::Null);
    assert_eq!((st, j["deleted"].as_bool()), (200, Some(true)), "{j}");
    assert_eq!(s.get("/v1/threads/t1").status, 404);
    let id = first["id"].as_str().unwrap();
    assert_eq!(
        s.get(&format!("/v1/runs/{id}")).json()["status"],
        "succeeded"
    );
}

#[test]
fn runs_on_one_thread_take_turns_or_are_rejected_while_one_is_under_way() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "slow.ais", SLOW);
    // Several executors: only the thread keeps its runs apart.
    let s = Server::start(
        dir.path(),
        &[&p],
        &["--sim-delay-scale", "5", "--max-concurrent-runs", "4"],
        &[],
    );
    let (st, _) = send(&s, "POST", "/v1/threads", json!({"thread_id": "q"}));
    assert_eq!(st, 201);
    let start = |msg: &str, strategy: &str| {
        send(
            &s,
            "POST",
            "/v1/threads/q/runs",
            json!({"program": "slow.ais", "args": {"msg": msg}, "multitask_strategy": strategy}),
        )
    };
    let (st, a) = start("a", "enqueue");
    assert_eq!(st, 201, "{a}");
    let (st, b) = start("b", "enqueue");
    assert_eq!(st, 201, "{b}");
    let (st, c) = start("c", "enqueue");
    assert_eq!(st, 201, "{c}");
    // While they are under way, `reject` refuses.
    let (st, r) = start("r", "reject");
    assert_eq!(
        (st, r["error"]["code"].as_str()),
        (409, Some("thread.busy")),
        "{r}"
    );
    assert_eq!(s.get("/v1/threads/q").json()["status"], "busy");
    let (st, r) = start("r", "sometimes");
    assert_eq!(st, 400, "{r}");

    let results: Vec<String> = [&a, &b, &c]
        .iter()
        .map(|r| {
            let j = s.wait_final(r["id"].as_str().unwrap());
            assert_eq!(j["status"], "succeeded", "{j}");
            j["result"].as_str().unwrap().to_string()
        })
        .collect();
    // Each saw every earlier one completed: they ran one after another,
    // in the order accepted.
    assert_eq!(results[0], "a after []");
    assert!(results[1].starts_with("b after [{"), "{}", results[1]);
    assert_eq!(results[1].matches(r#""status":"completed""#).count(), 1);
    assert!(results[1].contains(r#""answer":"a after []""#));
    assert_eq!(results[2].matches(r#""status":"completed""#).count(), 2);
    assert!(results[2].contains(r#""input":{"msg":"b"}"#));
    // Once idle, `reject` accepts.
    let (st, r) = start("d", "reject");
    assert_eq!(st, 201, "{r}");
    assert_eq!(
        s.wait_final(r["id"].as_str().unwrap())["status"],
        "succeeded"
    );
}

fn out_text(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn aisc_run_on_a_thread_and_aisc_threads_show_it() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "chat.ais", CHAT);
    let run = |msg: &str| {
        let o = aisc(
            dir.path(),
            &[
                "run",
                "chat.ais",
                "--thread",
                "cli-1",
                "--quiet",
                "--arg",
                &format!("msg={msg}"),
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out_text(&o)
    };
    assert_eq!(run("one"), "heard one; before: []; mood: null");
    let second = run("two");
    assert!(
        second.contains(r#""answer":"heard one; before: []; mood: null""#),
        "{second}"
    );
    let o = aisc(dir.path(), &["threads", "--json"]);
    assert!(o.status.success());
    let line: Json = serde_json::from_str(&out_text(&o)).unwrap();
    assert_eq!(
        (
            line["thread_id"].as_str(),
            line["runs"].as_i64(),
            line["version"].as_i64()
        ),
        (Some("cli-1"), Some(2), Some(2))
    );
    let o = aisc(dir.path(), &["threads", "show", "cli-1", "--json"]);
    let j: Json = serde_json::from_str(&out_text(&o)).unwrap();
    assert_eq!(j["values"], json!({"last": "two"}));
    assert_eq!(j["history"][1]["input"], json!({"msg": "two"}));
    let o = aisc(dir.path(), &["threads", "show", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    let o = aisc(
        dir.path(),
        &["run", "chat.ais", "--thread", "a/b", "--arg", "msg=x"],
    );
    assert_eq!(o.status.code(), Some(2));
}

/// Appends to the state's `trail` what it read there, then waits on a slow
/// LLM call: killed during that call and resumed, the write is replayed,
/// not applied again (the trail grows by one mark per run).
const TRAIL: &str = "agent Trail {
    @entry flow main(msg: str) -> str {
        let before = thread_state(key: \"trail\")
        thread_set(key: \"trail\", value: \"{before}+\")
        let said = ask(\"Say \" + msg)
        return \"done {msg}\"
    }
}
";

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..2400 {
        if done() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn a_run_killed_after_its_state_write_and_resumed_does_not_write_again() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "trail.ais", TRAIL);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_aisc"))
        .args([
            "run",
            "trail.ais",
            "--thread",
            "k",
            "--quiet",
            "--sim-delay-scale",
            "100000",
            "--arg",
            "msg=x",
        ])
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env_remove("OPENAI_API_KEY")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let state = |d: &Path| -> Json {
        let o = aisc(d, &["threads", "show", "k", "--json"]);
        serde_json::from_str(&out_text(&o)).unwrap_or(Json::Null)
    };
    // The write is durable once the thread's version moved.
    wait_for("the state write", || state(dir.path())["version"] == 1);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(state(dir.path())["values"]["trail"], "null+");

    let o = aisc(dir.path(), &["resume", "last", "--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(out_text(&o), "done x");
    let after = state(dir.path());
    assert_eq!(after["values"]["trail"], "null+", "{after}");
    assert_eq!(after["version"], 1, "{after}");
    assert_eq!(after["history"][0]["status"], "completed");
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn on_a_postgresql_store_a_thread_outlives_a_killed_server() {
    let pg = ais_testkit::pg::PgServer::start();
    let url = pg.database("threads");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let p = write(dir, "chat.ais", CHAT);
    let args = [
        "--store",
        url.as_str(),
        "--memory",
        ":memory:",
        "--sim-delay-scale",
        "0",
    ];
    let mut s = Server::start(dir, &[&p], &args, &[]);
    let (st, _) = send(&s, "POST", "/v1/threads", json!({"thread_id": "pg-1"}));
    assert_eq!(st, 201);
    let first = run_on(&s, "pg-1", "hello");
    assert_eq!(first["result"], "heard hello; before: []; mood: null");
    let (st, j) = send(
        &s,
        "PATCH",
        "/v1/threads/pg-1/state",
        json!({"values": {"mood": "calm"}, "version": 1}),
    );
    assert_eq!(st, 200, "{j}");
    // kill -9 between the runs.
    s.child.kill().unwrap();
    s.child.wait().unwrap();

    let s = Server::start(dir, &[&p], &args, &[]);
    let second = run_on(&s, "pg-1", "again");
    let text = second["result"].as_str().unwrap();
    assert!(
        text.contains(r#""answer":"heard hello; before: []; mood: null""#),
        "{text}"
    );
    assert!(text.ends_with("mood: calm"), "{text}");
    let (st, j) = send(
        &s,
        "PATCH",
        "/v1/threads/pg-1/state",
        json!({"values": {"mood": "x"}, "version": 2}),
    );
    assert_eq!(
        (st, j["error"]["code"].as_str()),
        (409, Some("thread.version_conflict"))
    );
    let h = s.get("/v1/threads/pg-1/history").json();
    assert_eq!(h["runs"].as_array().map(Vec::len), Some(2), "{h}");
    // Another process reads the same thread from the store.
    let o = aisc(dir, &["threads", "show", "pg-1", "--json", "--store", &url]);
    let j: Json = serde_json::from_str(&out_text(&o)).unwrap();
    assert_eq!(
        (j["runs"].as_i64(), j["version"].as_i64()),
        (Some(2), Some(3))
    );
}

#[test]
fn a2a_messages_with_one_context_id_are_runs_on_one_thread() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "chat.ais", CHAT);
    let s = Server::start(dir.path(), &[&p], &["--sim-delay-scale", "0"], &[]);
    let send_msg = |context: Option<&str>, text: &str| -> Json {
        let mut message = json!({"messageId": format!("m-{text}"), "role": "ROLE_USER",
                                 "parts": [{"text": text}]});
        if let Some(c) = context {
            message["contextId"] = c.into();
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                          "params": {"message": message}});
        let text = body.to_string();
        let r = request(
            s.addr,
            "POST",
            "/a2a/Chat",
            &[("Content-Type", "application/json"), ("A2A-Version", "1.0")],
            Some(text.as_bytes()),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let j = r.json();
        j["result"]["task"].clone()
    };
    let t1 = send_msg(Some("conv-7"), "hello");
    assert_eq!(t1["contextId"], "conv-7", "{t1}");
    let t2 = send_msg(Some("conv-7"), "again");
    assert_eq!(t2["contextId"], "conv-7");
    let text = t2["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(text.contains(r#""answer":"heard hello"#), "{t2}");
    let h = s.get("/v1/threads/conv-7/history").json();
    assert_eq!(h["runs"].as_array().map(Vec::len), Some(2), "{h}");
    // Without a context id the reply names a new thread to continue.
    let t3 = send_msg(None, "fresh");
    let ctx = t3["contextId"].as_str().unwrap().to_string();
    assert!(ctx.starts_with("ctx-"), "{t3}");
    s.wait_final(t3["id"].as_str().unwrap());
    let t4 = send_msg(Some(&ctx), "more");
    let r4 = s.wait_final(t4["id"].as_str().unwrap());
    assert!(
        r4["result"]
            .as_str()
            .unwrap()
            .contains(r#""input":{"msg":"fresh"}"#),
        "{r4}"
    );
}

#[test]
#[ignore = "needs the A2A Python SDK: run ./test"]
fn the_official_a2a_client_continues_a_conversation_by_its_context_id() {
    let python = serve_support::sdk_venv(
        "A2A",
        &["a2a-sdk==1.3.0", "httpx==0.28.1"],
        "import a2a.client, httpx",
    );
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "chat.ais", CHAT);
    let s = Server::start(dir.path(), &[&p], &["--sim-delay-scale", "0"], &[]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/a2a/thread_client.py");
    let o = std::process::Command::new(python)
        .arg(script)
        .arg(format!("http://{}/a2a/Chat", s.addr))
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "client failed: {out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: Json = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(r["first"]["contextId"], "sdk-conv", "{r}");
    assert_eq!(r["first"]["text"], "heard hello; before: []; mood: null");
    assert_eq!(r["second"]["contextId"], "sdk-conv");
    let second = r["second"]["text"].as_str().unwrap();
    assert!(
        second.contains(r#""answer":"heard hello; before: []; mood: null""#),
        "{r}"
    );
    let ctx = r["fresh"]["contextId"].as_str().unwrap();
    assert!(ctx.starts_with("ctx-"), "{r}");
    assert_eq!(r["follow"]["contextId"], ctx);
    assert!(
        r["follow"]["text"]
            .as_str()
            .unwrap()
            .contains(r#""input":{"msg":"fresh"}"#),
        "{r}"
    );
    assert_eq!(r["follow"]["state"], "TASK_STATE_COMPLETED");
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn runs_on_a_thread_handed_to_a_worker_see_the_thread_too() {
    let pg = ais_testkit::pg::PgServer::start();
    let url = pg.database("threads_fleet");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let p = write(dir, "chat.ais", CHAT);
    let s = Server::start(
        dir,
        &[&p],
        &["--store", &url, "--memory", ":memory:", "--enqueue"],
        &[],
    );
    let mut w = serve_support::worker(
        dir,
        &[
            "--store",
            &url,
            "--memory",
            ":memory:",
            "--poll-ms",
            "50",
            "--lease-secs",
            "5",
        ],
        &[],
    );
    let (st, _) = send(&s, "POST", "/v1/threads", json!({"thread_id": "fleet-1"}));
    assert_eq!(st, 201);
    let first = run_on(&s, "fleet-1", "hello");
    assert_eq!(first["result"], "heard hello; before: []; mood: null");
    let second = run_on(&s, "fleet-1", "again");
    let text = second["result"].as_str().unwrap();
    assert!(
        text.contains(r#""answer":"heard hello; before: []; mood: null""#),
        "{text}"
    );
    let state = s.get("/v1/threads/fleet-1/state").json();
    assert_eq!(state["values"]["last"], "again", "{state}");
    assert_eq!(state["version"], 2);
    let _ = w.kill();
    let _ = w.wait();
}
