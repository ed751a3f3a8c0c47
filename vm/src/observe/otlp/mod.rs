//! OpenTelemetry trace export over OTLP/HTTP (protobuf): a run's ops as
//! spans with the GenAI semantic conventions (`spans`), sent in batches
//! by a background thread (`Pipeline`) so the run never waits for the
//! collector. `docs/telemetry.md` describes the spans and attributes.
//!
//! Off the hot path: a run's trace sees the events of LLM and tool calls
//! only ([`RunObserver::call`]; other ops never reach it) and clones each
//! into a bounded queue with `try_send`; a full queue drops it and counts
//! the drop. At a run's end it queues the run's flow calls the same way,
//! as the scheduler recorded them from its frames
//! ([`RunObserver::flow_calls`]: no pass over the events); the flow-call
//! spans are built from them on the pipeline's thread. Spans are built,
//! encoded and POSTed on the pipeline's thread; an
//! unreachable or slow collector costs dropped spans, never the run. After
//! a failed request the thread stops building and encoding spans for a
//! while (1 s, doubling up to 30 s while requests keep failing): what
//! arrives meanwhile is counted as failed at once, so a collector that is
//! down costs the process no more than one failed request per back-off.

pub mod proto;
pub mod spans;
#[cfg(test)]
mod tests;

pub use crate::config::telemetry::OtlpSettings;
pub use spans::{Outcome, RunContext, RunEnd, Span};

use super::{OpUpdate, RunObserver};
use crate::telemetry::OpEvent;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Most spans in one request.
pub const MAX_BATCH: usize = 512;
/// How long a partial batch waits for more spans before it is sent.
pub const BATCH_DELAY: Duration = Duration::from_millis(200);

/// The first back-off after a failed request, and the longest.
const BACKOFF: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(30));

enum Msg {
    Op {
        cx: Arc<RunContext>,
        event: Box<OpEvent>,
        flow: String,
        agent: String,
    },
    /// A run ended: its flow-call spans are built on the pipeline's
    /// thread, from its flow calls.
    Run {
        cx: Arc<RunContext>,
        end: Box<spans::RunEnd>,
    },
    Flush(mpsc::SyncSender<()>),
}

/// What a pipeline did so far.
#[derive(Debug, Default)]
pub struct Stats {
    /// Spans the collector accepted (2xx).
    pub sent: AtomicU64,
    /// Events or span groups dropped because the queue was full.
    pub dropped: AtomicU64,
    /// Spans in requests that failed (unreachable, timeout, non-2xx).
    pub failed: AtomicU64,
    /// Requests made.
    pub requests: AtomicU64,
    last_error: Mutex<Option<String>>,
}

/// A snapshot of [`Stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub sent: u64,
    pub dropped: u64,
    pub failed: u64,
    pub requests: u64,
    pub last_error: Option<String>,
}

impl Stats {
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            sent: self.sent.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            last_error: self
                .last_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }
}

/// One collector's queue and sending thread, shared by every run of the
/// process that exports there.
pub struct Pipeline {
    settings: OtlpSettings,
    tx: mpsc::SyncSender<Msg>,
    stats: Arc<Stats>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("settings", &self.settings)
            .finish()
    }
}

impl Pipeline {
    /// Starts a pipeline of its own (tests, benchmarks); the edge uses
    /// [`Pipeline::shared`].
    pub fn start(settings: OtlpSettings) -> std::io::Result<Arc<Pipeline>> {
        let (tx, rx) = mpsc::sync_channel(settings.queue_size);
        let stats = Arc::new(Stats::default());
        let mut config = ureq::Agent::config_builder()
            .timeout_global(Some(settings.timeout))
            .http_status_as_error(false)
            // Headers may hold keys: never follow a redirect elsewhere.
            .max_redirects(0);
        if is_loopback(&settings.traces_url) {
            // A proxy from the environment must not capture a local collector.
            config = config.proxy(None);
        }
        let sender = Sender {
            agent: config.build().new_agent(),
            settings: settings.clone(),
            stats: stats.clone(),
            closed_until: std::cell::Cell::new(None),
            backoff: std::cell::Cell::new(BACKOFF.0),
        };
        std::thread::Builder::new()
            .name("ais-otlp".into())
            .spawn(move || sender.run(&rx))?;
        Ok(Arc::new(Pipeline {
            settings,
            tx,
            stats,
        }))
    }

    /// The process's pipeline for these settings, started on first use.
    pub fn shared(settings: &OtlpSettings) -> std::io::Result<Arc<Pipeline>> {
        static ALL: OnceLock<Mutex<Vec<Arc<Pipeline>>>> = OnceLock::new();
        let mut all = ALL
            .get_or_init(|| Mutex::new(Vec::new()))
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(p) = all.iter().find(|p| &p.settings == settings) {
            return Ok(p.clone());
        }
        let p = Pipeline::start(settings.clone())?;
        all.push(p.clone());
        Ok(p)
    }

