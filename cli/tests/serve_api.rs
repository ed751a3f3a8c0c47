//! `aisc serve` against real clients: the run API, SSE, cancel and resume,
//! authentication, limits, many concurrent clients, and a server killed
//! with SIGKILL then restarted on the same journal.

mod serve_support;

use ais_testkit::mock::{MockReply, MockServer};
use serde_json::{json, Value as Json};
use serve_support::{aisc, mock_config, request, sse_events, write, Server};
use std::collections::HashSet;
use std::time::Duration;

const ECHO: &str = "agent Echo {\n    @entry flow main(topic: str) -> str {\n        return ask(\"Say \" + topic)\n    }\n}\n";
const PURE: &str = "agent Pure {\n    @entry flow main(topic: str) -> str {\n        return \"about \" + topic\n    }\n}\n";

fn start_run(s: &Server, body: Json) -> String {
    let r = s.post("/v1/runs", &body.to_string());
    assert_eq!(r.status, 201, "{}", r.body);
    let j = r.json();
    assert!(
        matches!(
            j["status"].as_str(),
            Some("queued" | "running" | "succeeded")
        ),
        "{j}"
    );
    j["id"].as_str().expect("id").to_string()
}

#[test]
fn runs_are_started_listed_filtered_and_journaled_like_aisc_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "echo.ais", ECHO);
    let s = Server::start(dir.path(), &[&p], &["--sim-delay-scale", "0"], &[]);
    assert_eq!(s.get("/health").json()["status"], "ok");

    // Waiting for the result in the same request.
    let r = s.post(
        "/v1/runs?wait=true",
        &json!({"program": "echo.ais", "args": {"topic": "bees"}}).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let j = r.json();
    assert_eq!(j["status"], "succeeded", "{j}");
    assert!(
        j["result"].as_str().is_some_and(|t| t.contains("bees")),
        "{j}"
    );
    assert_eq!(j["summary"]["llm_calls"], 1, "{j}");
    let id = j["id"].as_str().expect("id").to_string();

    // By agent name, polled.
    let id2 = start_run(&s, json!({"program": "Echo", "args": {"topic": "ants"}}));
    assert_ne!(id, id2);
    assert_eq!(s.wait_final(&id2)["status"], "succeeded");

    let all = s.get("/v1/runs").json();
    let ids: Vec<&str> = all["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert!(
        ids.contains(&id.as_str()) && ids.contains(&id2.as_str()),
        "{all}"
    );
    assert_eq!(
        s.get("/v1/runs?status=succeeded").json()["runs"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    assert_eq!(
        s.get("/v1/runs?status=failed").json()["runs"]
            .as_array()
            .map(Vec::len),
        Some(0)
    );
    assert_eq!(s.get("/v1/runs?status=bogus").status, 400);

    let m = s.get("/metrics");
    assert_eq!(m.status, 200);
    assert!(
        m.body.contains("ais_runs{status=\"succeeded\"} 2"),
        "{}",
        m.body
    );
    assert!(
        m.body
            .contains("ais_op_duration_seconds_count{op=\"ask\"} 2"),
        "{}",
        m.body
    );
    assert!(
        m.body.contains("ais_llm_calls_total{backend=\"sim\"} 2"),
        "{}",
        m.body
    );
    assert!(m.body.contains("ais_queue_depth 0"), "{}", m.body);

    // The same journal as `aisc run`: `aisc runs` lists the served runs.
    let o = aisc(dir.path(), &["runs", "--json"]);
    let listed = String::from_utf8_lossy(&o.stdout);
    assert!(listed.contains(&id) && listed.contains(&id2), "{listed}");
}

#[test]
fn bad_requests_get_a_clear_4xx_and_the_server_keeps_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "echo.ais", ECHO);
    let s = Server::start(
        dir.path(),
        &[&p],
        &["--sim-delay-scale", "0", "--max-body", "4096"],
        &[],
    );
    let cases: [(&str, u16, &str); 7] = [
        ("{not json", 400, "request.malformed_json"),
        ("[1, 2]", 400, "request.invalid"),
        (
            r#"{"program": "echo.ais", "args": {"topic": "x"}, "extra": 1}"#,
            400,
            "request.invalid",
        ),
        (r#"{"program": "nope.ais"}"#, 404, "program.unknown"),
        (
            r#"{"program": "echo.ais", "args": {}}"#,
            400,
            "run.bad_args",
        ),
        (
            r#"{"program": "echo.ais", "args": {"topic": "x", "other": 1}}"#,
            400,
            "run.bad_args",
        ),
        (
            r#"{"program": "echo.ais", "entry": "Echo.nope", "args": {"topic": "x"}}"#,
            400,
            "run.bad_entry",
        ),
    ];
    for (body, status, code) in cases {
        let r = s.post("/v1/runs", body);
        assert_eq!(r.status, status, "{body}: {}", r.body);
        let e = r.json();
        assert_eq!(e["error"]["code"], code, "{body}: {e}");
        assert!(
            e["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{e}"
        );
        assert!(
            e["error"]["hint"].as_str().is_some_and(|m| !m.is_empty()),
            "{e}"
        );
    }
    // Oversized: announced by Content-Length, refused before it is read.
    let big = format!(
        "{{\"program\": \"echo.ais\", \"args\": {{\"topic\": \"{}\"}}}}",
        "x".repeat(1 << 20)
    );
    let r = s.post("/v1/runs", &big);
    assert_eq!(r.status, 413, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "request.too_large");
    // Unknown ids and endpoints.
    assert_eq!(
        s.get("/v1/runs/nope").json()["error"]["code"],
        "run.not_found"
    );
    assert_eq!(s.get("/nowhere").status, 404);
    assert_eq!(s.post("/v1/runs/nope/cancel", "").status, 404);
    // Still serving.
    assert_eq!(s.get("/health").status, 200);
    let r = s.post(
        "/v1/runs?wait=true",
        r#"{"program": "echo.ais", "args": {"topic": "ok"}}"#,
    );
    assert_eq!(r.json()["status"], "succeeded", "{}", r.body);
    assert!(s
        .get("/metrics")
        .body
        .contains("ais_http_responses_total{code=\"413\"} 1"));
}

#[test]
fn a_non_loopback_listener_needs_a_token_and_requests_without_it_get_401() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "echo.ais", ECHO);
    // Refused at start without a token.
    let o = aisc(dir.path(), &["serve", &p, "--listen", "0.0.0.0:0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("AIS_SERVE_TOKEN"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // With a token: every request needs it (loopback too, once one is set).
    let s = Server::start(
        dir.path(),
        &[&p],
        &["--sim-delay-scale", "0"],
        &[("AIS_SERVE_TOKEN", "s3cret")],
    );
    for headers in [
        vec![],
        vec![("Authorization", "Bearer wrong")],
        vec![("Authorization", "Basic s3cret")],
    ] {
        for path in ["/health", "/v1/runs", "/metrics"] {
            let r = request(s.addr, "GET", path, &headers, None);
            assert_eq!(r.status, 401, "{path} {headers:?}");
            assert!(r.body.is_empty(), "401 tells nothing: {}", r.body);
        }
    }
    let r = request(
        s.addr,
        "POST",
        "/v1/runs?wait=true",
        &[("Authorization", "Bearer s3cret")],
        Some(br#"{"program": "echo.ais", "args": {"topic": "t"}}"#),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["status"], "succeeded");
    drop(s);

    // A non-loopback listener starts with a token.
    let s = Server::start(
        dir.path(),
        &[&p],
        &["--sim-delay-scale", "0", "--listen", "0.0.0.0:0"],
        &[("AIS_SERVE_TOKEN", "s3cret")],
    );
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], s.addr.port()));
    assert_eq!(request(addr, "GET", "/health", &[], None).status, 401);
    assert_eq!(
        request(
            addr,
            "GET",
            "/health",
            &[("Authorization", "Bearer s3cret")],
            None
        )
        .status,
        200
    );
}

#[test]
fn events_stream_in_order_with_streamed_text_and_resume_after_last_event_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockServer::start().expect("mock");
    mock.set_stream_interval(Duration::from_millis(20));
    mock.push(MockReply::Content("one two three\nfour five".into()));
    let config = mock_config(dir.path(), &mock.openai_url());
    let p = write(dir.path(), "echo.ais", ECHO);
    let s = Server::start(dir.path(), &[&p], &["--config", &config], &[]);
    let id = start_run(&s, json!({"program": "echo.ais", "args": {"topic": "x"}}));
    // Opened while the run goes on: the stream ends with its `done`.
    let r = s.get(&format!("/v1/runs/{id}/events"));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Type"), Some("text/event-stream"));
    let events = sse_events(&r.body);
    let ids: Vec<u64> = events.iter().map(|e| e.0).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as u64).collect::<Vec<_>>(),
        "ids 1, 2, 3, ..."
    );
    let kinds: Vec<&str> = events.iter().map(|e| e.1.as_str()).collect();
    assert_eq!(kinds.first(), Some(&"status"));
    assert_eq!(kinds.last(), Some(&"done"), "{kinds:?}");
    assert_eq!(
        events.last().map(|e| e.2["status"].clone()),
        Some(json!("succeeded"))
    );
    let text: String = events
        .iter()
        .filter(|e| e.1 == "text")
        .filter_map(|e| e.2["text"].as_str())
        .collect();
    assert_eq!(text, "one two three\nfour five");
    // The text of the ask comes before the ask's op event.
    let last_text = kinds.iter().rposition(|k| *k == "text").expect("text");
    let ask = events
        .iter()
        .position(|e| e.1 == "op" && e.2["opcode"] == "ask")
        .expect("ask op");
    assert!(last_text < ask, "{kinds:?}");
    assert!(
        kinds.iter().filter(|k| **k == "text").count() > 1,
        "streamed in pieces: {kinds:?}"
    );

    // Reconnecting after event k replays exactly the events after k.
    for k in [0, 1, ids.len() as u64 / 2, ids.len() as u64 - 1] {
        let r = request(
            s.addr,
            "GET",
            &format!("/v1/runs/{id}/events"),
            &[("Last-Event-ID", &k.to_string())],
            None,
        );
        let again = sse_events(&r.body);
        assert_eq!(again, events[k as usize..].to_vec(), "after {k}");
    }
}

