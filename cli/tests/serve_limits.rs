//! `aisc serve` against hostile or broken clients: a huge request head, a
//! body shorter than its `Content-Length`, paths that are not ASCII,
//! malformed request lines, cross-origin pages and DNS rebinding, too many
//! event streams, and many connections that never finish their request.
//! Each gets a 4xx (or a closed connection after the read timeout) while
//! the server's memory and threads stay bounded and it keeps serving.

mod serve_support;

use ais_testkit::mock::{MockReply, MockServer};
use serde_json::json;
use serve_support::{mock_config, parse, write, Resp, Server};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

const ECHO: &str = "agent Echo {\n    @entry flow main(topic: str) -> str {\n        return ask(\"Say \" + topic)\n    }\n}\n";

/// Sends `raw` as is on a new connection and reads until the server closes
/// it; the bytes received.
fn exchange(addr: SocketAddr, raw: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).expect("connect");
    let _ = s.write_all(raw);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

fn raw_request(addr: SocketAddr, raw: &[u8]) -> Resp {
    parse(&exchange(addr, raw))
}

/// A field of `/proc/PID/status` in kB (or a count).
#[cfg(target_os = "linux")]
fn proc_status(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// The soft limit of open files of this process.
#[cfg(target_os = "linux")]
fn open_files_limit() -> u64 {
    let text = std::fs::read_to_string("/proc/self/limits").expect("limits");
    text.lines()
        .find_map(|l| {
            l.strip_prefix("Max open files")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(1024)
}

fn runs(s: &Server) -> usize {
    s.get("/v1/runs").json()["runs"]
        .as_array()
        .map_or(usize::MAX, Vec::len)
}

#[cfg(target_os = "linux")]
#[test]
fn a_huge_request_head_gets_431_and_a_300_mb_one_leaves_memory_bounded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "echo.ais", ECHO);
    let s = Server::start(dir.path(), &[&p], &["--sim-delay-scale", "0"], &[]);
    let pid = s.child.id();

    // 128 KiB of one header: twice the default limit (64 KiB).
    let big = "a".repeat(128 << 10);
    let r = raw_request(
        s.addr,
        format!(
            "GET /health HTTP/1.1\r\nHost: {}\r\nX-Big: {big}\r\nConnection: close\r\n\r\n",
            s.addr
        )
        .as_bytes(),
    );
    assert_eq!(r.status, 431, "{r:?}");

    // A client streaming a 300 MB header: the server stops reading at its
    // limit, answers and closes; its resident memory stays where it was.
    let before = proc_status(pid, "VmRSS");
    let mut c = TcpStream::connect(s.addr).expect("connect");
    let chunk = vec![b'a'; 1 << 20];
    let mut sent = 0usize;
    let _ = c.write_all(format!("GET /health HTTP/1.1\r\nHost: {}\r\nX-Big: ", s.addr).as_bytes());
    while sent < 300 << 20 {
        if c.write_all(&chunk).is_err() {
            break;
        }
        sent += chunk.len();
    }
    let mut answer = Vec::new();
    let _ = c.read_to_end(&mut answer);
    drop(c);
    let peak = proc_status(pid, "VmHWM");
    assert!(
        sent < 300 << 20,
        "the server read the whole 300 MB head ({sent} bytes accepted)"
    );
    assert!(
        peak < before + (64 << 10),
        "resident memory grew from {before} kB to a peak of {peak} kB"
    );
    // It still serves.
    assert_eq!(s.get("/health").json()["status"], "ok");
}

#[test]
fn a_body_shorter_than_its_content_length_gets_408_after_the_read_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "echo.ais", ECHO);
    let s = Server::start(
        dir.path(),
        &[&p],
        &["--sim-delay-scale", "0", "--read-timeout", "0.5"],
        &[],
    );
    let body = json!({"program": "echo.ais", "args": {"topic": "x"}}).to_string();
    let raw = format!(
        "POST /v1/runs HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        s.addr,
        body.len() + 100
    );
    let r = raw_request(s.addr, raw.as_bytes());
    assert_eq!(r.status, 408, "{r:?}");
    assert_eq!(r.json()["error"]["code"], "request.timeout");
    assert_eq!(r.header("Connection"), Some("close"));
    // A head that never ends: the connection is closed, with no request
    // answered (nothing was asked).
    let got = exchange(
        s.addr,
        format!("GET /health HTTP/1.1\r\nHost: {}\r\nX-Slow: 1\r\n", s.addr).as_bytes(),
    );
    assert!(
        got.is_empty() || String::from_utf8_lossy(&got).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    // No run was started, and the server serves.
    assert_eq!(runs(&s), 0);
}

