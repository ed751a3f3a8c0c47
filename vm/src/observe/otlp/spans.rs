//! A run's op events as OpenTelemetry spans, named by the GenAI semantic
//! conventions: `invoke_agent {agent}` per flow call, `chat {model}` per
//! LLM op (one CLIENT span over all its attempts), `execute_tool {tool}`
//! per tool call, and `queue_wait` / `pause` spans. Pure functions, called
//! on the exporter's thread (`super::Pipeline`); the flow calls come from
//! the scheduler ([`crate::observe::FlowCall`]), so the run's own threads
//! build nothing.
//!
//! Span ids are derived, not drawn: from the run's trace id and the
//! op's or flow call's identity across attempts (its frame's path,
//! `crate::frame::path_key`: flows, ops and loop indices from the entry
//! down), so that a child names its parent's id before the parent is
//! built (an invocation's span is built when the run ends, its ops' spans
//! as they finish) and the same logical span has the same id in every
//! attempt of the run: the spans a killed worker sent and those of the
//! worker that took the run over hang under one root.

use crate::observe::flow_calls::is_pause;
use crate::observe::{fold_flow_calls, FlowCall};
use crate::telemetry::export::{input_messages, output_messages};
use crate::telemetry::{
    OpEvent, RunSummary, Status, Track, OP_CHAT, OP_EXECUTE_TOOL, OP_INVOKE_AGENT,
};
use std::collections::BTreeMap;

/// `SpanKind` of the OTLP proto.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    Internal = 1,
    Client = 3,
}

/// An attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    Str(String),
    Int(i64),
    F64(f64),
    Bool(bool),
    StrArray(Vec<String>),
}

