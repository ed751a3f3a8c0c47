//! Streamed replies of the three HTTP protocols against the mock server:
//! deltas in order that join to the final text, usage, cut and malformed
//! streams retried with a `Reset`, streaming turned off by configuration,
//! idle timeouts, cancellation, and both transports.

use ais_testkit::llm::*;
use ais_testkit::mock::{MockReply, MockServer};
use ais_vm::llm::http::{HttpBackend, HttpTransport, Protocol};
use ais_vm::llm::{
    AttemptLog, CancelToken, LlmBackend, LlmErrorKind, LlmOpKind, LlmRequest, TextEvent, TextSink,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PROTOCOLS: [Protocol; 3] = [Protocol::OpenAi, Protocol::Anthropic, Protocol::Ollama];

const TRANSPORTS: [HttpTransport; 2] = [HttpTransport::Auto, HttpTransport::Threads];

/// A streaming backend on the mock: `Auto` is the event transport there
/// (a loopback endpoint), `Threads` the thread transport.
fn streaming_on(server: &MockServer, protocol: Protocol, transport: HttpTransport) -> HttpBackend {
    let mut o = options(server, protocol);
    o.stream = true;
    o.transport = transport;
    HttpBackend::new(o)
}

fn streaming(server: &MockServer, protocol: Protocol) -> HttpBackend {
    streaming_on(server, protocol, HttpTransport::Auto)
}

/// A plain-text request whose streamed text is collected.
fn watched(prompt: &str) -> (LlmRequest, Arc<Mutex<Vec<TextEvent>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let into = Arc::clone(&seen);
    let mut r = request(LlmOpKind::Ask, prompt);
    r.json_schema = None;
    r.on_text = Some(TextSink::new(move |e: &TextEvent| {
        into.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(e.clone())
    }));
    (r, seen)
}

fn events(seen: &Arc<Mutex<Vec<TextEvent>>>) -> Vec<TextEvent> {
    seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// The text of attempt `n`'s deltas, joined, and how many there were.
fn text_of(events: &[TextEvent], n: u32) -> (String, usize) {
    let mut text = String::new();
    let mut count = 0;
    for e in events {
        if let TextEvent::Delta { attempt, text: t } = e {
            if *attempt == n {
                text.push_str(t);
                count += 1;
            }
        }
    }
    (text, count)
}

#[test]
fn streamed_text_arrives_in_deltas_that_make_the_reply() {
    for (protocol, transport) in PROTOCOLS
        .into_iter()
        .flat_map(|p| TRANSPORTS.map(|t| (p, t)))
    {
        let server = mock();
        let b = streaming_on(&server, protocol, transport);
        let (r, seen) = watched("tell me a longer story please");
        let log = AttemptLog::new();
        let resp = b
            .complete_observed(&r, &CancelToken::new(), &log)
            .unwrap_or_else(|e| panic!("{protocol:?}: {e}"));
        let got = events(&seen);
        let (text, count) = text_of(&got, 1);
        assert!(count >= 3, "{protocol:?}: {count} deltas");
        assert_eq!(text, resp.text, "{protocol:?}");
        assert!(
            resp.text.starts_with("mock reply to: tell me"),
            "{protocol:?}"
        );
        assert!(!got.iter().any(|e| matches!(e, TextEvent::Reset { .. })));
        assert!(resp.usage.prompt_tokens > 0 && resp.usage.completion_tokens > 0);
        assert_eq!(resp.model, "m-ask");
        let attempts = log.attempts();
        assert_eq!(attempts.len(), 1, "{protocol:?}");
        assert!(attempts[0].first_token.is_some(), "{protocol:?}");
        assert_eq!(attempts[0].usage, resp.usage);
        let body = server.last_request().expect("request").body;
        assert_eq!(body["stream"], true, "{protocol:?}");
        if protocol == Protocol::OpenAi {
            assert_eq!(body["stream_options"]["include_usage"], true);
        }
    }
}

#[test]
fn a_structured_reply_streams_and_is_validated() {
    for protocol in PROTOCOLS {
        let server = mock();
        let b = streaming(&server, protocol);
        let (mut r, seen) = watched("plan it");
        r.kind = LlmOpKind::Plan;
        r.json_schema = ais_vm::llm::schema::schema_for(LlmOpKind::Plan);
        let resp = b
            .complete(&r, &CancelToken::new())
            .unwrap_or_else(|e| panic!("{protocol:?}: {e}"));
        assert!(resp.json.is_some(), "{protocol:?}");
        assert_eq!(text_of(&events(&seen), 1).0, resp.text);
    }
}

#[test]
fn a_cut_stream_is_retried_and_the_retry_is_the_result() {
    for (protocol, transport) in PROTOCOLS
        .into_iter()
        .flat_map(|p| TRANSPORTS.map(|t| (p, t)))
    {
        for fault in [MockReply::StreamCut, MockReply::StreamMalformed] {
            let server = mock();
            server.push(fault.clone());
            let b = streaming_on(&server, protocol, transport);
            let (r, seen) = watched("hello there friend");
            let log = AttemptLog::new();
            let resp = b
                .complete_observed(&r, &CancelToken::new(), &log)
                .unwrap_or_else(|e| panic!("{protocol:?} {fault:?}: {e}"));
            let got = events(&seen);
            let (cut, cut_count) = text_of(&got, 1);
            assert!(
                cut_count >= 1,
                "{protocol:?} {fault:?}: the cut attempt streamed"
            );
            assert!(resp.text.starts_with(&cut) && resp.text != cut);
            let reset_at = got
                .iter()
                .position(|e| *e == TextEvent::Reset { attempt: 1 })
                .unwrap_or_else(|| panic!("{protocol:?} {fault:?}: no reset in {got:?}"));
            let first_of_2 = got
                .iter()
                .position(|e| matches!(e, TextEvent::Delta { attempt: 2, .. }))
                .expect("attempt 2 streamed");
            assert!(reset_at < first_of_2);
            assert_eq!(text_of(&got, 2).0, resp.text, "{protocol:?} {fault:?}");
            let attempts = log.attempts();
            assert_eq!(attempts.len(), 2);
            // A chunked body cut mid-way is a transport error (or, when
            // the cut lands between events, a stream without its end); an
            // event that does not decode is a bad reply.
            let allowed: &[LlmErrorKind] = match fault {
                MockReply::StreamCut => &[LlmErrorKind::Connect, LlmErrorKind::InvalidResponse],
                _ => &[LlmErrorKind::InvalidResponse],
            };
            assert!(
                attempts[0].error.is_some_and(|k| allowed.contains(&k)),
                "{protocol:?} {fault:?}: {:?}",
                attempts[0]
            );
            assert!(attempts[0].retry_in.is_some());
            assert!(attempts[1].is_ok());
            assert_eq!(server.request_count(), 2);
        }
    }
}

#[test]
fn a_stream_framed_by_closing_the_connection_is_read_whole() {
    for (protocol, transport) in PROTOCOLS
        .into_iter()
        .flat_map(|p| TRANSPORTS.map(|t| (p, t)))
    {
        let server = mock();
        server.push(MockReply::StreamUntilClose);
        let b = streaming_on(&server, protocol, transport);
        let (r, seen) = watched("close framing");
        let resp = b
            .complete(&r, &CancelToken::new())
            .unwrap_or_else(|e| panic!("{protocol:?}: {e}"));
        assert_eq!(text_of(&events(&seen), 1).0, resp.text);
        assert!(resp.text.contains("close framing"));
        assert_eq!(server.request_count(), 1);
    }
}

#[test]
fn errors_and_scripted_whole_replies_still_work_when_streaming() {
    let server = mock();
    server.push(MockReply::rate_limited_ms(1));
    server.push(MockReply::openai_finish("length"));
    let b = streaming(&server, Protocol::OpenAi);
    let (r, _) = watched("x");
    let err = b.complete(&r, &CancelToken::new()).expect_err("truncated");
    assert_eq!(err.kind, LlmErrorKind::Truncated);
    assert_eq!(server.request_count(), 2);
}

#[test]
fn streaming_off_sends_a_plain_request() {
    for protocol in PROTOCOLS {
        let server = mock();
        let b = backend(&server, protocol);
        assert!(!b.options().stream);
        let (r, seen) = watched("no stream");
        let log = AttemptLog::new();
        let resp = b
            .complete_observed(&r, &CancelToken::new(), &log)
            .expect("reply");
        assert!(resp.text.contains("no stream"));
        let body = server.last_request().expect("request").body;
        match protocol {
            Protocol::Ollama => assert_eq!(body["stream"], false),
            _ => assert!(body.get("stream").is_none(), "{protocol:?}: {body}"),
        }
        assert!(body.get("stream_options").is_none());
        assert!(events(&seen).is_empty());
        assert_eq!(log.attempts()[0].first_token, None);
    }
}

#[test]
fn the_config_turns_streaming_on_by_default_and_off_per_backend() {
    use ais_vm::config::{Config, Env, Flags, Settings};
    let parse = |text: &str| Config::parse(text, std::path::Path::new("t.toml"));
    let bad = parse("[[llm_backends]]\nname = \"x\"\nprotocol = \"openai\"\nstream = \"yes\"\n");
    let message = bad.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("stream"), "{message}");

    let server = mock();
    let dir = tempfile::tempdir().expect("tempdir");
    for (line, streamed) in [
        ("", true),
        ("stream = false\n", false),
        ("stream = true\n", true),
    ] {
        let text = format!(
            "[[llm_backends]]\nname = \"x\"\nprotocol = \"openai\"\nbase_url = \"{}\"\n{line}",
            server.openai_url()
        );
        let config = parse(&text).expect("valid");
        assert_eq!(
            config
                .backends
                .iter()
                .find(|b| b.name == "x")
                .map(|b| b.stream),
            Some(streamed)
        );
        let s = Settings::resolve(config, &Flags::default(), &Env::empty(dir.path()))
            .expect("settings");
        assert!(
            s.show().contains(&format!("stream = {streamed}")),
            "{}",
            s.show()
        );
        let b = s.build_backend("x").expect("backend");
        let (r, seen) = watched("configured");
        let resp = b.complete(&r, &CancelToken::new()).expect("reply");
        let body = server.last_request().expect("request").body;
        assert_eq!(body.get("stream").is_some(), streamed, "{line:?}: {body}");
        assert_eq!(body.get("stream_options").is_some(), streamed);
        let (text, count) = text_of(&events(&seen), 1);
        if streamed {
            assert!(count >= 2);
            assert_eq!(text, resp.text);
        } else {
            assert_eq!(count, 0);
        }
    }
}

/// A server that answers each of `n` connections with a stream head and
/// one event, then holds the connection open for `hold`.
fn silent_server(n: usize, hold: Duration) -> (String, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let t = std::thread::spawn(move || {
        let mut conns = Vec::new();
        for _ in 0..n {
            let Ok((mut s, _)) = listener.accept() else {
                return;
            };
            use std::io::{Read, Write};
            let mut buf = [0u8; 65536];
            let _ = s.read(&mut buf);
            let event = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n";
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n",
                event.len()
            );
            conns.push(s);
        }
        std::thread::sleep(hold);
    });
    (url, t)
}

