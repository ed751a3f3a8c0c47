//! Run telemetry: per-op events, the run summary, JSONL and Chrome-trace
//! exports.
//!
//! Times are nanoseconds since the run started (the entry frame was created).

pub(crate) mod export;
pub mod segments;
mod text;

pub use export::{
    chrome_trace, event_json, event_json_named, input_messages, output_messages,
    write_chrome_trace, write_jsonl, OP_CHAT, OP_EXECUTE_TOOL, OP_INVOKE_AGENT,
};
pub use text::{
    prompt_messages, truncate, MessageRecord, OpDetail, TextPolicy, DEFAULT_TEXT_LIMIT,
};

use ais_ir::Opcode;
use serde::Serialize;

/// Where an op ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "index")]
pub enum Track {
    /// A scheduler worker (cheap ops, effects, control).
    Worker(u32),
    /// An I/O thread of the LLM lane.
    Llm(u32),
    /// An I/O thread of the tool lane.
    Tool(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Failed,
    /// Skipped or abandoned because the run failed or its `try` was abandoned.
    Cancelled,
}

/// Details of an LLM call.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LlmInfo {
    pub model: String,
    /// Every input token, cached ones included.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache (part of
    /// `input_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache (part of
    /// `input_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    pub simulated: bool,
    /// Every attempt the backend made for this op (retries included; for
    /// an op that called tools, the attempts of every model turn).
    pub attempts: Vec<AttemptRecord>,
    /// The tool calls the model made, when the op offered it tools.
    pub tool_calls: Vec<ToolCallRecord>,
    /// The backend that answered (its name in the config).
    pub backend: String,
    /// The messages of the last request sent (system, user, earlier
    /// tool-calling turns), each cut at the text limit; empty when redacted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prompt: Vec<MessageRecord>,
    /// The text received (last turn), cut at the text limit; `None` when
    /// redacted or when no reply came.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// The finish reason of the reply taken (`stop`, `length`, `tool_calls`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// What its tokens cost at the configured prices (µUSD; 0 unpriced).
    pub cost_micro_usd: u64,
    /// For a `solve` op: the planner rounds whose plan did not run as
    /// written or ran despite a finding (`scheduler::inner_plan`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub plan_checks: Vec<PlanCheck>,
}

/// A planner round's plan that a check refused or flagged.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanCheck {
    /// The planner round (from 1).
    pub turn: u32,
    /// `invalid`: it did not check; `denied`: it checked but the policy
    /// denies one of its flows, so it was sent back; `warned`: such a
    /// plan ran anyway (`[policy] mode = "warn"`).
    pub verdict: &'static str,
    /// The problems as the model was shown them (`W0020` findings for
    /// flows).
    pub problems: Vec<String>,
}

/// One tool call a model made during an LLM op (see
/// `scheduler::tool_loop`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCallRecord {
    /// The model turn that asked for it (1-based).
    pub turn: u32,
    pub tool: String,
    /// `ok`, `error` (the tool failed; the model was told) or `refused`
    /// (not offered, arguments invalid, or denied: the tool did not run).
    pub status: &'static str,
    /// The failure's dotted code, when it did not succeed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Replayed from the run journal instead of called again.
    pub replayed: bool,
    /// The arguments the model gave (JSON text, cut at the text limit;
    /// absent when redacted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// One attempt of an LLM request, as reported by the backend.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AttemptRecord {
    pub number: u32,
    /// HTTP status when the server answered.
    pub status: Option<u16>,
    /// Why the attempt failed (`rate_limited`, `server`, ...); `None` if it succeeded.
    pub error: Option<String>,
    pub latency_ms: f64,
    /// Backoff before the next attempt, when there was one.
    pub retry_in_ms: Option<f64>,
    /// The provider's finish/stop reason (`stop`, `length`, `max_tokens`,
    /// `content_filter`, `refusal`, ...) when it sent a well-formed reply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Time to the first streamed token, for streamed attempts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_token_ms: Option<f64>,
    /// The model turn of a tool-calling exchange it belongs to (1-based;
    /// absent for ops that offer no tools).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// The backend that took the attempt (a fallback chain shows each).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// For the requests of a hedged call: sent when, answered first or
    /// cancelled (`llm::resilience`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hedge: Option<String>,
}