#[cfg(target_os = "linux")]
#[test]
fn fifteen_hundred_lying_connections_hold_no_thread_and_are_all_closed() {
    // 1,500 when descriptors allow (the server inherits this limit too).
    let n = 1500.min(open_files_limit().saturating_sub(200) as usize);
    assert!(n >= 500, "too few open files allowed ({n} connections)");
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "echo.ais", ECHO);
    let s = Server::start(
        dir.path(),
        &[&p],
        &[
            "--sim-delay-scale",
            "0",
            "--read-timeout",
            "1",
            "--max-connections",
            "2000",
        ],
        &[],
    );
    let pid = s.child.id();
    let threads_before = proc_status(pid, "Threads");
    let head = format!(
        "POST /v1/runs HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"program\"",
        s.addr
    );
    let mut conns: Vec<TcpStream> = (0..n)
        .map(|_| {
            let mut c = TcpStream::connect(s.addr).expect("connect");
            c.write_all(head.as_bytes()).expect("write");
            c
        })
        .collect();
    // Every connection is in the server now: a request after them is
    // answered (connections are accepted in order).
    assert_eq!(s.get("/health").json()["status"], "ok");
    let threads_during = proc_status(pid, "Threads");
    assert!(
        threads_during <= threads_before + 4,
        "threads went from {threads_before} to {threads_during} with {n} stalled requests"
    );
    // Each gets its 408 (or is closed) once the read timeout passes.
    let mut answered = 0;
    for c in &mut conns {
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        if out.is_empty() || parse(&out).status == 408 {
            answered += 1;
        }
    }
    assert_eq!(answered, n);
    assert_eq!(runs(&s), 0);
}

#[test]
fn malformed_request_lines_and_paths_that_are_not_ascii_get_400() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "echo.ais", ECHO);
    let s = Server::start(dir.path(), &[&p], &["--sim-delay-scale", "0"], &[]);
    let host = format!("Host: {}\r\n", s.addr);
    let mut bad_path = b"GET /v1/runs/\xff\xfe HTTP/1.1\r\n".to_vec();
    bad_path.extend_from_slice(host.as_bytes());
    bad_path.extend_from_slice(b"\r\n");
    assert_eq!(raw_request(s.addr, &bad_path).status, 400);
    let mut no_version = b"GET /health\r\n".to_vec();
    no_version.extend_from_slice(host.as_bytes());
    no_version.extend_from_slice(b"\r\n");
    assert_eq!(raw_request(s.addr, &no_version).status, 400);
    assert_eq!(raw_request(s.addr, b"GARBAGE\r\n\r\n").status, 400);
    assert_eq!(s.get("/health").json()["status"], "ok");
}

