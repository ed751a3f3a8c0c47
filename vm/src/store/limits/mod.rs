//! Limits on a backend shared by every process on one run store: calls in
//! flight (`fleet_concurrency`), requests and tokens per minute, and a
//! pause every process honours after one of them was told `Retry-After`.
//!
//! A [`Limiter`] is the store's side (one member per store:
//! [`postgres::PgLimiter`] keeps a row per call in flight, renewed while
//! the call lasts and expiring [`SLOT_LEASE_MS`] after its process died;
//! [`local::LocalLimiter`] holds the same limits inside one process, for a
//! SQLite store). [`limited`] wraps a backend so that every call takes a
//! slot first (the one hook: where the run's backend is built for a
//! worker or a server). Waiting calls queue in the process; one
//! dispatcher thread per backend asks the store for slots, so a process
//! polls the store once per wait, not once per waiting call.
//!
//! Admission is by least attained service (issue 36): the process's next
//! call is the waiting one whose run has had the fewest calls so far
//! ([`crate::llm::attained`]; arrival order among equals), and the store
//! hands a free slot to the process whose next call's run is the least
//! served across the fleet, so a one-call run on one worker is not queued
//! behind a fifty-call run on another.

pub mod local;
pub mod postgres;

use crate::config::FleetLimits;
use crate::llm::{
    Attempt, AttemptLog, AttemptObserver, CancelToken, LlmBackend, LlmError, LlmErrorKind,
    LlmRequest, LlmResponse, OnDone,
};
use crate::store::JournalError;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How long a call's slot outlives its process: the process renews it
/// every third of this while the call lasts, so a killed worker's slots
/// come back within it.
pub const SLOT_LEASE_MS: i64 = 3000;

/// How often a process with waiting calls asks the store again when every
/// slot is taken (a slot given back in the same process wakes it at once).
pub const POLL: Duration = Duration::from_millis(25);

/// How long calls wait while the store does not answer before they fail.
const STORE_DOWN_LIMIT: Duration = Duration::from_secs(30);

/// The answer to a request for a slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Take {
    /// A slot, named by this token (give it back with [`Limiter::give_back`]).
    Slot(String),
    /// No slot now: ask again after this long (a pause or the per-minute
    /// window tells exactly; a full house says [`POLL`]).
    Wait(Duration),
}

/// What a store knows of one backend's load across the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BackendLoad {
    pub in_flight: i64,
    /// The most calls ever in flight at once.
    pub peak: i64,
    /// Requests for a slot that were told to wait.
    pub waits: i64,
    /// Milliseconds left of a `Retry-After` pause (0: none).
    pub paused_ms: i64,
}

/// The store's side of fleet-wide limits.
pub trait Limiter: Send + Sync + std::fmt::Debug {
    /// True when the limits hold across processes (PostgreSQL), false when
    /// only inside this one.
    fn fleet_wide(&self) -> bool;
    /// A slot for one call to `backend` under `limits`, or how long to
    /// wait. `service` is the attained service of the run whose call would
    /// take it: a fleet-wide store gives a free slot to a process whose
    /// next call has more only when no other process is waiting with less.
    fn try_take(
        &self,
        backend: &str,
        limits: &FleetLimits,
        service: u64,
    ) -> Result<Take, JournalError>;
    /// This process has no call waiting for `backend` any more (its claim
    /// to go first ends).
    fn stop_waiting(&self, _backend: &str) -> Result<(), JournalError> {
        Ok(())
    }
    /// Gives back slot `token`, counting the `tokens` the call used against
    /// the per-minute window.
    fn give_back(&self, backend: &str, token: &str, tokens: u64) -> Result<(), JournalError>;
    /// No call to `backend` starts anywhere for `pause` from now (a
    /// `Retry-After`); a longer pause already set stays.
    fn pause(&self, backend: &str, pause: Duration) -> Result<(), JournalError>;
    /// The backends with limits this store has seen, with their load.
    fn load(&self) -> Result<Vec<(String, BackendLoad)>, JournalError>;
}

