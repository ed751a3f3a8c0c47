//! A Model Context Protocol client over stdio: newline-delimited JSON-RPC
//! 2.0 to a child process, written by hand on threads (no async runtime).
//!
//! Start-up: `initialize` (protocol version [`PROTOCOL_VERSION`]), the
//! `notifications/initialized` notification, then `tools/list` (following
//! `nextCursor`). Calls: `tools/call`. A reader thread routes responses to
//! waiting callers by id; requests from the server (e.g. `roots/list`) are
//! answered with JSON-RPC error -32601; notifications are ignored. Lines
//! that are not JSON-RPC are protocol errors recorded for diagnostics.

use super::config::{secs, McpServerConfig};
use crate::host::HostError;
use crate::llm::CancelToken;
use crate::sync::lock;
use serde_json::{json, Value as Json};
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const PROTOCOL_VERSION: &str = "2024-11-05";
/// Longest line accepted from a server.
const MAX_LINE: u64 = 32 * 1024 * 1024;

type Reply = Result<Json, HostError>;

/// A tool a server offers.
#[derive(Clone, Debug)]
pub struct McpTool {
    pub name: String,
    pub description: String,
    pub input_schema: Option<Json>,
    pub output_schema: Option<Json>,
    /// From the tool annotations (MCP: destructive unless read-only or
    /// `destructiveHint: false`).
    pub destructive: bool,
    pub read_only: bool,
}

struct Shared {
    pending: Mutex<HashMap<u64, Sender<Reply>>>,
    alive: AtomicBool,
    /// Recent stderr lines and protocol problems, for error messages.
    notes: Mutex<VecDeque<String>>,
}

impl Shared {
    fn note(&self, s: String) {
        let mut n = lock(&self.notes);
        if n.len() >= 20 {
            n.pop_front();
        }
        n.push_back(s);
    }
}

pub struct McpClient {
    pub name: String,
    child: Mutex<Child>,
    stdin: Mutex<ChildStdin>,
    shared: Arc<Shared>,
    next_id: AtomicU64,
    timeout: Duration,
    /// `serverInfo` from the `initialize` reply.
    pub server_info: std::sync::OnceLock<Json>,
}

fn err(server: &str, code: &str, message: String) -> HostError {
    HostError::new(code, format!("MCP server `{server}`: {message}"))
        .with_payload(json!({"server": server}))
}

