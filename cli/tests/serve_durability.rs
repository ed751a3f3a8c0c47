//! `aisc serve` with the journal on disk, killed (SIGKILL) in the middle of
//! a load of concurrent clients: every run whose id or result a client
//! received is in the journal after the restart, a waited-for run with the
//! result the client was given and the LLM answer it came from
//! (`docs/reliability.md`, "What is durable when": a `?wait=true` run's row
//! and its LLM answers are not waited for on disk, its outcome is, and that
//! covers them).

mod serve_support;

use ais_testkit::mock::MockServer;
use serde_json::{json, Value as Json};
use serve_support::{aisc, mock_config, parse, write, Server};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const ECHO: &str = "agent Echo {\n    @entry flow main(topic: str) -> str {\n        return ask(\"Say \" + topic)\n    }\n}\n";
const PURE: &str = "agent Pure {\n    @entry flow main(topic: str) -> str {\n        return \"about \" + topic\n    }\n}\n";

/// A POST on its own connection; `None` when the server is gone (refused,
/// or the connection closed before a whole answer).
fn try_post(addr: SocketAddr, path: &str, body: &str) -> Option<(u16, Json)> {
    let mut s = TcpStream::connect(addr).ok()?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).ok()?;
    s.write_all(body.as_bytes()).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    // Killed mid-answer: nothing, or a head without its body.
    if !raw.starts_with(b"HTTP/") {
        return None;
    }
    let r = parse(&raw);
    let j = serde_json::from_str::<Json>(&r.body).ok()?;
    (r.status != 0).then_some((r.status, j))
}

/// What a client was told: a run's id, and its result when it waited.
type Told = Arc<Mutex<Vec<(String, Option<Json>, &'static str)>>>;

#[test]
fn a_server_killed_mid_load_keeps_every_run_a_client_was_told_about() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockServer::start().expect("mock");
    let config = mock_config(dir.path(), &mock.openai_url());
    let echo = write(dir.path(), "echo.ais", ECHO);
    let pure = write(dir.path(), "pure.ais", PURE);
    let mut s = Server::start(dir.path(), &[&echo, &pure], &["--config", &config], &[]);
    let addr = s.addr;
    let told: Told = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    // Eight clients: waiting for trivial runs, for runs with an LLM call,
    // and starting runs without waiting (their id is the answer).
    let clients: Vec<_> = (0..8)
        .map(|c| {
            let (told, stop) = (told.clone(), stop.clone());
            std::thread::spawn(move || {
                let (program, wait) = match c % 4 {
                    0 | 1 => ("pure.ais", true),
                    2 => ("echo.ais", true),
                    _ => ("pure.ais", false),
                };
                let path = if wait {
                    "/v1/runs?wait=true"
                } else {
                    "/v1/runs"
                };
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    let body = json!({"program": program, "args": {"topic": format!("c{c}n{n}")}});
                    let Some((status, j)) = try_post(addr, path, &body.to_string()) else {
                        return;
                    };
                    assert_eq!(status, 201, "{j}");
                    let id = j["id"].as_str().expect("an id").to_string();
                    if wait {
                        assert_eq!(j["status"], "succeeded", "{j}");
                    }
                    let result = wait.then(|| j["result"].clone());
                    told.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((id, result, program));
                    n += 1;
                }
            })
        })
        .collect();
    let count = || told.lock().unwrap_or_else(|p| p.into_inner()).len();
    for _ in 0..12_000 {
        if count() >= 150 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = s.child.kill();
    let _ = s.child.wait();
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.join().expect("a client");
    }
    let told = told.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert!(
        told.len() >= 150,
        "only {} runs before the kill",
        told.len()
    );
    assert!(told.iter().any(|t| t.2 == "echo.ais" && t.1.is_some()));
    assert!(told.iter().any(|t| t.1.is_none()));

    // The journal as a restarted process reads it.
    let o = aisc(dir.path(), &["runs", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let journaled: HashMap<String, Json> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Json>(l).ok())
        .map(|j| (j["id"].as_str().unwrap_or("").to_string(), j))
        .collect();
    for (id, result, program) in &told {
        let row = journaled
            .get(id)
            .unwrap_or_else(|| panic!("run {id} ({program}) was answered but is not journaled"));
        if result.is_some() {
            assert_eq!(row["status"], "completed", "{row}");
            let ops = if *program == "echo.ais" { 1 } else { 0 };
            assert_eq!(row["journaled_ops"], ops, "{row}");
        }
    }
    // A restarted server gives each waited-for run the result its client got.
    let s = Server::start(dir.path(), &[&echo, &pure], &["--config", &config], &[]);
    for (id, result, _) in told.iter().filter(|t| t.1.is_some()) {
        let j = s.get(&format!("/v1/runs/{id}")).json();
        assert_eq!(j["status"], "succeeded", "{j}");
        assert_eq!(Some(&j["result"]), result.as_ref(), "{j}");
    }
}
