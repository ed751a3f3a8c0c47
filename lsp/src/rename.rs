//! Rename: every occurrence of a variable, flow, agent, capability or memory
//! in the document and in the files it imports, as one workspace edit (a
//! flow defined in an imported file is renamed there too, or the program
//! would no longer resolve). Built-in operations, and names defined in the
//! bundled library, keep their names.

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
    #[error("`{0}` is defined in the bundled library; it cannot be renamed")]
    Library(String),
}

/// The part of an occurrence that is the name: inside the quotes of a
/// string (`"notes"`, `inv("search")`), the variable of a hole path.
pub fn name_span(text: &str, span: Span) -> Span {
    narrow(text.get(span.range()).unwrap_or(""), span)
}

/// [`name_span`] of an occurrence whose text is `s`.
fn narrow(s: &str, span: Span) -> Span {
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

/// The (global) spans to replace with `new_name`: in the document (`text`,
/// as the editor has it) and in the files it imports (see
/// [`Analysis::is_own`]; the edit names each file).
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
    let mut spans: Vec<Span> = a.references(sym);
    spans.extend(a.definition(sym));
    // A name in a file with no path (the bundled library) cannot be edited.
    let in_library = |s: &Span| {
        !a.is_own(*s)
            && a.sources
                .files()
                .partition_point(|f| f.base <= s.start)
                .checked_sub(1)
                .is_some_and(|i| a.paths.get(i).is_none_or(Option::is_none))
    };
    if spans.iter().any(in_library) {
        let (_, old) = prepare(a, text, offset)?;
        return Err(RenameError::Library(old));
    }
    let mut spans: Vec<Span> = spans
        .into_iter()
        .map(|s| {
            if a.is_own(s) {
                name_span(text, s)
            } else {
                narrow(a.text_of(s), s)
            }
        })
        .collect();
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
