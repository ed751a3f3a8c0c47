//! Diagnostic rendering and explanations. The diagnostics themselves are
//! data (`ais_ir::Diagnostic`), produced by each phase's error enum.

pub mod explain;
pub mod render;

pub use render::{
    render_human, render_human_map, render_json, render_json_map, render_json_plain, render_plain,
};

/// At most this many diagnostics of one file are shown; the rest are
/// counted. Keeps the output bounded whatever the input.
pub const MAX_PER_FILE: usize = 100;
/// At most this many diagnostics whose primary label is on one line.
pub const MAX_PER_LINE: usize = 10;

/// The diagnostics of one file worth showing (errors before warnings when
/// some must go, otherwise in their order), and how many were left out.
pub fn limit<'d>(
    src: &str,
    diags: &'d [ais_ir::Diagnostic],
) -> (Vec<&'d ais_ir::Diagnostic>, usize) {
    limit_from(src, 0, diags.iter().collect())
}

/// [`limit`] for a program of several files: per file (in load order), its
/// name, the diagnostics whose primary label is in it worth showing, and
/// how many of its diagnostics were left out.
pub fn limit_map<'d, 'm>(
    sources: &'m ais_ir::SourceMap,
    diags: &'d [ais_ir::Diagnostic],
) -> Vec<(&'m str, Vec<&'d ais_ir::Diagnostic>, usize)> {
    let mut per_file: Vec<Vec<&ais_ir::Diagnostic>> = vec![Vec::new(); sources.files().len()];
    for d in diags {
        let i = sources
            .files()
            .partition_point(|f| f.base <= d.primary.span.start)
            .saturating_sub(1);
        if let Some(list) = per_file.get_mut(i) {
            list.push(d);
        }
    }
    sources
        .files()
        .iter()
        .zip(per_file)
        .filter(|(_, list)| !list.is_empty())
        .map(|(f, list)| {
            let (kept, hidden) = limit_from(&f.text, f.base, list);
            (f.name.as_str(), kept, hidden)
        })
        .collect()
}

/// `diags` (whose offsets start at `base` in `src`) capped.
fn limit_from<'d>(
    src: &str,
    base: u32,
    diags: Vec<&'d ais_ir::Diagnostic>,
) -> (Vec<&'d ais_ir::Diagnostic>, usize) {
    let total = diags.len();
    let mut kept = diags;
    if kept.len() > MAX_PER_LINE {
        // Line of each primary label, by binary search in the line starts
        // (built once: linear in the file, whatever the number of diagnostics).
        let starts: Vec<usize> = std::iter::once(0)
            .chain(src.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        let line = |d: &ais_ir::Diagnostic| {
            starts.partition_point(|&s| s <= d.primary.span.start.saturating_sub(base) as usize)
        };
        let mut per_line: std::collections::HashMap<usize, usize> = Default::default();
        kept.retain(|d| {
            let n = per_line.entry(line(d)).or_default();
            *n += 1;
            *n <= MAX_PER_LINE
        });
    }
    if kept.len() > MAX_PER_FILE {
        let errors: Vec<_> = kept.iter().copied().filter(|d| d.is_error()).collect();
        if errors.len() >= MAX_PER_FILE {
            kept = errors;
        } else {
            // All errors, then the first warnings, back in their order.
            let mut room = MAX_PER_FILE - errors.len();
            kept.retain(|d| {
                d.is_error()
                    || (room > 0 && {
                        room -= 1;
                        true
                    })
            });
        }
        kept.truncate(MAX_PER_FILE);
    }
    let hidden = total - kept.len();
    (kept, hidden)
}

/// The line that ends a capped list of diagnostics, for people.
pub fn hidden_note(file: &str, hidden: usize) -> String {
    format!(
        "{file}: {hidden} more diagnostic{} not shown (at most {MAX_PER_FILE} per file and {MAX_PER_LINE} per line)",
        if hidden == 1 { "" } else { "s" }
    )
}

/// The same, as a rustc-shaped JSON note.
pub fn hidden_json(file: &str, hidden: usize) -> serde_json::Value {
    serde_json::json!({
        "$message_type": "diagnostic",
        "message": hidden_note(file, hidden),
        "code": null,
        "level": "note",
        "spans": [],
        "children": [],
        "rendered": null,
        "hidden": hidden,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ais_ir::{Diagnostic, Span};

    #[test]
    fn limit_caps_per_line_and_per_file_and_counts_the_rest() {
        let src = "x\n".repeat(500);
        // 20 errors on line 1, then one error on each of 300 lines.
        let mut diags: Vec<Diagnostic> = (0..20)
            .map(|_| Diagnostic::error("E0003", "x", Span::new(0, 1)))
            .collect();
        diags.extend(
            (1..=300).map(|l| Diagnostic::error("E0003", "x", Span::new(2 * l, 2 * l + 1))),
        );
        let (shown, hidden) = limit(&src, &diags);
        assert_eq!(shown.len(), MAX_PER_FILE);
        assert_eq!(hidden, diags.len() - MAX_PER_FILE);
        assert_eq!(
            shown.iter().filter(|d| d.primary.span.start == 0).count(),
            MAX_PER_LINE
        );
    }

    #[test]
    fn limit_keeps_errors_before_warnings() {
        let src = "x\n".repeat(300);
        let mut diags: Vec<Diagnostic> = (0..150)
            .map(|l| Diagnostic::warning("W0001", "w", Span::new(2 * l, 2 * l + 1)))
            .collect();
        diags.push(Diagnostic::error("E0100", "e", Span::new(500, 501)));
        let (shown, hidden) = limit(&src, &diags);
        assert_eq!(shown.len(), MAX_PER_FILE);
        assert_eq!(hidden, 51);
        assert!(shown.iter().any(|d| d.is_error()));
    }
}
