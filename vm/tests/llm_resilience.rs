//! Hedged requests and fallback chains (`ais_vm::llm::resilience`): when
//! a hedge is sent and to which calls, that the loser is cancelled and
//! the budget holds; which failures fall back; an outage in the middle of
//! a run. Counts and order only: no test bounds a duration from above.
#![allow(clippy::unwrap_used)]

mod ir_support;
use ir_support::program;

use ais_testkit::fake::FakeBackend;
use ais_testkit::MemoryHost;
use ais_vm::llm::resilience::{falls_back, Fallback, Hedge, HedgeAfter, HedgeConfig};
use ais_vm::llm::{
    Attempt, CancelToken, LlmBackend, LlmError, LlmErrorKind, LlmOpKind, LlmRequest, LlmResponse,
    OnDone, Usage,
};
use ais_vm::RunOptions;
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// What a scripted backend does with one request.
#[derive(Clone, Copy, Debug)]
enum Act {
    /// Answers after this long (or stops early, cancelled).
    After(Duration),
    /// Waits until cancelled.
    Hang,
    /// Fails at once.
    Fail(LlmErrorKind, Option<u16>),
}

type ScriptFn = dyn Fn(&LlmRequest, u32) -> Act + Send + Sync;

/// A backend that starts each request on a thread of its own and does
/// what its script says for the `n`-th request (from 0) of a prompt.
struct Scripted {
    name: String,
    script: Box<ScriptFn>,
    per_prompt: Mutex<HashMap<String, u32>>,
    /// Every request: prompt and whether it was marked critical.
    seen: Mutex<Vec<(String, bool)>>,
    answered: Mutex<Vec<String>>,
    cancelled: AtomicUsize,
}

impl Scripted {
    fn new(
        name: &str,
        script: impl Fn(&LlmRequest, u32) -> Act + Send + Sync + 'static,
    ) -> Arc<Scripted> {
        Arc::new(Scripted {
            name: name.into(),
            script: Box::new(script),
            per_prompt: Mutex::default(),
            seen: Mutex::default(),
            answered: Mutex::default(),
            cancelled: AtomicUsize::new(0),
        })
    }

    fn requests(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    fn requests_for(&self, prompt: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p == prompt)
            .count()
    }

    fn run(&self, req: &LlmRequest, cancel: &CancelToken) -> Result<LlmResponse, LlmError> {
        let n = {
            let mut g = self.per_prompt.lock().unwrap();
            let e = g.entry(req.prompt.clone()).or_insert(0);
            *e += 1;
            *e - 1
        };
        self.seen
            .lock()
            .unwrap()
            .push((req.prompt.clone(), req.critical));
        let wait = match (self.script)(req, n) {
            Act::Fail(kind, status) => {
                return Err(LlmError {
                    provider: self.name.clone(),
                    status,
                    message: format!("{kind:?}"),
                    attempts: 1,
                    kind,
                })
            }
            Act::After(d) => Some(d),
            Act::Hang => None,
        };
        let start = Instant::now();
        // A hung request still ends after a minute, so a broken test fails
        // instead of hanging.
        let until = start + wait.unwrap_or(Duration::from_secs(60));
        while Instant::now() < until {
            if cancel.is_cancelled() {
                self.cancelled.fetch_add(1, Ordering::SeqCst);
                return Err(LlmError::new(
                    &self.name,
                    LlmErrorKind::Cancelled,
                    "cancelled",
                ));
            }
            std::thread::sleep(Duration::from_millis(2).min(until - Instant::now()));
        }
        if wait.is_none() {
            return Err(LlmError::new(&self.name, LlmErrorKind::Timeout, "hung"));
        }
        self.answered.lock().unwrap().push(req.prompt.clone());
        Ok(LlmResponse {
            text: format!("{}: {}", self.name, req.prompt),
            json: None,
            usage: Usage::default(),
            finish_reason: "stop".into(),
            model: self.name.clone(),
            latency: start.elapsed(),
            simulated: false,
            tool_calls: Vec::new(),
        })
    }
}

/// Shares a `Scripted` as a backend.
struct Shared(Arc<Scripted>);

impl LlmBackend for Shared {
    fn name(&self) -> &str {
        &self.0.name
    }

    fn complete(&self, req: &LlmRequest, cancel: &CancelToken) -> Result<LlmResponse, LlmError> {
        self.0.run(req, cancel)
    }

    fn starts_without_waiting(&self) -> bool {
        true
    }

