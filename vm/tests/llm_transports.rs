//! The two HTTP transports (`auto`: the event transport on loopback;
//! `threads`: a thread per call) behave the same: every scenario runs on
//! both, through the blocking `complete` and through `start_many` (where
//! the event transport judges replies on its I/O thread and hands retries
//! and repair rounds to a thread), and must give the same outcome. The one
//! difference: a cancelled started call ends at once on the event
//! transport, and when its request ends on the thread transport.

use ais_testkit::llm::{mock, options, request, KEY};
use ais_testkit::mock::{MockReply, MockServer};
use ais_vm::llm::http::{HttpBackend, HttpTransport, Protocol};
use ais_vm::llm::{
    Attempt, CancelToken, LlmBackend, LlmError, LlmErrorKind, LlmOpKind, LlmResponse,
};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

const TRANSPORTS: [HttpTransport; 2] = [HttpTransport::Auto, HttpTransport::Threads];

fn backend_on(server: &MockServer, transport: HttpTransport) -> HttpBackend {
    let mut o = options(server, Protocol::OpenAi);
    o.transport = transport;
    HttpBackend::new(o)
}

/// A backend for a hand-written server at `url`, without retries.
fn local_backend(url: &str, transport: HttpTransport, timeout: Duration) -> HttpBackend {
    let mut o = ais_vm::llm::http::HttpOptions::new("local", Protocol::OpenAi, url);
    o.retry.max_retries = 0;
    o.timeout = timeout;
    o.transport = transport;
    HttpBackend::new(o)
}

type Outcome = (Result<LlmResponse, LlmError>, Vec<Attempt>);

/// Starts `n` asks with `start_many` and waits for every outcome, in
/// submission order.
fn started(b: &HttpBackend, kind: LlmOpKind, n: usize, cancel: &CancelToken) -> Vec<Outcome> {
    let (tx, rx) = mpsc::channel();
    let calls = (0..n)
        .map(|i| {
            let tx = tx.clone();
            let done: ais_vm::llm::OnDone = Box::new(move |r, a| {
                let _ = tx.send((i, r, a));
            });
            (request(kind, &format!("q{i}")), cancel.clone(), done)
        })
        .collect();
    b.start_many(calls);
    let mut out: Vec<Option<Outcome>> = (0..n).map(|_| None).collect();
    for _ in 0..n {
        let (i, r, a) = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("a started call never reported"));
        assert!(out[i].is_none(), "call {i} reported twice");
        out[i] = Some((r, a));
    }
    assert!(
        rx.recv_timeout(Duration::from_millis(50)).is_err(),
        "a call reported twice"
    );
    out.into_iter().flatten().collect()
}

/// Kind and attempt count of an outcome, the text of a success.
fn summary(o: &Outcome) -> (Result<String, LlmErrorKind>, usize) {
    let r = match &o.0 {
        Ok(resp) => Ok(resp.text.clone()),
        Err(e) => Err(e.kind),
    };
    (r, o.1.len())
}

/// What one way of calling gave: its label, the text or error kind, and
/// the attempts.
type Seen = (String, Result<String, LlmErrorKind>, usize);

/// Runs `faults` (queued replies, in order) through one started call and
/// one blocking call on each transport; returns what each gave.
fn both_ways(kind: LlmOpKind, faults: &[MockReply]) -> Vec<Seen> {
    let mut seen = Vec::new();
    for transport in TRANSPORTS {
        for way in ["started", "complete"] {
            let server = mock();
            for f in faults {
                server.push(f.clone());
            }
            let b = backend_on(&server, transport);
            let label = format!("{transport:?}/{way}");
            let (r, attempts) = match way {
                "started" => summary(&started(&b, kind, 1, &CancelToken::new())[0]),
                _ => {
                    let log = ais_vm::llm::AttemptLog::new();
                    let r = b.complete_observed(&request(kind, "q0"), &CancelToken::new(), &log);
                    summary(&(r, log.attempts()))
                }
            };
            seen.push((label, r, attempts));
        }
    }
    seen
}

