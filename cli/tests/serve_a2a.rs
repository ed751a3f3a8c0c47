//! The A2A server under `aisc serve` (agent cards, `SendMessage`,
//! `SendStreamingMessage`, `GetTask`, `CancelTask`) driven by the official
//! A2A Python SDK (`a2a-sdk` on PyPI) from the virtual environment `./test`
//! provisions (`scripts/provision/python.sh`; that test is `#[ignore =
//! "needs the A2A Python SDK: run ./test"]`), plus the JSON-RPC edges the
//! SDK does not reach.

mod serve_support;

use serde_json::{json, Value as Json};
use serve_support::{request, write, Server};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The SDK version the test runs (pinned: it decides the protocol version
/// and the shapes it parses).
const A2A_SDK: &str = "a2a-sdk==1.3.0";

const ECHO: &str = "agent Echo {\n    @entry flow main(topic: str) -> str {\n        return ask(\"Say \" + topic)\n    }\n}\n";
const PAIR: &str = "agent Pair {\n    @entry flow main(a: str, n: number) -> list<number> {\n        return [n, n + 1]\n    }\n}\n";

/// The provisioned venv's python, with the pinned SDK.
fn venv_python() -> PathBuf {
    serve_support::sdk_venv(
        "A2A",
        &[A2A_SDK, "httpx==0.28.1"],
        "import a2a.client, httpx",
    )
}

fn client(python: &Path, dir: &Path, args: &[&str]) -> Json {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/a2a/client.py");
    let o = Command::new(python)
        .arg(script)
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .output()
        .expect("the A2A client runs");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "client failed: {out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("client output is not JSON ({e}): {out}"))
}

fn result_text(task: &Json) -> &str {
    task["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or("")
}

#[test]
#[ignore = "needs the A2A Python SDK: run ./test"]
fn the_official_a2a_client_reads_the_card_sends_streams_gets_and_cancels() {
    let python = venv_python();
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "echo.ais", ECHO);
    let fast = Server::start(dir.path(), &[&p], &["--sim-delay-scale", "0"], &[]);
    // One run at a time, each slow: a second task waits and is cancelled.
    let slow_dir = tempfile::tempdir().expect("tempdir");
    let sp = write(slow_dir.path(), "echo.ais", ECHO);
    let slow = Server::start(
        slow_dir.path(),
        &[&sp],
        &["--sim-delay-scale", "1000", "--max-concurrent-runs", "1"],
        &[],
    );
    let r = client(
        &python,
        dir.path(),
        &[
            &format!("http://{}/a2a/Echo", fast.addr),
            &format!("http://{}/a2a/Echo", slow.addr),
        ],
    );

    // The card, as the SDK parsed it.
    let card = &r["card"];
    assert_eq!(card["name"], "Echo", "{card}");
    assert_eq!(card["capabilities"]["streaming"], true, "{card}");
    let iface = &card["supportedInterfaces"][0];
    assert_eq!(iface["protocolBinding"], "JSONRPC", "{card}");
    assert_eq!(iface["protocolVersion"], "1.0", "{card}");
    assert_eq!(
        iface["url"],
        format!("http://{}/a2a/Echo", fast.addr),
        "{card}"
    );
    assert_eq!(card["skills"][0]["id"], "Echo.main", "{card}");
    let schema = &card["capabilities"]["extensions"][0]["params"]["Echo.main"]["input"];
    assert_eq!(schema["required"], json!(["topic"]), "{card}");
    assert_eq!(schema["properties"]["topic"]["type"], "string", "{card}");

    // A text part is the single str parameter; the result is the artifact.
    let t = &r["blocking"][0]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    assert!(result_text(t).contains("Say bees"), "{t}");
    let id = t["id"].as_str().expect("task id");
    // Task id = run id.
    assert_eq!(
        fast.get(&format!("/v1/runs/{id}")).json()["status"],
        "succeeded"
    );
    assert_eq!(r["get"]["id"], id, "{r}");
    assert_eq!(r["get"]["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    assert!(result_text(&r["get"]).contains("Say bees"), "{r}");
    // A data part carries the arguments by name.
    assert!(
        result_text(&r["data"][0]["task"]).contains("Say wasps"),
        "{r}"
    );
    assert_eq!(r["get_unknown"], "TaskNotFoundError", "{r}");
    assert_eq!(r["cancel_done"], "TaskNotCancelableError", "{r}");
    assert_eq!(r["bad_args"], "InvalidParamsError", "{r}");

    // The stream: the task first, its result artifact, and a last status
    // update in a terminal state.
    let ev = r["stream"].as_array().expect("stream events");
    assert!(ev.first().is_some_and(|e| e.get("task").is_some()), "{r}");
    let art = ev
        .iter()
        .find_map(|e| e.get("artifactUpdate"))
        .expect("an artifact update");
    assert!(
        art["artifact"]["parts"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Say ants")),
        "{r}"
    );
    let last = ev.last().expect("events");
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{r}"
    );
    let states: Vec<&str> = ev
        .iter()
        .filter_map(|e| e["statusUpdate"]["status"]["state"].as_str())
        .collect();
    assert_eq!(
        states
            .iter()
            .filter(|s| **s == "TASK_STATE_COMPLETED")
            .count(),
        1,
        "{r}"
    );

    // A2A 0.3 through the SDK's compatibility transport.
    let t = &r["legacy_send"][0]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    assert!(result_text(t).contains("Say moths"), "{r}");
    assert_eq!(r["legacy_get"]["id"], t["id"], "{r}");
    let ev = r["legacy_stream"].as_array().expect("legacy stream");
    let last = ev.last().expect("events");
    assert_eq!(
        last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{r}"
    );
    assert!(
        ev.iter()
            .any(|e| e["artifactUpdate"]["artifact"]["parts"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("Say gnats"))),
        "{r}"
    );

    // Cancel: the waiting task is cancelled, and stays so.
    assert_eq!(r["busy_started"], "TASK_STATE_WORKING", "{r}");
    assert_eq!(r["slow_started"], "TASK_STATE_SUBMITTED", "{r}");
    assert_eq!(r["cancel"]["status"]["state"], "TASK_STATE_CANCELED", "{r}");
    assert_eq!(
        r["get_cancelled"]["status"]["state"], "TASK_STATE_CANCELED",
        "{r}"
    );
    let cid = r["cancel"]["id"].as_str().expect("id");
    assert_eq!(
        slow.get(&format!("/v1/runs/{cid}")).json()["status"],
        "cancelled"
    );
}

fn rpc(s: &Server, path: &str, version: Option<&str>, body: &str) -> (u16, Json) {
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(v) = version {
        headers.push(("A2A-Version", v));
    }
    let r = request(s.addr, "POST", path, &headers, Some(body.as_bytes()));
    (r.status, r.json())
}

#[test]
fn json_rpc_edges_answer_with_the_specs_error_codes_and_the_server_keeps_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = write(dir.path(), "echo.ais", ECHO);
    let p = write(dir.path(), "pair.ais", PAIR);
    let s = Server::start(dir.path(), &[&e, &p], &["--sim-delay-scale", "0"], &[]);
    let v = Some("1.0");
    let code = |j: &Json| j["error"]["code"].as_i64();

    // Each agent has its card; the root card lists every skill.
    let card = s.get("/a2a/Pair/.well-known/agent-card.json").json();
    assert_eq!(card["skills"][0]["id"], "Pair.main", "{card}");
    assert_eq!(card["skills"][0]["inputModes"], json!(["application/json"]));
    let root = s.get("/.well-known/agent-card.json").json();
    assert_eq!(root["skills"].as_array().map(Vec::len), Some(2), "{root}");
    assert_eq!(s.get("/a2a/Nobody/.well-known/agent-card.json").status, 404);

    // Not JSON, not JSON-RPC, unknown method, no version header.
    let (st, j) = rpc(&s, "/a2a/Echo", v, "{nope");
    assert_eq!((st, code(&j)), (200, Some(-32700)), "{j}");
    let (_, j) = rpc(&s, "/a2a/Echo", v, r#"{"id":1,"method":"GetTask"}"#);
    assert_eq!(code(&j), Some(-32600), "{j}");
    let (_, j) = rpc(
        &s,
        "/a2a/Echo",
        v,
        r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}"#,
    );
    assert_eq!(code(&j), Some(-32601), "{j}");
    let (_, j) = rpc(
        &s,
        "/a2a/Echo",
        None,
        r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}"#,
    );
    assert_eq!(code(&j), Some(-32009), "{j}");
    assert_eq!(
        j["error"]["data"][0]["reason"], "VERSION_NOT_SUPPORTED",
        "{j}"
    );
    let (_, j) = rpc(
        &s,
        "/a2a/Echo",
        v,
        r#"{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"x"}}"#,
    );
    assert_eq!((code(&j), j["id"].clone()), (Some(-32001), json!(7)), "{j}");
    let (_, j) = rpc(
        &s,
        "/a2a/Echo",
        v,
        r#"{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{}}"#,
    );
    assert_eq!(code(&j), Some(-32003), "{j}");

    // Parts: a file is refused; a text part cannot fill two parameters;
    // a data part does; the root endpoint needs the skill named.
    let send = |path: &str, parts: Json, meta: Json| {
        let body = json!({"jsonrpc": "2.0", "id": "s", "method": "SendMessage", "params": {"message": {
            "messageId": "m", "role": "ROLE_USER", "parts": parts, "metadata": meta}}});
        rpc(&s, path, v, &body.to_string()).1
    };
    let j = send(
        "/a2a/Echo",
        json!([{"url": "https://example.com/a.png"}]),
        json!({}),
    );
    assert_eq!(code(&j), Some(-32005), "{j}");
    let j = send("/a2a/Pair", json!([{"text": "hi"}]), json!({}));
    assert_eq!(code(&j), Some(-32602), "{j}");
    let j = send(
        "/a2a/Pair",
        json!([{"data": {"a": "x", "n": 2}}]),
        json!({}),
    );
    let t = &j["result"]["task"];
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{j}");
    assert_eq!(t["artifacts"][0]["parts"][0]["data"], json!([2, 3]), "{j}");
    let j = send("/a2a", json!([{"text": "hi"}]), json!({}));
    assert_eq!(code(&j), Some(-32602), "{j}");
    let j = send(
        "/a2a",
        json!([{"text": "hi"}]),
        json!({"skill": "Echo.main"}),
    );
    assert_eq!(
        j["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{j}"
    );
    // A finished task takes no further message.
    let done = j["result"]["task"]["id"].as_str().expect("id").to_string();
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": {
        "messageId": "m2", "role": "ROLE_USER", "taskId": done, "parts": [{"text": "more"}]}}});
    let (_, j) = rpc(&s, "/a2a/Echo", v, &body.to_string());
    assert_eq!(code(&j), Some(-32004), "{j}");
    // A2A 0.3: its method names and shapes when no version (or 0.3) is sent.
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "message/send", "params": {"message": {
        "kind": "message", "messageId": "m9", "role": "user",
        "parts": [{"kind": "data", "data": {"a": "y", "n": 4}}]}}});
    let (_, j) = rpc(&s, "/a2a/Pair", None, &body.to_string());
    let t = &j["result"];
    assert_eq!(
        (t["kind"].as_str(), t["status"]["state"].as_str()),
        (Some("task"), Some("completed")),
        "{j}"
    );
    assert_eq!(
        t["artifacts"][0]["parts"][0],
        json!({"kind": "data", "data": {"result": [4, 5]}}),
        "{j}"
    );
    assert_eq!(t["history"][0]["role"], "user", "{j}");
    let body = json!({"jsonrpc": "2.0", "id": 10, "method": "message/stream", "params": {"message": {
        "kind": "message", "messageId": "m10", "role": "user", "parts": [{"kind": "text", "text": "z"}]}}});
    let r = request(
        s.addr,
        "POST",
        "/a2a/Echo",
        &[("A2A-Version", "0.3")],
        Some(body.to_string().as_bytes()),
    );
    let frames: Vec<Json> = r
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Json>(d).ok())
        .map(|f| f["result"].clone())
        .collect();
    assert_eq!(
        frames.first().map(|f| f["kind"].clone()),
        Some(json!("task")),
        "{}",
        r.body
    );
    let last = frames.last().expect("frames");
    assert_eq!(
        (
            last["kind"].as_str(),
            last["final"].as_bool(),
            last["status"]["state"].as_str()
        ),
        (Some("status-update"), Some(true), Some("completed")),
        "{}",
        r.body
    );
    assert_eq!(
        frames.iter().filter(|f| f["final"] == true).count(),
        1,
        "{}",
        r.body
    );
    // ListTasks sees the tasks of this server.
    let (_, j) = rpc(
        &s,
        "/a2a/Echo",
        v,
        r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"status":"TASK_STATE_COMPLETED"}}"#,
    );
    assert_eq!(j["result"]["totalSize"], 4, "{j}");
    // Still serving.
    assert_eq!(s.get("/health").status, 200);
}