    fn start(&self, req: LlmRequest, cancel: CancelToken, done: OnDone) {
        let me = Arc::clone(&self.0);
        std::thread::spawn(move || {
            let t = Instant::now();
            let r = me.run(&req, &cancel);
            let a = Attempt::single(&me.name, &r, t.elapsed());
            done(r, vec![a]);
        });
    }
}

fn backend(s: &Arc<Scripted>) -> Arc<dyn LlmBackend> {
    Arc::new(Shared(Arc::clone(s)))
}

fn req(prompt: &str, critical: bool) -> LlmRequest {
    let mut r = ais_testkit::llm::request(LlmOpKind::Ask, prompt);
    r.critical = critical;
    r
}

type Outcome = (Result<LlmResponse, LlmError>, Vec<Attempt>);

/// Starts a call; its outcome arrives on the returned channel.
fn start(b: &dyn LlmBackend, r: LlmRequest, cancel: &CancelToken) -> mpsc::Receiver<Outcome> {
    let (tx, rx) = mpsc::channel();
    b.start(
        r,
        cancel.clone(),
        Box::new(move |r, a| {
            let _ = tx.send((r, a));
        }),
    );
    rx
}

fn outcome(rx: &mpsc::Receiver<Outcome>) -> Outcome {
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the call settles")
}

/// Waits (at most a minute) until `f` holds.
/// Starts one critical call per prompt as one batch; each settles into
/// the receiver with its prompt.
fn start_prompts(
    h: &Hedge,
    prompts: &[String],
    cancel: &CancelToken,
) -> mpsc::Receiver<(String, Outcome)> {
    let (tx, rx) = mpsc::channel();
    let batch = prompts
        .iter()
        .map(|p| {
            let (tx, p2) = (tx.clone(), p.clone());
            let done: OnDone = Box::new(move |r, a| {
                let _ = tx.send((p2, (r, a)));
            });
            (req(p, true), cancel.clone(), done)
        })
        .collect();
    h.start_many(batch);
    rx
}

