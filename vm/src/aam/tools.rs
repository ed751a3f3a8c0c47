//! The tool side of the AAM: tool descriptions, per-tool concurrency
//! limits and subprocess tools.

use super::config::{secs, SubprocessConfig};
use super::mcp::McpClient;
use crate::host::{HostError, ToolFn};
use crate::llm::CancelToken;
use serde_json::{json, Value as Json};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Where a tool comes from; drives the default access policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A built-in tool that only reads (allowed by default).
    BuiltinReadOnly,
    /// A built-in tool that writes files (needs an allow).
    BuiltinWrite,
    /// A built-in tool that uses the network (needs an allow).
    BuiltinNetwork,
    /// Goals, inbox: the agent's own AAM state (always allowed).
    Aam,
    /// The `bash` tool (needs an allow).
    Shell,
    /// Declared in `[[tools.subprocess]]` (needs an allow).
    Subprocess,
    /// Imported from an MCP server (needs an allow).
    Mcp,
    /// Registered in process by the embedding program (trusted: allowed).
    Embedded,
    /// A remote agent the configuration names (`[[remote_agents]]`):
    /// allowed, since configuring it is the consent.
    Remote,
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Origin::BuiltinReadOnly => "builtin (read-only)",
            Origin::BuiltinWrite => "builtin (write)",
            Origin::BuiltinNetwork => "builtin (network)",
            Origin::Aam => "aam",
            Origin::Shell => "builtin (shell)",
            Origin::Subprocess => "subprocess",
            Origin::Mcp => "mcp",
            Origin::Embedded => "embedded",
            Origin::Remote => "remote agent",
        }
    }

    /// Allowed without an `[access]` entry (when `readonly_default` is on).
    pub fn allowed_by_default(self) -> bool {
        matches!(self, Origin::BuiltinReadOnly | Origin::Embedded)
    }
}

#[derive(Clone)]
pub enum Kind {
    Builtin,
    MemorySearch,
    /// `store_fact`: a tagged fact into LTM.
    StoreFact,
    Goals(&'static str),
    /// `enqueue` / `claim` on a named work queue (`super::queue`).
    Queue(&'static str),
    /// A remote agent over A2A (`super::remote`).
    Remote(Arc<super::remote::RemoteAgent>),
    Inbox,
    /// `bash` (`super::shell`).
    Shell,
    Subprocess(Arc<SubprocessConfig>),
    Mcp {
        client: Arc<McpClient>,
        remote: String,
        /// The input schema's properties as the server ordered them.
        param_order: Vec<String>,
    },
    Embedded(ToolFn),
}

/// A tool in the capability registry.
#[derive(Clone)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub origin: Origin,
    pub kind: Kind,
    pub input_schema: Option<Json>,
    pub output_schema: Option<Json>,
    pub destructive: bool,
    pub limit: Option<Arc<Limiter>>,
}

impl ToolSpec {
    pub fn describe(&self) -> Json {
        let mut d = json!({
            "name": self.name,
            "description": self.description,
            "origin": self.origin.name(),
            "destructive": self.destructive,
            "concurrency": self.limit.as_ref().map(|l| l.max),
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
        });
        // An MCP server's property order, which the parsed schema has
        // lost (`key_order`): the order positional arguments bind in.
        if let Kind::Mcp { param_order, .. } = &self.kind {
            if !param_order.is_empty() {
                d["param_order"] = json!(param_order);
            }
        }
        d
    }
}

/// A counting semaphore: at most `max` concurrent calls of one tool.
pub struct Limiter {
    pub max: usize,
    used: Mutex<usize>,
    cv: Condvar,
}

pub struct Permit<'a>(&'a Limiter);

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut u = self.0.used.lock().unwrap_or_else(|e| e.into_inner());
        *u = u.saturating_sub(1);
        self.0.cv.notify_one();
    }
}

impl Limiter {
    pub fn new(max: usize) -> Limiter {
        Limiter {
            max: max.max(1),
            used: Mutex::new(0),
            cv: Condvar::new(),
        }
    }

    /// Waits for a free slot (or cancellation).
    pub fn acquire(&self, cancel: &CancelToken) -> Result<Permit<'_>, HostError> {
        let mut u = self.used.lock().unwrap_or_else(|e| e.into_inner());
        while *u >= self.max {
            if cancel.is_cancelled() {
                return Err(HostError::new("cancelled", "the run was cancelled"));
            }
            u = self
                .cv
                .wait_timeout(u, Duration::from_millis(50))
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        *u += 1;
        Ok(Permit(self))
    }

