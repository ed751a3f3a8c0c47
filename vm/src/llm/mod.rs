//! The LLM backend contract between the VM and the providers.
//!
//! The VM's I/O executor calls [`LlmBackend::complete`] on a blocking I/O
//! thread (never on a scheduler worker). Providers (`sim`, `openai`,
//! `anthropic`, `ollama`) implement the trait in sibling modules.

pub mod schema;

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Which AIS operation issued the request; selects system prompt, model and
/// latency class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LlmOpKind {
    Ask,
    Think,
    Reason,
    Llm,
    Plan,
    Reflect,
    Verify,
}

impl LlmOpKind {
    pub fn name(self) -> &'static str {
        match self {
            LlmOpKind::Ask => "ask",
            LlmOpKind::Think => "think",
            LlmOpKind::Reason => "reason",
            LlmOpKind::Llm => "llm",
            LlmOpKind::Plan => "plan",
            LlmOpKind::Reflect => "reflect",
            LlmOpKind::Verify => "verify",
        }
    }
}

/// A labelled context block appended to the prompt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextBlock {
    pub label: String,
    pub text: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlmRequest {
    pub kind: LlmOpKind,
    /// Agent that issued the call (for policies, budgets, telemetry).
    pub agent: String,
    pub system: Option<String>,
    pub prompt: String,
    pub context: Vec<ContextBlock>,
    /// Explicit model override (op attribute); otherwise the backend picks
    /// its model for `kind`.
    pub model: Option<String>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    /// When set, the reply must be JSON valid against this schema.
    pub json_schema: Option<serde_json::Value>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlmResponse {
    pub text: String,
    /// Parsed and schema-validated JSON when the request had a schema.
    pub json: Option<serde_json::Value>,
    pub usage: Usage,
    pub finish_reason: String,
    pub model: String,
    pub latency: Duration,
    /// True for the offline simulator; shown in output and telemetry.
    pub simulated: bool,
}

/// A provider failure, structured so `try/catch` regions can inspect it.
#[derive(Clone, Debug, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[error("{provider}: {message}{}", .status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
pub struct LlmError {
    pub provider: String,
    pub status: Option<u16>,
    pub message: String,
    pub attempts: u32,
    pub kind: LlmErrorKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LlmErrorKind {
    Connect,
    Timeout,
    RateLimited,
    Server,
    Client,
    Auth,
    InvalidResponse,
    BudgetExceeded,
    Cancelled,
    Replay,
}

/// Set when the run fails or is interrupted; backends check it between
/// attempts and while waiting, so in-flight work stops promptly.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A blocking LLM provider. Implementations must be cheap to share across
/// I/O threads.
pub trait LlmBackend: Send + Sync {
    /// Name from the configuration (e.g. "sim", "local").
    fn name(&self) -> &str;
    /// Maximum concurrent requests the VM should send to this backend.
    fn concurrency(&self) -> usize {
        16
    }
    /// True for backends that do not call a real model.
    fn is_simulated(&self) -> bool {
        false
    }
    fn complete(&self, request: &LlmRequest, cancel: &CancelToken) -> Result<LlmResponse, LlmError>;
}