fn eventually(what: &str, f: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < until, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn p95() -> HedgeConfig {
    HedgeConfig {
        after: HedgeAfter::Quantile(0.95),
        max_extra: 0.5,
    }
}

/// 20 calls answered, together, so the sketch knows the backend.
fn warm_up(h: &Hedge) {
    let rxs: Vec<_> = (0..20)
        .map(|i| start(h, req(&format!("warm {i}"), false), &CancelToken::new()))
        .collect();
    for rx in &rxs {
        assert!(outcome(rx).0.is_ok());
    }
}

#[test]
fn a_late_critical_call_is_hedged_after_the_observed_p95_and_the_loser_is_cancelled() {
    let s = Scripted::new("h1", |r, n| match (r.prompt.as_str(), n) {
        ("slow", 0) => Act::Hang,
        ("slow", _) => Act::After(Duration::ZERO),
        _ => Act::After(Duration::from_millis(100)),
    });
    let h = Hedge::isolated(backend(&s), p95());
    warm_up(&h);
    assert_eq!(h.stats().hedges, 0, "no call was late yet");
    let (r, attempts) = outcome(&start(&h, req("slow", true), &CancelToken::new()));
    let r = r.expect("the hedge answers");
    assert_eq!(r.text, "h1: slow");
    assert_eq!(s.requests_for("slow"), 2, "one request, then one hedge");
    // The first request was cancelled once the hedge answered.
    eventually("the losing request sees its cancellation", || {
        s.cancelled.load(Ordering::SeqCst) == 1
    });
    // One call, both requests in its attempts, in order: the cancelled
    // first, then the hedge that answered.
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!(attempts[0].error, Some(LlmErrorKind::Cancelled));
    assert!(attempts[0]
        .message
        .as_deref()
        .unwrap_or("")
        .contains("hedged"));
    assert!(attempts[1].is_ok());
    assert!(attempts[1]
        .message
        .as_deref()
        .unwrap_or("")
        .contains("hedged request"));
    assert_eq!(
        attempts.iter().map(|a| a.number).collect::<Vec<_>>(),
        vec![1, 2]
    );
    let st = h.stats();
    assert_eq!((st.calls, st.hedges, st.hedge_wins), (21, 1, 1));
}

#[test]
fn calls_off_the_critical_path_are_never_hedged() {
    let s = Scripted::new("h2", |r, _| match r.prompt.as_str() {
        "side" => Act::Hang,
        _ => Act::After(Duration::from_millis(20)),
    });
    let h = Hedge::isolated(
        backend(&s),
        HedgeConfig {
            after: HedgeAfter::Fixed(Duration::from_millis(5)),
            max_extra: 1.0,
        },
    );
    let cancel = CancelToken::new();
    let rx = start(&h, req("side", false), &cancel);
    // Well past the threshold, and a critical call gets its hedge in the
    // same time: the side call's does not come.
    let s2 = Scripted::new("h2b", |_, n| {
        if n == 0 {
            Act::Hang
        } else {
            Act::After(Duration::ZERO)
        }
    });
    let h2 = Hedge::isolated(
        backend(&s2),
        HedgeConfig {
            after: HedgeAfter::Fixed(Duration::from_millis(5)),
            max_extra: 1.0,
        },
    );
    let (r2, _) = outcome(&start(&h2, req("critical", true), &CancelToken::new()));
    assert!(r2.is_ok());
    assert_eq!(s2.requests(), 2);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(s.requests_for("side"), 1, "no hedge for a call with slack");
    cancel.cancel();
    let (r, attempts) = outcome(&rx);
    assert_eq!(r.unwrap_err().kind, LlmErrorKind::Cancelled);
    assert_eq!(attempts.len(), 1);
    assert_eq!(h.stats().hedges, 0);
}

#[test]
fn a_call_answered_before_the_threshold_gets_no_hedge() {
    let s = Scripted::new("h3", |_, _| Act::After(Duration::ZERO));
    let h = Hedge::isolated(
        backend(&s),
        HedgeConfig {
            after: HedgeAfter::Fixed(Duration::from_secs(30)),
            max_extra: 1.0,
        },
    );
    for i in 0..10 {
        let (r, attempts) = outcome(&start(&h, req(&format!("q{i}"), true), &CancelToken::new()));
        assert!(r.is_ok());
        assert_eq!(attempts.len(), 1);
    }
    assert_eq!(s.requests(), 10);
    assert_eq!(h.stats().hedges, 0);
    // Without history, a quantile threshold is unknown: nothing is hedged.
    let cold = Scripted::new("h3b", |_, _| Act::After(Duration::from_millis(30)));
    let hc = Hedge::isolated(backend(&cold), p95());
    let (r, _) = outcome(&start(&hc, req("first", true), &CancelToken::new()));
    assert!(r.is_ok());
    assert_eq!((cold.requests(), hc.stats().hedges), (1, 0));
}

#[test]
fn hedges_stay_within_the_budget() {
    // Every first request hangs; every hedge answers at once.
    let s = Scripted::new("h4", |_, n| {
        if n == 0 {
            Act::Hang
        } else {
            Act::After(Duration::ZERO)
        }
    });
    let h = Hedge::isolated(
        backend(&s),
        HedgeConfig {
            after: HedgeAfter::Fixed(Duration::from_millis(1)),
            max_extra: 0.1,
        },
    );
    let cancel = CancelToken::new();
    let (tx, rx) = mpsc::channel::<Outcome>();
    let batch = (0..50)
        .map(|i| {
            let tx = tx.clone();
            let done: OnDone = Box::new(move |r, a| {
                let _ = tx.send((r, a));
            });
            (req(&format!("c{i}"), true), cancel.clone(), done)
        })
        .collect();
    h.start_many(batch);
    let mut answered = 0;
    for _ in 0..5 {
        let (r, _) = rx.recv_timeout(Duration::from_secs(60)).unwrap();
        assert!(r.is_ok());
        answered += 1;
    }
    // 50 calls earn 5 hedges; the other 45 stay late without one.
    eventually("every call has been judged late", || h.stats().denied >= 45);
    assert_eq!(h.stats().hedges, 5);
    eventually("every request has reached the backend", || {
        s.requests() >= 55
    });
    assert_eq!(s.requests(), 55);
    cancel.cancel();
    for _ in 0..45 {
        let (r, _) = rx.recv_timeout(Duration::from_secs(60)).unwrap();
        assert_eq!(r.unwrap_err().kind, LlmErrorKind::Cancelled);
    }
    assert_eq!(answered, 5);
    assert!(rx.try_recv().is_err(), "each call settles once");
    assert_eq!(h.stats().hedges, 5);
}

#[test]
fn a_fan_out_crossing_the_threshold_together_saves_its_hedges_for_the_stragglers() {
    // 20 calls earn 2 hedges (max_extra 0.1). Six calls are a little late
    // (500 ms against a 400 ms threshold) and started first; two hang
    // until hedged. All eight are late at 400 ms: hedging the oldest then
    // would spend the budget on the six, which answer on their own, and
    // leave the two without a hedge.
    let s = Scripted::new("h5", |r, n| match (r.prompt.as_str(), n) {
        (p, 0) if p.starts_with("straggler") => Act::Hang,
        (p, _) if p.starts_with("straggler") => Act::After(Duration::ZERO),
        (p, _) if p.starts_with("late") => Act::After(Duration::from_millis(500)),
        _ => Act::After(Duration::ZERO),
    });
    let h = Hedge::isolated(
        backend(&s),
        HedgeConfig {
            after: HedgeAfter::Fixed(Duration::from_millis(400)),
            max_extra: 0.1,
        },
    );
    let prompts: Vec<String> = (0..6)
        .map(|i| format!("late {i}"))
        .chain((0..2).map(|i| format!("straggler {i}")))
        .chain((0..12).map(|i| format!("quick {i}")))
        .collect();
    let cancel = CancelToken::new();
    let rx = start_prompts(&h, &prompts, &cancel);
    let mut settled = HashMap::new();
    for _ in 0..prompts.len() {
        let (p, (r, attempts)) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("every call settles");
        assert!(r.is_ok(), "{p}: {r:?} {:?}", h.stats());
        settled.insert(p, attempts.len());
    }
    for i in 0..2 {
        assert_eq!(settled[&format!("straggler {i}")], 2, "hedged once");
        assert_eq!(s.requests_for(&format!("straggler {i}")), 2);
    }
    for i in 0..6 {
        assert_eq!(
            s.requests_for(&format!("late {i}")),
            1,
            "late {i} not hedged"
        );
    }
    let st = h.stats();
    assert_eq!((st.hedges, st.hedge_wins, st.denied), (2, 2, 0));
}

#[test]
fn a_history_slower_than_now_gives_way_to_the_fan_outs_own_answers() {
    // The history says the backend takes two minutes (written while it
    // was that slow); now 19 of a 20-way fan-out answer at once and one
    // hangs until hedged. The fan-out's own answers put its p95 at the
    // 19th answer: the hanging call is past it, and is hedged. Going by
    // the history alone it would wait two minutes for a hedge (and fail
    // first: the scripted hang ends after one).
    let s = Scripted::new("h6", |r, n| match (r.prompt.as_str(), n) {
        ("straggler", 0) => Act::Hang,
        _ => Act::After(Duration::ZERO),
    });
    let h = Hedge::isolated(backend(&s), p95());
    h.seed_latencies(LlmOpKind::Ask, &[Duration::from_secs(120); 256]);
    let cancel = CancelToken::new();
    let prompts: Vec<String> = std::iter::once("straggler".to_string())
        .chain((0..19).map(|i| format!("quick {i}")))
        .collect();
    let rx = start_prompts(&h, &prompts, &cancel);
    let mut order = Vec::new();
    for _ in 0..prompts.len() {
        let (p, (r, attempts)) = rx
            .recv_timeout(Duration::from_secs(90))
            .expect("every call settles");
        assert!(r.is_ok(), "{p}: {r:?}");
        order.push((p, attempts.len()));
    }
    // The straggler is answered by a hedge; nothing else was hedged. (Its
    // hedge may get a hedge of its own: the fan-out's median is a
    // millisecond or two, and a loaded machine can take longer than that
    // to start a request. Which outcome reaches this channel first is the
    // callbacks' race, not the hedge's order.)
    let legs = order
        .iter()
        .find(|(p, _)| p == "straggler")
        .map(|(_, n)| *n)
        .unwrap();
    assert!((2..=3).contains(&legs), "{order:?}");
    assert!(
        order.iter().filter(|(_, n)| *n == 1).count() == 19,
        "{order:?}"
    );
    // A request cancelled before its thread ran still reaches the backend.
    eventually("every request has reached the backend", || {
        s.requests() >= 19 + legs
    });
    assert_eq!(s.requests(), 19 + legs);
    let st = h.stats();
    assert_eq!(
        (st.calls, st.hedges, st.hedge_wins),
        (20, legs as u64 - 1, 1)
    );
}

#[test]
fn a_hedge_that_is_itself_late_is_hedged_again_after_the_median_not_a_whole_threshold() {
    // The history: a median of 1 ms, a p95 of 3 s. The call's first
    // request and its first hedge hang; the third request answers at
    // once. The first hedge goes at 3 s; the next one once the hedge has
    // waited the median, not another 3 s. A call off the critical path,
    // started with it and answering at 4.5 s, settles after it (waiting a
    // whole threshold again, the hedged call would settle at 6 s, after
    // it). 1.5 s either way: a loaded machine does not change the order.
    let s = Scripted::new("h7", |r, n| match (r.prompt.as_str(), n) {
        ("tail", 0 | 1) => Act::Hang,
        ("tail", _) => Act::After(Duration::ZERO),
        _ => Act::After(Duration::from_millis(4500)),
    });
    let h = Hedge::isolated(
        backend(&s),
        HedgeConfig {
            after: HedgeAfter::Quantile(0.95),
            max_extra: 1.0,
        },
    );
    let history: Vec<Duration> = std::iter::repeat_n(Duration::from_millis(1), 200)
        .chain(std::iter::repeat_n(Duration::from_secs(3), 56))
        .collect();
    h.seed_latencies(LlmOpKind::Ask, &history);
    let cancel = CancelToken::new();
    let (tx, rx) = mpsc::channel::<(&str, Outcome)>();
    let batch = [("tail", true), ("witness", false)]
        .into_iter()
        .map(|(p, critical)| {
            let tx = tx.clone();
            let done: OnDone = Box::new(move |r, a| {
                let _ = tx.send((p, (r, a)));
            });
            (req(p, critical), cancel.clone(), done)
        })
        .collect();
    h.start_many(batch);
    let (first, (r, attempts)) = rx.recv_timeout(Duration::from_secs(90)).unwrap();
    assert_eq!(first, "tail", "the hedged call settles first");
    assert!(r.is_ok(), "{r:?}");
    // Three requests: the first cancelled, one hedge answered, the other
    // cancelled (which hedge reached the backend first, and so hung, is
    // the threads' race).
    assert_eq!(attempts.len(), 3, "{attempts:?}");
    assert_eq!(attempts[0].error, Some(LlmErrorKind::Cancelled));
    assert_eq!(attempts.iter().filter(|a| a.is_ok()).count(), 1);
    assert_eq!(
        attempts
            .iter()
            .filter(|a| a.error == Some(LlmErrorKind::Cancelled))
            .count(),
        2
    );
    let (second, (r, _)) = rx.recv_timeout(Duration::from_secs(90)).unwrap();
    assert_eq!(second, "witness");
    assert!(r.is_ok());
    eventually("every request has reached the backend", || {
        s.requests_for("tail") >= 3
    });
    assert_eq!(s.requests_for("tail"), 3);
    let st = h.stats();
    assert_eq!((st.calls, st.hedges, st.hedge_wins), (2, 2, 1));
}

fn chain(a: &Arc<Scripted>, b: &Arc<Scripted>) -> Fallback {
    Fallback::new(backend(a), vec![backend(b)])
}

#[test]
fn transient_failures_fall_back_to_the_next_backend() {
    for (kind, status) in [
        (LlmErrorKind::RateLimited, Some(429)),
        (LlmErrorKind::Server, Some(503)),
        (LlmErrorKind::Server, Some(500)),
        (LlmErrorKind::Timeout, None),
        (LlmErrorKind::Connect, None),
        (LlmErrorKind::InvalidResponse, Some(200)),
    ] {
        let a = Scripted::new("a", move |_, _| Act::Fail(kind, status));
        let b = Scripted::new("b", |_, _| Act::After(Duration::ZERO));
        let f = chain(&a, &b);
        let (r, attempts) = outcome(&start(&f, req("q", false), &CancelToken::new()));
        assert_eq!(r.expect("b answers").text, "b: q", "{kind:?}");
        let providers: Vec<&str> = attempts.iter().map(|a| a.provider.as_str()).collect();
        assert_eq!(providers, vec!["a", "b"], "{kind:?}");
        assert_eq!((a.requests(), b.requests()), (1, 1), "{kind:?}");
    }
}

#[test]
fn requests_the_provider_refused_do_not_fall_back() {
    for (kind, status) in [
        (LlmErrorKind::Client, Some(400)),
        (LlmErrorKind::Client, Some(404)),
        (LlmErrorKind::Auth, Some(401)),
        (LlmErrorKind::ContextOverflow, None),
        (LlmErrorKind::Truncated, Some(200)),
        (LlmErrorKind::ContentFilter, Some(200)),
        (LlmErrorKind::Unsupported, None),
    ] {
        let a = Scripted::new("a", move |_, _| Act::Fail(kind, status));
        let b = Scripted::new("b", |_, _| Act::After(Duration::ZERO));
        let f = chain(&a, &b);
        let (r, attempts) = outcome(&start(&f, req("q", false), &CancelToken::new()));
        let e = r.expect_err("no fallback");
        assert_eq!(e.kind, kind);
        assert!(!falls_back(&e));
        assert_eq!(
            (a.requests(), b.requests(), attempts.len()),
            (1, 0, 1),
            "{kind:?}"
        );
    }
}

#[test]
fn a_backend_that_failed_over_is_skipped_while_it_cools_down_and_the_chain_ends_with_the_last_error(
) {
    let a = Scripted::new("a", |_, _| Act::Fail(LlmErrorKind::Server, Some(503)));
    let b = Scripted::new("b", |r, _| {
        if r.prompt == "both down" {
            Act::Fail(LlmErrorKind::RateLimited, Some(429))
        } else {
            Act::After(Duration::ZERO)
        }
    });
    let f = chain(&a, &b);
    for i in 0..5 {
        let (r, _) = outcome(&start(
            &f,
            req(&format!("q{i}"), false),
            &CancelToken::new(),
        ));
        assert!(r.is_ok());
    }
    assert_eq!(a.requests(), 1, "later calls went straight to b");
    assert_eq!(b.requests(), 5);
    let (r, _) = outcome(&start(&f, req("both down", false), &CancelToken::new()));
    // b is cooling down now too: a is tried again, then b.
    let e = r.expect_err("the chain is exhausted");
    assert_eq!(e.kind, LlmErrorKind::RateLimited);
}

/// Six dependent asks, then a fan-out of four, joined.
fn chain_then_fan_out() -> ais_ir::bytecode::Program {
    program(
        r#"agent @A {
  flow @main(%x: str) -> json entry {
    %a1 = ask %x : str
    %a2 = ask %a1 : str
    %a3 = ask %a2 : str
    %a4 = ask %a3 : str
    %a5 = ask %a4 : str
    %a6 = ask %a5 : str
    %p1 = template %a6 {template = "{0} one"} : str
    %p2 = template %a6 {template = "{0} two"} : str
    %p3 = template %a6 {template = "{0} three"} : str
    %p4 = template %a6 {template = "{0} four"} : str
    %b1 = ask %p1 : str
    %b2 = ask %p2 : str
    %b3 = ask %p3 : str
    %b4 = ask %p4 : str
    %w = wait_all %b1, %b2, %b3, %b4 : json
    return %w
  }
}
"#,
    )
}

