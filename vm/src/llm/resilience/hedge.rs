//! Hedged requests ("The Tail at Scale", Dean & Barroso 2013): a
//! critical-path call still unanswered after the backend's observed
//! latency quantile gets another request; the first answer wins and the
//! others are cancelled.
//!
//! One watcher thread per hedged backend (started while calls are in
//! flight, gone when none are) wakes at the next moment a call becomes
//! late, or when an answer changes the latency picture, and sends the
//! extra requests. The latency sketch, the budget and the counters are
//! per backend name in the process, so the runs of `aisc serve` share
//! what earlier runs observed.

use super::sketch::{LatencySketch, WINDOW};
use super::{HedgeAfter, HedgeConfig};
use crate::llm::{
    Attempt, AttemptObserver, CancelToken, LlmBackend, LlmError, LlmErrorKind, LlmOpKind,
    LlmRequest, LlmResponse, OnDone, TextEvent,
};
use crate::sync::{lock, wait_until};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Requests per call at most: the first and up to two hedges (a hedge
/// still out after the median latency is hedged once more, budget
/// permitting: see [`delays`]).
const MAX_LEGS: usize = 3;
/// Unused hedge credit is capped at this many calls' worth, so a long
/// quiet spell cannot buy a burst of hedges later.
const CREDIT_CALLS: u64 = 1000;
/// Credit is counted in millionths of a request, so ten calls at
/// `max_extra = 0.1` earn exactly one hedge.
const ONE: u64 = 1_000_000;

/// What a hedged backend has done since the process started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HedgeStats {
    /// Calls made through it (each counted once, whatever its requests).
    pub calls: u64,
    /// Extra requests sent.
    pub hedges: u64,
    /// Calls an extra request answered first.
    pub hedge_wins: u64,
    /// Late critical calls left without a hedge for want of budget (each
    /// counted once).
    pub denied: u64,
}

/// Wraps `inner`: see the module documentation.
pub struct Hedge {
    inner: Arc<dyn LlmBackend>,
    cfg: HedgeConfig,
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    /// What this process observed, behind what the history file held.
    sketches: HashMap<LlmOpKind, LatencySketch>,
    /// What this process observed itself (no history): see [`threshold`].
    own: HashMap<LlmOpKind, LatencySketch>,
    calls: HashMap<u64, CallState>,
    next_id: u64,
    /// Hedges earned and not spent, in millionths of a request.
    credit: u64,
    /// Credit earned minus credit spent since the history file was last
    /// written: the file keeps the balance, so a fresh process with
    /// history has the budget a long-running server would have.
    credit_change: i64,
    stats: HedgeStats,
    watching: bool,
    /// Latencies observed since the history file was last written
    /// (`super::history`), at most a window's worth per kind.
    fresh: HashMap<LlmOpKind, Vec<Duration>>,
}

struct CallState {
    req: LlmRequest,
    cancel: CancelToken,
    hedgeable: bool,
    /// Found late with no budget left (counted once).
    denied: bool,
    legs: Vec<Leg>,
    done: Option<OnDone>,
    /// Attempts of legs that failed, by leg.
    failed: Vec<(usize, Vec<Attempt>)>,
    /// The op's text sink (the first request streams to it) and the last
    /// attempt that streamed, so a hedge that wins can replace its text.
    sink: Option<crate::llm::TextSink>,
    streamed: Arc<Mutex<Option<u32>>>,
}

struct Leg {
    token: CancelToken,
    started: Instant,
    finished: bool,
}

fn registry() -> &'static Mutex<HashMap<String, Arc<Shared>>> {
    static R: OnceLock<Mutex<HashMap<String, Arc<Shared>>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

impl Hedge {
    /// Hedges `inner`, sharing latency history, budget and counters with
    /// every other hedge of a backend of the same name in this process.
    pub fn new(inner: Arc<dyn LlmBackend>, cfg: HedgeConfig) -> Hedge {
        let shared = lock(registry())
            .entry(inner.name().to_string())
            .or_insert_with(|| {
                let shared = Shared::new();
                // A backend first built after the history file was read
                // starts from what earlier processes observed.
                {
                    let mut st = lock(&shared.state);
                    let st = &mut *st;
                    super::seed_from_history(
                        inner.name(),
                        Seed {
                            sketches: &mut st.sketches,
                            credit: &mut st.credit,
                        },
                    );
                }
                Arc::new(shared)
            })
            .clone();
        Hedge { inner, cfg, shared }
    }

