//! A deterministic in-process backend for tests and benchmarks.
//!
//! Replies are derived from the request only, so a program gives the same
//! results whatever the schedule:
//!
//! - text ops (`ask`, `think`, `reason`, `llm`): `"{kind}#{h}: {head}"` where
//!   `h` is an FNV-1a hash (8 hex digits) of the prompt and context blocks and
//!   `head` the first 24 characters of the prompt;
//! - structured ops (`plan`, `verify`, `reflect`): a JSON value valid against
//!   [`schema_for`](ais_vm::llm::schema::schema_for) (`json` in the response);
//! - a prompt containing a configured failure marker fails with
//!   [`LlmErrorKind::Server`].
//!
//! A test that needs other answers scripts them ([`FakeBackend::with_script`]:
//! a function of the request and the call's number that answers or defers to
//! the derived reply), fails every call from the N-th on
//! ([`FakeBackend::failing_from_call`]) and reads back what was asked
//! ([`FakeBackend::requests`]): one double instead of one per test file.
//!
//! Each call sleeps for the configured latency of its kind (default zero),
//! in slices of at most 100 ms, returning early with [`LlmErrorKind::Cancelled`] when the
//! [`CancelToken`] is set. The backend counts calls and records the highest
//! number of calls it saw in flight at once.

use ais_vm::llm::*;
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

/// Answers the call numbered `n` (from 0, in the order calls reach the
/// backend) of `request`; `None` defers to the derived reply.
pub type Script =
    dyn Fn(&LlmRequest, u64) -> Option<Result<LlmResponse, LlmError>> + Send + Sync + 'static;

#[derive(Default)]
pub struct FakeBackend {
    name: Option<String>,
    latency: HashMap<LlmOpKind, Duration>,
    default_latency: Duration,
    fail_marker: Option<String>,
    fail_from_call: Option<u64>,
    blocking: bool,
    concurrency: Option<usize>,
    script: Option<Box<Script>>,
    counters: Counters,
    /// Every request with whether it was answered (`Ok`).
    requests: Mutex<Vec<(LlmRequest, bool)>>,
}

impl std::fmt::Debug for FakeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeBackend")
            .field("name", &self.name())
            .field("scripted", &self.script.is_some())
            .field("calls", &self.calls())
            .finish_non_exhaustive()
    }
}

/// A final text answer, as a provider would give it (usage zero, `stop`).
pub fn text_reply(text: impl Into<String>) -> LlmResponse {
    LlmResponse {
        text: text.into(),
        json: None,
        usage: Usage::default(),
        finish_reason: "stop".into(),
        model: "fake".into(),
        latency: Duration::ZERO,
        simulated: true,
        tool_calls: Vec::new(),
    }
}

/// A server failure (HTTP 500) with `message`.
pub fn server_error(message: impl Into<String>) -> LlmError {
    LlmError {
        provider: "fake".into(),
        status: Some(500),
        message: message.into(),
        attempts: 1,
        kind: LlmErrorKind::Server,
    }
}

#[derive(Debug, Default)]
struct Counters {
    calls: AtomicU64,
    /// Blocking calls in progress.
    in_flight: AtomicUsize,
    /// When each scheduled reply in flight is due.
    due: std::sync::Mutex<std::collections::BinaryHeap<std::cmp::Reverse<Instant>>>,
    peak: AtomicUsize,
}

impl Counters {
    /// Counts a call and returns its number (from 0).
    fn enter(&self) -> u64 {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        n
    }

    fn leave(&self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// FNV-1a, 32 bits.
pub fn fnv1a(parts: &[&str]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0xff)) {
            h ^= u32::from(b);
            h = h.wrapping_mul(0x0100_0193);
        }
    }
    h
}

impl FakeBackend {
    /// Instant replies.
    pub fn new() -> FakeBackend {
        FakeBackend::default()
    }

    /// Every op kind takes `d`.
    pub fn with_latency(mut self, d: Duration) -> FakeBackend {
        self.default_latency = d;
        self
    }

