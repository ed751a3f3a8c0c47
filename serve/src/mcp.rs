//! The MCP server (Model Context Protocol, JSON-RPC 2.0): over stdio
//! (`aisc mcp`, newline-delimited messages) and over the streamable HTTP
//! transport (`POST /mcp` under `aisc serve`, answered with
//! `application/json`; stateless: no session id).
//!
//! Tools: each entry flow of a served program (named after its agent; its
//! input schema from the flow's parameters, its output schema
//! `{result: <its result type>}`), and `check` and `build`, which compile
//! AIS source and return the diagnostics as structured content.

use crate::engine::BudgetSpec;
use crate::registry::{Registry, Status};
use ais_compiler::diagnostics::render_json;
use ais_compiler::driver;
use ais_wire::mcp;
use ais_wire::rpc::{self, Incoming, Invalid};
use serde_json::{json, Value as Json};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};

struct FlowTool {
    name: String,
    /// The served program's file name and the flow (`Agent.flow`).
    program: String,
    entry: String,
    description: String,
    input: Json,
    output: Json,
}

/// The MCP server over a registry of served programs.
pub struct Mcp {
    registry: Arc<Registry>,
    /// The served flows as tools (rebuilt when the programs are reloaded).
    tools: std::sync::RwLock<Arc<Vec<FlowTool>>>,
    /// Runs started by `tools/call` requests in flight, by request id
    /// (for `notifications/cancelled`).
    calls: Mutex<HashMap<String, crate::cancel::Cancel>>,
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Mcp {
    pub fn new(registry: Arc<Registry>) -> Mcp {
        let tools = std::sync::RwLock::new(Arc::new(Self::build(&registry)));
        Mcp {
            registry,
            tools,
            calls: Mutex::default(),
        }
    }

    /// Rebuilds the tools from the registry's programs (after a reload).
    pub fn refresh(&self) {
        let fresh = Arc::new(Self::build(&self.registry));
        *self.tools.write().unwrap_or_else(|e| e.into_inner()) = fresh;
    }

    fn tools(&self) -> Arc<Vec<FlowTool>> {
        self.tools.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn build(registry: &Registry) -> Vec<FlowTool> {
        let mut tools: Vec<FlowTool> = Vec::new();
        for served in registry.programs().iter() {
            let p = &served.program;
            for f in served.exposed_flows() {
                let Some(code) = p.flows.get(f as usize) else {
                    continue;
                };
                let agent = p
                    .agents
                    .get(code.agent as usize)
                    .map_or("agent", |a| a.name.as_str());
                let params: Vec<String> = code
                    .params
                    .iter()
                    .map(|(n, t)| format!("{n}: {}", p.type_of(*t)))
                    .collect();
                let mut name = sanitize(agent);
                if tools.iter().any(|t| t.name == name) || name == "check" || name == "build" {
                    let stem = served
                        .file
                        .rsplit_once('.')
                        .map_or(served.file.as_str(), |(s, _)| s);
                    name = format!("{name}_{}", sanitize(stem));
                }
                tools.push(FlowTool {
                    name,
                    program: served.file.clone(),
                    entry: p.flow_name(f),
                    description: format!(
                        "Runs the AIS flow {}({}) -> {} of {} and returns its result.",
                        p.flow_name(f),
                        params.join(", "),
                        p.type_of(code.result),
                        served.file
                    ),
                    input: crate::schema::input(p, f),
                    output: crate::schema::output(p, f),
                });
            }
        }
        tools
    }

    /// Answers one JSON-RPC message: `Some(response)` for a request,
    /// `None` for a notification or a response. Blocks while a tool runs.
    pub fn handle(&self, msg: &Json) -> Option<Json> {
        let (id, method, params) = match rpc::classify(msg) {
            Incoming::Request { id, method, params } => (id, method, params),
            Incoming::Notification { method, params } => {
                self.notification(method, &params);
                return None;
            }
            Incoming::Ignored => return None,
            Incoming::Invalid { id, why } => {
                let m = match why {
                    Invalid::NotAnObject => "invalid request: not a JSON object",
                    Invalid::NoMethod => "invalid request: no method",
                    Invalid::BadVersion => "invalid request: jsonrpc must be \"2.0\"",
                };
                return Some(error(id, rpc::INVALID_REQUEST, m));
            }
        };
        Some(match method {
            "initialize" => ok(id, self.initialize(&params)),
            "ping" => ok(id, json!({})),
            "tools/list" => ok(id, json!({"tools": self.list()})),
            "tools/call" => match self.call(&id, &params) {
                Ok(r) => ok(id, r),
                Err((code, m)) => error(id, code, &m),
            },
            "resources/list" => ok(id, json!({"resources": []})),
            "prompts/list" => ok(id, json!({"prompts": []})),
            other => error(
                id,
                rpc::METHOD_NOT_FOUND,
                &format!("method not found: {other}"),
            ),
        })
    }

    fn notification(&self, method: &str, params: &Json) {
        if method == "notifications/cancelled" {
            let key = params
                .get("requestId")
                .map(Json::to_string)
                .unwrap_or_default();
            let cancel = self
                .calls
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&key)
                .cloned();
            if let Some(c) = cancel {
                c.cancel();
            }
        }
    }

    fn initialize(&self, params: &Json) -> Json {
        let asked = params.get("protocolVersion").and_then(Json::as_str);
        let version = mcp::negotiate(asked);
        json!({
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": {"name": "aisc", "title": "AIS agent programs", "version": env!("CARGO_PKG_VERSION")},
            "instructions": "Each tool named after an agent runs that agent's entry flow (an AIS program) and returns its result; `check` and `build` compile AIS source and return its diagnostics.",
        })
    }

    fn list(&self) -> Vec<Json> {
        let tools = self.tools();
        let mut out: Vec<Json> = tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "title": t.entry,
                    "description": t.description,
                    "inputSchema": t.input,
                    "outputSchema": t.output,
                })
            })
            .collect();
        let source = json!({
            "type": "object",
            "properties": {
                "source": {"type": "string", "description": "AIS source text"},
                "name": {"type": "string", "description": "file name shown in diagnostics (default main.ais)"},
            },
            "required": ["source"],
            "additionalProperties": false,
        });
        out.push(json!({
            "name": "check",
            "description": "Parses and type-checks AIS source; returns every error and warning as structured diagnostics (code, message, spans, help).",
            "inputSchema": source,
            "annotations": {"readOnlyHint": true},
        }));
        out.push(json!({
            "name": "build",
            "description": "Compiles AIS source to an executable artifact (checked, lowered, optimized at -O1); returns the diagnostics and the compiled flows with their critical-path estimates.",
            "inputSchema": source,
            "annotations": {"readOnlyHint": true},
        }));
        out
    }

    fn call(&self, id: &Json, params: &Json) -> Result<Json, (i64, String)> {
        let name = params
            .get("name")
            .and_then(Json::as_str)
            .ok_or((rpc::INVALID_PARAMS, "tools/call needs `name`".to_string()))?;
        let args = params.get("arguments").cloned().unwrap_or(json!({}));
        match name {
            "check" | "build" => {
                let source = args.get("source").and_then(Json::as_str).ok_or((
                    rpc::INVALID_PARAMS,
                    format!("`{name}` needs `source` (AIS text)"),
                ))?;
                let file = args
                    .get("name")
                    .and_then(Json::as_str)
                    .unwrap_or("main.ais");
                let s = if name == "check" {
                    check(file, source)
                } else {
                    build(file, source)
                };
                let failed = s["ok"] == false;
                Ok(mcp::tool_result(&s.to_string(), s, failed))
            }
            _ => {
                let tools = self.tools();
                let tool = tools
                    .iter()
                    .find(|t| t.name == name)
                    .ok_or((rpc::INVALID_PARAMS, format!("unknown tool: {name}")))?;
                Ok(self.run_tool(id, tool, &args))
            }
        }
    }

    fn run_tool(&self, id: &Json, tool: &FlowTool, args: &Json) -> Json {
        let started = self.registry.start_run(
            &tool.program,
            Some(&tool.entry),
            args,
            BudgetSpec::default(),
        );
        let entry = match started {
            Ok(e) => e,
            Err(e) => return mcp::tool_error(&format!("{}: {} ({})", e.code, e.message, e.hint)),
        };
        let key = id.to_string();
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone(), entry.cancel_switch().clone());
        let st = entry.wait();
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        match (st.status, st.result) {
            (Status::Succeeded, Some(v)) => {
                let text = match &v {
                    Json::String(s) => s.clone(),
                    other => other.to_string(),
                };
                mcp::tool_result(&text, json!({"result": v}), false)
            }
            (status, _) => {
                let e = st.error.unwrap_or(Json::Null);
                mcp::tool_error(&format!(
                    "run {} {}: {}: {}",
                    entry.id,
                    status.name(),
                    e["code"].as_str().unwrap_or("run.failed"),
                    e["message"].as_str().unwrap_or("")
                ))
            }
        }
    }
}