fn assert_same(seen: &[Seen]) {
    let first = &seen[0];
    for s in seen {
        assert_eq!(
            (&s.1, s.2),
            (&first.1, first.2),
            "{} differs from {}",
            s.0,
            first.0
        );
    }
}

#[test]
fn a_plain_reply_is_one_attempt_on_both() {
    let seen = both_ways(LlmOpKind::Ask, &[]);
    assert_same(&seen);
    assert!(seen[0].1.is_ok());
    assert_eq!(seen[0].2, 1);
}

#[test]
fn retried_failures_end_the_same_on_both() {
    // (name, queued replies, how the call ends, attempts)
    type Case = (
        &'static str,
        Vec<MockReply>,
        Result<(), LlmErrorKind>,
        usize,
    );
    let cases: Vec<Case> = vec![
        (
            "500 then ok",
            vec![MockReply::error(500, "boom")],
            Ok(()),
            2,
        ),
        (
            "429 retry-after then ok",
            vec![MockReply::rate_limited_ms(5)],
            Ok(()),
            2,
        ),
        ("malformed then ok", vec![MockReply::Malformed], Ok(()), 2),
        ("truncated then ok", vec![MockReply::Truncated], Ok(()), 2),
        ("hang-up then ok", vec![MockReply::Hangup], Ok(()), 2),
        (
            "401 not retried",
            vec![MockReply::error(401, "bad key")],
            Err(LlmErrorKind::Auth),
            1,
        ),
        (
            "persistent 503",
            vec![MockReply::error(503, "down"); 4],
            Err(LlmErrorKind::Server),
            4,
        ),
    ];
    for (name, faults, want, attempts) in cases {
        let seen = both_ways(LlmOpKind::Ask, &faults);
        assert_same(&seen);
        assert_eq!(
            seen[0].1.as_ref().map(|_| ()).map_err(|k| *k),
            want,
            "{name}"
        );
        assert_eq!(seen[0].2, attempts, "{name}");
    }
}

#[test]
fn a_repair_round_runs_the_same_on_both() {
    // A structured op whose first reply is not JSON: one repair request,
    // which the mock answers with a valid verdict.
    let seen = both_ways(
        LlmOpKind::Verify,
        &[MockReply::Content("I think it is true".into())],
    );
    assert_same(&seen);
    assert!(seen[0].1.is_ok(), "{seen:?}");
    assert_eq!(
        seen[0].2, 3,
        "the reply, the repair note, the repaired reply"
    );
}

#[test]
fn a_stalled_server_times_out_and_a_cancel_ends_a_call_on_both() {
    for transport in TRANSPORTS {
        let server = mock();
        server.push(MockReply::Stall(Duration::from_secs(5)));
        let mut o = options(&server, Protocol::OpenAi);
        o.transport = transport;
        o.timeout = Duration::from_millis(200);
        o.retry.max_retries = 0;
        let b = HttpBackend::new(o);
        // A timeout (not the stalled reply) ended the call.
        let out = started(&b, LlmOpKind::Ask, 1, &CancelToken::new());
        let err = out[0].0.as_ref().err().map(|e| e.kind);
        assert_eq!(err, Some(LlmErrorKind::Timeout), "{transport:?}");

        server.push(MockReply::Stall(Duration::from_secs(2)));
        let b = backend_on(&server, transport);
        let cancel = CancelToken::new();
        let c = cancel.clone();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            c.cancel();
        });
        let out = started(&b, LlmOpKind::Ask, 1, &cancel);
        let _ = canceller.join();
        let err = out[0].0.as_ref().err().map(|e| e.kind);
        if transport == HttpTransport::Auto {
            // The I/O thread watches the token: the call ends at once.
            assert_eq!(err, Some(LlmErrorKind::Cancelled), "{transport:?}");
        } else {
            // A thread blocked in a request reports when the request ends
            // (the VM does not wait for it: see vm_started_calls.rs).
            assert!(
                err.is_none() || err == Some(LlmErrorKind::Cancelled),
                "{err:?}"
            );
        }
    }
}

