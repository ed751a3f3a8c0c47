//! Rendering diagnostics at the edge: ariadne reports for people, and
//! rustc-shaped JSON objects for tools.

use ais_ir::diag::line_col;
use ais_ir::{Diagnostic, Severity, SourceMap, Span};
use ariadne::{Color, Config, IndexType, Label, Report, ReportKind};
use serde_json::{json, Value};

/// The files a diagnostic may point into, borrowed: one file at base 0, or
/// every file of a [`SourceMap`].
#[derive(Clone, Copy)]
struct View<'a> {
    one: Option<(&'a str, &'a str)>,
    map: Option<&'a SourceMap>,
}

impl<'a> View<'a> {
    fn single(file: &'a str, src: &'a str) -> View<'a> {
        View {
            one: Some((file, src)),
            map: None,
        }
    }

    fn map(map: &'a SourceMap) -> View<'a> {
        View {
            one: None,
            map: Some(map),
        }
    }

    /// (name, text, base) of the file `span` starts in.
    fn file_of(&self, span: Span) -> (&'a str, &'a str, u32) {
        match (self.one, self.map.and_then(|m| m.file_of(span))) {
            (Some((name, text)), _) => (name, text, 0),
            (None, Some(f)) => (f.name.as_str(), f.text.as_str(), f.base),
            (None, None) => ("", "", 0),
        }
    }

    /// `span` in its file: (name, text, local span).
    fn locate(&self, span: Span) -> (&'a str, &'a str, Span) {
        let (name, text, base) = self.file_of(span);
        let local = Span {
            start: span.start.saturating_sub(base),
            end: span.end.saturating_sub(base),
        };
        (name, text, local)
    }
}

