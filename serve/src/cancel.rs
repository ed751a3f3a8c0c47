//! Cancelling a run from outside it.
//!
//! The VM stops a run by itself (failure, budget, watchdog) but takes no
//! stop request from its embedder, and the scheduler is not this crate's
//! to change. So a served run's backend and host are wrapped: once the run
//! is cancelled, every LLM call, tool call and memory, belief or message
//! op fails at once with `run.cancelled`, and the calls in flight are
//! cancelled through the run's own cancel token (the one the VM hands every
//! call, which the wrapper keeps). Pure ops between two effects still run;
//! a `try` around an effect sees the `run.cancelled` failure, and its
//! `catch`, if it makes effects of its own, fails in turn. The server
//! reports such a run `cancelled` whatever its outcome.

use ais_ir::Tier;
use ais_vm::host::{Host, HostError, Message};
use ais_vm::llm::{
    AttemptObserver, CancelToken, LlmBackend, LlmError, LlmErrorKind, LlmRequest, LlmResponse,
    OnDone,
};
use serde_json::Value as Json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The code of every failure a cancelled run's effects get.
pub const CANCELLED: &str = "run.cancelled";

/// A run's cancel switch (cheap to clone; all clones are one switch).
#[derive(Clone, Default)]
pub struct Cancel(Arc<State>);

#[derive(Default)]
struct State {
    flag: AtomicBool,
    /// The token the VM passes to this run's calls.
    token: Mutex<Option<CancelToken>>,
}

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cancel({})", self.is_cancelled())
    }
}

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Cancels the run: calls in flight are cancelled, later effects fail.
    pub fn cancel(&self) {
        self.0.flag.store(true, Ordering::SeqCst);
        let token = self
            .0
            .token
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(t) = token {
            t.cancel();
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.flag.load(Ordering::SeqCst)
    }

    /// Keeps the token of a call (the run's), cancelling it at once when
    /// the run is already cancelled.
    fn note(&self, token: &CancelToken) {
        {
            let mut t = self.0.token.lock().unwrap_or_else(|e| e.into_inner());
            if t.is_none() {
                *t = Some(token.clone());
            }
        }
        if self.is_cancelled() {
            token.cancel();
        }
    }

    /// `backend`, failing every call once the run is cancelled.
    pub fn backend(&self, backend: Arc<dyn LlmBackend>) -> Arc<dyn LlmBackend> {
        Arc::new(CancellableBackend {
            inner: backend,
            cancel: self.clone(),
        })
    }

    /// `host`, failing every effect once the run is cancelled.
    pub fn host(&self, host: Arc<dyn Host>) -> Arc<dyn Host> {
        Arc::new(CancellableHost {
            inner: host,
            cancel: self.clone(),
        })
    }

    fn llm_error(&self, provider: &str) -> LlmError {
        LlmError {
            provider: provider.to_string(),
            status: None,
            message: "the run was cancelled".into(),
            attempts: 0,
            kind: LlmErrorKind::Cancelled,
        }
    }

    fn host_error(&self) -> HostError {
        HostError::new(CANCELLED, "the run was cancelled")
    }
}

struct CancellableBackend {
    inner: Arc<dyn LlmBackend>,
    cancel: Cancel,
}