#[test]
fn with_a_token_the_card_declares_bearer_auth_and_a2a_needs_the_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = write(dir.path(), "echo.ais", ECHO);
    let s = Server::start(
        dir.path(),
        &[&e],
        &["--sim-delay-scale", "0"],
        &[("AIS_SERVE_TOKEN", "s3cret")],
    );
    let card = "/a2a/Echo/.well-known/agent-card.json";
    let r = request(s.addr, "GET", card, &[], None);
    assert_eq!((r.status, r.body.as_str()), (401, ""));
    let auth = ("Authorization", "Bearer s3cret");
    let j = request(s.addr, "GET", card, &[auth], None).json();
    assert_eq!(
        j["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"], "Bearer",
        "{j}"
    );
    assert_eq!(
        j["securityRequirements"][0]["schemes"]["bearer"],
        json!({"list": []}),
        "{j}"
    );
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}}"#;
    let r = request(s.addr, "POST", "/a2a/Echo", &[], Some(body));
    assert_eq!(r.status, 401);
    // The version may come as a query parameter too.
    let r = request(
        s.addr,
        "POST",
        "/a2a/Echo?A2A-Version=1.0",
        &[auth],
        Some(body),
    );
    assert_eq!(
        r.json()["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED",
        "{}",
        r.body
    );
}

