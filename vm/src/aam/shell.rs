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

use super::tools::run_process;
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
pub fn run_bash(workspace: &Path, args: &Json, cancel: &CancelToken) -> Result<Json, HostError> {
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
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(command)
        .current_dir(&dir)
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
    Ok(json!({
        "exit_code": done.status.code(),
        "stdout": String::from_utf8_lossy(&done.stdout),
        "stderr": String::from_utf8_lossy(&done.stderr),
        "truncated": done.stdout_cut || done.stderr_cut,
    }))
}
