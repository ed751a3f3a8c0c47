//! Rename: every occurrence of a variable, flow, agent, capability or memory
//! in the document, as one workspace edit. Built-in operations keep their
//! names.

use crate::analysis::{Analysis, Symbol};
use ais_ir::Span;

/// Words the lexer reserves; no name may be one of them.
use ais_compiler::syntax::lexer::RESERVED_WORDS as KEYWORDS;

/// Why a rename cannot be done (sent to the client as the error message).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RenameError {
    #[error("nothing to rename here")]
    Nothing,
    #[error("`{0}` is a built-in operation; it cannot be renamed")]
    Builtin(String),
    #[error("`{0}` is not a valid name (a letter or `_`, then letters, digits or `_`)")]
    InvalidName(String),
    #[error("`{0}` is a keyword")]
    Keyword(String),
    #[error("`{0}` is already the name of {1} here")]
    Taken(String, &'static str),
}

/// The part of an occurrence that is the name: inside the quotes of a
/// string (`"notes"`, `inv("search")`), the variable of a hole path.
pub fn name_span(text: &str, span: Span) -> Span {
    let s = text.get(span.range()).unwrap_or("");
    let (start, end) = (span.start as usize, span.end as usize);
    if s.len() >= 2 && (s.starts_with('"') || s.starts_with('\'')) {
        return Span::new(start + 1, end - 1);
    }
    let n = s
        .bytes()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_')
        .count();
    if n > 0 {
        Span::new(start, start + n)
    } else {
        span
    }
}

/// The renameable symbol at `offset`: its name's span and its name.
pub fn prepare(a: &Analysis, text: &str, offset: usize) -> Result<(Span, String), RenameError> {
    let (span, sym) = a.symbol_at(offset).ok_or(RenameError::Nothing)?;
    if let Symbol::Op(name) = sym {
        return Err(RenameError::Builtin((*name).to_string()));
    }
    let span = name_span(text, span);
    Ok((span, text.get(span.range()).unwrap_or("").to_string()))
}

/// The spans to replace with `new_name`.
pub fn rename(
    a: &Analysis,
    text: &str,
    offset: usize,
    new_name: &str,
) -> Result<Vec<Span>, RenameError> {
    prepare(a, text, offset)?;
    let valid = new_name
        .bytes()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && new_name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_');
    if !valid {
        return Err(RenameError::InvalidName(new_name.to_string()));
    }
    if KEYWORDS.contains(&new_name) {
        return Err(RenameError::Keyword(new_name.to_string()));
    }
    let (_, sym) = a.symbol_at(offset).ok_or(RenameError::Nothing)?;
    if let Some(what) = taken(a, sym, new_name) {
        return Err(RenameError::Taken(new_name.to_string(), what));
    }
    // Edits in the document only: occurrences in imported files are not
    // renamed (the edit would have to open them).
    let mut spans: Vec<Span> = a
        .references(sym)
        .into_iter()
        .filter(|s| a.is_own(*s))
        .map(|s| name_span(text, s))
        .collect();
    if let Some(def) = a.definition(sym).filter(|d| a.is_own(*d)) {
        spans.push(name_span(text, def));
    }
    spans.sort_by_key(|s| (s.start, s.end));
    spans.dedup();
    Ok(spans)
}

/// What already answers to `new_name` where `sym` is known, if anything: a
/// rename onto it would change what the program means.
fn taken(a: &Analysis, sym: &Symbol, new_name: &str) -> Option<&'static str> {
    let overlaps = |x: Span, y: Span| x.start <= y.end && y.start <= x.end;
    match sym {
        Symbol::Var(def) => {
            let b = a.bindings.iter().find(|b| b.def == *def)?;
            a.bindings
                .iter()
                .any(|o| o.def != *def && o.name == new_name && overlaps(o.scope, b.scope))
                .then_some("a variable")
        }
        Symbol::Agent(_) => a.index.agents.contains_key(new_name).then_some("an agent"),
        Symbol::Flow(agent, _) | Symbol::Capability(agent, _) => {
            let info = a.index.agents.get(agent)?;
            if info.flows.contains_key(new_name) {
                Some("a flow")
            } else if info.capabilities.contains_key(new_name) {
                Some("a capability")
            } else {
                None
            }
        }
        Symbol::Memory(agent, _) => a
            .index
            .agents
            .get(agent)?
            .memories
            .contains_key(new_name)
            .then_some("a memory"),
        Symbol::Op(_) => None,
    }
}