impl AttemptRecord {
    pub fn from_attempt(a: &crate::llm::Attempt) -> AttemptRecord {
        AttemptRecord {
            number: a.number,
            status: a.status,
            error: a.error.map(|k| {
                serde_json::to_value(k)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_else(|| format!("{k:?}"))
            }),
            latency_ms: a.latency.as_secs_f64() * 1e3,
            retry_in_ms: a.retry_in.map(|d| d.as_secs_f64() * 1e3),
            finish_reason: a.finish_reason.clone(),
            first_token_ms: a.first_token.map(|d| d.as_secs_f64() * 1e3),
            turn: None,
            provider: a.provider.clone(),
            hedge: crate::llm::resilience::hedge_note(a),
        }
    }
}

/// The flow call an op ran in: the frame that began it (the entry frame,
/// a callee body, an `on` handler or an inner plan's entry) and the call
/// it was made from. Branch, loop and `try` frames belong to the call
/// around them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Invocation {
    pub id: u64,
    /// The invocation that made the call; `None` for the entry flow.
    pub caller: Option<u64>,
    /// The call's identity across the attempts of a run (its frame's path,
    /// `crate::frame::path_key`), and its caller's: trace span ids.
    #[serde(skip)]
    pub key: u64,
    #[serde(skip)]
    pub caller_key: Option<u64>,
}

/// One executed op.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpEvent {
    /// Frame (region instance) id.
    pub frame: u64,
    /// The frame's identity across the attempts of a run
    /// (`crate::frame::path_key`; 0 when not known): trace span ids.
    #[serde(skip)]
    pub frame_key: u64,
    pub flow: u32,
    /// The region of the flow the frame runs (0: the body), with `op` the
    /// op's index in it.
    pub region: u32,
    pub op: u32,
    pub opcode: Opcode,
    pub agent: u32,
    /// The flow call it ran in (trace parents, `otlp`).
    pub invocation: Invocation,
    pub track: Track,
    /// The worker that executed (or, for blocking ops, dispatched) it.
    pub worker: u32,
    /// When its last input arrived.
    pub ready_ns: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub status: Status,
    pub llm: Option<Box<LlmInfo>>,
    /// The tool a tool op called and its arguments, the error code of a
    /// failed op.
    pub detail: Option<Box<OpDetail>>,
}

