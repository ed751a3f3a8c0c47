//! What a report draws: the program's ops as graph nodes (with the edges
//! between them), each run op's events, and the run's totals. A run's
//! telemetry is kept next to its journal, one file per attempt, as the run
//! goes (`keep`); the program comes from the journal.

use ais_ir::bytecode::{Imm, Program, RegionKind};
use serde_json::{json, Map, Value as Json};
use std::collections::HashMap;
use std::path::Path;

/// Why a report cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{0}")]
    Journal(String),
    #[error("run `{id}` has no telemetry kept (`{path}`): it ran before `aisc report` existed, or with `--memory :memory:`")]
    NoTelemetry { id: String, path: String },
    #[error("cannot read `{path}`: {message}")]
    Read { path: String, message: String },
    #[error("the program stored for run `{id}` cannot be decoded: {message}")]
    Program { id: String, message: String },
}

/// A run as the report needs it: its latest attempt's telemetry.
pub struct RunData {
    pub id: String,
    pub program: Program,
    /// The op events (JSON objects of the JSONL export).
    pub events: Vec<Map<String, Json>>,
    /// The summary line; for telemetry that stops where its process ended,
    /// figures derived from the events kept.
    pub summary: Map<String, Json>,
    /// The attempt shown (from 1) and the earlier attempts' files.
    pub attempt: u32,
    pub earlier: Vec<super::keep::Kept>,
    /// False when the file has no summary: the attempt is still running or
    /// its process ended (killed, crashed) before the run did.
    pub complete: bool,
    /// The run's status in the journal (`running`, `interrupted`, ...).
    pub status: String,
}

impl RunData {
    /// Lines the report shows above the run: which attempt, and whether
    /// its telemetry is whole.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if !self.complete {
            notes.push(format!(
                "Incomplete telemetry: attempt {} has no summary, so it stops where its process ended (killed or crashed before the run finished, or still running; the journal says `{}`). Shown: the {} op events kept; totals are computed from them.",
                self.attempt,
                self.status,
                self.events.len()
            ));
        }
        if !self.earlier.is_empty() {
            let files: Vec<String> = self.earlier.iter().map(super::keep::Kept::name).collect();
            let replayed = self
                .events
                .iter()
                .filter(|e| e.get("replayed").and_then(Json::as_bool) == Some(true))
                .count();
            notes.push(format!(
                "Attempt {} of this run; {} earlier attempt{} kept its own telemetry ({}). Ops replayed from the journal: {replayed} (marked `replayed`).",
                self.attempt,
                self.earlier.len(),
                if self.earlier.len() == 1 { "" } else { "s" },
                files.join(", "),
            ));
        }
        notes
    }
}

/// Loads run `id` (or `last`) from the journal (`store`, else the one in
/// `dir`) and its latest attempt's telemetry in `dir`.
pub fn load(
    dir: &Path,
    store: Option<&dyn ais_vm::store::Store>,
    id: &str,
) -> Result<RunData, ReportError> {
    let stored = match store {
        Some(s) => ais_vm::journal::load_run_in(s, id),
        None => ais_vm::journal::load_run(dir, id),
    }
    .map_err(|e| ReportError::Journal(e.to_string()))?;
    let id = stored.info.id.clone();
    let program = ais_ir::bytecode::decode(&stored.artifact).map_err(|e| ReportError::Program {
        id: id.clone(),
        message: e.to_string(),
    })?;
    let mut attempts = super::keep::attempts(dir, &id);
    let Some((attempt, kept)) = attempts.pop() else {
        return Err(ReportError::NoTelemetry {
            path: super::keep::attempt_path(dir, &id, 1).display().to_string(),
            id,
        });
    };
    let text = kept.read(dir).map_err(|e| ReportError::Read {
        path: kept.name(),
        message: e.to_string(),
    })?;
    let (events, summary) = parse(&text).map_err(|message| ReportError::Read {
        path: kept.name(),
        message,
    })?;
    let complete = summary.is_some();
    Ok(RunData {
        id,
        program,
        summary: summary.unwrap_or_else(|| derived_summary(&events)),
        events,
        attempt,
        earlier: attempts.into_iter().map(|(_, p)| p).collect(),
        complete,
        status: stored.info.status.name().to_string(),
    })
}

