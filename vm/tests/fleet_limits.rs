//! The fleet-limit wrapper (`store::limits::limited`) with the in-process
//! member (`LocalLimiter`, a SQLite store's): calls beyond the limit wait
//! for a slot, every call is answered once, and a `Retry-After` pause
//! holds calls that start after it. The PostgreSQL member is tested
//! across processes in `cli/tests/fleet_limits.rs`.
#![allow(clippy::unwrap_used)]

use ais_vm::config::FleetLimits;
use ais_vm::llm::{CancelToken, LlmBackend, LlmError, LlmOpKind, LlmRequest, LlmResponse, Usage};
use ais_vm::store::limits::{self, local::LocalLimiter, Limiter, Take};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// A provider that counts its calls in flight.
#[derive(Default)]
struct Counting {
    now: AtomicUsize,
    peak: AtomicUsize,
    calls: AtomicUsize,
}

impl LlmBackend for Counting {
    fn name(&self) -> &str {
        "p"
    }
    fn complete(&self, req: &LlmRequest, _: &CancelToken) -> Result<LlmResponse, LlmError> {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(n, Ordering::SeqCst);
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(15));
        self.now.fetch_sub(1, Ordering::SeqCst);
        Ok(LlmResponse {
            text: req.prompt.clone(),
            json: None,
            usage: Usage::default(),
            finish_reason: "stop".into(),
            model: "p".into(),
            latency: Duration::ZERO,
            simulated: false,
            tool_calls: Vec::new(),
        })
    }
}

fn limits(concurrency: u64) -> FleetLimits {
    FleetLimits {
        concurrency: Some(concurrency),
        ..FleetLimits::default()
    }
}

#[test]
fn calls_beyond_the_limit_wait_and_each_is_answered_once() {
    let provider = Arc::new(Counting::default());
    let limiter: Arc<dyn Limiter> = Arc::new(LocalLimiter::default());
    let b = limits::limited(provider.clone(), limiter.clone(), limits(3));
    assert_eq!(b.concurrency(), 3, "a run asks no more than the fleet has");
    let (tx, rx) = mpsc::channel();
    for i in 0..24 {
        let tx = tx.clone();
        b.start(
            ais_testkit::llm::request(LlmOpKind::Ask, &format!("q{i}")),
            CancelToken::new(),
            Box::new(move |r, _| {
                let _ = tx.send(r.map(|r| r.text));
            }),
        );
    }
    drop(tx);
    let mut answers: Vec<String> = rx.iter().map(|r| r.unwrap()).collect();
    answers.sort();
    assert_eq!(answers.len(), 24);
    answers.dedup();
    assert_eq!(answers.len(), 24);
    assert_eq!(provider.calls.load(Ordering::SeqCst), 24);
    let peak = provider.peak.load(Ordering::SeqCst);
    assert!((1..=3).contains(&peak), "peak {peak}");
    let load = limiter.load().unwrap();
    assert_eq!(load[0].0, "p");
    assert_eq!(load[0].1.in_flight, 0);
    assert!(load[0].1.waits > 0, "{load:?}");
}

#[test]
fn a_pause_holds_new_slots_and_a_cancelled_waiting_call_ends() {
    let limiter = LocalLimiter::default();
    limiter.pause("p", Duration::from_secs(30)).unwrap();
    match limiter.try_take("p", &limits(4)).unwrap() {
        Take::Wait(d) => assert!(d > Duration::from_secs(20), "{d:?}"),
        Take::Slot(_) => panic!("a slot during a pause"),
    }
    // Through the wrapper: the call waits; its cancel ends it unanswered
    // by the provider.
    let provider = Arc::new(Counting::default());
    let shared: Arc<dyn Limiter> = Arc::new(limiter);
    let b = limits::limited(provider.clone(), shared, limits(4));
    let cancel = CancelToken::new();
    let (tx, rx) = mpsc::channel();
    b.start(
        ais_testkit::llm::request(LlmOpKind::Ask, "held"),
        cancel.clone(),
        Box::new(move |r, _| {
            let _ = tx.send(r);
        }),
    );
    cancel.cancel();
    let r = rx.recv().unwrap();
    assert!(r.is_err());
    assert_eq!(provider.calls.load(Ordering::SeqCst), 0);
}

#[test]
fn requests_per_minute_hold_once_the_window_is_used() {
    let limiter = LocalLimiter::default();
    let rpm = FleetLimits {
        requests_per_minute: Some(2),
        ..FleetLimits::default()
    };
    for _ in 0..2 {
        let Take::Slot(t) = limiter.try_take("p", &rpm).unwrap() else {
            panic!("no slot within the rate");
        };
        limiter.give_back("p", &t, 10).unwrap();
    }
    assert!(matches!(
        limiter.try_take("p", &rpm).unwrap(),
        Take::Wait(d) if d > Duration::from_secs(1)
    ));
}