impl OpEvent {
    pub fn queue_wait_ns(&self) -> u64 {
        self.start_ns.saturating_sub(self.ready_ns)
    }

    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// End-of-run figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunSummary {
    /// Entry frame created → entry frame complete (or failure).
    pub makespan_ms: f64,
    /// Thread start-up before the run clock started.
    pub setup_ms: f64,
    /// Static estimate of the entry flow from latency classes (nominal ms).
    pub critical_path_estimate_ms: u64,
    /// Σ op durations (I/O calls included) / makespan.
    pub avg_parallelism: f64,
    /// Most ops executing (or calls in flight) at one instant.
    pub peak_parallelism: u32,
    pub ops: u64,
    pub frames: u64,
    pub llm_calls: u64,
    pub tool_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens served from provider prompt caches (part of
    /// `input_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Input tokens written to provider prompt caches.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// LLM calls held until another call's reply started, so they read
    /// the prefix it wrote to the provider's cache (`scheduler/warmup.rs`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_warmup_holds: u64,
    /// Cost of the run's LLM calls at the configured prices (USD; 0 when
    /// the backend has no `prices`).
    pub cost_usd: f64,
    pub failed_ops: u64,
    pub cancelled_ops: u64,
    pub workers: usize,
    pub concurrency: usize,
    pub policy: String,
    /// Worker time spent scheduling (not running op bodies, not idle), per
    /// op executed on a worker (µs).
    pub sched_overhead_us_per_op: f64,
    /// Longest wait between ready and start of a blocking call (ms).
    pub max_queue_wait_ms: f64,
    /// LLM requests sent, retries included (≥ `llm_calls`), and those of
    /// calls the run's end cancelled (issue 32 #4: every request counts).
    pub llm_attempts: u64,
    /// Attempts that were followed by another (retries and repair
    /// requests).
    pub llm_retries: u64,
    /// Replies that were not complete answers (cut off, filtered) and were
    /// taken as values because the backend sets `accept_incomplete`.
    pub incomplete_replies: u64,
    /// Names of the flows of inner plans linked during the run, by flow id
    /// from the program's own flow count on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub linked_flows: Vec<String>,
    /// What speculation of branch arms did (`None`: it was off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculation: Option<crate::speculation::SpeculationSummary>,
}

impl RunSummary {
    /// Fills the event-derived fields.
    pub fn absorb(&mut self, events: &[OpEvent]) {
        let mut busy: u128 = 0;
        let mut edges: Vec<(u64, i32)> = Vec::with_capacity(events.len() * 2);
        for e in events {
            match e.status {
                Status::Ok => {}
                Status::Failed => self.failed_ops += 1,
                Status::Cancelled => self.cancelled_ops += 1,
            }
            if e.status == Status::Cancelled {
                // A cancelled call is not a call of the run, but the
                // requests it had sent were (issue 32 #4).
                if let Some(l) = &e.llm {
                    self.llm_attempts += l.attempts.len() as u64;
                    self.llm_retries += l
                        .attempts
                        .iter()
                        .filter(|a| a.retry_in_ms.is_some())
                        .count() as u64;
                }
                continue;
            }
            self.ops += 1;
            busy += u128::from(e.duration_ns());
            edges.push((e.start_ns, 1));
            edges.push((e.end_ns.max(e.start_ns), -1));
            match e.track {
                Track::Llm(_) => {
                    self.llm_calls += 1;
                    self.max_queue_wait_ms =
                        self.max_queue_wait_ms.max(e.queue_wait_ns() as f64 / 1e6);
                }
                Track::Tool(_) => {
                    self.tool_calls += 1;
                    self.max_queue_wait_ms =
                        self.max_queue_wait_ms.max(e.queue_wait_ns() as f64 / 1e6);
                }
                Track::Worker(_) => {}
            }
            if let Some(l) = &e.llm {
                let last_reason = l.attempts.last().and_then(|a| a.finish_reason.as_deref());
                if e.status == Status::Ok
                    && last_reason.is_some_and(crate::llm::is_incomplete_reason)
                {
                    self.incomplete_replies += 1;
                }
                self.input_tokens += l.input_tokens;
                self.output_tokens += l.output_tokens;
                self.cache_read_tokens += l.cache_read_tokens;
                self.cache_write_tokens += l.cache_write_tokens;
                self.cost_usd += l.cost_micro_usd as f64 / 1e6;
                // Tools the model called count like the program's own.
                self.tool_calls += l.tool_calls.len() as u64;
                self.llm_attempts += l.attempts.len().max(1) as u64;
                self.llm_retries += l
                    .attempts
                    .iter()
                    .filter(|a| a.retry_in_ms.is_some())
                    .count() as u64;
            }
        }
        // Ends before starts at the same instant: touching ops do not overlap.
        edges.sort_unstable();
        let mut cur = 0i64;
        let mut peak = 0i64;
        for (_, d) in edges {
            cur += i64::from(d);
            peak = peak.max(cur);
        }
        self.peak_parallelism = u32::try_from(peak).unwrap_or(u32::MAX);
        if self.makespan_ms > 0.0 {
            self.avg_parallelism = busy as f64 / 1e6 / self.makespan_ms;
        }
    }

    /// A few human-readable lines (what `aisc run` prints on stderr).
    pub fn render(&self) -> String {
        // Shown only when a provider reported prompt caching.
        let cached = match (self.cache_read_tokens, self.cache_write_tokens) {
            (0, 0) => String::new(),
            (r, 0) => format!(" ({r} cached)"),
            (r, w) => format!(" ({r} cached, {w} written to cache)"),
        };
        // Shown only when the warm-up held a call (scheduler/warmup.rs).
        let held = match self.cache_warmup_holds {
            0 => String::new(),
            n => format!(", {n} held for cache warm-up"),
        };
        format!(
            "makespan {:.2} ms (critical path estimate {} ms) · {} ops in {} frames · parallelism avg {:.2}, peak {}\n\
             LLM calls {} ({} attempts, {} retries{}; {}{} in / {} out tokens; cost ${:.6}) · tool calls {} · failed {} · cancelled {}\n\
             {} workers · concurrency {} ({}) · scheduler overhead {:.3} µs/op · setup {:.2} ms",
            self.makespan_ms,
            self.critical_path_estimate_ms,
            self.ops,
            self.frames,
            self.avg_parallelism,
            self.peak_parallelism,
            self.llm_calls,
            self.llm_attempts,
            self.llm_retries,
            held,
            self.input_tokens,
            cached,
            self.output_tokens,
            self.cost_usd,
            self.tool_calls,
            self.failed_ops,
            self.cancelled_ops,
            self.workers,
            self.concurrency,
            self.policy,
            self.sched_overhead_us_per_op,
            self.setup_ms,
        )
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
