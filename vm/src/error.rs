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
    #[error("internal VM error: {0}")]
    Internal(String),
    /// The host could not give what a run needs before it starts (the
    /// stored memory's information-flow labels).
    #[error("the run could not start: {0}")]
    Setup(String),
}

/// A short recovery hint for a dotted failure code (the `hint` of the
/// structured error a `catch` region receives and `aisc` prints).
pub fn hint_for(code: &str) -> &'static str {
    let family = code.split('.').next().unwrap_or(code);
    match (family, code) {
        (_, "LIMIT_VALUE_BYTES") => "one value grew past the per-value limit (e.g. text doubled in a loop); bound its growth, or raise the limit ([limits] max_value_bytes) and `aisc resume` the run",
        (_, "LIMIT_FRAMES") => "the program creates frames without bound (e.g. a flow calling itself more than once per call); bound the recursion, or raise the limit (--max-frames N, [limits] max_live_frames) and `aisc resume` the run",
        (_, "WATCHDOG_LOOP") => "the loop repeats the same call with the same inputs; change what the loop carries, bound it, or raise/disable the watchdog (--watchdog N, 0 = off)",
        (_, "journal.in_doubt") => "check whether the side effect happened, then decide: `aisc resume RUN --in-doubt retry|skip|fail` (retry passes the same idempotency key)",
        (_, "journal.unreadable") => "the journal holds a record this aisc cannot read (another version wrote it?); resume with the aisc that wrote it",
        (_, "llm.rate_limited") => "the provider rate-limited the call; lower --concurrency or retry later",
        (_, "llm.timeout") => "raise `timeout_s` for the backend or retry",
        (_, "llm.invalid_response") => "the model's reply was not in the expected shape (not JSON, or not valid against the op's schema, even after one retry); use a more capable model or set the backend's `structured_output` (docs/backends.md)",
        (_, "tool.unknown") => "no tool has this name: fix the name, or provide the tool as a built-in, a [[tools.subprocess]] entry or an [[mcp_servers]] server in the configuration",
        (_, "policy.denied") => "untrusted data would reach a side effect (docs/security.md): validate it first, or allow the argument in the config: `[policy.sinks.NAME] allow_untrusted = [\"ARG\"]`; `aisc check --flows` shows every such path",
        (_, "tool.denied") => "allow the tool for this agent in the configuration: `[access.allow] Agent = [\"tool\"]`",
        (_, "tool.confirmation_required") => "the tool is marked destructive: confirm it interactively, or pass --yes to allow destructive tools for this run",
        (_, "tool.invalid_schema") => "the tool's JSON Schema cannot be used (an unknown type, a reference that does not resolve, a bad pattern): fix the tool's schema or the capability declaration; remote `$ref`s are not fetched",
        (_, "tool.invalid_args") => "check the tool's arguments against its schema (the capability declaration or the tool's input schema)",
        (_, "llm.truncated") => "the message names the limit that cut the reply (the max_tokens sent and where it was set, or the server's context): raise it (the op's `max_tokens:`, the backend's `max_tokens`, `[max_tokens] KIND`), shorten the prompt, or set `accept_incomplete = true` on the backend to take the partial text of unstructured ops",
        (_, "llm.unsupported") => "the server said it cannot do what the op needs (e.g. its chat template cannot render tools); see docs/backends.md for a recipe that can, or check with `aisc doctor`",
        (_, "llm.context_overflow") => "the completion limit does not fit the context the server states; lower max_tokens or start the server with a larger context (docs/backends.md)",
        (_, "llm.content_filter") => "the provider filtered the reply or the model refused; rephrase the prompt (retrying the same request gives the same result)",
        ("budget", _) => "resume the run with a higher limit: `aisc resume RUN_ID` with --token-budget/--llm-call-budget/--deadline/--cost-budget",
        ("journal", _) => "the run journal could not be used; check the memory directory (--memory) and its free space",
        ("llm", _) => "check the backend with `aisc doctor`; failed calls can be caught with try/catch",
        ("tool", _) => "check the tool's arguments against its schema and the [access] configuration",
        ("mcp", _) => "check the MCP server (command, timeout_s) in the configuration",
        ("memory", _) => "check the memory directory (--memory) and the tier name",
        ("belief", _) => "set the belief before reading it, or keep its JSON kind",
        ("type" | "arith" | "index" | "switch", _) => "check the values reaching this operation (aisc trace shows them)",
        ("call", _) => "reduce recursion depth",
        _ => "wrap the operation in `try { } catch { }` to handle the failure",
    }
}

impl RunError {
    pub fn code(&self) -> &'static str {
        match self {
            RunError::Entry(_) => "R0001",
            RunError::Argument(_) => "R0002",
            RunError::OpFailed { .. } => "R0003",
            RunError::Internal(_) => "R0005",
            RunError::Setup(_) => "R0006",
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
            .with_help(hint_for(cause)),
            other => Diagnostic::error(code, other.to_string(), Span::DUMMY),
        }
    }
}