#[test]
fn an_idle_stream_times_out_and_a_cancel_ends_it() {
    for transport in TRANSPORTS {
        let (url, hold) = silent_server(2, Duration::from_secs(2));
        let mut o = ais_vm::llm::http::HttpOptions::new("idle", Protocol::OpenAi, &url);
        o.stream = true;
        o.transport = transport;
        o.timeout = Duration::from_millis(300);
        o.retry.max_retries = 0;
        let b = HttpBackend::new(o);
        let (r, seen) = watched("x");
        let err = b.complete(&r, &CancelToken::new()).expect_err("idle");
        assert_eq!(err.kind, LlmErrorKind::Timeout, "{transport:?}");
        assert!(
            err.message.contains("idle"),
            "{transport:?}: {}",
            err.message
        );
        assert_eq!(text_of(&events(&seen), 1).0, "hi", "{transport:?}");

        let cancel = CancelToken::new();
        let c2 = cancel.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            c2.cancel();
        });
        let mut o = ais_vm::llm::http::HttpOptions::new("idle", Protocol::OpenAi, &url);
        o.stream = true;
        o.transport = transport;
        o.timeout = Duration::from_secs(30);
        let b = HttpBackend::new(o);
        let err = b.complete(&r, &cancel).expect_err("cancelled");
        assert_eq!(err.kind, LlmErrorKind::Cancelled, "{transport:?}");
        let _ = t.join();
        let _ = hold.join();
    }
}