fn ok(id: Json, result: Json) -> Json {
    rpc::result(id, result)
}

fn error(id: Json, code: i64, message: &str) -> Json {
    rpc::error(id, code, message, None)
}

fn diagnostics_json(file: &str, source: &str, diags: &[ais_ir::Diagnostic]) -> Json {
    let errors = diags.iter().filter(|d| d.is_error()).count();
    json!({
        "ok": errors == 0,
        "errors": errors,
        "warnings": diags.len() - errors,
        "diagnostics": diags.iter().map(|d| render_json(d, file, source)).collect::<Vec<_>>(),
    })
}

/// The `check` tool: every diagnostic of the front end.
pub fn check(file: &str, source: &str) -> Json {
    let fe = driver::check_source(source);
    diagnostics_json(file, source, &fe.diagnostics)
}

/// The `build` tool: compile at -O1; the flows of the artifact.
pub fn build(file: &str, source: &str) -> Json {
    let mut compiled = match driver::compile_source(source) {
        Ok(c) => c,
        Err(diags) => return diagnostics_json(file, source, &diags),
    };
    let mut out = diagnostics_json(file, source, &compiled.diagnostics);
    if let Err(e) = driver::optimize(&mut compiled.module, &driver::OptOptions::default()) {
        out["ok"] = false.into();
        out["error"] = e.into();
        return out;
    }
    match ais_ir::bytecode::compile(&compiled.module) {
        Ok(p) => {
            let flows: Vec<Json> = (0..p.flows.len() as u32)
                .filter_map(|i| {
                    let f = p.flows.get(i as usize)?;
                    Some(json!({
                        "name": p.flow_name(i),
                        "entry": f.entry,
                        "params": f.params.iter().map(|(n, t)| json!({"name": n, "type": p.type_of(*t).to_string()})).collect::<Vec<_>>(),
                        "result": p.type_of(f.result).to_string(),
                        "critical_path_ms": f.cp_ms,
                    }))
                })
                .collect();
            out["flows"] = flows.into();
            out["artifact_bytes"] = ais_ir::bytecode::encode(&p).map_or(0, |b| b.len()).into();
        }
        Err(e) => {
            out["ok"] = false.into();
            out["error"] = format!("code generation failed: {e}").into();
        }
    }
    out
}

/// `aisc mcp`: reads one JSON-RPC message per line from `input`, writes
/// one per line to `output`; each request is answered on its own thread
/// (a tool call lasts as long as its run), so cancellations get through.
/// Returns when `input` ends, once every request has been answered.
pub fn serve_stdio(
    mcp: Arc<Mcp>,
    input: impl BufRead,
    output: Arc<Mutex<dyn Write + Send>>,
) -> std::io::Result<()> {
    let mut pending = Vec::new();
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let reply = |out: &Arc<Mutex<dyn Write + Send>>, j: &Json| {
            let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(o, "{j}");
            let _ = o.flush();
        };
        let msg: Json = match serde_json::from_str(&line) {
            Ok(m) => m,
            Err(e) => {
                reply(
                    &output,
                    &error(Json::Null, rpc::PARSE_ERROR, &format!("parse error: {e}")),
                );
                continue;
            }
        };
        let (mcp, out) = (mcp.clone(), output.clone());
        pending.push(std::thread::spawn(move || {
            if let Some(r) = mcp.handle(&msg) {
                reply(&out, &r);
            }
        }));
        pending.retain(|h| !h.is_finished());
    }
    for h in pending {
        let _ = h.join();
    }
    Ok(())
}