    /// Op kind `kind` takes `d`.
    pub fn with_kind_latency(mut self, kind: LlmOpKind, d: Duration) -> FakeBackend {
        self.latency.insert(kind, d);
        self
    }

    /// Calls whose prompt contains `marker` fail.
    pub fn failing_on(mut self, marker: impl Into<String>) -> FakeBackend {
        self.fail_marker = Some(marker.into());
        self
    }

    /// Every call from the `n`-th (counted from 0) on fails with HTTP 500:
    /// a provider that goes down mid-run.
    pub fn failing_from_call(mut self, n: u64) -> FakeBackend {
        self.fail_from_call = Some(n);
        self
    }

    /// `script` answers first (see [`Script`]); the latency, the failure
    /// switches and the counters still apply.
    pub fn with_script(
        mut self,
        script: impl Fn(&LlmRequest, u64) -> Option<Result<LlmResponse, LlmError>>
            + Send
            + Sync
            + 'static,
    ) -> FakeBackend {
        self.script = Some(Box::new(script));
        self
    }

    /// Calls are made and answered through `complete` only, as a remote
    /// provider's are: no reply is known before the call returns (without
    /// this, the VM takes replies at once and waits out their latency).
    pub fn blocking(mut self) -> FakeBackend {
        self.blocking = true;
        self
    }

    /// The name the backend reports (default `fake`).
    pub fn named(mut self, name: impl Into<String>) -> FakeBackend {
        self.name = Some(name.into());
        self
    }

    /// Every request so far, in the order calls reached the backend.
    pub fn requests(&self) -> Vec<LlmRequest> {
        self.lock_requests()
            .iter()
            .map(|(r, _)| r.clone())
            .collect()
    }

    /// The requests that were answered (not failed), in order.
    pub fn answered(&self) -> Vec<LlmRequest> {
        self.lock_requests()
            .iter()
            .filter(|(_, ok)| *ok)
            .map(|(r, _)| r.clone())
            .collect()
    }

    fn lock_requests(&self) -> std::sync::MutexGuard<'_, Vec<(LlmRequest, bool)>> {
        self.requests.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The concurrency the backend advertises (default 16).
    pub fn with_concurrency(mut self, n: usize) -> FakeBackend {
        self.concurrency = Some(n);
        self
    }

    pub fn calls(&self) -> u64 {
        self.counters.calls.load(Ordering::SeqCst)
    }

    /// Highest number of concurrent calls observed.
    pub fn peak_in_flight(&self) -> usize {
        self.counters.peak.load(Ordering::SeqCst)
    }

    fn latency_of(&self, kind: LlmOpKind) -> Duration {
        self.latency
            .get(&kind)
            .copied()
            .unwrap_or(self.default_latency)
    }

    /// The reply text for a text op (what `complete` returns).
    pub fn reply_text(request: &LlmRequest) -> String {
        let mut parts: smallvec::SmallVec<[&str; 8]> =
            smallvec::smallvec![request.kind.name(), request.prompt.as_str()];
        for c in &request.context {
            parts.push(&c.label);
            parts.push(&c.text);
        }
        let head = match request.prompt.char_indices().nth(24) {
            Some((i, _)) => &request.prompt[..i],
            None => &request.prompt,
        };
        // `{kind}#{hash:08x}: {head}`, without the formatting machinery
        // (this runs once per simulated call, on the VM's workers).
        let kind = request.kind.name();
        let mut text = String::with_capacity(kind.len() + 11 + head.len());
        text.push_str(kind);
        text.push('#');
        let h = fnv1a(&parts);
        for shift in (0..8).rev() {
            let d = (h >> (shift * 4)) & 0xf;
            text.push(char::from_digit(d, 16).unwrap_or('0'));
        }
        text.push_str(": ");
        text.push_str(head);
        text
    }

