//! Issue 32, defect 4: every request a backend sends is reported as an
//! attempt, including the requests of calls cancelled while in flight
//! (a run that fails cancels its other calls).

use ais_testkit::llm::*;
use ais_vm::llm::http::{HttpBackend, HttpTransport, Protocol};
use ais_vm::llm::{Attempt, CancelToken, LlmBackend, LlmErrorKind, LlmOpKind, OnDone};
use std::sync::mpsc;
use std::time::Duration;

#[test]
fn calls_cancelled_in_flight_report_their_request() {
    for transport in [HttpTransport::Auto, HttpTransport::Threads] {
        let server = mock();
        // Slower than the test: every call is in flight when cancelled.
        server.set_latency(Duration::from_secs(30));
        let mut o = options(&server, Protocol::OpenAi);
        o.transport = transport;
        let b = HttpBackend::new(o);
        let cancel = CancelToken::new();
        let (tx, rx) = mpsc::channel::<(bool, Vec<Attempt>)>();
        let calls = (0..16)
            .map(|i| {
                let tx = tx.clone();
                let done: OnDone = Box::new(move |r, attempts| {
                    let _ = tx.send((r.is_err(), attempts));
                });
                (
                    request(LlmOpKind::Ask, &format!("q{i}")),
                    cancel.clone(),
                    done,
                )
            })
            .collect();
        b.start_many(calls);
        // Wait (bounded) until the server has read all 16 requests.
        for _ in 0..2000 {
            if server.request_count() == 16 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(server.request_count(), 16, "{transport:?}");
        cancel.cancel();
        let outcomes: Vec<(bool, Vec<Attempt>)> = (0..16)
            .map(|_| {
                rx.recv_timeout(Duration::from_secs(60))
                    .expect("each call ends")
            })
            .collect();
        assert!(outcomes.iter().all(|(failed, _)| *failed));
        let attempts: Vec<&Attempt> = outcomes.iter().flat_map(|(_, a)| a).collect();
        assert_eq!(attempts.len(), 16, "{transport:?}: one per request sent");
        // Cancelled (the event transport stops waiting at once), or
        // timed out (a thread blocked in its exchange sees the cancel only
        // when it ends): either way an unanswered request.
        for a in &attempts {
            assert!(
                matches!(
                    a.error,
                    Some(LlmErrorKind::Cancelled | LlmErrorKind::Timeout)
                ),
                "{transport:?}: {:?}",
                a.message
            );
        }
    }
}
