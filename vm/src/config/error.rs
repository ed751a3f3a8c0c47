//! The one configuration error. Every problem with `.apxm/config.toml`, the
//! flags or the environment is a [`ConfigError`]; a problem in the file
//! carries its path and the byte span of the offending key or value, which
//! the command-line edge turns into diagnostic `K0001` with a caret
//! (`compiler/src/cli/config.rs`). `Display` is the plain-text form.

use std::ops::Range;
use std::path::{Path, PathBuf};

/// A configuration problem.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// At a place in the config file (boxed: it is the largest).
    #[error("{0}")]
    At(Box<InFile>),
    /// About the file as a whole: unreadable, or a check with no position.
    #[error("{}: {message}{}", .path.display(), hint_text(.hint.as_deref()))]
    File {
        path: PathBuf,
        message: String,
        hint: Option<String>,
    },
    /// From the flags or the environment, or with no file at all.
    #[error("{message}{}", hint_text(.hint.as_deref()))]
    Settings {
        message: String,
        hint: Option<String>,
    },
}

/// A problem at a place in the config file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", at_text(.path, *.line, *.column, .snippet.as_deref(), .message, .hint.as_deref()))]
pub struct InFile {
    pub path: PathBuf,
    /// Bytes of the offending key or value.
    pub span: Range<usize>,
    /// 1-based line and column (characters) of `span.start`.
    pub line: usize,
    pub column: usize,
    /// The offending source line (values of secret-looking keys masked).
    pub snippet: Option<String>,
    pub message: String,
    pub hint: Option<String>,
}

fn hint_text(hint: Option<&str>) -> String {
    hint.map(|h| format!("\n  = hint: {h}")).unwrap_or_default()
}

/// `path:line:col: message`, the source line with a caret, the hint.
fn at_text(
    path: &Path,
    line: usize,
    column: usize,
    snippet: Option<&str>,
    message: &str,
    hint: Option<&str>,
) -> String {
    let mut o = format!("{}:{line}:{column}: {message}", path.display());
    if let Some(s) = snippet {
        let gutter = line.to_string().len();
        o.push_str(&format!(
            "\n{:gutter$} |\n{line} | {s}\n{:gutter$} | {:>column$}",
            "", "", "^"
        ));
    }
    o + &hint_text(hint)
}

/// A config file's path and text, for errors that point into it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Source {
    pub(crate) path: PathBuf,
    pub(crate) text: String,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl ConfigError {
    pub(crate) fn plain(message: impl Into<String>, hint: Option<String>) -> ConfigError {
        ConfigError::Settings {
            message: message.into(),
            hint,
        }
    }

    pub(crate) fn in_file(
        path: &Path,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> ConfigError {
        ConfigError::File {
            path: path.to_path_buf(),
            message: message.into(),
            hint,
        }
    }

    pub(crate) fn at(
        src: &Source,
        span: Range<usize>,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> ConfigError {
        let (line, column) = line_col(&src.text, span.start);
        let snippet = src.text.lines().nth(line - 1).map(mask_line);
        ConfigError::At(Box::new(InFile {
            path: src.path.clone(),
            span,
            line,
            column,
            snippet,
            message: message.into(),
            hint,
        }))
    }

    /// A TOML syntax or schema error (unknown key, wrong type, missing key).
    pub(crate) fn from_toml(src: &Source, e: &toml::de::Error) -> ConfigError {
        let message = e.message().trim().to_string();
        match e.span() {
            Some(span) => {
                let hint = hint_for(&message, section_at(&src.text, span.start));
                ConfigError::at(src, span, message, hint)
            }
            None => ConfigError::in_file(&src.path, message.clone(), hint_for(&message, "")),
        }
    }

    pub fn message(&self) -> &str {
        match self {
            ConfigError::At(e) => &e.message,
            ConfigError::File { message, .. } | ConfigError::Settings { message, .. } => message,
        }
    }

    pub fn hint(&self) -> Option<&str> {
        match self {
            ConfigError::At(e) => e.hint.as_deref(),
            ConfigError::File { hint, .. } | ConfigError::Settings { hint, .. } => hint.as_deref(),
        }
    }

    /// The config file the problem is in, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            ConfigError::At(e) => Some(&e.path),
            ConfigError::File { path, .. } => Some(path),
            ConfigError::Settings { .. } => None,
        }
    }

    /// Bytes of the offending key or value in the file, when known.
    pub fn span(&self) -> Option<Range<usize>> {
        match self {
            ConfigError::At(e) => Some(e.span.clone()),
            _ => None,
        }
    }

    /// 1-based line and column in the config file, when known.
    pub fn position(&self) -> Option<(usize, usize)> {
        match self {
            ConfigError::At(e) => Some((e.line, e.column)),
            _ => None,
        }
    }
}