    fn structured(request: &LlmRequest, text: &str) -> Option<serde_json::Value> {
        let h = fnv1a(&[text]);
        Some(match request.kind {
            LlmOpKind::Plan => json!({
                "goal": request.prompt,
                "steps": [
                    {"id": "s1", "description": format!("research {:04x}", h & 0xffff), "depends_on": []},
                    {"id": "s2", "description": format!("draft {:04x}", h >> 16), "depends_on": ["s1"]},
                    {"id": "s3", "description": format!("review {:02x}", h >> 24), "depends_on": ["s2"]},
                ]
            }),
            LlmOpKind::Verify => json!({
                "verdict": h % 2 == 0,
                "reason": text,
                "confidence": f64::from(h % 100) / 100.0,
            }),
            LlmOpKind::Reflect => json!({
                "critique": text,
                "suggestions": [format!("improve {:04x}", h & 0xffff)],
                "score": f64::from(h % 10),
            }),
            _ => return None,
        })
    }

    fn wait(&self, d: Duration, cancel: &CancelToken) -> bool {
        let deadline = Instant::now() + d;
        loop {
            if cancel.is_cancelled() {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            // One wake-up per call for short latencies; cancellation is seen
            // within 100 ms for long ones.
            std::thread::sleep((deadline - now).min(Duration::from_millis(100)));
        }
    }
}

fn cancelled() -> LlmError {
    LlmError::new("fake", LlmErrorKind::Cancelled, "cancelled")
}

impl FakeBackend {
    /// The outcome of call `n`, `request`, reported as taking `latency`;
    /// recorded for [`requests`](FakeBackend::requests).
    fn outcome(
        &self,
        n: u64,
        request: &LlmRequest,
        latency: Duration,
    ) -> Result<LlmResponse, LlmError> {
        let result = self.decide(n, request, latency);
        self.lock_requests()
            .push((without_callback(request), result.is_ok()));
        result
    }

    fn decide(
        &self,
        n: u64,
        request: &LlmRequest,
        latency: Duration,
    ) -> Result<LlmResponse, LlmError> {
        if self.fail_from_call.is_some_and(|from| n >= from) {
            return Err(server_error(format!("down from call {n}")));
        }
        if let Some(answer) = self.script.as_ref().and_then(|s| s(request, n)) {
            return answer.map(|r| LlmResponse { latency, ..r });
        }
        if let Some(m) = &self.fail_marker {
            if request.prompt.contains(m.as_str()) {
                return Err(LlmError {
                    provider: "fake".into(),
                    status: Some(500),
                    message: format!("injected failure for a prompt containing {m:?}"),
                    attempts: 1,
                    kind: LlmErrorKind::Server,
                });
            }
        }
        let text = FakeBackend::reply_text(request);
        let json = if request.json_schema.is_some() {
            FakeBackend::structured(request, &text)
        } else {
            None
        };
        let text = match &json {
            Some(j) => j.to_string(),
            None => text,
        };
        let prompt_words = request.prompt.split_whitespace().count()
            + request
                .context
                .iter()
                .map(|c| c.text.split_whitespace().count())
                .sum::<usize>();
        Ok(LlmResponse {
            usage: Usage {
                prompt_tokens: prompt_words as u64,
                completion_tokens: text.split_whitespace().count() as u64,
                ..Default::default()
            },
            text,
            json,
            finish_reason: "stop".into(),
            model: ["fake-", request.kind.name()].concat(),
            latency,
            simulated: true,
            tool_calls: Vec::new(),
        })
    }
}

/// The request as kept: its streaming callback dropped (a kept request
/// must not call into a finished op).
fn without_callback(request: &LlmRequest) -> LlmRequest {
    LlmRequest {
        cache: Default::default(),
        on_text: None,
        ..request.clone()
    }
}

impl LlmBackend for FakeBackend {
    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("fake")
    }

    fn concurrency(&self) -> usize {
        self.concurrency.unwrap_or(16)
    }

