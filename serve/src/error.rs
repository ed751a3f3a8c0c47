//! Errors a client gets: an HTTP status and `{error: {code, message, hint}}`.

use serde_json::{json, Value as Json};

/// A request the server refuses or could not carry out. Rendered as JSON
/// at the HTTP edge, as a JSON-RPC error by MCP.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    pub status: u16,
    /// Stable, dotted code (`request.malformed_json`, `run.not_found`, ...).
    pub code: &'static str,
    pub message: String,
    pub hint: String,
    /// Seconds to wait before trying again (429, 503).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(
        status: u16,
        code: &'static str,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            hint: hint.into(),
            retry_after: None,
        }
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>, hint: &str) -> ApiError {
        ApiError::new(400, code, message, hint)
    }

    pub fn not_found(code: &'static str, message: impl Into<String>, hint: &str) -> ApiError {
        ApiError::new(404, code, message, hint)
    }

    pub fn conflict(code: &'static str, message: impl Into<String>, hint: &str) -> ApiError {
        ApiError::new(409, code, message, hint)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(
            500,
            "server.internal",
            message,
            "the server keeps serving; see its log on stderr",
        )
    }

    pub fn with_retry_after(mut self, seconds: u64) -> ApiError {
        self.retry_after = Some(seconds);
        self
    }

    pub fn to_json(&self) -> Json {
        json!({"error": {"code": self.code, "message": self.message, "hint": self.hint}})
    }
}
