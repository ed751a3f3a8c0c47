//! A Model Context Protocol client over stdio: newline-delimited JSON-RPC
//! 2.0 to a child process, written by hand on threads (no async runtime).
//!
//! Version negotiation (dual-era, as the 2026-07-28 revision describes for
//! stdio): the client first probes with `server/discover`, carrying the
//! modern version [`MODERN_VERSION`] in `_meta`. A server that lists it is
//! spoken to statelessly: every request carries the version, client info
//! and capabilities in `_meta`. A server that answers the probe with any
//! other JSON-RPC error (typically -32601) is a legacy server: it gets the
//! `initialize` handshake with the newest legacy version
//! ([`LEGACY_VERSIONS`]`[0]`) and must answer one of [`LEGACY_VERSIONS`].
//! A server that does not answer the probe at all (or exits) is restarted
//! before `initialize`, since it may be in an undefined state. Any version
//! outside [`PROTOCOL_VERSIONS`] fails with `mcp.protocol_version`, naming
//! both sides' versions.
//!
//! Then `tools/list` (following `nextCursor`); calls are `tools/call`. A
//! reader thread routes responses to waiting callers by id; requests from
//! the server (e.g. `roots/list`) are answered with JSON-RPC error -32601;
//! notifications are ignored. A request that times out or whose run is
//! cancelled gets `notifications/cancelled` (except `initialize`, which
//! the spec forbids cancelling), and its late reply is dropped.
//!
//! Lines on stdout that are not JSON are skipped, but remembered: a request
//! that then fails (no reply, server gone) is reported as `mcp.not_json`,
//! quoting the line, because that is nearly always the real cause (a banner
//! or log line printed to stdout instead of stderr).
//!
//! [`McpServer`] starts a configured server lazily, on first use.

use super::config::{secs, McpServerConfig};
use crate::host::HostError;
use crate::llm::CancelToken;
use crate::sync::lock;
use ais_wire::mcp::{method, Hints};
use ais_wire::rpc::{self, Reply as Received};
use serde_json::{json, Value as Json};
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The stateless revision (per-request `_meta`, `server/discover`), the
/// handshake (`initialize`) revisions, and every revision this client
/// speaks, newest first (one list for client and server: `ais_wire::mcp`).
pub use ais_wire::mcp::{CLIENT_VERSIONS as PROTOCOL_VERSIONS, LEGACY_VERSIONS, MODERN_VERSION};
/// Longest line accepted from a server.
const MAX_LINE: u64 = 32 * 1024 * 1024;
/// How long the `server/discover` probe waits before treating the server as
/// a legacy one that ignores unknown requests (capped by the server's timeout).
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an error waits for a server that closed stdout to exit and for
/// its stderr to drain (so the error can say why it exited).
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// How much of an offending stdout line an error quotes.
const QUOTE_CHARS: usize = 160;

type Reply = Result<Json, HostError>;