/// One JSON object line of a kept file.
type Event = Map<String, Json>;

/// The op events and the summary line of a kept file. Files before
/// attempts had no header; every op line says `"type": "op"`. A last line
/// cut off by the end of its process is left out.
fn parse(text: &str) -> Result<(Vec<Event>, Option<Event>), String> {
    let cut_off = !text.is_empty() && !text.ends_with('\n');
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    let mut events = Vec::new();
    let mut summary = None;
    for (i, (n, line)) in lines.iter().enumerate() {
        let v: Json = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(_) if cut_off && i + 1 == lines.len() => break,
            Err(e) => return Err(format!("line {}: {e}", n + 1)),
        };
        let Json::Object(m) = v else { continue };
        match m.get("type").and_then(Json::as_str) {
            Some("summary") => summary = Some(m),
            Some("op") => events.push(upgrade(m)),
            _ => {}
        }
    }
    // Streamed in the order ops finished; the report reads them by start.
    events.sort_by_key(|e| e.get("start_ns").and_then(Json::as_u64).unwrap_or(0));
    Ok((events, summary))
}

/// An op line written before the names followed the OpenTelemetry GenAI
/// conventions, renamed to today's (`docs/telemetry.md` has the table),
/// so that the report reads one set of names.
fn upgrade(mut m: Event) -> Event {
    for (old, new) in [
        ("gen_ai.system", "gen_ai.provider.name"),
        ("gen_ai.usage.cost_usd", "cost_usd"),
        ("gen_ai.simulated", "simulated"),
        ("gen_ai.attempts", "attempts"),
        ("gen_ai.tool_calls", "tool_calls"),
    ] {
        if let Some(v) = m.remove(old) {
            m.entry(new).or_insert(v);
        }
    }
    if let Some(r) = m.remove("gen_ai.response.finish_reason") {
        m.entry("gen_ai.response.finish_reasons")
            .or_insert_with(|| json!([r]));
    }
    if let Some(Json::Array(prompt)) = m.remove("gen_ai.prompt") {
        let msgs: Vec<ais_vm::telemetry::MessageRecord> = prompt
            .into_iter()
            .filter_map(|p| serde_json::from_value(p).ok())
            .collect();
        m.entry("gen_ai.input.messages")
            .or_insert_with(|| ais_vm::telemetry::input_messages(&msgs));
    }
    if let Some(Json::String(reply)) = m.remove("gen_ai.completion") {
        let reason = m
            .get("gen_ai.response.finish_reasons")
            .and_then(|r| r.get(0))
            .and_then(Json::as_str)
            .map(str::to_string);
        m.entry("gen_ai.output.messages")
            .or_insert_with(|| ais_vm::telemetry::output_messages(&reply, reason.as_deref()));
    }
    // The op's kind (`ask`, `think`, ...) was the operation name; it is
    // the `opcode` field, and an LLM call's operation is `chat`.
    let was_kind = m
        .get("gen_ai.operation.name")
        .and_then(Json::as_str)
        .is_some_and(|o| {
            ![
                ais_vm::telemetry::OP_CHAT,
                ais_vm::telemetry::OP_EXECUTE_TOOL,
                ais_vm::telemetry::OP_INVOKE_AGENT,
            ]
            .contains(&o)
        });
    if was_kind {
        m.insert(
            "gen_ai.operation.name".into(),
            json!(ais_vm::telemetry::OP_CHAT),
        );
    }
    m
}

