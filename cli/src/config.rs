//! Configuration problems as diagnostics. `config show`, `doctor` and `run`
//! validate every section of the config file (the backends, and the AAM's
//! `[memory]`, `[tools]`, `[[mcp_servers]]` and `[access]`), and report a
//! problem with the file's line, column and a caret; it is a usage error
//! (exit 2, docs/cli.md).

use super::output::Output;
use ais_ir::{Diagnostic, Span};
use ais_vm::aam::config::{AamConfig, AamConfigError};
use ais_vm::config::ConfigError;
use std::path::Path;

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigProblem {
    /// The backend part (`llm_backends`, budgets, instructions, ...).
    #[error("{0}")]
    Backend(ConfigError),
    /// The AAM sections.
    #[error("{0}")]
    Aam(AamConfigError),
}

/// The code of every configuration diagnostic (see `aisc explain K0001`).
const CODE: &str = "K0001";

/// Loads the backend settings and checks the AAM sections of the same file.
pub fn load_all(
    backend: &super::BackendArgs,
) -> Result<(ais_vm::config::Settings, AamConfig), ConfigProblem> {
    let settings = backend.settings().map_err(ConfigProblem::Backend)?;
    let aam = AamConfig::find(backend.config.as_deref()).map_err(ConfigProblem::Aam)?;
    Ok((settings, aam))
}

/// Renders a configuration problem; returns the exit code (2).
pub fn report(out: &mut Output, problem: &ConfigProblem) -> i32 {
    let (path, at, message, hint) = match problem {
        ConfigProblem::Backend(e) => {
            let loc = e.location.as_deref();
            (
                loc.map(|l| l.path.clone()),
                loc.and_then(|l| Some(At::LineCol(l.line?, l.column?))),
                e.message.clone(),
                e.hint.clone(),
            )
        }
        ConfigProblem::Aam(e) => (
            Some(e.path.clone().into()),
            e.span.clone().map(At::Bytes),
            // The position is shown by the caret; drop the " (line N)" suffix.
            e.message
                .rsplit_once(" (line ")
                .map_or(e.message.as_str(), |(m, _)| m)
                .to_string(),
            None,
        ),
    };
    let text = path
        .as_deref()
        .and_then(|p| std::fs::read_to_string(p).ok());
    let mut d = Diagnostic::error(
        CODE,
        format!("invalid configuration: {message}"),
        Span::DUMMY,
    );
    if let Some(h) = hint {
        d = d.with_help(h);
    }
    match (path, text, at) {
        (Some(path), Some(text), Some(at)) => {
            let text = mask_secrets(&text);
            let range = at.range(&text);
            d.primary.span = Span::new(range.start, range.end);
            let d = d.with_label(label_for(&message));
            out.diagnostics(&path.display().to_string(), &text, &[d]);
        }
        (path, _, _) => {
            let name = path.as_deref().map(|p: &Path| p.display().to_string());
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

/// A position in the config file, as the two parsers report it.
enum At {
    Bytes(std::ops::Range<usize>),
    /// 1-based line and column (characters).
    LineCol(usize, usize),
}

impl At {
    /// A byte range in `text`: the given span, or the word at line:column.
    fn range(&self, text: &str) -> std::ops::Range<usize> {
        match self {
            At::Bytes(r) => r.start.min(text.len())..r.end.min(text.len()),
            At::LineCol(line, col) => {
                let start_of_line: usize = text
                    .split_inclusive('\n')
                    .take(line.saturating_sub(1))
                    .map(str::len)
                    .sum();
                let rest = text.get(start_of_line..).unwrap_or("");
                let start = start_of_line
                    + rest
                        .char_indices()
                        .nth(col.saturating_sub(1))
                        .map_or(rest.len(), |(i, _)| i);
                let word = text.get(start..).unwrap_or("");
                let len = word
                    .char_indices()
                    .find(|(_, c)| !(c.is_alphanumeric() || "_-.".contains(*c)))
                    .map_or(word.len(), |(i, _)| i)
                    .max(word.chars().next().map_or(0, char::len_utf8));
                start..start + len
            }
        }
    }
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
    fn line_and_column_become_the_word_there() {
        let text = "a = 1\n[tools]\nworkspcae = \".\"\n";
        let r = At::LineCol(3, 1).range(text);
        assert_eq!(&text[r], "workspcae");
    }
}
