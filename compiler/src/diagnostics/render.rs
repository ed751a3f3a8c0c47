//! Rendering diagnostics at the edge: ariadne reports for people, and
//! rustc-shaped JSON objects for tools.

use ais_ir::diag::line_col;
use ais_ir::{Diagnostic, Severity, Span};
use ariadne::{Color, Config, IndexType, Label, Report, ReportKind, Source};
use serde_json::{json, Value};

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

/// A human-readable report. `color` adds ANSI colours.
pub fn render_human(d: &Diagnostic, file: &str, src: &str, color: bool) -> String {
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
    let range = clamp(src, d.primary.span);
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
    for (i, l) in d.secondary.iter().enumerate() {
        let mut label = Label::new((id.clone(), clamp(src, l.span)))
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
        .write((id, Source::from(src)), &mut out)
        .is_err()
    {
        // Writing to a Vec cannot fail; fall back to a plain line regardless.
        return format!("{}[{}]: {}\n", d.severity, d.code, d.message);
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn json_span(src: &str, file: &str, span: Span, label: Option<&String>, primary: bool) -> Value {
    let r = clamp(src, span);
    let (line_start, column_start) = line_col(src, r.start);
    let (line_end, column_end) = line_col(src, r.end);
    json!({
        "file_name": file,
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
    let mut spans = vec![json_span(
        src,
        file,
        d.primary.span,
        d.primary.message.as_ref(),
        true,
    )];
    spans.extend(
        d.secondary
            .iter()
            .map(|l| json_span(src, file, l.span, l.message.as_ref(), false)),
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
        "rendered": render_human(d, file, src, false),
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
