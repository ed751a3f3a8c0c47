//! One request and its reply: written to the server's stdin, routed back
//! by id from the reader thread, timed out or cancelled (with
//! `notifications/cancelled`), and a failure explained (the server's
//! exit, its stderr, a non-JSON line it printed).

use super::{err, truncate, McpClient, Reply, EXIT_GRACE, QUOTE_CHARS};
use crate::host::HostError;
use crate::llm::CancelToken;
use crate::sync::lock;
use ais_wire::mcp::method;
use ais_wire::rpc;
use serde_json::{json, Value as Json};
use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::time::{Duration, Instant};

impl McpClient {
    pub(super) fn send(&self, msg: &Json) -> Result<(), HostError> {
        let mut line =
            serde_json::to_vec(msg).map_err(|e| err(&self.name, "mcp.encode", e.to_string()))?;
        line.push(b'\n');
        let mut w = lock(&self.stdin);
        w.write_all(&line)
            .and_then(|()| w.flush())
            .map_err(|e| self.dead(format!("cannot write to the server: {e}")))
    }

    pub(super) fn dead(&self, what: String) -> HostError {
        let notes: Vec<String> = lock(&self.shared.notes).iter().cloned().collect();
        let mut e = err(&self.name, "mcp.closed", what);
        e.payload = json!({"server": self.name, "recent": notes});
        e
    }

    /// `e` (the server closed its output) with how it exited and the end of
    /// its stderr, which usually say why (a missing module, a bad flag).
    /// Waits briefly for the exit and for stderr to drain: the reader sees
    /// the end of stdout a moment before both.
    pub(super) fn explain_exit(&self, mut e: HostError) -> HostError {
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
    pub(super) fn not_json_since(
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

    pub(super) fn cancel_notice(&self, id: u64, method: &str, reason: &str) {
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

    pub(super) fn request_with(
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

    pub(super) fn exchange(
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
}

/// Polls `done` for up to [`EXIT_GRACE`].
fn wait_until(mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() && start.elapsed() < EXIT_GRACE {
        std::thread::sleep(Duration::from_millis(5));
    }
}