/// The `[section]` or `[[section]]` header above byte `offset` ("" at the
/// top level).
fn section_at(text: &str, offset: usize) -> &str {
    text.get(..offset)
        .unwrap_or(text)
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map_or("", |l| l.trim_matches(|c| c == '[' || c == ']').trim())
}

fn hint_for(message: &str, section: &str) -> Option<String> {
    if message.contains("unknown field `api_key`") {
        return Some(
            "keys never live in the config file: set `api_key_env = \"VAR\"` and export VAR in the environment".into(),
        );
    }
    if message.contains("unknown variant") && message.contains("openai") {
        return Some(format!(
            "protocol is one of {}",
            super::schema::BackendKind::names().join(", ")
        ));
    }
    if message.contains("unknown field") {
        // The AAM's sections are documented with the runtime.
        let aam = ["memory", "tools", "mcp_servers", "access"]
            .iter()
            .any(|s| section == *s || section.starts_with(&format!("{s}.")));
        let doc = if aam {
            "docs/runtime.md"
        } else {
            "docs/backends.md"
        };
        return Some(format!("see {doc} for the accepted keys"));
    }
    if message.contains("missing field `name`") || message.contains("missing field `protocol`") {
        return Some("every [[llm_backends]] entry needs `name` and `protocol`".into());
    }
    None
}

/// 1-based line and column (in characters) of byte `offset`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = (0..=offset.min(text.len()))
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    (line, text[start..offset].chars().count() + 1)
}

/// Hides the value on lines whose key looks secret (`api_key = "sk-..."`),
/// and on `*_env` lines whose value is not a variable name (a pasted key).
fn mask_line(line: &str) -> String {
    let Some((key, value)) = line.split_once('=') else {
        return line.to_string();
    };
    let k = key.trim().to_ascii_lowercase();
    let secretish = ["key", "token", "secret", "password"]
        .iter()
        .any(|w| k.contains(w));
    let v = value.trim().trim_matches(|c| c == '"' || c == '\'');
    let harmless = k.ends_with("_env") && super::env::is_env_name(v);
    if secretish && !harmless {
        format!("{key}= \"****\"")
    } else {
        line.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_chars() {
        assert_eq!(line_col("a\nbé c", 5), (2, 3));
        assert_eq!(line_col("", 0), (1, 1));
    }

    #[test]
    fn masks_secret_lines() {
        assert_eq!(mask_line("api_key = \"sk-123\""), "api_key = \"****\"");
        assert_eq!(mask_line("api_key_env = \"X\""), "api_key_env = \"X\"");
    }

    #[test]
    fn unknown_keys_point_to_the_page_of_their_section() {
        let text = "[tools]\nworkspace = \".\"\n[[tools.subprocess]]\nnme = 1\n";
        assert_eq!(section_at(text, text.len()), "tools.subprocess");
        let hint = hint_for("unknown field `nme`", "tools.subprocess");
        assert_eq!(
            hint.as_deref(),
            Some("see docs/runtime.md for the accepted keys")
        );
        let hint = hint_for("unknown field `x`", "llm_backends");
        assert_eq!(
            hint.as_deref(),
            Some("see docs/backends.md for the accepted keys")
        );
    }
}