#[test]
fn a_fan_out_reuses_its_connections_and_gets_every_reply() {
    for transport in TRANSPORTS {
        let server = mock();
        server.set_latency(Duration::from_millis(20));
        let b = backend_on(&server, transport);
        for round in 0..3 {
            let out = started(&b, LlmOpKind::Ask, 32, &CancelToken::new());
            assert!(
                out.iter().all(|o| o.0.is_ok() && o.1.len() == 1),
                "{transport:?} round {round}"
            );
        }
        assert_eq!(server.request_count(), 96, "{transport:?}");
        let prompts: std::collections::BTreeSet<String> = server
            .requests()
            .iter()
            .map(|r| r.body.to_string())
            .collect();
        assert_eq!(
            prompts.len(),
            32,
            "{transport:?}: each prompt sent as asked"
        );
    }
}

#[test]
fn a_request_larger_than_the_socket_buffers_goes_out_whole() {
    // 3 MB of prompt: the event transport writes it as the socket drains.
    let big = "x".repeat(3 << 20);
    for transport in TRANSPORTS {
        let server = mock();
        let b = backend_on(&server, transport);
        let r = b.complete(&request(LlmOpKind::Ask, &big), &CancelToken::new());
        assert!(r.is_ok(), "{transport:?}: {:?}", r.err());
        let sent = server
            .last_request()
            .map(|q| q.body.to_string())
            .unwrap_or_default();
        assert!(sent.len() > big.len(), "{transport:?}");
    }
}

/// Reads one request from `s` and answers it with an OpenAI reply whose
/// text is `text` (a server written by hand, for what the mock cannot do).
fn answer_once(s: &mut std::net::TcpStream, text: &str) {
    let mut reader = BufReader::new(s.try_clone().unwrap_or_else(|e| panic!("{e}")));
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; len];
    let _ = reader.read_exact(&mut body);
    let reply = serde_json::json!({
        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1}
    })
    .to_string();
    let _ = write!(
        s,
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{reply}",
        reply.len()
    );
}

#[test]
fn a_closed_idle_connection_is_replaced_before_sending() {
    // A server that answers one request per connection and then closes
    // it without `Connection: close` (as servers with a short keep-alive
    // do): the second call must not fail.
    for transport in TRANSPORTS {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("addr: {e}"));
        let (closed_tx, closed) = mpsc::channel();
        let served = std::thread::spawn(move || {
            let mut n = 0;
            for stream in listener.incoming().take(2) {
                let Ok(mut s) = stream else { continue };
                answer_once(&mut s, &format!("reply {n}"));
                drop(s);
                let _ = closed_tx.send(());
                n += 1;
            }
            n
        });
        let url = format!("http://{addr}/v1");
        let b = local_backend(&url, transport, Duration::from_secs(5));
        for want in ["reply 0", "reply 1"] {
            let r = b.complete(&request(LlmOpKind::Ask, "hi"), &CancelToken::new());
            assert_eq!(
                r.map(|x| x.text).ok().as_deref(),
                Some(want),
                "{transport:?}"
            );
            // The server has closed the connection before the next call.
            let _ = closed.recv_timeout(Duration::from_secs(5));
        }
        assert_eq!(served.join().unwrap_or(0), 2);
    }
}