/// The limiter of store `spec` (a `postgres://` URL, else a memory
/// directory's SQLite store: this process only), one per process and
/// store, shared by its runs.
pub fn shared(spec: &str) -> Result<Arc<dyn Limiter>, JournalError> {
    static ALL: OnceLock<Mutex<HashMap<String, Arc<dyn Limiter>>>> = OnceLock::new();
    let mut all = lock(ALL.get_or_init(Mutex::default));
    if let Some(l) = all.get(spec) {
        return Ok(Arc::clone(l));
    }
    let l: Arc<dyn Limiter> = if super::is_postgres_url(spec) {
        Arc::new(postgres::PgLimiter::connect(spec)?)
    } else {
        Arc::new(local::LocalLimiter::default())
    };
    all.insert(spec.to_string(), Arc::clone(&l));
    Ok(l)
}

/// `backend` calling through `limiter`'s slots under `limits`; unchanged
/// when it has no limits or is simulated (no provider to protect).
pub fn limited(
    backend: Arc<dyn LlmBackend>,
    limiter: Arc<dyn Limiter>,
    limits: FleetLimits,
) -> Arc<dyn LlmBackend> {
    if !limits.any() || backend.is_simulated() {
        return backend;
    }
    Arc::new(Limited {
        gate: Arc::new(Gate {
            name: backend.name().to_string(),
            limiter,
            limits,
            state: Mutex::default(),
            wake: Condvar::new(),
        }),
        inner: backend,
    })
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One backend's slots in this process: calls waiting for one, in arrival
/// order (taken least attained service first).
struct Gate {
    name: String,
    limiter: Arc<dyn Limiter>,
    limits: FleetLimits,
    state: Mutex<GateState>,
    wake: Condvar,
}

#[derive(Default)]
struct GateState {
    waiting: VecDeque<Waiting>,
    dispatcher: bool,
    /// Slots given back since the dispatcher last asked the store.
    freed: u64,
}

struct Waiting {
    inner: Arc<dyn LlmBackend>,
    request: LlmRequest,
    cancel: CancelToken,
    done: OnDone,
}

impl Gate {
    fn submit(self: &Arc<Self>, w: Waiting) {
        let mut st = lock(&self.state);
        st.waiting.push_back(w);
        if st.dispatcher {
            drop(st);
            self.wake.notify_all();
            return;
        }
        st.dispatcher = true;
        drop(st);
        let me = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("ais-fleet-gate".into())
            .spawn(move || me.dispatch());
        if spawned.is_err() {
            let mut st = lock(&self.state);
            st.dispatcher = false;
            let all: Vec<Waiting> = st.waiting.drain(..).collect();
            drop(st);
            for w in all {
                let e = LlmError::new(
                    &self.name,
                    LlmErrorKind::Connect,
                    "cannot start the thread that waits for fleet slots",
                );
                (w.done)(Err(e), Vec::new());
            }
        }
    }

    /// Hands slots to waiting calls, least attained service first, until
    /// none waits.
    fn dispatch(self: Arc<Self>) {
        let mut down_since: Option<Instant> = None;
        // Told to wait since this dispatcher started: the store may hold
        // this process's claim to go first, to be withdrawn at the end.
        let mut waited = false;
        loop {
            let mut st = lock(&self.state);
            // Calls cancelled while waiting end now, without a slot.
            let (gone, keep): (Vec<Waiting>, Vec<Waiting>) =
                st.waiting.drain(..).partition(|w| w.cancel.is_cancelled());
            st.waiting = keep.into();
            if st.waiting.is_empty() {
                st.dispatcher = false;
                drop(st);
                if waited {
                    let _ = self.limiter.stop_waiting(&self.name);
                }
                self.fail(
                    gone,
                    LlmErrorKind::Cancelled,
                    "cancelled while waiting for a fleet slot",
                );
                return;
            }
            st.freed = 0;
            let service = next(&st.waiting).map_or(0, |(_, s)| s);
            drop(st);
            self.fail(
                gone,
                LlmErrorKind::Cancelled,
                "cancelled while waiting for a fleet slot",
            );
            let wait = match self.limiter.try_take(&self.name, &self.limits, service) {
                Ok(Take::Slot(token)) => {
                    down_since = None;
                    let taken = {
                        let mut st = lock(&self.state);
                        next(&st.waiting).and_then(|(i, _)| st.waiting.remove(i))
                    };
                    let Some(w) = taken else {
                        let _ = self.limiter.give_back(&self.name, &token, 0);
                        continue;
                    };
                    self.launch(w, token);
                    continue;
                }
                Ok(Take::Wait(d)) => {
                    down_since = None;
                    waited = true;
                    d.min(POLL * 8)
                }
                Err(e) => {
                    let since = *down_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= STORE_DOWN_LIMIT {
                        let all: Vec<Waiting> = lock(&self.state).waiting.drain(..).collect();
                        let why = format!(
                            "the store that holds this backend's fleet limits does not answer: {e}"
                        );
                        self.fail(all, LlmErrorKind::Connect, &why);
                        down_since = None;
                        continue;
                    }
                    POLL * 8
                }
            };
            let st = lock(&self.state);
            if st.freed == 0 {
                let _ = self
                    .wake
                    .wait_timeout(st, wait.max(Duration::from_millis(1)));
            }
        }
    }

    fn fail(&self, calls: Vec<Waiting>, kind: LlmErrorKind, why: &str) {
        for w in calls {
            (w.done)(Err(LlmError::new(&self.name, kind, why)), Vec::new());
        }
    }

    /// Makes the call on a thread of its own (one per slot held in this
    /// process), so each attempt is seen as it ends: a `Retry-After` pauses
    /// the fleet before this call's own retry.
    fn launch(self: &Arc<Self>, w: Waiting, token: String) {
        // On a thread of its own; when none can be started, here (the
        // call's `done` must run exactly once).
        let call = Arc::new(Mutex::new(Some((w, token))));
        let (me, mine) = (Arc::clone(self), Arc::clone(&call));
        let spawned = std::thread::Builder::new()
            .name("ais-fleet-call".into())
            .spawn(move || me.call(&mine));
        if spawned.is_err() {
            self.call(&call);
        }
    }

    fn call(&self, call: &Mutex<Option<(Waiting, String)>>) {
        let Some((w, token)) = lock(call).take() else {
            return;
        };
        let log = Observe {
            gate: self,
            log: AttemptLog::new(),
        };
        let result = w.inner.complete_observed(&w.request, &w.cancel, &log);
        let attempts = log.log.attempts();
        let used: u64 = attempts
            .iter()
            .map(|a| a.usage.prompt_tokens + a.usage.completion_tokens)
            .sum();
        // A slot not given back (the store is down) expires: this process
        // stops renewing it.
        let _ = self.limiter.give_back(&self.name, &token, used);
        lock(&self.state).freed += 1;
        self.wake.notify_all();
        (w.done)(result, attempts);
    }
}

/// The call to start next and its run's attained service: the least
/// served run's, the earliest among equals.
fn next(waiting: &VecDeque<Waiting>) -> Option<(usize, u64)> {
    waiting
        .iter()
        .map(|w| w.request.attained.get())
        .enumerate()
        .min_by_key(|&(i, s)| (s, i))
}

/// Records attempts and pauses the fleet on a `Retry-After`.
struct Observe<'a> {
    gate: &'a Gate,
    log: AttemptLog,
}