#[test]
fn a_running_run_is_cancelled_and_can_be_resumed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockServer::start().expect("mock");
    mock.push(MockReply::Stall(Duration::from_secs(3600)));
    mock.push(MockReply::Content("after resume".into()));
    let config = mock_config(dir.path(), &mock.openai_url());
    let p = write(dir.path(), "echo.ais", ECHO);
    let s = Server::start(dir.path(), &[&p], &["--config", &config], &[]);
    let id = start_run(&s, json!({"program": "echo.ais", "args": {"topic": "x"}}));
    s.wait_status(&id, "running");
    // The call is in flight at the mock.
    for _ in 0..3000 {
        if mock.request_count() == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(mock.request_count(), 1);
    let r = s.post(&format!("/v1/runs/{id}/cancel"), "");
    assert_eq!(r.status, 202, "{}", r.body);
    let j = s.wait_final(&id);
    assert_eq!(j["status"], "cancelled", "{j}");
    assert_eq!(j["error"]["code"], "run.cancelled");
    assert_eq!(
        s.get("/v1/runs?status=cancelled").json()["runs"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    // Ended: cancelling again is a conflict.
    assert_eq!(
        s.post(&format!("/v1/runs/{id}/cancel"), "").json()["error"]["code"],
        "run.finished"
    );
    // Resumed: the call runs again and the run completes.
    let r = s.post(&format!("/v1/runs/{id}/resume"), "");
    assert_eq!(r.status, 202, "{}", r.body);
    let j = s.wait_final(&id);
    assert_eq!(j["status"], "succeeded", "{j}");
    assert_eq!(j["result"], "after resume");
    assert_eq!(j["resumes"], 1);
    assert_eq!(mock.request_count(), 2);
    // A succeeded run is not resumed.
    assert_eq!(s.post(&format!("/v1/runs/{id}/resume"), "").status, 409);
}

#[test]
fn a_queued_run_is_cancelled_before_it_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockServer::start().expect("mock");
    mock.push(MockReply::Stall(Duration::from_secs(3600)));
    let config = mock_config(dir.path(), &mock.openai_url());
    let p = write(dir.path(), "echo.ais", ECHO);
    let s = Server::start(
        dir.path(),
        &[&p],
        &[
            "--config",
            &config,
            "--max-concurrent-runs",
            "1",
            "--queue",
            "1",
        ],
        &[],
    );
    let first = start_run(&s, json!({"program": "echo.ais", "args": {"topic": "a"}}));
    s.wait_status(&first, "running");
    // Its call is at the mock (a loaded machine may take a while to send it).
    for _ in 0..3000 {
        if mock.request_count() == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let second = start_run(&s, json!({"program": "echo.ais", "args": {"topic": "b"}}));
    assert_eq!(
        s.get(&format!("/v1/runs/{second}")).json()["status"],
        "queued"
    );
    // Full: one running, one queued.
    let r = s.post(
        "/v1/runs",
        &json!({"program": "echo.ais", "args": {"topic": "c"}}).to_string(),
    );
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.header("Retry-After"), Some("1"));
    assert_eq!(r.json()["error"]["code"], "server.overloaded");
    assert!(s.get("/metrics").body.contains("ais_queue_depth 1"));
    assert_eq!(s.post(&format!("/v1/runs/{second}/cancel"), "").status, 202);
    assert_eq!(
        s.get(&format!("/v1/runs/{second}")).json()["status"],
        "cancelled"
    );
    assert_eq!(s.post(&format!("/v1/runs/{first}/cancel"), "").status, 202);
    assert_eq!(s.wait_final(&first)["status"], "cancelled");
    // Only the first run's call was ever made.
    assert_eq!(mock.request_count(), 1);
}

#[test]
fn two_hundred_concurrent_clients_lose_no_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "pure.ais", PURE);
    let s = Server::start(dir.path(), &[&p], &[], &[]);
    let addr = s.addr;
    let handles: Vec<_> = (0..200)
        .map(|i| {
            std::thread::spawn(move || {
                let body =
                    json!({"program": "pure.ais", "args": {"topic": format!("t{i}")}}).to_string();
                let r = request(addr, "POST", "/v1/runs", &[], Some(body.as_bytes()));
                assert_eq!(r.status, 201, "{}", r.body);
                (i, r.json()["id"].as_str().expect("id").to_string())
            })
        })
        .collect();
    let started: Vec<(usize, String)> = handles
        .into_iter()
        .map(|h| h.join().expect("client"))
        .collect();
    let ids: HashSet<&str> = started.iter().map(|(_, id)| id.as_str()).collect();
    assert_eq!(ids.len(), 200, "every run has its own id");
    for (i, id) in &started {
        let j = s.wait_final(id);
        assert_eq!(j["status"], "succeeded", "{j}");
        assert_eq!(j["result"], format!("about t{i}"));
    }
    let listed = s.get("/v1/runs?status=succeeded").json();
    assert_eq!(listed["runs"].as_array().map(Vec::len), Some(200));
    let o = aisc(dir.path(), &["runs", "--json"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 200);
}