#[test]
fn without_a_token_foreign_origins_and_rebinding_hosts_get_403_and_start_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "echo.ais", ECHO);
    let s = Server::start(dir.path(), &[&p], &["--sim-delay-scale", "0"], &[]);
    let body = json!({"program": "echo.ais", "args": {"topic": "x"}}).to_string();
    let post = |host: &str, origin: Option<&str>| {
        let origin = origin.map_or(String::new(), |o| format!("Origin: {o}\r\n"));
        raw_request(
            s.addr,
            format!(
                "POST /v1/runs HTTP/1.1\r\nHost: {host}\r\n{origin}Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
    };
    let own = s.addr.to_string();
    // A page of another site posting a "simple" request.
    let r = post(&own, Some("http://evil.example"));
    assert_eq!(r.status, 403, "{r:?}");
    assert_eq!(r.json()["error"]["code"], "request.origin");
    assert!(r.json()["error"]["hint"]
        .as_str()
        .is_some_and(|h| h.contains("--allow-origin")));
    // A page whose name was made to resolve to 127.0.0.1.
    let r = post(&format!("evil.example:{}", s.addr.port()), None);
    assert_eq!(r.status, 403, "{r:?}");
    assert_eq!(r.json()["error"]["code"], "request.host");
    // The right port matters too.
    let r = post(&format!("127.0.0.1:{}", s.addr.port() ^ 1), None);
    assert_eq!(r.status, 403, "{r:?}");
    assert_eq!(runs(&s), 0);
    // The server's own pages, localhost by name, and clients without an
    // Origin are served.
    let r = post(&own, Some(&format!("http://{own}")));
    assert_eq!(r.status, 201, "{r:?}");
    let r = post(&format!("localhost:{}", s.addr.port()), None);
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(runs(&s), 2);

    // An origin allowed by name.
    let s2 = Server::start(
        dir.path(),
        &[&p],
        &[
            "--sim-delay-scale",
            "0",
            "--allow-origin",
            "http://localhost:3000",
        ],
        &[],
    );
    let r = raw_request(
        s2.addr,
        format!(
            "GET /health HTTP/1.1\r\nHost: {}\r\nOrigin: http://localhost:3000\r\nConnection: close\r\n\r\n",
            s2.addr
        )
        .as_bytes(),
    );
    assert_eq!(r.status, 200, "{r:?}");

    // With a token, the token is the check: any Host and Origin with it.
    let s3 = Server::start(
        dir.path(),
        &[&p],
        &["--sim-delay-scale", "0"],
        &[("AIS_SERVE_TOKEN", "s3cret")],
    );
    let r = raw_request(
        s3.addr,
        format!(
            "GET /health HTTP/1.1\r\nHost: evil.example:{}\r\nOrigin: http://evil.example\r\nAuthorization: Bearer s3cret\r\nConnection: close\r\n\r\n",
            s3.addr.port()
        )
        .as_bytes(),
    );
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn event_streams_are_bounded_per_run_and_in_all() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockServer::start().expect("mock");
    mock.push(MockReply::Stall(Duration::from_secs(3600)));
    mock.push(MockReply::Stall(Duration::from_secs(3600)));
    let config = mock_config(dir.path(), &mock.openai_url());
    let p = write(dir.path(), "echo.ais", ECHO);
    let s = Server::start(
        dir.path(),
        &[&p],
        &[
            "--config",
            &config,
            "--max-streams",
            "3",
            "--max-streams-per-run",
            "2",
        ],
        &[],
    );
    let start = || {
        let r = s.post(
            "/v1/runs",
            &json!({"program": "echo.ais", "args": {"topic": "x"}}).to_string(),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        r.json()["id"].as_str().expect("id").to_string()
    };
    let (a, b) = (start(), start());
    s.wait_status(&a, "running");
    s.wait_status(&b, "running");
    // Opens a stream and reads its head and first events.
    let open = |id: &str| {
        let mut c = TcpStream::connect(s.addr).expect("connect");
        c.write_all(
            format!(
                "GET /v1/runs/{id}/events HTTP/1.1\r\nHost: {}\r\n\r\n",
                s.addr
            )
            .as_bytes(),
        )
        .expect("write");
        let mut buf = [0u8; 4096];
        let n = c.read(&mut buf).expect("read");
        (c, String::from_utf8_lossy(&buf[..n]).to_string())
    };
    let (a1, h) = open(&a);
    assert!(h.starts_with("HTTP/1.1 200"), "{h}");
    let (_a2, h) = open(&a);
    assert!(h.starts_with("HTTP/1.1 200"), "{h}");
    // A third on the same run: 429.
    let r = s.get(&format!("/v1/runs/{a}/events"));
    assert_eq!(r.status, 429, "{r:?}");
    assert_eq!(r.json()["error"]["code"], "run.too_many_streams");
    assert_eq!(r.header("Retry-After"), Some("1"));
    let (_b1, h) = open(&b);
    assert!(h.starts_with("HTTP/1.1 200"), "{h}");
    // A fourth in all: 503.
    let r = s.get(&format!("/v1/runs/{b}/events"));
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(r.json()["error"]["code"], "server.too_many_streams");
    // A client that leaves gives its place back.
    drop(a1);
    let mut freed = false;
    for _ in 0..500 {
        let (c, h) = open(&b);
        drop(c);
        if h.starts_with("HTTP/1.1 200") {
            freed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(freed, "the place of a closed stream was not given back");
}

#[test]
fn delete_is_not_a_run_operation_and_says_how_to_stop_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write(dir.path(), "echo.ais", ECHO);
    let s = Server::start(dir.path(), &[&p], &["--sim-delay-scale", "0"], &[]);
    let r = serve_support::request(s.addr, "DELETE", "/v1/runs/some-run", &[], None);
    assert_eq!(r.status, 405, "{r:?}");
    assert_eq!(r.header("Allow"), Some("GET"));
    assert!(r.json()["error"]["hint"]
        .as_str()
        .is_some_and(|h| h.contains("POST /v1/runs/{id}/cancel")));
}