impl AttemptObserver for Observe<'_> {
    fn on_attempt(&self, a: &Attempt) {
        if a.status == Some(429) && a.server_delay {
            if let Some(d) = a.retry_in {
                let _ = self.gate.limiter.pause(&self.gate.name, d);
            }
        }
        self.log.on_attempt(a);
    }
}

/// A backend whose calls take a fleet slot first.
struct Limited {
    gate: Arc<Gate>,
    inner: Arc<dyn LlmBackend>,
}

impl LlmBackend for Limited {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn concurrency(&self) -> usize {
        let fleet = self
            .gate
            .limits
            .concurrency
            .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
        self.inner.concurrency().min(fleet)
    }

    fn is_simulated(&self) -> bool {
        self.inner.is_simulated()
    }

    fn complete(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
    ) -> Result<LlmResponse, LlmError> {
        crate::llm::complete_through_start(
            self,
            request,
            cancel,
            &crate::llm::NoObserver,
            "the call",
        )
    }

    fn starts_without_waiting(&self) -> bool {
        true
    }

    fn start(&self, request: LlmRequest, cancel: CancelToken, done: OnDone) {
        self.gate.submit(Waiting {
            inner: Arc::clone(&self.inner),
            request,
            cancel,
            done,
        });
    }

    fn server_info(&self) -> Option<crate::llm::providers::ServerInfo> {
        self.inner.server_info()
    }

    fn shared_prefix(&self, request: &LlmRequest) -> Option<crate::llm::cache::SharedPrefix> {
        self.inner.shared_prefix(request)
    }
}