#[test]
fn an_outage_mid_run_completes_on_the_fallback_without_repeating_a_completed_call() {
    let primary = Arc::new(
        FakeBackend::new()
            .named("primary")
            .failing_from_call(3)
            .blocking(),
    );
    let spare = Arc::new(FakeBackend::new().named("spare").blocking());
    let f: Arc<dyn LlmBackend> = Arc::new(Fallback::new(primary.clone(), vec![spare.clone()]));
    let opts = RunOptions {
        args: vec![("x".into(), json!("topic"))],
        workers: Some(2),
        ..RunOptions::default()
    };
    let r = ais_vm::run(&chain_then_fan_out(), &opts, f, Arc::new(MemoryHost::new()));
    let out = r.outcome.expect("the run completes on the spare");
    assert_eq!(out.as_array().map(Vec::len), Some(4));
    let done_primary: Vec<String> = primary.answered().into_iter().map(|q| q.prompt).collect();
    let done_spare: Vec<String> = spare.answered().into_iter().map(|q| q.prompt).collect();
    assert_eq!(
        done_primary.len(),
        3,
        "the primary answered until the outage"
    );
    // The outage's first failed call went to the spare; the primary is
    // skipped while it cools down, so the spare answers the rest.
    assert_eq!(done_spare.len(), 7);
    assert_eq!(primary.calls(), 4, "one failed request, then no more");
    for p in &done_primary {
        assert!(!done_spare.contains(p), "`{p}` was answered twice");
    }
    assert_eq!(r.summary.llm_calls, 10, "ten calls, each once");
    // Every call's attempts name who answered.
    let spare_answers = r
        .events
        .iter()
        .filter_map(|e| e.llm.as_ref())
        .filter(|l| l.attempts.last().is_some_and(|a| a.provider == "spare"))
        .count();
    assert_eq!(spare_answers, 7);
}

