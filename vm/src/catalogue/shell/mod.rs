//! The built-in `bash` tool: a shell command, run in the workspace.
//!
//! `{command, cwd?, timeout_s?}` runs `bash -c command` with the working
//! directory inside the configured workspace (`cwd` is relative to it and
//! may not leave it), a clean environment (`PATH`, `LANG`, `HOME` = the
//! workspace), a timeout (default 30 s, at most 600; `tool.timeout` and the
//! process is killed) and each output stream cut at 64 KiB. It is denied
//! unless `[access]` allows it, like every tool that changes the world.
//! The result is `{exit_code, stdout, stderr, truncated}`: a failing
//! command is an answer (its exit code), not a tool failure.
//!
//! Confinement (`[tools] sandbox`, default `"bwrap"`): the command runs
//! under bubblewrap (`bwrap`, Debian package `bubblewrap`, unprivileged
//! through user namespaces) in a new mount, PID, network, IPC, UTS and
//! user namespace. It sees the workspace (read-write, at its own path),
//! the system's programs and libraries (`/usr` and its `/bin`, `/lib`
//! links, read-only), a few files of `/etc` it needs to run programs
//! (read-only), a private `/tmp`, `/proc` and a minimal `/dev`; nothing
//! else of the file system (no home directory, no `/etc/passwd`, no other
//! project). The workspace's label sidecar (`crate::catalogue::labels`)
//! is mounted read-only over itself. No network. Every process it starts,
//! in the background or in a new session, lives in its PID namespace and
//! ends when the call ends (finished, timed out, cancelled) or `aisc`
//! dies (`--die-with-parent`). Not guaranteed: the limits of the kernel's
//! namespaces (a kernel bug), CPU and memory use (no cgroup limits), and
//! what the programs under `/usr` can do with the workspace. When `bwrap`
//! is missing or cannot create its namespaces, `bash` is refused
//! (`tool.sandbox`) unless the configuration opts out with
//! `sandbox = "none"`: then only the working directory is confined and
//! the process group is killed at the end of the call (a job that starts
//! its own session survives that).

use super::process::run_process;
use super::provider::ToolProvider;
use crate::host::HostError;
use crate::llm::CancelToken;
use serde_json::{json, Value as Json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Bytes of each output stream kept.
pub const MAX_OUTPUT: u64 = 64 * 1024;
/// Timeout when the call gives none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest timeout a call may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// How `bash` is confined (`[tools] sandbox`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sandbox {
    /// bubblewrap; refused when it is missing.
    #[default]
    Bwrap,
    /// No confinement beyond the working directory (explicit opt-out).
    None,
}

/// The workspace's label sidecar, which a command may read but not change.
const SIDECAR: &str = super::labels::SIDECAR;

/// The `bash` tool of one workspace.
pub struct Shell {
    pub workspace: PathBuf,
    pub sandbox: Sandbox,
}

impl ToolProvider for Shell {
    fn kind(&self) -> &'static str {
        "shell"
    }

    fn call(&self, _tool: &str, args: &Json, cancel: &CancelToken) -> Result<Json, HostError> {
        run_bash(&self.workspace, self.sandbox, args, cancel)
    }
}

/// `bwrap` on `PATH`, if any.
fn find_bwrap() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("bwrap"))
        .find(|p| p.is_file())
}

/// The bubblewrap command line around `bash -c command` (module docs).
fn confined(bwrap: &Path, root: &Path, dir: &Path, command: &str) -> Command {
    let mut cmd = Command::new(bwrap);
    cmd.args(["--unshare-all", "--die-with-parent", "--new-session"])
        .args(["--ro-bind", "/usr", "/usr"]);
    for top in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
        let p = Path::new(top);
        match std::fs::read_link(p) {
            Ok(target) => {
                cmd.arg("--symlink").arg(target).arg(top);
            }
            Err(_) if p.is_dir() => {
                cmd.args(["--ro-bind", top, top]);
            }
            Err(_) => {}
        }
    }
    for etc in [
        "/etc/alternatives",
        "/etc/ld.so.cache",
        "/etc/ld.so.conf",
        "/etc/ld.so.conf.d",
        "/etc/localtime",
        "/etc/nsswitch.conf",
    ] {
        cmd.args(["--ro-bind-try", etc, etc]);
    }
    cmd.args(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"])
        .arg("--bind")
        .arg(root)
        .arg(root);
    let sidecar = root.join(SIDECAR);
    if sidecar.exists() {
        cmd.arg("--ro-bind").arg(&sidecar).arg(&sidecar);
    }
    cmd.arg("--chdir")
        .arg(dir)
        .args(["--", "bash", "-c"])
        .arg(command);
    cmd
}