impl LlmBackend for CancellableBackend {
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
        self.cancel.note(cancel);
        if self.cancel.is_cancelled() {
            return Err(self.cancel.llm_error(self.inner.name()));
        }
        self.inner.complete(request, cancel)
    }

    fn complete_observed(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
        observer: &dyn AttemptObserver,
    ) -> Result<LlmResponse, LlmError> {
        self.cancel.note(cancel);
        if self.cancel.is_cancelled() {
            return Err(self.cancel.llm_error(self.inner.name()));
        }
        self.inner.complete_observed(request, cancel, observer)
    }

    fn scheduled_reply(
        &self,
        request: &LlmRequest,
    ) -> Option<(Duration, Result<LlmResponse, LlmError>)> {
        if self.cancel.is_cancelled() {
            return Some((
                Duration::ZERO,
                Err(self.cancel.llm_error(self.inner.name())),
            ));
        }
        self.inner.scheduled_reply(request)
    }

    fn starts_without_waiting(&self) -> bool {
        self.inner.starts_without_waiting()
    }

    fn shared_prefix(&self, request: &LlmRequest) -> Option<ais_vm::llm::cache::SharedPrefix> {
        self.inner.shared_prefix(request)
    }

    fn start(&self, request: LlmRequest, cancel: CancelToken, done: OnDone) {
        self.cancel.note(&cancel);
        if self.cancel.is_cancelled() {
            done(Err(self.cancel.llm_error(self.inner.name())), Vec::new());
            return;
        }
        self.inner.start(request, cancel, done);
    }

    fn start_many(&self, calls: Vec<(LlmRequest, CancelToken, OnDone)>) {
        if let Some((_, t, _)) = calls.first() {
            self.cancel.note(t);
        }
        if self.cancel.is_cancelled() {
            for (_, _, done) in calls {
                done(Err(self.cancel.llm_error(self.inner.name())), Vec::new());
            }
            return;
        }
        self.inner.start_many(calls);
    }
}

struct CancellableHost {
    inner: Arc<dyn Host>,
    cancel: Cancel,
}

impl CancellableHost {
    fn check(&self) -> Result<(), HostError> {
        if self.cancel.is_cancelled() {
            Err(self.cancel.host_error())
        } else {
            Ok(())
        }
    }
}

impl Host for CancellableHost {
    fn invoke_tool(
        &self,
        agent: &str,
        tool: &str,
        args: &Json,
        cancel: &CancelToken,
    ) -> Result<Json, HostError> {
        self.cancel.note(cancel);
        self.check()?;
        self.inner.invoke_tool(agent, tool, args, cancel)
    }

    fn exec(&self, agent: &str, args: &[Json], cancel: &CancelToken) -> Result<Json, HostError> {
        self.cancel.note(cancel);
        self.check()?;
        self.inner.exec(agent, args, cancel)
    }

    fn mem_query(&self, agent: &str, tier: Tier, query: &Json) -> Result<Json, HostError> {
        self.check()?;
        self.inner.mem_query(agent, tier, query)
    }

    fn mem_update(
        &self,
        agent: &str,
        tier: Tier,
        value: &Json,
        key: Option<&Json>,
    ) -> Result<(), HostError> {
        self.check()?;
        self.inner.mem_update(agent, tier, value, key)
    }

    fn belief_get(&self, agent: &str, name: &str) -> Result<Json, HostError> {
        self.check()?;
        self.inner.belief_get(agent, name)
    }

    fn belief_set(&self, agent: &str, name: &str, value: &Json) -> Result<(), HostError> {
        self.check()?;
        self.inner.belief_set(agent, name, value)
    }

    fn belief_init(&self, agent: &str, name: &str, value: &Json) -> Result<(), HostError> {
        self.check()?;
        self.inner.belief_init(agent, name, value)
    }

    fn beliefs_outlive_run(&self) -> bool {
        self.inner.beliefs_outlive_run()
    }

    fn print(&self, agent: &str, line: &str) {
        if !self.cancel.is_cancelled() {
            self.inner.print(agent, line);
        }
    }

    fn pause(&self, agent: &str, message: &str) -> Option<Json> {
        self.inner.pause(agent, message)
    }

    fn stored_labels(&self, tier: &str) -> Result<Vec<String>, HostError> {
        self.inner.stored_labels(tier)
    }

    fn store_labels(&self, tier: &str, names: &[String]) -> Result<(), HostError> {
        self.inner.store_labels(tier, names)
    }

    fn communicate(&self, message: Message) -> Result<(), HostError> {
        self.check()?;
        self.inner.communicate(message)
    }
}
