//! The rows the run store holds, as the journal and its readers see them
//! (defined here, below both, so the store does not depend on the
//! journal; `crate::journal` re-exports them).

/// The journal database file in a memory directory.
pub const DB_FILE: &str = "runs.db";

/// A journal failure (opening, reading, writing, a corrupted database).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct JournalError {
    pub code: &'static str,
    pub message: String,
}

impl JournalError {
    pub(crate) fn new(code: &'static str, message: impl Into<String>) -> Self {
        JournalError {
            code,
            message: message.into(),
        }
    }
}

/// Status of a run as stored (plus `interrupted`, derived).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Running,
    Completed,
    Failed,
    /// Stored as `running` but its process is gone.
    Interrupted,
    /// Stopped at a `pause`, waiting for a person's input.
    Paused,
    /// Waiting in a store's run queue for a worker (`aisc run --detach`).
    Queued,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Interrupted => "interrupted",
            Status::Paused => "paused",
            Status::Queued => "queued",
        }
    }
}

/// One row of `aisc runs`.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub id: String,
    pub status: Status,
    pub started_ms: i64,
    pub ended_ms: Option<i64>,
    pub entry: Option<String>,
    pub program: String,
    pub entries: i64,
    pub in_doubt: i64,
    pub error: Option<String>,
    pub resumes: i64,
}

/// One journaled step of a run (an effect op: LLM call, tool call, memory
/// write, ...), as `aisc trace` and `aisc runs show` list them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub seq: i64,
    /// `done`, `intent` (started, never completed: in doubt) or `failed`.
    pub kind: String,
    pub op: String,
    pub tokens: i64,
}

/// The mnemonics of the LLM ops, from the op table: entries record an op
/// by its mnemonic (a run's LLM usage counts these).
pub fn llm_op_names() -> Vec<&'static str> {
    ais_ir::Opcode::ALL
        .iter()
        .filter(|op| op.info().llm.is_some())
        .map(|op| op.mnemonic())
        .collect()
}