/// A task whose run stops at a `pause` is `TASK_STATE_INPUT_REQUIRED`, its
/// status message the question; a follow-up message with its `taskId` is
/// the answer and the run resumes to completion. A task that waits for
/// nothing takes no follow-up.
#[test]
fn a_paused_run_is_input_required_and_a_follow_up_message_answers_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = write(
        dir.path(),
        "approve.ais",
        "agent Approver {\n    @entry flow main(amount: str) -> str {\n        let ok = pause(\"Refund {amount}? (yes/no)\")\n        return \"answer: {ok}\"\n    }\n}\n",
    );
    let s = Server::start(dir.path(), &[&a], &["--sim-delay-scale", "0"], &[]);
    let v = Some("1.0");
    let send = |message: Json| {
        rpc(
            &s,
            "/a2a/Approver",
            v,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}})
                .to_string(),
        )
    };
    let (status, r) =
        send(json!({"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "12 EUR"}]}));
    assert_eq!(status, 200, "{r}");
    let task = &r["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r}");
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"], "Refund 12 EUR? (yes/no)",
        "{r}"
    );
    let id = task["id"].as_str().expect("task id").to_string();

    let (_, r) = send(
        json!({"role": "ROLE_USER", "messageId": "m2", "taskId": id, "parts": [{"text": "yes"}]}),
    );
    let task = &r["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"], "answer: yes",
        "{r}"
    );
    assert_eq!(task["history"].as_array().map(Vec::len), Some(2), "{r}");

    // Done: a further message is refused, and says why.
    let (_, r) = send(
        json!({"role": "ROLE_USER", "messageId": "m3", "taskId": id, "parts": [{"text": "again"}]}),
    );
    assert_eq!(r["error"]["code"], -32004, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("does not wait for input"),
        "{r}"
    );
}