impl From<&str> for Attr {
    fn from(s: &str) -> Attr {
        Attr::Str(s.to_string())
    }
}
impl From<String> for Attr {
    fn from(s: String) -> Attr {
        Attr::Str(s)
    }
}
impl From<u64> for Attr {
    fn from(n: u64) -> Attr {
        Attr::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}
impl From<u32> for Attr {
    fn from(n: u32) -> Attr {
        Attr::Int(i64::from(n))
    }
}
impl From<f64> for Attr {
    fn from(n: f64) -> Attr {
        Attr::F64(n)
    }
}
impl From<bool> for Attr {
    fn from(b: bool) -> Attr {
        Attr::Bool(b)
    }
}

pub type Attrs = Vec<(&'static str, Attr)>;

/// A timed event inside a span (an LLM attempt).
#[derive(Clone, Debug, PartialEq)]
pub struct SpanEvent {
    pub name: &'static str,
    pub time_unix_ns: u64,
    pub attributes: Attrs,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent: Option<[u8; 8]>,
    pub name: String,
    pub kind: SpanKind,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    pub attributes: Attrs,
    pub events: Vec<SpanEvent>,
    /// `Some(message)`: the span failed (status ERROR).
    pub error: Option<String>,
}

impl Span {
    /// An attribute's value, for tests and readers.
    pub fn attr(&self, key: &str) -> Option<&Attr> {
        self.attributes
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }
}

/// The trace of one run: its id (from the run id, so that every attempt
/// and every worker of a run adds to one trace), which attempt this is,
/// and what spans need from the run's setup.
#[derive(Clone, Debug)]
pub struct RunContext {
    pub trace_id: [u8; 16],
    pub run_id: String,
    /// The attempt (1 for a run's first; a resume or a worker's takeover
    /// adds one): `ais.run.attempt` of the spans this attempt executed.
    pub attempt: u32,
    /// Unix time the run began (ns), when an earlier attempt began it: the
    /// root span starts there.
    pub run_start_unix_ns: Option<u64>,
    /// Unix time of the run clock's 0 (ns).
    pub base_unix_ns: u64,
    /// `gen_ai.provider.name` by backend name (the backend's protocol);
    /// a backend not listed is named as the config names it.
    pub providers: BTreeMap<String, String>,
    pub capture_content: bool,
}

/// The trace id of run `run_id`.
pub fn trace_id(run_id: &str) -> [u8; 16] {
    use sha2::Digest;
    let d = sha2::Sha256::digest(format!("ais.run\0{run_id}").as_bytes());
    let mut id = [0u8; 16];
    id.copy_from_slice(&d[..16]);
    if id == [0; 16] {
        id[15] = 1;
    }
    id
}

/// Whether a run is sampled at `ratio`: by its trace id, so that every
/// process exporting the run decides the same.
pub fn sampled(trace_id: &[u8; 16], ratio: f64) -> bool {
    if ratio >= 1.0 {
        return true;
    }
    let mut b = [0u8; 8];
    b.copy_from_slice(&trace_id[8..]);
    (u64::from_be_bytes(b) as f64) < ratio * (u64::MAX as f64)
}

/// splitmix64: spreads the bits of a span's coordinates into an id.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[derive(Clone, Copy)]
enum IdKind {
    Invocation = 1,
    Op = 2,
    ToolCall = 3,
    Wait = 4,
}

/// A span's id: from its trace (`seed`), what it is, and its identity in
/// the run (`a`: a frame's path, `b`: an op in it).
fn span_id(seed: u64, kind: IdKind, a: u64, b: u64) -> [u8; 8] {
    let h = mix(mix(mix(seed ^ kind as u64).wrapping_add(a)).wrapping_add(b));
    let h = if h == 0 { 1 } else { h };
    h.to_be_bytes()
}

impl RunContext {
    fn at(&self, ns: u64) -> u64 {
        self.base_unix_ns.saturating_add(ns)
    }

    /// Whether an earlier attempt of the run came before this one.
    pub fn resumed(&self) -> bool {
        self.attempt > 1
    }

    /// Seeds span ids with the trace, so that two runs' ids differ.
    fn seed(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.trace_id[..8]);
        u64::from_be_bytes(b)
    }

    /// The span id of a flow call, by its key ([`crate::telemetry::Invocation::key`]).
    pub fn invocation_span(&self, key: u64) -> [u8; 8] {
        span_id(self.seed(), IdKind::Invocation, key, 0)
    }

    /// The span id of op `op` of the frame whose path is `frame_key`.
    pub fn op_span_id(&self, frame_key: u64, op: u32) -> [u8; 8] {
        span_id(self.seed(), IdKind::Op, frame_key, u64::from(op))
    }

    fn op_span(&self, e: &OpEvent) -> [u8; 8] {
        self.op_span_id(e.frame_key, e.op)
    }

    fn span(
        &self,
        id: [u8; 8],
        parent: Option<[u8; 8]>,
        name: String,
        kind: SpanKind,
        (start, end): (u64, u64),
    ) -> Span {
        Span {
            trace_id: self.trace_id,
            span_id: id,
            parent,
            name,
            kind,
            start_unix_ns: self.at(start),
            end_unix_ns: self.at(end.max(start)),
            attributes: Vec::new(),
            events: Vec::new(),
            error: None,
        }
    }

    fn provider(&self, backend: &str) -> String {
        self.providers
            .get(backend)
            .cloned()
            .unwrap_or_else(|| backend.to_string())
    }
}

/// Waits on a lane shorter than this get no span of their own (the op
/// span's `ais.queue_wait_ms` still says).
pub const QUEUE_WAIT_SPAN_NS: u64 = 1_000_000;

/// Whether an event is exported as it happens: LLM and tool calls, and
/// pauses. Everything else only shapes its flow call's span at the end.
/// Cheap: it runs on the thread that finished the op.
pub fn exported(e: &OpEvent) -> bool {
    match e.track {
        Track::Llm(_) | Track::Tool(_) => e.status != Status::Cancelled,
        Track::Worker(_) => e.status == Status::Failed && is_pause(e),
    }
}

fn common(cx: &RunContext, s: &mut Span, e: &OpEvent, flow: &str, agent: &str) {
    s.attributes.extend([
        // The attempt that executed the op: a call an interrupted attempt
        // made and this one repeats has its span again, with this number.
        ("ais.run.attempt", cx.attempt.into()),
        ("gen_ai.agent.name", agent.into()),
        ("ais.flow", flow.into()),
        ("ais.opcode", e.opcode.mnemonic().into()),
        ("ais.op", e.op.into()),
        ("ais.frame", e.frame.into()),
        ("ais.queue_wait_ms", (e.queue_wait_ns() as f64 / 1e6).into()),
    ]);
    // Information-flow labels: where the result came from.
    if let Some(d) = e.detail.as_ref().filter(|d| !d.sources.is_empty()) {
        s.attributes
            .push(("ais.ifc.sources", Attr::StrArray(d.sources.clone())));
        s.attributes.push(("ais.ifc.untrusted", d.untrusted.into()));
    }
    if e.status == Status::Failed {
        let code = e
            .detail
            .as_ref()
            .and_then(|d| d.error.clone())
            .unwrap_or_else(|| "failed".to_string());
        s.attributes.push(("error.type", code.clone().into()));
        s.error = Some(code);
    }
}

/// The spans of one exported op event ([`exported`]).
pub fn op_spans(cx: &RunContext, e: &OpEvent, flow: &str, agent: &str) -> Vec<Span> {
    let parent = Some(cx.invocation_span(e.invocation.key));
    let mut out = Vec::new();
    let lane = match e.track {
        Track::Llm(_) => "llm",
        Track::Tool(_) => "tool",
        Track::Worker(_) => "worker",
    };
    if !matches!(e.track, Track::Worker(_)) && e.queue_wait_ns() >= QUEUE_WAIT_SPAN_NS {
        let mut w = cx.span(
            span_id(cx.seed(), IdKind::Wait, e.frame_key, u64::from(e.op)),
            parent,
            "queue_wait".to_string(),
            SpanKind::Internal,
            (e.ready_ns, e.start_ns),
        );
        w.attributes.extend([
            ("ais.lane", lane.into()),
            ("ais.op", e.op.into()),
            ("ais.frame", e.frame.into()),
        ]);
        out.push(w);
    }
    let id = cx.op_span(e);
    if matches!(e.track, Track::Worker(_)) {
        // A pause: the run stops here until someone answers.
        let mut s = cx.span(
            id,
            parent,
            format!("pause {flow}"),
            SpanKind::Internal,
            (e.start_ns, e.end_ns),
        );
        common(cx, &mut s, e, flow, agent);
        s.error = None; // a pause is not a failure
        s.attributes.retain(|(k, _)| *k != "error.type");
        s.attributes.push(("ais.paused", true.into()));
        out.push(s);
        return out;
    }
    if let Some(l) = e.llm.as_deref() {
        let mut s = cx.span(
            id,
            parent,
            format!("{OP_CHAT} {}", l.model),
            SpanKind::Client,
            (e.start_ns, e.end_ns),
        );
        s.attributes.extend([
            ("gen_ai.operation.name", OP_CHAT.into()),
            ("gen_ai.provider.name", cx.provider(&l.backend).into()),
            ("gen_ai.request.model", l.model.as_str().into()),
            ("gen_ai.usage.input_tokens", l.input_tokens.into()),
            ("gen_ai.usage.output_tokens", l.output_tokens.into()),
            (
                "gen_ai.usage.cache_read.input_tokens",
                l.cache_read_tokens.into(),
            ),
            (
                "gen_ai.usage.cache_creation.input_tokens",
                l.cache_write_tokens.into(),
            ),
            ("ais.backend", l.backend.as_str().into()),
            ("ais.cost_usd", (l.cost_micro_usd as f64 / 1e6).into()),
            ("ais.simulated", l.simulated.into()),
            ("ais.llm.attempts", (l.attempts.len().max(1) as u64).into()),
            (
                "ais.llm.retries",
                (l.attempts
                    .iter()
                    .filter(|a| a.retry_in_ms.is_some())
                    .count() as u64)
                    .into(),
            ),
        ]);
        if let Some(r) = &l.finish_reason {
            s.attributes.push((
                "gen_ai.response.finish_reasons",
                Attr::StrArray(vec![r.clone()]),
            ));
        }
        if let Some(ft) = l.attempts.last().and_then(|a| a.first_token_ms) {
            s.attributes
                .push(("ais.llm.time_to_first_token_ms", ft.into()));
        }
        common(cx, &mut s, e, flow, agent);
        if cx.capture_content {
            if !l.prompt.is_empty() {
                s.attributes.push((
                    "gen_ai.input.messages",
                    input_messages(&l.prompt).to_string().into(),
                ));
            }
            if let Some(r) = &l.reply {
                s.attributes.push((
                    "gen_ai.output.messages",
                    output_messages(r, l.finish_reason.as_deref())
                        .to_string()
                        .into(),
                ));
            }
        }
        // Attempts in order, each at the time it began (its latency and
        // backoff laid end to end from the op's start).
        let mut t = e.start_ns as f64;
        for a in &l.attempts {
            let mut attrs: Attrs = vec![("ais.attempt", a.number.into())];
            if let Some(st) = a.status {
                attrs.push(("http.response.status_code", u32::from(st).into()));
            }
            if let Some(err) = &a.error {
                attrs.push(("error.type", err.as_str().into()));
            }
            if let Some(r) = &a.finish_reason {
                attrs.push((
                    "gen_ai.response.finish_reasons",
                    Attr::StrArray(vec![r.clone()]),
                ));
            }
            if let Some(turn) = a.turn {
                attrs.push(("ais.turn", turn.into()));
            }
            attrs.push(("ais.latency_ms", a.latency_ms.into()));
            if let Some(ft) = a.first_token_ms {
                attrs.push(("ais.time_to_first_token_ms", ft.into()));
            }
            s.events.push(SpanEvent {
                name: "ais.llm.attempt",
                time_unix_ns: cx.at(t as u64),
                attributes: attrs,
            });
            t += (a.latency_ms + a.retry_in_ms.unwrap_or(0.0)) * 1e6;
        }
        for (i, c) in l.tool_calls.iter().enumerate() {
            let mut ts = cx.span(
                span_id(
                    cx.seed(),
                    IdKind::ToolCall,
                    e.frame_key,
                    (u64::from(e.op) << 20) | i as u64,
                ),
                Some(id),
                format!("{OP_EXECUTE_TOOL} {}", c.tool),
                SpanKind::Internal,
                (c.start_ns, c.end_ns),
            );
            ts.attributes.extend([
                ("gen_ai.operation.name", OP_EXECUTE_TOOL.into()),
                ("gen_ai.tool.name", c.tool.as_str().into()),
                ("ais.turn", c.turn.into()),
                ("ais.tool.status", c.status.into()),
                ("ais.replayed", c.replayed.into()),
            ]);
            if let Some(code) = &c.code {
                ts.attributes.push(("error.type", code.as_str().into()));
                if c.status == "error" {
                    ts.error = Some(code.clone());
                }
            }
            if cx.capture_content {
                if let Some(a) = &c.arguments {
                    ts.attributes
                        .push(("gen_ai.tool.call.arguments", a.as_str().into()));
                }
            }
            out.push(ts);
        }
        out.push(s);
        return out;
    }
    // A tool op, or an LLM op that failed before any reply.
    let (name, op) = match (e.track, e.detail.as_ref().and_then(|d| d.tool.as_deref())) {
        (Track::Tool(_), Some(t)) => (format!("{OP_EXECUTE_TOOL} {t}"), OP_EXECUTE_TOOL),
        (Track::Tool(_), None) => (
            format!("{OP_EXECUTE_TOOL} {}", e.opcode.mnemonic()),
            OP_EXECUTE_TOOL,
        ),
        _ => (OP_CHAT.to_string(), OP_CHAT),
    };
    let kind = if op == OP_CHAT {
        SpanKind::Client
    } else {
        SpanKind::Internal
    };
    let mut s = cx.span(id, parent, name, kind, (e.start_ns, e.end_ns));
    s.attributes.push(("gen_ai.operation.name", op.into()));
    if let Some(t) = e.detail.as_ref().and_then(|d| d.tool.as_deref()) {
        s.attributes.push(("gen_ai.tool.name", t.into()));
    }
    common(cx, &mut s, e, flow, agent);
    if cx.capture_content {
        if let Some(a) = e.detail.as_ref().and_then(|d| d.arguments.as_deref()) {
            s.attributes.push(("gen_ai.tool.call.arguments", a.into()));
        }
    }
    out.push(s);
    out
}

/// The run's totals its root span carries.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunTotals {
    pub makespan_ns: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cost_usd: f64,
    pub llm_calls: u64,
    pub tool_calls: u64,
    pub ops: u64,
}

