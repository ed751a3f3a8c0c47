//! Retries, backoff, Retry-After, timeouts, faults, cancellation and key
//! masking of the HTTP backends, against the mock server.

use ais_testkit::llm::*;
use ais_testkit::mock::MockReply;
use ais_vm::llm::http::{HttpBackend, Protocol};
use ais_vm::llm::{Attempt, AttemptLog, CancelToken, LlmBackend, LlmErrorKind, LlmOpKind};
use std::sync::Arc;
use std::time::Duration;

fn run(
    server: &ais_testkit::mock::MockServer,
) -> (
    Result<ais_vm::llm::LlmResponse, ais_vm::llm::LlmError>,
    Vec<Attempt>,
) {
    let log = AttemptLog::new();
    let r = backend(server, Protocol::OpenAi).complete_observed(
        &request(LlmOpKind::Ask, "hello"),
        &CancelToken::new(),
        &log,
    );
    (r, log.attempts())
}

#[test]
fn retries_500_and_503_then_succeeds() {
    let server = mock();
    server
        .push(MockReply::error(500, "boom"))
        .push(MockReply::error(503, "busy"));
    let (r, attempts) = run(&server);
    assert!(r.is_ok());
    assert_eq!(server.request_count(), 3);
    let statuses: Vec<_> = attempts
        .iter()
        .map(|a| (a.number, a.status, a.error))
        .collect();
    assert_eq!(
        statuses,
        vec![
            (1, Some(500), Some(LlmErrorKind::Server)),
            (2, Some(503), Some(LlmErrorKind::Server)),
            (3, Some(200), None)
        ]
    );
    assert!(attempts[..2]
        .iter()
        .all(|a| a.retry_in.is_some() && !a.server_delay));
    assert_eq!(attempts[0].message.as_deref(), Some("boom"));
}

#[test]
fn backoff_is_bounded_by_max_delay() {
    let server = mock();
    server.push_n(MockReply::error(502, "bad gateway"), 3);
    let (r, attempts) = run(&server);
    assert!(r.is_ok());
    for a in &attempts[..3] {
        let d = a.retry_in.expect("retry delay");
        assert!(d <= Duration::from_millis(4), "{d:?}");
    }
}

#[test]
fn gives_up_after_max_retries_with_a_structured_error() {
    let server = mock();
    server.push_n(MockReply::error(500, "still broken"), 10);
    let (r, attempts) = run(&server);
    let e = r.expect_err("fails");
    assert_eq!(
        (e.kind, e.status, e.attempts, e.provider.as_str()),
        (LlmErrorKind::Server, Some(500), 4, "mock")
    );
    assert_eq!(e.message, "still broken (after 4 attempts)");
    assert_eq!(
        e.to_string(),
        "mock: still broken (after 4 attempts) (HTTP 500)"
    );
    assert_eq!(server.request_count(), 4);
    assert_eq!(attempts.len(), 4);
    assert_eq!(attempts[3].retry_in, None);
}

#[test]
fn retries_408_and_409() {
    let server = mock();
    server
        .push(MockReply::error(408, "timeout"))
        .push(MockReply::error(409, "conflict"));
    let (r, _) = run(&server);
    assert!(r.is_ok());
    assert_eq!(server.request_count(), 3);
}

#[test]
fn no_retry_on_client_errors() {
    for (status, kind) in [
        (400, LlmErrorKind::Client),
        (401, LlmErrorKind::Auth),
        (403, LlmErrorKind::Auth),
        (404, LlmErrorKind::Client),
    ] {
        let server = mock();
        server.push(MockReply::error(status, "nope"));
        let (r, attempts) = run(&server);
        let e = r.expect_err("fails");
        assert_eq!(
            (e.kind, e.status, e.attempts),
            (kind, Some(status), 1),
            "status {status}"
        );
        assert_eq!(server.request_count(), 1);
        assert_eq!(attempts.len(), 1);
    }
}

#[test]
fn no_retry_on_insufficient_quota() {
    let server = mock();
    server.push(MockReply::insufficient_quota());
    let (r, _) = run(&server);
    let e = r.expect_err("fails");
    assert_eq!(
        (e.kind, e.status, e.attempts),
        (LlmErrorKind::Client, Some(429), 1)
    );
    assert!(
        e.message
            .starts_with("spend limit or quota exhausted, not retried"),
        "{}",
        e.message
    );
    assert_eq!(server.request_count(), 1);
}

#[test]
fn honours_retry_after_ms() {
    let server = mock();
    server.push(MockReply::rate_limited_ms(25));
    let (r, attempts) = run(&server);
    assert!(r.is_ok());
    assert_eq!(attempts[0].error, Some(LlmErrorKind::RateLimited));
    assert_eq!(attempts[0].status, Some(429));
    assert_eq!(attempts[0].retry_in, Some(Duration::from_millis(25)));
    assert!(attempts[0].server_delay);
}

#[test]
fn retry_after_seconds_is_bounded() {
    let server = mock();
    server.push(MockReply::rate_limited("7"));
    let (r, attempts) = run(&server);
    assert!(r.is_ok());
    // 7 s requested, bounded by max_retry_after (40 ms in the fixture).
    assert_eq!(attempts[0].retry_in, Some(Duration::from_millis(40)));
}

