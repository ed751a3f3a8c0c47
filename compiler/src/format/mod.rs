//! The formatter: one canonical layout for AIS source, comments kept.
//!
//! [`format_source`] parses the text, prints the tree again (literals and
//! comments copied as written, see [`print`]) and checks its own work before
//! returning it: the result must parse, mean the same program (the trees
//! are equal once spans are erased) and hold the same comments in the same
//! order. A file with syntax errors is not formatted.
//!
//! The layout: four spaces per level; one agent member, statement, memory /
//! belief / goal entry or switch arm per line; at most one empty line kept
//! where the source has any, and always one between agents; call arguments,
//! parameters and list items on one line when they fit in [`WIDTH`]
//! columns, else one per line with a trailing comma.

mod doc;
mod print;

use crate::syntax::erase::erase_spans;
use crate::syntax::lexer::comments;
use crate::syntax::{parse, SyntaxError};

/// The line width the layout aims for.
pub const WIDTH: usize = 100;

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FormatError {
    /// The source does not parse; the errors are the front end's.
    #[error("the source has {} syntax error{}", .0.len(), if .0.len() == 1 { "" } else { "s" })]
    Syntax(Vec<SyntaxError>),
    /// The formatter's own check failed (a bug in the formatter): the
    /// source is left alone.
    #[error("internal formatter error: {0}")]
    Internal(String),
}

/// The canonical layout of `source`.
pub fn format_source(source: &str) -> Result<String, FormatError> {
    let parsed = parse(source);
    if !parsed.errors.is_empty() {
        return Err(FormatError::Syntax(parsed.errors));
    }
    let listed = comments(source);
    let mut printer = print::Printer::new(source, listed.clone());
    let out = doc::render(&printer.file(&parsed.file), WIDTH);
    let out = if out.trim().is_empty() {
        String::new()
    } else {
        out
    };
    // The formatter's guarantees, checked on every run.
    let again = parse(&out);
    if let Some(e) = again.errors.first() {
        return Err(FormatError::Internal(format!(
            "the formatted text does not parse ({e} at byte {})",
            e.span().start
        )));
    }
    if erase_spans(&again.file) != erase_spans(&parsed.file) {
        return Err(FormatError::Internal(
            "the formatted text means a different program".into(),
        ));
    }
    let texts = |src: &str| -> Vec<String> {
        comments(src)
            .iter()
            .map(|c| c.text(src).to_string())
            .collect()
    };
    let before: Vec<String> = listed.iter().map(|c| c.text(source).to_string()).collect();
    if texts(&out) != before {
        return Err(FormatError::Internal(
            "the formatted text lost or reordered a comment".into(),
        ));
    }
    Ok(out)
}