    pub fn in_use(&self) -> usize {
        *self.used.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Largest stdout accepted from a subprocess tool.
const MAX_STDOUT: u64 = 16 * 1024 * 1024;
const MAX_STDERR: u64 = 64 * 1024;

fn tail(s: &str, n: usize) -> String {
    let chars: Vec<char> = s.chars().collect();
    chars[chars.len().saturating_sub(n)..].iter().collect()
}

/// A finished process: its status and what it wrote (each stream cut at
/// its limit; `*_cut` says whether it was).
pub struct Finished {
    pub status: std::process::ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_cut: bool,
    pub stderr_cut: bool,
}

/// Runs `cmd` to completion: writes `input` to its stdin, reads at most
/// `max_out` / `max_err` bytes of its output (draining the rest so it does
/// not block), kills it at `timeout` (`tool.timeout`) or when the run is
/// cancelled. `name` is the tool, for messages.
pub fn run_process(
    name: &str,
    mut cmd: Command,
    input: Vec<u8>,
    timeout: Duration,
    (max_out, max_err): (u64, u64),
    cancel: &CancelToken,
) -> Result<Finished, HostError> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group, the guardian's: ended with everything it
    // started when the call ends, is cancelled or times out, or `aisc`
    // dies ([`GroupGuard`]). The guardian exists before the tool starts.
    let guard = GroupGuard::start();
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(guard.pgid().unwrap_or(0));
    }
    let prog = cmd.get_program().to_string_lossy().into_owned();
    let mut child = cmd.spawn().map_err(|e| {
        HostError::new(
            "tool.spawn",
            format!("tool `{name}`: cannot start `{prog}`: {e}"),
        )
        .with_payload(json!({"tool": name}))
    })?;
    let stdin = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(mut s) = stdin {
            // A tool that does not read its input closes the pipe: fine.
            let _ = s.write_all(&input);
        }
    });
    let read = |r: Option<Box<dyn Read + Send>>, max: u64| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut cut = false;
            if let Some(mut r) = r {
                let _ = (&mut r).take(max).read_to_end(&mut buf);
                // Drain the rest so the process is not blocked on a full pipe.
                let mut sink = [0u8; 8192];
                while let Ok(n) = r.read(&mut sink) {
                    if n == 0 {
                        break;
                    }
                    cut = true;
                }
            }
            (buf, cut)
        })
    };
    let out_h = read(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        max_out,
    );
    let err_h = read(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        max_err,
    );
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(HostError::new("tool.io", format!("tool `{name}`: {e}")));
            }
        }
        if cancel.is_cancelled() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(HostError::new("cancelled", "the run was cancelled"));
        }
        if start.elapsed() >= timeout {
            let _ = child.kill();
            let _ = child.wait();
            let _ = writer.join();
            return Err(HostError::new(
                "tool.timeout",
                format!(
                    "tool `{name}` did not finish within {:.1} s and was killed",
                    timeout.as_secs_f64()
                ),
            )
            .with_payload(json!({"tool": name, "timeout_s": timeout.as_secs_f64()})));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // Whatever the tool left running in its group ends with the call
    // (and closes the pipes the readers below wait on).
    drop(guard);
    let _ = writer.join();
    let (stdout, stdout_cut) = out_h.join().unwrap_or_default();
    let (stderr, stderr_cut) = err_h.join().unwrap_or_default();
    Ok(Finished {
        status,
        stdout,
        stderr,
        stdout_cut,
        stderr_cut,
    })
}

/// Ends a tool's process group when the call is over, and when `aisc`
/// dies however it dies (kill -9 included), without unsafe code: a small
/// guardian shell leads a new process group, the tool is started in that
/// group, and the guardian blocks reading a pipe whose only writer is this
/// process. The write end is closed when the guard is dropped (the call
/// ended, was cancelled or timed out) or by the kernel when this process
/// dies; either way the guardian's `read` returns and it sends SIGKILL to
/// the whole group (the tool, anything it started, and itself). The
/// guardian starts first, so there is no moment when the tool runs
/// unguarded. The pipe is close-on-exec in this process, so no other child
/// holds it open. (`prctl(PR_SET_PDEATHSIG)` would need `pre_exec`, which
/// is unsafe, and covers only the direct child.) Where no `sh` can be
/// started the tool gets a group of its own, unguarded.
struct GroupGuard {
    guardian: Option<std::process::Child>,
}