#[test]
fn after_kill_9_a_restarted_server_lists_every_run_and_resumes_the_interrupted_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockServer::start().expect("mock");
    let config = mock_config(dir.path(), &mock.openai_url());
    let echo = write(dir.path(), "echo.ais", ECHO);
    let pure = write(dir.path(), "pure.ais", PURE);
    let mut done = Vec::new();
    let mut inflight = Vec::new();
    {
        let s = Server::start(dir.path(), &[&echo, &pure], &["--config", &config], &[]);
        for i in 0..3 {
            let r = s.post(
                "/v1/runs?wait=true",
                &json!({"program": "pure.ais", "args": {"topic": i.to_string()}}).to_string(),
            );
            assert_eq!(r.json()["status"], "succeeded");
            done.push(r.json()["id"].as_str().expect("id").to_string());
        }
        mock.push_n(MockReply::Stall(Duration::from_secs(3600)), 2);
        for i in 0..2 {
            let id = start_run(
                &s,
                json!({"program": "echo.ais", "args": {"topic": format!("slow{i}")}}),
            );
            s.wait_status(&id, "running");
            inflight.push(id);
        }
        for _ in 0..3000 {
            if mock.request_count() == 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(mock.request_count(), 2);
        // Dropping the server sends SIGKILL.
    }
    mock.push(MockReply::Content("resumed reply".into()));
    let s = Server::start(dir.path(), &[&echo, &pure], &["--config", &config], &[]);
    let runs = s.get("/v1/runs").json();
    let listed: Vec<(String, String)> = runs["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap_or("").to_string(),
                r["status"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(listed.len(), 5, "{runs}");
    for id in &done {
        assert!(listed.contains(&(id.clone(), "succeeded".into())), "{runs}");
        // A finished run's events replay, ending with `done`.
        let ev = sse_events(&s.get(&format!("/v1/runs/{id}/events")).body);
        assert_eq!(
            ev.last().map(|e| (e.1.clone(), e.2["status"].clone())),
            Some(("done".into(), json!("succeeded")))
        );
    }
    for id in &inflight {
        assert!(listed.contains(&(id.clone(), "paused".into())), "{runs}");
    }
    assert_eq!(
        s.get(&format!("/v1/runs/{}", done[0])).json()["result"],
        "about 0"
    );
    // Resuming an interrupted run finishes it (its unanswered call is made again).
    let r = s.post(&format!("/v1/runs/{}/resume", inflight[0]), "{}");
    assert_eq!(r.status, 202, "{}", r.body);
    let j = s.wait_final(&inflight[0]);
    assert_eq!(j["status"], "succeeded", "{j}");
    assert_eq!(j["result"], "resumed reply");
    assert_eq!(mock.request_count(), 3);
    let o = aisc(dir.path(), &["runs", "--json"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 5);
}

/// A served run that reaches `pause` is `paused` with what it waits for;
/// resuming it needs `input`, which becomes the `pause` op's value; the
/// LLM call before the pause is not repeated.
#[test]
fn a_paused_run_is_answered_through_resume_with_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockServer::start().expect("mock");
    mock.push(MockReply::Content("refund of 40".into()));
    let config = mock_config(dir.path(), &mock.openai_url());
    let p = write(
        dir.path(),
        "approve.ais",
        "agent Approve {\n    @entry flow main(topic: str) -> str {\n        let s = ask(\"Summarise \" + topic)\n        let ok = pause(\"Approve? {s}\")\n        return \"{ok}: {s}\"\n    }\n}\n",
    );
    let s = Server::start(dir.path(), &[&p], &["--config", &config], &[]);
    let id = start_run(
        &s,
        json!({"program": "approve.ais", "args": {"topic": "x"}}),
    );
    let j = s.wait_final(&id);
    assert_eq!(j["status"], "paused", "{j}");
    assert_eq!(j["error"]["cause"], "run.paused", "{j}");
    assert!(
        j["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Approve? refund of 40")),
        "{j}"
    );
    // Without the answer it stays paused.
    let r = s.post(&format!("/v1/runs/{id}/resume"), "");
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "run.waiting_for_input");
    let r = s.post(
        &format!("/v1/runs/{id}/resume"),
        &json!({"input": "approved"}).to_string(),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let j = s.wait_final(&id);
    assert_eq!(j["status"], "succeeded", "{j}");
    assert_eq!(j["result"], "approved: refund of 40");
    assert_eq!(mock.request_count(), 1);
}

/// A long-lived server keeps only the newest ended runs in memory
/// (`--keep-runs`); older ones are still listed, described with their
/// result and their events, read back from the journal and the event
/// segments (one per server process, no file per run). A restarted server
/// keeps the events of the newest runs (`--keep-event-files`), removing
/// whole older segments.
#[test]
fn old_runs_leave_memory_but_stay_retrievable_and_event_files_are_pruned() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pure = write(dir.path(), "pure.ais", PURE);
    let mut ids = Vec::new();
    let run = |s: &Server, i: usize| {
        let r = s.post(
            "/v1/runs?wait=true",
            &json!({"program": "pure.ais", "args": {"topic": format!("t{i}")}}).to_string(),
        );
        assert_eq!(r.json()["status"], "succeeded", "{}", r.body);
        r.json()["id"].as_str().expect("id").to_string()
    };
    let events = dir.path().join(".apxm/serve/events");
    let segments = || {
        std::fs::read_dir(&events)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".seg"))
                    .count()
            })
            .unwrap_or(0)
    };
    {
        let s = Server::start(dir.path(), &[&pure], &["--keep-runs", "2"], &[]);
        for i in 0..5 {
            ids.push(run(&s, i));
        }
        let all = s.get("/v1/runs").json();
        let listed: Vec<&str> = all["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .filter_map(|r| r["id"].as_str())
            .collect();
        for id in &ids {
            assert!(listed.contains(&id.as_str()), "{id} not listed: {all}");
        }
        // The oldest left memory: the journal answers with its result.
        let first = s.get(&format!("/v1/runs/{}", ids[0])).json();
        assert_eq!(first["result"], "about t0", "{first}");
        let ev = s.get(&format!("/v1/runs/{}/events", ids[0]));
        assert_eq!(ev.status, 200);
        assert!(ev.body.contains("event: status"), "{}", ev.body);
        assert!(ev.body.contains("event: done"), "{}", ev.body);
    }
    assert_eq!(segments(), 1, "five runs, one segment");
    {
        let s = Server::start(dir.path(), &[&pure], &[], &[]);
        for i in 5..7 {
            ids.push(run(&s, i));
        }
    }
    assert_eq!(segments(), 2);
    let s = Server::start(dir.path(), &[&pure], &["--keep-event-files", "2"], &[]);
    // The second segment holds the two newest runs: the first goes.
    assert_eq!(segments(), 1);
    let ev = s.get(&format!("/v1/runs/{}/events", ids[6]));
    assert!(ev.body.contains("event: status"), "{}", ev.body);
    assert!(ev.body.contains("event: done"), "{}", ev.body);
    // A pruned run's events: only the end the journal knows.
    let ev = s.get(&format!("/v1/runs/{}/events", ids[0]));
    assert!(!ev.body.contains("event: status"), "{}", ev.body);
    assert!(ev.body.contains("event: done"), "{}", ev.body);
}