/// What a summary would say, from the events alone (telemetry that stops
/// where its process ended has none).
fn derived_summary(events: &[Map<String, Json>]) -> Map<String, Json> {
    let u = |e: &Map<String, Json>, k: &str| e.get(k).and_then(Json::as_u64).unwrap_or(0);
    let track = |e: &Map<String, Json>, kind: &str| {
        e.get("track")
            .and_then(Json::as_str)
            .is_some_and(|t| t.starts_with(kind))
    };
    let status = |e: &Map<String, Json>, s: &str| e.get("status").and_then(Json::as_str) == Some(s);
    let ran: Vec<&Map<String, Json>> = events.iter().filter(|e| !status(e, "cancelled")).collect();
    let end = ran.iter().map(|e| u(e, "end_ns")).max().unwrap_or(0);
    let sum = |k: &str| ran.iter().map(|e| u(e, k)).sum::<u64>();
    let cost: f64 = ran
        .iter()
        .filter_map(|e| e.get("cost_usd").and_then(Json::as_f64))
        .sum();
    let retries: usize = ran
        .iter()
        .filter_map(|e| e.get("attempts").and_then(Json::as_array))
        .map(|a| a.len().saturating_sub(1))
        .sum();
    let mut m = Map::new();
    m.insert("makespan_ms".into(), json!(end as f64 / 1e6));
    m.insert("ops".into(), json!(ran.len()));
    m.insert(
        "llm_calls".into(),
        json!(ran.iter().filter(|e| track(e, "llm:")).count()),
    );
    m.insert(
        "tool_calls".into(),
        json!(ran.iter().filter(|e| track(e, "tool:")).count()),
    );
    m.insert(
        "input_tokens".into(),
        json!(sum("gen_ai.usage.input_tokens")),
    );
    m.insert(
        "output_tokens".into(),
        json!(sum("gen_ai.usage.output_tokens")),
    );
    m.insert(
        "cache_read_tokens".into(),
        json!(sum("gen_ai.usage.cache_read.input_tokens")),
    );
    m.insert(
        "cache_write_tokens".into(),
        json!(sum("gen_ai.usage.cache_creation.input_tokens")),
    );
    m.insert("cost_usd".into(), json!(cost));
    m.insert("llm_retries".into(), json!(retries));
    // Every request sent, those of calls the run's end cancelled too.
    let requests: usize = events
        .iter()
        .filter_map(|e| e.get("attempts").and_then(Json::as_array))
        .map(Vec::len)
        .sum();
    m.insert("llm_attempts".into(), json!(requests));
    m.insert(
        "failed_ops".into(),
        json!(events.iter().filter(|e| status(e, "failed")).count()),
    );
    m
}

/// What an op does, for its colour.
pub fn kind_of(op: ais_ir::Opcode) -> &'static str {
    use ais_ir::ExecClass as X;
    match op.info().exec {
        X::Llm => "llm",
        X::Tool => "tool",
        X::Call => "call",
        X::Control | X::Terminator => "control",
        X::Inline => "effect",
        _ => "data",
    }
}

/// One op of the program as a node.
pub struct Node {
    /// `f{flow}r{region}o{op}`: how events name it too.
    pub key: String,
    pub flow: u32,
    pub label: String,
    pub sub: String,
    pub kind: &'static str,
    /// `ok`, `failed`, `cancelled`, `not_run`, or `static` (no run).
    pub status: &'static str,
    pub runs: usize,
}

/// An edge between two nodes (indices into `Graph::nodes`).
pub struct Edge {
    pub from: usize,
    pub to: usize,
    /// `data`, `region` (a control op to its region's first ops), or `call`
    /// (a call to its callee's first ops).
    pub kind: &'static str,
    pub label: String,
    /// A region edge whose region ran.
    pub taken: bool,
}

pub struct Graph {
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
    /// Flow names by flow index (the program's own flows).
    pub flows: Vec<String>,
    /// The flows in drawing order: entry flows first.
    pub order: Vec<usize>,
}

pub fn node_key(flow: u64, region: u64, op: u64) -> String {
    format!("f{flow}r{region}o{op}")
}

fn short(text: &str, n: usize) -> String {
    let mut s: String = text.chars().take(n).collect();
    if text.chars().count() > n {
        s.push('…');
    }
    s.replace(['\n', '\r'], " ")
}

