//! The golden corpora's one dialect and one bless switch.
//!
//! Every corpus file (`tests/ui/`, `tests/type-verification/`,
//! `tests/verifier/`, `tests/passes/`, `tests/differential/`, ...) writes
//! its expectations in comments of one shape:
//! - diagnostics inline, on the line they are reported at:
//!   `//~ ERROR CODE text` (`//~^ ...`: one line up per caret; severities
//!   `ERROR`, `WARNING`, `NOTE`; `text` is a substring of the message and
//!   may be empty);
//! - everything else as a header directive `// KEY: value` (or a bare
//!   `// KEY`): `// RUN: ais-opt FLAGS`, `// EXPECT-LLM-CALLS: N`,
//!   `// EXPECT-UNCHANGED`, `// ARGS: {...}`, `// EXPECT: json`,
//!   `// PRINTS: a | b`.
//!
//! Outputs compared whole are insta snapshots under `snapshots/<suite>/`
//! ([`snapshot_settings`]) or, for files that are their own expected output
//! (canonical IR text), the file itself ([`check_file`]). `AIS_BLESS=1`
//! ([`blessing`]) rewrites all of them, and `docs/diagnostics.md`; review the
//! diff before committing it.

use ais_ir::diag::line_col;
use ais_ir::{Diagnostic, Severity};
use std::path::{Path, PathBuf};

/// The bless switch of every golden corpus.
pub const BLESS_ENV: &str = "AIS_BLESS";

/// Whether expected outputs are being rewritten (`AIS_BLESS` set, not `0`).
pub fn blessing() -> bool {
    std::env::var_os(BLESS_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Call first in a harness's `main` (before any test thread starts): while
/// [`blessing`], insta rewrites snapshots in place instead of failing.
pub fn init() {
    if blessing() {
        std::env::set_var("INSTA_UPDATE", "always");
    }
}

/// insta settings for the snapshots of `suite` (`snapshots/<suite>/`, named
/// by the caller, no expression or module prefix in the file). Use as
/// `snapshot_settings(suite).bind(|| insta::assert_snapshot!(name, text))`:
/// the assertion stays in the harness so the file's `source:` names it.
pub fn snapshot_settings(suite: &str) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(snapshot_dir(suite));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings
}

/// Compares `path`'s contents with `want` (a file that is its own expected
/// output); while [`blessing`], writes `want` to it first.
pub fn check_file(path: &Path, want: &str) -> Result<(), String> {
    if blessing() {
        std::fs::write(path, want).map_err(|e| format!("{}: {e}", rel(path)))?;
    }
    let have = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", rel(path)))?;
    if have == want {
        Ok(())
    } else {
        Err(format!(
            "{} is stale: run with {BLESS_ENV}=1 and review the diff",
            rel(path)
        ))
    }
}

/// The value of header directive `// KEY: value` (trimmed; empty for a bare
/// `// KEY`), from the first line that has it.
pub fn directive<'s>(source: &'s str, key: &str) -> Option<&'s str> {
    source.lines().find_map(|l| {
        let rest = l
            .trim()
            .strip_prefix("//")?
            .trim_start()
            .strip_prefix(key)?;
        match rest.strip_prefix(':') {
            Some(v) => Some(v.trim()),
            None if rest.trim().is_empty() => Some(""),
            None => None,
        }
    })
}

/// The workspace root (the folder holding `tests/`).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// Every file with extension `ext` under `dir` (relative to the root), sorted.
pub fn corpus(dir: &str, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root().join(dir)];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A path relative to the root, with `/` separators, for test names and messages.
pub fn rel(p: &Path) -> String {
    p.strip_prefix(root())
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

/// One inline expectation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    pub line: usize,
    pub severity: Severity,
    pub code: String,
    pub text: String,
}