/// `SendStreamingMessage` forwards an LLM reply's text as it streams in:
/// artifact updates of an `llm-text` artifact (the first chunk replaces,
/// the next ones append), before the result artifact and the final status.
#[test]
fn streamed_llm_text_reaches_the_a2a_stream_as_artifact_chunks() {
    use ais_testkit::mock::{MockReply, MockServer};
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockServer::start().expect("mock");
    mock.set_stream_interval(std::time::Duration::from_millis(10));
    mock.push(MockReply::Content("one two three four".into()));
    let config = serve_support::mock_config(dir.path(), &mock.openai_url());
    let e = write(dir.path(), "echo.ais", ECHO);
    let s = Server::start(dir.path(), &[&e], &["--config", &config], &[]);
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "SendStreamingMessage", "params": {"message": {
        "messageId": "m7", "role": "ROLE_USER", "parts": [{"text": "bees"}]}}});
    let r = request(
        s.addr,
        "POST",
        "/a2a/Echo",
        &[("A2A-Version", "1.0"), ("Content-Type", "application/json")],
        Some(body.to_string().as_bytes()),
    );
    let frames: Vec<Json> = r
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str::<Json>(d).expect("frame"))
        .map(|f| f["result"].clone())
        .collect();
    let chunks: Vec<&Json> = frames
        .iter()
        .filter(|f| f["artifactUpdate"]["artifact"]["name"] == "llm-text")
        .collect();
    assert!(chunks.len() >= 2, "streamed in pieces: {frames:?}");
    assert_eq!(chunks[0]["artifactUpdate"]["append"], false);
    assert!(chunks[1..]
        .iter()
        .all(|c| c["artifactUpdate"]["append"] == true));
    let text: String = chunks
        .iter()
        .filter_map(|c| c["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(text, "one two three four");
    // Then the result, then the final state.
    let result_at = frames
        .iter()
        .position(|f| f["artifactUpdate"]["artifact"]["artifactId"] == "result")
        .expect("result artifact");
    assert!(frames[..result_at]
        .iter()
        .any(|f| f["artifactUpdate"]["artifact"]["name"] == "llm-text"));
    assert_eq!(
        frames.last().expect("frames")["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}