/// A stream that keeps sending outlives a timeout shorter than the whole
/// stream: the timeout is for silence.
#[test]
fn a_slow_but_steady_stream_is_not_timed_out() {
    for transport in TRANSPORTS {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        let server = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let Ok((mut s, _)) = listener.accept() else {
                return;
            };
            let mut buf = [0u8; 65536];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            );
            let mut chunk = |e: &str| {
                let _ = write!(s, "{:x}\r\n{e}\r\n", e.len());
                let _ = s.flush();
            };
            for i in 0..6 {
                chunk(&format!(
                    "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"p{i} \"}}}}]}}\n\n"
                ));
                std::thread::sleep(Duration::from_millis(150));
            }
            chunk("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
            let _ = write!(s, "0\r\n\r\n");
            let _ = s.flush();
            std::thread::sleep(Duration::from_millis(200));
        });
        let mut o = ais_vm::llm::http::HttpOptions::new("steady", Protocol::OpenAi, &url);
        o.stream = true;
        o.transport = transport;
        // Shorter than the whole stream (6 × 150 ms), longer than any gap.
        o.timeout = Duration::from_millis(600);
        o.retry.max_retries = 0;
        let b = HttpBackend::new(o);
        let (mut r, seen) = watched("x");
        // When each delta arrived: they must come as the server sends them
        // (750 ms from the first to the last), not all at the end.
        let times = Arc::new(Mutex::new(Vec::new()));
        let (into, inner) = (Arc::clone(&times), r.on_text.take());
        r.on_text = Some(TextSink::new(move |e: &TextEvent| {
            into.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(std::time::Instant::now());
            if let Some(s) = &inner {
                s.send(e);
            }
        }));
        let log = AttemptLog::new();
        let resp = b
            .complete_observed(&r, &CancelToken::new(), &log)
            .unwrap_or_else(|e| panic!("{transport:?}: {e}"));
        assert_eq!(resp.text, "p0 p1 p2 p3 p4 p5 ");
        assert_eq!(text_of(&events(&seen), 1), (resp.text.clone(), 6));
        let times = times.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let spread = times[times.len() - 1].duration_since(times[0]);
        assert!(
            spread >= Duration::from_millis(600),
            "{transport:?}: {spread:?}"
        );
        let attempt = &log.attempts()[0];
        let first = attempt.first_token.expect("first token");
        assert!(
            attempt.latency >= first + Duration::from_millis(600),
            "{transport:?}: {attempt:?}"
        );
        let _ = server.join();
    }
}