/// A tool a server offers.
#[derive(Clone, Debug)]
pub struct McpTool {
    pub name: String,
    pub description: String,
    pub input_schema: Option<Json>,
    /// The input schema's property names in the order the server wrote
    /// them (`key_order`): the order positional arguments bind in.
    pub param_order: Vec<String>,
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
    /// The stderr reader reached the end (the server and any process
    /// sharing its stderr are gone).
    stderr_done: AtomicBool,
    /// Lines on stdout that were not JSON, and the latest of them.
    not_json: AtomicU64,
    last_not_json: Mutex<Option<String>>,
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

/// `s` cut to `n` characters, with `…` when cut.
fn truncate(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if s.chars().nth(n).is_some() {
        out.push('…');
    }
    out
}

pub struct McpClient {
    pub name: String,
    child: Mutex<Child>,
    stdin: Mutex<ChildStdin>,
    shared: Arc<Shared>,
    next_id: AtomicU64,
    timeout: Duration,
    /// The negotiated protocol version.
    version: OnceLock<String>,
    /// Start-up is over: from now on only non-JSON lines printed during a
    /// request are blamed for its failure (before, any line since spawn is).
    started: AtomicBool,
    /// `serverInfo` from the `initialize` or `server/discover` reply.
    pub server_info: OnceLock<Json>,
}

fn err(server: &str, code: &str, message: String) -> HostError {
    HostError::new(code, format!("MCP server `{server}`: {message}"))
        .with_payload(json!({"server": server}))
}

fn client_info() -> Json {
    json!({"name": "apxm-ais", "version": env!("CARGO_PKG_VERSION")})
}

/// What the `server/discover` probe found out.
enum Probe {
    /// The server speaks [`MODERN_VERSION`].
    Modern(Json),
    /// A legacy server; `restart` when it did not answer cleanly.
    Legacy { restart: bool },
}

impl McpClient {
    /// Starts the server, negotiates the protocol version and lists its tools.
    pub fn start(
        cfg: &McpServerConfig,
        cancel: &CancelToken,
    ) -> Result<(Arc<McpClient>, Vec<McpTool>), HostError> {
        let mut client = McpClient::spawn(cfg)?;
        match client.discover(cancel)? {
            Probe::Modern(info) => {
                let _ = client.version.set(MODERN_VERSION.to_string());
                let _ = client.server_info.set(info);
            }
            Probe::Legacy { restart } => {
                if restart {
                    drop(client);
                    client = McpClient::spawn(cfg)?;
                }
                client.initialize(cancel)?;
            }
        }
        let tools = client.list_tools(cancel)?;
        client.started.store(true, Ordering::SeqCst);
        Ok((client, tools))
    }

