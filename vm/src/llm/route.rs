//! Routing by the op's `backend:` argument: a run has one default backend
//! and, when its program names others (`ask("…", backend: "local")`),
//! those too, all built at run start so an unknown or unusable name fails
//! before any call. Each request goes to the backend it names, else to the
//! default.

use super::{
    AttemptObserver, CancelToken, LlmBackend, LlmError, LlmErrorKind, LlmRequest, LlmResponse,
    OnDone,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The default backend plus the named ones a program asks for.
pub struct Router {
    default: Arc<dyn LlmBackend>,
    named: BTreeMap<String, Arc<dyn LlmBackend>>,
}

impl Router {
    /// `named`: the backends the program names, by configured name (the
    /// default may be among them under its own name).
    pub fn new(default: Arc<dyn LlmBackend>, named: BTreeMap<String, Arc<dyn LlmBackend>>) -> Self {
        Router { default, named }
    }

    /// The backend `request` goes to. A name the router was not built with
    /// (a hand-edited artifact) is the error of [`Router::unknown`].
    fn pick(&self, request: &LlmRequest) -> Result<&dyn LlmBackend, LlmError> {
        match &request.backend {
            None => Ok(self.default.as_ref()),
            Some(n) if n == self.default.name() => Ok(self.default.as_ref()),
            Some(n) => self
                .named
                .get(n)
                .map(|b| b.as_ref())
                .ok_or_else(|| self.unknown(n)),
        }
    }

    fn unknown(&self, name: &str) -> LlmError {
        LlmError::new(
            self.default.name(),
            LlmErrorKind::Client,
            format!("the op names backend `{name}`, which this run did not configure"),
        )
    }

    fn all(&self) -> impl Iterator<Item = &Arc<dyn LlmBackend>> {
        std::iter::once(&self.default).chain(self.named.values())
    }
}

impl LlmBackend for Router {
    fn name(&self) -> &str {
        self.default.name()
    }

    /// Each backend limits its own calls; the run may have all of them in
    /// flight at once.
    fn concurrency(&self) -> usize {
        self.all().map(|b| b.concurrency()).sum()
    }

    fn is_simulated(&self) -> bool {
        self.all().any(|b| b.is_simulated())
    }

    fn complete(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
    ) -> Result<LlmResponse, LlmError> {
        self.pick(request)?.complete(request, cancel)
    }

    fn complete_observed(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
        observer: &dyn AttemptObserver,
    ) -> Result<LlmResponse, LlmError> {
        self.pick(request)?
            .complete_observed(request, cancel, observer)
    }

    fn scheduled_reply(
        &self,
        request: &LlmRequest,
    ) -> Option<(Duration, Result<LlmResponse, LlmError>)> {
        match self.pick(request) {
            Ok(b) => b.scheduled_reply(request),
            Err(e) => Some((Duration::ZERO, Err(e))),
        }
    }

    /// True only when every backend can start without waiting, so the
    /// scheduler never blocks a worker on a call it believes is detached.
    fn starts_without_waiting(&self) -> bool {
        self.all().all(|b| b.starts_without_waiting())
    }

    fn shared_prefix(&self, request: &LlmRequest) -> Option<super::cache::SharedPrefix> {
        self.pick(request).ok()?.shared_prefix(request)
    }

    fn start(&self, request: LlmRequest, cancel: CancelToken, done: OnDone) {
        match self.pick(&request) {
            Ok(b) => b.start(request, cancel, done),
            Err(e) => done(Err(e), Vec::new()),
        }
    }

    fn start_many(&self, calls: Vec<(LlmRequest, CancelToken, OnDone)>) {
        // Grouped per backend, so each still sees its fan-out together.
        let backends: Vec<&Arc<dyn LlmBackend>> = self.all().collect();
        let mut groups: Vec<Vec<(LlmRequest, CancelToken, OnDone)>> =
            backends.iter().map(|_| Vec::new()).collect();
        for (request, cancel, done) in calls {
            match self.pick(&request) {
                Ok(b) => {
                    let i = backends
                        .iter()
                        .position(|x| std::ptr::addr_eq(Arc::as_ptr(x), b))
                        .unwrap_or(0);
                    groups[i].push((request, cancel, done));
                }
                Err(e) => done(Err(e), Vec::new()),
            }
        }
        for (b, calls) in backends.into_iter().zip(groups) {
            if !calls.is_empty() {
                b.start_many(calls);
            }
        }
    }
}