    pub fn settings(&self) -> &OtlpSettings {
        &self.settings
    }

    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// Queues without waiting; a full queue (or a stopped thread) drops.
    fn offer(&self, m: Msg) {
        if self.tx.try_send(m).is_err() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sends what is queued and waits at most `timeout` for it (the end of
    /// a one-shot process); true when everything queued before was sent
    /// or failed, false when the wait ran out.
    pub fn flush(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let (ack_tx, ack_rx) = mpsc::sync_channel(1);
        let mut m = Msg::Flush(ack_tx);
        loop {
            match self.tx.try_send(m) {
                Ok(()) => break,
                Err(mpsc::TrySendError::Full(back)) if Instant::now() < deadline => {
                    m = back;
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(_) => return false,
            }
        }
        ack_rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .is_ok()
    }
}

/// True for a collector on this machine (`127.*`, `localhost`, `[::1]`).
fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    host.starts_with("127.") || host.starts_with("localhost") || host.starts_with("[::1]")
}

/// The pipeline's thread: builds spans, batches and POSTs them.
struct Sender {
    agent: ureq::Agent,
    settings: OtlpSettings,
    stats: Arc<Stats>,
    /// After a failed request: no span is built or sent before this.
    closed_until: std::cell::Cell<Option<Instant>>,
    /// The next back-off.
    backoff: std::cell::Cell<Duration>,
}

impl Sender {
    /// True while backing off from a failed request: what arrives is
    /// counted as failed (`n` spans) instead of built and encoded.
    fn backing_off(&self, n: u64) -> bool {
        match self.closed_until.get() {
            Some(t) if Instant::now() < t => {
                self.stats.failed.fetch_add(n, Ordering::Relaxed);
                true
            }
            _ => false,
        }
    }

    fn run(&self, rx: &mpsc::Receiver<Msg>) {
        let mut batch: Vec<Span> = Vec::new();
        let mut since: Option<Instant> = None;
        loop {
            let wait = match since {
                Some(t) => BATCH_DELAY.saturating_sub(t.elapsed()),
                None => Duration::from_secs(3600),
            };
            match rx.recv_timeout(wait) {
                // One span per call counted while backing off (a call with
                // a queue wait or model tool calls would have made more).
                Ok(Msg::Op { .. }) if self.backing_off(1) => continue,
                Ok(Msg::Op {
                    cx,
                    event,
                    flow,
                    agent,
                }) => batch.extend(spans::op_spans(&cx, &event, &flow, &agent)),
                Ok(Msg::Run { end, .. }) if self.backing_off(end.calls() as u64) => continue,
                Ok(Msg::Run { cx, end }) => batch.extend(end.spans(&cx)),
                Ok(Msg::Flush(ack)) => {
                    self.send(&mut batch);
                    since = None;
                    let _ = ack.send(());
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.send(&mut batch);
                    since = None;
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.send(&mut batch);
                    return;
                }
            }
            if batch.len() >= MAX_BATCH {
                self.send(&mut batch);
                since = None;
            } else if since.is_none() {
                since = Some(Instant::now());
            }
        }
    }

    fn send(&self, batch: &mut Vec<Span>) {
        if batch.is_empty() || self.backing_off(batch.len() as u64) {
            batch.clear();
            return;
        }
        let body = proto::export_request(&self.settings.service_name, batch);
        let n = batch.len() as u64;
        batch.clear();
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        let mut req = self
            .agent
            .post(&self.settings.traces_url)
            .header("content-type", "application/x-protobuf");
        for (k, v) in &self.settings.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let error = match req.send(&body[..]) {
            Ok(r) if r.status().is_success() => None,
            Ok(r) => Some(format!("HTTP {}", r.status().as_u16())),
            Err(e) => Some(e.to_string()),
        };
        match error {
            None => {
                self.stats.sent.fetch_add(n, Ordering::Relaxed);
                self.closed_until.set(None);
                self.backoff.set(BACKOFF.0);
            }
            Some(e) => {
                self.stats.failed.fetch_add(n, Ordering::Relaxed);
                let wait = self.backoff.get();
                self.closed_until.set(Some(Instant::now() + wait));
                self.backoff.set((wait * 2).min(BACKOFF.1));
                *self
                    .stats
                    .last_error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = Some(e);
            }
        }
    }
}

/// One run's trace: the run's observer (LLM and tool calls are exported
/// as they finish) and, at the end, its flow calls' spans.
pub struct RunTrace {
    template: RunContext,
    cx: OnceLock<Arc<RunContext>>,
    pipeline: Arc<Pipeline>,
    sampled: bool,
    /// The run's flow calls, from the scheduler as the run ended.
    calls: Mutex<Option<Vec<crate::observe::FlowCall>>>,
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl RunTrace {
    /// The trace of attempt `attempt` of run `run_id` (1: its first; each
    /// resume or takeover adds one), sent through `pipeline`. `providers`:
    /// `gen_ai.provider.name` by backend name.
    pub fn new(
        pipeline: Arc<Pipeline>,
        run_id: &str,
        attempt: u32,
        providers: std::collections::BTreeMap<String, String>,
    ) -> RunTrace {
        let trace_id = spans::trace_id(run_id);
        let sampled = spans::sampled(&trace_id, pipeline.settings.sample_ratio);
        RunTrace {
            template: RunContext {
                trace_id,
                run_id: run_id.to_string(),
                attempt: attempt.max(1),
                run_start_unix_ns: None,
                base_unix_ns: 0,
                providers,
                capture_content: pipeline.settings.capture_content,
            },
            cx: OnceLock::new(),
            pipeline,
            sampled,
            calls: Mutex::new(None),
        }
    }

    /// The run began at `unix_ms` (an earlier attempt began it): the root
    /// span this attempt may send starts there.
    pub fn run_started(mut self, unix_ms: i64) -> RunTrace {
        let ns = u64::try_from(unix_ms)
            .unwrap_or(0)
            .saturating_mul(1_000_000);
        self.template.run_start_unix_ns = (ns > 0).then_some(ns);
        self
    }

    pub fn trace_id(&self) -> [u8; 16] {
        self.template.trace_id
    }

    pub fn sampled(&self) -> bool {
        self.sampled
    }

    pub fn pipeline(&self) -> &Arc<Pipeline> {
        &self.pipeline
    }

    /// The run's context, its clock anchored the first time it is asked:
    /// `now_ns` is the run clock now (an event's end, seen just after it).
    fn context(&self, now_ns: u64) -> Arc<RunContext> {
        self.cx
            .get_or_init(|| {
                let mut cx = self.template.clone();
                cx.base_unix_ns = unix_ns().saturating_sub(now_ns);
                Arc::new(cx)
            })
            .clone()
    }

    /// The attempt ended: its flow calls' spans, from the calls the
    /// scheduler handed this trace as its observer or, when it was not the
    /// run's observer, from the events of its report (`name(flow_id,
    /// agent_id)`: their names, asked once per pair). The spans are built
    /// on the pipeline's thread, and not at all while it backs off from a
    /// failed collector. Queued, not sent: the caller never waits for the
    /// collector.
    ///
    /// Only the attempt that ends the run sends them (the root among
    /// them, so once per run): an attempt that paused leaves them to the
    /// attempt that resumes it, which recreates every flow call (a call's
    /// span has the same id in every attempt) and covers the run.
    pub fn finish(
        &self,
        events: &[OpEvent],
        summary: &crate::telemetry::RunSummary,
        outcome: Outcome,
        name: &dyn Fn(u32, u32) -> (String, String),
    ) {
        if !self.sampled || outcome == Outcome::Paused {
            return;
        }
        // The run clock at its end (no pass over the events for it).
        let cx = self.context((summary.makespan_ms * 1e6) as u64);
        let recorded = self.calls.lock().unwrap_or_else(|e| e.into_inner()).take();
        let end = match recorded {
            Some(calls) => RunEnd::of_calls(calls, summary, outcome, name),
            None => RunEnd::new(events, summary, outcome, name),
        };
        if !end.calls.is_empty() {
            self.pipeline.offer(Msg::Run {
                cx,
                end: Box::new(end),
            });
        }
    }

    /// [`RunTrace::finish`] with names and outcome from the program and
    /// the report. An attempt fenced out (another worker took the run
    /// over while it went on) sends no flow-call spans: the run is not
    /// its to end.
    pub fn finish_report(&self, program: &ais_ir::bytecode::Program, report: &crate::RunReport) {
        let outcome = match &report.outcome {
            Ok(_) => Outcome::Ok,
            Err(crate::RunError::OpFailed { code, .. }) if code == crate::exec::PAUSED => {
                Outcome::Paused
            }
            Err(crate::RunError::OpFailed { code, .. }) if code == crate::store::FENCED => return,
            Err(_) => Outcome::Failed,
        };
        let name = |flow: u32, agent: u32| {
            (
                crate::telemetry::export::flow_label(program, &report.summary, flow),
                crate::telemetry::export::agent_name(program, agent).to_string(),
            )
        };
        self.finish(&report.events, &report.summary, outcome, &name);
    }
}

impl RunObserver for RunTrace {
    fn wants_flow_calls(&self) -> bool {
        self.sampled
    }

    fn flow_calls(&self, calls: &[crate::observe::FlowCall]) {
        *self.calls.lock().unwrap_or_else(|e| e.into_inner()) = Some(calls.to_vec());
    }

    fn call(&self, u: &OpUpdate<'_>) {
        if !self.sampled || !spans::exported(u.event) {
            return;
        }
        let cx = self.context(u.event.end_ns);
        self.pipeline.offer(Msg::Op {
            cx,
            event: Box::new(u.event.clone()),
            flow: u.flow.to_string(),
            agent: u.agent.to_string(),
        });
    }
}
