//! Quick fixes: each diagnostic whose help says "did you mean `x`?" offers
//! a code action that writes `x` in place of the misspelt name.

use ais_ir::{Diagnostic, Span};

/// The suggestion a diagnostic carries, when its help is a "did you mean".
pub fn suggestion(d: &Diagnostic) -> Option<&str> {
    let rest = d.help.as_deref()?.strip_prefix("did you mean `")?;
    let end = rest.find('`')?;
    let s = &rest[..end];
    (!s.is_empty()).then_some(s)
}

/// (diagnostic, span to replace, replacement) for every diagnostic with a
/// suggestion whose primary span overlaps `range` (byte offsets). Only a
/// span that holds a single name is replaced, so a fix never rewrites more
/// than the misspelling.
pub fn fixes<'a>(
    diagnostics: &'a [Diagnostic],
    text: &str,
    range: Span,
) -> Vec<(&'a Diagnostic, Span, &'a str)> {
    diagnostics
        .iter()
        .filter(|d| d.primary.span.start <= range.end && range.start <= d.primary.span.end)
        .filter_map(|d| {
            let s = suggestion(d)?;
            let written = text.get(d.primary.span.range())?;
            let is_name = !written.is_empty()
                && written
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'_');
            (is_name && written != s).then_some((d, d.primary.span, s))
        })
        .collect()
}
