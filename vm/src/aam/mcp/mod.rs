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
//! [`McpServer`] starts a configured server lazily, on first use
//! (`server.rs`). Here: the client, its process and the reader thread;
//! `version.rs` the negotiation, `requests.rs` one request and its reply,
//! `tool_calls.rs` listing and calling tools.

mod requests;
mod server;
mod tool_calls;
mod version;

pub use server::McpServer;

use super::config::{secs, McpServerConfig};
use crate::host::HostError;
use crate::llm::CancelToken;
use crate::sync::lock;
use ais_wire::rpc::{self, Reply as Received};
use serde_json::{json, Value as Json};
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tool_calls::with_param_orders;
use version::Probe;

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

    pub fn is_alive(&self) -> bool {
        self.shared.alive.load(Ordering::SeqCst)
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
