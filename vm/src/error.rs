//! Why a run failed.

use ais_ir::bytecode::EntryError;
use ais_ir::{Diagnostic, IntoDiagnostic, Span};
use serde_json::Value as Json;

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Entry(#[from] EntryError),
    #[error("argument error: {0}")]
    Argument(String),
    /// An op failed outside any `try` region.
    #[error("`{opcode}` in @{flow} failed: {message} [{code}]")]
    OpFailed {
        /// `Agent.flow` holding the op.
        flow: String,
        opcode: &'static str,
        /// Region and op index in the flow's bytecode.
        region: u32,
        op: u32,
        /// Source span of the op.
        span: Span,
        /// Dotted cause code (`llm.server`, `tool.unknown`, ...).
        code: String,
        message: String,
        /// Structured details from the failing component (e.g. the provider error).
        payload: Box<Json>,
    },
    #[error("cannot write {what} to {path}: {message}")]
    Export {
        what: &'static str,
        path: String,
        message: String,
    },
    #[error("internal VM error: {0}")]
    Internal(String),
}

impl RunError {
    pub fn code(&self) -> &'static str {
        match self {
            RunError::Entry(_) => "R0001",
            RunError::Argument(_) => "R0002",
            RunError::OpFailed { .. } => "R0003",
            RunError::Export { .. } => "R0004",
            RunError::Internal(_) => "R0005",
        }
    }
}

impl IntoDiagnostic for RunError {
    fn into_diagnostic(self) -> Diagnostic {
        let code = self.code();
        match self {
            RunError::OpFailed {
                ref flow,
                opcode,
                span,
                code: ref cause,
                ref message,
                ..
            } => Diagnostic::error(
                code,
                format!("`{opcode}` in @{flow} failed: {message}"),
                span,
            )
            .with_label("this operation failed")
            .with_note(format!("cause: {cause}"))
            .with_help("wrap it in `try { ... } catch { ... }` to handle the failure"),
            other => Diagnostic::error(code, other.to_string(), Span::DUMMY),
        }
    }
}