/// Clamps a span into the source and onto char boundaries, so a bad span can
/// never make the renderer panic.
fn clamp(src: &str, span: Span) -> std::ops::Range<usize> {
    let fix = |mut i: usize| {
        i = i.min(src.len());
        while !src.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let start = fix(span.start as usize);
    let end = fix(span.end as usize).max(start);
    start..end
}

/// Files up to this size are rendered by ariadne with the whole file as
/// context (exact line numbers and multi-line labels).
const MAX_FULL_SOURCE: usize = 1 << 20;
/// Lines longer than this are shown as a window around the primary label.
const MAX_SHOWN_LINE: usize = 240;
/// Bytes of context kept on each side of the primary label in such a window.
const WINDOW_CONTEXT: usize = 80;

fn floor_boundary(src: &str, mut i: usize) -> usize {
    i = i.min(src.len());
    while !src.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn line_start(src: &str, at: usize) -> usize {
    src[..at].rfind('\n').map_or(0, |i| i + 1)
}

fn line_end(src: &str, at: usize) -> usize {
    src[at..].find('\n').map_or(src.len(), |i| at + i)
}

/// A human-readable report. `color` adds ANSI colours.
///
/// Rendering costs the size of the excerpt shown, not of the file: a huge
/// file or an over-long line gets a compact one-line report (see
/// [`render_compact`]) instead of ariadne's, which indexes the whole source.
pub fn render_human(d: &Diagnostic, file: &str, src: &str, color: bool) -> String {
    human(d, View::single(file, src), color)
}

/// [`render_human`] for a program of several files: each label is shown in
/// the file it points into.
pub fn render_human_map(d: &Diagnostic, sources: &SourceMap, color: bool) -> String {
    human(d, View::map(sources), color)
}

fn human(d: &Diagnostic, view: View<'_>, color: bool) -> String {
    let (file, src, primary_span) = view.locate(d.primary.span);
    let range = clamp(src, primary_span);
    let line_len = line_end(src, range.start) - line_start(src, range.start);
    let too_big = |text: &str| text.len() > MAX_FULL_SOURCE;
    if too_big(src)
        || line_len > MAX_SHOWN_LINE
        || d.secondary.iter().any(|l| too_big(view.locate(l.span).1))
    {
        return render_compact(d, view, color);
    }
    let kind = match d.severity {
        Severity::Error => ReportKind::Error,
        Severity::Warning => ReportKind::Warning,
        Severity::Note => ReportKind::Advice,
    };
    let primary_color = match d.severity {
        Severity::Error => Color::Red,
        Severity::Warning => Color::Yellow,
        Severity::Note => Color::Cyan,
    };
    let id = file.to_string();
    let mut primary = Label::new((id.clone(), range.clone())).with_color(primary_color);
    if let Some(m) = &d.primary.message {
        primary = primary.with_message(m);
    }
    let mut report = Report::build(kind, (id.clone(), range))
        .with_config(
            Config::new()
                .with_color(color)
                .with_index_type(IndexType::Byte),
        )
        .with_code(d.code)
        .with_message(&d.message)
        .with_label(primary);
    let mut files: Vec<(String, &str)> = vec![(id.clone(), src)];
    for (i, l) in d.secondary.iter().enumerate() {
        let (lfile, lsrc, lspan) = view.locate(l.span);
        if !files.iter().any(|(n, _)| n == lfile) {
            files.push((lfile.to_string(), lsrc));
        }
        let mut label = Label::new((lfile.to_string(), clamp(lsrc, lspan)))
            .with_color(Color::Blue)
            .with_order(i32::try_from(i + 1).unwrap_or(i32::MAX));
        if let Some(m) = &l.message {
            label = label.with_message(m);
        }
        report = report.with_label(label);
    }
    for n in &d.notes {
        report = report.with_note(n);
    }
    if let Some(h) = &d.help {
        report = report.with_help(h);
    }
    let mut out = Vec::new();
    if report
        .finish()
        .write(ariadne::sources(files), &mut out)
        .is_err()
    {
        // Writing to a Vec cannot fail; fall back to a plain line regardless.
        return format!("{}[{}]: {}\n", d.severity, d.code, d.message);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The report for huge files and long lines: the primary label's line (or a
/// window of it) underlined, secondary labels as `file:line:col` notes.
fn render_compact(d: &Diagnostic, view: View<'_>, color: bool) -> String {
    use std::fmt::Write;
    let (file, src, primary_span) = view.locate(d.primary.span);
    let range = clamp(src, primary_span);
    let ls = line_start(src, range.start);
    let le = line_end(src, range.start);
    let start = floor_boundary(src, range.start.saturating_sub(WINDOW_CONTEXT).max(ls));
    let end = floor_boundary(
        src,
        (range.start + WINDOW_CONTEXT)
            .max(range.end.min(le))
            .min(le),
    );
    let end = end.min(start + 2 * WINDOW_CONTEXT + 1).max(start);
    let end = floor_boundary(src, end);
    let shown = &src[start..end];
    let (line, col) = line_col(src, range.start);
    let (paint, reset) = match (color, d.severity) {
        (false, _) => ("", ""),
        (true, Severity::Error) => ("\x1b[31m", "\x1b[0m"),
        (true, Severity::Warning) => ("\x1b[33m", "\x1b[0m"),
        (true, Severity::Note) => ("\x1b[36m", "\x1b[0m"),
    };
    let kind = match d.severity {
        Severity::Error => "Error",
        Severity::Warning => "Warning",
        Severity::Note => "Advice",
    };
    let gutter = line.to_string().len();
    let pad = " ".repeat(gutter);
    let lead = if start > ls { "…" } else { "" };
    let tail = if end < le { "…" } else { "" };
    let before = src[start..range.start.max(start)].chars().count() + lead.chars().count();
    let width = src[range.start.max(start)..range.end.clamp(range.start.max(start), end)]
        .chars()
        .count()
        .max(1);
    let mut out = String::new();
    let _ = writeln!(out, "{paint}[{}] {kind}:{reset} {}", d.code, d.message);
    let _ = writeln!(out, "{pad} ╭─[ {file}:{line}:{col} ]");
    let _ = writeln!(out, "{pad} │");
    let _ = writeln!(out, "{line} │ {lead}{shown}{tail}");
    let _ = writeln!(
        out,
        "{pad} │ {}{paint}{}{reset} {}",
        " ".repeat(before),
        "^".repeat(width),
        d.primary.message.as_deref().unwrap_or("")
    );
    let mut notes: Vec<String> = d
        .secondary
        .iter()
        .map(|l| {
            let (lfile, lsrc, lspan) = view.locate(l.span);
            let (sl, sc) = line_col(lsrc, clamp(lsrc, lspan).start);
            match &l.message {
                Some(m) => format!("{lfile}:{sl}:{sc}: {m}"),
                None => format!("see {lfile}:{sl}:{sc}"),
            }
        })
        .collect();
    notes.extend(d.notes.iter().cloned());
    if le - ls > MAX_SHOWN_LINE {
        notes.push(format!(
            "line {line} is {} bytes long; only the part around the problem is shown",
            le - ls
        ));
    }
    for n in &notes {
        let _ = writeln!(out, "{pad} │ Note: {n}");
    }
    if let Some(h) = &d.help {
        let _ = writeln!(out, "{pad} │ Help: {h}");
    }
    let _ = writeln!(out, "{}╯", "─".repeat(gutter + 2));
    out
}

fn json_span(view: View<'_>, span: Span, label: Option<&String>, primary: bool) -> Value {
    let (file, src, span) = view.locate(span);
    let r = clamp(src, span);
    let (line_start, column_start) = line_col(src, r.start);
    let (line_end, column_end) = line_col(src, r.end);
    json!({
        "file_name": file,
        "file": file,
        "byte_start": r.start,
        "byte_end": r.end,
        "line_start": line_start,
        "line_end": line_end,
        "column_start": column_start,
        "column_end": column_end,
        "is_primary": primary,
        "label": label,
    })
}

/// One JSON object shaped like rustc's `--error-format=json` output.
pub fn render_json(d: &Diagnostic, file: &str, src: &str) -> Value {
    json_of(d, View::single(file, src))
}

/// [`render_json`] for a program of several files: each span names the
/// file it points into (`file_name`, and `file`) with positions in it.
pub fn render_json_map(d: &Diagnostic, sources: &SourceMap) -> Value {
    json_of(d, View::map(sources))
}

fn json_of(d: &Diagnostic, view: View<'_>) -> Value {
    let mut spans = vec![json_span(
        view,
        d.primary.span,
        d.primary.message.as_ref(),
        true,
    )];
    spans.extend(
        d.secondary
            .iter()
            .map(|l| json_span(view, l.span, l.message.as_ref(), false)),
    );
    let mut children: Vec<Value> = d
        .notes
        .iter()
        .map(|n| json!({"message": n, "level": "note", "spans": [], "children": [], "code": null, "rendered": null}))
        .collect();
    if let Some(h) = &d.help {
        children.push(json!({"message": h, "level": "help", "spans": [], "children": [], "code": null, "rendered": null}));
    }
    json!({
        "$message_type": "diagnostic",
        "message": d.message,
        "code": {"code": d.code, "explanation": super::explain::explain(d.code)},
        "level": d.severity.to_string(),
        "spans": spans,
        "children": children,
        "rendered": human(d, view, false),
    })
}

/// A report for a diagnostic that points into no source text (an artifact
/// that does not load, a configuration value, a run-time failure in an
/// artifact): the code, message, notes and help, without a snippet.
pub fn render_plain(d: &Diagnostic, file: Option<&str>) -> String {
    let mut s = format!("{}[{}]: {}\n", d.severity, d.code, d.message);
    if let Some(f) = file {
        s.push_str(&format!("  --> {f}\n"));
    }
    if let Some(m) = &d.primary.message {
        s.push_str(&format!("  = {m}\n"));
    }
    for n in &d.notes {
        s.push_str(&format!("  = note: {n}\n"));
    }
    if let Some(h) = &d.help {
        s.push_str(&format!("  = help: {h}\n"));
    }
    s
}

/// The JSON form of [`render_plain`]: rustc's shape with no spans.
pub fn render_json_plain(d: &Diagnostic, file: Option<&str>) -> Value {
    let mut j = render_json(d, file.unwrap_or(""), "");
    j["spans"] = json!([]);
    j["rendered"] = json!(render_plain(d, file));
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_spans_do_not_panic() {
        let d = Diagnostic::error("E0004", "x", Span::new(50, 90));
        let text = render_human(&d, "f.ais", "héllo", false);
        assert!(text.contains("E0004"));
        let j = render_json(&d, "f.ais", "héllo");
        assert_eq!(j["spans"][0]["byte_start"], 6);
    }

    #[test]
    fn labels_render_in_the_file_they_point_into() {
        let mut map = SourceMap::new();
        map.add("main.ais", "agent A {}\n");
        let base = map.add("lib/b.ais", "agent A {}\n");
        let d = Diagnostic::error(
            "E0111",
            "duplicate definition of agent `A`",
            Span::new(base as usize + 6, base as usize + 7),
        )
        .with_secondary(Span::new(6, 7), "first defined here");
        let text = render_human_map(&d, &map, false);
        assert!(text.contains("lib/b.ais:1:7"), "{text}");
        assert!(text.contains("main.ais:1:7"), "{text}");
        let j = render_json_map(&d, &map);
        assert_eq!(j["spans"][0]["file"], "lib/b.ais");
        assert_eq!(j["spans"][0]["byte_start"], 6);
        assert_eq!(j["spans"][1]["file"], "main.ais");
        assert_eq!(j["spans"][1]["column_start"], 7);
    }

    #[test]
    fn json_has_rustc_shape() {
        let src = "a\nbcd\n";
        let d = Diagnostic::error("E0100", "undefined variable `c`", Span::new(3, 4))
            .with_label("here")
            .with_help("h");
        let j = render_json(&d, "f.ais", src);
        assert_eq!(j["level"], "error");
        assert_eq!(j["code"]["code"], "E0100");
        assert_eq!(j["spans"][0]["line_start"], 2);
        assert_eq!(j["spans"][0]["column_start"], 2);
        assert_eq!(j["spans"][0]["column_end"], 3);
        assert_eq!(j["children"][0]["level"], "help");
        assert!(j["rendered"]
            .as_str()
            .is_some_and(|r| r.contains("undefined variable")));
    }
}
