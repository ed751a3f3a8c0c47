//! Remote agents: agents served elsewhere (`[[remote_agents]]`), reached
//! over A2A 1.0 (JSON-RPC binding). Each is a tool of the AAM named after
//! the agent, so a message to it goes through the VM's I/O executor like
//! any tool call: its concurrency limit, the run journal (a resumed run
//! does not resend a message whose reply was recorded), telemetry and
//! cancellation. The compiler turns `communicate("Name", m)` and
//! `Name.flow(args)` into calls of that tool (docs/serve.md, "Remote
//! agents").
//!
//! The tool's arguments: `{"message": m, "protocol"?: p}` (a message; the
//! skill is the agent's `communicate` flow, else its `main`, else the one
//! its card lists), or `{"skill": "Name.flow", "arguments": {..}}` /
//! `{"skill": "Name.flow", "message": m}` (a flow by name). The value is
//! the task's result artifact: a text part's text, a data part's value.
//!
//! The exchange: `SendMessage` with `returnImmediately`, then `GetTask`
//! until the task ends, so a cancelled run cancels the remote task
//! (`CancelTask`) instead of waiting for it. A message that does not reach
//! the agent (connection refused, 502/503/504) is sent again, at most
//! `retries` times; an answered error is not.

use super::config::RemoteAgentConfig;
use crate::host::HostError;
use crate::llm::CancelToken;
use ais_wire::a2a::{self, TaskState};
use ais_wire::rpc;
use serde_json::{json, Value as Json};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// One configured remote agent.
pub struct RemoteAgent {
    cfg: RemoteAgentConfig,
    /// The bearer token, read from the environment when the host opens.
    token: Option<String>,
    /// The variable `api_key_env` names, when it is not set.
    token_missing: Option<String>,
    http: ureq::Agent,
    /// Its agent card, fetched on first use (`None`: none could be read).
    card: OnceLock<Option<Json>>,
    seq: AtomicU64,
}

fn err(code: &str, message: impl Into<String>) -> HostError {
    HostError::new(code, message)
}

impl RemoteAgent {
    pub fn new(cfg: RemoteAgentConfig) -> RemoteAgent {
        let token = cfg
            .api_key_env
            .as_deref()
            .and_then(|v| std::env::var(v).ok())
            .map(|t| t.trim().to_string());
        let token_missing = cfg
            .api_key_env
            .clone()
            .filter(|v| std::env::var_os(v).is_none());
        let loopback = ["http://127.", "http://localhost", "http://[::1]"]
            .iter()
            .any(|p| cfg.url.starts_with(p));
        let mut b = ureq::Agent::config_builder()
            .http_status_as_error(false)
            // One request; the exchange as a whole is bounded by `timeout`.
            .timeout_global(Some(Duration::from_secs(30)))
            .user_agent(concat!("apxm-ais/", env!("CARGO_PKG_VERSION")));
        if loopback {
            b = b.proxy(None);
        }
        RemoteAgent {
            cfg,
            token,
            token_missing,
            http: ureq::Agent::new_with_config(b.build()),
            card: OnceLock::new(),
            seq: AtomicU64::new(1),
        }
    }

    pub fn name(&self) -> &str {
        &self.cfg.name
    }

    pub fn concurrency(&self) -> usize {
        self.cfg.concurrency.unwrap_or(8)
    }

    pub fn description(&self) -> String {
        format!(
            "remote agent {} over A2A at {}: {{message}} or {{skill, arguments}} -> its answer",
            self.cfg.name, self.cfg.url
        )
    }

    fn timeout(&self) -> Duration {
        self.cfg
            .timeout_s
            .and_then(super::config::secs)
            .unwrap_or(Duration::from_secs(300))
    }