#[test]
fn started_calls_stream_on_both_transport_settings() {
    for transport in [HttpTransport::Auto, HttpTransport::Threads] {
        let server = mock();
        let mut o = options(&server, Protocol::OpenAi);
        o.stream = true;
        o.transport = transport;
        let b = HttpBackend::new(o);
        let (tx, rx) = std::sync::mpsc::channel();
        let mut calls = Vec::new();
        let mut seen_all = Vec::new();
        for i in 0..4 {
            let (r, seen) = watched(&format!("call number {i}"));
            seen_all.push(seen);
            let tx = tx.clone();
            calls.push((
                r,
                CancelToken::new(),
                Box::new(move |res: Result<_, _>, _attempts| {
                    let _ = tx.send((i, res));
                }) as ais_vm::llm::OnDone,
            ));
        }
        b.start_many(calls);
        for _ in 0..4 {
            let (i, res) = rx.recv_timeout(Duration::from_secs(20)).expect("outcome");
            let resp: ais_vm::llm::LlmResponse = res.expect("reply");
            assert!(resp.text.contains(&format!("call number {i}")));
            assert_eq!(
                text_of(&events(&seen_all[i]), 1).0,
                resp.text,
                "{transport:?}"
            );
        }
        assert!(server.requests().iter().all(|r| r.body["stream"] == true));
    }
}

#[test]
fn a_streamed_call_records_and_replays_its_text() {
    use ais_vm::llm::record::{RecordingBackend, ReplayBackend};
    let dir = tempfile::tempdir().expect("tempdir");
    let server = mock();
    let inner: Arc<dyn LlmBackend> = Arc::new(streaming(&server, Protocol::Anthropic));
    let rec = RecordingBackend::new(inner, dir.path()).expect("recorder");
    let (r, seen) = watched("remember this");
    let live = rec.complete(&r, &CancelToken::new()).expect("live");
    let (live_text, live_count) = text_of(&events(&seen), 1);
    assert!(live_count >= 2);
    assert_eq!(live_text, live.text);

    let replay = ReplayBackend::new(dir.path()).expect("replay");
    let (r2, seen2) = watched("remember this");
    let again = replay.complete(&r2, &CancelToken::new()).expect("replayed");
    assert_eq!(again.text, live.text);
    assert_eq!(
        events(&seen2),
        vec![TextEvent::Delta {
            attempt: 1,
            text: live.text.clone()
        }]
    );
    assert_eq!(server.request_count(), 1);
}