#[test]
fn the_scheduler_marks_the_calls_on_the_critical_path() {
    // A long chain of two `reason`s beside a short `ask`: the ask has slack.
    let p = program(
        r#"agent @A {
  flow @main(%x: str) -> json entry {
    %r1 = reason %x : str
    %r2 = reason %r1 : str
    %p = template %x {template = "side {0}"} : str
    %s = ask %p : str
    %w = wait_all %r2, %s : json
    return %w
  }
}
"#,
    );
    let fake = Arc::new(FakeBackend::new());
    let opts = RunOptions {
        args: vec![("x".into(), json!("topic"))],
        workers: Some(1),
        ..RunOptions::default()
    };
    let r = ais_vm::run(&p, &opts, fake.clone(), Arc::new(MemoryHost::new()));
    assert!(r.outcome.is_ok());
    let mut marks: Vec<(String, bool)> = fake
        .requests()
        .into_iter()
        .map(|q| (format!("{:?}", q.kind), q.critical))
        .collect();
    marks.sort();
    assert_eq!(
        marks,
        vec![
            ("Ask".to_string(), false),
            ("Reason".to_string(), true),
            ("Reason".to_string(), true)
        ]
    );
}

/// Through the configuration and real HTTP: a run's backend whose
/// server starts failing with `503` falls back to the spare (another
/// protocol); the primary is not asked again while it cools down.
#[test]
fn a_configured_chain_over_http_falls_back_from_503_to_the_spare() {
    use ais_testkit::mock::{MockReply, MockServer};
    use ais_vm::config::{Config, Env, Flags, Settings};
    let primary = MockServer::start().unwrap();
    let spare = MockServer::start().unwrap();
    let text = format!(
        "[[llm_backends]]\nname = \"main\"\nprotocol = \"openai\"\nbase_url = \"{}\"\nretries = 0\nprobe = false\nstream = false\nfallback = [\"spare\"]\n\
         [[llm_backends]]\nname = \"spare\"\nprotocol = \"anthropic\"\nbase_url = \"{}\"\nprobe = false\nstream = false\n",
        primary.openai_url(),
        spare.url()
    );
    let dir = tempfile::tempdir().unwrap();
    let c = Config::parse(&text, std::path::Path::new("cfg.toml")).unwrap();
    let s = Settings::resolve(c, &Flags::default(), &Env::empty(dir.path())).unwrap();
    let b = s.build_backend("main").unwrap();
    // One answer, then the outage.
    primary.push(MockReply::default());
    for _ in 0..10 {
        primary.push(MockReply::error(503, "down"));
    }
    let (tx, rx) = mpsc::channel();
    let call = |prompt: &str| {
        let tx = tx.clone();
        b.start(
            req(prompt, false),
            CancelToken::new(),
            Box::new(move |r, a| {
                let _ = tx.send((r, a));
            }),
        );
        outcome(&rx)
    };
    let (r, a) = call("one");
    assert!(r.is_ok());
    assert_eq!(a.len(), 1);
    let (r, a) = call("two");
    assert!(r.is_ok(), "{r:?}");
    let providers: Vec<&str> = a.iter().map(|a| a.provider.as_str()).collect();
    assert_eq!(providers, vec!["main", "spare"]);
    assert_eq!(a[0].status, Some(503));
    let (r, _) = call("three");
    assert!(r.is_ok());
    assert_eq!(primary.request_count(), 2, "the primary cools down");
    assert_eq!(spare.request_count(), 2);
}

