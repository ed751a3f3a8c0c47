//! Configuration problems as diagnostics. `config show`, `doctor` and `run`
//! validate every section of the config file (the backends, and the AAM's
//! `[memory]`, `[tools]`, `[[mcp_servers]]` and `[access]`), and report a
//! problem with the file's line, column and a caret; it is a usage error
//! (exit 2, docs/cli.md).

use super::output::Output;
use ais_ir::{Diagnostic, Span};
use ais_vm::aam::config::AamConfig;
use ais_vm::config::{ConfigError, Settings};
use std::path::Path;

/// The code of every configuration diagnostic (see `aisc explain K0001`).
const CODE: &str = "K0001";

/// Loads the settings, which checks every section of the file, and the
/// AAM's settings from the same parse.
pub fn load_all(backend: &super::BackendArgs) -> Result<(Settings, AamConfig), ConfigError> {
    let settings = backend.settings()?;
    let aam = AamConfig::from_config(&settings.config);
    Ok((settings, aam))
}

/// Renders a configuration problem; returns the exit code (2).
pub fn report(out: &mut Output, problem: &ConfigError) -> i32 {
    let message = problem.message();
    let path = problem.path();
    let text = path.and_then(|p| std::fs::read_to_string(p).ok());
    let mut d = Diagnostic::error(
        CODE,
        format!("invalid configuration: {message}"),
        Span::DUMMY,
    );
    if let Some(h) = problem.hint() {
        d = d.with_help(h.to_string());
    }
    match (path, text, problem.span()) {
        (Some(path), Some(text), Some(span)) => {
            let text = mask_secrets(&text);
            let range = clamp(&text, span);
            d.primary.span = Span::new(range.start, range.end);
            let d = d.with_label(label_for(message));
            out.diagnostics(&path.display().to_string(), &text, &[d]);
        }
        (path, _, _) => {
            let name = path.map(|p: &Path| p.display().to_string());
            out.report(name.as_deref(), &d);
        }
    }
    2
}

fn label_for(message: &str) -> String {
    if message.starts_with("unknown field") {
        "this key is not known in this section".into()
    } else {
        "here".into()
    }
}

/// The span within `text` (the file may have changed since it was read),
/// at least one character wide so the caret has something to point at.
fn clamp(text: &str, span: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let start = span.start.min(text.len());
    let end = span.end.min(text.len()).max(start);
    if end > start {
        return start..end;
    }
    let width = text
        .get(start..)
        .and_then(|t| t.chars().next())
        .map_or(0, char::len_utf8);
    start..start + width
}

/// The file text with the values of secret-looking keys (`api_key`,
/// `token`, ...) replaced by `*`, byte for byte, so that spans stay valid
/// and a caret near such a line never prints a secret.
fn mask_secrets(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| {
            let Some((key, value)) = line.split_once('=') else {
                return line.to_string();
            };
            let k = key.trim().to_ascii_lowercase();
            let secretish = ["key", "token", "secret", "password"]
                .iter()
                .any(|w| k.contains(w));
            // `api_key_env = "NAME"` names a variable; it is not a secret.
            if !secretish || k.ends_with("_env") {
                return line.to_string();
            }
            let masked: String = value
                .chars()
                .map(|c| {
                    if c.is_whitespace() || c == '"' || c == '\'' {
                        c.to_string()
                    } else {
                        "*".repeat(c.len_utf8())
                    }
                })
                .collect();
            format!("{key}={masked}")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_without_moving_offsets() {
        let text = "name = \"x\"\napi_key = \"sk-ünïcode\"\napi_key_env = \"KEY\"\n";
        let m = mask_secrets(text);
        assert_eq!(m.len(), text.len());
        assert!(!m.contains("sk-"), "{m}");
        assert!(m.contains("api_key_env = \"KEY\""), "{m}");
        assert!(m.starts_with("name = \"x\"\n"));
    }

    #[test]
    fn spans_stay_inside_the_text_and_are_never_empty() {
        let text = "a = 1\nb = é\n";
        assert_eq!(clamp(text, 0..1), 0..1);
        assert_eq!(clamp(text, 10..10), 10..12);
        assert_eq!(clamp(text, 40..50), text.len()..text.len());
    }
}