    /// Sends the message the tool arguments describe and waits for the
    /// remote task's result.
    pub fn call(&self, args: &Json, cancel: &CancelToken) -> Result<Json, HostError> {
        if let Some(var) = &self.token_missing {
            return Err(err(
                "remote.key_missing",
                format!(
                    "environment variable {var} (api_key_env of remote agent `{}`) is not set",
                    self.cfg.name
                ),
            ));
        }
        let deadline = Instant::now() + self.timeout();
        let message = self.message(args)?;
        let sent = self.rpc(
            "SendMessage",
            json!({"message": message, "configuration": {"returnImmediately": true}}),
            true,
        )?;
        // A SendMessageResponse holds a task or (for a stateless agent) a message.
        if let Some(m) = sent.get("message") {
            return value_of_parts(m.get("parts"));
        }
        let mut task = sent
            .get("task")
            .cloned()
            .ok_or_else(|| self.bad("its SendMessage reply holds neither a task nor a message"))?;
        let id = task["id"].as_str().unwrap_or("").to_string();
        let mut pause = Duration::from_millis(10);
        loop {
            match task_state(&task) {
                State::Done => return self.result_of(&task),
                State::Failed(why) => {
                    return Err(err(
                        "remote.failed",
                        format!("remote agent `{}`: task {id} {why}", self.cfg.name),
                    )
                    .with_payload(
                        json!({"agent": self.cfg.name, "task": id, "status": task["status"]}),
                    ))
                }
                State::NeedsInput => {
                    return Err(err(
                        "remote.input_required",
                        format!(
                            "remote agent `{}`: task {id} waits for input ({}); answer it there",
                            self.cfg.name,
                            status_text(&task)
                        ),
                    )
                    .with_payload(json!({"agent": self.cfg.name, "task": id})))
                }
                State::Working => {}
            }
            if cancel.is_cancelled() {
                // Best effort: the remote task should not run on for nothing.
                let _ = self.rpc("CancelTask", json!({"id": id}), false);
                return Err(err("cancelled", "the run was cancelled"));
            }
            if Instant::now() >= deadline {
                let _ = self.rpc("CancelTask", json!({"id": id}), false);
                return Err(err(
                    "remote.timeout",
                    format!(
                        "remote agent `{}` did not finish task {id} within {:?}",
                        self.cfg.name,
                        self.timeout()
                    ),
                ));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(200));
            task = self.rpc("GetTask", json!({"id": id}), true)?;
        }
    }

    /// The A2A message for the tool arguments.
    fn message(&self, args: &Json) -> Result<Json, HostError> {
        let parts = match (args.get("arguments"), args.get("message")) {
            (Some(a @ Json::Object(_)), _) => vec![json!({"data": a})],
            (Some(_), _) => {
                return Err(err(
                    "tool.invalid_args",
                    "`arguments` of a remote flow call must be an object",
                ))
            }
            (None, Some(Json::String(s))) => vec![json!({"text": s})],
            (None, Some(v @ Json::Object(_))) => vec![json!({"data": v})],
            (None, Some(Json::Null)) | (None, None) => Vec::new(),
            (None, Some(v)) => vec![json!({"text": v.to_string()})],
        };
        let skill = match args.get("skill").and_then(Json::as_str) {
            Some(s) => Some(s.to_string()),
            None => self.reply_skill(),
        };
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let mut m = json!({
            "role": "ROLE_USER",
            "messageId": format!("ais-{}-{}-{n}", self.cfg.name, ais_stdlib::time::unix_ms()),
            "parts": parts,
        });
        let mut metadata = serde_json::Map::new();
        if let Some(s) = skill {
            metadata.insert("skill".into(), s.into());
        }
        if let Some(p) = args.get("protocol").and_then(Json::as_str) {
            metadata.insert("protocol".into(), p.into());
        }
        if !metadata.is_empty() {
            m["metadata"] = Json::Object(metadata);
        }
        Ok(m)
    }

    /// The skill a plain message goes to: the agent's `communicate` flow,
    /// else its `main`, else the one its card tags `entry` (none: the
    /// agent decides).
    fn reply_skill(&self) -> Option<String> {
        let card = self
            .card
            .get_or_init(|| {
                let url = format!("{}/{}", self.cfg.url.trim_end_matches('/'), a2a::CARD_PATH);
                let mut req = self.http.get(&url);
                if let Some(t) = &self.token {
                    req = req.header("authorization", format!("Bearer {t}"));
                }
                let mut resp = req.call().ok()?;
                if resp.status().as_u16() != 200 {
                    return None;
                }
                resp.body_mut()
                    .with_config()
                    .limit(1 << 20)
                    .read_json::<Json>()
                    .ok()
            })
            .as_ref()?;
        let skills = card["skills"].as_array()?;
        let ids: Vec<&str> = skills.iter().filter_map(|s| s["id"].as_str()).collect();
        [".communicate", ".main"]
            .iter()
            .find_map(|suffix| {
                ids.iter()
                    .find(|id| id.ends_with(suffix))
                    .map(|id| id.to_string())
            })
            // An AIS agent's entry flow is tagged `entry`.
            .or_else(|| {
                skills
                    .iter()
                    .find(|s| {
                        s["tags"]
                            .as_array()
                            .is_some_and(|t| t.iter().any(|x| x == "entry"))
                    })
                    .and_then(|s| s["id"].as_str())
                    .map(str::to_string)
            })
    }