#[test]
fn retry_after_zero_and_http_date() {
    let server = mock();
    server
        .push(MockReply::rate_limited("0"))
        .push(MockReply::rate_limited("Sun, 06 Nov 1994 08:49:37 GMT"));
    let (r, attempts) = run(&server);
    assert!(r.is_ok());
    assert_eq!(attempts[0].retry_in, Some(Duration::ZERO));
    assert_eq!(attempts[1].retry_in, Some(Duration::ZERO));
}

#[test]
fn persistent_429_ends_rate_limited() {
    let server = mock();
    server.push_n(MockReply::rate_limited("0"), 5);
    let (r, _) = run(&server);
    let e = r.expect_err("fails");
    assert_eq!(
        (e.kind, e.status, e.attempts),
        (LlmErrorKind::RateLimited, Some(429), 4)
    );
}

#[test]
fn malformed_truncated_and_hangups_are_retried() {
    let server = mock();
    server
        .push(MockReply::Malformed)
        .push(MockReply::Truncated)
        .push(MockReply::Hangup);
    let (r, attempts) = run(&server);
    assert!(r.is_ok(), "{r:?}");
    let kinds: Vec<_> = attempts.iter().map(|a| a.error).collect();
    assert_eq!(kinds[0], Some(LlmErrorKind::InvalidResponse));
    assert_eq!(kinds[1], Some(LlmErrorKind::Connect));
    assert_eq!(kinds[2], Some(LlmErrorKind::Connect));
    assert_eq!(kinds[3], None);
}

#[test]
fn stalled_server_times_out() {
    let server = mock();
    server.push_n(MockReply::Stall(Duration::from_secs(30)), 2);
    let mut o = options(&server, Protocol::OpenAi);
    o.timeout = Duration::from_millis(150);
    o.retry.max_retries = 1;
    let e = HttpBackend::new(o)
        .complete(&request(LlmOpKind::Ask, "x"), &CancelToken::new())
        .expect_err("times out");
    assert_eq!(
        (e.kind, e.status, e.attempts),
        (LlmErrorKind::Timeout, None, 2)
    );
}

#[test]
fn connection_refused_is_a_connect_error() {
    let server = mock();
    let mut o = options(&server, Protocol::OpenAi);
    drop(server);
    o.retry.max_retries = 1;
    let e = HttpBackend::new(o)
        .complete(&request(LlmOpKind::Ask, "x"), &CancelToken::new())
        .expect_err("refused");
    assert_eq!((e.kind, e.attempts), (LlmErrorKind::Connect, 2));
}

#[test]
fn cancel_during_backoff_stops_the_call() {
    let server = mock();
    server.push(MockReply::rate_limited("1"));
    let mut o = options(&server, Protocol::OpenAi);
    o.retry.max_retry_after = Duration::from_secs(600);
    let b = HttpBackend::new(o);
    let cancel = CancelToken::new();
    let c2 = cancel.clone();
    // Cancel as soon as the first attempt reports that it will wait.
    let observer = move |a: &Attempt| {
        if a.retry_in.is_some() {
            c2.cancel();
        }
    };
    let e = b
        .complete_observed(&request(LlmOpKind::Ask, "x"), &cancel, &observer)
        .expect_err("cancelled");
    assert_eq!((e.kind, e.attempts), (LlmErrorKind::Cancelled, 1));
    assert_eq!(server.request_count(), 1);
}

#[test]
fn cancel_during_a_stalled_request() {
    let server = mock();
    server.push(MockReply::Stall(Duration::from_secs(60)));
    let b = Arc::new(backend(&server, Protocol::OpenAi));
    let cancel = CancelToken::new();
    let (b2, c2) = (Arc::clone(&b), cancel.clone());
    let t = std::thread::spawn(move || b2.complete(&request(LlmOpKind::Ask, "x"), &c2));
    while server.request_count() == 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    cancel.cancel();
    let e = t.join().expect("thread").expect_err("cancelled");
    assert_eq!(e.kind, LlmErrorKind::Cancelled);
}

#[test]
fn keys_never_appear_in_errors_or_debug() {
    let server = mock();
    let echo = format!("{{\"error\": {{\"message\": \"Incorrect API key provided: {KEY}. Also Bearer {KEY}\", \"code\": \"invalid_api_key\"}}}}");
    server.push(MockReply::Status {
        status: 401,
        headers: vec![],
        body: echo,
    });
    let b = backend(&server, Protocol::OpenAi);
    let log = AttemptLog::new();
    let e = b
        .complete_observed(&request(LlmOpKind::Ask, "x"), &CancelToken::new(), &log)
        .expect_err("401");
    assert_eq!(e.kind, LlmErrorKind::Auth);
    let everything = format!("{e} {e:?} {:?} {:?} {:?}", log.attempts(), b, b.options());
    assert!(!everything.contains("SECRETKEY"), "{everything}");
    assert!(!everything.contains("0123456789abcdef"), "{everything}");
    assert!(
        e.message.starts_with("Incorrect API key provided: "),
        "{}",
        e.message
    );
}

#[test]
fn concurrent_calls_share_one_backend() {
    let server = mock();
    server.set_latency(Duration::from_millis(5));
    let b = Arc::new(backend(&server, Protocol::OpenAi));
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let b = Arc::clone(&b);
            std::thread::spawn(move || {
                b.complete(
                    &request(LlmOpKind::Ask, &format!("q{i}")),
                    &CancelToken::new(),
                )
            })
        })
        .collect();
    for t in threads {
        assert!(t.join().expect("thread").is_ok());
    }
    assert_eq!(server.request_count(), 8);
}
