//! Fallback chains: when a call fails in a way another provider could
//! answer (rate limited, server error, timeout, unreachable, a reply that
//! is not a reply), the next backend of the chain gets the same request.
//!
//! What does **not** fall back: a request the provider refused as such
//! (`400` and other 4xx: `client`), keys (`auth`), spend limits, a reply
//! cut off or filtered (`truncated`, `content_filter`), a request too
//! large for the context or needing tools the server cannot render
//! (`context_overflow`, `unsupported`), cancellation and replay misses:
//! the next provider would refuse the same request, or the failure is the
//! program's to handle.
//!
//! A backend that failed that way is skipped for [`COOL_DOWN`] (calls go
//! straight to the next one), then tried again by the next call. When
//! every backend left is cooling down, they are tried all the same, in
//! order.

use crate::llm::{
    Attempt, AttemptObserver, CancelToken, LlmBackend, LlmError, LlmErrorKind, LlmRequest,
    LlmResponse, OnDone, TextEvent, TextSink,
};
use crate::sync::lock;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a backend that just failed over is skipped.
pub const COOL_DOWN: Duration = Duration::from_secs(5);

/// Whether a failure goes to the next backend of a chain (the rules in
/// the module documentation and docs/backends.md).
pub fn falls_back(e: &LlmError) -> bool {
    use LlmErrorKind::*;
    match e.kind {
        RateLimited | Server | Timeout | Connect | InvalidResponse => true,
        Client | Auth | Truncated | ContentFilter | Unsupported | ContextOverflow | Cancelled
        | Replay => false,
    }
}

/// A backend and the ones that answer when it cannot.
pub struct Fallback {
    chain: Arc<Chain>,
}

struct Chain {
    backends: Vec<Arc<dyn LlmBackend>>,
    /// Until when each backend is skipped after a failure that fell back.
    cooling: Mutex<Vec<Option<Instant>>>,
}

impl Fallback {
    /// `primary` first, then `rest` in order.
    pub fn new(primary: Arc<dyn LlmBackend>, rest: Vec<Arc<dyn LlmBackend>>) -> Fallback {
        let backends: Vec<_> = std::iter::once(primary).chain(rest).collect();
        let cooling = Mutex::new(vec![None; backends.len()]);
        Fallback {
            chain: Arc::new(Chain { backends, cooling }),
        }
    }
}

impl Chain {
    /// The backend to try from position `from`: the first not cooling
    /// down, else `from` itself.
    fn pick(&self, from: usize) -> Option<usize> {
        if from >= self.backends.len() {
            return None;
        }
        let now = Instant::now();
        let cooling = lock(&self.cooling);
        (from..self.backends.len())
            .find(|&i| cooling[i].is_none_or(|t| t <= now))
            .or(Some(from))
    }

    fn set_cooling(&self, i: usize, failed: bool) {
        if let Some(c) = lock(&self.cooling).get_mut(i) {
            *c = failed.then(|| Instant::now() + COOL_DOWN);
        }
    }
}

/// Streamed text across hops: attempts keep counting from the earlier
/// hops' (each backend numbers its own from 1), and text of a hop that
/// failed is withdrawn before the next hop streams.
#[derive(Default)]
struct Stream {
    offset: u32,
    last: Option<u32>,
}

/// One call going down the chain.
struct Hop {
    chain: Arc<Chain>,
    req: LlmRequest,
    sink: Option<TextSink>,
    stream: Arc<Mutex<Stream>>,
    cancel: CancelToken,
    done: OnDone,
    attempts: Vec<Attempt>,
}

impl Hop {
    fn go(self, from: usize, last_error: Option<LlmError>) {
        let chain = Arc::clone(&self.chain);
        if let Some((i, (req, cancel, done))) = self.launch(from, last_error) {
            chain.backends[i].start(req, cancel, done);
        }
    }

    /// The next request of this call, from position `from`, and which
    /// backend it is for; `None` when the chain is exhausted (the call has
    /// been settled with `last_error`).
    #[allow(clippy::type_complexity)]
    fn launch(
        self,
        from: usize,
        last_error: Option<LlmError>,
    ) -> Option<(usize, (LlmRequest, CancelToken, OnDone))> {
        let Some(i) = self.chain.pick(from) else {
            let mut e = last_error.unwrap_or_else(|| {
                LlmError::new("fallback", LlmErrorKind::Client, "empty fallback chain")
            });
            e.attempts = self.attempts.len() as u32;
            (self.done)(Err(e), self.attempts);
            return None;
        };
        let mut req = self.req.clone();
        req.on_text = self.sink.as_ref().map(|s| {
            let (s, stream) = (s.clone(), Arc::clone(&self.stream));
            TextSink::new(move |e: &TextEvent| {
                let mut g = lock(&stream);
                let shift = |a: u32| a.saturating_add(g.offset);
                let e = match e {
                    TextEvent::Delta { attempt, text } => TextEvent::Delta {
                        attempt: shift(*attempt),
                        text: text.clone(),
                    },
                    TextEvent::Reset { attempt } => TextEvent::Reset {
                        attempt: shift(*attempt),
                    },
                };
                if let TextEvent::Delta { attempt, .. } = &e {
                    g.last = Some(*attempt);
                }
                drop(g);
                s.send(&e);
            })
        });
        let cancel = self.cancel.clone();
        let done: OnDone = Box::new(move |result, attempts| self.settle(i, result, attempts));
        Some((i, (req, cancel, done)))
    }