#[test]
fn a_repair_round_resets_the_rejected_text() {
    for transport in TRANSPORTS {
        let server = mock();
        server.push(MockReply::Content("not json at all".into()));
        let b = streaming_on(&server, Protocol::OpenAi, transport);
        let (mut r, seen) = watched("plan it");
        r.kind = LlmOpKind::Plan;
        r.json_schema = ais_vm::llm::schema::schema_for(LlmOpKind::Plan);
        let resp = b
            .complete(&r, &CancelToken::new())
            .unwrap_or_else(|e| panic!("{transport:?}: {e}"));
        assert!(resp.json.is_some());
        let got = events(&seen);
        assert_eq!(text_of(&got, 1).0, "not json at all");
        let reset = got
            .iter()
            .position(|e| *e == TextEvent::Reset { attempt: 1 })
            .unwrap_or_else(|| panic!("{transport:?}: no reset in {got:?}"));
        assert!(got[reset + 1..]
            .iter()
            .all(|e| matches!(e, TextEvent::Delta { attempt: 2, .. })));
        assert_eq!(text_of(&got, 2).0, resp.text);
        assert_eq!(server.request_count(), 2);
    }
}

/// A started call whose first reply is judged on the event transport's I/O
/// thread and carried on on an HTTP thread (a retry, a repair round) sends
/// one `Reset` per rejected attempt, not one per judging.
#[test]
fn a_started_call_resets_each_rejected_attempt_once() {
    for (fault, kind) in [
        (MockReply::StreamCut, LlmOpKind::Ask),
        (MockReply::Content("not json".into()), LlmOpKind::Plan),
    ] {
        for transport in TRANSPORTS {
            let server = mock();
            server.push(fault.clone());
            let b = streaming_on(&server, Protocol::OpenAi, transport);
            let (mut r, seen) = watched("go on");
            r.kind = kind;
            r.json_schema = ais_vm::llm::schema::schema_for(kind);
            let (tx, rx) = std::sync::mpsc::channel();
            b.start(
                r,
                CancelToken::new(),
                Box::new(move |res, _| {
                    let _ = tx.send(res);
                }),
            );
            let resp = rx
                .recv_timeout(Duration::from_secs(20))
                .expect("outcome")
                .unwrap_or_else(|e| panic!("{fault:?} {transport:?}: {e}"));
            let got = events(&seen);
            let resets: Vec<&TextEvent> = got
                .iter()
                .filter(|e| matches!(e, TextEvent::Reset { .. }))
                .collect();
            assert_eq!(
                resets,
                [&TextEvent::Reset { attempt: 1 }],
                "{fault:?} {transport:?}"
            );
            assert_eq!(text_of(&got, 2).0, resp.text);
        }
    }
}

/// The mock can pace a stream (for benchmarks of work that starts before a
/// reply ends): the text then arrives in several deltas, in order (how long
/// they take is the benchmark's business, not an assertion here).
#[test]
fn a_paced_mock_stream_arrives_over_time() {
    for transport in TRANSPORTS {
        let server = mock();
        server.set_stream_interval(Duration::from_millis(40));
        // 5 text pieces of 8 characters, then the end: 6+ events.
        server.push(MockReply::Content("a".repeat(40)));
        let b = streaming_on(&server, Protocol::Anthropic, transport);
        let (mut r, _) = watched("x");
        let times = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&times);
        r.on_text = Some(TextSink::new(move |_: &TextEvent| {
            into.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(std::time::Instant::now());
        }));
        let resp = b.complete(&r, &CancelToken::new()).expect("reply");
        assert_eq!(resp.text.len(), 40);
        let times = times.lock().unwrap_or_else(|p| p.into_inner()).clone();
        // 40 ms apart, the pieces are not read as one.
        assert!(times.len() >= 2, "{transport:?}: {} deltas", times.len());
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
    }
}

#[test]
fn an_empty_streamed_reply_is_rejected_like_a_null_whole_one() {
    // Issue 32, defect 6: the stream was accepted as "" while the whole
    // reply with `content: null` was rejected.
    for transport in [HttpTransport::Auto, HttpTransport::Threads] {
        let server = mock();
        let mut o = options(&server, Protocol::OpenAi);
        o.retry.max_retries = 0;
        o.transport = transport;
        server.push(MockReply::json(serde_json::json!({
            "model": "m",
            "choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": null}}]
        })));
        let whole = HttpBackend::new(o.clone())
            .complete(&request(LlmOpKind::Ask, "x"), &CancelToken::new())
            .expect_err("null content");
        o.stream = true;
        server.push(MockReply::Content(String::new()));
        let streamed = HttpBackend::new(o)
            .complete(&request(LlmOpKind::Ask, "x"), &CancelToken::new())
            .expect_err("empty stream");
        assert_eq!(whole.kind, LlmErrorKind::InvalidResponse, "{transport:?}");
        assert_eq!(streamed.kind, whole.kind, "{transport:?}: {streamed}");
        assert_eq!(server.request_count(), 2);
        assert_eq!(server.last_request().expect("r").body["stream"], true);
    }
}
