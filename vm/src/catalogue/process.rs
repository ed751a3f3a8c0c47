//! Running a tool's process: its own process group, killed with
//! everything it started when the call ends, times out or is cancelled, or
//! when `aisc` dies; output bounded; and the call's idempotency key for
//! subprocess and MCP tools.

use crate::host::HostError;
use crate::llm::CancelToken;
use serde_json::json;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Largest stdout accepted from a subprocess tool.
pub(crate) const MAX_STDOUT: u64 = 16 * 1024 * 1024;
pub(crate) const MAX_STDERR: u64 = 64 * 1024;

pub(crate) fn tail(s: &str, n: usize) -> String {
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
pub fn with_idempotency_key<T>(key: Option<&str>, f: impl FnOnce() -> T) -> T {
    let before = CALL_KEY.with(|k| k.replace(key.map(str::to_string)));
    let r = f();
    CALL_KEY.with(|k| *k.borrow_mut() = before);
    r
}

/// The idempotency key of the call this thread is making, if any.
pub fn idempotency_key() -> Option<String> {
    CALL_KEY.with(|k| k.borrow().clone())
}

/// The environment variable a subprocess tool finds its call's
/// idempotency key in.
pub const IDEMPOTENCY_ENV: &str = "AIS_IDEMPOTENCY_KEY";