    fn settle(mut self, i: usize, result: Result<LlmResponse, LlmError>, attempts: Vec<Attempt>) {
        self.attempts.extend(attempts);
        let e = match result {
            Ok(r) => {
                self.chain.set_cooling(i, false);
                (self.done)(Ok(r), self.attempts);
                return;
            }
            Err(e) => e,
        };
        let next = falls_back(&e);
        if next {
            self.chain.set_cooling(i, true);
        }
        if !next || self.cancel.is_cancelled() || i + 1 >= self.chain.backends.len() {
            let mut e = e;
            e.attempts = self.attempts.len() as u32;
            (self.done)(Err(e), self.attempts);
            return;
        }
        {
            let mut g = lock(&self.stream);
            if let (Some(a), Some(s)) = (g.last.take(), &self.sink) {
                s.send(&TextEvent::Reset { attempt: a });
            }
            g.offset = self.attempts.len() as u32;
        }
        // Not on the failed backend's thread (it may be its I/O thread,
        // which must not wait for another backend's call).
        let job = Arc::new(Mutex::new(Some((self, e))));
        let theirs = Arc::clone(&job);
        let spawned = std::thread::Builder::new()
            .name("apxm-fallback".into())
            .spawn(move || {
                if let Some((hop, e)) = lock(&theirs).take() {
                    hop.go(i + 1, Some(e));
                }
            });
        if spawned.is_err() {
            if let Some((hop, e)) = lock(&job).take() {
                hop.go(i + 1, Some(e));
            }
        }
    }
}

impl LlmBackend for Fallback {
    /// The primary's: the run's backend is the chain's first.
    fn name(&self) -> &str {
        self.chain.backends[0].name()
    }

    fn concurrency(&self) -> usize {
        self.chain.backends[0].concurrency()
    }

    fn is_simulated(&self) -> bool {
        self.chain.backends.iter().any(|b| b.is_simulated())
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
        crate::llm::complete_through_start(self, request, cancel, observer, "the call")
    }

    /// Calls go through `start` (a scheduled reply could not fall back);
    /// they return at once when every backend of the chain starts calls
    /// without waiting.
    fn starts_without_waiting(&self) -> bool {
        self.chain
            .backends
            .iter()
            .all(|b| b.starts_without_waiting() && !b.is_simulated())
    }

    fn start(&self, mut request: LlmRequest, cancel: CancelToken, done: OnDone) {
        let sink = request.on_text.take();
        Hop {
            chain: Arc::clone(&self.chain),
            req: request,
            sink,
            stream: Arc::default(),
            cancel,
            done,
            attempts: Vec::new(),
        }
        .go(0, None);
    }

    /// A fan-out goes to each backend together, as without the chain.
    fn start_many(&self, calls: Vec<(LlmRequest, CancelToken, OnDone)>) {
        let mut groups: Vec<Vec<(LlmRequest, CancelToken, OnDone)>> =
            self.chain.backends.iter().map(|_| Vec::new()).collect();
        for (mut request, cancel, done) in calls {
            let sink = request.on_text.take();
            let hop = Hop {
                chain: Arc::clone(&self.chain),
                req: request,
                sink,
                stream: Arc::default(),
                cancel,
                done,
                attempts: Vec::new(),
            };
            if let Some((i, call)) = hop.launch(0, None) {
                groups[i].push(call);
            }
        }
        for (b, calls) in self.chain.backends.iter().zip(groups) {
            if !calls.is_empty() {
                b.start_many(calls);
            }
        }
    }

    fn server_info(&self) -> Option<crate::llm::providers::ServerInfo> {
        self.chain.backends[0].server_info()
    }

    /// The first backend's: it answers unless it cannot.
    fn shared_prefix(&self, request: &LlmRequest) -> Option<crate::llm::cache::SharedPrefix> {
        self.chain.backends[0].shared_prefix(request)
    }
}