    /// One JSON-RPC call; its `result`. `retry`: resend when the request
    /// did not reach the agent.
    fn rpc(&self, method: &str, params: Json, retry: bool) -> Result<Json, HostError> {
        let body = rpc::request(
            self.seq.fetch_add(1, Ordering::Relaxed).into(),
            method,
            params,
        );
        let attempts = if retry {
            1 + self.cfg.retries.unwrap_or(2)
        } else {
            1
        };
        let mut last = None;
        for attempt in 0..attempts {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(100 << attempt.min(5)));
            }
            let mut req = self
                .http
                .post(&self.cfg.url)
                .header("content-type", "application/json")
                .header(a2a::VERSION_HEADER, a2a::PROTOCOL_VERSION);
            if let Some(t) = &self.token {
                req = req.header("authorization", format!("Bearer {t}"));
            }
            let mut resp = match req.send(body.to_string().as_bytes()) {
                Ok(r) => r,
                Err(e) => {
                    last = Some(err(
                        "remote.transport",
                        format!("remote agent `{}` at {}: {e}", self.cfg.name, self.cfg.url),
                    ));
                    continue;
                }
            };
            let status = resp.status().as_u16();
            if matches!(status, 502..=504) {
                last = Some(err(
                    "remote.unavailable",
                    format!("remote agent `{}` answered HTTP {status}", self.cfg.name),
                ));
                continue;
            }
            if status == 401 || status == 403 {
                return Err(err(
                    "remote.auth",
                    format!(
                        "remote agent `{}` refused the request (HTTP {status}); set api_key_env in its [[remote_agents]] entry",
                        self.cfg.name
                    ),
                ));
            }
            let reply: Json = resp
                .body_mut()
                .with_config()
                .limit(64 << 20)
                .read_json()
                .map_err(|e| {
                    self.bad(&format!("its reply (HTTP {status}) is not JSON-RPC: {e}"))
                })?;
            // An error wins; else the result (a reply without an id is
            // taken too, as it always was).
            return match (reply.get("error"), reply.get("result")) {
                (Some(e), _) => Err(err(
                    "remote.error",
                    format!(
                        "remote agent `{}`: {} ({})",
                        self.cfg.name,
                        rpc::error_message(e),
                        e["code"]
                    ),
                )
                .with_payload(json!({"agent": self.cfg.name, "error": e}))),
                (None, Some(r)) => Ok(r.clone()),
                (None, None) => Err(self.bad("its reply has neither result nor error")),
            };
        }
        Err(last.unwrap_or_else(|| self.bad("no attempt was made")))
    }

    fn result_of(&self, task: &Json) -> Result<Json, HostError> {
        let artifacts = task["artifacts"].as_array();
        let result = artifacts.and_then(|a| {
            a.iter()
                .find(|x| x["artifactId"] == "result" || x["name"] == "result")
                .or_else(|| a.first())
        });
        match result {
            Some(a) => value_of_parts(a.get("parts")),
            // A completed task without artifacts answers with its status message.
            None => value_of_parts(task["status"]["message"].get("parts")),
        }
    }

    fn bad(&self, what: &str) -> HostError {
        err(
            "remote.invalid_reply",
            format!("remote agent `{}`: {what}", self.cfg.name),
        )
    }
}

enum State {
    Working,
    Done,
    NeedsInput,
    Failed(String),
}

fn task_state(task: &Json) -> State {
    // 1.0 names states `TASK_STATE_X`; 0.3 servers answer `x`.
    let raw = task["status"]["state"].as_str().unwrap_or("");
    match TaskState::parse(raw) {
        Some(TaskState::Completed) => State::Done,
        Some(s) if s.is_interrupted() => State::NeedsInput,
        Some(s) if s.is_terminal() => {
            let said = raw
                .trim_start_matches("TASK_STATE_")
                .to_ascii_lowercase()
                .replace('-', "_");
            State::Failed(format!("ended {said}: {}", status_text(task)))
        }
        _ => State::Working,
    }
}

fn status_text(task: &Json) -> String {
    task["status"]["message"]["parts"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// The value parts carry: one text part's text, one data part's value,
/// several parts' texts joined.
fn value_of_parts(parts: Option<&Json>) -> Result<Json, HostError> {
    Ok(a2a::value_of_parts(parts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_of_parts() {
        assert_eq!(value_of_parts(None).ok(), Some(Json::Null));
        assert_eq!(
            value_of_parts(Some(&json!([{"text": "hi"}]))).ok(),
            Some(json!("hi"))
        );
        assert_eq!(
            value_of_parts(Some(&json!([{"data": {"a": 1, "b": 2}}]))).ok(),
            Some(json!({"a": 1, "b": 2}))
        );
        assert_eq!(
            value_of_parts(Some(&json!([{"text": "a"}, {"text": "b"}]))).ok(),
            Some(json!("a\nb"))
        );
    }

    #[test]
    fn states_of_both_versions() {
        let t = |s: &str| json!({"status": {"state": s}});
        assert!(matches!(
            task_state(&t("TASK_STATE_COMPLETED")),
            State::Done
        ));
        assert!(matches!(task_state(&t("completed")), State::Done));
        assert!(matches!(
            task_state(&t("input-required")),
            State::NeedsInput
        ));
        assert!(matches!(
            task_state(&t("TASK_STATE_FAILED")),
            State::Failed(_)
        ));
        assert!(matches!(
            task_state(&t("TASK_STATE_WORKING")),
            State::Working
        ));
    }
}
