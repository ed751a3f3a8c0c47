//! JSONL events and Chrome trace (Perfetto) formats of a run's telemetry.
//! They write to any `Write`: files are the edge's business (`aisc run
//! --events/--trace` writes them atomically after the run).

use super::{OpEvent, RunSummary, Status, Track};
use ais_ir::bytecode::Program;
use serde_json::{json, Map, Value as Json};
use std::io::{self, BufWriter, Write};

fn status(s: Status) -> &'static str {
    match s {
        Status::Ok => "ok",
        Status::Failed => "failed",
        Status::Cancelled => "cancelled",
    }
}

pub(crate) fn agent_name(p: &Program, a: u32) -> &str {
    p.agents.get(a as usize).map_or("?", |a| a.name.as_str())
}

/// A flow's name by its id in telemetry: the program's own, then the
/// flows of inner plans linked during the run.
pub(crate) fn flow_label(p: &Program, summary: &RunSummary, id: u32) -> String {
    let own = p.flows.len();
    match (id as usize).checked_sub(own) {
        Some(k) => summary
            .linked_flows
            .get(k)
            .cloned()
            .unwrap_or_else(|| format!("flow#{id}")),
        None => p.flow_name(id),
    }
}

fn track_name(t: Track) -> String {
    match t {
        Track::Worker(i) => format!("worker:{i}"),
        Track::Llm(i) => format!("llm:{i}"),
        Track::Tool(i) => format!("tool:{i}"),
    }
}

/// One op event as the JSON object of the JSONL export. LLM and tool calls
/// carry OpenTelemetry GenAI attribute names (`gen_ai.operation.name`,
/// `gen_ai.provider.name`, `gen_ai.request.model`,
/// `gen_ai.usage.input_tokens`, ...; `docs/telemetry.md`).
pub fn event_json(program: &Program, summary: &RunSummary, e: &OpEvent) -> Map<String, Json> {
    let flow = flow_label(program, summary, e.flow);
    event_json_named(&flow, agent_name(program, e.agent), e)
}

/// [`event_json`] with the flow and agent names given (as a
/// [`crate::observe::OpUpdate`] carries them), for a writer that streams
/// events without holding the program.
pub fn event_json_named(flow: &str, agent: &str, e: &OpEvent) -> Map<String, Json> {
    let mut o = Map::new();
    o.insert("type".into(), json!("op"));
    o.insert("frame".into(), json!(e.frame));
    o.insert("flow".into(), json!(flow));
    o.insert("flow_id".into(), json!(e.flow));
    o.insert("region".into(), json!(e.region));
    o.insert("op".into(), json!(e.op));
    o.insert("opcode".into(), json!(e.opcode.mnemonic()));
    o.insert("agent".into(), json!(agent));
    o.insert("track".into(), json!(track_name(e.track)));
    o.insert("worker".into(), json!(e.worker));
    o.insert("ready_ns".into(), json!(e.ready_ns));
    o.insert("start_ns".into(), json!(e.start_ns));
    o.insert("end_ns".into(), json!(e.end_ns));
    o.insert("queue_wait_ns".into(), json!(e.queue_wait_ns()));
    o.insert("status".into(), json!(status(e.status)));
    detail_fields(e, &mut o);
    o
}

/// The LLM and tool details of an event. The OpenTelemetry GenAI names
/// (semantic conventions 1.37+) where the spec has one, plain names for the
/// VM's own fields; the mapping from the older names is in
/// `docs/telemetry.md`.
fn detail_fields(e: &OpEvent, o: &mut Map<String, Json>) {
    if let Some(d) = &e.detail {
        if let Some(t) = &d.tool {
            o.insert("tool".into(), json!(t));
            if matches!(e.track, Track::Tool(_)) {
                o.insert("gen_ai.operation.name".into(), json!(OP_EXECUTE_TOOL));
                o.insert("gen_ai.tool.name".into(), json!(t));
            }
        }
        if let Some(a) = &d.arguments {
            o.insert("arguments".into(), json!(a));
        }
        if let Some(c) = &d.error {
            o.insert("error".into(), json!(c));
        }
        if !d.sources.is_empty() {
            o.insert("ifc.sources".into(), json!(d.sources));
            o.insert("ifc.untrusted".into(), json!(d.untrusted));
        }
    }
    let Some(l) = &e.llm else {
        return;
    };
    let mut put = |k: &str, v: Json| {
        o.insert(k.to_string(), v);
    };
    put("gen_ai.operation.name", json!(OP_CHAT));
    put("gen_ai.provider.name", json!(l.backend));
    put("gen_ai.request.model", json!(l.model));
    put("gen_ai.usage.input_tokens", json!(l.input_tokens));
    put("gen_ai.usage.output_tokens", json!(l.output_tokens));
    // Parts of `input_tokens`, named as OpenTelemetry's GenAI conventions
    // name them; absent when the provider reported no caching.
    if l.cache_read_tokens > 0 {
        put(
            "gen_ai.usage.cache_read.input_tokens",
            json!(l.cache_read_tokens),
        );
    }
    if l.cache_write_tokens > 0 {
        put(
            "gen_ai.usage.cache_creation.input_tokens",
            json!(l.cache_write_tokens),
        );
    }
    put("cost_usd", json!(l.cost_micro_usd as f64 / 1e6));
    put("simulated", json!(l.simulated));
    if let Some(r) = &l.finish_reason {
        put("gen_ai.response.finish_reasons", json!([r]));
    }
    if !l.prompt.is_empty() {
        put("gen_ai.input.messages", input_messages(&l.prompt));
    }
    if let Some(r) = &l.reply {
        put(
            "gen_ai.output.messages",
            output_messages(r, l.finish_reason.as_deref()),
        );
    }
    put("attempts", json!(l.attempts));
    if !l.tool_calls.is_empty() {
        put("tool_calls", json!(l.tool_calls));
    }
}

