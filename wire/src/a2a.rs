//! Agent2Agent (<https://a2a-protocol.org>), JSON-RPC binding: the
//! version, task states in both eras' spellings (1.0 `TASK_STATE_X`, 0.3
//! `x-y`), and message parts.

use serde_json::{json, Value as Json};

/// The A2A version both sides speak.
pub const PROTOCOL_VERSION: &str = "1.0";

/// The request header that names the version (absent: 0.3).
pub const VERSION_HEADER: &str = "A2A-Version";

/// Where an agent's card is served, under its base URL.
pub const CARD_PATH: &str = ".well-known/agent-card.json";

/// A task's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    Unspecified,
    Submitted,
    Working,
    InputRequired,
    AuthRequired,
    Completed,
    Failed,
    Canceled,
    Rejected,
}

impl TaskState {
    const ALL: [TaskState; 9] = [
        TaskState::Unspecified,
        TaskState::Submitted,
        TaskState::Working,
        TaskState::InputRequired,
        TaskState::AuthRequired,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::Rejected,
    ];

    /// The 1.0 name (`TASK_STATE_COMPLETED`).
    pub fn name(self) -> &'static str {
        match self {
            TaskState::Unspecified => "TASK_STATE_UNSPECIFIED",
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Failed => "TASK_STATE_FAILED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
            TaskState::Rejected => "TASK_STATE_REJECTED",
        }
    }

    /// The 0.3 name (`input-required`).
    pub fn name_0_3(self) -> &'static str {
        match self {
            TaskState::Unspecified => "unknown",
            TaskState::Submitted => "submitted",
            TaskState::Working => "working",
            TaskState::InputRequired => "input-required",
            TaskState::AuthRequired => "auth-required",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Canceled => "canceled",
            TaskState::Rejected => "rejected",
        }
    }

    /// A state in either era's spelling (case and `-`/`_` insensitive;
    /// `cancelled` too); `None` for a name neither era has.
    pub fn parse(s: &str) -> Option<TaskState> {
        let norm = |s: &str| {
            s.trim_start_matches("TASK_STATE_")
                .to_ascii_lowercase()
                .replace('-', "_")
        };
        let s = norm(s);
        if s == "cancelled" {
            return Some(TaskState::Canceled);
        }
        TaskState::ALL
            .into_iter()
            .find(|t| norm(t.name()) == s || norm(t.name_0_3()) == s)
    }

    /// Completed, failed, canceled or rejected: nothing more will happen.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }

    /// Terminal, or interrupted (it waits for input or authorisation).
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }
}

/// A value as one part: a string as text, anything else as data.
pub fn part_of(v: &Json) -> Json {
    match v {
        Json::String(s) => json!({"text": s, "mediaType": "text/plain"}),
        other => json!({"data": other, "mediaType": "application/json"}),
    }
}

/// The value parts carry: one part's data (else its text), several
/// parts' texts joined with newlines, `null` for none.
pub fn value_of_parts(parts: Option<&Json>) -> Json {
    let parts = parts
        .and_then(Json::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    match parts {
        [] => Json::Null,
        [p] => match (p.get("data"), p.get("text")) {
            (Some(d), _) => d.clone(),
            (None, Some(t)) => t.clone(),
            (None, None) => Json::Null,
        },
        many => Json::String(
            many.iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_of_both_eras() {
        for t in TaskState::ALL {
            assert_eq!(TaskState::parse(t.name()), Some(t));
            assert_eq!(TaskState::parse(t.name_0_3()), Some(t));
        }
        assert_eq!(TaskState::parse("cancelled"), Some(TaskState::Canceled));
        assert_eq!(
            TaskState::parse("input_required"),
            Some(TaskState::InputRequired)
        );
        assert_eq!(TaskState::parse("nonsense"), None);
        assert!(TaskState::Rejected.is_terminal());
        assert!(!TaskState::InputRequired.is_terminal());
        assert!(TaskState::AuthRequired.is_interrupted());
    }

    #[test]
    fn parts() {
        assert_eq!(part_of(&json!("t"))["text"], "t");
        assert_eq!(part_of(&json!({"a": 1}))["data"], json!({"a": 1}));
        assert_eq!(value_of_parts(None), Json::Null);
        assert_eq!(value_of_parts(Some(&json!([{"text": "hi"}]))), json!("hi"));
        assert_eq!(
            value_of_parts(Some(&json!([{"data": {"a": 1}}]))),
            json!({"a": 1})
        );
        assert_eq!(
            value_of_parts(Some(&json!([{"text": "a"}, {"text": "b"}]))),
            json!("a\nb")
        );
    }
}