#[test]
fn connection_refused_and_bad_headers_fail_fast_without_leaking_the_key() {
    // A port nobody listens on.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        l.local_addr().map(|a| a.port()).unwrap_or(9)
    };
    let url = format!("http://127.0.0.1:{port}/v1");
    let b = local_backend(&url, HttpTransport::Auto, Duration::from_secs(5));
    let out = started(&b, LlmOpKind::Ask, 2, &CancelToken::new());
    for (r, _) in &out {
        assert_eq!(
            r.as_ref().err().map(|e| e.kind),
            Some(LlmErrorKind::Connect)
        );
    }

    // A key with a line break would split the request: refused, unsent,
    // and the message does not carry it.
    let server = mock();
    let mut o = options(&server, Protocol::OpenAi);
    let evil = format!("{KEY}\r\nx-injected: 1");
    o.api_key = Some(ais_vm::llm::secret::Secret::new(&evil));
    let b = HttpBackend::new(o);
    let out = started(&b, LlmOpKind::Ask, 1, &CancelToken::new());
    let err = out[0].0.as_ref().err().cloned();
    let err = err.unwrap_or_else(|| panic!("a key with a line break must be refused"));
    assert_eq!(err.kind, LlmErrorKind::Client);
    assert!(!err.message.contains(KEY), "{}", err.message);
    assert_eq!(server.request_count(), 0);
}

#[test]
fn localhost_finds_a_server_listening_on_ipv6_loopback_only() {
    // `localhost` is tried on 127.0.0.1 first, then on ::1. Machines
    // without IPv6 cannot host this server; there the IPv4 path is
    // checked instead.
    let (listener, url) = match TcpListener::bind("[::1]:0") {
        Ok(l) => {
            let port = l.local_addr().map(|a| a.port()).unwrap_or(0);
            (l, format!("http://localhost:{port}/v1"))
        }
        Err(_) => {
            let l = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
            let port = l.local_addr().map(|a| a.port()).unwrap_or(0);
            (l, format!("http://localhost:{port}/v1"))
        }
    };
    let server = std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            answer_once(&mut s, "found");
        }
    });
    let b = local_backend(&url, HttpTransport::Auto, Duration::from_secs(5));
    let out = started(&b, LlmOpKind::Ask, 1, &CancelToken::new());
    assert_eq!(
        out[0].0.as_ref().map(|r| r.text.as_str()).ok(),
        Some("found"),
        "{:?}",
        out[0].0.as_ref().err()
    );
    let _ = server.join();
}

#[test]
fn a_server_that_does_not_speak_http_gets_a_clear_error_not_a_hang() {
    // Each connection gets one hostile answer; the call must end with a
    // named error on both transports, well before its timeout.
    let hostile: [&[u8]; 3] = [
        b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: nope\r\n\r\n{}",
        &[b'x'; 70 * 1024],
    ];
    for transport in TRANSPORTS {
        for answer in hostile {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
            let addr = listener
                .local_addr()
                .unwrap_or_else(|e| panic!("addr: {e}"));
            let answer = answer.to_vec();
            // Not joined: it holds its connection open after answering.
            std::thread::spawn(move || {
                if let Ok((mut s, _)) = listener.accept() {
                    let mut buf = [0u8; 4096];
                    let _ = s.read(&mut buf);
                    let _ = s.write_all(&answer);
                    // Keep the connection open: the client must not wait
                    // for more.
                    std::thread::sleep(Duration::from_millis(1500));
                }
            });
            let url = format!("http://{addr}/v1");
            let b = local_backend(&url, transport, Duration::from_secs(10));
            let r = b.complete(&request(LlmOpKind::Ask, "hi"), &CancelToken::new());
            let e = r
                .err()
                .unwrap_or_else(|| panic!("{transport:?}: a hostile reply must fail"));
            assert!(
                matches!(
                    e.kind,
                    LlmErrorKind::InvalidResponse | LlmErrorKind::Connect
                ),
                "{transport:?}: {e}"
            );
            assert!(!e.message.is_empty());
        }
    }
}

/// A reply with `status`, `location` and an empty body.
fn redirect(status: u16, location: &str) -> MockReply {
    MockReply::Status {
        status,
        headers: vec![("location".into(), location.into())],
        body: String::new(),
    }
}