/// A changed file is served only after `POST /v1/reload`: new runs, A2A
/// skills and MCP tools then use the new program. A file that does not
/// compile changes nothing (422) and the server keeps serving.
#[test]
fn a_changed_file_is_served_after_a_reload_and_a_broken_one_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pure = write(dir.path(), "pure.ais", PURE);
    let s = Server::start(dir.path(), &[&pure], &[], &[]);
    let run = |s: &Server| {
        let r = s.post(
            "/v1/runs?wait=true",
            &json!({"program": "pure.ais", "args": {"topic": "x"}}).to_string(),
        );
        r.json()["result"].clone()
    };
    assert_eq!(run(&s), "about x");
    let v2 = "agent Pure {\n    discoverable: [shout]\n    @entry flow main(topic: str) -> str {\n        return \"now about \" + topic\n    }\n    flow shout(topic: str) -> str {\n        return topic + \"!\"\n    }\n}\n";
    std::fs::write(dir.path().join("pure.ais"), v2).expect("write");
    // Not before it is asked.
    assert_eq!(run(&s), "about x");
    let skills = |s: &Server| {
        s.get("/a2a/Pure/.well-known/agent-card.json").json()["skills"]
            .as_array()
            .map(Vec::len)
    };
    assert_eq!(skills(&s), Some(1));
    let r = s.post("/v1/reload", "");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["programs"], json!(["pure.ais"]));
    assert_eq!(run(&s), "now about x");
    assert_eq!(skills(&s), Some(2));
    // A broken edit: refused, the last good program stays.
    std::fs::write(
        dir.path().join("pure.ais"),
        "agent Pure {\n    flow main( {\n}\n",
    )
    .expect("write");
    let r = s.post("/v1/reload", "");
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "reload.failed", "{}", r.body);
    assert_eq!(run(&s), "now about x");
}

/// A paused run's hint says how to answer it (resume with `input`), not
/// to wrap it in `try` (which does not catch a pause).
#[test]
fn a_paused_runs_hint_says_how_to_answer_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(
        dir.path(),
        "ask.ais",
        "agent Ask {\n    @entry flow main(topic: str) -> str {\n        let ok = pause(\"Approve {topic}?\")\n        return \"{ok}\"\n    }\n}\n",
    );
    let s = Server::start(dir.path(), &[&p], &["--sim-delay-scale", "0"], &[]);
    let id = start_run(&s, json!({"program": "ask.ais", "args": {"topic": "x"}}));
    let j = s.wait_final(&id);
    assert_eq!(j["status"], "paused", "{j}");
    let hint = j["error"]["hint"].as_str().unwrap_or_default();
    assert!(
        hint.contains(&format!("/v1/runs/{id}/resume")) && hint.contains("\"input\""),
        "{j}"
    );
    assert!(!hint.contains("try {"), "{j}");
    let r = s.post(&format!("/v1/runs/{id}/resume"), r#"{"input": "yes"}"#);
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(s.wait_final(&id)["result"], "yes");
}