    /// Hedges `inner` with a history of its own (tests, benchmarks).
    pub fn isolated(inner: Arc<dyn LlmBackend>, cfg: HedgeConfig) -> Hedge {
        Hedge {
            inner,
            cfg,
            shared: Arc::new(Shared::new()),
        }
    }

    pub fn stats(&self) -> HedgeStats {
        lock(&self.shared.state).stats
    }

    /// Puts `older` (oldest first) behind the latencies of `kind` this
    /// hedge has seen, as a history file would (tests, benchmarks).
    pub fn seed_latencies(&self, kind: LlmOpKind, older: &[Duration]) {
        lock(&self.shared.state)
            .sketches
            .entry(kind)
            .or_default()
            .seed(older);
    }

    /// Registers a call and returns its first leg, ready to start.
    fn register(&self, mut req: LlmRequest, cancel: CancelToken, done: OnDone) -> LegStart {
        let token = cancel.child();
        let streamed = Arc::new(Mutex::new(None));
        let first = req.clone();
        let op_sink = req.on_text.clone();
        // The op's text sink sees the first request's text; which attempt
        // streamed is kept so a hedge that wins can replace it.
        if let Some(sink) = req.on_text.take() {
            let seen = Arc::clone(&streamed);
            req.on_text = Some(crate::llm::TextSink::new(move |e: &TextEvent| {
                if let TextEvent::Delta { attempt, .. } = e {
                    *lock(&seen) = Some(*attempt);
                }
                sink.send(e);
            }));
        }
        let mut st = lock(&self.shared.state);
        let id = st.next_id;
        st.next_id += 1;
        st.stats.calls += 1;
        let earn = (self.cfg.max_extra * ONE as f64).round() as u64;
        let before = st.credit;
        st.credit = (st.credit + earn).min(earn * CREDIT_CALLS + ONE);
        st.credit_change += st.credit as i64 - before as i64;
        st.calls.insert(
            id,
            CallState {
                req: LlmRequest {
                    on_text: None,
                    ..first
                },
                cancel,
                hedgeable: req.critical,
                denied: false,
                legs: vec![Leg {
                    token: token.clone(),
                    started: Instant::now(),
                    finished: false,
                }],
                done: Some(done),
                failed: Vec::new(),
                sink: op_sink,
                streamed,
            },
        );
        let spawn = !st.watching;
        st.watching = true;
        drop(st);
        if spawn {
            self.spawn_watcher();
        } else {
            self.shared.wake.notify_one();
        }
        LegStart {
            id,
            leg: 0,
            req,
            token,
        }
    }

    fn spawn_watcher(&self) {
        let shared = Arc::clone(&self.shared);
        let inner = Arc::clone(&self.inner);
        let cfg = self.cfg;
        let spawned = std::thread::Builder::new()
            .name("apxm-hedge".into())
            .spawn(move || watch(&shared, &inner, cfg));
        if spawned.is_err() {
            // No thread, no hedges: calls still complete on their own.
            lock(&self.shared.state).watching = false;
        }
    }
}

/// A leg about to be sent.
struct LegStart {
    id: u64,
    leg: usize,
    req: LlmRequest,
    token: CancelToken,
}

/// Sends legs: together when the backend starts calls without waiting,
/// else each on a thread of its own.
fn launch(shared: &Arc<Shared>, inner: &Arc<dyn LlmBackend>, legs: Vec<LegStart>) {
    let calls: Vec<(LlmRequest, CancelToken, OnDone)> = legs
        .into_iter()
        .map(|l| {
            let shared = Arc::clone(shared);
            let name = inner.name().to_string();
            let done: OnDone = Box::new(move |result, attempts| {
                leg_done(&shared, &name, l.id, l.leg, result, attempts)
            });
            (l.req, l.token, done)
        })
        .collect();
    // The simulator and the fake answer through `scheduled_reply` and
    // block in `start`: their legs get threads.
    if inner.starts_without_waiting() && !inner.is_simulated() {
        inner.start_many(calls);
        return;
    }
    for call in calls {
        let job = Arc::new(Mutex::new(Some(call)));
        let (b, theirs) = (Arc::clone(inner), Arc::clone(&job));
        let spawned = std::thread::Builder::new()
            .name("apxm-hedge-leg".into())
            .spawn(move || {
                if let Some((req, token, done)) = lock(&theirs).take() {
                    b.start(req, token, done);
                }
            });
        if spawned.is_err() {
            // No thread to be had: this one waits for the leg.
            if let Some((req, token, done)) = lock(&job).take() {
                inner.start(req, token, done);
            }
        }
    }
}