impl GroupGuard {
    #[cfg(unix)]
    fn start() -> GroupGuard {
        use std::os::unix::process::CommandExt;
        let guardian = Command::new("sh")
            .args(["-c", "read _ ; kill -9 -$$ 2>/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .ok();
        GroupGuard { guardian }
    }

    #[cfg(not(unix))]
    fn start() -> GroupGuard {
        GroupGuard { guardian: None }
    }

    /// The group the tool joins (the guardian's).
    #[cfg_attr(not(unix), allow(dead_code))]
    fn pgid(&self) -> Option<i32> {
        self.guardian
            .as_ref()
            .and_then(|g| i32::try_from(g.id()).ok())
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(mut g) = self.guardian.take() {
            // Closing its stdin is the signal; then reap it.
            drop(g.stdin.take());
            let _ = g.wait();
        }
    }
}

std::thread_local! {
    /// The idempotency key of the tool call this thread is making
    /// ([`with_idempotency_key`]).
    static CALL_KEY: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` (one tool call, on this thread) with `key` as the call's
/// idempotency key: subprocess tools get it as `AIS_IDEMPOTENCY_KEY` in
/// their environment, MCP tools in the request's `_meta`.
pub(crate) fn with_idempotency_key<T>(key: Option<&str>, f: impl FnOnce() -> T) -> T {
    let before = CALL_KEY.with(|k| k.replace(key.map(str::to_string)));
    let r = f();
    CALL_KEY.with(|k| *k.borrow_mut() = before);
    r
}

/// The idempotency key of the call this thread is making, if any.
pub(crate) fn idempotency_key() -> Option<String> {
    CALL_KEY.with(|k| k.borrow().clone())
}

/// The environment variable a subprocess tool finds its call's
/// idempotency key in.
pub const IDEMPOTENCY_ENV: &str = "AIS_IDEMPOTENCY_KEY";

/// Runs a subprocess tool: `args` as JSON on stdin, one JSON value on stdout.
pub fn run_subprocess(
    cfg: &SubprocessConfig,
    args: &Json,
    cancel: &CancelToken,
) -> Result<Json, HostError> {
    let name = &cfg.name;
    let timeout = secs(cfg.timeout_s).unwrap_or(Duration::from_secs(30));
    let (prog, rest) = cfg
        .command
        .split_first()
        .ok_or_else(|| HostError::new("tool.config", format!("tool `{name}` has no command")))?;
    let mut cmd = Command::new(prog);
    cmd.args(rest).envs(&cfg.env);
    if let Some(k) = idempotency_key() {
        cmd.env(IDEMPOTENCY_ENV, k);
    }
    if let Some(d) = &cfg.cwd {
        cmd.current_dir(d);
    }
    let input = serde_json::to_vec(args).unwrap_or_default();
    let done = run_process(name, cmd, input, timeout, (MAX_STDOUT, MAX_STDERR), cancel)?;
    let status = done.status;
    let out = done.stdout;
    let err = done.stderr;
    let cut = done.stdout_cut;
    let stderr = String::from_utf8_lossy(&err).into_owned();
    if !status.success() {
        let code = status.code();
        return Err(HostError::new(
            "tool.exit",
            format!(
                "tool `{name}` exited with {}{}",
                code.map_or("a signal".to_string(), |c| format!("status {c}")),
                if stderr.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", tail(stderr.trim(), 300))
                }
            ),
        )
        .with_payload(json!({"tool": name, "status": code, "stderr": tail(&stderr, 2000)})));
    }
    if cut {
        return Err(HostError::new(
            "tool.bad_output",
            format!("tool `{name}` wrote more than {MAX_STDOUT} bytes"),
        )
        .with_payload(json!({"tool": name})));
    }
    let text = String::from_utf8_lossy(&out);
    serde_json::from_str::<Json>(text.trim()).map_err(|e| {
        let excerpt: String = text.chars().take(200).collect();
        HostError::new(
            "tool.bad_output",
            format!("tool `{name}` did not print one JSON value on stdout: {e}"),
        )
        .with_payload(json!({"tool": name, "stdout": excerpt}))
    })
}