/// Reads `//~ ERROR CODE text` (same line), `//~^ ...` (one line up, one
/// caret per line) annotations.
pub fn expectations(source: &str) -> Result<Vec<Expected>, String> {
    let mut out = Vec::new();
    for (i, line) in source.lines().enumerate() {
        let Some(at) = line.find("//~") else {
            continue;
        };
        let rest = &line[at + 3..];
        let carets = rest.chars().take_while(|c| *c == '^').count();
        let rest = rest[carets..].trim();
        let (sev, rest) = rest
            .split_once(' ')
            .ok_or_else(|| format!("line {}: malformed annotation", i + 1))?;
        let severity = match sev {
            "ERROR" => Severity::Error,
            "WARNING" | "WARN" => Severity::Warning,
            "NOTE" => Severity::Note,
            other => return Err(format!("line {}: unknown severity `{other}`", i + 1)),
        };
        let (code, text) = rest.split_once(' ').unwrap_or((rest, ""));
        let line_no = (i + 1)
            .checked_sub(carets)
            .filter(|l| *l >= 1)
            .ok_or_else(|| format!("line {}: `^` points above the file", i + 1))?;
        out.push(Expected {
            line: line_no,
            severity,
            code: code.to_string(),
            text: text.trim().to_string(),
        });
    }
    Ok(out)
}

/// Compares reported diagnostics with the expectations. Every expectation must
/// be met by a diagnostic on that line with that severity and code whose
/// message contains the text; every diagnostic must be expected.
pub fn compare(source: &str, diags: &[Diagnostic], expected: &[Expected]) -> Result<(), String> {
    let mut unmatched: Vec<&Diagnostic> = diags.iter().collect();
    let mut problems = Vec::new();
    for exp in expected {
        let pos = unmatched.iter().position(|d| {
            let (line, _) = line_col(source, d.primary.span.start as usize);
            line == exp.line
                && d.severity == exp.severity
                && d.code == exp.code
                && d.message.contains(&exp.text)
        });
        match pos {
            Some(i) => {
                unmatched.remove(i);
            }
            None => problems.push(format!(
                "expected on line {}: {:?} {} `{}` — not reported",
                exp.line, exp.severity, exp.code, exp.text
            )),
        }
    }
    for d in unmatched {
        let (line, col) = line_col(source, d.primary.span.start as usize);
        problems.push(format!(
            "unexpected on line {line}:{col}: {:?} {} `{}`",
            d.severity, d.code, d.message
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// Snapshot folder for a suite: `snapshots/<suite>`.
pub fn snapshot_dir(suite: &str) -> PathBuf {
    root().join("snapshots").join(suite)
}

/// Snapshot name for a corpus file: its path under the corpus with `/` → `__`.
pub fn snapshot_name(path: &Path, corpus_dir: &str) -> String {
    let base = root().join(corpus_dir);
    let r = path.strip_prefix(&base).unwrap_or(path);
    r.with_extension("")
        .to_string_lossy()
        .replace(['/', '\\'], "__")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_with_carets() {
        let src = "a\nb //~ ERROR E0100 undefined\nc\n//~^^ WARNING W0001 unused\n";
        let e = expectations(src).expect("valid annotations");
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].line, 2);
        assert_eq!(e[0].code, "E0100");
        assert_eq!(e[1].line, 2);
        assert_eq!(e[1].severity, Severity::Warning);
    }

    #[test]
    fn directives_with_and_without_values() {
        let src = "// RUN: ais-opt -O1\n// EXPECT-UNCHANGED\n// EXPECT-LLM-CALLS: 2\n";
        assert_eq!(directive(src, "RUN"), Some("ais-opt -O1"));
        assert_eq!(directive(src, "EXPECT-UNCHANGED"), Some(""));
        assert_eq!(directive(src, "EXPECT-LLM-CALLS"), Some("2"));
        // A key is not a prefix match of a longer key.
        assert_eq!(directive(src, "EXPECT"), None);
        assert_eq!(directive(src, "ARGS"), None);
    }

    #[test]
    fn malformed_annotation_is_an_error() {
        assert!(expectations("x //~ OOPS E1 t").is_err());
        assert!(expectations("//~^ ERROR E1 t").is_err());
    }
}
