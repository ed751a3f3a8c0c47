//! What a provider's reply reads as, whole ([`Reply`]) or while it streams
//! ([`StreamState`]), and why one is not a complete answer
//! ([`Incomplete`], [`ErrorDetail`]): written by each protocol's folder,
//! judged by the shared HTTP layer (`crate::llm::http`).

use crate::llm::{LlmErrorKind, ToolCall, Usage};
use serde_json::Value;

/// A parsed provider reply.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    pub text: String,
    pub usage: Usage,
    pub finish_reason: String,
    pub model: Option<String>,
    /// Tool calls with the names as the provider sent them (mapped back
    /// to program names when the response is made).
    pub tool_calls: Vec<ToolCall>,
}

/// Why a well-formed reply is not a complete answer (from the protocol's
/// finish/stop/done reason). Each is a structured error, never retried:
/// the same request would stop the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incomplete {
    /// Cut off at the token limit (`length`, `max_tokens`).
    Truncated,
    /// Withheld by the provider's content filter (`content_filter`).
    ContentFilter,
    /// The model declined to answer (`refusal`).
    Refusal,
}

impl Incomplete {
    pub fn kind(self) -> LlmErrorKind {
        match self {
            Incomplete::Truncated => LlmErrorKind::Truncated,
            Incomplete::ContentFilter | Incomplete::Refusal => LlmErrorKind::ContentFilter,
        }
    }

    /// The error message for `reply`; a refusal quotes the model's words.
    pub(crate) fn message(self, reply: &Reply) -> String {
        let reason = &reply.finish_reason;
        match self {
            Incomplete::Truncated => format!(
                "the reply was cut off at the token limit (finish reason `{reason}`); raise max_tokens"
            ),
            Incomplete::ContentFilter => format!(
                "the provider's content filter withheld the reply (finish reason `{reason}`)"
            ),
            Incomplete::Refusal => format!("the model refused: {}", reply.text),
        }
    }
}

/// A provider error body, reduced to message and machine code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorDetail {
    pub message: String,
    pub code: Option<String>,
}

impl ErrorDetail {
    pub(crate) fn plain(body: &str) -> ErrorDetail {
        let t = body.trim();
        let message = if t.is_empty() {
            "empty body".to_string()
        } else if t.len() > 300 {
            let cut = (0..=300)
                .rev()
                .find(|i| t.is_char_boundary(*i))
                .unwrap_or(0);
            format!("{}…", &t[..cut])
        } else {
            t.to_string()
        };
        ErrorDetail {
            message,
            code: None,
        }
    }

    /// Quota/billing exhaustion: retrying cannot help.
    pub(crate) fn is_spend_limit(&self) -> bool {
        let code = self.code.as_deref().unwrap_or("");
        let m = self.message.to_ascii_lowercase();
        matches!(
            code,
            "insufficient_quota" | "billing_hard_limit_reached" | "billing_not_active"
        ) || m.contains("insufficient_quota")
            || m.contains("exceeded your current quota")
            || m.contains("credit balance is too low")
            || m.contains("spend limit")
    }
}

/// The reply a stream has brought so far, filled in by the protocol's
/// event reader.
#[derive(Debug, Default)]
pub struct StreamState {
    pub text: String,
    pub refusal: String,
    /// Tool calls in order: id, name, argument text.
    pub calls: Vec<ToolCall>,
    /// Call position per key (an OpenAI `index`, an Anthropic block).
    call_slots: Vec<(u64, usize)>,
    pub finish_reason: Option<String>,
    pub model: Option<String>,
    pub usage: Usage,
    /// The reply is whole.
    pub done: bool,
    /// The terminal event arrived; later events are ignored.
    pub ended: bool,
}

impl StreamState {
    /// Appends reply text and passes it on as a delta.
    pub fn push_text(&mut self, t: &str, deltas: &mut Vec<String>) {
        if !t.is_empty() {
            self.text.push_str(t);
            deltas.push(t.to_string());
        }
    }

    /// The position in `calls` of the call streamed under `key`, added
    /// (with id `{id_prefix}_{position}`) when new.
    pub fn call_at(&mut self, key: u64, id_prefix: &str) -> usize {
        if let Some(&(_, at)) = self.call_slots.iter().find(|(k, _)| *k == key) {
            return at;
        }
        let at = self.calls.len();
        self.calls.push(ToolCall {
            id: format!("{id_prefix}_{at}"),
            name: String::new(),
            arguments: String::new(),
        });
        self.call_slots.push((key, at));
        at
    }
}

/// `{"message", "type"}` of an error event, or its text.
pub fn error_text(e: &Value) -> String {
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| e.as_str())
        .map_or_else(|| e.to_string(), str::to_string);
    match e.get("type").and_then(Value::as_str) {
        Some(t) => format!("{t}: {message}"),
        None => message,
    }
}