/// A run whose fan-out has one late request: the run settles each call
/// once (four calls in the summary, one value each), and the late call's
/// event shows both of its requests and the hedge.
#[test]
fn a_hedged_call_in_a_run_is_one_call_with_two_attempts() {
    let p = program(
        r#"agent @A {
  flow @main(%x: str) -> json entry {
    %p0 = template %x {template = "{0} #0"} : str
    %p1 = template %x {template = "{0} #1"} : str
    %p2 = template %x {template = "{0} #2"} : str
    %p3 = template %x {template = "{0} #3"} : str
    %a0 = ask %p0 : str
    %a1 = ask %p1 : str
    %a2 = ask %p2 : str
    %a3 = ask %p3 : str
    %w = wait_all %a0, %a1, %a2, %a3 : json
    return %w
  }
}
"#,
    );
    let s = Scripted::new("run", |r, n| {
        if r.prompt.ends_with("#2") && n == 0 {
            Act::Hang
        } else {
            Act::After(Duration::ZERO)
        }
    });
    let h = Arc::new(Hedge::isolated(
        backend(&s),
        HedgeConfig {
            after: HedgeAfter::Fixed(Duration::from_millis(20)),
            max_extra: 1.0,
        },
    ));
    let opts = RunOptions {
        args: vec![("x".into(), json!("t"))],
        workers: Some(2),
        ..RunOptions::default()
    };
    let r = ais_vm::run(&p, &opts, h.clone(), Arc::new(MemoryHost::new()));
    let out = r.outcome.expect("the run completes");
    assert_eq!(out.as_array().map(Vec::len), Some(4));
    assert_eq!(r.summary.llm_calls, 4, "one call per op, hedge or not");
    assert_eq!(s.requests(), 5);
    assert_eq!(h.stats().hedges, 1);
    let hedged: Vec<_> = r
        .events
        .iter()
        .filter_map(|e| e.llm.as_ref())
        .filter(|l| l.attempts.len() == 2)
        .collect();
    assert_eq!(hedged.len(), 1);
    assert!(hedged[0].attempts.iter().all(|a| a.hedge.is_some()));
    assert_eq!(hedged[0].attempts[0].error.as_deref(), Some("cancelled"));
}