#[test]
fn transports_classify_redirects_alike() {
    for status in [301u16, 302, 303, 307, 308] {
        let seen = both_ways(
            LlmOpKind::Ask,
            &[redirect(status, "http://127.0.0.1:9/elsewhere")],
        );
        assert_same(&seen);
        // Not followed (a POST with a key must not go where a server
        // points) and not retried: the same request gets the same answer.
        assert_eq!(seen[0].1, Err(LlmErrorKind::Client), "{status}");
        assert_eq!(seen[0].2, 1, "{status}");
    }
    let server = mock();
    server.push(redirect(302, "http://127.0.0.1:9/elsewhere"));
    let err = backend_on(&server, HttpTransport::Threads)
        .complete(&request(LlmOpKind::Ask, "q"), &CancelToken::new())
        .expect_err("not followed");
    assert!(err.message.contains("redirected"), "{}", err.message);
    assert_eq!(server.request_count(), 1);
}

#[test]
fn transports_classify_malformed_replies_alike() {
    let cases: Vec<(&str, MockReply)> = vec![
        ("not JSON", MockReply::Malformed),
        (
            "JSON without choices",
            MockReply::json(serde_json::json!({})),
        ),
        (
            "null content",
            MockReply::json(
                serde_json::json!({"choices": [{"message": {"content": null}, "finish_reason": "stop"}]}),
            ),
        ),
        (
            "an error status with a body that is not JSON",
            MockReply::Status {
                status: 502,
                headers: Vec::new(),
                body: "<html>bad gateway</html>".into(),
            },
        ),
    ];
    for (name, reply) in cases {
        let seen = both_ways(LlmOpKind::Ask, &[reply]);
        assert_same(&seen);
        assert!(seen[0].1.is_ok(), "{name}: retried and answered");
        assert_eq!(seen[0].2, 2, "{name}");
    }
}

#[test]
fn a_header_value_with_a_line_break_is_refused_alike_before_sending() {
    for transport in TRANSPORTS {
        let server = mock();
        let mut o = options(&server, Protocol::OpenAi);
        o.transport = transport;
        o.headers = vec![(
            "x-gw".into(),
            ais_vm::llm::secret::Secret::new("v\r\nx-evil: INJECTED"),
        )];
        let err = HttpBackend::new(o)
            .complete(&request(LlmOpKind::Ask, "q"), &CancelToken::new())
            .expect_err("refused");
        assert_eq!(err.kind, LlmErrorKind::Client, "{transport:?}");
        assert!(err.message.contains("`x-gw`"), "{}", err.message);
        assert!(!err.message.contains("INJECTED"), "{}", err.message);
        assert_eq!(server.request_count(), 0, "{transport:?}");
    }
}

/// One connection answered with `answer`, then closed.
fn serve_once(answer: &'static [u8]) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
    let addr = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("addr: {e}"));
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            let mut buf = [0u8; 8192];
            let _ = s.read(&mut buf);
            let _ = s.write_all(answer);
        }
    });
    format!("http://{addr}/v1")
}

#[test]
fn both_transports_call_a_malformed_reply_invalid_response() {
    // Issue 32, defect 5: these were `llm.invalid_response` on the event
    // transport and `llm.connect` on the thread transport.
    let malformed: [(&str, &[u8]); 4] = [
        ("bad status line", b"HTTP/1.1 2x0 OK\r\ncontent-length: 2\r\n\r\n{}"),
        (
            "invalid UTF-8",
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 4\r\n\r\n\xff\xfe\xfd\xfc",
        ),
        ("negative content-length", b"HTTP/1.1 200 OK\r\ncontent-length: -5\r\n\r\n{}"),
        (
            "bad chunking",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        ),
    ];
    for (what, answer) in malformed {
        for transport in TRANSPORTS {
            let b = local_backend(&serve_once(answer), transport, Duration::from_secs(10));
            let e = b
                .complete(&request(LlmOpKind::Ask, "hi"), &CancelToken::new())
                .err()
                .unwrap_or_else(|| panic!("{what} {transport:?}: must fail"));
            assert_eq!(
                e.kind,
                LlmErrorKind::InvalidResponse,
                "{what} {transport:?}: {e}"
            );
        }
    }
}
