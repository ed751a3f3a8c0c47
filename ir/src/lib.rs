//! The AIS intermediate representation.
//!
//! Layout: `diag` (diagnostics shared by all phases). The IR proper
//! (entities, op table, printer, parser, verifier, passes, bytecode) lives in
//! sibling modules.

pub mod diag;

pub use diag::{Diagnostic, IntoDiagnostic, Label, Severity, Span};