/// One leg's outcome: the first answer settles the call and cancels the
/// other legs; a failure waits for the legs still out.
fn leg_done(
    shared: &Shared,
    provider: &str,
    id: u64,
    leg: usize,
    result: Result<LlmResponse, LlmError>,
    attempts: Vec<Attempt>,
) {
    let mut st = lock(&shared.state);
    let now = Instant::now();
    let Some(call) = st.calls.get_mut(&id) else {
        // A losing leg after the call was settled: its outcome is dropped.
        return;
    };
    let Some(this) = call.legs.get_mut(leg) else {
        return;
    };
    this.finished = true;
    let latency = now.saturating_duration_since(this.started);
    let ok = result.is_ok();
    if !ok && call.legs.iter().any(|l| !l.finished) {
        call.failed.push((leg, attempts));
        return;
    }
    let Some(mut call) = st.calls.remove(&id) else {
        return;
    };
    if ok {
        // The winner's latency, and for each request cancelled after
        // waiting longer than that, how long it had waited when it was
        // found late (the next request was sent): it took at least so
        // long. Left out, the requests hedging cut short would vanish
        // from the history and the quantile would sink run after run;
        // counted at their whole wait (threshold plus the winner's
        // latency), every hedge would push the quantile up by a winner's
        // latency. At the moment they were found late, the quantile stays
        // where the share of late requests puts it.
        let kind = call.req.kind;
        let mut seen = vec![latency];
        seen.extend(
            call.legs
                .iter()
                .zip(call.legs.iter().skip(1))
                .filter(|(l, _)| !l.finished)
                .map(|(l, next)| next.started.saturating_duration_since(l.started))
                .filter(|&d| d > latency),
        );
        for d in seen {
            st.sketches.entry(kind).or_default().record(d);
            st.own.entry(kind).or_default().record(d);
            let fresh = st.fresh.entry(kind).or_default();
            if fresh.len() == WINDOW {
                fresh.remove(0);
            }
            fresh.push(d);
        }
        if leg > 0 {
            st.stats.hedge_wins += 1;
        }
    }
    drop(st);
    shared.wake.notify_one();
    // Every request sent is an attempt: the failed legs', this one's, and
    // a cancelled one for each leg still out.
    let mut by_leg: Vec<(usize, Vec<Attempt>)> = std::mem::take(&mut call.failed);
    let mut mine = attempts;
    if leg > 0 && ok {
        if let Some(a) = mine.last_mut() {
            let after = call.legs[leg]
                .started
                .saturating_duration_since(call.legs[0].started);
            a.message = Some(format!(
                "hedged request (sent after {} ms): answered first",
                after.as_millis()
            ));
        }
    }
    by_leg.push((leg, mine));
    for (i, l) in call.legs.iter().enumerate() {
        if !l.finished {
            l.token.cancel();
            let mut a = Attempt::single(
                provider,
                &Err(LlmError::new(provider, LlmErrorKind::Cancelled, "")),
                now.saturating_duration_since(l.started),
            );
            a.message = Some(format!(
                "hedged call: request {} was cancelled, request {} answered first",
                i + 1,
                leg + 1
            ));
            by_leg.push((i, vec![a]));
        }
    }
    by_leg.sort_by_key(|(i, _)| *i);
    let mut all: Vec<Attempt> = by_leg.into_iter().flat_map(|(_, a)| a).collect();
    for (n, a) in all.iter_mut().enumerate() {
        a.number = n as u32 + 1;
    }
    let result = match result {
        Ok(r) => {
            if leg > 0 {
                replace_streamed(&call, &r.text);
            }
            Ok(r)
        }
        Err(mut e) => {
            e.attempts = all.len() as u32;
            Err(e)
        }
    };
    if let Some(done) = call.done.take() {
        done(result, all);
    }
}

/// A hedge won after the first request streamed some text to the op:
/// that text is withdrawn and the winner's given whole.
fn replace_streamed(call: &CallState, text: &str) {
    let streamed = *lock(&call.streamed);
    let (Some(attempt), Some(sink)) = (streamed, call.sink.as_ref()) else {
        return;
    };
    sink.send(&TextEvent::Reset { attempt });
    sink.send(&TextEvent::Delta {
        attempt: attempt + 1,
        text: text.to_string(),
    });
}

