//! Diagnostics as data, shared by every phase of the toolchain.
//!
//! Each phase (lexer, parser, sema, IR parser, verifier, loader, VM) keeps its
//! own `thiserror` enum carrying spans; those enums convert into
//! [`Diagnostic`], which the CLI renders at the edge (ariadne for people, JSON
//! for tools). Nothing in here knows how to print in colour.

use serde::Serialize;
use std::fmt;

/// A half-open byte range `start..end` of global offsets: into one source
/// text, or into a program's [`crate::SourceMap`] of several.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, serde::Deserialize)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub const DUMMY: Span = Span { start: 0, end: 0 };

    pub fn new(start: usize, end: usize) -> Span {
        // Sources are capped well below 4 GiB by the loaders; saturate rather than wrap.
        let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        Span {
            start: clamp(start),
            end: clamp(end.max(start)),
        }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }

    pub fn is_dummy(self) -> bool {
        self == Span::DUMMY
    }
}

impl fmt::Debug for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.start, self.end)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Note,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        })
    }
}

/// A span with an optional message shown under it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Label {
    pub span: Span,
    pub message: Option<String>,
}

impl Label {
    pub fn new(span: Span, message: impl Into<String>) -> Label {
        Label {
            span,
            message: Some(message.into()),
        }
    }

    pub fn bare(span: Span) -> Label {
        Label {
            span,
            message: None,
        }
    }
}

/// One reportable problem. `code` is stable (e.g. `E0100`) and has a long
/// explanation available through `aisc explain CODE`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub code: &'static str,
    pub message: String,
    pub primary: Label,
    pub secondary: Vec<Label>,
    pub notes: Vec<String>,
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn error(code: &'static str, message: impl Into<String>, span: Span) -> Diagnostic {
        Diagnostic::new(Severity::Error, code, message, span)
    }

    pub fn warning(code: &'static str, message: impl Into<String>, span: Span) -> Diagnostic {
        Diagnostic::new(Severity::Warning, code, message, span)
    }

    pub fn new(
        severity: Severity,
        code: &'static str,
        message: impl Into<String>,
        span: Span,
    ) -> Diagnostic {
        Diagnostic {
            severity,
            code,
            message: message.into(),
            primary: Label::bare(span),
            secondary: Vec::new(),
            notes: Vec::new(),
            help: None,
        }
    }

    /// Text shown under the primary span.
    pub fn with_label(mut self, message: impl Into<String>) -> Diagnostic {
        self.primary.message = Some(message.into());
        self
    }

    pub fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.secondary.push(Label::new(span, message));
        self
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Every label moved by `by` bytes (a file's base in a [`crate::SourceMap`]).
    pub fn shifted(mut self, by: u32) -> Diagnostic {
        let shift = |s: &mut Span| {
            s.start = s.start.saturating_add(by);
            s.end = s.end.saturating_add(by);
        };
        shift(&mut self.primary.span);
        for l in &mut self.secondary {
            shift(&mut l.span);
        }
        self
    }
}

/// Converts a phase-specific error into a [`Diagnostic`].
pub trait IntoDiagnostic {
    fn into_diagnostic(self) -> Diagnostic;
}

impl IntoDiagnostic for Diagnostic {
    fn into_diagnostic(self) -> Diagnostic {
        self
    }
}

/// 1-based line and column (in characters) of a byte offset, as editors count them.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    // Step back to a char boundary so slicing never panics on bad offsets.
    let mut cut = offset;
    while !source.is_char_boundary(cut) {
        cut -= 1;
    }
    let before = &source[..cut];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one() {
        let src = "ab\ncdé\nx";
        assert_eq!(line_col(src, 0), (1, 1));
        assert_eq!(line_col(src, 3), (2, 1));
        assert_eq!(line_col(src, 8), (3, 1));
        // Offset inside a multi-byte char snaps back rather than panicking.
        assert_eq!(line_col(src, 6), (2, 3));
        assert_eq!(line_col(src, 999), (3, 2));
    }

    #[test]
    fn span_join_covers_both() {
        let a = Span::new(3, 5);
        let b = Span::new(10, 12);
        assert_eq!(a.to(b), Span::new(3, 12));
        assert_eq!(b.to(a), Span::new(3, 12));
    }
}
