//! A2A's JSON-RPC errors: the codes of the specification (section 5.4)
//! and their `google.rpc.ErrorInfo` data.

use super::*;

pub(super) use rpc::{
    INTERNAL_ERROR as INTERNAL, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR,
};
pub(super) const TASK_NOT_FOUND: i64 = -32001;
pub(super) const TASK_NOT_CANCELABLE: i64 = -32002;
pub(super) const PUSH_NOT_SUPPORTED: i64 = -32003;
pub(super) const UNSUPPORTED_OPERATION: i64 = -32004;
pub(super) const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
pub(super) const EXTENDED_CARD_NOT_CONFIGURED: i64 = -32007;
pub(super) const VERSION_NOT_SUPPORTED: i64 = -32009;

/// A JSON-RPC error: code, message, and the `google.rpc.ErrorInfo` reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct RpcError {
    pub code: i64,
    pub reason: &'static str,
    pub message: String,
    pub metadata: Map<String, Json>,
}

impl RpcError {
    pub(super) fn new(code: i64, reason: &'static str, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            reason,
            message: message.into(),
            metadata: Map::new(),
        }
    }

    pub(super) fn with(mut self, key: &str, value: impl Into<Json>) -> RpcError {
        self.metadata.insert(key.into(), value.into());
        self
    }

    pub(super) fn params(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_PARAMS, "INVALID_PARAMS", message)
    }

    pub(super) fn task_not_found(id: &str) -> RpcError {
        RpcError::new(TASK_NOT_FOUND, "TASK_NOT_FOUND", format!("no task `{id}`"))
            .with("taskId", id)
    }

    /// The error object of a JSON-RPC response.
    pub fn to_json(&self) -> Json {
        json!({"code": self.code, "message": self.message, "data": self.data()})
    }

    /// The error object's `data`: one `google.rpc.ErrorInfo`.
    pub(super) fn data(&self) -> Json {
        let mut metadata = self.metadata.clone();
        metadata.insert("timestamp".into(), timestamp(crate::now_ms()).into());
        json!([{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": self.reason,
            "domain": "a2a-protocol.org",
            "metadata": metadata,
        }])
    }

    /// A server refusal (`ApiError`) as the JSON-RPC error closest to it.
    pub(super) fn from_api(e: &ApiError) -> RpcError {
        let (code, reason) = match e.status {
            400 | 404 | 413 => (INVALID_PARAMS, "INVALID_PARAMS"),
            _ => (INTERNAL, "INTERNAL"),
        };
        let mut r =
            RpcError::new(code, reason, format!("{} ({})", e.message, e.hint)).with("code", e.code);
        if let Some(s) = e.retry_after {
            r = r.with("retryAfterSeconds", s);
        }
        r
    }
}

pub(super) fn error(id: Json, e: &RpcError) -> Json {
    rpc::error(id, e.code, &e.message, Some(e.data()))
}

/// A JSON-RPC parse error response (the body was not JSON).
pub fn parse_error(detail: &str) -> Json {
    error(
        Json::Null,
        &RpcError::new(
            PARSE_ERROR,
            "PARSE_ERROR",
            format!("invalid JSON payload: {detail}"),
        ),
    )
}