/// The watcher: sends hedges when calls become late, while calls are out.
fn watch(shared: &Arc<Shared>, inner: &Arc<dyn LlmBackend>, cfg: HedgeConfig) {
    let mut st = lock(&shared.state);
    loop {
        if st.calls.is_empty() {
            st.watching = false;
            return;
        }
        let now = Instant::now();
        let mut thresholds: HashMap<LlmOpKind, Option<(Duration, Duration)>> = HashMap::new();
        // Late calls: id, first request's start, and when the call is
        // overdue (late by the threshold twice over).
        let mut late: Vec<(u64, Instant, Instant)> = Vec::new();
        // Calls late or late within half a threshold.
        let mut crowd = 0usize;
        let mut next: Option<Instant> = None;
        let mut soonest = |at: Instant| next = Some(next.map_or(at, |n: Instant| n.min(at)));
        for (&id, call) in &st.calls {
            if !call.hedgeable || call.legs.len() >= MAX_LEGS || call.cancel.is_cancelled() {
                continue;
            }
            let kind = call.req.kind;
            let delays = *thresholds
                .entry(kind)
                .or_insert_with(|| delays(&st, kind, cfg.after, now));
            let Some((first, later)) = delays else {
                continue;
            };
            let Some(last) = call.legs.last() else {
                continue;
            };
            let t = if call.legs.len() > 1 { later } else { first };
            let due = last.started + t;
            if due <= now + t / 2 {
                crowd += 1;
            }
            if due <= now {
                late.push((id, call.legs[0].started, due + t));
            } else {
                soonest(due);
            }
        }
        // More calls late, or about to be, than the budget can hedge (a
        // fan-out sent at once crosses the threshold together, its calls
        // microseconds to milliseconds apart): a hedge now would go to
        // whichever call started first, not to the straggler, and the
        // budget would be gone when the straggler shows. So wait while
        // the calls that are merely a little late answer (each answer
        // wakes this loop); a call late twice over is hedged regardless.
        let can_hedge = (st.credit / ONE) as usize;
        if crowd > can_hedge {
            late.retain(|&(_, _, overdue)| {
                let keep = overdue <= now;
                if !keep {
                    soonest(overdue);
                }
                keep
            });
        }
        // The oldest late calls first, when the budget cannot cover all.
        late.sort_by_key(|&(_, started, _)| started);
        let mut legs = Vec::new();
        for (id, _, _) in late {
            if st.credit < ONE {
                let first = st
                    .calls
                    .get_mut(&id)
                    .is_some_and(|c| !std::mem::replace(&mut c.denied, true));
                if first {
                    st.stats.denied += 1;
                }
                continue;
            }
            st.credit -= ONE;
            st.credit_change -= ONE as i64;
            st.stats.hedges += 1;
            let Some(call) = st.calls.get_mut(&id) else {
                continue;
            };
            let token = call.cancel.child();
            call.legs.push(Leg {
                token: token.clone(),
                started: Instant::now(),
                finished: false,
            });
            legs.push(LegStart {
                id,
                leg: call.legs.len() - 1,
                req: call.req.clone(),
                token,
            });
        }
        if !legs.is_empty() {
            drop(st);
            launch(shared, inner, legs);
            st = lock(&shared.state);
            continue;
        }
        st = wait_until(&shared.state, &shared.wake, st, next);
    }
}

/// How long a call of `kind` waits for its first hedge, and a hedge for
/// the next one (`None`: not known yet).
///
/// A call whose hedge is out is already in the tail: its first request
/// has waited past the threshold, and the hedge is a fresh draw. Waiting
/// a whole threshold again before the next request put such a call at
/// twice the threshold plus a latency, which is what the slowest runs of
/// a hedged fan-out were made of when a hedge was itself slow. The next
/// request goes once the hedge has waited the median latency instead (a
/// hedge that has not answered by then is as likely slow as not, and
/// its call's first request is late by a median more than the
/// threshold); only calls with both requests out that long pay for it.
/// A configured delay is kept for every request.
fn delays(
    st: &State,
    kind: LlmOpKind,
    after: HedgeAfter,
    now: Instant,
) -> Option<(Duration, Duration)> {
    let first = threshold(st, kind, after, now)?;
    let later = match after {
        HedgeAfter::Fixed(d) => d,
        HedgeAfter::Quantile(_) => {
            threshold(st, kind, HedgeAfter::Quantile(0.5), now).map_or(first, |m| m.min(first))
        }
    };
    Some((first, later))
}