    fn spawn(cfg: &McpServerConfig) -> Result<Arc<McpClient>, HostError> {
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
            stderr_done: AtomicBool::new(false),
            not_json: AtomicU64::new(0),
            last_not_json: Mutex::default(),
        });
        let client = Arc::new(McpClient {
            name: name.clone(),
            child: Mutex::new(child),
            stdin: Mutex::new(stdin),
            shared: shared.clone(),
            next_id: AtomicU64::new(1),
            timeout,
            version: OnceLock::new(),
            started: AtomicBool::new(false),
            server_info: OnceLock::new(),
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
                    sh.stderr_done.store(true, Ordering::SeqCst);
                })
                .map_err(|e| err(&name, "mcp.spawn", e.to_string()))?;
        }
        // stdout: route replies; answer server requests.
        {
            let weak = Arc::downgrade(&client);
            let server = name.clone();
            std::thread::Builder::new()
                .name(format!("mcp-{name}-reader"))
                .spawn(move || read_loop(stdout, &shared, &server, &weak))
                .map_err(|e| err(&name, "mcp.spawn", e.to_string()))?;
        }
        Ok(client)
    }

    /// `_meta` of a modern request.
    fn meta() -> Json {
        let mut meta = serde_json::Map::new();
        meta.insert(
            ais_wire::mcp::meta::PROTOCOL_VERSION.into(),
            MODERN_VERSION.into(),
        );
        meta.insert(ais_wire::mcp::meta::CLIENT_INFO.into(), client_info());
        meta.insert(ais_wire::mcp::meta::CLIENT_CAPABILITIES.into(), json!({}));
        Json::Object(meta)
    }

    fn is_modern(&self) -> bool {
        self.version.get().is_some_and(|v| v == MODERN_VERSION)
    }

    /// The negotiated protocol version (once started).
    pub fn protocol_version(&self) -> Option<&str> {
        self.version.get().map(String::as_str)
    }

    /// `mcp.protocol_version`: the server speaks `theirs`, none of ours.
    fn version_error(&self, theirs: &[&str], ours: &str) -> HostError {
        let quoted = |vs: &[&str]| {
            vs.iter()
                .map(|v| format!("`{v}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let said = match theirs {
            [] => "names no protocol version".to_string(),
            [one] => format!("speaks protocol version `{one}`"),
            many => format!("speaks protocol versions {}", quoted(many)),
        };
        err(
            &self.name,
            "mcp.protocol_version",
            format!(
                "the server {said}, but this client asked for `{ours}` and speaks only {}",
                quoted(PROTOCOL_VERSIONS)
            ),
        )
        .with_payload(json!({"server": self.name, "server_versions": theirs,
                             "requested": ours, "supported": PROTOCOL_VERSIONS}))
    }

    fn discover(&self, cancel: &CancelToken) -> Result<Probe, HostError> {
        let params = json!({"_meta": McpClient::meta()});
        let wait = self.timeout.min(PROBE_TIMEOUT);
        match self.request_with(method::DISCOVER, params, cancel, wait, 0) {
            Ok(r) => {
                let versions: Vec<&str> = r
                    .get("supportedVersions")
                    .and_then(Json::as_array)
                    .map(|v| v.iter().filter_map(Json::as_str).collect())
                    .unwrap_or_default();
                if versions.contains(&MODERN_VERSION) {
                    Ok(Probe::Modern(
                        r.get("serverInfo").cloned().unwrap_or(Json::Null),
                    ))
                } else if versions.iter().any(|v| LEGACY_VERSIONS.contains(v)) {
                    // It answers the probe yet lists only handshake versions.
                    Ok(Probe::Legacy { restart: false })
                } else {
                    Err(self.version_error(&versions, MODERN_VERSION))
                }
            }
            Err(e) if e.code == "mcp.rpc_error" => {
                // UnsupportedProtocolVersionError: a modern server that lists
                // what it speaks in `data.supported`; it has no `initialize`.
                match e.payload["error"]["data"]["supported"].as_array() {
                    Some(list) => {
                        let theirs: Vec<&str> = list.iter().filter_map(Json::as_str).collect();
                        Err(self.version_error(&theirs, MODERN_VERSION))
                    }
                    None => Ok(Probe::Legacy { restart: false }),
                }
            }
            Err(e) if e.code == "mcp.timeout" || e.code == "mcp.closed" => {
                Ok(Probe::Legacy { restart: true })
            }
            Err(e) => Err(e),
        }
    }

    fn initialize(&self, cancel: &CancelToken) -> Result<(), HostError> {
        let ours = LEGACY_VERSIONS[0];
        let init = self.request(
            method::INITIALIZE,
            json!({"protocolVersion": ours, "capabilities": {}, "clientInfo": client_info()}),
            cancel,
        )?;
        let Some(theirs) = init.get("protocolVersion").and_then(Json::as_str) else {
            return Err(err(
                &self.name,
                "mcp.protocol",
                "the `initialize` reply has no protocolVersion".into(),
            ));
        };
        if !LEGACY_VERSIONS.contains(&theirs) {
            return Err(self.version_error(&[theirs], ours));
        }
        let _ = self.version.set(theirs.to_string());
        let _ = self
            .server_info
            .set(init.get("serverInfo").cloned().unwrap_or(Json::Null));
        self.send(&rpc::notification(method::INITIALIZED, None))
    }

    fn list_tools(&self, cancel: &CancelToken) -> Result<Vec<McpTool>, HostError> {
        let mut tools = Vec::new();
        let mut cursor: Option<Json> = None;
        for _ in 0..1000 {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = self.request(method::TOOLS_LIST, params, cancel)?;
            let list = page.get("tools").and_then(Json::as_array).ok_or_else(|| {
                err(
                    &self.name,
                    "mcp.protocol",
                    "`tools/list` returned no `tools` list".into(),
                )
            })?;
            for t in list {
                tools.push(parse_tool(&self.name, t)?);
            }
            cursor = page.get("nextCursor").filter(|c| !c.is_null()).cloned();
            if cursor.is_none() {
                break;
            }
        }
        Ok(tools)
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

    /// `e` (the server closed its output) with how it exited and the end of
    /// its stderr, which usually say why (a missing module, a bad flag).
    /// Waits briefly for the exit and for stderr to drain: the reader sees
    /// the end of stdout a moment before both.
    fn explain_exit(&self, mut e: HostError) -> HostError {
        let mut status = None;
        wait_until(|| {
            status = lock(&self.child).try_wait().ok().flatten();
            status.is_some()
        });
        if status.is_some() {
            wait_until(|| self.shared.stderr_done.load(Ordering::SeqCst));
        }
        let stderr: Vec<String> = lock(&self.shared.notes)
            .iter()
            .filter_map(|n| n.strip_prefix("stderr: "))
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| truncate(l, QUOTE_CHARS))
            .collect();
        // The line that names the error beats the trailer after a stack
        // trace (Node ends with its version, Python with the exception).
        let telling = stderr.iter().find(|l| {
            let l = l.to_lowercase();
            [
                "error",
                "fatal",
                "panic",
                "exception",
                "cannot",
                "not found",
                "denied",
            ]
            .iter()
            .any(|w| l.contains(w))
        });
        let shown = match telling {
            Some(l) => l.clone(),
            None => stderr[stderr.len().saturating_sub(3)..].join(" / "),
        };
        if let Some(st) = status {
            e.message = format!("MCP server `{}`: the server exited ({st})", self.name);
        }
        if !shown.is_empty() {
            e.message.push_str(&format!("; its stderr says: `{shown}`"));
        }
        e.payload["exit_code"] = json!(status.and_then(|s| s.code()));
        e.payload["stderr"] = json!(stderr);
        e
    }

    /// If the server printed non-JSON on stdout since `baseline`, the error
    /// that says so (the likely cause of `failure`).
    fn not_json_since(
        &self,
        baseline: u64,
        method: &str,
        failure: &HostError,
    ) -> Option<HostError> {
        if self.shared.not_json.load(Ordering::SeqCst) <= baseline {
            return None;
        }
        let line = lock(&self.shared.last_not_json).clone().unwrap_or_default();
        let quoted = truncate(&line, QUOTE_CHARS);
        Some(
            err(
                &self.name,
                "mcp.not_json",
                format!(
                    "the server printed a line that is not JSON-RPC on stdout: `{quoted}` \
                     (an MCP server must write only protocol messages to stdout and log to \
                     stderr); then `{method}` failed: {}",
                    failure.message
                ),
            )
            .with_payload(json!({
                "server": self.name,
                "line": quoted,
                "method": method,
                "cause": failure.code,
            })),
        )
    }

    fn cancel_notice(&self, id: u64, method: &str, reason: &str) {
        // The spec forbids cancelling `initialize`.
        if method != method::INITIALIZE {
            let _ = self.send(&rpc::notification(
                method::CANCELLED,
                Some(json!({"requestId": id, "reason": reason})),
            ));
        }
    }

    /// Sends a request and waits for its reply (timeout, cancellation).
    pub fn request(&self, method: &str, mut params: Json, cancel: &CancelToken) -> Reply {
        if self.is_modern() {
            if let Some(p) = params.as_object_mut() {
                p.insert("_meta".into(), McpClient::meta());
            }
        }
        let baseline = if self.started.load(Ordering::SeqCst) {
            self.shared.not_json.load(Ordering::SeqCst)
        } else {
            0
        };
        let r = self.request_with(method, params, cancel, self.timeout, baseline)?;
        if self.is_modern() && r.get("resultType").and_then(Json::as_str) == Some("input_required")
        {
            return Err(err(
                &self.name,
                "mcp.input_required",
                format!("`{method}` asks the client for input (multi round-trip requests), which this client does not provide"),
            ));
        }
        Ok(r)
    }

    fn request_with(
        &self,
        method: &str,
        params: Json,
        cancel: &CancelToken,
        timeout: Duration,
        baseline: u64,
    ) -> Reply {
        let r = self.exchange(method, params, cancel, timeout);
        match r {
            Err(e) if e.code == "mcp.timeout" => {
                Err(self.not_json_since(baseline, method, &e).unwrap_or(e))
            }
            Err(e) if e.code == "mcp.closed" => {
                let e = self.explain_exit(e);
                Err(self.not_json_since(baseline, method, &e).unwrap_or(e))
            }
            other => other,
        }
    }

    fn exchange(
        &self,
        method: &str,
        params: Json,
        cancel: &CancelToken,
        timeout: Duration,
    ) -> Reply {
        if !self.shared.alive.load(Ordering::SeqCst) {
            return Err(self.dead("the server is not running".into()));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = channel();
        lock(&self.shared.pending).insert(id, tx);
        if let Err(e) = self.send(&rpc::request(id.into(), method, params)) {
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
            // Removing the id first makes the reader drop a late reply.
            if cancel.is_cancelled() {
                lock(&self.shared.pending).remove(&id);
                self.cancel_notice(id, method, "the run was cancelled");
                return Err(HostError::new("cancelled", "the run was cancelled"));
            }
            if start.elapsed() >= timeout {
                lock(&self.shared.pending).remove(&id);
                let what = format!("no reply within {:.1} s", timeout.as_secs_f64());
                self.cancel_notice(id, method, &format!("timed out: {what}"));
                return Err(
                    err(&self.name, "mcp.timeout", format!("`{method}` got {what}")).with_payload(
                        json!({"server": self.name, "method": method, "request_id": id}),
                    ),
                );
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
        let mut params = json!({"name": tool, "arguments": args});
        // The call's idempotency key, the same across retries of a call
        // left in doubt: a server that deduplicates can use it.
        if let Some(k) = super::tools::idempotency_key() {
            params["_meta"] = json!({ "ais/idempotency_key": k });
        }
        let r = self.request(method::TOOLS_CALL, params, cancel)?;
        ais_wire::mcp::call_value(&r).map_err(|failed| {
            err(
                &self.name,
                "mcp.tool_error",
                format!("tool `{tool}` failed: {}", failed.text),
            )
            .with_payload(json!({"server": self.name, "tool": tool, "content": failed.content}))
        })
    }

    pub fn is_alive(&self) -> bool {
        self.shared.alive.load(Ordering::SeqCst)
    }
}

/// Polls `done` for up to [`EXIT_GRACE`].
fn wait_until(mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() && start.elapsed() < EXIT_GRACE {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The stdout reader thread: routes replies, answers server requests,
/// remembers lines that are not JSON.
fn read_loop(stdout: impl Read, sh: &Shared, server: &str, weak: &std::sync::Weak<McpClient>) {
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
        let Ok(msg) = serde_json::from_str::<Json>(text) else {
            sh.note(format!(
                "protocol: not JSON: {}",
                truncate(text, QUOTE_CHARS)
            ));
            *lock(&sh.last_not_json) = Some(text.to_string());
            sh.not_json.fetch_add(1, Ordering::SeqCst);
            continue;
        };
        match rpc::classify_reply(&msg) {
            Received::Request { id, .. } => {
                // A request from the server: we offer nothing.
                if let Some(c) = weak.upgrade() {
                    let _ = c.send(&rpc::error(
                        id.clone(),
                        rpc::METHOD_NOT_FOUND,
                        "method not supported by this client",
                        None,
                    ));
                }
            }
            Received::Notification { .. } => {}
            Received::Response { id, outcome } => {
                let Some(n) = id.as_u64() else {
                    sh.note(format!("protocol: reply with unexpected id {id}"));
                    continue;
                };
                let tx = lock(&sh.pending).remove(&n);
                let Some(tx) = tx else {
                    continue; // late reply to a timed-out or cancelled request
                };
                let reply = match outcome {
                    Err(e) => Err(err(server, "mcp.rpc_error", rpc::error_message(e).into())
                        .with_payload(json!({"server": server, "error": e}))),
                    Ok(result) => {
                        let mut result = result.clone();
                        with_param_orders(&mut result, text);
                        Ok(result)
                    }
                };
                let _ = tx.send(reply);
            }
            Received::Junk => sh.note("protocol: a message with neither id nor method".into()),
        }
    }
    sh.alive.store(false, Ordering::SeqCst);
    // Fail everything still waiting.
    let waiting: Vec<Sender<Reply>> = lock(&sh.pending).drain().map(|(_, t)| t).collect();
    for t in waiting {
        let _ = t.send(Err(err(
            server,
            "mcp.closed",
            "the server closed its output (exited?)".into(),
        )));
    }
}

impl Drop for McpClient {
    fn drop(&mut self) {
        let mut c = lock(&self.child);
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Marks each tool of a `tools/list` result with the order its
/// `inputSchema` properties have in the reply's text (lost once parsed).
fn with_param_orders(result: &mut Json, text: &str) {
    let Some(tools) = result.get_mut("tools").and_then(Json::as_array_mut) else {
        return;
    };
    let orders = super::key_order::tool_param_orders(text);
    for (i, t) in tools.iter_mut().enumerate() {
        if let Some(t) = t.as_object_mut() {
            t.remove(super::key_order::PARAM_ORDER);
            if let Some(o) = orders.get(i).filter(|o| !o.is_empty()) {
                t.insert(super::key_order::PARAM_ORDER.into(), json!(o));
            }
        }
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
    let Hints {
        read_only,
        destructive,
    } = Hints::of(t);
    let schema = |k: &str| t.get(k).filter(|s| s.is_object()).cloned();
    Ok(McpTool {
        name: name.to_string(),
        description: t
            .get("description")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_string(),
        input_schema: schema("inputSchema"),
        param_order: t
            .get(super::key_order::PARAM_ORDER)
            .and_then(Json::as_array)
            .map(|o| {
                o.iter()
                    .filter_map(Json::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        output_schema: schema("outputSchema"),
        destructive,
        read_only,
    })
}

/// Where a configured server is in its life.
enum State {
    NotStarted,
    Running(Arc<McpClient>),
    /// Start-up failed; every later use gets the same error (no retry
    /// storm against a broken command).
    Failed(HostError),
}

/// A configured server, started on first use (see `docs/runtime.md`).
pub struct McpServer {
    pub config: McpServerConfig,
    state: Mutex<State>,
}

impl McpServer {
    pub fn new(config: McpServerConfig) -> McpServer {
        McpServer {
            config,
            state: Mutex::new(State::NotStarted),
        }
    }

    /// Could this server provide `tool` (a registered, prefixed name)?
    pub fn may_provide(&self, tool: &str) -> bool {
        tool.starts_with(&self.config.prefix())
    }

    /// Starts the server unless it ran or failed already; `register` gets
    /// the tools of a fresh start (under the lock, so no caller sees the
    /// server running before its tools are registered). A cancelled start
    /// is not remembered as a failure.
    pub fn ensure_started(
        &self,
        cancel: &CancelToken,
        register: impl FnOnce(&Arc<McpClient>, Vec<McpTool>),
    ) -> Result<Arc<McpClient>, HostError> {
        let mut st = lock(&self.state);
        match &*st {
            State::Running(c) => return Ok(c.clone()),
            State::Failed(e) => return Err(e.clone()),
            State::NotStarted => {}
        }
        match McpClient::start(&self.config, cancel) {
            Ok((client, tools)) => {
                register(&client, tools);
                *st = State::Running(client.clone());
                Ok(client)
            }
            Err(e) if e.code == "cancelled" => Err(e),
            Err(e) => {
                *st = State::Failed(e.clone());
                Err(e)
            }
        }
    }

    /// `{name, state, protocol_version?, server_info?, error?}`.
    pub fn status(&self) -> Json {
        let name = &self.config.name;
        match &*lock(&self.state) {
            State::NotStarted => json!({"name": name, "state": "not started"}),
            State::Running(c) => json!({
                "name": name,
                "state": if c.is_alive() { "running" } else { "exited" },
                "protocol_version": c.protocol_version(),
                "server_info": c.server_info.get(),
            }),
            State::Failed(e) => json!({
                "name": name,
                "state": "failed",
                "error": {"code": e.code, "message": e.message},
            }),
        }
    }
}
