//! Tasks as runs: their states, parts, artifacts and status messages, and
//! the request parameters that name them.

use super::*;
pub(super) use ais_wire::a2a::part_of;
use ais_wire::a2a::TaskState;

pub(super) fn task_id(params: &Json) -> Result<&str, RpcError> {
    params["id"]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| RpcError::params("`id` (the task id) is required"))
}

pub(super) fn history_length(params: &Json) -> Result<Option<usize>, RpcError> {
    let v = params
        .get("historyLength")
        .or_else(|| params["configuration"].get("historyLength"));
    match v {
        None | Some(Json::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(|n| Some(usize::try_from(n).unwrap_or(usize::MAX)))
            .ok_or_else(|| RpcError::params("historyLength must be zero or more")),
    }
}

/// What a paused run's status reads as before its cause is known.
pub(super) const PAUSED_STATE: &str = "TASK_STATE_FAILED";

pub(super) fn state_name(s: Status) -> &'static str {
    let state = match s {
        Status::Queued => TaskState::Submitted,
        Status::Running => TaskState::Working,
        Status::Succeeded => TaskState::Completed,
        // A run its server's stop interrupted is resumable through POST
        // /v1/runs/{id}/resume; to A2A it has failed. One waiting at a
        // `pause` is told apart by `state_of`.
        Status::Failed | Status::Paused => return PAUSED_STATE,
        Status::Cancelled => TaskState::Canceled,
    };
    state.name()
}

/// Whether a run waits at a `pause` for a person's answer.
pub(super) fn waits_for_input(run: &Json) -> bool {
    run["status"] == "paused" && run["error"]["cause"] == "run.paused"
}

/// A run's task state: a run waiting at a `pause` is
/// `TASK_STATE_INPUT_REQUIRED` (a follow-up message with its `taskId`
/// answers it).
pub(super) fn state_of(run: &Json) -> &'static str {
    if waits_for_input(run) {
        return TaskState::InputRequired.name();
    }
    run["status"]
        .as_str()
        .and_then(Status::parse)
        .map_or(TaskState::Unspecified.name(), state_name)
}

/// A stream closes at a terminal state and at an interrupted one (the
/// task waits for input: a follow-up message resumes it, and the client
/// subscribes again).
pub(super) fn ends_stream(state: &Json) -> bool {
    wire_state(state).is_some_and(|s| s.is_terminal() || s.is_interrupted())
}

/// A state as this server writes it (1.0 names only).
fn wire_state(state: &Json) -> Option<TaskState> {
    let name = state.as_str()?;
    TaskState::parse(name).filter(|s| s.name() == name)
}

pub(super) fn result_artifact(run: &Json) -> Option<Json> {
    if run["status"] != "succeeded" {
        return None;
    }
    let v = run.get("result")?;
    Some(json!({
        "artifactId": "result",
        "name": "result",
        "description": "the value of the flow",
        "parts": [part_of(v)],
    }))
}

/// The agent's message of a failed or cancelled task: the error's code
/// and message as text, the whole error as data.
pub(super) fn status_message(run: &Json, id: &str, context_id: &str) -> Option<Json> {
    let e = run.get("error")?;
    if waits_for_input(run) {
        // The question the run waits on, for the person to answer.
        let question = e["payload"]["message"]
            .as_str()
            .or_else(|| e["message"].as_str())
            .unwrap_or("")
            .to_string();
        return Some(json!({
            "messageId": format!("{id}-input"),
            "contextId": context_id,
            "taskId": id,
            "role": "ROLE_AGENT",
            "parts": [{"text": question, "mediaType": "text/plain"}],
            "metadata": {"answer": "send a message with this taskId: its text (or data part) is the answer"},
        }));
    }
    let text = format!(
        "{}: {}",
        e["code"].as_str().unwrap_or("run.failed"),
        e["message"].as_str().unwrap_or("")
    );
    let mut parts = vec![json!({"text": text, "mediaType": "text/plain"})];
    if run["status"] == "paused" {
        parts.push(json!({"text": format!("the run is paused (its server stopped, or it waits at a `pause`); POST /v1/runs/{id}/resume continues it, with `input` for a `pause`"), "mediaType": "text/plain"}));
    }
    parts.push(json!({"data": e, "mediaType": "application/json"}));
    Some(json!({
        "messageId": format!("{id}-status"),
        "contextId": context_id,
        "taskId": id,
        "role": "ROLE_AGENT",
        "parts": parts,
    }))
}

/// RFC 3339 UTC with milliseconds from milliseconds since the epoch
/// (the toolchain's one formatter; a time before 1970 is the epoch).
pub fn timestamp(ms: i64) -> String {
    ais_wire::time::rfc3339(u64::try_from(ms).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(timestamp(1_709_251_199_123), "2024-02-29T23:59:59.123Z");
        assert_eq!(timestamp(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