impl McpClient {
    /// Starts the server, performs the handshake and lists its tools.
    pub fn start(cfg: &McpServerConfig) -> Result<(Arc<McpClient>, Vec<McpTool>), HostError> {
        let name = cfg.name.clone();
        let timeout = secs(cfg.timeout_s).unwrap_or(Duration::from_secs(30));
        let (prog, args) = cfg
            .command
            .split_first()
            .ok_or_else(|| err(&name, "mcp.config", "empty command".into()))?;
        let mut cmd = Command::new(prog);
        cmd.args(args)
            .envs(&cfg.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(d) = &cfg.cwd {
            cmd.current_dir(d);
        }
        let mut child = cmd.spawn().map_err(|e| {
            err(
                &name,
                "mcp.spawn",
                format!("cannot start `{}`: {e}", cfg.command.join(" ")),
            )
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(err(&name, "mcp.spawn", "no stdio pipes".into()));
        };
        let shared = Arc::new(Shared {
            pending: Mutex::default(),
            alive: AtomicBool::new(true),
            notes: Mutex::default(),
        });
        let stdin = Mutex::new(stdin);
        let client = Arc::new(McpClient {
            name: name.clone(),
            child: Mutex::new(child),
            stdin,
            shared: shared.clone(),
            next_id: AtomicU64::new(1),
            timeout,
            server_info: std::sync::OnceLock::new(),
        });
        // stderr: keep the last lines.
        {
            let sh = shared.clone();
            std::thread::Builder::new()
                .name(format!("mcp-{name}-stderr"))
                .spawn(move || {
                    for line in BufReader::new(stderr).lines() {
                        match line {
                            Ok(l) => sh.note(format!("stderr: {l}")),
                            Err(_) => break,
                        }
                    }
                })
                .map_err(|e| err(&name, "mcp.spawn", e.to_string()))?;
        }
        // stdout: route replies; answer server requests.
        {
            let weak = Arc::downgrade(&client);
            let sh = shared.clone();
            let server = name.clone();
            std::thread::Builder::new()
                .name(format!("mcp-{name}-reader"))
                .spawn(move || {
                    let mut r = BufReader::new(stdout);
                    loop {
                        let mut buf = Vec::new();
                        match (&mut r).take(MAX_LINE).read_until(b'\n', &mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(_) => {}
                        }
                        if buf.len() as u64 >= MAX_LINE && buf.last() != Some(&b'\n') {
                            sh.note("protocol: a line longer than the limit".into());
                            break;
                        }
                        let text = String::from_utf8_lossy(&buf);
                        let text = text.trim();
                        if text.is_empty() {
                            continue;
                        }
                        let msg: Json = match serde_json::from_str(text) {
                            Ok(m) => m,
                            Err(_) => {
                                let excerpt: String = text.chars().take(200).collect();
                                sh.note(format!("protocol: not JSON: {excerpt}"));
                                continue;
                            }
                        };
                        let id = msg.get("id").cloned();
                        let method = msg.get("method").and_then(Json::as_str);
                        match (id, method) {
                            (Some(id), Some(_)) => {
                                // A request from the server: we offer nothing.
                                if let Some(c) = weak.upgrade() {
                                    let _ = c.send(&json!({
                                        "jsonrpc": "2.0", "id": id,
                                        "error": {"code": -32601, "message": "method not supported by this client"}
                                    }));
                                }
                            }
                            (None, Some(_)) => {} // notification
                            (Some(id), None) => {
                                let Some(n) = id.as_u64() else {
                                    sh.note(format!("protocol: reply with unexpected id {id}"));
                                    continue;
                                };
                                let tx = lock(&sh.pending).remove(&n);
                                let Some(tx) = tx else {
                                    continue; // late reply to a timed-out request
                                };
                                let reply = if let Some(e) = msg.get("error") {
                                    let m = e
                                        .get("message")
                                        .and_then(Json::as_str)
                                        .unwrap_or("error")
                                        .to_string();
                                    Err(err(&server, "mcp.rpc_error", m)
                                        .with_payload(json!({"server": server, "error": e})))
                                } else {
                                    Ok(msg.get("result").cloned().unwrap_or(Json::Null))
                                };
                                let _ = tx.send(reply);
                            }
                            (None, None) => {
                                sh.note("protocol: a message with neither id nor method".into())
                            }
                        }
                    }
                    sh.alive.store(false, Ordering::SeqCst);
                    // Fail everything still waiting.
                    let waiting: Vec<Sender<Reply>> =
                        lock(&sh.pending).drain().map(|(_, t)| t).collect();
                    for t in waiting {
                        let _ = t.send(Err(err(
                            &server,
                            "mcp.closed",
                            "the server closed its output (exited?)".into(),
                        )));
                    }
                })
                .map_err(|e| err(&name, "mcp.spawn", e.to_string()))?;
        }
        let never = CancelToken::new();
        let init = client.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "apxm-ais", "version": env!("CARGO_PKG_VERSION")}
            }),
            &never,
        )?;
        if init.get("protocolVersion").and_then(Json::as_str).is_none() {
            return Err(err(
                &name,
                "mcp.protocol",
                "the `initialize` reply has no protocolVersion".into(),
            ));
        }
        client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        let mut tools = Vec::new();
        let mut cursor: Option<Json> = None;
        for _ in 0..1000 {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = client.request("tools/list", params, &never)?;
            let list = page.get("tools").and_then(Json::as_array).ok_or_else(|| {
                err(
                    &name,
                    "mcp.protocol",
                    "`tools/list` returned no `tools` list".into(),
                )
            })?;
            for t in list {
                tools.push(parse_tool(&name, t)?);
            }
            cursor = page.get("nextCursor").filter(|c| !c.is_null()).cloned();
            if cursor.is_none() {
                break;
            }
        }
        let _ = client
            .server_info
            .set(init.get("serverInfo").cloned().unwrap_or(Json::Null));
        Ok((client, tools))
    }

    fn send(&self, msg: &Json) -> Result<(), HostError> {
        let mut line =
            serde_json::to_vec(msg).map_err(|e| err(&self.name, "mcp.encode", e.to_string()))?;
        line.push(b'\n');
        let mut w = lock(&self.stdin);
        w.write_all(&line)
            .and_then(|()| w.flush())
            .map_err(|e| self.dead(format!("cannot write to the server: {e}")))
    }

    fn dead(&self, what: String) -> HostError {
        let notes: Vec<String> = lock(&self.shared.notes).iter().cloned().collect();
        let mut e = err(&self.name, "mcp.closed", what);
        e.payload = json!({"server": self.name, "recent": notes});
        e
    }

    /// Sends a request and waits for its reply (timeout, cancellation).
    pub fn request(&self, method: &str, params: Json, cancel: &CancelToken) -> Reply {
        if !self.shared.alive.load(Ordering::SeqCst) {
            return Err(self.dead("the server is not running".into()));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = channel();
        lock(&self.shared.pending).insert(id, tx);
        if let Err(e) =
            self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        {
            lock(&self.shared.pending).remove(&id);
            return Err(e);
        }
        let start = Instant::now();
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(r) => return r,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(self.dead("the connection was lost".into()))
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            if cancel.is_cancelled() {
                lock(&self.shared.pending).remove(&id);
                let _ = self.send(
                    &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": id, "reason": "cancelled"}}),
                );
                return Err(HostError::new("cancelled", "the run was cancelled"));
            }
            if start.elapsed() >= self.timeout {
                lock(&self.shared.pending).remove(&id);
                return Err(err(
                    &self.name,
                    "mcp.timeout",
                    format!(
                        "`{method}` got no reply within {:.1} s",
                        self.timeout.as_secs_f64()
                    ),
                ));
            }
        }
    }

    /// `tools/call`: the tool's structured content if it has some, else the
    /// text of a single text item, else the content list. `isError` replies
    /// become `mcp.tool_error`.
    pub fn call_tool(&self, tool: &str, args: &Json, cancel: &CancelToken) -> Reply {
        let args = if args.is_null() {
            json!({})
        } else {
            args.clone()
        };
        let r = self.request(
            "tools/call",
            json!({"name": tool, "arguments": args}),
            cancel,
        )?;
        let content = r.get("content").cloned().unwrap_or(Json::Array(Vec::new()));
        let text_of = |c: &Json| -> String {
            c.as_array()
                .map(|xs| {
                    xs.iter()
                        .filter_map(|x| x.get("text").and_then(Json::as_str))
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default()
        };
        if r.get("isError").and_then(Json::as_bool) == Some(true) {
            let msg = text_of(&content);
            return Err(err(
                &self.name,
                "mcp.tool_error",
                format!("tool `{tool}` failed: {msg}"),
            )
            .with_payload(json!({"server": self.name, "tool": tool, "content": content})));
        }
        if let Some(s) = r.get("structuredContent").filter(|s| !s.is_null()) {
            return Ok(s.clone());
        }
        match content.as_array().map(Vec::as_slice) {
            Some([one]) if one.get("type").and_then(Json::as_str) == Some("text") => {
                Ok(one.get("text").cloned().unwrap_or(Json::Null))
            }
            _ => Ok(content),
        }
    }

    pub fn is_alive(&self) -> bool {
        self.shared.alive.load(Ordering::SeqCst)
    }
}

impl Drop for McpClient {
    fn drop(&mut self) {
        let mut c = lock(&self.child);
        let _ = c.kill();
        let _ = c.wait();
    }
}

fn parse_tool(server: &str, t: &Json) -> Result<McpTool, HostError> {
    let name = t
        .get("name")
        .and_then(Json::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            err(
                server,
                "mcp.protocol",
                format!("a tool without a name: {t}"),
            )
        })?;
    let ann = t.get("annotations");
    let hint = |k: &str| ann.and_then(|a| a.get(k)).and_then(Json::as_bool);
    let read_only = hint("readOnlyHint") == Some(true);
    let destructive = !read_only && hint("destructiveHint").unwrap_or(true);
    let schema = |k: &str| t.get(k).filter(|s| s.is_object()).cloned();
    Ok(McpTool {
        name: name.to_string(),
        description: t
            .get("description")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_string(),
        input_schema: schema("inputSchema"),
        output_schema: schema("outputSchema"),
        destructive,
        read_only,
    })
}
