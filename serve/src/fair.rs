//! Fair admission of LLM calls across the runs of one server: when the
//! runs' calls to the shared backend exceed its `concurrency`, the call of
//! the run with the **least attained service** goes next (Autellix's
//! program-level least-attained-service, Luo et al. 2025), so a one-call
//! run is not queued behind the fifty calls of a long run that arrived
//! first. A run's attained service is the number of its calls that have
//! been given a slot so far, read when a slot frees (not when the call
//! queued: a long run's sixteen calls queued at once must not all count as
//! a fresh run's). Within a run, calls keep their order.
//!
//! [`FairShare`] holds the backend's slots; each run calls through its own
//! [`FairShare::for_run`] handle, which counts the run's service. Calls
//! that find no free slot wait in a priority queue; a dispatcher thread
//! starts them as slots free (never the thread that reports a reply: that
//! may be a backend's I/O thread).
//!
//! Only backends that start calls without waiting and are not simulated
//! are gated ([`FairShare::gates`]): the simulator's calls are timers with
//! no shared limit.

use ais_vm::llm::{
    CancelToken, LlmBackend, LlmError, LlmErrorKind, LlmRequest, LlmResponse, OnDone,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// The backend's slots, shared by every run of the server.
pub struct FairShare {
    limit: usize,
    /// Least attained service first (`true`), or arrival order.
    las: bool,
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    in_flight: usize,
    seq: u64,
    /// Waiting calls by arrival.
    calls: std::collections::BTreeMap<u64, Waiting>,
    dispatcher: bool,
    /// Calls that waited for a slot (for metrics and tests).
    queued_total: u64,
}

struct Waiting {
    backend: Arc<dyn LlmBackend>,
    request: LlmRequest,
    cancel: CancelToken,
    done: OnDone,
    service: Arc<AtomicU64>,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl FairShare {
    /// Slots for `limit` calls in flight at once (the backend's
    /// `concurrency`), least attained service first.
    pub fn new(limit: usize) -> Arc<FairShare> {
        FairShare::with_order(limit, true)
    }

    /// The same slots given in arrival order (`las = false`): the
    /// benchmark's baseline.
    pub fn with_order(limit: usize, las: bool) -> Arc<FairShare> {
        Arc::new(FairShare {
            las,
            limit: limit.max(1),
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        })
    }

    /// Whether calls to `backend` are worth gating (see the module docs).
    pub fn gates(backend: &dyn LlmBackend) -> bool {
        backend.starts_without_waiting() && !backend.is_simulated()
    }

    /// `backend` (the run's, with its cancellation) calling through the
    /// shared slots, counting this run's service from `credit`: the LLM
    /// calls the run is sure to make (`Program::sure_llm_calls`), so that
    /// a run known to be long does not start level with a one-call run.
    pub fn for_run(
        self: &Arc<Self>,
        backend: Arc<dyn LlmBackend>,
        credit: u64,
    ) -> Arc<dyn LlmBackend> {
        Arc::new(FairRun {
            share: Arc::clone(self),
            inner: backend,
            service: Arc::new(AtomicU64::new(credit)),
        })
    }

    /// Calls that have had to wait for a slot since the server started.
    pub fn queued_total(&self) -> u64 {
        lock(&self.state).queued_total
    }

    fn submit(self: &Arc<Self>, w: Waiting) {
        let mut st = lock(&self.state);
        if st.in_flight < self.limit && st.calls.is_empty() {
            st.in_flight += 1;
            drop(st);
            self.launch(w);
            return;
        }
        let seq = st.seq;
        st.seq += 1;
        st.queued_total += 1;
        st.calls.insert(seq, w);
        let spawn = !st.dispatcher;
        st.dispatcher = true;
        drop(st);
        if spawn {
            let me = Arc::clone(self);
            let spawned = std::thread::Builder::new()
                .name("apxm-fair".into())
                .spawn(move || me.dispatch());
            if spawned.is_err() {
                lock(&self.state).dispatcher = false;
            }
        } else {
            self.wake.notify_one();
        }
    }

    fn launch(self: &Arc<Self>, w: Waiting) {
        let Waiting {
            backend,
            request,
            cancel,
            done,
            service,
        } = w;
        let me = Arc::clone(self);
        service.fetch_add(1, Ordering::Relaxed);
        backend.start(
            request,
            cancel,
            Box::new(move |result, attempts| {
                {
                    let mut st = lock(&me.state);
                    st.in_flight = st.in_flight.saturating_sub(1);
                }
                me.wake.notify_one();
                done(result, attempts);
            }),
        );
    }

    /// Starts waiting calls, least attained service first, as slots free;
    /// ends when nothing waits.
    fn dispatch(self: Arc<Self>) {
        let mut st = lock(&self.state);
        loop {
            if st.calls.is_empty() {
                st.dispatcher = false;
                return;
            }
            if st.in_flight >= self.limit {
                st = self.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            // The earliest call of the run with the least service now
            // (a scan: the queue holds at most the runs × their limits).
            let next = if self.las {
                st.calls
                    .iter()
                    .min_by_key(|(seq, w)| (w.service.load(Ordering::Relaxed), **seq))
                    .map(|(seq, _)| *seq)
            } else {
                st.calls.keys().next().copied()
            };
            let Some(w) = next.and_then(|seq| st.calls.remove(&seq)) else {
                continue;
            };
            if w.cancel.is_cancelled() {
                // The run is over: the call ends without a slot.
                drop(st);
                (w.done)(
                    Err(LlmError::new(
                        w.backend.name(),
                        LlmErrorKind::Cancelled,
                        "cancelled while waiting for the backend",
                    )),
                    Vec::new(),
                );
                st = lock(&self.state);
                continue;
            }
            st.in_flight += 1;
            drop(st);
            self.launch(w);
            st = lock(&self.state);
        }
    }
}

/// One run's way to the shared backend.
struct FairRun {
    share: Arc<FairShare>,
    inner: Arc<dyn LlmBackend>,
    service: Arc<AtomicU64>,
}

impl LlmBackend for FairRun {
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
        ais_vm::llm::complete_through_start(
            self,
            request,
            cancel,
            &ais_vm::llm::NoObserver,
            "the call",
        )
    }

    fn starts_without_waiting(&self) -> bool {
        true
    }

    fn start(&self, mut request: LlmRequest, cancel: CancelToken, done: OnDone) {
        // Below this share (a fleet's slots), the call is still ordered by
        // its run's service.
        request.attained = ais_vm::llm::attained::Attained::of(&self.service);
        self.share.submit(Waiting {
            backend: Arc::clone(&self.inner),
            request,
            cancel,
            done,
            service: Arc::clone(&self.service),
        });
    }

    fn server_info(&self) -> Option<ais_vm::llm::providers::ServerInfo> {
        self.inner.server_info()
    }

    fn shared_prefix(&self, request: &LlmRequest) -> Option<ais_vm::llm::cache::SharedPrefix> {
        self.inner.shared_prefix(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ais_vm::llm::{Attempt, Usage};
    use std::sync::mpsc;
    use std::time::Duration;

    /// Answers each call when the test releases it, recording the order
    /// in which calls reached it.
    struct Gate {
        order: Mutex<Vec<String>>,
        release: Mutex<Vec<(String, OnDone)>>,
    }

    impl LlmBackend for Gate {
        fn name(&self) -> &str {
            "gate"
        }
        fn complete(&self, _: &LlmRequest, _: &CancelToken) -> Result<LlmResponse, LlmError> {
            Err(LlmError::new("gate", LlmErrorKind::Client, "start only"))
        }
        fn starts_without_waiting(&self) -> bool {
            true
        }
        fn start(&self, request: LlmRequest, _: CancelToken, done: OnDone) {
            self.order
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(request.prompt.clone());
            self.release
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((request.prompt, done));
        }
    }

    fn reply() -> LlmResponse {
        LlmResponse {
            text: "ok".into(),
            json: None,
            usage: Usage::default(),
            finish_reason: "stop".into(),
            model: "gate".into(),
            latency: Duration::ZERO,
            simulated: false,
            tool_calls: Vec::new(),
        }
    }

    fn request(prompt: &str) -> LlmRequest {
        LlmRequest {
            kind: ais_vm::llm::LlmOpKind::Ask,
            agent: "A".into(),
            system: None,
            prompt: prompt.into(),
            context: Vec::new(),
            model: None,
            temperature: None,
            max_tokens: None,
            json_schema: None,
            budget_tokens: None,
            backend: None,
            tools: Vec::new(),
            turns: Vec::new(),
            on_text: None,
            critical: false,
            attained: Default::default(),
            cache: Default::default(),
        }
    }

    /// Releases the oldest started call after `ms` of service.
    fn release_one(g: &Gate, ms: u64) {
        let next = {
            let mut r = g.release.lock().unwrap_or_else(|p| p.into_inner());
            (!r.is_empty()).then(|| r.remove(0))
        };
        if let Some((_, done)) = next {
            std::thread::sleep(Duration::from_millis(ms));
            done(Ok(reply()), Vec::<Attempt>::new());
        }
    }

    fn wait_started(g: &Gate, n: usize) {
        for _ in 0..6000 {
            if g.order.lock().unwrap_or_else(|p| p.into_inner()).len() >= n {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("fewer than {n} calls started");
    }

    #[test]
    fn the_run_with_the_least_attained_service_goes_first() {
        assert_eq!(
            order_with(FairShare::new(1)),
            vec!["long 1", "long 2", "short 1", "long 3"]
        );
    }

    #[test]
    fn in_arrival_order_the_short_run_waits_its_turn() {
        assert_eq!(
            order_with(FairShare::with_order(1, false)),
            vec!["long 1", "long 2", "long 3", "short 1"]
        );
    }

    /// A long run takes the only slot twice; then its third call and a
    /// short run's first wait, the long one queued first. The order in
    /// which calls reached the backend.
    fn order_with(share: Arc<FairShare>) -> Vec<String> {
        let gate = Arc::new(Gate {
            order: Mutex::default(),
            release: Mutex::default(),
        });
        let long = share.for_run(gate.clone(), 0);
        let short = share.for_run(gate.clone(), 0);
        let (tx, rx) = mpsc::channel();
        let cb = |tx: &mpsc::Sender<String>, name: &str| -> OnDone {
            let (tx, name) = (tx.clone(), name.to_string());
            Box::new(move |_, _| {
                let _ = tx.send(name);
            })
        };
        // The long run's first call takes the only slot and accrues service.
        long.start(request("long 1"), CancelToken::new(), cb(&tx, "long 1"));
        wait_started(&gate, 1);
        long.start(request("long 2"), CancelToken::new(), cb(&tx, "long 2"));
        release_one(&gate, 20);
        wait_started(&gate, 2);
        // Now the long run has service; its third call and the short run's
        // first wait behind `long 2`, the long one queued first.
        long.start(request("long 3"), CancelToken::new(), cb(&tx, "long 3"));
        short.start(request("short 1"), CancelToken::new(), cb(&tx, "short 1"));
        release_one(&gate, 1);
        wait_started(&gate, 3);
        release_one(&gate, 1);
        wait_started(&gate, 4);
        release_one(&gate, 1);
        let order = gate.order.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut settled: Vec<String> = (0..4)
            .filter_map(|_| rx.recv_timeout(Duration::from_secs(30)).ok())
            .collect();
        settled.sort();
        assert_eq!(settled, vec!["long 1", "long 2", "long 3", "short 1"]);
        assert_eq!(share.queued_total(), 3);
        order
    }

    #[test]
    fn a_run_sure_to_be_long_waits_behind_a_fresh_short_one() {
        let gate = Arc::new(Gate {
            order: Mutex::default(),
            release: Mutex::default(),
        });
        let share = FairShare::new(1);
        let first = share.for_run(gate.clone(), 0);
        // Neither has had a call; the compiler says one will make 50.
        let long = share.for_run(gate.clone(), 50);
        let short = share.for_run(gate.clone(), 1);
        let none = || -> OnDone { Box::new(|_, _| {}) };
        first.start(request("first"), CancelToken::new(), none());
        wait_started(&gate, 1);
        long.start(request("long 1"), CancelToken::new(), none());
        short.start(request("short 1"), CancelToken::new(), none());
        for n in 2..=3 {
            release_one(&gate, 1);
            wait_started(&gate, n);
        }
        release_one(&gate, 1);
        let order = gate.order.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert_eq!(order, vec!["first", "short 1", "long 1"]);
    }

    #[test]
    fn a_cancelled_waiting_call_ends_without_a_slot() {
        let gate = Arc::new(Gate {
            order: Mutex::default(),
            release: Mutex::default(),
        });
        let share = FairShare::new(1);
        let run = share.for_run(gate.clone(), 0);
        let (tx, rx) = mpsc::channel();
        run.start(request("a"), CancelToken::new(), Box::new(|_, _| {}));
        wait_started(&gate, 1);
        let cancel = CancelToken::new();
        run.start(
            request("b"),
            cancel.clone(),
            Box::new(move |r, _| {
                let _ = tx.send(r.map(|_| ()).map_err(|e| e.kind));
            }),
        );
        cancel.cancel();
        release_one(&gate, 0);
        let r = rx.recv_timeout(Duration::from_secs(30)).expect("settled");
        assert_eq!(r, Err(LlmErrorKind::Cancelled));
        assert_eq!(
            gate.order.lock().unwrap_or_else(|p| p.into_inner()).len(),
            1
        );
    }
}