/// When a call of `kind` is late: the configured delay, or the quantile
/// of the answers so far and the calls out (`None`: not known yet).
///
/// The quantile is taken twice: over the history (what earlier processes
/// left, then this one's answers) and over this process's own answers
/// alone; the earlier of the two wins. A history written while the
/// machine or the provider was slower than now (one loaded run fills a
/// quarter of the window with a 64-way fan-out) would otherwise hold a
/// fresh process's hedges back for runs on end, while its own fan-out
/// already shows where its tail starts: once 61 of 64 calls have
/// answered, the three out are past its p95, whatever the history says.
/// The history still decides before the process has seen enough answers
/// of its own, which is what it is for.
fn threshold(st: &State, kind: LlmOpKind, after: HedgeAfter, now: Instant) -> Option<Duration> {
    match after {
        HedgeAfter::Fixed(d) => Some(d),
        HedgeAfter::Quantile(q) => {
            let out: Vec<Duration> = st
                .calls
                .values()
                .filter(|c| c.req.kind == kind)
                .filter_map(|c| c.legs.first())
                .map(|l| now.saturating_duration_since(l.started))
                .collect();
            let all = st.sketches.get(&kind).and_then(|s| s.quantile(q, &out));
            let own = st.own.get(&kind).and_then(|s| s.quantile(q, &out));
            match (all, own) {
                (Some(a), Some(o)) => Some(a.min(o)),
                (a, o) => a.or(o),
            }
        }
    }
}

/// What a hedged backend starts from: the latencies and the unspent
/// hedge credit earlier processes left (`super::history`).
pub(super) struct Seed<'a> {
    pub(super) sketches: &'a mut HashMap<LlmOpKind, LatencySketch>,
    /// In millionths of a request.
    pub(super) credit: &'a mut u64,
}

/// Seeds every hedged backend of the process with `seed(name, …)` (the
/// history file was just read).
pub(super) fn seed_all(mut seed: impl FnMut(&str, Seed<'_>)) {
    for (name, shared) in lock(registry()).iter() {
        let mut st = lock(&shared.state);
        let st = &mut *st;
        seed(
            name,
            Seed {
                sketches: &mut st.sketches,
                credit: &mut st.credit,
            },
        );
    }
}

/// What one hedged backend observed since the last [`take_fresh`].
pub(super) struct Fresh {
    pub(super) name: String,
    pub(super) latencies: Vec<(LlmOpKind, Vec<Duration>)>,
    /// Credit earned minus spent, in millionths of a request.
    pub(super) credit_change: i64,
}

/// Takes what each hedged backend observed since the last call.
pub(super) fn take_fresh() -> Vec<Fresh> {
    let mut out = Vec::new();
    for (name, shared) in lock(registry()).iter() {
        let mut st = lock(&shared.state);
        let latencies: Vec<_> = std::mem::take(&mut st.fresh)
            .into_iter()
            .filter(|(_, l)| !l.is_empty())
            .collect();
        let credit_change = std::mem::take(&mut st.credit_change);
        if !latencies.is_empty() || credit_change != 0 {
            out.push(Fresh {
                name: name.clone(),
                latencies,
                credit_change,
            });
        }
    }
    out
}

impl Shared {
    fn new() -> Shared {
        Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        }
    }
}

impl LlmBackend for Hedge {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn concurrency(&self) -> usize {
        self.inner.concurrency()
    }

    fn is_simulated(&self) -> bool {
        self.inner.is_simulated()
    }

    fn complete(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
    ) -> Result<LlmResponse, LlmError> {
        self.complete_observed(request, cancel, &crate::llm::NoObserver)
    }

    fn complete_observed(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
        observer: &dyn AttemptObserver,
    ) -> Result<LlmResponse, LlmError> {
        crate::llm::complete_through_start(self, request, cancel, observer, "the hedged call")
    }

    fn starts_without_waiting(&self) -> bool {
        true
    }

    fn start(&self, request: LlmRequest, cancel: CancelToken, done: OnDone) {
        let first = self.register(request, cancel, done);
        launch(&self.shared, &self.inner, vec![first]);
    }

    fn start_many(&self, calls: Vec<(LlmRequest, CancelToken, OnDone)>) {
        let legs = calls
            .into_iter()
            .map(|(r, c, d)| self.register(r, c, d))
            .collect();
        launch(&self.shared, &self.inner, legs);
    }

    fn server_info(&self) -> Option<crate::llm::providers::ServerInfo> {
        self.inner.server_info()
    }

    fn shared_prefix(&self, request: &LlmRequest) -> Option<crate::llm::cache::SharedPrefix> {
        self.inner.shared_prefix(request)
    }
}