impl RunTotals {
    pub fn of(summary: &RunSummary) -> RunTotals {
        RunTotals {
            makespan_ns: (summary.makespan_ms * 1e6) as u64,
            input_tokens: summary.input_tokens,
            output_tokens: summary.output_tokens,
            cache_read_tokens: summary.cache_read_tokens,
            cost_usd: summary.cost_usd,
            llm_calls: summary.llm_calls,
            tool_calls: summary.tool_calls,
            ops: summary.ops,
        }
    }
}

/// Everything the flow-call spans of a run are built from, owned: made
/// on the run's thread at its end (its flow calls as the scheduler
/// recorded them, and their names), turned into spans on the export
/// thread ([`RunEnd::spans`]).
#[derive(Clone, Debug)]
pub struct RunEnd {
    pub calls: Vec<FlowCall>,
    /// (flow, agent) names of each (flow id, agent id) the run called.
    pub names: Vec<((u32, u32), (String, String))>,
    pub totals: RunTotals,
    pub outcome: Outcome,
}

impl RunEnd {
    /// From a run's events: its flow calls folded from them
    /// ([`fold_flow_calls`]), for a report whose run had no trace
    /// observing it. `name(flow_id, agent_id)` gives a flow call's
    /// (flow, agent) names.
    pub fn new(
        events: &[OpEvent],
        summary: &RunSummary,
        outcome: Outcome,
        name: &dyn Fn(u32, u32) -> (String, String),
    ) -> RunEnd {
        RunEnd::of_calls(fold_flow_calls(events), summary, outcome, name)
    }