    fn is_simulated(&self) -> bool {
        true
    }

    fn complete(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
    ) -> Result<LlmResponse, LlmError> {
        let n = self.counters.enter();
        let started = Instant::now();
        let d = self.latency_of(request.kind);
        let waited = d.is_zero() || self.wait(d, cancel);
        self.counters.leave();
        if !waited || cancel.is_cancelled() {
            return Err(cancelled());
        }
        self.outcome(n, request, started.elapsed())
    }

    fn starts_without_waiting(&self) -> bool {
        !self.blocking
    }

    /// The reply is made at once; the kind's latency is only a wait. The
    /// call counts as in flight until it is due.
    fn scheduled_reply(
        &self,
        request: &LlmRequest,
    ) -> Option<(Duration, Result<LlmResponse, LlmError>)> {
        if self.blocking {
            return None;
        }
        let d = self.latency_of(request.kind);
        let n = self.counters.calls.fetch_add(1, Ordering::SeqCst);
        let now = Instant::now();
        let mut due = self.counters.due.lock().unwrap_or_else(|e| e.into_inner());
        while due.peek().is_some_and(|std::cmp::Reverse(at)| *at <= now) {
            due.pop();
        }
        due.push(std::cmp::Reverse(now + d));
        let in_flight = due.len() + self.counters.in_flight.load(Ordering::SeqCst);
        self.counters.peak.fetch_max(in_flight, Ordering::SeqCst);
        drop(due);
        Some((d, self.outcome(n, request, d)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn req(kind: LlmOpKind, prompt: &str) -> LlmRequest {
        LlmRequest {
            cache: Default::default(),
            kind,
            agent: "A".into(),
            system: None,
            prompt: prompt.into(),
            context: vec![],
            model: None,
            temperature: None,
            max_tokens: None,
            json_schema: ais_vm::llm::schema::schema_for(kind),
            budget_tokens: None,
            backend: None,
            tools: Vec::new(),
            turns: Vec::new(),
            on_text: None,
            critical: false,
            attained: Default::default(),
        }
    }

    #[test]
    fn reply_text_is_kind_hash_and_prompt_head() {
        let long = "a prompt that is longer than twenty-four characters";
        for (kind, prompt) in [
            (LlmOpKind::Ask, "hi"),
            (LlmOpKind::Think, long),
            (LlmOpKind::Ask, "héllo wörld ünïcode prompt text"),
        ] {
            let r = req(kind, prompt);
            let head: String = prompt.chars().take(24).collect();
            let hash = fnv1a(&[kind.name(), prompt]);
            assert_eq!(
                FakeBackend::reply_text(&r),
                format!("{}#{hash:08x}: {head}", kind.name())
            );
        }
    }

    #[test]
    fn replies_are_deterministic_and_structured() {
        let b = FakeBackend::new().failing_on("BOOM");
        let c = CancelToken::new();
        let a1 = b.complete(&req(LlmOpKind::Ask, "hello world"), &c).unwrap();
        let a2 = b.complete(&req(LlmOpKind::Ask, "hello world"), &c).unwrap();
        assert_eq!(a1.text, a2.text);
        assert!(a1.text.starts_with("ask#"));
        let p = b.complete(&req(LlmOpKind::Plan, "x"), &c).unwrap();
        assert!(p.json.unwrap()["steps"].is_array());
        let e = b
            .complete(&req(LlmOpKind::Ask, "a BOOM b"), &c)
            .unwrap_err();
        assert_eq!(e.kind, LlmErrorKind::Server);
        assert_eq!(b.calls(), 4);
    }

    #[test]
    fn cancellation_stops_a_slow_call() {
        let b = FakeBackend::new().with_latency(Duration::from_secs(3600));
        let c = CancelToken::new();
        c.cancel();
        let e = b.complete(&req(LlmOpKind::Ask, "x"), &c).unwrap_err();
        assert_eq!(e.kind, LlmErrorKind::Cancelled);
    }
}
