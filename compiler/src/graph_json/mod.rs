//! The reference A-PXM implementation's JSON graph format as a second front
//! end: `aisc check|build|run FILE.json` read it ([`compile`]) and
//! `aisc build --emit=graph-json` writes it ([`emit`]). The format, the op
//! mapping and the error codes (`G0001`–`G0013`) are in docs/graph-json.md.

mod attrs;
mod build;
pub mod emit;
pub mod errors;
mod flow;
mod lower;
mod mirror;
mod nest;
mod reference;
mod refonly;
pub mod schema;
mod spans;
mod structure;

pub use emit::emit;
pub use errors::GraphError;
/// Our name of an LLM option the reference's code generator spells
/// another way (`system_prompt` is `system`); shared with source's
/// reference spellings (`syntax/refargs.rs`).
pub use reference::renamed as reference_name;

use ais_ir::{Diagnostic, IntoDiagnostic, Span};
use std::path::Path;

/// Whether a file is graph JSON: by its `.json` extension, or (any other
/// name) by content that starts as a JSON object. AIS source never starts
/// with `{`.
pub fn is_graph_json(path: &Path, text: &str) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        || text.trim_start().starts_with('{')
}

/// Parses, validates and lowers a graph document to verified IR. Every
/// problem is a coded diagnostic whose span points into `text`.
pub fn compile(text: &str) -> Result<ais_ir::Module, Vec<Diagnostic>> {
    compile_with_warnings(text).map(|(m, _)| m)
}

/// [`compile`], with the document's warnings (`G0014`).
pub fn compile_with_warnings(
    text: &str,
) -> Result<(ais_ir::Module, Vec<Diagnostic>), Vec<Diagnostic>> {
    let mut doc: schema::Graph = match serde_json::from_str(text) {
        Ok(d) => d,
        Err(e) => return Err(vec![json_error(text, &e).into_diagnostic()]),
    };
    let loc = lower::Locator::new(text);
    if let Err(e) = structure::structurize(&mut doc, &loc) {
        return Err(vec![e.into_diagnostic()]);
    }
    let (module, warnings) = lower::lower_document(&doc, &loc).map_err(|es| {
        es.into_iter()
            .map(IntoDiagnostic::into_diagnostic)
            .collect::<Vec<_>>()
    })?;
    let problems: Vec<Diagnostic> = ais_ir::verify_diagnostics(&module)
        .into_iter()
        .filter(Diagnostic::is_error)
        .collect();
    if problems.is_empty() {
        let warnings = warnings
            .into_iter()
            .map(IntoDiagnostic::into_diagnostic)
            .collect();
        Ok((module, warnings))
    } else {
        Err(problems)
    }
}

/// A serde error at its byte offset (serde counts lines and columns from 1).
fn json_error(text: &str, e: &serde_json::Error) -> GraphError {
    let mut offset = 0usize;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        if n + 1 == e.line() {
            offset += e.column().saturating_sub(1).min(line.len());
            break;
        }
        offset += line.len();
    }
    let offset = offset.min(text.len());
    // Keep the span on a character boundary.
    let start = (0..=offset)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    let end = (start + 1..=text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(start);
    // serde appends " at line L column C"; the span says where.
    let message = e.to_string();
    let message = message
        .rsplit_once(" at line ")
        .map_or(message.as_str(), |(m, _)| m)
        .to_string();
    GraphError::Json {
        message,
        span: Span::new(start, end),
    }
}