#[test]
fn a_fresh_process_hedges_from_the_latency_history_on_disk() {
    use ais_vm::llm::resilience::{self, history};
    let earlier = tempfile::tempdir().unwrap();
    // A corrupt file is ignored with a warning, never an error.
    std::fs::write(earlier.path().join(history::FILE), "{not json").unwrap();
    let w = resilience::attach_history(earlier.path()).expect("a warning about the corrupt file");
    assert_eq!(w.code(), "H002", "{w}");
    // An earlier process: 20 answers of a named (shared) hedge, saved.
    let a = Scripted::new("hist-a", |_, _| Act::After(Duration::from_millis(10)));
    let ha = Hedge::new(backend(&a), p95());
    warm_up(&ha);
    assert!(resilience::save_history().is_none(), "the save succeeds");
    let kept = history::stored(earlier.path(), "hist-a", LlmOpKind::Ask).unwrap();
    assert_eq!(kept.len(), 20, "the corrupt file was replaced");
    assert!(kept.iter().all(|d| *d >= Duration::from_millis(10)));
    // Nothing new observed: a second save leaves the file as it is.
    assert!(resilience::save_history().is_none());
    assert_eq!(
        history::stored(earlier.path(), "hist-a", LlmOpKind::Ask)
            .unwrap()
            .len(),
        20
    );

    // The next process: the same history under the name of a backend it
    // has never called (this test's process cannot forget `hist-a`).
    let next = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(earlier.path().join(history::FILE)).unwrap();
    std::fs::write(
        next.path().join(history::FILE),
        text.replace("hist-a", "hist-b"),
    )
    .unwrap();
    let b = Scripted::new("hist-b", |r, n| match (r.prompt.as_str(), n) {
        ("slow", 0) => Act::Hang,
        _ => Act::After(Duration::ZERO),
    });
    // The earlier process's 20 calls at max_extra 0.5 earned 10 hedges
    // and spent none: the file keeps them.
    assert_eq!(
        history::stored_credit(earlier.path(), "hist-a").unwrap(),
        10.0
    );
    // Built before the history is attached, as `aisc run` does. One call
    // at max_extra 0.1 earns a tenth of a hedge: its hedge is paid from
    // the credit the earlier process left, as a long-running server's
    // would be.
    let hb = Hedge::new(
        backend(&b),
        HedgeConfig {
            after: HedgeAfter::Quantile(0.95),
            max_extra: 0.1,
        },
    );
    assert!(resilience::attach_history(next.path()).is_none());
    // Its very first call is late by the history's p95: it is hedged
    // (without history it would wait for its hanging request forever).
    let (r, attempts) = outcome(&start(&hb, req("slow", true), &CancelToken::new()));
    assert!(r.is_ok());
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!((b.requests_for("slow"), hb.stats().hedges), (2, 1));
    // Its answer joins the history: 20 older latencies, then the hedge's
    // answer and how long the cancelled first request had waited when the
    // hedge went (it took at least that long; left out, the history would
    // lose its slow requests).
    assert!(resilience::save_history().is_none());
    let kept = history::stored(next.path(), "hist-b", LlmOpKind::Ask).unwrap();
    assert_eq!(kept.len(), 22, "{kept:?}");
    assert!(kept[21] > kept[20], "{kept:?}");
    assert!(kept[21] >= Duration::from_millis(10), "{kept:?}");
    // 10 + 0.1 earned - 1 spent.
    let left = history::stored_credit(next.path(), "hist-b").unwrap();
    assert!((left - 9.1).abs() < 1e-9, "{left}");
}