/// The tool's argument schema.
pub fn input_schema() -> Json {
    json!({
        "type": "object",
        "required": ["command"],
        "properties": {
            "command": {"type": "string"},
            "cwd": {"type": "string"},
            "timeout_s": {"type": "number", "exclusiveMinimum": 0}
        }
    })
}

fn bad(message: impl Into<String>) -> HostError {
    HostError::new("tool.invalid_args", message).with_payload(json!({"tool": "bash"}))
}

/// The working directory: `cwd` inside `workspace` (which must exist).
fn working_dir(workspace: &Path, cwd: Option<&str>) -> Result<PathBuf, HostError> {
    let root = workspace.canonicalize().map_err(|e| {
        HostError::new(
            "tool.config",
            format!("the workspace `{}` is not usable: {e}", workspace.display()),
        )
    })?;
    let Some(rel) = cwd else {
        return Ok(root);
    };
    let dir = root.join(rel).canonicalize().map_err(|e| {
        bad(format!(
            "`bash`: the working directory `{rel}` does not exist: {e}"
        ))
    })?;
    if !dir.starts_with(&root) {
        return Err(HostError::new(
            "tool.outside_workspace",
            format!("`bash`: the working directory `{rel}` is outside the workspace"),
        )
        .with_payload(json!({"tool": "bash", "cwd": rel})));
    }
    Ok(dir)
}

/// Runs one `bash` call.
pub fn run_bash(
    workspace: &Path,
    sandbox: Sandbox,
    args: &Json,
    cancel: &CancelToken,
) -> Result<Json, HostError> {
    let command = args
        .get("command")
        .and_then(Json::as_str)
        .ok_or_else(|| bad("`bash` needs a string argument `command`"))?;
    let cwd = match args.get("cwd") {
        None | Some(Json::Null) => None,
        Some(Json::String(s)) => Some(s.as_str()),
        Some(_) => return Err(bad("`bash`: `cwd` must be a string")),
    };
    let timeout = match args.get("timeout_s") {
        None | Some(Json::Null) => DEFAULT_TIMEOUT,
        Some(v) => match v.as_f64() {
            Some(s) if s.is_finite() && s > 0.0 => Duration::from_secs_f64(s).min(MAX_TIMEOUT),
            _ => return Err(bad("`bash`: `timeout_s` must be a positive number")),
        },
    };
    let dir = working_dir(workspace, cwd)?;
    let root = working_dir(workspace, None)?;
    let mut cmd = match sandbox {
        Sandbox::Bwrap => {
            let Some(bwrap) = find_bwrap() else {
                return Err(HostError::new(
                    "tool.sandbox",
                    "`bash` runs confined by bubblewrap, and `bwrap` is not on PATH: install it (Debian: `apt-get install bubblewrap`) or set `[tools] sandbox = \"none\"` in .apxm/config.toml to run commands unconfined",
                )
                .with_payload(json!({"tool": "bash"})));
            };
            confined(&bwrap, &root, &dir, command)
        }
        Sandbox::None => {
            let mut c = Command::new("bash");
            c.arg("-c").arg(command);
            c
        }
    };
    cmd.current_dir(&dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("LANG", "C.UTF-8")
        .env("HOME", &dir);
    let done = run_process(
        "bash",
        cmd,
        Vec::new(),
        timeout,
        (MAX_OUTPUT, MAX_OUTPUT),
        cancel,
    )?;
    let stderr = String::from_utf8_lossy(&done.stderr);
    if sandbox == Sandbox::Bwrap && done.status.code() == Some(1) && stderr.starts_with("bwrap:") {
        // The sandbox could not be set up: nothing ran.
        return Err(HostError::new(
            "tool.sandbox",
            format!(
                "`bash`: bubblewrap could not confine the command ({}); set `[tools] sandbox = \"none\"` to run commands unconfined",
                stderr.trim()
            ),
        )
        .with_payload(json!({"tool": "bash"})));
    }
    Ok(json!({
        "exit_code": done.status.code(),
        "stdout": String::from_utf8_lossy(&done.stdout),
        "stderr": stderr,
        "truncated": done.stdout_cut || done.stderr_cut,
    }))
}