fn op_sub(program: &Program, imm: &Imm) -> String {
    match imm {
        Imm::Tool(t) => t.clone(),
        Imm::Callee(c) => program.flow_name(*c),
        Imm::Template(t) => short(t, 18),
        Imm::Field(f) | Imm::Belief(f) => f.clone(),
        _ => String::new(),
    }
}

fn region_label(k: &RegionKind) -> String {
    match k {
        RegionKind::Case(key) => format!("case {}", short(key, 12)),
        other => other.label().to_string(),
    }
}

/// The program's graph; with `events`, every node's status and run count,
/// and which regions ran.
pub fn graph(program: &Program, events: Option<&[Map<String, Json>]>) -> Graph {
    // Per node key: (runs, worst status).
    let mut seen: HashMap<String, (usize, &'static str)> = HashMap::new();
    let mut ran_regions: HashMap<(u64, u64), bool> = HashMap::new();
    for e in events.unwrap_or(&[]) {
        let n = |k: &str| e.get(k).and_then(Json::as_u64).unwrap_or(0);
        let key = node_key(n("flow_id"), n("region"), n("op"));
        let status = match e.get("status").and_then(Json::as_str) {
            Some("failed") => "failed",
            Some("cancelled") => "cancelled",
            _ => "ok",
        };
        ran_regions.insert((n("flow_id"), n("region")), true);
        let entry = seen.entry(key).or_insert((0, status));
        entry.0 += 1;
        let rank = |s: &str| match s {
            "failed" => 2,
            "ok" => 1,
            _ => 0,
        };
        if rank(status) > rank(entry.1) {
            entry.1 = status;
        }
    }
    let mut nodes = Vec::new();
    let mut index: HashMap<(u32, u32, u32), usize> = HashMap::new();
    for (f, flow) in program.flows.iter().enumerate() {
        let f = f as u32;
        for (r, region) in flow.regions.iter().enumerate() {
            for (o, instr) in region.ops.iter().enumerate() {
                let key = node_key(u64::from(f), r as u64, o as u64);
                let (runs, status) = match (events, seen.get(&key)) {
                    (None, _) => (0, "static"),
                    (Some(_), None) => (0, "not_run"),
                    (Some(_), Some(&(n, s))) => (n, s),
                };
                index.insert((f, r as u32, o as u32), nodes.len());
                nodes.push(Node {
                    key,
                    flow: f,
                    label: instr.opcode.mnemonic().to_string(),
                    sub: op_sub(program, &instr.imm),
                    kind: kind_of(instr.opcode),
                    status,
                    runs,
                });
            }
        }
    }
    let mut edges = Vec::new();
    for (f, flow) in program.flows.iter().enumerate() {
        let f = f as u32;
        for (r, region) in flow.regions.iter().enumerate() {
            let r = r as u32;
            let mut producer: HashMap<u32, u32> = HashMap::new();
            for (o, instr) in region.ops.iter().enumerate() {
                for s in instr.results() {
                    producer.insert(s, o as u32);
                }
            }
            for (o, instr) in region.ops.iter().enumerate() {
                let Some(&to) = index.get(&(f, r, o as u32)) else {
                    continue;
                };
                let mut from_seen = Vec::new();
                for s in region.inputs(instr) {
                    if let Some(&p) = producer.get(s) {
                        if from_seen.contains(&p) {
                            continue;
                        }
                        from_seen.push(p);
                        if let Some(&from) = index.get(&(f, r, p)) {
                            edges.push(Edge {
                                from,
                                to,
                                kind: "data",
                                label: String::new(),
                                taken: false,
                            });
                        }
                    }
                }
                for &child in &instr.regions {
                    let Some(code) = flow.regions.get(child as usize) else {
                        continue;
                    };
                    let taken = ran_regions.contains_key(&(u64::from(f), u64::from(child)));
                    for &root in region_roots(code) {
                        if let Some(&t) = index.get(&(f, child, root)) {
                            edges.push(Edge {
                                from: to,
                                to: t,
                                kind: "region",
                                label: region_label(&code.kind),
                                taken,
                            });
                        }
                    }
                }
                if let Imm::Callee(c) = &instr.imm {
                    if let Some(callee) = program.flows.get(*c as usize) {
                        if let Some(body) = callee.regions.first() {
                            for &root in region_roots(body) {
                                if let Some(&t) = index.get(&(*c, 0, root)) {
                                    edges.push(Edge {
                                        from: to,
                                        to: t,
                                        kind: "call",
                                        label: String::new(),
                                        taken: false,
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    let mut order: Vec<usize> = (0..program.flows.len()).collect();
    order.sort_by_key(|&f| !program.flows[f].entry);
    Graph {
        order,
        nodes,
        edges,
        flows: (0..program.flows.len() as u32)
            .map(|f| program.flow_name(f))
            .collect(),
    }
}

/// A region's first ops: its roots, else (every op has inputs) its first op.
fn region_roots(code: &ais_ir::bytecode::RegionCode) -> &[u32] {
    if code.roots.is_empty() {
        &[0][..usize::from(!code.ops.is_empty())]
    } else {
        &code.roots
    }
}

/// The critical path through the run's events: from the op that ended
/// last, back through the op whose end made each one ready. Indices into
/// `events`, in time order.
pub fn critical_path(events: &[Map<String, Json>]) -> Vec<usize> {
    let n = |e: &Map<String, Json>, k: &str| e.get(k).and_then(Json::as_u64).unwrap_or(0);
    let live: Vec<usize> = (0..events.len())
        .filter(|&i| events[i].get("status").and_then(Json::as_str) != Some("cancelled"))
        .collect();
    let Some(mut cur) = live
        .iter()
        .copied()
        .max_by_key(|&i| n(&events[i], "end_ns"))
    else {
        return Vec::new();
    };
    let mut path = vec![cur];
    loop {
        let ready = n(&events[cur], "ready_ns");
        // The op that ended last at or before this one became ready.
        let prev = live
            .iter()
            .copied()
            .filter(|&i| !path.contains(&i) && n(&events[i], "end_ns") <= ready)
            .max_by_key(|&i| n(&events[i], "end_ns"));
        match prev {
            Some(p) if ready > 0 => {
                path.push(p);
                cur = p;
            }
            _ => break,
        }
    }
    path.reverse();
    path
}

/// Totals shown at the top of the report.
pub fn totals(summary: &Map<String, Json>, events: &[Map<String, Json>], path: &[usize]) -> Json {
    let g = |k: &str| summary.get(k).cloned().unwrap_or(Json::Null);
    let busy: u64 = path
        .iter()
        .filter_map(|&i| events.get(i))
        .map(|e| {
            let n = |k: &str| e.get(k).and_then(Json::as_u64).unwrap_or(0);
            n("end_ns").saturating_sub(n("start_ns"))
        })
        .sum();
    json!({
        "makespan_ms": g("makespan_ms"),
        "critical_path_ms": busy as f64 / 1e6,
        "critical_path_ops": path.len(),
        "critical_path_estimate_ms": g("critical_path_estimate_ms"),
        "ops": g("ops"),
        "llm_calls": g("llm_calls"),
        "tool_calls": g("tool_calls"),
        "input_tokens": g("input_tokens"),
        "output_tokens": g("output_tokens"),
        "cache_read_tokens": g("cache_read_tokens"),
        "cache_write_tokens": g("cache_write_tokens"),
        "cost_usd": g("cost_usd"),
        "requests": g("llm_attempts"),
        "retries": g("llm_retries"),
        "failed_ops": g("failed_ops"),
        "speculation": g("speculation"),
    })
}

#[cfg(test)]
mod parse_tests {
    use serde_json::json;

    #[test]
    fn lines_with_the_names_before_the_genai_conventions_load_under_todays() {
        let old = r#"{"type":"op","op":0,"start_ns":1,"gen_ai.operation.name":"ask","gen_ai.system":"sim","gen_ai.request.model":"m","gen_ai.usage.cost_usd":0.5,"gen_ai.simulated":true,"gen_ai.response.finish_reason":"stop","gen_ai.prompt":[{"role":"user","text":"hi"}],"gen_ai.completion":"yo","gen_ai.attempts":[{},{}],"gen_ai.tool_calls":[]}"#;
        let (events, _) = super::parse(&format!("{old}\n")).expect("parses");
        let e = &events[0];
        assert_eq!(e["gen_ai.operation.name"], "chat");
        assert_eq!(e["gen_ai.provider.name"], "sim");
        assert_eq!(e["gen_ai.request.model"], "m");
        assert_eq!(e["cost_usd"], 0.5);
        assert_eq!(e["simulated"], true);
        assert_eq!(e["gen_ai.response.finish_reasons"], json!(["stop"]));
        assert_eq!(
            e["gen_ai.input.messages"],
            json!([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}])
        );
        assert_eq!(e["gen_ai.output.messages"][0]["parts"][0]["content"], "yo");
        assert_eq!(e["gen_ai.output.messages"][0]["finish_reason"], "stop");
        assert_eq!(e["attempts"].as_array().map(Vec::len), Some(2));
        assert!(e.keys().all(
            |k| !["gen_ai.system", "gen_ai.prompt", "gen_ai.completion"].contains(&k.as_str())
        ));
        // The totals read the new names.
        assert_eq!(super::derived_summary(&events)["cost_usd"], 0.5);
        assert_eq!(super::derived_summary(&events)["llm_retries"], 1);
    }

    #[test]
    fn cache_reads_and_writes_are_totalled_from_the_events() {
        let lines = concat!(
            r#"{"type":"op","op":0,"start_ns":1,"gen_ai.operation.name":"chat","gen_ai.usage.input_tokens":2000,"gen_ai.usage.cache_read.input_tokens":1500,"gen_ai.usage.cache_creation.input_tokens":400}"#,
            "\n",
            r#"{"type":"op","op":1,"start_ns":2,"gen_ai.operation.name":"chat","gen_ai.usage.input_tokens":3000,"gen_ai.usage.cache_creation.input_tokens":2900}"#,
            "\n"
        );
        let (events, _) = super::parse(lines).expect("parses");
        let s = super::derived_summary(&events);
        assert_eq!(s["input_tokens"], 5000);
        assert_eq!(s["cache_read_tokens"], 1500);
        assert_eq!(s["cache_write_tokens"], 3300);
    }

    #[test]
    fn a_file_from_before_attempts_loads_whole() {
        let old = "{\"type\":\"op\",\"op\":1,\"start_ns\":5}\n{\"type\":\"op\",\"op\":0,\"start_ns\":1}\n{\"type\":\"summary\",\"ops\":2}\n";
        let (events, summary) = super::parse(old).expect("parses");
        let ops: Vec<u64> = events.iter().filter_map(|e| e["op"].as_u64()).collect();
        assert_eq!(ops, [0, 1], "sorted by start");
        assert_eq!(summary.expect("summary")["ops"], 2);
    }

    #[test]
    fn a_streamed_file_cut_mid_line_keeps_its_whole_lines_without_a_summary() {
        let cut = "{\"type\":\"attempt\",\"attempt\":2,\"state\":\"running\"}\n{\"type\":\"op\",\"op\":3,\"start_ns\":9,\"track\":\"llm:0\",\"end_ns\":2000000}\n{\"type\":\"op\",\"op\":";
        let (events, summary) = super::parse(cut).expect("parses");
        assert_eq!(events.len(), 1, "the header is not an event");
        assert!(summary.is_none());
        let derived = super::derived_summary(&events);
        assert_eq!(derived["llm_calls"], 1);
        assert_eq!(derived["makespan_ms"].as_f64(), Some(2.0));
        // A bad line that is not the cut-off last one is an error.
        let bad = "{\"type\":\"op\"\n{\"type\":\"op\"}\n";
        assert!(super::parse(bad).is_err());
    }
}