    /// From the run's flow calls; `name` is asked once per distinct
    /// (flow, agent) pair.
    pub fn of_calls(
        calls: Vec<FlowCall>,
        summary: &RunSummary,
        outcome: Outcome,
        name: &dyn Fn(u32, u32) -> (String, String),
    ) -> RunEnd {
        let mut names: Vec<((u32, u32), (String, String))> = Vec::new();
        let mut last = None;
        for c in &calls {
            let pair = (c.flow, c.agent);
            if last == Some(pair) {
                continue;
            }
            last = Some(pair);
            if !names.iter().any(|(p, _)| *p == pair) {
                names.push((pair, name(c.flow, c.agent)));
            }
        }
        RunEnd {
            calls,
            names,
            totals: RunTotals::of(summary),
            outcome,
        }
    }

    /// How many flow calls (spans) the run had.
    pub fn calls(&self) -> usize {
        let mut ids: Vec<u64> = self.calls.iter().map(|c| c.id).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    }

    /// The `invoke_agent` spans: one per flow call, parented to the call
    /// that made it, each covering its own ops and the calls it made. The
    /// entry flow's span is the attempt's root.
    pub fn spans(&self, cx: &RunContext) -> Vec<Span> {
        let mut calls: BTreeMap<u64, Call> = BTreeMap::new();
        for s in &self.calls {
            let into = calls.entry(s.id).or_insert(Call {
                caller: s.caller,
                key: s.key,
                caller_key: s.caller_key,
                flow: s.flow,
                agent: s.agent,
                start: u64::MAX,
                end: 0,
                failed: false,
            });
            into.start = into.start.min(s.start_ns);
            into.end = into.end.max(s.end_ns);
            into.failed |= s.failed;
        }
        // A call covers the calls it made: widen every caller up the chain
        // (bounded: the chain is as deep as the run's calls nested).
        let spans: Vec<(u64, u64, Option<u64>)> =
            calls.values().map(|c| (c.start, c.end, c.caller)).collect();
        for (start, end, mut up) in spans {
            let mut hops = 0;
            while let Some(p) = up.and_then(|p| calls.get_mut(&p)) {
                p.start = p.start.min(start);
                p.end = p.end.max(end);
                up = p.caller;
                hops += 1;
                if hops > calls.len() {
                    break;
                }
            }
        }
        let name = |flow: u32, agent: u32| {
            self.names
                .iter()
                .find(|(p, _)| *p == (flow, agent))
                .map_or_else(|| (String::new(), String::new()), |(_, n)| n.clone())
        };
        let (outcome, totals) = (self.outcome, &self.totals);
        let mut out = Vec::with_capacity(calls.len());
        for c in calls.values() {
            let (flow, agent) = name(c.flow, c.agent);
            // A caller with no events of its own (it cannot happen: its call
            // op is one) would leave the span without a parent: root it.
            let parent = c
                .caller
                .filter(|p| calls.contains_key(p))
                .and(c.caller_key)
                .map(|p| cx.invocation_span(p));
            let root = c.caller.is_none();
            let start = if root { 0 } else { c.start };
            let mut s = cx.span(
                cx.invocation_span(c.key),
                parent,
                format!("{OP_INVOKE_AGENT} {agent}"),
                SpanKind::Internal,
                (start, c.end),
            );
            s.attributes.extend([
                ("gen_ai.operation.name", OP_INVOKE_AGENT.into()),
                ("gen_ai.agent.name", agent.as_str().into()),
                ("ais.flow", flow.into()),
                ("ais.run.id", cx.run_id.as_str().into()),
            ]);
            if c.failed {
                s.error = Some("an op failed".to_string());
            }
            if root {
                s.end_unix_ns = s.end_unix_ns.max(cx.at(totals.makespan_ns));
                // Over the whole run, the attempts before this one too.
                if let Some(t) = cx.run_start_unix_ns {
                    s.start_unix_ns = s.start_unix_ns.min(t);
                }
                s.attributes.extend([
                    (
                        "ais.run.outcome",
                        match outcome {
                            Outcome::Ok => "ok",
                            Outcome::Failed => "failed",
                            Outcome::Paused => "paused",
                        }
                        .into(),
                    ),
                    ("ais.run.resumed", cx.resumed().into()),
                    // The attempt that ended the run (the one that sent it).
                    ("ais.run.attempt", cx.attempt.into()),
                    ("gen_ai.usage.input_tokens", totals.input_tokens.into()),
                    ("gen_ai.usage.output_tokens", totals.output_tokens.into()),
                    (
                        "gen_ai.usage.cache_read.input_tokens",
                        totals.cache_read_tokens.into(),
                    ),
                    ("ais.cost_usd", totals.cost_usd.into()),
                    ("ais.llm_calls", totals.llm_calls.into()),
                    ("ais.tool_calls", totals.tool_calls.into()),
                    ("ais.ops", totals.ops.into()),
                ]);
                s.error = (outcome == Outcome::Failed).then(|| "the run failed".to_string());
            }
            out.push(s);
        }
        out
    }
}

/// One flow call, widened over the calls it made.
#[derive(Debug)]
struct Call {
    caller: Option<u64>,
    key: u64,
    caller_key: Option<u64>,
    flow: u32,
    agent: u32,
    start: u64,
    end: u64,
    failed: bool,
}

/// How a run ended, for its root span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Failed,
    Paused,
}

/// The `invoke_agent` spans of a run, from all its events, in one go
/// ([`RunEnd::new`] then [`RunEnd::spans`]; the exporter does the two on
/// different threads). `name(flow_id, agent_id)` gives a flow call's
/// (flow, agent) names.
pub fn invocation_spans(
    cx: &RunContext,
    events: &[OpEvent],
    summary: &RunSummary,
    outcome: Outcome,
    name: &dyn Fn(u32, u32) -> (String, String),
) -> Vec<Span> {
    RunEnd::new(events, summary, outcome, name).spans(cx)
}
