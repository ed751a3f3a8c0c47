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
        Ok(echo(req))
    }
}

/// The reply of the test providers: the prompt back.
fn echo(req: &LlmRequest) -> LlmResponse {
    LlmResponse {
        text: req.prompt.clone(),
        json: None,
        usage: Usage::default(),
        finish_reason: "stop".into(),
        model: "p".into(),
        latency: Duration::ZERO,
        simulated: false,
        tool_calls: Vec::new(),
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
    match limiter.try_take("p", &limits(4), 0).unwrap() {
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
        let Take::Slot(t) = limiter.try_take("p", &rpm, 0).unwrap() else {
            panic!("no slot within the rate");
        };
        limiter.give_back("p", &t, 10).unwrap();
    }
    assert!(matches!(
        limiter.try_take("p", &rpm, 0).unwrap(),
        Take::Wait(d) if d > Duration::from_secs(1)
    ));
}

/// A provider that records the order of its calls; the first one holds
/// its slot until the test lets it go.
struct Ordered {
    order: std::sync::Mutex<Vec<String>>,
    hold: std::sync::Mutex<Option<mpsc::Receiver<()>>>,
}

impl LlmBackend for Ordered {
    fn name(&self) -> &str {
        "p"
    }
    fn complete(&self, req: &LlmRequest, _: &CancelToken) -> Result<LlmResponse, LlmError> {
        let first = {
            let mut order = self.order.lock().unwrap();
            order.push(req.prompt.clone());
            order.len() == 1
        };
        if first {
            if let Some(rx) = self.hold.lock().unwrap().take() {
                let _ = rx.recv();
            }
        }
        Ok(echo(req))
    }
}

#[test]
fn the_least_served_run_goes_next_whatever_the_arrival_order() {
    use ais_vm::llm::attained::Attained;
    use std::sync::atomic::AtomicU64;
    let (release, held) = mpsc::channel();
    let provider = Arc::new(Ordered {
        order: std::sync::Mutex::default(),
        hold: std::sync::Mutex::new(Some(held)),
    });
    let limiter: Arc<dyn Limiter> = Arc::new(LocalLimiter::default());
    let b = limits::limited(provider.clone(), limiter, limits(1));
    // A long run that has had seven calls, then a fresh run's one call.
    let long = Arc::new(AtomicU64::new(7));
    let fresh = Arc::new(AtomicU64::new(0));
    let (tx, rx) = mpsc::channel();
    let send = |prompt: &str, run: &Arc<AtomicU64>| {
        let mut req = ais_testkit::llm::request(LlmOpKind::Ask, prompt);
        req.attained = Attained::of(run);
        let tx = tx.clone();
        b.start(
            req,
            CancelToken::new(),
            Box::new(move |r, _| {
                let _ = tx.send(r.map(|r| r.text));
            }),
        );
    };
    for i in 0..5 {
        send(&format!("long {i}"), &long);
    }
    send("fresh", &fresh);
    release.send(()).unwrap();
    drop(tx);
    assert_eq!(rx.iter().filter(Result::is_ok).count(), 6);
    let order = provider.order.lock().unwrap().clone();
    // At most one long call (the one that found the slot free before the
    // others queued) went before the fresh run's call, queued last; the
    // long run's calls kept their order.
    let fresh_at = order.iter().position(|p| p == "fresh").unwrap();
    assert!(fresh_at <= 1, "{order:?}");
    let longs: Vec<&String> = order.iter().filter(|p| *p != "fresh").collect();
    assert_eq!(
        longs,
        ["long 0", "long 1", "long 2", "long 3", "long 4"],
        "{order:?}"
    );
}

/// Two limiters on one PostgreSQL store stand for two processes: a free
/// slot goes to the one whose next call's run has had less service while
/// it waits, until it stops waiting or its claim lapses.
#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn across_the_fleet_a_free_slot_waits_for_the_least_served_process() {
    use ais_vm::store::limits::postgres::{PgLimiter, WAITER_LEASE_MS};
    let pg = ais_testkit::pg::PgServer::start();
    let url = pg.url();
    // The run store migrates the schema the limiter uses.
    drop(ais_vm::store::postgres::PgStore::connect(&url).unwrap());
    let (long, fresh) = (
        PgLimiter::connect(&url).unwrap(),
        PgLimiter::connect(&url).unwrap(),
    );
    let one = limits(1);
    let waits =
        |l: &PgLimiter, service| matches!(l.try_take("p", &one, service).unwrap(), Take::Wait(_));
    let slot = |t: Take| match t {
        Take::Slot(token) => token,
        Take::Wait(d) => panic!("told to wait {d:?}"),
    };
    let a = slot(long.try_take("p", &one, 5).unwrap());
    // The fresh run's process finds the slot taken and waits.
    assert!(waits(&fresh, 0));
    long.give_back("p", &a, 0).unwrap();
    // The slot is free, but the long run's process has had more service.
    assert!(waits(&long, 5));
    let b = slot(fresh.try_take("p", &one, 0).unwrap());
    fresh.give_back("p", &b, 0).unwrap();
    fresh.stop_waiting("p").unwrap();
    let c = slot(long.try_take("p", &one, 5).unwrap());
    // Equal service holds no one back.
    assert!(waits(&fresh, 5));
    long.give_back("p", &c, 0).unwrap();
    let d = slot(long.try_take("p", &one, 5).unwrap());
    long.give_back("p", &d, 0).unwrap();
    fresh.stop_waiting("p").unwrap();
    // A waiting process that is gone (no more polls) holds no one back
    // once its claim lapses.
    let e = slot(long.try_take("p", &one, 5).unwrap());
    assert!(waits(&fresh, 0));
    long.give_back("p", &e, 0).unwrap();
    assert!(waits(&long, 5));
    std::thread::sleep(Duration::from_millis(
        u64::try_from(WAITER_LEASE_MS).unwrap() + 200,
    ));
    slot(long.try_take("p", &one, 5).unwrap());
}
