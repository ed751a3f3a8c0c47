//! Graph-JSON errors: one variant per problem, each with its code and the
//! byte span of the offending part of the JSON text. Rendered at the edge
//! like any source diagnostic (`IntoDiagnostic`).

use ais_ir::{Diagnostic, IntoDiagnostic, Span};
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum GraphError {
    #[error("not a valid graph document: {message}")]
    Json { message: String, span: Span },
    #[error("node has no `op`")]
    MissingOp { span: Span },
    #[error("unknown op `{op}`")]
    UnknownOp {
        op: String,
        suggestion: Option<String>,
        span: Span,
    },
    #[error("the reference's flat `{op}` names no node of the graph in its cases: there are no arms to make")]
    ReferenceOnlyOp { op: String, span: Span },
    #[error("node has no `id`")]
    MissingId { span: Span },
    #[error("duplicate node id {id}")]
    DuplicateId { id: u64, span: Span, first: Span },
    #[error("{message}")]
    UnknownEnd { message: String, span: Span },
    #[error("the graph has a cycle: {message}")]
    Cycle { message: String, span: Span },
    #[error("type mismatch on an edge: {message}")]
    TypeMismatch { message: String, span: Span },
    #[error("no flow is marked `metadata.is_entry: true`")]
    MissingEntry { span: Span },
    #[error("bad parameter: {message}")]
    BadParameter { message: String, span: Span },
    #[error("bad attribute: {message}")]
    BadAttribute { message: String, span: Span },
    #[error("bad graph structure: {message}")]
    BadStructure { message: String, span: Span },
    #[error("flat control flow that does not nest: {message}")]
    Unstructured { message: String, span: Span },
    #[error("cannot write graph JSON: {message}")]
    NotRepresentable { message: String },
    /// A warning: a lone graph calls an agent it does not define.
    #[error("`FLOW_CALL` to the agent `{agent}`, which this document does not define: the call fails when it runs")]
    ExternalAgent { agent: String, span: Span },
    /// A warning: a reference LLM node with neither a prompt attribute nor
    /// an input asks the run's input (docs/graph-json.md).
    #[error("`{op}` has no `template_str` and no input: it asks the run's input (`{param}`)")]
    RunInputPrompt {
        op: String,
        param: String,
        span: Span,
    },
}

impl GraphError {
    pub fn code(&self) -> &'static str {
        match self {
            GraphError::Json { .. } => "G0001",
            GraphError::MissingOp { .. } | GraphError::UnknownOp { .. } => "G0002",
            GraphError::MissingId { .. } | GraphError::DuplicateId { .. } => "G0003",
            GraphError::UnknownEnd { .. } => "G0004",
            GraphError::Cycle { .. } => "G0005",
            GraphError::TypeMismatch { .. } => "G0006",
            GraphError::MissingEntry { .. } => "G0007",
            GraphError::BadParameter { .. } => "G0008",
            GraphError::BadAttribute { .. } => "G0009",
            GraphError::ReferenceOnlyOp { .. } => "G0010",
            GraphError::BadStructure { .. } => "G0011",
            GraphError::NotRepresentable { .. } => "G0012",
            GraphError::Unstructured { .. } => "G0013",
            GraphError::ExternalAgent { .. } => "G0014",
            GraphError::RunInputPrompt { .. } => "G0015",
        }
    }

    /// Whether the document still checks and runs (a warning, not an error).
    pub fn is_warning(&self) -> bool {
        matches!(
            self,
            GraphError::ExternalAgent { .. } | GraphError::RunInputPrompt { .. }
        )
    }

    pub fn span(&self) -> Span {
        match self {
            GraphError::Json { span, .. }
            | GraphError::MissingOp { span }
            | GraphError::UnknownOp { span, .. }
            | GraphError::ReferenceOnlyOp { span, .. }
            | GraphError::MissingId { span }
            | GraphError::DuplicateId { span, .. }
            | GraphError::UnknownEnd { span, .. }
            | GraphError::Cycle { span, .. }
            | GraphError::TypeMismatch { span, .. }
            | GraphError::MissingEntry { span }
            | GraphError::BadParameter { span, .. }
            | GraphError::BadAttribute { span, .. }
            | GraphError::BadStructure { span, .. }
            | GraphError::Unstructured { span, .. }
            | GraphError::ExternalAgent { span, .. }
            | GraphError::RunInputPrompt { span, .. } => *span,
            GraphError::NotRepresentable { .. } => Span::new(0, 0),
        }
    }
}

impl IntoDiagnostic for GraphError {
    fn into_diagnostic(self) -> Diagnostic {
        let span = self.span();
        let label = match &self {
            GraphError::Json { .. } => "here",
            GraphError::MissingOp { .. } => "this node has no `op`",
            GraphError::UnknownOp { .. } => "not an op",
            GraphError::ReferenceOnlyOp { .. } => "reference-only op",
            GraphError::MissingId { .. } => "this node has no `id`",
            GraphError::DuplicateId { .. } => "used again here",
            GraphError::UnknownEnd { .. } => "no such node",
            GraphError::Cycle { .. } => "on the cycle",
            GraphError::TypeMismatch { .. } => "this edge",
            GraphError::MissingEntry { .. } => "no entry flow",
            GraphError::BadParameter { .. } => "this parameter",
            GraphError::BadAttribute { .. } => "this attribute",
            GraphError::BadStructure { .. } => "here",
            GraphError::NotRepresentable { .. } => "",
            GraphError::Unstructured { .. } => "this label",
            GraphError::ExternalAgent { .. } => "this call",
            GraphError::RunInputPrompt { .. } => "no prompt here",
        };
        let d = if self.is_warning() {
            Diagnostic::warning(self.code(), self.to_string(), span)
        } else {
            Diagnostic::error(self.code(), self.to_string(), span)
        };
        let d = if label.is_empty() {
            d
        } else {
            d.with_label(label)
        };
        match self {
            GraphError::UnknownOp {
                suggestion: Some(s),
                ..
            } => d.with_help(format!("did you mean `{s}`?")),
            GraphError::UnknownOp { .. } => {
                d.with_help("`aisc ops` lists every op; its graph name is the mnemonic upper-cased")
            }
            GraphError::DuplicateId { first, .. } => {
                d.with_secondary(first, "first used here")
            }
            GraphError::ReferenceOnlyOp { .. } => d.with_note(
                "name each case's first node (`\"node_id\": 4`), or write the cases as regions of the `SWITCH` node (`regions`, and `parent` on their nodes), see docs/graph-json.md",
            ),
            GraphError::Unstructured { .. } => d.with_help(
                "each label must name a node that runs after its marker and only through it; write a loop or a shared step as regions (`regions`, `parent`), see docs/graph-json.md",
            ),
            GraphError::MissingEntry { .. } => {
                d.with_help("add `\"metadata\": {\"is_entry\": true}` to the flow to run")
            }
            GraphError::ExternalAgent { .. } => d.with_help(
                "add the agent's flows to the document's `graphs` (with `metadata.source_agent`), or write the program as AIS source with an `import`",
            ),
            GraphError::RunInputPrompt { .. } => d.with_help(
                "give the node a `template_str`, or a `Data` edge from the node whose value is the prompt",
            ),
            _ => d,
        }
    }
}