/// `gen_ai.operation.name` of an LLM op's event and span.
pub const OP_CHAT: &str = "chat";
/// `gen_ai.operation.name` of a tool call's event and span.
pub const OP_EXECUTE_TOOL: &str = "execute_tool";
/// `gen_ai.operation.name` of a flow call's span.
pub const OP_INVOKE_AGENT: &str = "invoke_agent";

/// The prompt as the spec's `gen_ai.input.messages`: a list of messages
/// with text parts.
pub fn input_messages(prompt: &[super::MessageRecord]) -> Json {
    Json::Array(
        prompt
            .iter()
            .map(|m| json!({"role": m.role, "parts": [{"type": "text", "content": m.text}]}))
            .collect(),
    )
}

/// The reply as the spec's `gen_ai.output.messages`.
pub fn output_messages(reply: &str, finish_reason: Option<&str>) -> Json {
    let mut m = json!({"role": "assistant", "parts": [{"type": "text", "content": reply}]});
    if let (Some(r), Json::Object(o)) = (finish_reason, &mut m) {
        o.insert("finish_reason".into(), json!(r));
    }
    json!([m])
}

/// One JSON object per op event ([`event_json`]), then one `summary` line.
pub fn write_jsonl(
    out: &mut dyn Write,
    program: &Program,
    events: &[OpEvent],
    summary: &RunSummary,
) -> io::Result<()> {
    let mut w = BufWriter::new(out);
    for e in events {
        serde_json::to_writer(&mut w, &Json::Object(event_json(program, summary, e)))?;
        w.write_all(b"\n")?;
    }
    let mut s = serde_json::to_value(summary).unwrap_or(Json::Null);
    if let Json::Object(m) = &mut s {
        m.insert("type".into(), json!("summary"));
    }
    serde_json::to_writer(&mut w, &s)?;
    w.write_all(b"\n")?;
    w.flush()
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// The Chrome trace JSON (`{"traceEvents": [...]}`): one thread track per
/// worker with a complete (`X`) event per op it ran, and async (`b`/`e`)
/// events for LLM and tool calls in flight, grouped by lane.
pub fn chrome_trace(program: &Program, events: &[OpEvent], summary: &RunSummary) -> Json {
    let mut out = Vec::with_capacity(events.len() + 16);
    out.push(json!({"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "ais-vm run"}}));
    for w in 0..summary.workers {
        out.push(
            json!({"ph": "M", "name": "thread_name", "pid": 1, "tid": w + 1,
            "args": {"name": format!("worker {w}")}}),
        );
        out.push(
            json!({"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": w + 1,
            "args": {"sort_index": w}}),
        );
    }
    for (i, e) in events.iter().enumerate() {
        let mut args = json!({
            "flow": flow_label(program, summary, e.flow),
            "agent": agent_name(program, e.agent),
            "op": e.op,
            "frame": e.frame,
            "queue_wait_us": us(e.queue_wait_ns()),
            "status": status(e.status),
        });
        if let Json::Object(m) = &mut args {
            detail_fields(e, m);
        }
        match e.track {
            Track::Worker(w) => out.push(json!({
                "ph": "X", "name": e.opcode.mnemonic(), "cat": e.opcode.effect().name(),
                "ts": us(e.start_ns), "dur": us(e.duration_ns()),
                "pid": 1, "tid": w + 1, "args": args,
            })),
            Track::Llm(_) | Track::Tool(_) => {
                let cat = if matches!(e.track, Track::Llm(_)) {
                    "llm"
                } else {
                    "tool"
                };
                let name = format!(
                    "{} {}",
                    e.opcode.mnemonic(),
                    flow_label(program, summary, e.flow)
                );
                out.push(json!({"ph": "b", "name": name, "cat": cat, "id": i,
                    "ts": us(e.start_ns), "pid": 1, "tid": e.worker + 1, "args": args}));
                out.push(json!({"ph": "e", "name": name, "cat": cat, "id": i,
                    "ts": us(e.end_ns), "pid": 1, "tid": e.worker + 1}));
            }
        }
    }
    json!({
        "traceEvents": out,
        "displayTimeUnit": "ms",
        "otherData": serde_json::to_value(summary).unwrap_or(Json::Null),
    })
}

pub fn write_chrome_trace(
    out: &mut dyn Write,
    program: &Program,
    events: &[OpEvent],
    summary: &RunSummary,
) -> io::Result<()> {
    let mut w = BufWriter::new(out);
    serde_json::to_writer(&mut w, &chrome_trace(program, events, summary))?;
    w.flush()
}
