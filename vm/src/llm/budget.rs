//! Per-run token budget.
//!
//! [`TokenBudget`] counts the tokens of every call of a run (prompt plus
//! completion); [`BudgetedBackend`] refuses new calls once it is spent and
//! fails the call that crosses it, with [`LlmErrorKind::BudgetExceeded`].

use super::{
    call_usage, Attempt, AttemptLog, AttemptObserver, CancelToken, LlmBackend, LlmError,
    LlmErrorKind, LlmRequest, LlmResponse, OnDone, Usage,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Tokens used by a run, with an optional limit. Shared by all calls.
#[derive(Debug, Default)]
pub struct TokenBudget {
    limit: Option<u64>,
    prompt: AtomicU64,
    completion: AtomicU64,
    calls: AtomicU64,
}

impl TokenBudget {
    pub fn new(limit: Option<u64>) -> TokenBudget {
        TokenBudget {
            limit,
            ..TokenBudget::default()
        }
    }

    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Total tokens counted so far.
    pub fn used(&self) -> u64 {
        self.prompt.load(Ordering::SeqCst) + self.completion.load(Ordering::SeqCst)
    }

    /// Usage summed over the run (for the run summary).
    pub fn usage(&self) -> Usage {
        Usage {
            prompt_tokens: self.prompt.load(Ordering::SeqCst),
            completion_tokens: self.completion.load(Ordering::SeqCst),
        }
    }

    /// Calls counted so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// Adds one call's usage; returns the new total.
    pub fn add(&self, usage: Usage) -> u64 {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.add_tokens(usage)
    }

    /// Adds tokens that no answered call accounts for (a failed call's
    /// attempts); returns the new total.
    pub fn add_tokens(&self, usage: Usage) -> u64 {
        self.prompt.fetch_add(usage.prompt_tokens, Ordering::SeqCst);
        self.completion
            .fetch_add(usage.completion_tokens, Ordering::SeqCst);
        self.used()
    }

    fn exceeded(&self, provider: &str, used: u64, limit: u64, this_call: Option<u64>) -> LlmError {
        let call = this_call
            .map(|t| format!(" (this call: {t})"))
            .unwrap_or_default();
        LlmError::new(
            provider,
            LlmErrorKind::BudgetExceeded,
            format!(
                "token budget exceeded: {used} of {limit} tokens used{call}; raise it with --token-budget or `token_budget` in the config"
            ),
        )
    }
}

/// Counts usage into a [`TokenBudget`] and enforces its limit.
pub struct BudgetedBackend {
    inner: Arc<dyn LlmBackend>,
    budget: Arc<TokenBudget>,
}

impl BudgetedBackend {
    pub fn new(inner: Arc<dyn LlmBackend>, budget: Arc<TokenBudget>) -> BudgetedBackend {
        BudgetedBackend { inner, budget }
    }

    pub fn budget(&self) -> &Arc<TokenBudget> {
        &self.budget
    }

    fn before(&self) -> Result<(), LlmError> {
        match self.budget.limit {
            Some(limit) if self.budget.used() >= limit => {
                Err(self
                    .budget
                    .exceeded(self.inner.name(), self.budget.used(), limit, None))
            }
            _ => Ok(()),
        }
    }

    fn after(
        &self,
        outcome: Result<LlmResponse, LlmError>,
        attempts: &[Attempt],
    ) -> Result<LlmResponse, LlmError> {
        charge(&self.budget, self.inner.name(), outcome, attempts)
    }

    /// Runs `request` on the inner backend, reporting attempts to
    /// `observer` and keeping them to charge their tokens.
    fn run(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
        observer: &dyn AttemptObserver,
    ) -> Result<LlmResponse, LlmError> {
        self.before()?;
        let log = AttemptLog::new();
        let tee = |a: &Attempt| {
            log.on_attempt(a);
            observer.on_attempt(a);
        };
        let outcome = self.inner.complete_observed(request, cancel, &tee);
        self.after(outcome, &log.attempts())
    }
}

/// Adds a call's tokens (every attempt's, failed ones too) to `budget`; an
/// error when a reply crosses the limit. A failed call keeps its own error.
fn charge(
    budget: &TokenBudget,
    provider: &str,
    outcome: Result<LlmResponse, LlmError>,
    attempts: &[Attempt],
) -> Result<LlmResponse, LlmError> {
    let usage = call_usage(outcome.as_ref().ok(), attempts);
    let response = match outcome {
        Ok(r) => r,
        Err(e) => {
            budget.add_tokens(usage);
            return Err(e);
        }
    };
    let total = budget.add(usage);
    match budget.limit {
        Some(limit) if total > limit => {
            Err(budget.exceeded(provider, total, limit, Some(usage.total())))
        }
        _ => Ok(response),
    }
}

impl LlmBackend for BudgetedBackend {
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
        self.run(request, cancel, &super::NoObserver)
    }
    fn complete_observed(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
        observer: &dyn AttemptObserver,
    ) -> Result<LlmResponse, LlmError> {
        self.run(request, cancel, observer)
    }
    fn scheduled_reply(
        &self,
        request: &LlmRequest,
    ) -> Option<(std::time::Duration, Result<LlmResponse, LlmError>)> {
        if let Err(e) = self.before() {
            return Some((std::time::Duration::ZERO, Err(e)));
        }
        let (delay, outcome) = self.inner.scheduled_reply(request)?;
        Some((delay, self.after(outcome, &[])))
    }
    fn starts_without_waiting(&self) -> bool {
        self.inner.starts_without_waiting()
    }
    fn start(&self, request: LlmRequest, cancel: CancelToken, done: OnDone) {
        self.start_many(vec![(request, cancel, done)]);
    }
    fn start_many(&self, calls: Vec<(LlmRequest, CancelToken, OnDone)>) {
        let mut wrapped: Vec<(LlmRequest, CancelToken, OnDone)> = Vec::with_capacity(calls.len());
        for (request, cancel, done) in calls {
            if let Err(e) = self.before() {
                done(Err(e), Vec::new());
                continue;
            }
            let budget = Arc::clone(&self.budget);
            let provider = self.inner.name().to_string();
            let done: OnDone = Box::new(move |outcome, attempts| {
                let outcome = charge(&budget, &provider, outcome, &attempts);
                done(outcome, attempts)
            });
            wrapped.push((request, cancel, done));
        }
        if !wrapped.is_empty() {
            self.inner.start_many(wrapped);
        }
    }
}
