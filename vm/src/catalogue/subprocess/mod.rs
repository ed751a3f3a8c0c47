//! `[[tools.subprocess]]`: a tool run as a child process, JSON arguments
//! on stdin and one JSON value on stdout (`docs/runtime.md`).

use super::process::{idempotency_key, run_process, tail, IDEMPOTENCY_ENV, MAX_STDERR, MAX_STDOUT};
use super::provider::ToolProvider;
use crate::config::schema::SubprocessConfig;
use crate::config::secs;
use crate::host::HostError;
use crate::llm::CancelToken;
use serde_json::{json, Value as Json};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// The provider of one configured subprocess tool.
pub struct Subprocess(pub Arc<SubprocessConfig>);

impl ToolProvider for Subprocess {
    fn kind(&self) -> &'static str {
        "subprocess"
    }

    fn call(&self, _tool: &str, args: &Json, cancel: &CancelToken) -> Result<Json, HostError> {
        run_subprocess(&self.0, args, cancel)
    }
}

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
