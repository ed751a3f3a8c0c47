//! The front-end pipeline as one call: source text in, AST + index +
//! diagnostics out. Used by the CLI and by tests.

use crate::sema::{self, ProgramIndex};
use crate::syntax::{self, ast};
use ais_ir::{Diagnostic, IntoDiagnostic, Severity};

pub struct FrontEnd {
    pub file: ast::File,
    pub index: ProgramIndex,
    /// Syntax, then semantic diagnostics, each group in source order.
    pub diagnostics: Vec<Diagnostic>,
}

impl FrontEnd {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    pub fn count(&self, severity: Severity) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == severity)
            .count()
    }
}

/// Parses and checks one source file. Semantic analysis runs even when there
/// are syntax errors (on the recovered tree), so a single run reports as much
/// as possible.
pub fn check_source(source: &str) -> FrontEnd {
    let parsed = syntax::parse(source);
    let checked = sema::check(&parsed.file);
    let mut diagnostics: Vec<Diagnostic> = parsed
        .errors
        .into_iter()
        .map(IntoDiagnostic::into_diagnostic)
        .collect();
    diagnostics.extend(
        checked
            .errors
            .into_iter()
            .map(IntoDiagnostic::into_diagnostic),
    );
    FrontEnd {
        file: parsed.file,
        index: checked.index,
        diagnostics,
    }
}
